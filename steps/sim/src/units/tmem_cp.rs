//! `tcgen05.cp` (PTX ISA 9.7.16.9.2): the shapes of the copy from shared memory to tensor memory
//! and where each source row lands.
//!
//! The source is the matrix the shared-memory descriptor describes, read through the K-major
//! canonical layouts ([`SmemOperand::chunk_addrs`]: 8-row groups SBO apart, 16-byte chunks,
//! swizzle by address); row r of it is 128 or 256 bits. The ISA gives the destination of each
//! row as figures ("Data Movement Shape"); the lane maps below are read off CUTLASS's
//! `SM100_UTCCP_*` copy traits (`cute/atom/copy_traits_sm100.hpp`: the lane strides of their
//! value layouts and the zero-stride broadcast modes), and agree with the ISA's text on the
//! multicast forms ("warps 0 and 2 form a pair" etc.; warp w of a warpgroup owns lanes
//! 32 w .. 32 w + 31):
//! - `.128x256b`, `.128x128b`: row r -> lane r;
//! - `.4x256b`: row r (0..3) -> lane 32 r, one row per warp's lane quarter;
//! - `.64x128b.warpx2::02_13`: row r -> lanes r and r + 64 (warp pairs 0/2 and 1/3);
//! - `.64x128b.warpx2::01_23`: row r -> lanes (r % 32) + 64 (r / 32) and 32 more (pairs 0/1 and
//!   2/3);
//! - `.32x128b.warpx4`: row r -> lanes r, r + 32, r + 64, r + 96.
//!
//! Each row fills `bits / 32` consecutive columns from the address's column, in byte order.

use super::descriptors::SmemOperand;
use super::error::{invalid, not_implemented};
use super::tmem::{taddr_col, taddr_lane, TensorMemory, COLUMNS};
use super::UnitError;

/// The shape and multicast of a `tcgen05.cp` (without decompression).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpShape {
    S128x256b,
    S128x128b,
    S4x256b,
    S64x128bWarpx2_02_13,
    S64x128bWarpx2_01_23,
    S32x128bWarpx4,
}

impl CpShape {
    /// The shape of the modifiers `shape` and `multicast` (None: no multicast), or why not:
    /// `.64x128b` requires a `.warpx2` multicast and `.32x128b` requires `.warpx4`; the other
    /// shapes take none (PTX ISA 9.7.16.9.2, the syntax's footnotes).
    pub fn parse(shape: &str, multicast: Option<&str>) -> Option<CpShape> {
        Some(match (shape, multicast) {
            ("128x256b", None) => CpShape::S128x256b,
            ("128x128b", None) => CpShape::S128x128b,
            ("4x256b", None) => CpShape::S4x256b,
            ("64x128b", Some("warpx2::02_13")) => CpShape::S64x128bWarpx2_02_13,
            ("64x128b", Some("warpx2::01_23")) => CpShape::S64x128bWarpx2_01_23,
            ("32x128b", Some("warpx4")) => CpShape::S32x128bWarpx4,
            _ => return None,
        })
    }

    /// Rows of the source matrix.
    pub fn rows(self) -> u32 {
        match self {
            CpShape::S128x256b | CpShape::S128x128b => 128,
            CpShape::S4x256b => 4,
            CpShape::S64x128bWarpx2_02_13 | CpShape::S64x128bWarpx2_01_23 => 64,
            CpShape::S32x128bWarpx4 => 32,
        }
    }

    /// Bytes of each source row (and 4 x the columns it fills).
    pub fn row_bytes(self) -> u32 {
        match self {
            CpShape::S128x256b | CpShape::S4x256b => 32,
            _ => 16,
        }
    }

    /// The lanes (from lane 0 of the address) that source row `r` is written to.
    pub fn lanes(self, r: u32) -> Vec<u32> {
        match self {
            CpShape::S128x256b | CpShape::S128x128b => vec![r],
            CpShape::S4x256b => vec![32 * r],
            CpShape::S64x128bWarpx2_02_13 => vec![r, r + 64],
            CpShape::S64x128bWarpx2_01_23 => {
                let l = r % 32 + 64 * (r / 32);
                vec![l, l + 32]
            }
            CpShape::S32x128bWarpx4 => vec![r, r + 32, r + 64, r + 96],
        }
    }
}

