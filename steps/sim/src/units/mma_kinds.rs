//! The operand kinds of `tcgen05.mma` beyond `kind::f16`: `kind::tf32`, `kind::f8f6f4` and
//! `kind::i8` (PTX ISA 9.7.16.9.1 "tcgen05.mma", dense forms without `.ws`), and the fields of
//! the instruction descriptor that depend on the kind (PTX ISA 9.7.16.4.2, the table
//! "Instruction descriptor format for .kind::f16, .kind::tf32, .kind::f8f6f4 and .kind::i8";
//! the same bit assignment as CUTLASS's `UMMA::InstrDescriptor`, an independent encoding):
//!
//! | bits | field | kind::f16 | kind::tf32 | kind::f8f6f4 | kind::i8 |
//! |---|---|---|---|---|---|
//! | 3 | saturate | 0 | 0 | 0 | 0 or 1 |
//! | 4-5 | D format | F16 = 0, F32 = 1 | F32 = 1 | F16 = 0, F32 = 1 | S32 = 2 |
//! | 7-9, 10-12 | A, B format | F16 = 0, BF16 = 1 | TF32 = 2 | E4M3 = 0, E5M2 = 1, E2M3 = 3, E3M2 = 4, E2M1 = 5 | U8 = 0, S8 = 1 |
//! | 13, 14 | negate A, B | 0 or 1 | 0 or 1 | 0 or 1 | 0 |
//!
//! Every dense kind reads 32 bytes of K per row and MMA: K = 16 16-bit, 8 tf32 or 32 8-bit
//! elements, so the shared-memory descriptors, the canonical layouts of the K-major operands
//! and the shapes (M, N) are those of kind::f16 ([`super::descriptors::F16Instr`]). Elements of
//! the 6- and 4-bit formats sit one per byte in shared memory (PTX ISA "Matrix Data-types"
//! under `mma`, the packing of `.kind::f8f6f4`: "6-bit floating point type elements must be
//! packed in an 8-bit container"; `.e2m1` "resides in central 4 bits of the 8-bit container
//! with padding in the upper 2 bits and lower 2 bits"; `.e3m2`/`.e2m3` "in the lower 6 bits").
//!
//! Not modelled, refused with the field named: an F16 D (as for kind::f16), MN-major operands
//! of the tf32 and 8-bit kinds (their canonical MN-major atoms hold 4 or 16 rows a chunk, not
//! the 8 of 16-bit elements), sparse A, `.ws`.

use super::descriptors::decode_idesc;
use super::error::{invalid, not_implemented};
use super::UnitError;

/// The `.kind` of a `tcgen05.mma`, from its PTX modifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MmaKind {
    #[default]
    F16,
    Tf32,
    F8f6f4,
    I8,
}

impl MmaKind {
    /// `kind::f16` etc. as written in PTX; None for a kind the simulator does not model.
    pub fn parse(m: &str) -> Option<MmaKind> {
        Some(match m {
            "kind::f16" => MmaKind::F16,
            "kind::tf32" => MmaKind::Tf32,
            "kind::f8f6f4" => MmaKind::F8f6f4,
            "kind::i8" => MmaKind::I8,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            MmaKind::F16 => "kind::f16",
            MmaKind::Tf32 => "kind::tf32",
            MmaKind::F8f6f4 => "kind::f8f6f4",
            MmaKind::I8 => "kind::i8",
        }
    }
}

/// An operand element format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem {
    F16,
    Bf16,
    Tf32,
    E4m3,
    E5m2,
    E2m3,
    E3m2,
    E2m1,
    U8,
    S8,
}

impl Elem {
    /// Bytes one element takes in shared memory.
    pub fn bytes(self) -> u32 {
        match self {
            Elem::F16 | Elem::Bf16 => 2,
            Elem::Tf32 => 4,
            _ => 1,
        }
    }

