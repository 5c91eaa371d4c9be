// common.cuh: the device primitives the Blackwell kernels and their Hopper twins share, one small
// wrapper per PTX idea: threads and addresses, mbarriers, clusters, TMA and proxy fences. The
// architecture-specific parts live beside it: blackwell.cuh (tcgen05, tensor memory) and
// hopper.cuh (wgmma, setmaxnreg); each includes this header.
//
// Conventions
// - Shared-memory addresses are 32-bit `shared::cta` addresses (see `smem_u32`).
// - "warp-level" wrappers are called by all 32 lanes of a warp; one elected lane issues the
//   instruction. That keeps the kernels free of `if (lane == 0)` noise and lets the sm_90
//   emulation (tcgen05_emu.cuh) use every lane for the emulated math.
// - Each wrapper cites the PTX ISA (CUDA 13.0) section of the instruction it wraps, by title.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

typedef unsigned int u32;
typedef unsigned long long u64;

// Under the sm_90 emulation (WB_EMULATE_TCGEN05), the tcgen05 ordering sanitizer of
// tcgen05_emu.cuh must see every thread synchronisation and every TMA load: the wrappers below
// call these hooks, which tcgen05_emu.cuh defines. Natively WB_EMU_HOOK expands to nothing.
#if defined(WB_EMULATE_TCGEN05)
namespace wb {
namespace emu_hook {
enum SyncKind : u32 { MBARRIER = 1, CTA_BARRIER = 2, CLUSTER_BARRIER = 3 };
constexpr u32 THIS_CTA = 0xffffffffu;
// `name` is the barrier's expression in the kernel (mbarrier_init's macro below), for hang reports.
__device__ void barrier_init(u64* bar, u32 count, const char* name);
__device__ void wait_done(u64* bar, u32 parity);   // a wait on `bar` saw `parity` complete
__device__ void arrive(u64* bar, u32 rank);        // just before one arrival on CTA `rank`'s bar
__device__ void expect_tx(u64* bar, u32 bytes);    // just before an arrive.expect_tx of `bytes`
__device__ void thread_sync_before(u32 kind);      // just before bar.sync / barrier.cluster
__device__ void thread_sync_after(u32 kind);
__device__ void tma_load(const void* dst, u32 bytes, u64* bar, u32 bar_rank, u32 cta_mask);
__device__ void proxy_fence();                     // fence.proxy.async.shared::cta
__device__ void tma_store(const void* src);        // just before a bulk store from `src`
__device__ void bulk_commit();                     // cp.async.bulk.commit_group
__device__ void bulk_wait_read(u32 pending);       // after cp.async.bulk.wait_group.read
// An mbarrier wait that has not succeeded yet: the watchdog that explains hangs.
struct Watch {
  u64 start;
  u32 spins;
};
__device__ void waiting(u64* bar, u32 parity, Watch& watch);
}  // namespace emu_hook
}  // namespace wb
#define WB_EMU_HOOK(call) ::wb::emu_hook::call
#define WB_EMU_WATCH(name) ::wb::emu_hook::Watch name = {0, 0}
#else
#define WB_EMU_HOOK(call) ((void)0)
#define WB_EMU_WATCH(name)
#endif

