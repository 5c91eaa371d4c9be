//! Interpreting the [`FormOp`] instructions: the warp-collective `mma.sync`, `ldmatrix` and
//! `stmatrix` (after the warp's rendezvous in `collective`), and the asynchronous `cp.async`
//! family (in `async_copy.rs`). A child of `exec`, so it uses the interpreter's operand and
//! memory accessors.

use super::Loc;
use crate::decode::{FormOp, Instr, Opd, Space};
use crate::error::SimError;
use crate::machine::Machine;
use crate::rules;
use crate::units::tmem_shapes::TmemShape;
use crate::units::{ldmatrix, mma_sync::MmaSyncForm};

fn regs_of(o: &Opd) -> &[Opd] {
    match o {
        Opd::Vec(v) => v,
        o => std::slice::from_ref(o),
    }
}

impl Machine<'_> {
    /// A thread's part of a non-collective form.
    pub(super) fn exec_form(&mut self, t: u32, ins: &Instr, f: FormOp) -> Result<(), SimError> {
        match f {
            FormOp::CpAsync { .. } => self.cp_async_issue(t, ins),
            FormOp::CpAsyncCommit => {
                self.cp_async_commit(t);
                Ok(())
            }
            FormOp::CpAsyncWait { all } => {
                if all {
                    self.cp_async_commit(t);
                }
                let n = if all {
                    0
                } else {
                    self.rv(t, &ins.args[0]) as u32
                };
                self.cp_async_wait(t, n)
            }
            FormOp::CpAsyncArrive { noinc } => self.cp_async_arrive(t, ins, noinc),
            _ => Err(self.unsupported(ins)),
        }
    }

    /// A warp-collective form, every lane of the warp present.
    pub(super) fn exec_form_collective(
        &mut self,
        lanes: &[u32],
        ins: &Instr,
        f: FormOp,
    ) -> Result<(), SimError> {
        let t0 = lanes[0];
        // `.aligned`: every thread of the warp executes the same instruction (PTX ISA "mma",
        // "ldmatrix", "stmatrix"); the fragments need all 32 lanes.
        if lanes.len() != 32 {
            return Err(self.fault(
                t0,
                format!(
                    "{} executed by {} lanes: the .sync.aligned form needs all 32 lanes of the warp",
                    self.k.opcodes[ins.key as usize],
                    lanes.len()
                ),
            ));
        }
        let a = &ins.args;
        match f {
            FormOp::MmaSync(m) => self.mma_sync(lanes, ins, m),
            FormOp::Ldmatrix { num, trans } => {
                let space = self.matrix_space(ins);
                let mut rows = vec![[0u16; 8]; 8 * num as usize];
                for (i, row) in rows.iter_mut().enumerate() {
                    let x = lanes[ldmatrix::row_lane(i as u32 / 8, i as u32 % 8) as usize];
                    let loc = self.matrix_row(x, &a[1], space)?;
                    let mut b = [0u8; 16];
                    self.observe_mem(x, loc, 16, crate::observe::Access::Read)?;
                    self.read_bytes(x, loc, &mut b)?;
                    for (e, p) in row.iter_mut().zip(b.chunks_exact(2)) {
                        *e = u16::from_le_bytes([p[0], p[1]]);
                    }
                }
                let out = ldmatrix::load(&rows, trans);
                for (&x, vals) in lanes.iter().zip(out) {
                    for (r, v) in regs_of(&a[0]).iter().zip(vals) {
                        self.wr(x, r, u64::from(v));
                    }
                }
                Ok(())
            }
            FormOp::Stmatrix { num, trans } => {
                let space = self.matrix_space(ins);
                let regs: Vec<Vec<u32>> = lanes
                    .iter()
                    .map(|&x| {
                        regs_of(&a[1])
                            .iter()
                            .map(|r| self.rv(x, r) as u32)
                            .collect()
                    })
                    .collect();
                let rows = ldmatrix::store(&regs, trans);
                for (i, row) in rows.iter().enumerate().take(8 * num as usize) {
                    let x = lanes[ldmatrix::row_lane(i as u32 / 8, i as u32 % 8) as usize];
                    let loc = self.matrix_row(x, &a[0], space)?;
                    let mut b = [0u8; 16];
                    for (p, e) in b.chunks_exact_mut(2).zip(row) {
                        p.copy_from_slice(&e.to_le_bytes());
                    }
                    self.observe_mem(x, loc, 16, crate::observe::Access::Write)?;
                    self.write_bytes(x, loc, &b)?;
                }
                Ok(())
            }
            FormOp::TcLdSt { st, shape, n, pack } => {
                self.tc_ld_st_16(lanes, ins, st, shape, n.into(), pack)
            }
            _ => Err(self.unsupported(ins)),
        }
    }

    /// A 16-lane `tcgen05.ld`/`st` ([`TmemShape`]), or a packed one of any shape: the warp
    /// reaches the lanes of its quarter (PTX ISA "Access restrictions": warp w % 4 reaches lanes
    /// 32 (w % 4) .. + 31), so the address's lane is the quarter's first or (16-lane shapes)
    /// middle lane. The ordering bookkeeping is the `.32x32b` form's: the destination registers
    /// are pending until `tcgen05.wait::ld`.
    ///
    /// Packing (PTX ISA 9.7.16.8.2, map in [`TmemShape::cell_packed`]): `ld` joins the low 16
    /// bits of two cells; `st` writes a register's halves to the low 16 bits of two cells. What
    /// the upper 16 bits of those cells become is not given in the ISA's text; the simulator
    /// writes 0x7FC0 there (a quiet NaN read as f32), so a 32-bit read of them shows in the
    /// result instead of passing for data.
    fn tc_ld_st_16(
        &mut self,
        lanes: &[u32],
        ins: &Instr,
        st: bool,
        shape: TmemShape,
        n: u32,
        pack: bool,
    ) -> Result<(), SimError> {
        let a = &ins.args;
        let what = if st { "tcgen05.st" } else { "tcgen05.ld" };
        // ld: r, [taddr]{, imm}; st: [taddr]{, imm}, r.
        let (addr_o, regs_o, imm) = if st {
            (&a[0], &a[a.len() - 1], a.get(1).filter(|_| a.len() == 3))
        } else {
            (&a[1], &a[0], a.get(2))
        };
        let split = imm.map_or(0, |o| self.rv(lanes[0], o) as u32);
        let cols = if pack {
            shape.columns_packed(n, split)
        } else {
            shape.columns(n, split)
        };
        for (k, &x) in lanes.iter().enumerate() {
            let taddr = self.rv(x, addr_o) as u32;
            rules::on_tcgen05(self, x, what)?;
            let (lane0, col0) = (taddr >> 16, taddr & 0xFFFF);
            let quarter = 32 * (self.threads[x as usize].warp % 4);
            let lane_ok = lane0 == quarter || (shape.lanes() == 16 && lane0 == quarter + 16);
            if !lane_ok {
                return Err(self.fault(x, format!("{what} at lane {lane0}: warp {} reaches lanes {quarter}..{} only, and a {}-lane shape starts at lane {quarter}{}", self.threads[x as usize].warp, quarter + 31, shape.lanes(), if shape.lanes() == 16 { format!(" or {}", quarter + 16) } else { String::new() })));
            }
            if col0 + cols > crate::units::tmem::COLUMNS {
                return Err(self.fault(
                    x,
                    format!(
                        "{what}: columns {col0}..{} are past the 512 columns",
                        col0 + cols
                    ),
                ));
            }
            let cta = self.threads[x as usize].cta;
            if let Err(e) = self.ctas[cta as usize]
                .tmem
                .require_allocated(what, col0, cols)
            {
                return Err(self.fault(x, e.to_string()));
            }
            if !st {
                rules::check_tmem_read(self, x, taddr, cols)?;
            }
            let regs = regs_of(regs_o).to_vec();
            for (i, r) in regs.iter().enumerate() {
                if pack {
                    let (dl, dc) = shape.cell_packed(k as u32, i as u32, split);
                    let (l, c) = (lane0 + dl, col0 + dc);
                    if st {
                        let v = self.rv(x, r) as u32;
                        for (h, cc) in [c, c + 1].into_iter().enumerate() {
                            let half = (v >> (16 * h)) & 0xFFFF;
                            let w = self.ctas[cta as usize]
                                .tmem
                                .write(l, cc, 0x7FC0_0000 | half);
                            w.map_err(|e| self.fault(x, e.to_string()))?;
                            self.ctas[cta as usize].tinit.mark(l..l + 1, cc, 1);
                        }
                    } else {
                        let tm = &self.ctas[cta as usize].tmem;
                        let lo = tm.read(l, c).map_err(|e| self.fault(x, e.to_string()))?;
                        let hi = tm
                            .read(l, c + 1)
                            .map_err(|e| self.fault(x, e.to_string()))?;
                        self.wr(x, r, u64::from((lo & 0xFFFF) | (hi << 16)));
                    }
                    continue;
                }
                let (dl, dc) = shape.cell(k as u32, i as u32, split);
                if st {
                    let v = self.rv(x, r) as u32;
                    let tm = &mut self.ctas[cta as usize].tmem;
                    tm.write(lane0 + dl, col0 + dc, v)
                        .map_err(|e| self.fault(x, e.to_string()))?;
                    let l = lane0 + dl;
                    self.ctas[cta as usize].tinit.mark(l..l + 1, col0 + dc, 1);
                } else {
                    let v = self.ctas[cta as usize]
                        .tmem
                        .read(lane0 + dl, col0 + dc)
                        .map_err(|e| self.fault(x, e.to_string()))?;
                    self.wr(x, r, u64::from(v));
                }
            }
            if !st {
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
        Ok(())
    }

    /// Where the 16-byte row that lane `x`'s address names lies: shared memory, 16-byte
    /// aligned (PTX ISA "ldmatrix": each row address must be aligned to 16 bytes).
    fn matrix_row(&self, x: u32, o: &Opd, space: Space) -> Result<Loc, SimError> {
        let (addr, _) = self.addr_of(x, o);
        if !addr.is_multiple_of(16) {
            return Err(self.fault(
                x,
                format!("ldmatrix/stmatrix row address {addr:#x} is not 16-byte aligned"),
            ));
        }
        match self.resolve(x, space, addr, 16)? {
            loc @ Loc::Shared(..) => Ok(loc),
            _ => Err(self.fault(
                x,
                format!("ldmatrix/stmatrix row address {addr:#x} is not in shared memory"),
            )),
        }
    }

    /// `.shared{::cta}` addresses, or generic ones without the state space.
    fn matrix_space(&self, ins: &Instr) -> Space {
        let op = &self.k.opcodes[ins.key as usize];
        if op.split('.').any(|m| m == "shared" || m == "shared::cta") {
            Space::Shared
        } else {
            Space::Generic
        }
    }

    fn mma_sync(&mut self, lanes: &[u32], ins: &Instr, m: MmaSyncForm) -> Result<(), SimError> {
        let a = &ins.args;
        let gather = |o: &Opd| -> Vec<Vec<u32>> {
            lanes
                .iter()
                .map(|&x| regs_of(o).iter().map(|r| self.rv(x, r) as u32).collect())
                .collect()
        };
        let (av, bv, cv) = (gather(&a[1]), gather(&a[2]), gather(&a[3]));
        let d = m.execute(&av, &bv, &cv);
        for (&x, vals) in lanes.iter().zip(d) {
            for (r, v) in regs_of(&a[0]).iter().zip(vals) {
                self.wr(x, r, u64::from(v));
            }
        }
        Ok(())
    }
}
