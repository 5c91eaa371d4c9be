//! Cluster launch control (PTX ISA 8.6+, sm_100): `clusterlaunchcontrol.try_cancel` asks to
//! cancel the launch of a cluster of the grid that has not started running, and writes a 16-byte
//! response asynchronously; `clusterlaunchcontrol.query_cancel` decodes it (PTX ISA 9.0 sections
//! 9.7.13.17 and 9.7.13.18). What the simulator models, from those sections:
//! - the request is decided when its response is written, not when it is issued: it cancels a
//!   cluster the scheduler has not made resident yet (`cluster.rs`), which then never starts, or
//!   fails. It fails when every cluster has started, and under the random policy sometimes while
//!   some have not (1 in 16): the ISA promises a cancelled id to one response only, never that a
//!   request succeeds. Which not-started cluster it takes is the policy's choice (the next in
//!   launch order, the last, or any): the ISA does not say;
//! - the response is weak async-proxy writes into the response address of the issuing CTA (of
//!   every CTA of the cluster with `.multicast::cluster::all`), each completing 16 bytes
//!   (complete_tx) on the mbarrier at the same offset in that CTA. The happens-before checker sees
//!   them through the event seam as it sees a TMA load: an asynchronous write completing on a
//!   barrier, so a read of the response not ordered after a wait on that barrier is a race, named
//!   `clc-read-before-complete`, and a request whose write is not ordered after an earlier read of
//!   the buffer `clc-response-reuse` (`check/hb.rs`);
//! - its rules, each undefined behaviour or a lost tile: `clc-request-in-flight` (a request into
//!   a buffer another request still writes), `clc-after-failure` (a request by a CTA that observed
//!   a failed response: undefined), `clc-ctaid-of-failed` (get_first_ctaid of a failed response:
//!   undefined), `clc-exit-in-flight` (a multicast request while, or a response after, a CTA of the
//!   cluster exited: undefined), `clc-id-used-twice` (a thread decodes an id it decoded before: the
//!   ISA gives each cancelled id to one response, so it re-read a consumed response) and
//!   `clc-canceled-id-dropped` (a cluster ends without any thread of it decoding the id of a
//!   cluster its request cancelled: that tile is computed by nobody).
//!
//! The response's bytes are the simulator's own (the ISA calls them opaque): word 0 is 1 for a
//! cancelled cluster, 0 for a failure; words 1-3 the ctaid of the cancelled cluster's first CTA.

use super::Machine;
use crate::decode::{ClcOp, Instr, Opd};
use crate::error::SimError;
use crate::observe::{Access, Agent, AsyncKind, Event, Mem, Proxy, Scope};
use crate::sched::Policy;
use std::collections::{HashMap, HashSet};

/// One response on its way: the request's cluster, issuer and destinations.
#[derive(Debug, Clone)]
pub(crate) struct ClcJob {
    cluster: u32,
    thread: u32,
    /// (cluster CTA, shared offset) of each copy of the response, and its barrier.
    dst: Vec<(u32, u32)>,
    bar: Vec<(u32, u32)>,
    id: u64,
    line: (u32, u32),
}

/// The grid's cluster launch control: which clusters were cancelled, the responses in flight,
/// and what the rules remember.
#[derive(Default)]
pub(crate) struct ClcState {
    cancelled: HashSet<u32>,
    jobs: Vec<ClcJob>,
    /// Cancelled cluster -> the request that cancelled it, until a thread of the requesting
    /// cluster decodes the id.
    owed: HashMap<u32, Owed>,
    /// (cluster, CTA) that observed a failed response.
    failed_seen: HashSet<(u32, u32)>,
    /// (cluster, CTA) in whose shared memory a failed response has landed.
    failed_landed: HashSet<(u32, u32)>,
    /// (cluster, thread, cancelled cluster) already decoded.
    decoded: HashSet<(u32, u32, u32)>,
}

impl ClcState {
    /// A cluster whose launch a request cancelled: the scheduler never makes it resident.
    pub(crate) fn is_cancelled(&self, cluster: u32) -> bool {
        self.cancelled.contains(&cluster)
    }
    /// Responses in flight of cluster `cluster`.
    pub(crate) fn pending(&self, cluster: u32) -> usize {
        self.jobs.iter().filter(|j| j.cluster == cluster).count()
    }
}

/// The request whose response cancelled a cluster: the `clc-canceled-id-dropped` report names
/// it (its CTA, warp, PTX and source line), since that rule fires at cluster end, where no
/// instruction executes.
#[derive(Debug, Clone, Copy)]
struct Owed {
    /// The requesting cluster.
    by: u32,
    cta: u32,
    warp: u32,
    line: (u32, u32),
}

const RESPONSE_BYTES: u32 = 16;

