//! Vector atomics and reductions (`atom.v2/.v4/.v8`, `red.v2/.v4/.v8`, sm_90 and later): which
//! forms the PTX ISA defines. PTX ISA `atom` and `red`, "with vector type": only `.global` (or
//! generic addressing that points there); `.add` on `.f32` with `.v2`/`.v4`; `.add .min .max`
//! with the required `.noftz` on `.f16`/`.bf16` with `.v2 .v4 .v8` and on `.f16x2`/`.bf16x2`
//! with `.v2 .v4`. The interpreter's side is `exec/atom_vec.rs`.

use crate::decode::{AtomOp, Space, Ty};

/// Whether `op.vec.ty` (with `.noftz` or not, in state space `space`) is a vector form the ISA
/// defines; anything else is refused when the module is decoded.
pub(crate) fn legal(op: AtomOp, ty: Ty, vec: u8, space: Space, noftz: bool) -> bool {
    if !matches!(space, Space::Global | Space::Generic) {
        return false;
    }
    match ty {
        Ty::F32 => op == AtomOp::Add && matches!(vec, 2 | 4) && !noftz,
        Ty::F16 | Ty::Bf16 => {
            matches!(op, AtomOp::Add | AtomOp::Min | AtomOp::Max)
                && matches!(vec, 2 | 4 | 8)
                && noftz
        }
        Ty::F16x2 | Ty::Bf16x2 => {
            matches!(op, AtomOp::Add | AtomOp::Min | AtomOp::Max) && matches!(vec, 2 | 4) && noftz
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_isa_table_and_nothing_else() {
        let g = Space::Global;
        assert!(legal(AtomOp::Add, Ty::F32, 4, g, false));
        assert!(legal(AtomOp::Add, Ty::F32, 2, Space::Generic, false));
        assert!(!legal(AtomOp::Add, Ty::F32, 8, g, false));
        assert!(!legal(AtomOp::Max, Ty::F32, 2, g, false));
        assert!(!legal(AtomOp::Add, Ty::F32, 2, Space::Shared, false));
        assert!(legal(AtomOp::Max, Ty::F16, 8, g, true));
        assert!(!legal(AtomOp::Max, Ty::F16, 8, g, false));
        assert!(legal(AtomOp::Min, Ty::Bf16x2, 4, g, true));
        assert!(!legal(AtomOp::Min, Ty::Bf16x2, 8, g, true));
        assert!(!legal(AtomOp::Add, Ty::U32, 2, g, false));
    }
}
