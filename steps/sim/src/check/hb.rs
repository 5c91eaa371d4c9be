//! Happens-before race detection over one execution (vector clocks, FastTrack epochs).
//!
//! Every thread has a vector clock; so does every asynchronous operation, set at its issue.
//! Dimensions (agents): each thread; each thread's tcgen05 queue (`tcgen05.mma/cp/shift/commit`
//! complete in issue order, so one dimension per queue is exact); each warp's synchronous
//! tcgen05 operations (`tcgen05.ld/st/alloc/dealloc`, executed by the whole warp at once); each
//! (thread, mbarrier) pair of TMA loads (loads on one barrier complete with its phases); each
//! thread's TMA stores (seen complete in issue order by `cp.async.bulk.wait_group`).
//!
//! Edges, PTX ISA (9.0) "Memory Consistency Model" (release and acquire patterns, scopes,
//! "morally strong" operations) and the sections cited at each:
//! - mbarrier ("mbarrier.arrive", "mbarrier.test_wait/try_wait"): an arrive (release, `.cta` by
//!   default) joins the arriving agent's clock into the barrier's current phase; a wait that
//!   sees a phase complete (acquire, `.cta` by default) joins every completed phase's
//!   arrivals. Release and acquire synchronise only if each one's scope includes the other
//!   thread: an arrive from another CTA reaches a waiter only if both are `.cluster`.
//!   The arrive-on of a TMA load's complete_tx ("cp.async.bulk.tensor", mbarrier-based
//!   completion) and of `tcgen05.commit` ("tcgen05.commit": it tracks the completion of all
//!   prior asynchronous tcgen05 operations of the thread) is performed on the barrier in the
//!   waiter's own CTA, so a `.cta` wait acquires it.
//! - `bar.sync`/`bar.arrive` ("bar, barrier"): arrivals release, leaving threads acquire;
//!   `bar.warp.sync` orders memory among its lanes.
//! - `barrier.cluster.arrive` releases unless `.relaxed`; `barrier.cluster.wait` acquires
//!   ("barrier.cluster").
//! - `fence.proxy.async` ("Proxies", "membar/fence"): a generic-proxy write reaches an
//!   async-proxy access (TMA, tcgen05.mma operand read) only through a proxy fence after it in
//!   the writing thread that is itself ordered before the access.
//! - `fence.mbarrier_init.release.cluster` ("membar/fence"): a barrier's init is visible to other
//!   CTAs' operations on it only through this fence in the initialising thread, ordered before
//!   the use.
//! - tcgen05 ("tcgen05 Memory Consistency Model": "Specialized Inter-thread Synchronization",
//!   "Canonical synchronization patterns"): a warp's tcgen05.ld/st/alloc/dealloc are ordered
//!   before a thread synchronisation only through `tcgen05.fence::before_thread_sync`, and a
//!   thread's tcgen05 operations after a synchronisation only through
//!   `tcgen05.fence::after_thread_sync`: tcgen05 operations see the thread's clock as of its
//!   last after_thread_sync fence.
//!
//! Shadow memory: shared memory in 4-byte cells per CTA, tensor memory in (32-lane quarter,
//! column) cells per CTA, global memory (threads' accesses only) in 4-byte cells of a map. A cell
//! keeps its last write (an epoch) and its reads since (one epoch, or a set when unordered
//! readers share it). An asynchronous operation's accesses are checked and recorded at its
//! issue: anything not ordered before the issue may overlap it, and anything after it must be
//! ordered after its completion (which only its completion signal carries).

use super::vector_clock::{Epoch, Vc};
use crate::decode::{MemScope, MemSem};
use crate::error::SimError;
use crate::machine::Machine;
use crate::observe::{Access, Agent, AsyncKind, Event, FenceKind, Mem, Observer, Proxy, Scope};
use std::collections::HashMap;

mod pair;

/// Who a dimension's clock belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Dim {
    Thread(u32),
    /// The tcgen05 queue of a thread (mma, cp, shift, commit).
    TcQueue(u32),
    /// The synchronous tcgen05 operations of warp (cta, warp): ld, st, alloc, dealloc.
    TcWarp(u32, u32),
    /// TMA loads of a thread completing on barrier (cta, offset).
    TmaLoad(u32, u32, u32),
    /// TMA stores of a thread.
    Store(u32),
    /// Non-bulk cp.async copies (and cp.async.mbarrier.arrive) of a thread, in issue order:
    /// `cp.async.wait_group` completes a prefix of them.
    CpAsync(u32),
}

#[derive(Debug, Clone, Copy)]
struct Cell {
    w: Epoch,
    w_async: bool,
    w_atomic: bool,
    r: Epoch,
    /// Index + 1 into `Hb::sets` of unordered reads; 0: none.
    rset: u32,
    /// Index + 1 into `Hb::split` once accesses narrower than the 4-byte cell reached it: its
    /// four bytes are then tracked one by one (different bytes are different memory locations,
    /// PTX ISA "Memory Consistency Model": "Memory operations", overlap is per byte); 0: whole.
    sub: u32,
}

impl Default for Cell {
    fn default() -> Self {
        Cell {
            w: Epoch::NONE,
            w_async: false,
            w_atomic: false,
            r: Epoch::NONE,
            rset: 0,
            sub: 0,
        }
    }
}

#[derive(Default)]
struct Th {
    c: Vc,
    /// The clock tcgen05 operations of this thread are ordered after (as of its last
    /// tcgen05.fence::after_thread_sync).
    tv: Vc,
    proxy_fences: Vec<u32>,
    init_fences: Vec<u32>,
    /// Per barrier, the phase this thread's last successful wait consumed, and the one before.
    consumed: Vec<((u32, u32), i64, i64)>,
    /// The thread's clock at its last release fence (`fence.acq_rel`/`fence.sc`) and the fence's
    /// scope: a later relaxed (strong) write or arrive releases this clock (a release pattern).
    relv: Option<(Vc, Scope)>,
    /// What relaxed reads and relaxed waits observed: acquired at the next acquire fence (an
    /// acquire pattern).
    pend: Vc,
    /// The barrier inits this thread may use: mbarrier inits released to it by a
    /// `fence.mbarrier_init.release.cluster` + cluster-barrier arrive (which orders only inits).
    iv: Vc,
    /// Clocks a release would have carried to this thread had the release's or its own
    /// acquire's scope been wide enough; with the arrive and wait that missed them.
    missed: Vc,
    missed_at: Option<Missed>,
    /// The tcgen05 dimensions its `tcgen05.fence::before_thread_sync` fences raised: carried by
    /// any thread synchronisation that follows, relaxed or not (execution ordering suffices
    /// for the tcgen05 fences, PTX ISA "tcgen05 Memory Consistency Model": "Specialized
    /// Inter-thread Synchronization").
    tcx: Vc,
}

/// A release and an acquire on one mbarrier whose scopes did not include each other's thread.
#[derive(Debug, Clone, Copy)]
struct Missed {
    peer: u32,
    arrive_pc: u32,
    rel_scope: Scope,
    wait_pc: u32,
    wait_scope: Scope,
    cta: u32,
    off: u32,
}