    /// The value of the element stored in `bits` (little-endian bytes, [`Self::bytes`] of them)
    /// as an f32; exact for every format (each fits in f32). Integers give their value.
    pub fn value(self, bits: u32) -> f32 {
        match self {
            Elem::F16 => super::numeric::f16_to_f32(bits as u16),
            Elem::Bf16 => super::numeric::bf16_to_f32(bits as u16),
            // tf32: sign, 8 exponent bits and the upper 10 mantissa bits of an f32 container;
            // the tensor core ignores the low 13 bits (the format has a 10-bit mantissa), so
            // they are dropped, not rounded.
            Elem::Tf32 => f32::from_bits(bits & !0x1FFF),
            Elem::E4m3 => minifloat(bits & 0xFF, 4, 3, 7, Special::E4m3),
            Elem::E5m2 => minifloat(bits & 0xFF, 5, 2, 15, Special::Ieee),
            // The 6-bit formats in the lower 6 bits of the byte; e2m1 in bits 2-5.
            Elem::E2m3 => minifloat(bits & 0x3F, 2, 3, 1, Special::None),
            Elem::E3m2 => minifloat(bits & 0x3F, 3, 2, 3, Special::None),
            Elem::E2m1 => minifloat((bits >> 2) & 0xF, 2, 1, 1, Special::None),
            Elem::U8 => (bits & 0xFF) as f32,
            Elem::S8 => (bits & 0xFF) as u8 as i8 as f32,
        }
    }
}

/// How a narrow format spends its top exponent (PTX ISA "Alternate Floating Point Data
/// Formats"): e5m2 as IEEE (infinity, NaN); e4m3 only S.1111.111 as NaN (no infinity, max
/// 448); the 6- and 4-bit formats have neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Special {
    Ieee,
    E4m3,
    None,
}

/// The value of a sign-exponent-mantissa number of `e` exponent and `m` mantissa bits, bias
/// `bias`, subnormals where the exponent field is 0.
fn minifloat(bits: u32, e: u32, m: u32, bias: i32, sp: Special) -> f32 {
    let sign = if (bits >> (e + m)) & 1 == 1 {
        -1.0
    } else {
        1.0
    };
    let ef = (bits >> m) & ((1 << e) - 1);
    let mf = bits & ((1 << m) - 1);
    let top = (1 << e) - 1;
    match sp {
        Special::Ieee if ef == top => {
            return if mf == 0 {
                sign * f32::INFINITY
            } else {
                f32::NAN
            }
        }
        Special::E4m3 if ef == top && mf == (1 << m) - 1 => return f32::NAN,
        _ => {}
    }
    let frac = mf as f32 / (1 << m) as f32;
    let v = if ef == 0 {
        frac * 2f32.powi(1 - bias)
    } else {
        (1.0 + frac) * 2f32.powi(ef as i32 - bias)
    };
    sign * v
}

/// The kind-dependent fields of an instruction descriptor, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindInstr {
    pub kind: MmaKind,
    pub a: Elem,
    pub b: Elem,
    pub negate_a: bool,
    pub negate_b: bool,
    /// kind::i8: D saturates at the s32 limits instead of wrapping.
    pub saturate: bool,
}

impl KindInstr {
    /// K of one MMA: 32 bytes of elements.
    pub fn k(&self) -> usize {
        32 / self.a.bytes() as usize
    }
}

