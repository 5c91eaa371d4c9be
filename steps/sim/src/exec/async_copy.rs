//! Non-bulk `cp.async` (PTX ISA 9.7.9.25.3 "Non-bulk copy": `cp.async`, `cp.async.commit_group`,
//! `cp.async.wait_group`/`wait_all`, `cp.async.mbarrier.arrive`): copies of 4, 8 or 16 bytes from
//! global to shared memory that complete asynchronously, whenever the scheduler retires them (as
//! TMA jobs), and at the latest when the issuing thread waits for their group.
//!
//! Where the copies start and end, for the happens-before checker (`check/hb.rs`, through the
//! event seam `observe.rs`):
//! - issue: [`Machine::cp_async_issue`] pushes a [`CpaJob`] and emits `Issue` (an asynchronous
//!   operation of the thread's cp.async queue) with its destination write (shared memory) and
//!   source read (global memory), generic proxy (PTX ISA "cp.async": a non-bulk copy is not an
//!   async-proxy operation);
//! - completion: [`Machine::retire_cp_async`] (a scheduler event, index after the TMA, store and
//!   tcgen05 events) or [`Machine::cp_async_wait`] (forced at the wait) write the bytes and emit
//!   `Retire`;
//! - ordering: `cp.async.wait_group`/`wait_all` orders the copies of the groups it waits for
//!   before the thread's later accesses (a `BulkWait` event naming them); the arrive-on of
//!   `cp.async.mbarrier.arrive` happens after every earlier copy of the thread completed and
//!   releases them into the barrier's phase (an `MbarArrive` of its own operation). An access
//!   of the bytes not ordered after the copy by either is the rule `cp-async-wait-before-read`
//!   (PTX ISA "cp.async.wait_group ... Ordering": the writes are made visible to the executing
//!   thread only by the wait; "cp.async.mbarrier.arrive"), decided from what orders what, not
//!   from whether the scheduler already retired the copy.

use crate::decode::{FormOp, Instr, Op, Opd};
use crate::error::SimError;
use crate::machine::Machine;
use crate::observe::{cp_async_op_id, Access, Agent, AsyncKind, Event, Mem, Proxy, Scope};
use crate::rules;
use std::collections::{HashMap, VecDeque};

/// One pending asynchronous copy or barrier arrival.
#[derive(Debug, Clone)]
pub(crate) struct CpaJob {
    pub id: u64,
    pub thread: u32,
    pub kind: CpaKind,
    /// PTX and source line of the issuing instruction.
    pub line: (u32, u32),
}

#[derive(Debug, Clone)]
pub(crate) enum CpaKind {
    /// `bytes` bytes to shared offset `dst` of CTA `cta`: the first `src_bytes` from global `src`,
    /// the rest zero (the ISA's src-size / ignore-src zero fill).
    Copy {
        cta: u32,
        dst: u32,
        src: u64,
        bytes: u32,
        src_bytes: u32,
    },
    /// The arrive-on of `cp.async.mbarrier.arrive` on the barrier at `off` of CTA `cta`, once
    /// every earlier copy of the thread completed.
    Arrive { cta: u32, off: u32 },
}

#[derive(Debug, Clone, Default)]
struct ThreadGroups {
    open: Vec<u64>,
    committed: VecDeque<Vec<u64>>,
}

/// The machine's non-bulk `cp.async` state.
#[derive(Debug, Clone, Default)]
pub(crate) struct CpaState {
    pub jobs: Vec<CpaJob>,
    next: u64,
    groups: HashMap<u32, ThreadGroups>,
}

