// Step 7, Hopper twin: the last wave, split along K (stream-K).
// Sm_90 has no cluster launch control, so this twin keeps step 6's persistent grid and changes
// only the tail. The bench contender 6-streamk is this kernel run under step 6's host plan (the
// same plan): measured on an H200 it was the best honest tail for Hopper.
// Step 6 hands out whole tiles: 512 tiles (4096 x 8192) or 1024 (8192^2) over the 66 clusters of
// an H100 or H200 make 7.76 or 15.52 waves, so the last wave keeps 50 or 34 clusters busy and
// leaves the others idle for a whole tile's time (about 3 % of the kernel). Here the whole waves
// stay as they are, and the k-blocks of the last, partial wave are split evenly over all clusters
// (stream-K, Osama et al., PPoPP 2023): cluster c takes the tail's k-blocks
// [c * U / C, (c + 1) * U / C) of U = tail tiles x k-blocks per tile, which cuts a tile into
// pieces. The cluster that holds a tile's first k-block owns it; each other cluster whose range
// starts inside that tile computes its piece first, writes its f32 partial sums to a global
// workspace and raises a flag; the owner, which reaches that tile last in its range, waits for
// the flags, adds the partials to its accumulator and stores the tile as step 6 does. A
// cluster's range starts inside at most one tile it does not own, so the workspace has one slot
// per cluster. Every cluster of the persistent grid is resident at once (the host launches only
// as many as fit), so an owner's wait always ends.
// The split is not free: every cluster pays a fix-up (partials written, waited for, read back),
// so it is made only where it saves more than that costs (split_tail below); elsewhere, e.g. at
// 4096 x 8192 x 4096, the kernel hands out whole tiles exactly as step 6 does.
//
// Step 6's twin, grid tiling, with this tail:
//
// C = A * B^T with A (M x K) and B (N x K) row-major (K-major), C (M x N) row-major.
// Only as many 2-CTA clusters as fit on the GPU are launched; each loops over (2 * TILE_M) x
// TILE_N tiles of C, with set-up done once, in an L2-friendly order (see tile_coords: the same
// order as the Blackwell step's), and its producer loads the next tile's k-blocks
// while the consumers store this one. Per tile, each CTA owns TILE_M rows, and
// both need the same TILE_N rows of B. Hopper has no MMA spanning two CTAs, but TMA can
// multicast: each CTA loads half of B's rows once and the copy lands in both CTAs' shared
// memory, so each SM pulls half as many B bytes from L2. Per CTA, three warpgroups:
//   - warpgroup 0 is the producer: warp 0 issues TMA loads into a STAGES-deep shared-memory ring
//     (its own A, its half of B for both CTAs), warp 1 is the store warp (below), the other two
//     warps idle; it gives most of its registers back (setmaxnreg.dec); a slot is refilled only
//     once the consumers of both CTAs are done with it, since the refill lands in both;
//   - warpgroups 1 and 2 are consumers: each multiplies its 64-row half of the tile with wgmma
//     and takes the producer's registers (setmaxnreg.inc), which is what lets the tile grow to
//     128 x 256: each consumer holds a 64 x 256 f32 accumulator, 128 registers a thread;
//   - once its last wgmma completes, each consumer writes its 64 x 256 rows of C into `out`, a
//     swizzled shared-memory tile, hands them to the store warp (out_full) and goes back to its
//     wgmma at once; the store warp issues the TMA stores and frees `out` (out_empty) as soon as
//     they have read it. Hopper has no tensor memory to hand an accumulator to an epilogue
//     warpgroup, so what leaves the consumers' critical path is the stores: the tensor cores
//     idle while a consumer writes `out`, not while C travels to global memory. `out` holds one
//     consumer's rows (32 KB, step 4's staging size), so the ring keeps its STAGES stages; the
//     two consumers fill it in turn, consumer 0 first, each waiting for the other's rows to
//     have been read.
// The host sets TILE_M, TILE_N, TILE_K, STAGES, EPILOGUE_TILE_N, GRID_TILE_WIDTH,
// GRID_MINOR_DIM (from step7_last_wave::HOPPER) and the element type.
#include "hopper.cuh"

