// Step 1, Hopper twin: warp specialization.
//
// C = A * B^T with A (M x K) and B (N x K) row-major (K-major), C (M x N) row-major.
// One CTA of three warpgroups computes one TILE_M x TILE_N tile of C, each role in its own:
//   - warpgroup 0 is the producer: warp 0 issues TMA loads into a STAGES-deep shared-memory ring,
//     the other three warps idle; it gives most of its registers back (setmaxnreg.dec);
//   - warpgroups 1 and 2 are consumers: each multiplies its 64-row half of the tile with wgmma
//     and takes the producer's registers (setmaxnreg.inc), which is what lets the tile grow to
//     128 x 256: each consumer holds a 64 x 256 f32 accumulator, 128 registers a thread;
//   - once its last wgmma completes, each consumer stores its half of C from its registers.
// The host sets TILE_M, TILE_N, TILE_K, STAGES (from step1_warp_specialization::HOPPER) and the
// element type.
#include "hopper.cuh"

typedef WB_DTYPE T;  // __half or __nv_bfloat16
constexpr bool IS_BF16 = WB_IS_BF16;

constexpr int TILE_M = WB_TILE_M;    // 128: rows of C per CTA, 64 per consumer warpgroup
constexpr int TILE_N = WB_TILE_N;    // 256: columns of C per CTA = N of every wgmma
constexpr int TILE_K = WB_TILE_K;    // 64: one 128-byte swizzle row of 16-bit elements
constexpr int STAGES = WB_STAGES;    // depth of the TMA -> wgmma ring
constexpr int MMA_M = 64;            // M of one wgmma
constexpr int MMA_K = 16;            // K of one wgmma with 16-bit inputs

constexpr int CONSUMERS = 2;                 // consumer warpgroups, after the producer's
constexpr int NUM_THREADS = 128 * (1 + CONSUMERS);
constexpr int WG_M = TILE_M / CONSUMERS;     // rows of the tile each consumer owns
constexpr int M_BLOCKS = WG_M / MMA_M;       // wgmma per K step and consumer
constexpr u32 PRODUCER_REGS = 40;            // setmaxnreg: the producer keeps few registers...
constexpr u32 CONSUMER_REGS = 232;           // ...so the consumers can hold their accumulators
constexpr u32 A_TILE_BYTES = TILE_M * TILE_K * sizeof(T);
constexpr u32 B_TILE_BYTES = TILE_N * TILE_K * sizeof(T);
constexpr u32 SWIZZLE_GROUP_BYTES = 8 * 128;  // 8 rows of 128 B: the SBO of every operand

static_assert(TILE_K * sizeof(T) == 128, "one k-block must be exactly one 128-byte swizzle row");
static_assert(WG_M % MMA_M == 0, "each consumer's rows are made of 64-row wgmma blocks");
static_assert(TILE_N == 128 || TILE_N == 256, "N of one wgmma: 128 or 256 here");
static_assert(M_BLOCKS * TILE_N / 2 <= 128, "the accumulator must fit in a thread's registers");
static_assert(PRODUCER_REGS * 128 + CONSUMERS * CONSUMER_REGS * 128 <= 65536,
              "the warpgroups' registers must fit in the SM's register file");
static_assert(STAGES >= 2, "the producer must be able to run ahead of the consumers");

// ANCHOR: storage
struct SharedStorage {
  alignas(1024) T a[STAGES][TILE_M * TILE_K];  // 128B swizzle needs 1024-byte aligned tiles
  alignas(1024) T b[STAGES][TILE_N * TILE_K];
  alignas(8) u64 load_full[STAGES];   // TMA -> wgmma: slot holds k-block data
  alignas(8) u64 load_empty[STAGES];  // wgmma -> TMA: every consumer warp's wgmma are done
};
// ANCHOR_END: storage

