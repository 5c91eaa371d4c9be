// tcgen05_emu.cuh: the tcgen05 primitives of blackwell.cuh, emulated for sm_90 (Hopper).
//
// Included by blackwell.cuh when WB_EMULATE_TCGEN05 is defined. Step kernels compile unchanged:
// every function here has the signature and the PTX semantics of its native twin. TMA, mbarrier,
// clusters and distributed shared memory stay native; only tcgen05 is replaced:
//   - tensor memory: 128 lanes x 512 columns of 32-bit cells per CTA, in global memory the host
//     allocates (and poisons with NaN) for each launch; cell (lane, col) at [col * 128 + lane];
//   - tcgen05.mma only validates and queues; the math runs at tcgen05.commit, with all 32 lanes,
//     so a kernel that reads the accumulator before the commit's mbarrier fires reads poison;
//   - every encoding the workbook does not use traps, after writing what went wrong to
//     host-mapped memory (wb_emu_error) so the host can name the fault after the context dies.
// This is a correctness tool. Its timings mean nothing.
#pragma once

// Failure codes, mirrored by common::emulation::EmuFault on the host.
#define WB_EMU_ERR_NOT_FULL_WARP 1      // a .sync.aligned tcgen05 op with lanes missing
#define WB_EMU_ERR_ALLOC_NCOLS 2        // ncols not a power of two in [32, 512]
#define WB_EMU_ERR_ALLOC_AFTER_RELINQUISH 3
#define WB_EMU_ERR_ALLOC_FULL 4         // no free, aligned column range
#define WB_EMU_ERR_DEALLOC_UNALLOCATED 5
#define WB_EMU_ERR_IDESC_UNSUPPORTED 6  // instruction descriptor field the emulator doesn't model
#define WB_EMU_ERR_SDESC_UNSUPPORTED 7  // shared-memory descriptor field likewise
#define WB_EMU_ERR_TMEM_UNALLOCATED 8   // MMA or ld touches columns not allocated
#define WB_EMU_ERR_LD_WRONG_LANES 9     // tcgen05.ld outside the warp's lane quarter
#define WB_EMU_ERR_QUEUE_FULL 10        // too many MMAs without a commit
#define WB_EMU_ERR_CTA_INDEX 11         // more CTAs than the host sized tensor memory for
#define WB_EMU_ERR_DEALLOC_PENDING 12   // dealloc while issued MMAs were never committed
#define WB_EMU_ERR_SMEM_OUT_OF_RANGE 13 // an MMA operand row lies outside the CTA's shared memory
#define WB_EMU_ERR_NOT_LEADER 14        // a cta_group::2 MMA issued by a CTA of odd rank
#define WB_EMU_ERR_MIXED_CTA_GROUP 15   // a commit of one cta_group covering MMAs of the other

namespace bw {
namespace emu {

constexpr u32 LANES = 128;
constexpr u32 COLS = 512;
constexpr u32 GRANULE = 32;  // allocation unit, in columns
constexpr u32 MAX_PENDING = 64;

struct PendingMma {
  u64 a_desc;
  u64 b_desc;
  u32 d_tmem;
  u32 idesc;
  u32 accumulate;
  u32 cta_group;  // 1, or 2 for an MMA over the CTA pair
};

// Per-CTA bookkeeping; the host zeroes it before each launch and checks alloc_mask == 0 after.
struct CtaState {
  u32 alloc_mask;  // bit g set: columns [32g, 32g + 32) are allocated
  u32 relinquished;
  u32 num_pending;
  u32 pad;
  PendingMma pending[MAX_PENDING];
};

// First fault wins; the record lives in host-mapped memory so it survives the trap.
struct Fault {
  u32 code;
  u32 cta;
  u32 warp;
  u32 lane;
  u64 detail0;
  u64 detail1;
};

}  // namespace emu
}  // namespace bw

