//! Where `.shared::cluster` addresses point (distributed shared memory).
//!
//! PTX ISA, "State Spaces" / "Shared State Space": the `.shared::cta` window is contained in
//! the `.shared::cluster` window, and a `.shared::cta` address (or a `.shared::cluster` address
//! inside that window) names the executing CTA's shared memory. Another CTA's shared memory
//! is reached through `mapa` ("Data Movement and Conversion Instructions: mapa"): it returns
//! "an address in CTA b corresponding to" its operand. Nothing in the ISA says how those
//! addresses are laid out, so arithmetic that moves an address from one CTA's memory to
//! another's (OR-ing or adding a rank-dependent offset, as some public kernels do from what
//! one GPU happens to encode) has no defined result, while an offset that stays inside the
//! variable (or the CTA's shared memory) that `mapa` mapped does.
//!
//! The simulator therefore gives each rank a window at an address no such arithmetic reaches
//! by accident: rank `r`'s memory starts at `WINDOW_BASE + r * WINDOW_STRIDE`, a stride that is
//! no power of two, above the executing CTA's own window (`0..WINDOW_BASE`). An address in
//! neither an own offset inside the CTA's shared memory nor a mapped window inside the target's
//! shared memory is reported (rule `cluster-address-undefined`), never resolved to some CTA.

/// Start of rank 0's window in the `.shared::cluster` space.
pub const WINDOW_BASE: u32 = 0x4000_0000;
/// Distance between two ranks' windows: larger than any CTA's shared memory (228 KiB plus the
/// reserved 1 KiB), and not a power of two.
pub const WINDOW_STRIDE: u32 = 0x0104_0000;

/// A `.shared::cluster` address of rank `rank`'s byte `off` (what `mapa` returns).
pub fn encode(rank: u32, off: u32) -> u32 {
    WINDOW_BASE + rank * WINDOW_STRIDE + off
}

/// Where a `.shared::cluster` address points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The executing CTA's own window: the offset.
    Own(u32),
    /// Rank `r`'s window, at an offset.
    Rank(u32, u32),
    /// In no window: the result of arithmetic the ISA does not define.
    Undefined,
}

/// Decode `a` for a cluster of `cl_size` CTAs.
pub fn decode(a: u32, cl_size: u32) -> Place {
    if a < WINDOW_BASE {
        return Place::Own(a);
    }
    let rel = a - WINDOW_BASE;
    let r = rel / WINDOW_STRIDE;
    if r < cl_size {
        Place::Rank(r, rel % WINDOW_STRIDE)
    } else {
        Place::Undefined
    }
}

/// Why the address is undefined, for the report.
pub fn undefined_detail(a: u32, len: u32, cl_size: u32, smem_bytes: u32) -> String {
    format!("shared::cluster address {a:#x} ({len} bytes) lies in no CTA's shared memory: the PTX ISA defines a shared::cta address (the executing CTA's, below {smem_bytes:#x} here) and what mapa returns for a CTA rank (and offsets that stay inside the memory it mapped), not the layout between CTAs, so arithmetic that moves an address from one CTA's memory to another's (OR-ing or adding a rank times a stride) has no defined target; use mapa with the target rank (this cluster has {cl_size} CTAs)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_round_trip_and_rank_bits_land_nowhere() {
        assert_eq!(decode(encode(3, 0x500), 4), Place::Rank(3, 0x500));
        assert_eq!(decode(0x500, 4), Place::Own(0x500));
        assert_eq!(decode(encode(4, 0), 4), Place::Undefined);
        // `offset | rank << 24` (one GPU's encoding) is an own offset far past any CTA's memory.
        assert_eq!(decode(0x500 | (1 << 24), 4), Place::Own(0x0100_0500));
    }
}
