#!/usr/bin/env bash
# Twins 4, 5, 6 and the ping-pong contender: verification at many shapes, then timing.
set -u
R=.gpu-twins/runner
PP=.gpu-twins/step5_pingpong_sm90.cu
export WORKBOOK_CUDA=/usr/local/cuda
chmod +x $R
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader > $OUT/gpu.txt
cases=$(mktemp)
for k in 4 5 6 pp; do
  for shape in 512x1024x512 256x768x320 768x1280x192 2304x2816x704 4096x8192x4096; do
    for dt in f16 bf16; do for seed in 1 2; do echo "$k $shape $dt $seed gaussian -"; done; done
  done
  for c in 1 3; do for dt in f16 bf16; do echo "$k 2048x2048x512 $dt 4 gaussian $c"; done; done
  echo "$k 2304x2816x704 bf16 5 gaussian 7"
  echo "$k 1024x1024x1024 bf16 3 int -"
  echo "$k 1024x1024x1024 f16 3 uniform -"
done > $cases
one() {
  k=$1; shape=$2; dt=$3; seed=$4; dist=$5; cl=$6
  IFS=x read -r m n kk <<<"$shape"
  if [ $k = pp ]; then a=(step 5 --kernel $PP --param tile_m=64); else a=(step $k); fi
  a+=(--arch sm_90a --m $m --n $n --k $kk --dtype $dt --seed $seed --dist $dist --iters 0 --timeout 20 --json)
  [ $cl != - ] && a+=(--clusters $cl)
  out=$(timeout 90 $R "${a[@]}" 2>&1); rc=$?
  pass=$(echo "$out" | python3 -c 'import json,sys
try:
  d=json.load(sys.stdin); v=d["verification"]; print(v.get("passed"), "%.2e"%v.get("rel_error_norm",0), d["grid"])
except Exception as e: print("noparse")' 2>/dev/null)
  echo "$k $shape $dt $seed $dist c=$cl rc=$rc $pass"
  [ $rc != 0 ] && echo "$out" | tail -5 | sed "s/^/   [$k $shape] /"
}
export -f one; export R PP
xargs -P 6 -L 1 bash -c 'one "$@"' _ < $cases > $OUT/verify.txt 2>&1
echo "verify: $(grep -c ' rc=0 True' $OUT/verify.txt) passed of $(wc -l < $cases)"
grep -v ' rc=0 True' $OUT/verify.txt | head -30
timeout 200 $R bench --steps 4,5,6 --contenders 5-pingpong --iters 30 --out $OUT > $OUT/bench.txt 2>&1; echo "bench rc=$?"
cat $OUT/bench.txt | tail -25
for s in 4 5 6; do for shape in "4096 8192 4096" "8192 8192 8192"; do set -- $shape
  timeout 60 $R step $s --arch sm_90a --m $1 --n $2 --k $3 --iters 40 --json > $OUT/s.json 2>/dev/null
  python3 -c 'import json;d=json.load(open("'$OUT/s.json'"));t=d.get("timing") or {};print("step",d["step"],d["shape"],"verified",d["verification"]["passed"],{k:v for k,v in t.items() if not isinstance(v,(list,dict))})' >> $OUT/steps.txt 2>&1
done; done; rm -f $OUT/s.json
cat $OUT/steps.txt
