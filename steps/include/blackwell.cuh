// blackwell.cuh: the tcgen05 primitives of the Blackwell (sm_100a) step kernels, one small wrapper
// per PTX idea: the MMA descriptors, tensor memory, tcgen05.mma/commit/ld and the tcgen05 fences.
// What the kernels share with their Hopper twins (mbarriers, clusters, TMA) is in common.cuh.
//
// Compile-time switches (set by the host through NVRTC options):
//   WB_EMULATE_TCGEN05  build for sm_90a, with tcgen05 replaced by the emulation layer.
#pragma once

#include "common.cuh"
#include "pipeline.cuh"

namespace bw {

// The shared primitives, usable as bw:: inside this header and the emulation.
using namespace wb;

// ---------------------------------------------------------------------------------------------
// Descriptors for tcgen05.mma. Pure bit packing, identical on every architecture, so the host
// tests check the same encodings (common::model::descriptors mirrors these functions).
// ---------------------------------------------------------------------------------------------

// Shared-memory matrix descriptor (PTX ISA "Shared Memory Descriptor", tcgen05) for a K-major operand
// in the 128-byte swizzle layout TMA writes: rows of 128 B, 8-row groups `sbo` bytes apart.
// LBO is unused for swizzled K-major layouts; 16 B (encoded 1) is the conventional filler.
__device__ __forceinline__ u64 make_smem_desc_sw128(u32 smem_addr, u32 sbo_bytes) {
  u64 desc = 0;
  desc |= (u64)((smem_addr >> 4) & 0x3FFF);       // bits 0-13: start address >> 4
  desc |= (u64)((16 >> 4) & 0x3FFF) << 16;        // bits 16-29: LBO >> 4
  desc |= (u64)((sbo_bytes >> 4) & 0x3FFF) << 32; // bits 32-45: SBO >> 4
  desc |= (u64)1 << 46;                           // bits 46-48: fixed 0b001 (sm_100 version)
  desc |= (u64)2 << 61;                           // bits 61-63: 2 = 128-byte swizzle
  return desc;                                    // base offset 0: tiles are 1024-B aligned
}

// Instruction descriptor for kind::f16 (PTX ISA "Instruction descriptor", tcgen05): f32 accumulator,
// A and B both K-major, dense, no negation.
__device__ __forceinline__ u32 make_idesc_f16(u32 m, u32 n, bool bf16) {
  u32 desc = 0;
  desc |= 1u << 4;                 // bits 4-5: D format, 1 = F32
  desc |= (bf16 ? 1u : 0u) << 7;   // bits 7-9: A format, 0 = F16, 1 = BF16
  desc |= (bf16 ? 1u : 0u) << 10;  // bits 10-12: B format
  desc |= ((n >> 3) & 0x3F) << 17; // bits 17-22: N >> 3
  desc |= ((m >> 4) & 0x1F) << 24; // bits 24-28: M >> 4
  return desc;
}

// ---------------------------------------------------------------------------------------------
// Operand arithmetic shared by the native wrappers and the emulation, so that the emulation
// exercises the same address computations the hardware path uses.
// ---------------------------------------------------------------------------------------------

// The CTA pair of a cta_group::2 instruction (PTX ISA "tcgen05: Issue Granularity", peer CTAs):
// ranks 2i and 2i + 1 of a cluster; the even one leads. Its barriers count both CTAs' TMA bytes
// and its MMA warp issues the pair's tcgen05.mma. The one definition of that mapping.
__device__ __forceinline__ u32 pair_leader(u32 rank) { return rank & ~1u; }

// A 2-CTA TMA completes its bytes on the barrier at `bar`'s offset in CTA `bar_rank` of the
// cluster (PTX ISA "cp.async.bulk.tensor": with .cta_group::2 the mbarrier may be in either CTA
// of the pair): its shared::cluster address.
__device__ __forceinline__ u32 tma_2cta_barrier(u64* bar, u32 bar_rank) {
  return map_to_cta(smem_u32(bar), bar_rank);
}

// Tensor-memory addresses (PTX ISA "Tensor Memory Addressing"): lane in bits 16-31, column in
// bits 0-15.
__device__ __forceinline__ u32 tmem_lane(u32 taddr) { return taddr >> 16; }
__device__ __forceinline__ u32 tmem_col(u32 taddr) { return taddr & 0xFFFF; }

}  // namespace bw

