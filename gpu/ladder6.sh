#!/usr/bin/env bash
# Ran once, at commit ef5fb68 (assets/results/ladder6-h100-2026-11-26/): no candidate paid, and
# the five contenders were removed after it (check that commit out to run this script again).
# The Hopper ladder's dips and step 6's last points: the candidates verified, benched beside the
# steps they vary, and the steps profiled, in ONE device call of at most 9.5 minutes on an H100
# (no build: a prebuilt runner). From the repository root:
#
#   R=target/release/runner WORKBOOK_CUDA=/usr/local/cuda OUT=folder gpu/ladder6.sh
#
# The candidates (runner/src/contenders.rs, assets/results/ladder-candidates-2026-11-26.md):
# 3-wgrelease and 6-wgrelease (one ring-slot release per consumer warpgroup instead of per warp:
# 4 cluster arrivals per slot instead of 16), 4-dynamic and 6-dynamic (tiles drawn from a global
# counter instead of a fixed share per cluster), 6-stmatrix (step 6's staging tile written with
# stmatrix). 6-streamk is benched beside them as the known contender.
#
# 1. verify (loud): each candidate once plainly at 4096x8192x4096 f16 and under a stress seed
#    (seeded delays at the wrappers' named points; two seeds for the dynamic schedules) at
#    1024^3 with 4 clusters, so that the ring wraps across tiles; the dynamic schedules also
#    after three launches in one process (their counters' reset); a run that does not print
#    "verify PASS" prints "VERIFICATION FAILED" in the summary and keeps the candidate out of
#    the bench (a hang there would end it). The bench verifies every kernel again before timing
#    (runner/src/bench/mod.rs: a failed kernel is left out of the timing, its row says
#    "verification failed"), and the summary repeats any such row under "BENCH LEFT OUT".
# 2. bench: `runner bench --steps 2,3,4,6 --contenders <candidates>,6-streamk` at both headline
#    shapes, f16 (adaptive rounds, CAP_F16 seconds per shape, default 35), then bf16 if the
#    budget allows (CAP_BF16, default 25). Each bench is one process under its own timeout, so a
#    late bf16 cannot take the f16 results with it.
# 3. ncu (Nsight Compute, clocks untouched, one launch each, `runner step N --arch sm_90a ...
#    --iters 0` as the profiled process: its first gemm_kernel launch is the verified one) of
#    steps 2, 3, 4, 6 at 4096x8192x4096 f16; then, budget allowing, steps 3 and 4 and 4-dynamic at
#    8192^3 (the second dip: per-SM spread of active cycles, DRAM bytes, L2 hit rate), then
#    (after the bf16 bench) the other candidates at 4096x8192x4096, last step 2 at 8192^3. Per
#    launch: SM throughput, tensor pipe, DRAM throughput and bytes, L2 hit rate, achieved
#    occupancy, grid size, registers, local (spill) instructions, SM active cycles (min / avg /
#    max over SMs), the five largest stall reasons.
# The lead's stopwatch, estimated (not measured as a whole): verify ~13 runs of 4-8 s, bench f16
# ~90 s, each profile 20-30 s, bench bf16 ~70 s; the budget cuts the last profiles first.
#
# Outputs (8 files, at most 1 folder deep): summary.txt (everything the lead needs; also the end
# of the output), log.txt (every command's output), ncu.txt (Nsight Compute's details pages),
# bench-f16/{bench.txt,bench-*.json,bench-*.svg}, bench-bf16/{bench.txt,bench-*.json}.
# Every stage runs under `timeout`, and none starts unless it fits what is left of BUDGET
# seconds (default 540), counted from the script's start.
set -u
R=${R:-target/release/runner}
: "${OUT:?set OUT to the output folder}"
BUDGET=${BUDGET:-540}
CAP_F16=${CAP_F16:-35}
CAP_BF16=${CAP_BF16:-25}
CANDIDATES=${CANDIDATES:-3-wgrelease,4-dynamic,6-dynamic,6-wgrelease,6-stmatrix}
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
export WORKBOOK_CUDA=${WORKBOOK_CUDA:-/usr/local/cuda}
mkdir -p "$OUT"
S="$OUT/summary.txt"
L="$OUT/log.txt"
TMP=$(mktemp -d)
: >"$S"
: >"$L"
say() { echo "$*" | tee -a "$S"; }
# Whether a stage of `limit` seconds still fits the budget.
fits() { [ $((BUDGET - SECONDS)) -ge "$1" ] || { say "skipped (budget, ${SECONDS} s gone): $2"; false; }; }

