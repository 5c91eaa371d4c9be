//! Warp collectives: the rendezvous of a warp's lanes, then `shfl`, `vote`, `elect`,
//! `bar.warp.sync` and the tcgen05.ld/st lanes over the lanes that arrived.

use super::Loc;
use crate::decode::{Instr, Op, Opd, Shfl, Vote};
use crate::error::SimError;
use crate::machine::{Machine, St, Why};
use crate::observe::{Access, Agent, Event};
use crate::rules;

impl<'a> Machine<'a> {
    /// `activemask` (PTX ISA "activemask": the threads of the warp that are currently active,
    /// executing the instruction with the calling thread): the lanes of thread `t`'s warp at
    /// its pc that step it together in this lockstep round (`lockstep.rs`), so lanes of a
    /// divergent branch see only their branch. The first lane of the group computes the mask;
    /// the others of the same round reuse it (they are back to back, their pcs have moved on).
    pub(super) fn active_lanes(&mut self, t: u32) -> u32 {
        let pc = self.threads[t as usize].pc;
        let lane = self.threads[t as usize].lane;
        let key = t - lane;
        if let Some(&(p, r, m)) = self.activemask.get(&key) {
            if p == pc && r == self.round && self.round != 0 && m & (1 << lane) != 0 {
                return m;
            }
        }
        let mut m = 1u32 << lane;
        for x in self.warp_range(t) {
            let th = &self.threads[x as usize];
            if th.st == St::Run && th.pc == pc {
                m |= 1 << th.lane;
            }
        }
        self.activemask.insert(key, (pc, self.round, m));
        m
    }

    pub(super) fn warp_present(&self, t: u32) -> u32 {
        let th = &self.threads[t as usize];
        let first = t - th.lane;
        let mut m = 0u32;
        for l in 0..32 {
            let i = first + l;
            if (i as usize) < self.threads.len()
                && self.threads[i as usize].cta == th.cta
                && self.threads[i as usize].warp == th.warp
                && self.threads[i as usize].st != St::Done
            {
                m |= 1 << l;
            }
        }
        m
    }

    // ---------------------------------------------------------------------------------------
    // Warp collectives
    // ---------------------------------------------------------------------------------------

    pub(super) fn collective(&mut self, t: u32, ins: &Instr) -> Result<(), SimError> {
        let a = &ins.args;
        let present = self.warp_present(t);
        let m = match &ins.op {
            Op::ElectSync => self.rv(t, &a[1]) as u32,
            Op::BarWarpSync => self.rv(t, &a[0]) as u32,
            Op::ShflSync(_) => self.rv(t, &a[a.len() - 1]) as u32,
            Op::VoteSync(_) | Op::WarpAlu(_) => self.rv(t, &a[a.len() - 1]) as u32,
            _ => present,
        };
        let lane = self.threads[t as usize].lane;
        if m & (1 << lane) == 0 {
            return Err(self.fault(t, format!("{} with membermask {m:#010x}, which does not include the executing lane {lane}", self.k.opcodes[ins.key as usize])));
        }
        if m & !present != 0 {
            return Err(self.fault(
                t,
                format!(
                    "{} waits for lanes {:#010x} of its membermask, which have exited",
                    self.k.opcodes[ins.key as usize],
                    m & !present
                ),
            ));
        }
        self.threads[t as usize].coll_mask = m;
        self.block(t, Why::Collective);
        let first = t - lane;
        let pc = self.threads[t as usize].pc;
        // Everyone in the mask there?
        for l in 0..32 {
            if m & (1 << l) == 0 {
                continue;
            }
            let o = &self.threads[(first + l) as usize];
            if o.st != St::Block(Why::Collective) {
                return Ok(());
            }
            if o.pc != pc
                && !(ins.op == Op::BarWarpSync && self.k.code[o.pc as usize].op == Op::BarWarpSync)
            {
                return Err(self.fault(t, format!("lanes of warp {} wait at different warp-collective instructions (PTX lines {} and {}): the kernel diverged around a .sync instruction", self.threads[t as usize].warp, ins.ptx_line, self.k.code[o.pc as usize].ptx_line)));
            }
            if o.coll_mask != m {
                return Err(self.fault(t, format!("lanes of warp {} execute {} with different membermasks ({:#010x} and {m:#010x})", self.threads[t as usize].warp, self.k.opcodes[ins.key as usize], o.coll_mask)));
            }
        }
        let lanes: Vec<u32> = (0..32)
            .filter(|l| m & (1 << l) != 0)
            .map(|l| first + l)
            .collect();
        if super::pair::is_pair_op(&ins.op) {
            return self.pair_collective(lanes, ins);
        }
        self.exec_collective(&lanes, ins)?;
        for &x in &lanes {
            self.threads[x as usize].pc += 1;
            self.count(x, ins);
            self.make_runnable(x);
        }
        Ok(())
    }

