//! Integer arithmetic of [`super::IOp`] and the integer sides of `cvt`, on bit patterns
//! (PTX ISA "Integer Arithmetic Instructions", "Extended-Precision Integer Arithmetic
//! Instructions", "Logic and Shift Instructions", "Data Movement and Conversion
//! Instructions: prmt, cvt").

use super::fp::Mode;
use super::{IOp, LaneOp};
use crate::decode::{Cmp, Ty};

/// `prmt` modes (PTX ISA `prmt`): the default (selector nibbles) or one of the five fixed
/// byte patterns chosen by the selector's two low bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrmtMode {
    Default,
    F4e,
    B4e,
    Rc8,
    Ecl,
    Ecr,
    Rc16,
}

fn mask(v: u64, w: u32) -> u64 {
    if w >= 64 {
        v
    } else {
        v & ((1u64 << w) - 1)
    }
}

fn sx(v: u64, w: u32) -> i64 {
    if w >= 64 {
        v as i64
    } else {
        ((v << (64 - w)) as i64) >> (64 - w)
    }
}

/// The value of an integer register of type `t` (sign- or zero-extended from its width).
pub fn value(t: Ty, x: u64) -> i128 {
    let w = t.bits();
    if t.signed() {
        sx(x, w) as i128
    } else {
        mask(x, w) as i128
    }
}

/// Integer to integer `cvt`: wrap to the destination width, or clamp with `.sat`.
pub fn int_to_int(v: i128, d: Ty, sat: bool) -> u64 {
    let w = d.bits();
    let v = if sat {
        let (lo, hi) = range(d);
        v.clamp(lo, hi)
    } else {
        v
    };
    mask(v as u64, w)
}

fn range(t: Ty) -> (i128, i128) {
    let w = t.bits();
    if t.signed() {
        (-(1i128 << (w - 1)), (1i128 << (w - 1)) - 1)
    } else {
        (0, (1i128 << w) - 1)
    }
}

/// Round to an integral value (`.rni .rzi .rmi .rpi`, as Rn Rz Rm Rp); ties to even.
pub fn round_integral(v: f64, m: Mode) -> f64 {
    match m {
        Mode::Rn => v.round_ties_even(),
        Mode::Rz => v.trunc(),
        Mode::Rm => v.floor(),
        Mode::Rp => v.ceil(),
        Mode::Rna => v.round(),
    }
}

/// Float to integer `cvt` (PTX ISA: the result saturates to the destination's range, NaN
/// converts to 0).
pub fn float_to_int(v: f64, m: Mode, d: Ty) -> u64 {
    if v.is_nan() {
        return 0;
    }
    let (lo, hi) = range(d);
    let r = round_integral(v, m);
    let i = if r <= lo as f64 {
        lo
    } else if r >= hi as f64 {
        hi
    } else {
        r as i128
    };
    mask(i as u64, d.bits())
}

/// An integer comparison of `set` (the unsigned forms `lo ls hi hs` and the signedness of `t`).
pub fn icmp(c: Cmp, t: Ty, a: u64, b: u64) -> bool {
    let (x, y) = (value(t, a), value(t, b));
    let (ux, uy) = (mask(a, t.bits()), mask(b, t.bits()));
    match c {
        Cmp::Eq | Cmp::Equ => x == y,
        Cmp::Ne | Cmp::Neu => x != y,
        Cmp::Lt | Cmp::Ltu => x < y,
        Cmp::Le | Cmp::Leu => x <= y,
        Cmp::Gt | Cmp::Gtu => x > y,
        Cmp::Ge | Cmp::Geu => x >= y,
        Cmp::Lo => ux < uy,
        Cmp::Ls => ux <= uy,
        Cmp::Hi => ux > uy,
        Cmp::Hs => ux >= uy,
        Cmp::Num => true,
        Cmp::Nan => false,
    }
}

