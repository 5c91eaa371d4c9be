//! Asynchronous operations: TMA and tcgen05 issue (bulk tensor copies, MMA, commit, copy,
//! shift) and their retirement, whenever the scheduler chooses to complete one.

use crate::decode::{Instr, Opd};
use crate::error::SimError;
use crate::glue::{self, MapId};
use crate::machine::{Machine, St, StoreJob, TcJob, TmaJob, Why};
use crate::mem::{PARAM_WINDOW, WINDOW_BYTES};
use crate::observe::{Access, Agent, AsyncKind, Event, Mem, Proxy, Scope};
use crate::rules;
use crate::sched::Policy;

impl<'a> Machine<'a> {
    // ---------------------------------------------------------------------------------------
    // TMA and tcgen05 issue
    // ---------------------------------------------------------------------------------------

    pub(super) fn map_of(&self, t: u32, o: &Opd) -> Result<MapId, SimError> {
        let v = self.rv(t, o);
        let off = if (PARAM_WINDOW..PARAM_WINDOW + WINDOW_BYTES).contains(&v) {
            (v - PARAM_WINDOW) as u32
        } else if v < self.params.len() as u64 {
            v as u32
        } else {
            return Err(self.fault(t, format!("cp.async.bulk.tensor with tensor-map address {v:#x}: the simulator resolves only tensor maps passed as kernel parameters (__grid_constant__ CUtensorMap)")));
        };
        match self.maps.iter().position(|(o, _)| *o == off) {
            Some(i) => Ok(i),
            None => Err(self.fault(t, format!("cp.async.bulk.tensor with tensor-map address {v:#x}: no tensor-map parameter starts there"))),
        }
    }

    pub(super) fn coords(&self, t: u32, c: &[Opd]) -> [i32; 5] {
        let mut out = [0i32; 5];
        for (i, o) in c.iter().take(5).enumerate() {
            out[i] = self.rv(t, o) as i32;
        }
        out
    }

    pub(super) fn tma_load(
        &mut self,
        t: u32,
        ins: &Instr,
        multicast: bool,
        cg2: bool,
    ) -> Result<(), SimError> {
        let a = &ins.args;
        let (dst, _) = self.addr_of(t, &a[0]);
        let (map, coords) = match &a[1] {
            Opd::Tensor(m, c) => (self.map_of(t, m)?, self.coords(t, c)),
            _ => return Err(self.unsupported(ins)),
        };
        let (bar, _) = self.addr_of(t, &a[2]);
        let bytes = glue::box_bytes(&self.maps[map].1);
        let (dc, doff) = self.shared_loc(t, dst, bytes)?;
        let (bc, boff) = self.shared_loc(t, bar, 8)?;
        let (dsts, bars) = if multicast {
            let m = self.rv(t, &a[3]) as u32 & 0xFFFF;
            let mut d = Vec::new();
            let mut b = Vec::new();
            for r in 0..self.cl_size {
                if m & (1 << r) != 0 {
                    d.push((r, doff));
                    // With .cta_group::2 the barrier is the one of the destination's pair leader.
                    b.push((if cg2 { r & !1 } else { r }, boff));
                }
            }
            if d.is_empty() {
                return Err(self.fault(
                    t,
                    "cp.async.bulk.tensor .multicast::cluster with an empty CTA mask",
                ));
            }
            (d, b)
        } else {
            (vec![(dc, doff)], vec![(bc, boff)])
        };
        if !cg2 && !multicast && bc != dc {
            return Err(self.fault(t, "cp.async.bulk.tensor: without .cta_group::2 the mbarrier must be in the destination CTA"));
        }
        if cg2 && (bc & !1) != (dc & !1) {
            return Err(self.fault(t, "cp.async.bulk.tensor .cta_group::2: the mbarrier must be in the destination CTA or its peer"));
        }
        // Charged by the bytes it copies, every destination counted (budget.rs).
        self.charge(u64::from(bytes) * dsts.len() as u64 / crate::budget::BYTES_PER_STEP)?;
        let mut recs = Vec::new();
        for &(c, o) in &dsts {
            let rec = rules::tma_load_issue(self, t, c, o, bytes)?;
            crate::attrib::tma_load(self, c, rec, self.maps[map].1.base, &coords);
            recs.push(rec);
        }
        self.seq += 1;
        let id = self.seq;
        for &(c, o) in &bars {
            self.emit(Event::MbarUse {
                agent: Agent::Thread(t),
                by: t,
                cta: c,
                off: o,
                what: "a TMA load completing on it (complete_tx)",
            })?;
        }
        self.emit(Event::Issue {
            id,
            kind: AsyncKind::TmaLoad,
            by: t,
            barrier: bars.first().copied(),
        })?;
        for &(c, o) in &dsts {
            self.emit(Event::Mem {
                agent: Agent::Async(id),
                mem: Mem::Shared(c),
                proxy: Proxy::Async,
                access: Access::Write,
                lo: o as u64,
                hi: (o + bytes) as u64,
            })?;
        }
        let line = self.line_of(t);
        self.tma.push(TmaJob {
            thread: t,
            map,
            coords,
            dst: dsts,
            mbar: bars,
            bytes,
            rec: recs,
            line,
            id,
        });
        if self.o.trace {
            let what = self.tma.last().map_or_else(String::new, |j| {
                crate::trace_words::tma_issued(self, line.0, &coords[..2], j.bytes, &j.dst, &j.mbar)
            });
            self.ev(Some(t), what);
        }
        self.report.async_issued += 1;
        self.after_issue()
    }

