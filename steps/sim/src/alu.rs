//! The arithmetic instructions NVRTC emits for CUDA's device math API and intrinsics, decoded
//! into [`Alu`] and evaluated as pure functions of operand bits ([`Alu::eval`]); the
//! interpreter only reads the operands and writes the results (`exec/alu.rs`).
//!
//! Floating point (PTX ISA "Floating-Point Instructions", "Half Precision Floating-Point
//! Instructions"): add sub mul fma mad div min max neg abs rcp sqrt rsqrt ex2 lg2 sin cos tanh
//! copysign testp, setp and set on floats, for f32 f64 f16 bf16 f16x2 bf16x2 where the ISA
//! defines them, with `.rn .rz .rm .rp`, `.ftz`, `.sat`, `.relu`, `.NaN`, `.xorsign.abs`;
//! `cvt` in every form listed in [`Cvt`]. Integer (PTX ISA "Integer Arithmetic Instructions",
//! "Logic and Shift Instructions"): carry chains (`add.cc`, `addc`, `sub.cc`, `subc`,
//! `mad.cc`, `madc`), `.sat` add/sub, mul24 mad24 sad dp4a dp2a bfind lop3 and prmt in all
//! its modes. Warp reductions (`redux.sync`, `match.sync`) are pure functions here too.

pub mod f32x2;
pub mod fp;
pub mod int;

use crate::decode::{AtomOp, BoolOp, Cmp, Ty};
use fp::{Arith, Fmt, Mode};

/// A floating-point operation of [`FInstr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FOp {
    Add,
    Sub,
    Mul,
    Fma,
    Div,
    Min,
    Max,
    Neg,
    Abs,
    Rcp,
    Sqrt,
    Rsqrt,
    Ex2,
    Lg2,
    Sin,
    Cos,
    Tanh,
    Copysign,
}

/// One floating-point arithmetic instruction with its modifiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FInstr {
    pub op: FOp,
    /// F16, Bf16, F32, F64, F16x2 or Bf16x2.
    pub ty: Ty,
    pub mode: Mode,
    pub approx: bool,
    pub ftz: bool,
    pub sat: bool,
    pub relu: bool,
    /// `min.NaN` / `max.NaN`: a NaN input gives NaN.
    pub nan: bool,
    /// `.xorsign.abs`
    pub xorsign: bool,
    /// `.abs` of three-input min/max
    pub abs: bool,
}

/// `testp.op`
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    Finite,
    Infinite,
    Number,
    NotANumber,
    Normal,
    Subnormal,
}

/// A `cvt` operand type: the fundamental types plus the packed and narrow float formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CTy {
    T(Ty),
    Tf32,
    E4m3x2,
    E5m2x2,
}

/// `cvt{.rnd}{.ftz}{.sat}{.relu}{.satfinite}.dst.src`
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cvt {
    pub dst: CTy,
    pub src: CTy,
    /// Floating-point rounding (None: none given).
    pub mode: Option<Mode>,
    /// Integer rounding (`.rni .rzi .rmi .rpi` as the float modes they round with).
    pub irnd: Option<Mode>,
    pub ftz: bool,
    pub sat: bool,
    pub relu: bool,
    pub satfinite: bool,
}

/// Integer operations not in the core's `Bin`/`Un`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IOp {
    /// `add.cc`, `addc{.cc}`, `sub.cc`, `subc{.cc}`: `cin` reads CC.CF, `cout` writes it.
    AddC {
        sub: bool,
        cin: bool,
        cout: bool,
    },
    /// `mad{c}.{lo,hi}{.cc}`
    MadC {
        hi: bool,
        cin: bool,
        cout: bool,
    },
    AddSat,
    SubSat,
    Mul24 {
        hi: bool,
    },
    Mad24 {
        hi: bool,
        sat: bool,
    },
    Sad,
    Dp4a {
        sa: bool,
        sb: bool,
    },
    Dp2a {
        hi: bool,
        sa: bool,
        sb: bool,
    },
    Bfind {
        shiftamt: bool,
    },
    Lop3,
    Prmt(int::PrmtMode),
    /// `add`/`sub`/`min`/`max` on two 16-bit halves (`.u16x2`, `.s16x2`; `half`) or one
    /// 32-bit value (`min.relu.s32`, `max.relu.s32`); the type's signedness is the lanes'.
    Lanes {
        op: LaneOp,
        half: bool,
        relu: bool,
    },
    /// `vabsdiff4.dtype.atype.btype{.sat} d, a, b, c`: the merge form with the default masks.
    VAbsDiff4 {
        sd: bool,
        sa: bool,
        sb: bool,
        sat: bool,
    },
}

/// The operation of [`IOp::Lanes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneOp {
    Add,
    Sub,
    Min,
    Max,
}

/// A decoded arithmetic instruction (see the module comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alu {
    Float(FInstr),
    /// `add sub mul fma` on `.f32x2` (two f32 lanes of a .b64; see `alu/f32x2.rs`); the
    /// instruction's `ty` is F32, applied to each lane.
    F32x2(FInstr),
    Testp(Test, Ty),
    /// `setp` on a float type (F16x2/Bf16x2 write `p|q`: lower half, upper half).
    Setp {
        cmp: Cmp,
        ty: Ty,
        bop: Option<BoolOp>,
        ftz: bool,
    },
    /// `set.cmp{.bop}{.ftz}.dtype.stype`
    Set {
        cmp: Cmp,
        dty: Ty,
        sty: Ty,
        bop: Option<BoolOp>,
        ftz: bool,
    },
    Cvt(Cvt),
    Int(IOp, Ty),
    /// `slct.dtype.s32` / `slct{.ftz}.dtype.f32 d, a, b, c`: `d = c >= 0 ? a : b` (PTX ISA
    /// "Comparison and Selection Instructions: slct"). With an f32 `c`: -0 counts as 0, a NaN
    /// `c` selects `b`, and `.ftz` flushes a subnormal `c` to the zero of its sign (so `a`).
    Slct {
        f32c: bool,
        ftz: bool,
    },
}

fn fmt_of(t: Ty) -> Option<Fmt> {
    Some(match t {
        Ty::F16 | Ty::F16x2 => Fmt::F16,
        Ty::Bf16 | Ty::Bf16x2 => Fmt::Bf16,
        Ty::F32 => Fmt::F32,
        Ty::F64 => Fmt::F64,
        _ => return None,
    })
}

fn is_x2(t: Ty) -> bool {
    matches!(t, Ty::F16x2 | Ty::Bf16x2)
}

fn float_ty(t: Ty) -> bool {
    fmt_of(t).is_some()
}

