#!/usr/bin/env bash
# The book's measurements, in ONE device call of at most 9.5 minutes on an H100/H200 (no build:
# a prebuilt runner, built from a clean committed tree so that every file records its commit).
# From the repository root:
#
#   R=target/release/runner WORKBOOK_CUDA=/usr/local/cuda OUT=folder gpu/book6.sh
#
# 1. motivation: each step's idea where it should pay. One `runner bench` of every step's twin
#    (0-6) in f16 at the shapes `runner/src/book/motivation.rs` names (TARGETS), with adaptive
#    rounds: each kernel is paired with the one before it in the same rounds (`vs_previous`, a
#    95 % bootstrap interval of the ratio), so all six pairs are measured at every shape. Why
#    each shape (the heatmap of 2026-11-25, % of cuBLAS):
#      4096x4096x16384  step 1 (a producer of its own pays where the main loop is long)
#      4096x8192x256    steps 2, 4, 5 (the epilogue and the per-tile set-up weigh most where
#                       K is small: 4 k-blocks a tile, 1024 tiles, about 8 waves)
#      4096x8192x1024   step 4 (the same at 16 k-blocks a tile)
#      1024x16384x4096  steps 3 and 6 (few rows of A, a wide B: multicast halves the larger
#                       operand's L2 -> SM traffic, and a row-major order streams all of B)
#    CAP seconds of timed rounds per shape (default 25; a round of cuBLAS and 7 kernels, each
#    after an L2 flush, plus the 5 ms prime: about 8-15 ms by the committed benches' medians,
#    so roughly 2,000 rounds or the target width first). The bench is limited to BENCH_LIMIT
#    seconds (default 260: the rounds, 7 NVRTC builds, 4 verifications).
#    -> $OUT/motivation/bench-<gpu>-<date>.json: commit it as assets/results/motivation/ (the
#       chapters' {{#motivation N}} read the newest there; NOT assets/results/ itself, where it
#       would replace the bench of record).
# 2. occupancy: exercise 0.1's result. Nsight Compute's Occupancy and LaunchStats sections of
#    step 0's twin at 3 and at 4 stages (4096x8192x4096 f16, one launch each, 60 s each at
#    most): how many CTAs the shared memory lets an SM hold, how many warps were active.
#    -> $OUT/occupancy/step0-stages{3,4}.csv and provenance.txt: commit the folder as
#       assets/results/occupancy/ ({{#occupancy 0}} reads it).
# 3. exercises: `runner exercise --timings` at this commit: every measuring exercise's variants
#    against the stock twin in the same rounds (at least 30, then up to 12 s more until the
#    intervals are within +-0.5 %); each verdict from the paired 95 % interval of that same
#    run. Limited to EX_LIMIT seconds (default 190) or what is left of BUDGET (default 565).
#    -> $OUT/exercises/exercises-<gpu>-<date>.json (+ exercises-log.txt): commit the JSON to
#       assets/results/ ({{#exercise-timing N.M}} reads the newest).
# Every command's output goes to $OUT/run.log; one line per part to $OUT/summary.txt (printed
# last). 8 files in all. Exit 0 when every part wrote its file.
set -u
R=${R:-target/release/runner}
: "${OUT:?set OUT to the output folder}"
CAP=${CAP:-25}
BENCH_LIMIT=${BENCH_LIMIT:-260}
EX_LIMIT=${EX_LIMIT:-190}
BUDGET=${BUDGET:-565}
SHAPES=${SHAPES:-4096x4096x16384,4096x8192x256,4096x8192x1024,1024x16384x4096}
export WORKBOOK_CUDA=${WORKBOOK_CUDA:-/usr/local/cuda}
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
mkdir -p "$OUT"
LOG="$OUT/run.log"
SUM="$OUT/summary.txt"
: >"$LOG"
: >"$SUM"
say() { echo "$1" | tee -a "$SUM" >>"$LOG"; }
fits() { [ $((BUDGET - SECONDS)) -ge "$1" ] || { say "skipped (budget, ${SECONDS} s used): $2"; false; }; }
status=0
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,power.limit,temperature.gpu --format=csv
  "$R" --version
} >>"$LOG" 2>&1

