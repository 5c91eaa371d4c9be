//! The interpreter's side of [`crate::alu`]: read the operands, evaluate, write the results.

use crate::alu::{self, Alu, WarpAlu};
use crate::decode::Opd;
use crate::decode::{Bin, Cmp, Rnd, Ty, Un};
use crate::machine::Machine;

impl Machine<'_> {
    /// One [`Alu`] instruction of thread `t` (operands `a`, destination first).
    pub(super) fn exec_alu(&mut self, t: u32, x: &Alu, a: &[Opd]) {
        let mut src = [0u64; 4];
        let n = a.len() - 1;
        for (i, o) in a[1..].iter().enumerate() {
            src[i] = self.rv(t, o);
        }
        let mut cc = self.threads[t as usize].cc;
        let (d, q) = x.eval(&src[..n], &mut cc);
        if x.uses_carry() {
            self.threads[t as usize].cc = cc;
        }
        match &a[0] {
            Opd::Pair(p, r) => {
                let (p, r) = (p.as_ref().clone(), r.as_ref().clone());
                self.wr(t, &p, d);
                self.wr(t, &r, q);
            }
            o => self.wr(t, o, d),
        }
    }

    /// `redux.sync` / `match.sync` over `lanes` (all at the rendezvous, in lane order).
    pub(super) fn exec_warp_alu(&mut self, lanes: &[u32], w: &WarpAlu, a: &[Opd]) {
        let vals: Vec<u64> = lanes.iter().map(|&x| self.rv(x, &a[1])).collect();
        let bits: Vec<u32> = lanes
            .iter()
            .map(|&x| self.threads[x as usize].lane)
            .collect();
        match w {
            WarpAlu::Redux { op, ty, abs, nan } => {
                let r = alu::redux(*op, *ty, *abs, *nan, &vals);
                for &x in lanes {
                    self.wr(x, &a[0], r);
                }
            }
            WarpAlu::MatchAny(ty) | WarpAlu::MatchAll(ty) => {
                let width = ty.bits();
                let v: Vec<u64> = vals.iter().map(|&v| mask(v, width)).collect();
                let all_same = v.iter().all(|&y| y == v[0]);
                let full: u32 = bits.iter().fold(0, |m, &l| m | (1 << l));
                for (i, &x) in lanes.iter().enumerate() {
                    // match.any: the lanes holding this lane's value; match.all: every lane
                    // of the mask when all hold the same value, else 0 (and p false).
                    let (d, p) = match w {
                        WarpAlu::MatchAny(_) => (
                            bits.iter()
                                .zip(&v)
                                .filter(|(_, &y)| y == v[i])
                                .fold(0u32, |m, (&l, _)| m | (1 << l)),
                            true,
                        ),
                        _ => (if all_same { full } else { 0 }, all_same),
                    };
                    match &a[0] {
                        Opd::Pair(dd, pp) => {
                            let (dd, pp) = (dd.as_ref().clone(), pp.as_ref().clone());
                            self.wr(x, &dd, d as u64);
                            self.wr(x, &pp, p as u64);
                        }
                        o => {
                            let o = o.clone();
                            self.wr(x, &o, d as u64)
                        }
                    }
                }
            }
        }
    }
}

#[inline]
pub(super) fn mask(v: u64, bits: u32) -> u64 {
    if bits >= 64 {
        v
    } else {
        v & ((1u64 << bits) - 1)
    }
}

#[inline]
pub(super) fn sx(v: u64, bits: u32) -> i64 {
    if bits >= 64 {
        v as i64
    } else {
        let s = 64 - bits;
        ((v << s) as i64) >> s
    }
}

#[inline]
pub(super) fn f32_of(v: u64) -> f32 {
    f32::from_bits(v as u32)
}

pub(super) fn fbits(v: f32) -> u64 {
    v.to_bits() as u64
}

// -------------------------------------------------------------------------------------------
// Integer and float arithmetic
// -------------------------------------------------------------------------------------------

pub(super) fn bin(b: Bin, ty: Ty, x: u64, y: u64) -> u64 {
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

pub(super) fn int_bin(b: Bin, ty: Ty, x: u64, y: u64) -> u64 {
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

pub(super) fn un(u: Un, ty: Ty, x: u64) -> u64 {
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

pub(super) fn compare(c: Cmp, ty: Ty, x: u64, y: u64) -> bool {
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
pub(super) fn _rnd(_: Rnd) {}
