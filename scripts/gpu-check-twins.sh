#!/usr/bin/env bash
# The Hopper twins' part of the GPU check (called by gpu-check.sh; runs alone too):
#
#   RUNNER=path/to/runner OUT=folder WB_COMMIT=<sha> scripts/gpu-check-twins.sh
#
# 1. every step's Hopper twin, natively, on every check shape it accepts (the emulation check's
#    shapes plus odd ones: K not a power of two, M and N odd multiples of the tile) x f16/bf16
#    x seeds, plus other input distributions, and the persistent twins with a capped grid so
#    each cluster loops over many tiles; each must verify (poisoned output, cuBLAS and fp64);
# 2. `runner bench` (all steps and the contenders 5-pingpong and 6-l2hints, both dtypes, the
#    default shapes; BENCH_ARGS adds e.g. --sweep; BENCH=0 skips it);
# 3. the stress pass (scripts/gpu-check-stress.sh: every twin under --stress SEED for STRESS_SEEDS,
#    and the twins' seeded bugs of `runner mutations`, each caught as it claims; STRESS=0 skips it).
# Writes $OUT/twins.json, $OUT/stress.json and the bench's JSON and SVG into $OUT; prints a
# summary table last. Exit 0 only if every twin verified, the bench ran and the stress pass met
# its expectations.
set -u
RUNNER=${RUNNER:-target/release/runner}
OUT=${OUT:-/tmp/wb-gpu-check}
COMMIT=${WB_COMMIT:-unknown}
CASES=$(mktemp -d)
mkdir -p "$OUT"
LOG="$OUT/twins-log.txt"
: >"$LOG"
chmod +x "$RUNNER" 2>/dev/null

SHAPES=${TWIN_SHAPES:-"512x1024x512 256x768x320 1024x512x2048 256x256x4096 4096x8192x4096 768x1280x192 2304x2816x704"}
DTYPES=${DTYPES:-"f16 bf16"}
SEEDS=${SEEDS:-"1 2"}
BENCH_ARGS=${BENCH_ARGS:-}

# "step m n k persistent" per twin, from the runner itself.
"$RUNNER" list --json | python3 -c '
import json, sys
for s in json.load(sys.stdin):
    t = s["tiles"]["sm_90a"]
    print(s["number"], t["cluster_m"], t["cluster_n"], t["tile_k"], int(t["persistent"]))' >"$CASES/tiles.txt"

: >"$OUT/twins.tsv"
twin_case() { # name step shape dtype seed dist clusters
  local name=$1 step=$2 shape=$3 dtype=$4 seed=$5 dist=$6 clusters=$7
  IFS=x read -r m n k <<<"$shape"
  local args=(step "$step" --arch sm_90a --m "$m" --n "$n" --k "$k" --dtype "$dtype" --seed "$seed" --dist "$dist" --iters 0 --timeout 20 --json)
  [ "$clusters" != "-" ] && args+=(--clusters "$clusters")
  local t0=$(date +%s.%N)
  timeout 120 "$RUNNER" "${args[@]}" >"$CASES/$name.json" 2>"$CASES/$name.err"
  local rc=$?
  local t1=$(date +%s.%N)
  echo "$name rc=$rc $(head -c 300 "$CASES/$name.err" | tr '\n' ' ')" >>"$LOG"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$step" "$shape" "$dtype" "$seed" "$dist" "$clusters" "$rc" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" >>"$OUT/twins.tsv"
}

while read -r step tm tn tk persistent; do
  for shape in $SHAPES; do
    IFS=x read -r m n k <<<"$shape"
    if [ $((m % tm)) -ne 0 ] || [ $((n % tn)) -ne 0 ] || [ $((k % tk)) -ne 0 ]; then
      continue  # not a shape this twin accepts (its tiles say so; the runner would refuse it)
    fi
    for dtype in $DTYPES; do
      for seed in $SEEDS; do
        twin_case "t${step}-${shape}-${dtype}-${seed}" "$step" "$shape" "$dtype" "$seed" gaussian -
      done
    done
  done
  # Other distributions: small integers make every product and sum exact.
  for dist in uniform int; do
    twin_case "t${step}-1024x1024x1024-bf16-3-${dist}" "$step" 1024x1024x1024 bf16 3 "$dist" -
  done
  # Persistent twins: one and three clusters loop over every tile of a mid-size problem.
  if [ "$persistent" = 1 ]; then
    for c in 1 3; do
      twin_case "t${step}-2048x2048x512-f16-4-c${c}" "$step" 2048x2048x512 f16 4 gaussian "$c"
    done
  fi
