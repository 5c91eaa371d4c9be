// One inline-asm mbarrier wait loop with its own labels, in a __device__ function inlined three
// times. PTX scopes a label to the `{ }` block that declares it, so each inlined copy branches
// within itself; resolving labels kernel-wide would send the first two copies' branches into the
// last copy and skip the second and third waits.
// Launch: grid 1, block 64 (warp 0 produces, warp 1 consumes); out: 64 u32.
// Expect: out[32 + l] == 11 + 22 + 33 for every lane l of warp 1; out[0..32] == 0.
#include <cstdint>

__device__ __forceinline__ void wait_phase(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n\t"
      ".reg .pred ready;\n\t"
      "again:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 ready, [%0], %1;\n\t"
      "@ready bra.uni finished;\n\t"
      "bra.uni again;\n\t"
      "finished:\n\t"
      "}" ::"r"(bar), "r"(parity) : "memory");
}

extern "C" __global__ void wait_loop_3x(uint32_t *out) {
  __shared__ __align__(8) uint64_t bars[3];
  __shared__ uint32_t slot[3];
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(bars));
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0)
    for (int i = 0; i < 3; i++)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(base + 8 * i));
  __syncthreads();
  if (warp == 0) {
    if (lane == 0)
      for (int i = 0; i < 3; i++) {
        volatile uint32_t *s = slot;
        s[i] = 11u * (i + 1);
        // release at CTA scope: the value is visible to whoever observes this phase
        asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(base + 8 * i)
                     : "memory");
      }
    out[threadIdx.x] = 0;
  } else {
    uint32_t sum = 0;
    wait_phase(base + 0, 0);
    sum += *(volatile uint32_t *)&slot[0];
    wait_phase(base + 8, 0);
    sum += *(volatile uint32_t *)&slot[1];
    wait_phase(base + 16, 0);
    sum += *(volatile uint32_t *)&slot[2];
    out[threadIdx.x] = sum;
  }
}
