#!/usr/bin/env bash
# GPU check of the executed technique requirements (CUPTI's SASS metrics), for an H100/H200,
# from the repository root, with a prebuilt runner (it builds nothing):
#
#   R=path/to/runner OUT=folder gpu/grade-executed.sh [probe] [selftest]     (default: both)
#
# Run the two stages as two calls where one command may take at most 10 minutes.
#
# probe (a few minutes, at most 9 and a half):
#   1. the machine: GPU and driver, and every CUPTI library it has (toolkit, python wheels);
#   2. `runner grade --selftest --keep-scratch` limited (WORKBOOK_GRADE_SELFTEST_ONLY) to the
#      technique groups: step 3's and step 5's twins under their own rubrics (no speed test),
#      and the four cheats on their techniques. Prints each measuring child's
#      measure-debug.txt (the CUPTI library, chip, metric ids, CRCs, CUPTI's first raw records,
#      counts by opcode, every executed instruction with warp / thread / predicated-on counts and
#      the executions they prove) and every technique row.
#   Expected: step3-hopper-own-rubric and step5-hopper-own-rubric full marks (tma-multicast:
#   64 UTMALDG.MULTICAST per build at 512x512x512, 8 CTAs x 8 k-blocks; tma-store: 64 UTMASTG,
#   one per 64 x 64 box of C; wgmma-fp32 at least 64); cheat-multicast-dead-code,
#   cheat-multicast-k-block-0 (8 of 64) and cheat-stock-only-when-traced flagged
#   technique-not-executed with every test passed; cheat-forged-store-warp: every test passed,
#   store-warp worth 0 points.
#   3. if the stock step-3 twin's measurement failed, the same grading once with each other
#      CUPTI library found (WORKBOOK_CUPTI), to tell a library mismatch from a layout mistake.
# selftest (at most 9 and a half minutes): the whole `runner grade --selftest`; success: every
# case "yes".
#
# Writes under $OUT/gexec: summary.txt (everything printed), debug.tar.gz (the measuring
# children's folders: measure.json, measure-debug.txt), selftest.md and selftest.json of each
# selftest run. The last line says "GEXEC PASS" when every selftest case came out as expected.
set -u
RUNNER=${R:-${RUNNER:-target/release/runner}}
OUT=${OUT:-/tmp/wb-gexec}
DIR="$OUT/gexec"
mkdir -p "$DIR"
STAGES=${*:-probe selftest}
T=$(mktemp -d)
export TMPDIR="$T/tmp"
mkdir -p "$TMPDIR"
export WORKBOOK_CUDA=${WORKBOOK_CUDA:-/usr/local/cuda}
LOG="$DIR/summary.txt"
: >"$LOG"
note() { echo "$*" | tee -a "$LOG"; }
ok=1

cupti_candidates() {
  ls -1 /usr/local/cuda*/extras/CUPTI/lib64/libcupti.so* /usr/local/cuda*/lib64/libcupti.so* 2>/dev/null
  python3 - <<'PY' 2>/dev/null
import glob, os
try:
    import nvidia
    for d in nvidia.__path__:
        for p in sorted(glob.glob(os.path.join(d, "*", "lib", "libcupti.so*"))):
            print(p)
except Exception:
    pass
PY
}

if [[ " $STAGES " == *" probe "* ]]; then
  note "== machine"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG"
  note "runner: $("$RUNNER" --version 2>&1 | head -1)"
  note "CUPTI libraries here:"
  cupti_candidates | while read -r f; do
    note "  $f ($(readlink -f "$f"), $(stat -c %s "$(readlink -f "$f")" 2>/dev/null) bytes)"
  done

  note "== technique groups of the selftest (scratch kept)"
  S1="$T/selftest-technique"
  WORKBOOK_GRADE_SELFTEST_ONLY=step3-hopper-rubric,step5-hopper-rubric \
    timeout 560 "$RUNNER" grade --selftest --out "$S1" --keep-scratch >"$T/st1.out" 2>"$T/st1.err"
  note "selftest (technique groups) rc=$?"
  tail -5 "$T/st1.err" | tee -a "$LOG"
  cat "$T/st1.out" | tee -a "$LOG"
  cp "$S1/selftest.md" "$DIR/selftest-technique.md" 2>/dev/null
  cp "$S1/selftest.json" "$DIR/selftest-technique.json" 2>/dev/null
  python3 - "$S1" <<'PY' 2>&1 | tee -a "$LOG"
import json, glob, os, sys
for f in sorted(glob.glob(os.path.join(sys.argv[1], "stock-grades", "*", "*", "grade.json"))):
    r = json.load(open(f))
    print(f"{r['student']}: {r['score']}/{r['max_score']} flags={r['flags']}")
    for t in r["tests"]:
        if t["kind"] == "technique" or t["status"] != "passed":
            print(f"  {t['name']:<22} {t['kind']:<11} {t['status']:<8} {t['score']}/{t['max_score']} {t['detail'][:600]}")
