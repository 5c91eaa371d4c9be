#!/usr/bin/env bash
# GPU check of issue 23 items 6 and 7 for the Hopper twins' run-time bugs (the twin check every
# stress build carries, common.cuh "Twin check builds"), on an H100/H200, from the repository root:
#
#   R=path/to/runner WORKBOOK_CUDA=/usr/local/cuda OUT=folder gpu/emu.sh
#
# Cases (one runner process each, JOBS at a time, each under `timeout`):
# 1. every stock twin (steps 0-6) plain at the default shape, and under --stress 3, 6 and 11 at the
#    default shape and, persistent twins (4-6), at 2048x2048x512 on 2 clusters: each must verify;
# 2. the 6-wait2 contender (two wgmma groups in flight, releases the slot two k-blocks back) the
#    same way: it must verify (the release-before-wgmma-done rule must not fire on it);
# 3. every twin mutation `runner mutations --json` lists as "caught": "stress", on every twin it
#    applies to, under each seed at both shapes (--no-static-check): each must be caught on every
#    seed and shape, and where the mutation names a rule ("caught_by") the output must contain the
#    twin check's message "twin check <rule>:" (the catch is the check's, not luck's).
# Prints one line per case and, last, "ALL AS EXPECTED" (exit 0) or "NOT ALL AS EXPECTED" (exit 1).
# Writes $OUT/emu/emu.json (every case: expectation, outcome, the check's message, seconds) and
# $OUT/emu/emu.txt (the printed table). About 150 cases, 10 at a time: about 2 minutes on an H100.
set -u
RUNNER=${R:-${RUNNER:-target/release/runner}}
OUT=${OUT:-/tmp/wb-emu}
DIR="$OUT/emu"
JOBS=${JOBS:-10}
SEEDS=${SEEDS:-"3 6 11"}
mkdir -p "$DIR"
T=$(mktemp -d)
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

emu_case() { # name expected step shape clusters seed mutation kernel
  local name=$1 step=$3 shape=$4 clusters=$5 seed=$6 mutation=$7 kernel=$8
  IFS=x read -r m n k <<<"$shape"
  local args=(step "$step" --arch sm_90a --m "$m" --n "$n" --k "$k" --dtype f16 --seed 5 --iters 0 --json)
  [ "$clusters" != "-" ] && args+=(--clusters "$clusters")
  [ "$seed" != "-" ] && args+=(--stress "$seed")
  [ "$kernel" != "-" ] && args+=(--kernel "$kernel")
  if [ "$mutation" != "-" ]; then
    args+=(--mutate "$mutation" --no-static-check --timeout 15)  # a seeded bug may hang
  else
    args+=(--timeout 30)
  fi
  local t0 t1 rc
  t0=$(date +%s.%N)
  timeout 60 "$RUNNER" "${args[@]}" >"$T/$name.out" 2>"$T/$name.err"
  rc=$?
  t1=$(date +%s.%N)
  printf '%s\t%s\t%s\n' "$name" "$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" >>"$T/done.tsv"
}
export -f emu_case
export RUNNER T

"$RUNNER" list --json >"$T/steps.json" || { echo "error: $RUNNER list failed"; exit 1; }
"$RUNNER" mutations --json >"$T/mutations.json" || { echo "error: $RUNNER mutations failed"; exit 1; }
: >"$T/done.tsv"
python3 - "$T" "$SEEDS" >"$T/cases.txt" <<'PY'
import json, os, sys
t, seeds = sys.argv[1], sys.argv[2].split()
steps = [(s["number"], bool(s["tiles"]["sm_90a"]["persistent"]))
         for s in json.load(open(os.path.join(t, "steps.json")))]
muts = [m for m in json.load(open(os.path.join(t, "mutations.json")))
        if m.get("arch") == "sm_90a" and m.get("caught") == "stress"]
DEFAULT, PERSISTENT = ("4096x8192x4096", "-"), ("2048x2048x512", "2")
def shapes(p):
    return [DEFAULT] + ([PERSISTENT] if p else [])
def tag(shape, clusters):
    return shape + ("" if clusters == "-" else f"-c{clusters}")
rows = []
for step, p in steps:
    rows.append((f"t{step}-{tag(*DEFAULT)}-plain", "pass", step, *DEFAULT, "-", "-", "-"))
    for shape, c in shapes(p):
        for seed in seeds:
            rows.append((f"t{step}-{tag(shape, c)}-s{seed}", "pass", step, shape, c, seed, "-", "-"))
wait2 = "exercises/hopper/step6_wait2_sm90.toml"
rows.append((f"6-wait2-{tag(*DEFAULT)}-plain", "pass", 6, *DEFAULT, "-", "-", wait2))
for shape, c in shapes(True):
    for seed in seeds:
        rows.append((f"6-wait2-{tag(shape, c)}-s{seed}", "pass", 6, shape, c, seed, "-", wait2))