say "== ladder6 on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1)"
nvidia-smi --query-gpu=clocks.max.sm,clocks.sm,power.limit,temperature.gpu --format=csv >>"$S" 2>&1
"$R" --version >>"$S" 2>&1
say "candidates: $CANDIDATES"

# ---- 1. verify -------------------------------------------------------------------------------
file_of() { # contender name -> step and edit file
  case "$1" in
    3-wgrelease) echo "3 exercises/hopper/step3_wgrelease_sm90.toml" ;;
    4-dynamic) echo "4 exercises/hopper/step4_dynamic_sm90.toml" ;;
    6-dynamic) echo "6 exercises/hopper/step6_dynamic_sm90.toml" ;;
    6-wgrelease) echo "6 exercises/hopper/step6_wgrelease_sm90.toml" ;;
    6-stmatrix) echo "6 exercises/hopper/step6_stmatrix_sm90.toml" ;;
    *) echo "" ;;
  esac
}
FAILED=""
check() { # label, limit, then runner step arguments
  local label=$1 limit=$2 t=$SECONDS
  shift 2
  fits "$limit" "verify $label" || return 0
  echo "== verify $label: $R step $*" >>"$L"
  # --timeout 10: a hang is declared after 10 s and re-run as a hang diagnosis build, whose
  # report (the barrier, the parity, the waiting roles) lands in log.txt.
  timeout "$limit" "$R" step "$@" --timeout 10 >"$TMP/v.log" 2>&1
  local rc=$?
  cat "$TMP/v.log" >>"$L"
  local line
  line=$(grep -E '^(verify|registers|compile)' "$TMP/v.log" | tr -s ' ' | head -2 | tr '\n' ';')
  if grep -qE '^verify +PASS' "$TMP/v.log" && ! grep -qE '^verify +FAIL' "$TMP/v.log"; then
    say "verify $label: PASS rc=$rc in $((SECONDS - t)) s | $line"
  else
    say "VERIFICATION FAILED: $label rc=$rc (124: timed out) | $line"
    grep -E '^error' "$TMP/v.log" | head -n 5 | tee -a "$S"
    # A failed check keeps the candidate out of the bench, unless NOGATE is set (a check whose
    # failure the bench itself would show without hanging).
    [ -n "${NOGATE:-}" ] || FAILED="$FAILED $label"
  fi
}
say "== 1. verify"
IFS=, read -r -a CANDS <<<"$CANDIDATES"
for c in "${CANDS[@]}"; do
  read -r step file <<<"$(file_of "$c")"
  [ -n "${file:-}" ] || { say "unknown candidate $c (no edit file known to this script)"; continue; }
  check "$c 4096x8192x4096" 45 "$step" --arch sm_90a --kernel "$file" --iters 0
  small=(--m 1024 --n 1024 --k 1024)
  [ "$step" -ge 4 ] && small+=(--clusters 4)
  seeds="1"
  [[ "$c" == *dynamic ]] && seeds="1 2"  # new barriers and data across the pair: one seed more
  for seed in $seeds; do
    check "$c stress $seed 1024^3" 45 "$step" --arch sm_90a --kernel "$file" --stress "$seed" "${small[@]}"
  done
  if [ "$c" = 4-dynamic ] || [ "$c" = 6-dynamic ]; then
    # Its counters must be back at 0 after every launch: a traced run launches 3 warm-ups first,
    # then the verified launch (steps/common/src/run.rs).
    # Not a gate: a counter left wrong makes the next launch draw no tile and fail verification
    # (the bench verifies its last timed output too), it cannot hang.
    NOGATE=1 check "$c after 3 launches 1024^3" 45 "$step" --arch sm_90a --kernel "$file" --trace "$TMP/trace" \
      --trace-clusters 1 --warmup 3 "${small[@]}"
  fi
done

