//! The core's calls into [`crate::units`]: the one place that adapts the interpreter's types
//! (registers of bits, the [`Device`], errors as text with context) to the data units.

use crate::decode::{Rnd, Ty};
use crate::mem::Device;
use crate::units::numeric::{self, FloatRound, IntRound, IntType};
use crate::units::UnitError;

pub use crate::units::tensormap::TensorMapDesc as MapDesc;
pub use crate::units::tmem::TensorMemory as Tmem;

/// A unit's error as the text of a fault of instruction `what`: the unit's message already
/// starts with the instruction's name most of the time ("tcgen05.mma: ..."); never doubled.
pub fn unit_message(what: &str, e: &UnitError) -> String {
    let s = e.to_string();
    if s.starts_with(what) {
        s
    } else {
        format!("{what}: {s}")
    }
}

/// Index of a tensor-map parameter of the launch.
pub type MapId = usize;

/// Bytes one box of `d` occupies in shared memory.
pub fn box_bytes(d: &MapDesc) -> u32 {
    d.box_bytes()
}

/// A TMA load of the box at `coords` into the CTA's shared memory `smem` at `addr` (the
/// swizzle follows the address, as on the hardware), listing in `log` the global byte ranges
/// it read (for the happens-before checker).
pub fn tma_load_logged(
    d: &MapDesc,
    coords: &[i32; 5],
    dev: &Device,
    smem: &mut [u8],
    addr: u32,
    log: &mut Vec<(u64, u64)>,
) -> Result<(), UnitError> {
    let rank = d.rank as usize;
    let mut read = |a: u64, out: &mut [u8]| {
        log.push((a, a + out.len() as u64));
        dev.read(a, out)
    };
    d.load_box_at(&coords[..rank], &mut read, smem, addr)
}

/// A TMA store of the box at `coords` from the CTA's shared memory `smem` at `addr`; the
/// global runs it writes go to `seen`, when given.
pub fn tma_store(
    d: &MapDesc,
    coords: &[i32; 5],
    smem: &[u8],
    addr: u32,
    dev: &mut Device,
    mut seen: Option<&mut Vec<(u64, u64)>>,
) -> Result<(), UnitError> {
    let rank = d.rank as usize;
    let mut write = |a: u64, data: &[u8]| {
        if let Some(s) = seen.as_mut() {
            s.push((a, data.len() as u64));
        }
        dev.write(a, data)
    };
    d.store_box_at(&coords[..rank], smem, addr, &mut write)
}

/// The global byte ranges the TMA store of the box at `coords` will write (for the
/// happens-before checker, at the store's issue): the store's traversal, writing nothing.
pub fn tma_store_ranges(
    d: &MapDesc,
    coords: &[i32; 5],
    smem: &[u8],
    addr: u32,
) -> Result<Vec<(u64, u64)>, UnitError> {
    let rank = d.rank as usize;
    let mut log = Vec::new();
    let mut record = |a: u64, data: &[u8]| {
        log.push((a, a + data.len() as u64));
        true
    };
    d.store_box_at(&coords[..rank], smem, addr, &mut record)?;
    Ok(log)
}

/// `tcgen05.mma.cta_group::{1,2}.kind` (f16, tf32, f8f6f4, i8).
#[allow(clippy::too_many_arguments)]
pub fn mma(
    kind: crate::units::mma_kinds::MmaKind,
    idesc: u32,
    a: u64,
    b: u64,
    smem: &[&Vec<u8>],
    tmem: &mut [&mut Tmem],
    d: u32,
    acc: bool,
    _cg2: bool,
) -> Result<(), UnitError> {
    let s: Vec<&[u8]> = smem.iter().map(|v| v.as_slice()).collect();
    let group = u32::try_from(s.len()).unwrap_or(u32::MAX);
    if let Some(ta) = crate::units::mma_ts::tmem_a(a) {
        return crate::units::mma_ts::MmaTs::decode_kind(kind, idesc, b, group)?
            .execute(&s, tmem, ta, d, acc);
    }
    crate::units::mma::MmaF16::decode_kind(kind, idesc, a, b, group)?.execute(&s, tmem, d, acc)
}

/// `tcgen05.cp` of shape `shape` into one CTA's `tmem` at `taddr` from the matrix that
/// shared-memory descriptor `desc` describes in its `smem`.
pub fn tc_cp(
    tmem: &mut Tmem,
    smem: &[u8],
    taddr: u32,
    desc: u64,
    shape: crate::units::tmem_cp::CpShape,
) -> Result<(), UnitError> {
    crate::units::tmem_cp::copy(tmem, smem, taddr, desc, shape)
}

