#!/usr/bin/env bash
# Issue 18 item 3 and the step-6 profile, on one H100/H200 (run from the checkout's root):
#
#   R=path/to/runner OUT=folder WORKBOOK_CUDA=/usr/local/cuda gpu/ladder.sh [verify] [bench] [ncu] [trace]
#
#   verify  the new step-6 contenders (6-streamk, 6-waves, 6-wait2) at odd shapes and capped
#           grids where the stream-K tail splits tiles among 1 to 64 helpers;
#   bench   `runner bench --steps 4,5,6` with every step-6 contender (both dtypes, both shapes;
#           every output verified before timing);
#   ncu     Nsight Compute (clocks untouched) of step 6's twin and cuBLAS's timed f16 call at
#           4096x8192x4096 and 8192^3;
#   trace   traces of twins 5 and 6 at 4096x8192x4096;
#   round2  why 6-streamk pays at one shape only: traces of the launch's end (gpu/trace_tail.py),
#           SM-active cycles under Nsight Compute, the bench of step 6 and 6-streamk again;
#   round3  the control 6-workspace (step 6 plus 6-streamk's unused workspace) benched beside
#           step 6 and 6-streamk (about 1 minute; the lead's run, not made in this session).
# Everything is written under /tmp/wb-ladder/ladder and tarred into $OUT/ladder.tar.gz (the
# Nsight Compute reports into $OUT/ncu-reps.tar.gz), so that few files come back; a summary is
# printed last and copied to $OUT/summary.txt.
set -u
R=${R:-target/release/runner}
W=/tmp/wb-ladder
O=$W/ladder
rm -rf "$W"
mkdir -p "$O" "${OUT:=/tmp/wb-ladder-out}"
STAGES=${*:-verify bench ncu trace}
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
SUMMARY="$O/summary.txt"
# Seconds the whole script may take (the tar included): a stage that would start later is skipped.
BUDGET=${BUDGET:-420}
left() { [ $((BUDGET - SECONDS)) -gt "$1" ] || { note "skipped (budget): $2"; false; }; }
: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }

{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,power.limit,temperature.gpu --format=csv
  "$NCU" --version | tail -1
  "$R" --version
  git rev-parse --short HEAD 2>/dev/null || cat COMMIT 2>/dev/null  # the mirror has no .git
} >"$O/env.txt" 2>&1
note "env: $(tr '\n' ' ' <"$O/env.txt")"

case_run() { # name args...
  local name=$1
  shift
  left 200 "verify $name" || return 0
  timeout 60 "$R" step 6 --arch sm_90a --iters 0 --timeout 20 --json "$@" >"$O/v-$name.json" 2>"$O/v-$name.err"
  local rc=$?
  local pass
  pass=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["runs"][0]; print(r["verification"]["passed"], r["verification"].get("rel_error_norm", r["verification"].get("rel_error")))' "$O/v-$name.json" 2>/dev/null || echo "no-json")
  note "verify $name rc=$rc $pass"
  [ "$rc" = 0 ] || FAILED="$FAILED ${name%%-*}"
}
FAILED=""

if [[ " $STAGES " == *" verify "* ]]; then
  for v in streamk waves wait2; do
    # A whole kernel (.cu) or edits of step 6's twin (.toml): `runner step --kernel` takes both.
    f=$(ls exercises/hopper/step6_${v}_sm90.cu exercises/hopper/step6_${v}_sm90.toml 2>/dev/null | head -n1)
    case_run "$v-768x1280x192" --kernel "$f" --m 768 --n 1280 --k 192
    case_run "$v-768x1280x192-c4" --kernel "$f" --m 768 --n 1280 --k 192 --clusters 4
    case_run "$v-2048x2048x512-c3" --kernel "$f" --m 2048 --n 2048 --k 512 --clusters 3 --seed 4
    case_run "$v-2304x2816x704-bf16-c4" --kernel "$f" --m 2304 --n 2816 --k 704 --dtype bf16 --seed 7 --clusters 4
    case_run "$v-256x256x4096" --kernel "$f" --m 256 --n 256 --k 4096 --dtype bf16
  done
fi

if [[ " $STAGES " == *" bench "* ]]; then
  # A contender that failed a check above (a hang would stop the whole bench) is left out.
  CONTENDERS=${CONTENDERS:-6-l2hints$(for v in streamk waves wait2; do [[ " $FAILED " == *" $v "* ]] || printf ',6-%s' "$v"; done)}
  note "bench contenders: $CONTENDERS"
  left 60 bench && timeout $((BUDGET - SECONDS - 30)) "$R" bench --steps 4,5,6 --contenders "$CONTENDERS" \
    --out "$O" >"$O/bench.txt" 2>"$O/bench.err"
  note "bench rc=$?"
  tail -40 "$O/bench.txt" >>"$SUMMARY"
fi

