//! The one error type of the data units. Each variant's message is one line a learner can act on;
//! the core wraps it with the instruction and PTX line that caused it.

use std::fmt;

/// Why a unit refused an operation. An encoding the simulator does not implement is
/// [`UnitError::NotImplemented`], never a guess; a value the PTX ISA or the CUDA driver forbids
/// is [`UnitError::Invalid`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitError {
    /// A legal encoding or form the simulator does not model (named field and value).
    NotImplemented { what: &'static str, detail: String },
    /// A value the PTX ISA or the CUDA driver API forbids.
    Invalid { what: &'static str, detail: String },
    /// `tcgen05.alloc` found no free aligned range. The hardware blocks until one is freed; the
    /// core decides whether anything can still free one (else it is a deadlock).
    TmemFull {
        ncols: u32,
        allocated: Vec<(u32, u32)>,
    },
    /// `tcgen05.alloc` after `tcgen05.relinquish_alloc_permit` (PTX ISA: illegal).
    TmemAllocAfterRelinquish { ncols: u32 },
    /// `tcgen05.dealloc` of a range that is not one allocation (PTX ISA: taddr must point to a
    /// previous allocation).
    TmemNotAllocation { col: u32, ncols: u32 },
    /// An access to tensor-memory columns that are not allocated.
    TmemUnallocated {
        what: &'static str,
        col: u32,
        ncols: u32,
    },
    /// `tcgen05.ld`/`st` outside the lane quarter of the warp (PTX ISA "Access restrictions").
    TmemLaneQuarter {
        what: &'static str,
        warp_in_wg: u32,
        lane: u32,
    },
    /// A shared-memory access outside the CTA's shared-memory window.
    SmemOutOfRange {
        what: &'static str,
        addr: u64,
        len: u64,
        size: u64,
    },
    /// A global-memory access the caller's memory could not serve.
    GlobalOutOfRange {
        what: &'static str,
        addr: u64,
        len: u64,
    },
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnitError::NotImplemented { what, detail } => {
                write!(f, "{what}: {detail} is not implemented by the simulator")
            }
            UnitError::Invalid { what, detail } => write!(f, "{what}: {detail}"),
            UnitError::TmemFull { ncols, allocated } => {
                write!(
                    f,
                    "tcgen05.alloc of {ncols} columns: no free aligned range in the 512 columns of tensor memory (allocated:"
                )?;
                for (col, n) in allocated {
                    write!(f, " {col}..{}", col + n)?;
                }
                write!(f, ")")
            }
            UnitError::TmemAllocAfterRelinquish { ncols } => write!(
                f,
                "tcgen05.alloc of {ncols} columns after tcgen05.relinquish_alloc_permit (PTX ISA: illegal)"
            ),
            UnitError::TmemNotAllocation { col, ncols } => write!(
                f,
                "tcgen05.dealloc of columns {col}..{} ({ncols} columns), which is not one allocation: the address and the column count must be those of a tcgen05.alloc",
                col + ncols
            ),
            UnitError::TmemUnallocated { what, col, ncols } => write!(
                f,
                "{what} uses tensor-memory columns {col}..{}, which are not allocated",
                u64::from(*col) + u64::from(*ncols)
            ),
            UnitError::TmemLaneQuarter {
                what,
                warp_in_wg,
                lane,
            } => write!(
                f,
                "{what} addresses lanes {lane}..{}, but warp {warp_in_wg} of its warpgroup may only access lanes {}..{} (PTX ISA \"Access restrictions\": warp index % 4 picks the quarter)",
                lane + 31,
                32 * warp_in_wg,
                32 * warp_in_wg + 31
            ),
            UnitError::SmemOutOfRange {
                what,
                addr,
                len,
                size,
            } => write!(
                f,
                "{what} accesses shared memory {addr:#x}..{:#x}, past the CTA's {size} bytes",
                addr + len
            ),
            UnitError::GlobalOutOfRange { what, addr, len } => write!(
                f,
                "{what} accesses global memory {addr:#x}..{:#x}, which is not in any buffer of the launch",
                addr + len
            ),
        }
    }
}

impl std::error::Error for UnitError {}

/// Shorthand for the two string-carrying variants.
pub(crate) fn not_implemented(what: &'static str, detail: impl Into<String>) -> UnitError {
    UnitError::NotImplemented {
        what,
        detail: detail.into(),
    }
}

pub(crate) fn invalid(what: &'static str, detail: impl Into<String>) -> UnitError {
    UnitError::Invalid {
        what,
        detail: detail.into(),
    }
}