/// An MMA's layout only (shape, majors, operand descriptors), which every dense kind shares:
/// its kind's own fields are checked at issue (`exec/async_ops.rs`, `tc_mma`).
fn mma_layout(
    idesc: u32,
    a: u64,
    b: u64,
    group: u32,
) -> Result<crate::units::mma::MmaF16, UnitError> {
    let l = crate::units::mma_kinds::layout_idesc(idesc);
    crate::units::mma::MmaF16::decode(l, a, b, group)
}

/// The layout of an MMA whose A is in tensor memory (`a` a tagged `[a-tmem]` word,
/// `units::mma_ts`), None when A is a shared-memory descriptor.
fn mma_ts_layout(
    idesc: u32,
    a: u64,
    b: u64,
    group: u32,
) -> Option<Result<crate::units::mma_ts::MmaTs, UnitError>> {
    crate::units::mma_ts::tmem_a(a)?;
    let l = crate::units::mma_kinds::layout_idesc(idesc);
    let kind = crate::units::mma_kinds::MmaKind::F16;
    Some(crate::units::mma_ts::MmaTs::decode_kind(kind, l, b, group))
}

/// The shared-memory ranges an MMA reads in each CTA of its group (B only when A is in tensor
/// memory).
pub fn mma_reads(idesc: u32, a: u64, b: u64, group: u32) -> Result<Vec<(u32, u32)>, UnitError> {
    if let Some(m) = mma_ts_layout(idesc, a, b, group) {
        return Ok(m?.smem_reads());
    }
    Ok(mma_layout(idesc, a, b, group)?.smem_reads())
}

/// Tensor-memory columns an MMA's D occupies from its address's column (the data-path layout:
/// N/2 for M = 128 with cta_group::2, else N); `None` when the descriptor does not decode.
pub fn mma_d_columns(idesc: u32, a: u64, b: u64, group: u32) -> Option<u32> {
    if let Some(m) = mma_ts_layout(idesc, a, b, group) {
        return m.ok().map(|m| m.d_columns());
    }
    mma_layout(idesc, a, b, group).ok().map(|m| m.d_columns())
}

/// The tensor memory an MMA with A in tensor memory reads for A in each CTA of its group:
/// (its lanes, first column, columns); None when A is in shared memory or the layout does
/// not decode (the MMA reports that itself).
pub fn mma_a_tmem(idesc: u32, a: u64, b: u64, group: u32) -> Option<(Vec<u32>, u32, u32)> {
    let ta = crate::units::mma_ts::tmem_a(a)?;
    let m = mma_ts_layout(idesc, a, b, group)?.ok()?;
    Some((
        m.a_lanes(ta),
        crate::units::tmem::taddr_col(ta),
        crate::units::mma_ts::A_COLUMNS,
    ))
}

/// Which operand of the MMA ("A" or "B") the shared-memory byte `addr` belongs to.
pub fn mma_operand_at(idesc: u32, a: u64, b: u64, group: u32, addr: u32) -> &'static str {
    if crate::units::mma_ts::tmem_a(a).is_some() {
        return "B";
    }
    let Ok(m) = mma_layout(idesc, a, b, group) else {
        return "A or B";
    };
    let in_a =
        m.a.chunks(m.a_rows_per_cta())
            .iter()
            .any(|&(c, ..)| (c..c + 16).contains(&addr));
    if in_a {
        "A"
    } else {
        "B"
    }
}

pub fn float_round(r: Rnd) -> Option<FloatRound> {
    match r {
        Rnd::Rn | Rnd::None => Some(FloatRound::Rn),
        Rnd::Rz => Some(FloatRound::Rz),
        Rnd::Rm => Some(FloatRound::Rm),
        Rnd::Rp => Some(FloatRound::Rp),
        _ => None,
    }
}

fn int_round(r: Rnd) -> Option<IntRound> {
    match r {
        Rnd::Rni => Some(IntRound::Rni),
        Rnd::Rzi | Rnd::None => Some(IntRound::Rzi),
        Rnd::Rmi => Some(IntRound::Rmi),
        Rnd::Rpi => Some(IntRound::Rpi),
        _ => None,
    }
}

