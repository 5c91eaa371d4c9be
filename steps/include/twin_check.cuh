// twin_check.cuh: the twin check, a shadow of the twins' hand-offs that traps on the first
// one no wait orders, and the hang diagnosis that reads its records.
// Included by common.cuh (kernels include common.cuh, blackwell.cuh or hopper.cuh, never this
// file); it relies on common.cuh's types and on what common.cuh defines before including it.
#pragma once

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
