#!/usr/bin/env bash
# The stock twins under the stress mode and its twin check at an odd shape and in bf16 (the stress
# pass of gpu/house3.sh uses the default shapes in f16): every twin 0-6 at 2304x2816x704, input
# seed 7, under the stress seeds 3, 6 and 11 (the persistent twins 4-6 on 3 clusters, so each
# cluster runs several tiles), 6 runs at a time. On an H100/H200, from the repository root:
#
#   R=path/to/runner WORKBOOK_CUDA=/usr/local/cuda OUT=folder gpu/archive/stress_odd.sh
#
# Writes $OUT/stress-odd/summary.tsv (twin, stress seed, exit code, seconds, the verify line) and
# the logs; the last line "ODD-SHAPE STRESS: N of 21 verified". Exit 0 when all 21 verify.
set -u
: "${R:?set R to the runner binary}"
: "${OUT:?set OUT to the output folder}"
D="$OUT/stress-odd"
mkdir -p "$D"
: >"$D/summary.tsv"
one() { # twin, stress seed
  local n=$1 s=$2 c="" t0=$SECONDS
  if [ "$n" -ge 4 ]; then c="--clusters 3"; fi
  timeout 100 "$R" step "$n" --arch sm_90a --dtype bf16 --m 2304 --n 2816 --k 704 --seed 7 \
    --stress "$s" --iters 0 --timeout 60 $c >"$D/t$n-s$s.log" 2>&1
  local rc=$?
  printf 't%s\t%s\t%s\t%s\t%s\n' "$n" "$s" "$rc" "$((SECONDS - t0))" \
    "$(grep -E '^(verify|error)' "$D/t$n-s$s.log" | head -n 1)" >>"$D/summary.tsv"
}
for n in 0 1 2 3 4 5 6; do
  for s in 3 6 11; do one "$n" "$s" & done
  [ $((n % 2)) -eq 1 ] && wait
done
wait
sort "$D/summary.tsv"
ok=$(awk -F'\t' '$3 == 0 && $5 ~ /PASS/' "$D/summary.tsv" | wc -l)
echo "ODD-SHAPE STRESS: $ok of 21 verified"
[ "$ok" -eq 21 ]
