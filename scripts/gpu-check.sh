#!/usr/bin/env bash
# GPU checks in one call, for an H100/H200 (sm_90): builds nothing, takes a prebuilt runner.
#
#   RUNNER=path/to/runner OUT=folder WB_COMMIT=<sha> scripts/gpu-check.sh
#
# 1. selftest: cuBLAS against the CPU fp64 reference, and cuBLAS TFLOP/s (f16, bf16);
# 2. every step under the tcgen05 emulation: shapes x dtypes x seeds, each must pass; the default
#    shape again across the emulation's schedule seeds (--emu-seed, EMU_SEEDS); steps 4-6 also
#    with the persistent grid capped (--clusters), so that each cluster runs several tiles;
# 3. negative controls: every seeded bug of the Blackwell kernels in `runner mutations --json`
#    ("arch": "sm_100a"; the twins' are gpu-check-stress.sh's; ONLY_MUTATIONS="a b": just
#    those), on every step it applies to, across the same emulation seeds (steps 4-6 several tiles
#    per cluster), with the static checks off (--no-static-check: the sm_100a PTX rules and ptxas
#    would refuse some before they run; here the emulation itself must catch them); each must be
#    caught (FAIL, emulator fault or diagnosed hang, and where the mutation names it, its
#    `caught_by` text in the error output: the rule or hang report that identifies the bug) or, if
#    it is marked harmless, pass.
# 4. the Hopper twins natively on every check shape, and `runner bench` (scripts/gpu-check-twins.sh;
#    TWINS=0 skips this part).
# Every run is under `timeout`, since a broken mbarrier phase hangs forever; JOBS runs at a time.
# SELFTEST=0 skips part 1.
# Writes $OUT/emulation.json and $OUT/selftest.json (the formats of assets/results/) and
# $OUT/log.txt (per-case stderr included); prints a summary table last. Exit 0 only if every case met its expectation.
set -u
RUNNER=${RUNNER:-target/release/runner}
OUT=${OUT:-/tmp/wb-gpu-check}
COMMIT=${WB_COMMIT:-unknown}
CASES=$(mktemp -d)  # per-case logs stay on the machine; $OUT gets the summaries
mkdir -p "$OUT"
LOG="$OUT/log.txt"
: >"$LOG"
chmod +x "$RUNNER" 2>/dev/null

SHAPES=${SHAPES:-"512x1024x512 256x768x320 1024x512x2048 256x256x4096 4096x8192x4096"}
DTYPES=${DTYPES:-"f16 bf16"}
SEEDS=${SEEDS:-"1 2"}
EMU_SEEDS=${EMU_SEEDS:-"1 2 3 4 5"}
# Small shapes with the persistent grid capped: 512x1024 gives one cluster 8 tiles (two clusters 4),
# 256x768 gives one cluster 3 tiles, so both accumulator slots of steps 5-6 are reused.
MULTI_TILE=${MULTI_TILE:-"512x1024x512:1 512x1024x512:2 256x768x320:1"}
CONTROL_SHAPE=512x1024x512
JOBS=${JOBS:-6}
export EMU_SEEDS

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$LOG"

run_case() { # name expected step shape dtype seed mutation emu_seed clusters
  local name=$1 expected=$2 step=$3 shape=$4 dtype=$5 seed=$6 mutation=$7 emu_seed=$8 clusters=$9
  IFS=x read -r m n k <<<"$shape"
  local args=(step "$step" --emulate --m "$m" --n "$n" --k "$k" --dtype "$dtype" --seed "$seed" --emu-seed "$emu_seed" --json)
  if [ "$clusters" != "-" ]; then args+=(--clusters "$clusters"); fi
  # Seeded bugs may hang by design: a short limit keeps the run short; the runner must then say so.
  if [ "$mutation" != "-" ]; then args+=(--mutate "$mutation" --no-static-check --timeout 5); else args+=(--timeout 60); fi
  local t0=$(date +%s.%N)
  timeout 150 "$RUNNER" "${args[@]}" >"$CASES/$name.json" 2>"$CASES/$name.err"
  local rc=$?
  local t1=$(date +%s.%N)
  echo "$name rc=$rc expected=$expected $(head -c 300 "$CASES/$name.err" | tr '\n' ' ')" >>"$LOG"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$expected" "$step" "$shape" "$dtype" "$seed" "$mutation" "$rc" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" "$emu_seed" "$clusters" >>"$OUT/cases.tsv"
}
export -f run_case
export RUNNER CASES LOG OUT