/// `tcgen05.cp.cta_group::1.{shape}` into `tmem` at `addr` from the matrix descriptor `desc`
/// describes in `smem` (the CTA's shared-memory window). The address's lane must be 0: every
/// shape's rows start at lane 0 of a warp's quarter from there, and the ISA's figures start
/// them at lane 0.
pub fn copy(
    tmem: &mut TensorMemory,
    smem: &[u8],
    addr: u32,
    desc: u64,
    shape: CpShape,
) -> Result<(), UnitError> {
    const WHAT: &str = "tcgen05.cp";
    let op = SmemOperand::decode(desc)?;
    let (lane, col) = (taddr_lane(addr), taddr_col(addr));
    if lane != 0 {
        return Err(if shape == CpShape::S4x256b {
            not_implemented(WHAT, format!(".4x256b at lane {lane} (not 0)"))
        } else {
            invalid(
                WHAT,
                format!("lane {lane}: a copy of shape {shape:?} spans the lanes from lane 0"),
            )
        });
    }
    if shape.row_bytes() == 32 {
        op.check_k16()?;
    }
    let ncols = shape.row_bytes() / 4;
    if col + ncols > COLUMNS {
        return Err(invalid(
            WHAT,
            format!(
                "columns {col}..{} are past the 512 columns of tensor memory",
                col + ncols
            ),
        ));
    }
    tmem.require_allocated(WHAT, col, ncols)?;
    for r in 0..shape.rows() {
        let chunks = op.chunk_addrs(r);
        let mut words = [0u32; 8];
        for (i, &a) in chunks
            .iter()
            .take((shape.row_bytes() / 16) as usize)
            .enumerate()
        {
            let lo = a as usize;
            let src = smem.get(lo..lo + 16).ok_or(UnitError::SmemOutOfRange {
                what: WHAT,
                addr: u64::from(a),
                len: 16,
                size: smem.len() as u64,
            })?;
            for (w, b) in words[4 * i..4 * i + 4].iter_mut().zip(src.chunks_exact(4)) {
                *w = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        for l in shape.lanes(r) {
            for (c, &w) in words[..ncols as usize].iter().enumerate() {
                tmem.write(l, col + c as u32, w)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::descriptors::{encode_smem_desc, Swizzle, SwizzlePattern};
    use super::super::tmem::{taddr, POISON};
    use super::*;

    /// A 128-row, 32-byte-row K-major matrix with 128B swizzle at 0 (rows 128 B apart, 8-row
    /// groups 1024 B apart, swizzle by address), word w of row r = r * 100 + w, written from
    /// the ISA's swizzle tables (chunk c of line l at chunk c ^ (l % 8)).
    fn source() -> (Vec<u8>, u64) {
        let mut smem = vec![0u8; 16 * 1024];
        for r in 0..128u32 {
            for w in 0..8u32 {
                let logical = r * 128 + 4 * w;
                let chunk = ((logical / 16) % 8) ^ (r % 8);
                let at = (r * 128 + chunk * 16 + logical % 16) as usize;
                smem[at..at + 4].copy_from_slice(&(r * 100 + w).to_le_bytes());
            }
        }
        (smem, encode_smem_desc(0, 16, 1024, Swizzle::B128, 0))
    }

    #[test]
    fn each_shape_puts_each_source_row_in_its_lanes() {
        let (smem, desc) = source();
        assert_eq!(
            SmemOperand::decode(desc).unwrap().pattern,
            SwizzlePattern::B128
        );
        for (shape, want) in [
            (CpShape::S128x256b, vec![(0, 0), (5, 5), (127, 127)]),
            (CpShape::S128x128b, vec![(0, 0), (77, 77)]),
            (CpShape::S4x256b, vec![(0, 0), (32, 1), (64, 2), (96, 3)]),
            (
                CpShape::S64x128bWarpx2_02_13,
                vec![(3, 3), (67, 3), (40, 40), (104, 40)],
            ),
            (
                CpShape::S64x128bWarpx2_01_23,
                vec![(3, 3), (35, 3), (67, 35), (99, 35)],
            ),
            (
                CpShape::S32x128bWarpx4,
                vec![(9, 9), (41, 9), (73, 9), (105, 9)],
            ),
        ] {
            let mut t = TensorMemory::new();
            let col = t.alloc(32).unwrap();
            copy(&mut t, &smem, taddr(0, col + 8), desc, shape).unwrap();
            let ncols = shape.row_bytes() / 4;
            // Every lane is written by exactly the rows the map names.
            let mut filled = 0;
            for lane in 0..128 {
                if t.read(lane, col + 8).unwrap() != POISON {
                    filled += 1;
                }
            }
            assert_eq!(
                filled,
                shape.rows() * shape.lanes(0).len() as u32,
                "{shape:?}"
            );
            for (lane, row) in want {
                for w in 0..ncols {
                    assert_eq!(
                        t.read(lane, col + 8 + w).unwrap(),
                        row * 100 + w,
                        "{shape:?} lane {lane} word {w}"
                    );
                }
                assert_eq!(t.read(lane, col + 8 + ncols).unwrap(), POISON);
                assert_eq!(t.read(lane, col + 7).unwrap(), POISON);
            }
        }
    }

    #[test]
    fn refuses_lanes_columns_and_multicast_combinations_the_isa_does_not_have() {
        let (smem, desc) = source();
        let mut t = TensorMemory::new();
        let col = t.alloc(32).unwrap();
        assert!(copy(&mut t, &smem, taddr(32, col), desc, CpShape::S128x128b).is_err());
        assert!(matches!(
            copy(&mut t, &smem, taddr(1, col), desc, CpShape::S4x256b),
            Err(UnitError::NotImplemented { .. })
        ));
        assert!(matches!(
            copy(&mut t, &smem, taddr(0, col + 28), desc, CpShape::S128x256b),
            Err(UnitError::TmemUnallocated { .. })
        ));
        assert_eq!(CpShape::parse("64x128b", None), None);
        assert_eq!(CpShape::parse("32x128b", Some("warpx2::01_23")), None);
        assert_eq!(CpShape::parse("128x256b", Some("warpx4")), None);
        assert_eq!(
            CpShape::parse("32x128b", Some("warpx4")),
            Some(CpShape::S32x128bWarpx4)
        );
    }
}