// Stress builds (`runner step N --arch sm_90a --stress SEED`, common::stress on the host): with
// -DWB_STRESS=1 -DWB_STRESS_SEED=S the wrappers below sleep for a pseudo-random while at named
// points, so that an ordering bug hidden by the usual timing (one thread happens to be done before
// another looks) meets other interleavings and shows as a wrong result. A point's delay is a
// hash of the seed, the CTA, the warp, the point and the warp's own call count, so each seed
// explores its own schedule. Each seed also makes some points hot (each with probability 1/4, at
// least one): a hot point sleeps in one call of four, up to about 65 us; the others only jitter
// (one call in 64, under 1.1 us). Uniform delays everywhere would mostly slow whichever role
// passes the most points (the consumers, once per k-block); a few hot points make one role slow
// against the others, which is what a missing wait for that role needs in order to show. The
// GPU check's seeds (common::stress::CHECK_SEEDS) are chosen so that their hot points cover
// every point. The sleep is
// nanosleep.u32 t (PTX ISA "Miscellaneous Instructions: nanosleep", sm_70 on): a sleep of about
// t nanoseconds, guaranteed within [0, 2t], at most 1 ms. The points (common::stress::POINTS):
//   AFTER_WGMMA_COMMIT  hp::wgmma_commit_group        AFTER_WGMMA_WAIT  hp::wgmma_wait_group
//   BEFORE_ARRIVE       every mbarrier arrive wrapper  AFTER_WAIT        mbarrier waits, once done
//   BEFORE_TMA_STORE    wb::tma_store_2d (and _hint)   BEFORE_TMA_LOAD   the TMA load wrappers
//   AFTER_BARRIER       cta_sync, cluster_sync, hp::named_barrier_sync
// Delays make no correct kernel wrong: only the timing moves. They cannot slow the asynchronous
// engines themselves (a wgmma, a TMA copy), so a missing wait for one of those is the static
// check's to find (common::ptx_check: wgmma-wait-before-use), not stress's. Without WB_STRESS
// every point compiles to nothing.
#if defined(WB_STRESS) && WB_STRESS
#if !defined(WB_STRESS_SEED)
#error "a stress build (WB_STRESS) needs WB_STRESS_SEED"
#endif
// Per-warp call counters, zero when the module loads: slot (CTA * 32 + warp) % STRESS_SLOTS.
// Warps that share a slot (a grid of more than 128 CTAs) only interleave their counts.
__device__ u32 wb_stress_calls[4096];
namespace wb {
namespace stress {
enum Point : u32 {
  AFTER_WGMMA_COMMIT = 0,
  AFTER_WGMMA_WAIT,
  BEFORE_ARRIVE,
  AFTER_WAIT,
  BEFORE_TMA_STORE,
  BEFORE_TMA_LOAD,
  AFTER_BARRIER,
  POINTS
};
constexpr u32 SLOTS = 4096;

// splitmix64's finaliser: every input bit moves every output bit.
__host__ __device__ constexpr u64 mix(u64 x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
constexpr u64 SEED = mix(static_cast<u64>(WB_STRESS_SEED) + 0x9E3779B97F4A7C15ull);

// The seed's hot points: point p is hot when bits 2p and 2p + 1 of SEED are both 0; if none is,
// point (SEED >> 32) % POINTS. Mirrored by common::stress::hot_points, which passes its result
// as WB_STRESS_HOT for the assertion below.
__host__ __device__ constexpr u32 hot_points() {
  u32 hot = 0;
  for (u32 p = 0; p < POINTS; ++p)
    if (((SEED >> (2 * p)) & 3) == 0) hot |= 1u << p;
  return hot != 0 ? hot : 1u << ((SEED >> 32) % POINTS);
}
constexpr u32 HOT = hot_points();
#if defined(WB_STRESS_HOT)
static_assert(HOT == WB_STRESS_HOT, "common::stress::hot_points must mirror wb::stress::hot_points");
#endif

// Called by the lanes of a warp that reach `point` together (one lane or all): one lane counts
// the call, and all of them sleep the same time, so the warp stays converged. A sleeping call at
// a hot point sleeps 0 to 1023 ns scaled by 1 to 64 (most sleeps short, a few long).
__device__ __forceinline__ void delay(Point point) {
  const u32 active = __activemask();
  const u32 leader = __ffs(active) - 1;
  const u32 cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const u32 warp = threadIdx.x / 32;
  u32 call = 0;
  if (threadIdx.x % 32 == leader) call = atomicAdd(&wb_stress_calls[(cta * 32 + warp) % SLOTS], 1u);
  call = __shfl_sync(active, call, leader);
  const u64 r = mix(SEED ^ mix((static_cast<u64>(cta) << 32) | (warp << 8) | point) ^ call);
  const bool hot = ((HOT >> point) & 1) != 0;
  if ((r & (hot ? 3 : 63)) != 0) return;
  const u32 ns = static_cast<u32>((r >> 8) & 1023) << (hot ? (r >> 20) % 7 : 0);
  asm volatile("nanosleep.u32 %0;" ::"r"(ns) : "memory");
}
}  // namespace stress
}  // namespace wb
#define WB_STRESS_POINT(point) ::wb::stress::delay(::wb::stress::point)
#else
#define WB_STRESS_POINT(point) ((void)0)
#endif

// The host encodes tensor maps with cuTensorMapEncodeTiled; the device only passes their address.
struct alignas(64) TmaDesc {
  u64 opaque[16];
};

// The launch the host plans for a kernel reaches it as WB_LAUNCH_<FACT> (common::step::
// KernelShape::launch_defines: THREADS, CLUSTER, PERSISTENT, SMEM_BYTES, the cluster's TILE_M and
// TILE_N of C, and the rows and columns of the TMA boxes). Each kernel ties every one of them to
// the constants it was written for, so a host and a kernel that disagree fail to compile, on any
// machine, instead of misbehaving on a GPU. The message names the definition.
#define WB_EXPECT_LAUNCH(fact, value)                 \
  static_assert(WB_LAUNCH_##fact == (value), "WB_LAUNCH_" #fact \
                ": the host plans another launch than this kernel was written for")

namespace wb {

// ---------------------------------------------------------------------------------------------
// Thread and address helpers
// ---------------------------------------------------------------------------------------------

__device__ __forceinline__ u32 smem_u32(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

// The kernel's SharedStorage in dynamic shared memory, its start rounded up to 1024 bytes (the
// 128-byte swizzle needs 1024-byte aligned tiles). The rounding is pointer arithmetic on the
// __shared__ array itself, not a round trip through size_t: the compiler then still knows that
// the result points to shared memory, so stores through it compile to STS, not to generic ST
// that must look up the address's state space at run time (CUDA C++ Programming Guide,
// "Address Space Predicate Functions" and "Shared Memory").
template <typename Storage>
__device__ __forceinline__ Storage& shared_storage(unsigned char* smem_raw) {
  const u32 pad = (1024u - (smem_u32(smem_raw) & 1023u)) & 1023u;
  return *reinterpret_cast<Storage*>(smem_raw + pad);
}

// The 128-byte swizzle (PTX ISA "Tensors: Tensor Swizzling Modes", CU_TENSOR_MAP_SWIZZLE_128B;
// the same K-major layout the shared-memory matrix descriptors call the 128B-swizzling canonical
// layout, "Shared Memory Matrix Layout" under tcgen05 and wgmma): in a 1024-byte aligned tile of
// 128-byte rows, the 16-byte chunk `chunk` (0..7) of row `row` is stored at chunk
// `chunk ^ (row % 8)` of that row. Eight consecutive rows writing the same logical chunk then hit
// eight different groups of four banks. The kernels' epilogues stage C this way for the TMA store;
// TMA itself writes A and B so. Host twin: common::model::descriptors::sw128_chunk (tests/tests/
// swizzle_twin.rs compiles this very function on the host and compares the two).
// ANCHOR: sw128_chunk
__host__ __device__ __forceinline__ constexpr u32 sw128_chunk(u32 row, u32 chunk) {
  return chunk ^ (row % 8);
}
// ANCHOR_END: sw128_chunk

__device__ __forceinline__ u32 warp_id() { return threadIdx.x / 32; }

// %dynamic_smem_size (PTX ISA "Special Registers"): the dynamic shared memory of this launch.
__device__ __forceinline__ u32 dynamic_smem_bytes() {
  u32 bytes;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
  return bytes;
}
__device__ __forceinline__ u32 lane_id() { return threadIdx.x % 32; }

// PTX ISA "elect.sync": true in exactly one active lane of the warp.
__device__ __forceinline__ bool elect_one() {
  u32 elected = 0;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "elect.sync _|p, 0xffffffff;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(elected));
  return elected != 0;
}

// bar.sync 0 (PTX ISA "bar, barrier"): every thread of the CTA. The kernels call this instead of
// __syncthreads() so that the one CTA-wide barrier has a name the tcgen05 emulation can see.
__device__ __forceinline__ void cta_sync() {
  WB_EMU_HOOK(thread_sync_before(emu_hook::CTA_BARRIER));
  __syncthreads();
  WB_EMU_HOOK(thread_sync_after(emu_hook::CTA_BARRIER));
  WB_STRESS_POINT(AFTER_BARRIER);
}

// ---------------------------------------------------------------------------------------------
// mbarrier (PTX ISA "Parallel Synchronization and Communication Instructions: mbarrier")
// ---------------------------------------------------------------------------------------------

// mbarrier.init: `count` arrivals complete a phase. One thread initialises each barrier.
// `name` only serves the emulation's hang reports: under WB_EMULATE_TCGEN05 the macro below
// passes the kernel's own expression for the barrier (`&smem.load_full[s]`).
__device__ __forceinline__ void mbarrier_init(u64* bar, u32 count, const char* name = nullptr) {
  (void)name;
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count)
               : "memory");
  WB_EMU_HOOK(barrier_init(bar, count, name));
}
#if defined(WB_EMULATE_TCGEN05)
#define mbarrier_init(bar, count) mbarrier_init(bar, count, #bar)
#endif

// fence.mbarrier_init (PTX ISA "membar/fence"): make initialised barriers visible to the async
// proxy (TMA, tcgen05) and to the other CTAs of a cluster before anyone uses them.
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// mbarrier.arrive: one arrival, by the calling thread.
__device__ __forceinline__ void mbarrier_arrive(u64* bar) {
  WB_EMU_HOOK(arrive(bar, emu_hook::THIS_CTA));
  WB_STRESS_POINT(BEFORE_ARRIVE);
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// mbarrier.arrive.expect_tx (warp-level): one arrival plus `bytes` of expected TMA traffic, so
// the phase completes only when the copies that name this barrier have landed.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(u64* bar, u32 bytes) {
  if (elect_one()) {
    WB_EMU_HOOK(expect_tx(bar, bytes));
    WB_EMU_HOOK(arrive(bar, emu_hook::THIS_CTA));
    WB_STRESS_POINT(BEFORE_ARRIVE);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)),
                 "r"(bytes)
                 : "memory");
  }
  __syncwarp();
}

