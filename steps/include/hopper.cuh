// hopper.cuh: the sm_90a primitives of the Hopper twins, one small wrapper per PTX idea: wgmma's
// shared-memory descriptor, the wgmma instruction and its fence/commit/wait, setmaxnreg and named
// barriers. What the twins share with the Blackwell kernels (mbarriers, clusters, TMA) is in
// common.cuh. Each wrapper cites the PTX ISA (CUDA 13.0) section it follows, by title.
//
// The twin of tcgen05 is wgmma ("warpgroup MMA"): the four warps of a warpgroup (128 threads)
// issue it together; A and B are read from shared memory through descriptors, as on Blackwell,
// but the accumulator D lives in the warpgroup's registers instead of tensor memory.
#pragma once

#include "common.cuh"
#include "pipeline.cuh"

namespace hp {

// The shared primitives, usable as hp:: inside this header.
using namespace wb;

// ---------------------------------------------------------------------------------------------
// Shared-memory matrix descriptor (PTX ISA "Asynchronous Warpgroup Level Matrix Shared Memory
// Layout: Matrix Descriptor Format"). Same idea as tcgen05's, different bits: no fixed 0b001 at
// 46-48, and the swizzle mode is two bits at 62-63 (1 = 128 B) instead of three at 61-63.
// ---------------------------------------------------------------------------------------------

// A K-major operand in the 128-byte swizzle layout TMA writes: rows of 128 B, 8-row groups `sbo`
// bytes apart. LBO is unused for swizzled K-major layouts; 16 B (encoded 1) is the usual filler.
// Stepping K inside the 128-byte row is a plain byte offset on the start address, as on Blackwell.
__device__ __forceinline__ u64 make_smem_desc_sw128(u32 smem_addr, u32 sbo_bytes) {
  u64 desc = 0;
  desc |= (u64)((smem_addr >> 4) & 0x3FFF);       // bits 0-13: start address >> 4
  desc |= (u64)((16 >> 4) & 0x3FFF) << 16;        // bits 16-29: LBO >> 4
  desc |= (u64)((sbo_bytes >> 4) & 0x3FFF) << 32; // bits 32-45: SBO >> 4
  desc |= (u64)1 << 62;                           // bits 62-63: 1 = 128-byte swizzle
  return desc;                                    // base offset 0: tiles are 1024-B aligned
}

// ---------------------------------------------------------------------------------------------
// wgmma and its ordering (PTX ISA "Asynchronous Warpgroup Level Matrix Multiply-Accumulate
// Instructions": wgmma.fence, wgmma.mma_async, wgmma.commit_group, wgmma.wait_group)
// ---------------------------------------------------------------------------------------------

// wgmma.fence (warpgroup-level): order this warpgroup's earlier register writes of the
// accumulators (and shared-memory writes of the operands) before the wgmma that follows.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

// wgmma.commit_group (warpgroup-level): close the group of wgmma issued since the last commit.
__device__ __forceinline__ void wgmma_commit_group() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
  WB_CHECK_HOOK(on_wgmma_commit());
  WB_STRESS_POINT(AFTER_WGMMA_COMMIT);
}

// wgmma.wait_group N (warpgroup-level): wait until at most N committed groups are pending. After
// it, the accumulators of the completed groups may be read and their operand slots reused.
template <int N>
__device__ __forceinline__ void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
  WB_CHECK_HOOK(on_wgmma_wait(N));
  WB_STRESS_POINT(AFTER_WGMMA_WAIT);
}

