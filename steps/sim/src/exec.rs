//! The interpreter: per-thread register machines grouped in warps, CTAs grouped in a cluster,
//! one scheduler that owns every interleaving choice and every asynchronous completion.
//!
//! Works on the active cluster's state; `cluster.rs` keeps the resident clusters and the
//! scheduler that interleaves their threads and asynchronous operations.

use crate::decode::{
    AtomOp, Base, Bin, BoolOp, Cmp, Fence, Instr, Kernel, MbarOp, Op, Opd, Program, Rnd, Shfl,
    Space, Sreg, Sym, Ty, Un, Vote,
};
use crate::error::SimError;
use crate::glue::{self, MapId};
use crate::launch::{Launch, Param};
use crate::machine::{Machine, Mbar, ParamMaps, St, StoreJob, TcJob, Thread, TmaJob, Why};
use crate::mem::{Device, LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, WINDOW_BYTES};
use crate::observe::{Access, Agent, AsyncKind, Event, FenceKind, Mem, Proxy, Scope};
use crate::rule_state::ThreadRules;
use crate::rules;
use crate::sched::Policy;
use std::collections::VecDeque;

mod alu;

/// Shared memory the hardware reserves below the kernel's own (1 KiB on sm_90/sm_100): the
/// kernel's shared variables start here, so a kernel that aligns its storage must do so itself.
pub const SMEM_RESERVED: u32 = 0x400;

const NONE: u32 = u32::MAX;

#[path = "exec_async_copy.rs"]
pub(crate) mod async_copy;
#[path = "exec_forms.rs"]
mod forms;

#[inline]
fn mask(v: u64, bits: u32) -> u64 {
    if bits >= 64 {
        v
    } else {
        v & ((1u64 << bits) - 1)
    }
}

#[inline]
fn sx(v: u64, bits: u32) -> i64 {
    if bits >= 64 {
        v as i64
    } else {
        let s = 64 - bits;
        ((v << s) as i64) >> s
    }
}

#[inline]
fn f32_of(v: u64) -> f32 {
    f32::from_bits(v as u32)
}

fn fbits(v: f32) -> u64 {
    v.to_bits() as u64
}

impl<'a> Machine<'a> {
    // ---------------------------------------------------------------------------------------
    // Runnable set
    // ---------------------------------------------------------------------------------------

    pub fn make_runnable(&mut self, t: u32) {
        let th = &mut self.threads[t as usize];
        if th.st == St::Done {
            return;
        }
        th.st = St::Run;
        if self.rpos[t as usize] == NONE {
            self.rpos[t as usize] = self.runnable.len() as u32;
            self.runnable.push(t);
        }
    }

    pub fn block(&mut self, t: u32, why: Why) {
        if why != Why::Collective {
            self.progress = self.steps;
        }
        self.threads[t as usize].st = St::Block(why);
        self.unrun(t);
    }

    fn unrun(&mut self, t: u32) {
        let p = self.rpos[t as usize];
        if p != NONE {
            let last = *self.runnable.last().expect("runnable holds t");
            self.runnable.swap_remove(p as usize);
            if last != t {
                self.rpos[last as usize] = p;
            }
            self.rpos[t as usize] = NONE;
        }
    }

    // ---------------------------------------------------------------------------------------
    // Operands
    // ---------------------------------------------------------------------------------------

    #[inline]
    pub(crate) fn rv(&self, t: u32, o: &Opd) -> u64 {
        match o {
            Opd::Reg(r) => self.threads[t as usize].regs[*r as usize],
            Opd::Imm(v) => *v,
            Opd::NotReg(r) => (self.threads[t as usize].regs[*r as usize] == 0) as u64,
            Opd::Sreg(s) => self.sreg(t, *s),
            Opd::Sym(s) => self.sym_value(t, *s),
            Opd::Addr(b, off) => self.base_value(t, b).wrapping_add(*off as u64),
            _ => 0,
        }
    }

    #[inline]
    fn wr(&mut self, t: u32, o: &Opd, v: u64) {
        if let Opd::Reg(r) = o {
            self.threads[t as usize].regs[*r as usize] = v;
        }
    }

    fn base_value(&self, t: u32, b: &Base) -> u64 {
        match b {
            Base::None => 0,
            Base::Reg(r) => self.threads[t as usize].regs[*r as usize],
            Base::Sym(s) => self.sym_value(t, *s),
        }
    }

    fn sym_value(&self, t: u32, s: Sym) -> u64 {
        match s {
            Sym::Param(o) => o as u64,
            // A shared variable's address carries the executing CTA's rank (`dsmem.rs`).
            Sym::Shared(o) => {
                crate::dsmem::encode(self.threads[t as usize].cta, SMEM_RESERVED + o) as u64
            }
            Sym::SharedDynamic => {
                crate::dsmem::encode(self.threads[t as usize].cta, self.dyn_off) as u64
            }
            // In the current function's frame (`calls.rs`).
            Sym::Local(o) => self.threads[t as usize].frame as u64 + o as u64,
            Sym::Global(i) => self.globals.get(i as usize).copied().unwrap_or(0),
        }
    }

    fn sreg(&self, t: u32, s: Sreg) -> u64 {
        let th = &self.threads[t as usize];
        let cta = &self.ctas[th.cta as usize];
        let l = self.l;
        let d = |a: [u32; 3], i: u8| a[i as usize] as u64;
        let ncl = [
            l.grid[0] / l.cluster[0],
            l.grid[1] / l.cluster[1],
            l.grid[2] / l.cluster[2],
        ];
        match s {
            Sreg::Tid(i) => d(th.tid, i),
            Sreg::Ntid(i) => d(l.block, i),
            Sreg::Ctaid(i) => d(cta.ctaid, i),
            Sreg::Nctaid(i) => d(l.grid, i),
            Sreg::ClusterId(i) => d(self.cluster_id, i),
            Sreg::NclusterId(i) => d(ncl, i),
            Sreg::ClusterCtaid(i) => (cta.ctaid[i as usize] % l.cluster[i as usize]) as u64,
            Sreg::ClusterNctaid(i) => d(l.cluster, i),
            Sreg::ClusterCtarank => cta.rank as u64,
            Sreg::ClusterNctarank => self.cl_size as u64,
            Sreg::IsExplicitCluster => (self.cl_size > 1) as u64,
            Sreg::LaneId => th.lane as u64,
            Sreg::WarpId => th.warp as u64,
            Sreg::NwarpId => self.nwarps as u64,
            Sreg::SmId => cta.rank as u64,
            Sreg::NsmId => 148,
            Sreg::GridId => 1,
            Sreg::DynamicSmemSize => l.dynamic_smem as u64,
            Sreg::TotalSmemSize => self.smem_bytes as u64,
            Sreg::Clock | Sreg::Clock64 | Sreg::GlobalTimer => self.steps,
            Sreg::LanemaskEq => 1u64 << th.lane,
            Sreg::LanemaskLt => (1u64 << th.lane) - 1,
            Sreg::LanemaskLe => mask((1u64 << (th.lane + 1)) - 1, 32),
            Sreg::LanemaskGt => mask(!((1u64 << (th.lane + 1)) - 1), 32),
            Sreg::LanemaskGe => mask(!((1u64 << th.lane) - 1), 32),
        }
    }

