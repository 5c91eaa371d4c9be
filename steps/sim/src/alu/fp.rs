//! Floating-point arithmetic of the PTX ISA on bit patterns, with every rounding modifier.
//!
//! Every operation is computed as an f64 value `s` (IEEE round-to-nearest of the exact result)
//! plus the sign of the exact remainder `exact - s`, obtained with error-free transformations
//! (two-sum, fma residuals, exact expansion sums). [`round`] then rounds that pair to the
//! destination format in the requested mode, so each result is the correctly rounded one for
//! `.rn`, `.rz`, `.rm` and `.rp` (PTX ISA "Floating-Point Instructions": the IEEE 754 rounding
//! modifiers), with no double-rounding error when the destination is narrower than f64.
//!
//! Approximate instructions (`.approx`: rcp, sqrt, rsqrt, ex2, lg2, sin, cos, tanh, div) are
//! computed with f64 library functions (error below 1 f64 ulp, far below one ulp of the
//! destination) and rounded to nearest: the simulator is at least as accurate as the maximum
//! error the PTX ISA states for each approximate instruction, never less.

use half::{bf16, f16};

/// The floating-point formats a register can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fmt {
    F16,
    Bf16,
    /// TensorFloat-32, held in an f32 register with the 13 low mantissa bits zero.
    Tf32,
    F32,
    F64,
    /// FP8 E4M3 (no infinity; S.1111.111 is NaN; largest finite 448).
    E4m3,
    /// FP8 E5M2 (IEEE-like, with infinities).
    E5m2,
}

/// Rounding of a result (PTX ISA "Rounding Modifiers"); `Rna` (nearest, ties away) is only
/// the `.rna` of `cvt.rna.tf32.f32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Rn,
    Rz,
    Rm,
    Rp,
    Rna,
}

impl Fmt {
    /// Explicit mantissa bits.
    pub fn man(self) -> i32 {
        match self {
            Fmt::F16 => 10,
            Fmt::Bf16 => 7,
            Fmt::Tf32 => 10,
            Fmt::F32 => 23,
            Fmt::F64 => 52,
            Fmt::E4m3 => 3,
            Fmt::E5m2 => 2,
        }
    }
    fn exp_bits(self) -> i32 {
        match self {
            Fmt::F16 | Fmt::E5m2 => 5,
            Fmt::Bf16 | Fmt::Tf32 | Fmt::F32 => 8,
            Fmt::F64 => 11,
            Fmt::E4m3 => 4,
        }
    }
    /// Width of the register field.
    pub fn bits(self) -> u32 {
        match self {
            Fmt::F16 | Fmt::Bf16 => 16,
            Fmt::Tf32 | Fmt::F32 => 32,
            Fmt::F64 => 64,
            Fmt::E4m3 | Fmt::E5m2 => 8,
        }
    }
    fn bias(self) -> i32 {
        (1 << (self.exp_bits() - 1)) - 1
    }
    /// Smallest normal exponent.
    fn emin(self) -> i32 {
        1 - self.bias()
    }
    fn sign_bit(self) -> u64 {
        1u64 << (self.bits() - 1)
    }
    /// The canonical NaN the GPU writes for a NaN result (PTX ISA: "the canonical NaN").
    pub fn nan(self) -> u64 {
        match self {
            Fmt::F16 | Fmt::Bf16 => 0x7FFF,
            Fmt::Tf32 | Fmt::F32 => 0x7FFF_FFFF,
            Fmt::F64 => 0x7FFF_FFFF_FFFF_FFFF,
            Fmt::E4m3 => 0x7F,
            Fmt::E5m2 => 0x7F,
        }
    }
    /// +infinity (E4M3 has none: its saturated value).
    fn inf(self) -> u64 {
        match self {
            Fmt::F16 => 0x7C00,
            Fmt::Bf16 => 0x7F80,
            Fmt::Tf32 | Fmt::F32 => 0x7F80_0000,
            Fmt::F64 => 0x7FF0_0000_0000_0000,
            Fmt::E4m3 => 0x7E,
            Fmt::E5m2 => 0x7C,
        }
    }
    /// The largest finite value's bits.
    fn max_finite(self) -> u64 {
        match self {
            Fmt::Tf32 => 0x7F7F_E000,
            Fmt::E4m3 => 0x7E,
            f => f.inf() - 1,
        }
    }
    /// The largest finite value.
    pub fn max_value(self) -> f64 {
        self.to_f64(self.max_finite())
    }

