#!/usr/bin/env bash
# Steps as declared data, on an H100/H200, from the repository root with a prebuilt runner:
#   R=path/to/runner OUT=folder WORKBOOK_CUDA=/usr/local/cuda gpu/house6.sh
# What changed for a GPU: every kernel now checks WB_LAUNCH_SCHEDULE (the schedule its step
# declares) instead of WB_LAUNCH_PERSISTENT, the grid comes from one rule (KernelShape::grid),
# and `runner step` / common::run::run were cut into named stages (the timed run among them).
# Runs, each under `timeout`, into $OUT/house6/log.txt:
#   1. runner step 4 --arch sm_90a            the twin natively, verified and timed (exit 0)
#   2. runner step 5 --arch sm_90a --clusters 2   a capped persistent grid (exit 0)
#   3. runner step 2 --clusters 2             a per-tile step: refused (exit 2), naming steps 4, 5, 6
#   4. runner step 6 --json                   both kernels (the Blackwell one emulated), exit 0
#   5. gpu/house.sh                           `runner check twins --quick` and
#                                             `runner check emulation --quick`
# Success: the last line reads "house6: step4=0 step5=0 step2=2 step6=0 house=0" and the log
# holds "the persistent steps (4, 5, 6)". About 3 minutes.
set -u
R=${R:-target/release/runner}
DIR="$OUT/house6"
mkdir -p "$DIR"
LOG="$DIR/log.txt"
: >"$LOG"
run() {
  echo "== $*" >>"$LOG"
  timeout 120 "$R" "$@" >>"$LOG" 2>&1
}
run step 4 --arch sm_90a; S4=$?
run step 5 --arch sm_90a --clusters 2; S5=$?
run step 2 --clusters 2; S2=$?
run step 6 --json; S6=$?
OUT="$DIR" timeout 200 gpu/house.sh >>"$LOG" 2>&1; H=$?
echo "house6: step4=$S4 step5=$S5 step2=$S2 step6=$S6 house=$H" | tee -a "$LOG"
