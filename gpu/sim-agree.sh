#!/usr/bin/env bash
# The simulator against the GPU emulation, on an H100/H200, from the repository root with a
# prebuilt runner (nothing is built here):
#
#   R=path/to/runner WORKBOOK_CUDA=/usr/local/cuda OUT=folder gpu/sim-agree.sh
#
# 1. `runner check emulation --sim-cases`: the cases `runner check sim` runs (every step's
#    Blackwell kernel at small shapes, both dtypes, every input distribution, persistent grids
#    capped so each cluster runs several tiles, every seeded bug on every step it applies to, two
#    schedule seeds each) under the tcgen05 emulation on the GPU (selftest skipped).
# 2. At the same time, on the CPU (6 threads): `runner check sim`, the same cases on the
#    simulator, from the kernels' sm_100a PTX.
# 3. `runner check agree`: per case, the same verdict (verified, or caught) and, where both name
#    an ordering rule, the same rule.
# QUICK=1 runs the quick sets of both (one shape, one schedule seed, each bug on its first step).
# Writes $OUT/sim-agree/{emulation.json,emulation-log.txt,sim.json,sim-log.txt,agree.txt,meta.txt}.
# Success: both checks end "ALL EXPECTATIONS MET", and agree.txt ends with "0 disagree, 0 in one
# file only"; exit 0. Each step is wrapped in timeout; the whole takes under 9 minutes.
set -u
RUNNER=${R:-${RUNNER:-target/release/runner}}
OUT=${OUT:-/tmp/wb-sim-agree}
DIR="$OUT/sim-agree"
mkdir -p "$DIR"
QUICKFLAG=()
if [ "${QUICK:-0}" = 1 ]; then QUICKFLAG=(--quick); fi
{
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "date $(date -u +%F)"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1
  nproc
} >"$DIR/meta.txt"

# The simulator on the CPU, beside the emulation on the GPU (they share nothing but the disk).
# Each check writes into a folder of its own (a check refuses a folder holding files it did not
# write), then its JSON is copied beside the others.
timeout 500 "$RUNNER" check sim "${QUICKFLAG[@]}" --jobs 6 --out "$DIR/sim-check" >"$DIR/sim-stdout.txt" 2>&1 &
SIM=$!
timeout 500 "$RUNNER" check emulation --sim-cases --no-selftest "${QUICKFLAG[@]}" --jobs 8 \
  --out "$DIR/emulation-check" >"$DIR/emulation-stdout.txt" 2>&1
echo "emulation check rc=$?"
wait $SIM
echo "simulator check rc=$?"
tail -n 2 "$DIR/emulation-stdout.txt" "$DIR/sim-stdout.txt"
cp "$DIR/emulation-check/emulation.json" "$DIR/emulation.json"
cp "$DIR/sim-check/sim.json" "$DIR/sim.json"
timeout 60 "$RUNNER" check agree "$DIR/emulation.json" "$DIR/sim.json" >"$DIR/agree.txt" 2>&1
RC=$?
tail -n 30 "$DIR/agree.txt"
echo "agree rc=$RC"
exit $RC