// mbarrier.try_wait.parity: has the phase with this parity completed?
__device__ __forceinline__ bool mbarrier_try_wait(u64* bar, u32 parity) {
  u32 done = 0;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(smem_u32(bar)), "r"(parity)
      : "memory");
  if (done) WB_EMU_HOOK(wait_done(bar, parity));
  return done != 0;
}

// Block until the phase with this parity completes. A wrong parity waits forever: the host
// side runs every kernel under a timeout for exactly that reason.
__device__ __forceinline__ void mbarrier_wait(u64* bar, u32 parity) {
  WB_EMU_WATCH(watch);
  while (!mbarrier_try_wait(bar, parity)) {
    WB_EMU_HOOK(waiting(bar, parity, watch));
  }
  WB_STRESS_POINT(AFTER_WAIT);
}

// mbarrier.try_wait.parity.acquire.cluster: as mbarrier_wait, for a barrier that threads of other
// CTAs arrive on, so their writes before arriving are visible after the wait.
__device__ __forceinline__ void mbarrier_wait_cluster(u64* bar, u32 parity) {
  u32 done = 0;
  WB_EMU_WATCH(watch);
  while (!done) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
    if (!done) WB_EMU_HOOK(waiting(bar, parity, watch));
  }
  WB_EMU_HOOK(wait_done(bar, parity));
  WB_STRESS_POINT(AFTER_WAIT);
}