fn cmp_of(m: &str) -> Option<Cmp> {
    Some(match m {
        "eq" => Cmp::Eq,
        "ne" => Cmp::Ne,
        "lt" => Cmp::Lt,
        "le" => Cmp::Le,
        "gt" => Cmp::Gt,
        "ge" => Cmp::Ge,
        "lo" => Cmp::Lo,
        "ls" => Cmp::Ls,
        "hi" => Cmp::Hi,
        "hs" => Cmp::Hs,
        "equ" => Cmp::Equ,
        "neu" => Cmp::Neu,
        "ltu" => Cmp::Ltu,
        "leu" => Cmp::Leu,
        "gtu" => Cmp::Gtu,
        "geu" => Cmp::Geu,
        "num" => Cmp::Num,
        "nan" => Cmp::Nan,
        _ => return None,
    })
}

fn mode_of(m: &str) -> Option<Mode> {
    Some(match m {
        "rn" => Mode::Rn,
        "rz" => Mode::Rz,
        "rm" => Mode::Rm,
        "rp" => Mode::Rp,
        "rna" => Mode::Rna,
        _ => return None,
    })
}

fn irnd_of(m: &str) -> Option<Mode> {
    Some(match m {
        "rni" => Mode::Rn,
        "rzi" => Mode::Rz,
        "rmi" => Mode::Rm,
        "rpi" => Mode::Rp,
        _ => return None,
    })
}

/// Every modifier of `mods` is a type or in `allowed`.
fn only(mods: &[&str], allowed: &[&str]) -> Result<(), ()> {
    if mods
        .iter()
        .all(|m| Ty::parse(m).is_some() || allowed.contains(m))
    {
        Ok(())
    } else {
        Err(())
    }
}