typedef WB_DTYPE T;  // __half or __nv_bfloat16
constexpr bool IS_BF16 = WB_IS_BF16;

constexpr int TILE_M = WB_TILE_M;    // 128: rows of C per CTA, 64 per consumer warpgroup
constexpr int TILE_N = WB_TILE_N;    // 256: columns of C per CTA = N of every wgmma
constexpr int TILE_K = WB_TILE_K;    // 64: one 128-byte swizzle row of 16-bit elements
constexpr int STAGES = WB_STAGES;    // depth of the TMA -> wgmma ring
constexpr int EPILOGUE_TILE_N = WB_EPILOGUE_TILE_N;  // columns per staged TMA store
constexpr int GRID_TILE_WIDTH = WB_GRID_TILE_WIDTH;  // tiles per band of the visiting order
constexpr int GRID_MINOR_DIM = WB_GRID_MINOR_DIM;    // 0: bands across M, 1: bands across N
constexpr int MMA_M = 64;            // M of one wgmma
constexpr int MMA_K = 16;            // K of one wgmma with 16-bit inputs

constexpr int CLUSTER = 2;                   // CTAs per cluster, sharing B
constexpr int CONSUMERS = 2;                 // consumer warpgroups, after the producer's
constexpr int NUM_THREADS = 128 * (1 + CONSUMERS);
constexpr int WG_M = TILE_M / CONSUMERS;     // rows of the tile each consumer owns
constexpr int M_BLOCKS = WG_M / MMA_M;       // wgmma per K step and consumer
constexpr u32 PRODUCER_REGS = 40;            // setmaxnreg: the producer keeps few registers...
constexpr u32 CONSUMER_REGS = 232;           // ...so the consumers can hold their accumulators
constexpr u32 A_TILE_BYTES = TILE_M * TILE_K * sizeof(T);
constexpr u32 B_TILE_BYTES = TILE_N * TILE_K * sizeof(T);  // both CTAs' halves
constexpr int B_SHARE_ROWS = TILE_N / CLUSTER;              // rows of B each CTA loads
constexpr u32 SWIZZLE_GROUP_BYTES = 8 * 128;  // 8 rows of 128 B: the SBO of every operand

static_assert(TILE_K * sizeof(T) == 128, "one k-block must be exactly one 128-byte swizzle row");
static_assert(WG_M % MMA_M == 0, "each consumer's rows are made of 64-row wgmma blocks");
static_assert(TILE_N == 128 || TILE_N == 256, "N of one wgmma: 128 or 256 here");
static_assert(M_BLOCKS == 1, "one 64-row block per consumer: out holds one consumer's rows");
static_assert(M_BLOCKS * TILE_N / 2 <= 128, "the accumulator must fit in a thread's registers");
static_assert(PRODUCER_REGS * 128 + CONSUMERS * CONSUMER_REGS * 128 <= 65536,
              "the warpgroups' registers must fit in the SM's register file");
static_assert(STAGES >= 2, "the producer must be able to run ahead of the consumers");
static_assert(GRID_TILE_WIDTH >= 1 && (GRID_MINOR_DIM == 0 || GRID_MINOR_DIM == 1), "grid order");
static_assert(EPILOGUE_TILE_N * sizeof(T) == 128, "a staging row is one 128-byte swizzle row");
static_assert(TILE_N % EPILOGUE_TILE_N == 0, "the sub-tiles must cover the tile");
constexpr int SUBTILES = TILE_N / EPILOGUE_TILE_N;  // TMA store boxes in one consumer's rows

