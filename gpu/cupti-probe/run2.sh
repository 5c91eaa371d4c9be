set -u
cd gpu/cupti-probe
CU=/usr/local/cuda
nvcc -cubin -arch=sm_90a -o k.cubin k.cu || exit 1
gcc -o probe probe.c -I$CU/include -I$CU/extras/CUPTI/include -L$CU/lib64 -L$CU/extras/CUPTI/lib64 -lcuda -lcupti 2>&1 | head -20
export LD_LIBRARY_PATH=$CU/lib64:$CU/extras/CUPTI/lib64
for cl in 0 1 2; do timeout 60 ./probe primary ex after $cl 0; done; timeout 60 ./probe primary ex after 0 200000; timeout 60 ./probe primary ex after 2 200000