#if defined(WB_EMULATE_TCGEN05)
#include "tcgen05_emu.cuh"
#else

namespace bw {

// ---------------------------------------------------------------------------------------------
// Tensor memory (PTX ISA "Tensor Memory Allocation and Management Instructions")
// ---------------------------------------------------------------------------------------------

// tcgen05.alloc (warp-level, whole warp): allocate `ncols` columns (a power of two >= 32) of
// tensor memory; the address lands in shared memory at `dst`.
__device__ __forceinline__ void tmem_alloc(u32* dst, u32 ncols) {
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(
                   smem_u32(dst)),
               "r"(ncols)
               : "memory");
}

// tcgen05.relinquish_alloc_permit: this CTA will allocate no more, so other CTAs on the SM may.
__device__ __forceinline__ void tmem_relinquish_alloc_permit() {
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
}

// tcgen05.dealloc (warp-level, whole warp): every allocation must be freed before the CTA exits.
__device__ __forceinline__ void tmem_dealloc(u32 taddr, u32 ncols) {
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(taddr), "r"(ncols)
               : "memory");
}

// The cta_group::2 forms: one warp in each CTA of the pair executes them, and the same columns
// are allocated (freed) in both CTAs' tensor memory. A kernel uses one cta_group throughout.
__device__ __forceinline__ void tmem_alloc_2cta(u32* dst, u32 ncols) {
  asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(
                   smem_u32(dst)),
               "r"(ncols)
               : "memory");
}
__device__ __forceinline__ void tmem_relinquish_alloc_permit_2cta() {
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void tmem_dealloc_2cta(u32 taddr, u32 ncols) {
  asm volatile("tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, %1;" ::"r"(taddr), "r"(ncols)
               : "memory");
}

// cp.async.bulk.tensor.2d ... .cta_group::2 (warp-level): like tma_load_2d, but the bytes are
// counted on the barrier at `bar`'s offset in CTA `bar_rank` of the pair: the kernels pass
// pair_leader(rank), whose MMA warp consumes both CTAs' tiles. `bytes` is this copy's size (its
// box in bytes): the hardware ignores it; the sm_90 emulation forwards it to that barrier.
__device__ __forceinline__ void tma_load_2d_2cta(void* dst, const TmaDesc* desc, u64* bar,
                                                 u32 bar_rank, u32 bytes, int c0, int c1) {
  (void)bytes;
  if (elect_one()) {
    asm volatile(
        "cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_u32(dst)),
        "l"(desc), "r"(tma_2cta_barrier(bar, bar_rank)), "r"(c0), "r"(c1)
        : "memory");
  }
  __syncwarp();
}

// ---------------------------------------------------------------------------------------------
// MMA and its completion (PTX ISA "tcgen05.mma", "tcgen05.commit")
// ---------------------------------------------------------------------------------------------

// tcgen05.mma.cta_group::1.kind::f16 (warp-level): D[tmem] (+)= A[smem] * B[smem]^T, K = 16.
// `accumulate` = false overwrites D: the first MMA of a tile clears the accumulator for free.
__device__ __forceinline__ void mma_f16(u32 d_tmem, u64 a_desc, u64 b_desc, u32 idesc,
                                        bool accumulate) {
  if (elect_one()) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "setp.ne.b32 p, %4, 0;\n\t"
        "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n\t}" ::"r"(d_tmem),
        "l"(a_desc), "l"(b_desc), "r"(idesc), "r"((u32)accumulate)
        : "memory");
  }
  __syncwarp();
}

// tcgen05.mma.cta_group::2.kind::f16 (warp-level, leader CTA only): one MMA over the CTA pair,
// M = 256 split 128/128 by rank. Both CTAs hold their A rows and their half of B's N rows at the
// same shared-memory offsets, so the leader's local descriptors describe both; D lands in each
// CTA's tensor memory at the same address.
__device__ __forceinline__ void mma_f16_2cta(u32 d_tmem, u64 a_desc, u64 b_desc, u32 idesc,
                                             bool accumulate) {
  if (elect_one()) {
    asm volatile(
        "{\n\t.reg .pred p;\n\t"
        "setp.ne.b32 p, %4, 0;\n\t"
        "tcgen05.mma.cta_group::2.kind::f16 [%0], %1, %2, %3, p;\n\t}" ::"r"(d_tmem),
        "l"(a_desc), "l"(b_desc), "r"(idesc), "r"((u32)accumulate)
        : "memory");
  }
  __syncwarp();
}

