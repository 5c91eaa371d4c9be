#!/usr/bin/env bash
# Why do CUPTI's SASS metrics record nothing for the grader's measured launch? Steps 0 (no
# cluster, no setmaxnreg), 1 (setmaxnreg) and 3 (2-CTA cluster), confined and unconfined.
set -u
R=${R:-target/release/runner}
export WORKBOOK_CUDA=${WORKBOOK_CUDA:-/usr/local/cuda}
T=$(mktemp -d)
for s in 0 1 3; do
  d=$(ls -d steps/step${s}_*)
  for mode in confined unconfined; do
    export TMPDIR=$T/$s-$mode; mkdir -p $TMPDIR
    extra=""; [ $mode = unconfined ] && extra="--allow-unconfined" && export WORKBOOK_GRADE_SIMULATE_NO_LANDLOCK=1
    timeout 120 $R grade $d/src/kernel_sm90.cu --rubric gpu/cupti-probe/step$s.toml --public-only --keep-scratch --json >$T/$s-$mode.json 2>$T/$s-$mode.err
    echo "== step $s $mode rc=$?"
    unset WORKBOOK_GRADE_SIMULATE_NO_LANDLOCK
    python3 -c "
import json
r=json.load(open('$T/$s-$mode.json'))
for t in r['tests']:
    print('  ',t['name'],t['status'],t['detail'][:300])
" 2>&1 | head -5
    f=$(find $TMPDIR -name measure-debug.txt | head -1)
    [ -n "$f" ] && grep -E "^(chip|0 record|[0-9]+ record|verdict)" "$f" | head -4
    tail -2 $T/$s-$mode.err
  done
done