// Set by the host (cuModuleGetGlobal) before each launch.
extern "C" {
__device__ float* wb_emu_tmem;
__device__ bw::emu::CtaState* wb_emu_state;
__device__ u32 wb_emu_num_ctas;
__device__ bw::emu::Fault* wb_emu_fault;
}

namespace bw {
namespace emu {

__device__ __forceinline__ u32 cta_linear() {
  return blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
}

__device__ __noinline__ void fail(u32 code, u64 detail0, u64 detail1) {
  Fault* f = wb_emu_fault;
  if (atomicCAS(&f->code, 0u, code) == 0u) {
    f->cta = cta_linear();
    f->warp = threadIdx.x / 32;
    f->lane = threadIdx.x % 32;
    f->detail0 = detail0;
    f->detail1 = detail1;
    __threadfence_system();
  }
  __trap();
}

__device__ __forceinline__ u32 cta_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// Linear block index of the CTA with cluster rank `rank` in this CTA's cluster.
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

__device__ __forceinline__ CtaState* state_of(u32 rank) {
  const u32 cta = cta_linear_of_rank(rank);
  if (cta >= wb_emu_num_ctas) fail(WB_EMU_ERR_CTA_INDEX, cta, wb_emu_num_ctas);
  return wb_emu_state + cta;
}

__device__ __forceinline__ CtaState* state() { return state_of(cta_rank()); }

__device__ __forceinline__ float* tmem_cells_of(u32 rank) {
  return wb_emu_tmem + static_cast<size_t>(cta_linear_of_rank(rank)) * LANES * COLS;
}

__device__ __forceinline__ float* tmem_cells() { return tmem_cells_of(cta_rank()); }

__device__ __forceinline__ void require_full_warp(u32 what) {
  if (__activemask() != 0xffffffffu) fail(WB_EMU_ERR_NOT_FULL_WARP, what, __activemask());
}

__device__ __forceinline__ u32 granule_mask(u32 col, u32 ncols) {
  const u32 first = col / GRANULE;
  const u32 last = (col + ncols - 1) / GRANULE;
  return ((last >= 31 ? 0xffffffffu : ((1u << (last + 1)) - 1u))) & ~((1u << first) - 1u);
}

__device__ __forceinline__ void require_allocated(const CtaState* st, u32 col, u32 ncols) {
  if (col + ncols > COLS || (st->alloc_mask & granule_mask(col, ncols)) != granule_mask(col, ncols))
    fail(WB_EMU_ERR_TMEM_UNALLOCATED, col, ncols);
}

// Decoded kind::f16 instruction descriptor. Anything other than dense, f32-accumulating,
// K-major, un-negated f16/bf16 with M = 128 per CTA (128 for cta_group::1, 256 for
// cta_group::2) traps: the emulator would rather stop than guess.
struct Idesc {
  u32 m, n;
  bool bf16;
};

__device__ __forceinline__ Idesc decode_idesc(u32 idesc, u32 cta_group) {
  const u32 sparse_sat = idesc & 0xF;          // bits 0-3
  const u32 d_fmt = (idesc >> 4) & 0x3;        // bits 4-5
  const u32 a_fmt = (idesc >> 7) & 0x7;        // bits 7-9
  const u32 b_fmt = (idesc >> 10) & 0x7;       // bits 10-12
  const u32 negate = (idesc >> 13) & 0x3;      // bits 13-14
  const u32 major = (idesc >> 15) & 0x3;       // bits 15-16
  const u32 n = ((idesc >> 17) & 0x3F) << 3;   // bits 17-22
  const u32 m = ((idesc >> 24) & 0x1F) << 4;   // bits 24-28
  const u32 reserved = idesc & ((1u << 6) | (1u << 23) | (1u << 29) | (3u << 30));
  const bool ok = sparse_sat == 0 && d_fmt == 1 && a_fmt <= 1 && a_fmt == b_fmt && negate == 0 &&
                  major == 0 && m == 128 * cta_group && n >= 16 && n <= 256 && n % 16 == 0 && reserved == 0;
  if (!ok) fail(WB_EMU_ERR_IDESC_UNSUPPORTED, idesc, 0);
  return Idesc{m, n, a_fmt == 1};
}

// Decoded shared-memory descriptor: only the K-major 128-byte-swizzle form.
struct Sdesc {
  u32 start;  // byte address in shared::cta
  u32 sbo;    // bytes between 8-row groups
};

__device__ __forceinline__ Sdesc decode_sdesc(u64 desc) {
  const u32 start = static_cast<u32>(desc & 0x3FFF) << 4;      // bits 0-13
  const u32 sbo = static_cast<u32>((desc >> 32) & 0x3FFF) << 4; // bits 32-45
  const u32 version = static_cast<u32>((desc >> 46) & 0x7);     // bits 46-48
  const u32 base_offset = static_cast<u32>((desc >> 49) & 0x7); // bits 49-51
  const u32 lbo_mode = static_cast<u32>((desc >> 52) & 0x1);    // bit 52
  const u32 fixed_zero = static_cast<u32>((desc >> 53) & 0xFF); // bits 53-60
  const u32 swizzle = static_cast<u32>((desc >> 61) & 0x7);     // bits 61-63
  const u64 gaps = desc & ((3ull << 14) | (3ull << 30));
  const bool ok = version == 1 && base_offset == 0 && lbo_mode == 0 && fixed_zero == 0 &&
                  swizzle == 2 && gaps == 0 && sbo != 0;
  if (!ok) fail(WB_EMU_ERR_SDESC_UNSUPPORTED, desc, 0);
  return Sdesc{start, sbo};
}

// 16 bytes at shared::cta address `addr` of the CTA with cluster rank `rank` (possibly this one).
__device__ __forceinline__ uint4 ld_shared_v4(u32 addr, u32 rank) {
  uint4 v;
  u32 cluster_addr;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(cluster_addr) : "r"(addr), "r"(rank));
  asm volatile("ld.shared::cluster.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(cluster_addr));
  return v;
}

__device__ __forceinline__ void unpack8(uint4 v, bool bf16, float* out) {
  const u32 w[4] = {v.x, v.y, v.z, v.w};
  for (int i = 0; i < 4; ++i) {
    const unsigned short lo = static_cast<unsigned short>(w[i] & 0xFFFF);
    const unsigned short hi = static_cast<unsigned short>(w[i] >> 16);
    if (bf16) {
      out[2 * i] = __bfloat162float(__ushort_as_bfloat16(lo));
      out[2 * i + 1] = __bfloat162float(__ushort_as_bfloat16(hi));
    } else {
      out[2 * i] = __half2float(__ushort_as_half(lo));
      out[2 * i + 1] = __half2float(__ushort_as_half(hi));
    }
  }
}

// Row `r` (of M or N) of a K-major, 128B-swizzled operand, K = 16 elements (32 bytes) starting
// at the descriptor's start address. The swizzle is a function of the address: bits [4,7)
// (the 16-byte chunk) are XORed with bits [7,10) (the row within an 8-row, 1024-byte group),
// which is how TMA laid the tile down.
__device__ __forceinline__ void read_k16(const Sdesc& d, u32 r, bool bf16, float* out, u32 rank) {
  const u32 row_addr = d.start + (r / 8) * d.sbo + (r % 8) * 128;
  u32 smem_total;
  asm("mov.u32 %0, %%total_smem_size;" : "=r"(smem_total));
  if ((row_addr | 127) >= smem_total)  // the whole 128-byte swizzle row must be inside
    fail(WB_EMU_ERR_SMEM_OUT_OF_RANGE, (static_cast<u64>(d.sbo) << 32) | d.start,
         (static_cast<u64>(r) << 32) | smem_total);
  for (u32 c = 0; c < 2; ++c) {
    const u32 logical = row_addr + c * 16;
    const u32 physical = logical ^ (((logical >> 7) & 7) << 4);
    unpack8(ld_shared_v4(physical, rank), bf16, out + 8 * c);
  }
}

// Run one queued MMA with the whole warp: lane l owns rows l, l+32, ... so each tensor-memory
// column is written by 32 consecutive addresses. cta_group::1: this CTA's A, B and D.
// cta_group::2 (issued by the leader, rank 0): for each CTA c of the pair, D_c = A_c * B^T, where
// B's first N/2 rows live in the leader's shared memory and the rest in the peer's, all at the
// descriptor's offsets.
__device__ __forceinline__ void execute(const PendingMma& op) {
  const Idesc id = decode_idesc(op.idesc, op.cta_group);
  const Sdesc a = decode_sdesc(op.a_desc);
  const Sdesc b = decode_sdesc(op.b_desc);
  const u32 col0 = op.d_tmem & 0xFFFF;
  const u32 lane = threadIdx.x % 32;
  const u32 self = cta_rank();
  for (u32 c = 0; c < op.cta_group; ++c) {
    const u32 d_rank = op.cta_group == 1 ? self : c;
    float* cells = tmem_cells_of(d_rank);
    float a_rows[4][16];
    for (int i = 0; i < 4; ++i) read_k16(a, lane + 32 * i, id.bf16, a_rows[i], d_rank);
    const u32 n_per_cta = id.n / op.cta_group;
    for (u32 n = 0; n < id.n; ++n) {
      float b_row[16];
      const u32 b_rank = op.cta_group == 1 ? self : n / n_per_cta;
      read_k16(b, n % n_per_cta, id.bf16, b_row, b_rank);
      for (int i = 0; i < 4; ++i) {
        float dot = 0.f;
        for (int k = 0; k < 16; ++k) dot = fmaf(a_rows[i][k], b_row[k], dot);
        float* cell = cells + static_cast<size_t>(col0 + n) * LANES + lane + 32 * i;
        *cell = op.accumulate ? *cell + dot : dot;
      }
    }
  }
}

}  // namespace emu

// ---- tensor memory ------------------------------------------------------------------------

// Emulates tcgen05.alloc.cta_group::1 (PTX ISA "tcgen05.alloc").
__device__ __forceinline__ void tmem_alloc(u32* dst, u32 ncols) {
  emu::require_full_warp(1);
  emu::CtaState* st = emu::state();
  if (bw::lane_id() == 0) {
    if (ncols < 32 || ncols > 512 || (ncols & (ncols - 1)) != 0)
      emu::fail(WB_EMU_ERR_ALLOC_NCOLS, ncols, 0);
    if (st->relinquished) emu::fail(WB_EMU_ERR_ALLOC_AFTER_RELINQUISH, ncols, 0);
    const u32 granules = ncols / emu::GRANULE;
    const u32 mask = granules >= 32 ? 0xffffffffu : (1u << granules) - 1u;
    u32 start = 0xffffffffu;
    for (u32 g = 0; g + granules <= emu::COLS / emu::GRANULE; g += granules) {
      if ((st->alloc_mask & (mask << g)) == 0) {
        start = g;
        break;
      }
    }
    if (start == 0xffffffffu) emu::fail(WB_EMU_ERR_ALLOC_FULL, ncols, st->alloc_mask);
    st->alloc_mask |= mask << start;
    *dst = start * emu::GRANULE;  // lane 0, column start * 32
  }
  __syncwarp();
}

// Emulates tcgen05.relinquish_alloc_permit.
__device__ __forceinline__ void tmem_relinquish_alloc_permit() {
  emu::require_full_warp(2);
  if (bw::lane_id() == 0) emu::state()->relinquished = 1;
  __syncwarp();
}

// Emulates tcgen05.dealloc.
__device__ __forceinline__ void tmem_dealloc(u32 taddr, u32 ncols) {
  emu::require_full_warp(3);
  emu::CtaState* st = emu::state();
  if (bw::lane_id() == 0) {
    const u32 col = taddr & 0xFFFF;
    if ((taddr >> 16) != 0 || col + ncols > emu::COLS ||
        (st->alloc_mask & emu::granule_mask(col, ncols)) != emu::granule_mask(col, ncols))
      emu::fail(WB_EMU_ERR_DEALLOC_UNALLOCATED, taddr, ncols);
    if (st->num_pending != 0) emu::fail(WB_EMU_ERR_DEALLOC_PENDING, st->num_pending, 0);
    st->alloc_mask &= ~emu::granule_mask(col, ncols);
  }
  __syncwarp();
}

// Emulates the cta_group::2 forms: each CTA of the pair runs them, so each allocates (frees)
// the same columns in its own tensor memory, exactly as the paired hardware instruction does.
__device__ __forceinline__ void tmem_alloc_2cta(u32* dst, u32 ncols) { tmem_alloc(dst, ncols); }
__device__ __forceinline__ void tmem_relinquish_alloc_permit_2cta() { tmem_relinquish_alloc_permit(); }
__device__ __forceinline__ void tmem_dealloc_2cta(u32 taddr, u32 ncols) { tmem_dealloc(taddr, ncols); }

// Emulates cp.async.bulk.tensor.2d...cta_group::2 with sm_90 TMA: the leader copies with its own
// barrier; the peer copies into its own shared memory on its own copy of the barrier (which
// must therefore be initialised with one arrival and otherwise unused in the peer), waits for
// it, and forwards the bytes to the leader's barrier with a remote mbarrier.complete_tx.
__device__ __forceinline__ void tma_load_2d_2cta(void* dst, const TmaDesc* desc, u64* bar,
                                                 u32 bytes, int c0, int c1) {
  if (emu::cta_rank() % 2 == 0) {
    tma_load_2d(dst, desc, bar, c0, c1);
    return;
  }
  if (elect_one()) {
    const u32 local_bar = smem_u32(bar);
    u64 token;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;"
                 : "=l"(token)
                 : "r"(local_bar), "r"(bytes)
                 : "memory");
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_u32(dst)),
        "l"(desc), "r"(local_bar), "r"(c0), "r"(c1)
        : "memory");
    u32 done = 0;
    while (!done) {
      asm volatile(
          "{\n\t.reg .pred p;\n\t"
          "mbarrier.try_wait.shared::cta.b64 p, [%1], %2;\n\t"
          "selp.u32 %0, 1, 0, p;\n\t}"
          : "=r"(done)
          : "r"(local_bar), "l"(token)
          : "memory");
    }
    asm volatile("fence.acq_rel.cluster;" ::: "memory");
    asm volatile("mbarrier.complete_tx.relaxed.cluster.shared::cluster.b64 [%0], %1;" ::"r"(
                     map_to_cta(local_bar, emu::cta_rank() & ~1u)),
                 "r"(bytes)
                 : "memory");
  }
  __syncwarp();
}

