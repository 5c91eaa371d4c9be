#!/usr/bin/env bash
# The house after its last moves (the grader's layers, one requirement type, provenance's home),
# on an H100/H200, from the repository root, with R=path/to/runner; builds nothing.
#   1. (after 2, in the time left of 560 s) The Hopper parts of `runner grade --selftest` (the step-0 class of cheats, every stock
#      twin, steps 3 and 5's twins under their rubrics with CUPTI's executed counts): every row
#      "yes", as before the moves (44 of 44 at 5ea85ca).
#   2. Where a GPU runs, a newcomer's first commands: `step 0` exits 0 with the runs schema;
#      `step --help` names no tracker word; an emulated hang (`step 6 --mutate
#      acc-empty-extra-arrival`) is reported at `--timeout` (exit 124, the barrier named);
#      `exercise 0.1` on the stock kernel runs in full here (no "no GPU here").
# Writes $OUT/house7/summary.txt (one line per check) and each command's log beside it.
set -u
R=${R:-target/release/runner}
out="$OUT/house7"
mkdir -p "$out"
sum="$out/summary.txt"
say() { echo "$1" | tee -a "$sum"; }
start=$(date +%s)

timeout 120 "$R" step 0 --json >"$out/step0.json" 2>"$out/step0.err"
code=$?
schema=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("schema"))' "$out/step0.json" 2>/dev/null)
[ $code -eq 0 ] && [ "$schema" = "workbook-runs/1" ] && say "ok   step 0 --json: exit 0, schema $schema" ||
  say "FAIL step 0 --json: exit $code, schema $schema"
"$R" step --help >"$out/step-help.txt" 2>&1
grep -Eiq 'issue [0-9]|session [0-9]' "$out/step-help.txt" && say "FAIL step --help names a tracker word" ||
  say "ok   step --help names no tracker word"
t0=$(date +%s.%N)
timeout 120 "$R" step 6 --mutate acc-empty-extra-arrival --timeout 30 >"$out/hang.txt" 2>&1
code=$?
secs=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")
grep -q 'acc_empty' "$out/hang.txt" && named=named || named="not named"
[ $code -eq 124 ] && [ "$named" = named ] &&
  say "ok   emulated hang reported after $secs s (exit 124, acc_empty named; --timeout 30)" ||
  say "FAIL emulated hang: exit $code after $secs s, barrier $named"
timeout 180 "$R" exercise 0.1 --kernel steps/step0_naive/src/kernel.cu >"$out/exercise01.txt" 2>&1
code=$?
grep -q 'no GPU here' "$out/exercise01.txt" && say "FAIL exercise 0.1 says no GPU here (exit $code)" ||
  say "ok   exercise 0.1 on this GPU: exit $code, $(tail -n 1 "$out/exercise01.txt" | cut -c1-150)"
hopper=class,step1-hopper,step2-hopper,step3-hopper,step4-hopper,step5-hopper,step6-hopper,step3-hopper-rubric,step5-hopper-rubric
WORKBOOK_GRADE_SELFTEST_ONLY=$hopper timeout "$(( 560 - ($(date +%s) - start) ))" "$R" grade --selftest --out "$out/hopper" \
  >"$out/hopper-stdout.txt" 2>"$out/hopper-stderr.txt"
say "hopper selftest parts: exit $? after $(( $(date +%s) - start )) s"
cp "$out/hopper/selftest.md" "$out/hopper-selftest.md" 2>/dev/null
tail -n 1 "$out/hopper-stdout.txt" | tee -a "$sum"

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader >>"$sum" 2>&1
timeout 60 tar -C "$out" -czf "$out/hopper.tgz" hopper && rm -rf "$out/hopper"
cat "$sum"
