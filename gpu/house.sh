#!/usr/bin/env bash
# The quick GPU checks of issue 19 (typed results, `runner check`), for an H100/H200:
#   R=path/to/runner OUT=folder WORKBOOK_CUDA=/usr/local/cuda gpu/house.sh
# Runs `runner check twins --quick` and `runner check emulation --quick` (the selftest, every step
# in both dtypes, a capped persistent grid, every seeded bug under two emulation seeds) and packs
# their results JSON and logs into $OUT/house/check.tar.gz, with the summaries in
# $OUT/house/summary.txt. About 2 minutes. Success: the two lines "ALL TWIN CHECKS MET" and
# "ALL EXPECTATIONS MET" in summary.txt, and "house: twins rc=0 emulation rc=0" at its end.
#
# The full sets (what assets/results/ records; about 15 minutes on one H100 with --jobs 6):
#   runner check twins --out DIR
#   runner check emulation --out DIR
set -u
R=${R:-target/release/runner}
DIR="$OUT/house"
mkdir -p "$DIR/check"
SUMMARY="$DIR/summary.txt"
: >"$SUMMARY"
timeout 45 "$R" check twins --quick --jobs 8 --out "$DIR/check" >>"$SUMMARY" 2>&1
TWINS=$?
timeout 130 "$R" check emulation --quick --jobs 16 --out "$DIR/check" >>"$SUMMARY" 2>&1
EMU=$?
tar -czf "$DIR/check.tar.gz" -C "$DIR" check && rm -rf "$DIR/check"
echo "house: twins rc=$TWINS emulation rc=$EMU" | tee -a "$SUMMARY"
exit $((TWINS != 0 || EMU != 0))