for m in muts:
    for step, p in steps:
        if step not in m["steps"]:
            continue
        for shape, c in shapes(p):
            for seed in seeds:
                rows.append((f"t{step}-{tag(shape, c)}-s{seed}-{m['name']}", "caught", step, shape, c,
                             seed, m["name"], "-"))
for r in rows:
    print(" ".join(str(x) for x in r))
PY
echo "$(wc -l <"$T/cases.txt") cases, $JOBS at a time (commit $COMMIT)"
xargs -P "$JOBS" -L 1 bash -c 'emu_case "$@"' _ <"$T/cases.txt"

python3 - "$T" "$DIR" "$COMMIT" <<'PY'
import datetime, json, os, re, statistics, subprocess, sys
t, out, commit = sys.argv[1:4]
try:
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip().splitlines()[0].split(", ")
except (OSError, IndexError):
    smi = ["no GPU (nvidia-smi)", "?"]
caught_by = {m["name"]: m.get("caught_by", "") for m in json.load(open(os.path.join(t, "mutations.json")))}
done = {l.split("\t")[0]: l.rstrip("\n").split("\t") for l in open(os.path.join(t, "done.tsv"))}
cases, ok_all, lines = [], True, []
for line in open(os.path.join(t, "cases.txt")):
    name, expected, step, shape, clusters, seed, mutation, kernel = line.split()
    rc, secs = (int(done[name][1]), float(done[name][2])) if name in done else (-1, 0.0)
    text = ""
    for ext in ("out", "err"):
        try:
            text += open(os.path.join(t, f"{name}.{ext}"), errors="replace").read()
        except OSError:
            pass
    passed = None
    try:
        passed = json.load(open(os.path.join(t, name + ".out")))["runs"][0]["verification"]["passed"]
    except Exception:
        pass
    found = re.search(r"twin check ([a-z-]+):[^\n]*", text)
    message = found.group(0)[:400] if found else ""
    if rc == 0 and passed:
        outcome = "pass"
    elif found:
        outcome = "trapped"
    elif rc in (124, 137):
        outcome = "hang"
    elif "faulted" in text:
        outcome = "fault"
    elif rc == 1 and passed is False:
        outcome = "wrong"
    else:
        outcome = "error"
    rule = caught_by.get(mutation, "") if mutation != "-" else ""
    if expected == "pass":
        met = outcome == "pass"
    elif rule:
        met = outcome == "trapped" and found.group(1) == rule
    else:
        met = outcome in ("trapped", "hang", "fault", "wrong")
    ok_all &= met
    err = [l for l in text.strip().splitlines() if l.strip()]
    cases.append({"name": name, "step": int(step), "shape": shape,
                  "clusters": None if clusters == "-" else int(clusters),
                  "stress_seed": None if seed == "-" else int(seed),
                  "mutation": None if mutation == "-" else mutation,
                  "kernel": None if kernel == "-" else kernel, "expected": expected,
                  "rule": rule or None, "outcome": outcome, "met_expectation": met, "exit_code": rc,
                  "message": message, "seconds": round(secs, 2),
                  "detail": "" if met or not err else err[-1][:300]})
    lines.append(f"{name:<66} {expected:<7} {outcome:<8} {secs:>6.1f}s"
                 + ("" if met else "  <-- NOT AS EXPECTED") + (f"  [{message[:90]}]" if message else ""))
stock = [c["seconds"] for c in cases if c["expected"] == "pass" and c["stress_seed"] is not None]
plain = [c["seconds"] for c in cases if c["expected"] == "pass" and c["stress_seed"] is None]
summary = [
    "",
    f"stock twins and 6-wait2: {sum(c['outcome'] == 'pass' for c in cases if c['expected'] == 'pass')} of "
    f"{sum(c['expected'] == 'pass' for c in cases)} verified (plain and stressed)",
    f"twin mutations: {sum(c['met_expectation'] for c in cases if c['expected'] == 'caught')} of "
    f"{sum(c['expected'] == 'caught' for c in cases)} caught as expected (named by the twin check where they name a rule)",
    f"median seconds per process: stressed with the twin check {statistics.median(stock) if stock else 0:.1f}, "
    f"plain {statistics.median(plain) if plain else 0:.1f} (compile, verification and cuBLAS included)",
    "ALL AS EXPECTED" if ok_all else "NOT ALL AS EXPECTED",
]
text = "\n".join(lines + summary)
print(text)
open(os.path.join(out, "emu.txt"), "w").write(text + "\n")
json.dump({"kind": "twin-check", "gpu": smi[0], "driver": smi[1] if len(smi) > 1 else "?",
           "date": datetime.date.today().isoformat(), "commit": commit,
           "mode": "Hopper twins, native sm_90a: plain and stress builds (--stress, with the twin check), verified against cuBLAS and fp64 samples",
           "cases": cases}, open(os.path.join(out, "emu.json"), "w"), indent=1)
sys.exit(0 if ok_all else 1)
PY
