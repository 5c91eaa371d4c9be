// tcgen05_emu.cuh: the tcgen05 primitives of blackwell.cuh, emulated for sm_90 (Hopper), with an
// ordering sanitizer.
//
// Included by blackwell.cuh when WB_EMULATE_TCGEN05 is defined. Step kernels compile unchanged:
// every function here has the signature and the PTX semantics of its native twin. TMA, mbarrier,
// clusters and distributed shared memory stay native; only tcgen05 is replaced:
//   - tensor memory: 128 lanes x 512 columns of 32-bit cells per CTA, in global memory the host
//     allocates (and poisons with NaN) for each launch; cell (lane, col) at [col * 128 + lane];
//   - tcgen05.mma is asynchronous, as on the hardware: it is validated and queued at issue, its
//     columns are "in flight" from then on, and it runs (reading its shared-memory operands then)
//     when the issuing thread's tcgen05.commit fires, after a seeded delay, just before the
//     commit's arrivals (multicast in a seeded order);
//   - tcgen05.ld is asynchronous: its registers hold a NaN poison until tcgen05.wait::ld fills
//     them (the workbook's convention: the wait comes before any use of the registers);
//   - a TMA store (cp.async.bulk.tensor shared -> global) reads its source until a
//     cp.async.bulk.wait_group.read covers its bulk group, and reads only what a
//     fence.proxy.async made visible to the async proxy (the hooks of common.cuh's TMA-store,
//     bulk-group and proxy-fence wrappers);
//   - every mbarrier wait runs a watchdog that, when the wait outlasts a limit, writes a record
//     the host prints if it gives up on the kernel: who waits on which barrier, and what it lacks.
// The sanitizer enforces the PTX ISA's tcgen05 memory-consistency rules (PTX ISA "Memory
// Consistency Model for 5th generation of TensorCore operations": "Pipelined tcgen05
// Instructions", "Specialized Inter-thread Synchronization", "Canonical synchronization
// patterns") deterministically, whatever the timing: after a thread synchronisation, tcgen05 work
// needs tcgen05.fence::after_thread_sync; a tcgen05.ld reads only results whose completion its
// warp observed (commit -> mbarrier wait); tensor memory read by tcgen05.ld is handed over only
// after tcgen05.wait::ld + tcgen05.fence::before_thread_sync; an MMA overwrites columns only once
// their readers handed them over and it observed that; an MMA reads only shared memory a TMA load
// wrote and its warp saw complete; a TMA does not overwrite operands of an MMA still in flight; a
// CTA frees its tensor memory (and exits) only after waiting for every tcgen05.commit another CTA
// aimed at it; all tcgen05 operations of a CTA use one cta_group; a TMA store's staging writes are
// proxy-fenced, and its buffer is not rewritten (nor the CTA ended) before wait_group.read. To do so common.cuh's mbarrier, barrier and TMA wrappers call the hooks at the end
// of this file, which keep per-warp and per-CTA state in the global buffer the host sizes.
//
// Every violation, and every encoding the workbook does not use, traps after writing what went
// wrong to host-mapped memory (wb_emu_fault) so the host can name the CTA, warp and rule after the
// context dies. This is a correctness tool. Its timings mean nothing.
#pragma once

// Failure codes, mirrored by common::emulation::Fault::describe on the host.
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
// The ordering sanitizer.
#define WB_EMU_ERR_NO_FENCE_AFTER_SYNC 16   // tcgen05.mma/ld after a sync, no fence::after_thread_sync
#define WB_EMU_ERR_LD_NOT_WAITED 17         // hand-off with a tcgen05.ld not yet waited for
#define WB_EMU_ERR_LD_NO_FENCE_BEFORE 18    // hand-off after tcgen05.ld without fence::before_thread_sync
#define WB_EMU_ERR_LD_IN_FLIGHT 19          // tcgen05.ld of columns an issued MMA is still writing
#define WB_EMU_ERR_LD_NOT_OBSERVED 20       // tcgen05.ld of MMA results whose commit the warp never saw
#define WB_EMU_ERR_MMA_UNRELEASED 21        // MMA overwrites columns a warp read and did not hand over
#define WB_EMU_ERR_MMA_RELEASE_UNSEEN 22    // ... handed over on a barrier phase the MMA warp never saw
#define WB_EMU_ERR_OPERAND_NOT_LOADED 23    // MMA operand not from a TMA load its warp saw complete
#define WB_EMU_ERR_TMA_OVER_OPERAND 24      // TMA load into an operand of an MMA still in flight
#define WB_EMU_ERR_SDESC_BASE_OFFSET 25     // operand start needs a non-zero descriptor base offset
#define WB_EMU_ERR_EXIT_WITH_ARRIVALS 26    // tensor memory freed before awaited commits from peers
#define WB_EMU_ERR_TABLE_FULL 27            // more barriers / TMA destinations / warps / stores than modelled
// The async proxy, bulk groups and cta_group.
#define WB_EMU_ERR_CTA_GROUP_MISMATCH 28    // alloc/relinquish/MMA/commit/dealloc of different cta_groups
#define WB_EMU_ERR_NO_PROXY_FENCE 29        // TMA store of generic-proxy writes not fenced for the async proxy
#define WB_EMU_ERR_STORE_SOURCE_BUSY 30     // a buffer rewritten while an earlier bulk store still reads it
#define WB_EMU_ERR_EXIT_WITH_BULK_READS 31  // tensor memory freed (the CTA ends) while bulk stores read smem
#define WB_EMU_ERR_LD_BEFORE_ACC 32         // MMA overwrites columns a warp read before any MMA wrote them