    pub(super) fn tma_store(&mut self, t: u32, ins: &Instr) -> Result<(), SimError> {
        let a = &ins.args;
        let (map, coords) = match &a[0] {
            Opd::Tensor(m, c) => (self.map_of(t, m)?, self.coords(t, c)),
            _ => return Err(self.unsupported(ins)),
        };
        let (src, _) = self.addr_of(t, &a[1]);
        let bytes = glue::box_bytes(&self.maps[map].1);
        let (c, off) = self.shared_loc(t, src, bytes)?;
        if c != self.threads[t as usize].cta {
            return Err(self.fault(t, "a TMA store reads another CTA's shared memory"));
        }
        self.charge(u64::from(bytes) / crate::budget::BYTES_PER_STEP)?;
        let id = self.store_done.len() as u32;
        self.store_done.push(false);
        rules::tma_store_issue(self, t, c, off, bytes, id)?;
        let op = crate::observe::store_op_id(id);
        self.emit(Event::Issue {
            id: op,
            kind: AsyncKind::TmaStore,
            by: t,
            barrier: None,
        })?;
        self.emit(Event::Mem {
            agent: Agent::Async(op),
            mem: Mem::Shared(c),
            proxy: Proxy::Async,
            access: Access::Read,
            lo: off as u64,
            hi: (off + bytes) as u64,
        })?;
        // Its global writes, checked from its issue (a box the store cannot write faults when
        // it executes).
        if !self.observers.is_empty() {
            let smem = &self.ctas[c as usize].smem;
            if let Ok(ranges) = glue::tma_store_ranges(&self.maps[map].1, &coords, smem, off) {
                self.observe_tma_global(op, ranges, Access::Write)?;
            }
        }
        let line = self.line_of(t);
        self.stores.push(StoreJob {
            id,
            thread: t,
            map,
            coords,
            cta: c,
            src: off,
            line,
        });
        self.threads[t as usize].bulk_open.push(id);
        if self.o.trace {
            self.ev(
                Some(t),
                format!(
                    "TMA store issued (PTX line {}), from shared-memory offset {off:#x} to the box at {}",
                    line.0,
                    crate::trace_words::coords(&coords[..2])
                ),
            );
        }
        self.report.async_issued += 1;
        self.after_issue()
    }

    pub(crate) fn bulk_wait_done(&self, t: u32, n: u32) -> bool {
        let th = &self.threads[t as usize];
        let pending = th
            .bulk_groups
            .iter()
            .filter(|g| g.iter().any(|id| !self.store_done[*id as usize]))
            .count();
        // Groups beyond the newest n must be complete.
        let older = th.bulk_groups.len().saturating_sub(n as usize);
        th.bulk_groups
            .iter()
            .take(older)
            .all(|g| g.iter().all(|id| self.store_done[*id as usize]))
            || pending == 0
    }