// ---------------------------------------------------------------------------------------------
// Clusters (PTX ISA "Special Registers: %cluster_ctarank", "barrier.cluster", "mapa")
// ---------------------------------------------------------------------------------------------

// %cluster_ctarank: this CTA's rank in its cluster (0 in a launch without clusters).
__device__ __forceinline__ u32 cluster_ctarank() {
  u32 rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}

// barrier.cluster.arrive.release + wait.acquire: every thread of every CTA in the cluster.
__device__ __forceinline__ void cluster_sync() {
  WB_EMU_HOOK(thread_sync_before(emu_hook::CLUSTER_BARRIER));
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::
                   : "memory");
  WB_EMU_HOOK(thread_sync_after(emu_hook::CLUSTER_BARRIER));
  WB_STRESS_POINT(AFTER_BARRIER);
}

// mapa.shared::cluster: the address of the same shared-memory location in CTA `rank`.
__device__ __forceinline__ u32 map_to_cta(u32 smem_addr, u32 rank) {
  u32 mapped;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(mapped) : "r"(smem_addr), "r"(rank));
  return mapped;
}

// mbarrier.arrive.release.cluster.shared::cluster (warp-level): one arrival, from one elected
// lane, on the barrier at `bar`'s offset in CTA `rank` of the cluster (possibly this CTA).
__device__ __forceinline__ void mbarrier_arrive_cluster(u64* bar, u32 rank) {
  if (elect_one()) {
    WB_EMU_HOOK(arrive(bar, rank));
    WB_STRESS_POINT(BEFORE_ARRIVE);
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(
                     map_to_cta(smem_u32(bar), rank))
                 : "memory");
  }
  __syncwarp();
}