/// A location used for flag synchronisation by strong (relaxed, acquire, release, volatile,
/// atomic) operations: the clock its last release made available, at what scope, from which
/// CTA.
struct Flag {
    v: Vc,
    scope: Scope,
    cta: u32,
}

/// Semantics of a thread's memory instruction (cached per opcode): bit 0 strong (morally strong
/// candidate: `.relaxed`/`.acquire`/`.release`/`.volatile`, or `atom`/`red`), bit 1 acquire,
/// bit 2 release, bits 3..5 the scope (0 cta, 1 cluster, 2 gpu/sys).
const STRONG: u8 = 1;
const ACQ: u8 = 2;
const REL: u8 = 4;
const UNKNOWN: u8 = 0xFF;

struct Op {
    e: Epoch,
    vc: Vc,
    by: u32,
}

#[derive(Default)]
struct Mb {
    init: Option<Epoch>,
    init_by: u32,
    cur: Vc,
    cur_remote: Vc,
    /// A thread of another CTA arrived in the current / last completed phase: (thread, scope).
    cur_remote_by: Arriver,
    /// Releases by threads of another CTA whose scope was `.cta` (they synchronise with no
    /// thread of this CTA), joined per phase like `cur`.
    cur_missed: Vc,
    cur_missed_by: Arriver,
    /// The last two completed phases: (phase, cumulative local, remote and missed clocks, the
    /// remote arriver): a wait acquires exactly the phases up to the one it observed.
    hist: [Hist; 2],
}

/// A remote arriver of a phase: (thread, its arrive's pc, the release's scope).
type Arriver = Option<(u32, u32, Scope)>;
/// One completed phase and the clocks of phases up to it: local, remote, missed, and who.
type Hist = (i64, Vc, Vc, Vc, Arriver);

const TMEM_COLS: u32 = 512;

/// The happens-before checker: an [`Observer`].
#[derive(Default)]
pub(crate) struct Hb {
    th: Vec<Th>,
    dims: HashMap<Dim, u32>,
    kinds: Vec<Dim>,
    counters: Vec<u32>,
    /// The scheduler step of each warp dimension's last tcgen05 collective (lanes of one
    /// collective share one clock value).
    warp_step: Vec<u64>,
    smem: Vec<Vec<Cell>>,
    tmem: Vec<Vec<Cell>>,
    global: HashMap<u64, Cell>,
    sets: Vec<Vec<Epoch>>,
    free_sets: Vec<u32>,
    ops: HashMap<u64, Op>,
    mbars: HashMap<(u32, u32), Mb>,
    bars: HashMap<(u32, u32), (Vc, Vc)>,
    cluster: HashMap<u64, Vc>,
    /// Per cluster-barrier phase, the mbarrier inits released by fence.mbarrier_init + arrive.
    cluster_init: HashMap<u64, Vc>,
    split: Vec<[Cell; 4]>,
    flags: HashMap<(u32, u64), Flag>,
    sem: Vec<u8>,
    /// The phase each TMA load (its dimension and clock) completes in: (dim, clock) -> phase.
    load_phase: HashMap<(u32, u32), u64>,
    /// While a CTA pair's collective alloc/dealloc executes: both warps' clocks (`hb/pair.rs`).
    pair_view: Option<Vc>,
}

/// What an access found.
struct Conflict {
    prior: Epoch,
    prior_write: bool,
    /// Ordered, but a generic write reaches an async-proxy read without `fence.proxy.async`.
    proxy: bool,
}

impl Hb {
    fn dim(&mut self, d: Dim) -> u32 {
        if let Some(&i) = self.dims.get(&d) {
            return i;
        }
        let i = self.kinds.len() as u32;
        self.kinds.push(d);
        self.counters.push(0);
        self.warp_step.push(u64::MAX);
        self.dims.insert(d, i);
        i
    }

    fn reset(&mut self, threads: u32, ctas: u32, smem: u32) {
        *self = Hb::default();
        for t in 0..threads {
            self.dim(Dim::Thread(t));
            let mut c = Vc::default();
            c.set(t, 1);
            self.th.push(Th { c, ..Th::default() });
        }
        self.smem = (0..ctas)
            .map(|_| vec![Cell::default(); smem.div_ceil(4) as usize])
            .collect();
        self.tmem = (0..ctas)
            .map(|_| vec![Cell::default(); 4 * TMEM_COLS as usize])
            .collect();
    }

    fn bump(&mut self, t: u32) {
        let c = &mut self.th[t as usize].c;
        let v = c.get(t);
        c.set(t, v + 1);
    }

    fn thread_epoch(&self, m: &Machine, t: u32) -> Epoch {
        Epoch {
            dim: t,
            clock: self.th[t as usize].c.get(t),
            pc: m.threads[t as usize].pc,
        }
    }

    /// Check one cell against an access (`v`, `e`); record the access. Returns a conflict.
    #[allow(clippy::too_many_arguments)]
    fn cell(
        sets: &mut Vec<Vec<Epoch>>,
        free: &mut Vec<u32>,
        th: &[Th],
        c: &mut Cell,
        v: &Vc,
        e: Epoch,
        access: Access,
        proxy: Proxy,
        kinds: &[Dim],
    ) -> Option<Conflict> {
        let owner = |d: u32| match kinds.get(d as usize) {
            Some(Dim::Thread(t)) => Some((*t, true)),
            Some(Dim::CpAsync(t)) => Some((*t, false)),
            _ => None,
        };
        let ordered = |p: Epoch| p.is_none() || p.dim == e.dim || v.covers(p);
        // Morally strong accesses (atomics, relaxed/acquire/release/volatile loads and stores)
        // do not race with each other (PTX ISA "Memory Consistency Model": "Data races" are
        // between overlapping operations that are not morally strong).
        let atomic = matches!(access, Access::Atomic | Access::AtomicRead);
        // The last write against any access.
        if !(ordered(c.w) || (atomic && c.w_atomic)) {
            return Some(Conflict {
                prior: c.w,
                prior_write: true,
                proxy: false,
            });
        }
        if proxy == Proxy::Async && !c.w.is_none() && !c.w_async && c.w.dim != e.dim {
            // A generic write by thread `c.w.dim`: some fence.proxy.async of that thread after
            // the write must itself be ordered before this access.
            let fenced = match owner(c.w.dim) {
                // A thread's write: a fence of it after the write, ordered before this access.
                Some((wt, true)) => th.get(wt as usize).is_some_and(|w| {
                    let f = &w.proxy_fences;
                    let i = f.partition_point(|&x| x < c.w.clock);
                    f.get(i).is_some_and(|&x| x <= v.get(wt))
                }),
                // A cp.async copy's: some fence of its issuing thread ordered before this
                // access (the thread fences after waiting for the copy).
                Some((wt, false)) => th
                    .get(wt as usize)
                    .is_some_and(|w| w.proxy_fences.iter().any(|&x| x <= v.get(wt))),
                None => false,
            };
            if !fenced {
                return Some(Conflict {
                    prior: c.w,
                    prior_write: true,
                    proxy: true,
                });
            }
        }
        if access == Access::AtomicRead {
            // A strong read of a flag: not recorded as a read (a later write by another strong
            // operation does not race with it; plain writes racing with it go unreported).
            return None;
        }
        if access != Access::Read {
            if !ordered(c.r) {
                return Some(Conflict {
                    prior: c.r,
                    prior_write: false,
                    proxy: false,
                });
            }
            if c.rset != 0 {
                if let Some(&p) = sets[c.rset as usize - 1].iter().find(|&&p| !ordered(p)) {
                    return Some(Conflict {
                        prior: p,
                        prior_write: false,
                        proxy: false,
                    });
                }
                sets[c.rset as usize - 1].clear();
                free.push(c.rset);
                c.rset = 0;
            }
            c.w = e;
            c.w_async = proxy == Proxy::Async;
            c.w_atomic = atomic;
            c.r = Epoch::NONE;
            return None;
        }
        // Record a read: one epoch while the readers are ordered, else a set.
        if c.rset == 0 {
            if ordered(c.r) {
                c.r = e;
            } else {
                let i = match free.pop() {
                    Some(i) => i,
                    None => {
                        sets.push(Vec::new());
                        sets.len() as u32
                    }
                };
                sets[i as usize - 1].extend([c.r, e]);
                c.rset = i;
                c.r = Epoch::NONE;
            }
        } else {
            let s = &mut sets[c.rset as usize - 1];
            match s.iter_mut().find(|p| p.dim == e.dim) {
                Some(p) => *p = e,
                None => {
                    if s.len() >= 64 {
                        s.retain(|&p| !v.covers(p));
                    }
                    s.push(e);
                }
            }
        }
        None
    }

