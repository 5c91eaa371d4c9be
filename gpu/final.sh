#!/usr/bin/env bash
# The session's GPU check at one commit, in one call (device time is scarce), on an H100/H200 from
# the repository root with the runner at $R and WORKBOOK_CUDA set:
#
#   R=path/to/runner WORKBOOK_CUDA=/usr/local/cuda OUT=folder gpu/final.sh
#
# Phase A, correctness, in parallel (never timed):
#   gtrace    gpu/gtrace.sh: trace requirements graded end to end (last line GTRACE PASS);
#   stress    runner check twins --stress --quick: stock twins and the 6-wait2 control verify under
#             every stress seed, every stress-caught twin bug trapped by its named twin-check rule
#             on every seed and shape, every static one refused (last line ALL STRESS CHECKS MET);
#   verify    every twin natively and every Blackwell kernel under the emulation, at an odd shape
#             in bf16 (persistent ones on a capped grid), and 6-streamk split and unsplit.
# Phase B, alone on the GPU: runner bench, steps 0-6 and the contenders 5-pingpong, 6-l2hints,
#   6-streamk at both bench shapes, f16 and bf16 (one protocol, every output verified).
# Phase C, if time is left: Nsight Compute's SpeedOfLight of step 6 at both shapes (f16).
# Writes $OUT/final/summary.txt and $OUT/final/final.tar.gz. About 7 minutes.
set -u
: "${R:?set R to the runner binary}"
: "${OUT:?set OUT to the output folder}"
D="$OUT/final"
W=$(mktemp -d)
mkdir -p "$D" "$W/a" "$W/bench"
S="$D/summary.txt"
note() { echo "[$(date -u +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$S"; }
note "$(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader)"
note "$("$R" --version)"

# --- phase A ------------------------------------------------------------------------------------
(OUT="$W/a" timeout 170 gpu/gtrace.sh >"$W/gtrace.log" 2>&1; echo "rc=$?" >>"$W/gtrace.log") &
(timeout 200 "$R" check twins --stress --quick --jobs 6 --out "$W/a/stress" >"$W/stress.log" 2>&1
 echo "rc=$?" >>"$W/stress.log") &
verify() { # name, then runner arguments
  local name=$1
  shift
  timeout 90 "$R" "$@" --iters 0 --timeout 40 >"$W/a/v-$name.log" 2>&1
  echo "$name rc=$?" >>"$W/verify.tsv"
}
(
  for n in 0 1 2 3 4 5 6; do
    c=""; cb=""
    if [ "$n" -ge 4 ]; then c="--clusters 3"; cb="--clusters 1"; fi
    verify "twin$n-odd-bf16" step $n --arch sm_90a --dtype bf16 --m 2304 --n 2816 --k 704 --seed 7 $c &
    verify "emu$n-odd-bf16" step $n --arch sm_100a --emulate --dtype bf16 --m 256 --n 768 --k 320 $cb &
    wait
  done
  SK=steps/step7_last_wave/src/kernel_sm90.cu
  verify streamk-768x1280x4096-c7-split step 6 --arch sm_90a --kernel $SK --m 768 --n 1280 --k 4096 --clusters 7 &
  verify streamk-2304x2816x8192-c8-split step 6 --arch sm_90a --kernel $SK --m 2304 --n 2816 --k 8192 --clusters 8 --seed 7 &
  verify streamk-2304x2816x704-bf16-c4 step 6 --arch sm_90a --kernel $SK --m 2304 --n 2816 --k 704 --clusters 4 --dtype bf16 --seed 7 &
  wait
) &
wait
note "phase A done"
note "gtrace: $(tail -n 2 "$W/gtrace.log" | tr '\n' ' ')"
note "stress: $(grep -E 'stock twins under stress|stress controls|STRESS CHECKS|rc=' "$W/stress.log" | tr '\n' ' ')"
note "verify: $(grep -c 'rc=0' "$W/verify.tsv") of $(wc -l <"$W/verify.tsv") exit 0; not: $(grep -v 'rc=0' "$W/verify.tsv" | tr '\n' ' ')"

# --- phase B ------------------------------------------------------------------------------------
timeout 260 "$R" bench --contenders 5-pingpong,6-l2hints,6-streamk --out "$W/bench" >"$W/bench.log" 2>&1
note "bench rc=$?"
grep -E "^(4096|8192)" "$W/bench.log" | tee -a "$S" >/dev/null

# --- phase C ------------------------------------------------------------------------------------
if [ "$SECONDS" -lt 450 ]; then
  for shape in "4096 8192 4096" "8192 8192 8192"; do
    set -- $shape
    timeout 45 /usr/local/cuda/bin/ncu --clock-control none --section SpeedOfLight \
      -k regex:gemm_kernel -c 1 \
      "$R" step 6 --arch sm_90a --m "$1" --n "$2" --k "$3" --iters 0 >"$W/ncu-step6-$1x$2x$3.txt" 2>&1
    note "ncu step 6 $1x$2x$3 rc=$?: $(grep -E 'Compute \(SM\) Throughput|Duration|SM Frequency' "$W/ncu-step6-$1x$2x$3.txt" | tr -s ' ' | tr '\n' ';')"
  done
else
  note "ncu skipped: ${SECONDS}s used"
fi
cp "$W"/*.log "$W/verify.tsv" "$W/a/" 2>/dev/null
cp "$W"/ncu-*.txt "$W/a/" 2>/dev/null
tar -czf "$D/final.tar.gz" -C "$W" a bench
note "done"
