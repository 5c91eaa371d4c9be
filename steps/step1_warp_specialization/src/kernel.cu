// Step 1: warp specialization.
//
// C = A * B^T with A (M x K) and B (N x K) row-major (K-major), C (M x N) row-major.
// One CTA of 4 warps computes one TILE_M x TILE_N tile of C:
//   - warp 0 (producer) only issues TMA loads into a STAGES-deep shared-memory ring;
//   - warp 1 (mma) only issues tcgen05.mma on the slots that have landed;
//   - the accumulator lives in tensor memory, not in registers;
//   - once the last MMA completes, all 4 warps copy the accumulator tensor memory -> registers
//     -> global memory.
// The host sets TILE_M, TILE_N, TILE_K, STAGES (from step1_warp_specialization::BLACKWELL, as
// WB_<NAME>) and the element type.
#include "blackwell.cuh"

typedef WB_DTYPE T;  // __half or __nv_bfloat16
constexpr bool IS_BF16 = WB_IS_BF16;

constexpr int TILE_M = WB_TILE_M;    // 128: rows of C per CTA = lanes of tensor memory
constexpr int TILE_N = WB_TILE_N;    // 256: columns of C per CTA = f32 columns of tensor memory
constexpr int TILE_K = WB_TILE_K;    // 64: one 128-byte swizzle row of 16-bit elements
constexpr int STAGES = WB_STAGES;    // depth of the TMA -> MMA ring
constexpr int MMA_K = 16;            // K of one tcgen05.mma kind::f16

constexpr int NUM_THREADS = 128;
constexpr u32 A_TILE_BYTES = TILE_M * TILE_K * sizeof(T);
constexpr u32 B_TILE_BYTES = TILE_N * TILE_K * sizeof(T);
constexpr u32 SWIZZLE_GROUP_BYTES = 8 * 128;  // 8 rows of 128 B: the SBO of every operand
constexpr u32 TMEM_COLS = TILE_N;             // f32 accumulator: one column per output column

static_assert(TILE_K * sizeof(T) == 128, "one k-block must be exactly one 128-byte swizzle row");
static_assert(TILE_M == 128, "cta_group::1 with M = 128 maps row i of the tile to lane i");
static_assert(TILE_N % 32 == 0 && TILE_N <= 256, "N of one MMA: a multiple of 16, at most 256");
static_assert(STAGES >= 2, "the producer must be able to run ahead of the MMA warp");

// ANCHOR: storage
struct SharedStorage {
  alignas(1024) T a[STAGES][TILE_M * TILE_K];  // 128B swizzle needs 1024-byte aligned tiles
  alignas(1024) T b[STAGES][TILE_N * TILE_K];
  alignas(8) u64 load_full[STAGES];   // TMA -> MMA: slot holds k-block data
  alignas(8) u64 load_empty[STAGES];  // MMA -> TMA: slot's MMAs are done, it may be refilled
  alignas(8) u64 acc_full;            // MMA -> epilogue: the accumulator is final
  u32 tmem_base;                      // written by tcgen05.alloc
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
  const int tile_m = blockIdx.y;
  const int tile_n = blockIdx.x;
  const int num_k_blocks = K / TILE_K;
  wb::Trace trace;  // this warp's timeline for runner step --trace; empty in other builds

  // ANCHOR: setup
  // ---- set-up: barriers by one thread, tensor memory by warp 0 -----------------------------
  if (threadIdx.x == 0) {
    wb::tma_prefetch_desc(&tmap_a);
    wb::tma_prefetch_desc(&tmap_b);
    for (int s = 0; s < STAGES; ++s) {
      wb::mbarrier_init(&smem.load_full[s], 1);   // the producer's arrive_expect_tx
      wb::mbarrier_init(&smem.load_empty[s], 1);  // one tcgen05.commit
    }
    wb::mbarrier_init(&smem.acc_full, 1);         // the final tcgen05.commit
    wb::fence_mbarrier_init();
  }
  if (warp == 0) {
    bw::tmem_alloc(&smem.tmem_base, TMEM_COLS);
    bw::tmem_relinquish_alloc_permit();
  }
  bw::tcgen05_fence_before_thread_sync();
  wb::cta_sync();
  bw::tcgen05_fence_after_thread_sync();
  const u32 tmem_acc = smem.tmem_base;
  // ANCHOR_END: setup
  trace.enter(wb::TRACE_IDLE);

