#!/bin/bash
# Session 10, call 4: profiles. Step 7's twin, step 6's and cuBLAS at 4096x8192x4096 (what limits the twin);
# steps 3 and 4 at 8192^3 with per-instruction stall samples (the step-4 dip).
R=$PWD/.gpu-carry/runner; export WORKBOOK_CUDA=/usr/local/cuda
NCU="timeout 200 ncu --clock-control none --set full -k regex:gemm_kernel --launch-count 1"
mkdir -p $OUT/p && cd $OUT/p
$NCU -o s7 $R step 7 --arch sm_90a --iters 0 > s7.log 2>&1
$NCU -o s6 $R step 6 --arch sm_90a --iters 0 > s6.log 2>&1
cat > cub.py <<'P'
import torch
a=torch.randn(4096,4096,dtype=torch.float16,device='cuda'); b=torch.randn(8192,4096,dtype=torch.float16,device='cuda')
for _ in range(3): c=a@b.t()
torch.cuda.synchronize()
P
timeout 200 ncu --clock-control none --set full --launch-skip 2 --launch-count 1 -o cub python3 cub.py > cub.log 2>&1
$NCU --import-source no -o s3 $R step 3 --arch sm_90a --iters 0 --m 8192 --n 8192 --k 8192 > s3.log 2>&1
$NCU -o s4 $R step 4 --arch sm_90a --iters 0 --m 8192 --n 8192 --k 8192 > s4.log 2>&1
for f in s7 s6 cub s3 s4; do ncu -i $f.ncu-rep --page details > $f.txt 2>&1; done
for f in s3 s4; do ncu -i $f.ncu-rep --page source --csv --print-source sass > $f-sass.csv 2>&1; done
tar czf $OUT/prof.tgz *.txt *.csv *.log cub.py && rm -f *.txt *.csv *.log; ls -la
