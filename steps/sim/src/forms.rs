//! Which decoded instruction forms the interpreter runs, decided once when a module is decoded:
//! a kernel with a form it does not run is refused before any thread starts (`Unsupported`,
//! naming the instruction, its PTX line and its source line), never part-way through a run and
//! never computed silently wrong.
//!
//! [`modelled`] is called by `decode::decode_stmt` for every instruction, after its operands
//! are resolved. It refuses exactly the forms `exec.rs` cannot run: each line below is a form
//! the interpreter would refuse at run time or would compute differently from the PTX ISA.
//!
//! TO EXTEND (other parts of the simulator adding instructions at the same time): when you
//! model a form refused here, delete its line; when you add an `Op` some of whose forms your
//! exec code does not run, add one line per form here (a pattern and the reason in words),
//! rather than an `unsupported(...)` at run time.

use crate::decode::{Bin, Cmp, Op, Opd, Rnd, Ty, Un};

/// `Ok` when the interpreter runs `op` with operands `args` as the PTX ISA defines it; else why
/// not, in words a learner reads after the opcode.
pub(crate) fn modelled(op: &Op, args: &[Opd]) -> Result<(), &'static str> {
    let half = |t: &Ty| matches!(t, Ty::F16 | Ty::Bf16 | Ty::F16x2 | Ty::Bf16x2);
    match op {
        // exec computes fma in f32 or f64 only.
        Op::Fma(t) if !matches!(t, Ty::F32 | Ty::F64) => Err("fma/mad of this type"),
        // exec's arithmetic treats 16-bit floats as integers: refused, not computed wrong.
        Op::Bin(_, t) | Op::Un(_, t) | Op::Setp { ty: t, .. } if half(t) => {
            Err("half-precision arithmetic and comparison")
        }
        // Predicates only combine with and/or/xor (`not` is a `Un`).
        Op::Bin(b, Ty::Pred) if !matches!(b, Bin::And | Bin::Or | Bin::Xor) => {
            Err("arithmetic on predicates")
        }
        // Float operations that are not arithmetic on floats in PTX.
        Op::Bin(
            Bin::Rem
            | Bin::And
            | Bin::Or
            | Bin::Xor
            | Bin::Shl
            | Bin::Shr
            | Bin::MulHi
            | Bin::MulWide,
            Ty::F32 | Ty::F64,
        ) => Err("this operation on a float type"),
        Op::Un(u, Ty::F32 | Ty::F64) if !matches!(u, Un::Neg | Un::Abs) => {
            Err("this operation on a float type")
        }
        // Unsigned-only comparisons of floats are not PTX; exec would compare them ordered.
        Op::Setp {
            cmp: Cmp::Lo | Cmp::Ls | Cmp::Hi | Cmp::Hs,
            ty: Ty::F32 | Ty::F64,
            ..
        } => Err("an unsigned comparison of floats"),
        // cvt: exec's conversions (glue::cvt) refuse a pairing or rounding by returning None;
        // which ones depends on the types and rounding alone, so ask it once with any value.
        Op::Cvt {
            dst: Ty::F16x2 | Ty::Bf16x2,
            rnd,
            ..
        } if !matches!(rnd, Rnd::None | Rnd::Rn | Rnd::Rz | Rnd::Rm | Rnd::Rp) => {
            Err("this rounding of a conversion to a packed half pair")
        }
        Op::Cvt {
            dst: Ty::F16x2 | Ty::Bf16x2,
            src,
            ..
        } if *src != Ty::F32 => {
            Err("a conversion to a packed half pair from a type other than f32")
        }
        Op::Cvt { dst, src, rnd, sat }
            if !matches!(dst, Ty::F16x2 | Ty::Bf16x2)
                && crate::glue::cvt(*dst, *src, *rnd, *sat, 0).is_none() =>
        {
            Err("this conversion (types or rounding)")
        }
        // `.sat` of cvt is applied for f32 and integer destinations only.
        Op::Cvt {
            dst: Ty::F16 | Ty::Bf16 | Ty::F64,
            sat: true,
            ..
        } => Err("a saturating conversion to this type"),
        // exec branches to a decoded label only.
        Op::Bra if !matches!(args.first(), Some(Opd::Label(_))) => {
            Err("a branch to something other than a label (an indirect branch)")
        }
        // tcgen05.ld/st move a list of registers.
        Op::TcLd { .. } if !matches!(args.first(), Some(Opd::Vec(_))) => {
            Err("tcgen05.ld without a register list")
        }
        Op::TcSt { .. } if !matches!(args.get(1), Some(Opd::Vec(_))) => {
            Err("tcgen05.st without a register list")
        }
        // TMA operands: `[tensor map, {coordinates}]`.
        Op::TmaLoad { .. } if !matches!(args.get(1), Some(Opd::Tensor(..))) => {
            Err("a TMA load without a [tensor-map, {coordinates}] operand")
        }
        Op::TmaStore { .. } if !matches!(args.first(), Some(Opd::Tensor(..))) => {
            Err("a TMA store without a [tensor-map, {coordinates}] operand")
        }
        _ => Ok(()),
    }
}
