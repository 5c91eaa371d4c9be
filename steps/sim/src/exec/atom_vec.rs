//! Executing the vector atomics of `atom_vec.rs`. PTX ISA `atom`/`red`: "atom instruction on
//! packed type or vector type, accesses adjacent scalar elements in memory. In such cases, the
//! atomicity is guaranteed separately for each of the individual scalar elements": element i
//! of the vector operand applies to the element at `a + i * size`, each as one indivisible
//! read-modify-write (here all of them in one step, which is one of the orders hardware allows).
//! Alignment: PTX ISA "Addresses as Operands", a vector access is aligned to its whole size.

use crate::decode::{Instr, Op, Opd};
use crate::error::SimError;
use crate::exec::Loc;
use crate::machine::Machine;
use crate::observe::Access;

impl Machine<'_> {
    pub(super) fn exec_atom_vec(&mut self, t: u32, ins: &Instr) -> Result<(), SimError> {
        let Op::Atom {
            red,
            space,
            op,
            ty,
            vec,
            ..
        } = ins.op
        else {
            return Ok(());
        };
        let a = &ins.args;
        let (ai, vi) = if red { (0, 1) } else { (1, 2) };
        let (addr, _) = self.addr_of(t, &a[ai]);
        let size = ty.bytes();
        let total = size * vec as u32;
        if addr % total as u64 != 0 {
            return Err(self.fault(
                t,
                format!(
                    "{} of {total} bytes at {addr:#x}, not aligned to {total} bytes",
                    if red { "red" } else { "atom" }
                ),
            ));
        }
        let loc = self.resolve(t, space, addr, total)?;
        let Loc::Global(base) = loc else {
            return Err(self.fault(
                t,
                format!("vector atomic at {addr:#x}: the ISA allows only global memory"),
            ));
        };
        self.observe_mem(t, loc, total, Access::Atomic)?;
        let (Opd::Vec(vals), dst) = (&a[vi], if red { None } else { Some(&a[0]) }) else {
            return Err(self.fault(t, "vector atomic without a vector operand"));
        };
        let mut olds = Vec::with_capacity(vec as usize);
        for (i, o) in vals.iter().enumerate() {
            let at = Loc::Global(base + (i as u32 * size) as u64);
            let mut buf = [0u8; 8];
            self.read_bytes(t, at, &mut buf[..size as usize])?;
            let old = u64::from_le_bytes(buf);
            let new = crate::alu::atom_new(op, ty, old, self.rv(t, o), 0, true);
            self.write_bytes(t, at, &new.to_le_bytes()[..size as usize])?;
            olds.push(old);
        }
        if let Some(Opd::Vec(d)) = dst {
            for (o, v) in d.clone().iter().zip(olds) {
                self.wr(t, o, v);
            }
        }
        Ok(())
    }
}