impl Machine<'_> {
    fn clc_cluster(&self) -> u32 {
        self.slots.get(self.cur).map_or(0, |s| s.linear)
    }

    /// Whether the instruction at `pc` is a `try_cancel` (the checker names its races).
    pub(crate) fn is_try_cancel(&self, pc: u32) -> bool {
        self.k
            .code
            .get(pc as usize)
            .is_some_and(|i| matches!(i.op, crate::decode::Op::Clc(ClcOp::TryCancel { .. })))
    }

    pub(super) fn exec_clc(&mut self, t: u32, ins: &Instr, op: ClcOp) -> Result<(), SimError> {
        let a = &ins.args;
        match op {
            ClcOp::Pack => {
                let (Opd::Reg(d), Opd::Vec(v)) = (&a[0], &a[1]) else {
                    return Err(self.unsupported(ins));
                };
                if v.len() != 2 {
                    return Err(self.unsupported(ins));
                }
                let (lo, hi) = (self.rv(t, &v[0]), self.rv(t, &v[1]));
                // A `.b128` register has a second slot (`decode.rs`); another type has none.
                let regs = &mut self.threads[t as usize].regs;
                match regs.get_mut(*d as usize..*d as usize + 2) {
                    Some(pair) => {
                        pair[0] = lo;
                        pair[1] = hi;
                        Ok(())
                    }
                    None => Err(self.unsupported(ins)),
                }
            }
            ClcOp::TryCancel { multicast } => self.clc_try_cancel(t, ins, multicast),
            ClcOp::IsCanceled => {
                let (lo, _) = self.clc_response(t, ins, &a[1])?;
                let canceled = lo as u32 == 1;
                if !canceled {
                    let key = (self.clc_cluster(), self.threads[t as usize].cta);
                    self.clc.failed_seen.insert(key);
                }
                if let Opd::Reg(p) = &a[0] {
                    self.threads[t as usize].regs[*p as usize] = u64::from(canceled);
                }
                Ok(())
            }
            ClcOp::FirstCtaid { dim } => {
                let (lo, hi) = self.clc_response(t, ins, &a[1])?;
                if lo as u32 != 1 {
                    return Err(self.rule(t, "clc-ctaid-of-failed", "clusterlaunchcontrol.query_cancel.get_first_ctaid of a response whose request failed: the PTX ISA leaves its result undefined (\"clusterlaunchcontrol.query_cancel\"); decode the ctaid only when is_canceled is true"));
                }
                let xyz = [(lo >> 32) as u32, hi as u32, (hi >> 32) as u32];
                let cl = self.l.cluster;
                let ncl = [self.l.grid[0] / cl[0].max(1), self.l.grid[1] / cl[1].max(1)];
                let victim = xyz[0] / cl[0].max(1)
                    + ncl[0] * (xyz[1] / cl[1].max(1) + ncl[1] * (xyz[2] / cl[2].max(1)));
                let me = self.clc_cluster();
                if dim.is_none_or(|d| d == 0) {
                    if !self.clc.decoded.insert((me, t, victim)) {
                        return Err(self.rule(t, "clc-id-used-twice", format!("this thread decodes the id of cancelled cluster {victim} a second time: it read a response it had already consumed (a stale buffer, a wait that did not wait for the next response), so that tile is computed twice and the tile of the cluster the newer response cancelled by nobody. Each successful response carries an id no other response carries (PTX ISA \"clusterlaunchcontrol.try_cancel\")")));
                    }
                    self.clc.owed.remove(&victim);
                }
                match (dim, &a[0]) {
                    (Some(d), o) => self.wr_reg(t, o, u64::from(xyz[d as usize])),
                    (None, Opd::Vec(v)) => {
                        for (i, o) in v.iter().take(3).enumerate() {
                            self.wr_reg(t, o, u64::from(xyz[i]));
                        }
                    }
                    _ => return Err(self.unsupported(ins)),
                }
                Ok(())
            }
        }
    }

    fn wr_reg(&mut self, t: u32, o: &Opd, v: u64) {
        if let Opd::Reg(r) = o {
            self.threads[t as usize].regs[*r as usize] = v;
        }
    }

    /// The two halves of a `.b128` register operand.
    fn clc_response(&self, t: u32, ins: &Instr, o: &Opd) -> Result<(u64, u64), SimError> {
        match o {
            Opd::Reg(r) => {
                let regs = &self.threads[t as usize].regs;
                match regs.get(*r as usize..*r as usize + 2) {
                    Some(pair) => Ok((pair[0], pair[1])),
                    None => Err(self.unsupported(ins)),
                }
            }
            _ => Err(self.unsupported(ins)),
        }
    }

    fn clc_try_cancel(&mut self, t: u32, ins: &Instr, multicast: bool) -> Result<(), SimError> {
        let me = self.clc_cluster();
        let cta = self.threads[t as usize].cta;
        // A failure this CTA decoded although none has landed in it: it read a response buffer
        // that no response had completed (zeroes decode as a failure), so the defect is the read
        // before the request's mbarrier completed, not the request after it.
        if self.clc.failed_seen.contains(&(me, cta)) && !self.clc.failed_landed.contains(&(me, cta))
        {
            return Err(self.rule(t, "clc-read-before-complete", "this CTA decoded a failed clusterlaunchcontrol response (query_cancel.is_canceled false), but no failed response has landed in it: a thread read a response buffer before the request's mbarrier completed it. A response is ordered before a read of it only by a wait on the mbarrier its request completes on (PTX ISA \"clusterlaunchcontrol.try_cancel\")"));
        }
        if self.clc.failed_seen.contains(&(me, cta)) {
            return Err(self.rule(t, "clc-after-failure", "clusterlaunchcontrol.try_cancel issued by a CTA that already observed a failed response (query_cancel.is_canceled false): the PTX ISA leaves it undefined (\"clusterlaunchcontrol.try_cancel\"); a failure means every cluster of the grid has started, so stop asking"));
        }
        let (addr, _) = self.addr_of(t, &ins.args[0]);
        let (bar, _) = self.addr_of(t, &ins.args[1]);
        let (dc, doff) = self.shared_loc(t, addr, RESPONSE_BYTES)?;
        let (bc, boff) = self.shared_loc(t, bar, 8)?;
        if dc != cta || bc != cta || doff % RESPONSE_BYTES != 0 {
            return Err(self.fault(t, "clusterlaunchcontrol.try_cancel: the response (16-byte aligned) and the mbarrier must be in the issuing CTA's shared memory (.shared::cta)"));
        }
        let ranks: Vec<u32> = if multicast {
            (0..self.cl_size).collect()
        } else {
            vec![cta]
        };
        if multicast {
            if let Some(r) = ranks.iter().find(|&&r| self.ctas[r as usize].live == 0) {
                return Err(self.rule(t, "clc-exit-in-flight", format!("clusterlaunchcontrol.try_cancel.multicast::cluster::all while CTA rank {r} of the cluster has exited: the PTX ISA leaves it undefined (\"clusterlaunchcontrol.try_cancel\")")));
            }
        }
        for &r in &ranks {
            if self
                .clc
                .jobs
                .iter()
                .any(|j| j.cluster == me && j.dst.contains(&(r, doff)))
            {
                return Err(self.rule(t, "clc-request-in-flight", format!("clusterlaunchcontrol.try_cancel into shared-memory offset {doff:#x} of CTA rank {r}, where the response of an earlier request is still being written: the two asynchronous writes race and one response (with the id of the cluster it cancelled) is lost. Wait for the earlier response's mbarrier and for its readers before asking again (PTX ISA \"clusterlaunchcontrol.try_cancel\")")));
            }
        }
        self.seq += 1;
        let id = self.seq;
        for &r in &ranks {
            self.emit(Event::MbarUse {
                agent: Agent::Thread(t),
                by: t,
                cta: r,
                off: boff,
                what: "a clusterlaunchcontrol.try_cancel response completing on it (complete_tx)",
            })?;
        }
        // Through the seam as an asynchronous write completing on a barrier (a TMA load's kind).
        self.emit(Event::Issue {
            id,
            kind: AsyncKind::TmaLoad,
            by: t,
            barrier: Some((ranks[0], boff)),
        })?;
        for &r in &ranks {
            self.emit(Event::Mem {
                agent: Agent::Async(id),
                mem: Mem::Shared(r),
                proxy: Proxy::Async,
                access: Access::Write,
                lo: u64::from(doff),
                hi: u64::from(doff + RESPONSE_BYTES),
            })?;
        }
        let line = self.line_of(t);
        self.clc.jobs.push(ClcJob {
            cluster: me,
            thread: t,
            dst: ranks.iter().map(|&r| (r, doff)).collect(),
            bar: ranks.iter().map(|&r| (r, boff)).collect(),
            id,
            line,
        });
        if self.o.trace {
            self.ev(
                Some(t),
                format!(
                    "clusterlaunchcontrol.try_cancel issued (PTX line {})",
                    line.0
                ),
            );
        }
        self.report.async_issued += 1;
        self.after_issue()
    }

    /// Which not-started cluster a request cancels, if any (the policy's choice; the ISA does
    /// not say which).
    fn clc_victim(&mut self) -> Option<u32> {
        let free: Vec<u32> = (self.next_cluster..self.ncl_total)
            .filter(|c| !self.clc.cancelled.contains(c))
            .collect();
        if free.is_empty() {
            return None;
        }
        match self.o.policy {
            Policy::AsyncEarly => free.first().copied(),
            Policy::AsyncLate => free.last().copied(),
            Policy::Random => {
                if self.rng.chance(1, 16) {
                    None // the request fails although clusters remain
                } else {
                    Some(free[self.rng.below(free.len() as u64) as usize])
                }
            }
            Policy::Pct { .. } => Some(free[self.rng.below(free.len() as u64) as usize]),
        }
    }

    /// Complete the active cluster's response in flight number `i`: decide it, write it into
    /// every destination and complete its bytes on each barrier.
    pub(super) fn retire_clc(&mut self, i: usize) -> Result<(), SimError> {
        let me = self.clc_cluster();
        let Some(pos) = self
            .clc
            .jobs
            .iter()
            .enumerate()
            .filter(|(_, j)| j.cluster == me)
            .nth(i)
            .map(|(p, _)| p)
        else {
            return Ok(());
        };
        let j = self.clc.jobs.swap_remove(pos);
        let who = self.threads[j.thread as usize].cta;
        let warp = self.threads[j.thread as usize].warp;
        if let Some(&(r, _)) = j.dst.iter().find(|(r, _)| self.ctas[*r as usize].live == 0) {
            return Err(self.rule_at(j.line, who, warp, "clc-exit-in-flight", format!("a clusterlaunchcontrol.try_cancel response lands in CTA rank {r} after it exited: a CTA must not exit while a request of its cluster is in flight (PTX ISA \"clusterlaunchcontrol.try_cancel\": undefined if a CTA of the cluster has exited)")));
        }
        let victim = self.clc_victim();
        let mut bytes = [0u8; RESPONSE_BYTES as usize];
        if let Some(v) = victim {
            self.clc.cancelled.insert(v);
            self.clc.owed.insert(
                v,
                Owed {
                    by: me,
                    cta: who,
                    warp,
                    line: j.line,
                },
            );
            let cl = self.l.cluster;
            let ncl = [self.l.grid[0] / cl[0].max(1), self.l.grid[1] / cl[1].max(1)];
            let cid = [v % ncl[0], (v / ncl[0]) % ncl[1], v / (ncl[0] * ncl[1])];
            let words = [1, cid[0] * cl[0], cid[1] * cl[1], cid[2] * cl[2]];
            for (k, w) in words.iter().enumerate() {
                bytes[4 * k..4 * k + 4].copy_from_slice(&w.to_le_bytes());
            }
        }
        for (&(c, o), &(bc, bo)) in j.dst.iter().zip(&j.bar) {
            if victim.is_none() {
                self.clc.failed_landed.insert((me, c));
            }
            let cta = &mut self.ctas[c as usize];
            cta.smem[o as usize..(o + RESPONSE_BYTES) as usize].copy_from_slice(&bytes);
            cta.init.mark(o, RESPONSE_BYTES);
            if self.ctas[bc as usize].mbars.contains_key(&bo) {
                self.emit(Event::MbarArrive {
                    agent: Agent::Async(j.id),
                    cta: bc,
                    off: bo,
                    scope: Scope::Cluster,
                    release: true,
                })?;
            }
            self.mbar_tx(bc, bo, -i64::from(RESPONSE_BYTES)).map_err(|_| {
                self.rule_at(j.line, who, warp, "mbarrier-init", format!("a clusterlaunchcontrol.try_cancel response completes on {}, which holds no initialised mbarrier", crate::trace_words::barrier_place(self, bc, bo)))
            })?;
        }
        self.emit(Event::Retire { id: j.id })?;
        if self.o.trace {
            let what = match victim {
                Some(v) => format!("cancelled cluster {v}"),
                None => "failed".to_string(),
            };
            self.ev(
                None,
                format!("clusterlaunchcontrol.try_cancel response: {what}"),
            );
        }
        Ok(())
    }

    /// The active cluster is about to end: every cluster its requests cancelled must have had
    /// its id decoded by one of its threads, or that tile was computed by nobody.
    pub(crate) fn clc_cluster_done(&mut self) -> Result<(), SimError> {
        let me = self.clc_cluster();
        let dropped = self
            .clc
            .owed
            .iter()
            .filter(|(_, o)| o.by == me)
            .map(|(&v, &o)| (v, o))
            .min_by_key(|&(v, _)| v);
        if let Some((v, o)) = dropped {
            // Named at the request whose successful response nobody decoded: the rule fires
            // when the cluster ends, but the defect is that request's answer being dropped.
            return Err(self.rule_at(o.line, o.cta, o.warp, "clc-canceled-id-dropped", format!("the cluster ends, but this clusterlaunchcontrol.try_cancel cancelled the launch of cluster {v} and none of the cluster's threads decoded that id (query_cancel.get_first_ctaid): cluster {v} never runs and its tile is computed by nobody. Keep asking, and take every tile a successful response names, until a request fails (PTX ISA \"clusterlaunchcontrol.try_cancel\")")));
        }
        Ok(())
    }
}
