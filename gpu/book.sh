#!/usr/bin/env bash
# The measuring exercises of the book on an H100/H200: `runner exercise --timings` runs every
# exercise with a timed Hopper counterpart (runner/src/bench/measure.rs), each as
# `runner exercise N.M --json`, and writes them as one results file (results::ExerciseTimings),
# $OUT/book/exercises-<gpu>-<date>.json, which `{{#exercise-timing N.M}}` quotes once it is
# committed to assets/results/; each run's errors go to $OUT/book/exercises-log.txt.
# Run from the repository root with the built runner at $R. About a minute (each exercise: one
# emulated run of the Blackwell solution, two to four twin builds, 35 rounds of ~0.5 ms kernels).
# Exit 0: every measuring exercise passed and was timed; 1: some did not; 2: an error.
set -u
: "${R:?set R to the runner binary}"
: "${OUT:?set OUT to the output folder}"
timeout 600 "$R" exercise --timings --out "$OUT/book"