// Keep the compiler's hands off the accumulators while a wgmma owns them: an empty asm that
// "reads and writes" each register, so no copy or spill of D is scheduled across it.
template <int R>
__device__ __forceinline__ void fence_operands(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The operand lists of the m64n128k16 form: 64 accumulator registers, then A, B, scale-d.
#define HP_WGMMA_N128_REGS \
  "{%0, %1, %2, %3, %4, %5, %6, %7," \
  "%8, %9, %10, %11, %12, %13, %14, %15," \
  "%16, %17, %18, %19, %20, %21, %22, %23," \
  "%24, %25, %26, %27, %28, %29, %30, %31," \
  "%32, %33, %34, %35, %36, %37, %38, %39," \
  "%40, %41, %42, %43, %44, %45, %46, %47," \
  "%48, %49, %50, %51, %52, %53, %54, %55," \
  "%56, %57, %58, %59, %60, %61, %62, %63}," \
  " %64, %65, p, 1, 1, 0, 0;\n\t}"
#define HP_WGMMA_N128_OUTS(d) \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

// The operand lists of the m64n256k16 form: 128 accumulator registers, then A, B, scale-d.
#define HP_WGMMA_N256_REGS \
  "{%0, %1, %2, %3, %4, %5, %6, %7," \
  "%8, %9, %10, %11, %12, %13, %14, %15," \
  "%16, %17, %18, %19, %20, %21, %22, %23," \
  "%24, %25, %26, %27, %28, %29, %30, %31," \
  "%32, %33, %34, %35, %36, %37, %38, %39," \
  "%40, %41, %42, %43, %44, %45, %46, %47," \
  "%48, %49, %50, %51, %52, %53, %54, %55," \
  "%56, %57, %58, %59, %60, %61, %62, %63," \
  "%64, %65, %66, %67, %68, %69, %70, %71," \
  "%72, %73, %74, %75, %76, %77, %78, %79," \
  "%80, %81, %82, %83, %84, %85, %86, %87," \
  "%88, %89, %90, %91, %92, %93, %94, %95," \
  "%96, %97, %98, %99, %100, %101, %102, %103," \
  "%104, %105, %106, %107, %108, %109, %110, %111," \
  "%112, %113, %114, %115, %116, %117, %118, %119," \
  "%120, %121, %122, %123, %124, %125, %126, %127}," \
  " %128, %129, p, 1, 1, 0, 0;\n\t}"
#define HP_WGMMA_N256_OUTS(d) \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
  "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
  "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
  "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
  "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
  "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), \
  "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
  "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
  "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
  "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), \
  "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), \
  "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), \
  "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), \
  "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// wgmma.mma_async.sync.aligned.m64n128k16.f32.{f16,bf16} (warpgroup-level): D (+)= A * B^T for a
// 64 x 128 tile, both operands K-major in shared memory (PTX ISA "wgmma.mma_async"). Each thread
// of the warpgroup holds 64 of D's f32 values. `accumulate` = false overwrites D (scale-d).
template <bool BF16>
__device__ __forceinline__ void wgmma_m64n128k16(float (&d)[64], u64 a_desc, u64 b_desc,
                                               bool accumulate) {
  WB_CHECK_HOOK(on_wgmma(a_desc, b_desc, 128));  // the ranges it reads, for the twin check
  const u32 scale_d = accumulate ? 1u : 0u;
  if constexpr (BF16) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " HP_WGMMA_N128_REGS
                 : HP_WGMMA_N128_OUTS(d)
                 : "l"(a_desc), "l"(b_desc), "r"(scale_d));
  } else {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " HP_WGMMA_N128_REGS
                 : HP_WGMMA_N128_OUTS(d)
                 : "l"(a_desc), "l"(b_desc), "r"(scale_d));
  }
}

// wgmma.mma_async.sync.aligned.m64n256k16.f32.{f16,bf16} (warpgroup-level): D (+)= A * B^T for a
// 64 x 256 tile, both operands K-major in shared memory (PTX ISA "wgmma.mma_async"). Each thread
// of the warpgroup holds 128 of D's f32 values. `accumulate` = false overwrites D (scale-d).
template <bool BF16>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], u64 a_desc, u64 b_desc,
                                               bool accumulate) {
  WB_CHECK_HOOK(on_wgmma(a_desc, b_desc, 256));  // the ranges it reads, for the twin check
  const u32 scale_d = accumulate ? 1u : 0u;
  if constexpr (BF16) {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %130, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " HP_WGMMA_N256_REGS
                 : HP_WGMMA_N256_OUTS(d)
                 : "l"(a_desc), "l"(b_desc), "r"(scale_d));
  } else {
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %130, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 " HP_WGMMA_N256_REGS
                 : HP_WGMMA_N256_OUTS(d)
                 : "l"(a_desc), "l"(b_desc), "r"(scale_d));
  }
}

// The m64 x N x 16 wgmma for N = 128 or 256: what a kernel calls.
template <int N, bool BF16>
__device__ __forceinline__ void wgmma_m64k16(float (&d)[N / 2], u64 a_desc, u64 b_desc,
                                             bool accumulate) {
  static_assert(N == 128 || N == 256, "the twins use wgmma with N = 128 or 256");
  if constexpr (N == 128) {
    wgmma_m64n128k16<BF16>(d, a_desc, b_desc, accumulate);
  } else {
    wgmma_m64n256k16<BF16>(d, a_desc, b_desc, accumulate);
  }
}

// ---------------------------------------------------------------------------------------------
// Registers and warpgroup barriers
// ---------------------------------------------------------------------------------------------

