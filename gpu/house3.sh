#!/usr/bin/env bash
# GPU check of issue 19's stress item: `runner check twins --stress --quick` on an H100/H200, from
# the repository root with the built runner at $R:
#
#   R=path/to/runner WORKBOOK_CUDA=/usr/local/cuda OUT=folder gpu/house3.sh
#
# The quick stress pass: every stock twin 0-6 under the stress seeds 3, 6 and 11 (twins 4-6 at
# 2048x2048x512 on 2 clusters, the others at 4096x8192x4096), each must verify; every twin
# mutation under the same seeds on each twin it applies to (static checks off), the statically
# caught ones also once with the static check on, which must refuse them. About 100 cases, 6 at a
# time: one to two minutes.
# Writes $OUT/house3/stress.json (results::TwinStress: every case, and per mutation and twin the
# seeds that caught it) and $OUT/house3/stress-log.txt, and prints the summary tables.
# Success: "stock twins under stress: 21 of 21 verified", "stress controls (6-wait2): 3 of 3
# verified", every static mutation refused, every stress mutation caught on every seed and shape
# by its named twin-check rule; the last line "ALL STRESS CHECKS MET" and exit 0. Otherwise "SOME
# STRESS CHECKS FAILED" and exit 1, the tables saying which. Exit 2: an error (no H100/H200);
# 124: the pass ran past its 170 s limit. On an H100 at 96fed09 every check was met
# (assets/results/stress-h100-2026-11-25/stress-twin-check-96fed09.json); the earlier runs, and
# the two defects of the check they found, are in assets/results/gpu-runs-h100-2026-11-25.md.
set -u
: "${R:?set R to the runner binary}"
: "${OUT:?set OUT to the output folder}"
timeout 170 "$R" check twins --stress --quick --jobs 6 --out "$OUT/house3"