// ANCHOR: storage
struct SharedStorage {
  alignas(1024) T a[STAGES][TILE_M * TILE_K];  // 128B swizzle needs 1024-byte aligned tiles
  alignas(1024) T b[STAGES][TILE_N * TILE_K];
  alignas(1024) T out[SUBTILES][MMA_M * EPILOGUE_TILE_N];  // one consumer's 64 rows of C
  alignas(8) u64 load_full[STAGES];   // TMA -> wgmma: slot holds k-block data (both B halves)
  alignas(8) u64 load_empty[STAGES];  // wgmma -> TMA: every consumer warp of both CTAs is done
  alignas(8) u64 out_full[CONSUMERS];   // consumer c -> store warp: `out` holds c's rows
  alignas(8) u64 out_empty[CONSUMERS];  // store warp -> the other consumer: c's rows were read
};

// ---- the launch the host plans (the step crate's KernelShape), checked at compile time -----
WB_EXPECT_LAUNCH(THREADS, NUM_THREADS);
WB_EXPECT_LAUNCH(CLUSTER, CLUSTER);
WB_EXPECT_LAUNCH(SCHEDULE, WB_SCHEDULE_PERSISTENT);
WB_EXPECT_LAUNCH(TILE_M, CLUSTER * TILE_M);  // the tile of C one cluster computes
WB_EXPECT_LAUNCH(TILE_N, TILE_N);
WB_EXPECT_LAUNCH(A_BOX_ROWS, TILE_M);  // the TMA boxes the expected bytes count
WB_EXPECT_LAUNCH(B_BOX_ROWS, B_SHARE_ROWS);
WB_EXPECT_LAUNCH(C_BOX_ROWS, MMA_M);  // one staged sub-tile of C
WB_EXPECT_LAUNCH(C_BOX_COLS, EPILOGUE_TILE_N);
static_assert(sizeof(SharedStorage) + 1023 <= WB_LAUNCH_SMEM_BYTES,
              "WB_LAUNCH_SMEM_BYTES: SharedStorage and the slack to align it must fit");
// ANCHOR_END: storage

// Which tile of the (tiles_m x tiles_n) grid of cluster tiles the persistent loop visits
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

// ---- the stream-K tail -------------------------------------------------------------------------
// ANCHOR: schedule
// Which clusters compute which k-blocks of which tiles: pure functions of the launch (tests/tests/
// streamk_schedule.rs compiles this part with the host C++ compiler and checks it).

// One workspace slot per (cluster, CTA, consumer), so a grid of more clusters runs without the
// stream-K tail (whole tiles only).
constexpr int MAX_CLUSTERS = 66;

// What the fix-up costs, in k-blocks of a cluster's time (one 128 x 256 x 64 k-block per CTA:
// ~0.75 us at the 1.4-1.7 GHz the power cap leaves an H100). Measured on an H100 when every tail
// was split (commit 4da9e01; assets/results/step6-experiments-h100-2026-11-25/README.md): at
// 4096 x 8192 x 4096 the split shortened the last wave by 15 k-blocks (~12 us) and the kernel
// lost 1.6-5.9 us against step 6; at 8192^3 it shortened it by 62 k-blocks (~46 us) and the
// kernel gained 27.7-31.0 us. Both put the fix-up at 17-24 k-blocks (13-18 us: a helper writes
// 128 KB of f32 partials per CTA, 5-6 us in the traces, an owner waits for, reads and adds them,
// 8-10 us against a whole tile's 1 us epilogue). The upper end, so that a split that is made pays.
constexpr int FIXUP_K_BLOCKS = 24;

// The least part of a tile's k-blocks a split must save (1/5; see split_tail).
constexpr int MIN_SAVED_PART = 5;