/// Decode `base.mods`: None when the instruction is not one of this module's (the core decodes
/// it), `Some(Err(()))` for one of its forms that the simulator does not model.
pub fn decode(base: &str, mods: &[&str]) -> Option<Result<Alu, ()>> {
    let ty = mods.iter().rev().find_map(|m| Ty::parse(m));
    let has = |m: &str| mods.contains(&m);
    let fty = ty.filter(|t| float_ty(*t));
    let x2 = has("u16x2") || has("s16x2");
    if has("f32x2") {
        return f32x2::decode(base, mods);
    }
    if base == "slct" {
        return Some((|| {
            only(mods, &["ftz"])?;
            let tys: Vec<Ty> = mods.iter().filter_map(|m| Ty::parse(m)).collect();
            let [d, c] = tys[..] else { return Err(()) };
            let f32c = match c {
                Ty::F32 => true,
                Ty::S32 if !has("ftz") => false,
                _ => return Err(()),
            };
            if matches!(d, Ty::Pred | Ty::B128 | Ty::B8 | Ty::U8 | Ty::S8)
                || is_x2(d)
                || d == Ty::F16
                || d == Ty::Bf16
            {
                return Err(());
            }
            Ok(Alu::Slct {
                f32c,
                ftz: has("ftz"),
            })
        })());
    }
    match base {
        // PTX ISA "Integer Arithmetic Instructions: add, sub, min, max": `.u16x2`/`.s16x2`
        // operate on the two halves of a .b32 (add/sub wrap); `min{.relu}`/`max{.relu}` take
        // `.relu` only on `.s16x2` and `.s32` (a negative result becomes 0).
        "add" | "sub" | "min" | "max" if x2 || (has("relu") && fty.is_none()) => Some((|| {
            only(mods, &["u16x2", "s16x2", "relu"])?;
            let signed = if x2 {
                has("s16x2")
            } else {
                ty == Some(Ty::S32)
            };
            let minmax = matches!(base, "min" | "max");
            let ok = if x2 {
                ty.is_none() && (!has("relu") || (minmax && signed))
            } else {
                minmax && ty == Some(Ty::S32)
            };
            if !ok {
                return Err(());
            }
            let op = match base {
                "add" => LaneOp::Add,
                "sub" => LaneOp::Sub,
                "min" => LaneOp::Min,
                _ => LaneOp::Max,
            };
            Ok(Alu::Int(
                IOp::Lanes {
                    op,
                    half: x2,
                    relu: has("relu"),
                },
                if signed { Ty::S32 } else { Ty::U32 },
            ))
        })()),
        // PTX ISA "SIMD Video Instructions: vabsdiff4" (merge form; the `.mask`, `.asel` and
        // `.bsel` selectors and the `.add` accumulate form are not modelled).
        "vabsdiff4" => Some((|| {
            only(mods, &["sat"])?;
            let tys: Vec<Ty> = mods.iter().filter_map(|m| Ty::parse(m)).collect();
            let [td, ta, tb] = tys[..] else {
                return Err(());
            };
            if ![td, ta, tb].iter().all(|t| matches!(t, Ty::U32 | Ty::S32)) {
                return Err(());
            }
            Ok(Alu::Int(
                IOp::VAbsDiff4 {
                    sd: td == Ty::S32,
                    sa: ta == Ty::S32,
                    sb: tb == Ty::S32,
                    sat: has("sat"),
                },
                Ty::U32,
            ))
        })()),
        "add" | "sub" | "mul" | "fma" | "mad" | "div" | "min" | "max" | "neg" | "abs"
            if fty.is_some() =>
        {
            Some(decode_float(base, mods, fty?))
        }
        "rcp" | "sqrt" | "rsqrt" | "ex2" | "lg2" | "sin" | "cos" | "tanh" | "copysign" => {
            Some(match fty {
                Some(t) => decode_float(base, mods, t),
                None => Err(()),
            })
        }
        "testp" => Some((|| {
            let t = fty.ok_or(())?;
            only(
                mods,
                &[
                    "finite",
                    "infinite",
                    "number",
                    "notanumber",
                    "normal",
                    "subnormal",
                ],
            )?;
            let k = match mods.first().copied() {
                Some("finite") => Test::Finite,
                Some("infinite") => Test::Infinite,
                Some("number") => Test::Number,
                Some("notanumber") => Test::NotANumber,
                Some("normal") => Test::Normal,
                Some("subnormal") => Test::Subnormal,
                _ => return Err(()),
            };
            if !matches!(t, Ty::F32 | Ty::F64) {
                return Err(());
            }
            Ok(Alu::Testp(k, t))
        })()),
        "setp" if fty.is_some() => Some((|| {
            let cmp = cmp_of(mods.first().copied().ok_or(())?).ok_or(())?;
            only(&mods[1..], &["and", "or", "xor", "ftz"])?;
            Ok(Alu::Setp {
                cmp,
                ty: fty.ok_or(())?,
                bop: bop_of(mods),
                ftz: has("ftz"),
            })
        })()),
        "set" => Some((|| {
            let cmp = cmp_of(mods.first().copied().ok_or(())?).ok_or(())?;
            only(&mods[1..], &["and", "or", "xor", "ftz"])?;
            let tys: Vec<Ty> = mods.iter().filter_map(|m| Ty::parse(m)).collect();
            let [dty, sty] = tys[..] else { return Err(()) };
            if !matches!(
                dty,
                Ty::U32 | Ty::S32 | Ty::F32 | Ty::F16 | Ty::Bf16 | Ty::F16x2 | Ty::Bf16x2
            ) {
                return Err(());
            }
            if is_x2(dty) != is_x2(sty) && !(is_x2(sty) && matches!(dty, Ty::U32 | Ty::S32)) {
                return Err(());
            }
            Ok(Alu::Set {
                cmp,
                dty,
                sty,
                bop: bop_of(mods),
                ftz: has("ftz"),
            })
        })()),
        "cvt" => Some(decode_cvt(mods)),
        "add" | "sub" if has("cc") || has("sat") => Some((|| {
            let t = ty.ok_or(())?;
            if has("sat") {
                only(mods, &["sat"])?;
                if t != Ty::S32 {
                    return Err(());
                }
                return Ok(Alu::Int(
                    if base == "add" {
                        IOp::AddSat
                    } else {
                        IOp::SubSat
                    },
                    t,
                ));
            }
            only(mods, &["cc"])?;
            carry_ty(t)?;
            Ok(Alu::Int(
                IOp::AddC {
                    sub: base == "sub",
                    cin: false,
                    cout: true,
                },
                t,
            ))
        })()),
        "addc" | "subc" => Some((|| {
            let t = ty.ok_or(())?;
            only(mods, &["cc"])?;
            carry_ty(t)?;
            Ok(Alu::Int(
                IOp::AddC {
                    sub: base == "subc",
                    cin: true,
                    cout: has("cc"),
                },
                t,
            ))
        })()),
        "mad" | "madc" if base == "madc" || has("cc") => Some((|| {
            let t = ty.ok_or(())?;
            only(mods, &["cc", "lo", "hi"])?;
            carry_ty(t)?;
            if has("lo") == has("hi") {
                return Err(());
            }
            Ok(Alu::Int(
                IOp::MadC {
                    hi: has("hi"),
                    cin: base == "madc",
                    cout: has("cc"),
                },
                t,
            ))
        })()),
        "mul24" | "mad24" => Some((|| {
            let t = ty.ok_or(())?;
            only(mods, &["lo", "hi", "sat"])?;
            if !matches!(t, Ty::U32 | Ty::S32) || has("lo") == has("hi") {
                return Err(());
            }
            if base == "mul24" {
                if has("sat") {
                    return Err(());
                }
                Ok(Alu::Int(IOp::Mul24 { hi: has("hi") }, t))
            } else {
                if has("sat") && (t != Ty::S32 || !has("hi")) {
                    return Err(());
                }
                Ok(Alu::Int(
                    IOp::Mad24 {
                        hi: has("hi"),
                        sat: has("sat"),
                    },
                    t,
                ))
            }
        })()),
        "sad" => Some((|| {
            let t = ty.ok_or(())?;
            only(mods, &[])?;
            int_ty(t)?;
            Ok(Alu::Int(IOp::Sad, t))
        })()),
        "dp4a" | "dp2a" => Some((|| {
            only(mods, &["lo", "hi"])?;
            let tys: Vec<Ty> = mods.iter().filter_map(|m| Ty::parse(m)).collect();
            let [ta, tb] = tys[..] else { return Err(()) };
            if !matches!(ta, Ty::U32 | Ty::S32) || !matches!(tb, Ty::U32 | Ty::S32) {
                return Err(());
            }
            let (sa, sb) = (ta == Ty::S32, tb == Ty::S32);
            let out = if sa || sb { Ty::S32 } else { Ty::U32 };
            if base == "dp4a" {
                if has("lo") || has("hi") {
                    return Err(());
                }
                Ok(Alu::Int(IOp::Dp4a { sa, sb }, out))
            } else {
                if has("lo") == has("hi") {
                    return Err(());
                }
                Ok(Alu::Int(
                    IOp::Dp2a {
                        hi: has("hi"),
                        sa,
                        sb,
                    },
                    out,
                ))
            }
        })()),
        "bfind" => Some((|| {
            let t = ty.ok_or(())?;
            only(mods, &["shiftamt"])?;
            if !matches!(t, Ty::U32 | Ty::S32 | Ty::U64 | Ty::S64) {
                return Err(());
            }
            Ok(Alu::Int(
                IOp::Bfind {
                    shiftamt: has("shiftamt"),
                },
                t,
            ))
        })()),
        "lop3" => Some((|| {
            only(mods, &[])?;
            if ty != Some(Ty::B32) {
                return Err(());
            }
            Ok(Alu::Int(IOp::Lop3, Ty::B32))
        })()),
        "prmt" => Some((|| {
            only(mods, &["f4e", "b4e", "rc8", "ecl", "ecr", "rc16"])?;
            if ty != Some(Ty::B32) {
                return Err(());
            }
            let m = match mods.iter().find(|m| Ty::parse(m).is_none()).copied() {
                None => int::PrmtMode::Default,
                Some("f4e") => int::PrmtMode::F4e,
                Some("b4e") => int::PrmtMode::B4e,
                Some("rc8") => int::PrmtMode::Rc8,
                Some("ecl") => int::PrmtMode::Ecl,
                Some("ecr") => int::PrmtMode::Ecr,
                Some("rc16") => int::PrmtMode::Rc16,
                Some(_) => return Err(()),
            };
            Ok(Alu::Int(IOp::Prmt(m), Ty::B32))
        })()),
        _ => None,
    }
}

fn carry_ty(t: Ty) -> Result<(), ()> {
    if matches!(t, Ty::U32 | Ty::S32 | Ty::U64 | Ty::S64) {
        Ok(())
    } else {
        Err(())
    }
}

fn int_ty(t: Ty) -> Result<(), ()> {
    if matches!(t, Ty::U16 | Ty::U32 | Ty::U64 | Ty::S16 | Ty::S32 | Ty::S64) {
        Ok(())
    } else {
        Err(())
    }
}

fn bop_of(mods: &[&str]) -> Option<BoolOp> {
    mods.iter().find_map(|m| match *m {
        "and" => Some(BoolOp::And),
        "or" => Some(BoolOp::Or),
        "xor" => Some(BoolOp::Xor),
        _ => None,
    })
}