fn int_type(t: Ty) -> Option<IntType> {
    Some(match t {
        Ty::U8 | Ty::B8 => IntType::U8,
        Ty::S8 => IntType::S8,
        Ty::U16 | Ty::B16 => IntType::U16,
        Ty::S16 => IntType::S16,
        Ty::U32 | Ty::B32 => IntType::U32,
        Ty::S32 => IntType::S32,
        Ty::U64 | Ty::B64 => IntType::U64,
        Ty::S64 => IntType::S64,
        _ => return None,
    })
}

/// `cvt.{rnd}{.sat}.dst.src` on the bits `x`; None for a combination not modelled.
pub fn cvt(dst: Ty, src: Ty, rnd: Rnd, sat: bool, x: u64) -> Option<u64> {
    // The source value as an exact f64 or integer.
    enum V {
        F(f64, bool),
        I(i128),
    }
    let v = match src {
        Ty::F32 => V::F(f32::from_bits(x as u32) as f64, false),
        Ty::F64 => V::F(f64::from_bits(x), true),
        Ty::F16 => V::F(numeric::f16_to_f32(x as u16) as f64, false),
        Ty::Bf16 => V::F(numeric::bf16_to_f32(x as u16) as f64, false),
        t => {
            let it = int_type(t)?;
            let bits = it.bits();
            let m = if bits == 64 {
                x
            } else {
                x & ((1u64 << bits) - 1)
            };
            if it.signed() {
                let s = 64 - bits;
                V::I((((m << s) as i64) >> s) as i128)
            } else {
                V::I(m as i128)
            }
        }
    };
    let out = match (dst, v) {
        (Ty::F32, V::F(f, from64)) => {
            let r = if from64 {
                numeric::f64_to_f32(f, float_round(rnd)?)
            } else if matches!(rnd, Rnd::Rni | Rnd::Rzi | Rnd::Rmi | Rnd::Rpi) {
                numeric::round_f32_to_integral(f as f32, int_round(rnd)?)
            } else {
                f as f32
            };
            let r = if sat { r.clamp(0.0, 1.0) } else { r };
            r.to_bits() as u64
        }
        (Ty::F64, V::F(f, _)) => f.to_bits(),
        (Ty::F16, V::F(f, false)) => numeric::f32_to_f16(f as f32, float_round(rnd)?) as u64,
        (Ty::Bf16, V::F(f, false)) => numeric::f32_to_bf16(f as f32, float_round(rnd)?) as u64,
        (Ty::F32, V::I(i)) => numeric::int_to_f32(i, float_round(rnd)?).to_bits() as u64,
        (Ty::F64, V::I(i)) => numeric::int_to_f64(i, float_round(rnd)?).to_bits(),
        (t, V::F(f, from64)) => numeric::float_to_int(f, from64, int_round(rnd)?, int_type(t)?),
        (t, V::I(i)) => {
            let it = int_type(t)?;
            let bits = it.bits();
            let v = if sat {
                let (lo, hi) = if it.signed() {
                    (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
                } else {
                    (0, (1i128 << bits) - 1)
                };
                i.clamp(lo, hi)
            } else {
                i
            };
            let u = v as u64;
            if bits == 64 {
                u
            } else {
                u & ((1u64 << bits) - 1)
            }
        }
    };
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cvt_cases() {
        // f32 1.5 -> f16 0x3E00
        assert_eq!(
            cvt(Ty::F16, Ty::F32, Rnd::Rn, false, 1.5f32.to_bits() as u64),
            Some(0x3E00)
        );
        // u32 -> u64 zero-extends, s32 -> s64 sign-extends
        assert_eq!(
            cvt(Ty::U64, Ty::U32, Rnd::None, false, 0xFFFF_FFFF),
            Some(0xFFFF_FFFF)
        );
        assert_eq!(
            cvt(Ty::S64, Ty::S32, Rnd::None, false, 0xFFFF_FFFF),
            Some(u64::MAX)
        );
        // u64 -> u32 truncates
        assert_eq!(
            cvt(Ty::U32, Ty::U64, Rnd::None, false, 0x1_0000_0002),
            Some(2)
        );
        // f32 2.7 -> s32 with rzi
        assert_eq!(
            cvt(Ty::S32, Ty::F32, Rnd::Rzi, false, 2.7f32.to_bits() as u64),
            Some(2)
        );
        // s32 -3 -> f32
        assert_eq!(
            cvt(Ty::F32, Ty::S32, Rnd::Rn, false, (-3i32) as u32 as u64),
            Some((-3.0f32).to_bits() as u64)
        );
    }
}