// Whether the last, partial wave is split over every cluster: only if that shortens it by more
// k-blocks than the fix-up costs, and by at least a fifth of a tile. Unsplit, the wave takes a
// whole tile (k_blocks); split, the longest share of its units = tail tiles x k_blocks,
// ceil(units / clusters). The second condition is measured (H200, 2026-11-28,
// assets/results/step7-split-h200-2026-11-28/): split pieces give up the whole wave's lockstep
// walk along K, in which clusters of one band read the same panels of A and B from L2 at the same
// time, and that costs more the longer the tile. At 4096 x 4096 x 16384 the split saved 31 of 256
// k-blocks (12 %) and lost 5.5 %; at 6144^3 it saved 26 of 96 (27 %) and gained 0.7 %; at
// 3328 x 5376 x 2880, 38 of 45, +4.5 %. No tail (whole waves), more clusters than workspace slots,
// or units * clusters beyond 32 bits (tail_range's arithmetic): no split.
__device__ __forceinline__ bool split_tail(int num_tiles, int num_clusters, int k_blocks) {
  const int tail_tiles = num_tiles % num_clusters;
  if (tail_tiles == 0 || num_clusters > MAX_CLUSTERS) return false;
  if ((long long)num_clusters * num_clusters * k_blocks >= (1ll << 31)) return false;
  const int longest = (tail_tiles * k_blocks + num_clusters - 1) / num_clusters;
  const int saved = k_blocks - longest;
  return saved > FIXUP_K_BLOCKS && saved >= k_blocks / MIN_SAVED_PART;
}

// One item of a cluster's work: k-blocks [kb_begin, kb_end) of the tile visited `tile`-th.
// kb_begin == 0: the cluster owns the tile and stores it, after adding the partial sums of the
// clusters first_helper .. last_helper - 1 (none when equal) whose tail ranges are not empty
// (with fewer tail k-blocks than clusters, some take none). `units`: the tail's k-blocks.
struct Work {
  int tile, kb_begin, kb_end, first_helper, last_helper, units;
};

// The tail's k-blocks [begin, end) that `cluster` takes: an even share of the k-blocks of the
// tiles the whole waves leave over. 32-bit arithmetic (64-bit division is a slow subroutine call
// that also cost registers): split_tail refuses a split where units * clusters would not fit.
__device__ __forceinline__ void tail_range(int cluster, int num_clusters, int units, int& begin,
                                           int& end) {
  begin = units * cluster / num_clusters;
  end = units * (cluster + 1) / num_clusters;
}

// Item `i` of `cluster`'s list (the same in every role): whole tiles first, one per wave as in
// step 6 (unsplit, nothing else), then the pieces of the tail range in order. False past the
// last item.
// `stream_k`: split_tail's answer for this launch (see gemm_kernel: each answer is compiled as a
// path of its own).
__device__ __forceinline__ bool work_item(int i, int cluster, int num_clusters, int num_tiles,
                                          int k_blocks, Work& w, bool stream_k) {
  const int waves = stream_k ? num_tiles / num_clusters : (num_tiles + num_clusters - 1) / num_clusters;
  w.first_helper = w.last_helper = w.units = 0;
  if (i < waves || !stream_k) {
    w.tile = cluster + i * num_clusters;
    w.kb_begin = 0;
    w.kb_end = k_blocks;
    return w.tile < num_tiles;
  }
  const int tail_first = waves * num_clusters;  // the tail's first tile in the visiting order
  const int units = (num_tiles - tail_first) * k_blocks;  // < num_clusters * k_blocks
  int begin, end;
  tail_range(cluster, num_clusters, units, begin, end);
  w.units = units;
  const int t = begin / k_blocks + (i - waves);  // the item's tile within the tail
  const int p0 = max(begin, t * k_blocks), p1 = min(end, (t + 1) * k_blocks);
  if (p0 >= p1) return false;
  w.tile = tail_first + t;
  w.kb_begin = p0 - t * k_blocks;
  w.kb_end = p1 - t * k_blocks;
  if (w.kb_begin == 0) {
    // The helpers: the next clusters whose (non-empty) ranges start inside this tile.
    w.first_helper = w.last_helper = cluster + 1;
    for (int c = cluster + 1; c < num_clusters; ++c) {
      int b, e;
      tail_range(c, num_clusters, units, b, e);
      if (b >= (t + 1) * k_blocks) break;
      if (b < e) w.last_helper = c + 1;
    }
  }
  return true;
}
__device__ __forceinline__ bool work_item(int i, int cluster, int num_clusters, int num_tiles,
                                          int k_blocks, Work& w) {
  return work_item(i, cluster, num_clusters, num_tiles, k_blocks, w,
                   split_tail(num_tiles, num_clusters, k_blocks));
}
// ANCHOR_END: schedule

