//! The event seam between execution and the checks (in the manner of the hooks an interpreter
//! such as Miri's gives its machine): the interpreter (`exec.rs`) says what happened, once, in
//! these words, and every [`Observer`] of the machine (today the happens-before checker,
//! `check::hb`) draws its own conclusions. Execution never asks a checker anything.
//!
//! Agents: a thread is `Agent::Thread(t)` (its index in the running cluster); an asynchronous
//! operation is `Agent::Async(id)`, `id` being the number its `Issue` event gave it (unique
//! within the run). Events are emitted in the order the scheduler performed them; an
//! asynchronous operation's accesses are emitted at its issue (the checks treat them as
//! possibly happening at any time until its completion is observed).

use crate::error::SimError;
use crate::machine::Machine;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Agent {
    Thread(u32),
    Async(u64),
}

/// Which memory: shared memory of cluster CTA `cta` (byte offsets), global memory (addresses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mem {
    Shared(u32),
    Global,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proxy {
    /// Ordinary loads and stores (PTX ISA "Proxies": the generic proxy).
    Generic,
    /// TMA, tcgen05.mma/cp operand reads (the async proxy).
    Async,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
    /// A read-modify-write by `atom`/`red`: atomic with respect to other atomics.
    Atomic,
    /// A strong (relaxed/acquire/volatile) load: morally strong with other strong accesses
    /// (the checker derives it from the opcode; execution emits `Read`).
    AtomicRead,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Scope {
    Cta,
    Cluster,
    Gpu,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AsyncKind {
    /// `cp.async.bulk.tensor` global -> shared; completes with complete_tx on `barrier`.
    TmaLoad,
    /// `cp.async.bulk.tensor` shared -> global; completion seen by `cp.async.bulk.wait_group`.
    TmaStore,
    /// `tcgen05.mma`, `tcgen05.cp`, `tcgen05.shift`, `tcgen05.commit`: the issuing thread's
    /// tcgen05 queue, which completes in issue order.
    Tcgen05,
    /// A non-bulk `cp.async` copy: seen complete by `cp.async.wait_group`/`wait_all`.
    CpAsync,
    /// The arrive-on of `cp.async.mbarrier.arrive` on `barrier`, after the thread's earlier
    /// copies.
    CpAsyncArrive,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FenceKind {
    /// `fence.proxy.async`: the thread's earlier generic writes become visible to the async
    /// proxy (for operations ordered after the fence).
    ProxyAsync,
    /// `fence.mbarrier_init.release.cluster`
    MbarrierInit,
    /// `tcgen05.fence::before_thread_sync`
    TcBefore,
    /// `tcgen05.fence::after_thread_sync`
    TcAfter,
    /// `fence.acq_rel`/`fence.sc`/`membar` at a scope.
    AcqRel(Scope),
}

/// One thing execution did. Some fields are for observers other than the happens-before
/// checker (a trace, the proving mode): they are part of the seam, read or not.
#[allow(dead_code)]
#[derive(Debug, Clone, Copy)]
pub(crate) enum Event<'a> {
    /// A cluster starts: `threads` threads, `ctas` CTAs, `smem` bytes of shared memory each.
    ClusterStart {
        threads: u32,
        ctas: u32,
        smem: u32,
    },
    /// Bytes `lo..hi` of `mem` read or written by `agent` through `proxy`.
    Mem {
        agent: Agent,
        mem: Mem,
        proxy: Proxy,
        access: Access,
        lo: u64,
        hi: u64,
    },
    /// Tensor memory of cluster CTA `cta`: lane quarters `quarters` (bit i: lanes 32i..32i+31),
    /// columns `lo..hi`. A thread's tcgen05.ld/st, alloc and dealloc are `Agent::Thread`; an
    /// MMA's or tcgen05.cp's write is `Agent::Async`.
    Tmem {
        agent: Agent,
        cta: u32,
        quarters: u8,
        lo: u32,
        hi: u32,
        access: Access,
    },
    /// Thread `by` issued asynchronous operation `id`; `barrier` is the mbarrier a TMA load
    /// completes on (cluster CTA, offset), else None.
    Issue {
        id: u64,
        kind: AsyncKind,
        by: u32,
        barrier: Option<(u32, u32)>,
    },
    /// `mbarrier.init` by `by`.
    MbarInit {
        by: u32,
        cta: u32,
        off: u32,
    },
    MbarInval {
        by: u32,
        cta: u32,
        off: u32,
    },
    /// A use of a barrier that must come after its init: `what` in words (an arrive, an
    /// expect_tx, a wait, the barrier a TMA load or commit will signal).
    MbarUse {
        agent: Agent,
        by: u32,
        cta: u32,
        off: u32,
        what: &'static str,
    },
    /// An arrive-on (count or complete_tx) on the barrier in its current phase. `release`:
    /// with release semantics at `scope` (a thread's `.relaxed` arrive has none).
    MbarArrive {
        agent: Agent,
        cta: u32,
        off: u32,
        scope: Scope,
        release: bool,
    },
    /// The barrier's phase `phase` completed.
    MbarPhase {
        cta: u32,
        off: u32,
        phase: u64,
    },
    /// Thread `by` observed phase `phase` of the barrier complete (a try_wait/test_wait that
    /// returned true, acquire at `scope`); `phase` is -1 for a parity-1 wait on a fresh barrier.
    MbarObserve {
        by: u32,
        cta: u32,
        off: u32,
        phase: i64,
        scope: Scope,
        /// `.acquire` (the default); false for `.relaxed` waits, which acquire only through a
        /// later fence.
        acquire: bool,
    },
    /// `bar.sync`/`bar.arrive` arrival of `by` on CTA barrier `id`.
    BarArrive {
        by: u32,
        cta: u32,
        id: u32,
    },
    /// CTA barrier `id` completed: `threads` leave it (those of `bar.sync`, not `bar.arrive`).
    BarRelease {
        cta: u32,
        id: u32,
        threads: &'a [u32],
    },
    /// `barrier.cluster.arrive` of `by` in cluster-barrier phase `phase`.
    ClusterArrive {
        by: u32,
        phase: u64,
        release: bool,
    },
    /// `barrier.cluster.wait` of `by` passing phase `phase`.
    ClusterWait {
        by: u32,
        phase: u64,
        acquire: bool,
    },
    /// A `.cta_group::2` alloc/dealloc/relinquish_alloc_permit performed together by the warps
    /// `a` and `b` of the two CTAs of a pair (`exec/pair.rs`): emitted with `done` false before
    /// the two halves execute, and with `done` true after; `tmem`: the halves wrote tensor
    /// memory (alloc, dealloc).
    TcPair {
        a: &'a [u32],
        b: &'a [u32],
        tmem: bool,
        done: bool,
    },
    /// `bar.warp.sync` (and `__syncwarp`) among `lanes`: memory ordering among them.
    WarpSync {
        lanes: &'a [u32],
    },
    Fence {
        by: u32,
        kind: FenceKind,
    },
    /// `cp.async.bulk.wait_group` of `by` saw the TMA stores `ops` (Issue ids) complete.
    BulkWait {
        by: u32,
        ops: &'a [u64],
    },
    /// The asynchronous operation completed (its writes landed, its arrive is emitted apart).
    Retire {
        id: u64,
    },
}

/// Something that watches execution. An `Err` stops the run with that error.
pub(crate) trait Observer {
    fn event(&mut self, m: &Machine, ev: &Event) -> Result<(), SimError>;
}

impl Machine<'_> {
    /// Tell every observer what happened.
    pub(crate) fn emit(&mut self, ev: Event) -> Result<(), SimError> {
        if self.observers.is_empty() {
            return Ok(());
        }
        let mut obs = std::mem::take(&mut self.observers);
        let r = obs.iter_mut().try_for_each(|o| o.event(self, &ev));
        self.observers = obs;
        r
    }

    /// The scope an instruction's opcode names (`.cluster`, `.gpu`/`.sys`), else `.cta`: the
    /// default of mbarrier operations (PTX ISA "mbarrier.arrive", "mbarrier.test_wait/
    /// try_wait": `.release`/`.acquire` at `.cta` unless a scope is given).
    pub(crate) fn scope_of(&self, key: u32) -> Scope {
        let op = &self.k.opcodes[key as usize];
        if op.contains(".cluster.") || op.ends_with(".cluster") {
            // `.shared::cluster` is a state space, not a scope: look for the bare qualifier.
            let bare = op.split('.').any(|p| p == "cluster");
            if bare {
                return Scope::Cluster;
            }
        }
        // `membar.gl` is `fence.sc.gpu` (PTX ISA "membar/fence").
        if op.split('.').any(|p| p == "gpu" || p == "sys" || p == "gl") {
            return Scope::Gpu;
        }
        Scope::Cta
    }

    /// The opcode has the `.relaxed` qualifier (no release or acquire).
    pub(crate) fn relaxed(&self, key: u32) -> bool {
        self.k.opcodes[key as usize]
            .split('.')
            .any(|p| p == "relaxed")
    }
}

/// The `Issue` id of non-bulk `cp.async` job number `i` (`CpaJob::id`).
pub(crate) fn cp_async_op_id(i: u64) -> u64 {
    (1 << 62) | i
}

/// The `Issue` id of TMA store number `i` (`Machine::store_done` index): stores are numbered
/// apart from the other asynchronous operations, whose ids come from `Machine::seq`.
pub(crate) fn store_op_id(i: u32) -> u64 {
    (1 << 63) | i as u64
}

impl Machine<'_> {
    /// A thread's ordinary load, store or atomic of `n` bytes at `loc` (local and parameter
    /// memory are private or read-only: not watched).
    pub(crate) fn observe_mem(
        &mut self,
        t: u32,
        loc: crate::exec::Loc,
        n: u32,
        access: Access,
    ) -> Result<(), SimError> {
        let (mem, lo) = match loc {
            crate::exec::Loc::Shared(c, o) => (Mem::Shared(c), o as u64),
            crate::exec::Loc::Global(a) => (Mem::Global, a),
            _ => return Ok(()),
        };
        self.emit(Event::Mem {
            agent: Agent::Thread(t),
            mem,
            proxy: Proxy::Generic,
            access,
            lo,
            hi: lo + n as u64,
        })
    }

    /// A tcgen05.mma issued (operation `id`): its operand reads (async proxy) in each CTA of
    /// the group, A's tensor-memory columns when A is there, and its accumulator write (every
    /// lane quarter, N columns from `d`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn observe_mma(
        &mut self,
        t: u32,
        cta: u32,
        cg2: bool,
        idesc: u32,
        a: u64,
        b: u64,
        d: u32,
        id: u64,
    ) -> Result<(), SimError> {
        if self.observers.is_empty() {
            return Ok(());
        }
        self.emit(Event::Issue {
            id,
            kind: AsyncKind::Tcgen05,
            by: t,
            barrier: None,
        })?;
        let group = if cg2 { 2 } else { 1 };
        let reads = crate::glue::mma_reads(idesc, a, b, group)
            .map_err(|e| self.fault(t, crate::glue::unit_message("tcgen05.mma", &e)))?;
        let n = crate::units::descriptors::decode_idesc(idesc).n;
        let a_tmem = crate::glue::mma_a_tmem(idesc, a, b, group);
        for c in cta..cta + group {
            // A in tensor memory: the MMA reads its columns in the lane quarters its rows use
            // (`units::mma_ts`), ordered like its D write (by the issuing thread's tcgen05
            // view, and completed by tcgen05.commit).
            if let Some((lanes, col, ncols)) = &a_tmem {
                let quarters = lanes.iter().fold(0u8, |q, l| q | 1 << (l / 32).min(3));
                self.emit(Event::Tmem {
                    agent: Agent::Async(id),
                    cta: c,
                    quarters,
                    lo: *col,
                    hi: col + ncols,
                    access: Access::Read,
                })?;
            }
            for &(lo, hi) in &reads {
                self.emit(Event::Mem {
                    agent: Agent::Async(id),
                    mem: Mem::Shared(c),
                    proxy: Proxy::Async,
                    access: Access::Read,
                    lo: lo as u64,
                    hi: hi as u64,
                })?;
            }
            self.emit(Event::Tmem {
                agent: Agent::Async(id),
                cta: c,
                quarters: 0xF,
                lo: d & 0xFFFF,
                hi: (d & 0xFFFF) + n,
                access: Access::Write,
            })?;
        }
        self.emit(Event::Retire { id })
    }
}

