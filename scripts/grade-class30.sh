#!/usr/bin/env bash
# Issue 38, item 4's target: a class of 30 graded on the simulator (no GPU) in under 3 minutes
# on 2 cores, the worst submission costing at most 2x what the rubric allows one student.
# The class (`runner grade --write-class30`): step 0's Blackwell kernel as shipped, the honest
# variants of tests/cheats/cheats.toml (printf/assert/local array/math, #if 0, ...) and three
# hostile kernels (spins forever, junk MMAs, a 16 GiB __device__ array), graded by
# step3-blackwell.toml at step 0. A benchmark, not a CI test: run it on a quiet machine.
#   scripts/grade-class30.sh [JOBS]      (R=path/to/runner, default target/release/runner)
# Prints a markdown report (wall time, per-student times, the load average before and after).
set -euo pipefail
R=${R:-target/release/runner}
JOBS=${1:-2}
D=$(mktemp -d "${TMPDIR:-/tmp}/grade-class30.XXXXXX")
trap 'rm -rf "$D"' EXIT
"$R" grade --write-class30 "$D/in" >"$D/members.tsv"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s.%N)
"$R" grade --batch "$D/in/class" --rubric "$D/in/rubric.toml" --secret-file "$D/in/secret.txt" \
  --out "$D/out" --jobs "$JOBS" --allow-unconfined >"$D/stdout.txt" 2>"$D/stderr.txt"
end=$(date +%s.%N)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$D" "$start" "$end" "$JOBS" "$load_before" "$load_after" <<'PY'
import json, pathlib, sys
d, start, end, jobs, before, after = sys.argv[1:]
d = pathlib.Path(d)
what = dict(l.split('\t') for l in (d / 'members.tsv').read_text().split('\n') if l)
rubric = (d / 'in' / 'rubric.toml').read_text()
rows = []
for name, kind in what.items():
    g = json.loads((d / 'out' / name / 'grade.json').read_text())
    rows.append((name, kind, g['score'], g['max_score'], g['elapsed_s'], ','.join(g['flags'])))
wall = float(end) - float(start)
stock = sorted(r[4] for r in rows if r[1] == 'stock')
median = stock[len(stock) // 2]
worst = max(rows, key=lambda r: r[4])
print(f"class of {len(rows)} on the simulator, --jobs {jobs}: {wall:.1f} s wall "
      f"(load average before {before}, after {after})")
print(f"stock median {median:.1f} s per student; worst {worst[0]} {worst[4]:.1f} s "
      f"({worst[4] / median:.1f}x the stock median)")
print()
print("| student | kind | score | time (s) | flags |")
print("|---|---|---|---|---|")
for r in sorted(rows, key=lambda r: (r[1] != 'hostile', r[1] != 'honest', r[0])):
    print(f"| {r[0]} | {r[1]} | {r[2]:.0f}/{r[3]:.0f} | {r[4]:.1f} | {r[5]} |")
PY