// tcgen05.commit.cta_group::2 ... multicast::cluster (warp-level): when this thread's MMAs are
// complete, arrive once on the barrier at `bar`'s offset in every CTA of `cta_mask`.
__device__ __forceinline__ void mma_commit_2cta_multicast(u64* bar, unsigned short cta_mask) {
  if (elect_one()) {
    asm volatile(
        "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64"
        " [%0], %1;" ::"r"(smem_u32(bar)),
        "h"(cta_mask)
        : "memory");
  }
  __syncwarp();
}

// tcgen05.commit (warp-level): arrive once on `bar` when every tcgen05.mma this thread issued
// before it has completed. This is how the MMA warp says "slot consumed" or "accumulator ready".
__device__ __forceinline__ void mma_commit(u64* bar) {
  if (elect_one()) {
    asm volatile(
        "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(
            smem_u32(bar))
        : "memory");
  }
  __syncwarp();
}

// ---------------------------------------------------------------------------------------------
// Tensor memory -> registers (PTX ISA "tcgen05.ld", "tcgen05.wait")
// ---------------------------------------------------------------------------------------------

// tcgen05.ld.32x32b.x32 (warp-level, whole warp): thread t of warp w gets lane 32*(w%4)+t,
// 32 consecutive 32-bit columns starting at `taddr`'s column. Asynchronous: pass the same
// registers to tmem_wait_ld before using them.
__device__ __forceinline__ void tmem_ld_32x32b_x32(u32 taddr, u32 (&r)[32]) {
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x32.b32"
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      " %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31},"
      " [%32];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]),
        "=r"(r[7]), "=r"(r[8]), "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]),
        "=r"(r[14]), "=r"(r[15]), "=r"(r[16]), "=r"(r[17]), "=r"(r[18]), "=r"(r[19]),
        "=r"(r[20]), "=r"(r[21]), "=r"(r[22]), "=r"(r[23]), "=r"(r[24]), "=r"(r[25]),
        "=r"(r[26]), "=r"(r[27]), "=r"(r[28]), "=r"(r[29]), "=r"(r[30]), "=r"(r[31])
      : "r"(taddr));
}

// tcgen05.wait::ld (PTX ISA "tcgen05.wait"): block until this thread's tcgen05.ld results are
// in its registers. The registers are in-out operands of the wait, so the compiler can neither
// read them before it nor move the wait after their first use: the wait is tied to the load's
// results. (The ISA also orders a true register dependency on its own, "Register dependencies,
// same thread"; the wait is what orders the load's tensor-memory reads before a later hand-off.)
__device__ __forceinline__ void tmem_wait_ld(u32 (&r)[32]) {
  asm volatile("tcgen05.wait::ld.sync.aligned;"
               : "+r"(r[0]), "+r"(r[1]), "+r"(r[2]), "+r"(r[3]), "+r"(r[4]), "+r"(r[5]),
                 "+r"(r[6]), "+r"(r[7]), "+r"(r[8]), "+r"(r[9]), "+r"(r[10]), "+r"(r[11]),
                 "+r"(r[12]), "+r"(r[13]), "+r"(r[14]), "+r"(r[15]), "+r"(r[16]), "+r"(r[17]),
                 "+r"(r[18]), "+r"(r[19]), "+r"(r[20]), "+r"(r[21]), "+r"(r[22]), "+r"(r[23]),
                 "+r"(r[24]), "+r"(r[25]), "+r"(r[26]), "+r"(r[27]), "+r"(r[28]), "+r"(r[29]),
                 "+r"(r[30]), "+r"(r[31])
               :
               : "memory");
}

// ---------------------------------------------------------------------------------------------
// Ordering tcgen05 work around thread synchronisation (PTX ISA "tcgen05.fence")
// ---------------------------------------------------------------------------------------------

// Before a barrier/mbarrier that hands tcgen05 results (or tensor memory) to other threads.
__device__ __forceinline__ void tcgen05_fence_before_thread_sync() {
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
}

// After waiting on a barrier/mbarrier and before issuing tcgen05 work that depends on it.
__device__ __forceinline__ void tcgen05_fence_after_thread_sync() {
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
}

}  // namespace bw

#endif  // WB_EMULATE_TCGEN05
