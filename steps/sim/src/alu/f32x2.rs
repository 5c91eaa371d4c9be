//! The packed single-precision forms of sm_100 (PTX ISA "Floating Point Instructions": `add`,
//! `sub`, `mul`, `fma` with type `.f32x2`): "forms input vectors of single precision (.f32)
//! values from source operands", `a[0:31]` and `a[32:63]` of .b64 operands, and operates on
//! them in parallel. Syntax (ISA 8.6): `add{.rnd}{.ftz}.f32x2`, `sub{.rnd}{.ftz}.f32x2`,
//! `mul{.rnd}{.ftz}.f32x2`, `fma.rnd{.ftz}.f32x2`; `.ftz` flushes subnormal inputs and results
//! of each lane to sign-preserving zero, as on `.f32`. NVRTC emits them for `__fadd2_rn`,
//! `__fmul2_rn` and `__ffma2_rn` (with `-ftz=true`, their `.ftz` forms).

use super::{mode_of, Alu, FInstr, FOp};
use crate::decode::Ty;

/// Decode `base.mods` holding `.f32x2`; `Err(())` for a form the ISA does not define.
pub(super) fn decode(base: &str, mods: &[&str]) -> Option<Result<Alu, ()>> {
    let op = match base {
        "add" => FOp::Add,
        "sub" => FOp::Sub,
        "mul" => FOp::Mul,
        "fma" => FOp::Fma,
        _ => return Some(Err(())),
    };
    let mut mode = None;
    let mut ftz = false;
    for m in mods {
        match (*m, mode_of(m)) {
            ("f32x2", _) => {}
            ("ftz", _) if !ftz => ftz = true,
            (_, Some(x)) if mode.is_none() && x != super::Mode::Rna => mode = Some(x),
            _ => return Some(Err(())),
        }
    }
    if op == FOp::Fma && mode.is_none() {
        return Some(Err(()));
    }
    Some(Ok(Alu::F32x2(FInstr {
        op,
        ty: Ty::F32,
        mode: mode.unwrap_or(super::Mode::Rn),
        approx: false,
        ftz,
        sat: false,
        relu: false,
        nan: false,
        xorsign: false,
        abs: false,
    })))
}

/// Each lane through the scalar f32 evaluation `f32op`.
pub(super) fn eval(f: &FInstr, x: &[u64], f32op: fn(&FInstr, &[u64]) -> u64) -> u64 {
    let lane = |sh: u32| -> u64 {
        let v: Vec<u64> = x.iter().map(|w| (w >> sh) & 0xFFFF_FFFF).collect();
        f32op(f, &v) & 0xFFFF_FFFF
    };
    lane(0) | (lane(32) << 32)
}