    /// The exact value of `bits` (every format's values are f64 values).
    pub fn to_f64(self, bits: u64) -> f64 {
        match self {
            Fmt::F16 => f16::from_bits(bits as u16).to_f64(),
            Fmt::Bf16 => bf16::from_bits(bits as u16).to_f64(),
            Fmt::Tf32 | Fmt::F32 => f32::from_bits(bits as u32) as f64,
            Fmt::F64 => f64::from_bits(bits),
            Fmt::E4m3 | Fmt::E5m2 => {
                let b = bits & 0xFF;
                let neg = b & 0x80 != 0;
                let mag = b & 0x7F;
                let man = self.man() as u32;
                let e = (mag >> man) as i32;
                let m = mag & ((1 << man) - 1);
                let v = if self == Fmt::E4m3 && mag == 0x7F {
                    f64::NAN
                } else if self == Fmt::E5m2 && e == 31 {
                    if m == 0 {
                        f64::INFINITY
                    } else {
                        f64::NAN
                    }
                } else if e == 0 {
                    m as f64 * 2f64.powi(self.emin() - man as i32)
                } else {
                    (m as f64 / (1u64 << man) as f64 + 1.0) * 2f64.powi(e - self.bias())
                };
                if neg {
                    -v
                } else {
                    v
                }
            }
        }
    }

    /// Bits of `v`, which must be exactly representable (or an infinity/NaN).
    fn encode_exact(self, v: f64) -> u64 {
        match self {
            Fmt::F16 => f16::from_f64(v).to_bits() as u64,
            Fmt::Bf16 => bf16::from_f64(v).to_bits() as u64,
            Fmt::Tf32 | Fmt::F32 => (v as f32).to_bits() as u64,
            Fmt::F64 => v.to_bits(),
            Fmt::E4m3 | Fmt::E5m2 => {
                if v.is_nan() {
                    return self.nan();
                }
                let sign = if v.is_sign_negative() { 0x80 } else { 0 };
                let a = v.abs();
                if a.is_infinite() {
                    return sign | self.inf();
                }
                if a == 0.0 {
                    return sign;
                }
                let man = self.man();
                let e = (a.log2().floor() as i32).max(self.emin());
                let q = e - man;
                let n = (a / 2f64.powi(q)) as u64; // exact: a is representable
                let bits = if e == self.emin() && n < (1 << man) {
                    n
                } else {
                    (((e + self.bias()) as u64) << man) | (n - (1 << man))
                };
                sign | bits
            }
        }
    }

    /// Whether `bits` is a subnormal (nonzero, exponent field zero).
    pub fn is_subnormal(self, bits: u64) -> bool {
        let mag = bits & (self.sign_bit() - 1);
        mag != 0 && mag >> self.man() == 0
    }

    /// `.ftz` on an input or result: a subnormal becomes the zero of its sign.
    pub fn flush(self, bits: u64) -> u64 {
        if self.is_subnormal(bits) {
            bits & self.sign_bit()
        } else {
            bits
        }
    }
}

/// `a + b` exactly as `s + e` (Knuth's two-sum; exact unless it overflows).
pub fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// The sign (-1, 0, 1) of the exact sum of `terms`: the terms are accumulated into a
/// nonoverlapping expansion (Shewchuk's grow-expansion), whose sign is its largest component's.
pub fn sum_sign(terms: &[f64]) -> i8 {
    let mut h = [0f64; 8];
    let mut n = 0usize;
    for &x in terms {
        let mut q = x;
        let mut m = 0usize;
        for i in 0..n {
            let (s, e) = two_sum(q, h[i]);
            if e != 0.0 {
                h[m] = e;
                m += 1;
            }
            q = s;
        }
        if m < h.len() {
            h[m] = q;
            m += 1;
        }
        n = m;
    }
    let top = h[..n]
        .iter()
        .rev()
        .find(|v| **v != 0.0)
        .copied()
        .unwrap_or(0.0);
    sgn(top)
}

fn sgn(x: f64) -> i8 {
    if x > 0.0 {
        1
    } else if x < 0.0 {
        -1
    } else {
        0
    }
}

