//! Tensor memory of one CTA (PTX ISA "Tensor Memory"): 128 lanes x 512 columns of 32-bit cells,
//! its allocator ("Tensor Memory Allocation", "tcgen05.alloc/dealloc/relinquish_alloc_permit")
//! and the warp-level `tcgen05.ld`/`tcgen05.st` shape the kernels use (`.32x32b`).
//!
//! Against the project's facts sheet (`shared/reference/blackwell-facts.md`), the PTX ISA wins:
//! it gives the 128 x 512 cells per CTA ("Tensor Memory": "512 columns and 128 rows per CTA" on
//! sm_100a), where the sheet says per SM, so each simulated CTA has its own [`TensorMemory`]; and
//! `tcgen05.alloc` takes at most 512 columns and "the number of columns allocated should not
//! increase between any two allocations in the execution order within the CTA", two rules the
//! sheet does not list (and the GPU emulation does not check the second).

use super::error::invalid;
use super::UnitError;

/// Lanes (rows) of a CTA's tensor memory.
pub const LANES: u32 = 128;
/// Columns of a CTA's tensor memory.
pub const COLUMNS: u32 = 512;
/// Allocation unit, in columns (PTX ISA "Tensor Memory Allocation").
pub const GRANULE: u32 = 32;
/// What a cell holds before anything wrote it: a quiet NaN, so a read of unwritten memory shows
/// in the result instead of passing as zero (the hardware leaves it undefined).
pub const POISON: u32 = 0x7FC0_0BAD;

/// Tensor-memory address (PTX ISA "Tensor Memory Addressing"): lane in bits 31-16, column in
/// bits 15-0.
pub fn taddr(lane: u32, col: u32) -> u32 {
    (lane << 16) | (col & 0xFFFF)
}

/// The lane field of a tensor-memory address.
pub fn taddr_lane(addr: u32) -> u32 {
    addr >> 16
}

/// The column field of a tensor-memory address.
pub fn taddr_col(addr: u32) -> u32 {
    addr & 0xFFFF
}

/// The tensor memory of one CTA and its allocation state.
#[derive(Debug, Clone)]
pub struct TensorMemory {
    /// Lane-major: cell (lane, col) at `lane * COLUMNS + col`, so a lane's columns (a row of an
    /// accumulator, a thread's `tcgen05.ld`) are contiguous.
    cells: Vec<u32>,
    /// Live allocations (first column, columns), in allocation order.
    allocations: Vec<(u32, u32)>,
    relinquished: bool,
    /// Columns of the previous allocation (PTX ISA: the count should not increase between two
    /// allocations of a CTA).
    last_ncols: Option<u32>,
}

impl Default for TensorMemory {
    fn default() -> Self {
        Self::new()
    }
}

impl TensorMemory {
    /// Fresh tensor memory: nothing allocated, every cell [`POISON`].
    pub fn new() -> TensorMemory {
        TensorMemory {
            cells: vec![POISON; (LANES * COLUMNS) as usize],
            allocations: Vec::new(),
            relinquished: false,
            last_ncols: None,
        }
    }

    fn check_ncols(what: &'static str, ncols: u32) -> Result<(), UnitError> {
        if !(GRANULE..=COLUMNS).contains(&ncols) || !ncols.is_power_of_two() {
            return Err(invalid(
                what,
                format!("{ncols} columns: the count must be a power of two from 32 to 512 (PTX ISA \"tcgen05.alloc\")"),
            ));
        }
        Ok(())
    }

    /// The lowest column where `ncols` columns aligned to their own size are all free: the
    /// policy of the GPU emulation (`tcgen05_emu.cuh`). The PTX ISA promises only 32-column
    /// granularity, so a kernel must use the address it is given, never assume one.
    fn free_range(&self, ncols: u32) -> Option<u32> {
        (0..COLUMNS / ncols).map(|i| i * ncols).find(|&col| {
            self.allocations
                .iter()
                .all(|&(c, n)| col + ncols <= c || c + n <= col)
        })
    }

