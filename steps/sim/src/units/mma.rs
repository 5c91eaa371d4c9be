//! Numerics of `tcgen05.mma.cta_group::{1,2}.kind::f16` (and of the other dense kinds through
//! `mma_kinds.rs`: same layout, their element formats and K) (PTX ISA 9.7.16.9.1 "tcgen05.mma",
//! 9.7.16.4 "Matrix Descriptors", 9.7.16.10.5 "Data Path Layout Organization"): `D[i][j] (+)=
//! sum over k < 16 of A[i][k] * B[j][k]`, A (M x 16) and B (N x 16) in shared memory, K-major or
//! MN-major (the instruction descriptor's transpose bits), D (M x N, f32) in tensor memory.
//!
//! cta_group::2 (PTX ISA 9.7.16.5.1 "CTA Pair"; the emulation's `execute` does the same): both
//! CTAs of the pair hold their operands at the offsets of the issuing CTA's descriptors. CTA c's
//! A holds its M/2 rows; B's N rows are split, the first N/2 in the even CTA and the rest in the
//! odd one; CTA c's tensor memory receives its M/2 rows of D x all N columns, at the same
//! address, in the data-path layout of the shape ([`DataPath`]).
//!
//! Rounding: each dot product is a chain of fused multiply-adds over k = 0..15 from 0, then added
//! to D — the order of the GPU emulation, so the two agree bit for bit. The hardware's internal
//! order is not documented; any order is within the verification tolerance.

use super::descriptors::{F16Instr, SmemOperand};
use super::error::invalid;
use super::mma_kinds::{self, Elem, KindInstr, MmaKind};
use super::numeric::{bf16_to_f32, f16_to_f32};
use super::tmem::{taddr_col, taddr_lane, TensorMemory};
use super::UnitError;

/// K of one kind::f16 MMA.
pub const K: usize = 16;

/// Where row i, column j of a CTA's part of D lies in its tensor memory (PTX ISA 9.7.16.10.5,
/// the table of layouts: M, cta_group, organization, lane alignment). The ISA draws the layouts
/// as figures; the lane and column maps below are read off CUTLASS's `UMMA::tmem_frg` atoms
/// (`cute/atom/mma_traits_sm100_frag.hpp`), an independent encoding of the same figures, and
/// agree with the organization column of the ISA's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataPath {
    /// M = 256, cta_group::2 (4x1): each CTA's 128 rows, row i in lane i, column j in column j.
    A,
    /// M = 128, cta_group::2, dense (2x2): each CTA's 64 rows in lanes 0-63 for columns
    /// 0 .. N/2 and again in lanes 64-127 for columns N/2 .. N, both halves in the same N/2
    /// columns: (i, j) -> lane i + 64 (j / (N/2)), column j % (N/2). Lane alignment 0.
    B,
    /// M = 128, cta_group::1 (4x1): row i in lane i. Lane alignment 0.
    D,
    /// M = 64, cta_group::1, not .ws (4x1, half the data path): 16 rows in each warp's lane
    /// quarter: (i, j) -> lane (i % 16) + 32 (i / 16), column j, from the address's lane, which
    /// is 0 or 16 (the table's "0 or 16": two M = 64 accumulators can share the columns).
    F,
}

impl DataPath {
    pub fn of(m: u32, cta_group: u32) -> DataPath {
        match (m, cta_group) {
            (256, _) => DataPath::A,
            (128, 2) => DataPath::B,
            (64, _) => DataPath::F,
            _ => DataPath::D,
        }
    }

    /// Columns of D from the address's column, for N columns of the matrix.
    pub fn columns(self, n: u32) -> u32 {
        match self {
            DataPath::B => n / 2,
            _ => n,
        }
    }

    /// The lane (from the address's lane) of row `i` for the columns from `j`. B's halves are
    /// handled by the caller.
    pub(super) fn lane(self, i: u32) -> u32 {
        match self {
            DataPath::F => i % 16 + 32 * (i / 16),
            _ => i,
        }
    }
}

/// A checked kind::f16 MMA: the instruction and both operand descriptors decoded, ready to
/// run on the shared memory of the CTA group. Decoding at issue lets the core report a bad
/// descriptor at the `tcgen05.mma` that carried it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MmaF16 {
    pub cta_group: u32,
    pub instr: F16Instr,
    /// The operand kind and its element formats (see `mma_kinds.rs`).
    pub kind: KindInstr,
    pub a: SmemOperand,
    pub b: SmemOperand,
}

impl MmaF16 {
    /// Decodes and checks `tcgen05.mma.cta_group::{cta_group}.kind::f16 [d], a_desc, b_desc,
    /// idesc` (the A-in-shared-memory form).
    pub fn decode(idesc: u32, a_desc: u64, b_desc: u64, cta_group: u32) -> Result<Self, UnitError> {
        Self::decode_kind(MmaKind::F16, idesc, a_desc, b_desc, cta_group)
    }

    /// [`Self::decode`] for `.kind` `kind` (`mma_kinds.rs`): the shape, the majors and the
    /// operand descriptors as for kind::f16 (every dense kind reads 32 bytes of K a row), the
    /// formats, negation and saturation of the kind.
    pub fn decode_kind(
        kind: MmaKind,
        idesc: u32,
        a_desc: u64,
        b_desc: u64,
        cta_group: u32,
    ) -> Result<Self, UnitError> {
        let instr = if kind == MmaKind::F16 {
            F16Instr::decode(idesc, cta_group)?
        } else {
            F16Instr::decode(mma_kinds::layout_idesc(idesc), cta_group)?
        };
        let kind = mma_kinds::decode(kind, idesc)?;
        let a = SmemOperand::decode_major(a_desc, instr.a_major)?;
        let b = SmemOperand::decode_major(b_desc, instr.b_major)?;
        let m = MmaF16 {
            cta_group,
            instr,
            kind,
            a,
            b,
        };
        a.check_slice(m.a_rows_per_cta())?;
        b.check_slice(m.b_rows_per_cta())?;
        Ok(m)
    }

    /// Rows of A each CTA of the group holds.
    pub fn a_rows_per_cta(&self) -> u32 {
        self.instr.m / self.cta_group
    }

    /// Rows of B each CTA of the group holds.
    pub fn b_rows_per_cta(&self) -> u32 {
        self.instr.n / self.cta_group
    }

