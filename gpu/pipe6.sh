#!/usr/bin/env bash
# GPU check of the ring primitive (wb::Ring, steps/include/pipeline.cuh), which replaced every
# kernel's slot and parity formulas. On an H100/H200, from the repository root:
#
#   R=path/to/runner WORKBOOK_CUDA=/usr/local/cuda OUT=folder gpu/pipe6.sh
#
# 1. Verify only (--iters 0), f16 and bf16: every twin natively at its default shape and at
#    768x1280x192 (K = 3 k-blocks, so the ring wraps mid-tile; the persistent twins 4-6 with
#    --clusters 2, so each cluster's rings run on across several tiles); every Blackwell kernel
#    under the tcgen05 emulation at its default shape and at 256x768x320 (steps 4-6 with
#    --clusters 1: one cluster walks all 3 tiles, 5 k-blocks each); every Hopper contender that
#    edits a twin's ring code (exercises/hopper/*.toml) and the stream-K contender.
# 2. `runner check twins --stress`: every stock twin and every twin mutation under the stress
#    seeds. The rewritten twin mutation is twin-release-before-wgmma-wait (twins 4-6); the
#    others' anchors did not change but their kernels did.
# Writes $OUT/pipe6/pipe6.tar.gz (cases.tsv: name, rc, seconds; log.txt) and $OUT/pipe6/stress/.
# About 8 minutes. Success: "pipe6: N/N verified" with N = 76, then the stress pass's
# "ALL STRESS CHECKS MET"; exit 0.
set -u
R=${R:-target/release/runner}
DEST="$OUT/pipe6"
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
    echo "5-pingpong-odd-$dtype step 5 --arch sm_90a --dtype $dtype --kernel exercises/hopper/step5_pingpong_sm90.toml --param tile_m=64 --m 768 --n 1280 --k 192 --clusters 2"
    echo "6-wait2-$dtype step 6 --arch sm_90a --dtype $dtype --kernel exercises/hopper/step6_wait2_sm90.toml"
    echo "6-wait2-odd-$dtype step 6 --arch sm_90a --dtype $dtype --kernel exercises/hopper/step6_wait2_sm90.toml --m 768 --n 1280 --k 192 --clusters 2"
    echo "6-waves-$dtype step 6 --arch sm_90a --dtype $dtype --kernel exercises/hopper/step6_waves_sm90.toml"
    echo "6-l2hints-$dtype step 6 --arch sm_90a --dtype $dtype --kernel exercises/hopper/step6_l2hints_sm90.toml"
    echo "6-hilbert-$dtype step 6 --arch sm_90a --dtype $dtype --kernel exercises/hopper/step6_hilbert_sm90.toml"
    echo "6-workspace-$dtype step 6 --arch sm_90a --dtype $dtype --kernel exercises/hopper/step6_workspace_sm90.toml"
    echo "6-streamk-$dtype step 6 --arch sm_90a --dtype $dtype --kernel steps/step7_last_wave/src/kernel_sm90.cu"
  done
} >"$WORK/cases.txt"

: >"$WORK/cases.tsv"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >"$WORK/log.txt" 2>&1
git rev-parse --short HEAD >>"$WORK/log.txt" 2>&1
# Every line ends without a blank: xargs -L joins a line that ends in one with the next.
timeout 200 xargs -P "$JOBS" -L 1 bash -c 'one "$@"' _ <"$WORK/cases.txt"
for f in "$WORK"/*.out; do
  echo "=== $(basename "$f" .out)" >>"$WORK/log.txt"
  tail -n 25 "$f" >>"$WORK/log.txt"
done
tar czf "$DEST/pipe6.tar.gz" -C "$WORK" cases.tsv cases.txt log.txt
total=$(wc -l <"$WORK/cases.txt")
ok=$(awk -F'\t' '$2 == 0' "$WORK/cases.tsv" | wc -l)
awk -F'\t' '$2 != 0 {print "FAILED " $1 " rc=" $2}' "$WORK/cases.tsv"
echo "pipe6: $ok/$total verified"
VERIFY_RC=$([ "$ok" -eq "$total" ] && echo 0 || echo 1)

# Exit 0 every check met, 1 some did not, 2 an error, 124 the pass ran past its limit.
timeout 300 "$R" check twins --stress --jobs "${JOBS:-6}" --out "$DEST/stress"
STRESS_RC=$?
exit $((VERIFY_RC != 0 || STRESS_RC != 0))