: >"$OUT/cases.tsv"
for dtype in f16 bf16; do
  [ "${SELFTEST:-1}" = 1 ] || break
  timeout 300 "$RUNNER" selftest --dtype "$dtype" --json >"$OUT/selftest-$dtype.json" 2>>"$LOG"
  echo "selftest $dtype rc=$?" | tee -a "$LOG"
done

# The case list: one line of run_case arguments per case, then JOBS at a time.
STEPS_JSON=$("$RUNNER" list --json)
MUTATIONS_JSON=$("$RUNNER" mutations --json)
echo "$MUTATIONS_JSON" >"$OUT/mutations.json"
export ONLY_MUTATIONS=${ONLY_MUTATIONS:-}
PERSISTENT_STEPS=${PERSISTENT_STEPS:-"4 5 6"}
CASELIST="$OUT/caselist.txt"
python3 - "$STEPS_JSON" "$MUTATIONS_JSON" "$SHAPES" "$DTYPES" "$SEEDS" "$EMU_SEEDS" "$MULTI_TILE" "$CONTROL_SHAPE" "$PERSISTENT_STEPS" >"$CASELIST" <<'PY'
import json, sys
steps = [s["number"] for s in json.loads(sys.argv[1])]
mutations = json.loads(sys.argv[2])
shapes, dtypes, seeds, emu_seeds = (a.split() for a in sys.argv[3:7])
multi = [c.split(":") for c in sys.argv[7].split()]
control, persistent = sys.argv[8], {int(s) for s in sys.argv[9].split()}
first = emu_seeds[0]
for step in steps:
    for shape in shapes:
        for dtype in dtypes:
            for seed in seeds:
                print(f"s{step}-{shape}-{dtype}-{seed}-e{first}", "pass", step, shape, dtype, seed, "-", first, "-")
    for e in emu_seeds[1:]:
        print(f"s{step}-{control}-f16-1-e{e}", "pass", step, control, "f16", 1, "-", e, "-")
    if step in persistent:
        for shape, clusters in multi:
            for e in emu_seeds:
                print(f"s{step}-{shape}-c{clusters}-f16-1-e{e}", "pass", step, shape, "f16", 1, "-", e, clusters)
import os
only = os.environ.get("ONLY_MUTATIONS", "").split()
for m in mutations:
    if only and m["name"] not in only:
        continue
    if m.get("arch", "sm_100a") != "sm_100a":
        continue  # a twin's seeded bug: gpu-check-stress.sh runs it natively
    expected = "fail" if m["expect"] == "caught" else "pass"
    for step in m["steps"]:
        if step not in steps:
            continue
        clusters = "1" if step in persistent else "-"
        for e in emu_seeds:
            print(f"s{step}-{m['name']}-c{clusters}-e{e}", expected, step, control, "f16", 1, m["name"], e, clusters)
PY
echo "$(wc -l <"$CASELIST") cases, $JOBS at a time" | tee -a "$LOG"
xargs -P "$JOBS" -L 1 bash -c 'run_case "$@"' _ <"$CASELIST"

