#!/usr/bin/env bash
# Branch `house` on an H100/H200: the exit-status contract and the --out rule where a GPU runs.
#   PART=step      `runner step 0` exits 0 (both kernels ran and verified: the twin natively, the
#                  Blackwell kernel under the emulation); `--json` starts with the schema.
#   PART=checks    `runner check twins --quick` then `runner check emulation --quick` into ONE
#                  new folder: the second must be accepted (the first left its .runner-output
#                  marker), and both results files must be there.
#   PART=selftest  `runner grade --selftest --out DIR` where DIR already holds a file of the
#                  user's: the selftest runs in full (its names are new), the file is untouched.
# PART=all runs the three (about 10 minutes: the selftest alone takes up to ~9; run it apart).
# Writes $OUT/outdir/summary.txt (one line per check: ok/FAIL) and each command's log beside it.
# Run from the repository root with R=path/to/runner and WORKBOOK_CUDA set.
set -u
: "${R:?set R to the runner binary}"
: "${OUT:?set OUT to the output folder}"
part=${PART:-all}
out="$OUT/outdir"
mkdir -p "$out"
sum="$out/summary.txt"
say() { echo "$1" | tee -a "$sum"; }

if [ "$part" = all ] || [ "$part" = step ]; then
  timeout 120 "$R" step 0 >"$out/step0.txt" 2>&1
  code=$?
  [ $code -eq 0 ] && say "ok   step 0 exits 0 on this GPU" || say "FAIL step 0 exits $code (want 0: both kernels ran and verified)"
  timeout 120 "$R" step 0 --arch sm_90a --json >"$out/step0.json" 2>"$out/step0-json.err"
  code=$?
  schema=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("schema"))' "$out/step0.json" 2>/dev/null)
  [ $code -eq 0 ] && [ "$schema" = "workbook-runs/1" ] && say "ok   step 0 --arch sm_90a --json: exit 0, schema $schema" ||
    say "FAIL step 0 --arch sm_90a --json: exit $code, schema $schema"
fi

if [ "$part" = all ] || [ "$part" = checks ]; then
  d="$out/check"
  rm -rf "$d"
  timeout 90 "$R" check twins --quick --jobs 8 --out "$d" >"$out/check-twins.txt" 2>&1
  t=$?
  timeout 170 "$R" check emulation --quick --jobs 16 --out "$d" >"$out/check-emulation.txt" 2>&1
  e=$?
  [ -f "$d/.runner-output" ] && say "ok   check left its marker in $d" || say "FAIL no marker in $d"
  [ -f "$d/twins.json" ] && say "ok   check twins wrote twins.json (exit $t)" || say "FAIL no twins.json (exit $t)"
  [ -f "$d/emulation.json" ] && say "ok   check emulation wrote emulation.json into the same folder (exit $e)" ||
    say "FAIL no emulation.json (exit $e): $(grep -m1 '^error' "$out/check-emulation.txt")"
fi

if [ "$part" = all ] || [ "$part" = selftest ]; then
  d="$out/selftest"
  rm -rf "$d"
  mkdir -p "$d"
  echo "the instructor's notes" >"$d/notes.txt"
  start=$(date +%s)
  timeout 560 "$R" grade --selftest --out "$d" >"$out/selftest-stdout.txt" 2>"$out/selftest-stderr.txt"
  code=$?
  [ "$(cat "$d/notes.txt")" = "the instructor's notes" ] && say "ok   the user's file in the selftest folder is untouched" ||
    say "FAIL the user's file in the selftest folder changed"
  [ $code -eq 0 ] && say "ok   grade --selftest exit 0 in $(( $(date +%s) - start )) s: $(tail -n 1 "$out/selftest-stdout.txt")" ||
    say "FAIL grade --selftest exit $code: $(grep -m1 '^error' "$out/selftest-stderr.txt")"
  cp "$d/selftest.md" "$out/selftest.md" 2>/dev/null
  timeout 60 tar -C "$out" -czf "$out/selftest.tgz" selftest && rm -rf "$d"
fi
