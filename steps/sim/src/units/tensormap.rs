//! Tensor maps and the data movement of TMA tile copies (`cp.async.bulk.tensor` in tile mode).
//!
//! [`TensorMapDesc`] holds exactly the parameters of the CUDA driver's `cuTensorMapEncodeTiled`
//! (CUDA Driver API "Tensor Map Object Management"), in its argument order, and
//! [`TensorMapDesc::validate`] applies the requirements that function documents. On the
//! simulator the host describes each map with one of these instead of an opaque 128-byte blob.
//! [`TensorMapDesc::load_box`] and [`TensorMapDesc::store_box`] move one box between global
//! memory and shared memory in the layout TMA uses: the box packed row after row (dimension 0
//! innermost), each 16-byte chunk placed by the swizzle pattern of the shared-memory address
//! (PTX ISA "Tensors": "Bounding Box", "Traversal-Stride", "Swizzling Modes"), out-of-bound
//! elements filled on loads and skipped on stores.

use super::descriptors::SwizzlePattern;
use super::error::{invalid, not_implemented};
use super::UnitError;

const ENCODE: &str = "cuTensorMapEncodeTiled";

/// `CUtensorMapDataType`, in the driver's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TmaDtype {
    U8,
    U16,
    U32,
    I32,
    U64,
    I64,
    F16,
    F32,
    F64,
    Bf16,
    F32Ftz,
    Tf32,
    Tf32Ftz,
    Packed16U4Align8B,
    Packed16U4Align16B,
    Packed16U6Align16B,
}

impl TmaDtype {
    /// The enum of its raw `CUtensorMapDataType` value.
    pub fn from_raw(raw: u32) -> Result<TmaDtype, UnitError> {
        use TmaDtype::*;
        const ALL: [TmaDtype; 16] = [
            U8,
            U16,
            U32,
            I32,
            U64,
            I64,
            F16,
            F32,
            F64,
            Bf16,
            F32Ftz,
            Tf32,
            Tf32Ftz,
            Packed16U4Align8B,
            Packed16U4Align16B,
            Packed16U6Align16B,
        ];
        ALL.get(raw as usize)
            .copied()
            .ok_or_else(|| invalid(ENCODE, format!("tensor data type {raw} does not exist")))
    }

    /// Bytes per element; `None` for the packed sub-byte types.
    pub fn size(self) -> Option<u32> {
        use TmaDtype::*;
        match self {
            U8 => Some(1),
            U16 | F16 | Bf16 => Some(2),
            U32 | I32 | F32 | F32Ftz | Tf32 | Tf32Ftz => Some(4),
            U64 | I64 | F64 => Some(8),
            Packed16U4Align8B | Packed16U4Align16B | Packed16U6Align16B => None,
        }
    }

    /// Whether the driver counts it a floating-point type (for the NaN out-of-bound fill).
    pub fn is_float(self) -> bool {
        use TmaDtype::*;
        matches!(self, F16 | F32 | F64 | Bf16 | F32Ftz | Tf32 | Tf32Ftz)
    }
}

/// `CUtensorMapInterleave`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TmaInterleave {
    None,
    B16,
    B32,
}

/// `CUtensorMapSwizzle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TmaSwizzle {
    None,
    B32,
    B64,
    B128,
    B128Atom32,
    B128Atom32Flip8,
    B128Atom64,
}

impl TmaSwizzle {
    /// The swizzle span in bytes (the bound on the box's inner dimension).
    pub fn span(self) -> Option<u32> {
        match self {
            TmaSwizzle::None => None,
            TmaSwizzle::B32 => Some(32),
            TmaSwizzle::B64 => Some(64),
            _ => Some(128),
        }
    }
}

/// `CUtensorMapL2promotion` (no effect on the data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TmaL2Promotion {
    None,
    B64,
    B128,
    B256,
}

/// `CUtensorMapFloatOOBfill`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TmaOobFill {
    /// Out-of-bound elements read as zero.
    None,
    /// Out-of-bound elements read as a NaN. The driver's "special NaN" also asks the tensor
    /// cores to treat it as zero in an FMA; that is not modelled: the simulator fills the
    /// canonical NaN of the type (all exponent and mantissa bits set), which an MMA propagates.
    NanRequestZeroFma,
}

