// Shared memory declared inside function bodies (not at file scope): NVRTC "demotes" each one to a
// `.shared` declaration inside the kernel's (or an inlined helper's) body in the PTX.
// Launch: grid 1, block 128; out: 128 u32.  Expect: out[i] == 3 * ((i + 1) % 128) + 1000 * (i % 4).
extern "C" __device__ __forceinline__ unsigned tally(unsigned lane_group) {
  __shared__ unsigned counts[4];  // a second body-scope declaration, in a device function
  if (threadIdx.x < 4) counts[threadIdx.x] = 1000u * threadIdx.x;
  __syncthreads();
  return counts[lane_group];
}

extern "C" __global__ void body_shared(unsigned *out) {
  __shared__ unsigned ring[128];  // body-scope declaration in the kernel
  const unsigned t = threadIdx.x;
  ring[t] = 3u * t;
  __syncthreads();
  out[t] = ring[(t + 1) % 128] + tally(t % 4);
}
