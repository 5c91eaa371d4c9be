#!/usr/bin/env bash
# The L2-hint contender verified, then the ladder's twins 4-6 with both contenders timed again.
set -u
R=.gpu-twins/runner
export WORKBOOK_CUDA=/usr/local/cuda
chmod +x $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
cases=$(mktemp)
for shape in 512x1024x512 256x768x320 768x1280x192 2304x2816x704 4096x8192x4096; do
  for dt in f16 bf16; do for seed in 1 2; do echo "$shape $dt $seed gaussian - 1"; done; done
done > $cases
for c in 1 3; do for dt in f16 bf16; do echo "2048x2048x512 $dt 4 gaussian $c 1"; done; done >> $cases
echo "2304x2816x704 bf16 5 gaussian 7 1" >> $cases
echo "2304x2816x704 f16 5 gaussian 7 0" >> $cases
echo "4096x8192x4096 bf16 6 gaussian - 0" >> $cases
one() {
  shape=$1; dt=$2; seed=$3; dist=$4; cl=$5; minor=$6
  IFS=x read -r m n kk <<<"$shape"
  a=(step 6 --kernel .gpu-twins/step6_l2hints_sm90.cu --param grid_minor_dim=$minor --arch sm_90a --m $m --n $n --k $kk --dtype $dt --seed $seed --dist $dist --iters 0 --timeout 20 --json)
  [ $cl != - ] && a+=(--clusters $cl)
  out=$(timeout 90 $R "${a[@]}" 2>&1); rc=$?
  pass=$(echo "$out" | python3 -c 'import json,sys
try:
  d=json.load(sys.stdin); v=d["verification"]; print(v.get("passed"), "%.2e"%v.get("rel_error_norm",0), d["grid"])
except Exception as e: print("noparse")' 2>/dev/null)
  echo "l2hints minor=$minor $shape $dt $seed $dist c=$cl rc=$rc $pass"
  [ $rc != 0 ] && echo "$out" | tail -5 | sed "s/^/   [$shape] /"
}
export -f one; export R
xargs -P 6 -L 1 bash -c 'one "$@"' _ < $cases > $OUT/verify-l2hints.txt 2>&1
echo "verify: $(grep -c ' rc=0 True' $OUT/verify-l2hints.txt) passed of $(wc -l < $cases)"
grep -v ' rc=0 True' $OUT/verify-l2hints.txt | head -20
timeout 240 $R bench --steps 4,5,6 --contenders 5-pingpong,6-l2hints --iters 30 --out $OUT > $OUT/bench.txt 2>&1; echo "bench rc=$?"
cat $OUT/bench.txt