    /// The clock and epoch of an agent's access.
    fn agent(&mut self, m: &Machine, a: Agent, tcgen05: bool) -> Option<(Vc, Epoch, u32)> {
        match a {
            Agent::Thread(t) => {
                if tcgen05 {
                    let th = &m.threads[t as usize];
                    let d = self.dim(Dim::TcWarp(th.cta, th.warp));
                    if self.warp_step[d as usize] != m.steps {
                        self.warp_step[d as usize] = m.steps;
                        self.counters[d as usize] += 1;
                    }
                    let k = self.counters[d as usize];
                    let mut v = self.th[t as usize].tv.clone();
                    v.raise(d, k);
                    let e = Epoch {
                        dim: d,
                        clock: k,
                        pc: th.pc,
                    };
                    Some((v, e, t))
                } else {
                    let e = self.thread_epoch(m, t);
                    Some((self.th[t as usize].c.clone(), e, t))
                }
            }
            Agent::Async(id) => self.ops.get(&id).map(|o| (o.vc.clone(), o.e, o.by)),
        }
    }

    /// One 4-byte cell against an access of its bytes `b0..b1`: whole while every access
    /// covers it whole, else byte by byte. Returns the conflict.
    #[allow(clippy::too_many_arguments)]
    fn word(
        sets: &mut Vec<Vec<Epoch>>,
        free: &mut Vec<u32>,
        split: &mut Vec<[Cell; 4]>,
        th: &[Th],
        c: &mut Cell,
        (b0, b1): (u64, u64),
        v: &Vc,
        e: Epoch,
        access: Access,
        proxy: Proxy,
        kinds: &[Dim],
    ) -> Option<Conflict> {
        if c.sub == 0 {
            if b0 == 0 && b1 == 4 {
                return Self::cell(sets, free, th, c, v, e, access, proxy, kinds);
            }
            // Split: each byte starts with the word's history (its read set copied).
            let mut bytes = [*c; 4];
            if c.rset != 0 {
                for b in bytes.iter_mut().skip(1) {
                    let copy = sets[c.rset as usize - 1].clone();
                    let i = match free.pop() {
                        Some(i) => {
                            sets[i as usize - 1] = copy;
                            i
                        }
                        None => {
                            sets.push(copy);
                            sets.len() as u32
                        }
                    };
                    b.rset = i;
                }
            }
            split.push(bytes);
            *c = Cell {
                sub: split.len() as u32,
                ..Cell::default()
            };
        }
        let s = &mut split[c.sub as usize - 1];
        for b in &mut s[b0 as usize..b1 as usize] {
            if let Some(x) = Self::cell(sets, free, th, b, v, e, access, proxy, kinds) {
                return Some(x);
            }
        }
        None
    }

    /// The semantics bits of thread `t`'s current memory instruction (see [`STRONG`]).
    fn sem_of(&mut self, m: &Machine, t: u32, access: Access) -> u8 {
        let Some(ins) = m.k.code.get(m.threads[t as usize].pc as usize) else {
            return 0;
        };
        let key = ins.key as usize;
        if self.sem.len() <= key {
            self.sem.resize(m.k.opcodes.len().max(key + 1), UNKNOWN);
        }
        if self.sem[key] == UNKNOWN {
            let op = &m.k.opcodes[key];
            let has = |q: &str| op.split('.').any(|p| p == q);
            let rmw = op.starts_with("atom") || op.starts_with("red");
            let mut b = 0;
            // PTX ISA "Memory Consistency Model" ("Operation types", "Morally strong
            // operations"): .relaxed/.acquire/.release are strong; .volatile is treated as
            // .relaxed.sys; atom/red are strong, .relaxed unless a semantics is given.
            if rmw || has("relaxed") || has("acquire") || has("release") || has("volatile") {
                b |= STRONG;
            }
            // atom/red default to .gpu scope, ld/st to .cta (.volatile: .sys).
            let default = if rmw { MemScope::Gpu } else { MemScope::Cta };
            let (sem, scope) = crate::decode::sem_scope(&has, default);
            if matches!(sem, MemSem::Acquire | MemSem::AcqRel) {
                b |= ACQ;
            }
            if matches!(sem, MemSem::Release | MemSem::AcqRel) {
                b |= REL;
            }
            let scope = match scope {
                _ if has("volatile") => 2,
                MemScope::Gpu | MemScope::Sys => 2,
                MemScope::Cluster => 1,
                MemScope::Cta => 0,
            };
            self.sem[key] = b | (scope << 3);
        }
        let _ = access;
        self.sem[key]
    }