// mbarrier.arrive.relaxed.cluster.shared::cluster (warp-level): as mbarrier_arrive_cluster, with
// no memory ordering. For "done reading" signals whose reads were asynchronous (wgmma) and are
// already complete: there is nothing to release, and the release form costs a GPU-wide fence
// (MEMBAR.ALL.GPU) on every arrival.
__device__ __forceinline__ void mbarrier_arrive_cluster_relaxed(u64* bar, u32 rank) {
  if (elect_one()) {
    WB_STRESS_POINT(BEFORE_ARRIVE);
    asm volatile("mbarrier.arrive.relaxed.cluster.shared::cluster.b64 _, [%0];" ::"r"(
                     map_to_cta(smem_u32(bar), rank))
                 : "memory");
  }
  __syncwarp();
}

// ---------------------------------------------------------------------------------------------
// TMA (PTX ISA "Data Movement and Conversion Instructions: cp.async.bulk.tensor")
// ---------------------------------------------------------------------------------------------

// prefetch.tensormap (PTX ISA "prefetch, prefetchu"): pull the descriptor into the cache before first use.
__device__ __forceinline__ void tma_prefetch_desc(const TmaDesc* desc) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(desc) : "memory");
}

// cp.async.bulk.tensor.2d global -> shared (warp-level): copy the box at (c0 = inner, c1 = outer)
// coordinates; the byte count completes on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const TmaDesc* desc, u64* bar, int c0,
                                            int c1) {
  if (elect_one()) {
    WB_EMU_HOOK(tma_load(dst, 0, bar, emu_hook::THIS_CTA, 0));
    WB_STRESS_POINT(BEFORE_TMA_LOAD);
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_u32(dst)),
        "l"(desc), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
        : "memory");
  }
  __syncwarp();
}

// cp.async.bulk.tensor.2d ... .multicast::cluster (warp-level): like tma_load_2d, but the box lands
// at `dst`'s offset in every CTA of the cluster named in `cta_mask` (bit r: rank r), and each of
// them counts the bytes on its own barrier at `bar`'s offset. One load feeds several CTAs.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const TmaDesc* desc, u64* bar,
                                                      unsigned short cta_mask, int c0, int c1) {
  if (elect_one()) {
    WB_EMU_HOOK(tma_load(dst, 0, bar, emu_hook::THIS_CTA, cta_mask));
    WB_STRESS_POINT(BEFORE_TMA_LOAD);
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(smem_u32(dst)),
        "l"(desc), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "h"(cta_mask)
        : "memory");
  }
  __syncwarp();
}

// cp.async.bulk.tensor.2d shared -> global (warp-level): store a box from shared memory at
// (c0 = inner, c1 = outer). Lane 0 issues it, and lane 0 alone commits and waits on the bulk
// group: bulk groups belong to the thread that issued them.
__device__ __forceinline__ void tma_store_2d(const TmaDesc* desc, const void* src, int c0, int c1) {
  if (lane_id() == 0) {
    WB_EMU_HOOK(tma_store(src));
    WB_STRESS_POINT(BEFORE_TMA_STORE);
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(desc),
        "r"(smem_u32(src)), "r"(c0), "r"(c1)
        : "memory");
  }
  __syncwarp();
}

