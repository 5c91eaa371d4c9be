// stress.cuh: the stress mode of the Hopper twins: named points where a stress build sleeps.
// Included by common.cuh (kernels include common.cuh, blackwell.cuh or hopper.cuh, never this
// file); it relies on common.cuh's types and on what common.cuh defines before including it.
#pragma once

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