    #[allow(clippy::too_many_arguments)]
    fn mem(
        &mut self,
        m: &Machine,
        agent: Agent,
        mem: Mem,
        proxy: Proxy,
        access: Access,
        lo: u64,
        hi: u64,
    ) -> Result<(), SimError> {
        let Some((v, e, by)) = self.agent(m, agent, false) else {
            return Ok(());
        };
        let sem = match agent {
            Agent::Thread(t) => self.sem_of(m, t, access),
            Agent::Async(_) => 0,
        };
        let acc = match access {
            Access::Read if sem & STRONG != 0 => Access::AtomicRead,
            Access::Write if sem & STRONG != 0 => Access::Atomic,
            a => a,
        };
        let (g0, g1) = (lo / 4, hi.div_ceil(4));
        for g in g0..g1 {
            let bytes = (lo.max(g * 4) - g * 4, hi.min(g * 4 + 4) - g * 4);
            let cell = match mem {
                Mem::Shared(cta) => {
                    let Some(c) = self
                        .smem
                        .get_mut(cta as usize)
                        .and_then(|s| s.get_mut(g as usize))
                    else {
                        continue;
                    };
                    c
                }
                Mem::Global => self.global.entry(g).or_default(),
            };
            let hit = Self::word(
                &mut self.sets,
                &mut self.free_sets,
                &mut self.split,
                &self.th,
                cell,
                bytes,
                &v,
                e,
                acc,
                proxy,
                &self.kinds,
            );
            if let Some(c) = hit {
                let (a, b) = (g * 4 + bytes.0, g * 4 + bytes.1);
                let place = match mem {
                    Mem::Shared(cta) => format!(
                        "shared-memory bytes {a:#x}..{b:#x} of CTA rank {}",
                        m.ctas[cta as usize].rank
                    ),
                    Mem::Global => format!("global-memory bytes {a:#x}..{b:#x}"),
                };
                return Err(self.report(m, agent, by, e, access, proxy, &c, &place));
            }
        }
        if let (Agent::Thread(t), true) = (agent, sem & STRONG != 0) {
            self.flag(m, t, mem, lo, access, sem);
        }
        if access == Access::Read {
            if let Mem::Shared(cta) = mem {
                self.newer_phase(m, by, e, cta, lo)?;
            }
        }
        Ok(())
    }

    /// Prior-generation consumption, the newer-phase case (design note "Phases"): thread `by`
    /// reads data a TMA load completed in phase P of barrier B, its last wait on B consumed
    /// phase P, but its wait before that consumed P - 3 or earlier with the parity alternating
    /// (an odd gap): its wait meant the phase after the earlier one, and the parity matched a
    /// phase two (or more) later, whose data it now reads (the reads are ordered; the data
    /// belongs to another phase than the wait was for).
    fn newer_phase(
        &self,
        m: &Machine,
        by: u32,
        e: Epoch,
        cta: u32,
        lo: u64,
    ) -> Result<(), SimError> {
        let Some(c) = self
            .smem
            .get(cta as usize)
            .and_then(|s| s.get((lo / 4) as usize))
        else {
            return Ok(());
        };
        let w = if c.sub != 0 {
            self.split[c.sub as usize - 1][(lo % 4) as usize].w
        } else {
            c.w
        };
        let Some(Dim::TmaLoad(_, bc, bo)) = self.kinds.get(w.dim as usize).copied() else {
            return Ok(());
        };
        let Some(&p) = self.load_phase.get(&(w.dim, w.clock)) else {
            return Ok(());
        };
        let Some(&(_, cur, prev)) = self
            .th
            .get(by as usize)
            .and_then(|t| t.consumed.iter().find(|(k, _, _)| *k == (bc, bo)))
        else {
            return Ok(());
        };
        if cur != p as i64 || prev < 0 || cur - prev < 3 || (cur - prev) % 2 == 0 {
            return Ok(());
        }
        let meant = prev + 1;
        Err(m.rule(by, "prior-generation-wait", format!("this read by {} of shared-memory bytes {lo:#x}.. of CTA rank {} reads data {} completed in phase {cur}, but the thread's waits on that barrier consumed phase {prev} and then, with the other parity, phase {cur}: the wait meant phase {meant} and its parity matched a newer phase, {} phase(s) later (the waiter is two phases behind: parity aliasing); the data belongs to another phase than the one waited for", self.describe(m, e), m.ctas[cta as usize].rank, self.describe(m, w), cur - meant)))
    }

    /// Flag synchronisation through a strong access of thread `t` (PTX ISA "Memory Consistency
    /// Model": "Release and acquire patterns", "Synchronizes-with"): a release write (or a
    /// relaxed one after a release fence: a release pattern) makes the writer's clock (at the
    /// release) available at the location; an acquire read takes it, a relaxed read keeps it
    /// for the next acquire fence (an acquire pattern). Release and acquire synchronise only if
    /// each one's scope includes the other thread (scope `.cta` does not reach another CTA).
    fn flag(&mut self, m: &Machine, t: u32, mem: Mem, lo: u64, access: Access, sem: u8) {
        let key = (
            match mem {
                Mem::Shared(c) => c,
                Mem::Global => u32::MAX,
            },
            lo / 4,
        );
        let scope = match sem >> 3 {
            0 => Scope::Cta,
            1 => Scope::Cluster,
            _ => Scope::Gpu,
        };
        let cta = m.threads[t as usize].cta;
        let reads = access != Access::Write;
        let writes = access != Access::Read;
        if reads {
            if let Some(f) = self.flags.get(&key) {
                let reach = f.cta == cta || (f.scope >= Scope::Cluster && scope >= Scope::Cluster);
                if reach {
                    let v = f.v.clone();
                    let th = &mut self.th[t as usize];
                    if sem & ACQ != 0 {
                        th.c.join(&v);
                    } else {
                        th.pend.join(&v);
                    }
                }
            }
        }
        if writes {
            let th = &self.th[t as usize];
            let rel = if sem & REL != 0 {
                Some((th.c.clone(), scope))
            } else {
                th.relv.clone().map(|(v, s)| (v, s.min(scope)))
            };
            let rmw = access == Access::Atomic;
            match (rel, rmw) {
                (Some((v, s)), true) => {
                    // A read-modify-write continues the release sequence of the location.
                    let f = self.flags.entry(key).or_insert(Flag {
                        v: Vc::default(),
                        scope: s,
                        cta,
                    });
                    f.v.join(&v);
                    f.scope = f.scope.min(s);
                    if f.cta != cta {
                        f.scope = f.scope.min(s);
                    }
                }
                (Some((v, s)), false) => {
                    self.flags.insert(key, Flag { v, scope: s, cta });
                }
                (None, false) => {
                    self.flags.remove(&key);
                }
                (None, true) => {}
            }
            self.bump(t);
        }
    }

    /// Thread `t` is executing `tcgen05.alloc`.
    fn at_alloc(m: &Machine, t: u32) -> bool {
        m.threads
            .get(t as usize)
            .and_then(|th| m.k.code.get(th.pc as usize))
            .is_some_and(|i| matches!(i.op, crate::decode::Op::TcAlloc { .. }))
    }