// cp.async.bulk.commit_group (PTX ISA "cp.async.bulk.commit_group", warp-level): close the group
// of bulk copies lane 0 issued since the last commit.
__device__ __forceinline__ void tma_store_commit() {
  if (lane_id() == 0) {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    WB_EMU_HOOK(bulk_commit());
  }
  __syncwarp();
}

// cp.async.bulk.wait_group.read (PTX ISA "cp.async.bulk.wait_group", warp-level): wait until at
// most N of lane 0's committed groups are still reading their shared-memory source, so the
// buffers of the others may be overwritten.
template <int N>
__device__ __forceinline__ void tma_store_wait_read() {
  if (lane_id() == 0) {
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
    WB_EMU_HOOK(bulk_wait_read(N));
  }
  __syncwarp();
}

// fence.proxy.async.shared::cta (PTX ISA "membar/fence"): order this thread's ordinary
// shared-memory writes before later async-proxy (TMA, tcgen05) reads of them.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  WB_EMU_HOOK(proxy_fence());
}

// ---------------------------------------------------------------------------------------------
// Warp-role timelines (`runner step N --trace`)
// ---------------------------------------------------------------------------------------------
// A kernel declares `wb::Trace trace;` once, before its set-up, and each warp says where it moves on to
// another phase of its role, `trace.enter(wb::TRACE_LOAD, kb)`, and where a persistent loop takes
// a new tile, `trace.start_tile(tile)`. A phase lasts until the warp enters the next one, so one
// call marks both ends. Only a build with -DWB_TRACE=1 (which the host adds for --trace) records:
// lane 0 of every warp of the first few CTAs writes each call into the warp's own region of a
// global buffer with two 16-byte stores it does not wait for (no atomics while the region has
// room), so recording barely perturbs the warp. Otherwise `Trace` is empty and every call
// compiles to nothing: tests/tests/trace_builds.rs checks that each kernel's SASS equals that of
// the kernel with its trace lines deleted. Host side: common::trace (layout, decoding, spans),
// runner/src/trace.rs (Perfetto JSON, SVG timeline).

// What a warp is doing; mirrored by common::trace::Phase (a test compiles the two against each
// other).
enum TracePhase : u32 {
  TRACE_SETUP = 0,       // from kernel entry: barriers, tensor memory, the first CTA/cluster sync
  TRACE_IDLE,            // set-up is over and this warp has no work of its own (yet)
  TRACE_SLOT_WAIT,       // producer: waits for a free ring slot (load_empty)
  TRACE_LOAD,            // producer: issues a k-block's TMA loads
  TRACE_DATA_WAIT,       // MMA warp / consumer: waits for a k-block to land (load_full)
  TRACE_MMA,             // MMA warp / consumer: issues a k-block's MMAs and commits them
  TRACE_MMA_WAIT,        // consumer: waits for its previous wgmma group (wgmma.wait_group)
  TRACE_ACC_EMPTY_WAIT,  // MMA warp: waits for the epilogue to release the accumulator
  TRACE_TURN_WAIT,       // ping-pong consumer: waits for the other consumer's MMAs to be issued
  TRACE_OUT_EMPTY_WAIT,  // Hopper consumer: waits for the store warp to have read `out`
  TRACE_ACC_WAIT,        // epilogue: waits for the accumulator to be final
  TRACE_EPILOGUE,        // epilogue: accumulator -> registers -> (shared ->) global
  TRACE_TAIL,            // producer tail: waits for the last commits aimed at this CTA
  TRACE_TEARDOWN,        // the last CTA/cluster sync, freeing tensor memory
  TRACE_EXIT,            // the warp leaves the kernel: ends its last phase
};