    /// The data-path layout of D.
    pub fn datapath(&self) -> DataPath {
        DataPath::of(self.instr.m, self.cta_group)
    }

    /// Tensor-memory columns D occupies from its address's column, in each CTA.
    pub fn d_columns(&self) -> u32 {
        self.datapath().columns(self.instr.n)
    }

    /// The shared-memory bytes the MMA reads in each CTA of the group, as sorted, merged
    /// `[lo, hi)` ranges (the same in every CTA: both operands sit at the same offsets). For the
    /// ordering rules: these bytes must be loaded, and not overwritten until the MMA completes.
    pub fn smem_reads(&self) -> Vec<(u32, u32)> {
        let mut chunks: Vec<(u32, u32)> = Vec::new();
        for (op, rows) in [
            (&self.a, self.a_rows_per_cta()),
            (&self.b, self.b_rows_per_cta()),
        ] {
            for (a, ..) in op.chunks(rows) {
                chunks.push((a, a + 16));
            }
        }
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

    /// Runs the MMA: `smem[c]` is the shared-memory window of CTA c of the group (address 0 =
    /// its first byte), `tmem[c]` its tensor memory; D at `d_taddr` in each. `accumulate` false
    /// overwrites D (the instruction's enable-input-d predicate).
    pub fn execute(
        &self,
        smem: &[&[u8]],
        tmem: &mut [&mut TensorMemory],
        d_taddr: u32,
        accumulate: bool,
    ) -> Result<(), UnitError> {
        let (op, rows_a, bf16, elem) = (
            self.a,
            self.a_rows_per_cta() as usize,
            self.instr.bf16,
            self.kind.a,
        );
        let f16 = self.kind.kind == MmaKind::F16;
        let read_a = |_: usize, window: &[u8], _: &TensorMemory, out: &mut [f32]| {
            if f16 {
                read_operand(window, &op, rows_a, bf16, "A", out)
            } else {
                read_operand_kmajor(window, &op, rows_a, elem, "A", out)
            }
        };
        let shape = Shape {
            cta_group: self.cta_group,
            instr: self.instr,
            kind: self.kind,
            b: self.b,
        };
        shape.run(smem, tmem, d_taddr, accumulate, read_a)
    }
}

/// What an MMA's execution needs besides its A operand: the group, the shape and formats, and
/// B's descriptor (shared by the A-in-shared-memory form above and the A-in-tensor-memory form
/// of `mma_ts.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shape {
    pub cta_group: u32,
    pub instr: F16Instr,
    pub kind: KindInstr,
    pub b: SmemOperand,
}

impl Shape {
    fn a_rows_per_cta(&self) -> u32 {
        self.instr.m / self.cta_group
    }

    fn b_rows_per_cta(&self) -> u32 {
        self.instr.n / self.cta_group
    }

    /// Runs the MMA (see [`MmaF16::execute`]); `read_a(c, smem, tmem, out)` decodes CTA c's
    /// rows of A (row-major, K values a row) from its shared or its tensor memory.
    pub(super) fn run(
        &self,
        smem: &[&[u8]],
        tmem: &mut [&mut TensorMemory],
        d_taddr: u32,
        accumulate: bool,
        mut read_a: impl FnMut(usize, &[u8], &TensorMemory, &mut [f32]) -> Result<(), UnitError>,
    ) -> Result<(), UnitError> {
        let group = self.cta_group as usize;
        if smem.len() != group || tmem.len() != group {
            return Err(invalid(
                "tcgen05.mma",
                format!(
                    "cta_group::{group} needs the shared and tensor memory of {group} CTAs ({} and {} given)",
                    smem.len(),
                    tmem.len()
                ),
            ));
        }
        let path = DataPath::of(self.instr.m, self.cta_group);
        // PTX ISA 9.7.16.10.5, "Tensor Memory Datapath Lane Alignment": 0, or 0 or 16 for F.
        let lane0 = taddr_lane(d_taddr);
        let lane_ok = lane0 == 0 || (path == DataPath::F && lane0 == 16);
        if !lane_ok {
            return Err(invalid(
                "tcgen05.mma",
                format!(
                    "D address {d_taddr:#x} has lane {lane0}: an M = {} cta_group::{} accumulator (data-path layout {path:?}) starts at lane {}",
                    self.instr.m,
                    self.cta_group,
                    if path == DataPath::F { "0 or 16" } else { "0" }
                ),
            ));
        }
        let col = taddr_col(d_taddr);
        let n = self.instr.n;
        let ncols = path.columns(n);
        if col + ncols > super::tmem::COLUMNS {
            return Err(invalid(
                "tcgen05.mma",
                format!(
                    "D columns {col}..{} are past the 512 columns of tensor memory",
                    col + ncols
                ),
            ));
        }
        for t in tmem.iter() {
            t.require_allocated("tcgen05.mma (D)", col, ncols)?;
        }
        let rows_a = self.a_rows_per_cta() as usize;
        let rows_b = self.b_rows_per_cta() as usize;
        let k = self.kind.k();
        let f16 = self.kind.kind == MmaKind::F16;
        // B is shared by the group: decode it once, its CTA-c rows after CTA (c-1)'s.
        let mut b = vec![0f32; n as usize * k];
        for (c, window) in smem.iter().enumerate() {
            let out = &mut b[c * rows_b * k..(c + 1) * rows_b * k];
            if f16 {
                read_operand(window, &self.b, rows_b, self.instr.bf16, "B", out)?;
            } else {
                read_operand_kmajor(window, &self.b, rows_b, self.kind.b, "B", out)?;
            }
        }
        let mut a = vec![0f32; rows_a * k];
        let half = (n / 2) as usize;
        // PTX ISA Table 42, bits 13-14: negate A / B (the floating-point kinds).
        let sign = if self.kind.negate_a != self.kind.negate_b {
            -1.0
        } else {
            1.0
        };
        let dot = |a_row: &[f32], b: &[f32], d: &mut [u32]| match self.kind.kind {
            MmaKind::I8 => dot_row_i8(a_row, b, d, accumulate, self.kind.saturate),
            MmaKind::F16 => dot_row(a_row, b, d, accumulate),
            _ => dot_row_k(a_row, b, d, accumulate, k, sign),
        };
        for (c, (window, t)) in smem.iter().zip(tmem.iter_mut()).enumerate() {
            read_a(c, window, t, &mut a)?;
            for (i, a_row) in a.chunks_exact(k).enumerate() {
                let i = i as u32;
                if path == DataPath::B {
                    dot(a_row, &b[..half * k], t.row_mut(i, col, n / 2));
                    dot(a_row, &b[half * k..], t.row_mut(i + 64, col, n / 2));
                } else {
                    let lane = lane0 + path.lane(i);
                    dot(a_row, &b, t.row_mut(lane, col, n));
                }
            }
        }
        Ok(())
    }
}