  // ANCHOR: mainloop
  // ---- main loop: warp 0 loads, warp 1 multiplies, each at its own pace ---------------------
  if (warp == 0) {
    // producer: load k-block `kb` into the next slot of the ring (wb::Ring, pipeline.cuh), once
    // the MMAs that last read that slot are done.
    wb::Ring<STAGES> fill;
    for (int kb = 0; kb < num_k_blocks; ++kb, fill.advance()) {
      const int slot = fill.index();
      trace.enter(wb::TRACE_SLOT_WAIT, kb);
      if (!fill.first_round()) wb::mbarrier_wait(&smem.load_empty[slot], fill.empty_parity());
      trace.enter(wb::TRACE_LOAD, kb);
      wb::mbarrier_arrive_expect_tx(&smem.load_full[slot], A_TILE_BYTES + B_TILE_BYTES);
      wb::tma_load_2d(smem.a[slot], &tmap_a, &smem.load_full[slot], kb * TILE_K, tile_m * TILE_M);
      wb::tma_load_2d(smem.b[slot], &tmap_b, &smem.load_full[slot], kb * TILE_K, tile_n * TILE_N);
    }
  } else if (warp == 1) {
    // mma: multiply each k-block as soon as it lands; never waits on its own MMAs.
    const u32 idesc = bw::make_idesc_f16(TILE_M, TILE_N, IS_BF16);
    wb::Ring<STAGES> drain;  // the MMA warp's own position in the ring, behind the producer's
    for (int kb = 0; kb < num_k_blocks; ++kb, drain.advance()) {
      const int slot = drain.index();
      trace.enter(wb::TRACE_DATA_WAIT, kb);
      wb::mbarrier_wait(&smem.load_full[slot], drain.phase());
      trace.enter(wb::TRACE_MMA, kb);
      bw::tcgen05_fence_after_thread_sync();
      const u32 a_addr = wb::smem_u32(smem.a[slot]);
      const u32 b_addr = wb::smem_u32(smem.b[slot]);
      for (int k = 0; k < TILE_K / MMA_K; ++k) {
        // Stepping K inside the 128-byte swizzled row is a plain byte offset on the start address.
        const u32 k_bytes = k * MMA_K * sizeof(T);
        bw::mma_f16(tmem_acc, bw::make_smem_desc_sw128(a_addr + k_bytes, SWIZZLE_GROUP_BYTES),
                    bw::make_smem_desc_sw128(b_addr + k_bytes, SWIZZLE_GROUP_BYTES), idesc,
                    /*accumulate=*/kb > 0 || k > 0);
      }
      bw::mma_commit(&smem.load_empty[slot]);  // frees the slot once these MMAs are done
    }
    bw::mma_commit(&smem.acc_full);  // arrives after every MMA above has completed
  }
  // ANCHOR_END: mainloop

  // ANCHOR: epilogue
  // ---- epilogue: tensor memory -> registers -> global, all 4 warps -------------------------
  trace.enter(wb::TRACE_ACC_WAIT);
  wb::mbarrier_wait(&smem.acc_full, 0);
  trace.enter(wb::TRACE_EPILOGUE);
  bw::tcgen05_fence_after_thread_sync();  // orders the tcgen05.ld below after the wait

  // Warp w may only read tensor-memory lanes 32w..32w+31, i.e. rows 32w..32w+31 of the tile.
  const int row = tile_m * TILE_M + warp * 32 + wb::lane_id();
  T* c_row = C + static_cast<size_t>(row) * N + tile_n * TILE_N;
  for (int col = 0; col < TILE_N; col += 32) {
    u32 acc[32];
    bw::tmem_ld_32x32b_x32(tmem_acc + ((warp * 32) << 16) + col, acc);
    bw::tmem_wait_ld(acc);  // acc is usable from here on
    alignas(16) T out[32];
    for (int j = 0; j < 32; ++j) out[j] = static_cast<T>(__uint_as_float(acc[j]));
    for (int j = 0; j < 32; j += 8) {
      *reinterpret_cast<uint4*>(c_row + col + j) = *reinterpret_cast<const uint4*>(out + j);
    }
  }

  // ANCHOR_END: epilogue

  // ---- teardown: tensor memory must be freed before the CTA exits ---------------------------
  trace.enter(wb::TRACE_TEARDOWN);
  bw::tcgen05_fence_before_thread_sync();
  wb::cta_sync();
  if (warp == 0) {
    bw::tcgen05_fence_after_thread_sync();
    bw::tmem_dealloc(tmem_acc, TMEM_COLS);
  }
  trace.enter(wb::TRACE_EXIT);
}
