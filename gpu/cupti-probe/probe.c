// Which part of the grader's sequence stops CUPTI's SASS metrics from recording?
// argv[1]: "primary" or "create" context; argv[2]: "ex" (cuLaunchKernelEx) or "plain";
// argv[3]: "before" (cuptiProfilerInitialize before the context) or "after".
#include <cuda.h>
#include <cupti_sass_metrics.h>
#include <cupti_profiler_target.h>
#include <cupti_target.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define C(x) do { CUresult r = (x); if (r) { printf("CU error %d at %s\n", r, #x); exit(1);} } while (0)
#define P(x) do { CUptiResult r = (x); if (r) { const char* s; cuptiGetResultString(r, &s); printf("CUPTI error %s at %s\n", s, #x); exit(1);} } while (0)
static void prof_init(void) {
  CUpti_Profiler_Initialize_Params p = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
  P(cuptiProfilerInitialize(&p));
}
int main(int argc, char** argv) {
  int primary = !strcmp(argv[1], "primary"), ex = !strcmp(argv[2], "ex"), before = !strcmp(argv[3], "before");
  C(cuInit(0)); CUdevice dev; C(cuDeviceGet(&dev, 0)); CUcontext ctx;
  if (before) prof_init();
  if (primary) { C(cuDevicePrimaryCtxRetain(&ctx, dev)); C(cuCtxSetCurrent(ctx)); }
  else { C(cuCtxCreate(&ctx, (CUctxCreateParams*)0, 0, dev)); }
  if (!before) prof_init();
  CUpti_Device_GetChipName_Params cp = {CUpti_Device_GetChipName_Params_STRUCT_SIZE}; cp.deviceIndex = 0;
  P(cuptiDeviceGetChipName(&cp));
  CUpti_SassMetrics_GetProperties_Params gp = {CUpti_SassMetrics_GetProperties_Params_STRUCT_SIZE};
  gp.pChipName = cp.pChipName; gp.pMetricName = "smsp__sass_inst_executed";
  P(cuptiSassMetricsGetProperties(&gp)); printf("metric id %llu\n", (unsigned long long)gp.metric.metricId);
  CUpti_SassMetrics_Config cfg; cfg.metricId = gp.metric.metricId; cfg.outputGranularity = CUPTI_SASS_METRICS_OUTPUT_GRANULARITY_GPU;
  CUpti_SassMetricsSetConfig_Params sp = {CUpti_SassMetricsSetConfig_Params_STRUCT_SIZE};
  sp.pConfigs = &cfg; sp.numOfMetricConfig = 1; sp.deviceIndex = 0;
  P(cuptiSassMetricsSetConfig(&sp));
  CUpti_SassMetricsEnable_Params ep = {CUpti_SassMetricsEnable_Params_STRUCT_SIZE};
  ep.ctx = ctx; ep.enableLazyPatching = 1;
  P(cuptiSassMetricsEnable(&ep));
  const char* cubin = getenv("PROBE_CUBIN") ? getenv("PROBE_CUBIN") : "k.cubin";
  const char* fname = getenv("PROBE_FN") ? getenv("PROBE_FN") : "add";
  FILE* f = fopen(cubin, "rb"); fseek(f, 0, SEEK_END); long n = ftell(f); rewind(f);
  char* img = malloc(n); fread(img, 1, n, f); fclose(f);
  CUmodule mod; C(cuModuleLoadData(&mod, img)); CUfunction fn; C(cuModuleGetFunction(&fn, mod, fname));
  int N = 1 << 16; CUdeviceptr a, c; C(cuMemAlloc(&a, N * 4)); C(cuMemAlloc(&c, N * 4));
  void* args3[] = {&a, &c, &N}; void* args2[] = {&c, &N};
  void** args = strcmp(fname, "add") ? args2 : args3;
  unsigned smem = argc > 5 ? atoi(argv[5]) : 0;
  if (smem > 48 * 1024) C(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem));
  CUstream s; C(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  if (ex) {
    CUlaunchAttribute at; memset(&at, 0, sizeof at);
    at.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION; at.value.clusterDim.x = atoi(argv[4]); at.value.clusterDim.y = 1; at.value.clusterDim.z = 1;
    CUlaunchConfig lc = {0}; if (atoi(argv[4]) > 0) { lc.attrs = &at; lc.numAttrs = 1; } lc.gridDimX = N / 256; lc.gridDimY = 1; lc.gridDimZ = 1; lc.blockDimX = 256; lc.blockDimY = 1; lc.blockDimZ = 1; lc.hStream = s; lc.sharedMemBytes = smem;
    C(cuLaunchKernelEx(&lc, fn, args, 0));
  } else C(cuLaunchKernel(fn, N / 256, 1, 1, 256, 1, 1, 0, s, args, 0));
  C(cuStreamSynchronize(s));
  CUpti_SassMetricsGetDataProperties_Params dp = {CUpti_SassMetricsGetDataProperties_Params_STRUCT_SIZE};
  dp.ctx = ctx; P(cuptiSassMetricsGetDataProperties(&dp));
  printf("smem %u: %s ctx, %s launch (cluster attribute %s), profiler init %s the context: %zu records, %zu instances\n", smem, argv[1], argv[2], argv[4], argv[3],
         dp.numOfPatchedInstructionRecords, dp.numOfInstances);
  return 0;
}
