// clc_emu.cuh: a stand-in for cluster launch control on sm_90 (Hopper has none), included by
// clc.cuh under WB_EMULATE_TCGEN05. It is an emulation, not the hardware: the same functions, the
// same response contract (16 bytes written asynchronously into every CTA of the cluster, each copy
// completing 16 bytes on that CTA's mbarrier), decided by atomics on a per-launch global array the
// host zeroes before every launch (common::emulation, `wb_emu_clc`):
//   - word 0 is a cursor over the grid's clusters, in launch order; word 1 + c is cluster c's
//     claim: 0 not started, 1 started, 2 cancelled;
//   - a cluster claims its own id when it starts (clc_launch_was_cancelled, first thing in the
//     kernel); if a canceller claimed it first, the cluster leaves at once. On sm_100a the hardware
//     never starts a cancelled cluster; here a cluster placed on its SMs but not yet past its claim
//     counts as not started, which is the same contract;
//   - try_cancel walks the cursor and claims the first cluster still at 0 (atomicCAS), else fails:
//     each cancelled id goes to one request, as the PTX ISA promises;
//   - residency: a GPU runs only the clusters its SMs hold, and a request cancels only a launch that
//     has not started. An H100/H200 holds every cluster of the small grids the checks use, so every
//     cluster would start before any request and every request would fail: a kernel's multi-tile
//     path (and its bugs, such as a stale response) would never run. So at most `cap` clusters
//     (word 1 + 33 * CTAs, set by the host: common::simulate::DEFAULT_CLUSTERS, the simulator's
//     bound) count as started at once; the others wait at their claim, not started, until a slot
//     frees or a request cancels them. A slot frees when every warp of a running cluster observed a
//     failed response (the cluster takes no further tile and leaves), or, for a cluster that
//     leaves without one, when a waiter has waited FALLBACK_NS. A cap of 0 starts every cluster at
//     once. This is a legal sm_100a schedule (a fuller GPU), not a rule: it checks nothing;
//   - the response is copied from a staging word into every CTA with cp.async.bulk (the async
//     proxy) completing on each CTA's mbarrier after a seeded delay, like the hardware's. Before it,
//     the buffers get a poison value, so a read not ordered after the mbarrier decodes poison.
// Checks (they trap with a record the host names, common::emulation::Fault): a response decoded
// before its bytes landed (poison), an id decoded twice by one warp, a request after this CTA saw
// a failed one, a first ctaid read from a failed response.
#pragma once

#define WB_EMU_ERR_CLC_READ_BEFORE_COMPLETE 40  // a try_cancel response decoded before it landed
#define WB_EMU_ERR_CLC_ID_TWICE 41              // one warp decoded the same cancelled id twice
#define WB_EMU_ERR_CLC_AFTER_FAILURE 42         // try_cancel after this CTA observed a failure
#define WB_EMU_ERR_CLC_CTAID_OF_FAILED 43       // get_first_ctaid of a failed response

extern "C" {
// Set by the host before each launch: 1 + 33 * (CTAs of the grid) words, zeroed.
__device__ u32* wb_emu_clc;
}

namespace bw {
namespace clc_emu {

constexpr u32 NOT_STARTED = 0, STARTED = 1, CANCELLED = 2;
constexpr u32 POISON = 0xDEADC1C0u;  // word 0 of a response whose bytes have not landed
constexpr u32 CANCELED_TAG = 0xC1C0000Bu, FAILED_TAG = 0xC1C0000Fu;

__device__ __forceinline__ u32 clusters_in_grid() {
  return (gridDim.x * gridDim.y * gridDim.z) / emu::cluster_size();
}
// This cluster's number in launch order: its first CTA's linear index over the cluster size.
__device__ __forceinline__ u32 this_cluster() {
  return (emu::cta_linear() - emu::cta_rank()) / emu::cluster_size();
}
__device__ __forceinline__ u32* claim(u32 cluster) { return wb_emu_clc + 1 + cluster; }
// After the per-CTA words: [0] the cap on started clusters (0: none), [1] clusters started and
// not yet done, [2 + c] warps of cluster c that observed a failed response.
__device__ __forceinline__ u32* resident_words() {
  return wb_emu_clc + 1 + 33 * (gridDim.x * gridDim.y * gridDim.z);
}
// How long a waiting cluster waits for a slot before it starts anyway (a running cluster may
// leave without observing a failure, which the stand-in cannot see).
constexpr unsigned long long FALLBACK_NS = 1000ull * 1000 * 1000;  // 1 s
__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// Per CTA, per warp: 1 + the last cancelled cluster the warp decoded; word 31: failure seen.
__device__ __forceinline__ u32* warp_words(u32 cta) {
  return wb_emu_clc + 1 + clusters_in_grid() + cta * 32;
}

}  // namespace clc_emu

__device__ __forceinline__ bool clc_launch_was_cancelled() {
  using namespace clc_emu;
  u32* const res = resident_words();
  const u32 cap = emu::vld(res);
  u32* const mine = claim(this_cluster());
  if (cap == 0) {
    // Both CTAs of the cluster try the same claim: it is either cancelled before both, or not.
    const u32 prior = atomicCAS(mine, NOT_STARTED, STARTED);
    return prior == CANCELLED;
  }
  // One thread of the cluster takes a residency slot and starts it, unless a request cancels it
  // first; every other thread waits for that decision.
  if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0 && emu::cta_rank() == 0) {
    const unsigned long long since = now_ns();
    while (emu::vld(mine) == NOT_STARTED) {
      const u32 running = emu::vld(res + 1);
      const bool late = now_ns() - since > FALLBACK_NS;
      if (running < cap || late) {
        const bool took = late ? (atomicAdd(res + 1, 1u), true)
                               : atomicCAS(res + 1, running, running + 1) == running;
        if (took) {
          // Cancelled meanwhile: give the slot back, the cluster leaves.
          if (atomicCAS(mine, NOT_STARTED, STARTED) != NOT_STARTED) atomicSub(res + 1, 1u);
          break;
        }
      }
      __nanosleep(1000);
    }
  }
  u32 decided;
  while ((decided = emu::vld(mine)) == NOT_STARTED) __nanosleep(500);
  return decided == CANCELLED;
}