// The workspace: a consumer's 64 x 256 f32 partial sums per slot, laid out so that a warp's
// accesses are contiguous: pair p (accumulator values 2p, 2p + 1) of thread t at [p][t]. Module
// globals, so the host plan needs no extra buffer: 66 clusters take 17 MB.
constexpr int PAIRS = TILE_N / 4;  // f32 pairs per consumer thread (64 x 256 / 128 / 2)
__device__ float2 sk_partials[MAX_CLUSTERS * CLUSTER * CONSUMERS][PAIRS * 128];
// 1 while a slot holds partial sums its owner has not read; the owner sets it back to 0, so the
// next launch finds every flag down.
__device__ u32 sk_flags[MAX_CLUSTERS * CLUSTER * CONSUMERS];

// ld.acquire.gpu, red.release.gpu, st.relaxed.gpu (PTX ISA "ld", "red", "st"; "Memory
// Consistency Model"): the flag handshake between a piece's writer and the tile's owner.
__device__ __forceinline__ u32 ld_acquire_gpu(const u32* p) {
  u32 v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void red_release_gpu_add(u32* p, u32 v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void st_relaxed_gpu(u32* p, u32 v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// The kernel's body, for a launch that splits its tail (STREAM_K) or not; see gemm_kernel below.
template <bool STREAM_K>
__device__ __forceinline__ void gemm(const TmaDesc& tmap_a, const TmaDesc& tmap_b,
                                     const TmaDesc& tmap_c, int M, int N, int K) {
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  SharedStorage& smem = wb::shared_storage<SharedStorage>(smem_raw);

  // The host sizes shared memory from its own formula; stop rather than overrun it.
  if (threadIdx.x == 0 && wb::dynamic_smem_bytes() < sizeof(SharedStorage) + 1023) __trap();

  const u32 warp = wb::warp_id();
  const u32 lane = wb::lane_id();
  const u32 warpgroup = threadIdx.x / 128;  // 0: producer; 1, 2: consumers
  const u32 rank = wb::cluster_ctarank();   // which half of the rows and of B's rows
  const int tiles_m = M / (CLUSTER * TILE_M);
  const int tiles_n = N / TILE_N;
  const int num_tiles = tiles_m * tiles_n;
  const int num_clusters = gridDim.x / CLUSTER;
  const int num_k_blocks = K / TILE_K;
  const int cluster_id = blockIdx.x / CLUSTER;
  wb::Trace trace;  // this warp's timeline for runner step --trace; empty in other builds

  // ANCHOR: setup
  // ---- set-up: barriers by one thread, visible to the pair before anyone uses them ---------
  if (threadIdx.x == 0) {
    wb::tma_prefetch_desc(&tmap_a);
    wb::tma_prefetch_desc(&tmap_b);
    wb::tma_prefetch_desc(&tmap_c);
    for (int s = 0; s < STAGES; ++s) {
      wb::mbarrier_init(&smem.load_full[s], 1);   // the producer's arrive_expect_tx
      wb::mbarrier_init(&smem.load_empty[s], CLUSTER * CONSUMERS * 4);  // consumer warps, both CTAs
    }
    for (int c = 0; c < CONSUMERS; ++c) {
      wb::mbarrier_init(&smem.out_full[c], 4);   // one arrival per warp of consumer c
      wb::mbarrier_init(&smem.out_empty[c], 1);  // the store warp, once c's rows were read
    }
    wb::fence_mbarrier_init();
  }
  wb::cluster_sync();  // the peer's multicasts and arrivals reach initialised barriers
  // ANCHOR_END: setup
  trace.enter(wb::TRACE_IDLE);

  // ANCHOR: mainloop
  // ---- main loop: the producer loads, the consumers multiply, each at its own pace ----------
  if (warpgroup == 0) {
    hp::setmaxnreg_dec<PRODUCER_REGS>();
    if (warp == 0) {
      // producer: load k-block `kb` into its slot, once the wgmma that last read it (in both
      // CTAs) are done. The slot's barrier expects this CTA's A and both halves of B.
      // The persistent loop: cluster c takes tiles c, c + num_clusters, ... (its body keeps
      // step 3's indentation, so that `runner diff 3 4 --arch sm_90a` shows only what changed).
      // `it` counts k-blocks across items, so slots and phases carry on from the previous one.
      Work w;
      for (int i = 0, it = 0; work_item(i, cluster_id, num_clusters, num_tiles, num_k_blocks, w, STREAM_K); ++i) {
      const int tile = w.tile;
      trace.start_tile(tile);
      int tile_m, tile_n;  // the cluster's 2 * TILE_M rows and TILE_N columns
      tile_coords(tile, tiles_m, tiles_n, tile_m, tile_n);
      const int row0 = tile_m * CLUSTER * TILE_M + rank * TILE_M;  // this CTA's rows of A
      for (int kb = w.kb_begin; kb < w.kb_end; ++kb, ++it) {
        const int slot = it % STAGES;
        trace.enter(wb::TRACE_SLOT_WAIT, kb);
        if (it >= STAGES) wb::mbarrier_wait(&smem.load_empty[slot], ((it / STAGES) - 1) & 1);
        trace.enter(wb::TRACE_LOAD, kb);
        wb::mbarrier_arrive_expect_tx(&smem.load_full[slot], A_TILE_BYTES + B_TILE_BYTES);
        wb::tma_load_2d(smem.a[slot], &tmap_a, &smem.load_full[slot], kb * TILE_K, row0);
        // This CTA's half of B, into the same place in both CTAs; each counts it on its own barrier.
        wb::tma_load_2d_multicast(smem.b[slot] + rank * B_SHARE_ROWS * TILE_K, &tmap_b,
                                  &smem.load_full[slot], (1 << CLUSTER) - 1, kb * TILE_K,
                                  tile_n * TILE_N + rank * B_SHARE_ROWS);
      }
      }  // the persistent loop
    } else if (warp == 1) {
      // store warp: ship each consumer's rows of each tile with TMA stores, in the order the
      // consumers fill `out` (tile by tile, consumer 0 first), and free `out` once the stores
      // have read it; their writes to global memory finish on their own.
      // Only the tiles this cluster stores: whole ones and the tail tiles it owns.
      Work w;
      for (int i = 0, local = 0; work_item(i, cluster_id, num_clusters, num_tiles, num_k_blocks, w, STREAM_K); ++i) {
        if (w.kb_begin > 0) continue;
        const int tile = w.tile;
        trace.start_tile(tile);
        int tile_m, tile_n;  // the cluster's 2 * TILE_M rows and TILE_N columns
        tile_coords(tile, tiles_m, tiles_n, tile_m, tile_n);
        const int row0 = tile_m * CLUSTER * TILE_M + rank * TILE_M;  // this CTA's rows of C
        for (int c = 0; c < CONSUMERS; ++c) {
          trace.enter(wb::TRACE_ACC_WAIT);
          wb::mbarrier_wait(&smem.out_full[c], local & 1);
          trace.enter(wb::TRACE_EPILOGUE);
          for (int s = 0; s < SUBTILES; ++s)
            wb::tma_store_2d(&tmap_c, smem.out[s], tile_n * TILE_N + s * EPILOGUE_TILE_N,
                             row0 + c * WG_M);
          wb::tma_store_commit();
          wb::tma_store_wait_read<0>();  // the stores have read `out`: the other consumer may refill it
          if (lane == 0) wb::mbarrier_arrive(&smem.out_empty[c]);
        }
        ++local;
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
    const u32 tid = threadIdx.x % 128;  // this thread's place in its warpgroup
    // The items, in step with the producer's; `local` counts the tiles this cluster stores.
    Work w;
    int it = 0;
    for (int i = 0, local = 0; work_item(i, cluster_id, num_clusters, num_tiles, num_k_blocks, w, STREAM_K); ++i) {
    const int tile = w.tile;
    trace.start_tile(tile);
    for (int kb = w.kb_begin; kb < w.kb_end; ++kb, ++it) {
      const int slot = it % STAGES;
      trace.enter(wb::TRACE_DATA_WAIT, kb);
      wb::mbarrier_wait(&smem.load_full[slot], (it / STAGES) & 1);
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
              /*accumulate=*/kb > w.kb_begin || k > 0);
        }
      }
      hp::wgmma_commit_group();
      // At most this k-block's group still runs: the previous one has finished reading its slot.
      trace.enter(wb::TRACE_MMA_WAIT, kb);
      hp::wgmma_wait_group<1>();
      // Release the previous slot in both CTAs: both producers' multicasts refill it.
      if (kb > w.kb_begin)
        for (int r = 0; r < CLUSTER; ++r)
          wb::mbarrier_arrive_cluster_relaxed(&smem.load_empty[(it - 1) % STAGES], r);
    }
    trace.enter(wb::TRACE_ACC_WAIT);
    hp::wgmma_wait_group<0>();
    for (int mb = 0; mb < M_BLOCKS; ++mb) hp::fence_operands(acc[mb]);
    // The item's last slot too: the producer refills it with the next item while we store.
    for (int r = 0; r < CLUSTER; ++r)
      wb::mbarrier_arrive_cluster_relaxed(&smem.load_empty[(it - 1) % STAGES], r);
    // ANCHOR_END: mainloop

    // ---- stream-K: a piece of a tile this cluster does not own goes to its workspace slot ----
    if (w.kb_begin > 0) {
      float2* part = sk_partials[(cluster_id * CLUSTER + rank) * CONSUMERS + consumer];
      for (int p = 0; p < PAIRS; ++p)
        __stcg(&part[p * 128 + tid], make_float2(acc[0][2 * p], acc[0][2 * p + 1]));
      __threadfence();  // each thread's partial sums before the flag (with the barrier below)
      hp::named_barrier_sync(1 + consumer, 128);
      if (tid == 0) red_release_gpu_add(&sk_flags[(cluster_id * CLUSTER + rank) * CONSUMERS + consumer], 1);
      continue;
    }
    // The owner of a split tile adds its helpers' partial sums.
    for (int c = w.first_helper; c < w.last_helper; ++c) {
      int b, e;
      tail_range(c, num_clusters, w.units, b, e);
      if (b == e) continue;  // a cluster with no tail k-blocks raises no flag
      const int s = (c * CLUSTER + rank) * CONSUMERS + consumer;
      if (tid == 0) {
        while (ld_acquire_gpu(&sk_flags[s]) == 0) {
        }
        st_relaxed_gpu(&sk_flags[s], 0);  // down again for the next launch
      }
      hp::named_barrier_sync(1 + consumer, 128);  // the whole warpgroup reads after the acquire
      const float2* part = sk_partials[s];
      for (int p = 0; p < PAIRS; ++p) {
        const float2 v = __ldcg(&part[p * 128 + tid]);
        acc[0][2 * p] += v.x;
        acc[0][2 * p + 1] += v.y;
      }
    }

    // ANCHOR: epilogue
    // ---- epilogue: registers -> `out`; the store warp stores it while we start the next tile ----
    // `out` was last filled by the other consumer: of this tile (consumer 1) or of the previous
    // one (consumer 0). Wait until the stores of those rows have read it.
    trace.enter(wb::TRACE_OUT_EMPTY_WAIT);
    const int other = (consumer + 1) % CONSUMERS;
    const int other_local = consumer == 0 ? local - 1 : local;
    if (other_local >= 0) wb::mbarrier_wait(&smem.out_empty[other], other_local & 1);
    trace.enter(wb::TRACE_EPILOGUE);
    // wgmma's fragment of a 64-row block: warp w (of the warpgroup) holds rows 16w..16w+15;
    // lane l holds row 16w + l/4 (values 4i, 4i+1) and row 16w + l/4 + 8 (values 4i+2, 4i+3),
    // at columns 8i + 2(l%4) and the next one. Each pair is written as one 32-bit word.
    for (int mb = 0; mb < M_BLOCKS; ++mb) {
      for (int col0 = 0; col0 < TILE_N; col0 += EPILOGUE_TILE_N) {
        T* stage = smem.out[col0 / EPILOGUE_TILE_N];  // the TMA store box of these columns
        // Row r of the staging tile in the 128-byte swizzle the tensor map of C declares: 16-byte
        // chunk q of row r sits at chunk q ^ (r % 8), so the 8 rows a warp writes at once spread
        // over all 32 banks.
        for (int half = 0; half < 2; ++half) {
          const u32 r = wg_warp * 16 + lane / 4 + 8 * half;
          for (int q = 0; q < EPILOGUE_TILE_N / 8; ++q) {
            const int i = col0 / 8 + q;  // the value pair's 8-column block in the fragment
            const u32 chunk = wb::sw128_chunk(r, q);
            *reinterpret_cast<u32*>(reinterpret_cast<char*>(stage) + r * 128 + chunk * 16 +
                                    (lane % 4) * 4) =
                hp::pack_pair<T>(acc[mb][4 * i + 2 * half], acc[mb][4 * i + 2 * half + 1]);
          }
        }
      }
    }
    wb::fence_proxy_async_shared();  // make the generic-proxy writes visible to the TMA engine
    __syncwarp();                    // the warp's writes and fences come before its arrival
    if (lane == 0) wb::mbarrier_arrive(&smem.out_full[consumer]);  // this warp's 16 rows are in `out`
    ++local;
    // ANCHOR_END: epilogue
    }  // the persistent loop
  }

  // ---- teardown: neither CTA may exit while its peer can still multicast into it or arrive
  // on its barriers --------------------------------------------------------------------------
  trace.enter(wb::TRACE_TEARDOWN);
  wb::cluster_sync();
  trace.enter(wb::TRACE_EXIT);
}

// Whether to split is one answer per launch, so it is taken once here and each answer runs a body
// compiled for it alone: without a split, the bookkeeping of pieces, owners and helpers is not
// there at all and the loops are step 6's. Measured on an H200 (2026-11-28,
// assets/results/step7-split-h200-2026-11-28/): with one body for both answers, the launches that
// did not split ran 1-7 % behind step 6 (7 % at K = 256, where tiles are short); with two, they
// run as step 6 does.
extern "C" __global__ void __launch_bounds__(NUM_THREADS, 1)
    gemm_kernel(const __grid_constant__ TmaDesc tmap_a, const __grid_constant__ TmaDesc tmap_b,
                const __grid_constant__ TmaDesc tmap_c, int M, int N, int K) {
  const int num_tiles = (M / (CLUSTER * TILE_M)) * (N / TILE_N);
  if (split_tail(num_tiles, gridDim.x / CLUSTER, K / TILE_K))
    gemm<true>(tmap_a, tmap_b, tmap_c, M, N, K);
  else
    gemm<false>(tmap_a, tmap_b, tmap_c, M, N, K);
}