    /// `tcgen05.alloc.cta_group::1 [dst], ncols`: the first column of the allocation (lane 0), or
    /// why not. [`UnitError::TmemFull`] is where the hardware would block until a dealloc.
    pub fn alloc(&mut self, ncols: u32) -> Result<u32, UnitError> {
        self.check_alloc(ncols)?;
        let col = self.free_range(ncols).ok_or_else(|| UnitError::TmemFull {
            ncols,
            allocated: self.allocations.clone(),
        })?;
        self.take(col, ncols);
        Ok(col)
    }

    fn check_alloc(&self, ncols: u32) -> Result<(), UnitError> {
        Self::check_ncols("tcgen05.alloc", ncols)?;
        if self.relinquished {
            return Err(UnitError::TmemAllocAfterRelinquish { ncols });
        }
        if let Some(prev) = self.last_ncols {
            if ncols > prev {
                return Err(invalid(
                    "tcgen05.alloc",
                    format!("{ncols} columns after an allocation of {prev}: the PTX ISA says the number of columns allocated should not increase between two allocations of a CTA"),
                ));
            }
        }
        Ok(())
    }

    fn take(&mut self, col: u32, ncols: u32) {
        self.allocations.push((col, ncols));
        self.last_ncols = Some(ncols);
        // A new allocation holds no previous contents (the hardware's are undefined).
        for lane in 0..LANES {
            let base = (lane * COLUMNS + col) as usize;
            self.cells[base..base + ncols as usize].fill(POISON);
        }
    }

    /// `tcgen05.alloc.cta_group::2`: the pair allocates the same columns in both CTAs' tensor
    /// memory (the first free range free in both).
    pub fn alloc_pair(
        a: &mut TensorMemory,
        b: &mut TensorMemory,
        ncols: u32,
    ) -> Result<u32, UnitError> {
        a.check_alloc(ncols)?;
        b.check_alloc(ncols)?;
        let col = (0..COLUMNS / ncols)
            .map(|i| i * ncols)
            .find(|&col| {
                [&*a, &*b].iter().all(|t| {
                    t.allocations
                        .iter()
                        .all(|&(c, n)| col + ncols <= c || c + n <= col)
                })
            })
            .ok_or_else(|| UnitError::TmemFull {
                ncols,
                allocated: a
                    .allocations
                    .iter()
                    .chain(&b.allocations)
                    .copied()
                    .collect(),
            })?;
        a.take(col, ncols);
        b.take(col, ncols);
        Ok(col)
    }

    /// `tcgen05.dealloc taddr, ncols` with the column of `taddr`: it must name one live
    /// allocation exactly (PTX ISA: "taddr must point to a previous Tensor Memory allocation").
    pub fn dealloc(&mut self, col: u32, ncols: u32) -> Result<(), UnitError> {
        Self::check_ncols("tcgen05.dealloc", ncols)?;
        match self.allocations.iter().position(|&a| a == (col, ncols)) {
            Some(i) => {
                self.allocations.remove(i);
                Ok(())
            }
            None => Err(UnitError::TmemNotAllocation { col, ncols }),
        }
    }

    /// `tcgen05.dealloc` with the full address: its lane field must be 0.
    pub fn dealloc_addr(&mut self, addr: u32, ncols: u32) -> Result<(), UnitError> {
        if taddr_lane(addr) != 0 {
            return Err(invalid(
                "tcgen05.dealloc",
                format!(
                    "address {addr:#x} has lane {}: an allocation's address has lane 0",
                    taddr_lane(addr)
                ),
            ));
        }
        self.dealloc(taddr_col(addr), ncols)
    }

    /// `tcgen05.relinquish_alloc_permit`: no more allocations by this CTA.
    pub fn relinquish(&mut self) {
        self.relinquished = true;
    }

    pub fn relinquished(&self) -> bool {
        self.relinquished
    }

    /// Allocations not freed: every one must be before the kernel exits (PTX ISA "Tensor Memory
    /// Allocation"). Empty when the CTA may exit.
    pub fn leaked(&self) -> &[(u32, u32)] {
        &self.allocations
    }