fn decode_float(base: &str, mods: &[&str], ty: Ty) -> Result<Alu, ()> {
    let has = |m: &str| mods.contains(&m);
    only(
        mods,
        &[
            "rn", "rz", "rm", "rp", "ftz", "sat", "approx", "full", "relu", "NaN", "xorsign", "abs",
        ],
    )?;
    let modes: Vec<Mode> = mods.iter().filter_map(|m| mode_of(m)).collect();
    if modes.len() > 1 || modes.contains(&Mode::Rna) {
        return Err(());
    }
    let op = match base {
        "add" => FOp::Add,
        "sub" => FOp::Sub,
        "mul" => FOp::Mul,
        "fma" | "mad" => FOp::Fma,
        "div" => FOp::Div,
        "min" => FOp::Min,
        "max" => FOp::Max,
        "neg" => FOp::Neg,
        "abs" => FOp::Abs,
        "rcp" => FOp::Rcp,
        "sqrt" => FOp::Sqrt,
        "rsqrt" => FOp::Rsqrt,
        "ex2" => FOp::Ex2,
        "lg2" => FOp::Lg2,
        "sin" => FOp::Sin,
        "cos" => FOp::Cos,
        "tanh" => FOp::Tanh,
        "copysign" => FOp::Copysign,
        _ => return Err(()),
    };
    let approx = has("approx") || has("full");
    let narrow = !matches!(ty, Ty::F32 | Ty::F64);
    // Which forms the ISA defines (and the simulator models).
    let ok = match op {
        FOp::Add | FOp::Sub | FOp::Mul => !approx && !has("relu") && !has("NaN") && !has("abs"),
        FOp::Fma => !approx && !has("NaN") && !has("abs") && (!has("relu") || narrow),
        FOp::Div => {
            matches!(ty, Ty::F32 | Ty::F64) && (approx == modes.is_empty() || ty == Ty::F64)
        }
        FOp::Min | FOp::Max => modes.is_empty() && !approx && !has("sat"),
        FOp::Neg | FOp::Abs | FOp::Copysign => modes.is_empty() && !approx && !has("sat"),
        FOp::Rcp | FOp::Sqrt => matches!(ty, Ty::F32 | Ty::F64) && (approx == modes.is_empty()),
        FOp::Rsqrt | FOp::Lg2 | FOp::Sin | FOp::Cos => {
            has("approx") && modes.is_empty() && matches!(ty, Ty::F32 | Ty::F64)
        }
        FOp::Ex2 | FOp::Tanh => has("approx") && modes.is_empty(),
    };
    // Division needs an explicit rounding or approximation (f64: rounding).
    let ok = ok
        && !(op == FOp::Div && ty == Ty::F64 && modes.is_empty())
        && !(matches!(op, FOp::Add | FOp::Sub | FOp::Mul | FOp::Fma)
            && ty == Ty::F64
            && has("ftz"))
        && (has("xorsign") == has("abs") || (has("abs") && !has("xorsign") && ty == Ty::F32));
    if !ok {
        return Err(());
    }
    Ok(Alu::Float(FInstr {
        op,
        ty,
        mode: modes.first().copied().unwrap_or(Mode::Rn),
        approx,
        ftz: has("ftz"),
        sat: has("sat"),
        relu: has("relu"),
        nan: has("NaN"),
        xorsign: has("xorsign"),
        abs: has("abs") && !has("xorsign"),
    }))
}

fn cty_of(m: &str) -> Option<CTy> {
    match m {
        "tf32" => Some(CTy::Tf32),
        "e4m3x2" => Some(CTy::E4m3x2),
        "e5m2x2" => Some(CTy::E5m2x2),
        _ => Ty::parse(m).map(CTy::T),
    }
}

fn decode_cvt(mods: &[&str]) -> Result<Alu, ()> {
    let tys: Vec<CTy> = mods.iter().filter_map(|m| cty_of(m)).collect();
    let [dst, src] = tys[..] else { return Err(()) };
    let mut mode = None;
    let mut irnd = None;
    let mut flags = (false, false, false, false);
    for m in mods {
        if cty_of(m).is_some() {
            continue;
        }
        if let Some(x) = mode_of(m) {
            if mode.replace(x).is_some() {
                return Err(());
            }
        } else if let Some(x) = irnd_of(m) {
            if irnd.replace(x).is_some() {
                return Err(());
            }
        } else {
            match *m {
                "ftz" => flags.0 = true,
                "sat" => flags.1 = true,
                "relu" => flags.2 = true,
                "satfinite" => flags.3 = true,
                _ => return Err(()),
            }
        }
    }
    let c = Cvt {
        dst,
        src,
        mode,
        irnd,
        ftz: flags.0,
        sat: flags.1,
        relu: flags.2,
        satfinite: flags.3,
    };
    if mode.is_some() && irnd.is_some() {
        return Err(());
    }
    let is_f = |t: CTy| matches!(t, CTy::T(t) if float_ty(t) && !is_x2(t));
    let is_i = |t: CTy| matches!(t, CTy::T(t) if !float_ty(t) && t != Ty::Pred && t != Ty::B128 && !is_x2(t));
    let ok = match (dst, src) {
        (CTy::T(Ty::F16x2 | Ty::Bf16x2), CTy::T(Ty::F32)) => mode.is_some() && !c.sat,
        (CTy::E4m3x2 | CTy::E5m2x2, CTy::T(Ty::F32 | Ty::F16x2)) => {
            mode == Some(Mode::Rn) && c.satfinite
        }
        (CTy::T(Ty::F16x2), CTy::E4m3x2 | CTy::E5m2x2) => mode == Some(Mode::Rn) && !c.satfinite,
        (CTy::Tf32, CTy::T(Ty::F32)) => mode.is_some(),
        (d, s) if is_f(d) && is_f(s) => {
            let (fd, fs) = (fmt_of(ty_of(d)).ok_or(())?, fmt_of(ty_of(s)).ok_or(())?);
            let narrowing = fd.man() < fs.man() || fd.bits() < fs.bits();
            // Narrowing takes a float rounding; same format an integer rounding (or none).
            // (a mode only narrows: widening is exact).
            (if narrowing {
                mode.is_some() || irnd.is_some()
            } else {
                mode.is_none()
            }) && (irnd.is_none() || fd == fs)
                && mode != Some(Mode::Rna)
        }
        (d, s) if is_i(d) && is_f(s) => mode.is_none() && !c.relu,
        (d, s) if is_f(d) && is_i(s) => irnd.is_none() && !c.relu && mode != Some(Mode::Rna),
        (d, s) if is_i(d) && is_i(s) => mode.is_none() && irnd.is_none() && !c.relu && !c.ftz,
        _ => false,
    };
    if !ok {
        return Err(());
    }
    Ok(Alu::Cvt(c))
}