// setmaxnreg.dec / .inc (PTX ISA "setmaxnreg", warpgroup-level): give registers back to the SM's
// pool, or take them from it. A producer warpgroup that only issues TMA needs few; the consumers
// holding accumulators take what it gave up. The kernel must start with a register cap
// (__launch_bounds__(threads, 1)) and each warpgroup's role must be one branch.
template <u32 REGS>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}
template <u32 REGS>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}

// bar.sync id, count (PTX ISA "bar, barrier"): a barrier for `count` threads (a multiple of 32)
// on hardware barrier `id` (1-15; 0 is the CTA-wide one), e.g. one warpgroup's 128 threads.
__device__ __forceinline__ void named_barrier_sync(u32 id, u32 count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
  WB_CHECK_HOOK(on_thread_sync());
  WB_STRESS_POINT(AFTER_BARRIER);
}

// ---------------------------------------------------------------------------------------------
// Conversions
// ---------------------------------------------------------------------------------------------

// Two f32 accumulator values as one 32-bit pair of T (__half or __nv_bfloat16), `lo` first in
// memory: cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32 (PTX ISA "cvt"). A wgmma fragment holds adjacent
// columns in pairs, so the epilogue writes 4 bytes at a time.
template <typename T>
__device__ __forceinline__ u32 pack_pair(float lo, float hi);
template <>
__device__ __forceinline__ u32 pack_pair<__half>(float lo, float hi) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const u32*>(&v);
}
template <>
__device__ __forceinline__ u32 pack_pair<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const u32*>(&v);
}

// ---------------------------------------------------------------------------------------------
// L2 eviction hints (used by exercises/hopper/step6_l2hints_sm90.cu, not by the ladder)
// ---------------------------------------------------------------------------------------------

// createpolicy.fractional (PTX ISA "createpolicy"): a 64-bit L2 cache policy for the
// .L2::cache_hint forms of the bulk tensor copies below; fraction 1.0 covers every line they touch.
// evict_last: keep these lines over others (an operand later tiles read again);
// evict_first: drop these lines first (C, written once and never read).
__device__ __forceinline__ u64 createpolicy_evict_last() {
  u64 policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ u64 createpolicy_evict_first() {
  u64 policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// cp.async.bulk.tensor.2d ... .L2::cache_hint (PTX ISA "cp.async.bulk.tensor", warp-level): the
// copies of wb::tma_load_2d, wb::tma_load_2d_multicast and wb::tma_store_2d, their L2 lines
// tagged with `policy`. Native only: the tcgen05 emulation never sees them (no hook).
__device__ __forceinline__ void tma_load_2d_hint(void* dst, const TmaDesc* desc, u64* bar, int c0,
                                                 int c1, u64 policy) {
  if (wb::elect_one()) {
    WB_CHECK_HOOK(on_tma_load(dst, 1u << wb::cluster_ctarank()));
    WB_STRESS_POINT(BEFORE_TMA_LOAD);
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
        " [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(wb::smem_u32(dst)),
        "l"(desc), "r"(wb::smem_u32(bar)), "r"(c0), "r"(c1), "l"(policy)
        : "memory");
  }
  __syncwarp();
}
__device__ __forceinline__ void tma_load_2d_multicast_hint(void* dst, const TmaDesc* desc, u64* bar,
                                                           unsigned short cta_mask, int c0, int c1,
                                                           u64 policy) {
  if (wb::elect_one()) {
    WB_CHECK_HOOK(on_tma_load(dst, cta_mask));
    WB_STRESS_POINT(BEFORE_TMA_LOAD);
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        ".multicast::cluster.L2::cache_hint [%0], [%1, {%3, %4}], [%2], %5, %6;" ::"r"(
            wb::smem_u32(dst)),
        "l"(desc), "r"(wb::smem_u32(bar)), "r"(c0), "r"(c1), "h"(cta_mask), "l"(policy)
        : "memory");
  }
  __syncwarp();
}
__device__ __forceinline__ void tma_store_2d_hint(const TmaDesc* desc, const void* src, int c0,
                                                  int c1, u64 policy) {
  if (wb::lane_id() == 0) {
    WB_CHECK_HOOK(on_tma_store(src));
    WB_STRESS_POINT(BEFORE_TMA_STORE);
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group.L2::cache_hint"
        " [%0, {%2, %3}], [%1], %4;" ::"l"(desc),
        "r"(wb::smem_u32(src)), "r"(c0), "r"(c1), "l"(policy)
        : "memory");
  }
  __syncwarp();
}

}  // namespace hp
