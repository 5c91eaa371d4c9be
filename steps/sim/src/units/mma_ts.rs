//! `tcgen05.mma` with its A operand in tensor memory: `tcgen05.mma.cta_group::N.kind::K
//! [d-tmem], [a-tmem], b-desc, idesc, enable-input-d` (PTX ISA 9.7.16.9.1 "tcgen05.mma": "The
//! matrix A can be in Tensor Memory or in shared memory"; B is always in shared memory, D in
//! tensor memory).
//!
//! Where A's elements lie (PTX ISA 9.7.16.10.5 "Data Path Layout Organization", whose layouts
//! describe how the rows of the M dimension map onto the lanes of tensor memory for a given M
//! and cta_group; the same figures serve D and an A held in tensor memory): row i of the CTA's
//! part of A is in the lane the data-path layout gives row i of D, from the lane of `[a-tmem]`
//! (layout D, M = 128 cta_group::1: lane i; layout F, M = 64: lane (i % 16) + 32 (i / 16);
//! layout A, M = 256 cta_group::2: lane i of each CTA of the pair). Along a lane, A's K
//! elements of one MMA take 256 bits (PTX ISA "tcgen05.mma": K is 32 bytes of elements for
//! every dense kind), packed low to high in 32-bit columns from the address's column: two
//! 16-bit elements a column (element k in column k / 2, bits 16 (k % 2)), four 8-bit elements
//! or one tf32, so 8 columns an MMA. CUTLASS encodes the same placement independently:
//! `UMMA::tmem_frg_1sm<a_type, a_type, NonInterleaved>` for the A fragment of its `_TS`
//! atoms, the accumulator's data path with A's element type, and K = 256 bits.
//!
//! Not modelled, refused with the reason: A in tensor memory with the transpose-A bit set (the
//! bit describes a shared-memory operand's major-ness), M = 128 with cta_group::2 (data-path
//! layout B folds D's columns over the two lane halves; how a 64-row A is placed there is not
//! established here), and the 6- and 4-bit formats of `kind::f8f6f4` (whether tensor memory
//! holds them in 8-bit containers is not established here).
//!
//! The core carries the `[a-tmem]` address in the u64 operand word an A descriptor takes
//! ([`tag`], [`tmem_a`]): its bits 46-48 are 0b000, which no sm_100 shared-memory descriptor
//! has (they are the fixed 0b001), so the two can never be confused, and a word that reached
//! a descriptor decoder would be refused, never misread.

use super::descriptors::{Major, SmemOperand};
use super::error::{invalid, not_implemented};
use super::mma::{DataPath, Shape};
use super::mma_kinds::{self, Elem, KindInstr, MmaKind};
use super::tmem::{taddr_col, taddr_lane, TensorMemory, COLUMNS};
use super::UnitError;

/// Tensor-memory columns A of one MMA takes along a lane: 256 bits of K.
pub const A_COLUMNS: u32 = 8;

/// The high word of a tagged `[a-tmem]` operand (bits 46-48, i.e. 14-16 here, are zero).
const TAG_HI: u64 = 0xA7E0_0000;

/// The operand word of an A in tensor memory at `taddr`.
pub fn tag(taddr: u32) -> u64 {
    (TAG_HI << 32) | u64::from(taddr)
}

/// The tensor-memory address of A when `word` is an `[a-tmem]` operand ([`tag`]), else None
/// (a shared-memory descriptor).
pub fn tmem_a(word: u64) -> Option<u32> {
    (word >> 32 == TAG_HI).then_some(word as u32)
}

/// A checked MMA with A in tensor memory: the instruction and B's descriptor decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MmaTs {
    pub cta_group: u32,
    pub instr: super::descriptors::F16Instr,
    pub kind: KindInstr,
    pub b: SmemOperand,
}

