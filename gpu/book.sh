#!/usr/bin/env bash
# The measuring exercises of the book on an H100/H200: `runner exercise N.M --json` for every
# exercise with a timed Hopper counterpart (runner/src/measure.rs), collected into one results
# file, $OUT/book/exercises-<gpu>-<date>.json, which `{{#exercise-timing N.M}}` quotes once it is
# committed to assets/results/. The runner's own output of each run goes to $OUT/book/log.txt.
# Run from the repository root with the built runner at $R. About a minute (each exercise: one
# emulated run of the Blackwell solution, two to four twin builds, 35 rounds of ~0.5 ms kernels).
set -u
: "${R:?set R to the runner binary}"
: "${OUT:?set OUT to the output folder}"
dir="$OUT/book"
mkdir -p "$dir"
log="$dir/log.txt"
: > "$log"
ids="0.1 1.2 2.1 6.2"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
case "$gpu" in
  *H200*) slug=h200 ;;
  *H100*) slug=h100 ;;
  *) slug=gpu ;;
esac
date=$(date -u +%F)
out="$dir/exercises-$slug-$date.json"
tmp=$(mktemp -d)
status=0
for id in $ids; do
  echo "== runner exercise $id --json" >> "$log"
  timeout 150 "$R" exercise "$id" --json > "$tmp/$id.json" 2>> "$log"
  rc=$?
  echo "exit $rc" >> "$log"
  cat "$tmp/$id.json" >> "$log"
  # 0: every check passed (timed); anything else is reported, and the run still kept if it is JSON.
  [ "$rc" -eq 0 ] || status=1
done
{
  printf '{\n  "kind": "exercise-timings",\n  "gpu": "%s",\n  "date": "%s",\n  "commit": "%s",\n  "runs": [\n' \
    "$gpu" "$date" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  sep=""
  for id in $ids; do
    if head -c1 "$tmp/$id.json" 2>/dev/null | grep -q '{'; then
      printf '%s' "$sep"
      cat "$tmp/$id.json"
      sep=","
    fi
  done
  printf '  ]\n}\n'
} > "$out"
rm -rf "$tmp"
echo "wrote $out (exit $status: 0 means every measuring exercise passed and was timed)"
grep -h '"detail"' "$out" | grep -E 'the GPU measured|FAIL' || true
exit $status