/// A tiled tensor map: the parameters of `cuTensorMapEncodeTiled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorMapDesc {
    pub base: u64,
    pub dtype: TmaDtype,
    pub rank: u32,
    /// Elements per dimension, dimension 0 innermost; entries past `rank` are unused.
    pub dims: [u64; 5],
    /// Byte strides of dimensions 1..rank: `strides[i]` is the stride of dimension `i + 1` (the
    /// driver's `globalStrides`, which has `rank - 1` entries).
    pub strides: [u64; 5],
    pub box_dims: [u32; 5],
    pub elem_strides: [u32; 5],
    pub interleave: TmaInterleave,
    pub swizzle: TmaSwizzle,
    pub l2_promotion: TmaL2Promotion,
    pub oob_fill: TmaOobFill,
}

/// How a box's rows map onto global memory: shared by loads and stores.
struct BoxWalk {
    esize: u64,
    row_bytes: u32,
    /// Elements along dimensions 1..rank in shared memory.
    extents: [u32; 4],
    rows: u64,
    pattern: SwizzlePattern,
}

impl TensorMapDesc {
    /// Mirrors `cuTensorMapEncodeTiled(map, tensorDataType, tensorRank, globalAddress,
    /// globalDim, globalStrides, boxDim, elementStrides, interleave, swizzle, l2Promotion,
    /// oobFill)`: the same arguments in the same order, checked by [`Self::validate`].
    #[allow(clippy::too_many_arguments)]
    pub fn encode_tiled(
        dtype: TmaDtype,
        rank: u32,
        base: u64,
        dims: &[u64],
        strides: &[u64],
        box_dims: &[u32],
        elem_strides: &[u32],
        interleave: TmaInterleave,
        swizzle: TmaSwizzle,
        l2_promotion: TmaL2Promotion,
        oob_fill: TmaOobFill,
    ) -> Result<TensorMapDesc, UnitError> {
        if rank == 0 || rank > 5 {
            return Err(invalid(
                ENCODE,
                format!("tensorRank {rank}: must be 1 to 5"),
            ));
        }
        let r = rank as usize;
        if dims.len() < r || strides.len() < r - 1 || box_dims.len() < r || elem_strides.len() < r {
            return Err(invalid(
                ENCODE,
                format!("rank {rank} needs {r} dimensions, {r} box sizes, {r} element strides and {} strides", r - 1),
            ));
        }
        let mut map = TensorMapDesc {
            base,
            dtype,
            rank,
            dims: [0; 5],
            strides: [0; 5],
            box_dims: [0; 5],
            elem_strides: [0; 5],
            interleave,
            swizzle,
            l2_promotion,
            oob_fill,
        };
        map.dims[..r].copy_from_slice(&dims[..r]);
        map.strides[..r - 1].copy_from_slice(&strides[..r - 1]);
        map.box_dims[..r].copy_from_slice(&box_dims[..r]);
        map.elem_strides[..r].copy_from_slice(&elem_strides[..r]);
        map.validate()?;
        Ok(map)
    }