impl MmaTs {
    /// Decodes and checks `tcgen05.mma.cta_group::{cta_group}.{kind} [d], [a], b_desc, idesc`.
    pub fn decode_kind(
        kind: MmaKind,
        idesc: u32,
        b_desc: u64,
        cta_group: u32,
    ) -> Result<Self, UnitError> {
        const WHAT: &str = "tcgen05.mma with A in tensor memory";
        let instr = if kind == MmaKind::F16 {
            super::descriptors::F16Instr::decode(idesc, cta_group)?
        } else {
            super::descriptors::F16Instr::decode(mma_kinds::layout_idesc(idesc), cta_group)?
        };
        let k = mma_kinds::decode(kind, idesc)?;
        if instr.a_major == Major::Mn {
            return Err(invalid(
                WHAT,
                format!("instruction descriptor {idesc:#010x} sets transpose A (bit 15), which describes an A operand in shared memory"),
            ));
        }
        if DataPath::of(instr.m, cta_group) == DataPath::B {
            return Err(not_implemented(
                WHAT,
                "M = 128 with cta_group::2 (data-path layout B): where its 64 rows of A lie is not modelled",
            ));
        }
        if matches!(k.a, Elem::E2m3 | Elem::E3m2 | Elem::E2m1) {
            return Err(not_implemented(
                WHAT,
                format!("A of format {:?}: the packing of 6- and 4-bit elements in tensor memory is not modelled", k.a),
            ));
        }
        let b = SmemOperand::decode_major(b_desc, instr.b_major)?;
        let m = MmaTs {
            cta_group,
            instr,
            kind: k,
            b,
        };
        b.check_slice(m.b_rows_per_cta())?;
        Ok(m)
    }

    fn shape(&self) -> Shape {
        Shape {
            cta_group: self.cta_group,
            instr: self.instr,
            kind: self.kind,
            b: self.b,
        }
    }

    /// Rows of A each CTA of the group holds in its tensor memory.
    pub fn a_rows_per_cta(&self) -> u32 {
        self.instr.m / self.cta_group
    }

    pub fn b_rows_per_cta(&self) -> u32 {
        self.instr.n / self.cta_group
    }

    pub fn datapath(&self) -> DataPath {
        DataPath::of(self.instr.m, self.cta_group)
    }

    /// Tensor-memory columns D occupies from its address's column, in each CTA.
    pub fn d_columns(&self) -> u32 {
        self.datapath().columns(self.instr.n)
    }

    /// The lanes of each CTA's tensor memory that hold A, for `[a-tmem]` at `a_taddr`.
    pub fn a_lanes(&self, a_taddr: u32) -> Vec<u32> {
        let lane0 = taddr_lane(a_taddr);
        let path = self.datapath();
        (0..self.a_rows_per_cta())
            .map(|i| lane0 + path.lane(i))
            .collect()
    }