fn ty_of(t: CTy) -> Ty {
    match t {
        CTy::T(t) => t,
        _ => Ty::B32,
    }
}

impl Alu {
    /// Operands (destination first), fewest and most.
    pub fn arity(&self) -> (usize, usize) {
        match self {
            Alu::Float(f) => match f.op {
                FOp::Neg
                | FOp::Abs
                | FOp::Rcp
                | FOp::Sqrt
                | FOp::Rsqrt
                | FOp::Ex2
                | FOp::Lg2
                | FOp::Sin
                | FOp::Cos
                | FOp::Tanh => (2, 2),
                FOp::Fma => (4, 4),
                FOp::Min | FOp::Max if f.ty == Ty::F32 && !f.xorsign => (3, 4),
                _ => (3, 3),
            },
            Alu::F32x2(f) => match f.op {
                FOp::Fma => (4, 4),
                _ => (3, 3),
            },
            Alu::Testp(..) => (2, 2),
            Alu::Slct { .. } => (4, 4),
            Alu::Setp { bop, .. } | Alu::Set { bop, .. } => {
                if bop.is_some() {
                    (4, 4)
                } else {
                    (3, 3)
                }
            }
            Alu::Cvt(c) => match (c.dst, c.src) {
                (CTy::T(Ty::F16x2 | Ty::Bf16x2), CTy::T(Ty::F32)) => (3, 3),
                (CTy::E4m3x2 | CTy::E5m2x2, CTy::T(Ty::F32)) => (3, 3),
                _ => (2, 2),
            },
            Alu::Int(op, _) => match op {
                IOp::AddC { .. }
                | IOp::AddSat
                | IOp::SubSat
                | IOp::Mul24 { .. }
                | IOp::Lanes { .. } => (3, 3),
                IOp::Bfind { .. } => (2, 2),
                IOp::Lop3 => (5, 5),
                _ => (4, 4),
            },
        }
    }

    /// Whether the instruction reads or writes the carry flag CC.CF.
    pub fn uses_carry(&self) -> bool {
        matches!(self, Alu::Int(IOp::AddC { .. } | IOp::MadC { .. }, _))
    }

    /// The results for source operand values `x` (destination excluded): the destination's
    /// bits and, for a `p|q` destination pair, the second predicate. `cc` is the thread's
    /// carry flag.
    pub fn eval(&self, x: &[u64], cc: &mut bool) -> (u64, u64) {
        match self {
            Alu::Float(f) => (float(f, x), 0),
            Alu::F32x2(f) => (f32x2::eval(f, x, float), 0),
            Alu::Testp(k, t) => {
                let fmt = fmt_of(*t).unwrap_or(Fmt::F32);
                let v = fmt.to_f64(x[0]);
                let r = match k {
                    Test::Finite => v.is_finite(),
                    Test::Infinite => v.is_infinite(),
                    Test::Number => !v.is_nan(),
                    Test::NotANumber => v.is_nan(),
                    Test::Normal => v.is_finite() && v != 0.0 && !fmt.is_subnormal(x[0]),
                    Test::Subnormal => fmt.is_subnormal(x[0]),
                };
                (r as u64, 0)
            }
            Alu::Setp { cmp, ty, bop, ftz } => {
                let fmt = fmt_of(*ty).unwrap_or(Fmt::F32);
                let c = x.get(2).map(|&v| v != 0);
                let comb = |p: bool| match (bop, c) {
                    (Some(BoolOp::And), Some(c)) => p && c,
                    (Some(BoolOp::Or), Some(c)) => p || c,
                    (Some(BoolOp::Xor), Some(c)) => p ^ c,
                    _ => p,
                };
                if is_x2(*ty) {
                    let lo = fcmp(*cmp, fmt, x[0] & 0xFFFF, x[1] & 0xFFFF, *ftz);
                    let hi = fcmp(
                        *cmp,
                        fmt,
                        (x[0] >> 16) & 0xFFFF,
                        (x[1] >> 16) & 0xFFFF,
                        *ftz,
                    );
                    (comb(lo) as u64, comb(hi) as u64)
                } else {
                    let r = fcmp(*cmp, fmt, x[0], x[1], *ftz);
                    (comb(r) as u64, comb(!r) as u64)
                }
            }
            Alu::Set {
                cmp,
                dty,
                sty,
                bop,
                ftz,
            } => {
                let c = x.get(2).map(|&v| v != 0);
                let comb = |p: bool| match (bop, c) {
                    (Some(BoolOp::And), Some(c)) => p && c,
                    (Some(BoolOp::Or), Some(c)) => p || c,
                    (Some(BoolOp::Xor), Some(c)) => p ^ c,
                    _ => p,
                };
                let test = |a: u64, b: u64, t: Ty| -> bool {
                    match fmt_of(t) {
                        Some(f) => fcmp(*cmp, f, a, b, *ftz),
                        None => int::icmp(*cmp, t, a, b),
                    }
                };
                if is_x2(*sty) {
                    let lo = comb(test(x[0] & 0xFFFF, x[1] & 0xFFFF, *sty));
                    let hi = comb(test((x[0] >> 16) & 0xFFFF, (x[1] >> 16) & 0xFFFF, *sty));
                    let one = match dty {
                        Ty::F16x2 => 0x3C00,
                        Ty::Bf16x2 => 0x3F80,
                        _ => 0xFFFF,
                    };
                    (
                        (if lo { one } else { 0 }) | (if hi { one << 16 } else { 0 }),
                        0,
                    )
                } else {
                    let p = comb(test(x[0], x[1], *sty));
                    let v = match (dty, p) {
                        (_, false) => 0,
                        (Ty::F32, true) => 1f32.to_bits() as u64,
                        (Ty::F16, true) => 0x3C00,
                        (Ty::Bf16, true) => 0x3F80,
                        (_, true) => 0xFFFF_FFFF,
                    };
                    (v, 0)
                }
            }
            Alu::Cvt(c) => (cvt(c, x[0], x.get(1).copied().unwrap_or(0)), 0),
            Alu::Int(op, ty) => (int::eval(*op, *ty, x, cc), 0),
            Alu::Slct { f32c, ftz } => {
                let pick = if *f32c {
                    let c = x[2] & 0xFFFF_FFFF;
                    let c = if *ftz { Fmt::F32.flush(c) } else { c };
                    // NaN: unordered, false; -0 >= 0 holds.
                    f32::from_bits(c as u32) >= 0.0
                } else {
                    x[2] as u32 as i32 >= 0
                };
                (if pick { x[0] } else { x[1] }, 0)
            }
        }
    }
}

