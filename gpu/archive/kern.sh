#!/usr/bin/env bash
# GPU check of the kern branch (issue 19, items 4-7: launch geometry as defines with static_asserts,
# the sw128_chunk helper, the contenders as edits, kernels 4-6 re-indented). On an H100/H200:
#   - every step's Hopper twin natively, at its default shape and at an odd shape
#     (768x1280x192: M and N odd multiples of the cluster tile, K = 3 k-blocks; the persistent
#     twins 4-6 with --clusters 2, so each cluster loops over several tiles);
#   - every step's Blackwell kernel under the tcgen05 emulation, at its default shape and at
#     256x768x320 (persistent steps with --clusters 1: one cluster walks all 3 tiles);
#   - the three contenders, now edits of a stock twin (exercises/hopper/*.toml), natively;
# each in f16 and bf16, verify only (--iters 0). Run from the repository root with $R the runner
# and WORKBOOK_CUDA set; writes $OUT/kern/kern.tar.gz (cases.tsv: name, rc, seconds; log.txt).
# Success: the last line says "kern: 62/62 verified" and the script exits 0.
set -u
R=${R:-target/release/runner}
DEST="$OUT/kern"
WORK=$(mktemp -d)
mkdir -p "$DEST"
JOBS=${JOBS:-8}

one() { # name, then the runner's arguments
  local name=$1; shift
  local t0=$(date +%s.%N)
  timeout 150 "$R" "$@" --iters 0 --timeout 60 >"$WORK/$name.out" 2>&1
  local rc=$?
  local t1=$(date +%s.%N)
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')" >>"$WORK/cases.tsv"
}
export -f one
export R WORK

{
  for dtype in f16 bf16; do
    for step in 0 1 2 3 4 5 6; do
      clusters_h=""; clusters_b=""
      if [ "$step" -ge 4 ]; then clusters_h="--clusters 2"; clusters_b="--clusters 1"; fi
      echo "twin$step-default-$dtype step $step --arch sm_90a --dtype $dtype"
      echo "twin$step-odd-$dtype step $step --arch sm_90a --dtype $dtype --m 768 --n 1280 --k 192${clusters_h:+ $clusters_h}"
      echo "emu$step-default-$dtype step $step --arch sm_100a --emulate --dtype $dtype"
      echo "emu$step-odd-$dtype step $step --arch sm_100a --emulate --dtype $dtype --m 256 --n 768 --k 320${clusters_b:+ $clusters_b}"
    done
    echo "4-snake-$dtype step 4 --arch sm_90a --dtype $dtype --kernel exercises/hopper/step4_snake_sm90.toml"
    echo "5-pingpong-$dtype step 5 --arch sm_90a --dtype $dtype --kernel exercises/hopper/step5_pingpong_sm90.toml --param tile_m=64"
    echo "6-l2hints-$dtype step 6 --arch sm_90a --dtype $dtype --kernel exercises/hopper/step6_l2hints_sm90.toml"
  done
} >"$WORK/cases.txt"

: >"$WORK/cases.tsv"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$WORK/log.txt" 2>&1
# Every line ends without a blank: xargs -L joins a line that ends in one with the next.
timeout 175 xargs -P "$JOBS" -L 1 bash -c 'one "$@"' _ <"$WORK/cases.txt"
for f in "$WORK"/*.out; do
  echo "=== $(basename "$f" .out)" >>"$WORK/log.txt"
  tail -n 25 "$f" >>"$WORK/log.txt"
done
tar czf "$DEST/kern.tar.gz" -C "$WORK" cases.tsv cases.txt log.txt
total=$(wc -l <"$WORK/cases.txt")
ok=$(awk -F'\t' '$2 == 0' "$WORK/cases.tsv" | wc -l)
awk -F'\t' '$2 != 0 {print "FAILED " $1 " rc=" $2}' "$WORK/cases.tsv"
echo "kern: $ok/$total verified"
[ "$ok" -eq "$total" ]