python3 - "$OUT" "$COMMIT" "$CASES" <<'PY'
import json, os, subprocess, sys, datetime
out, commit, cases_dir = sys.argv[1], sys.argv[2], sys.argv[3]
smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip().split(", ")
gpu, driver = smi[0], smi[1] if len(smi) > 1 else "?"
date = datetime.date.today().isoformat()
cases, ok_all = [], True
caught_by = {m["name"]: m.get("caught_by", "") for m in json.load(open(os.path.join(out, "mutations.json")))}
rows = [line.rstrip("\n").split("\t") for line in open(os.path.join(out, "cases.tsv"))]
# Cases ran JOBS at a time: report them in the case list's order.
order = {l.split()[0]: i for i, l in enumerate(open(os.path.join(out, "caselist.txt")))}
rows.sort(key=lambda r: order.get(r[0], len(order)))
for name, expected, step, shape, dtype, seed, mutation, rc, secs, emu_seed, clusters in rows:
    rc = int(rc)
    rel = None
    try:
        rep = json.load(open(os.path.join(cases_dir, name + ".json")))["runs"][0]
        rel = rep["verification"]["rel_error_norm"]
        passed = rep["verification"]["passed"]
    except Exception:
        passed = None
    if rc == 0 and passed:
        outcome = "pass"
    elif rc == 1 and passed is False:
        outcome = "fail"
    elif rc in (124, 137):
        outcome = "hang"
    else:
        outcome = "error"
    err_text = open(os.path.join(cases_dir, name + ".err")).read()
    err = err_text.strip().splitlines()
    # A seeded bug counts as caught whether verification failed, the emulator trapped or it hung,
    # and, where the mutation names what must catch it, only if the error output says so.
    must_say = caught_by.get(mutation, "") if mutation != "-" else ""
    named = not must_say or must_say in err_text
    met = outcome == "pass" if expected == "pass" else (outcome != "pass" and named)
    ok_all &= met
    cases.append({"step": int(step), "shape": shape, "dtype": dtype, "seed": int(seed),
                  "emu_seed": int(emu_seed), "clusters": None if clusters == "-" else int(clusters),
                  "mutation": None if mutation == "-" else mutation, "expected": expected,
                  "outcome": outcome, "met_expectation": met, "exit_code": rc,
                  "rel_error_norm": rel if isinstance(rel, float) else None,
                  "seconds": round(float(secs), 2), "caught_by": must_say or None,
                  "named": named if must_say else None,
                  "detail": (next((l for l in err if must_say in l), err[-1]) if must_say and named else (err[-1] if err else ""))[:600]})
json.dump({"kind": "emulation", "gpu": gpu, "driver": driver, "date": date, "commit": commit,
           "mode": "tcgen05 emulated on sm_90a", "emu_seeds": [int(e) for e in os.environ.get("EMU_SEEDS", "1 2 3 4 5").split()],
           "cases": cases},
          open(os.path.join(out, "emulation.json"), "w"), indent=1)
st = []
for d in ("f16", "bf16"):
    try:
        t = json.load(open(os.path.join(out, f"selftest-{d}.json")))
        st.append({"shape": "{m}x{n}x{k}".format(**t["shape"]), "dtype": t["dtype"],
                   "cublas_median_us": t["cublas"]["median_us"], "cublas_tflops": t["cublas_tflops"],
                   "peak_tflops": t["peak_tflops"], "verified": t["verification"]["passed"],
                   "rel_error_norm": t["verification"]["rel_error_norm"]})
    except Exception as e:
        st.append({"dtype": d, "error": str(e)})
json.dump({"kind": "selftest", "gpu": gpu, "driver": driver, "date": date, "commit": commit, "cases": st},
          open(os.path.join(out, "selftest.json"), "w"), indent=1)
print(f"\n{'case':<58} {'expected':<8} {'outcome':<8} {'secs':>6}  rel.err")
for c in cases:
    name = (f"s{c['step']} {c['shape']} {c['dtype']} seed{c['seed']} emu{c['emu_seed']}"
            + (f" clusters{c['clusters']}" if c['clusters'] else "")
            + (f" [{c['mutation']}]" if c['mutation'] else ""))
    flag = "" if c["met_expectation"] else ("  <-- UNEXPECTED" + ("" if c["named"] is not False else f" (no '{c['caught_by']}' in its errors)"))
    print(f"{name:<58} {c['expected']:<8} {c['outcome']:<8} {c['seconds']:>6}  {c['rel_error_norm'] if c['rel_error_norm'] is not None else '-'}{flag}")
for s in st:
    print("selftest", s)
print("ALL EXPECTATIONS MET" if ok_all else "SOME CASES DID NOT MEET EXPECTATIONS")
sys.exit(0 if ok_all else 1)
PY
EMU_RC=$?

if [ "${TWINS:-1}" = 1 ]; then
  RUNNER="$RUNNER" OUT="$OUT" WB_COMMIT="$COMMIT" bash "$(dirname "$0")/gpu-check-twins.sh"
  TWIN_RC=$?
else
  TWIN_RC=0
fi
exit $((EMU_RC != 0 || TWIN_RC != 0))