/// `prmt.b32{.mode} d, a, b, c`: bytes of {b, a} (a is bytes 0-3) picked by `c`.
pub fn prmt(mode: PrmtMode, a: u64, b: u64, c: u64) -> u64 {
    let bytes = mask(a, 32) | (mask(b, 32) << 32);
    let byte = |i: u64| (bytes >> (8 * (i & 7))) & 0xFF;
    let s = c & 3;
    let pick = |i: u64| -> u64 {
        match mode {
            PrmtMode::Default => {
                let sel = (c >> (4 * i)) & 0xF;
                let v = byte(sel & 7);
                if sel & 8 != 0 {
                    // msb set: replicate the selected byte's sign bit.
                    if v & 0x80 != 0 {
                        0xFF
                    } else {
                        0
                    }
                } else {
                    v
                }
            }
            PrmtMode::F4e => byte(s + i),
            PrmtMode::B4e => byte(s.wrapping_sub(i) & 7),
            PrmtMode::Rc8 => byte(s),
            PrmtMode::Ecl => byte(i.max(s)),
            PrmtMode::Ecr => byte(i.min(s)),
            PrmtMode::Rc16 => byte((i & 1) + 2 * (s & 1)),
        }
    };
    (0..4).fold(0, |acc, i| acc | (pick(i) << (8 * i)))
}

/// `lop3.b32 d, a, b, c, immLut`: each result bit is bit (a<<2 | b<<1 | c) of immLut.
pub fn lop3(a: u64, b: u64, c: u64, lut: u64) -> u64 {
    let mut r = 0u64;
    for i in 0..32 {
        let idx = (((a >> i) & 1) << 2) | (((b >> i) & 1) << 1) | ((c >> i) & 1);
        r |= ((lut >> idx) & 1) << i;
    }
    r
}

/// `bfind{.shiftamt}.type`: the bit position of the most significant non-sign bit
/// (0xFFFFFFFF if none); `.shiftamt` gives the left shift that moves it to the top.
pub fn bfind(t: Ty, x: u64, shiftamt: bool) -> u64 {
    let w = t.bits();
    let v = mask(x, w);
    let v = if t.signed() && (v >> (w - 1)) & 1 == 1 {
        mask(!v, w)
    } else {
        v
    };
    if v == 0 {
        return 0xFFFF_FFFF;
    }
    let pos = 63 - v.leading_zeros() as u64;
    if shiftamt {
        (w as u64 - 1) - pos
    } else {
        pos
    }
}