    // ---------------------------------------------------------------------------------------
    // Memory
    // ---------------------------------------------------------------------------------------

    /// A shared::cluster (or shared::cta) address of thread `t` as (cluster CTA, offset).
    pub fn shared_loc(&self, t: u32, a: u64, len: u32) -> Result<(u32, u32), SimError> {
        if a > u32::MAX as u64 {
            return Err(self.fault(t, format!("shared-memory address {a:#x} is out of range")));
        }
        let a = a as u32;
        let (cta, off) = match crate::dsmem::decode(a, self.cl_size) {
            crate::dsmem::Place::Rank(r, o) => (r, o),
            crate::dsmem::Place::Undefined => {
                let d = crate::dsmem::undefined_detail(a, len, self.cl_size, self.smem_bytes);
                return Err(self.rule(t, "cluster-address-undefined", d));
            }
        };
        let past = off as u64 + len as u64 > self.smem_bytes as u64;
        if off >= self.smem_bytes {
            // Beyond the CTA's memory in its rank's address range (`dsmem.rs`), not an overrun.
            let d = crate::dsmem::undefined_detail(a, len, self.cl_size, self.smem_bytes);
            return Err(self.rule(t, "cluster-address-undefined", d));
        }
        if off < SMEM_RESERVED || past {
            return Err(self.fault(
                t,
                format!(
                    "shared-memory access at offset {off:#x} ({len} bytes) is outside the CTA's shared memory ({:#x}..{:#x})",
                    SMEM_RESERVED, self.smem_bytes
                ),
            ));
        }
        Ok((cta, off))
    }

    /// Resolve `addr` in `space` for thread `t`: where the bytes are.
    pub(crate) fn resolve(
        &self,
        t: u32,
        space: Space,
        addr: u64,
        len: u32,
    ) -> Result<Loc, SimError> {
        match space {
            Space::Global | Space::Const => Ok(Loc::Global(addr)),
            Space::Shared | Space::SharedCluster => {
                let (c, o) = self.shared_loc(t, addr, len)?;
                let own = self.threads[t as usize].cta;
                if space == Space::Shared && c != own {
                    let d = crate::dsmem::foreign_detail(addr, own);
                    return Err(self.rule(t, "cluster-address-undefined", d));
                }
                Ok(Loc::Shared(c, o))
            }
            Space::Local => Ok(Loc::Local(addr)),
            Space::Param => Ok(Loc::Param(addr)),
            Space::Generic => {
                if (SHARED_WINDOW..SHARED_WINDOW + WINDOW_BYTES).contains(&addr) {
                    let (c, o) = self.shared_loc(t, addr - SHARED_WINDOW, len)?;
                    Ok(Loc::Shared(c, o))
                } else if (LOCAL_WINDOW..LOCAL_WINDOW + WINDOW_BYTES).contains(&addr) {
                    Ok(Loc::Local(addr - LOCAL_WINDOW))
                } else if (PARAM_WINDOW..PARAM_WINDOW + WINDOW_BYTES).contains(&addr) {
                    Ok(Loc::Param(addr - PARAM_WINDOW))
                } else {
                    Ok(Loc::Global(addr))
                }
            }
        }
    }

    pub(crate) fn read_bytes(&mut self, t: u32, loc: Loc, out: &mut [u8]) -> Result<(), SimError> {
        let n = out.len();
        match loc {
            Loc::Global(a) => {
                if !self.dev.read(a, out) {
                    return Err(self.fault(
                        t,
                        format!(
                            "global read of {n} bytes at {a:#x}: not an allocation of this launch"
                        ),
                    ));
                }
                if self.xr.on() {
                    self.global_access(t, a, n as u64, false)?;
                }
            }
            Loc::Shared(c, o) => {
                if !self.cpa.unordered.is_empty() {
                    self.cp_async_check_read(t, c, o, n as u32)?;
                }
                self.check_init(t, c, o, n as u32, "")?;
                out.copy_from_slice(&self.ctas[c as usize].smem[o as usize..o as usize + n]);
            }
            Loc::Local(o) => {
                let th = &self.threads[t as usize];
                let end = o as usize + n;
                if end > th.local.len() {
                    return Err(self.fault(
                        t,
                        format!(
                            "local read at {o:#x} past the frame of {} bytes",
                            th.local.len()
                        ),
                    ));
                }
                out.copy_from_slice(&th.local[o as usize..end]);
            }
            Loc::Param(o) => {
                let end = o as usize + n;
                // A CUtensorMap's bytes are the driver's opaque encoding: the simulator holds a
                // description instead, so a kernel may use a map's address (TMA, prefetch) but
                // not read it; reading it would also tell the simulator from a GPU.
                if self
                    .maps
                    .iter()
                    .any(|(m, _)| (o as usize) < *m as usize + 128 && end > *m as usize)
                {
                    return Err(self.fault(t, format!("the kernel reads bytes {o:#x}..{end:#x} of a CUtensorMap parameter: its encoding is the CUDA driver's and opaque, and the simulator does not model it (a kernel passes the map's address to cp.async.bulk.tensor and never reads it)")));
                }
                if end > self.params.len() {
                    return Err(self.fault(
                        t,
                        format!(
                            "parameter read at {o:#x} past the {} bytes of parameters",
                            self.params.len()
                        ),
                    ));
                }
                out.copy_from_slice(&self.params[o as usize..end]);
            }
        }
        Ok(())
    }

    pub(crate) fn write_bytes(&mut self, t: u32, loc: Loc, data: &[u8]) -> Result<(), SimError> {
        let n = data.len();
        self.progress = self.steps;
        match loc {
            Loc::Global(a) => {
                if !self.dev.write(a, data) {
                    return Err(self.fault(
                        t,
                        format!(
                            "global write of {n} bytes at {a:#x}: not an allocation of this launch"
                        ),
                    ));
                }
                if self.xr.on() {
                    self.global_access(t, a, n as u64, true)?;
                }
            }
            Loc::Shared(c, o) => {
                rules::generic_smem_write(self, t, c, o, n as u32)?;
                self.ctas[c as usize].smem[o as usize..o as usize + n].copy_from_slice(data);
                self.ctas[c as usize].init.mark(o, n as u32);
            }
            Loc::Local(o) => {
                let th = &mut self.threads[t as usize];
                let end = o as usize + n;
                if end > th.local.len() {
                    let len = th.local.len();
                    return Err(self.fault(
                        t,
                        format!("local write at {o:#x} past the frame of {len} bytes"),
                    ));
                }
                th.local[o as usize..end].copy_from_slice(data);
            }
            Loc::Param(_) => return Err(self.fault(t, "a write to kernel parameters")),
        }
        Ok(())
    }

    // ---------------------------------------------------------------------------------------
    // mbarriers
    // ---------------------------------------------------------------------------------------