__device__ __forceinline__ void clc_try_cancel_multicast(ClcResponse* response, u64* bar) {
  using namespace clc_emu;
  __shared__ alignas(16) ClcResponse staging;  // the issuer's copy of the answer
  if (elect_one()) {
    u32* seen = warp_words(emu::cta_linear()) + 31;
    if (*reinterpret_cast<volatile u32*>(seen)) emu::fail(WB_EMU_ERR_CLC_AFTER_FAILURE, 0, 0);
    // Poison every CTA's copy (generic stores, made visible to the async proxy before the copy).
    for (u32 r = 0; r < emu::cluster_size(); ++r) {
      const u32 dst = wb::map_to_cta(smem_u32(response), r);
      asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(dst), "r"(POISON)
                   : "memory");
    }
    // Claim the first cluster of the launch order that has not started.
    const u32 n = clusters_in_grid();
    u32 victim = n;
    for (u32 c = atomicAdd(wb_emu_clc, 1u); c < n; c = atomicAdd(wb_emu_clc, 1u)) {
      if (atomicCAS(claim(c), NOT_STARTED, CANCELLED) == NOT_STARTED) {
        victim = c;
        break;
      }
    }
    u32 words[4] = {FAILED_TAG, 0, 0, 0};
    if (victim < n) {
      // Its first CTA: clusters lie along x (KernelShape::grid), then y.
      const u32 per_row = gridDim.x / emu::cluster_size();
      words[0] = CANCELED_TAG;
      words[1] = (victim % per_row) * emu::cluster_size();
      words[2] = victim / per_row;
      words[3] = 0;
    }
    staging = *reinterpret_cast<const ClcResponse*>(words);
    asm volatile("fence.proxy.async.shared::cluster;" ::: "memory");
    const u32 event = static_cast<u32>(clock64());
    emu::spin(emu::perturbation(wb::warp_id(), event) & 0x3FF);  // the answer comes a little later
    for (u32 r = 0; r < emu::cluster_size(); ++r) {
      asm volatile(
          "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], 16, "
          "[%2];" ::"r"(wb::map_to_cta(smem_u32(response), r)),
          "r"(smem_u32(&staging)), "r"(wb::map_to_cta(smem_u32(bar), r))
          : "memory");
    }
  }
  __syncwarp();
}

__device__ __forceinline__ bool clc_is_canceled(ClcResponse r) {
  using namespace clc_emu;
  const u32 tag = static_cast<u32>(r.lo);
  if (tag != CANCELED_TAG && tag != FAILED_TAG)
    emu::fail(WB_EMU_ERR_CLC_READ_BEFORE_COMPLETE, tag, 0);
  if (tag == FAILED_TAG) {
    u32* seen = warp_words(emu::cta_linear()) + 31;
    *reinterpret_cast<volatile u32*>(seen) = 1;
    // The cluster takes no further tile: once all its warps saw the failure, its slot frees.
    u32* const res = resident_words();
    if (emu::vld(res) != 0 && wb::lane_id() == 0) {
      const u32 warps = emu::cluster_size() * ((blockDim.x * blockDim.y * blockDim.z + 31) / 32);
      if (atomicAdd(res + 2 + this_cluster(), 1u) + 1 == warps) atomicSub(res + 1, 1u);
    }
    return false;
  }
  return true;
}

__device__ __forceinline__ u32 clc_first_ctaid_x(ClcResponse r) {
  using namespace clc_emu;
  if (static_cast<u32>(r.lo) != CANCELED_TAG)
    emu::fail(WB_EMU_ERR_CLC_CTAID_OF_FAILED, static_cast<u32>(r.lo), 0);
  const u32 x = static_cast<u32>(r.lo >> 32);
  // One decode per cancelled cluster per warp: the ISA gives each cancelled id to one response.
  const u32 cluster = static_cast<u32>(r.hi) * (gridDim.x / emu::cluster_size()) +
                      x / emu::cluster_size();
  u32* last = warp_words(emu::cta_linear()) + wb::warp_id() % 31;
  if (wb::lane_id() == 0) {
    if (*reinterpret_cast<volatile u32*>(last) == cluster + 1)
      emu::fail(WB_EMU_ERR_CLC_ID_TWICE, cluster, 0);
  }
  __syncwarp();
  if (wb::lane_id() == 0) *reinterpret_cast<volatile u32*>(last) = cluster + 1;
  return x;
}

__device__ __forceinline__ u32 clc_first_ctaid_y(ClcResponse r) {
  using namespace clc_emu;
  if (static_cast<u32>(r.lo) != CANCELED_TAG)
    emu::fail(WB_EMU_ERR_CLC_CTAID_OF_FAILED, static_cast<u32>(r.lo), 0);
  return static_cast<u32>(r.hi);
}

}  // namespace bw
