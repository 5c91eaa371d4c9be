//! The interpreter: per-thread register machines grouped in warps, CTAs grouped in a cluster,
//! one scheduler that owns every interleaving choice and every asynchronous completion.
//!
//! Works on the active cluster's state; `cluster.rs` keeps the resident clusters and the
//! scheduler that interleaves their threads and asynchronous operations.
//!
//! This module holds execution (fetch, the `exec` match, the runnable set, operands, address
//! resolution); its children hold memory, synchronisation, warp collectives, asynchronous
//! operations and the pure arithmetic (`alu`).

use crate::decode::{
    AtomOp, Base, Bin, BoolOp, Fence, Instr, Kernel, Op, Opd, Program, Space, Sreg, Sym, Ty,
};
use crate::error::SimError;
use crate::glue;
use crate::launch::{Launch, Param};
use crate::machine::{Machine, ParamMaps, St, Thread, Why};
use crate::mem::{Device, LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW, WINDOW_BYTES};
use crate::observe::{Access, Event, FenceKind};
use crate::rule_state::ThreadRules;
use crate::rules;
use std::collections::VecDeque;

mod alu;
mod async_ops;
mod memory;
mod mma_a;
pub(crate) mod pair;
mod sync;
mod warp;

use alu::{bin, compare, f32_of, fbits, mask, sx, un};
pub(crate) use memory::Loc;

/// Shared memory the hardware reserves below the kernel's own (1 KiB on sm_90/sm_100): the
/// kernel's shared variables start here, so a kernel that aligns its storage must do so itself.
pub const SMEM_RESERVED: u32 = 0x400;

const NONE: u32 = u32::MAX;

pub(crate) mod async_copy;
mod atom_vec;
pub(crate) mod clc;
mod forms;

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
            self.instructions += 1;
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
                } else if *f == Fence::MbarrierInit
                    || (*f == Fence::Memory
                        && self.scope_of(ins.key) >= crate::observe::Scope::Cluster)
                {
                    // A full fence at cluster scope orders the inits as well.
                    self.seq += 1;
                    let s = self.seq;
                    self.threads[t as usize].rules.mbar_init_fence_seq = s;
                }
            }
            Op::Activemask => {
                self.count(t, ins);
                let m = self.active_lanes(t);
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
            Op::Atom { vec, .. } if *vec > 1 => {
                self.count(t, ins);
                self.exec_atom_vec(t, ins)?;
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
                let global = matches!(loc, Loc::Global(_));
                let new = crate::alu::atom_new(*op, *ty, old, v, v2, global);
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
            Op::TcMma { cg2, kind } => {
                self.count(t, ins);
                self.tc_mma(t, ins, *cg2, *kind)?;
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
            Op::Clc(c) => {
                self.count(t, ins);
                self.exec_clc(t, ins, *c)?;
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
}

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