    /// The requirements `cuTensorMapEncodeTiled` documents (CUDA Driver API): rank 1..5
    /// (3..5 when interleaved), a 16-byte aligned base (32 for 32B interleave), dimensions
    /// 1..2^32, strides multiples of 16 (32 for 32B interleave) below 2^40, box sizes 1..256
    /// with the inner box a multiple of 16 bytes when not interleaved, element strides 1..8, the
    /// inner box within the swizzle span, 32B interleave only with the 32B swizzle, and the NaN
    /// fill only for floating-point types.
    pub fn validate(&self) -> Result<(), UnitError> {
        let r = self.rank as usize;
        if !(1..=5).contains(&r) {
            return Err(invalid(
                ENCODE,
                format!("tensorRank {}: must be 1 to 5", self.rank),
            ));
        }
        let Some(esize) = self.dtype.size() else {
            return Err(not_implemented(
                ENCODE,
                format!("packed sub-byte data type {:?}", self.dtype),
            ));
        };
        if self.interleave != TmaInterleave::None && r < 3 {
            return Err(invalid(
                ENCODE,
                format!("an interleaved layout needs tensorRank 3 or more, not {r}"),
            ));
        }
        let align: u64 = if self.interleave == TmaInterleave::B32 {
            32
        } else {
            16
        };
        if !self.base.is_multiple_of(align) {
            return Err(invalid(
                ENCODE,
                format!("globalAddress {:#x} is not {align}-byte aligned", self.base),
            ));
        }
        for (i, &d) in self.dims[..r].iter().enumerate() {
            if d == 0 || d > 1 << 32 {
                return Err(invalid(
                    ENCODE,
                    format!("globalDim[{i}] = {d}: must be 1 to 2^32"),
                ));
            }
        }
        for (i, &s) in self.strides[..r - 1].iter().enumerate() {
            if !s.is_multiple_of(align) || s >= 1 << 40 {
                return Err(invalid(
                    ENCODE,
                    format!("globalStrides[{i}] = {s}: must be a multiple of {align} below 2^40"),
                ));
            }
        }
        for (i, &b) in self.box_dims[..r].iter().enumerate() {
            if b == 0 || b > 256 {
                return Err(invalid(
                    ENCODE,
                    format!("boxDim[{i}] = {b}: must be 1 to 256"),
                ));
            }
        }
        let inner = self.box_dims[0] * esize;
        if self.interleave == TmaInterleave::None && !inner.is_multiple_of(16) {
            return Err(invalid(
                ENCODE,
                format!("the inner box is {inner} bytes (boxDim[0] = {}): it must be a multiple of 16 bytes", self.box_dims[0]),
            ));
        }
        for (i, &e) in self.elem_strides[..r].iter().enumerate() {
            if e == 0 || e > 8 {
                return Err(invalid(
                    ENCODE,
                    format!("elementStrides[{i}] = {e}: must be 1 to 8"),
                ));
            }
        }
        if self.interleave == TmaInterleave::None {
            if let Some(span) = self.swizzle.span() {
                if inner > span {
                    return Err(invalid(
                        ENCODE,
                        format!("the inner box is {inner} bytes, wider than the {span}-byte swizzle span"),
                    ));
                }
            }
        }
        if self.interleave == TmaInterleave::B32 && self.swizzle != TmaSwizzle::B32 {
            return Err(invalid(
                ENCODE,
                "the 32-byte interleave needs the 32-byte swizzle",
            ));
        }
        if self.oob_fill == TmaOobFill::NanRequestZeroFma && !self.dtype.is_float() {
            return Err(invalid(
                ENCODE,
                format!(
                    "the NaN out-of-bound fill needs a floating-point type, not {:?}",
                    self.dtype
                ),
            ));
        }
        Ok(())
    }

    /// Elements along dimension `i` of the box in shared memory: `boxDim[i]` for dimension 0
    /// (its traversal stride is ignored without interleave), `ceil(boxDim[i] /
    /// elementStrides[i])` for the others (CUDA Driver API, `elementStrides`).
    pub fn box_extent(&self, i: usize) -> u32 {
        if i == 0 {
            self.box_dims[0]
        } else {
            self.box_dims[i].div_ceil(self.elem_strides[i])
        }
    }

    /// Bytes one box occupies in shared memory: what a load's `complete_tx` counts, out-of-bound
    /// elements included.
    /// Saturates at `u32::MAX`: a box that large fits no shared memory, and loading it fails.
    pub fn box_bytes(&self) -> u32 {
        u32::try_from(self.box_bytes_exact()).unwrap_or(u32::MAX)
    }

    /// [`Self::box_bytes`] without saturation (256^5 elements of 8 bytes need 44 bits).
    pub fn box_bytes_exact(&self) -> u64 {
        let esize = u64::from(self.dtype.size().unwrap_or(0));
        (0..self.rank as usize)
            .map(|i| u64::from(self.box_extent(i)))
            .product::<u64>()
            * esize
    }

