#!/usr/bin/env bash
# GPU check of issue 23 items 6 and 7 (the twins' stress runs, the emulation's cost), for an
# H100/H200, from the repository root:
#
#   R=path/to/runner WORKBOOK_CUDA=/usr/local/cuda OUT=folder gpu/stress.sh
#
# 1. The emulation's cost: steps 2-6, `runner step N --emulate --time-emulation 3`: the emulation
#    build without the rules of issue 23 (WB_EMU_STRICT=0: async proxy, bulk groups, tcgen05.ld
#    poison, cta_group) and with them, each verified once, then 3 launches each, alternating (the
#    static checks are skipped: they are not what is timed). First, so nothing else runs on the GPU.
# 2. The stress pass (`runner check twins --stress`): every twin 0-6 under --stress 3, 6, 11 at
#    the default shape and (twins 4-6) 2048x2048x512 on 2 clusters; every twin mutation of
#    `runner mutations` under the same seeds (with a plain run beside each stress-caught one), the
#    static ones also refused by the static check.
# Writes $OUT/stress/emulation-cost.json, $OUT/stress/stress.json (kind twin-stress) and
# stress-log.txt. Takes about 2.5 minutes.
# Success: the last line is "ALL STRESS CHECKS MET" (every stock twin verified under every seed,
# every stress-caught mutation caught on each twin under every seed -- the table says
# under which, and what a plain run did --, every static one refused) and the cost table shows
# both builds verified for every step; exit 0.
set -u
RUNNER=${R:-${RUNNER:-target/release/runner}}
OUT=${OUT:-/tmp/wb-stress}
DIR="$OUT/stress"
mkdir -p "$DIR"
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
T=$(mktemp -d)

for step in 2 3 4 5 6; do
  timeout 120 "$RUNNER" step "$step" --emulate --time-emulation 3 --no-static-check --timeout 60 --json \
    >"$T/cost-$step.json" 2>"$T/cost-$step.err"
  echo "cost s$step rc=$?"
done
python3 - "$T" "$DIR" "$COMMIT" <<'PY'
import json, os, sys
t, out, commit = sys.argv[1:4]
rows, ok = [], True
for step in (2, 3, 4, 5, 6):
    try:
        c = json.load(open(os.path.join(t, f"cost-{step}.json")))["emulation_cost"]
    except Exception:
        err = open(os.path.join(t, f"cost-{step}.err")).read().strip().splitlines()
        rows.append({"step": step, "error": err[-1] if err else "no output"})
        ok = False
        continue
    off, on = c["rules_off"], c["rules_on"]
    ok &= off["verification"]["passed"] and on["verification"]["passed"]
    rows.append({"step": step, "gpu": c["gpu"]["name"], "shape": "{m}x{n}x{k}".format(**c["shape"]),
                 "grid": c["grid"], "off_median_ms": off["median_ms"], "on_median_ms": on["median_ms"],
                 "off_ms": off["launches_ms"], "on_ms": on["launches_ms"], "cost_pct": c["cost_pct"],
                 "verified": [off["verification"]["passed"], on["verification"]["passed"]]})
json.dump({"kind": "emulation-cost", "commit": commit,
           "mode": "runner step N --emulate --time-emulation 3 --no-static-check: wall time of launch + wait, WB_EMU_STRICT=0 vs 1",
           "steps": rows}, open(os.path.join(out, "emulation-cost.json"), "w"), indent=1)
print(f"\n{'step':<5} {'rules off ms':>12} {'rules on ms':>12} {'cost':>8}  verified")
for r in rows:
    if "error" in r:
        print(f"s{r['step']:<4} error: {r['error'][:100]}")
    else:
        print(f"s{r['step']:<4} {r['off_median_ms']:>12.1f} {r['on_median_ms']:>12.1f} {r['cost_pct']:>+7.1f}%  {r['verified']}")
print("emulation cost: both builds verified on every step" if ok else "emulation cost: SOME BUILD FAILED")
sys.exit(0 if ok else 1)
PY
COST_RC=$?

# Exit 0 every check met, 1 some did not, 2 an error, 124 the whole pass ran past its limit.
timeout 300 "$RUNNER" check twins --stress --jobs "${JOBS:-6}" --out "$DIR"
STRESS_RC=$?
exit $((COST_RC != 0 || STRESS_RC != 0))
