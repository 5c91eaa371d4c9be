//! Numeric conversions of the PTX `cvt` instruction the kernels need (PTX ISA "Data Movement and
//! Conversion Instructions: cvt"): f16/bf16 <-> f32 with the floating-point rounding modifiers,
//! the packed `.f16x2`/`.bf16x2` forms, and float <-> integer with the integer rounding
//! modifiers. Bit patterns in, bit patterns out: registers hold bits.

use half::{bf16, f16};

/// Floating-point rounding modifiers (PTX ISA `cvt`, "Floating Point Notes"). `.rna` and `.rs`
/// exist only for destination formats the kernels do not use; the core reports them as not
/// modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloatRound {
    /// `.rn`: to nearest, ties to even.
    Rn,
    /// `.rz`: toward zero.
    Rz,
    /// `.rm`: toward negative infinity.
    Rm,
    /// `.rp`: toward positive infinity.
    Rp,
}

/// Integer rounding modifiers (PTX ISA `cvt`, "Integer Notes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntRound {
    /// `.rni`: nearest integer, ties to even.
    Rni,
    /// `.rzi`: toward zero.
    Rzi,
    /// `.rmi`: toward negative infinity.
    Rmi,
    /// `.rpi`: toward positive infinity.
    Rpi,
}

/// Integer types of `cvt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntType {
    U8,
    S8,
    U16,
    S16,
    U32,
    S32,
    U64,
    S64,
}

impl IntType {
    pub fn bits(self) -> u32 {
        match self {
            IntType::U8 | IntType::S8 => 8,
            IntType::U16 | IntType::S16 => 16,
            IntType::U32 | IntType::S32 => 32,
            IntType::U64 | IntType::S64 => 64,
        }
    }

    pub fn signed(self) -> bool {
        matches!(
            self,
            IntType::S8 | IntType::S16 | IntType::S32 | IntType::S64
        )
    }

    /// The smallest and largest value of the type.
    fn range(self) -> (i128, i128) {
        let bits = self.bits();
        if self.signed() {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        } else {
            (0, (1i128 << bits) - 1)
        }
    }
}

/// `cvt.f32.f16`: exact.
pub fn f16_to_f32(bits: u16) -> f32 {
    f16::from_bits(bits).to_f32()
}

/// `cvt.f32.bf16`: exact (a NaN stays a NaN; the ISA leaves which one unspecified).
pub fn bf16_to_f32(bits: u16) -> f32 {
    bf16::from_bits(bits).to_f32()
}

/// The neighbour of a 16-bit float (sign-magnitude bits) toward +infinity (`up`) or -infinity.
/// NaN and the infinity in that direction stay; -0 and +0 both step to the smallest subnormal.
fn step16(bits: u16, up: bool, inf: u16) -> u16 {
    let mag = bits & 0x7FFF;
    if mag > inf {
        return bits; // NaN
    }
    let negative = bits & 0x8000 != 0;
    if mag == 0 {
        return if up { 0x0001 } else { 0x8001 };
    }
    if negative == up {
        // Toward zero: the magnitude shrinks (-min_subnormal steps to -0).
        bits - 1
    } else if mag == inf {
        bits
    } else {
        bits + 1
    }
}

/// Directed rounding from the round-to-nearest-even result: the correctly rounded value in any
/// mode is either the nearest-even one or its neighbour on the required side.
fn round16(x: f32, nearest: u16, exact: f32, inf: u16, mode: FloatRound) -> u16 {
    if x.is_nan() || exact == x {
        return nearest;
    }
    let too_big = exact > x;
    match mode {
        FloatRound::Rn => nearest,
        FloatRound::Rz => {
            if exact.abs() > x.abs() {
                step16(nearest, x < 0.0, inf)
            } else {
                nearest
            }
        }
        FloatRound::Rm => {
            if too_big {
                step16(nearest, false, inf)
            } else {
                nearest
            }
        }
        FloatRound::Rp => {
            if too_big {
                nearest
            } else {
                step16(nearest, true, inf)
            }
        }
    }
}

/// `cvt.{rn,rz,rm,rp}.f16.f32`.
pub fn f32_to_f16(x: f32, mode: FloatRound) -> u16 {
    let nearest = f16::from_f32(x);
    round16(x, nearest.to_bits(), nearest.to_f32(), 0x7C00, mode)
}

/// `cvt.{rn,rz,rm,rp}.bf16.f32`.
pub fn f32_to_bf16(x: f32, mode: FloatRound) -> u16 {
    let nearest = bf16::from_f32(x);
    round16(x, nearest.to_bits(), nearest.to_f32(), 0x7F80, mode)
}

