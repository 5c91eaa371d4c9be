// The CTA pair's collective allocation as public 2-SM kernels use it: warp 0 of each CTA of the
// pair issues tcgen05.alloc.cta_group::2, and the leader's warp issues the pair's
// tcgen05.mma.cta_group::2 straight after its own alloc, with no barrier between the two CTAs'
// allocations and the MMA that writes both CTAs' tensor memory. PTX ISA "tcgen05.alloc": "one
// warp from each of the peer CTAs must collectively perform the allocation", so the alloc
// completes in both CTAs before either warp goes on. At the end another warp (warp 1) frees
// the columns after the cluster barrier: tcgen05.dealloc is a synchronous tcgen05 instruction,
// ordered by the barrier itself.
// One MMA, M = 256 (128 rows per CTA), N = 32 (16 rows of B per CTA), K = 16, bf16 inputs,
// fp32 accumulator; operands written by ordinary stores, then fence.proxy.async.
// Launch: grid 2, block 128, cluster 2; A: 256 x 16 bf16 row-major, B: 32 x 16 bf16 row-major
// (N x K), D: 256 x 32 f32 row-major. Expect: D[i][j] == sum_k A[i][k] * B[j][k] exactly
// (values -4..4): CTA c's lane i holds row 128 c + i; columns 0-15 come from CTA 0's B rows,
// 16-31 from CTA 1's.
// Planted defect (-DPLANT_PEER_SKIPS_ALLOC): the odd CTA never allocates, so the leader's
// allocation never completes (a deadlock that names the missing peer).
#include <cstdint>

__shared__ __align__(128) uint16_t a_tile[128 * 16];
__shared__ __align__(128) uint16_t b_tile[16 * 16];
__shared__ __align__(8) uint64_t done_bar;
__shared__ uint32_t tmem_col;

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__device__ __forceinline__ bool phase_done(uint32_t bar, uint32_t parity) {
  uint32_t ok;
  asm volatile(
      "{\n\t.reg .pred q;\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 q, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, q;\n\t}"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}

// Shared-memory matrix descriptor, no swizzle: start, leading (K) and stride (M/N) byte offsets,
// each >> 4, and the fixed 0b001 at bits 46-48 that sm_100 requires.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)(lbo >> 4) << 16) |
         ((uint64_t)(sbo >> 4) << 32) | (1ull << 46);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128)
    pair_mma(const uint16_t *A, const uint16_t *B, float *D) {
  const unsigned tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const unsigned rank = cluster_rank();
  // This CTA's half of A (rows 128 rank..) and of B (rows 16 rank..), in the core-matrix
  // layout: element (r, k) of a rows x 16 operand at (k / 8) * (rows * 8) + r * 8 + k % 8.
  for (unsigned i = tid; i < 128 * 16; i += 128) {
    const unsigned r = i / 16, k = i % 16;
    a_tile[(k / 8) * (128 * 8) + r * 8 + k % 8] = A[rank * 128 * 16 + i];
  }
  for (unsigned i = tid; i < 16 * 16; i += 128) {
    const unsigned r = i / 16, k = i % 16;
    b_tile[(k / 8) * (16 * 8) + r * 8 + k % 8] = B[rank * 16 * 16 + i];
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  if (tid == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_u32(&done_bar)));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  // Both CTAs' operands and barriers are ready before the leader's MMA and commit.
  cluster_sync();
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");

  bool alloc = warp == 0;
#ifdef PLANT_PEER_SKIPS_ALLOC
  alloc = alloc && rank == 0;
#endif
  if (alloc) {
    asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], 32;" ::"r"(
        smem_u32(&tmem_col)));
    asm volatile("tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;");
    // The leader issues the pair's MMA at once: no barrier with the peer in between.
    if (rank == 0 && lane == 0) {
      const uint32_t tmem = tmem_col;
      const uint64_t ad = smem_desc(smem_u32(a_tile), 128 * 16, 128);
      const uint64_t bd = smem_desc(smem_u32(b_tile), 16 * 16, 128);
      // kind::f16: D f32 (bits 4-5 = 1), A and B bf16 (bits 7-9, 10-12 = 1), both K-major,
      // N >> 3 at bit 17, M >> 4 at bit 24.
      const uint32_t idesc =
          (1u << 4) | (1u << 7) | (1u << 10) | ((32u >> 3) << 17) | ((256u >> 4) << 24);
      asm volatile(
          "{\n\t.reg .pred acc;\n\tsetp.ne.b32 acc, 0, 0;\n\t"
          "tcgen05.mma.cta_group::2.kind::f16 [%0], %1, %2, %3, acc;\n\t}" ::"r"(tmem),
          "l"(ad), "l"(bd), "r"(idesc));
      // Arrive on done_bar at the same offset in both CTAs of the pair (mask 0b11).
      asm volatile(
          "{\n\t.reg .b16 m;\n\tmov.b16 m, 3;\n\t"
          "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 "
          "[%0], m;\n\t}" ::"r"(smem_u32(&done_bar))
          : "memory");
    }
  }
  __syncthreads();  // tmem_col, written by warp 0's alloc, reaches the other warps
  while (!phase_done(smem_u32(&done_bar), 0)) {
  }
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
  const uint32_t tmem = tmem_col;
  uint32_t v[32];
  const uint32_t taddr = tmem + ((32u * warp) << 16);
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x32.b32 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
      "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "
      "%30, %31}, [%32];"
      : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3]), "=r"(v[4]), "=r"(v[5]), "=r"(v[6]),
        "=r"(v[7]), "=r"(v[8]), "=r"(v[9]), "=r"(v[10]), "=r"(v[11]), "=r"(v[12]), "=r"(v[13]),
        "=r"(v[14]), "=r"(v[15]), "=r"(v[16]), "=r"(v[17]), "=r"(v[18]), "=r"(v[19]),
        "=r"(v[20]), "=r"(v[21]), "=r"(v[22]), "=r"(v[23]), "=r"(v[24]), "=r"(v[25]),
        "=r"(v[26]), "=r"(v[27]), "=r"(v[28]), "=r"(v[29]), "=r"(v[30]), "=r"(v[31])
      : "r"(taddr));
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
  for (int j = 0; j < 32; j++) D[(128 * rank + 32 * warp + lane) * 32 + j] = __uint_as_float(v[j]);
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
  // Both epilogues are done before the pair frees its columns together.
  cluster_sync();
  if (warp == 1)
    asm volatile("tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, 32;" ::"r"(tmem));
}