    pub(super) fn tc_mma(
        &mut self,
        t: u32,
        ins: &Instr,
        cg2: bool,
        kind: crate::units::mma_kinds::MmaKind,
    ) -> Result<(), SimError> {
        rules::cta_group(self, t, cg2, "tcgen05.mma")?;
        rules::on_tcgen05(self, t, "tcgen05.mma")?;
        let a = &ins.args;
        let (d, _) = self.addr_of(t, &a[0]);
        // `[a-tmem]`: A in tensor memory, carried tagged in the descriptor's word
        // (`units::mma_ts`).
        let ad = match &a[1] {
            Opd::Addr(..) => crate::units::mma_ts::tag(self.addr_of(t, &a[1]).0 as u32),
            x => self.rv(t, x),
        };
        let bd = self.rv(t, &a[2]);
        let idesc = self.rv(t, &a[3]) as u32;
        let acc = self.rv(t, &a[4]) != 0;
        let cta = self.threads[t as usize].cta;
        if cg2 && !self.ctas[cta as usize].rank.is_multiple_of(2) {
            return Err(self.fault(t, format!("tcgen05.mma.cta_group::2 issued by the CTA of cluster rank {}: only the pair's leader (even rank) may issue it", self.ctas[cta as usize].rank)));
        }
        if cg2 && cta + 1 >= self.cl_size {
            return Err(self.fault(
                t,
                "tcgen05.mma.cta_group::2 in a CTA without a peer (the cluster needs an even size)",
            ));
        }
        // The kind's own descriptor fields, at issue (the rules below read only the layout,
        // which every dense kind shares: `glue::mma_reads`).
        let group = if cg2 { 2 } else { 1 };
        let decoded = if crate::units::mma_ts::tmem_a(ad).is_some() {
            crate::units::mma_ts::MmaTs::decode_kind(kind, idesc, bd, group).map(|_| ())
        } else {
            crate::units::mma::MmaF16::decode_kind(kind, idesc, ad, bd, group).map(|_| ())
        };
        if let Err(e) = decoded {
            let line = self.line_of(t);
            return Err(self.tc_unit_fault(t, cta, line, "tcgen05.mma", &e));
        }
        // Charged by its multiply-adds (budget.rs).
        self.charge(crate::budget::mma_macs(idesc) / crate::budget::MACS_PER_STEP)?;
        self.seq += 1;
        let seq = self.seq;
        rules::mma_issue(self, t, cta, cg2, idesc, ad, bd, d as u32, seq)?;
        crate::attrib::mma(self, t, cta, ins.key, ad, bd);
        self.observe_mma(t, cta, cg2, idesc, ad, bd, d as u32, seq)?;
        let line = self.line_of(t);
        self.tcq[t as usize].push_back(TcJob::Mma {
            cta,
            cg2,
            kind,
            idesc,
            a: ad,
            b: bd,
            d: d as u32,
            acc,
            seq,
            line,
        });
        if self.tcq[t as usize].len() == 1 {
            self.tc_active.push(t);
        }
        if self.o.trace {
            self.ev(
                Some(t),
                format!(
                    "tcgen05.mma issued (PTX line {}), D at column {}, accumulate {acc}",
                    line.0,
                    d & 0xFFFF
                ),
            );
        }
        self.report.async_issued += 1;
        self.after_issue()
    }