# ---- 2. bench --------------------------------------------------------------------------------
verdicts() { # bench folder
  python3 - "$1" <<'EOF'
import glob, json, sys
files = sorted(glob.glob(sys.argv[1] + "/bench-*.json"))
if not files:
    print("no bench JSON in", sys.argv[1]); sys.exit(0)
r = json.load(open(files[-1]))
print(files[-1].split("/")[-1], "commit", r["commit"], "adaptive", r.get("adaptive"))
left = []
for c in r["cases"]:
    x, v, s = c.get("ratio_to_cublas"), c.get("vs_previous"), c["shape"]
    rounds = c["stats"]["runs"] if c.get("stats") else "-"
    clk = c.get("clocks") or {}
    line = f'{s["m"]}x{s["n"]}x{s["k"]} {c["dtype"]:4} {c["kernel"]:12} n={rounds:>5} {clk.get("sm_mhz_median", "-")} MHz'
    if x:
        line += f' xcuBLAS {x["median"]:.4f} [{x["ci95"][0]:.4f}, {x["ci95"][1]:.4f}] {x["verdict"]}'
    if v:
        y = v["ratio"]
        line += f' | vs {v["contender"]}: {y["median"]:.4f} [{y["ci95"][0]:.4f}, {y["ci95"][1]:.4f}] {y["verdict"]}'
    if c.get("skipped"):
        line += " SKIPPED: " + c["skipped"][:100]
        left.append(f'{c["kernel"]} {s["m"]}x{s["n"]}x{s["k"]} {c["dtype"]}: {c["skipped"][:160]}')
    print(line)
for l in left:
    print("BENCH LEFT OUT:", l)
EOF
}
bench() { # dtype, cap, limit
  local d=$1 cap=$2 limit=$3 t=$SECONDS B="$OUT/bench-$1"
  fits "$limit" "bench $d" || return 0
  mkdir -p "$B"
  timeout "$limit" "$R" bench --steps 2,3,4,6 --contenders "$BENCHED" --dtypes "$d" \
    --time-cap "$cap" --ci-target 0.5 --iters 30 --warmup 5 --out "$B/run" >"$B/bench.txt" 2>"$TMP/bench.err"
  local rc=$?
  tail -n 20 "$TMP/bench.err" >>"$L"
  say "== bench $d: rc=$rc (124: timed out) in $((SECONDS - t)) s"
  verdicts "$B/run" 2>&1 | tee -a "$S"
}
# A candidate that failed its checks stays out of the bench: a hang there would end the bench.
BENCHED=6-streamk
for c in "${CANDS[@]}"; do
  if [[ " $FAILED " == *" $c "* ]]; then say "left out of the bench: $c (failed above)"; else BENCHED="$BENCHED,$c"; fi
done
say "== 2. bench f16: steps 2,3,4,6 and $BENCHED"
bench f16 "$CAP_F16" 170