    /// Whether columns `col..col + ncols` all lie in live allocations.
    pub fn is_allocated(&self, col: u32, ncols: u32) -> bool {
        let end = u64::from(col) + u64::from(ncols);
        let mut c = u64::from(col);
        while c < end {
            match self
                .allocations
                .iter()
                .find(|&&(a, n)| u64::from(a) <= c && c < u64::from(a) + u64::from(n))
            {
                Some(&(a, n)) => c = u64::from(a) + u64::from(n),
                None => return false,
            }
        }
        true
    }

    /// [`Self::is_allocated`] as an error for `what`.
    pub fn require_allocated(
        &self,
        what: &'static str,
        col: u32,
        ncols: u32,
    ) -> Result<(), UnitError> {
        if self.is_allocated(col, ncols) {
            Ok(())
        } else {
            Err(UnitError::TmemUnallocated { what, col, ncols })
        }
    }

    fn index(lane: u32, col: u32) -> Result<usize, UnitError> {
        if lane >= LANES || col >= COLUMNS {
            return Err(invalid(
                "tensor memory",
                format!("cell (lane {lane}, column {col}) is outside the 128 x 512 cells"),
            ));
        }
        Ok((lane * COLUMNS + col) as usize)
    }

    /// One cell, allocated or not (for tests and reports; instructions go through the checked
    /// accessors).
    pub fn read(&self, lane: u32, col: u32) -> Result<u32, UnitError> {
        Ok(self.cells[Self::index(lane, col)?])
    }

    /// Writes one cell, allocated or not.
    pub fn write(&mut self, lane: u32, col: u32, value: u32) -> Result<(), UnitError> {
        let i = Self::index(lane, col)?;
        self.cells[i] = value;
        Ok(())
    }

    /// Cells `col..col + n` of `lane`, in bounds (the caller checked allocation).
    pub(crate) fn row_mut(&mut self, lane: u32, col: u32, n: u32) -> &mut [u32] {
        let base = (lane * COLUMNS + col) as usize;
        &mut self.cells[base..base + n as usize]
    }

    /// Cells `col..col + n` of `lane`, in bounds.
    pub(crate) fn row(&self, lane: u32, col: u32, n: u32) -> &[u32] {
        let base = (lane * COLUMNS + col) as usize;
        &self.cells[base..base + n as usize]
    }

    /// Checks a `.32x32b` access of `n` columns by warp `warp_in_wg` (its warp index % 4) at
    /// `addr`, and returns the first lane and column.
    fn check_32x32b(
        &self,
        what: &'static str,
        warp_in_wg: u32,
        addr: u32,
        n: u32,
    ) -> Result<(u32, u32), UnitError> {
        if !(n.is_power_of_two() && n <= 128) {
            return Err(invalid(
                what,
                format!("{n} columns: .32x32b moves x1, x2, x4, ... x128 columns"),
            ));
        }
        let lane = taddr_lane(addr);
        let col = taddr_col(addr);
        // PTX ISA "Access restrictions": warp w of a warpgroup reaches lanes 32*(w%4)..+31 only,
        // and .32x32b spans 32 lanes, so the address must start that quarter.
        if warp_in_wg > 3 || lane != 32 * warp_in_wg {
            return Err(UnitError::TmemLaneQuarter {
                what,
                warp_in_wg: warp_in_wg % 4,
                lane,
            });
        }
        if u64::from(col) + u64::from(n) > u64::from(COLUMNS) {
            return Err(invalid(
                what,
                format!(
                    "columns {col}..{} are past the 512 columns of tensor memory",
                    u64::from(col) + u64::from(n)
                ),
            ));
        }
        self.require_allocated(what, col, n)?;
        Ok((lane, col))
    }

    /// `tcgen05.ld.sync.aligned.32x32b.x{n}.b32` (PTX ISA "tcgen05.ld", "Matrix fragments for
    /// shape .32x32b"): what thread `lane_t` (0..31) of warp `warp_in_wg` receives: `n`
    /// consecutive columns of lane `lane(addr) + lane_t`, register i from column `col(addr) + i`.
    pub fn ld_32x32b(
        &self,
        warp_in_wg: u32,
        lane_t: u32,
        addr: u32,
        n: u32,
    ) -> Result<Vec<u32>, UnitError> {
        let mut out = vec![0; n as usize];
        self.ld_32x32b_into(warp_in_wg, lane_t, addr, &mut out)?;
        Ok(out)
    }

