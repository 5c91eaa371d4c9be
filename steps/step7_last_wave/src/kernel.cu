// Step 7: the last wave.
//
// C = A * B^T with A (M x K) and B (N x K) row-major (K-major), C (M x N) row-major.
// One 2-CTA cluster per (2 * TILE_M) x (2 * TILE_N) tile of C is launched, cluster i for the
// i-th tile of the L2-friendly order (see tile_coords). A cluster that runs computes its own
// tile, then asks the hardware for a cluster that has not started yet: cluster launch control
// cancels that cluster's launch, and the running cluster computes its tile instead, set-up done
// once. So the clusters that run loop over tiles like step 6's persistent ones, but how many run
// is the hardware's choice, whatever else shares the GPU, and no SM idles while a launched
// cluster still waits. Per tile:
//   - warp 2 (scheduler) of the leader asks for the next tile while this one is computed:
//     clusterlaunchcontrol.try_cancel writes a 16-byte response into next_tile in both CTAs and
//     completes its bytes on each CTA's next_tile_full; every warp of both CTAs reads it after its
//     part of the tile and arrives on the leader's next_tile_empty, which the scheduler waits on
//     before its next request reuses the buffer. A failed request means every cluster of the
//     grid has started: the cluster's last tile is done.
// Each CTA has two warpgroups:
// the first holds the producer, MMA and scheduler warps, the second only runs the epilogue. Per
// tile, each CTA owns TILE_M of its rows and loads only TILE_N of B's rows (half of the MMA's N):
//   - warp 0 (producer) of each CTA issues TMA loads of its halves into a STAGES-deep ring; the
//     bytes of both CTAs are counted on the leader's (rank 0) barrier;
//   - warp 1 (mma) of the leader alone issues tcgen05.mma.cta_group::2 (M = 256 across the
//     pair) and multicasts its commits to both CTAs' barriers;
//   - the accumulator is double-buffered in tensor memory (ACC_STAGES slots of MMA_N columns):
//     the MMAs of tile i + 1 fill one slot while the epilogue drains the other; before reusing a
//     slot the MMA warp waits on its acc_empty, which every epilogue warp of both CTAs arrives on
//     once its tensor-memory loads are complete;
//   - once a tile's last MMA completes, the 4 epilogue warps walk its slot in EPILOGUE_TILE_N-column
//     sub-tiles: tensor memory -> registers -> a double-buffered shared-memory staging tile ->
//     TMA store, so reading sub-tile j + 1 overlaps storing sub-tile j.
// The host sets TILE_M, TILE_N, TILE_K, STAGES, EPILOGUE_TILE_N, GRID_TILE_WIDTH,
// GRID_MINOR_DIM (from step7_last_wave::BLACKWELL, as WB_<NAME>) and the element type.
#include "blackwell.cuh"
#include "clc.cuh"

typedef WB_DTYPE T;  // __half or __nv_bfloat16
constexpr bool IS_BF16 = WB_IS_BF16;

constexpr int TILE_M = WB_TILE_M;    // 128: rows of C per CTA = lanes of tensor memory
constexpr int TILE_N = WB_TILE_N;    // 128: rows of B each CTA loads, half of the MMA's N
constexpr int TILE_K = WB_TILE_K;    // 64: one 128-byte swizzle row of 16-bit elements
constexpr int STAGES = WB_STAGES;    // depth of the TMA -> MMA ring
constexpr int EPILOGUE_TILE_N = WB_EPILOGUE_TILE_N;  // columns per staged TMA store
constexpr int GRID_TILE_WIDTH = WB_GRID_TILE_WIDTH;  // tiles per band of the visiting order
constexpr int GRID_MINOR_DIM = WB_GRID_MINOR_DIM;    // 0: bands across M, 1: bands across N
constexpr int MMA_K = 16;            // K of one tcgen05.mma kind::f16
constexpr int CLUSTER = 2;           // CTAs per cluster: the pair one cta_group::2 MMA spans
constexpr int MMA_N = CLUSTER * TILE_N;  // 256: columns of C per CTA = f32 columns of tmem

constexpr int NUM_THREADS = 256;   // warpgroup 0: producer, mma, scheduler, idle; warpgroup 1: epilogue
constexpr int NUM_WARPS = NUM_THREADS / 32;
constexpr int SCHEDULER_WARP = 2;  // the leader's asks for the next tile; each CTA's expects its bytes
constexpr int EPILOGUE_WARP0 = 4;  // first warp of the epilogue warpgroup
constexpr int ACC_STAGES = 2;      // accumulator slots in tensor memory
constexpr u32 A_TILE_BYTES = TILE_M * TILE_K * sizeof(T);
constexpr u32 B_TILE_BYTES = TILE_N * TILE_K * sizeof(T);
constexpr u32 SWIZZLE_GROUP_BYTES = 8 * 128;  // 8 rows of 128 B: the SBO of every operand
constexpr u32 TMEM_COLS = ACC_STAGES * MMA_N; // f32 accumulators: one column per output column

