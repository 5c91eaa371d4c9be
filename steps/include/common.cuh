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

// Twin check builds (every stress build: common::stress::defines adds -DWB_TWIN_CHECK=1): the
// wrappers keep a shadow of two hand-offs in global memory and trap on the first hand-off no wait
// orders, after recording it for the host, whose message names the rule, the barrier and the
// shared memory (common::stress::CheckRecord). The verdict follows the program's order of waits
// and arrivals, not the timing, so it holds on every seed.
// - release-before-wgmma-done: a warp arrives on a barrier while a wgmma group it has not
//   retired with wgmma.wait_group still reads shared memory that a TMA load refills after a
//   wait on that barrier. Each warp records the ranges its wgmma descriptors read, per group;
//   the producer's TMA loads record which destinations follow a wait on which barrier.
// - staging-rewrite-before-read: a buffer that a bulk (TMA) store reads is filled again before
//   that read is known complete. Each warp carries what it knows: the reads of each store
//   source that a cp.async.bulk.wait_group.read retired, and the fills it acquired. An arrival
//   stamps its knowledge on the barrier and a wait takes it over, as the release and acquire do.
//   A fill is an arrival on a barrier that the storing warp waits on before storing the buffer.
//   The fill and the store each check the other's counter after a fence, so one of them traps.
// The shadow follows the order the program promises, so a stock kernel never trips it. Without
// WB_TWIN_CHECK every hook compiles to nothing.
#if defined(WB_TWIN_CHECK) && WB_TWIN_CHECK
namespace wb {
namespace check {
// Tables of a fixed size (about 50 MB in all); what does not fit is not tracked, which can only
// hide a bug, never invent one. A slot is reused by the CTA 4096 further on, long after the
// first has finished (the twins launch at most 2048 CTAs at the default shape).
constexpr u32 SLOTS = 4096;   // CTA slots: slot = linear CTA index % SLOTS
constexpr u32 WARPS = 16;     // warps per CTA tracked (the twins have at most 12)
constexpr u32 GROUPS = 8;     // wgmma groups remembered per warp
constexpr u32 BARS = 16;      // mbarriers per CTA
constexpr u32 LINKS = 8;      // TMA load destinations per barrier
constexpr u32 REGIONS = 4;    // bulk-store sources per CTA (steps 2-6 have 4)
constexpr u32 STORES = 16;    // bulk stores per warp not yet retired

struct Group {
  u32 tag;    // group number + 1; 0: empty
  u32 n;      // N of the group's last wgmma (B's rows)
  u64 a, b;   // the shared-memory descriptors of the group's last wgmma
};
struct Warp {
  u32 committed;  // wgmma groups committed; the group numbered `committed` is the open one
  u32 waited;     // groups below this number are retired by a wgmma.wait_group
  Group group[GROUPS];
  u32 last_bar;   // key of the mbarrier last waited on, while only arrivals and TMA copies followed
  u32 bulk_committed;  // bulk groups committed (cp.async.bulk.commit_group)
  u32 stores;          // bulk stores issued
  u32 store_region[STORES];
  u32 store_seq[STORES];    // the read's number for its region; 0: retired
  u32 store_group[STORES];  // its bulk group
  u32 known_read[REGIONS];  // reads of each region this warp knows retired
  u32 known_fill[REGIONS];  // fills of each region this warp acquired
  u32 phase;                // hang diagnosis builds: the trace phase the warp entered last + 1
  u32 phase_arg;            // ...and its argument (a k-block)
  u32 tile;                 // ...and the tile its persistent loop took last + 1
};
struct Bar {
  u32 key;  // shared-memory offset + 1; 0: free
  u32 count;
  const char* name;                 // the kernel's expression for it
  u32 nlinks;
  unsigned long long link[LINKS];   // landing CTA mask << 32 | TMA load destination
  u32 fill_mask;                    // regions a bulk store reads after a wait on this barrier
  u32 stamp_read[2][REGIONS];       // per phase parity: what the arrivals knew
  u32 stamp_fill[2][REGIONS];
  u32 arrivals;                     // hang diagnosis builds: every arrival so far, all phases
};
struct Region {
  u32 key;    // shared-memory offset + 1 of a bulk store's source; 0: free
  u32 reads;  // bulk reads issued
  u32 done;   // the highest read number retired
  u32 fills;  // fills (arrivals on a barrier in fill_mask's)
};
struct Cta {
  unsigned long long grid;  // %gridid of the launch that owns the slot
  u32 cta;                  // its linear CTA index + 1
  Bar bar[BARS];
  Region region[REGIONS];
  Warp warp[WARPS + 1];  // the last: a sink for warps beyond the table, never checked
};
}  // namespace check
}  // namespace wb
__device__ wb::check::Cta wb_check_state[wb::check::SLOTS];
__device__ u32 wb_check_failed;  // 1: the first failing thread is recording; 2: recorded (the others trap then)

