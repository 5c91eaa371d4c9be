// clc.cuh: cluster launch control (sm_100), one small wrapper per PTX idea: ask the hardware to
// cancel the launch of a cluster that has not started, and decode its answer. Step 7 uses it to
// balance its last wave. PTX ISA 8.6+, "Parallel Synchronization and Communication Instructions":
// clusterlaunchcontrol.try_cancel (9.7.13.17 in PTX ISA 9.0) and clusterlaunchcontrol.query_cancel
// (9.7.13.18).
//
// The response is 16 opaque bytes in shared memory. The kernel reads them with an ordinary load
// once the mbarrier the request completes on has completed, and only these functions decode them.
// Under WB_EMULATE_TCGEN05 (sm_90a, which has no cluster launch control) clc_emu.cuh stands in,
// with the same signatures and the same contract.
#pragma once

#include "common.cuh"

namespace bw {

// The 16 bytes of a try_cancel response, as two 64-bit halves (an ld.shared.v2.b64 reads them).
struct alignas(16) ClcResponse {
  u64 lo, hi;
};

}  // namespace bw

#if defined(WB_EMULATE_TCGEN05)
#include "clc_emu.cuh"
#else

namespace bw {

// A cluster whose launch was cancelled never starts on sm_100a (try_cancel cancels only clusters
// that have not started running), so nothing is left to decide here. The emulation's stand-in
// decides it at this point instead (clc_emu.cuh).
__device__ __forceinline__ bool clc_launch_was_cancelled() { return false; }

// clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes
// .multicast::cluster::all.b128 (warp-level, one elected lane issues it): ask to cancel the launch
// of a cluster of this grid that has not started. The response is written asynchronously (weak
// async-proxy writes) to `response`'s offset in every CTA of this cluster, and each CTA's copy
// completes 16 bytes (complete_tx) on the mbarrier at `bar`'s offset in that CTA: each CTA must
// have expected them (arrive.expect_tx), as the instruction only completes them. Only a wait on
// that mbarrier orders the response before a read of it. Undefined if a CTA of the cluster has
// exited, or once this CTA observed a failed response (PTX ISA "clusterlaunchcontrol.try_cancel").
__device__ __forceinline__ void clc_try_cancel_multicast(ClcResponse* response, u64* bar) {
  if (elect_one()) {
    asm volatile(
        "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes"
        ".multicast::cluster::all.b128 [%0], [%1];" ::"r"(smem_u32(response)),
        "r"(smem_u32(bar))
        : "memory");
  }
  __syncwarp();
}

// clusterlaunchcontrol.query_cancel.is_canceled.pred.b128: did the request cancel a cluster? The
// two halves become one .b128 register (mov.b128 {lo, hi}), the operand query_cancel takes.
__device__ __forceinline__ bool clc_is_canceled(ClcResponse r) {
  u32 canceled;
  asm volatile(
      "{\n\t.reg .b128 response;\n\t.reg .pred p;\n\t"
      "mov.b128 response, {%1, %2};\n\t"
      "clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 p, response;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(canceled)
      : "l"(r.lo), "l"(r.hi));
  return canceled != 0;
}

// clusterlaunchcontrol.query_cancel.get_first_ctaid::{x,y}.b32.b128: the ctaid of the first CTA
// of the cancelled cluster. Only for a response is_canceled accepted: for a failed one it is
// undefined (PTX ISA "clusterlaunchcontrol.query_cancel").
__device__ __forceinline__ u32 clc_first_ctaid_x(ClcResponse r) {
  u32 x;
  asm volatile(
      "{\n\t.reg .b128 response;\n\t"
      "mov.b128 response, {%1, %2};\n\t"
      "clusterlaunchcontrol.query_cancel.get_first_ctaid::x.b32.b128 %0, response;\n\t}"
      : "=r"(x)
      : "l"(r.lo), "l"(r.hi));
  return x;
}
__device__ __forceinline__ u32 clc_first_ctaid_y(ClcResponse r) {
  u32 y;
  asm volatile(
      "{\n\t.reg .b128 response;\n\t"
      "mov.b128 response, {%1, %2};\n\t"
      "clusterlaunchcontrol.query_cancel.get_first_ctaid::y.b32.b128 %0, response;\n\t}"
      : "=r"(y)
      : "l"(r.lo), "l"(r.hi));
  return y;
}

}  // namespace bw

#endif  // WB_EMULATE_TCGEN05