/// A float comparison (PTX ISA `setp`: the unordered forms are true when either input is
/// NaN; `.ftz` flushes subnormal f32 inputs first).
pub fn fcmp(c: Cmp, fmt: Fmt, a: u64, b: u64, ftz: bool) -> bool {
    let (a, b) = if ftz {
        (fmt.flush(a), fmt.flush(b))
    } else {
        (a, b)
    };
    let (p, q) = (fmt.to_f64(a), fmt.to_f64(b));
    let unord = p.is_nan() || q.is_nan();
    match c {
        Cmp::Eq => p == q,
        Cmp::Ne => !unord && p != q,
        Cmp::Lt | Cmp::Lo => p < q,
        Cmp::Le | Cmp::Ls => p <= q,
        Cmp::Gt | Cmp::Hi => p > q,
        Cmp::Ge | Cmp::Hs => p >= q,
        Cmp::Equ => unord || p == q,
        Cmp::Neu => unord || p != q,
        Cmp::Ltu => unord || p < q,
        Cmp::Leu => unord || p <= q,
        Cmp::Gtu => unord || p > q,
        Cmp::Geu => unord || p >= q,
        Cmp::Num => !unord,
        Cmp::Nan => unord,
    }
}

/// One float instruction on (possibly packed) operands.
fn float(f: &FInstr, x: &[u64]) -> u64 {
    let Some(fmt) = fmt_of(f.ty) else {
        return 0;
    };
    if is_x2(f.ty) {
        let lo: Vec<u64> = x.iter().map(|v| v & 0xFFFF).collect();
        let hi: Vec<u64> = x.iter().map(|v| (v >> 16) & 0xFFFF).collect();
        return felem(f, fmt, &lo) | (felem(f, fmt, &hi) << 16);
    }
    felem(f, fmt, x)
}

/// `min`/`max` of two values (PTX ISA `min`/`max`: a NaN input is ignored unless `.NaN`; two
/// NaNs give NaN; -0.0 is smaller than +0.0).
fn minmax(max: bool, nan: bool, p: f64, q: f64) -> f64 {
    if p.is_nan() || q.is_nan() {
        if nan || (p.is_nan() && q.is_nan()) {
            return f64::NAN;
        }
        return if p.is_nan() { q } else { p };
    }
    if p == q {
        // Equal values: only zeros can differ (by sign).
        let neg = if max {
            p.is_sign_negative() && q.is_sign_negative()
        } else {
            p.is_sign_negative() || q.is_sign_negative()
        };
        return if neg { -p.abs() } else { p.abs() };
    }
    if (p < q) != max {
        p
    } else {
        q
    }
}

fn felem(f: &FInstr, fmt: Fmt, x: &[u64]) -> u64 {
    let mask = if fmt.bits() == 64 {
        u64::MAX
    } else {
        (1u64 << fmt.bits()) - 1
    };
    let inb = |i: usize| {
        let b = x.get(i).copied().unwrap_or(0) & mask;
        if f.ftz {
            fmt.flush(b)
        } else {
            b
        }
    };
    let v = |i: usize| fmt.to_f64(inb(i));
    let sign = fmt.bits() - 1;
    let mode = f.mode;
    // (nearest f64, remainder sign, mode) of the exact result, or the result bits directly.
    let (s, r) = match f.op {
        FOp::Neg => return inb(0) ^ (1 << sign),
        FOp::Abs => return inb(0) & !(1 << sign),
        FOp::Copysign => {
            // copysign d, a, b: b's magnitude with a's sign.
            let (a, b) = (inb(0), inb(1));
            return (b & !(1 << sign)) | (a & (1 << sign));
        }
        FOp::Min | FOp::Max => {
            let max = f.op == FOp::Max;
            let n = x.len().min(3);
            let vals: Vec<f64> = (0..n)
                .map(|i| if f.abs || f.xorsign { v(i).abs() } else { v(i) })
                .collect();
            let mut m = vals[0];
            for &q in &vals[1..] {
                m = minmax(max, f.nan, m, q);
            }
            if m.is_nan() {
                return fmt.nan();
            }
            let bits = fmt::exact(fmt, m);
            if f.xorsign {
                let s = (inb(0) ^ inb(1)) & (1 << sign);
                return (bits & !(1 << sign)) | s;
            }
            return bits;
        }
        FOp::Add | FOp::Sub | FOp::Mul | FOp::Div => {
            let op = match f.op {
                FOp::Add => Arith::Add,
                FOp::Sub => Arith::Sub,
                FOp::Mul => Arith::Mul,
                _ => Arith::Div,
            };
            let (a, b) = (v(0), v(1));
            if f.op == FOp::Div && f.approx && fmt == Fmt::F32 && !f.sat && x.len() == 2 {
                if let Some(r) = div_approx(f, a, b) {
                    return r;
                }
            }
            let (s, r) = fp::arith(op, a, b);
            let bneg = if op == Arith::Sub { -b } else { b };
            let s = if matches!(op, Arith::Add | Arith::Sub) {
                let same_zero =
                    (a == 0.0 && bneg == 0.0 && a.is_sign_negative() == bneg.is_sign_negative())
                        .then_some(a.is_sign_negative());
                fp::zero_sign(s, r, mode, same_zero)
            } else {
                s
            };
            // x/0 is an exact infinity (division by zero), not an overflow.
            let finite = a.is_finite() && b.is_finite() && !(op == Arith::Div && b == 0.0);
            (fp::overflow_fix(s, finite, mode), r)
        }
        FOp::Fma => {
            let (a, b, c) = (v(0), v(1), v(2));
            let (s, r) = fp::fma(a, b, c);
            let p = a * b;
            let same_zero = (p == 0.0 && c == 0.0 && p.is_sign_negative() == c.is_sign_negative())
                .then_some(p.is_sign_negative());
            let s = fp::zero_sign(s, r, mode, same_zero);
            (
                fp::overflow_fix(s, a.is_finite() && b.is_finite() && c.is_finite(), mode),
                r,
            )
        }
        FOp::Rcp if !f.approx => {
            // 1/x of a tiny x overflows like a division (IEEE 754 7.4: .rz gives the largest
            // finite value).
            let (s, r) = fp::arith(Arith::Div, 1.0, v(0));
            (
                fp::overflow_fix(s, v(0).is_finite() && v(0) != 0.0, mode),
                r,
            )
        }
        FOp::Sqrt if !f.approx => fp::sqrt(v(0)),
        // Approximations, computed to f64 accuracy and rounded to nearest (module comment).
        FOp::Rcp => (1.0 / v(0), 0),
        FOp::Sqrt => (v(0).sqrt(), 0),
        FOp::Rsqrt => {
            let a = v(0);
            // rsqrt(-0) = -inf, rsqrt(+0) = +inf (PTX ISA rsqrt table).
            (if a == 0.0 { 1.0 / a } else { 1.0 / a.sqrt() }, 0)
        }
        FOp::Ex2 => (v(0).exp2(), 0),
        FOp::Lg2 => (v(0).log2(), 0),
        FOp::Sin => (v(0).sin(), 0),
        FOp::Cos => (v(0).cos(), 0),
        FOp::Tanh => (v(0).tanh(), 0),
    };
    let mut out = fp::round(fmt, s, r, mode);
    if f.ftz {
        out = fmt.flush(out);
    }
    if f.sat {
        // .sat: clamp to [0.0, 1.0]; NaN becomes +0.0.
        let val = fmt.to_f64(out);
        if val.is_nan() || val <= 0.0 {
            out = 0;
        } else if val > 1.0 {
            out = fmt::exact(fmt, 1.0);
        }
    }
    if f.relu {
        // .relu: negative results become +0; NaN stays the canonical NaN.
        let val = fmt.to_f64(out);
        if val.is_nan() {
            out = fmt.nan();
        } else if val < 0.0 || out == 1 << sign {
            out = 0;
        }
    }
    out
}