    fn mbar_mut(&mut self, cta: u32, off: u32) -> Option<&mut Mbar> {
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
                format!("{kind} on the barrier at shared-memory offset {off:#x} of CTA rank {cta} after that CTA exited: an arrival that lands after the CTA exited writes into shared memory that is no longer its own; the producer must wait for the last load_empty phases (a producer tail)"),
            ));
        }
        let Some(b) = self.mbar_mut(cta, off) else {
            let e = format!("{kind} on shared-memory offset {off:#x} of CTA rank {cta}, which holds no initialised mbarrier");
            return Err(match by {
                Some(t) => self.fault(t, e),
                None => self.rule_at((who.2, who.3), who.0, who.1, "mbarrier-init", e),
            });
        };
        let phase = b.phase;
        if n > b.pending {
            let (count, pending) = (b.count, b.pending);
            let e = format!("{kind} of {n} on the barrier at shared-memory offset {off:#x}, which expects only {pending} more of its {count} arrivals in this phase (PTX ISA: the pending count must not underflow)");
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
                detail: format!("transaction bytes for shared-memory offset {off:#x}, which holds no initialised mbarrier"),
            })
        }
    }

    fn try_complete(&mut self, cta: u32, off: u32) -> Result<(), SimError> {
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
                let rank = self.ctas[cta as usize].rank;
                self.ev(
                    None,
                    format!("mbarrier at {off:#x} of CTA rank {rank} completes phase {done}"),
                );
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
    // Execution of one instruction
    // ---------------------------------------------------------------------------------------

    /// Run thread `t` for up to `quantum` instructions or until it blocks or exits.
    pub fn run_thread(&mut self, t: u32, quantum: u32) -> Result<(), SimError> {
        let k = self.k;
        for _ in 0..quantum {
            if self.threads[t as usize].st != St::Run {
                return Ok(());
            }
            let pc = self.threads[t as usize].pc as usize;
            let Some(ins) = k.code.get(pc) else {
                self.exit_thread(t)?;
                return Ok(());
            };
            self.steps += 1;
            if self.steps >= self.next_check {
                self.check_budget()?;
            }
            if let Some((p, neg)) = ins.guard {
                let v = self.threads[t as usize].regs[p as usize] != 0;
                if v == neg {
                    self.threads[t as usize].pc += 1;
                    continue;
                }
            }
            if self.threads[t as usize].rules.ld_pending {
                rules::check_ld_regs(self, t, ins)?;
            }
            self.exec(t, ins)?;
        }
        Ok(())
    }

    fn count(&mut self, t: u32, ins: &Instr) {
        let w = self.threads[t as usize].warp as usize;
        self.counts[w * self.k.opcodes.len() + ins.key as usize] += 1;
        self.threads[t as usize].executed[ins.key as usize] += 1;
    }

    /// Add this cluster's warp-level executions to [`Machine::warp_counts`]: per warp of each
    /// CTA and per opcode, the most executions any one lane made. Each lane's execution belongs
    /// to one execution of its warp, and one lane's executions are distinct ones, so this never
    /// exceeds what the warp executed; it is exact where one lane issues (an elected thread) or
    /// the lanes go together.
    pub(crate) fn fold_warp_counts(&mut self) {
        let n = self.k.opcodes.len();
        let per_cta = self.nthreads as usize;
        for cta in self.threads.chunks(per_cta) {
            for warp in cta.chunks(32) {
                for key in 0..n {
                    let most = warp.iter().map(|t| t.executed[key]).max().unwrap_or(0);
                    self.warp_counts[key] += u64::from(most);
                }
            }
        }
    }

    fn exec(&mut self, t: u32, ins: &Instr) -> Result<(), SimError> {
        let a = &ins.args;
        let mut next = true;
        match &ins.op {
            Op::Mov(ty) => {
                self.count(t, ins);
                self.exec_mov(t, *ty, a)?;
            }
            Op::Ld { space, ty, vec } => {
                self.count(t, ins);
                let (addr, _) = self.addr_of(t, &a[1]);
                let eb = ty.bytes();
                let total = eb * *vec as u32;
                let loc = self.resolve(t, *space, addr, total)?;
                if total > 64 {
                    return Err(self.fault(t, "a load wider than 64 bytes"));
                }
                self.observe_mem(t, loc, total, Access::Read)?;
                let mut buf = [0u8; 64];
                self.read_bytes(t, loc, &mut buf[..total as usize])?;
                let dsts: Vec<Opd> = match &a[0] {
                    Opd::Vec(v) => v.clone(),
                    o => vec![o.clone()],
                };
                for (i, d) in dsts.iter().enumerate() {
                    let mut v = 0u64;
                    let s = i * eb as usize;
                    for j in 0..(eb.min(8) as usize) {
                        v |= (buf[s + j] as u64) << (8 * j);
                    }
                    if ty.signed() {
                        v = sx(v, ty.bits()) as u64;
                    }
                    self.wr(t, d, v);
                }
            }
            Op::St { space, ty, vec } => {
                self.count(t, ins);
                let (addr, _) = self.addr_of(t, &a[0]);
                let eb = ty.bytes();
                let total = eb * *vec as u32;
                let loc = self.resolve(t, *space, addr, total)?;
                self.observe_mem(t, loc, total, Access::Write)?;
                let srcs: Vec<u64> = match &a[1] {
                    Opd::Vec(v) => v.iter().map(|o| self.rv(t, o)).collect(),
                    o => vec![self.rv(t, o)],
                };
                let mut buf = [0u8; 64];
                for (i, v) in srcs.iter().enumerate() {
                    let s = i * eb as usize;
                    for j in 0..(eb.min(8) as usize) {
                        buf[s + j] = (v >> (8 * j)) as u8;
                    }
                }
                self.write_bytes(t, loc, &buf[..total as usize])?;
            }
            Op::Cvta { to, space, ty } => {
                self.count(t, ins);
                let v = self.rv(t, &a[1]);
                let r = self.cvta(t, *to, *space, v)?;
                self.wr(t, &a[0], mask(r, ty.bits()));
            }
            Op::Bin(b, ty) => {
                self.count(t, ins);
                let x = self.rv(t, &a[1]);
                let y = self.rv(t, &a[2]);
                let r = bin(*b, *ty, x, y);
                self.wr(t, &a[0], r);
            }
            Op::Mad { wide, hi, ty } => {
                self.count(t, ins);
                let x = self.rv(t, &a[1]);
                let y = self.rv(t, &a[2]);
                let z = self.rv(t, &a[3]);
                let p = if *wide {
                    bin(Bin::MulWide, *ty, x, y)
                } else if *hi {
                    bin(Bin::MulHi, *ty, x, y)
                } else {
                    bin(Bin::MulLo, *ty, x, y)
                };
                let bits = if *wide { ty.bits() * 2 } else { ty.bits() };
                self.wr(t, &a[0], mask(p.wrapping_add(z), bits));
            }
            Op::Fma(ty) => {
                self.count(t, ins);
                let x = self.rv(t, &a[1]);
                let y = self.rv(t, &a[2]);
                let z = self.rv(t, &a[3]);
                let r = match ty {
                    Ty::F32 => fbits(f32_of(x).mul_add(f32_of(y), f32_of(z))),
                    Ty::F64 => f64::from_bits(x)
                        .mul_add(f64::from_bits(y), f64::from_bits(z))
                        .to_bits(),
                    _ => return Err(self.unsupported(ins)),
                };
                self.wr(t, &a[0], r);
            }
            Op::Un(u, ty) => {
                self.count(t, ins);
                let x = self.rv(t, &a[1]);
                let r = un(*u, *ty, x);
                self.wr(t, &a[0], r);
            }
            Op::Setp { cmp, ty, bop } => {
                self.count(t, ins);
                let x = self.rv(t, &a[1]);
                let y = self.rv(t, &a[2]);
                let c = compare(*cmp, *ty, x, y);
                let combine = |p: bool, s: &Self| match bop {
                    None => p,
                    Some(op) => {
                        let q = s.rv(t, &a[3]) != 0;
                        match op {
                            BoolOp::And => p && q,
                            BoolOp::Or => p || q,
                            BoolOp::Xor => p ^ q,
                        }
                    }
                };
                let p = combine(c, self);
                let q = combine(!c, self);
                match &a[0] {
                    Opd::Pair(d1, d2) => {
                        let (d1, d2) = (d1.as_ref().clone(), d2.as_ref().clone());
                        self.wr(t, &d1, p as u64);
                        self.wr(t, &d2, q as u64);
                    }
                    d => self.wr(t, d, p as u64),
                }
            }
            Op::Selp(_) => {
                self.count(t, ins);
                let c = self.rv(t, &a[3]) != 0;
                let v = if c {
                    self.rv(t, &a[1])
                } else {
                    self.rv(t, &a[2])
                };
                self.wr(t, &a[0], v);
            }
            Op::Cvt { dst, src, rnd, sat } => {
                self.count(t, ins);
                let r = if matches!(dst, Ty::F16x2 | Ty::Bf16x2) {
                    let x = f32_of(self.rv(t, &a[1]));
                    let y = f32_of(self.rv(t, &a[2]));
                    let m = glue::float_round(*rnd).ok_or_else(|| self.unsupported(ins))?;
                    if *dst == Ty::F16x2 {
                        crate::units::numeric::cvt_f16x2_f32(x, y, m) as u64
                    } else {
                        crate::units::numeric::cvt_bf16x2_f32(x, y, m) as u64
                    }
                } else {
                    let x = self.rv(t, &a[1]);
                    glue::cvt(*dst, *src, *rnd, *sat, x).ok_or_else(|| self.unsupported(ins))?
                };
                self.wr(t, &a[0], r);
            }
            Op::Bfe(ty) => {
                self.count(t, ins);
                let x = self.rv(t, &a[1]);
                let pos = self.rv(t, &a[2]) as u32 & 0xFF;
                let len = self.rv(t, &a[3]) as u32 & 0xFF;
                let w = ty.bits();
                let r = if len == 0 || pos >= w {
                    if ty.signed() && pos >= w && len > 0 {
                        mask((sx(x, w) >> (w - 1)) as u64, w)
                    } else {
                        0
                    }
                } else {
                    let l = len.min(w - pos);
                    let f = (mask(x, w) >> pos) & mask(u64::MAX, l);
                    if ty.signed() {
                        mask(sx(f, l) as u64, w)
                    } else {
                        f
                    }
                };
                self.wr(t, &a[0], r);
            }
            Op::Bfi(ty) => {
                self.count(t, ins);
                let f = self.rv(t, &a[1]);
                let b = self.rv(t, &a[2]);
                let pos = self.rv(t, &a[3]) as u32 & 0xFF;
                let len = self.rv(t, &a[4]) as u32 & 0xFF;
                let w = ty.bits();
                let r = if len == 0 || pos >= w {
                    b
                } else {
                    let l = len.min(w - pos);
                    let m = mask(u64::MAX, l) << pos;
                    mask((b & !m) | ((f << pos) & m), w)
                };
                self.wr(t, &a[0], r);
            }
            Op::Prmt => {
                self.count(t, ins);
                let x = self.rv(t, &a[1]) as u32 as u64;
                let y = self.rv(t, &a[2]) as u32 as u64;
                let c = self.rv(t, &a[3]) as u32;
                let bytes = x | (y << 32);
                let mut r = 0u64;
                for i in 0..4 {
                    let sel = (c >> (4 * i)) & 0xF;
                    let mut byte = (bytes >> (8 * (sel & 7))) & 0xFF;
                    if sel & 8 != 0 {
                        byte = if byte & 0x80 != 0 { 0xFF } else { 0 };
                    }
                    r |= byte << (8 * i);
                }
                self.wr(t, &a[0], r);
            }
            Op::Shf { left, clamp } => {
                self.count(t, ins);
                let lo = self.rv(t, &a[1]) as u32 as u64;
                let hi = self.rv(t, &a[2]) as u32 as u64;
                let mut n = self.rv(t, &a[3]) as u32;
                n = if *clamp { n.min(32) } else { n & 31 };
                let v = (hi << 32) | lo;
                let r = if *left { (v << n) >> 32 } else { v >> n };
                self.wr(t, &a[0], mask(r, 32));
            }
            Op::Bra => {
                self.count(t, ins);
                match a.first() {
                    Some(Opd::Label(pc)) => {
                        self.threads[t as usize].pc = *pc;
                        next = false;
                    }
                    _ => return Err(self.unsupported(ins)),
                }
            }
            Op::Ret if !self.threads[t as usize].calls.is_empty() => {
                self.count(t, ins);
                self.exec_ret(t);
                next = false;
            }
            Op::Call { .. } => {
                self.count(t, ins);
                next = self.exec_call(t, ins)?;
            }
            Op::Ret | Op::Exit => {
                self.count(t, ins);
                self.exit_thread(t)?;
                return Ok(());
            }
            Op::Trap => {
                self.count(t, ins);
                return Err(self.fault(t, "the kernel executed trap (__trap())"));
            }
            Op::Nanosleep | Op::PrefetchTensormap => self.count(t, ins),
            Op::Fence(f) => {
                self.count(t, ins);
                let kind = match f {
                    Fence::ProxyAsync => Some(FenceKind::ProxyAsync),
                    Fence::MbarrierInit => Some(FenceKind::MbarrierInit),
                    Fence::Memory => Some(FenceKind::AcqRel(self.scope_of(ins.key))),
                    Fence::OtherProxy => None,
                };
                if let Some(kind) = kind {
                    self.emit(Event::Fence { by: t, kind })?;
                }
                if *f == Fence::ProxyAsync {
                    self.seq += 1;
                    let s = self.seq;
                    self.threads[t as usize].rules.proxy_fence_seq = s;
                } else if *f == Fence::MbarrierInit {
                    self.seq += 1;
                    let s = self.seq;
                    self.threads[t as usize].rules.mbar_init_fence_seq = s;
                }
            }
            Op::Activemask => {
                self.count(t, ins);
                let m = self.warp_present(t);
                self.wr(t, &a[0], m as u64);
            }
            Op::BarSync { arrive_only } => {
                self.count(t, ins);
                rules::on_handoff(self, t, "a CTA barrier (bar.sync)")?;
                next = self.bar_sync(t, a, *arrive_only)?;
            }
            Op::ClusterBarrier { wait } => {
                if !*wait {
                    self.count(t, ins);
                    rules::on_handoff(self, t, "a cluster barrier (barrier.cluster.arrive)")?;
                    self.threads[t as usize].cluster_arrived = Some(self.cluster_phase);
                    let (phase, release) = (self.cluster_phase, !self.relaxed(ins.key));
                    self.emit(Event::ClusterArrive {
                        by: t,
                        phase,
                        release,
                    })?;
                    self.cluster_arrivals += 1;
                    self.check_cluster_barrier();
                } else {
                    match self.threads[t as usize].cluster_arrived {
                        None => {
                            return Err(self.fault(
                                t,
                                "barrier.cluster.wait without a barrier.cluster.arrive before it",
                            ))
                        }
                        Some(p) if p < self.cluster_phase => {
                            self.count(t, ins);
                            // barrier.cluster.wait has acquire semantics (its only ordering).
                            self.emit(Event::ClusterWait {
                                by: t,
                                phase: p,
                                acquire: true,
                            })?;
                            self.threads[t as usize].cluster_arrived = None;
                            self.threads[t as usize].rules.synced = Some("a cluster barrier");
                        }
                        Some(_) => {
                            self.cluster_waiters.push(t);
                            self.block(t, Why::ClusterWait);
                            return Ok(());
                        }
                    }
                }
            }
            Op::Mapa { generic } => {
                self.count(t, ins);
                let v = self.rv(t, &a[1]);
                let r = self.rv(t, &a[2]) as u32;
                if r >= self.cl_size {
                    return Err(self.fault(
                        t,
                        format!(
                            "mapa to CTA rank {r}: the cluster has {} CTAs",
                            self.cl_size
                        ),
                    ));
                }
                let sv = if *generic {
                    if !(SHARED_WINDOW..SHARED_WINDOW + WINDOW_BYTES).contains(&v) {
                        return Err(self.fault(
                            t,
                            format!("mapa of {v:#x}, not a shared-memory generic address"),
                        ));
                    }
                    v - SHARED_WINDOW
                } else {
                    v
                };
                // The operand's place (its own CTA's or a mapped one), then the same offset in
                // CTA r (PTX ISA, mapa: "an address in CTA b corresponding to" the operand).
                let (_, off) = self.shared_loc(t, sv, 1)?;
                let c = crate::dsmem::encode(r, off);
                let out = if *generic {
                    SHARED_WINDOW + c as u64
                } else {
                    c as u64
                };
                self.wr(t, &a[0], out);
            }
            Op::Mbar(kind, space) => {
                next = self.exec_mbar(t, ins, *kind, *space)?;
            }
            Op::Atom {
                red, space, op, ty, ..
            } => {
                self.count(t, ins);
                let (ai, vi) = if *red { (0, 1) } else { (1, 2) };
                let (addr, _) = self.addr_of(t, &a[ai]);
                let loc = self.resolve(t, *space, addr, ty.bytes())?;
                self.observe_mem(t, loc, ty.bytes(), Access::Atomic)?;
                let mut buf = [0u8; 8];
                let n = ty.bytes() as usize;
                self.read_bytes(t, loc, &mut buf[..n])?;
                let old = u64::from_le_bytes(buf);
                let v = self.rv(t, &a[vi]);
                let v2 = if *op == AtomOp::Cas {
                    self.rv(t, &a[vi + 1])
                } else {
                    0
                };
                let new = crate::alu::atom_new(*op, *ty, old, v, v2);
                let nb = new.to_le_bytes();
                self.write_bytes(t, loc, &nb[..n])?;
                if !*red {
                    self.wr(t, &a[0], old);
                }
            }
            Op::Alu(x) => {
                self.count(t, ins);
                self.exec_alu(t, x, a);
            }
            // Warp collectives: rendezvous first.
            Op::ElectSync
            | Op::ShflSync(_)
            | Op::VoteSync(_)
            | Op::WarpAlu(_)
            | Op::BarWarpSync
            | Op::TcAlloc { .. }
            | Op::TcDealloc { .. }
            | Op::TcRelinquish { .. }
            | Op::TcLd { .. }
            | Op::TcSt { .. }
            | Op::TcWaitLd
            | Op::TcWaitSt => {
                return self.collective(t, ins);
            }
            Op::TmaLoad {
                multicast,
                cta_group2,
                ..
            } => {
                self.count(t, ins);
                self.tma_load(t, ins, *multicast, *cta_group2)?;
            }
            Op::TmaStore { .. } => {
                self.count(t, ins);
                self.tma_store(t, ins)?;
            }
            Op::BulkCommit => {
                self.count(t, ins);
                let th = &mut self.threads[t as usize];
                let g = std::mem::take(&mut th.bulk_open);
                th.bulk_groups.push_back(g);
            }
            Op::BulkWait { read } => {
                let n = self.rv(t, &a[0]) as u32;
                if !self.bulk_wait_done(t, n) {
                    self.block(t, Why::BulkWait(n));
                    return Ok(());
                }
                self.count(t, ins);
                // Groups older than the newest n are complete (their reads, for .read).
                let _ = read;
                let th = &mut self.threads[t as usize];
                let mut popped = Vec::new();
                while th.bulk_groups.len() > n as usize {
                    popped.extend(th.bulk_groups.pop_front());
                }
                let ops: Vec<u64> = popped
                    .iter()
                    .flatten()
                    .map(|&i| crate::observe::store_op_id(i))
                    .collect();
                self.emit(Event::BulkWait { by: t, ops: &ops })?;
                rules::on_bulk_wait(self, &popped);
            }
            Op::TcMma { cg2 } => {
                self.count(t, ins);
                self.tc_mma(t, ins, *cg2)?;
            }
            Op::TcCommit { cg2, multicast } => {
                self.count(t, ins);
                self.tc_commit(t, ins, *cg2, *multicast)?;
            }
            Op::TcShift { cg2 } => {
                self.count(t, ins);
                self.tc_shift(t, ins, *cg2)?;
            }
            Op::TcCp { shape, cg2 } => {
                self.count(t, ins);
                self.tc_cp(t, ins, *shape, *cg2)?;
            }
            Op::TcFenceBefore => {
                self.count(t, ins);
                self.emit(Event::Fence {
                    by: t,
                    kind: FenceKind::TcBefore,
                })?;
                self.threads[t as usize].rules.ld_unfenced = false;
            }
            Op::TcFenceAfter => {
                self.count(t, ins);
                self.emit(Event::Fence {
                    by: t,
                    kind: FenceKind::TcAfter,
                })?;
                self.threads[t as usize].rules.synced = None;
            }
            Op::Form(f) => {
                if f.collective() {
                    return self.collective(t, ins);
                }
                self.count(t, ins);
                self.exec_form(t, ins, *f)?;
            }
        }
        if next {
            self.threads[t as usize].pc += 1;
        }
        Ok(())
    }

    /// A form the interpreter does not run. Unreachable for a decoded program: `forms.rs`
    /// refuses every such form when the module is decoded; kept so a gap there is an error,
    /// never a wrong result.
    pub fn unsupported(&self, ins: &Instr) -> SimError {
        SimError::Unsupported {
            opcode: self.k.opcodes[ins.key as usize].clone(),
            ptx_line: ins.ptx_line,
        }
    }

    /// The address an `[addr]` operand names (or a register/immediate used as one).
    pub(crate) fn addr_of(&self, t: u32, o: &Opd) -> (u64, bool) {
        match o {
            Opd::Addr(b, off) => (self.base_value(t, b).wrapping_add(*off as u64), true),
            o => (self.rv(t, o), false),
        }
    }

    fn exec_mov(&mut self, t: u32, ty: Ty, a: &[Opd]) -> Result<(), SimError> {
        match (&a[0], &a[1]) {
            (Opd::Vec(parts), src) => {
                // unpack: mov.b32 {lo, hi}, %r
                let v = self.rv(t, src);
                let w = ty.bits() / parts.len() as u32;
                for (i, p) in parts.clone().iter().enumerate() {
                    self.wr(t, p, mask(v >> (w * i as u32), w));
                }
            }
            (d, Opd::Vec(parts)) => {
                let w = ty.bits() / parts.len() as u32;
                let mut v = 0u64;
                for (i, p) in parts.iter().enumerate() {
                    v |= mask(self.rv(t, p), w) << (w * i as u32);
                }
                let d = d.clone();
                self.wr(t, &d, v);
            }
            (d, s) => {
                let v = self.rv(t, s);
                let d = d.clone();
                self.wr(
                    t,
                    &d,
                    if ty == Ty::Pred {
                        (v != 0) as u64
                    } else {
                        mask(v, ty.bits())
                    },
                );
            }
        }
        Ok(())
    }

    fn cvta(&self, t: u32, to: bool, space: Space, v: u64) -> Result<u64, SimError> {
        Ok(match (to, space) {
            (false, Space::Shared | Space::SharedCluster) => SHARED_WINDOW + (v & 0xFFFF_FFFF),
            (true, Space::Shared) => {
                if !(SHARED_WINDOW..SHARED_WINDOW + WINDOW_BYTES).contains(&v) {
                    return Err(self.fault(
                        t,
                        format!("cvta.to.shared of {v:#x}, not a shared-memory generic address"),
                    ));
                }
                // The address of the same byte, its rank included (`dsmem.rs`): a .shared::cta
                // access through it to another CTA's memory is reported where it happens.
                let (c, off) = self.shared_loc(t, v - SHARED_WINDOW, 1)?;
                crate::dsmem::encode(c, off) as u64
            }
            (true, Space::SharedCluster) => {
                if !(SHARED_WINDOW..SHARED_WINDOW + WINDOW_BYTES).contains(&v) {
                    return Err(self.fault(t, format!("cvta.to.shared::cluster of {v:#x}, not a shared-memory generic address")));
                }
                v - SHARED_WINDOW
            }
            (false, Space::Local) => LOCAL_WINDOW + v,
            (true, Space::Local) => v.wrapping_sub(LOCAL_WINDOW),
            (false, Space::Param) => PARAM_WINDOW + v,
            (true, Space::Param) => v.wrapping_sub(PARAM_WINDOW),
            (_, Space::Global | Space::Const | Space::Generic) => v,
        })
    }

    fn warp_present(&self, t: u32) -> u32 {
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
    // CTA and cluster barriers
    // ---------------------------------------------------------------------------------------

    fn bar_sync(&mut self, t: u32, a: &[Opd], arrive_only: bool) -> Result<bool, SimError> {
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

    fn check_cluster_barrier(&mut self) {
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

    fn exit_thread(&mut self, t: u32) -> Result<(), SimError> {
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

    fn exec_mbar(
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
                    return Err(self.fault(t, format!("mbarrier wait on shared-memory offset {off:#x}, which holds no initialised mbarrier")));
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
                    let scope = self.scope_of(ins.key);
                    self.emit(Event::MbarObserve {
                        by: t,
                        cta: c,
                        off,
                        phase: completed as i64 - 1,
                        scope,
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

    // ---------------------------------------------------------------------------------------
    // Warp collectives
    // ---------------------------------------------------------------------------------------

    fn collective(&mut self, t: u32, ins: &Instr) -> Result<(), SimError> {
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
        self.exec_collective(&lanes, ins)?;
        for &x in &lanes {
            self.threads[x as usize].pc += 1;
            self.count(x, ins);
            self.make_runnable(x);
        }
        Ok(())
    }

    fn exec_collective(&mut self, lanes: &[u32], ins: &Instr) -> Result<(), SimError> {
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

    // ---------------------------------------------------------------------------------------
    // TMA and tcgen05 issue
    // ---------------------------------------------------------------------------------------

    fn map_of(&self, t: u32, o: &Opd) -> Result<MapId, SimError> {
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

    fn coords(&self, t: u32, c: &[Opd]) -> [i32; 5] {
        let mut out = [0i32; 5];
        for (i, o) in c.iter().take(5).enumerate() {
            out[i] = self.rv(t, o) as i32;
        }
        out
    }

    fn tma_load(
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
            recs.push(rules::tma_load_issue(self, t, c, o, bytes)?);
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
            self.ev(Some(t), format!("TMA load issued (PTX line {}), box at {:?} into {doff:#x}, completes on {boff:#x}", line.0, &coords[..2]));
        }
        self.report.async_issued += 1;
        self.after_issue()
    }

    fn tma_store(&mut self, t: u32, ins: &Instr) -> Result<(), SimError> {
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
                    "TMA store issued (PTX line {}), from {off:#x} to the box at {:?}",
                    line.0,
                    &coords[..2]
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

    fn tc_mma(&mut self, t: u32, ins: &Instr, cg2: bool) -> Result<(), SimError> {
        rules::cta_group(self, t, cg2, "tcgen05.mma")?;
        rules::on_tcgen05(self, t, "tcgen05.mma")?;
        let a = &ins.args;
        let (d, _) = self.addr_of(t, &a[0]);
        let ad = self.rv(t, &a[1]);
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
        // Charged by its multiply-adds (budget.rs).
        self.charge(crate::budget::mma_macs(idesc) / crate::budget::MACS_PER_STEP)?;
        self.seq += 1;
        let seq = self.seq;
        rules::mma_issue(self, t, cta, cg2, idesc, ad, bd, d as u32, seq)?;
        self.observe_mma(t, cta, cg2, idesc, ad, bd, d as u32, seq)?;
        let line = self.line_of(t);
        self.tcq[t as usize].push_back(TcJob::Mma {
            cta,
            cg2,
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

    fn tc_commit(
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
        let line = self.line_of(t);
        let th = &self.threads[t as usize];
        let warp = th.warp;
        self.tcq[t as usize].push_back(TcJob::Commit {
            targets,
            line,
            warp,
            id,
        });
        if self.tcq[t as usize].len() == 1 {
            self.tc_active.push(t);
        }
        if self.o.trace {
            self.ev(
                Some(t),
                format!(
                    "tcgen05.commit issued (PTX line {}) to the barrier at {boff:#x}",
                    line.0
                ),
            );
        }
        self.report.async_issued += 1;
        self.after_issue()
    }

    /// `tcgen05.cp`: with `cta_group::2` into the tensor memory of the issuing CTA and of its
    /// peer (PTX ISA 9.7.16.9.2), which either CTA of the pair may issue (Table 46, "Issue
    /// Granularity": "a single thread from the CTA-Pair").
    fn tc_cp(
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
        // Every lane the shape reaches, `row_bytes` of each: row_bytes / 4 columns, in this CTA
        // and the peer (the shared-memory source is not tracked).
        for c in std::iter::once(cta).chain(peer) {
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

    fn tc_shift(&mut self, t: u32, ins: &Instr, cg2: bool) -> Result<(), SimError> {
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

    fn after_issue(&mut self) -> Result<(), SimError> {
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
            return self.retire_cp_async(i - self.tc_active.len());
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

    fn retire_tma(&mut self, j: TmaJob) -> Result<(), SimError> {
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
            let mut seen = self.xr.on().then(Vec::new);
            if let Err(e) = glue::tma_load(desc, &j.coords, self.dev, smem, o, seen.as_mut()) {
                return Err(SimError::Fault {
                    cta: self.cta_linear(who.0),
                    warp: who.1,
                    lane: self.threads[j.thread as usize].lane,
                    ptx_line: j.line.0,
                    source_line: j.line.1,
                    detail: format!("TMA load: {e}"),
                });
            }
            // The whole box is written, out-of-bound elements included (their fill is defined).
            self.ctas[c as usize].init.mark(o, j.bytes);
            if let Some(seen) = seen {
                self.global_ranges(j.thread, j.line, &seen, false)?;
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
                self.rule_at(j.line, who.0, who.1, "mbarrier-init", format!("a TMA load completes on shared-memory offset {bo:#x} of CTA rank {bc}, which holds no initialised mbarrier"))
            })?;
        }
        self.emit(Event::Retire { id: j.id })?;
        if self.o.trace {
            self.ev(
                Some(j.thread),
                format!("TMA load (PTX line {}) landed in {:?}", j.line.0, j.dst),
            );
        }
        self.report.async_retired += 1;
        Ok(())
    }

    fn retire_store(&mut self, s: StoreJob) -> Result<(), SimError> {
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
                detail: format!("TMA store: {e}"),
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

    fn retire_tc(&mut self, t: u32, job: TcJob) -> Result<(), SimError> {
        match job {
            TcJob::Mma {
                cta,
                cg2,
                idesc,
                a,
                b,
                d,
                acc,
                seq,
                line,
            } => {
                self.check_mma_operands(t, cta, cg2, idesc, a, b, line)?;
                self.mma_accumulator(t, cta, cg2, idesc, d, acc, line)?;
                let r = if cg2 {
                    let (lo, hi) = self.ctas.split_at_mut(cta as usize + 1);
                    let c0 = &mut lo[cta as usize];
                    let c1 = &mut hi[0];
                    glue::mma(
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
                    glue::mma(idesc, a, b, &[&c0.smem], &mut [&mut c0.tmem], d, acc, false)
                };
                r.map_err(|e| SimError::Fault {
                    cta: self.cta_linear(cta),
                    warp: self.threads[t as usize].warp,
                    lane: self.threads[t as usize].lane,
                    ptx_line: line.0,
                    source_line: line.1,
                    detail: format!("tcgen05.mma: {e}"),
                })?;
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
                        format!(
                            "tcgen05.commit (PTX line {}) arrived on {:?} (cta, offset, phase)",
                            line.0, arrived
                        ),
                    );
                }
                rules::commit_arrived(self, t, &arrived);
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
                        return Err(SimError::Fault {
                            cta: self.cta_linear(c),
                            warp: self.threads[t as usize].warp,
                            lane: self.threads[t as usize].lane,
                            ptx_line: line.0,
                            source_line: line.1,
                            detail: format!("tcgen05.cp: {e}"),
                        });
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
                        return Err(SimError::Fault {
                            cta: self.cta_linear(c),
                            warp: self.threads[t as usize].warp,
                            lane: self.threads[t as usize].lane,
                            ptx_line: line.0,
                            source_line: line.1,
                            detail: format!("tcgen05.shift: {e}"),
                        });
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

#[derive(Debug, Clone, Copy)]
pub(crate) enum Loc {
    Global(u64),
    Shared(u32, u32),
    Local(u64),
    Param(u64),
}

// -------------------------------------------------------------------------------------------
// Integer and float arithmetic
// -------------------------------------------------------------------------------------------

fn bin(b: Bin, ty: Ty, x: u64, y: u64) -> u64 {
    let w = ty.bits();
    if ty == Ty::Pred {
        let (p, q) = (x != 0, y != 0);
        return match b {
            Bin::And => (p && q) as u64,
            Bin::Or => (p || q) as u64,
            Bin::Xor => (p ^ q) as u64,
            _ => 0,
        };
    }
    if ty == Ty::F32 {
        let (p, q) = (f32_of(x), f32_of(y));
        let r = match b {
            Bin::Add => p + q,
            Bin::Sub => p - q,
            Bin::Mul | Bin::MulLo => p * q,
            Bin::Div => p / q,
            Bin::Min => p.min(q),
            Bin::Max => p.max(q),
            _ => return int_bin(b, Ty::B32, x, y),
        };
        return fbits(r);
    }
    if ty == Ty::F64 {
        let (p, q) = (f64::from_bits(x), f64::from_bits(y));
        let r = match b {
            Bin::Add => p + q,
            Bin::Sub => p - q,
            Bin::Mul | Bin::MulLo => p * q,
            Bin::Div => p / q,
            Bin::Min => p.min(q),
            Bin::Max => p.max(q),
            _ => return int_bin(b, Ty::B64, x, y),
        };
        return r.to_bits();
    }
    let _ = w;
    int_bin(b, ty, x, y)
}

fn int_bin(b: Bin, ty: Ty, x: u64, y: u64) -> u64 {
    let w = ty.bits();
    let s = ty.signed();
    let (ux, uy) = (mask(x, w), mask(y, w));
    let (ix, iy) = (sx(x, w), sx(y, w));
    match b {
        Bin::Add => mask(x.wrapping_add(y), w),
        Bin::Sub => mask(x.wrapping_sub(y), w),
        Bin::MulLo | Bin::Mul => mask(x.wrapping_mul(y), w),
        Bin::MulHi => {
            if s {
                mask(((ix as i128 * iy as i128) >> w) as u64, w)
            } else {
                mask(((ux as u128 * uy as u128) >> w) as u64, w)
            }
        }
        Bin::MulWide => {
            if s {
                mask((ix as i128 * iy as i128) as u64, 2 * w)
            } else {
                mask((ux as u128 * uy as u128) as u64, 2 * w)
            }
        }
        Bin::Div => {
            if uy == 0 {
                mask(u64::MAX, w)
            } else if s {
                mask(ix.wrapping_div(iy) as u64, w)
            } else {
                ux / uy
            }
        }
        Bin::Rem => {
            if uy == 0 {
                ux
            } else if s {
                mask(ix.wrapping_rem(iy) as u64, w)
            } else {
                ux % uy
            }
        }
        Bin::Min => {
            if s {
                mask(ix.min(iy) as u64, w)
            } else {
                ux.min(uy)
            }
        }
        Bin::Max => {
            if s {
                mask(ix.max(iy) as u64, w)
            } else {
                ux.max(uy)
            }
        }
        Bin::And => ux & uy,
        Bin::Or => ux | uy,
        Bin::Xor => ux ^ uy,
        Bin::Shl => {
            let n = y as u32;
            if n >= w {
                0
            } else {
                mask(ux << n, w)
            }
        }
        Bin::Shr => {
            let n = (y as u32).min(w);
            if s {
                let n = n.min(w - 1);
                mask((ix >> n) as u64, w)
            } else if n >= w {
                0
            } else {
                ux >> n
            }
        }
    }
}

fn un(u: Un, ty: Ty, x: u64) -> u64 {
    let w = ty.bits();
    match (u, ty) {
        (Un::Not, Ty::Pred) => (x == 0) as u64,
        (Un::Neg, Ty::F32) => fbits(-f32_of(x)),
        (Un::Abs, Ty::F32) => fbits(f32_of(x).abs()),
        (Un::Neg, Ty::F64) => (-f64::from_bits(x)).to_bits(),
        (Un::Abs, Ty::F64) => f64::from_bits(x).abs().to_bits(),
        (Un::Neg, _) => mask(x.wrapping_neg(), w),
        (Un::Not, _) => mask(!x, w),
        (Un::Abs, _) => mask(sx(x, w).unsigned_abs(), w),
        (Un::Popc, _) => mask(x, w).count_ones() as u64,
        (Un::Clz, _) => (mask(x, w).leading_zeros() - (64 - w)) as u64,
        (Un::Brev, _) => mask(x, w).reverse_bits() >> (64 - w),
        (Un::Cnot, _) => (mask(x, w) == 0) as u64,
    }
}

fn compare(c: Cmp, ty: Ty, x: u64, y: u64) -> bool {
    if ty.float() {
        let (p, q) = match ty {
            Ty::F64 => (f64::from_bits(x), f64::from_bits(y)),
            _ => (f32_of(x) as f64, f32_of(y) as f64),
        };
        let unord = p.is_nan() || q.is_nan();
        return match c {
            Cmp::Eq => p == q,
            Cmp::Ne => !unord && p != q,
            Cmp::Lt => p < q,
            Cmp::Le => p <= q,
            Cmp::Gt => p > q,
            Cmp::Ge => p >= q,
            Cmp::Equ => unord || p == q,
            Cmp::Neu => unord || p != q,
            Cmp::Ltu => unord || p < q,
            Cmp::Leu => unord || p <= q,
            Cmp::Gtu => unord || p > q,
            Cmp::Geu => unord || p >= q,
            Cmp::Num => !unord,
            Cmp::Nan => unord,
            Cmp::Lo => p < q,
            Cmp::Ls => p <= q,
            Cmp::Hi => p > q,
            Cmp::Hs => p >= q,
        };
    }
    let w = ty.bits();
    let (ux, uy) = (mask(x, w), mask(y, w));
    let (ix, iy) = (sx(x, w), sx(y, w));
    let s = ty.signed();
    match c {
        Cmp::Eq | Cmp::Equ => ux == uy,
        Cmp::Ne | Cmp::Neu => ux != uy,
        Cmp::Lt | Cmp::Ltu => {
            if s {
                ix < iy
            } else {
                ux < uy
            }
        }
        Cmp::Le | Cmp::Leu => {
            if s {
                ix <= iy
            } else {
                ux <= uy
            }
        }
        Cmp::Gt | Cmp::Gtu => {
            if s {
                ix > iy
            } else {
                ux > uy
            }
        }
        Cmp::Ge | Cmp::Geu => {
            if s {
                ix >= iy
            } else {
                ux >= uy
            }
        }
        Cmp::Lo => ux < uy,
        Cmp::Ls => ux <= uy,
        Cmp::Hi => ux > uy,
        Cmp::Hs => ux >= uy,
        Cmp::Num => true,
        Cmp::Nan => false,
    }
}

#[allow(dead_code)]
fn _rnd(_: Rnd) {}

// -------------------------------------------------------------------------------------------
// Setting up and running a launch
// -------------------------------------------------------------------------------------------

/// Lay out the kernel parameters: their bytes and where each tensor map starts.
pub(crate) fn build_params(k: &Kernel, l: &Launch) -> Result<(Vec<u8>, ParamMaps), SimError> {
    if l.params.len() != k.params.len() {
        return Err(SimError::Launch(format!(
            "kernel {} takes {} parameters, the launch passes {}",
            k.name,
            k.params.len(),
            l.params.len()
        )));
    }
    let mut buf = vec![0u8; k.param_bytes as usize];
    let mut maps = Vec::new();
    for (i, (p, v)) in k.params.iter().zip(&l.params).enumerate() {
        let o = p.offset as usize;
        let bytes: Vec<u8> = match v {
            Param::U32(x) => x.to_le_bytes().to_vec(),
            Param::U64(x) => x.to_le_bytes().to_vec(),
            Param::Bytes(b) => b.clone(),
            Param::TensorMap(d) => {
                maps.push((p.offset, *d));
                // An opaque blob: the simulator resolves the map by the parameter's address.
                let mut b = vec![0u8; 128];
                b[..8].copy_from_slice(b"SIMTMAP\0");
                b[8..12].copy_from_slice(&(maps.len() as u32 - 1).to_le_bytes());
                b
            }
        };
        if bytes.len() != p.bytes as usize {
            return Err(SimError::Launch(format!(
                "parameter {i} ({}) is {} bytes, the launch passes {}",
                p.name,
                p.bytes,
                bytes.len()
            )));
        }
        buf[o..o + bytes.len()].copy_from_slice(&bytes);
    }
    Ok((buf, maps))
}

pub(crate) fn new_thread(k: &Kernel, cta: u32, lin: u32, block: [u32; 3]) -> Thread {
    Thread {
        regs: vec![0; k.nregs as usize],
        pc: 0,
        st: St::Run,
        cta,
        tid: [
            lin % block[0],
            (lin / block[0]) % block[1],
            lin / (block[0] * block[1]),
        ],
        warp: lin / 32,
        lane: lin % 32,
        local: vec![0; k.local_bytes as usize],
        coll_mask: 0,
        cluster_arrived: None,
        rules: ThreadRules::default(),
        bulk_open: Vec::new(),
        bulk_groups: VecDeque::new(),
        prio: 0,
        cc: false,
        executed: vec![0; k.opcodes.len()],
        frame: 0,
        func: 0,
        calls: Vec::new(),
    }
}

pub(crate) fn globals_addrs(p: &Program, dev: &mut Device) -> Vec<u64> {
    let addrs: Vec<u64> = p
        .globals
        .iter()
        .map(|g| {
            let a = dev.alloc(g.bytes.max(1));
            if !g.init.is_empty() {
                dev.write(a, &g.init);
            }
            a
        })
        .collect();
    // Elements initialised with another variable's address (a generic address is the global
    // one: the simulator's address spaces share one numbering for global memory).
    for (g, &a) in p.globals.iter().zip(&addrs) {
        for &(off, target) in &g.addresses {
            dev.write(a + off, &addrs[target as usize].to_le_bytes());
        }
    }
    addrs
}