/// Checks the kind-dependent fields of descriptor `d` for `kind` (the table above). The shape,
/// the majors and the fields every kind shares are checked by
/// [`super::descriptors::F16Instr::decode`] on [`layout_idesc`]`(d)`.
pub fn decode(kind: MmaKind, d: u32) -> Result<KindInstr, UnitError> {
    let what: &'static str = match kind {
        MmaKind::F16 => "instruction descriptor (kind::f16)",
        MmaKind::Tf32 => "instruction descriptor (kind::tf32)",
        MmaKind::F8f6f4 => "instruction descriptor (kind::f8f6f4)",
        MmaKind::I8 => "instruction descriptor (kind::i8)",
    };
    let f = decode_idesc(d);
    let fmt = |name: &str, x: u32| -> Result<Elem, UnitError> {
        let e = match (kind, x) {
            (MmaKind::F16, 0) => Elem::F16,
            (MmaKind::F16, 1) => Elem::Bf16,
            (MmaKind::Tf32, 2) => Elem::Tf32,
            (MmaKind::F8f6f4, 0) => Elem::E4m3,
            (MmaKind::F8f6f4, 1) => Elem::E5m2,
            (MmaKind::F8f6f4, 3) => Elem::E2m3,
            (MmaKind::F8f6f4, 4) => Elem::E3m2,
            (MmaKind::F8f6f4, 5) => Elem::E2m1,
            (MmaKind::I8, 0) => Elem::U8,
            (MmaKind::I8, 1) => Elem::S8,
            _ => {
                let legal = match kind {
                    MmaKind::F16 => "F16 = 0, BF16 = 1",
                    MmaKind::Tf32 => "TF32 = 2",
                    MmaKind::F8f6f4 => "E4M3 = 0, E5M2 = 1, E2M3 = 3, E3M2 = 4, E2M1 = 5",
                    MmaKind::I8 => "unsigned 8-bit = 0, signed 8-bit = 1",
                };
                return Err(invalid(
                    what,
                    format!("{d:#010x}: {name} format {x}: {} has {legal}", kind.name()),
                ));
            }
        };
        Ok(e)
    };
    let a = fmt("A", f.a_format)?;
    let b = fmt("B", f.b_format)?;
    let want_d = if kind == MmaKind::I8 { 2 } else { 1 };
    if f.d_format != want_d {
        let legal = match kind {
            MmaKind::Tf32 => Some("F32 = 1"),
            MmaKind::I8 => Some("S32 = 2"),
            _ => None,
        };
        return Err(match (legal, f.d_format) {
            (None, 0) => not_implemented(what, format!("{d:#010x}: D format F16 (bits 4-5 = 0)")),
            (None, x) => invalid(
                what,
                format!(
                    "{d:#010x}: D format {x} (bits 4-5): {} has F16 = 0, F32 = 1",
                    kind.name()
                ),
            ),
            (Some(l), x) => invalid(
                what,
                format!(
                    "{d:#010x}: D format {x} (bits 4-5): {} has {l}",
                    kind.name()
                ),
            ),
        });
    }
    if f.saturate != 0 && kind != MmaKind::I8 {
        return Err(invalid(
            what,
            format!("{d:#010x}: saturate (bit 3) is for kind::i8 only"),
        ));
    }
    if kind == MmaKind::I8 && (f.negate_a != 0 || f.negate_b != 0) {
        return Err(invalid(
            what,
            format!("{d:#010x}: negate A/B (bits 13-14) is for the floating-point kinds only"),
        ));
    }
    if kind == MmaKind::F16 && f.a_format != f.b_format {
        return Err(not_implemented(
            what,
            format!(
                "{d:#010x}: A format {} with B format {} (mixed F16/BF16)",
                f.a_format, f.b_format
            ),
        ));
    }
    if kind != MmaKind::F16 && (f.a_major != 0 || f.b_major != 0) {
        return Err(not_implemented(
            what,
            format!(
                "{d:#010x}: an MN-major operand (bits 15-16) of {}",
                kind.name()
            ),
        ));
    }
    Ok(KindInstr {
        kind,
        a,
        b,
        negate_a: f.negate_a != 0,
        negate_b: f.negate_b != 0,
        saturate: f.saturate != 0,
    })
}