/// f64 bits one step up (toward +inf) or down.
fn step64(x: f64, up: bool) -> f64 {
    if x.is_nan() || (x.is_infinite() && (x > 0.0) == up) {
        return x;
    }
    if x == 0.0 {
        let t = f64::from_bits(1);
        return if up { t } else { -t };
    }
    let b = x.to_bits();
    let away = (x > 0.0) == up;
    f64::from_bits(if away { b + 1 } else { b - 1 })
}

/// Round the exact value `s + tiny` (where `r` is the sign of `tiny`, and `s` is the f64
/// nearest to the exact value) to `fmt` in `mode`; returns bits. Overflow follows IEEE 754:
/// to infinity when rounding away (or to nearest), else to the largest finite value.
pub fn round(fmt: Fmt, s: f64, r: i8, mode: Mode) -> u64 {
    if s.is_nan() {
        return fmt.nan();
    }
    let neg = s.is_sign_negative();
    let sign = if neg { fmt.sign_bit() } else { 0 };
    if s.is_infinite() {
        return sign | fmt.inf();
    }
    // Rounding of the magnitude: toward zero, away from zero, or to nearest.
    #[derive(PartialEq)]
    enum Dir {
        Nearest,
        NearestAway,
        Trunc,
        Away,
    }
    let dir = match mode {
        Mode::Rn => Dir::Nearest,
        Mode::Rna => Dir::NearestAway,
        Mode::Rz => Dir::Trunc,
        Mode::Rm if neg => Dir::Away,
        Mode::Rp if !neg => Dir::Away,
        Mode::Rm | Mode::Rp => Dir::Trunc,
    };
    if fmt == Fmt::F64 {
        if r == 0 || matches!(dir, Dir::Nearest | Dir::NearestAway) {
            return s.to_bits();
        }
        // s is nearest: the directed result is s or its neighbour on the remainder's side.
        let up = r > 0;
        let out = match mode {
            Mode::Rp if up => step64(s, true),
            Mode::Rm if !up => step64(s, false),
            // The remainder points toward zero: truncation is the neighbour toward zero,
            // which is upward (toward +inf) for a negative s.
            Mode::Rz if (r > 0) == neg && s != 0.0 => step64(s, neg),
            _ => s,
        };
        return out.to_bits();
    }
    let a = s.abs();
    let rm = if neg { -r } else { r }; // the remainder's sign on the magnitude
    let man = fmt.man();
    let e = if a == 0.0 {
        fmt.emin()
    } else {
        let be = ((a.to_bits() >> 52) & 0x7FF) as i32;
        let e = if be == 0 {
            // An f64 subnormal: far below any narrower format's subnormals.
            -1075
        } else {
            be - 1023
        };
        e.max(fmt.emin())
    };
    let q = e - man;
    let m = a * 2f64.powi(-q);
    let n = m.floor();
    let frac = m - n;
    let half = 0.5;
    let (up, down_one) = match dir {
        Dir::Nearest => (
            frac > half || (frac == half && (rm > 0 || (rm == 0 && (n as u64) % 2 == 1))),
            false,
        ),
        Dir::NearestAway => (frac > half || (frac == half && rm >= 0), false),
        Dir::Trunc => (false, frac == 0.0 && rm < 0 && n > 0.0),
        Dir::Away => (frac > 0.0 || (frac == 0.0 && rm > 0), false),
    };
    let n2 = n + if up { 1.0 } else { 0.0 };
    let val = n2 * 2f64.powi(q);
    let rounds_out = dir != Dir::Trunc;
    let limit = fmt.max_value();
    if val > limit {
        // Past the largest finite value: IEEE overflow (E4M3 has no infinity: NaN).
        let bits = if !rounds_out {
            fmt.max_finite()
        } else if fmt == Fmt::E4m3 {
            return fmt.nan();
        } else {
            fmt.inf()
        };
        return sign | bits;
    }
    let mut bits = fmt.encode_exact(val) & (fmt.sign_bit() - 1);
    if down_one {
        // The exact magnitude is just below a representable value: its lower neighbour.
        bits -= if fmt == Fmt::Tf32 { 1 << 13 } else { 1 };
    }
    sign | bits
}

/// Nearest-even rounding of an exact f64 value.
pub fn round_exact(fmt: Fmt, v: f64, mode: Mode) -> u64 {
    round(fmt, v, 0, mode)
}

/// Binary arithmetic: the f64 nearest to the exact result and the remainder's sign.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arith {
    Add,
    Sub,
    Mul,
    Div,
}

