//! Synchronisation: CTA barriers (`bar.sync`), the cluster barrier, mbarriers (arrive,
//! expect-tx and completion of a phase, the `mbarrier.*` instructions) and thread exit.

use crate::decode::{Instr, MbarOp, Opd, Space};
use crate::error::SimError;
use crate::machine::{Machine, Mbar, St, Why};
use crate::mem::{SHARED_WINDOW, WINDOW_BYTES};
use crate::observe::{Agent, Event};
use crate::rules;

impl<'a> Machine<'a> {
    // ---------------------------------------------------------------------------------------
    // mbarriers
    // ---------------------------------------------------------------------------------------

    pub(super) fn mbar_mut(&mut self, cta: u32, off: u32) -> Option<&mut Mbar> {
        self.ctas[cta as usize].mbars.get_mut(&off)
    }

    /// One arrival (count `n`) on the barrier; completes the phase when nothing is pending.
    #[allow(clippy::too_many_arguments)]
    pub fn mbar_arrive(
        &mut self,
        by: Option<u32>,
        cta: u32,
        off: u32,
        n: u32,
        kind: &'static str,
        who: (u32, u32, u32, u32),
    ) -> Result<u64, SimError> {
        if self.ctas[cta as usize].live == 0 {
            return Err(self.rule_at(
                (who.2, who.3),
                who.0,
                who.1,
                "wait-for-peer-commits",
                format!("{kind} on {} after that CTA exited: an arrival that lands after the CTA exited writes into shared memory that is no longer its own; the producer must wait for the last load_empty phases (a producer tail)", crate::deadlock::barrier_words(self, cta, off)),
            ));
        }
        let Some(b) = self.mbar_mut(cta, off) else {
            let e = format!(
                "{kind} on {}, which holds no initialised mbarrier",
                crate::trace_words::barrier_place(self, cta, off)
            );
            return Err(match by {
                Some(t) => self.fault(t, e),
                None => self.rule_at((who.2, who.3), who.0, who.1, "mbarrier-init", e),
            });
        };
        let phase = b.phase;
        if n > b.pending {
            let (count, pending) = (b.count, b.pending);
            let bar = crate::deadlock::barrier_words(self, cta, off);
            let e = format!("{kind} of {n} on {bar}, which expects only {pending} more of its {count} arrivals in this phase (PTX ISA: the pending count must not underflow)");
            return Err(match by {
                Some(t) => self.fault(t, e),
                None => self.rule_at((who.2, who.3), who.0, who.1, "mbarrier-arrivals", e),
            });
        }
        b.pending -= n;
        if who.0 != cta {
            rules::remote_barrier_use(self, cta, off, kind, who)?;
        }
        let rank = self.ctas[who.0 as usize].rank;
        let b = self.mbar_mut(cta, off).expect("looked up above");
        b.last = Some((kind, rank, who.1, who.2, who.3, phase));
        self.try_complete(cta, off)?;
        Ok(phase)
    }

    pub fn mbar_tx(&mut self, cta: u32, off: u32, delta: i64) -> Result<(), SimError> {
        if let Some(b) = self.mbar_mut(cta, off) {
            b.tx += delta;
            if delta > 0 {
                b.expected_tx_total += delta;
            }
            self.try_complete(cta, off)?;
            Ok(())
        } else {
            Err(SimError::Fault {
                cta: self.cta_linear(cta),
                warp: 0,
                lane: 0,
                ptx_line: 0,
                source_line: 0,
                detail: format!(
                    "transaction bytes for {}, which holds no initialised mbarrier",
                    crate::trace_words::barrier_place(self, cta, off)
                ),
            })
        }
    }