    pub(super) fn tc_commit(
        &mut self,
        t: u32,
        ins: &Instr,
        cg2: bool,
        multicast: bool,
    ) -> Result<(), SimError> {
        rules::cta_group(self, t, cg2, "tcgen05.commit")?;
        let a = &ins.args;
        let (bar, _) = self.addr_of(t, &a[0]);
        let (bc, boff) = self.shared_loc(t, bar, 8)?;
        let targets = if multicast {
            let m = self.rv(t, &a[1]) as u32 & 0xFFFF;
            (0..self.cl_size)
                .filter(|r| m & (1 << r) != 0)
                .map(|r| (r, boff))
                .collect()
        } else {
            vec![(bc, boff)]
        };
        self.seq += 1;
        let id = self.seq;
        self.emit(Event::Issue {
            id,
            kind: AsyncKind::Tcgen05,
            by: t,
            barrier: None,
        })?;
        for &(c, o) in &targets {
            self.emit(Event::MbarUse {
                agent: Agent::Thread(t),
                by: t,
                cta: c,
                off: o,
                what: "a tcgen05.commit arriving on it",
            })?;
        }
        rules::commit_issued(self, t);
        let mask = multicast.then(|| self.rv(t, &a[1]) as u16);
        let cta = self.threads[t as usize].cta;
        crate::attrib::commit(self, t, cta, ins.key, mask);
        let line = self.line_of(t);
        let th = &self.threads[t as usize];
        let warp = th.warp;
        let traced = self
            .o
            .trace
            .then(|| crate::trace_words::commit_issued(self, line.0, &targets));
        self.tcq[t as usize].push_back(TcJob::Commit {
            targets,
            line,
            warp,
            id,
        });
        if self.tcq[t as usize].len() == 1 {
            self.tc_active.push(t);
        }
        if let Some(what) = traced {
            self.ev(Some(t), what);
        }
        self.report.async_issued += 1;
        self.after_issue()
    }

    /// `tcgen05.cp`: with `cta_group::2` into the tensor memory of the issuing CTA and of its
    /// peer (PTX ISA 9.7.16.9.2), which either CTA of the pair may issue (Table 46, "Issue
    /// Granularity": "a single thread from the CTA-Pair").
    pub(super) fn tc_cp(
        &mut self,
        t: u32,
        ins: &Instr,
        shape: crate::units::tmem_cp::CpShape,
        cg2: bool,
    ) -> Result<(), SimError> {
        rules::cta_group(self, t, cg2, "tcgen05.cp")?;
        rules::on_tcgen05(self, t, "tcgen05.cp")?;
        let bytes = shape.rows() * shape.row_bytes() * if cg2 { 2 } else { 1 };
        self.charge(u64::from(bytes) / crate::budget::BYTES_PER_STEP)?;
        let (taddr, _) = self.addr_of(t, &ins.args[0]);
        let desc = self.rv(t, &ins.args[1]);
        let cta = self.threads[t as usize].cta;
        let peer = if !cg2 {
            None
        } else if self.ctas[cta as usize].rank.is_multiple_of(2) {
            Some(cta + 1)
        } else {
            Some(cta - 1)
        };
        if peer.is_some_and(|p| p >= self.cl_size) {
            return Err(self.fault(
                t,
                "tcgen05.cp.cta_group::2 in a CTA without a peer (the cluster needs an even size)",
            ));
        }
        self.seq += 1;
        let id = self.seq;
        self.emit(Event::Issue {
            id,
            kind: AsyncKind::Tcgen05,
            by: t,
            barrier: None,
        })?;
        // Per CTA (the peer too with cta_group::2): its shared-memory source (async proxy) and
        // the lanes of `row_bytes` per row: row_bytes / 4 columns.
        for c in std::iter::once(cta).chain(peer) {
            self.observe_tc_cp_source(id, c, desc, shape.rows(), shape.row_bytes())?;
            self.emit(Event::Tmem {
                agent: Agent::Async(id),
                cta: c,
                quarters: 0xF,
                lo: taddr as u32 & 0xFFFF,
                hi: (taddr as u32 & 0xFFFF) + shape.row_bytes() / 4,
                access: Access::Write,
            })?;
        }
        self.emit(Event::Retire { id })?;
        let line = self.line_of(t);
        self.tcq[t as usize].push_back(TcJob::Cp {
            cta,
            peer,
            taddr: taddr as u32,
            desc,
            shape,
            line,
        });
        if self.tcq[t as usize].len() == 1 {
            self.tc_active.push(t);
        }
        if self.o.trace {
            self.ev(
                Some(t),
                format!(
                    "tcgen05.cp issued (PTX line {}), shape {shape:?} to {taddr:#x}",
                    line.0
                ),
            );
        }
        self.report.async_issued += 1;
        self.after_issue()
    }