/// Evaluate an integer [`IOp`] on the source operands `x`; `cc` is CC.CF.
pub fn eval(op: IOp, t: Ty, x: &[u64], cc: &mut bool) -> u64 {
    let w = t.bits();
    let g = |i: usize| x.get(i).copied().unwrap_or(0);
    match op {
        IOp::AddC { sub, cin, cout } => {
            let (a, b) = (mask(g(0), w) as u128, mask(g(1), w) as u128);
            let c = (cin && *cc) as u128;
            let full = if sub {
                // d = a - (b + CF); CF out is the borrow (PTX ISA sub.cc / subc).
                a.wrapping_sub(b + c)
            } else {
                a + b + c
            };
            if cout {
                *cc = (full >> w) & 1 == 1;
            }
            mask(full as u64, w)
        }
        IOp::MadC { hi, cin, cout } => {
            let (a, b, c) = (g(0), g(1), mask(g(2), w) as u128);
            let p = if t.signed() {
                (sx(a, w) as i128 * sx(b, w) as i128) as u128
            } else {
                mask(a, w) as u128 * mask(b, w) as u128
            };
            let part = if hi { p >> w } else { p } & ((1u128 << w) - 1);
            let full = part + c + (cin && *cc) as u128;
            if cout {
                *cc = (full >> w) & 1 == 1;
            }
            mask(full as u64, w)
        }
        IOp::AddSat | IOp::SubSat => {
            let (a, b) = (sx(g(0), 32), sx(g(1), 32));
            let r = if op == IOp::AddSat { a + b } else { a - b };
            mask(r.clamp(i32::MIN as i64, i32::MAX as i64) as u64, 32)
        }
        IOp::Mul24 { hi } => mask(mul24(t, g(0), g(1), hi), 32),
        IOp::Mad24 { hi, sat } => {
            let p = mul24(t, g(0), g(1), hi);
            if sat {
                let r = sx(p, 32) + sx(g(2), 32);
                mask(r.clamp(i32::MIN as i64, i32::MAX as i64) as u64, 32)
            } else {
                mask(p.wrapping_add(g(2)), 32)
            }
        }
        IOp::Sad => {
            let (a, b) = (value(t, g(0)), value(t, g(1)));
            mask(((a - b).unsigned_abs() as u64).wrapping_add(g(2)), w)
        }
        IOp::Dp4a { sa, sb } => {
            let mut acc = g(2) as u32 as i64;
            if t == Ty::S32 {
                acc = g(2) as u32 as i32 as i64;
            }
            for i in 0..4 {
                let ea = lane(g(0), 8, i, sa);
                let eb = lane(g(1), 8, i, sb);
                acc = acc.wrapping_add(ea * eb);
            }
            mask(acc as u64, 32)
        }
        IOp::Dp2a { hi, sa, sb } => {
            let mut acc = if t == Ty::S32 {
                g(2) as u32 as i32 as i64
            } else {
                g(2) as u32 as i64
            };
            let base = if hi { 2 } else { 0 };
            for i in 0..2 {
                let ea = lane(g(0), 16, i, sa);
                let eb = lane(g(1), 8, base + i, sb);
                acc = acc.wrapping_add(ea * eb);
            }
            mask(acc as u64, 32)
        }
        IOp::Bfind { shiftamt } => bfind(t, g(0), shiftamt),
        IOp::Lop3 => lop3(g(0), g(1), g(2), g(3) & 0xFF),
        IOp::Prmt(m) => prmt(m, g(0), g(1), g(2)),
        IOp::Lanes { op, half, relu } => {
            let (bits, n) = if half { (16, 2) } else { (32, 1) };
            let s = t.signed();
            (0..n).fold(0, |acc, i| {
                let (a, b) = (lane(g(0), bits, i, s), lane(g(1), bits, i, s));
                let r = match op {
                    LaneOp::Add => a.wrapping_add(b),
                    LaneOp::Sub => a.wrapping_sub(b),
                    LaneOp::Min => a.min(b),
                    LaneOp::Max => a.max(b),
                };
                let r = if relu { r.max(0) } else { r };
                acc | (mask(r as u64, bits) << (bits * i))
            })
        }
        IOp::VAbsDiff4 { sd, sa, sb, sat } => (0..4).fold(0, |acc, i| {
            // Each byte pair, sign- or zero-extended by its type, gives |a - b|; `.sat`
            // clamps it to the destination type's byte range, else it is truncated.
            let r = (lane(g(0), 8, i, sa) - lane(g(1), 8, i, sb)).abs();
            let r = match (sat, sd) {
                (true, true) => r.min(127),
                (true, false) => r.min(255),
                _ => r,
            };
            acc | (mask(r as u64, 8) << (8 * i))
        }),
    }
}

/// Element `i` of `bits`-wide lanes of a 32-bit word, sign- or zero-extended.
fn lane(x: u64, bits: u32, i: u32, signed: bool) -> i64 {
    let v = (x >> (bits * i)) & ((1 << bits) - 1);
    if signed {
        sx(v, bits)
    } else {
        v as i64
    }
}

/// `mul24.{lo,hi}`: the 48-bit product of the low 24 bits; `.lo` its low 32 bits, `.hi` its
/// bits 47..16.
fn mul24(t: Ty, a: u64, b: u64, hi: bool) -> u64 {
    let (a, b) = if t.signed() {
        (sx(a, 24), sx(b, 24))
    } else {
        (mask(a, 24) as i64, mask(b, 24) as i64)
    };
    let p = (a * b) as u64;
    if hi {
        p >> 16
    } else {
        p
    }
}