if [[ " $STAGES " == *" ncu "* ]]; then
  for shape in 4096x8192x4096 8192x8192x8192; do
    IFS=x read -r m n k <<<"$shape"
    # Step 6's twin: its one verified launch.
    left 60 "ncu $shape" || continue
    timeout 90 "$NCU" --clock-control none --set full -k regex:gemm_kernel -c 1 -f -o "$O/ncu-step6-$shape" \
      "$R" step 6 --arch sm_90a --m "$m" --n "$n" --k "$k" --iters 0 >"$O/ncu-step6-$shape.log" 2>&1
    note "ncu step6 $shape rc=$?"
    # cuBLAS's timed call: after the f32-output reference and the round's 48 priming products,
    # the last nvjet launch of `--iters 1 --warmup 0`; the last three are profiled.
    timeout 90 "$NCU" --clock-control none --set full -k regex:nvjet --launch-skip 47 -c 3 -f -o "$O/ncu-cublas-$shape" \
      "$R" step 6 --arch sm_90a --m "$m" --n "$n" --k "$k" --iters 1 --warmup 0 >"$O/ncu-cublas-$shape.log" 2>&1
    note "ncu cublas $shape rc=$?"
    for w in step6 cublas; do
      rep="$O/ncu-$w-$shape.ncu-rep"
      [ -f "$rep" ] || continue
      "$NCU" --import "$rep" --page details >"$O/ncu-$w-$shape.txt" 2>&1
      "$NCU" --import "$rep" --page raw --csv >"$O/ncu-$w-$shape.csv" 2>&1
      grep -E '^  [a-z_]|Duration|SM Frequency|Compute \(SM\) Throughput|Registers Per|Stall|Issue Slots|Grid Size|Cluster Size' \
        "$O/ncu-$w-$shape.txt" | head -40 >>"$SUMMARY"
    done
  done
fi

if [[ " $STAGES " == *" trace "* ]]; then
  for s in 5 6; do
    left 45 "trace $s" || continue
    timeout 40 "$R" step "$s" --arch sm_90a --trace "$O/trace" >"$O/trace-step$s.log" 2>&1
    note "trace step $s rc=$? $(grep -i verify "$O/trace-step$s.log" | head -1)"
  done
fi

if [[ " $STAGES " == *" round2 "* ]]; then
  # Why 6-streamk pays at 8192^3 but not at 4096x8192x4096: the end of a traced launch, cluster
  # by cluster (16 clusters), the SM-active share under Nsight Compute, and the bench again.
  SK=steps/step7_last_wave/src/kernel_sm90.cu
  for k in stock streamk; do
    args=()
    [ "$k" = streamk ] && args=(--kernel "$SK")
    left 40 "trace $k" || continue
    timeout 40 "$R" step 6 --arch sm_90a "${args[@]}" --trace "$O/tr-$k" --trace-clusters 16 >"$O/tr-$k.log" 2>&1
    note "trace $k rc=$?"
    python3 gpu/trace_tail.py "$O/tr-$k-step6-sm_90a.json" >>"$SUMMARY" 2>&1
    rm -f "$O/tr-$k-step6-sm_90a.json" "$O/tr-$k-step6-sm_90a.svg"  # too large to bring back
  done
  for shape in 4096x8192x4096 8192x8192x8192; do
    IFS=x read -r m n k <<<"$shape"
    for v in stock streamk; do
      args=()
      [ "$v" = streamk ] && args=(--kernel "$SK")
      left 30 "ncu $v $shape" || continue
      timeout 40 "$NCU" --clock-control none --section SpeedOfLight \
        --metrics sm__cycles_active.avg,sm__cycles_elapsed.avg,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed \
        -k regex:gemm_kernel -c 1 "$R" step 6 --arch sm_90a "${args[@]}" --m "$m" --n "$n" --k "$k" --iters 0 >"$O/ncu2-$v-$shape.txt" 2>&1
      note "ncu $v $shape rc=$?"
      grep -E 'Duration|SM Frequency|Compute \(SM\)|sm__cycles|sm__pipe' "$O/ncu2-$v-$shape.txt" >>"$SUMMARY"
    done
  done
  left 40 "bench again" && timeout $((BUDGET - SECONDS - 20)) "$R" bench --steps 6 --contenders 6-streamk \
    --out "$O/again" >"$O/bench-again.txt" 2>&1
  note "bench again rc=$?"
  grep -E 'cublas|step 6|6-streamk' "$O/bench-again.txt" >>"$SUMMARY"
fi

if [[ " $STAGES " == *" round3 "* ]]; then
  # The control: is 6-streamk's whole-tile phase slower because of its 17 MB of module globals?
  case_run workspace-768x1280x192-c4 --kernel exercises/hopper/step6_workspace_sm90.toml --m 768 --n 1280 --k 192 --clusters 4
  left 40 "bench control" && timeout $((BUDGET - SECONDS - 20)) "$R" bench --steps 6 --contenders 6-streamk,6-workspace \
    --out "$O/control" >"$O/bench-control.txt" 2>&1
  note "bench control rc=$?"
  grep -E 'cublas|step 6|6-streamk|6-workspace' "$O/bench-control.txt" >>"$SUMMARY"
fi

# The reports apart: they may be too large to come back, the text pages must.
tar -C "$W" --exclude '*.ncu-rep' -czf "$OUT/ladder.tar.gz" ladder
ls "$O"/*.ncu-rep >/dev/null 2>&1 && tar -C "$O" -czf "$OUT/ncu-reps.tar.gz" $(cd "$O" && ls *.ncu-rep)
cp "$SUMMARY" "$OUT/summary.txt"
cat "$SUMMARY"
