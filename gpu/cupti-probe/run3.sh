#!/usr/bin/env bash
# NVRTC's cubin in the C probe, nvcc's cubin in `runner check cupti`: does the compiler decide
# whether CUPTI's SASS metrics record anything?
set -u
R=${R:-target/release/runner}
CU=/usr/local/cuda
T=$(mktemp -d)
cat > $T/probe.cu <<'K'
extern "C" __global__ void probe(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 3 * i + 1;
}
K
$CU/bin/nvcc -cubin -arch=sm_90a -o $T/probe_nvcc.cubin $T/probe.cu || exit 1
(cd gpu/cupti-probe && gcc -o $T/probe probe.c -I$CU/include -I$CU/extras/CUPTI/include -L$CU/lib64 -L$CU/extras/CUPTI/lib64 -lcuda -lcupti 2>&1 | head -5)
export LD_LIBRARY_PATH=$CU/lib64:$CU/extras/CUPTI/lib64:${LD_LIBRARY_PATH:-}
export WORKBOOK_CUDA=$CU WORKBOOK_CUPTI_PROBE_DUMP=$T/probe_nvrtc.cubin WORKBOOK_CUPTI_PROBE_CUBIN=$T/probe_nvcc.cubin
timeout 200 $R check cupti 2>&1 | grep -v "loaded:"
echo "== C probe, nvcc cubin"; PROBE_CUBIN=$T/probe_nvcc.cubin PROBE_FN=probe timeout 60 $T/probe primary ex after 0 0
echo "== C probe, NVRTC cubin"; PROBE_CUBIN=$T/probe_nvrtc.cubin PROBE_FN=probe timeout 60 $T/probe primary ex after 0 0
echo "== C probe, NVRTC cubin, plain launch"; PROBE_CUBIN=$T/probe_nvrtc.cubin PROBE_FN=probe timeout 60 $T/probe primary plain after 0 0