    pub(super) fn tc_shift(&mut self, t: u32, ins: &Instr, cg2: bool) -> Result<(), SimError> {
        rules::cta_group(self, t, cg2, "tcgen05.shift")?;
        rules::on_tcgen05(self, t, "tcgen05.shift")?;
        let taddr = self.rv(t, &ins.args[0]) as u32;
        let cta = self.threads[t as usize].cta;
        if cg2 && (!self.ctas[cta as usize].rank.is_multiple_of(2) || cta + 1 >= self.cl_size) {
            return Err(self.fault(
                t,
                "tcgen05.shift.cta_group::2 issued by a CTA that is not the even rank of a pair",
            ));
        }
        self.observe_tc_shift(t, cta, cg2, taddr)?;
        let line = self.line_of(t);
        self.tcq[t as usize].push_back(TcJob::Shift {
            cta,
            cg2,
            taddr,
            line,
        });
        if self.tcq[t as usize].len() == 1 {
            self.tc_active.push(t);
        }
        if self.o.trace {
            self.ev(
                Some(t),
                format!("tcgen05.shift issued (PTX line {}) at {taddr:#x}", line.0),
            );
        }
        self.report.async_issued += 1;
        self.after_issue()
    }

    pub(super) fn after_issue(&mut self) -> Result<(), SimError> {
        if self.o.policy == Policy::AsyncEarly {
            while self.pending_events() > 0 {
                self.retire(0)?;
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------------------------------
    // Asynchronous completions
    // ---------------------------------------------------------------------------------------

    /// Retire pending event number `i` (in the order TMA loads, stores, tcgen05 queues).
    pub fn retire(&mut self, i: usize) -> Result<(), SimError> {
        self.progress = self.steps;
        if i < self.tma.len() {
            let j = self.tma.swap_remove(i);
            return self.retire_tma(j);
        }
        let i = i - self.tma.len();
        if i < self.stores.len() {
            let s = self.stores.swap_remove(i);
            return self.retire_store(s);
        }
        let i = i - self.stores.len();
        if i >= self.tc_active.len() {
            let i = i - self.tc_active.len();
            let clc = self
                .slots
                .get(self.cur)
                .map_or(0, |s| self.clc.pending(s.linear));
            if i < clc {
                return self.retire_clc(i);
            }
            return self.retire_cp_async(i - clc);
        }
        let t = self.tc_active[i];
        let job = self.tcq[t as usize]
            .pop_front()
            .expect("active queues are not empty");
        if self.tcq[t as usize].is_empty() {
            self.tc_active.swap_remove(i);
        }
        self.retire_tc(t, job)
    }

    pub(super) fn retire_tma(&mut self, j: TmaJob) -> Result<(), SimError> {
        let th = &self.threads[j.thread as usize];
        let who = (th.cta, th.warp, j.line.0, j.line.1);
        for (k, &(c, o)) in j.dst.iter().enumerate() {
            if self.ctas[c as usize].live == 0 {
                return Err(self.rule_at(
                    j.line,
                    who.0,
                    who.1,
                    "wait-for-peer-commits",
                    format!("a TMA load lands in CTA rank {c} after it exited"),
                ));
            }
            let desc = &self.maps[j.map].1;
            let smem = &mut self.ctas[c as usize].smem;
            let mut log = Vec::new();
            if let Err(e) = glue::tma_load_logged(desc, &j.coords, self.dev, smem, o, &mut log) {
                return Err(SimError::Fault {
                    cta: self.cta_linear(who.0),
                    warp: who.1,
                    lane: self.threads[j.thread as usize].lane,
                    ptx_line: j.line.0,
                    source_line: j.line.1,
                    detail: crate::glue::unit_message("TMA load", &e),
                });
            }
            // The whole box is written, out-of-bound elements included (their fill is defined).
            self.ctas[c as usize].init.mark(o, j.bytes);
            if k == 0 {
                // The global bytes it read (once for all multicast destinations): between
                // clusters (xrace, as (address, length)) and within this one (happens-before).
                if self.xr.on() {
                    let seen: Vec<(u64, u64)> = log.iter().map(|&(a, b)| (a, b - a)).collect();
                    self.global_ranges(j.thread, j.line, &seen, false)?;
                }
                self.observe_tma_global(j.id, log, Access::Read)?;
            }
            let (bc, bo) = j.mbar[k];
            if bc != who.0 && self.ctas[bc as usize].mbars.contains_key(&bo) {
                rules::remote_barrier_use(self, bc, bo, "a TMA load's complete_tx", who)?;
            }
            let phase = self.ctas[bc as usize].mbars.get(&bo).map_or(0, |b| b.phase);
            rules::tma_landed(self, c, j.rec[k], bc, bo, phase);
            if self.ctas[bc as usize].mbars.contains_key(&bo) {
                // complete_tx: an arrive-on performed in the barrier's CTA (async proxy).
                self.emit(Event::MbarArrive {
                    agent: Agent::Async(j.id),
                    cta: bc,
                    off: bo,
                    scope: Scope::Cluster,
                    release: true,
                })?;
            }
            self.mbar_tx(bc, bo, -(j.bytes as i64)).map_err(|_| {
                self.rule_at(
                    j.line,
                    who.0,
                    who.1,
                    "mbarrier-init",
                    format!(
                        "a TMA load completes on {}, which holds no initialised mbarrier",
                        crate::trace_words::barrier_place(self, bc, bo)
                    ),
                )
            })?;
        }
        self.emit(Event::Retire { id: j.id })?;
        if self.o.trace {
            self.ev(
                Some(j.thread),
                crate::trace_words::tma_landed(self, j.line.0, j.bytes, &j.dst, &j.mbar),
            );
        }
        self.report.async_retired += 1;
        Ok(())
    }

    pub(super) fn retire_store(&mut self, s: StoreJob) -> Result<(), SimError> {
        let desc = &self.maps[s.map].1;
        let bytes = glue::box_bytes(desc);
        let th = &self.threads[s.thread as usize];
        let (by, warp) = (th.cta, th.warp);
        self.check_init_at(
            s.line,
            by,
            warp,
            s.cta,
            &[(s.src, s.src.saturating_add(bytes))],
            "a TMA store (its source)",
        )?;
        let desc = &self.maps[s.map].1;
        let smem = &self.ctas[s.cta as usize].smem;
        let mut seen = self.xr.on().then(Vec::new);
        if let Err(e) = glue::tma_store(desc, &s.coords, smem, s.src, self.dev, seen.as_mut()) {
            return Err(SimError::Fault {
                cta: self.cta_linear(s.cta),
                warp: self.threads[s.thread as usize].warp,
                lane: self.threads[s.thread as usize].lane,
                ptx_line: s.line.0,
                source_line: s.line.1,
                detail: crate::glue::unit_message("TMA store", &e),
            });
        }
        if let Some(seen) = seen {
            self.global_ranges(s.thread, s.line, &seen, true)?;
        }
        self.store_done[s.id as usize] = true;
        self.emit(Event::Retire {
            id: crate::observe::store_op_id(s.id),
        })?;
        // A thread waiting in cp.async.bulk.wait_group may go on.
        if let St::Block(Why::BulkWait(n)) = self.threads[s.thread as usize].st {
            if self.bulk_wait_done(s.thread, n) {
                self.make_runnable(s.thread);
            }
        }
        if self.o.trace {
            self.ev(
                Some(s.thread),
                format!(
                    "TMA store (PTX line {}) read shared memory and wrote global memory",
                    s.line.0
                ),
            );
        }
        self.report.async_retired += 1;
        Ok(())
    }

    /// A tensor-core unit (`what`: tcgen05.mma, .cp or .shift) refused the operation thread `t`
    /// issued at `line`, working on CTA `cta`: a fault naming the issuer and the unit's reason.
    fn tc_unit_fault(
        &self,
        t: u32,
        cta: u32,
        line: (u32, u32),
        what: &str,
        e: &crate::units::UnitError,
    ) -> SimError {
        let th = &self.threads[t as usize];
        SimError::Fault {
            cta: self.cta_linear(cta),
            warp: th.warp,
            lane: th.lane,
            ptx_line: line.0,
            source_line: line.1,
            detail: crate::glue::unit_message(what, e),
        }
    }

    pub(super) fn retire_tc(&mut self, t: u32, job: TcJob) -> Result<(), SimError> {
        match job {
            TcJob::Mma {
                cta,
                cg2,
                kind,
                idesc,
                a,
                b,
                d,
                acc,
                seq,
                line,
            } => {
                self.check_mma_operands(t, cta, cg2, idesc, a, b, line)?;
                self.check_mma_a_init(t, cta, cg2, idesc, a, b, line)?;
                self.mma_accumulator(t, cta, cg2, idesc, d, acc, line)?;
                let r = if cg2 {
                    let (lo, hi) = self.ctas.split_at_mut(cta as usize + 1);
                    let c0 = &mut lo[cta as usize];
                    let c1 = &mut hi[0];
                    glue::mma(
                        kind,
                        idesc,
                        a,
                        b,
                        &[&c0.smem, &c1.smem],
                        &mut [&mut c0.tmem, &mut c1.tmem],
                        d,
                        acc,
                        true,
                    )
                } else {
                    let c0 = &mut self.ctas[cta as usize];
                    glue::mma(
                        kind,
                        idesc,
                        a,
                        b,
                        &[&c0.smem],
                        &mut [&mut c0.tmem],
                        d,
                        acc,
                        false,
                    )
                };
                r.map_err(|e| self.tc_unit_fault(t, cta, line, "tcgen05.mma", &e))?;
                let _ = seq;
                if self.o.trace {
                    self.ev(
                        Some(t),
                        format!("tcgen05.mma (PTX line {}) completed", line.0),
                    );
                }
            }
            TcJob::Commit {
                targets,
                line,
                warp,
                id,
            } => {
                let cta = self.threads[t as usize].cta;
                let mut arrived = Vec::new();
                for (c, off) in targets {
                    if self.ctas[c as usize].mbars.contains_key(&off) {
                        self.emit(Event::MbarArrive {
                            agent: Agent::Async(id),
                            cta: c,
                            off,
                            scope: Scope::Cluster,
                            release: true,
                        })?;
                    }
                    let ph = self.mbar_arrive(
                        None,
                        c,
                        off,
                        1,
                        "tcgen05.commit",
                        (cta, warp, line.0, line.1),
                    )?;
                    if c != cta {
                        if let Some(b) = self.ctas[c as usize].mbars.get_mut(&off) {
                            b.remote_commit = Some(ph);
                        }
                    }
                    arrived.push((c, off, ph));
                }
                if self.o.trace {
                    self.ev(
                        Some(t),
                        crate::trace_words::commit_arrived(self, line.0, &arrived),
                    );
                }
                rules::commit_arrived(self, t, &arrived);
                crate::attrib::commit_arrived(self, t, &arrived);
                self.emit(Event::Retire { id })?;
            }
            TcJob::Cp {
                cta,
                peer,
                taddr,
                desc,
                shape,
                line,
            } => {
                // cta_group::2: each CTA of the pair copies from its own shared memory at the
                // descriptor's offsets, as an MMA's operands are split (see units::mma).
                let col = crate::units::tmem::taddr_col(taddr);
                for c in std::iter::once(cta).chain(peer) {
                    self.check_cp_source(t, c, desc, shape.rows(), shape.row_bytes(), line)?;
                    self.ctas[c as usize]
                        .tinit
                        .mark(0..128, col, shape.row_bytes() / 4);
                    let cc = &mut self.ctas[c as usize];
                    if let Err(e) = glue::tc_cp(&mut cc.tmem, &cc.smem, taddr, desc, shape) {
                        return Err(self.tc_unit_fault(t, c, line, "tcgen05.cp", &e));
                    }
                }
                if self.o.trace {
                    self.ev(
                        Some(t),
                        format!("tcgen05.cp (PTX line {}) completed", line.0),
                    );
                }
            }
            TcJob::Shift {
                cta,
                cg2,
                taddr,
                line,
            } => {
                let peers = if cg2 { cta..cta + 2 } else { cta..cta + 1 };
                for c in peers {
                    if let Err(e) = self.ctas[c as usize].tmem.shift_down(taddr) {
                        return Err(self.tc_unit_fault(t, c, line, "tcgen05.shift", &e));
                    }
                }
                if self.o.trace {
                    self.ev(
                        Some(t),
                        format!("tcgen05.shift (PTX line {}) completed", line.0),
                    );
                }
            }
        }
        self.report.async_retired += 1;
        Ok(())
    }
}