    fn walk(&self, what: &'static str, coords: &[i32]) -> Result<BoxWalk, UnitError> {
        self.validate()?;
        if coords.len() != self.rank as usize {
            return Err(invalid(
                what,
                format!(
                    "{} coordinates for a rank-{} tensor map",
                    coords.len(),
                    self.rank
                ),
            ));
        }
        if self.interleave != TmaInterleave::None {
            return Err(not_implemented(
                what,
                format!("interleaved layout {:?}", self.interleave),
            ));
        }
        let esize = u64::from(self.dtype.size().unwrap_or(0));
        let row_bytes = self.box_dims[0] * esize as u32;
        let pattern = match self.swizzle {
            TmaSwizzle::None => SwizzlePattern::None,
            TmaSwizzle::B32 => SwizzlePattern::B32,
            TmaSwizzle::B64 => SwizzlePattern::B64,
            TmaSwizzle::B128 => SwizzlePattern::B128,
            other => return Err(not_implemented(what, format!("swizzle mode {other:?}"))),
        };
        if pattern != SwizzlePattern::None && row_bytes != pattern.span() {
            return Err(not_implemented(
                what,
                format!(
                    "an inner box of {row_bytes} bytes under the {}-byte swizzle (only boxes exactly one swizzle span wide are modelled)",
                    pattern.span()
                ),
            ));
        }
        let mut extents = [1u32; 4];
        for (i, e) in extents.iter_mut().enumerate().take(self.rank as usize - 1) {
            *e = self.box_extent(i + 1);
        }
        Ok(BoxWalk {
            esize,
            row_bytes,
            extents,
            rows: extents.iter().map(|&e| u64::from(e)).product(),
            pattern,
        })
    }

    /// Row `row` of the box (dimensions 1.. in row-major order): its global address at element
    /// `coords[0]` and whether every coordinate of dimensions 1.. is in bounds.
    fn row_origin(&self, walk: &BoxWalk, coords: &[i32], row: u64) -> (i128, bool) {
        let mut rest = row;
        let mut addr = i128::from(self.base) + i128::from(coords[0]) * i128::from(walk.esize);
        let mut inside = true;
        for (i, &coord) in coords.iter().enumerate().skip(1) {
            let extent = u64::from(walk.extents[i - 1]);
            let j = rest % extent;
            rest /= extent;
            let c = i64::from(coord) + (j as i64) * i64::from(self.elem_strides[i]);
            inside &= c >= 0 && (c as u64) < self.dims[i];
            addr += i128::from(c) * i128::from(self.strides[i - 1]);
        }
        (addr, inside)
    }

    /// The in-bound elements `[lo, hi)` of a box row along dimension 0.
    fn row_span(&self, coord0: i32) -> (u32, u32) {
        let box0 = i64::from(self.box_dims[0]);
        let c0 = i64::from(coord0);
        let lo = (-c0).clamp(0, box0);
        let hi = (self.dims[0] as i64 - c0).clamp(lo, box0);
        (lo as u32, hi as u32)
    }

    fn fill_pattern(&self, esize: u64) -> u64 {
        match (self.oob_fill, esize) {
            (TmaOobFill::None, _) => 0,
            (TmaOobFill::NanRequestZeroFma, 2) => 0x7FFF,
            (TmaOobFill::NanRequestZeroFma, 4) => 0x7FFF_FFFF,
            (TmaOobFill::NanRequestZeroFma, _) => 0x7FFF_FFFF_FFFF_FFFF,
        }
    }

    /// `cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile`: loads the box at `coords`
    /// (dimension 0 first, as in the instruction) into `dst`, which starts on a swizzle-pattern
    /// boundary (the 1024-byte aligned tiles of the kernels). `read(addr, buf)` fills `buf` from
    /// global memory and returns false if no buffer of the launch holds those bytes (the load
    /// then fails with [`UnitError::GlobalOutOfRange`]); it is called once per contiguous
    /// in-bound run of a box row.
    pub fn load_box(
        &self,
        coords: &[i32],
        read: &mut dyn FnMut(u64, &mut [u8]) -> bool,
        dst: &mut [u8],
    ) -> Result<(), UnitError> {
        self.load_box_at(coords, read, dst, 0)
    }

