#!/usr/bin/env bash
# Issue 22, the grown cheat suite on a GPU: `runner grade --selftest` grades the stock kernels
# (full marks expected), the seeded bugs (must fail) and the 26 cheats of tests/cheats/cheats.toml
# (each must be caught under the flag it names). Writes $OUT/cheats/selftest.md (the table) and
# $OUT/cheats/selftest.tgz (every report, the selftest's JSON and its output).
# Run from the repository root with R=path/to/runner and WORKBOOK_CUDA set.
set -u
out="$OUT/cheats"
mkdir -p "$out/selftest"
start=$(date +%s)
timeout 560 "$R" grade --selftest --out "$out/selftest" >"$out/selftest/stdout.txt" 2>"$out/selftest/stderr.txt" ||
  echo "selftest exit code $?" >>"$out/selftest/stderr.txt"
echo "selftest took $(( $(date +%s) - start )) s" >>"$out/selftest/stderr.txt"
cp "$out/selftest/selftest.md" "$out/selftest.md" 2>/dev/null || tail -n 40 "$out/selftest/stderr.txt" >"$out/selftest.md"
tail -n 3 "$out/selftest/stdout.txt" >>"$out/selftest.md" 2>/dev/null
tail -n 1 "$out/selftest/stderr.txt" >>"$out/selftest.md"
timeout 60 tar -C "$out" -czf "$out/selftest.tgz" selftest && rm -rf "$out/selftest"