# ---- 3. ncu ------------------------------------------------------------------------------------
METRICS=sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__registers_per_thread,smsp__sass_inst_executed_op_local_ld.sum,smsp__sass_inst_executed_op_local_st.sum,sm__cycles_active.min,sm__cycles_active.avg,sm__cycles_active.max,sm__cycles_elapsed.avg,sm__cycles_elapsed.avg.per_second,gpu__time_duration.sum
# The metrics an earlier run of this Nsight Compute took (gpu/ladder3.sh): the fallback.
METRICS_OLD=sm__cycles_active.avg,sm__cycles_elapsed.avg,sm__cycles_elapsed.avg.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__t_sector_hit_rate.pct,dram__bytes_read.sum
SECTIONS=(--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats)
prof() { # label, m n k, then runner step arguments
  local label=$1 m=$2 n=$3 k=$4 t=$SECONDS
  shift 4
  fits 50 "ncu $label" || return 0
  timeout 50 "$NCU" --clock-control none "${SECTIONS[@]}" --metrics "$METRICS" -k regex:gemm_kernel -c 1 \
    -f -o "$TMP/$label" "$R" step "$@" --arch sm_90a --m "$m" --n "$n" --k "$k" --iters 0 >"$TMP/p.log" 2>&1
  local rc=$?
  if [ "$rc" != 0 ] && grep -qiE 'metric|failed to find' "$TMP/p.log" && fits 50 "ncu $label (fewer metrics)"; then
    # A metric this Nsight Compute does not know fails the whole run: the ones known to work.
    cat "$TMP/p.log" >>"$L"
    timeout 50 "$NCU" --clock-control none "${SECTIONS[@]}" --metrics "$METRICS_OLD" -k regex:gemm_kernel -c 1 \
      -f -o "$TMP/$label" "$R" step "$@" --arch sm_90a --m "$m" --n "$n" --k "$k" --iters 0 >"$TMP/p.log" 2>&1
    rc="$rc, then $?"
  fi
  echo "== ncu $label" >>"$L"
  cat "$TMP/p.log" >>"$L"
  say "ncu $label: rc=$rc in $((SECONDS - t)) s $(grep -E '^verify' "$TMP/p.log" | tr -s ' ' | head -1)"
  if [ -f "$TMP/$label.ncu-rep" ]; then
    { echo "==== $label: runner step $* --m $m --n $n --k $k f16"; "$NCU" --import "$TMP/$label.ncu-rep" --page details; } >>"$OUT/ncu.txt" 2>&1
    "$NCU" --import "$TMP/$label.ncu-rep" --page raw --csv >"$TMP/$label.csv" 2>>"$L"
    python3 - "$TMP/$label.csv" <<'EOF' 2>&1 | tee -a "$S"
import csv, re, sys
rows = list(csv.reader(open(sys.argv[1])))
if len(rows) < 3:
    print("  no metrics"); sys.exit(0)
names, units, vals = rows[0], rows[1], rows[2]
m = dict(zip(names, vals))
def g(k, fmt="{}"):
    v = m.get(k)
    if v is None or v == "":
        return "-"
    try:
        return fmt.format(float(v.replace(",", "")))
    except ValueError:
        return v
print("  SM throughput %s | tensor pipe %s of elapsed, %s of active | DRAM %s, %s B read | L2 hit %s | occupancy %s"
      % (g("sm__throughput.avg.pct_of_peak_sustained_elapsed", "{:.1f} %"),
         g("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed", "{:.1f} %"),
         g("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", "{:.1f} %"),
         g("dram__throughput.avg.pct_of_peak_sustained_elapsed", "{:.1f} %"),
         g("dram__bytes_read.sum", "{:.3g}"), g("lts__t_sector_hit_rate.pct", "{:.1f} %"),
         g("sm__warps_active.avg.pct_of_peak_sustained_active", "{:.1f} %")))
print("  grid %s regs %s local ld/st %s/%s | SM active cycles min/avg/max %s/%s/%s of %s elapsed at %s | %s"
      % (g("launch__grid_size", "{:.0f}"), g("launch__registers_per_thread", "{:.0f}"),
         g("smsp__sass_inst_executed_op_local_ld.sum", "{:.0f}"), g("smsp__sass_inst_executed_op_local_st.sum", "{:.0f}"),
         g("sm__cycles_active.min", "{:.0f}"), g("sm__cycles_active.avg", "{:.0f}"), g("sm__cycles_active.max", "{:.0f}"),
         g("sm__cycles_elapsed.avg", "{:.0f}"), g("sm__cycles_elapsed.avg.per_second", "{:.3g}"),
         "duration " + g("gpu__time_duration.sum", "{:.4g}") + " " + dict(zip(names, units)).get("gpu__time_duration.sum", "")))
stalls = []
for k, v in m.items():
    x = re.fullmatch(r"smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio", k)
    if x:
        try:
            stalls.append((float(v.replace(",", "")), x.group(1)))
        except ValueError:
            pass
stalls.sort(reverse=True)
print("  top stalls (warp cycles per issued instruction): " + ", ".join(f"{n} {v:.2f}" for v, n in stalls[:5]))
EOF
  fi
}
say "== 3. ncu at 4096x8192x4096 f16"
for s in 2 3 4 6; do
  prof "step$s-S1" 4096 8192 4096 "$s"
done

say "== 3b. ncu: the second dip at 8192^3: steps 3 and 4, and 4-dynamic"
for s in 3 4; do
  prof "step$s-S2" 8192 8192 8192 "$s"
done
if [[ ",$BENCHED," == *",4-dynamic,"* ]]; then
  prof "4-dynamic-S2" 8192 8192 8192 4 --kernel exercises/hopper/step4_dynamic_sm90.toml
fi

say "== 2b. bench bf16"
bench bf16 "$CAP_BF16" 110

say "== 3c. ncu: the other candidates at 4096x8192x4096"
for c in "${CANDS[@]}"; do
  read -r step file <<<"$(file_of "$c")"
  [ -n "${file:-}" ] || continue
  [ "$c" = 4-dynamic ] && continue
  [[ ",$BENCHED," == *",$c,"* ]] || continue
  prof "$c-S1" 4096 8192 4096 "$step" --kernel "$file"
done
say "== 3d. ncu: step 2 at 8192^3 (its 75 % there)"
prof "step2-S2" 8192 8192 8192 2

[ -n "$FAILED" ] && say "VERIFICATION FAILED (see above):$FAILED"
rm -f "$OUT"/bench-bf16/*.svg
rm -rf "$TMP"
say "total ${SECONDS} s"
# The end of the output is what the device call's reply carries: the summary.
echo "================ summary"
cat "$S"