    /// [`Self::load_box`] into the CTA's shared-memory window `smem` at byte address `dst_addr`.
    /// The swizzle is a function of that address, so a destination off a pattern boundary gets
    /// the phase the hardware gives it (PTX ISA "Swizzling Modes": base offset `(dstMem / 128)
    /// % 8`). `dst_addr` must be 128-byte aligned.
    pub fn load_box_at(
        &self,
        coords: &[i32],
        read: &mut dyn FnMut(u64, &mut [u8]) -> bool,
        smem: &mut [u8],
        dst_addr: u32,
    ) -> Result<(), UnitError> {
        const WHAT: &str = "cp.async.bulk.tensor (load)";
        let walk = self.walk(WHAT, coords)?;
        check_window(WHAT, smem.len(), dst_addr, self.box_bytes_exact())?;
        let es = walk.esize as usize;
        let fill = self.fill_pattern(walk.esize).to_le_bytes();
        let mut row = vec![0u8; walk.row_bytes as usize];
        let (lo, hi) = self.row_span(coords[0]);
        for r in 0..walk.rows {
            for e in row.chunks_exact_mut(es) {
                e.copy_from_slice(&fill[..es]);
            }
            let (origin, inside) = self.row_origin(&walk, coords, r);
            if inside && lo < hi {
                let addr = origin + i128::from(lo) * i128::from(walk.esize);
                let addr = u64::try_from(addr).map_err(|_| UnitError::GlobalOutOfRange {
                    what: WHAT,
                    addr: 0,
                    len: u64::from(hi - lo) * walk.esize,
                })?;
                let run = &mut row[lo as usize * es..hi as usize * es];
                if !read(addr, run) {
                    return Err(UnitError::GlobalOutOfRange {
                        what: WHAT,
                        addr,
                        len: run.len() as u64,
                    });
                }
            }
            // In the window (checked above), so below 2^32.
            let line = (u64::from(dst_addr) + r * u64::from(walk.row_bytes)) as u32;
            for (q, chunk) in row.chunks_exact(16).enumerate() {
                let at = walk.pattern.apply(line + 16 * q as u32) as usize;
                smem[at..at + 16].copy_from_slice(chunk);
            }
        }
        Ok(())
    }