/// One row of D: `d[j] = (accumulate ? d[j] : 0) + fma-chain(a_row . b_j)` for every row `b_j`
/// of `b` (16 floats each), D held as f32 bits.
#[cfg(not(target_arch = "wasm32"))]
#[inline(always)]
fn dot_row_body(a_row: &[f32], b: &[f32], d_row: &mut [u32], accumulate: bool) {
    for (d, b_row) in d_row.iter_mut().zip(b.chunks_exact(K)) {
        let mut dot = 0f32;
        for k in 0..K {
            dot = a_row[k].mul_add(b_row[k], dot);
        }
        let sum = if accumulate {
            f32::from_bits(*d) + dot
        } else {
            dot
        };
        *d = sum.to_bits();
    }
}

/// [`dot_row_body`] compiled with the FMA instruction: `mul_add` is otherwise a call into the
/// C library's software `fmaf` on the x86-64 baseline, twenty times slower. Same results: both
/// are the correctly rounded fused multiply-add.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn dot_row_fma(a_row: &[f32], b: &[f32], d_row: &mut [u32], accumulate: bool) {
    dot_row_body(a_row, b, d_row, accumulate)
}

#[cfg(not(target_arch = "wasm32"))]
fn dot_row(a_row: &[f32], b: &[f32], d_row: &mut [u32], accumulate: bool) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU supports FMA, the only requirement of the target feature.
        unsafe { dot_row_fma(a_row, b, d_row, accumulate) };
        return;
    }
    dot_row_body(a_row, b, d_row, accumulate)
}

/// One row of D for the kinds other than f16 and i8 (K = `k` elements a row): the same
/// fused multiply-add chain from 0, then added to D; `sign` is -1 when exactly one operand is
/// negated. Products of tf32 and narrower formats are exact in f32.
fn dot_row_k(a_row: &[f32], b: &[f32], d_row: &mut [u32], accumulate: bool, k: usize, sign: f32) {
    for (d, b_row) in d_row.iter_mut().zip(b.chunks_exact(k)) {
        let mut dot = 0f32;
        for kk in 0..k {
            dot = (sign * a_row[kk]).mul_add(b_row[kk], dot);
        }
        let sum = if accumulate {
            f32::from_bits(*d) + dot
        } else {
            dot
        };
        *d = sum.to_bits();
    }
}

/// One row of D for kind::i8 (K = 32, elements held as exact f32 integers): the exact integer
/// dot product added to the s32 in D; with the descriptor's saturate bit the sum clamps to the
/// s32 range, else it wraps (two's complement).
fn dot_row_i8(a_row: &[f32], b: &[f32], d_row: &mut [u32], accumulate: bool, saturate: bool) {
    for (d, b_row) in d_row.iter_mut().zip(b.chunks_exact(32)) {
        let dot: i64 = a_row
            .iter()
            .zip(b_row)
            .map(|(&x, &y)| x as i64 * y as i64)
            .sum();
        let sum = if accumulate {
            i64::from(*d as i32) + dot
        } else {
            dot
        };
        *d = if saturate {
            sum.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32 as u32
        } else {
            sum as i32 as u32
        };
    }
}

/// Decodes `rows` rows of a 32-byte K slice of a K-major operand of element format `elem` into
/// `out` (row-major, `32 / bytes` values a row): each row's two 16-byte chunks hold the first
/// and the second half of its K elements, little-endian.
fn read_operand_kmajor(
    smem: &[u8],
    op: &SmemOperand,
    rows: usize,
    elem: Elem,
    name: &'static str,
    out: &mut [f32],
) -> Result<(), UnitError> {
    let what = if name == "A" {
        "tcgen05.mma operand A"
    } else {
        "tcgen05.mma operand B"
    };
    let eb = elem.bytes() as usize;
    let k = 32 / eb;
    for r in 0..rows {
        for (c, addr) in op.chunk_addrs(r as u32).into_iter().enumerate() {
            let lo = addr as usize;
            let bytes = smem.get(lo..lo + 16).ok_or(UnitError::SmemOutOfRange {
                what,
                addr: u64::from(addr),
                len: 16,
                size: smem.len() as u64,
            })?;
            for (e, el) in bytes.chunks_exact(eb).enumerate() {
                let bits = el
                    .iter()
                    .rev()
                    .fold(0u32, |acc, &x| (acc << 8) | u32::from(x));
                out[r * k + c * (16 / eb) + e] = elem.value(bits);
            }
        }
    }
    Ok(())
}

/// [`dot_row_body`] on WebAssembly (the book's simulator in the page): wasm32 has no FMA
/// instruction, and `mul_add` there is a call into the software `fmaf`, most of a run's time.
#[cfg(target_arch = "wasm32")]
fn dot_row(a_row: &[f32], b: &[f32], d_row: &mut [u32], accumulate: bool) {
    dot_row_portable(a_row, b, d_row, accumulate)
}

/// Whether `x * y` is exact in f32 for every `y` that is also tame: at most 12 significant
/// bits (every f16 and bf16 value has at most 11) and zero or a magnitude in [2^-60, 2^61), so
/// the product has at most 24 significant bits and is a normal f32, never rounded.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
fn tame(x: f32) -> bool {
    let bits = x.to_bits();
    let e = (bits >> 23) & 0xff;
    bits & 0xfff == 0 && (bits & 0x7fff_ffff == 0 || (67..=187).contains(&e))
}

