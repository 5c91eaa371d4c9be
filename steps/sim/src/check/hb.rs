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
use crate::error::SimError;
use crate::machine::Machine;
use crate::observe::{Access, Agent, AsyncKind, Event, FenceKind, Mem, Observer, Proxy, Scope};
use std::collections::HashMap;

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
}

#[derive(Debug, Clone, Copy)]
struct Cell {
    w: Epoch,
    w_async: bool,
    w_atomic: bool,
    r: Epoch,
    /// Index + 1 into `Hb::sets` of unordered reads; 0: none.
    rset: u32,
}

impl Default for Cell {
    fn default() -> Self {
        Cell {
            w: Epoch::NONE,
            w_async: false,
            w_atomic: false,
            r: Epoch::NONE,
            rset: 0,
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
    /// Per barrier, the phase this thread's last successful wait consumed.
    consumed: Vec<((u32, u32), i64)>,
}

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
    done: Vc,
    done_remote: Vc,
    /// A thread of another CTA arrived in the current / last completed phase: (thread, scope).
    cur_remote_by: Option<(u32, Scope)>,
    last_remote_by: Option<(u32, Scope)>,
}

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
    bars: HashMap<(u32, u32), Vc>,
    cluster: HashMap<u64, Vc>,
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
    ) -> Option<Conflict> {
        let ordered = |p: Epoch| p.is_none() || p.dim == e.dim || v.covers(p);
        let atomic = access == Access::Atomic;
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
            let fenced = th.get(c.w.dim as usize).is_some_and(|w| {
                let f = &w.proxy_fences;
                let i = f.partition_point(|&x| x < c.w.clock);
                f.get(i).is_some_and(|&x| x <= v.get(c.w.dim))
            });
            if !fenced {
                return Some(Conflict {
                    prior: c.w,
                    prior_write: true,
                    proxy: true,
                });
            }
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
        let (g0, g1) = (lo / 4, hi.div_ceil(4));
        for g in g0..g1 {
            let hit = match mem {
                Mem::Shared(cta) => {
                    let Some(c) = self
                        .smem
                        .get_mut(cta as usize)
                        .and_then(|s| s.get_mut(g as usize))
                    else {
                        continue;
                    };
                    Self::cell(
                        &mut self.sets,
                        &mut self.free_sets,
                        &self.th,
                        c,
                        &v,
                        e,
                        access,
                        proxy,
                    )
                }
                Mem::Global => {
                    let c = self.global.entry(g).or_default();
                    Self::cell(
                        &mut self.sets,
                        &mut self.free_sets,
                        &self.th,
                        c,
                        &v,
                        e,
                        access,
                        proxy,
                    )
                }
            };
            if let Some(c) = hit {
                let place = match mem {
                    Mem::Shared(cta) => format!(
                        "shared-memory bytes {:#x}..{:#x} of CTA rank {}",
                        g * 4,
                        g * 4 + 4,
                        m.ctas[cta as usize].rank
                    ),
                    Mem::Global => format!("global-memory bytes {:#x}..{:#x}", g * 4, g * 4 + 4),
                };
                return Err(self.report(m, agent, by, e, access, proxy, &c, &place));
            }
        }
        Ok(())
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
                "a TMA load issued by {} completing on the barrier at offset {bo:#x} of CTA rank {} ({at})",
                who(*t),
                m.ctas[*bc as usize].rank
            ),
            Some(Dim::Store(t)) => format!("a TMA store issued by {} ({at})", who(*t)),
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
        // Prior-generation consumption: the racing data is a TMA load's, completing on a barrier
        // whose older phase this thread (or the issuer of this operation) last consumed.
        let consumed = |bc: u32, bo: u32| {
            self.th[by as usize]
                .consumed
                .iter()
                .find(|(k, _)| *k == (bc, bo))
                .map(|(_, p)| *p)
        };
        let prior_alloc = matches!(prior_kind, Some(Dim::TcWarp(..)))
            && m.k
                .code
                .get(c.prior.pc as usize)
                .is_some_and(|i| matches!(i.op, crate::decode::Op::TcAlloc { .. }));
        let rule = match (cur_kind, prior_kind, agent) {
            _ if prior_alloc => "fence-before-handoff",
            (_, Some(Dim::TcQueue(_)), Agent::Thread(_)) if c.prior_write => "ld-after-commit-wait",
            (Some(Dim::TcQueue(_)), Some(Dim::TcWarp(..)), _) => "release-before-overwrite",
            (Some(Dim::TcQueue(_)), Some(Dim::TmaLoad(..)), _) => "operand-loaded",
            (Some(Dim::TmaLoad(..)), Some(Dim::TcQueue(_)), _) => "no-refill-in-flight",
            (Some(Dim::Thread(_)), Some(Dim::Store(_)), _) => "wait-read-before-reuse",
            (_, Some(Dim::TmaLoad(_, bc, bo)), _) if consumed(bc, bo).is_some() => {
                "prior-generation-wait"
            }
            _ => "data-race",
        };
        let why = match rule {
            "prior-generation-wait" => {
                let Some(Dim::TmaLoad(_, bc, bo)) = prior_kind else {
                    unreachable!("matched above")
                };
                let p = consumed(bc, bo).unwrap_or(-1);
                let ph = if p < 0 {
                    "no phase at all (a parity-1 wait on a fresh barrier passes at once)".to_string()
                } else {
                    format!("phase {p}")
                };
                format!("the last wait of this thread on that barrier consumed {ph}, an older generation than the one the load completes in: the wait's parity names another phase than the data's (parity aliasing)")
            }
            "fence-before-handoff" => "the allocating warp hands its tensor-memory columns to other warps without tcgen05.fence::before_thread_sync before the thread synchronisation (the canonical pattern: tcgen05.alloc; tcgen05.fence::before_thread_sync; bar.sync or the cluster barrier; tcgen05.fence::after_thread_sync; use)".to_string(),
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
        let rank = m.ctas[cta as usize].rank;
        let Some(b) = self.mbars.get(&(cta, off)) else {
            let _ = (own, agent);
            return Err(m.rule(by, "mbarrier-before-init", format!("{what} names the barrier at shared-memory offset {off:#x} of CTA rank {rank}, which no mbarrier.init has initialised yet: its init must happen before every use (PTX ISA \"mbarrier\": behaviour of operations on an uninitialised mbarrier is undefined); initialise, fence.mbarrier_init.release.cluster, then a cluster barrier before a peer uses it")));
        };
        let Some(init) = b.init else { return Ok(()) };
        let v = &self.th[by as usize].c;
        if !v.covers(init) {
            return Err(m.rule(by, "mbarrier-before-init", format!("{what} uses the barrier at shared-memory offset {off:#x} of CTA rank {rank}, but its mbarrier.init ({}) is not ordered before this use by happens-before: the use may reach an uninitialised barrier. Within a CTA order them with bar.sync; from another CTA with fence.mbarrier_init.release.cluster then barrier.cluster.arrive.release / wait.acquire (PTX ISA \"mbarrier\", \"membar/fence\")", self.describe(m, init))));
        }
        if own != cta {
            let f = &self.th[b.init_by as usize].init_fences;
            let i = f.partition_point(|&x| x < init.clock);
            if f.get(i).is_none_or(|&x| x > v.get(b.init_by)) {
                return Err(m.rule(by, "fence-mbarrier-init", format!("{what} from another CTA reaches the barrier at shared-memory offset {off:#x} of CTA rank {rank}, whose initialising thread (warp {}) executed no fence.mbarrier_init.release.cluster after mbarrier.init that is ordered before this use: the initialisation is not visible to other CTAs of the cluster (PTX ISA \"membar/fence\": fence.mbarrier_init); initialise, fence.mbarrier_init, then a cluster barrier", m.threads[b.init_by as usize].warp)));
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
                } else {
                    self.th[by as usize].c.clone()
                };
                vc.set(d, e.clock);
                self.ops.insert(id, Op { e, vc, by });
            }
            Event::Retire { id } => {
                if let Some(o) = self.ops.get_mut(&id) {
                    if matches!(self.kinds.get(o.e.dim as usize), Some(Dim::Store(_))) {
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
                let (v, remote) = match agent {
                    Agent::Thread(t) => (
                        self.th[t as usize].c.clone(),
                        Some(t).filter(|&t| m.threads[t as usize].cta != cta),
                    ),
                    Agent::Async(id) => match self.ops.get(&id) {
                        Some(o) => (o.vc.clone(), None),
                        None => return Ok(()),
                    },
                };
                if let Some(b) = self.mbars.get_mut(&(cta, off)) {
                    match remote {
                        None if release => b.cur.join(&v),
                        None => {}
                        Some(t) => {
                            if release && scope >= Scope::Cluster {
                                b.cur_remote.join(&v);
                            }
                            b.cur_remote_by = Some((t, if release { scope } else { Scope::Cta }));
                        }
                    }
                }
                if let Agent::Thread(t) = agent {
                    self.bump(t);
                }
            }
            Event::MbarPhase { cta, off, .. } => {
                if let Some(b) = self.mbars.get_mut(&(cta, off)) {
                    let cur = std::mem::take(&mut b.cur);
                    b.done.join(&cur);
                    let cur = std::mem::take(&mut b.cur_remote);
                    b.done_remote.join(&cur);
                    b.last_remote_by = b.cur_remote_by.take();
                }
            }
            Event::MbarObserve {
                by,
                cta,
                off,
                phase,
                scope,
            } => {
                let th = &mut self.th[by as usize];
                match th.consumed.iter_mut().find(|(k, _)| *k == (cta, off)) {
                    Some((_, p)) => *p = phase,
                    None => th.consumed.push(((cta, off), phase)),
                }
                if phase < 0 {
                    return Ok(());
                }
                let Some(b) = self.mbars.get(&(cta, off)) else {
                    return Ok(());
                };
                let (done, remote, last) =
                    (b.done.clone(), b.done_remote.clone(), b.last_remote_by);
                self.th[by as usize].c.join(&done);
                if scope >= Scope::Cluster {
                    self.th[by as usize].c.join(&remote);
                }
                if let Some((t, rs)) = last {
                    if scope < Scope::Cluster || rs < Scope::Cluster {
                        let rank = m.ctas[cta as usize].rank;
                        let peer = &m.threads[t as usize];
                        let (side, fix) = if scope < Scope::Cluster {
                            (
                                "this wait acquires only at .cta scope",
                                "wait with mbarrier.try_wait.parity.acquire.cluster",
                            )
                        } else {
                            (
                                "the peer's arrive releases only at .cta scope (or is .relaxed)",
                                "arrive with mbarrier.arrive.release.cluster.shared::cluster",
                            )
                        };
                        return Err(m.rule(by, "cluster-scope-sync", format!("this wait observes phase {phase} of the barrier at shared-memory offset {off:#x} of CTA rank {rank}, which an arrive by warp {} of CTA rank {} (another CTA) completed, but {side}: a release and an acquire synchronise only if each one's scope includes the other thread (PTX ISA \"Memory Consistency Model\": scope, morally strong operations), so the peer's writes are not ordered before what follows; {fix}", peer.warp, m.ctas[peer.cta as usize].rank)));
                    }
                }
            }
            Event::BarArrive { by, cta, id } => {
                let v = self.th[by as usize].c.clone();
                self.bars.entry((cta, id)).or_default().join(&v);
                self.bump(by);
            }
            Event::BarRelease { cta, id, threads } => {
                let v = self.bars.remove(&(cta, id)).unwrap_or_default();
                for &t in threads {
                    self.th[t as usize].c.join(&v);
                }
            }
            Event::ClusterArrive { by, phase, release } => {
                if release {
                    let v = self.th[by as usize].c.clone();
                    self.cluster.entry(phase).or_default().join(&v);
                    self.bump(by);
                }
            }
            Event::ClusterWait { by, phase, acquire } => {
                if acquire {
                    if let Some(v) = self.cluster.get(&phase) {
                        let v = v.clone();
                        self.th[by as usize].c.join(&v);
                    }
                }
            }
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
                }
                FenceKind::TcAfter => {
                    let c = self.th[by as usize].c.clone();
                    self.th[by as usize].tv = c;
                }
                // A fence alone creates no edge: the kernels' flags go through mbarriers.
                FenceKind::AcqRel(_) => {}
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