    /// `cp.async.bulk.tensor.{rank}d.global.shared::cta.tile`: stores the box at `coords` from
    /// `src` (laid out as [`Self::load_box`] writes it) to global memory through `write(addr,
    /// bytes)` (false: no buffer holds those bytes), skipping out-of-bound elements. The PTX ISA requires non-negative coordinates
    /// for this direction.
    pub fn store_box(
        &self,
        coords: &[i32],
        src: &[u8],
        write: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<(), UnitError> {
        self.store_box_at(coords, src, 0, write)
    }

    /// [`Self::store_box`] from the CTA's shared-memory window `smem` at byte address
    /// `src_addr` (128-byte aligned).
    pub fn store_box_at(
        &self,
        coords: &[i32],
        smem: &[u8],
        src_addr: u32,
        write: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> Result<(), UnitError> {
        const WHAT: &str = "cp.async.bulk.tensor (store)";
        let walk = self.walk(WHAT, coords)?;
        if let Some(c) = coords.iter().find(|&&c| c < 0) {
            return Err(invalid(
                WHAT,
                format!("coordinate {c}: the PTX ISA requires non-negative box coordinates for stores to global memory"),
            ));
        }
        check_window(WHAT, smem.len(), src_addr, self.box_bytes_exact())?;
        let es = walk.esize as usize;
        let mut row = vec![0u8; walk.row_bytes as usize];
        let (lo, hi) = self.row_span(coords[0]);
        for r in 0..walk.rows {
            let (origin, inside) = self.row_origin(&walk, coords, r);
            if !inside || lo >= hi {
                continue;
            }
            let line = (u64::from(src_addr) + r * u64::from(walk.row_bytes)) as u32;
            for (q, chunk) in row.chunks_exact_mut(16).enumerate() {
                let at = walk.pattern.apply(line + 16 * q as u32) as usize;
                chunk.copy_from_slice(&smem[at..at + 16]);
            }
            let addr = origin + i128::from(lo) * i128::from(walk.esize);
            // Non-negative coordinates: the address is the base plus non-negative offsets.
            let addr = u64::try_from(addr).unwrap_or(u64::MAX);
            let run = &row[lo as usize * es..hi as usize * es];
            if !write(addr, run) {
                return Err(UnitError::GlobalOutOfRange {
                    what: WHAT,
                    addr,
                    len: run.len() as u64,
                });
            }
        }
        Ok(())
    }
}

fn check_window(what: &'static str, size: usize, addr: u32, bytes: u64) -> Result<(), UnitError> {
    if !addr.is_multiple_of(128) {
        return Err(invalid(
            what,
            format!("shared-memory address {addr:#x} is not 128-byte aligned"),
        ));
    }
    // Shared-memory addresses are 32-bit: a window past 4 GiB is cut there.
    let size = (size as u64).min(1 << 32);
    if u64::from(addr) + bytes > size {
        return Err(UnitError::SmemOutOfRange {
            what,
            addr: u64::from(addr),
            len: bytes,
            size,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::descriptors::{sw128_offset, sw32_offset, sw64_offset};
    use super::*;

    const GBASE: u64 = 0x7f00_0000_0000;

    /// A row-major `rows x cols` matrix of 16-bit values at GBASE, as the harness's
    /// `tensor_map_2d` describes it: dims {cols, rows}, stride {cols * 2}, box {box_cols,
    /// box_rows}, element strides 1, no interleave, the given swizzle, L2 256B, zero fill.
    fn matrix(
        rows: u64,
        cols: u64,
        box_rows: u32,
        box_cols: u32,
        swizzle: TmaSwizzle,
    ) -> TensorMapDesc {
        TensorMapDesc::encode_tiled(
            TmaDtype::F16,
            2,
            GBASE,
            &[cols, rows],
            &[cols * 2],
            &[box_cols, box_rows],
            &[1, 1],
            TmaInterleave::None,
            swizzle,
            TmaL2Promotion::B256,
            TmaOobFill::None,
        )
        .unwrap()
    }

    fn value(r: u64, c: u64) -> u16 {
        (r * 1000 + c + 1) as u16
    }

    fn global(rows: u64, cols: u64) -> Vec<u8> {
        let mut g = Vec::new();
        for r in 0..rows {
            for c in 0..cols {
                g.extend_from_slice(&value(r, c).to_le_bytes());
            }
        }
        g
    }

    fn reader(g: &[u8]) -> impl FnMut(u64, &mut [u8]) -> bool + '_ {
        move |addr, buf| {
            let off = addr.checked_sub(GBASE).map(|o| o as usize);
            match off.and_then(|o| g.get(o..o + buf.len())) {
                Some(src) => {
                    buf.copy_from_slice(src);
                    true
                }
                None => false,
            }
        }
    }

    fn at(smem: &[u8], off: u32) -> u16 {
        u16::from_le_bytes([smem[off as usize], smem[off as usize + 1]])
    }

    #[test]
    fn a_128b_swizzled_load_reads_back_through_sw128_offset() {
        let (rows, cols) = (300u64, 200u64);
        let g = global(rows, cols);
        let map = matrix(rows, cols, 128, 64, TmaSwizzle::B128);
        assert_eq!(map.box_bytes(), 128 * 128);
        let mut smem = vec![0u8; 16384];
        map.load_box(&[64, 128], &mut reader(&g), &mut smem)
            .unwrap();
        for r in 0..128 {
            for k in 0..64 {
                assert_eq!(
                    at(&smem, sw128_offset(r, k)),
                    value(128 + u64::from(r), 64 + u64::from(k)),
                    "row {r} k {k}"
                );
            }
        }
        // The layout is not the plain one: row 1's first element sits in chunk 1.
        assert_eq!(at(&smem, 128 + 16), value(129, 64));
    }

    #[test]
    fn out_of_bound_elements_are_zero_or_nan_and_stores_skip_them() {
        let (rows, cols) = (100u64, 104u64);
        let g = global(rows, cols);
        let map = matrix(rows, cols, 64, 64, TmaSwizzle::B128);
        let mut smem = vec![0xAAu8; 8192];
        // Columns 80..144 (40 past the end) and rows -8..56 (8 before the start).
        map.load_box(&[80, -8], &mut reader(&g), &mut smem).unwrap();
        for r in 0..64u32 {
            for k in 0..64u32 {
                let (gr, gc) = (i64::from(r) - 8, 80 + u64::from(k));
                let want = if gr >= 0 && gc < cols {
                    value(gr as u64, gc)
                } else {
                    0
                };
                assert_eq!(at(&smem, sw128_offset(r, k)), want, "row {r} k {k}");
            }
        }
        let nan = TensorMapDesc {
            oob_fill: TmaOobFill::NanRequestZeroFma,
            ..map
        };
        nan.load_box(&[80, -8], &mut reader(&g), &mut smem).unwrap();
        assert_eq!(at(&smem, sw128_offset(0, 0)), 0x7FFF);
        assert!(half::f16::from_bits(at(&smem, sw128_offset(9, 63))).is_nan());
        assert_eq!(at(&smem, sw128_offset(9, 0)), value(1, 80));

        // Store the box of rows 64..128 (36 in bounds) and columns 64..128 (40 in bounds).
        map.load_box(&[64, 64], &mut reader(&g), &mut smem).unwrap();
        let mut out = vec![0u8; g.len()];
        let mut writes = 0;
        map.store_box(&[64, 64], &smem, &mut |addr, bytes| {
            writes += 1;
            let o = (addr - GBASE) as usize;
            match out.get_mut(o..o + bytes.len()) {
                Some(dst) => {
                    dst.copy_from_slice(bytes);
                    true
                }
                None => false,
            }
        })
        .unwrap();
        assert_eq!(writes, 36, "one write per in-bound row");
        for r in 0..rows {
            for c in 0..cols {
                let o = ((r * cols + c) * 2) as usize;
                let got = u16::from_le_bytes([out[o], out[o + 1]]);
                let want = if r >= 64 && c >= 64 { value(r, c) } else { 0 };
                assert_eq!(got, want, "({r}, {c})");
            }
        }
        let e = map.store_box(&[-1, 0], &smem, &mut |_, _| true);
        assert!(matches!(e, Err(UnitError::Invalid { .. })));
        // A box whose rows the caller's memory cannot serve.
        let e = map.store_box(&[0, 0], &smem, &mut |_, _| false);
        assert!(matches!(
            e,
            Err(UnitError::GlobalOutOfRange { len: 128, .. })
        ));
        let e = map.load_box(&[0, 0], &mut |_, _| false, &mut smem);
        assert!(matches!(
            e,
            Err(UnitError::GlobalOutOfRange { len: 128, .. })
        ));
    }

    #[test]
    fn the_64b_and_32b_swizzles_and_none_place_rows_as_their_patterns() {
        let g = global(64, 64);
        let mut smem = vec![0u8; 4096];
        let m64 = matrix(64, 64, 16, 32, TmaSwizzle::B64);
        m64.load_box(&[0, 0], &mut reader(&g), &mut smem).unwrap();
        for r in 0..16 {
            for k in 0..32 {
                assert_eq!(at(&smem, sw64_offset(r, k)), value(r.into(), k.into()));
            }
        }
        let m32 = matrix(64, 64, 16, 16, TmaSwizzle::B32);
        m32.load_box(&[16, 0], &mut reader(&g), &mut smem).unwrap();
        for r in 0..16 {
            for k in 0..16 {
                assert_eq!(
                    at(&smem, sw32_offset(r, k)),
                    value(r.into(), 16 + u64::from(k))
                );
            }
        }
        let plain = matrix(64, 64, 4, 24, TmaSwizzle::None);
        plain.load_box(&[8, 2], &mut reader(&g), &mut smem).unwrap();
        assert_eq!(at(&smem, (3 * 24 + 5) * 2), value(5, 13));
        // Not modelled: an inner box narrower than the swizzle span.
        let narrow = matrix(64, 64, 8, 32, TmaSwizzle::B128);
        assert!(matches!(
            narrow.load_box(&[0, 0], &mut reader(&g), &mut smem),
            Err(UnitError::NotImplemented { .. })
        ));
    }

    #[test]
    fn the_swizzle_phase_comes_from_the_shared_memory_address() {
        let g = global(16, 64);
        let map = matrix(16, 64, 8, 64, TmaSwizzle::B128);
        let mut smem = vec![0u8; 4096];
        // 128 bytes past a 1024-byte boundary: box row 0 lands on line 1 of the pattern.
        map.load_box_at(&[0, 0], &mut reader(&g), &mut smem, 1024 + 128)
            .unwrap();
        for r in 0..8u32 {
            for k in 0..64u32 {
                let logical = 1024 + 128 + r * 128 + k * 2;
                assert_eq!(
                    at(&smem, SwizzlePattern::B128.apply(logical)),
                    value(r.into(), k.into())
                );
            }
        }
        assert!(map
            .load_box_at(&[0, 0], &mut reader(&g), &mut smem, 64)
            .is_err());
        assert!(matches!(
            map.load_box_at(&[0, 0], &mut reader(&g), &mut smem, 3072 + 128),
            Err(UnitError::SmemOutOfRange { .. })
        ));
    }

    #[test]
    fn rank_3_with_a_traversal_stride() {
        // A 4 x 6 x 16 tensor of u16 (dims {16, 6, 4}); the box {8, 4, 2} with element stride 2
        // along dimension 1 takes rows 1 and 3 of each plane: 2 x 2 rows of 16 bytes.
        let mut g = Vec::new();
        for p in 0..4u64 {
            for r in 0..6u64 {
                for c in 0..16u64 {
                    g.extend_from_slice(&((p * 100 + r * 10 + c) as u16).to_le_bytes());
                }
            }
        }
        let map = TensorMapDesc::encode_tiled(
            TmaDtype::U16,
            3,
            GBASE,
            &[16, 6, 4],
            &[32, 6 * 32],
            &[8, 4, 2],
            &[1, 2, 1],
            TmaInterleave::None,
            TmaSwizzle::None,
            TmaL2Promotion::None,
            TmaOobFill::None,
        )
        .unwrap();
        assert_eq!(map.box_extent(1), 2);
        assert_eq!(map.box_bytes(), 8 * 2 * 2 * 2);
        let mut smem = vec![0u8; 128];
        map.load_box(&[4, 1, 2], &mut reader(&g), &mut smem)
            .unwrap();
        // Box row (plane j2, row j1) at (j2 * 2 + j1) * 16 bytes: plane 2 + j2, row 1 + 2 * j1.
        assert_eq!(at(&smem, 0), 214);
        assert_eq!(at(&smem, 16), 234);
        assert_eq!(at(&smem, 32 + 14), 314 + 7);
        assert_eq!(at(&smem, 48), 334);
    }

    #[test]
    fn validate_applies_the_drivers_requirements() {
        let ok = matrix(64, 64, 64, 64, TmaSwizzle::B128);
        let bad = |m: TensorMapDesc| matches!(m.validate(), Err(UnitError::Invalid { .. }));
        assert!(bad(TensorMapDesc {
            base: GBASE + 8,
            ..ok
        }));
        assert!(bad(TensorMapDesc {
            strides: [136, 0, 0, 0, 0],
            ..ok
        }));
        assert!(bad(TensorMapDesc {
            strides: [1 << 40, 0, 0, 0, 0],
            ..ok
        }));
        assert!(bad(TensorMapDesc {
            box_dims: [64, 257, 0, 0, 0],
            ..ok
        }));
        assert!(bad(TensorMapDesc {
            box_dims: [0, 64, 0, 0, 0],
            ..ok
        }));
        assert!(bad(TensorMapDesc {
            elem_strides: [1, 9, 0, 0, 0],
            ..ok
        }));
        assert!(bad(TensorMapDesc {
            dims: [0, 64, 0, 0, 0],
            ..ok
        }));
        // Inner box 72 elements = 144 B: wider than the 128-byte swizzle span.
        assert!(bad(TensorMapDesc {
            box_dims: [72, 64, 0, 0, 0],
            ..ok
        }));
        // Inner box 12 B: not a multiple of 16 bytes.
        assert!(bad(TensorMapDesc {
            box_dims: [6, 64, 0, 0, 0],
            swizzle: TmaSwizzle::None,
            ..ok
        }));
        assert!(bad(TensorMapDesc {
            dtype: TmaDtype::U16,
            oob_fill: TmaOobFill::NanRequestZeroFma,
            ..ok
        }));
        assert!(
            bad(TensorMapDesc {
                interleave: TmaInterleave::B16,
                ..ok
            }),
            "rank 2"
        );
        assert!(bad(TensorMapDesc { rank: 6, ..ok }));
        assert!(TmaDtype::from_raw(16).is_err());
        assert_eq!(TmaDtype::from_raw(9).unwrap(), TmaDtype::Bf16);
        let e = TensorMapDesc::encode_tiled(
            TmaDtype::F16,
            2,
            GBASE,
            &[64],
            &[],
            &[64, 64],
            &[1, 1],
            TmaInterleave::None,
            TmaSwizzle::B128,
            TmaL2Promotion::None,
            TmaOobFill::None,
        );
        assert!(e.is_err(), "too few dimensions");
        let mut smem = vec![0u8; 8192];
        let g = global(64, 64);
        assert!(
            ok.load_box(&[0], &mut reader(&g), &mut smem).is_err(),
            "rank 2 needs 2"
        );
    }
}