    /// The shared-memory bytes the MMA reads in each CTA (B's chunks only), as sorted, merged
    /// `[lo, hi)` ranges.
    pub fn smem_reads(&self) -> Vec<(u32, u32)> {
        let mut chunks: Vec<(u32, u32)> = self
            .b
            .chunks(self.b_rows_per_cta())
            .into_iter()
            .map(|(a, ..)| (a, a + 16))
            .collect();
        chunks.sort_unstable();
        let mut merged: Vec<(u32, u32)> = Vec::new();
        for (lo, hi) in chunks {
            match merged.last_mut() {
                Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        merged
    }

    /// Checks `[a-tmem]` against the layout: its lane (0, or 0 or 16 for layout F, as for D:
    /// PTX ISA 9.7.16.10.5 "Tensor Memory Datapath Lane Alignment") and its 8 columns inside
    /// tensor memory.
    pub fn check_a(&self, a_taddr: u32) -> Result<(), UnitError> {
        let (lane0, col) = (taddr_lane(a_taddr), taddr_col(a_taddr));
        let path = self.datapath();
        if !(lane0 == 0 || (path == DataPath::F && lane0 == 16)) {
            return Err(invalid(
                "tcgen05.mma",
                format!("A address {a_taddr:#x} has lane {lane0}: A of an M = {} cta_group::{} MMA (data-path layout {path:?}) starts at lane {}", self.instr.m, self.cta_group, if path == DataPath::F { "0 or 16" } else { "0" }),
            ));
        }
        if col + A_COLUMNS > COLUMNS {
            return Err(invalid(
                "tcgen05.mma",
                format!(
                    "A columns {col}..{} are past the 512 columns of tensor memory",
                    col + A_COLUMNS
                ),
            ));
        }
        Ok(())
    }

    /// Runs the MMA: `smem[c]` and `tmem[c]` belong to CTA c of the group; A at `a_taddr` and
    /// D at `d_taddr` in each CTA's tensor memory. A is read whole before D is written, so an
    /// A that overlaps D reads the old values.
    pub fn execute(
        &self,
        smem: &[&[u8]],
        tmem: &mut [&mut TensorMemory],
        a_taddr: u32,
        d_taddr: u32,
        accumulate: bool,
    ) -> Result<(), UnitError> {
        self.check_a(a_taddr)?;
        let col = taddr_col(a_taddr);
        for t in tmem.iter() {
            t.require_allocated("tcgen05.mma (A)", col, A_COLUMNS)?;
        }
        let lanes = self.a_lanes(a_taddr);
        let elem = self.kind.a;
        let bits = elem.bytes() * 8;
        let k = self.kind.k();
        let read_a = |_: usize, _: &[u8], t: &TensorMemory, out: &mut [f32]| {
            for (row, &lane) in out.chunks_exact_mut(k).zip(&lanes) {
                let cells = t.row(lane, col, A_COLUMNS);
                for (e, v) in row.iter_mut().enumerate() {
                    let bit = e as u32 * bits;
                    let word = cells[(bit / 32) as usize] >> (bit % 32);
                    let raw = if bits == 32 {
                        word
                    } else {
                        word & ((1 << bits) - 1)
                    };
                    *v = elem.value(raw);
                }
            }
            Ok(())
        };
        self.shape().run(smem, tmem, d_taddr, accumulate, read_a)
    }
}

#[cfg(test)]
mod tests {
    use super::super::descriptors::{make_idesc_f16, make_smem_desc_sw128, sw128_offset};
    use super::super::numeric::{f32_to_bf16, FloatRound};
    use super::super::tmem::taddr;
    use super::*;

    #[test]
    fn tag_never_decodes_as_a_descriptor_and_round_trips() {
        let w = tag(taddr(16, 40));
        assert_eq!(tmem_a(w), Some(taddr(16, 40)));
        assert_eq!(tmem_a(make_smem_desc_sw128(0x400, 1024)), None);
        assert!(super::super::descriptors::SmemOperand::decode(w).is_err());
    }

    /// M = 128 and M = 64 (layout F): A stored by rows into the data-path lanes, two bf16 a
    /// column, against a direct sum.
    #[test]
    fn a_from_tensor_memory_matches_a_reference_in_layouts_d_and_f() {
        for m in [128u32, 64] {
            let n = 16u32;
            let a_val = |i: u32, k: u32| ((i * 3 + k * 5) % 9) as f32 - 4.0;
            let b_val = |j: u32, k: u32| ((j * 7 + k) % 5) as f32 - 2.0;
            let mut smem = vec![0u8; 8192];
            for j in 0..n {
                for k in 0..16 {
                    let o = sw128_offset(j, k) as usize;
                    let v = f32_to_bf16(b_val(j, k), FloatRound::Rn);
                    smem[o..o + 2].copy_from_slice(&v.to_le_bytes());
                }
            }
            let mut t = TensorMemory::new();
            let base = t.alloc(64).expect("alloc");
            let a_col = base + 32;
            let path = DataPath::of(m, 1);
            for i in 0..m {
                for c in 0..8 {
                    let lo = f32_to_bf16(a_val(i, 2 * c), FloatRound::Rn) as u32;
                    let hi = f32_to_bf16(a_val(i, 2 * c + 1), FloatRound::Rn) as u32;
                    t.write(path.lane(i), a_col + c, lo | (hi << 16))
                        .expect("write");
                }
            }
            let idesc = make_idesc_f16(m, n, true);
            let mma = MmaTs::decode_kind(MmaKind::F16, idesc, make_smem_desc_sw128(0, 1024), 1)
                .expect("decode");
            mma.execute(
                &[&smem],
                &mut [&mut t],
                taddr(0, a_col),
                taddr(0, base),
                false,
            )
            .expect("execute");
            for i in 0..m {
                for j in 0..n {
                    let want: f32 = (0..16).map(|k| a_val(i, k) * b_val(j, k)).sum();
                    let got = f32::from_bits(t.read(path.lane(i), base + j).expect("read"));
                    assert_eq!(got, want, "M = {m}, row {i}, column {j}");
                }
            }
        }
    }

    /// M = 256 with cta_group::2 (layout A): CTA c's 128 rows of A in its own lanes 0-127, B's
    /// rows split between the pair, each CTA's D its 128 rows.
    #[test]
    fn cta_group_2_m256_reads_each_ctas_rows_of_a_from_its_own_tensor_memory() {
        let n = 32u32;
        let a_val = |i: u32, k: u32| ((i * 5 + k * 3) % 7) as f32 - 3.0;
        let b_val = |j: u32, k: u32| ((j * 3 + k * 7) % 5) as f32 - 2.0;
        let mut windows = [vec![0u8; 8192], vec![0u8; 8192]];
        for (c, w) in windows.iter_mut().enumerate() {
            for j in 0..n / 2 {
                for k in 0..16 {
                    let o = sw128_offset(j, k) as usize;
                    let v = f32_to_bf16(b_val(j + 16 * c as u32, k), FloatRound::Rn);
                    w[o..o + 2].copy_from_slice(&v.to_le_bytes());
                }
            }
        }
        let mut t0 = TensorMemory::new();
        let mut t1 = TensorMemory::new();
        let base = TensorMemory::alloc_pair(&mut t0, &mut t1, 64).expect("alloc");
        let a_col = base + 40;
        for (c, t) in [&mut t0, &mut t1].into_iter().enumerate() {
            for i in 0..128u32 {
                let row = i + 128 * c as u32;
                for w in 0..8 {
                    let lo = f32_to_bf16(a_val(row, 2 * w), FloatRound::Rn) as u32;
                    let hi = f32_to_bf16(a_val(row, 2 * w + 1), FloatRound::Rn) as u32;
                    t.write(i, a_col + w, lo | (hi << 16)).expect("write");
                }
            }
        }
        let mma = MmaTs::decode_kind(
            MmaKind::F16,
            make_idesc_f16(256, n, true),
            make_smem_desc_sw128(0, 1024),
            2,
        )
        .expect("decode");
        let smem: [&[u8]; 2] = [&windows[0], &windows[1]];
        mma.execute(
            &smem,
            &mut [&mut t0, &mut t1],
            taddr(0, a_col),
            taddr(0, base),
            false,
        )
        .expect("execute");
        for (c, t) in [&t0, &t1].into_iter().enumerate() {
            for i in 0..128 {
                let row = i + 128 * c as u32;
                for j in 0..n {
                    let want: f32 = (0..16).map(|k| a_val(row, k) * b_val(j, k)).sum();
                    let got = f32::from_bits(t.read(i, base + j).expect("read"));
                    assert_eq!(got, want, "CTA {c} D[{row}][{j}]");
                }
            }
        }
    }

    #[test]
    fn refuses_transpose_a_unallocated_a_and_layout_b() {
        let b = make_smem_desc_sw128(0, 1024);
        let mn = super::super::descriptors::make_idesc_f16_major(128, 16, true, true, false);
        assert!(MmaTs::decode_kind(MmaKind::F16, mn, b, 1).is_err());
        let e = MmaTs::decode_kind(MmaKind::F16, make_idesc_f16(128, 32, true), b, 2)
            .expect_err("layout B");
        assert!(e.to_string().contains("layout B"), "{e}");
        let smem = vec![0u8; 8192];
        let mut t = TensorMemory::new();
        let base = t.alloc(32).expect("alloc");
        let mma =
            MmaTs::decode_kind(MmaKind::F16, make_idesc_f16(128, 16, true), b, 1).expect("decode");
        let e = mma
            .execute(
                &[&smem],
                &mut [&mut t],
                taddr(0, base + 32),
                taddr(0, base),
                false,
            )
            .expect_err("A unallocated");
        assert!(e.to_string().contains("(A)"), "{e}");
    }
}