// One call of a warp, 32 bytes; mirrored by common::trace::Record.
struct TraceRecord {
  u64 globaltimer;      // %globaltimer: ns, one timer for the whole GPU
  u64 clock;            // %clock64: cycles of this SM, finer-grained
  u32 arg;              // what the phase is about (a k-block), or the tile
  u32 smid;             // %smid: the SM this CTA runs on
  u32 cta;              // blockIdx.x + gridDim.x * blockIdx.y
  unsigned short warp;  // warp_id()
  unsigned char phase;  // TracePhase
  unsigned char kind;   // TRACE_KIND_ENTER or TRACE_KIND_TILE; 0: an unwritten slot
};
static_assert(sizeof(TraceRecord) == 32, "common::trace::RECORD_BYTES");
constexpr u32 TRACE_KIND_ENTER = 1;
constexpr u32 TRACE_KIND_TILE = 2;

}  // namespace wb

#if defined(WB_TRACE) && WB_TRACE
// Set by the host (cuModuleGetGlobal, common::trace::TraceBuffer::install) before the launch.
__device__ wb::TraceRecord* wb_trace_records;  // ctas x warps-per-CTA regions of per_warp records
__device__ u32 wb_trace_per_warp;              // records in each warp's region
__device__ u32 wb_trace_ctas;                  // CTAs 0 .. wb_trace_ctas - 1 record
__device__ u64 wb_trace_dropped;               // calls that found their warp's region full
#endif

namespace wb {

#if defined(WB_TRACE) && WB_TRACE
// %globaltimer, %clock64, %smid (PTX ISA "Special Registers"). %globaltimer is comparable across
// SMs but may tick in coarse steps; %clock64 is fine-grained but per SM: the host maps one onto the
// other per CTA. The "memory" clobbers keep the reads where the call is.
__device__ __forceinline__ u64 globaltimer_ns() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory");
  return t;
}
__device__ __forceinline__ u64 clock64_cycles() {
  u64 c;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c) :: "memory");
  return c;
}
__device__ __forceinline__ u32 sm_id() {
  u32 id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

class Trace {
 public:
  // Kernel entry: find this warp's region (none outside the recorded CTAs) and enter set-up.
  __device__ __forceinline__ Trace() {
    const u32 cta = blockIdx.x + gridDim.x * blockIdx.y;
    const u32 warps = blockDim.x / 32;
    next_ = cta < wb_trace_ctas
                ? wb_trace_records + (static_cast<size_t>(cta) * warps + warp_id()) * wb_trace_per_warp
                : nullptr;
    left_ = wb_trace_per_warp;
    enter(TRACE_SETUP);
  }
  // Warp-level: from now on this warp is in `phase` (about `arg`, e.g. a k-block).
  __device__ __forceinline__ void enter(TracePhase phase, int arg = 0) {
    record(TRACE_KIND_ENTER, phase, arg);
  }
  // Warp-level: a persistent loop starts tile `tile`.
  __device__ __forceinline__ void start_tile(int tile) { record(TRACE_KIND_TILE, 0, tile); }

 private:
  __device__ __forceinline__ void record(u32 kind, u32 phase, int arg) {
    if (next_ == nullptr) return;
    if (lane_id() == 0) {
      const u64 t = globaltimer_ns();
      const u64 c = clock64_cycles();
      if (left_ > 0) {
        // st.global (__stcg), not a generic store: the records live in global memory, and a
        // generic store would look like a staging write to the TMA-store ordering check.
        uint4* dst = reinterpret_cast<uint4*>(next_);
        __stcg(&dst[0], make_uint4(static_cast<u32>(t), static_cast<u32>(t >> 32),
                                   static_cast<u32>(c), static_cast<u32>(c >> 32)));
        __stcg(&dst[1], make_uint4(static_cast<u32>(arg), sm_id(),
                                   blockIdx.x + gridDim.x * blockIdx.y,
                                   warp_id() | (phase << 16) | (kind << 24)));
      } else {
        atomicAdd(&wb_trace_dropped, 1ull);  // the host reports how many did not fit
      }
    }
    if (left_ > 0) {
      ++next_;
      --left_;
    }
  }
  TraceRecord* next_;  // this warp's next free record; nullptr: this CTA does not record
  u32 left_;           // free records left in the region
};
#else
// Not a trace build: nothing is recorded and every call compiles to nothing.
class Trace {
 public:
  __device__ __forceinline__ void enter(TracePhase, int = 0) {}
  __device__ __forceinline__ void start_tile(int) {}
};
#endif

}  // namespace wb