namespace bw {
namespace emu {

constexpr u32 LANES = 128;
constexpr u32 COLS = 512;
constexpr u32 GRANULE = 32;              // allocation unit, in columns
constexpr u32 GRANULES = COLS / GRANULE;
constexpr u32 MAX_PENDING = 32;          // queued MMAs per warp
constexpr u32 MAX_WARPS = 16;            // warps per CTA the sanitizer tracks
constexpr u32 MAX_BARRIERS = 32;         // mbarriers per CTA
constexpr u32 MAX_TMA = 32;              // distinct TMA destinations per CTA
constexpr u32 MAX_BULK = 8;              // TMA stores per warp not yet covered by a wait_group.read
constexpr u32 LD_SLOTS = 4;              // tcgen05.ld per warp whose registers still hold poison
constexpr u32 HANG_RECORDS = 64;         // waiting warps a hang report can name
constexpr u32 LD_POISON = 0xFFFFFFF0u;   // a NaN in f32 (and in both halves as f16/bf16)

// WB_EMU_STRICT=0 (`runner step N --emulate --time-emulation` builds it beside the default, to
// measure what they cost) turns off the rules of issue 23: the async proxy and bulk groups (the
// proxy-fence-before-store, wait-read-before-reuse and wait-read-before-exit rules), tcgen05.ld's
// poison (the load fills its registers at once, as before), and cta_group consistency. What is
// left is the emulation and sanitizer as they were before those rules.
#ifndef WB_EMU_STRICT
#define WB_EMU_STRICT 1
#endif
constexpr bool STRICT = WB_EMU_STRICT != 0;

// What the wrappers report in `detail0` of a fault, where an op or a hand-off is named.
enum Op : u32 { OP_ALLOC = 1, OP_RELINQUISH, OP_DEALLOC, OP_COMMIT, OP_LD, OP_MMA, OP_WAIT_LD };
// What a warp has done, for naming its role in a hang report (WarpState::roles).
enum Role : u32 { ROLE_TMA_LOAD = 1, ROLE_MMA = 2, ROLE_TMEM_LD = 4, ROLE_TMA_STORE = 8 };
// The kinds of arrival a barrier shadow remembers as its last (BarShadow::last_kind).
enum ArriveKind : u32 { ARRIVE_PLAIN = 1, ARRIVE_EXPECT_TX, ARRIVE_COMMIT };
enum Handoff : u32 { HANDOFF_ARRIVE = 1, HANDOFF_CTA_BARRIER, HANDOFF_CLUSTER_BARRIER, HANDOFF_DEALLOC };

struct PendingMma {
  u64 a_desc;
  u64 b_desc;
  u32 d_tmem;
  u32 idesc;
  u32 accumulate;
  u32 cta_group;  // 1, or 2 for an MMA over the CTA pair
  u32 lane;       // the issuing thread: a commit tracks only its own thread's MMAs
  u32 seq;        // the issuing warp's MMA count after this one
};

// An mbarrier initialised with wb::mbarrier_init, and what the emulator saw arrive on it. Phases
// are stored as phase + 2 so that 0 means "none" (phases -2 and -1 are the virtual ones a fresh
// barrier reports as complete to parity waits).
struct BarShadow {
  u32 addr1;                // smem_key of its address + 1; 0: unused
  u32 count;                // arrivals per phase
  u32 arrivals;             // arrivals so far, all phases (TMA bytes are not arrivals)
  u32 remote_commit_phase;  // latest phase a tcgen05.commit of another CTA arrived in (+2)
  u32 rec_phase[2];         // per parity: the phase of the last commit arrival (+2)...
  u32 rec_seq[2];           // ...the committing warp's MMA count at that commit...
  u32 rec_warp[2];          // ...and that warp
  // For hang reports: where the kernel names it, and the last arrival on it.
  u32 name_lo, name_hi;     // generic address of the kernel's expression for it (a string)...
  u32 ordinal;              // ...and how many barriers that expression named before it (an index)
  u32 tx_phase;             // the phase (+2) of the arrive.expect_tx calls summed in tx_bytes
  u32 tx_bytes;
  u32 last_kind;            // ArriveKind; 0: no arrival yet
  u32 last_rank;            // the arriving CTA (cluster rank)...
  u32 last_warp;            // ...and warp
  u32 last_phase;           // the phase (+2) it arrived in
};

// The last TMA load into one shared-memory destination of this CTA.
struct TmaEntry {
  u32 dst1;       // smem_key of the destination + 1; 0: unused
  u32 bytes;      // box size, 0 when the wrapper does not know it
  u32 bar_addr;   // the barrier its bytes complete on (smem_key)...
  u32 bar_rank;   // ...in this CTA of the cluster
  u32 observers;  // bit (rank % 2) * 16 + warp: that warp waited on the barrier since
  u32 pad;
};

// Who read one lane quarter of a 32-column granule of tensor memory since the last MMA wrote it.
enum ReaderState : u32 { READER_NONE = 0, READER_READ = 1, READER_RELEASED = 2 };
struct Reader {
  u32 state;
  u32 warp;       // the reading warp
  u32 rel_rank;   // handed over by an arrival on barrier rel_idx of CTA rel_rank...
  u32 rel_idx;
  u32 rel_phase;  // ...in this phase (+2)
  // 1: the read came before any MMA had written the granule, so the reader did not wait for the
  // accumulator (skip-acc-wait). It only renames the fault an overwrite raises (ld-after-commit-
  // wait, as the simulator names it, instead of release-before-overwrite); `state` and the
  // hand-over bookkeeping are the same either way.
  u32 early;
};

struct Granule {
  u32 inflight;     // issued MMAs writing it whose commit has not fired
  u32 writer_warp;  // the last MMA writing it: its warp (in the MMA-issuing CTA)...
  u32 writer_seq;   // ...and sequence number (0: never written)
  u32 pad;
  Reader reader[4];
};

struct WarpState {
  u32 need_fence;   // synchronised since the last tcgen05.fence::after_thread_sync
  u32 sync_kind;    // the last synchronisation (wb::emu_hook::SyncKind)...
  u32 sync_bar;     // ...and its barrier, for messages
  u32 pending_ld;   // a tcgen05.ld not yet waited for (tcgen05.wait::ld)
  u32 ld_unfenced;  // a tcgen05.ld since the last tcgen05.fence::before_thread_sync
  u32 mma_seq;      // MMAs this warp issued
  u32 num_pending;  // MMAs in `queue` (issued, their commit not yet fired)
  u32 events;       // commits and TMA loads so far: the schedule perturbation's counter
  u32 roles;        // Role bits: what this warp has done
  u32 next_tx;      // bytes the next arrival announces (expect_tx hook -> arrive hook)
  u32 hang_slot1;   // the hang record this warp's current wait holds (+1; 0: none)
  // The async proxy (lane 0 issues the warp's TMA stores and owns its bulk groups).
  u32 proxy_fenced; // fence.proxy.async since the warp last made shared memory writable again
  u32 bulk_groups;  // cp.async.bulk.commit_group count
  u32 bulk_src1[MAX_BULK];   // stores whose source is still read: smem_key + 1 (0: free)...
  u32 bulk_group[MAX_BULK];  // ...and the bulk group each belongs to (bulk_groups at issue)
  // tcgen05.ld results not yet waited for: the registers hold LD_POISON | slot until
  // tcgen05.wait::ld fills them from these columns.
  u32 ld_seq;
  u32 ld_col[LD_SLOTS];
  u32 obs_phase[MAX_BARRIERS];  // per barrier of this CTA: latest phase this warp waited for (+2)
  u32 seen[MAX_WARPS];          // per MMA-issuing warp: its MMAs this warp saw complete
  PendingMma queue[MAX_PENDING];
};

// Per-CTA bookkeeping; the host zeroes it before each launch and checks alloc_mask == 0 after.
struct CtaState {
  u32 alloc_mask;  // bit g set: columns [32g, 32g + 32) are allocated (first: the host reads it)
  u32 relinquished;
  u32 num_bars;
  u32 cta_group;   // the first tcgen05 op's cta_group (1 or 2) | its Op << 8; 0: none yet
  BarShadow bars[MAX_BARRIERS];
  TmaEntry tma[MAX_TMA];
  Granule gran[GRANULES];
  WarpState warps[MAX_WARPS];
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

// A warp whose mbarrier wait has not succeeded for the watchdog's limit (wb_emu_params[1] ns):
// written to host-mapped memory, refreshed while it waits and cleared when the wait succeeds,
// so that a host that gives up on the kernel can say who waits on what. Mirrored by
// common::emulation::HangRecord.
struct HangRecord {
  u32 active;       // 1 while the warp still waits
  u32 cta;
  u32 warp;
  u32 roles;        // Role bits of the warp
  u32 bar;          // the barrier's shared-memory offset (smem_key)
  u32 parity;       // the parity the warp waits for
  u32 count;        // arrivals per phase (0: the emulator never saw it initialised)
  u32 arrivals;     // arrivals the emulator counted, all phases
  u32 now_parity;   // the parity of the barrier's current (incomplete) phase, from the barrier
  u32 tx_phase;     // BarShadow's tx_phase, tx_bytes, last_*
  u32 tx_bytes;
  u32 last_kind;
  u32 last_rank;
  u32 last_warp;
  u32 last_phase;
  u32 ordinal;
  u64 waited_ns;    // how long it has waited so far
  char name[48];    // the kernel's expression for the barrier, truncated; empty if unknown
};

}  // namespace emu
}  // namespace bw

// Set by the host (cuModuleGetGlobal) before each launch; wb_emu_cta_state_bytes is read by it.
extern "C" {
__device__ float* wb_emu_tmem;
__device__ bw::emu::CtaState* wb_emu_state;
__device__ u32 wb_emu_num_ctas;
__device__ bw::emu::Fault* wb_emu_fault;
// [0]: the seed of the schedule perturbation (--emu-seed); [1]: the watchdog's limit in ns (0: 1 s);
// [2]: hang records handed out so far.
__device__ u64* wb_emu_params;
__device__ bw::emu::HangRecord* wb_emu_hang;  // HANG_RECORDS records, host-mapped
__device__ u32 wb_emu_cta_state_bytes = sizeof(bw::emu::CtaState);
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

// State shared between warps and CTAs (on other SMs) is read and written through volatile
// accesses, which go to L2, with __threadfence() where an order matters.
__device__ __forceinline__ u32 vld(const u32* p) { return *reinterpret_cast<const volatile u32*>(p); }
__device__ __forceinline__ void vst(u32* p, u32 v) { *reinterpret_cast<volatile u32*>(p) = v; }

__device__ __forceinline__ u32 cta_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

__device__ __forceinline__ u32 cluster_size() {
  u32 n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  return n;
}

// Linear block index of the CTA with cluster rank `rank` in this CTA's cluster (common.cuh).
using wb::cta_linear_of_rank;

__device__ __forceinline__ CtaState* state_of(u32 rank) {
  const u32 cta = cta_linear_of_rank(rank);
  if (cta >= wb_emu_num_ctas) fail(WB_EMU_ERR_CTA_INDEX, cta, wb_emu_num_ctas);
  return wb_emu_state + cta;
}

__device__ __forceinline__ CtaState* state() { return state_of(cta_rank()); }

__device__ __forceinline__ WarpState* warp_state(CtaState* st) {
  const u32 w = bw::warp_id();
  if (w >= MAX_WARPS) fail(WB_EMU_ERR_TABLE_FULL, 3, w);
  return &st->warps[w];
}

__device__ __forceinline__ float* tmem_cells_of(u32 rank) {
  return wb_emu_tmem + static_cast<size_t>(cta_linear_of_rank(rank)) * LANES * COLS;
}

__device__ __forceinline__ float* tmem_cells() { return tmem_cells_of(cta_rank()); }

// The native .sync.aligned instruction makes each lane wait for the whole warp (PTX ISA
// "tcgen05.alloc": .sync), so lanes still finishing a divergent branch (thread 0 initialising the
// barriers, say) are waited for first. __activemask() cannot tell a late lane from a missing one
// under independent thread scheduling (the GPU check saw both false faults: lane 0 alone, and
// lanes 1-31 without it), so the emulation only waits: a lane that never comes leaves the warp
// waiting here, a hang the runner reports, as natively. `what` names the operation for readers.
__device__ __forceinline__ void require_full_warp(u32 what) {
  (void)what;
  __syncwarp();
}

__device__ __forceinline__ bool lowest_active_lane() {
  return static_cast<u32>(__ffs(__activemask()) - 1) == bw::lane_id();
}

// The lane elect.sync picks in a full warp: the thread that issues an MMA or a commit.
__device__ __forceinline__ u32 elected_lane() {
  return static_cast<u32>(__ffs(__ballot_sync(0xffffffffu, elect_one())) - 1);
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

// PTX ISA "tcgen05" (Issue Granularity): "All tcgen05 instructions within a kernel must specify
// the same value for the .cta_group qualifier"; ptxas refuses a kernel that mixes them for
// sm_100a. The CTA's first tcgen05 operation sets it; any other must match.
__device__ __forceinline__ void require_cta_group(CtaState* st, u32 group, u32 op) {
  if (!STRICT) return;
  const u32 mine = group | (op << 8);
  const u32 first = atomicCAS(&st->cta_group, 0u, mine);
  if (first != 0 && (first & 0xFF) != group) fail(WB_EMU_ERR_CTA_GROUP_MISMATCH, mine, first);
}

// ---- the schedule perturbation ----------------------------------------------------------------

// splitmix64 of (seed, CTA, warp, event): the same seed gives the same schedule decisions.
__device__ __forceinline__ u64 perturbation(u32 warp, u32 event) {
  u64 z = wb_emu_params[0] + 0x9E3779B97F4A7C15ull * (1 + ((u64)cta_linear() << 40) +
                                                      ((u64)warp << 32) + event);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__device__ __forceinline__ void spin(u64 cycles) {
  const long long t0 = clock64();
  while (static_cast<u64>(clock64() - t0) < cycles) {
  }
}

// ---- mbarrier shadows -------------------------------------------------------------------------

// The bookkeeping names a shared-memory location by its offset in the CTA's window, the same in
// every CTA, because the CTAs of a cluster see their own variables at different shared::cta
// addresses: the CTA's rank is in the high bits (on an H200, `smem.load_empty[0]` is 0x28400 in
// rank 0 and 0x1028400 in rank 1). Keying tables by raw addresses made every lookup one CTA does in
// another's tables miss. The low 18 bits are what a shared-memory descriptor's 14-bit start
// address field holds (PTX ISA "Shared Memory Descriptor": bits 0-13 are address bits 4-17), and
// one descriptor names the same operand in both CTAs of a cta_group::2 MMA, so they are the offset.
constexpr u32 SMEM_KEY_MASK = (1u << 18) - 1;
__device__ __forceinline__ u32 smem_key(u32 addr) { return addr & SMEM_KEY_MASK; }

// The barrier at `addr` (an address of any CTA of the cluster, or its key) in `st`'s table; -1 if
// it was never initialised there.
__device__ __forceinline__ int bar_index(CtaState* st, u32 addr) {
  const u32 key1 = smem_key(addr) + 1;
  const u32 n = min(vld(&st->num_bars), MAX_BARRIERS);
  for (u32 i = 0; i < n; ++i)
    if (vld(&st->bars[i].addr1) == key1) return static_cast<int>(i);
  return -1;
}

// One arrival on barrier `idx` of `st`; returns its phase + 2.
__device__ __forceinline__ u32 count_arrival(CtaState* st, int idx) {
  BarShadow& b = st->bars[idx];
  const u32 a = atomicAdd(&b.arrivals, 1u);
  return a / max(vld(&b.count), 1u) + 2;
}

// For hang reports: the last arrival on barrier `b` (of kind `kind`, by warp `warp` of this CTA,
// in phase `phase` + 2) and the transaction bytes announced in that phase.
__device__ __forceinline__ void record_arrival(BarShadow& b, u32 kind, u32 warp, u32 phase, u32 tx) {
  if (tx != 0) {
    if (vld(&b.tx_phase) != phase) {
      vst(&b.tx_phase, phase);
      vst(&b.tx_bytes, 0);
    }
    atomicAdd(&b.tx_bytes, tx);
  }
  vst(&b.last_kind, kind);
  vst(&b.last_rank, cta_rank());
  vst(&b.last_warp, warp);
  vst(&b.last_phase, phase);
}

// ---- decoded descriptors ----------------------------------------------------------------------

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
  // PTX ISA "Shared Memory Descriptor", base offset: a swizzled operand whose start address is not
  // aligned to the pattern's repeat (1024 B for the 128-byte swizzle; moving K inside the first
  // 128-byte row keeps address bits 7-9) needs base offset = (start >> 7) & 7. Base offset 0 then
  // describes another layout than the one TMA wrote.
  if (((start >> 7) & 7) != 0) fail(WB_EMU_ERR_SDESC_BASE_OFFSET, desc, start);
  return Sdesc{start, sbo};
}

// Bytes [lo, hi) of an operand of `rows` rows an MMA may read: 8-row groups of 1024 B, `sbo`
// apart, from the 1024-B-aligned base of its start address.
__device__ __forceinline__ u32 operand_lo(const Sdesc& d) { return d.start & ~127u; }
__device__ __forceinline__ u32 operand_hi(const Sdesc& d, u32 rows) {
  return operand_lo(d) + (rows / 8 - 1) * d.sbo + 1024;
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

// The CTA whose tensor memory and shared memory the `c`-th half of an MMA uses.
__device__ __forceinline__ u32 mma_cta(u32 cta_group, u32 c) {
  return cta_group == 1 ? cta_rank() : pair_leader(cta_rank()) + c;
}

// Run one queued MMA with the whole warp: lane l owns rows l, l+32, ... so each tensor-memory
// column is written by 32 consecutive addresses. cta_group::1: this CTA's A, B and D.
// cta_group::2 (issued by the leader): for each CTA c of the pair, D_c = A_c * B^T, where
// B's first N/2 rows live in the leader's shared memory and the rest in the peer's, all at the
// descriptor's offsets.
__device__ __forceinline__ void execute(const PendingMma& op) {
  const Idesc id = decode_idesc(op.idesc, op.cta_group);
  const Sdesc a = decode_sdesc(op.a_desc);
  const Sdesc b = decode_sdesc(op.b_desc);
  const u32 col0 = tmem_col(op.d_tmem);
  const u32 lane = threadIdx.x % 32;
  for (u32 c = 0; c < op.cta_group; ++c) {
    const u32 d_rank = mma_cta(op.cta_group, c);
    float* cells = tmem_cells_of(d_rank);
    float a_rows[4][16];
    for (int i = 0; i < 4; ++i) read_k16(a, lane + 32 * i, id.bf16, a_rows[i], d_rank);
    const u32 n_per_cta = id.n / op.cta_group;
    for (u32 n = 0; n < id.n; ++n) {
      float b_row[16];
      read_k16(b, n % n_per_cta, id.bf16, b_row, mma_cta(op.cta_group, n / n_per_cta));
      for (int i = 0; i < 4; ++i) {
        float dot = 0.f;
        for (int k = 0; k < 16; ++k) dot = fmaf(a_rows[i][k], b_row[k], dot);
        float* cell = cells + static_cast<size_t>(col0 + n) * LANES + lane + 32 * i;
        __stcg(cell, op.accumulate ? __ldcg(cell) + dot : dot);
      }
    }
  }
}

// ---- TMA destinations ---------------------------------------------------------------------------

__device__ __forceinline__ u32 observer_bit(u32 rank, u32 warp) { return 1u << ((rank % 2) * 16 + warp); }

// The last TMA load whose destination starts at or below `addr` (boxes tile the ring, and the
// wrappers of 1-CTA loads do not know their box size); -1 if none.
__device__ __forceinline__ int tma_below(CtaState* s, u32 addr) {
  int best = -1;
  u32 best_dst = 0;
  for (u32 i = 0; i < MAX_TMA; ++i) {
    const u32 d1 = vld(&s->tma[i].dst1);
    if (d1 != 0 && d1 - 1 <= addr && (best < 0 || d1 - 1 > best_dst)) {
      best = static_cast<int>(i);
      best_dst = d1 - 1;
    }
  }
  return best;
}

// MMA operand bytes [lo, lo + 1024) in CTA `rank` must come from a TMA load whose barrier the
// issuing warp waited on since the load was issued (PTX ISA "cp.async.bulk.tensor": the
// mbarrier's complete_tx is the only completion signal of the writes).
__device__ __forceinline__ void require_loaded(u32 rank, u32 lo, u32 operand, u32 bit) {
  CtaState* s = state_of(rank);
  const int i = tma_below(s, lo);
  const u64 where = (static_cast<u64>(operand) << 48) | (static_cast<u64>(rank) << 32) | lo;
  if (i < 0) fail(WB_EMU_ERR_OPERAND_NOT_LOADED, where, 0);
  const TmaEntry& e = s->tma[i];
  const u32 dst = vld(&e.dst1) - 1;
  const u32 bytes = vld(&e.bytes);
  if (bytes != 0 && lo + 1024 > dst + bytes)
    fail(WB_EMU_ERR_OPERAND_NOT_LOADED, where, (2ull << 32) | dst);
  if ((vld(&e.observers) & bit) == 0) fail(WB_EMU_ERR_OPERAND_NOT_LOADED, where, (1ull << 32) | dst);
}

// A TMA load into CTA `rank` at `dst` must not overwrite an operand of an MMA that is still in
// flight (issued, its commit not fired): the tensor core may read the operand until then.
__device__ __forceinline__ void require_no_pending_reader(u32 rank, u32 dst) {
  const u32 issuers[2] = {rank, pair_leader(rank)};
  for (u32 k = 0; k < (issuers[1] == issuers[0] ? 1u : 2u); ++k) {
    CtaState* s = state_of(issuers[k]);
    for (u32 w = 0; w < MAX_WARPS; ++w) {
      const u32 n = min(vld(&s->warps[w].num_pending), MAX_PENDING);
      for (u32 i = 0; i < n; ++i) {
        const PendingMma& op = s->warps[w].queue[i];
        const u32 group = vld(&op.cta_group);
        // cta_group::1 reads its issuer's shared memory, cta_group::2 both CTAs of the pair.
        if (issuers[k] != (group == 1 ? rank : pair_leader(rank))) continue;
        const Idesc id = decode_idesc(vld(&op.idesc), group);
        const Sdesc a = decode_sdesc(__ldcg(&op.a_desc));
        const Sdesc b = decode_sdesc(__ldcg(&op.b_desc));
        const bool in_a = dst >= operand_lo(a) && dst < operand_hi(a, id.m / group);
        const bool in_b = dst >= operand_lo(b) && dst < operand_hi(b, id.n / group);
        if (in_a || in_b)
          fail(WB_EMU_ERR_TMA_OVER_OPERAND, (static_cast<u64>(rank) << 32) | dst,
               (static_cast<u64>(w) << 32) | (in_a ? operand_lo(a) : operand_lo(b)));
      }
    }
  }
}

__device__ __forceinline__ void record_tma(u32 rank, u32 dst, u32 bytes, u32 bar_addr, u32 bar_rank) {
  CtaState* s = state_of(rank);
  for (u32 i = 0; i < MAX_TMA; ++i) {
    TmaEntry& e = s->tma[i];
    u32 d1 = vld(&e.dst1);
    if (d1 == 0) d1 = atomicCAS(&e.dst1, 0u, dst + 1) == 0u ? dst + 1 : vld(&e.dst1);
    if (d1 != dst + 1) continue;
    vst(&e.observers, 0);
    vst(&e.bytes, bytes);
    vst(&e.bar_addr, bar_addr);
    vst(&e.bar_rank, bar_rank);
    __threadfence();
    return;
  }
  fail(WB_EMU_ERR_TABLE_FULL, 2, dst);
}

// Warp `warp` of this CTA saw the barrier at `bar_addr` (of this CTA) complete a phase: the TMA
// loads counted on it, in either CTA of the pair, landed, and this warp may rely on them.
__device__ __forceinline__ void observe_tma(u32 bar_addr, u32 warp) {
  const u32 rank = cta_rank();
  const u32 first = cluster_size() >= 2 ? pair_leader(rank) : rank;
  const u32 last = cluster_size() >= 2 ? first + 1 : rank;
  for (u32 r = first; r <= last; ++r) {
    CtaState* s = state_of(r);
    for (u32 i = 0; i < MAX_TMA; ++i) {
      TmaEntry& e = s->tma[i];
      if (vld(&e.dst1) != 0 && vld(&e.bar_addr) == bar_addr && vld(&e.bar_rank) == rank)
        atomicOr(&e.observers, observer_bit(rank, warp));
    }
  }
}

// ---- tensor-memory granules -------------------------------------------------------------------

__device__ __forceinline__ u32 first_granule(u32 col) { return col / GRANULE; }
__device__ __forceinline__ u32 end_granule(u32 col, u32 ncols) { return (col + ncols - 1) / GRANULE + 1; }

// The MMA at the head of its commit completed: its columns are no longer in flight.
__device__ __forceinline__ void retire(const PendingMma& op) {
  const u32 n = decode_idesc(op.idesc, op.cta_group).n;
  const u32 col = tmem_col(op.d_tmem);
  for (u32 c = 0; c < op.cta_group; ++c) {
    CtaState* t = state_of(mma_cta(op.cta_group, c));
    for (u32 g = first_granule(col); g < end_granule(col, n); ++g) atomicSub(&t->gran[g].inflight, 1u);
  }
}

}  // namespace emu

// ---- tensor memory ------------------------------------------------------------------------

namespace emu {

// Emulates tcgen05.alloc.cta_group::N (PTX ISA "tcgen05.alloc").
__device__ __forceinline__ void alloc(u32* dst, u32 ncols, u32 cta_group) {
  require_full_warp(OP_ALLOC);
  CtaState* st = state();
  if (bw::lane_id() == 0) {
    require_cta_group(st, cta_group, OP_ALLOC);
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

// Emulates tcgen05.relinquish_alloc_permit.cta_group::N.
__device__ __forceinline__ void relinquish(u32 cta_group) {
  require_full_warp(OP_RELINQUISH);
  if (bw::lane_id() == 0) {
    CtaState* st = state();
    require_cta_group(st, cta_group, OP_RELINQUISH);
    st->relinquished = 1;
  }
  __syncwarp();
}

// Emulates tcgen05.dealloc.cta_group::N. Besides the allocation rules: no MMA of this CTA may
// still be queued, this warp's tcgen05.ld must be complete, and since freeing tensor memory is the
// last thing a CTA does, every tcgen05.commit another CTA multicast to this one must have been
// waited for: an arrival that lands after the CTA exited writes into shared memory that is no
// longer its own (CUTLASS's producer "load_tail" exists for this); likewise no TMA store may still
// be reading this CTA's shared memory (PTX ISA "cp.async.bulk.wait_group": only .read completion
// makes the source reusable, and an exited CTA's shared memory is reused).
__device__ __forceinline__ void dealloc(u32 taddr, u32 ncols, u32 cta_group) {
  require_full_warp(OP_DEALLOC);
  CtaState* st = state();
  WarpState* ws = warp_state(st);
  __syncwarp();
  if (bw::lane_id() == 0) {
    require_cta_group(st, cta_group, OP_DEALLOC);
    for (u32 w = 0; w < (STRICT ? MAX_WARPS : 0); ++w)
      for (u32 i = 0; i < MAX_BULK; ++i) {
        const u32 src1 = vld(&st->warps[w].bulk_src1[i]);
        if (src1 != 0) fail(WB_EMU_ERR_EXIT_WITH_BULK_READS, src1 - 1, w);
      }
    const u32 col = tmem_col(taddr);
    if (tmem_lane(taddr) != 0 || col + ncols > emu::COLS ||
        (st->alloc_mask & emu::granule_mask(col, ncols)) != emu::granule_mask(col, ncols))
      emu::fail(WB_EMU_ERR_DEALLOC_UNALLOCATED, taddr, ncols);
    if (emu::vld(&ws->pending_ld)) emu::fail(WB_EMU_ERR_LD_NOT_WAITED, emu::HANDOFF_DEALLOC, 0);
    u32 pending = 0;
    for (u32 w = 0; w < emu::MAX_WARPS; ++w) pending += emu::vld(&st->warps[w].num_pending);
    if (pending != 0) emu::fail(WB_EMU_ERR_DEALLOC_PENDING, pending, 0);
    const u32 nbars = min(emu::vld(&st->num_bars), emu::MAX_BARRIERS);
    for (u32 i = 0; i < nbars; ++i) {
      const u32 committed = emu::vld(&st->bars[i].remote_commit_phase);
      u32 waited = 0;
      for (u32 w = 0; w < emu::MAX_WARPS; ++w) waited = max(waited, emu::vld(&st->warps[w].obs_phase[i]));
      if (committed > waited)
        emu::fail(WB_EMU_ERR_EXIT_WITH_ARRIVALS, emu::vld(&st->bars[i].addr1) - 1,
                  (static_cast<u64>(committed - 2) << 32) | waited);
    }
    st->alloc_mask &= ~emu::granule_mask(col, ncols);
  }
  __syncwarp();
}

}  // namespace emu

__device__ __forceinline__ void tmem_alloc(u32* dst, u32 ncols) { emu::alloc(dst, ncols, 1); }
__device__ __forceinline__ void tmem_relinquish_alloc_permit() { emu::relinquish(1); }
__device__ __forceinline__ void tmem_dealloc(u32 taddr, u32 ncols) { emu::dealloc(taddr, ncols, 1); }

// The cta_group::2 forms: each CTA of the pair runs them, so each allocates (frees) the same
// columns in its own tensor memory, exactly as the paired hardware instruction does.
__device__ __forceinline__ void tmem_alloc_2cta(u32* dst, u32 ncols) { emu::alloc(dst, ncols, 2); }
__device__ __forceinline__ void tmem_relinquish_alloc_permit_2cta() { emu::relinquish(2); }
__device__ __forceinline__ void tmem_dealloc_2cta(u32 taddr, u32 ncols) { emu::dealloc(taddr, ncols, 2); }

// Emulates cp.async.bulk.tensor.2d...cta_group::2 with sm_90 TMA, which completes bytes only on a
// barrier of the destination's CTA. Signalling its own CTA, a CTA copies as a 1-CTA load does.
// Signalling the other CTA of the pair, it copies into its own shared memory on its own copy of
// the barrier (which must therefore be initialised with one arrival and otherwise unused there),
// waits for it, and forwards the bytes with a remote mbarrier.complete_tx to the address the
// native wrapper signals (tma_2cta_barrier).
__device__ __forceinline__ void tma_load_2d_2cta(void* dst, const TmaDesc* desc, u64* bar,
                                                 u32 bar_rank, u32 bytes, int c0, int c1) {
  if (elect_one()) {
    wb::emu_hook::tma_load(dst, bytes, bar, bar_rank, 0);
    const u32 local_bar = smem_u32(bar);
    if (bar_rank == emu::cta_rank()) {
      asm volatile(
          "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
          " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_u32(dst)),
          "l"(desc), "r"(local_bar), "r"(c0), "r"(c1)
          : "memory");
    } else {
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
                       tma_2cta_barrier(bar, bar_rank)),
                   "r"(bytes)
                   : "memory");
    }
  }
  __syncwarp();
}

// ---- MMA and commit ---------------------------------------------------------------------------

namespace emu {

// Emulates tcgen05.mma (PTX ISA "tcgen05.mma"): validate, check what it reads and overwrites,
// mark its columns in flight and queue it; it runs when the issuing thread's commit fires.
__device__ __forceinline__ void queue_mma(u32 d_tmem, u64 a_desc, u64 b_desc, u32 idesc,
                                          bool accumulate, u32 cta_group) {
  require_full_warp(OP_MMA);
  CtaState* st = state();
  WarpState* ws = warp_state(st);
  const u32 w = bw::warp_id();
  const u32 lane = bw::lane_id();
  const u32 self = cta_rank();
  const u32 me = elected_lane();
  __syncwarp();
  // Every lane validates (a failing lane traps before any lane indexes the bookkeeping with it).
  // PTX ISA "Specialized Inter-thread Synchronization for tcgen05 instructions": an asynchronous
  // tcgen05 operation is ordered after this thread's earlier synchronisation only by a
  // tcgen05.fence::after_thread_sync between them.
  if (vld(&ws->need_fence))
    fail(WB_EMU_ERR_NO_FENCE_AFTER_SYNC, (static_cast<u64>(vld(&ws->sync_kind)) << 32) | OP_MMA,
         vld(&ws->sync_bar));
  if (cta_group == 2 && self != pair_leader(self)) fail(WB_EMU_ERR_NOT_LEADER, self, 0);
  if (tmem_lane(d_tmem) != 0) fail(WB_EMU_ERR_TMEM_UNALLOCATED, d_tmem, 0);
  if (vld(&ws->num_pending) >= MAX_PENDING) fail(WB_EMU_ERR_QUEUE_FULL, vld(&ws->num_pending), 0);
  const Idesc id = decode_idesc(idesc, cta_group);
  const Sdesc a = decode_sdesc(a_desc);
  const Sdesc b = decode_sdesc(b_desc);
  const u32 col = tmem_col(d_tmem);
  for (u32 c = 0; c < cta_group; ++c) require_allocated(state_of(mma_cta(cta_group, c)), col, id.n);
  if (lane == me) {
    for (u32 c = 0; c < cta_group; ++c) require_cta_group(state_of(mma_cta(cta_group, c)), cta_group, OP_MMA);
    vst(&ws->roles, vld(&ws->roles) | ROLE_MMA);
  }

  // Operands: every 8-row group of A and B, in each CTA of the MMA, from a TMA load whose
  // barrier this warp waited on. The peer's loads of a cta_group::2 MMA are recorded by the peer
  // before it issues them, and complete on the leader's barrier, so the leader's wait orders them.
  const u32 groups_a = id.m / cta_group / 8;
  const u32 groups_b = id.n / cta_group / 8;
  const u32 bit = observer_bit(self, w);
  for (u32 i = lane; i < cta_group * (groups_a + groups_b); i += 32) {
    const u32 c = i / (groups_a + groups_b);
    const u32 j = i % (groups_a + groups_b);
    if (j < groups_a)
      require_loaded(mma_cta(cta_group, c), operand_lo(a) + j * a.sbo, 1, bit);
    else
      require_loaded(mma_cta(cta_group, c), operand_lo(b) + (j - groups_a) * b.sbo, 2, bit);
  }

  // Destination: the previous readers of these columns must have handed them over (PTX ISA
  // "Canonical synchronization patterns", non-pipelined instructions, different thread:
  // tcgen05.ld; tcgen05.wait::ld; tcgen05.fence::before_thread_sync; mbarrier.arrive, then
  // mbarrier wait; tcgen05.fence::after_thread_sync; tcgen05.mma), and this warp must have waited
  // for the phase their hand-over arrived in. In a pair the peer's readers release on the
  // leader's barrier, whose wait orders their records before this check.
  const u32 g0 = first_granule(col);
  const u32 ng = end_granule(col, id.n) - g0;
  for (u32 i = lane; i < cta_group * ng * 4; i += 32) {
    const u32 c = i / (ng * 4);
    const u32 g = g0 + (i / 4) % ng;
    const u32 rank = mma_cta(cta_group, c);
    Reader& r = state_of(rank)->gran[g].reader[i % 4];
    const u32 where = (rank << 16) | (g * GRANULE);
    const u32 rs = vld(&r.state);
    // A reader that read the columns before any MMA wrote them did not wait for the accumulator:
    // the overwrite is named for that read (rule ld-after-commit-wait), whether or not it handed
    // the columns over since.
    const bool early = rs != READER_NONE && vld(&r.early) != 0;
    if (rs == READER_READ)
      fail(early ? WB_EMU_ERR_LD_BEFORE_ACC : WB_EMU_ERR_MMA_UNRELEASED, where,
           (static_cast<u64>(i % 4) << 32) | vld(&r.warp));
    if (rs == READER_RELEASED) {
      const u32 phase = vld(&r.rel_phase);
      const u32 idx = vld(&r.rel_idx);
      const u32 seen = vld(&r.rel_rank) == self ? vld(&ws->obs_phase[idx]) : 0;
      if (seen < phase && early)
        fail(WB_EMU_ERR_LD_BEFORE_ACC, where, (static_cast<u64>(i % 4) << 32) | vld(&r.warp));
      if (seen < phase)
        fail(WB_EMU_ERR_MMA_RELEASE_UNSEEN, where,
             (static_cast<u64>(phase) << 32) | (static_cast<u64>(idx) << 16) | seen);
    }
  }
  __syncwarp();

  if (lane == me) {
    const u32 seq = vld(&ws->mma_seq) + 1;
    vst(&ws->mma_seq, seq);
    for (u32 c = 0; c < cta_group; ++c) {
      CtaState* t = state_of(mma_cta(cta_group, c));
      for (u32 g = g0; g < g0 + ng; ++g) {
        atomicAdd(&t->gran[g].inflight, 1u);
        vst(&t->gran[g].writer_warp, w);
        vst(&t->gran[g].writer_seq, seq);
        for (u32 q = 0; q < 4; ++q) vst(&t->gran[g].reader[q].state, READER_NONE);
      }
    }
    const u32 n = vld(&ws->num_pending);
    ws->queue[n] = PendingMma{a_desc, b_desc, d_tmem, idesc, static_cast<u32>(accumulate),
                              cta_group, me, seq};
    __threadfence();
    vst(&ws->num_pending, n + 1);
    __threadfence();
  }
  __syncwarp();
}

// One commit arrival on the barrier at `bar`'s offset in CTA `rank`, recording for the waiters
// which of this warp's MMAs it covers (all it issued: PTX ISA "tcgen05.commit").
__device__ __forceinline__ void commit_arrive(u64* bar, u32 rank, u32 warp, u32 seq) {
  CtaState* t = state_of(rank);
  const int idx = bar_index(t, smem_u32(bar));
  if (idx >= 0) {
    BarShadow& b = t->bars[idx];
    const u32 phase = count_arrival(t, idx);
    record_arrival(b, ARRIVE_COMMIT, warp, phase, 0);
    vst(&b.rec_seq[phase & 1], seq);
    vst(&b.rec_warp[phase & 1], warp);
    __threadfence();
    vst(&b.rec_phase[phase & 1], phase);
    if (rank != cta_rank()) atomicMax(&b.remote_commit_phase, phase);
  }
  __threadfence();
  asm volatile(
      "{\n\t.reg .b32 remote;\n\t"
      "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n\t}" ::"r"(smem_u32(bar)),
      "r"(rank)
      : "memory");
}

// Emulates tcgen05.commit (PTX ISA "tcgen05.commit"): the MMAs this thread issued complete (they
// run now, after a seeded delay, reading their operands), then one arrival on the barrier at
// `bar`'s offset in each CTA of `cta_mask`, in a seeded order.
__device__ __forceinline__ void commit(u64* bar, u32 cta_group, u32 cta_mask) {
  require_full_warp(OP_COMMIT);
  CtaState* st = state();
  WarpState* ws = warp_state(st);
  const u32 w = bw::warp_id();
  const u32 lane = bw::lane_id();
  const u32 me = elected_lane();
  __syncwarp();
  const u32 event = vld(&ws->events);
  const u64 schedule = perturbation(w, event);
  __syncwarp();
  if (lane == 0) {
    require_cta_group(st, cta_group, OP_COMMIT);
    vst(&ws->events, event + 1);
    spin(schedule & 0xFFF);  // the tensor core finishes these MMAs some time after the commit
  }
  __syncwarp();
  // The peer's TMA data reached this CTA through its barrier at cluster scope.
  asm volatile("fence.acq_rel.cluster;" ::: "memory");
  const u32 count = vld(&ws->num_pending);
  for (u32 i = 0; i < count; ++i) {
    const PendingMma op = ws->queue[i];
    if (op.lane != me) continue;
    if (op.cta_group != cta_group) fail(WB_EMU_ERR_MIXED_CTA_GROUP, op.cta_group, cta_group);
    execute(op);
  }
  __threadfence();
  __syncwarp();
  if (lane == 0) {
    u32 kept = 0;
    for (u32 i = 0; i < count; ++i) {
      const PendingMma op = ws->queue[i];
      if (op.lane == me)
        retire(op);
      else
        ws->queue[kept++] = op;
    }
    vst(&ws->num_pending, kept);
    __threadfence();
    const u32 seq = vld(&ws->mma_seq);
    const bool reverse = (schedule >> 12) & 1;  // multicast arrivals land in either order
    for (u32 k = 0; k < 16; ++k) {
      const u32 r = reverse ? 15 - k : k;
      if ((cta_mask >> r) & 1) commit_arrive(bar, r, w, seq);
    }
  }
  __syncwarp();
}

}  // namespace emu

// Emulates tcgen05.mma.cta_group::1.kind::f16.
__device__ __forceinline__ void mma_f16(u32 d_tmem, u64 a_desc, u64 b_desc, u32 idesc,
                                        bool accumulate) {
  emu::queue_mma(d_tmem, a_desc, b_desc, idesc, accumulate, 1);
}

// Emulates tcgen05.mma.cta_group::2.kind::f16 (leader only).
__device__ __forceinline__ void mma_f16_2cta(u32 d_tmem, u64 a_desc, u64 b_desc, u32 idesc,
                                             bool accumulate) {
  emu::queue_mma(d_tmem, a_desc, b_desc, idesc, accumulate, 2);
}

// Emulates tcgen05.commit.cta_group::1.mbarrier::arrive::one.
__device__ __forceinline__ void mma_commit(u64* bar) { emu::commit(bar, 1, 1u << emu::cta_rank()); }

// Emulates tcgen05.commit.cta_group::2...multicast::cluster.
__device__ __forceinline__ void mma_commit_2cta_multicast(u64* bar, unsigned short cta_mask) {
  emu::commit(bar, 2, cta_mask);
}

// ---- tensor memory -> registers -------------------------------------------------------------

// Emulates tcgen05.ld.sync.aligned.32x32b.x32.b32, including the lane-quarter rule. It may read
// only columns no MMA is writing (PTX ISA: tcgen05.mma -> tcgen05.ld is not a pipelined pair) and
// whose last MMA's commit this warp waited for, after a tcgen05.fence::after_thread_sync ("Non-
// pipelined instructions, different thread": commit; mbarrier wait; fence::after_thread_sync; ld).
// The load is asynchronous (PTX ISA "tcgen05.wait": tcgen05.wait::ld waits for it): until
// tmem_wait_ld, the registers hold a NaN poison (LD_POISON | slot) rather than the data, so a
// kernel that uses them first computes garbage that verification catches; the wait fills them.
__device__ __forceinline__ void tmem_ld_32x32b_x32(u32 taddr, u32 (&r)[32]) {
  emu::require_full_warp(emu::OP_LD);
  emu::CtaState* st = emu::state();
  emu::WarpState* ws = emu::warp_state(st);
  const u32 slot = emu::vld(&ws->ld_seq) % emu::LD_SLOTS;
  __syncwarp();
  const u32 quarter = bw::warp_id() % 4;
  const u32 col = tmem_col(taddr);
  if (tmem_lane(taddr) != 32 * quarter) emu::fail(WB_EMU_ERR_LD_WRONG_LANES, taddr, 32 * quarter);
  emu::require_allocated(st, col, 32);
  const u32 g0 = emu::first_granule(col);
  const u32 g1 = emu::end_granule(col, 32);
  if (bw::lane_id() == 0) {
    if (emu::vld(&ws->need_fence))
      emu::fail(WB_EMU_ERR_NO_FENCE_AFTER_SYNC,
                (static_cast<u64>(emu::vld(&ws->sync_kind)) << 32) | emu::OP_LD,
                emu::vld(&ws->sync_bar));
    // In a pair the leader's warp writes the peer's granules, and its commit records the MMAs it
    // covers on the peer's barrier before arriving there: the peer's wait orders both.
    for (u32 g = g0; g < g1; ++g) {
      const emu::Granule& G = st->gran[g];
      if (emu::vld(&G.inflight) != 0) emu::fail(WB_EMU_ERR_LD_IN_FLIGHT, col, emu::vld(&G.inflight));
      const u32 written = emu::vld(&G.writer_seq);
      const u32 seen = emu::vld(&ws->seen[emu::vld(&G.writer_warp) % emu::MAX_WARPS]);
      if (written > seen)
        emu::fail(WB_EMU_ERR_LD_NOT_OBSERVED, col, (static_cast<u64>(written) << 32) | seen);
    }
  }
  __syncwarp();
  if (emu::STRICT) {
    for (int j = 0; j < 32; ++j) r[j] = emu::LD_POISON | slot;
  } else {
    const float* cells = emu::tmem_cells() + 32 * quarter + bw::lane_id();
    for (int j = 0; j < 32; ++j)
      r[j] = __float_as_uint(__ldcg(cells + static_cast<size_t>(col + j) * emu::LANES));
  }
  if (bw::lane_id() == 0) {
    for (u32 g = g0; g < g1; ++g) {
      emu::Reader& R = st->gran[g].reader[quarter];
      emu::vst(&R.warp, bw::warp_id());
      emu::vst(&R.early, emu::vld(&st->gran[g].writer_seq) == 0 ? 1u : 0u);
      emu::vst(&R.state, emu::READER_READ);
    }
    if (emu::STRICT) {
      emu::vst(&ws->ld_col[slot], col);
      emu::vst(&ws->ld_seq, emu::vld(&ws->ld_seq) + 1);
    }
    emu::vst(&ws->roles, emu::vld(&ws->roles) | emu::ROLE_TMEM_LD);
    emu::vst(&ws->pending_ld, 1);
    emu::vst(&ws->ld_unfenced, 1);
    __threadfence();
  }
  __syncwarp();
}

// Emulates tcgen05.wait::ld: this warp's loads are complete. Registers that still hold a load's
// poison get its data now: the columns read at the load, which no MMA may have overwritten since
// (the sanitizer's release-before-overwrite rule). Registers the kernel already overwrote keep
// what it wrote. It also reopens the epilogue's staging writes: a TMA store of what follows
// needs a fresh fence.proxy.async (see proxy_fence).
__device__ __forceinline__ void tmem_wait_ld(u32 (&r)[32]) {
  emu::require_full_warp(emu::OP_WAIT_LD);
  emu::WarpState* ws = emu::warp_state(emu::state());
  __syncwarp();
  if (!emu::STRICT) {
    if (bw::lane_id() == 0) emu::vst(&ws->pending_ld, 0);
    __syncwarp();
    return;
  }
  static_assert(emu::LD_SLOTS == 4, "the selects below name each slot");
  const u32 c0 = emu::vld(&ws->ld_col[0]), c1 = emu::vld(&ws->ld_col[1]);
  const u32 c2 = emu::vld(&ws->ld_col[2]), c3 = emu::vld(&ws->ld_col[3]);
  const float* cells = emu::tmem_cells() + 32 * (bw::warp_id() % 4) + bw::lane_id();
  for (int j = 0; j < 32; ++j) {
    if ((r[j] & ~(emu::LD_SLOTS - 1)) == emu::LD_POISON) {
      const u32 s = r[j] & (emu::LD_SLOTS - 1);  // selects, not an indexed array: no local memory
      const u32 col = s == 0 ? c0 : s == 1 ? c1 : s == 2 ? c2 : c3;
      r[j] = __float_as_uint(__ldcg(cells + static_cast<size_t>(col + j) * emu::LANES));
    }
  }
  __syncwarp();
  if (bw::lane_id() == 0) {
    emu::vst(&ws->pending_ld, 0);
    emu::vst(&ws->proxy_fenced, 0);
  }
  __syncwarp();
}

// Emulates tcgen05.fence::before_thread_sync: this thread's completed tensor-memory reads may now
// be handed to other threads by an arrive or a barrier.
__device__ __forceinline__ void tcgen05_fence_before_thread_sync() {
  __threadfence();
  emu::vst(&emu::warp_state(emu::state())->ld_unfenced, 0);
}

// Emulates tcgen05.fence::after_thread_sync: tcgen05 work after it is ordered after this thread's
// earlier synchronisation.
__device__ __forceinline__ void tcgen05_fence_after_thread_sync() {
  __threadfence();
  emu::vst(&emu::warp_state(emu::state())->need_fence, 0);
}

}  // namespace bw

// ---- the hooks of common.cuh's wrappers -------------------------------------------------------

namespace wb {
namespace emu_hook {

__device__ void barrier_init(u64* bar, u32 count, const char* name) {
  using namespace bw::emu;
  CtaState* st = state();
  const u32 addr = smem_u32(bar);
  int idx = bar_index(st, addr);
  if (idx < 0) {
    idx = static_cast<int>(atomicAdd(&st->num_bars, 1u));
    if (idx >= static_cast<int>(MAX_BARRIERS)) fail(WB_EMU_ERR_TABLE_FULL, 1, addr);
  }
  BarShadow& b = st->bars[idx];
  // One expression in a loop (`&smem.load_full[s]`) names several barriers: number them.
  const u64 name_addr = reinterpret_cast<u64>(name);
  u32 ordinal = 0;
  for (int i = 0; i < idx; ++i)
    ordinal += name != nullptr && vld(&st->bars[i].name_lo) == static_cast<u32>(name_addr) &&
               vld(&st->bars[i].name_hi) == static_cast<u32>(name_addr >> 32);
  vst(&b.name_lo, static_cast<u32>(name_addr));
  vst(&b.name_hi, static_cast<u32>(name_addr >> 32));
  vst(&b.ordinal, ordinal);
  vst(&b.count, count);
  vst(&b.arrivals, 0);
  vst(&b.remote_commit_phase, 0);
  vst(&b.tx_phase, 0);
  vst(&b.last_kind, 0);
  for (u32 p = 0; p < 2; ++p) vst(&b.rec_phase[p], 0);
  __threadfence();
  vst(&b.addr1, smem_key(addr) + 1);
  __threadfence();
}

// After a successful parity wait. mbarrier.try_wait.parity (PTX ISA "mbarrier.test_wait/
// mbarrier.try_wait") succeeds once the phase of that parity preceding the current one completed:
// the waiter observed the latest completed phase with this parity, and whatever the arrivals of
// that phase published (commits: the MMAs of the committing thread; TMA: the loaded bytes).
__device__ void wait_done(u64* bar, u32 parity) {
  using namespace bw::emu;
  __threadfence();  // read the bookkeeping the arrivals' writers published, not older copies
  if (!lowest_active_lane()) return;
  CtaState* st = state();
  WarpState* ws = warp_state(st);
  const u32 addr = smem_key(smem_u32(bar));
  const u32 hang1 = vld(&ws->hang_slot1);
  if (hang1 != 0) {  // the watchdog reported this wait: it is over
    vst(&wb_emu_hang[hang1 - 1].active, 0);
    vst(&ws->hang_slot1, 0);
    __threadfence_system();
  }
  vst(&ws->need_fence, 1);
  vst(&ws->sync_kind, MBARRIER);
  vst(&ws->sync_bar, addr);
  const int idx = bar_index(st, addr);
  if (idx >= 0) {
    BarShadow& b = st->bars[idx];
    const int done = static_cast<int>(vld(&b.arrivals) / max(vld(&b.count), 1u));
    const int observed = done - ((((done - 1) & 1) == static_cast<int>(parity & 1)) ? 1 : 2);
    const u32 enc = static_cast<u32>(observed + 2);
    if (enc > vld(&ws->obs_phase[idx])) vst(&ws->obs_phase[idx], enc);
    if (observed >= 0 && vld(&b.rec_phase[enc & 1]) == enc) {
      const u32 issuer = vld(&b.rec_warp[enc & 1]) % MAX_WARPS;
      const u32 seq = vld(&b.rec_seq[enc & 1]);
      if (seq > vld(&ws->seen[issuer])) vst(&ws->seen[issuer], seq);
    }
  }
  observe_tma(addr, bw::warp_id());
  __threadfence();
}

// Before one arrival by this thread on the barrier at `bar`'s offset in CTA `rank`: an arrival
// hands this warp's tensor-memory reads to other threads, so they must be complete and fenced
// (PTX ISA "Canonical synchronization patterns", non-pipelined instructions, different thread).
__device__ void arrive(u64* bar, u32 rank) {
  using namespace bw::emu;
  CtaState* st = state();
  WarpState* ws = warp_state(st);
  const u32 addr = smem_key(smem_u32(bar));
  if (vld(&ws->pending_ld)) fail(WB_EMU_ERR_LD_NOT_WAITED, HANDOFF_ARRIVE, addr);
  if (vld(&ws->ld_unfenced)) fail(WB_EMU_ERR_LD_NO_FENCE_BEFORE, HANDOFF_ARRIVE, addr);
  const u32 target = rank == THIS_CTA ? cta_rank() : rank;
  CtaState* t = state_of(target);
  const int idx = bar_index(t, addr);
  const u32 tx = vld(&ws->next_tx);
  vst(&ws->next_tx, 0);
  if (idx >= 0) {
    const u32 phase = count_arrival(t, idx);
    const u32 w = bw::warp_id();
    record_arrival(t->bars[idx], tx != 0 ? ARRIVE_EXPECT_TX : ARRIVE_PLAIN, w, phase, tx);
    for (u32 g = 0; g < GRANULES; ++g) {
      Reader& r = st->gran[g].reader[w % 4];
      if (vld(&r.state) == READER_READ && vld(&r.warp) == w) {
        vst(&r.rel_rank, target);
        vst(&r.rel_idx, static_cast<u32>(idx));
        vst(&r.rel_phase, phase);
        __threadfence();
        vst(&r.state, READER_RELEASED);
      }
    }
  }
  __threadfence();
}

// A CTA or cluster barrier hands tensor memory over like an arrival does.
__device__ void thread_sync_before(u32 kind) {
  using namespace bw::emu;
  WarpState* ws = warp_state(state());
  const u32 handoff = kind == CTA_BARRIER ? HANDOFF_CTA_BARRIER : HANDOFF_CLUSTER_BARRIER;
  if (vld(&ws->pending_ld)) fail(WB_EMU_ERR_LD_NOT_WAITED, handoff, 0);
  if (vld(&ws->ld_unfenced)) fail(WB_EMU_ERR_LD_NO_FENCE_BEFORE, handoff, 0);
  __threadfence();
}

__device__ void thread_sync_after(u32 kind) {
  using namespace bw::emu;
  WarpState* ws = warp_state(state());
  __threadfence();
  vst(&ws->need_fence, 1);
  vst(&ws->sync_kind, kind);
  vst(&ws->sync_bar, 0);
}

// Before a TMA load into `dst` (in this CTA, or each CTA of a multicast `cta_mask`) whose bytes
// complete on the barrier at `bar`'s offset in CTA `bar_rank` (THIS_CTA: each destination's own).
__device__ void tma_load(const void* dst, u32 bytes, u64* bar, u32 bar_rank, u32 cta_mask) {
  using namespace bw::emu;
  WarpState* ws = warp_state(state());
  vst(&ws->roles, vld(&ws->roles) | ROLE_TMA_LOAD);
  const u32 event = vld(&ws->events);
  vst(&ws->events, event + 1);
  spin(perturbation(bw::warp_id(), event) & 0x3FF);  // the copy engine starts a little later
  const u32 own = cta_rank();
  const u32 targets = cta_mask != 0 ? cta_mask : (1u << own);
  const u32 d = smem_key(smem_u32(dst));
  for (u32 r = 0; r < 16; ++r) {
    if (((targets >> r) & 1) == 0) continue;
    require_no_pending_reader(r, d);
    record_tma(r, d, bytes, smem_key(smem_u32(bar)), bar_rank == THIS_CTA ? r : bar_rank);
  }
}


// Before an arrive.expect_tx: the arrival (next hook) announces `bytes` for its phase.
__device__ void expect_tx(u64* bar, u32 bytes) {
  using namespace bw::emu;
  (void)bar;
  vst(&warp_state(state())->next_tx, max(bytes, 1u));
}

// ---- the async proxy and bulk groups (PTX ISA "Proxies", "cp.async.bulk.wait_group") ---------
//
// Shared memory written by ordinary stores (the generic proxy) is visible to a TMA store (the
// async proxy) only after a fence.proxy.async.shared::cta between the writes and the store (PTX ISA
// "Memory Consistency Model: Proxies" and the note under "cp.async.bulk.tensor"). The emulator
// cannot see ordinary stores, so it tracks the events after which a warp writes a staging buffer:
// its cp.async.bulk.wait_group.read (the buffer becomes writable again) and its tcgen05.wait::ld
// (the data to write has arrived). A TMA store needs a fence by its issuing thread (lane 0) after
// the latest of them. And a TMA store reads its source asynchronously until a wait_group.read
// covers its bulk group: a store from a buffer an earlier store of the CTA still reads means the
// buffer was rewritten under that store (checked at the second store; all lanes of a warp write
// its staging buffer, so the earliest point the emulator sees).

__device__ void proxy_fence() {
  using namespace bw::emu;
  if (!STRICT) return;
  if (bw::lane_id() == 0) vst(&warp_state(state())->proxy_fenced, 1);
}

__device__ void tma_store(const void* src) {
  using namespace bw::emu;
  CtaState* st = state();
  WarpState* ws = warp_state(st);
  const u32 w = bw::warp_id();
  const u32 key = smem_key(smem_u32(src));
  vst(&ws->roles, vld(&ws->roles) | ROLE_TMA_STORE);
  if (!STRICT) return;
  if (!vld(&ws->proxy_fenced)) fail(WB_EMU_ERR_NO_PROXY_FENCE, key, 0);
  for (u32 v = 0; v < MAX_WARPS; ++v)
    for (u32 i = 0; i < MAX_BULK; ++i)
      if (vld(&st->warps[v].bulk_src1[i]) == key + 1)
        fail(WB_EMU_ERR_STORE_SOURCE_BUSY, key,
             (static_cast<u64>(v) << 32) | vld(&st->warps[v].bulk_group[i]));
  const u32 group = vld(&ws->bulk_groups);
  for (u32 i = 0; i < MAX_BULK; ++i) {
    if (vld(&ws->bulk_src1[i]) == 0) {
      vst(&ws->bulk_group[i], group);
      vst(&ws->bulk_src1[i], key + 1);
      __threadfence();
      return;
    }
  }
  fail(WB_EMU_ERR_TABLE_FULL, 4, w);
}

__device__ void bulk_commit() {
  using namespace bw::emu;
  if (!STRICT) return;
  WarpState* ws = warp_state(state());
  vst(&ws->bulk_groups, vld(&ws->bulk_groups) + 1);
}

// cp.async.bulk.wait_group.read N: all but the newest N committed groups have read their
// sources; stores not yet committed are in no group the wait covers.
__device__ void bulk_wait_read(u32 pending) {
  using namespace bw::emu;
  if (!STRICT) return;
  WarpState* ws = warp_state(state());
  const u32 groups = vld(&ws->bulk_groups);
  for (u32 i = 0; i < MAX_BULK; ++i)
    if (vld(&ws->bulk_src1[i]) != 0 && vld(&ws->bulk_group[i]) + pending < groups)
      vst(&ws->bulk_src1[i], 0);
  vst(&ws->proxy_fenced, 0);
  __threadfence();
}

// ---- the watchdog ------------------------------------------------------------------------------

__device__ __forceinline__ u64 globaltimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}

// mbarrier.test_wait.parity (non-blocking): whether the phase with `parity` before the current one
// completed, so the current phase has the other parity.
__device__ __forceinline__ u32 current_parity(u64* bar) {
  u32 done = 0;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], 0;\n\t"
      "selp.u32 %0, 1, 0, p;\n\t}"
      : "=r"(done)
      : "r"(smem_u32(bar))
      : "memory");
  return done ? 1u : 0u;
}

// Called in every spin of an unsuccessful mbarrier wait. Every 1024 spins the lowest active lane
// looks at the clock; once the wait has lasted the watchdog's limit it writes (and from then on
// refreshes) a hang record: the barrier, its expression in the kernel, the parity awaited, the
// barrier's current phase, the arrivals the emulator counted, the transaction bytes announced, and
// the last arrival. wait_done clears it when the wait succeeds.
__device__ void waiting(u64* bar, u32 parity, Watch& watch) {
  using namespace bw::emu;
  if ((++watch.spins & 1023) != 1 || !lowest_active_lane()) return;
  const u64 now = globaltimer();
  if (watch.start == 0) {
    watch.start = now;
    return;
  }
  const u64 limit = wb_emu_params[1] != 0 ? wb_emu_params[1] : 1000000000ull;
  if (now - watch.start < limit) return;
  CtaState* st = state();
  WarpState* ws = warp_state(st);
  u32 slot1 = vld(&ws->hang_slot1);
  if (slot1 == 0) {
    const u64 slot = atomicAdd(reinterpret_cast<unsigned long long*>(&wb_emu_params[2]), 1ull);
    if (slot >= HANG_RECORDS) return;  // the host reports how many did not fit
    slot1 = static_cast<u32>(slot) + 1;
    vst(&ws->hang_slot1, slot1);
  }
  HangRecord* h = &wb_emu_hang[slot1 - 1];
  const u32 key = smem_key(smem_u32(bar));
  const int idx = bar_index(st, key);
  h->cta = cta_linear();
  h->warp = bw::warp_id();
  h->roles = vld(&ws->roles);
  h->bar = key;
  h->parity = parity & 1;
  h->now_parity = current_parity(bar);
  h->waited_ns = now - watch.start;
  h->count = 0;
  h->name[0] = 0;
  if (idx >= 0) {
    const BarShadow& b = st->bars[idx];
    h->count = vld(&b.count);
    h->arrivals = vld(&b.arrivals);
    h->tx_phase = vld(&b.tx_phase);
    h->tx_bytes = vld(&b.tx_bytes);
    h->last_kind = vld(&b.last_kind);
    h->last_rank = vld(&b.last_rank);
    h->last_warp = vld(&b.last_warp);
    h->last_phase = vld(&b.last_phase);
    h->ordinal = vld(&b.ordinal);
    const char* name = reinterpret_cast<const char*>(
        (static_cast<u64>(vld(&b.name_hi)) << 32) | vld(&b.name_lo));
    u32 n = 0;
    if (name != nullptr)
      for (; n + 1 < sizeof(h->name) && name[n] != 0; ++n) h->name[n] = name[n];
    h->name[n] = 0;
  }
  __threadfence_system();
  h->active = 1;
  __threadfence_system();
}

}  // namespace emu_hook
}  // namespace wb