/// [`dot_row_body`]'s results without an FMA instruction, bit for bit. Where every operand is
/// [`tame`] (the kernels' f16 and bf16 data), each product is exact, so `fma(a, b, dot)` is
/// `a * b + dot` with its one rounding, in plain f32; other operands take [`fma_via_f64`]. Four
/// columns' chains run interleaved so that their latencies overlap; each chain's order is
/// unchanged.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
fn dot_row_portable(a_row: &[f32], b: &[f32], d_row: &mut [u32], accumulate: bool) {
    const W: usize = 4;
    let exact = a_row.iter().chain(b).all(|&x| tame(x));
    let fma = |x: f32, y: f32, z: f32| {
        if exact {
            x * y + z
        } else {
            fma_via_f64(x, y, z)
        }
    };
    let store = |d: &mut u32, dot: f32| {
        let sum = if accumulate {
            f32::from_bits(*d) + dot
        } else {
            dot
        };
        *d = sum.to_bits();
    };
    let mut d4 = d_row.chunks_exact_mut(W);
    let mut b4 = b.chunks_exact(W * K);
    for (d, bw) in d4.by_ref().zip(b4.by_ref()) {
        let mut dots = [0f32; W];
        for k in 0..K {
            for (c, dot) in dots.iter_mut().enumerate() {
                *dot = fma(a_row[k], bw[c * K + k], *dot);
            }
        }
        for (d, dot) in d.iter_mut().zip(dots) {
            store(d, dot);
        }
    }
    for (d, b_row) in d4
        .into_remainder()
        .iter_mut()
        .zip(b4.remainder().chunks_exact(K))
    {
        let mut dot = 0f32;
        for k in 0..K {
            dot = fma(a_row[k], b_row[k], dot);
        }
        store(d, dot);
    }
}

/// `x * y + z` rounded once to f32 (round to nearest even), as the fused multiply-add: the
/// product is exact in f64 (two 24-bit significands), the f64 sum is rounded once, and its
/// rounding to f32 is then correct unless the sum landed exactly halfway between two f32
/// values while inexact; that case is nudged one f64 ulp toward the exact sum. The method is
/// musl's `fmaf` (and the Rust `libm` crate's, which wasm32's `mul_add` calls).
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
#[inline(always)]
fn fma_via_f64(x: f32, y: f32, z: f32) -> f32 {
    let xy = f64::from(x) * f64::from(y);
    let zb = f64::from(z);
    let result = xy + zb;
    let bits = result.to_bits();
    // f64 keeps 29 bits more than f32: a halfway case has exactly the top one of them set.
    let halfway = bits & 0x1fff_ffff == 0x1000_0000;
    let special = (bits >> 52) & 0x7ff == 0x7ff;
    if !halfway || special || (result - xy == zb && result - zb == xy) {
        return result as f32;
    }
    // The exact sum lies on the side of `result` that the rounding error says.
    let neg = bits >> 63 != 0;
    let err = if neg == (zb > xy) {
        xy - result + zb
    } else {
        zb - result + xy
    };
    let nudged = if neg == (err < 0.0) {
        bits + 1
    } else {
        bits - 1
    };
    f64::from_bits(nudged) as f32
}

/// Decodes `rows` rows of a K = 16 slice of 16-bit elements of operand `op` from one CTA's shared
/// memory into `out` (row-major, 16 floats a row), chunk by chunk in either major-ness.
fn read_operand(
    smem: &[u8],
    op: &SmemOperand,
    rows: usize,
    bf16: bool,
    name: &'static str,
    out: &mut [f32],
) -> Result<(), UnitError> {
    let what = if name == "A" {
        "tcgen05.mma operand A"
    } else {
        "tcgen05.mma operand B"
    };
    for (addr, row, k, along_k) in op.chunks(rows as u32) {
        let lo = addr as usize;
        let bytes = smem.get(lo..lo + 16).ok_or(UnitError::SmemOutOfRange {
            what,
            addr: u64::from(addr),
            len: 16,
            size: smem.len() as u64,
        })?;
        for (e, pair) in bytes.chunks_exact(2).enumerate() {
            let bits = u16::from_le_bytes([pair[0], pair[1]]);
            let v = if bf16 {
                bf16_to_f32(bits)
            } else {
                f16_to_f32(bits)
            };
            let (r, kk) = if along_k {
                (row as usize, k as usize + e)
            } else {
                (row as usize + e, k as usize)
            };
            if r < rows {
                out[r * K + kk] = v;
            }
        }
    }
    Ok(())
}

/// `tcgen05.mma.cta_group::{smem.len()}.kind::f16 [d_taddr], a_desc, b_desc, idesc, p` in one
/// call: decode and run (see [`MmaF16`]). `smem[c]` and `tmem[c]` belong to CTA c of the group.
pub fn mma_f16(
    idesc: u32,
    a_desc: u64,
    b_desc: u64,
    smem: &[&[u8]],
    tmem: &mut [&mut TensorMemory],
    d_taddr: u32,
    accumulate: bool,
) -> Result<(), UnitError> {
    let group = u32::try_from(smem.len()).unwrap_or(u32::MAX);
    MmaF16::decode(idesc, a_desc, b_desc, group)?.execute(smem, tmem, d_taddr, accumulate)
}

#[cfg(test)]
mod tests {
    use super::super::descriptors::{
        encode_smem_desc, make_idesc_f16, make_idesc_f16_major, make_smem_desc_sw128, sw128_offset,
        Major, Swizzle,
    };
    use super::super::numeric::{f32_to_bf16, f32_to_f16, FloatRound};
    use super::super::tmem::taddr;
    use super::*;

    /// Writes `rows` x 64 16-bit values into a 1024-aligned 128B-swizzled tile at `base`, as TMA
    /// does (the layout [`sw128_offset`] describes).
    fn put_tile(smem: &mut [u8], base: u32, rows: u32, value: impl Fn(u32, u32) -> u16) {
        for r in 0..rows {
            for k in 0..64 {
                let at = (base + sw128_offset(r, k)) as usize;
                smem[at..at + 2].copy_from_slice(&value(r, k).to_le_bytes());
            }
        }
    }

    /// Small integers: every product and sum below 2^24 is exact in f32, so the reference needs
    /// no tolerance.
    fn a_val(i: u32, k: u32) -> f32 {
        ((i * 7 + k * 3) % 11) as f32 - 5.0
    }
    fn b_val(j: u32, k: u32) -> f32 {
        ((j * 5 + k * 13) % 9) as f32 - 4.0
    }