namespace wb {
namespace check {
__device__ __forceinline__ u32 ld(const u32* p) { return *reinterpret_cast<const volatile u32*>(p); }
__device__ __forceinline__ void st(u32* p, u32 v) { *reinterpret_cast<volatile u32*>(p) = v; }
// Raise a warp's counter to `v`. Every lane of a warp may raise the same counter at once (the
// wait and thread-barrier hooks run in every thread that passed), so the update is an atomicMax:
// a lane that read an older value cannot lower what another lane wrote.
__device__ __forceinline__ void raise_to(u32* p, u32 v) {
  if (v > ld(p)) atomicMax(p, v);
}

__device__ __forceinline__ u32 soff(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ u32 my_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ u32 cta_linear() {
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}
__device__ __forceinline__ Cta* cta_of_rank(u32 rank) {
  return &wb_check_state[cta_linear_of_rank(rank) % SLOTS];
}
__device__ __forceinline__ Cta* own() { return &wb_check_state[cta_linear() % SLOTS]; }
// This warp's record; nullptr for a warp beyond the table (not tracked; the wgmma hooks write to
// the sink instead, to stay free of branches).
__device__ __forceinline__ Warp* warp_of(Cta* c) {
  return threadIdx.x / 32 < WARPS ? &c->warp[threadIdx.x / 32] : nullptr;
}
__device__ __forceinline__ Warp* own_warp() { return warp_of(own()); }

__device__ __forceinline__ Bar* find_bar(Cta* c, u32 key) {
  #pragma unroll 1
  for (u32 i = 0; i < BARS; ++i)
    if (ld(&c->bar[i].key) == key) return &c->bar[i];
  return nullptr;
}
__device__ __forceinline__ const char* bar_name(const Bar* b) {
  return b != nullptr && b->name != nullptr ? b->name : "an mbarrier";
}

// The rules, as the host names them (common::stress::CheckRecord).
enum Rule : u32 {
  RELEASE_BEFORE_WGMMA_DONE = 1,
  FILL_BEFORE_READ_RETIRED,
  STORE_OF_UNACQUIRED_FILL,
  WAIT_BOUND_EXCEEDED,  // hang diagnosis builds: an mbarrier wait outlived its bound
};

// What the first failure saw, in host-mapped memory the host installs before the launch and
// reads after it, even once the trap has ended the context. Mirrored by
// common::stress::CheckRecord (the host words the message).
struct Fault {
  u32 rule;  // 0: none
  u32 cta, warp;
  u32 a, b, c, d, e, f, g;
  char bar[48];  // the kernel's expression for the barrier, truncated
};
}  // namespace check
}  // namespace wb
__device__ wb::check::Fault* wb_check_fault;  // set by the host; null: trap without a record
namespace wb {
namespace check {

// Record the first failure for the host and trap. No printf: a call anywhere in the kernel makes
// ptxas serialise its wgmma pipeline, which a stress build must not change.
__device__ __forceinline__ void fail(u32 rule, const char* bar, u32 a, u32 b, u32 c, u32 d, u32 e,
                                     u32 f, u32 g) {
  Fault* r = wb_check_fault;
  if (r != nullptr && atomicCAS(&wb_check_failed, 0u, 1u) == 0u) {
    volatile Fault* v = r;
    v->cta = cta_linear();
    v->warp = threadIdx.x / 32;
    v->a = a, v->b = b, v->c = c, v->d = d, v->e = e, v->f = f, v->g = g;
    u32 i = 0;
    #pragma unroll 1
    for (; bar != nullptr && bar[i] != 0 && i + 1 < sizeof(v->bar); ++i) v->bar[i] = bar[i];
    v->bar[i] = 0;
    __threadfence_system();
    v->rule = rule;
    __threadfence_system();
    atomicExch(&wb_check_failed, 2u);
  } else if (r != nullptr) {
    // Another thread records (often a lane of this very warp, which fails at the same hand-off).
    // A trap now would end the launch before its writes reach the host, and the host would see
    // a fault with no rule (as an H100 run showed): wait for the record, at most about a second.
    #pragma unroll 1
    for (u32 n = 0; n < (1u << 20) && atomicAdd(&wb_check_failed, 0u) != 2u; ++n) __nanosleep(1000);
  }
  __trap();
}

// mbarrier_init: claim this CTA's slot for the launch (once), then register the barrier.
__device__ __forceinline__ void on_init(u64* bar, u32 count, const char* name) {
  Cta* c = own();
  unsigned long long grid;
  asm volatile("mov.u64 %0, %%gridid;" : "=l"(grid));
  if (c->grid != grid || ld(&c->cta) != cta_linear() + 1) {
    u32* words = reinterpret_cast<u32*>(c);
    #pragma unroll 1
    for (u32 i = 0; i < sizeof(Cta) / 4; ++i) st(&words[i], 0);
    c->grid = grid;
    st(&c->cta, cta_linear() + 1);
  }
  const u32 key = soff(bar) + 1;
  #pragma unroll 1
  for (u32 i = 0; i < BARS; ++i) {
    const u32 k = ld(&c->bar[i].key);
    if (k == 0 || k == key) {
      c->bar[i].name = name;
      st(&c->bar[i].count, count);
      st(&c->bar[i].key, key);
      break;
    }
  }
  __threadfence();  // the set-up sync that follows publishes the slot to every warp
}

// The read range of one operand of a wgmma, from its descriptor (PTX ISA "Matrix Descriptor
// Format"): `rows` K-major rows in 8-row groups SBO bytes apart, from the start address rounded
// down to its 128-byte row. Only the 128-byte swizzle (the twins' layout) is tracked.
__device__ __forceinline__ bool desc_span(u64 desc, u32 rows, u32& lo, u32& hi) {
  if ((desc >> 62) != 1) return false;
  const u32 start = static_cast<u32>(desc & 0x3FFF) << 4;
  const u32 sbo = static_cast<u32>((desc >> 32) & 0x3FFF) << 4;
  lo = start & ~127u;
  hi = lo + rows / 8 * sbo;
  return true;
}
// The wgmma hooks run between a warpgroup's wgmma instructions: a branch there, or a loop, makes
// ptxas serialise the pipeline (it injects a warpgroup.arrive on the divergent path), so they
// only store, predicated on lane 0: the last wgmma's descriptors stand for the group (the twins'
// groups read one ring slot; this sees less than the group reads, never more). Each is followed by
// a __syncwarp, which makes the record visible to whichever lane of the warp arrives next.
__device__ __forceinline__ Warp* wgmma_warp() {
  return &own()->warp[min(threadIdx.x / 32, WARPS)];
}
__device__ __forceinline__ void on_wgmma(u64 a_desc, u64 b_desc, u32 n) {
  Warp* w = wgmma_warp();
  if (threadIdx.x % 32 == 0) {
    const u32 g = ld(&w->committed);
    Group* grp = &w->group[g % GROUPS];
    *reinterpret_cast<volatile u64*>(&grp->a) = a_desc;
    *reinterpret_cast<volatile u64*>(&grp->b) = b_desc;
    st(&grp->n, n);
    st(&grp->tag, g + 1);
    st(&w->last_bar, 0);
  }
  __syncwarp();
}
__device__ __forceinline__ void on_wgmma_commit() {
  Warp* w = wgmma_warp();
  if (threadIdx.x % 32 == 0) {
    st(&w->committed, ld(&w->committed) + 1);
    st(&w->last_bar, 0);
  }
  __syncwarp();
}
__device__ __forceinline__ void on_wgmma_wait(u32 pending) {
  Warp* w = wgmma_warp();
  if (threadIdx.x % 32 == 0) {
    const u32 c = ld(&w->committed);
    if (c > pending && c - pending > ld(&w->waited)) st(&w->waited, c - pending);
  }
  __syncwarp();
}

// Before an arrival of this thread on `bar` in the CTA of cluster rank `rank` (own: `local`).
__device__ __forceinline__ void on_arrive(u64* bar, u32 rank, bool local) {
  Warp* w = own_warp();
  if (w == nullptr) return;
  const u32 key = soff(bar) + 1;
  const u32 me = my_rank();
  Cta* target = local ? own() : cta_of_rank(rank);
  Bar* b = find_bar(target, key);
  if (b == nullptr) return;
  // BEGIN hang diagnosis
#if defined(WB_HANG_DIAG) && WB_HANG_DIAG
  atomicAdd(&b->arrivals, 1u);  // what arrived, for a hang report
#endif
  // END hang diagnosis
  // release-before-wgmma-done: the destinations a TMA load writes after a wait on this barrier
  // must not lie in what an unretired wgmma group of this warp reads.
  const u32 nl = min(ld(&b->nlinks), LINKS);
  const u32 committed = ld(&w->committed), waited = ld(&w->waited);
  #pragma unroll 1
  for (u32 g = max(waited, committed + 1 > GROUPS ? committed + 1 - GROUPS : 0u); g <= committed; ++g) {
    Group* grp = &w->group[g % GROUPS];
    if (ld(&grp->tag) != g + 1) continue;
    #pragma unroll 1
    for (u32 s = 0; s < 2; ++s) {  // A (64 rows), then B (N rows)
      const u64 desc = *reinterpret_cast<volatile u64*>(s == 0 ? &grp->a : &grp->b);
      u32 lo, hi;
      if (!desc_span(desc, s == 0 ? 64 : ld(&grp->n), lo, hi)) continue;
      #pragma unroll 1
      for (u32 l = 0; l < nl; ++l) {
        const unsigned long long link = *reinterpret_cast<volatile unsigned long long*>(&b->link[l]);
        const u32 dst = static_cast<u32>(link), lands = static_cast<u32>(link >> 32);
        if ((lands >> me & 1) && dst >= lo && dst < hi) {
          fail(RELEASE_BEFORE_WGMMA_DONE, bar_name(b), key - 1, local ? me : rank, dst, g, waited,
               committed, (lo >> 4) << 16 | ((hi >> 4) & 0xFFFF));
        }
      }
    }
  }
  // staging-rewrite-before-read: an arrival on a barrier the storing warp waits on before a
  // bulk store fills that store's source; every read of it issued so far must be known retired.
  const u32 fills = local ? ld(&b->fill_mask) : 0u;
  if (fills != 0) {
    #pragma unroll 1
    for (u32 r = 0; r < REGIONS; ++r)
      if (fills >> r & 1) {
        const u32 f = atomicAdd(&target->region[r].fills, 1u) + 1;
        raise_to(&w->known_fill[r], f);
      }
    __threadfence();  // the fill is counted before the reads are looked at (the store does the converse)
    #pragma unroll 1
    for (u32 r = 0; r < REGIONS; ++r)
      if (fills >> r & 1) {
        const u32 reads = ld(&target->region[r].reads), known = ld(&w->known_read[r]);
        if (reads > known) {
          fail(FILL_BEFORE_READ_RETIRED, bar_name(b), key - 1, ld(&target->region[r].key) - 1,
               reads - known, reads, 0, 0, 0);
        }
      }
  }
  // Stamp what this warp knows on the phase it arrives on. Only on this CTA's own barriers: the
  // counts are per CTA, and a waiter that learnt another CTA's would know more than it should
  // (which can hide a bug); the twins hand their staging buffers over within a CTA.
  if (!local) return;
  u32 parity;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], 0;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(parity)
      : "r"(key - 1)
      : "memory");  // the phase of parity 0 is complete: the current phase is odd
  #pragma unroll 1
  for (u32 r = 0; r < REGIONS; ++r) {
    const u32 kr = ld(&w->known_read[r]), kf = ld(&w->known_fill[r]);
    if (kr != 0) atomicMax(&b->stamp_read[parity][r], kr);
    if (kf != 0) atomicMax(&b->stamp_fill[parity][r], kf);
  }
  __threadfence();  // the stamp is visible before the arrival completes the phase
}

// After a wait on `bar` for `parity` succeeded: take over the stamps. Every thread that waited
// runs it, with no warp-level synchronisation: the lanes of a warp can leave the try_wait loop
// apart, and the earlier form (the lowest lane of __activemask() did the work, then
// __syncwarp(active)) hung stock twins 0, 5 and 6 under some stress seeds on an H100, where
// this form verified. Lanes that run it together cost about one lane's loads, and each lane
// reads back what it wrote itself (on_tma_load's and on_arrive's lane need no other's).
__device__ __forceinline__ void on_wait(u64* bar, u32 parity) {
  Warp* w = own_warp();
  if (w == nullptr) return;
  const u32 key = soff(bar) + 1;
  Bar* b = find_bar(own(), key);
  st(&w->last_bar, key);
  if (b == nullptr) return;
  __threadfence();
  #pragma unroll 1
  for (u32 r = 0; r < REGIONS; ++r) {
    raise_to(&w->known_read[r], ld(&b->stamp_read[parity & 1][r]));
    raise_to(&w->known_fill[r], ld(&b->stamp_fill[parity & 1][r]));
  }
}

// A thread barrier (bar.sync, barrier.cluster): it orders more than this shadow follows, so the
// warp is credited with every retired read and every fill so far (only ever more lenient), and
// no TMA copy after it belongs to the mbarrier waited on before it. Every thread runs it, as
// on_wait.
__device__ __forceinline__ void on_thread_sync() {
  Cta* c = own();
  Warp* w = warp_of(c);
  if (w == nullptr) return;
  st(&w->last_bar, 0);
  __threadfence();
  #pragma unroll 1
  for (u32 r = 0; r < REGIONS; ++r) {
    raise_to(&w->known_read[r], ld(&c->region[r].done));
    raise_to(&w->known_fill[r], ld(&c->region[r].fills));
  }
}

// A TMA load into `dst` (one lane), landing in the CTAs of `lands` (bit r: rank r): if this
// warp came here straight from a wait, that wait's barrier guards `dst`.
__device__ __forceinline__ void on_tma_load(const void* dst, u32 lands) {
  Warp* w = own_warp();
  if (w == nullptr) return;
  const u32 key = ld(&w->last_bar);
  if (key == 0) return;
  Bar* b = find_bar(own(), key);
  if (b == nullptr) return;
  const unsigned long long link = static_cast<unsigned long long>(lands) << 32 | soff(dst);
  const u32 nl = min(ld(&b->nlinks), LINKS);
  #pragma unroll 1
  for (u32 l = 0; l < nl; ++l)
    if (*reinterpret_cast<volatile unsigned long long*>(&b->link[l]) == link) return;
  const u32 l = atomicAdd(&b->nlinks, 1u);
  if (l < LINKS) *reinterpret_cast<volatile unsigned long long*>(&b->link[l]) = link;
  __threadfence();  // known before the load can land and a consumer can release the slot
}

__device__ __forceinline__ u32 region_of(Cta* c, u32 key) {
  #pragma unroll 1
  for (u32 r = 0; r < REGIONS; ++r) {
    const u32 k = ld(&c->region[r].key);
    if (k == key) return r;
    if (k == 0) {
      const u32 old = atomicCAS(&c->region[r].key, 0u, key);
      if (old == 0 || old == key) return r;
    }
  }
  return REGIONS;
}

// A bulk store from `src` (lane 0): count the read, and check that the fill it reads is the one
// the warp acquired.
__device__ __forceinline__ void on_tma_store(const void* src) {
  Cta* c = own();
  Warp* w = warp_of(c);
  const u32 key = soff(src) + 1;
  const u32 r = w != nullptr ? region_of(c, key) : REGIONS;
  if (r < REGIONS) {
    const u32 seq = atomicAdd(&c->region[r].reads, 1u) + 1;
    const u32 i = ld(&w->stores) % STORES;
    const u32 old_seq = ld(&w->store_seq[i]), old_region = ld(&w->store_region[i]);
    raise_to(&w->known_read[old_region], old_seq);  // a read the ring forgets is credited
    st(&w->store_region[i], r);
    st(&w->store_seq[i], seq);
    st(&w->store_group[i], ld(&w->bulk_committed));
    st(&w->stores, ld(&w->stores) + 1);
    const u32 last = ld(&w->last_bar);
    Bar* b = last != 0 ? find_bar(c, last) : nullptr;
    if (b != nullptr) atomicOr(&b->fill_mask, 1u << r);
    __threadfence();  // the read is counted before the fills are looked at (a fill does the converse)
    const u32 fills = ld(&c->region[r].fills), known = ld(&w->known_fill[r]);
    if (fills > known)
      fail(STORE_OF_UNACQUIRED_FILL, bar_name(b), key - 1, fills - known, 0, 0, 0, 0, 0);
  }
}
__device__ __forceinline__ void on_bulk_commit() {
  Warp* w = own_warp();
  if (w != nullptr) st(&w->bulk_committed, ld(&w->bulk_committed) + 1);
}
// cp.async.bulk.wait_group.read `pending` (lane 0): the reads of all but the newest `pending`
// bulk groups are retired.
__device__ __forceinline__ void on_bulk_wait_read(u32 pending) {
  Cta* c = own();
  Warp* w = warp_of(c);
  if (w == nullptr) return;
  const u32 committed = ld(&w->bulk_committed);
  if (committed < pending) return;
  const u32 limit = committed - pending;
  #pragma unroll 1
  for (u32 i = 0; i < STORES; ++i) {
    const u32 seq = ld(&w->store_seq[i]);
    if (seq == 0 || ld(&w->store_group[i]) >= limit) continue;
    const u32 r = ld(&w->store_region[i]);
    raise_to(&w->known_read[r], seq);
    atomicMax(&c->region[r].done, seq);
    st(&w->store_seq[i], 0);
  }
}

// BEGIN hang diagnosis
// Hang diagnosis builds (-DWB_HANG_DIAG=1 with the twin check, and WB_HANG_DIAG_NS; the runner
// re-runs a native twin so once it has timed out): every mbarrier wait is bounded. A wait still
// unfinished after WB_HANG_DIAG_NS nanoseconds (%globaltimer) records who waits and on what
// into host-mapped memory: the CTA, the warp, the trace phase it entered last (which names its
// role: a producer waits for a free slot, a consumer for a k-block, the store warp for a
// consumer's rows), the barrier by the kernel's expression for it, the parity awaited, and what
// arrived on it (a shadow count of every arrival, from the twin check's arrive hooks). After
// twice the bound, so that the other waiting warps have recorded theirs too, it traps through
// the twin check's `fail`, which the host reads as it reads the twin check's rules
// (common::stress::Fault, Wait). Without WB_HANG_DIAG none of this is compiled: the wait
// wrappers' WB_HANG_ calls expand to nothing, and a test compares the normal build's SASS with
// that of headers without these lines.
#if defined(WB_HANG_DIAG) && WB_HANG_DIAG
#if !defined(WB_HANG_DIAG_NS)
#error "a hang diagnosis build (WB_HANG_DIAG) needs WB_HANG_DIAG_NS, the bound of a wait"
#endif
constexpr u32 WAITS = 32;  // waiting warps a report names
// One waiting warp; mirrored by common::stress::Wait.
struct Wait {
  u32 done;       // 1 once the record is complete
  u32 cta, warp, rank;
  u32 phase;      // the trace phase the warp entered last + 1 (0: none)
  u32 phase_arg;  // its argument (a k-block)
  u32 tile;       // the persistent loop's tile + 1 (0: none)
  u32 bar;        // the barrier's shared-memory offset
  u32 parity;     // the parity awaited
  u32 count;      // arrivals that complete one phase (mbarrier.init)
  u32 arrivals;   // arrivals on it so far, all phases (the shadow count)
  u32 claimed;    // how many waiting warps had claimed a record, this one included
  u32 waited_us;  // how long it had waited when it recorded
  char name[44];  // the kernel's expression for the barrier, truncated
};
static_assert(sizeof(Wait) == 96, "common::stress::Wait");
}  // namespace check
}  // namespace wb
__device__ wb::check::Wait* wb_hang_waits;  // WAITS records, host-mapped; set by the host
__device__ u32 wb_hang_claimed;             // records claimed (device memory: atomics stay here)
namespace wb {
namespace check {

// %globaltimer (PTX ISA "Special Registers"): ns, one timer for the whole GPU.
__device__ __forceinline__ u64 hang_clock_ns() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory");
  return t;
}

// wb::Trace in a hang diagnosis build: the warp's last phase and tile, for the report. st.global
// (__stcg), as the trace's records: a generic store would look like a staging write to the
// twin's static TMA-store check.
__device__ __forceinline__ void note_phase(u32 phase, int arg) {
  Warp* w = own_warp();
  if (w == nullptr) return;
  __stcg(&w->phase, phase + 1);
  __stcg(&w->phase_arg, static_cast<u32>(arg));
}
__device__ __forceinline__ void note_tile(int tile) {
  Warp* w = own_warp();
  if (w != nullptr) __stcg(&w->tile, static_cast<u32>(tile) + 1);
}

// A wait's watch: when it began, and whether it has recorded.
struct HangWatch {
  u64 start;
  u32 recorded;
};

// One record per waiting warp, by its lowest waiting lane, written with st.global (as above)
// into the host-mapped table; the slot is claimed with an atomic on device memory.
__device__ __forceinline__ void record_wait(u64* bar, u32 parity, u64 waited_ns) {
  Wait* t = wb_hang_waits;
  if (t == nullptr || static_cast<int>(threadIdx.x % 32) != __ffs(__activemask()) - 1) return;
  const u32 i = atomicAdd(&wb_hang_claimed, 1u);
  if (i >= WAITS) return;
  Wait* v = &t[i];
  Warp* w = own_warp();
  const u32 key = soff(bar) + 1;
  const Bar* b = find_bar(own(), key);
  __stcg(&v->cta, cta_linear());
  __stcg(&v->warp, threadIdx.x / 32);
  __stcg(&v->rank, my_rank());
  __stcg(&v->phase, w != nullptr ? ld(&w->phase) : 0u);
  __stcg(&v->phase_arg, w != nullptr ? ld(&w->phase_arg) : 0u);
  __stcg(&v->tile, w != nullptr ? ld(&w->tile) : 0u);
  __stcg(&v->bar, key - 1);
  __stcg(&v->parity, parity);
  __stcg(&v->count, b != nullptr ? ld(&b->count) : 0u);
  __stcg(&v->arrivals, b != nullptr ? ld(&b->arrivals) : 0u);
  __stcg(&v->claimed, i + 1);
  __stcg(&v->waited_us, static_cast<u32>(waited_ns / 1000));
  const char* name = b != nullptr ? b->name : nullptr;
  u32 c = 0;
  #pragma unroll 1
  for (; name != nullptr && name[c] != 0 && c + 1 < sizeof(v->name); ++c) __stcg(&v->name[c], name[c]);
  __stcg(&v->name[c], '\0');
  __threadfence_system();
  __stcg(&v->done, 1u);
  __threadfence_system();
}

// Called on every unsuccessful try of a wait: record once past the bound, trap past twice it.
__device__ __forceinline__ void hang_waiting(u64* bar, u32 parity, HangWatch& watch) {
  const u64 now = hang_clock_ns();
  if (watch.start == 0) {
    watch.start = now;
    return;
  }
  const u64 waited = now - watch.start;
  if (waited < WB_HANG_DIAG_NS) return;
  if (!watch.recorded) {
    watch.recorded = 1;
    record_wait(bar, parity, waited);
  }
  if (waited >= 2 * WB_HANG_DIAG_NS) {
    const Bar* b = find_bar(own(), soff(bar) + 1);
    fail(WAIT_BOUND_EXCEEDED, bar_name(b), soff(bar), parity, 0, 0, 0, 0, 0);
  }
}
#endif
// END hang diagnosis
}  // namespace check
}  // namespace wb
#define WB_CHECK_HOOK(call) ::wb::check::call
#else
#define WB_CHECK_HOOK(call) ((void)0)
#endif
// BEGIN hang diagnosis
#if defined(WB_TWIN_CHECK) && WB_TWIN_CHECK && defined(WB_HANG_DIAG) && WB_HANG_DIAG
#define WB_HANG_WATCH(name) ::wb::check::HangWatch name = {0, 0}
#define WB_HANG_HOOK(call) ::wb::check::call
#elif defined(WB_HANG_DIAG) && WB_HANG_DIAG
#error "a hang diagnosis build (WB_HANG_DIAG) needs the twin check (WB_TWIN_CHECK), whose records it fills"
#else
#define WB_HANG_WATCH(name)
#define WB_HANG_HOOK(call) ((void)0)
#endif
// END hang diagnosis

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
#elif defined(WB_TWIN_CHECK) && WB_TWIN_CHECK && defined(WB_HANG_DIAG) && WB_HANG_DIAG
// BEGIN hang diagnosis
// A hang diagnosis build: each warp's last phase and tile only, for the report of a wait that
// outlived its bound (wb::check::record_wait). Every lane writes the same values.
class Trace {
 public:
  __device__ __forceinline__ void enter(TracePhase phase, int arg = 0) { check::note_phase(phase, arg); }
  __device__ __forceinline__ void start_tile(int tile) { check::note_tile(tile); }
};
// END hang diagnosis
#else
// Not a trace build: nothing is recorded and every call compiles to nothing.
class Trace {
 public:
  __device__ __forceinline__ void enter(TracePhase, int = 0) {}
  __device__ __forceinline__ void start_tile(int) {}
};
#endif

}  // namespace wb
