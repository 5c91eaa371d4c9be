#!/usr/bin/env bash
# The Hopper twins' stress pass (called by gpu-check-twins.sh and gpu/stress.sh; runs alone too):
#
#   RUNNER=path/to/runner OUT=folder WB_COMMIT=<sha> scripts/gpu-check-stress.sh
#
# A stress build (`runner step N --arch sm_90a --stress SEED`, common::stress) sleeps for seeded
# pseudo-random whiles at the device wrappers' named points, so a race the usual timing hides meets
# other interleavings. Cases (common::stress::cases is the same plan in Rust):
# 1. every stock twin, under each of STRESS_SEEDS, at the default shape and, persistent twins,
#    at 2048x2048x512 with 2 clusters (many tiles each, short main loops): each must verify;
# 2. every twin mutation of `runner mutations --json` ("arch": "sm_90a") on each twin it applies
#    to, at those shapes:
#    - "caught": "stress": it must be caught (wrong result, hang or fault) under at least one seed
#      on each twin (the table says on how many); a plain run beside it (no stress) is kept for
#      the record: where it passes and a stress run does not, the bug is stress-only;
#    - "caught": "static": refused by the twin's static check, naming its rule (caught_by); under
#      each seed with --no-static-check too, for the record (a delay cannot slow a wgmma or a TMA
#      copy, so stress is not expected to show a missing wait for one).
# JOBS runs at a time (default 4; the GPU time-slices the processes, which only adds to the
# perturbation); every run is under `timeout`.
# Writes $OUT/stress.json (every case, its expectation and outcome) and prints a summary. Exit 0
# only if every stock twin verified under every seed, every stress-caught mutation was caught on
# each twin under some seed and every static one was refused.
set -u
RUNNER=${RUNNER:-target/release/runner}
OUT=${OUT:-/tmp/wb-gpu-check}
COMMIT=${WB_COMMIT:-unknown}
STRESS_SEEDS=${STRESS_SEEDS:-"3 6 11"}  # common::stress::CHECK_SEEDS: their hot points cover every point
TWIN_STEPS=${TWIN_STEPS:-"0 1 2 3 4 5 6"}
JOBS=${JOBS:-4}
CASES=$(mktemp -d)
mkdir -p "$OUT"
chmod +x "$RUNNER" 2>/dev/null

stress_case() { # name expected step shape clusters seed mutation static
  local name=$1 expected=$2 step=$3 shape=$4 clusters=$5 seed=$6 mutation=$7 static=$8
  IFS=x read -r m n k <<<"$shape"
  local args=(step "$step" --arch sm_90a --m "$m" --n "$n" --k "$k" --dtype f16 --seed 5 --iters 0 --json)
  [ "$clusters" != "-" ] && args+=(--clusters "$clusters")
  [ "$seed" != "-" ] && args+=(--stress "$seed")
  if [ "$mutation" != "-" ]; then
    # A seeded bug may hang: a short limit keeps the case short, and the runner says so (exit 124).
    args+=(--mutate "$mutation" --timeout 15)
    [ "$static" = off ] && args+=(--no-static-check)
  else
    args+=(--timeout 30)
  fi
  local t0=$(date +%s.%N)
  timeout 90 "$RUNNER" "${args[@]}" >"$CASES/$name.json" 2>"$CASES/$name.err"
  local rc=$?
  local t1=$(date +%s.%N)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$expected" "$step" "$shape" "$clusters" "$seed" "$mutation" "$static" "$rc" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" >>"$CASES/cases.tsv"
}
export -f stress_case
export RUNNER CASES

"$RUNNER" list --json >"$CASES/steps.json"
"$RUNNER" mutations --json >"$CASES/mutations.json"
: >"$CASES/cases.tsv"
# The case list: one line of stress_case arguments per case.
python3 - "$CASES" "$STRESS_SEEDS" "$TWIN_STEPS" >"$CASES/caselist.txt" <<'PY'
import json, os, sys
cases_dir, seeds, wanted = sys.argv[1], sys.argv[2].split(), {int(s) for s in sys.argv[3].split()}
steps = [(s["number"], bool(s["tiles"]["sm_90a"]["persistent"]))
         for s in json.load(open(os.path.join(cases_dir, "steps.json"))) if s["number"] in wanted]
mutations = [m for m in json.load(open(os.path.join(cases_dir, "mutations.json"))) if m.get("arch") == "sm_90a"]
DEFAULT, PERSISTENT = "4096x8192x4096", ("2048x2048x512", "2")
def shapes(persistent):
    return [(DEFAULT, "-")] + ([PERSISTENT] if persistent else [])
def tag(shape, clusters):
    return shape + ("" if clusters == "-" else f"-c{clusters}")
for step, persistent in steps:
    for seed in seeds:
        for shape, clusters in shapes(persistent):
            print(f"t{step}-{tag(shape, clusters)}-s{seed}", "pass", step, shape, clusters, seed, "-", "on")
for m in mutations:
    name = m["name"]
    for step, persistent in steps:
        if step not in m["steps"]:
            continue
        if m["caught"] == "static":
            shape, clusters = shapes(persistent)[-1]
            print(f"t{step}-{name}-static", "refused", step, shape, clusters, "-", name, "on")
        for shape, clusters in shapes(persistent):
            if m["caught"] == "stress":
                print(f"t{step}-{tag(shape, clusters)}-plain-{name}", "record", step, shape, clusters, "-", name, "on")
            for seed in seeds:
                expected = "caught" if m["caught"] == "stress" else "record"
                print(f"t{step}-{tag(shape, clusters)}-s{seed}-{name}", expected, step, shape, clusters, seed, name, "off")