/// `div.approx.f32` (PTX ISA: computed as `a * (1/b)`; for 2^126 < |b| < 2^128 the result is
/// 0, or NaN when `a` is infinite). None: the general case (rounded quotient).
fn div_approx(f: &FInstr, a: f64, b: f64) -> Option<u64> {
    let m = b.abs();
    if m > 2f64.powi(126) && m < 2f64.powi(128) {
        let out = if a.is_infinite() || a.is_nan() {
            Fmt::F32.nan()
        } else {
            let neg = (a.is_sign_negative()) != (b.is_sign_negative());
            if neg {
                0x8000_0000
            } else {
                0
            }
        };
        return Some(out);
    }
    let _ = f;
    None
}

mod fmt {
    use super::fp::{round, Fmt, Mode};
    /// Bits of an exactly representable value.
    pub fn exact(f: Fmt, v: f64) -> u64 {
        round(f, v, 0, Mode::Rn)
    }
}

/// `cvt` on the source bits `a` (and `b`, the second source of the packed forms).
pub fn cvt(c: &Cvt, a: u64, b: u64) -> u64 {
    let mode = c.mode.unwrap_or(Mode::Rn);
    match (c.dst, c.src) {
        (CTy::T(d @ (Ty::F16x2 | Ty::Bf16x2)), CTy::T(Ty::F32)) => {
            // a goes to the upper half, b to the lower (PTX ISA cvt).
            let fmt = fmt_of(d).unwrap_or(Fmt::F16);
            let one = |v: u64| narrow(c, fmt, Fmt::F32.to_f64(v), 0, mode);
            (one(a) << 16) | one(b)
        }
        (CTy::E4m3x2 | CTy::E5m2x2, src) => {
            let fmt = if c.dst == CTy::E4m3x2 {
                Fmt::E4m3
            } else {
                Fmt::E5m2
            };
            let (hi, lo) = match src {
                CTy::T(Ty::F16x2) => (
                    Fmt::F16.to_f64((a >> 16) & 0xFFFF),
                    Fmt::F16.to_f64(a & 0xFFFF),
                ),
                _ => (Fmt::F32.to_f64(a), Fmt::F32.to_f64(b)),
            };
            (narrow(c, fmt, hi, 0, mode) << 8) | narrow(c, fmt, lo, 0, mode)
        }
        (CTy::T(Ty::F16x2), s @ (CTy::E4m3x2 | CTy::E5m2x2)) => {
            let fmt = if s == CTy::E4m3x2 {
                Fmt::E4m3
            } else {
                Fmt::E5m2
            };
            let one = |v: u64| narrow(c, Fmt::F16, fmt.to_f64(v & 0xFF), 0, mode);
            (one(a >> 8) << 16) | one(a)
        }
        (CTy::Tf32, _) => narrow(c, Fmt::Tf32, Fmt::F32.to_f64(a), 0, mode),
        (CTy::T(d), CTy::T(s)) => {
            match (fmt_of(d), fmt_of(s)) {
                (Some(fd), Some(fs)) => {
                    let ab = if c.ftz {
                        fs.flush(a & mask_of(fs))
                    } else {
                        a & mask_of(fs)
                    };
                    let v = fs.to_f64(ab);
                    let v = match c.irnd {
                        Some(m) => int::round_integral(v, m),
                        None => v,
                    };
                    narrow(c, fd, v, 0, mode)
                }
                (None, Some(fs)) => {
                    let ab = if c.ftz {
                        fs.flush(a & mask_of(fs))
                    } else {
                        a & mask_of(fs)
                    };
                    int::float_to_int(fs.to_f64(ab), c.irnd.unwrap_or(Mode::Rz), d)
                }
                (Some(fd), None) => {
                    let i = int::value(s, a);
                    let sv = i as f64;
                    // The exact remainder of the integer's f64 rounding.
                    let r = (i - sv as i128).signum() as i8;
                    narrow(c, fd, sv, r, mode)
                }
                (None, None) => int::int_to_int(int::value(s, a), d, c.sat),
            }
        }
        _ => 0,
    }
}

fn mask_of(f: Fmt) -> u64 {
    if f.bits() == 64 {
        u64::MAX
    } else {
        (1u64 << f.bits()) - 1
    }
}

/// Round `v` (+ remainder sign `r`) into `fmt` and apply `cvt`'s `.ftz .sat .relu
/// .satfinite`.
fn narrow(c: &Cvt, fmt: Fmt, v: f64, r: i8, mode: Mode) -> u64 {
    let mut out = fp::round(fmt, v, r, mode);
    let sign = 1u64 << (fmt.bits() - 1);
    if c.ftz {
        out = fmt.flush(out);
    }
    let val = fmt.to_f64(out);
    if c.satfinite && val.is_infinite() {
        // .satfinite: an infinity becomes the largest finite value of its sign.
        out = (out & sign) | fp::round(fmt, fmt.max_value(), 0, Mode::Rz);
    }
    if c.satfinite && fmt == Fmt::E4m3 && (v.abs() > 448.0) && !v.is_nan() {
        out = (if v < 0.0 { 0x80 } else { 0 }) | 0x7E;
    }
    if c.sat {
        if val.is_nan() || val <= 0.0 {
            out = 0;
        } else if val > 1.0 {
            out = fmt::exact(fmt, 1.0);
        }
    }
    if c.relu {
        if val.is_nan() {
            out = fmt.nan();
        } else if val < 0.0 || out == sign {
            out = 0;
        }
    }
    out
}