    #[allow(clippy::too_many_arguments)]
    fn tmem(
        &mut self,
        m: &Machine,
        agent: Agent,
        cta: u32,
        quarters: u8,
        lo: u32,
        hi: u32,
        access: Access,
    ) -> Result<(), SimError> {
        let Some((v, e, by)) = self.agent(m, agent, matches!(agent, Agent::Thread(_))) else {
            return Ok(());
        };
        // alloc/dealloc are synchronous: ordered by the thread's whole clock (`hb/pair.rs`).
        let v = match agent {
            Agent::Thread(t) if pair::at_sync_tcgen05(m, t) => {
                self.sync_tcgen05_view(t, e.dim, e.clock)
            }
            _ => v,
        };
        let Some(cells) = self.tmem.get_mut(cta as usize) else {
            return Ok(());
        };
        for q in 0..4u32 {
            if quarters & (1 << q) == 0 {
                continue;
            }
            for col in lo..hi.min(TMEM_COLS) {
                let c = &mut cells[(q * TMEM_COLS + col) as usize];
                if let Some(hit) = Self::cell(
                    &mut self.sets,
                    &mut self.free_sets,
                    &self.th,
                    c,
                    &v,
                    e,
                    access,
                    Proxy::Generic,
                    &self.kinds,
                ) {
                    let place = format!(
                        "tensor-memory column {col}, lanes {}..{} of CTA rank {}",
                        32 * q,
                        32 * q + 31,
                        m.ctas[cta as usize].rank
                    );
                    return Err(self.report(m, agent, by, e, access, Proxy::Generic, &hit, &place));
                }
            }
        }
        // tcgen05.alloc is a synchronous tcgen05 instruction (PTX ISA "Memory Consistency Model
        // for 5th generation of TensorCore operations", "Asynchronous Operations": .alloc,
        // .dealloc and .relinquish_alloc_permit are synchronous), while
        // tcgen05.fence::before_thread_sync orders the prior *asynchronous* tcgen05 operations
        // ("Specialized Inter-thread Synchronization"). The allocation is complete when the
        // warp goes on, so any thread synchronisation after it carries it, as the fence would:
        // CUTLASS's sm100 kernels hand the allocation on with no fence before the barrier. Other
        // warps still need the barrier, and tcgen05.fence::after_thread_sync before an
        // asynchronous use (`alloc-handoff` otherwise). Only when every earlier tcgen05.ld/st of
        // the warp was fenced already: the warp's dimension counts them too.
        if let Agent::Thread(t) = agent {
            if Self::at_alloc(m, t) && self.th[t as usize].c.get(e.dim) + 1 >= e.clock {
                self.th[t as usize].c.raise(e.dim, e.clock);
                self.th[t as usize].tcx.raise(e.dim, e.clock);
            }
        }
        Ok(())
    }

