#!/usr/bin/env bash
# The ladder measured with confidence, and a twin's hang named, in ONE device call of at most
# 9 minutes on an H100/H200 (no build: a prebuilt runner). From the repository root:
#
#   R=target/release/runner WORKBOOK_CUDA=/usr/local/cuda OUT=folder gpu/ladder-ci.sh
#
# 1. bench: `runner bench` at both headline shapes (4096x8192x4096 and 8192^3), f16 and bf16,
#    steps 0-6 and every contender, with adaptive rounds: at least 30, then more until every
#    kernel's 95 % bootstrap interval of its speed ratio (to cuBLAS and to the kernel before
#    it) is within +-0.5 % of its median, or CAP seconds of timed rounds per shape and dtype
#    (default 55: 4 x 55 = 220 s of rounds; a round of cuBLAS and the 15 kernels, each after
#    an L2 flush, plus the 5 ms prime, should take about 20-25 ms at 4096x8192x4096 and 35-40
#    ms at 8192^3 (estimated from the committed bench's medians, not measured as a round), so
#    the cap allows roughly 2,200 and 1,400 rounds; the adaptive rule stops earlier where every
#    interval is narrow enough). The step-6 ideas of the issue among the
#    contenders: 6-hilbert (a Hilbert-curve tile order against the snake of bands) and 6-waves,
#    which at both headline shapes is the grid of 128 SMs against step 6's 132 (64 of the 66
#    clusters: 512 and 1024 tiles take 8 and 16 waves either way); each is compared with step 6
#    in the same rounds (vs_previous).
#    Writes $OUT/bench/bench-<gpu>-<date>.{json,svg} and bench.txt (the table, intervals and
#    verdicts). The whole bench is limited to BENCH_LIMIT seconds (default 380: the rounds, the
#    NVRTC builds of 15 kernels in two dtypes and the verifications).
# 2. hang: three twins that hang natively, each run once plainly: the runner times it out
#    (--timeout 10), re-runs it by itself as a hang diagnosis build (every mbarrier wait bounded
#    by 1 s) and prints which warps wait, in which role, on which barrier, for which parity,
#    and what arrived. The bugs: the seeded mutation twin-out-full-one-arrival (it hung on
#    every seed in the committed stress pass), and two planted in gpu/hang/ (a missing arrive,
#    a wrong parity). Then a control: the stock twin 6 as a hang diagnosis build must verify.
#    Each run is limited to 60 s, and none starts past BUDGET seconds (default 530) less its
#    limit; $OUT/hang/*.log.
# Printed: each hang's report, then last the bench's intervals and verdicts per case (the end of the
# output is what the device call's reply carries).
set -u
R=${R:-target/release/runner}
: "${OUT:?set OUT to the output folder}"
CAP=${CAP:-55}
BENCH_LIMIT=${BENCH_LIMIT:-380}
BUDGET=${BUDGET:-530}
# Whether a step of `limit` seconds still fits the budget.
fits() { [ $((BUDGET - SECONDS)) -ge "$1" ] || { echo "skipped (budget): $2"; false; }; }
export WORKBOOK_CUDA=${WORKBOOK_CUDA:-/usr/local/cuda}
B="$OUT/bench"
H="$OUT/hang"
mkdir -p "$B" "$H"
t0=$SECONDS  # 0: the budget counts from the script's start
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,power.limit,temperature.gpu --format=csv
  "$R" --version
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

# Every contender of runner/src/contenders.rs.
CONTENDERS=${CONTENDERS:-4-snake,5-pingpong,6-hilbert,6-l2hints,6-streamk,6-waves,6-wait2,6-workspace}
echo "contenders: $CONTENDERS"

echo "== bench (adaptive, cap ${CAP} s per shape and dtype)"
timeout "$BENCH_LIMIT" "$R" bench --contenders "$CONTENDERS" --time-cap "$CAP" --ci-target 0.5 \
  --iters 30 --warmup 5 --out "$B/run" >"$B/bench.txt" 2>"$B/bench.err"
echo "bench rc=$? in $((SECONDS - t0)) s"
tail -n 5 "$B/bench.err"

hang() { # name, then runner step arguments
  local name=$1 t=$SECONDS
  shift
  fits 60 "hang $name" || return 0
  timeout 60 "$R" step 6 --arch sm_90a --iters 0 --timeout 10 --no-static-check "$@" \
    >"$H/$name.log" 2>&1
  echo "== hang $name: rc=$? in $((SECONDS - t)) s (124: hung, the report below)"
  grep -E '^(error|  |verify)' "$H/$name.log" | head -n 40
}
hang out-full-one-arrival --mutate twin-out-full-one-arrival
hang no-out-empty-arrive --kernel gpu/hang/step6_no_out_empty_arrive.toml
hang wrong-empty-parity --kernel gpu/hang/step6_wrong_empty_parity.toml
# The control: a working twin built for diagnosis runs to the end and verifies.
t=$SECONDS
if fits 45 "the control"; then
  timeout 45 "$R" step 6 --arch sm_90a --iters 0 --timeout 30 --hang-diagnosis >"$H/control.log" 2>&1
  echo "== control: stock twin 6 as a hang diagnosis build: rc=$? in $((SECONDS - t)) s (0: verified)"
  grep -E '^(error|verify)' "$H/control.log" | head -n 5
fi

echo "== bench verdicts"
python3 - "$B/run" <<'EOF'
import glob, json, sys
files = sorted(glob.glob(sys.argv[1] + "/bench-*.json"))
if not files:
    print("no bench JSON"); sys.exit(0)
r = json.load(open(files[-1]))
print(files[-1], "commit", r["commit"], "adaptive", r.get("adaptive"))
for c in r["cases"]:
    x, v = c.get("ratio_to_cublas"), c.get("vs_previous")
    s = c["shape"]
    rounds = c["stats"]["runs"] if c.get("stats") else "-"
    line = f'{s["m"]}x{s["n"]}x{s["k"]} {c["dtype"]:4} {c["kernel"]:12} rounds {rounds:>5}'
    if x:
        line += f' x cuBLAS {x["median"]:.4f} [{x["ci95"][0]:.4f}, {x["ci95"][1]:.4f}] {x["verdict"]}'
    if v:
        y = v["ratio"]
        line += f' | vs {v["contender"]}: {y["median"]:.4f} [{y["ci95"][0]:.4f}, {y["ci95"][1]:.4f}] {y["verdict"]}'
    if c.get("cap_hit"):
        line += " (cap)"
    if c.get("skipped"):
        line += " SKIPPED: " + c["skipped"][:80]
    print(line)
EOF
echo "total $((SECONDS - t0)) s"