static_assert(TILE_K * sizeof(T) == 128, "one k-block must be exactly one 128-byte swizzle row");
static_assert(TILE_M == 128, "cta_group::2 with M = 256 maps row i of each CTA's half to lane i");
static_assert(MMA_N % 32 == 0 && MMA_N <= 256, "N of one MMA: a multiple of 16, at most 256");
static_assert(TMEM_COLS <= 512, "both accumulator slots must fit in the 512 tensor-memory columns");
static_assert(GRID_TILE_WIDTH >= 1 && (GRID_MINOR_DIM == 0 || GRID_MINOR_DIM == 1), "grid order");
static_assert(STAGES >= 2, "the producer must be able to run ahead of the MMA warp");
static_assert(EPILOGUE_TILE_N * sizeof(T) == 128, "a staging row is one 128-byte swizzle row");
static_assert(MMA_N % EPILOGUE_TILE_N == 0, "the sub-tiles must cover the tile");

// ANCHOR: storage
struct SharedStorage {
  alignas(1024) T a[STAGES][TILE_M * TILE_K];  // 128B swizzle needs 1024-byte aligned tiles
  alignas(1024) T b[STAGES][TILE_N * TILE_K];
  alignas(1024) T epilogue[4][2][32 * EPILOGUE_TILE_N];  // per warp: two 32-row staging tiles
  alignas(8) u64 load_full[STAGES];   // TMA -> MMA: slot holds k-block data (leader's: both CTAs')
  alignas(8) u64 load_empty[STAGES];  // MMA -> TMA: slot's MMAs are done (multicast to both CTAs)
  alignas(8) u64 acc_full[ACC_STAGES];   // MMA -> epilogue: the slot is final (both CTAs)
  alignas(8) u64 acc_empty[ACC_STAGES];  // epilogue -> MMA: the slot was read (leader's)
  alignas(16) bw::ClcResponse next_tile;  // try_cancel's response: the next tile, or none
  alignas(8) u64 next_tile_full;   // scheduler -> every warp: the response landed (each CTA's own)
  alignas(8) u64 next_tile_empty;  // every warp of both CTAs -> scheduler: it was read (leader's)
  u32 tmem_base;                      // written by tcgen05.alloc
};
// ANCHOR_END: storage

// ---- the launch the host plans (the step crate's KernelShape), checked at compile time -----
WB_EXPECT_LAUNCH(THREADS, NUM_THREADS);
WB_EXPECT_LAUNCH(CLUSTER, CLUSTER);
WB_EXPECT_LAUNCH(SCHEDULE, WB_SCHEDULE_CLUSTER_LAUNCH_CONTROL);
WB_EXPECT_LAUNCH(TILE_M, CLUSTER * TILE_M);  // the tile of C one cluster computes
WB_EXPECT_LAUNCH(TILE_N, MMA_N);
WB_EXPECT_LAUNCH(A_BOX_ROWS, TILE_M);  // the TMA boxes the expected bytes count
WB_EXPECT_LAUNCH(B_BOX_ROWS, TILE_N);
WB_EXPECT_LAUNCH(C_BOX_ROWS, 32);  // one staged sub-tile of C
WB_EXPECT_LAUNCH(C_BOX_COLS, EPILOGUE_TILE_N);
static_assert(sizeof(SharedStorage) + 1023 <= WB_LAUNCH_SMEM_BYTES,
              "WB_LAUNCH_SMEM_BYTES: SharedStorage and the slack to align it must fit");