    /// The wasm32 dot products' FMA equals the correctly rounded one (`mul_add`, on the host's
    /// FMA instruction or C library) bit for bit: random operands over the whole exponent range,
    /// products that cancel, and the halfway cases the nudge exists for.
    #[test]
    fn fma_via_f64_is_the_fused_multiply_add() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let check = |x: f32, y: f32, z: f32| {
            let (got, want) = (fma_via_f64(x, y, z), x.mul_add(y, z));
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "fma({x:e}, {y:e}, {z:e}) = {got:e}, not {want:e}"
            );
        };
        for _ in 0..300_000 {
            let r = next();
            let (x, y) = (f32::from_bits(r as u32), f32::from_bits((r >> 32) as u32));
            let z = f32::from_bits(next() as u32);
            check(x, y, z);
            // Operands of the kernels' scale: f16 values, sums that nearly cancel.
            let (a, b) = (
                (r as u16) as f32 / 512.0 - 64.0,
                ((r >> 16) as u16) as f32 / 4096.0,
            );
            check(a, b, -(a * b));
            check(a, b, (r >> 40) as u32 as f32 * 1e-3);
        }
        // Halfway cases: (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 lies exactly halfway between two
        // f32s; a tiny third term decides the side, which the f64 sum alone rounds away.
        let x = 1.0 + 2f32.powi(-12);
        for z in [
            2f32.powi(-80),
            -2f32.powi(-80),
            f32::MIN_POSITIVE,
            0.0,
            -2f32.powi(-11),
        ] {
            check(x, x, z);
            check(-x, x, z);
        }
        assert_ne!(
            fma_via_f64(x, x, 2f32.powi(-80)),
            ((f64::from(x) * f64::from(x)) + 2f64.powi(-80)) as f32,
            "the nudge decides this case"
        );
    }

    /// The page's dot products equal the native ones bit for bit: f16 and bf16 data over their
    /// whole range (bf16's extremes are not tame and take the f64 path), accumulate or not,
    /// a column count that leaves a remainder of the four-column blocks.
    #[test]
    fn portable_dot_rows_match_the_fma_ones() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..400 {
            let bf16 = round % 2 == 1;
            // Mostly data of the kernels' scale, sometimes any 16-bit pattern but NaN.
            let mut val = || {
                let r = next();
                let h = if r % 4 == 0 {
                    (r >> 8) as u16
                } else {
                    (r >> 8) as u16 & 0xbfff
                };
                let x = if bf16 {
                    f32::from_bits(u32::from(h) << 16)
                } else {
                    super::super::numeric::f16_to_f32(h)
                };
                if x.is_nan() {
                    1.0
                } else {
                    x
                }
            };
            let n = 4 * (1 + round % 9) + round % 4;
            let a: Vec<f32> = (0..K).map(|_| val()).collect();
            let b: Vec<f32> = (0..n * K).map(|_| val()).collect();
            let init: Vec<u32> = (0..n).map(|_| val().to_bits()).collect();
            for acc in [false, true] {
                let (mut want, mut got) = (init.clone(), init.clone());
                dot_row(&a, &b, &mut want, acc);
                dot_row_portable(&a, &b, &mut got, acc);
                for (j, (w, g)) in want.iter().zip(&got).enumerate() {
                    let (w, g) = (f32::from_bits(*w), f32::from_bits(*g));
                    assert!(
                        w.to_bits() == g.to_bits() || (w.is_nan() && g.is_nan()),
                        "round {round} column {j} bf16={bf16} acc={acc}: {g:e}, not {w:e}"
                    );
                }
            }
        }
        assert!(tame(1.0) && tame(-0.0) && tame(65504.0) && tame(2f32.powi(-24)));
        assert!(
            !tame(2f32.powi(100))
                && !tame(2f32.powi(-100))
                && !tame(f32::INFINITY)
                && !tame(1.0 + f32::EPSILON)
        );
    }

    fn d_at(t: &TensorMemory, lane: u32, col: u32) -> f32 {
        f32::from_bits(t.read(lane, col).unwrap())
    }

    #[test]
    fn cta_group_1_matches_a_reference_over_four_k_steps() {
        const A_BASE: u32 = 0;
        const B_BASE: u32 = 16 * 1024;
        let (m, n) = (128, 64);
        let mut smem = vec![0u8; 32 * 1024];
        for bf16 in [false, true] {
            let enc = |x: f32| {
                if bf16 {
                    f32_to_bf16(x, FloatRound::Rn)
                } else {
                    f32_to_f16(x, FloatRound::Rn)
                }
            };
            put_tile(&mut smem, A_BASE, m, |i, k| enc(a_val(i, k)));
            put_tile(&mut smem, B_BASE, n, |j, k| enc(b_val(j, k)));
            let mut t = TensorMemory::new();
            let col = t.alloc(128).unwrap();
            let d = taddr(0, col + 32);
            let idesc = make_idesc_f16(m, n, bf16);
            // The kernels' K loop: 4 MMAs of K = 16 across the 64-element (128-byte) row, the
            // start address advancing 32 bytes; the first overwrites D.
            for kk in 0..4u32 {
                let a_desc = make_smem_desc_sw128(A_BASE + 32 * kk, 1024);
                let b_desc = make_smem_desc_sw128(B_BASE + 32 * kk, 1024);
                mma_f16(idesc, a_desc, b_desc, &[&smem], &mut [&mut t], d, kk > 0).unwrap();
            }
            for i in 0..m {
                for j in 0..n {
                    let want: f32 = (0..64).map(|k| a_val(i, k) * b_val(j, k)).sum();
                    assert_eq!(d_at(&t, i, col + 32 + j), want, "D[{i}][{j}] bf16={bf16}");
                }
            }
            // Columns outside D were not written.
            assert!(d_at(&t, 0, col + 31).is_nan());
        }
    }

    #[test]
    fn accumulate_false_overwrites_and_true_adds() {
        let mut smem = vec![0u8; 32 * 1024];
        put_tile(&mut smem, 0, 128, |_, k| {
            f32_to_f16(if k < 16 { 1.0 } else { 0.0 }, FloatRound::Rn)
        });
        put_tile(&mut smem, 16384, 16, |j, k| {
            f32_to_f16(if k < 16 { j as f32 } else { 0.0 }, FloatRound::Rn)
        });
        let mut t = TensorMemory::new();
        t.alloc(32).unwrap();
        let run = |t: &mut TensorMemory, acc| {
            mma_f16(
                make_idesc_f16(128, 16, false),
                make_smem_desc_sw128(0, 1024),
                make_smem_desc_sw128(16384, 1024),
                &[&smem],
                &mut [t],
                0,
                acc,
            )
        };
        run(&mut t, false).unwrap();
        assert_eq!(d_at(&t, 5, 3), 48.0, "16 * j");
        run(&mut t, true).unwrap();
        assert_eq!(d_at(&t, 5, 3), 96.0);
        run(&mut t, false).unwrap();
        assert_eq!(d_at(&t, 127, 15), 240.0);
    }

    #[test]
    fn cta_group_2_splits_a_rows_and_b_rows_between_the_pair() {
        // M = 256, N = 64: CTA c holds A rows 128c..128c+127 and B rows 32c..32c+31 at the same
        // offsets; each CTA's D gets its 128 rows x all 64 columns.
        const A_BASE: u32 = 0;
        const B_BASE: u32 = 16 * 1024;
        let mut windows = [vec![0u8; 24 * 1024], vec![0u8; 24 * 1024]];
        for (c, w) in windows.iter_mut().enumerate() {
            let c = c as u32;
            put_tile(w, A_BASE, 128, |i, k| {
                f32_to_f16(a_val(i + 128 * c, k), FloatRound::Rn)
            });
            put_tile(w, B_BASE, 32, |j, k| {
                f32_to_f16(b_val(j + 32 * c, k), FloatRound::Rn)
            });
        }
        let mut t0 = TensorMemory::new();
        let mut t1 = TensorMemory::new();
        let col = TensorMemory::alloc_pair(&mut t0, &mut t1, 64).unwrap();
        let smem: [&[u8]; 2] = [&windows[0], &windows[1]];
        mma_f16(
            make_idesc_f16(256, 64, false),
            make_smem_desc_sw128(A_BASE, 1024),
            make_smem_desc_sw128(B_BASE, 1024),
            &smem,
            &mut [&mut t0, &mut t1],
            taddr(0, col),
            false,
        )
        .unwrap();
        for (c, t) in [&t0, &t1].into_iter().enumerate() {
            for i in 0..128 {
                for j in 0..64 {
                    let row = i + 128 * c as u32;
                    let want: f32 = (0..16).map(|k| a_val(row, k) * b_val(j, k)).sum();
                    assert_eq!(d_at(t, i, col + j), want, "CTA {c} D[{row}][{j}]");
                }
            }
        }
        // The same call with one CTA's memory is refused: M = 256 does not exist for
        // cta_group::1.
        let e = mma_f16(
            make_idesc_f16(256, 64, false),
            make_smem_desc_sw128(A_BASE, 1024),
            make_smem_desc_sw128(B_BASE, 1024),
            &smem[..1],
            &mut [&mut t0],
            taddr(0, col),
            false,
        );
        assert!(matches!(e, Err(UnitError::Invalid { .. })), "{e:?}");
    }

    #[test]
    fn refuses_unallocated_d_out_of_range_operands_and_lane_offsets() {
        let smem = vec![0u8; 8 * 1024];
        let mut t = TensorMemory::new();
        t.alloc(32).unwrap();
        let idesc = make_idesc_f16(128, 64, false);
        let a = make_smem_desc_sw128(0, 1024);
        let e = mma_f16(idesc, a, a, &[&smem], &mut [&mut t], 0, false).unwrap_err();
        assert!(
            matches!(
                e,
                UnitError::TmemUnallocated {
                    col: 0,
                    ncols: 64,
                    ..
                }
            ),
            "{e}"
        );
        let idesc = make_idesc_f16(128, 32, false);
        let e = mma_f16(idesc, a, a, &[&smem], &mut [&mut t], 0, false).unwrap_err();
        assert!(
            matches!(e, UnitError::SmemOutOfRange { .. }),
            "128 rows need 16 KiB: {e}"
        );
        let e = mma_f16(idesc, a, a, &[&smem], &mut [&mut t], taddr(32, 0), false).unwrap_err();
        assert!(matches!(e, UnitError::Invalid { .. }), "{e}");
    }

    #[test]
    fn dot_products_are_fused_chains_on_every_path() {
        // a0 * b0 = -1, a1 * b1 = 1 + 2^-11 + 2^-24 exactly: a fused chain keeps the 2^-24
        // (2^-11 + 2^-24), a multiply-then-add loses it (2^-11).
        let x = 1.0 + 2f32.powi(-12);
        let mut a = [0f32; K];
        let mut b = [0f32; 2 * K];
        a[0] = -1.0;
        b[0] = 1.0;
        a[1] = x;
        b[1] = x;
        for k in 0..K {
            b[K + k] = 0.1 * k as f32 + 0.3;
            if k > 1 {
                a[k] = 0.7 - 0.05 * k as f32;
            }
        }
        let mut fast = [0u32; 2];
        let mut portable = [0u32; 2];
        dot_row(&a, &b, &mut fast, false);
        dot_row_body(&a, &b, &mut portable, false);
        assert_eq!(fast, portable);
        // Only the first two products: B row (1, x, 0, ...).
        let mut b2 = [0f32; K];
        b2[0] = 1.0;
        b2[1] = x;
        let mut two = [0u32; 1];
        dot_row(&a, &b2, &mut two, false);
        assert_eq!(f32::from_bits(two[0]), 2f32.powi(-11) + 2f32.powi(-24));
        // Accumulation adds the chain to D after it.
        dot_row(&a, &b, &mut fast, true);
        assert_eq!(f32::from_bits(fast[1]), 2.0 * f32::from_bits(portable[1]));
    }

    #[test]
    fn smem_reads_cover_exactly_the_operand_chunks() {
        let mma = MmaF16::decode(
            make_idesc_f16(128, 256, false),
            make_smem_desc_sw128(0, 1024),
            make_smem_desc_sw128(32768, 1024),
            1,
        )
        .unwrap();
        let reads = mma.smem_reads();
        let bytes: u32 = reads.iter().map(|(lo, hi)| hi - lo).sum();
        assert_eq!(bytes, (128 + 256) * 32, "32 bytes of every row of A and B");
        assert!(reads.iter().all(|&(lo, hi)| hi <= 16384 || lo >= 32768));
        assert!(reads.iter().all(|&(_, hi)| hi <= 32768 + 32768));
    }

    /// CuTe's `Swizzle<b, 4, 3>` on a byte address, as the PTX ISA's canonical-layout table
    /// names it (9.7.16.3.3): the `b` bits above bit 7 XORed into the `b` bits above bit 4.
    /// Written from the definition, not with the unit's [`SwizzlePattern`].
    fn cute_swizzle(b: u32, addr: u32) -> u32 {
        let mask = ((1 << b) - 1) << 7;
        addr ^ ((addr & mask) >> 3)
    }

    /// One operand layout of a test: the descriptor's fields and where element (row, k) lies,
    /// from the PTX ISA's CuTe formulas for 16-bit elements (T = 8), written out per mode.
    #[derive(Clone, Copy)]
    struct Placement {
        major: Major,
        swizzle: Swizzle,
        start: u32,
        lbo: u32,
        sbo: u32,
    }

    impl Placement {
        /// A dense tile of `rows` rows x 16 K for each mode; `start` as given.
        fn new(major: Major, swizzle: Swizzle, start: u32, rows: u32) -> Placement {
            let span = match swizzle {
                Swizzle::None => 16,
                Swizzle::B32 => 32,
                Swizzle::B64 => 64,
                _ => 128,
            };
            let (lbo, sbo) = match (major, swizzle) {
                // ((8,m),(T,2k)):((1T,SBO),(1,LBO)): core matrices of 128 B.
                (Major::K, Swizzle::None) => ((rows / 8) * 128, 128),
                // ((8,m),(T,2k)):((S/2,SBO),(1,T)): 8 rows of `span` bytes a group.
                (Major::K, _) => (16, 8 * span),
                // ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)): 8 rows x 8 K in 128 B.
                (Major::Mn, Swizzle::None) => ((rows / 8) * 128, 128),
                // ((T,S/16,m),(8,k)):((1,T,LBO),(S/2,SBO)): atoms of span/2 rows x 8 K.
                (Major::Mn, _) => (8 * span, rows.div_ceil(span / 2) * 8 * span),
            };
            Placement {
                major,
                swizzle,
                start,
                lbo,
                sbo,
            }
        }

        fn bits(&self) -> u32 {
            match self.swizzle {
                Swizzle::None => 0,
                Swizzle::B32 => 1,
                Swizzle::B64 => 2,
                _ => 3,
            }
        }

        fn span(&self) -> u32 {
            16 << self.bits()
        }

        fn addr(&self, r: u32, k: u32) -> u32 {
            let off = match (self.major, self.swizzle) {
                (Major::K, Swizzle::None) => {
                    (r % 8) * 16 + (r / 8) * self.sbo + (k % 8) * 2 + (k / 8) * self.lbo
                }
                (Major::K, _) => (r % 8) * self.span() + (r / 8) * self.sbo + 2 * k,
                (Major::Mn, Swizzle::None) => {
                    (r % 8) * 2 + (r / 8) * self.sbo + (k % 8) * 16 + (k / 8) * self.lbo
                }
                (Major::Mn, _) => {
                    let per_line = self.span() / 2;
                    (r % per_line) * 2
                        + (r / per_line) * self.lbo
                        + (k % 8) * self.span()
                        + (k / 8) * self.sbo
                }
            };
            cute_swizzle(self.bits(), self.start + off)
        }

        fn desc(&self, base_offset: u32) -> u64 {
            encode_smem_desc(self.start, self.lbo, self.sbo, self.swizzle, base_offset)
        }

        fn put(&self, smem: &mut [u8], rows: u32, value: impl Fn(u32, u32) -> f32) {
            for r in 0..rows {
                for k in 0..16 {
                    let at = self.addr(r, k) as usize;
                    let h = f32_to_f16(value(r, k), FloatRound::Rn);
                    smem[at..at + 2].copy_from_slice(&h.to_le_bytes());
                }
            }
        }
    }

    fn reference_k16(i: u32, j: u32) -> f32 {
        (0..16).map(|k| a_val(i, k) * b_val(j, k)).sum()
    }

    #[test]
    fn mn_major_and_k_major_operands_in_every_swizzle_mode_match_a_reference() {
        let (m, n) = (128u32, 64u32);
        for swizzle in [Swizzle::None, Swizzle::B32, Swizzle::B64, Swizzle::B128] {
            for (a_major, b_major) in [
                (Major::Mn, Major::K),
                (Major::K, Major::Mn),
                (Major::Mn, Major::Mn),
                (Major::K, Major::K),
            ] {
                let pa = Placement::new(a_major, swizzle, 0, m);
                let pb = Placement::new(b_major, swizzle, 16 * 1024, n);
                let mut smem = vec![0u8; 32 * 1024];
                pa.put(&mut smem, m, a_val);
                pb.put(&mut smem, n, b_val);
                let mut t = TensorMemory::new();
                let col = t.alloc(64).unwrap();
                let idesc =
                    make_idesc_f16_major(m, n, false, a_major == Major::Mn, b_major == Major::Mn);
                mma_f16(
                    idesc,
                    pa.desc(0),
                    pb.desc(0),
                    &[&smem],
                    &mut [&mut t],
                    taddr(0, col),
                    false,
                )
                .unwrap();
                for i in 0..m {
                    for j in 0..n {
                        assert_eq!(
                            d_at(&t, i, col + j),
                            reference_k16(i, j),
                            "{swizzle:?} A {a_major:?} B {b_major:?}: D[{i}][{j}]"
                        );
                    }
                }
                // The same bytes read with the transpose bits flipped is another matrix: the
                // bit is what selects the layout (a control that the test can fail).
                if a_major == Major::Mn && b_major == Major::K {
                    let flipped = make_idesc_f16_major(m, n, false, false, false);
                    let r = mma_f16(
                        flipped,
                        pa.desc(0),
                        pb.desc(0),
                        &[&smem],
                        &mut [&mut t],
                        taddr(0, col),
                        false,
                    );
                    let same = r.is_ok()
                        && (0..m)
                            .all(|i| (0..n).all(|j| d_at(&t, i, col + j) == reference_k16(i, j)));
                    assert!(!same, "{swizzle:?}: K-major reading of MN-major data");
                }
            }
        }
    }

    #[test]
    fn a_start_inside_a_swizzle_pattern_needs_the_isa_base_offset() {
        // A K-major, 128B swizzle, starting 128 B into a 1024-B pattern (row 1 of it): the
        // data sits as TMA writes it at that address (swizzle by address), and the PTX ISA
        // (Table 41) requires base offset (0x480 >> 7) & 7 = 1.
        let (m, n) = (128u32, 32u32);
        let pa = Placement::new(Major::K, Swizzle::B128, 0x480, m);
        let pb = Placement::new(Major::Mn, Swizzle::B64, 0x5000 + 0x100, n);
        let mut smem = vec![0u8; 32 * 1024];
        pa.put(&mut smem, m, a_val);
        pb.put(&mut smem, n, b_val);
        let mut t = TensorMemory::new();
        let col = t.alloc(32).unwrap();
        let idesc = make_idesc_f16_major(m, n, false, false, true);
        // B at 0x5100: line 2 of a 512-B pattern, base offset (0x5100 >> 7) & 7 = 2.
        mma_f16(
            idesc,
            pa.desc(1),
            pb.desc(2),
            &[&smem],
            &mut [&mut t],
            taddr(0, col),
            false,
        )
        .unwrap();
        for i in 0..m {
            for j in 0..n {
                assert_eq!(d_at(&t, i, col + j), reference_k16(i, j), "D[{i}][{j}]");
            }
        }
        // Any other base offset is refused (undefined in the ISA), never computed.
        for (a_off, b_off) in [(0, 2), (2, 2), (1, 0), (1, 6)] {
            let e = mma_f16(
                idesc,
                pa.desc(a_off),
                pb.desc(b_off),
                &[&smem],
                &mut [&mut t],
                taddr(0, col),
                false,
            )
            .unwrap_err();
            assert!(
                matches!(e, UnitError::Invalid { .. }) && e.to_string().contains("base offset"),
                "{a_off}/{b_off}: {e}"
            );
        }
        // On a pattern boundary the base offset is 0, and a non-zero one is refused.
        let aligned = Placement::new(Major::K, Swizzle::B128, 0x400, m);
        assert!(SmemOperand::decode(aligned.desc(0)).is_ok());
        assert!(SmemOperand::decode(aligned.desc(1)).is_err());
    }

    #[test]
    fn m128_cta_group_2_uses_data_path_layout_b() {
        // M = 128 over the pair: CTA c holds A rows 64c..64c+63 and B rows 32c..32c+31 (N = 64);
        // its D rows are in lanes 0-63 for columns 0..31 and lanes 64-127 for columns 32..63,
        // both in the same 32 columns.
        let (m, n) = (128u32, 64u32);
        let pa = Placement::new(Major::K, Swizzle::B128, 0, m / 2);
        let pb = Placement::new(Major::Mn, Swizzle::B128, 8 * 1024, n / 2);
        let mut windows = [vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]];
        for (c, w) in windows.iter_mut().enumerate() {
            let c = c as u32;
            pa.put(w, m / 2, |i, k| a_val(i + 64 * c, k));
            pb.put(w, n / 2, |j, k| b_val(j + 32 * c, k));
        }
        let mut t0 = TensorMemory::new();
        let mut t1 = TensorMemory::new();
        let col = TensorMemory::alloc_pair(&mut t0, &mut t1, 32).unwrap();
        let smem: [&[u8]; 2] = [&windows[0], &windows[1]];
        let idesc = make_idesc_f16_major(m, n, false, false, true);
        let mma = MmaF16::decode(idesc, pa.desc(0), pb.desc(0), 2).unwrap();
        assert_eq!((mma.datapath(), mma.d_columns()), (DataPath::B, 32));
        mma.execute(&smem, &mut [&mut t0, &mut t1], taddr(0, col), false)
            .unwrap();
        for (c, t) in [&t0, &t1].into_iter().enumerate() {
            for i in 0..64 {
                for j in 0..n {
                    let row = i + 64 * c as u32;
                    let lane = i + 64 * (j / 32);
                    assert_eq!(
                        d_at(t, lane, col + j % 32),
                        reference_k16(row, j),
                        "CTA {c} D[{row}][{j}]"
                    );
                }
            }
        }
        // Only 32 columns are needed: the MMA runs in a 32-column allocation, and writes
        // nothing past it.
        assert!(t0.is_allocated(col, 32) && !t0.is_allocated(col, 33));
        // With cta_group::1, M = 128 is layout D and needs all 64 columns.
        let e = mma_f16(
            make_idesc_f16_major(m, n, false, false, true),
            pa.desc(0),
            pb.desc(0),
            &smem[..1],
            &mut [&mut t0],
            taddr(0, col),
            false,
        )
        .unwrap_err();
        assert!(matches!(e, UnitError::TmemUnallocated { .. }), "{e}");
    }

    #[test]
    fn m64_cta_group_1_uses_half_the_lanes_of_layout_f() {
        let (m, n) = (64u32, 24u32);
        let pa = Placement::new(Major::Mn, Swizzle::B32, 0, m);
        let pb = Placement::new(Major::K, Swizzle::None, 8 * 1024, n);
        let mut smem = vec![0u8; 16 * 1024];
        pa.put(&mut smem, m, a_val);
        pb.put(&mut smem, n, b_val);
        let idesc = make_idesc_f16_major(m, n, false, true, false);
        for lane0 in [0u32, 16] {
            let mut t = TensorMemory::new();
            let col = t.alloc(32).unwrap();
            mma_f16(
                idesc,
                pa.desc(0),
                pb.desc(0),
                &[&smem],
                &mut [&mut t],
                taddr(lane0, col),
                false,
            )
            .unwrap();
            let mut written = 0;
            for lane in 0..128 {
                for j in 0..n {
                    let v = d_at(&t, lane, col + j);
                    let in_rows = (lane % 32) >= lane0 && (lane % 32) < lane0 + 16;
                    if in_rows {
                        let i = (lane % 32 - lane0) + 16 * (lane / 32);
                        assert_eq!(v, reference_k16(i, j), "lane {lane} (row {i}) col {j}");
                        written += 1;
                    } else {
                        assert!(v.is_nan(), "lane {lane} is not in layout F at {lane0}");
                    }
                }
            }
            assert_eq!(written, m * n);
        }
        for bad in [8u32, 32] {
            let mut t = TensorMemory::new();
            let col = t.alloc(32).unwrap();
            let e = mma_f16(
                idesc,
                pa.desc(0),
                pb.desc(0),
                &[&smem],
                &mut [&mut t],
                taddr(bad, col),
                false,
            )
            .unwrap_err();
            assert!(e.to_string().contains("0 or 16"), "{e}");
        }
    }
}