/// `cvt.rn.f16x2.f32 d, a, b`: PTX ISA "cvt", Semantics: `d[31:16] = convert(a)`,
/// `d[15:0] = convert(b)` — the FIRST source operand goes to the UPPER half.
pub fn cvt_f16x2_f32(a: f32, b: f32, mode: FloatRound) -> u32 {
    (u32::from(f32_to_f16(a, mode)) << 16) | u32::from(f32_to_f16(b, mode))
}

/// `cvt.rn.bf16x2.f32 d, a, b`: as [`cvt_f16x2_f32`], `a` in the upper half.
pub fn cvt_bf16x2_f32(a: f32, b: f32, mode: FloatRound) -> u32 {
    (u32::from(f32_to_bf16(a, mode)) << 16) | u32::from(f32_to_bf16(b, mode))
}

/// `cvt.{rni,rzi,rmi,rpi}.<int>.{f32,f64}`: round to an integer, then clamp to the destination
/// range (PTX ISA: "For float-to-integer conversions, the result is clamped to the destination
/// range by default"). NaN gives 0, except from `.f64` or into `.s64`/`.u64`, where it gives
/// `1 << (bits - 1)` (PTX ISA "Integer Notes"). `x` holds the source exactly (an f32 widens to
/// f64 without loss); `from_f64` says which source type the instruction names. The result is
/// the destination's bit pattern, zero-extended to 64 bits.
pub fn float_to_int(x: f64, from_f64: bool, mode: IntRound, dst: IntType) -> u64 {
    let bits = dst.bits();
    let mask = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    if x.is_nan() {
        return if from_f64 || bits == 64 {
            1u64 << (bits - 1)
        } else {
            0
        };
    }
    let r = round_to_integral(x, mode);
    let (lo, hi) = dst.range();
    // Both bounds are within 2^64, which f64 compares exactly against an integral value.
    let v: i128 = if r <= lo as f64 {
        lo
    } else if r >= hi as f64 {
        hi
    } else {
        r as i128
    };
    (v as u64) & mask
}

/// `cvt.{rni,rzi,rmi,rpi}.f32.f32` (and the rounding step of float-to-integer conversions).
pub fn round_to_integral(x: f64, mode: IntRound) -> f64 {
    match mode {
        IntRound::Rni => x.round_ties_even(),
        IntRound::Rzi => x.trunc(),
        IntRound::Rmi => x.floor(),
        IntRound::Rpi => x.ceil(),
    }
}

/// `cvt.{rni,rzi,rmi,rpi}.f32.f32`: an integral value kept in f32.
pub fn round_f32_to_integral(x: f32, mode: IntRound) -> f32 {
    // Every f32 is exact in f64 and every integral f64 of f32 magnitude is an f32.
    round_to_integral(f64::from(x), mode) as f32
}

/// `cvt.{rn,rz,rm,rp}.f32.<int>`: `v` is the source integer (any of the 8- to 64-bit types).
pub fn int_to_f32(v: i128, mode: FloatRound) -> f32 {
    let nearest = v as f32; // Rust: round to nearest, ties to even
    let back = nearest as i128; // integral and below 2^65: exact
    if back == v {
        return nearest;
    }
    match (mode, back > v) {
        (FloatRound::Rn, _) => nearest,
        (FloatRound::Rz, too_big) => {
            if (v > 0) == too_big {
                if v > 0 {
                    nearest.next_down()
                } else {
                    nearest.next_up()
                }
            } else {
                nearest
            }
        }
        (FloatRound::Rm, true) => nearest.next_down(),
        (FloatRound::Rp, false) => nearest.next_up(),
        _ => nearest,
    }
}

/// `cvt.{rn,rz,rm,rp}.f64.<int>`.
pub fn int_to_f64(v: i128, mode: FloatRound) -> f64 {
    let nearest = v as f64;
    let back = nearest as i128;
    if back == v {
        return nearest;
    }
    match (mode, back > v) {
        (FloatRound::Rn, _) => nearest,
        (FloatRound::Rz, too_big) => {
            if (v > 0) == too_big {
                if v > 0 {
                    nearest.next_down()
                } else {
                    nearest.next_up()
                }
            } else {
                nearest
            }
        }
        (FloatRound::Rm, true) => nearest.next_down(),
        (FloatRound::Rp, false) => nearest.next_up(),
        _ => nearest,
    }
}