/// `d` with its kind-dependent fields (saturate, D/A/B formats, negate bits) set to a plain
/// kind::f16 MMA's (F32 D, F16 A and B), leaving what every kind shares: the sparsity fields,
/// the majors, N, M, the reserved bits and the `.ws` shift.
pub fn layout_idesc(d: u32) -> u32 {
    let kind_bits = (1 << 3) | (0x3 << 4) | (0x3F << 7) | (0x3 << 13);
    (d & !kind_bits) | (1 << 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_decodes_exactly() {
        // e4m3: bias 7, max 448, S.1111.111 NaN, min subnormal 2^-9.
        assert_eq!(Elem::E4m3.value(0x7E), 448.0);
        assert!(Elem::E4m3.value(0x7F).is_nan());
        assert_eq!(Elem::E4m3.value(0x01), 2f32.powi(-9));
        assert_eq!(Elem::E4m3.value(0xB8), -1.0);
        // e5m2: IEEE-like, max 57344, infinity at 0x7C.
        assert_eq!(Elem::E5m2.value(0x7B), 57344.0);
        assert_eq!(Elem::E5m2.value(0x7C), f32::INFINITY);
        assert_eq!(Elem::E5m2.value(0x01), 2f32.powi(-16));
        // e2m3: bias 1, max 7.5, subnormal 0.125; e3m2: bias 3, max 28, subnormal 2^-4.
        assert_eq!(Elem::E2m3.value(0x1F), 7.5);
        assert_eq!(Elem::E2m3.value(0x01), 0.125);
        assert_eq!(Elem::E2m3.value(0x3F), -7.5);
        assert_eq!(Elem::E3m2.value(0x1F), 28.0);
        assert_eq!(Elem::E3m2.value(0x01), 0.0625);
        // The padding bits of the 8-bit container are ignored.
        assert_eq!(Elem::E3m2.value(0xC0 | 0x1F), 28.0);
        // e2m1 in bits 2-5: 0.5, 1, 1.5, 2, 3, 4, 6.
        let e2m1: Vec<f32> = (0..8).map(|v| Elem::E2m1.value(v << 2 | 0xC3)).collect();
        assert_eq!(e2m1, [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]);
        assert_eq!(Elem::E2m1.value(0xF << 2), -6.0);
        assert_eq!(Elem::S8.value(0x80), -128.0);
        assert_eq!(Elem::U8.value(0x80), 128.0);
        // tf32: the low 13 bits are dropped.
        assert_eq!(Elem::Tf32.value(1.0f32.to_bits() | 0x1FFF), 1.0);
    }

    #[test]
    fn the_descriptor_fields_of_each_kind() {
        let base = (1 << 4) | ((64 >> 3) << 17) | ((128 >> 4) << 24);
        let fmt = |a: u32, b: u32| base | (a << 7) | (b << 10);
        assert_eq!(decode(MmaKind::Tf32, fmt(2, 2)).unwrap().a, Elem::Tf32);
        assert!(decode(MmaKind::Tf32, fmt(0, 0)).is_err());
        let k = decode(MmaKind::F8f6f4, fmt(0, 5)).unwrap();
        assert_eq!((k.a, k.b, k.k()), (Elem::E4m3, Elem::E2m1, 32));
        assert!(decode(MmaKind::F8f6f4, fmt(2, 0)).is_err());
        let i8d = (base & !(3 << 4)) | (2 << 4) | (1 << 7) | (1 << 3);
        let k = decode(MmaKind::I8, i8d).unwrap();
        assert_eq!((k.a, k.b, k.saturate), (Elem::S8, Elem::U8, true));
        assert!(decode(MmaKind::I8, fmt(1, 1)).is_err(), "i8 needs an S32 D");
        assert!(
            decode(MmaKind::I8, i8d | (1 << 13)).is_err(),
            "no negate on i8"
        );
        assert!(decode(MmaKind::F8f6f4, fmt(0, 0) | (1 << 3)).is_err());
        assert!(decode(MmaKind::Tf32, fmt(2, 2) | (1 << 15)).is_err());
        assert_eq!(layout_idesc(fmt(5, 3) | (1 << 13)), base);
    }
}