// ---- the launch the host plans (the step crate's KernelShape), checked at compile time -----
WB_EXPECT_LAUNCH(THREADS, NUM_THREADS);
WB_EXPECT_LAUNCH(CLUSTER, 1);
WB_EXPECT_LAUNCH(SCHEDULE, WB_SCHEDULE_ONE_PER_TILE);
WB_EXPECT_LAUNCH(TILE_M, TILE_M);  // the tile of C one CTA computes
WB_EXPECT_LAUNCH(TILE_N, TILE_N);
WB_EXPECT_LAUNCH(A_BOX_ROWS, TILE_M);  // the TMA boxes the expected bytes count
WB_EXPECT_LAUNCH(B_BOX_ROWS, TILE_N);
WB_EXPECT_LAUNCH(C_BOX_ROWS, 0);  // C is a pointer: no tensor map
WB_EXPECT_LAUNCH(C_BOX_COLS, 0);
static_assert(sizeof(SharedStorage) + 1023 <= WB_LAUNCH_SMEM_BYTES,
              "WB_LAUNCH_SMEM_BYTES: SharedStorage and the slack to align it must fit");

extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1)
    gemm_kernel(const __grid_constant__ TmaDesc tmap_a, const __grid_constant__ TmaDesc tmap_b,
                T* __restrict__ C, int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  SharedStorage& smem = wb::shared_storage<SharedStorage>(smem_raw);

  // The host sizes shared memory from its own formula; stop rather than overrun it.
  if (threadIdx.x == 0 && wb::dynamic_smem_bytes() < sizeof(SharedStorage) + 1023) __trap();

  const u32 warp = wb::warp_id();
  const u32 lane = wb::lane_id();
  const u32 warpgroup = threadIdx.x / 128;  // 0: producer; 1, 2: consumers
  const int tile_m = blockIdx.y;
  const int tile_n = blockIdx.x;
  const int num_k_blocks = K / TILE_K;
  wb::Trace trace;  // this warp's timeline for runner step --trace; empty in other builds

  // ANCHOR: setup
  // ---- set-up: barriers by one thread ------------------------------------------------------
  if (threadIdx.x == 0) {
    wb::tma_prefetch_desc(&tmap_a);
    wb::tma_prefetch_desc(&tmap_b);
    for (int s = 0; s < STAGES; ++s) {
      wb::mbarrier_init(&smem.load_full[s], 1);   // the producer's arrive_expect_tx
      wb::mbarrier_init(&smem.load_empty[s], CONSUMERS * 4);  // every consumer warp
    }
    wb::fence_mbarrier_init();
  }
  wb::cta_sync();
  // ANCHOR_END: setup
  trace.enter(wb::TRACE_IDLE);

  // ANCHOR: mainloop
  // ---- main loop: the producer loads, the consumers multiply, each at its own pace ----------
  if (warpgroup == 0) {
    hp::setmaxnreg_dec<PRODUCER_REGS>();
    if (warp == 0) {
      // producer: load k-block `kb` into its slot, once the wgmma that last read it are done.
      wb::Ring<STAGES> fill;  // the producer's position in the ring (wb::Ring, pipeline.cuh)
      for (int kb = 0; kb < num_k_blocks; ++kb, fill.advance()) {
        const int slot = fill.index();
        trace.enter(wb::TRACE_SLOT_WAIT, kb);
        if (!fill.first_round()) wb::mbarrier_wait(&smem.load_empty[slot], fill.empty_parity());
        trace.enter(wb::TRACE_LOAD, kb);
        wb::mbarrier_arrive_expect_tx(&smem.load_full[slot], A_TILE_BYTES + B_TILE_BYTES);
        wb::tma_load_2d(smem.a[slot], &tmap_a, &smem.load_full[slot], kb * TILE_K, tile_m * TILE_M);
        wb::tma_load_2d(smem.b[slot], &tmap_b, &smem.load_full[slot], kb * TILE_K, tile_n * TILE_N);
      }
    }
  } else {
    hp::setmaxnreg_inc<CONSUMER_REGS>();
    // consumer: multiply each k-block as soon as it lands, on this warpgroup's rows of A.
    const int consumer = warpgroup - 1;
    const u32 wg_warp = warp % 4;  // this warp's place in its warpgroup
    // This thread's share of its WG_M x TILE_N accumulator. Not zeroed: the tile's first wgmma
    // overwrites it (scale-d = 0), and ordinary instructions writing accumulator registers
    // would make ptxas serialize the wgmma pipeline.
    float acc[M_BLOCKS][TILE_N / 2];
    // The consumers' positions in the ring: `drain`, the slot the next wgmma read, and
    // `release`, the slot the warps free next, one behind.
    wb::Ring<STAGES> drain, release;
    for (int kb = 0; kb < num_k_blocks; ++kb, drain.advance()) {
      const int slot = drain.index();
      trace.enter(wb::TRACE_DATA_WAIT, kb);
      wb::mbarrier_wait(&smem.load_full[slot], drain.phase());
      trace.enter(wb::TRACE_MMA, kb);
      const u32 a_addr = wb::smem_u32(smem.a[slot]) + consumer * WG_M * TILE_K * sizeof(T);
      const u32 b_addr = wb::smem_u32(smem.b[slot]);
      hp::wgmma_fence();  // the accumulators were last written by wgmma before this
      for (int k = 0; k < TILE_K / MMA_K; ++k) {
        // Stepping K inside the 128-byte swizzled row is a plain byte offset on the start address.
        const u32 k_bytes = k * MMA_K * sizeof(T);
        for (int mb = 0; mb < M_BLOCKS; ++mb) {
          const u32 a_rows = mb * MMA_M * TILE_K * sizeof(T);  // 64 rows further down A
          hp::wgmma_m64k16<TILE_N, IS_BF16>(
              acc[mb], hp::make_smem_desc_sw128(a_addr + a_rows + k_bytes, SWIZZLE_GROUP_BYTES),
              hp::make_smem_desc_sw128(b_addr + k_bytes, SWIZZLE_GROUP_BYTES),
              /*accumulate=*/kb > 0 || k > 0);
        }
      }
      hp::wgmma_commit_group();
      // At most this k-block's group still runs: the previous one has finished reading its slot.
      trace.enter(wb::TRACE_MMA_WAIT, kb);
      hp::wgmma_wait_group<1>();
      // Free the previous k-block's slot for the producer's refill: one arrival per warp.
      if (kb > 0) {
        if (lane == 0) wb::mbarrier_arrive(&smem.load_empty[release.index()]);
        release.advance();
      }
    }
    trace.enter(wb::TRACE_ACC_WAIT);
    hp::wgmma_wait_group<0>();
    for (int mb = 0; mb < M_BLOCKS; ++mb) hp::fence_operands(acc[mb]);
    // ANCHOR_END: mainloop

    // ANCHOR: epilogue
    // ---- epilogue: registers -> global, each consumer its own rows --------------------------
    trace.enter(wb::TRACE_EPILOGUE);
    // wgmma's fragment of a 64-row block: warp w (of the warpgroup) holds rows 16w..16w+15;
    // lane l holds row 16w + l/4 (values 4i, 4i+1) and row 16w + l/4 + 8 (values 4i+2, 4i+3),
    // at columns 8i + 2(l%4) and the next one. Each pair is stored as one 32-bit word.
    for (int mb = 0; mb < M_BLOCKS; ++mb) {
      const int row = tile_m * TILE_M + consumer * WG_M + mb * MMA_M + wg_warp * 16 + lane / 4;
      T* c_row = C + static_cast<size_t>(row) * N + tile_n * TILE_N + 2 * (lane % 4);
      for (int i = 0; i < TILE_N / 8; ++i) {
        *reinterpret_cast<u32*>(c_row + 8 * i) = hp::pack_pair<T>(acc[mb][4 * i], acc[mb][4 * i + 1]);
        *reinterpret_cast<u32*>(c_row + static_cast<size_t>(8) * N + 8 * i) =
            hp::pack_pair<T>(acc[mb][4 * i + 2], acc[mb][4 * i + 3]);
      }
    }
    // ANCHOR_END: epilogue
  }
  trace.enter(wb::TRACE_EXIT);
}