impl Machine<'_> {
    /// The shared-memory bytes `tcgen05.cp` (operation `id`) reads: 16-byte chunks of each of
    /// the 128 rows the descriptor describes (PTX ISA "tcgen05.cp": the source matrix is read
    /// from shared memory through the async proxy). A descriptor that does not decode is
    /// reported when the copy executes.
    pub(crate) fn observe_tc_cp_source(
        &mut self,
        id: u64,
        cta: u32,
        desc: u64,
        rows: u32,
        bytes: u32,
    ) -> Result<(), SimError> {
        if self.observers.is_empty() {
            return Ok(());
        }
        let Ok(op) = crate::units::descriptors::KMajorOperand::decode(desc) else {
            return Ok(());
        };
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for r in 0..rows {
            for &a in op.chunk_addrs(r).iter().take((bytes / 16) as usize) {
                ranges.push((a as u64, a as u64 + 16));
            }
        }
        for (lo, hi) in merge(ranges) {
            self.emit(Event::Mem {
                agent: Agent::Async(id),
                mem: Mem::Shared(cta),
                proxy: Proxy::Async,
                access: Access::Read,
                lo,
                hi,
            })?;
        }
        Ok(())
    }

    /// `tcgen05.shift` issued by `t`: an asynchronous tcgen05 operation of its queue that reads
    /// and rewrites the 32 lanes of the address's lane quarter, 256 bits (8 columns) each
    /// (PTX ISA "tcgen05.shift": rows shift down by one within the warp's 32 lanes), in the CTA
    /// and, with `.cta_group::2`, its peer.
    pub(crate) fn observe_tc_shift(
        &mut self,
        t: u32,
        cta: u32,
        cg2: bool,
        taddr: u32,
    ) -> Result<(), SimError> {
        if self.observers.is_empty() {
            return Ok(());
        }
        self.seq += 1;
        let id = self.seq;
        self.emit(Event::Issue {
            id,
            kind: AsyncKind::Tcgen05,
            by: t,
            barrier: None,
        })?;
        let quarters = 1u8 << ((taddr >> 16) / 32).min(3);
        let col = taddr & 0xFFFF;
        for c in cta..cta + if cg2 { 2 } else { 1 } {
            for access in [Access::Read, Access::Write] {
                self.emit(Event::Tmem {
                    agent: Agent::Async(id),
                    cta: c,
                    quarters,
                    lo: col,
                    hi: col + 8,
                    access,
                })?;
            }
        }
        self.emit(Event::Retire { id })
    }

    /// The global bytes a TMA load reads (emitted when it completes) or a TMA store writes
    /// (emitted at its issue), operation `id`, async proxy: the checks treat them as possible
    /// anywhere between issue and completion.
    pub(crate) fn observe_tma_global(
        &mut self,
        id: u64,
        ranges: Vec<(u64, u64)>,
        access: Access,
    ) -> Result<(), SimError> {
        for (lo, hi) in merge(ranges) {
            self.emit(Event::Mem {
                agent: Agent::Async(id),
                mem: Mem::Global,
                proxy: Proxy::Async,
                access,
                lo,
                hi,
            })?;
        }
        Ok(())
    }
}

/// Sorted, overlapping or touching ranges joined.
pub(crate) fn merge(mut r: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    r.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(r.len());
    for (lo, hi) in r {
        match out.last_mut() {
            Some(l) if lo <= l.1 => l.1 = l.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}