    pub(super) fn try_complete(&mut self, cta: u32, off: u32) -> Result<(), SimError> {
        let b = self.ctas[cta as usize]
            .mbars
            .get_mut(&off)
            .expect("checked by the caller");
        if b.pending == 0 && b.tx == 0 {
            b.phase += 1;
            b.pending = b.count;
            b.expected_tx_total = 0;
            let w = std::mem::take(&mut b.waiters);
            let done = b.phase - 1;
            self.report.barrier_phases += 1;
            if self.o.trace {
                let name = crate::trace_words::barrier(self, cta, off);
                self.ev(None, format!("{name} completes phase {done}"));
            }
            self.emit(Event::MbarPhase {
                cta,
                off,
                phase: done,
            })?;
            for t in w {
                self.make_runnable(t);
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------------------------------
    // CTA and cluster barriers
    // ---------------------------------------------------------------------------------------

    pub(super) fn bar_sync(
        &mut self,
        t: u32,
        a: &[Opd],
        arrive_only: bool,
    ) -> Result<bool, SimError> {
        let id = self.rv(t, &a[0]) as u32;
        if id >= 16 {
            return Err(self.fault(t, format!("barrier {id}: a CTA has 16 named barriers")));
        }
        let cta = self.threads[t as usize].cta as usize;
        let explicit = a.get(1).map(|o| self.rv(t, o) as u32);
        let expected = explicit.unwrap_or(self.ctas[cta].live);
        let b = &mut self.ctas[cta].bars[id as usize];
        if b.arrived == 0 {
            b.expected = expected;
            b.explicit = explicit.is_some();
        } else if !b.explicit && explicit.is_none() {
            // Every live thread of the CTA: fewer if some exited since the first arrival.
            b.expected = expected;
        } else if b.expected != expected {
            let (arrived, exp) = (b.arrived, b.expected);
            return Err(self.fault(t, format!("barrier {id} used with {expected} threads while {arrived} other threads wait on it with a count of {exp}")));
        }
        b.arrived += 1;
        let cta = cta as u32;
        self.emit(Event::BarArrive { by: t, cta, id })?;
        let b = &mut self.ctas[cta as usize].bars[id as usize];
        if b.arrived >= b.expected {
            let w = std::mem::take(&mut b.waiters);
            b.arrived = 0;
            let mut leaving = w.clone();
            if !arrive_only {
                leaving.push(t);
            }
            self.emit(Event::BarRelease {
                cta,
                id,
                threads: &leaving,
            })?;
            for x in w {
                self.threads[x as usize].pc += 1;
                self.threads[x as usize].rules.synced = Some("a CTA barrier (bar.sync)");
                self.make_runnable(x);
            }
            self.threads[t as usize].rules.synced = Some("a CTA barrier (bar.sync)");
            Ok(true)
        } else if arrive_only {
            Ok(true)
        } else {
            b.waiters.push(t);
            self.block(t, Why::Bar(id));
            Ok(false)
        }
    }

    pub(super) fn check_cluster_barrier(&mut self) {
        let live: u32 = self.ctas.iter().map(|c| c.live).sum();
        if self.cluster_arrivals >= live {
            self.cluster_phase += 1;
            self.cluster_arrivals = 0;
            let w = std::mem::take(&mut self.cluster_waiters);
            for x in w {
                self.make_runnable(x);
            }
        }
    }

    pub(super) fn exit_thread(&mut self, t: u32) -> Result<(), SimError> {
        rules::on_exit(self, t)?;
        self.progress = self.steps;
        let th = &mut self.threads[t as usize];
        th.st = St::Done;
        let cta = th.cta as usize;
        self.unrun(t);
        self.ctas[cta].live -= 1;
        // A CTA barrier with an implicit count now needs one thread fewer; one with a count
        // given still waits for that many arrivals (PTX ISA, bar.sync: the count of threads).
        for id in 0..16 {
            let b = &self.ctas[cta].bars[id];
            if !b.explicit
                && b.arrived > 0
                && b.arrived >= self.ctas[cta].live
                && b.expected > self.ctas[cta].live
            {
                let b = &mut self.ctas[cta].bars[id];
                let w = std::mem::take(&mut b.waiters);
                b.arrived = 0;
                self.emit(Event::BarRelease {
                    cta: cta as u32,
                    id: id as u32,
                    threads: &w,
                })?;
                for x in w {
                    self.threads[x as usize].pc += 1;
                    self.make_runnable(x);
                }
            }
        }
        // Collectives waiting on this lane can never complete: they fault when retried.
        let first = t - self.threads[t as usize].lane;
        for l in 0..32 {
            let i = first + l;
            if (i as usize) < self.threads.len()
                && self.threads[i as usize].st == St::Block(Why::Collective)
                && self.threads[i as usize].coll_mask & (1 << self.threads[t as usize].lane) != 0
            {
                return Err(self.fault(
                    i,
                    format!(
                        "a warp-collective instruction waits for lane {}, which has exited",
                        self.threads[t as usize].lane
                    ),
                ));
            }
        }
        if self.threads[t as usize].cluster_arrived.is_none() {
            self.check_cluster_barrier();
        }
        if self.ctas[cta].live == 0 {
            rules::on_cta_exit(self, cta as u32)?;
        }
        Ok(())
    }

    // ---------------------------------------------------------------------------------------
    // mbarrier instructions
    // ---------------------------------------------------------------------------------------

    pub(super) fn exec_mbar(
        &mut self,
        t: u32,
        ins: &Instr,
        kind: MbarOp,
        space: Space,
    ) -> Result<bool, SimError> {
        let a = &ins.args;
        let addr_opd = |i: usize| a.get(i).cloned().unwrap_or(Opd::Sink);
        let who = |s: &Self| {
            let th = &s.threads[t as usize];
            let (pl, sl) = s.line_of(t);
            (th.cta, th.warp, pl, sl)
        };
        let loc = |s: &Self, o: &Opd| -> Result<(u32, u32), SimError> {
            let (v, _) = s.addr_of(t, o);
            let v = if space == Space::Generic {
                if !(SHARED_WINDOW..SHARED_WINDOW + WINDOW_BYTES).contains(&v) {
                    return Err(s.fault(
                        t,
                        format!("mbarrier at generic address {v:#x}, not shared memory"),
                    ));
                }
                v - SHARED_WINDOW
            } else {
                v
            };
            let (c, off) = s.shared_loc(t, v, 8)?;
            if off % 8 != 0 {
                return Err(s.fault(
                    t,
                    format!("mbarrier at shared-memory offset {off:#x}: not 8-byte aligned"),
                ));
            }
            let own = s.threads[t as usize].cta;
            if space == Space::Shared && c != own {
                let d = crate::dsmem::foreign_detail(v, own);
                return Err(s.rule(t, "cluster-address-undefined", d));
            }
            Ok((c, off))
        };
        match kind {
            MbarOp::Init => {
                self.count(t, ins);
                let (c, off) = loc(self, &addr_opd(0))?;
                let n = self.rv(t, &a[1]) as u32;
                if n == 0 || n > (1 << 20) - 1 {
                    return Err(self.fault(
                        t,
                        format!("mbarrier.init with count {n}: it must be 1..2^20-1"),
                    ));
                }
                self.ctas[c as usize].mbars.insert(
                    off,
                    Mbar {
                        count: n,
                        pending: n,
                        tx: 0,
                        phase: 0,
                        waiters: Vec::new(),
                        last: None,
                        expected_tx_total: 0,
                        remote_commit: None,
                        init_by: t,
                        init_seq: {
                            self.seq += 1;
                            self.seq
                        },
                        init_at: if ins.loc.caller_line != 0 {
                            (ins.loc.caller_file, ins.loc.caller_line)
                        } else {
                            (ins.loc.file, ins.loc.line)
                        },
                    },
                );
                // Generic-proxy view: the barrier word is written.
                rules::generic_smem_write(self, t, c, off, 8)?;
                self.emit(Event::MbarInit { by: t, cta: c, off })?;
                self.ctas[c as usize].init.mark(off, 8);
            }
            MbarOp::Inval => {
                self.count(t, ins);
                let (c, off) = loc(self, &addr_opd(0))?;
                self.ctas[c as usize].mbars.remove(&off);
                self.emit(Event::MbarInval { by: t, cta: c, off })?;
            }
            MbarOp::Arrive { .. } | MbarOp::ArriveDrop => {
                let expect_tx = matches!(
                    kind,
                    MbarOp::Arrive {
                        expect_tx: true,
                        ..
                    }
                );
                self.count(t, ins);
                let (c, off) = loc(self, &addr_opd(1))?;
                rules::on_handoff(self, t, "an mbarrier arrive")?;
                self.emit(Event::MbarUse {
                    agent: Agent::Thread(t),
                    by: t,
                    cta: c,
                    off,
                    what: "an mbarrier.arrive",
                })?;
                if expect_tx {
                    let tx = self.rv(t, &a[2]) as i64;
                    self.mbar_tx(c, off, tx)?;
                }
                let n = if expect_tx {
                    1
                } else {
                    a.get(2).map_or(1, |o| self.rv(t, o) as u32)
                };
                let kname = if expect_tx {
                    "mbarrier.arrive.expect_tx"
                } else {
                    "mbarrier.arrive"
                };
                if kind == MbarOp::ArriveDrop {
                    if let Some(b) = self.mbar_mut(c, off) {
                        b.count = b.count.saturating_sub(n);
                    }
                }
                let w = who(self);
                if self.mbar_mut(c, off).is_some() {
                    let (scope, release) = (self.scope_of(ins.key), !self.relaxed(ins.key));
                    self.emit(Event::MbarArrive {
                        agent: Agent::Thread(t),
                        cta: c,
                        off,
                        scope,
                        release,
                    })?;
                }
                let ph = self.mbar_arrive(Some(t), c, off, n, kname, w)?;
                rules::on_arrive(self, t, c, off, ph);
                let d = a[0].clone();
                self.wr(t, &d, ph);
            }
            MbarOp::ExpectTx | MbarOp::CompleteTx => {
                self.count(t, ins);
                let (c, off) = loc(self, &addr_opd(0))?;
                self.emit(Event::MbarUse {
                    agent: Agent::Thread(t),
                    by: t,
                    cta: c,
                    off,
                    what: "an mbarrier.expect_tx/complete_tx",
                })?;
                let tx = self.rv(t, &a[1]) as i64;
                self.mbar_tx(c, off, if kind == MbarOp::ExpectTx { tx } else { -tx })?;
            }
            MbarOp::TryWaitParity | MbarOp::TestWaitParity | MbarOp::TryWait | MbarOp::TestWait => {
                let (c, off) = loc(self, &addr_opd(1))?;
                self.emit(Event::MbarUse {
                    agent: Agent::Thread(t),
                    by: t,
                    cta: c,
                    off,
                    what: "an mbarrier wait",
                })?;
                let Some(b) = self.ctas[c as usize].mbars.get(&off) else {
                    let at = crate::trace_words::barrier_place(self, c, off);
                    return Err(self.fault(
                        t,
                        format!("mbarrier wait on {at}, which holds no initialised mbarrier"),
                    ));
                };
                let phase = b.phase;
                let parity = match kind {
                    MbarOp::TryWaitParity | MbarOp::TestWaitParity => self.rv(t, &a[2]) as u32 & 1,
                    // The state token of mbarrier.arrive is the phase it arrived in.
                    _ => (self.rv(t, &a[2]) & 1) as u32,
                };
                let done = (phase & 1) as u32 != parity;
                if done {
                    self.count(t, ins);
                    // The completed phase of this parity: the latest one.
                    // (none: the parity-1 wait of a fresh barrier, before phase 0).
                    let completed = if phase == 0 {
                        0
                    } else if (phase - 1) & 1 == parity as u64 {
                        phase
                    } else {
                        phase - 1
                    };
                    rules::observe(self, t, c, off, completed);
                    let (scope, acquire) = (self.scope_of(ins.key), !self.relaxed(ins.key));
                    self.emit(Event::MbarObserve {
                        by: t,
                        cta: c,
                        off,
                        phase: completed as i64 - 1,
                        scope,
                        acquire,
                    })?;
                    self.threads[t as usize].rules.synced = Some("an mbarrier wait");
                    let d = a[0].clone();
                    self.wr(t, &d, 1);
                } else if matches!(kind, MbarOp::TestWaitParity | MbarOp::TestWait) {
                    self.count(t, ins);
                    let d = a[0].clone();
                    self.wr(t, &d, 0);
                } else {
                    // try_wait may suspend until the phase completes: block here and retry
                    // when it does (no spinning, and a deadlock is seen at once).
                    self.ctas[c as usize]
                        .mbars
                        .get_mut(&off)
                        .expect("looked up above")
                        .waiters
                        .push(t);
                    self.block(
                        t,
                        Why::Mbar {
                            cta: c,
                            off,
                            parity,
                        },
                    );
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
}