/// `a op b` with the remainder's sign (see the module comment).
pub fn arith(op: Arith, a: f64, b: f64) -> (f64, i8) {
    let finite = a.is_finite() && b.is_finite();
    match op {
        Arith::Add | Arith::Sub => {
            let b = if op == Arith::Sub { -b } else { b };
            let (s, e) = two_sum(a, b);
            (s, if finite && s.is_finite() { sgn(e) } else { 0 })
        }
        Arith::Mul => {
            let s = a * b;
            let r = if finite && s.is_finite() && s != 0.0 {
                sgn(a.mul_add(b, -s))
            } else if finite && s == 0.0 && a != 0.0 && b != 0.0 {
                // Underflowed past f64's subnormals: the exact value is tiny, of the product's sign.
                if (a < 0.0) != (b < 0.0) {
                    -1
                } else {
                    1
                }
            } else {
                0
            };
            (s, r)
        }
        Arith::Div => {
            let s = a / b;
            let r = if finite && b != 0.0 && s.is_finite() && s != 0.0 {
                sgn((-s).mul_add(b, a)) * sgn(b)
            } else if finite && b != 0.0 && s == 0.0 && a != 0.0 {
                if (a < 0.0) != (b < 0.0) {
                    -1
                } else {
                    1
                }
            } else {
                0
            };
            (s, r)
        }
    }
}

/// `a * b + c` with one rounding: nearest f64 and the remainder's sign.
pub fn fma(a: f64, b: f64, c: f64) -> (f64, i8) {
    let s = a.mul_add(b, c);
    if !(a.is_finite() && b.is_finite() && c.is_finite() && s.is_finite()) {
        return (s, 0);
    }
    let p = a * b;
    let pe = a.mul_add(b, -p);
    (s, sum_sign(&[p, pe, c, -s]))
}

/// `sqrt(a)` with the remainder's sign.
pub fn sqrt(a: f64) -> (f64, i8) {
    let s = a.sqrt();
    if !s.is_finite() || s == 0.0 {
        return (s, 0);
    }
    (s, sgn((-s).mul_add(s, a)))
}

/// The sign of an exactly zero sum (IEEE 754-2008 6.3, which the PTX ISA's add/sub/fma
/// follow): `x + x` keeps the sign of `x` even when zero (`same_zero`: Some(sign is negative)
/// when both addends are zeros of one sign); any other exact zero sum is +0, or -0 when
/// rounding toward -inf (`.rm`).
pub fn zero_sign(s: f64, r: i8, mode: Mode, same_zero: Option<bool>) -> f64 {
    if s == 0.0 && r == 0 {
        let neg = same_zero.unwrap_or(mode == Mode::Rm);
        if neg {
            -0.0
        } else {
            0.0
        }
    } else {
        s
    }
}