// Which tile of the (tiles_m x tiles_n) grid of cluster tiles the tile loop visits
// `tile`-th: a planar snake. The grid is cut into bands GRID_TILE_WIDTH tiles wide along the
// minor dimension; the loop finishes one band before the next, walking it along the major
// dimension and visiting the band's minor tiles at each step, and every other band runs
// backwards so that consecutive bands meet at the same major index. Tiles in flight at the same
// time then share a few operand blocks, which stay in L2. Host twin: common::model::tiling::tile_coords.
__device__ __forceinline__ void tile_coords(int tile, int tiles_m, int tiles_n, int& tile_m,
                                            int& tile_n) {
  const int minor_count = GRID_MINOR_DIM == 0 ? tiles_m : tiles_n;
  const int major_count = GRID_MINOR_DIM == 0 ? tiles_n : tiles_m;
  const int band = tile / (GRID_TILE_WIDTH * major_count);
  const int width = min(GRID_TILE_WIDTH, minor_count - band * GRID_TILE_WIDTH);  // last may be narrow
  const int in_band = tile - band * GRID_TILE_WIDTH * major_count;
  const int along = in_band / width;
  const int major = band % 2 == 0 ? along : major_count - 1 - along;
  const int minor = band * GRID_TILE_WIDTH + in_band % width;
  tile_m = GRID_MINOR_DIM == 0 ? minor : major;
  tile_n = GRID_MINOR_DIM == 0 ? major : minor;
}

// The tile of the cluster whose first CTA is (ctaid_x, ctaid_y): the grid is one cluster per
// tile, numbered along x, then y (KernelShape::grid), and cluster number i takes the i-th tile of
// the visiting order, whether it runs itself or a running cluster cancelled its launch.
__device__ __forceinline__ int tile_of_cluster(u32 ctaid_x, u32 ctaid_y) {
  return ctaid_y * (gridDim.x / CLUSTER) + ctaid_x / CLUSTER;
}

// Every warp, after its part of a tile: the next tile, from the scheduler's response, or -1 once a
// request failed (every cluster of the grid has started; asking again would be undefined).
__device__ __forceinline__ int take_next_tile(SharedStorage& smem, wb::Ring<1>& next, u32 warp) {
  wb::mbarrier_wait(&smem.next_tile_full, next.phase());  // the response landed in this CTA
  const bw::ClcResponse response = smem.next_tile;
  const bool canceled = bw::clc_is_canceled(response);
  const int tile = canceled ? tile_of_cluster(bw::clc_first_ctaid_x(response),
                                              bw::clc_first_ctaid_y(response))
                            : -1;
  // The next response's 16 bytes are expected before this warp releases the buffer, so they
  // count towards the barrier's next phase.
  if (canceled && warp == SCHEDULER_WARP)
    wb::mbarrier_arrive_expect_tx(&smem.next_tile_full, sizeof(bw::ClcResponse));
  __syncwarp();  // every lane's read of the response comes before the elected lane's arrive
  wb::mbarrier_arrive_cluster(&smem.next_tile_empty, 0);  // this warp is done with the response
  next.advance();
  return tile;
}

extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1)
    gemm_kernel(const __grid_constant__ TmaDesc tmap_a, const __grid_constant__ TmaDesc tmap_b,
                const __grid_constant__ TmaDesc tmap_c, int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  SharedStorage& smem = wb::shared_storage<SharedStorage>(smem_raw);

  // The host sizes shared memory from its own formula; stop rather than overrun it.
  if (threadIdx.x == 0 && wb::dynamic_smem_bytes() < sizeof(SharedStorage) + 1023) __trap();

  const u32 warp = wb::warp_id();
  const u32 rank = wb::cluster_ctarank();  // 0: the leader, which issues the MMAs; 1: its peer
  const int tiles_m = M / (CLUSTER * TILE_M);
  const int tiles_n = N / MMA_N;
  const int num_k_blocks = K / TILE_K;
  wb::Trace trace;  // this warp's timeline for runner step --trace; empty in other builds

  // A cluster launch cancelled after the cluster was placed on its SMs leaves at once: on sm_100a
  // the hardware never starts it and this is false; the sm_90 emulation's stand-in decides here.
  if (bw::clc_launch_was_cancelled()) return;

  // ANCHOR: setup
  // ---- set-up: barriers by one thread, tensor memory by warp 0 of both CTAs together ---------
  if (threadIdx.x == 0) {
    wb::tma_prefetch_desc(&tmap_a);
    wb::tma_prefetch_desc(&tmap_b);
    wb::tma_prefetch_desc(&tmap_c);
    for (int s = 0; s < STAGES; ++s) {
      wb::mbarrier_init(&smem.load_full[s], 1);   // the producer's arrive_expect_tx
      wb::mbarrier_init(&smem.load_empty[s], 1);  // one tcgen05.commit
    }
    for (int s = 0; s < ACC_STAGES; ++s) {
      wb::mbarrier_init(&smem.acc_full[s], 1);            // the tile's final tcgen05.commit
      wb::mbarrier_init(&smem.acc_empty[s], CLUSTER * 4);  // each epilogue warp of both CTAs
    }
    wb::mbarrier_init(&smem.next_tile_full, 1);  // this CTA's scheduler warp's arrive_expect_tx
    wb::mbarrier_init(&smem.next_tile_empty, CLUSTER * NUM_WARPS);  // every warp of both CTAs
    wb::fence_mbarrier_init();
  }
  if (warp == 0) {
    bw::tmem_alloc_2cta(&smem.tmem_base, TMEM_COLS);
    bw::tmem_relinquish_alloc_permit_2cta();
  }
  bw::tcgen05_fence_before_thread_sync();
  wb::cluster_sync();  // the peer's copies and the leader's commits reach initialised barriers
  bw::tcgen05_fence_after_thread_sync();
  const u32 tmem_acc = smem.tmem_base;
  // ANCHOR_END: setup
  // The first response's bytes, expected in each CTA (try_cancel only completes them).
  if (warp == SCHEDULER_WARP)
    wb::mbarrier_arrive_expect_tx(&smem.next_tile_full, sizeof(bw::ClcResponse));
  trace.enter(wb::TRACE_IDLE);

  // ---- the tile loop: this cluster's own tile, then those of the clusters it cancels --------
  // Each thread's positions in the rings (wb::Ring, pipeline.cuh), which run on from tile to
  // tile: the producer's (`fill`) and the MMA warp's (`drain`) in the ring of shared-memory
  // stages, and the accumulator's, one use per tile.
  wb::Ring<STAGES> fill, drain;
  wb::Ring<ACC_STAGES> acc_ring;
  wb::Ring<1> next;  // the response buffer's uses: one per tile
  for (int tile = tile_of_cluster(blockIdx.x, blockIdx.y); tile >= 0;
       tile = take_next_tile(smem, next, warp), acc_ring.advance()) {
    trace.start_tile(tile);
    if (warp == SCHEDULER_WARP && rank == 0) {
      // scheduler: ask for the next tile while this one is computed, once every warp of both CTAs
      // has read the previous response out of the buffer the request rewrites.
      if (!next.first_round()) wb::mbarrier_wait_cluster(&smem.next_tile_empty, next.empty_parity());
      bw::clc_try_cancel_multicast(&smem.next_tile, &smem.next_tile_full);
    }
    int tile_m, tile_n;  // the cluster's 2 * TILE_M rows and MMA_N columns
    tile_coords(tile, tiles_m, tiles_n, tile_m, tile_n);
    const int row0 = tile_m * CLUSTER * TILE_M + rank * TILE_M;  // this CTA's rows of A and C
    const int acc_slot = acc_ring.index();                            // this tile's accumulator slot
    const u32 tmem_slot = tmem_acc + acc_slot * MMA_N;

    // ANCHOR: mainloop
    // ---- main loop: warp 0 loads, warp 1 multiplies, each at its own pace ---------------------
    if (warp == 0) {
      // producer: load k-block `kb` into the next slot, once the MMAs that last read that slot are
      // done. `fill` carries on from the previous tile, so slots and phases do too.
      for (int kb = 0; kb < num_k_blocks; ++kb, fill.advance()) {
        const int slot = fill.index();
        trace.enter(wb::TRACE_SLOT_WAIT, kb);
        if (!fill.first_round()) wb::mbarrier_wait(&smem.load_empty[slot], fill.empty_parity());
        trace.enter(wb::TRACE_LOAD, kb);
        // The leader's barrier counts the bytes of both CTAs; the peer only issues its copies.
        if (rank == 0)
          wb::mbarrier_arrive_expect_tx(&smem.load_full[slot], CLUSTER * (A_TILE_BYTES + B_TILE_BYTES));
        bw::tma_load_2d_2cta(smem.a[slot], &tmap_a, &smem.load_full[slot], bw::pair_leader(rank),
                             A_TILE_BYTES, kb * TILE_K, row0);
        bw::tma_load_2d_2cta(smem.b[slot], &tmap_b, &smem.load_full[slot], bw::pair_leader(rank),
                             B_TILE_BYTES, kb * TILE_K, tile_n * MMA_N + rank * TILE_N);
      }
    } else if (warp == 1 && rank == 0) {
      // mma: multiply each k-block as soon as it lands; never waits on its own MMAs.
      const u32 idesc = bw::make_idesc_f16(CLUSTER * TILE_M, MMA_N, IS_BF16);
      // The epilogue of the tile that last used this slot must have read it.
      trace.enter(wb::TRACE_ACC_EMPTY_WAIT);
      if (!acc_ring.first_round())
        wb::mbarrier_wait_cluster(&smem.acc_empty[acc_slot], acc_ring.empty_parity());
      bw::tcgen05_fence_after_thread_sync();
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
          bw::mma_f16_2cta(tmem_slot, bw::make_smem_desc_sw128(a_addr + k_bytes, SWIZZLE_GROUP_BYTES),
                      bw::make_smem_desc_sw128(b_addr + k_bytes, SWIZZLE_GROUP_BYTES), idesc,
                      /*accumulate=*/kb > 0 || k > 0);
        }
        bw::mma_commit_2cta_multicast(&smem.load_empty[slot], 0b11);  // frees the slot in both CTAs
      }
      bw::mma_commit_2cta_multicast(&smem.acc_full[acc_slot], 0b11);  // both CTAs' slots are final
    }
    // ANCHOR_END: mainloop

    // ANCHOR: epilogue
    // ---- epilogue: tensor memory -> registers -> shared -> TMA store, sub-tile by sub-tile -----
    // Only the epilogue warpgroup; the first warpgroup moves on to the next tile at once.
    if (warp < EPILOGUE_WARP0) continue;
    trace.enter(wb::TRACE_ACC_WAIT);
    wb::mbarrier_wait(&smem.acc_full[acc_slot], acc_ring.phase());
    trace.enter(wb::TRACE_EPILOGUE);
    bw::tcgen05_fence_after_thread_sync();  // orders the tcgen05.ld below after the wait

    // Warp w may only read tensor-memory lanes 32(w%4)..32(w%4)+31, i.e. rows 32(w%4).. of the
    // tile, so each warp stages and stores its own 32-row slice, with no CTA-wide barrier.
    const u32 lane = wb::lane_id();
    const u32 quarter = warp % 4;
    for (int sub = 0; sub < MMA_N / EPILOGUE_TILE_N; ++sub) {
      T* stage = smem.epilogue[quarter][sub % 2];
      // The store issued from this buffer two sub-tiles ago must have finished reading it.
      wb::tma_store_wait_read<1>();
      for (int col = 0; col < EPILOGUE_TILE_N; col += 32) {
        u32 acc[32];
        bw::tmem_ld_32x32b_x32(tmem_slot + ((quarter * 32) << 16) + sub * EPILOGUE_TILE_N + col, acc);
        bw::tmem_wait_ld(acc);  // acc is usable from here on
        // Row `lane` of the staging tile, in the 128-byte swizzle the tensor map of C declares:
        // 16-byte chunk q of row r sits at chunk q ^ (r % 8), so the 32 lanes spread over the banks.
        for (int j = 0; j < 32; j += 8) {
          alignas(16) T out[8];
          for (int e = 0; e < 8; ++e) out[e] = static_cast<T>(__uint_as_float(acc[j + e]));
          const u32 chunk = wb::sw128_chunk(lane, (col + j) / 8);
          *reinterpret_cast<uint4*>(reinterpret_cast<char*>(stage) + lane * 128 + chunk * 16) =
              *reinterpret_cast<const uint4*>(out);
        }
      }
      wb::fence_proxy_async_shared();  // make the generic-proxy writes visible to the TMA engine
      __syncwarp();
      wb::tma_store_2d(&tmap_c, stage, tile_n * MMA_N + sub * EPILOGUE_TILE_N, row0 + quarter * 32);
      wb::tma_store_commit();
    }
    // This warp's tensor-memory loads are complete (tcgen05.wait::ld): release the accumulator.
    bw::tcgen05_fence_before_thread_sync();
    wb::mbarrier_arrive_cluster(&smem.acc_empty[acc_slot], 0);
    // ANCHOR_END: epilogue
  }  // the tile loop

  if (warp == 0) {
    // Producer tail (CUTLASS's load_tail): the MMA warp's last commits multicast to load_empty in
    // both CTAs, asynchronously; this CTA must not exit before they land in its shared memory, so
    // the producer goes round the ring STAGES more times, only waiting.
    trace.enter(wb::TRACE_TAIL);
    for (int s = 0; s < STAGES; ++s, fill.advance()) {
      if (!fill.first_round()) wb::mbarrier_wait(&smem.load_empty[fill.index()], fill.empty_parity());
    }
  }

  wb::tma_store_wait_read<0>();  // shared memory must outlive the stores' reads of it

  // ---- teardown: tensor memory must be freed before the CTA exits ---------------------------
  trace.enter(wb::TRACE_TEARDOWN);
  bw::tcgen05_fence_before_thread_sync();
  wb::cluster_sync();  // the pair's columns are freed together: both epilogues must be done
  if (warp == 0) {
    bw::tcgen05_fence_after_thread_sync();
    bw::tmem_dealloc_2cta(tmem_acc, TMEM_COLS);
  }
  trace.enter(wb::TRACE_EXIT);
}