impl Machine<'_> {
    pub(super) fn cp_async_issue(&mut self, t: u32, ins: &Instr) -> Result<(), SimError> {
        let a = &ins.args;
        let Op::Form(FormOp::CpAsync { hint, .. }) = ins.op else {
            return Err(self.unsupported(ins));
        };
        let (dst, _) = self.addr_of(t, &a[0]);
        let (src, _) = self.addr_of(t, &a[1]);
        let bytes = self.rv(t, &a[2]) as u32;
        // The optional fourth operand: a predicate is ignore-src (true: read nothing, fill
        // zeros); an integer is src-size (bytes read, the rest zero; at most cp-size).
        let src_bytes = match a.get(3).filter(|_| a.len() == 4 + usize::from(hint)) {
            None => bytes,
            Some(o @ Opd::NotReg(_)) => {
                if self.rv(t, o) != 0 {
                    0
                } else {
                    bytes
                }
            }
            Some(o @ Opd::Reg(r)) if self.k.reg_names[*r as usize].starts_with("%p") => {
                if self.rv(t, o) != 0 {
                    0
                } else {
                    bytes
                }
            }
            Some(o) => {
                let n = self.rv(t, o) as u32;
                if n > bytes {
                    return Err(self.fault(
                        t,
                        format!("cp.async with src-size {n} larger than cp-size {bytes}"),
                    ));
                }
                n
            }
        };
        // PTX ISA "cp.async": both addresses aligned to cp-size.
        if !dst.is_multiple_of(u64::from(bytes)) || !src.is_multiple_of(u64::from(bytes)) {
            return Err(self.fault(
                t,
                format!("cp.async of {bytes} bytes from {src:#x} to {dst:#x}: both addresses must be aligned to {bytes}"),
            ));
        }
        let (cta, off) = self.shared_loc(t, dst, bytes)?;
        if cta != self.threads[t as usize].cta {
            return Err(self.fault(
                t,
                "cp.async to another CTA's shared memory (.shared::cta only)",
            ));
        }
        let id = self.cpa.next;
        self.cpa.next += 1;
        let line = self.line_of(t);
        self.cpa.jobs.push(CpaJob {
            id,
            thread: t,
            kind: CpaKind::Copy {
                cta,
                dst: off,
                src,
                bytes,
                src_bytes,
            },
            line,
        });
        let op = cp_async_op_id(id);
        self.emit(Event::Issue {
            id: op,
            kind: AsyncKind::CpAsync,
            by: t,
            barrier: None,
        })?;
        self.emit(Event::Mem {
            agent: Agent::Async(op),
            mem: Mem::Shared(cta),
            proxy: Proxy::Generic,
            access: Access::Write,
            lo: u64::from(off),
            hi: u64::from(off + bytes),
        })?;
        if src_bytes > 0 {
            self.emit(Event::Mem {
                agent: Agent::Async(op),
                mem: Mem::Global,
                proxy: Proxy::Generic,
                access: Access::Read,
                lo: src,
                hi: src + u64::from(src_bytes),
            })?;
        }
        self.cpa.groups.entry(t).or_default().open.push(id);
        if self.o.trace {
            self.ev(
                Some(t),
                format!(
                    "cp.async issued (PTX line {}), {bytes} bytes from {src:#x} to {off:#x}",
                    line.0
                ),
            );
        }
        self.report.async_issued += 1;
        self.after_issue()
    }

    pub(super) fn cp_async_commit(&mut self, t: u32) {
        let g = self.cpa.groups.entry(t).or_default();
        let open = std::mem::take(&mut g.open);
        // An empty group is still a group (PTX ISA: commit_group with no cp.async creates an
        // empty group).
        g.committed.push_back(open);
    }

    /// `cp.async.wait_group n`: every group but the newest `n` completes now; its copies are
    /// ordered before everything the thread does next.
    pub(super) fn cp_async_wait(&mut self, t: u32, n: u32) -> Result<(), SimError> {
        let mut done = Vec::new();
        if let Some(g) = self.cpa.groups.get_mut(&t) {
            while g.committed.len() > n as usize {
                done.extend(g.committed.pop_front().unwrap_or_default());
            }
        }
        done.sort_unstable();
        for id in &done {
            if let Some(i) = self.cpa.jobs.iter().position(|j| j.id == *id) {
                let job = self.cpa.jobs.swap_remove(i);
                self.complete_cp_async(job)?;
            }
        }
        let ops: Vec<u64> = done.iter().map(|&i| cp_async_op_id(i)).collect();
        self.emit(Event::BulkWait { by: t, ops: &ops })
    }

    pub(super) fn cp_async_arrive(
        &mut self,
        t: u32,
        ins: &Instr,
        noinc: bool,
    ) -> Result<(), SimError> {
        let (bar, _) = self.addr_of(t, &ins.args[0]);
        let (cta, off) = self.shared_loc(t, bar, 8)?;
        let Some(b) = self.ctas[cta as usize].mbars.get_mut(&off) else {
            let at = crate::trace_words::barrier_place(self, cta, off);
            return Err(self.fault(
                t,
                format!("cp.async.mbarrier.arrive on {at}, which holds no initialised mbarrier"),
            ));
        };
        // PTX ISA "cp.async.mbarrier.arrive": without .noinc the pending count is incremented
        // by one before the asynchronous arrive-on, so the two cancel in the phase's count.
        if !noinc {
            b.pending += 1;
        }
        let id = self.cpa.next;
        self.cpa.next += 1;
        self.emit(Event::Issue {
            id: cp_async_op_id(id),
            kind: AsyncKind::CpAsyncArrive,
            by: t,
            barrier: Some((cta, off)),
        })?;
        let line = self.line_of(t);
        self.cpa.jobs.push(CpaJob {
            id,
            thread: t,
            kind: CpaKind::Arrive { cta, off },
            line,
        });
        self.report.async_issued += 1;
        self.after_issue()
    }

    /// Scheduler event `i` of the `cp.async` jobs. An arrival whose thread still has earlier
    /// copies pending retires the earliest of those instead (also a legal next event).
    pub(super) fn retire_cp_async(&mut self, i: usize) -> Result<(), SimError> {
        let (thread, id) = (self.cpa.jobs[i].thread, self.cpa.jobs[i].id);
        let i = if matches!(self.cpa.jobs[i].kind, CpaKind::Arrive { .. }) {
            self.cpa
                .jobs
                .iter()
                .enumerate()
                .filter(|(_, j)| {
                    j.thread == thread && j.id < id && matches!(j.kind, CpaKind::Copy { .. })
                })
                .min_by_key(|(_, j)| j.id)
                .map_or(i, |(k, _)| k)
        } else {
            i
        };
        let job = self.cpa.jobs.swap_remove(i);
        self.complete_cp_async(job)
    }

    fn complete_cp_async(&mut self, job: CpaJob) -> Result<(), SimError> {
        let t = job.thread;
        match job.kind {
            CpaKind::Copy {
                cta,
                dst,
                src,
                bytes,
                src_bytes,
            } => {
                let mut buf = [0u8; 16];
                if src_bytes > 0 && !self.dev.read(src, &mut buf[..src_bytes as usize]) {
                    return Err(self.fault(t, format!("cp.async (PTX line {}) reads {src_bytes} bytes at {src:#x}: not an allocation of this launch", job.line.0)));
                }
                if self.ctas[cta as usize].live == 0 {
                    return Err(self.fault(
                        t,
                        format!(
                            "cp.async (PTX line {}) lands after its CTA exited",
                            job.line.0
                        ),
                    ));
                }
                rules::generic_smem_write(self, t, cta, dst, bytes)?;
                self.ctas[cta as usize].smem[dst as usize..(dst + bytes) as usize]
                    .copy_from_slice(&buf[..bytes as usize]);
                // Written, zero-filled bytes past src-size included (the ISA defines them).
                self.ctas[cta as usize].init.mark(dst, bytes);
                self.emit(Event::Retire {
                    id: cp_async_op_id(job.id),
                })?;
                if self.o.trace {
                    self.ev(
                        Some(t),
                        format!("cp.async (PTX line {}) landed at {dst:#x}", job.line.0),
                    );
                }
            }
            CpaKind::Arrive { cta, off } => {
                let th = &self.threads[t as usize];
                let who = (th.cta, th.warp, job.line.0, job.line.1);
                let op = cp_async_op_id(job.id);
                if self.ctas[cta as usize].mbars.contains_key(&off) {
                    // The barrier's phase now orders every earlier copy of the thread.
                    self.emit(Event::MbarArrive {
                        agent: Agent::Async(op),
                        cta,
                        off,
                        scope: Scope::Cta,
                        release: true,
                    })?;
                }
                self.mbar_arrive(None, cta, off, 1, "cp.async.mbarrier.arrive", who)?;
                self.emit(Event::Retire { id: op })?;
                if self.o.trace {
                    self.ev(
                        Some(t),
                        format!(
                            "cp.async.mbarrier.arrive (PTX line {}) arrived on {}",
                            job.line.0,
                            crate::trace_words::barrier(self, cta, off)
                        ),
                    );
                }
            }
        }
        self.report.async_retired += 1;
        Ok(())
    }
}