    /// Words for the access an epoch stands for.
    fn describe(&self, m: &Machine, e: Epoch) -> String {
        let line =
            m.k.code
                .get(e.pc as usize)
                .map_or((0, 0), |i| (i.ptx_line, m.src_line(i)));
        let at = format!("PTX line {}, source line {}", line.0, line.1);
        let who = |t: u32| {
            let th = &m.threads[t as usize];
            format!(
                "warp {} lane {} of CTA rank {}",
                th.warp, th.lane, m.ctas[th.cta as usize].rank
            )
        };
        match self.kinds.get(e.dim as usize) {
            Some(Dim::Thread(t)) => format!("{} ({at})", who(*t)),
            Some(Dim::TcQueue(t)) => format!(
                "an asynchronous tcgen05 operation (mma/cp) issued by {} ({at})",
                who(*t)
            ),
            Some(Dim::TcWarp(c, w)) => format!(
                "a tcgen05.ld/st/alloc/dealloc of warp {w} of CTA rank {} ({at})",
                m.ctas[*c as usize].rank
            ),
            Some(Dim::TmaLoad(t, bc, bo)) => format!(
                "a TMA load issued by {} completing on {} ({at})",
                who(*t),
                crate::deadlock::barrier_words(m, *bc, *bo)
            ),
            Some(Dim::Store(t)) => format!("a TMA store issued by {} ({at})", who(*t)),
            Some(Dim::CpAsync(t)) => format!("a cp.async copy issued by {} ({at})", who(*t)),
            None => format!("an access ({at})"),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn report(
        &self,
        m: &Machine,
        agent: Agent,
        by: u32,
        e: Epoch,
        access: Access,
        proxy: Proxy,
        c: &Conflict,
        place: &str,
    ) -> SimError {
        let cur_kind = self.kinds.get(e.dim as usize).copied();
        let prior_kind = self.kinds.get(c.prior.dim as usize).copied();
        let verb = |w: bool| if w { "write" } else { "read" };
        let this = format!(
            "this {} by {}",
            verb(access != Access::Read),
            self.describe(m, e)
        );
        let prior = format!(
            "the earlier {} by {}",
            verb(c.prior_write),
            self.describe(m, c.prior)
        );
        if c.proxy {
            let rule = if matches!(cur_kind, Some(Dim::Store(_))) {
                "proxy-fence-before-store"
            } else {
                "proxy-fence-before-async"
            };
            return m.rule(by, rule, format!("{this} of {place} goes through the async proxy, but {prior} is an ordinary (generic-proxy) write not followed by fence.proxy.async in its thread before the synchronisation that orders it: the async proxy may read stale data (PTX ISA \"Proxies\", \"membar/fence\": fence.proxy.async)"));
        }
        // Prior-generation consumption (design note "Phases"): the racing data is a TMA
        // load's, completing on a barrier whose older phase this thread last consumed; or this
        // is a TMA load overwriting what a thread read after consuming an older phase.
        let consumed = |t: u32, bc: u32, bo: u32| {
            self.th
                .get(t as usize)?
                .consumed
                .iter()
                .find(|(k, _, _)| *k == (bc, bo))
                .map(|(_, p, _)| *p)
        };
        let load_phase = |ep: Epoch| self.load_phase.get(&(ep.dim, ep.clock)).copied();
        let generation = match (cur_kind, prior_kind) {
            (_, Some(Dim::TmaLoad(_, bc, bo))) => consumed(by, bc, bo)
                .zip(load_phase(c.prior))
                .filter(|&(cp, lp)| cp < lp as i64),
            (Some(Dim::TmaLoad(_, bc, bo)), Some(Dim::Thread(pt))) => consumed(pt, bc, bo)
                .zip(load_phase(e))
                .filter(|&(cp, lp)| cp < lp as i64),
            _ => None,
        };
        if let (Agent::Thread(_), Some(ms)) = (agent, self.th[by as usize].missed_at) {
            if self.th[by as usize].missed.covers(c.prior) {
                let line = |pc: u32| {
                    m.k.code
                        .get(pc as usize)
                        .map_or((0, 0), |i| (i.ptx_line, m.src_line(i)))
                };
                let (al, wl) = (line(ms.arrive_pc), line(ms.wait_pc));
                let peer = &m.threads[ms.peer as usize];
                let bname = crate::deadlock::barrier_words(m, ms.cta, ms.off);
                let (side, fix) = if ms.wait_scope < Scope::Cluster {
                    (
                        "the wait acquires only at .cta scope",
                        "wait with mbarrier.try_wait.parity.acquire.cluster",
                    )
                } else {
                    (
                        "the peer's arrive releases only at .cta scope",
                        "arrive with mbarrier.arrive.release.cluster.shared::cluster",
                    )
                };
                let _ = ms.rel_scope;
                return m.rule(by, "cluster-scope-sync", format!("{this} and {prior} of {place} would be ordered by the arrive of warp {} of CTA rank {} (another CTA; PTX line {}, source line {}) on {bname} and the wait (PTX line {}, source line {}) that observed it, but {side}: a release and an acquire synchronise only if each one's scope includes the other thread (PTX ISA \"Memory Consistency Model\": scope, morally strong operations); {fix}", peer.warp, m.ctas[peer.cta as usize].rank, al.0, al.1, wl.0, wl.1));
            }
        }
        let prior_alloc = matches!(prior_kind, Some(Dim::TcWarp(..)))
            && m.k
                .code
                .get(c.prior.pc as usize)
                .is_some_and(|i| matches!(i.op, crate::decode::Op::TcAlloc { .. }));
        let rule = match (cur_kind, prior_kind, agent) {
            _ if prior_alloc => "alloc-handoff",
            // The response of clusterlaunchcontrol.try_cancel (`exec/clc.rs`) is an async write
            // completing on a barrier, seen here as a TMA load's.
            (Some(Dim::Thread(_)), Some(Dim::TmaLoad(..)), _) if m.is_try_cancel(c.prior.pc) => {
                "clc-read-before-complete"
            }
            // A request racing with an earlier read: the reader's fault if it never waited on the
            // response's barrier (it read before any response completed: clc-read-early read
            // before the first request), the requester's if the reader had consumed a phase
            // (it read a response, and the request rewrote the buffer without waiting for it).
            // One rule for one bug, whichever side the schedule runs first.
            (Some(Dim::TmaLoad(_, _, bo)), Some(Dim::Thread(pt)), _) if m.is_try_cancel(e.pc) => {
                // With .multicast::cluster::all each CTA's copy completes on that CTA's barrier
                // at the same offset, so any CTA's barrier there counts.
                let waited = self
                    .th
                    .get(pt as usize)
                    .is_some_and(|t| t.consumed.iter().any(|(k, _, _)| k.1 == bo));
                if waited {
                    "clc-response-reuse"
                } else {
                    "clc-read-before-complete"
                }
            }
            (_, Some(Dim::TcQueue(_)), Agent::Thread(_)) if c.prior_write => "ld-after-commit-wait",
            // The reader read the columns before any MMA had written them: it read before its
            // wait (skip-acc-wait), not a release that came too early.
            (Some(Dim::TcQueue(_)), Some(Dim::TcWarp(rc, rw)), _)
                if m.rg
                    .readers
                    .iter()
                    .any(|r| r.cta == rc && r.warp == rw && r.early.is_some()) =>
            {
                "ld-after-commit-wait"
            }
            // An MMA reading A from tensor memory (`units::mma_ts`) that a tcgen05.st wrote
            // unordered: a race on the operand, not an accumulator overwritten too early.
            (Some(Dim::TcQueue(_)), Some(Dim::TcWarp(..)), _) if access == Access::Read => {
                "data-race"
            }
            (Some(Dim::TcQueue(_)), Some(Dim::TcWarp(..)), _) => "release-before-overwrite",
            (Some(Dim::TcQueue(_)), Some(Dim::TmaLoad(..)), _) => "operand-loaded",
            (Some(Dim::TmaLoad(..)), Some(Dim::TcQueue(_)), _) => "no-refill-in-flight",
            // A staging buffer rewritten while a TMA store may read it; in global memory it is
            // an ordinary race with the store's writes.
            (Some(Dim::Thread(_)), Some(Dim::Store(_)), _) if !place.starts_with("global") => {
                "wait-read-before-reuse"
            }
            (_, Some(Dim::CpAsync(_)), _) | (Some(Dim::CpAsync(_)), _, _) => {
                "cp-async-wait-before-read"
            }
            _ if generation.is_some() => "prior-generation-wait",
            _ => "data-race",
        };
        let why = match rule {
            "prior-generation-wait" => {
                let (p, lp) = generation.unwrap_or((-1, 0));
                let ph = if p < 0 {
                    "no phase at all (a parity-1 wait on a fresh barrier passes at once)".to_string()
                } else {
                    format!("phase {p}")
                };
                format!("the last wait on that barrier of the thread that reads consumed {ph}, an older generation than phase {lp} the load completes in: the wait's parity names another phase than the data's (parity aliasing: the waiter is two phases behind)")
            }
            "alloc-handoff" => "the columns tcgen05.alloc handed the allocating warp reach another warp only through a thread synchronisation after the alloc (bar.sync, a named barrier or the cluster barrier), then tcgen05.fence::after_thread_sync before an asynchronous tcgen05 use".to_string(),
            "clc-read-before-complete" => "a clusterlaunchcontrol.try_cancel response is ordered before a read of it only by a wait on the mbarrier its request completes on, in the reading thread or before a synchronisation with it (PTX ISA \"clusterlaunchcontrol.try_cancel\": no other mechanism guarantees the completion); the read and the response named here are not ordered".to_string(),
            "clc-response-reuse" => "a new clusterlaunchcontrol.try_cancel rewrites the response buffer while a reader of the previous response is not ordered before it: every reader must release the buffer (an arrive on the barrier the requester waits on) before the next request".to_string(),
            "cp-async-wait-before-read" => "a cp.async copy's writes are ordered before other accesses only by cp.async.wait_group/wait_all in the issuing thread (then a synchronisation for other threads) or by the phase of the barrier a cp.async.mbarrier.arrive tracking it arrived on (PTX ISA \"cp.async.wait_group\", \"cp.async.mbarrier.arrive\")".to_string(),
            "ld-after-commit-wait" => "the reader has not waited (itself, or through a thread synchronisation followed by tcgen05.fence::after_thread_sync) for the barrier phase the tcgen05.commit covering that MMA arrived on".to_string(),
            _ => "no synchronisation orders them (an mbarrier phase, bar.sync, the cluster barrier, with tcgen05 fences for tcgen05 operations)".to_string(),
        };
        let _ = proxy;
        m.rule(
            by,
            rule,
            format!("{this} and {prior} of {place} are not ordered by happens-before: {why} (PTX ISA \"Memory Consistency Model\")"),
        )
    }

    fn mbar_use(
        &mut self,
        m: &Machine,
        agent: Agent,
        by: u32,
        cta: u32,
        off: u32,
        what: &str,
    ) -> Result<(), SimError> {
        let own = m.threads[by as usize].cta;
        let Some(b) = self.mbars.get(&(cta, off)) else {
            let _ = (own, agent);
            return Err(m.rule(by, "mbarrier-before-init", format!("{what} names {}, which no mbarrier.init has initialised yet: its init must happen before every use (PTX ISA \"mbarrier\": behaviour of operations on an uninitialised mbarrier is undefined); initialise, fence.mbarrier_init.release.cluster, then a cluster barrier before a peer uses it", crate::deadlock::barrier_words(m, cta, off))));
        };
        let Some(init) = b.init else { return Ok(()) };
        let v = &self.th[by as usize].c;
        let iv = &self.th[by as usize].iv;
        if !v.covers(init) && !iv.covers(init) {
            return Err(m.rule(by, "mbarrier-before-init", format!("{what} uses {}, but its mbarrier.init ({}) is not ordered before this use by happens-before: the use may reach an uninitialised barrier. Within a CTA order them with bar.sync; from another CTA with fence.mbarrier_init.release.cluster then barrier.cluster.arrive.release / wait.acquire (PTX ISA \"mbarrier\", \"membar/fence\")", crate::deadlock::barrier_words(m, cta, off), self.describe(m, init))));
        }
        if own != cta {
            let f = &self.th[b.init_by as usize].init_fences;
            let i = f.partition_point(|&x| x < init.clock);
            if f.get(i)
                .is_none_or(|&x| x > v.get(b.init_by).max(iv.get(b.init_by)))
            {
                return Err(m.rule(by, "fence-mbarrier-init", format!("{what} from another CTA reaches {}, whose initialising thread (warp {}) executed no fence.mbarrier_init.release.cluster after mbarrier.init that is ordered before this use: the initialisation is not visible to other CTAs of the cluster (PTX ISA \"membar/fence\": fence.mbarrier_init); initialise, fence.mbarrier_init, then a cluster barrier", crate::deadlock::barrier_words(m, cta, off), m.threads[b.init_by as usize].warp)));
            }
        }
        Ok(())
    }
}

impl Observer for Hb {
    fn event(&mut self, m: &Machine, ev: &Event) -> Result<(), SimError> {
        match *ev {
            Event::ClusterStart {
                threads,
                ctas,
                smem,
            } => self.reset(threads, ctas, smem),
            Event::Mem {
                agent,
                mem,
                proxy,
                access,
                lo,
                hi,
            } => return self.mem(m, agent, mem, proxy, access, lo, hi),
            Event::Tmem {
                agent,
                cta,
                quarters,
                lo,
                hi,
                access,
            } => return self.tmem(m, agent, cta, quarters, lo, hi, access),
            Event::Issue {
                id,
                kind,
                by,
                barrier,
            } => {
                let th = &m.threads[by as usize];
                let d = self.dim(match kind {
                    AsyncKind::TmaLoad => {
                        let (bc, bo) = barrier.unwrap_or((u32::MAX, 0));
                        Dim::TmaLoad(by, bc, bo)
                    }
                    AsyncKind::TmaStore => Dim::Store(by),
                    AsyncKind::Tcgen05 => Dim::TcQueue(by),
                    AsyncKind::CpAsync | AsyncKind::CpAsyncArrive => Dim::CpAsync(by),
                });
                self.counters[d as usize] += 1;
                let e = Epoch {
                    dim: d,
                    clock: self.counters[d as usize],
                    pc: th.pc,
                };
                let mut vc = if kind == AsyncKind::Tcgen05 {
                    // Ordered after what the thread's tcgen05 view holds, and after its own
                    // warp's earlier tcgen05 operations (program order).
                    let mut v = self.th[by as usize].tv.clone();
                    let w = self.dim(Dim::TcWarp(th.cta, th.warp));
                    v.raise(w, self.counters[w as usize]);
                    v
                } else if kind == AsyncKind::CpAsyncArrive {
                    // Its arrive-on releases the thread's earlier copies (their dimension),
                    // not the thread's own accesses (PTX ISA "cp.async.mbarrier.arrive").
                    Vc::default()
                } else {
                    self.th[by as usize].c.clone()
                };
                vc.set(d, e.clock);
                if let (AsyncKind::TmaLoad, Some((bc, bo))) = (kind, barrier) {
                    // The phase its complete_tx counts towards: the barrier's current one.
                    if let Some(b) = m.ctas.get(bc as usize).and_then(|c| c.mbars.get(&bo)) {
                        self.load_phase.insert((d, e.clock), b.phase);
                    }
                }
                self.ops.insert(id, Op { e, vc, by });
            }
            Event::Retire { id } => {
                if let Some(o) = self.ops.get_mut(&id) {
                    if matches!(
                        self.kinds.get(o.e.dim as usize),
                        Some(Dim::Store(_) | Dim::CpAsync(_))
                    ) {
                        // Only its epoch is needed any more (for cp.async.bulk.wait_group).
                        o.vc = Vc::default();
                    } else {
                        self.ops.remove(&id);
                    }
                }
            }
            Event::MbarInit { by, cta, off } => {
                let init = self.thread_epoch(m, by);
                self.mbars.insert(
                    (cta, off),
                    Mb {
                        init: Some(init),
                        init_by: by,
                        ..Mb::default()
                    },
                );
            }
            Event::MbarInval { cta, off, .. } => {
                self.mbars.remove(&(cta, off));
            }
            Event::MbarUse {
                agent,
                by,
                cta,
                off,
                what,
            } => return self.mbar_use(m, agent, by, cta, off, what),
            Event::MbarArrive {
                agent,
                cta,
                off,
                scope,
                release,
            } => {
                // What the arrive releases: the thread's clock (a release arrive), or its
                // clock at its last release fence (a relaxed arrive after fence.acq_rel or
                // fence.sc: a release pattern), at the narrower of the two scopes.
                let (rel, remote, pc) = match agent {
                    Agent::Thread(t) => {
                        let th = &self.th[t as usize];
                        let rel = if release {
                            Some((th.c.clone(), scope))
                        } else {
                            // A relaxed arrive still orders execution: the tcgen05 operations
                            // its thread fenced with before_thread_sync.
                            let mut v = th.tcx.clone();
                            if let Some((r, _)) = &th.relv {
                                v.join(r);
                            }
                            let s = th.relv.as_ref().map_or(scope, |(_, s)| scope.min(*s));
                            Some((v, s))
                        };
                        (
                            rel,
                            Some(t).filter(|&t| m.threads[t as usize].cta != cta),
                            m.threads[t as usize].pc,
                        )
                    }
                    Agent::Async(id) => match self.ops.get(&id) {
                        Some(o) => (Some((o.vc.clone(), Scope::Cluster)), None, o.e.pc),
                        None => return Ok(()),
                    },
                };
                if let Some(b) = self.mbars.get_mut(&(cta, off)) {
                    match (remote, rel) {
                        (None, Some((v, _))) => b.cur.join(&v),
                        (None, None) => {}
                        (Some(t), Some((v, s))) if s >= Scope::Cluster => {
                            b.cur_remote.join(&v);
                            b.cur_remote_by = Some((t, pc, s));
                        }
                        (Some(t), Some((v, s))) => {
                            b.cur_missed.join(&v);
                            b.cur_missed_by = Some((t, pc, s));
                        }
                        (Some(_), None) => {}
                    }
                }
                if let Agent::Thread(t) = agent {
                    self.bump(t);
                }
            }
            Event::MbarPhase { cta, off, phase } => {
                if let Some(b) = self.mbars.get_mut(&(cta, off)) {
                    let cur = std::mem::take(&mut b.cur);
                    let rem = std::mem::take(&mut b.cur_remote);
                    let mis = std::mem::take(&mut b.cur_missed);
                    let prev = &b.hist[1];
                    let (mut d, mut r, mut x) = (prev.1.clone(), prev.2.clone(), prev.3.clone());
                    d.join(&cur);
                    r.join(&rem);
                    x.join(&mis);
                    let who = b.cur_missed_by.take().or(b.cur_remote_by.take());
                    b.cur_remote_by = None;
                    b.hist.swap(0, 1);
                    b.hist[1] = (phase as i64, d, r, x, who);
                }
            }
            Event::MbarObserve {
                by,
                cta,
                off,
                phase,
                scope,
                acquire,
            } => {
                let th = &mut self.th[by as usize];
                match th.consumed.iter_mut().find(|(k, _, _)| *k == (cta, off)) {
                    Some((_, p, q)) => {
                        *q = *p;
                        *p = phase;
                    }
                    None => th.consumed.push(((cta, off), phase, i64::MIN)),
                }
                if phase < 0 {
                    return Ok(());
                }
                let Some(b) = self.mbars.get(&(cta, off)) else {
                    return Ok(());
                };
                // The cumulative clocks up to the observed phase (a wait whose parity names
                // phase p acquires phases 0..=p, not a later one that completed since).
                let Some(h) = b.hist.iter().rev().find(|h| h.0 <= phase && h.0 >= 0) else {
                    return Ok(());
                };
                let (done, remote, missed, who) = (h.1.clone(), h.2.clone(), h.3.clone(), h.4);
                let wait_pc = m.threads[by as usize].pc;
                let th = &mut self.th[by as usize];
                let into = if acquire { &mut th.c } else { &mut th.pend };
                into.join(&done);
                // PTX ISA "Memory Consistency Model" ("Scope", "Morally strong operations"):
                // a release and an acquire synchronise only if each one's scope includes the
                // other thread. What a scope kept apart is remembered: a race it would have
                // ordered is reported as cluster-scope-sync.
                if scope >= Scope::Cluster {
                    into.join(&remote);
                } else {
                    th.missed.join(&remote);
                }
                th.missed.join(&missed);
                if let Some((peer, arrive_pc, rel_scope)) = who {
                    if scope < Scope::Cluster || rel_scope < Scope::Cluster {
                        th.missed_at = Some(Missed {
                            peer,
                            arrive_pc,
                            rel_scope,
                            wait_pc,
                            wait_scope: scope,
                            cta,
                            off,
                        });
                    }
                }
            }
            Event::BarArrive { by, cta, id } => {
                let th = &self.th[by as usize];
                let (c, iv) = (th.c.clone(), th.iv.clone());
                let e = self.bars.entry((cta, id)).or_default();
                e.0.join(&c);
                e.1.join(&iv);
                self.bump(by);
            }
            Event::BarRelease { cta, id, threads } => {
                let (v, iv) = self.bars.remove(&(cta, id)).unwrap_or_default();
                for &t in threads {
                    self.th[t as usize].c.join(&v);
                    self.th[t as usize].iv.join(&iv);
                }
            }
            Event::ClusterArrive { by, phase, release } => {
                // barrier.cluster.arrive releases unless .relaxed; a relaxed arrive after a
                // release fence at cluster scope or wider is a release pattern; after
                // fence.mbarrier_init.release.cluster it releases the thread's prior
                // mbarrier inits only (PTX ISA "barrier.cluster", "membar/fence":
                // fence.mbarrier_init, "Release and acquire patterns").
                let th = &self.th[by as usize];
                let rel = if release {
                    Some(th.c.clone())
                } else {
                    th.relv
                        .as_ref()
                        .filter(|(_, s)| *s >= Scope::Cluster)
                        .map(|(v, _)| v.clone())
                };
                if let Some(&x) = th.init_fences.last() {
                    self.cluster_init.entry(phase).or_default().raise(by, x);
                }
                let tcx = self.th[by as usize].tcx.clone();
                let ph = self.cluster.entry(phase).or_default();
                ph.join(&tcx);
                if let Some(v) = rel {
                    ph.join(&v);
                }
                self.bump(by);
            }
            Event::ClusterWait { by, phase, acquire } => {
                let th = &mut self.th[by as usize];
                let target = if acquire { &mut th.c } else { &mut th.pend };
                if let Some(v) = self.cluster.get(&phase) {
                    target.join(v);
                }
                if let Some(v) = self.cluster_init.get(&phase) {
                    th.iv.join(v);
                }
            }
            Event::TcPair { a, b, tmem, done } => self.tc_pair(m, a, b, tmem, done),
            Event::WarpSync { lanes } => {
                let mut j = Vc::default();
                for &l in lanes {
                    j.join(&self.th[l as usize].c);
                }
                for &l in lanes {
                    self.th[l as usize].c = j.clone();
                    self.bump(l);
                }
            }
            Event::Fence { by, kind } => match kind {
                FenceKind::ProxyAsync => {
                    let c = self.th[by as usize].c.get(by);
                    self.th[by as usize].proxy_fences.push(c);
                    self.bump(by);
                }
                FenceKind::MbarrierInit => {
                    let c = self.th[by as usize].c.get(by);
                    self.th[by as usize].init_fences.push(c);
                    self.bump(by);
                }
                FenceKind::TcBefore => {
                    let th = &m.threads[by as usize];
                    let d = self.dim(Dim::TcWarp(th.cta, th.warp));
                    let k = self.counters[d as usize];
                    self.th[by as usize].c.raise(d, k);
                    self.th[by as usize].tcx.raise(d, k);
                }
                FenceKind::TcAfter => {
                    let c = self.th[by as usize].c.clone();
                    self.th[by as usize].tv = c;
                }
                // fence.acq_rel / fence.sc / membar (PTX ISA "membar/fence", "Release and
                // acquire patterns"): as an acquire it takes what earlier relaxed reads and
                // waits observed; as a release its clock is what later relaxed writes and
                // arrives release.
                FenceKind::AcqRel(scope) => {
                    let th = &mut self.th[by as usize];
                    let p = std::mem::take(&mut th.pend);
                    th.c.join(&p);
                    th.relv = Some((th.c.clone(), scope));
                    if scope >= Scope::Cluster {
                        // A full fence at cluster scope orders the thread's mbarrier inits
                        // too (fence.mbarrier_init is its light-weight form for them only).
                        let c = th.c.get(by);
                        th.init_fences.push(c);
                    }
                    self.bump(by);
                }
            },
            Event::BulkWait { by, ops } => {
                for id in ops {
                    if let Some(o) = self.ops.remove(id) {
                        self.th[by as usize].c.raise(o.e.dim, o.e.clock);
                    }
                }
            }
        }
        Ok(())
    }
}