    pub(super) fn exec_collective(&mut self, lanes: &[u32], ins: &Instr) -> Result<(), SimError> {
        let a = &ins.args;
        let t0 = lanes[0];
        match &ins.op {
            Op::BarWarpSync => self.emit(Event::WarpSync { lanes })?,
            Op::WarpAlu(w) => self.exec_warp_alu(lanes, w, a),
            Op::ElectSync => {
                let leader = self.threads[t0 as usize].lane as u64;
                for &x in lanes {
                    let is = self.threads[x as usize].lane as u64 == leader;
                    match &a[0] {
                        Opd::Pair(d, p) => {
                            let (d, p) = (d.as_ref().clone(), p.as_ref().clone());
                            self.wr(x, &d, leader);
                            self.wr(x, &p, is as u64);
                        }
                        d => {
                            let d = d.clone();
                            self.wr(x, &d, is as u64)
                        }
                    }
                }
            }
            Op::VoteSync(v) => {
                let mut ballot = 0u32;
                for &x in lanes {
                    if self.rv(x, &a[1]) != 0 {
                        ballot |= 1 << self.threads[x as usize].lane;
                    }
                }
                let m = self.threads[t0 as usize].coll_mask;
                let r = match v {
                    Vote::Ballot => ballot as u64,
                    Vote::All => (ballot == m) as u64,
                    Vote::Any => (ballot != 0) as u64,
                    Vote::Uni => (ballot == 0 || ballot == m) as u64,
                };
                for &x in lanes {
                    self.wr(x, &a[0], r);
                }
            }
            Op::ShflSync(mode) => {
                // shfl.sync.mode.b32 d[|p], a, b, c, membermask
                let vals: Vec<(u32, u64, u32, u32)> = lanes
                    .iter()
                    .map(|&x| {
                        (
                            self.threads[x as usize].lane,
                            self.rv(x, &a[1]),
                            // bval = b[4:0] (PTX ISA shfl.sync): the lane or offset.
                            self.rv(x, &a[2]) as u32 & 0x1F,
                            self.rv(x, &a[3]) as u32,
                        )
                    })
                    .collect();
                let first = t0 - self.threads[t0 as usize].lane;
                for &(lane, _, b, c) in &vals {
                    let clamp = c & 0x1F;
                    let segmask = (c >> 8) & 0x1F;
                    let maxl = (lane & segmask) | (clamp & !segmask);
                    let minl = lane & segmask;
                    let (j, ok) = match mode {
                        Shfl::Up => (lane.wrapping_sub(b), lane as i64 - b as i64 >= maxl as i64),
                        Shfl::Down => (lane + b, lane + b <= maxl),
                        Shfl::Bfly => (lane ^ b, (lane ^ b) <= maxl),
                        Shfl::Idx => (minl | (b & !segmask), (minl | (b & !segmask)) <= maxl),
                    };
                    let src = if ok { j & 31 } else { lane };
                    let v = vals.iter().find(|v| v.0 == src).map_or_else(
                        || vals.iter().find(|v| v.0 == lane).map_or(0, |v| v.1),
                        |v| v.1,
                    );
                    let x = first + lane;
                    match &a[0] {
                        Opd::Pair(d, p) => {
                            let (d, p) = (d.as_ref().clone(), p.as_ref().clone());
                            self.wr(x, &d, v);
                            self.wr(x, &p, ok as u64);
                        }
                        d => {
                            let d = d.clone();
                            self.wr(x, &d, v)
                        }
                    }
                }
            }
            Op::TcAlloc { cg2 } => {
                rules::cta_group(self, t0, *cg2, "tcgen05.alloc")?;
                let (dst, _) = self.addr_of(t0, &a[0]);
                let n = self.rv(t0, &a[1]) as u32;
                let cta = self.threads[t0 as usize].cta;
                let col = self.ctas[cta as usize]
                    .tmem
                    .alloc(n)
                    .map_err(|e| self.fault(t0, e.to_string()))?;
                let (c, off) = self.shared_loc(t0, dst, 4)?;
                // The warp is handed the columns (a tcgen05 operation), then the allocating
                // thread writes their address to shared memory (a generic write).
                self.emit(Event::Tmem {
                    agent: Agent::Thread(t0),
                    cta,
                    quarters: 0xF,
                    lo: col & 0xFFFF,
                    hi: (col & 0xFFFF) + n,
                    access: Access::Write,
                })?;
                self.observe_mem(t0, Loc::Shared(c, off), 4, Access::Write)?;
                // The written address is the warp's (a .sync.aligned collective): every lane
                // of it may read it back without a further synchronisation.
                self.emit(Event::WarpSync { lanes })?;
                self.write_bytes(t0, Loc::Shared(c, off), &col.to_le_bytes())?;
            }
            Op::TcDealloc { cg2 } => {
                rules::cta_group(self, t0, *cg2, "tcgen05.dealloc")?;
                rules::on_dealloc(self, t0)?;
                let taddr = self.rv(t0, &a[0]) as u32;
                let n = self.rv(t0, &a[1]) as u32;
                let cta = self.threads[t0 as usize].cta;
                self.emit(Event::Tmem {
                    agent: Agent::Thread(t0),
                    cta,
                    quarters: 0xF,
                    lo: taddr & 0xFFFF,
                    hi: (taddr & 0xFFFF) + n,
                    access: Access::Write,
                })?;
                self.ctas[cta as usize]
                    .tmem
                    .dealloc_addr(taddr, n)
                    .map_err(|e| self.fault(t0, e.to_string()))?;
            }
            Op::TcRelinquish { cg2 } => {
                rules::cta_group(self, t0, *cg2, "tcgen05.relinquish_alloc_permit")?;
                let cta = self.threads[t0 as usize].cta;
                self.ctas[cta as usize].tmem.relinquish();
            }
            Op::TcLd { n } => {
                let regs = match &a[0] {
                    Opd::Vec(v) => v.clone(),
                    _ => return Err(self.unsupported(ins)),
                };
                if regs.len() != *n as usize {
                    return Err(self.fault(
                        t0,
                        format!("tcgen05.ld .x{n} with {} destination registers", regs.len()),
                    ));
                }
                for &x in lanes {
                    let taddr = self.rv(x, &a[1]) as u32;
                    rules::on_tcgen05(self, x, "tcgen05.ld")?;
                    rules::check_tmem_read(self, x, taddr, *n as u32)?;
                    self.check_tmem_init(x, taddr, *n as u32)?;
                    let th = &self.threads[x as usize];
                    let (cta, q) = (th.cta, th.warp % 4);
                    self.emit(Event::Tmem {
                        agent: Agent::Thread(x),
                        cta,
                        quarters: 1 << q,
                        lo: taddr & 0xFFFF,
                        hi: (taddr & 0xFFFF) + *n as u32,
                        access: Access::Read,
                    })?;
                    let th = &self.threads[x as usize];
                    let cta = th.cta;
                    let vals = self.ctas[cta as usize]
                        .tmem
                        .ld_32x32b(th.warp % 4, th.lane, taddr, *n as u32)
                        .map_err(|e| self.fault(x, e.to_string()))?;
                    for (r, v) in regs.iter().zip(vals) {
                        self.wr(x, r, v as u64);
                    }
                    let rr: Vec<u32> = regs
                        .iter()
                        .filter_map(|r| if let Opd::Reg(i) = r { Some(*i) } else { None })
                        .collect();
                    let th = &mut self.threads[x as usize];
                    th.rules.ld_pending = true;
                    th.rules.ld_unwaited = true;
                    th.rules.ld_unfenced = true;
                    th.rules.ld_regs = rr;
                }
            }
            Op::TcSt { n } => {
                let regs = match &a[1] {
                    Opd::Vec(v) => v.clone(),
                    _ => return Err(self.unsupported(ins)),
                };
                for &x in lanes {
                    let taddr = self.rv(x, &a[0]) as u32;
                    rules::on_tcgen05(self, x, "tcgen05.st")?;
                    let vals: Vec<u32> = regs.iter().map(|r| self.rv(x, r) as u32).collect();
                    let th = &self.threads[x as usize];
                    let (cta, w, l) = (th.cta, th.warp, th.lane);
                    self.emit(Event::Tmem {
                        agent: Agent::Thread(x),
                        cta,
                        quarters: 1 << (w % 4),
                        lo: taddr & 0xFFFF,
                        hi: (taddr & 0xFFFF) + *n as u32,
                        access: Access::Write,
                    })?;
                    self.ctas[cta as usize]
                        .tmem
                        .st_32x32b(w % 4, l, taddr, &vals[..*n as usize])
                        .map_err(|e| self.fault(x, e.to_string()))?;
                    let row = crate::units::tmem::taddr_lane(taddr) + l;
                    let col = crate::units::tmem::taddr_col(taddr);
                    self.ctas[cta as usize]
                        .tinit
                        .mark(row..row + 1, col, *n as u32);
                }
            }
            Op::TcWaitLd => {
                for &x in lanes {
                    rules::ld_used_before_wait(self, x)?;
                    let r = &mut self.threads[x as usize].rules;
                    r.ld_pending = false;
                    r.ld_unwaited = false;
                    r.ld_regs.clear();
                }
                rules::on_wait_ld(self, lanes);
            }
            Op::TcWaitSt => {}
            Op::Form(f) => self.exec_form_collective(lanes, ins, *f)?,
            _ => return Err(self.unsupported(ins)),
        }
        Ok(())
    }
}
