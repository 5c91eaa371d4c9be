// Distributed shared memory addressed as CUTLASS-style 2-CTA kernels do it: a CTA names the
// leader's (cluster rank 0's) copy of a shared variable by clearing bit 24 of its own shared::cta
// address (CUTLASS's Sm100MmaPeerBitMask, 0xFEFFFFFF), then stores into it with
// st.shared::cluster and arrives on the leader's mbarrier with mbarrier.arrive...shared::cluster.
// With -DUSE_MAPA the leader's address comes from `mapa.shared::cluster.u32 d, a, 0` instead
// (the documented mapping), as the control.
// Launch: grid 2, block 32, cluster 2 (also fixed by __cluster_dims__); out: 32 u32.
// Expect: out[l] == 201 (100 + 101) for every lane of rank 0; rank 1 writes nothing.
#include <cstdint>

__shared__ __align__(8) uint64_t gather_bar;
__shared__ uint32_t box[2];

__device__ __forceinline__ uint32_t leader_addr(uint32_t own) {
#ifdef USE_MAPA
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, 0;" : "=r"(r) : "r"(own));
  return r;
#else
  return own & 0xFEFFFFFFu;
#endif
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) dsmem_leader(uint32_t *out) {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  const uint32_t bar = static_cast<uint32_t>(__cvta_generic_to_shared(&gather_bar));
  const uint32_t slot = static_cast<uint32_t>(__cvta_generic_to_shared(&box[0]));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 2;" ::"r"(bar));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::
                   : "memory");
  if (threadIdx.x == 0) {
    asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(leader_addr(slot) + 4 * rank), "r"(100u + rank)
                 : "memory");
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(leader_addr(bar))
                 : "memory");
  }
  if (rank == 0) {
    uint32_t ok = 0;
    while (!ok)
      asm volatile(
          "{\n\t.reg .pred q;\n\t"
          "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 q, [%1], 0;\n\t"
          "selp.u32 %0, 1, 0, q;\n\t}"
          : "=r"(ok)
          : "r"(bar)
          : "memory");
    out[threadIdx.x] = box[0] + box[1];
  }
  // Rank 0's shared memory must outlive rank 1's accesses to it.
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::
                   : "memory");
}