/// The new memory value of `atom`/`red` `op` on type `ty` (PTX ISA `atom`): `old` in memory,
/// `v` the operand, `v2` the swap value of `cas`. Float adds round to nearest; f16/bf16 (which
/// require `.noftz`) keep subnormals and their packed forms add each half. `global` says the
/// place is global memory: PTX ISA `atom`/`red`, "Current implementation of atom.add.f32 on
/// global memory flushes subnormal inputs and results to sign-preserving zero; whereas
/// atom.add.f32 on shared memory supports subnormal inputs and results".
pub fn atom_new(op: AtomOp, ty: Ty, old: u64, v: u64, v2: u64, global: bool) -> u64 {
    let w = ty.bits();
    let m = if w >= 64 { u64::MAX } else { (1u64 << w) - 1 };
    let (old, v, v2) = (old & m, v & m, v2 & m);
    if let Some(fmt) = fmt_of(ty) {
        let f = FInstr {
            op: match op {
                AtomOp::Min => FOp::Min,
                AtomOp::Max => FOp::Max,
                _ => FOp::Add,
            },
            ty,
            mode: Mode::Rn,
            approx: false,
            ftz: global && ty == Ty::F32 && op == AtomOp::Add,
            sat: false,
            relu: false,
            nan: false,
            xorsign: false,
            abs: false,
        };
        return match op {
            AtomOp::Add | AtomOp::Min | AtomOp::Max => {
                let _ = fmt;
                float(&f, &[old, v])
            }
            AtomOp::Exch => v,
            AtomOp::Cas => {
                if old == v {
                    v2
                } else {
                    old
                }
            }
            AtomOp::And => old & v,
            AtomOp::Or => old | v,
            AtomOp::Xor => old ^ v,
            AtomOp::Inc | AtomOp::Dec => old,
        };
    }
    let s = ty.signed();
    let sx = |x: u64| {
        if w >= 64 {
            x as i64
        } else {
            ((x << (64 - w)) as i64) >> (64 - w)
        }
    };
    let r = match op {
        AtomOp::Add => old.wrapping_add(v),
        AtomOp::Min => {
            if s {
                sx(old).min(sx(v)) as u64
            } else {
                old.min(v)
            }
        }
        AtomOp::Max => {
            if s {
                sx(old).max(sx(v)) as u64
            } else {
                old.max(v)
            }
        }
        AtomOp::And => old & v,
        AtomOp::Or => old | v,
        AtomOp::Xor => old ^ v,
        AtomOp::Exch => v,
        AtomOp::Cas => {
            if old == v {
                v2
            } else {
                old
            }
        }
        // inc: ((old >= v) ? 0 : old + 1); dec: ((old == 0 || old > v) ? v : old - 1).
        AtomOp::Inc => {
            if old >= v {
                0
            } else {
                old + 1
            }
        }
        AtomOp::Dec => {
            if old == 0 || old > v {
                v
            } else {
                old - 1
            }
        }
    };
    r & m
}

/// `redux.sync` operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redux {
    Add,
    Min,
    Max,
    And,
    Or,
    Xor,
}

/// A warp-collective arithmetic instruction (run at the warp rendezvous).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WarpAlu {
    /// `redux.sync.op{.abs}{.NaN}.type d, a, membermask`
    Redux {
        op: Redux,
        ty: Ty,
        abs: bool,
        nan: bool,
    },
    /// `match.any.sync.bNN d, a, membermask`
    MatchAny(Ty),
    /// `match.all.sync.bNN d[|p], a, membermask`
    MatchAll(Ty),
}

/// Decode `redux` and `match`; None when not one of them.
pub fn decode_warp(base: &str, mods: &[&str]) -> Option<Result<WarpAlu, ()>> {
    let ty = mods.iter().rev().find_map(|m| Ty::parse(m));
    let has = |m: &str| mods.contains(&m);
    match base {
        "redux" => Some((|| {
            only(
                mods,
                &[
                    "sync", "add", "min", "max", "and", "or", "xor", "abs", "NaN",
                ],
            )?;
            let t = ty.ok_or(())?;
            let op = if has("add") {
                Redux::Add
            } else if has("min") {
                Redux::Min
            } else if has("max") {
                Redux::Max
            } else if has("and") {
                Redux::And
            } else if has("or") {
                Redux::Or
            } else if has("xor") {
                Redux::Xor
            } else {
                return Err(());
            };
            let ok = match op {
                Redux::Add => matches!(t, Ty::U32 | Ty::S32),
                Redux::Min | Redux::Max => matches!(t, Ty::U32 | Ty::S32 | Ty::F32),
                _ => t == Ty::B32,
            } && ((!has("abs") && !has("NaN")) || t == Ty::F32);
            if !has("sync") || !ok {
                return Err(());
            }
            Ok(WarpAlu::Redux {
                op,
                ty: t,
                abs: has("abs"),
                nan: has("NaN"),
            })
        })()),
        "match" => Some((|| {
            only(mods, &["sync", "any", "all"])?;
            let t = ty.ok_or(())?;
            if !matches!(t, Ty::B32 | Ty::B64) || !has("sync") {
                return Err(());
            }
            match (has("any"), has("all")) {
                (true, false) => Ok(WarpAlu::MatchAny(t)),
                (false, true) => Ok(WarpAlu::MatchAll(t)),
                _ => Err(()),
            }
        })()),
        _ => None,
    }
}

/// `redux.sync` over the values of the participating lanes.
pub fn redux(op: Redux, ty: Ty, abs: bool, nan: bool, vals: &[u64]) -> u64 {
    if ty == Ty::F32 {
        let f = FInstr {
            op: if op == Redux::Max { FOp::Max } else { FOp::Min },
            ty,
            mode: Mode::Rn,
            approx: false,
            ftz: false,
            sat: false,
            relu: false,
            nan,
            xorsign: false,
            abs,
        };
        let mut acc = vals.first().copied().unwrap_or(0) & 0xFFFF_FFFF;
        if abs {
            acc &= 0x7FFF_FFFF;
        }
        for &v in &vals[1..] {
            acc = float(&f, &[acc, v & 0xFFFF_FFFF]);
        }
        return acc;
    }
    let s = ty == Ty::S32;
    let mut acc = vals.first().copied().unwrap_or(0) as u32;
    for &v in &vals[1..] {
        let v = v as u32;
        acc = match op {
            Redux::Add => acc.wrapping_add(v),
            Redux::Min if s => (acc as i32).min(v as i32) as u32,
            Redux::Max if s => (acc as i32).max(v as i32) as u32,
            Redux::Min => acc.min(v),
            Redux::Max => acc.max(v),
            Redux::And => acc & v,
            Redux::Or => acc | v,
            Redux::Xor => acc ^ v,
        };
    }
    acc as u64
}