// ---- MMA and commit ---------------------------------------------------------------------------

namespace emu {

// Validate an MMA now and queue it; the math runs at the commit.
__device__ __forceinline__ void queue_mma(u32 d_tmem, u64 a_desc, u64 b_desc, u32 idesc,
                                          bool accumulate, u32 cta_group) {
  CtaState* st = state();
  if (elect_one()) {
    if (cta_group == 2 && cta_rank() % 2 != 0) fail(WB_EMU_ERR_NOT_LEADER, cta_rank(), 0);
    const Idesc id = decode_idesc(idesc, cta_group);
    decode_sdesc(a_desc);
    decode_sdesc(b_desc);
    if ((d_tmem >> 16) != 0) fail(WB_EMU_ERR_TMEM_UNALLOCATED, d_tmem, id.n);
    for (u32 c = 0; c < cta_group; ++c)
      require_allocated(cta_group == 1 ? st : state_of(c), d_tmem & 0xFFFF, id.n);
    if (st->num_pending >= MAX_PENDING) fail(WB_EMU_ERR_QUEUE_FULL, st->num_pending, 0);
    st->pending[st->num_pending] =
        PendingMma{a_desc, b_desc, d_tmem, idesc, static_cast<u32>(accumulate), cta_group};
    st->num_pending += 1;
  }
  __syncwarp();
}

// Run every queued MMA, make the results visible cluster-wide, then arrive once on the barrier
// at `bar`'s offset in each CTA of `cta_mask` (bit r: rank r).
__device__ __forceinline__ void commit(u64* bar, u32 cta_group, u32 cta_mask) {
  require_full_warp(4);
  CtaState* st = state();
  __syncwarp();
  // The peer's TMA data reached this CTA through its barrier at cluster scope.
  asm volatile("fence.acq_rel.cluster;" ::: "memory");
  const u32 count = st->num_pending;
  for (u32 i = 0; i < count; ++i) {
    if (st->pending[i].cta_group != cta_group)
      fail(WB_EMU_ERR_MIXED_CTA_GROUP, st->pending[i].cta_group, cta_group);
    execute(st->pending[i]);
  }
  __threadfence();
  __syncwarp();
  if (bw::lane_id() == 0) {
    st->num_pending = 0;
    for (u32 r = 0; r < 16; ++r) {
      if ((cta_mask >> r) & 1) {
        asm volatile(
            "{\n\t.reg .b32 remote;\n\t"
            "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
            "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n\t}" ::"r"(
                smem_u32(bar)),
            "r"(r)
            : "memory");
      }
    }
  }
  __syncwarp();
}

}  // namespace emu