PY
echo "$(wc -l <"$CASES/caselist.txt") stress cases, $JOBS at a time"
xargs -P "$JOBS" -L 1 bash -c 'stress_case "$@"' _ <"$CASES/caselist.txt"

python3 - "$OUT" "$COMMIT" "$CASES" <<'PY'
import json, os, subprocess, sys, datetime
out, commit, cases_dir = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip().splitlines()[0].split(", ")
except (OSError, IndexError):
    smi = ["no GPU (nvidia-smi)"]
gpu, driver = smi[0], smi[1] if len(smi) > 1 else "?"
caught_by = {m["name"]: m.get("caught_by", "") for m in json.load(open(os.path.join(cases_dir, "mutations.json")))}
order = {l.split()[0]: i for i, l in enumerate(open(os.path.join(cases_dir, "caselist.txt")))}
rows = sorted((l.rstrip("\n").split("\t") for l in open(os.path.join(cases_dir, "cases.tsv"))),
              key=lambda r: order.get(r[0], len(order)))
cases, ok_all = [], True
for name, expected, step, shape, clusters, seed, mutation, static, rc, secs in rows:
    rc = int(rc)
    passed, rel = None, None
    try:
        rep = json.load(open(os.path.join(cases_dir, name + ".json")))["runs"][0]
        passed = rep["verification"]["passed"]
        rel = rep["verification"]["rel_error_norm"]
    except Exception:
        pass
    err = open(os.path.join(cases_dir, name + ".err")).read()
    if rc == 0 and passed:
        outcome = "pass"
    elif rc == 1 and passed is False:
        outcome = "wrong"
    elif rc in (124, 137):
        outcome = "hang"
    elif "faulted" in err:
        outcome = "fault"
    elif mutation != "-" and static == "on" and caught_by.get(mutation) and caught_by[mutation] in err:
        outcome = "refused"
    else:
        outcome = "error"
    # A stress-caught bug must be caught under some seed on each twin: judged per twin below.
    met = {"pass": outcome == "pass", "caught": outcome in ("wrong", "hang", "fault"),
           "refused": outcome == "refused", "record": outcome != "error"}[expected]
    if expected != "caught":
        ok_all &= met
    lines = err.strip().splitlines()
    cases.append({"name": name, "step": int(step), "shape": shape,
                  "clusters": None if clusters == "-" else int(clusters),
                  "stress_seed": None if seed == "-" else int(seed),
                  "mutation": None if mutation == "-" else mutation, "static_check": static == "on",
                  "expected": expected, "outcome": outcome, "met_expectation": met, "exit_code": rc,
                  "rel_error_norm": rel if isinstance(rel, float) else None,
                  "seconds": round(float(secs), 2), "detail": lines[-1][:300] if lines else ""})
json.dump({"kind": "twin-stress", "gpu": gpu, "driver": driver, "date": datetime.date.today().isoformat(),
           "commit": commit, "mode": "Hopper twins, native sm_90a stress builds (common::stress), verified against cuBLAS and fp64 samples",
           "cases": cases}, open(os.path.join(out, "stress.json"), "w"), indent=1)
print(f"\n{'stress case':<62} {'expected':<8} {'outcome':<8} {'secs':>6}")
for c in cases:
    flag = ("" if c["met_expectation"] else
            "  (not caught under this seed)" if c["expected"] == "caught" else "  <-- UNEXPECTED")
    print(f"{c['name']:<62} {c['expected']:<8} {c['outcome']:<8} {c['seconds']:>6}{flag}")
# Per mutation: on how many stress seeds it was caught, and whether a plain run caught it too.
print(f"\n{'twin mutation':<32} {'step':>4} {'shape':<18} {'stress seeds caught':<20} plain")
seen = {}
for c in cases:
    if not c["mutation"] or c["expected"] == "refused":
        continue
    key = (c["mutation"], c["step"], c["shape"] + (f" c{c['clusters']}" if c["clusters"] else ""))
    s = seen.setdefault(key, {"caught": 0, "seeds": 0, "plain": "-"})
    bad = c["outcome"] in ("wrong", "hang", "fault")
    if c["stress_seed"] is None:
        s["plain"] = c["outcome"]
    else:
        s["seeds"] += 1
        s["caught"] += bad
for (m, step, shape), s in seen.items():
    print(f"{m:<32} {step:>4} {shape:<18} {str(s['caught']) + ' of ' + str(s['seeds']):<20} {s['plain']}")
per_twin = {}
for c in cases:
    if c["expected"] == "caught":
        per_twin.setdefault((c["mutation"], c["step"]), []).append(c["met_expectation"])
missed = [k for k, v in per_twin.items() if not any(v)]
for m, step in missed:
    print(f"{m} on twin {step}: caught under no stress seed  <-- UNEXPECTED")
ok_all &= not missed
stock = [c for c in cases if c["expected"] == "pass"]
print(f"\nstock twins under stress: {sum(c['outcome'] == 'pass' for c in stock)} of {len(stock)} verified")
print("ALL STRESS CHECKS MET" if ok_all else "SOME STRESS CHECKS FAILED")
sys.exit(0 if ok_all else 1)
PY