/// `cvt.{rn,rz,rm,rp}.f32.f64`.
pub fn f64_to_f32(x: f64, mode: FloatRound) -> f32 {
    let nearest = x as f32; // round to nearest, ties to even
    let exact = f64::from(nearest);
    if x.is_nan() || exact == x {
        return nearest;
    }
    match mode {
        FloatRound::Rn => nearest,
        FloatRound::Rz => {
            if exact.abs() > x.abs() {
                if x > 0.0 {
                    nearest.next_down()
                } else {
                    nearest.next_up()
                }
            } else {
                nearest
            }
        }
        FloatRound::Rm => {
            if exact > x {
                nearest.next_down()
            } else {
                nearest
            }
        }
        FloatRound::Rp => {
            if exact < x {
                nearest.next_up()
            } else {
                nearest
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_round_trip_and_known_encodings() {
        // IEEE binary16: 1.0 = 0x3C00, -2.0 = 0xC000, max finite 65504 = 0x7BFF,
        // smallest subnormal 2^-24 = 0x0001.
        assert_eq!(f32_to_f16(1.0, FloatRound::Rn), 0x3C00);
        assert_eq!(f32_to_f16(-2.0, FloatRound::Rn), 0xC000);
        assert_eq!(f32_to_f16(65504.0, FloatRound::Rn), 0x7BFF);
        assert_eq!(f32_to_f16(2f32.powi(-24), FloatRound::Rn), 0x0001);
        assert_eq!(f16_to_f32(0x7BFF), 65504.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        for bits in 0..=u16::MAX {
            let x = f16_to_f32(bits);
            if x.is_nan() {
                assert!(f16_to_f32(f32_to_f16(x, FloatRound::Rn)).is_nan());
            } else {
                for mode in [
                    FloatRound::Rn,
                    FloatRound::Rz,
                    FloatRound::Rm,
                    FloatRound::Rp,
                ] {
                    assert_eq!(f32_to_f16(x, mode), bits, "{bits:#06x} {mode:?}");
                }
            }
        }
    }

    #[test]
    fn f16_rounding_modes_between_two_neighbours() {
        // 1 + 2^-11 lies exactly halfway between 1.0 (0x3C00, even) and 1 + 2^-10 (0x3C01).
        let half_way = 1.0 + 2f32.powi(-11);
        assert_eq!(f32_to_f16(half_way, FloatRound::Rn), 0x3C00, "ties to even");
        assert_eq!(f32_to_f16(half_way, FloatRound::Rz), 0x3C00);
        assert_eq!(f32_to_f16(half_way, FloatRound::Rm), 0x3C00);
        assert_eq!(f32_to_f16(half_way, FloatRound::Rp), 0x3C01);
        // 1 + 3 * 2^-11 is halfway between 0x3C01 (odd) and 0x3C02 (even).
        assert_eq!(
            f32_to_f16(1.0 + 3.0 * 2f32.powi(-11), FloatRound::Rn),
            0x3C02
        );
        let neg = -(1.0 + 2f32.powi(-12));
        assert_eq!(f32_to_f16(neg, FloatRound::Rn), 0xBC00);
        assert_eq!(f32_to_f16(neg, FloatRound::Rz), 0xBC00);
        assert_eq!(f32_to_f16(neg, FloatRound::Rm), 0xBC01);
        assert_eq!(f32_to_f16(neg, FloatRound::Rp), 0xBC00);
        // Overflow: nearest gives infinity, toward zero the largest finite value.
        assert_eq!(f32_to_f16(1e6, FloatRound::Rn), 0x7C00);
        assert_eq!(f32_to_f16(1e6, FloatRound::Rz), 0x7BFF);
        assert_eq!(f32_to_f16(1e6, FloatRound::Rm), 0x7BFF);
        assert_eq!(f32_to_f16(-1e6, FloatRound::Rp), 0xFBFF);
        assert_eq!(f32_to_f16(-1e6, FloatRound::Rm), 0xFC00);
        // Below the smallest subnormal: toward +inf gives it, toward zero gives zero.
        let tiny = 2f32.powi(-30);
        assert_eq!(f32_to_f16(tiny, FloatRound::Rn), 0x0000);
        assert_eq!(f32_to_f16(tiny, FloatRound::Rp), 0x0001);
        assert_eq!(f32_to_f16(-tiny, FloatRound::Rm), 0x8001);
        assert_eq!(f32_to_f16(-tiny, FloatRound::Rz), 0x8000);
    }

    #[test]
    fn bf16_is_the_upper_half_of_f32_rounded_to_nearest_even() {
        assert_eq!(f32_to_bf16(1.0, FloatRound::Rn), 0x3F80);
        // 1 + 2^-8 is halfway between 0x3F80 and 0x3F81: ties to even.
        assert_eq!(f32_to_bf16(1.0 + 2f32.powi(-8), FloatRound::Rn), 0x3F80);
        assert_eq!(
            f32_to_bf16(1.0 + 3.0 * 2f32.powi(-8), FloatRound::Rn),
            0x3F82
        );
        assert_eq!(f32_to_bf16(1.0 + 2f32.powi(-8), FloatRound::Rp), 0x3F81);
        assert_eq!(
            f32_to_bf16(f32::MAX, FloatRound::Rn),
            0x7F80,
            "rounds up to +inf"
        );
        assert_eq!(f32_to_bf16(f32::MAX, FloatRound::Rz), 0x7F7F);
        for bits in (0..=u16::MAX).step_by(7) {
            let x = bf16_to_f32(bits);
            if !x.is_nan() {
                assert_eq!(f32_to_bf16(x, FloatRound::Rn), bits);
                assert_eq!(x.to_bits() & 0xFFFF, 0);
            }
        }
    }

    #[test]
    fn packed_forms_put_the_first_operand_in_the_upper_half() {
        // PTX ISA cvt: d[31:16] = convert(a), d[15:0] = convert(b).
        assert_eq!(cvt_f16x2_f32(1.0, -2.0, FloatRound::Rn), 0x3C00_C000);
        assert_eq!(cvt_bf16x2_f32(1.0, -2.0, FloatRound::Rn), 0x3F80_C000);
    }

    #[test]
    fn float_to_int_rounds_clamps_and_maps_nan() {
        assert_eq!(float_to_int(2.5, false, IntRound::Rni, IntType::S32), 2);
        assert_eq!(float_to_int(3.5, false, IntRound::Rni, IntType::S32), 4);
        assert_eq!(
            float_to_int(-2.5, false, IntRound::Rni, IntType::S32),
            (-2i32) as u32 as u64
        );
        assert_eq!(
            float_to_int(-2.5, false, IntRound::Rzi, IntType::S32),
            (-2i32) as u32 as u64
        );
        assert_eq!(
            float_to_int(-2.5, false, IntRound::Rmi, IntType::S32),
            (-3i32) as u32 as u64
        );
        assert_eq!(float_to_int(2.1, false, IntRound::Rpi, IntType::U32), 3);
        // Clamped by default.
        assert_eq!(float_to_int(-1.0, false, IntRound::Rzi, IntType::U32), 0);
        assert_eq!(
            float_to_int(1e12, false, IntRound::Rzi, IntType::S32),
            0x7FFF_FFFF
        );
        assert_eq!(
            float_to_int(-1e12, false, IntRound::Rzi, IntType::S32),
            0x8000_0000
        );
        assert_eq!(float_to_int(300.0, false, IntRound::Rzi, IntType::U8), 255);
        assert_eq!(
            float_to_int(1e30, false, IntRound::Rzi, IntType::U64),
            u64::MAX
        );
        assert_eq!(
            float_to_int(1e30, false, IntRound::Rzi, IntType::S64),
            i64::MAX as u64
        );
        // NaN: 0 from f32 into 32 bits; 1 << (bits - 1) into 64 bits or from f64.
        assert_eq!(
            float_to_int(f64::NAN, false, IntRound::Rni, IntType::S32),
            0
        );
        assert_eq!(
            float_to_int(f64::NAN, false, IntRound::Rni, IntType::U32),
            0
        );
        assert_eq!(
            float_to_int(f64::NAN, false, IntRound::Rni, IntType::S64),
            1 << 63
        );
        assert_eq!(
            float_to_int(f64::NAN, true, IntRound::Rni, IntType::S32),
            0x8000_0000
        );
        assert_eq!(round_f32_to_integral(-0.5, IntRound::Rni), 0.0);
        assert_eq!(round_f32_to_integral(1.5, IntRound::Rmi), 1.0);
    }

    #[test]
    fn int_to_float_directed_rounding() {
        // 2^24 + 1 is not an f32: halfway between 2^24 and 2^24 + 2.
        let v = (1i128 << 24) + 1;
        assert_eq!(int_to_f32(v, FloatRound::Rn), 16777216.0, "ties to even");
        assert_eq!(int_to_f32(v, FloatRound::Rz), 16777216.0);
        assert_eq!(int_to_f32(v, FloatRound::Rp), 16777218.0);
        assert_eq!(int_to_f32(-v, FloatRound::Rm), -16777218.0);
        assert_eq!(int_to_f32(-v, FloatRound::Rz), -16777216.0);
        let w = (1i128 << 24) + 3; // halfway between 2^24 + 2 and 2^24 + 4 (even mantissa)
        assert_eq!(int_to_f32(w, FloatRound::Rn), 16777220.0);
        assert_eq!(int_to_f32(w, FloatRound::Rz), 16777218.0);
        assert_eq!(
            int_to_f32(u64::MAX as i128, FloatRound::Rz),
            18446742974197923840.0
        );
        assert_eq!(int_to_f32(7, FloatRound::Rm), 7.0);
        assert_eq!(
            int_to_f64((1i128 << 53) + 1, FloatRound::Rp),
            9007199254740994.0
        );
        assert_eq!(
            f64_to_f32(1.0 + 2f64.powi(-30), FloatRound::Rp),
            1.0f32.next_up()
        );
        assert_eq!(f64_to_f32(-(1.0 + 2f64.powi(-30)), FloatRound::Rz), -1.0);
    }
}