// Emulates tcgen05.mma.cta_group::1.kind::f16: validate now, compute at commit.
__device__ __forceinline__ void mma_f16(u32 d_tmem, u64 a_desc, u64 b_desc, u32 idesc,
                                        bool accumulate) {
  emu::queue_mma(d_tmem, a_desc, b_desc, idesc, accumulate, 1);
}

// Emulates tcgen05.mma.cta_group::2.kind::f16 (leader only).
__device__ __forceinline__ void mma_f16_2cta(u32 d_tmem, u64 a_desc, u64 b_desc, u32 idesc,
                                             bool accumulate) {
  emu::queue_mma(d_tmem, a_desc, b_desc, idesc, accumulate, 2);
}

// Emulates tcgen05.commit.cta_group::1.mbarrier::arrive::one: run every queued MMA, make the
// results visible, then arrive once on `bar`.
__device__ __forceinline__ void mma_commit(u64* bar) { emu::commit(bar, 1, 1u << emu::cta_rank()); }

// Emulates tcgen05.commit.cta_group::2...multicast::cluster.
__device__ __forceinline__ void mma_commit_2cta_multicast(u64* bar, unsigned short cta_mask) {
  emu::commit(bar, 2, cta_mask);
}

// ---- tensor memory -> registers -------------------------------------------------------------

// Emulates tcgen05.ld.sync.aligned.32x32b.x32.b32, including the lane-quarter rule.
__device__ __forceinline__ void tmem_ld_32x32b_x32(u32 taddr, u32 (&r)[32]) {
  emu::require_full_warp(5);
  const u32 quarter = 32 * (bw::warp_id() % 4);
  const u32 col = taddr & 0xFFFF;
  if ((taddr >> 16) != quarter) emu::fail(WB_EMU_ERR_LD_WRONG_LANES, taddr, quarter);
  emu::require_allocated(emu::state(), col, 32);
  const float* cells = emu::tmem_cells() + quarter + bw::lane_id();
  for (int j = 0; j < 32; ++j) r[j] = __float_as_uint(cells[static_cast<size_t>(col + j) * emu::LANES]);
}

// Emulates tcgen05.wait::ld: the emulated loads are synchronous already.
__device__ __forceinline__ void tmem_wait_ld() { __syncwarp(); }

// Emulates tcgen05.fence::{before,after}_thread_sync: tensor memory is global memory here.
__device__ __forceinline__ void tcgen05_fence_before_thread_sync() { __threadfence(); }
__device__ __forceinline__ void tcgen05_fence_after_thread_sync() { __threadfence(); }

}  // namespace bw
