#!/usr/bin/env bash
# Every Blackwell seeded bug through `runner step N --mutate NAME` at the default shape, on an H100/H200
# (the emulation), for steps 4 and 6: each "caught" bug must fail (exit 1), "harmless" pass, and a
# bug for other steps be refused (exit 2). From the repository root with R=path/to/runner.
set -u
R=${R:-target/release/runner}
out="$OUT/mut"; mkdir -p "$out"
for n in 4 6; do
for m in $("$R" mutations --json | python3 -c 'import json,sys; d=json.load(sys.stdin); items=d.get("mutations", d) if isinstance(d,dict) else d; print(" ".join(x["name"] for x in items if not x["name"].startswith("twin-")))'); do
  t0=$(date +%s.%N)
  timeout 90 "$R" step $n --mutate "$m" >"$out/$n-$m.txt" 2>&1
  code=$?
  secs=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")
  v=$(grep -m1 '^verify' "$out/$n-$m.txt" | cut -c1-60)
  echo "step $n $m: exit $code in $secs s | $v" | tee -a "$out/summary.txt"
done; done