PY
  note "== measuring children (measure-debug.txt), by submission"
  find "$TMPDIR" -name measure-debug.txt | sort | while read -r f; do
    note "---- $f"
    head -c 60000 "$f" | tee -a "$LOG" >/dev/null
    grep -E "^(GPU|CUPTI|launch|cubin|chip|verdict|  UTMA|  HGMMA|  UTMASTG|[0-9]+ record)" "$f" | head -40
  done
  (cd "$TMPDIR" && find . -path '*measure-*' \( -name 'measure.json' -o -name 'measure-debug.txt' \) -print0 |
    tar --null -czf "$DIR/debug.tar.gz" -T -) 2>/dev/null
  note "debug folders: $(find "$TMPDIR" -type d -name 'measure-*' | wc -l)"

  # 3. Another CUPTI library, where the stock twin's measurement did not run.
  if ! grep -q "^verdict: ran" $(find "$TMPDIR" -path '*step3-hopper-own-rubric*' -name measure-debug.txt | head -1) 2>/dev/null; then
    note "== the stock step-3 twin was not measured: trying each CUPTI library"
    python3 - rubrics/step3-hopper.toml "$T/step3-nospeed.toml" <<'PY'
import sys
text = open(sys.argv[1]).read()
blocks = text.split("\n[[")
open(sys.argv[2], "w").write("\n[[".join(b for b in blocks if 'kind = "performance"' not in b))
PY
    cp steps/step3_collective_mma/src/kernel_sm90.cu "$T/step3-stock.cu"
    cupti_candidates | while read -r lib; do
      export TMPDIR="$T/tmp-$(echo "$lib" | tr '/.' '__')"
      mkdir -p "$TMPDIR"
      WORKBOOK_CUPTI="$lib" timeout 120 "$RUNNER" grade "$T/step3-stock.cu" --rubric "$T/step3-nospeed.toml" \
        --public-only --keep-scratch --json >"$T/one.json" 2>"$T/one.err"
      note "-- WORKBOOK_CUPTI=$lib rc=$?"
      python3 -c "
import json,sys
r=json.load(open('$T/one.json'))
for t in r['tests']:
    if t['kind']=='technique': print('  ',t['name'],t['status'],t['detail'][:400])
" 2>&1 | tee -a "$LOG"
      f=$(find "$TMPDIR" -name measure-debug.txt | head -1)
      [ -n "$f" ] && head -60 "$f" | tee -a "$LOG" >/dev/null
      [ -n "$f" ] && grep -E "^(CUPTI|chip|verdict)" "$f"
    done
    # And unconfined (as on a kernel without Landlock), to tell the confinement's part apart.
    export TMPDIR="$T/tmp-unconfined"
    mkdir -p "$TMPDIR"
    WORKBOOK_GRADE_SIMULATE_NO_LANDLOCK=1 timeout 120 "$RUNNER" grade "$T/step3-stock.cu" \
      --rubric "$T/step3-nospeed.toml" --public-only --allow-unconfined --keep-scratch --json \
      >"$T/unconfined.json" 2>"$T/unconfined.err"
    note "-- unconfined rc=$?"
    f=$(find "$TMPDIR" -name measure-debug.txt | head -1)
    [ -n "$f" ] && head -60 "$f" | tee -a "$LOG"
  fi
  python3 -c "
import json,sys
j=json.load(open('$DIR/selftest-technique.json'))
print('technique groups:', j['passed'], 'of', j['total'])
sys.exit(0 if j['passed']==j['total'] and j['total']>0 else 1)
" 2>&1 | tee -a "$LOG"
  [ "${PIPESTATUS[0]}" = 0 ] || ok=0
fi

if [[ " $STAGES " == *" selftest "* ]]; then
  note "== the whole selftest"
  S2="$T/selftest-all"
  export TMPDIR="$T/tmp-all"
  mkdir -p "$TMPDIR"
  timeout 580 "$RUNNER" grade --selftest --out "$S2" >"$T/st2.out" 2>"$T/st2.err"
  rc=$?
  note "selftest rc=$rc"
  tail -3 "$T/st2.err" | tee -a "$LOG"
  cat "$T/st2.out" | tee -a "$LOG"
  cp "$S2/selftest.md" "$DIR/selftest.md" 2>/dev/null
  cp "$S2/selftest.json" "$DIR/selftest.json" 2>/dev/null
  [ "$rc" = 0 ] || ok=0
fi

if [ "$ok" = 1 ]; then note "GEXEC PASS"; else note "GEXEC FAIL"; fi
