#!/usr/bin/env bash
# Nsight Compute excerpts of the Hopper ladder at the final kernels, for the bench of record's
# commit: steps 2, 3, 4 and 6 at 4096x8192x4096 f16 and steps 3 and 4 at 8192^3 (the two dips),
# one verified launch each (`runner step N --arch sm_90a --iters 0`: its first gemm_kernel
# launch), clocks untouched. From the repository root, with a prebuilt runner:
#   R=target/release/runner OUT=folder gpu/ncu-ladder.sh        (about 1 minute)
# Writes $OUT/ncu/ncu-ladder.txt (Speed of Light, occupancy, launch statistics, warp states and
# the metrics below per launch).
set -u
R=${R:-target/release/runner}
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
export WORKBOOK_CUDA=${WORKBOOK_CUDA:-/usr/local/cuda}
D="$OUT/ncu"
mkdir -p "$D"
F="$D/ncu-ladder.txt"
METRICS=sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__cycles_active.min,sm__cycles_active.max,sm__cycles_elapsed.avg,gpu__time_duration.sum,smsp__sass_inst_executed_op_local_ld.sum,smsp__sass_inst_executed_op_local_st.sum
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; "$R" --version; date -u +%F; } >"$F"
prof() { # step m n k
  echo "==== step $1 at $2x$3x$4 f16" >>"$F"
  timeout 90 "$NCU" --clock-control none --section SpeedOfLight --section Occupancy \
    --section LaunchStats --section WarpStateStats --metrics "$METRICS" -k regex:gemm_kernel -c 1 \
    "$R" step "$1" --arch sm_90a --m "$2" --n "$3" --k "$4" --iters 0 >>"$F" 2>&1
  echo "ncu step $1 $2x$3x$4: rc=$?"
}
for s in 2 3 4 6; do prof $s 4096 8192 4096; done
for s in 3 4; do prof $s 8192 8192 8192; done
grep -E "^====|verify|Duration|SM Throughput|gpu__time_duration|sm__throughput|hmma|sm__cycles_active|Registers Per|local_(ld|st)" "$F" | head -120