done <"$CASES/tiles.txt"

if [ "${BENCH:-1}" = 0 ]; then
  echo "bench skipped (BENCH=0)" >"$OUT/bench.txt"
  BENCH_RC=0
else
  timeout 900 "$RUNNER" bench --contenders 5-pingpong,6-l2hints --out "$OUT" $BENCH_ARGS >"$OUT/bench.txt" 2>>"$LOG"
  BENCH_RC=$?
fi

if [ "${STRESS:-1}" = 0 ]; then
  STRESS_RC=0
else
  RUNNER="$RUNNER" OUT="$OUT" WB_COMMIT="$COMMIT" bash "$(dirname "$0")/gpu-check-stress.sh" >"$OUT/stress.txt" 2>>"$LOG"
  STRESS_RC=$?
fi

python3 - "$OUT" "$COMMIT" "$CASES" "$BENCH_RC" <<'PY'
import json, os, subprocess, sys, datetime
out, commit, cases_dir, bench_rc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip().split(", ")
gpu, driver = smi[0], smi[1] if len(smi) > 1 else "?"
cases, ok_all = [], True
for line in open(os.path.join(out, "twins.tsv")):
    name, step, shape, dtype, seed, dist, clusters, rc, secs = line.rstrip("\n").split("\t")
    rc = int(rc)
    rel, passed, grid = None, None, None
    try:
        rep = json.load(open(os.path.join(cases_dir, name + ".json")))["runs"][0]
        rel = rep["verification"]["rel_error_norm"]
        passed = rep["verification"]["passed"]
        grid = rep["grid"]
    except Exception:
        pass
    outcome = "pass" if rc == 0 and passed else "fail" if rc == 1 else "hang" if rc in (124, 137) else "error"
    ok_all &= outcome == "pass"
    err = open(os.path.join(cases_dir, name + ".err")).read().strip().splitlines()
    cases.append({"step": int(step), "shape": shape, "dtype": dtype, "seed": int(seed), "dist": dist,
                  "clusters": None if clusters == "-" else int(clusters), "grid": grid,
                  "outcome": outcome, "exit_code": rc,
                  "rel_error_norm": rel if isinstance(rel, float) else None,
                  "seconds": round(float(secs), 2), "detail": err[-1][:300] if err else ""})
json.dump({"kind": "twins", "gpu": gpu, "driver": driver, "date": datetime.date.today().isoformat(),
           "commit": commit, "mode": "Hopper twins, native sm_90a, verified against cuBLAS and fp64 samples",
           "cases": cases}, open(os.path.join(out, "twins.json"), "w"), indent=1)
print(f"\n{'twin case':<44} {'outcome':<8} {'secs':>6}  rel.err")
for c in cases:
    name = f"t{c['step']} {c['shape']} {c['dtype']} seed{c['seed']} {c['dist']}" + (f" clusters={c['clusters']}" if c["clusters"] else "")
    flag = "" if c["outcome"] == "pass" else "  <-- UNEXPECTED"
    print(f"{name:<44} {c['outcome']:<8} {c['seconds']:>6}  {c['rel_error_norm'] if c['rel_error_norm'] is not None else '-'}{flag}")
print(open(os.path.join(out, "bench.txt")).read())
print(f"twins: {sum(c['outcome'] == 'pass' for c in cases)} of {len(cases)} verified; bench exit {bench_rc}")
ok_all &= bench_rc == 0
print("ALL TWIN CHECKS MET" if ok_all else "SOME TWIN CHECKS FAILED")
sys.exit(0 if ok_all else 1)
PY
TWIN_RC=$?
[ -f "$OUT/stress.txt" ] && tail -n 40 "$OUT/stress.txt"
exit $((TWIN_RC != 0 || STRESS_RC != 0))