# --- 1. motivation ------------------------------------------------------------------------------
t=$SECONDS
echo "== bench: steps 0-6, f16, $SHAPES, cap $CAP s per shape" >>"$LOG"
timeout "$BENCH_LIMIT" "$R" bench --steps 0,1,2,3,4,5,6 --shapes "$SHAPES" --dtypes f16 \
  --time-cap "$CAP" --ci-target 0.5 --iters 30 --warmup 5 --out "$OUT/motivation" >>"$LOG" 2>&1
rc=$?
rm -f "$OUT"/motivation/*.svg "$OUT/motivation/.runner-output"
if ls "$OUT"/motivation/bench-*.json >/dev/null 2>&1; then
  say "ok   motivation bench rc=$rc in $((SECONDS - t)) s: $(basename "$OUT"/motivation/bench-*.json)"
else
  say "FAIL motivation bench rc=$rc in $((SECONDS - t)) s: no results file (see run.log)"
  status=1
fi

# --- 2. occupancy of exercise 0.1 ---------------------------------------------------------------
O="$OUT/occupancy"
mkdir -p "$O"
{
  echo "what=Nsight Compute, sections Occupancy and LaunchStats, step 0's twin (sm_90a) at 4096x8192x4096 f16, the first gemm_kernel launch of runner step 0 --arch sm_90a --param stages=S --iters 0"
  echo "gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
  echo "driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
  echo "date=$(date -u +%Y-%m-%d)"
  echo "runner=$("$R" --version 2>&1 | head -n 1)"
  echo "ncu=$("$NCU" --version 2>&1 | tail -n 1)"
} >"$O/provenance.txt"
for s in 3 4; do
  t=$SECONDS
  fits 60 "ncu stages=$s" || { status=1; continue; }
  timeout 60 "$NCU" --clock-control none --section Occupancy --section LaunchStats --csv --page details \
    -k regex:gemm_kernel -c 1 \
    "$R" step 0 --arch sm_90a --param "stages=$s" --m 4096 --n 8192 --k 4096 --iters 0 \
    >"$O/raw-$s.txt" 2>>"$LOG"
  rc=$?
  # The CSV rows only (the runner's own output is interleaved before them).
  grep '^"' "$O/raw-$s.txt" >"$O/step0-stages$s.csv"
  grep -v '^"' "$O/raw-$s.txt" >>"$LOG"
  rm -f "$O/raw-$s.txt"
  got=$(python3 -c 'import csv, sys
d = {r.get("Metric Name"): r.get("Metric Value") for r in csv.DictReader(open(sys.argv[1]))}
if "Block Limit Shared Mem" in d:
    print("CTAs per SM by shared memory", d["Block Limit Shared Mem"], "| achieved occupancy", d.get("Achieved Occupancy"), "%")' "$O/step0-stages$s.csv" 2>/dev/null)
  if [ -n "$got" ]; then
    say "ok   ncu stages=$s rc=$rc in $((SECONDS - t)) s: $got"
  else
    say "FAIL ncu stages=$s rc=$rc in $((SECONDS - t)) s: no Occupancy rows (see run.log)"
    status=1
  fi
done

# --- 3. exercises -------------------------------------------------------------------------------
t=$SECONDS
left=$((BUDGET - SECONDS))
[ "$left" -lt "$EX_LIMIT" ] && EX_LIMIT=$left
if fits 100 "exercise timings"; then
  echo "== exercise --timings (limit $EX_LIMIT s)" >>"$LOG"
  timeout "$EX_LIMIT" "$R" exercise --timings --out "$OUT/exercises" >>"$LOG" 2>&1
  rc=$?
  rm -f "$OUT/exercises/.runner-output"
  if ls "$OUT"/exercises/exercises-*.json >/dev/null 2>&1; then
    say "ok   exercise timings rc=$rc in $((SECONDS - t)) s: $(grep -m1 '^wrote .*exercises-' "$LOG" | sed 's/.*: //')"
  else
    say "FAIL exercise timings rc=$rc in $((SECONDS - t)) s: no results file (see run.log)"
    status=1
  fi
else
  status=1
fi

echo "== summary (${SECONDS} s)"
cat "$SUM"
tail -n 25 "$LOG"
exit $status
