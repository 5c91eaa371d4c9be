//! `tcgen05.ld`/`tcgen05.st` shapes over 16 lanes (PTX ISA 9.7.16.2.3.1 "Matrix fragments for
//! shape .16x64b / .16x128b / .16x256b / .16x32bx2"). The ISA gives these layouts as figures;
//! the formulas below are read off them and agree with CUTLASS's `SM100_TMEM_LOAD_16dp*` copy
//! traits (an independent encoding of the same figures). With `g = t / 4` for thread t:
//! - `.16x64b.xN` (N registers): register i of thread t is lane `t / 4 + 8 (t % 2)`, column
//!   `(t / 2) % 2 + 2 i`;
//! - `.16x128b.xN` (2N): register `2 i + h` is lane `g + 8 h`, column `t % 4 + 4 i`;
//! - `.16x256b.xN` (4N): register `4 i + 2 h + e` is lane `g + 8 h`, column
//!   `2 (t % 4) + e + 8 i` (the mma.sync accumulator layout, repeated every 8 columns);
//! - `.16x32bx2.xN` (N): register i of thread t is lane `t % 16`, column
//!   `i + (t / 16) * immHalfSplitoff`: the second half-warp reads the same 16 lanes at the
//!   immediate column offset.
//!
//! - `.32x32b.xN` (N registers, here only for its packed forms): register i of thread t is lane
//!   t, column i.
//!
//! Lanes are relative to the address's lane, columns to its column.
//!
//! `.pack::16b` / `.unpack::16b` (PTX ISA 9.7.16.8.2 "Packing and Unpacking", Figure 193): a
//! register holds two 16-bit halves from two tensor-memory cells. The figure is not readable
//! here; CUTLASS's `SM100_TMEM_LOAD_*_16b` copy traits give the map: the same register layout
//! as the unpacked form, each 32-bit logical column c drawn from the low 16 bits of cells 2c
//! (register bits 0-15) and 2c + 1 (bits 16-31), so the shape spans twice the columns; for
//! `.16x32bx2` the second half-warp's base is still `immHalfSplitoff` columns on
//! (CUTLASS uses offset 2 with `.x1.pack::16b`, 1 without).

/// The 16-lane shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TmemShape {
    S16x64b,
    S16x128b,
    S16x256b,
    S16x32bx2,
    S32x32b,
}

impl TmemShape {
    pub fn parse(s: &str) -> Option<TmemShape> {
        Some(match s {
            "16x64b" => TmemShape::S16x64b,
            "16x128b" => TmemShape::S16x128b,
            "16x256b" => TmemShape::S16x256b,
            "16x32bx2" => TmemShape::S16x32bx2,
            "32x32b" => TmemShape::S32x32b,
            _ => return None,
        })
    }

    /// Registers per thread for `.num = x{n}`.
    pub fn regs(self, n: u32) -> u32 {
        match self {
            TmemShape::S16x64b | TmemShape::S16x32bx2 | TmemShape::S32x32b => n,
            TmemShape::S16x128b => 2 * n,
            TmemShape::S16x256b => 4 * n,
        }
    }

    /// The largest `.num` (PTX ISA Table "tcgen05.ld/st .num": at most 128 registers).
    pub fn max_num(self) -> u32 {
        match self {
            TmemShape::S16x64b | TmemShape::S16x32bx2 | TmemShape::S32x32b => 128,
            TmemShape::S16x128b => 64,
            TmemShape::S16x256b => 32,
        }
    }

    /// (lane offset, column offset) of register `i` of thread `t`.
    pub fn cell(self, t: u32, i: u32, half_split: u32) -> (u32, u32) {
        let g = t / 4;
        match self {
            TmemShape::S16x64b => (g + 8 * (t % 2), (t / 2) % 2 + 2 * i),
            TmemShape::S16x128b => (g + 8 * (i % 2), t % 4 + 4 * (i / 2)),
            TmemShape::S16x256b => (g + 8 * ((i / 2) % 2), 2 * (t % 4) + i % 2 + 8 * (i / 4)),
            TmemShape::S16x32bx2 => (t % 16, i + (t / 16) * half_split),
            TmemShape::S32x32b => (t, i),
        }
    }

    /// Lanes the shape spans from the address's lane.
    pub fn lanes(self) -> u32 {
        if self == TmemShape::S32x32b {
            32
        } else {
            16
        }
    }

    /// With `.pack::16b`/`.unpack::16b`: (lane offset, first of the two column offsets) of
    /// register `i` of thread `t`; the second cell is the next column.
    pub fn cell_packed(self, t: u32, i: u32, half_split: u32) -> (u32, u32) {
        match self {
            TmemShape::S16x32bx2 => (t % 16, 2 * i + (t / 16) * half_split),
            _ => {
                let (l, c) = self.cell(t, i, half_split);
                (l, 2 * c)
            }
        }
    }

    /// Columns from the address's column that `.num = x{n}` reaches with packing.
    pub fn columns_packed(self, n: u32, half_split: u32) -> u32 {
        match self {
            TmemShape::S16x32bx2 => 2 * n + half_split,
            _ => 2 * self.columns(n, half_split),
        }
    }

    /// Columns from the address's column that `.num = x{n}` reaches.
    pub fn columns(self, n: u32, half_split: u32) -> u32 {
        match self {
            TmemShape::S16x64b => 2 * n,
            TmemShape::S16x128b => 4 * n,
            TmemShape::S16x256b => 8 * n,
            TmemShape::S16x32bx2 => n + half_split,
            TmemShape::S32x32b => n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_shape_covers_its_16_lanes_once() {
        for (s, n) in [
            (TmemShape::S16x64b, 2),
            (TmemShape::S16x128b, 2),
            (TmemShape::S16x256b, 2),
            (TmemShape::S16x32bx2, 4),
        ] {
            let cols = s.columns(n, n);
            let mut seen = vec![0; (16 * cols) as usize];
            for t in 0..32 {
                for i in 0..s.regs(n) {
                    let (l, c) = s.cell(t, i, n);
                    assert!(l < 16 && c < cols, "{s:?}");
                    seen[(l * cols + c) as usize] += 1;
                }
            }
            assert!(seen.iter().all(|&k| k == 1), "{s:?}");
        }
    }

    #[test]
    fn packed_forms_cover_twice_the_columns_once() {
        for (s, n, split) in [
            (TmemShape::S16x64b, 2, 0),
            (TmemShape::S16x128b, 2, 0),
            (TmemShape::S16x256b, 2, 0),
            (TmemShape::S16x32bx2, 4, 8),
            (TmemShape::S32x32b, 4, 0),
        ] {
            let cols = s.columns_packed(n, split);
            let mut seen = vec![0; (s.lanes() * cols) as usize];
            for t in 0..32 {
                for i in 0..s.regs(n) {
                    let (l, c) = s.cell_packed(t, i, split);
                    for cc in [c, c + 1] {
                        assert!(l < s.lanes() && cc < cols, "{s:?}");
                        seen[(l * cols + cc) as usize] += 1;
                    }
                }
            }
            assert!(seen.iter().all(|&k| k == 1), "{s:?}");
        }
    }
}