    /// [`Self::ld_32x32b`] into `out` (`n` = its length).
    pub fn ld_32x32b_into(
        &self,
        warp_in_wg: u32,
        lane_t: u32,
        addr: u32,
        out: &mut [u32],
    ) -> Result<(), UnitError> {
        let n = u32::try_from(out.len()).unwrap_or(u32::MAX);
        let (lane, col) = self.check_32x32b("tcgen05.ld.32x32b", warp_in_wg, addr, n)?;
        if lane_t > 31 {
            return Err(invalid(
                "tcgen05.ld.32x32b",
                format!("thread {lane_t} of a warp"),
            ));
        }
        out.copy_from_slice(self.row(lane + lane_t, col, n));
        Ok(())
    }

    /// `tcgen05.shift.down` (PTX ISA 9.7.16.9.3, implicit shape `.31x256b`): the 32-byte
    /// element (8 columns) at `col(addr)` of each of the 31 lanes `lane(addr)..lane(addr) + 30`
    /// moves one lane down, so lane `lane(addr) + 31` loses its own. The ISA says nothing moves
    /// into lane `lane(addr)`: it keeps its element. The lane must be a multiple of 32.
    pub fn shift_down(&mut self, addr: u32) -> Result<(), UnitError> {
        const WHAT: &str = "tcgen05.shift";
        const COLS: u32 = 256 / 32;
        let lane = taddr_lane(addr);
        let col = taddr_col(addr);
        if !lane.is_multiple_of(32) || lane >= LANES {
            return Err(invalid(
                WHAT,
                format!("lane {lane}: the address's lane must be 0, 32, 64 or 96"),
            ));
        }
        if col + COLS > COLUMNS {
            return Err(invalid(
                WHAT,
                format!(
                    "columns {col}..{} are past the 512 columns of tensor memory",
                    col + COLS
                ),
            ));
        }
        self.require_allocated(WHAT, col, COLS)?;
        for r in (lane..lane + 31).rev() {
            let base = (r * COLUMNS + col) as usize;
            let next = base + COLUMNS as usize;
            self.cells.copy_within(base..base + COLS as usize, next);
        }
        Ok(())
    }