/// Overflow of an f64 operation (finite inputs, infinite nearest result) under a directed
/// mode that rounds toward zero gives the largest finite value.
pub fn overflow_fix(s: f64, inputs_finite: bool, mode: Mode) -> f64 {
    if inputs_finite && s.is_infinite() {
        let neg = s < 0.0;
        let trunc = match mode {
            Mode::Rz => true,
            Mode::Rm => !neg,
            Mode::Rp => neg,
            _ => false,
        };
        if trunc {
            return if neg { -f64::MAX } else { f64::MAX };
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directed_rounding_to_f32() {
        let x = 1.0 + 2f64.powi(-30); // between 1 and 1 + 2^-23
        assert_eq!(round(Fmt::F32, x, 0, Mode::Rn), 1f32.to_bits() as u64);
        assert_eq!(round(Fmt::F32, x, 0, Mode::Rz), 1f32.to_bits() as u64);
        assert_eq!(
            round(Fmt::F32, x, 0, Mode::Rp),
            (1f32 + f32::EPSILON).to_bits() as u64
        );
        assert_eq!(
            round(Fmt::F32, -x, 0, Mode::Rm),
            (-1f32 - f32::EPSILON).to_bits() as u64
        );
        // Exactly 1.0 in f64 but the exact value is a hair below: rz and rm step down.
        assert_eq!(
            round(Fmt::F32, 1.0, -1, Mode::Rz),
            (1f32 - f32::EPSILON / 2.0).to_bits() as u64
        );
        assert_eq!(round(Fmt::F32, 1.0, -1, Mode::Rn), 1f32.to_bits() as u64);
        assert_eq!(round(Fmt::F32, 1.0, -1, Mode::Rp), 1f32.to_bits() as u64);
    }

    #[test]
    fn no_double_rounding_into_f16() {
        // 1 + 2^-11 + 2^-40: above the midpoint of 1 and 1 + 2^-10, so nearest is the upper
        // one; rounding first to f32 would land on the midpoint and tie to even (1.0).
        let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(round(Fmt::F16, x, 0, Mode::Rn), 0x3C01);
        // The midpoint itself ties to even; with a positive remainder it goes up.
        let m = 1.0 + 2f64.powi(-11);
        assert_eq!(round(Fmt::F16, m, 0, Mode::Rn), 0x3C00);
        assert_eq!(round(Fmt::F16, m, 1, Mode::Rn), 0x3C01);
        assert_eq!(round(Fmt::F16, m, -1, Mode::Rn), 0x3C00);
    }

    #[test]
    fn overflow_and_subnormals() {
        assert_eq!(round(Fmt::F16, 70000.0, 0, Mode::Rn), 0x7C00);
        assert_eq!(round(Fmt::F16, 70000.0, 0, Mode::Rz), 0x7BFF);
        assert_eq!(round(Fmt::F16, -70000.0, 0, Mode::Rp), 0xFBFF);
        assert_eq!(round(Fmt::F16, 2f64.powi(-24), 0, Mode::Rn), 0x0001);
        assert_eq!(round(Fmt::F16, 2f64.powi(-26), 0, Mode::Rp), 0x0001);
        assert_eq!(round(Fmt::F16, 2f64.powi(-26), 0, Mode::Rn), 0x0000);
        assert_eq!(round(Fmt::F32, 1e-50, 0, Mode::Rp), 1);
        assert_eq!(round(Fmt::E4m3, 448.0, 0, Mode::Rn), 0x7E);
        assert_eq!(round(Fmt::E4m3, 1.0, 0, Mode::Rn), 0x38);
        assert_eq!(round(Fmt::E5m2, 1.0, 0, Mode::Rn), 0x3C);
        assert_eq!(Fmt::E4m3.to_f64(0x7E), 448.0);
        assert_eq!(Fmt::E4m3.to_f64(0x01), 2f64.powi(-9));
        assert_eq!(round(Fmt::E4m3, 2f64.powi(-9), 0, Mode::Rn), 0x01);
        assert_eq!(
            round(Fmt::Tf32, 1.0 + 2f64.powi(-11), 0, Mode::Rna),
            0x3F80_2000
        );
        assert_eq!(
            round(Fmt::Tf32, 1.0 + 2f64.powi(-11), 0, Mode::Rn),
            0x3F80_0000
        );
    }

    #[test]
    fn f64_directed_and_residuals() {
        let (s, r) = arith(Arith::Add, 1.0, 2f64.powi(-60));
        assert_eq!((s, r), (1.0, 1));
        assert_eq!(round(Fmt::F64, s, r, Mode::Rp), step64(1.0, true).to_bits());
        assert_eq!(round(Fmt::F64, s, r, Mode::Rz), 1f64.to_bits());
        // 1/3 rounds down in f64; sqrt(2) rounds up.
        let (s, r) = arith(Arith::Div, 1.0, 3.0);
        assert_eq!(r, 1);
        assert_eq!(round(Fmt::F64, s, r, Mode::Rp), step64(s, true).to_bits());
        assert_eq!(sqrt(2.0).1, -1);
        assert_eq!(
            round(Fmt::F64, sqrt(2.0).0, -1, Mode::Rm),
            step64(2f64.sqrt(), false).to_bits()
        );
        // fma(1 + 2^-30, 1 + 2^-30, -1) = 2^-29 + 2^-60: exact in f64, no remainder;
        // fma(1 + 2^-52, 1 + 2^-52, 0) rounds away 2^-104.
        let x = 1.0 + 2f64.powi(-30);
        assert_eq!(fma(x, x, -1.0), (2f64.powi(-29) + 2f64.powi(-60), 0));
        let y = 1.0 + f64::EPSILON;
        assert_eq!(fma(y, y, 0.0).1, 1);
        assert_eq!(sum_sign(&[1e300, 1.0, -1e300]), 1);
        assert_eq!(sum_sign(&[1.0, -1.0]), 0);
        assert_eq!(sum_sign(&[1e-300, -1.0, 1.0]), 1);
    }
}
