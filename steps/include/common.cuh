// common.cuh: the device primitives the Blackwell kernels and their Hopper twins share, one small
// wrapper per PTX idea: threads and addresses, mbarriers, clusters, TMA and proxy fences. The
// architecture-specific parts live beside it: blackwell.cuh (tcgen05, tensor memory) and
// hopper.cuh (wgmma, setmaxnreg); each includes this header.
//
// What only instrumented builds compile lives in headers of its own, included here at the point
// the primitives need them, so a kernel includes nothing more: stress.cuh (the stress mode's
// sleep points, WB_STRESS), twin_check.cuh (the twin check's shadow and the hang diagnosis,
// WB_TWIN_CHECK, WB_HANG_DIAG) and trace.cuh (the warp-role timelines, WB_TRACE). Without those
// switches every hook they define compiles to nothing.
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

#include "stress.cuh"

// The linear index (blockIdx flattened) of the CTA of cluster rank `rank` in this CTA's cluster,
// from %cluster_nctaid and %cluster_ctaid (PTX ISA "Special Registers"). The twin check and the
// tcgen05 emulation key their per-CTA tables by it, so a CTA finds a cluster peer's entry.
namespace wb {
__device__ __forceinline__ u32 cta_linear_of_rank(u32 rank) {
  u32 nx, ny, cx, cy, cz;
  asm volatile("mov.u32 %0, %%cluster_nctaid.x;" : "=r"(nx));
  asm volatile("mov.u32 %0, %%cluster_nctaid.y;" : "=r"(ny));
  asm volatile("mov.u32 %0, %%cluster_ctaid.x;" : "=r"(cx));
  asm volatile("mov.u32 %0, %%cluster_ctaid.y;" : "=r"(cy));
  asm volatile("mov.u32 %0, %%cluster_ctaid.z;" : "=r"(cz));
  const u32 x = blockIdx.x - cx + rank % nx;
  const u32 y = blockIdx.y - cy + (rank / nx) % ny;
  const u32 z = blockIdx.z - cz + rank / (nx * ny);
  return x + gridDim.x * (y + gridDim.y * z);
}
}  // namespace wb

#include "twin_check.cuh"

// The host encodes tensor maps with cuTensorMapEncodeTiled; the device only passes their address.
struct alignas(64) TmaDesc {
  u64 opaque[16];
};

// The launch the host plans for a kernel reaches it as WB_LAUNCH_<FACT> (common::step::
// KernelShape::launch_defines: THREADS, CLUSTER, SCHEDULE, SMEM_BYTES, the cluster's TILE_M and
// TILE_N of C, and the rows and columns of the TMA boxes). Each kernel ties every one of them to
// the constants it was written for, so a host and a kernel that disagree fail to compile, on any
// machine, instead of misbehaving on a GPU. The message names the definition. (WB_LAUNCH_PERSISTENT,
// 1 for a persistent schedule, is still passed for kernels written before SCHEDULE existed.)
#define WB_EXPECT_LAUNCH(fact, value)                 \
  static_assert(WB_LAUNCH_##fact == (value), "WB_LAUNCH_" #fact \
                ": the host plans another launch than this kernel was written for")

// WB_LAUNCH_SCHEDULE: how the clusters cover the tiles of C (common::step::Schedule).
#define WB_SCHEDULE_ONE_PER_TILE 0            // one cluster per tile
#define WB_SCHEDULE_PERSISTENT 1              // as many clusters as fit, each looping over tiles
#define WB_SCHEDULE_CLUSTER_LAUNCH_CONTROL 2  // one per tile launched; running ones take others' tiles

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
// TMA itself writes A and B so. Host twin: sim::units::descriptors::sw128_chunk (tests/tests/
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
  WB_CHECK_HOOK(on_thread_sync());
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
  WB_CHECK_HOOK(on_init(bar, count, name));
}
#if defined(WB_EMULATE_TCGEN05) || (defined(WB_TWIN_CHECK) && WB_TWIN_CHECK)
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
  WB_CHECK_HOOK(on_arrive(bar, 0, true));
  WB_STRESS_POINT(BEFORE_ARRIVE);
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// mbarrier.arrive.expect_tx (warp-level): one arrival plus `bytes` of expected TMA traffic, so
// the phase completes only when the copies that name this barrier have landed.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(u64* bar, u32 bytes) {
  if (elect_one()) {
    WB_EMU_HOOK(expect_tx(bar, bytes));
    WB_EMU_HOOK(arrive(bar, emu_hook::THIS_CTA));
    WB_CHECK_HOOK(on_arrive(bar, 0, true));
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
  WB_HANG_WATCH(hang);
  while (!mbarrier_try_wait(bar, parity)) {
    WB_EMU_HOOK(waiting(bar, parity, watch));
    WB_HANG_HOOK(hang_waiting(bar, parity, hang));
  }
  WB_CHECK_HOOK(on_wait(bar, parity));
  WB_STRESS_POINT(AFTER_WAIT);
}

// mbarrier.try_wait.parity.acquire.cluster: as mbarrier_wait, for a barrier that threads of other
// CTAs arrive on, so their writes before arriving are visible after the wait.
__device__ __forceinline__ void mbarrier_wait_cluster(u64* bar, u32 parity) {
  u32 done = 0;
  WB_EMU_WATCH(watch);
  WB_HANG_WATCH(hang);
  while (!done) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
    if (!done) WB_EMU_HOOK(waiting(bar, parity, watch));
    if (!done) WB_HANG_HOOK(hang_waiting(bar, parity, hang));
  }
  WB_EMU_HOOK(wait_done(bar, parity));
  WB_CHECK_HOOK(on_wait(bar, parity));
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
  WB_CHECK_HOOK(on_thread_sync());
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
    WB_CHECK_HOOK(on_arrive(bar, rank, rank == cluster_ctarank()));
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
    WB_CHECK_HOOK(on_arrive(bar, rank, rank == cluster_ctarank()));
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
    WB_CHECK_HOOK(on_tma_load(dst, 1u << cluster_ctarank()));
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
    WB_CHECK_HOOK(on_tma_load(dst, cta_mask));
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
    WB_CHECK_HOOK(on_tma_store(src));
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
    WB_CHECK_HOOK(on_bulk_commit());
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
    WB_CHECK_HOOK(on_bulk_wait_read(N));
  }
  __syncwarp();
}

// fence.proxy.async.shared::cta (PTX ISA "membar/fence"): order this thread's ordinary
// shared-memory writes before later async-proxy (TMA, tcgen05) reads of them.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  WB_EMU_HOOK(proxy_fence());
}

}  // namespace wb

#include "trace.cuh"