    /// `tcgen05.st.sync.aligned.32x32b.x{n}.b32`: thread `lane_t` stores `values` into lane
    /// `lane(addr) + lane_t`, columns `col(addr)..`.
    pub fn st_32x32b(
        &mut self,
        warp_in_wg: u32,
        lane_t: u32,
        addr: u32,
        values: &[u32],
    ) -> Result<(), UnitError> {
        let n = u32::try_from(values.len()).unwrap_or(u32::MAX);
        let (lane, col) = self.check_32x32b("tcgen05.st.32x32b", warp_in_wg, addr, n)?;
        if lane_t > 31 {
            return Err(invalid(
                "tcgen05.st.32x32b",
                format!("thread {lane_t} of a warp"),
            ));
        }
        self.row_mut(lane + lane_t, col, n).copy_from_slice(values);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_pack_lane_and_column() {
        assert_eq!(taddr(96, 40), (96 << 16) | 40);
        assert_eq!(taddr_lane(taddr(96, 40)), 96);
        assert_eq!(taddr_col(taddr(96, 40)), 40);
    }

    #[test]
    fn alloc_is_power_of_two_aligned_and_exact_on_dealloc() {
        let mut t = TensorMemory::new();
        for bad in [0, 16, 48, 96, 1024] {
            assert!(
                matches!(t.alloc(bad), Err(UnitError::Invalid { .. })),
                "{bad}"
            );
        }
        assert_eq!(t.alloc(256).unwrap(), 0);
        assert_eq!(t.alloc(128).unwrap(), 256);
        assert_eq!(t.alloc(64).unwrap(), 384);
        assert_eq!(t.alloc(32).unwrap(), 448);
        assert_eq!(t.alloc(32).unwrap(), 480);
        assert!(matches!(
            t.alloc(32),
            Err(UnitError::TmemFull { ncols: 32, .. })
        ));
        // Not an allocation: a sub-range, a wrong count, an address with a lane.
        assert_eq!(
            t.dealloc(0, 128),
            Err(UnitError::TmemNotAllocation { col: 0, ncols: 128 })
        );
        assert!(t.dealloc(256, 256).is_err());
        assert!(t.dealloc_addr(taddr(1, 256), 128).is_err());
        t.dealloc_addr(taddr(0, 256), 128).unwrap();
        assert!(t.dealloc(256, 128).is_err(), "twice");
        assert_eq!(t.leaked(), &[(0, 256), (384, 64), (448, 32), (480, 32)]);
        assert_eq!(t.alloc(32).unwrap(), 256, "lowest aligned free range");
        for (c, n) in [(0, 256), (384, 64), (448, 32), (480, 32), (256, 32)] {
            t.dealloc(c, n).unwrap();
        }
        assert!(t.leaked().is_empty());
    }

    #[test]
    fn alloc_counts_must_not_grow_and_relinquish_ends_allocation() {
        let mut t = TensorMemory::new();
        t.alloc(64).unwrap();
        assert!(matches!(t.alloc(128), Err(UnitError::Invalid { .. })));
        t.alloc(64).unwrap();
        t.relinquish();
        assert_eq!(
            t.alloc(32),
            Err(UnitError::TmemAllocAfterRelinquish { ncols: 32 })
        );
        let mut a = TensorMemory::new();
        let mut b = TensorMemory::new();
        b.alloc(256).unwrap();
        assert_eq!(TensorMemory::alloc_pair(&mut a, &mut b, 128).unwrap(), 256);
        assert_eq!(a.leaked(), &[(256, 128)]);
    }

    #[test]
    fn ld_32x32b_reaches_only_the_warps_lane_quarter() {
        let mut t = TensorMemory::new();
        let col = t.alloc(64).unwrap();
        for lane in 0..LANES {
            for c in 0..64 {
                t.write(lane, col + c, lane * 1000 + c).unwrap();
            }
        }
        // Warp 2 of the warpgroup, thread 5: lane 69, columns 8..40.
        let r = t.ld_32x32b(2, 5, taddr(64, col + 8), 32).unwrap();
        assert_eq!(r, (8..40).map(|c| 69 * 1000 + c).collect::<Vec<_>>());
        // Lanes of another quarter, or a start inside the quarter.
        assert!(matches!(
            t.ld_32x32b(1, 0, taddr(64, col), 32),
            Err(UnitError::TmemLaneQuarter {
                warp_in_wg: 1,
                lane: 64,
                ..
            })
        ));
        assert!(t.ld_32x32b(2, 0, taddr(65, col), 32).is_err());
        // Unallocated columns, and a shape that does not exist.
        assert!(matches!(
            t.ld_32x32b(0, 0, taddr(0, col + 48), 32),
            Err(UnitError::TmemUnallocated { .. })
        ));
        assert!(t.ld_32x32b(0, 0, taddr(0, col), 24).is_err());
        // st then ld round trip.
        let v: Vec<u32> = (0..16).map(|i| 7 + i).collect();
        t.st_32x32b(3, 31, taddr(96, col + 16), &v).unwrap();
        assert_eq!(t.read(127, col + 16).unwrap(), 7);
        assert_eq!(t.ld_32x32b(3, 31, taddr(96, col + 16), 16).unwrap(), v);
        assert!(t.st_32x32b(0, 0, taddr(96, col), &v).is_err());
    }

    #[test]
    fn fresh_allocations_are_poisoned() {
        let mut t = TensorMemory::new();
        let col = t.alloc(32).unwrap();
        t.write(3, col, 1).unwrap();
        t.dealloc(col, 32).unwrap();
        let col = t.alloc(32).unwrap();
        assert_eq!(t.read(3, col).unwrap(), POISON);
        assert!(f32::from_bits(POISON).is_nan());
    }
}
