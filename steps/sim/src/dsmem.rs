//! Where `.shared::cta` and `.shared::cluster` addresses point (distributed shared memory).
//!
//! What the PTX ISA says ("State Spaces" / "Shared State Space"; "Data Movement and
//! Conversion Instructions: mapa"): the `.shared::cta` window is contained in the
//! `.shared::cluster` window, so a `.shared::cta` address is also a `.shared::cluster`
//! address of the executing CTA's memory; `mapa` returns "an address in CTA b corresponding
//! to" its operand. The ISA does not say how those addresses are laid out.
//!
//! What the hardware does (sm_90 and sm_100), and what the simulator models: the address of
//! byte `offset` of CTA rank `r`'s shared memory is `(r << 24) | offset`, in both the
//! `.shared::cta` and the `.shared::cluster` spaces, so `mapa(a, r')` is
//! `(r' << 24) | (a & 0xFF_FFFF)`. NVIDIA's own library relies on it: CUTLASS's
//! `Sm100MmaPeerBitMask` (0xFEFFFFFF, `cute/arch/copy_sm100_tma.hpp`) clears bit 24 of a CTA's
//! own `.shared::cta` address of an mbarrier to name the same mbarrier in the even (leader)
//! CTA of a 2-CTA pair, and its 2-SM TMA loads and MMA arrivals use that address. Kernels
//! written that way therefore work here as on the GPU; `mapa` gives the same addresses.
//!
//! An address whose rank field is not a rank of the cluster, whose offset lies beyond the
//! CTA's shared memory, or (in a `.shared::cta` access) whose rank is not the executing
//! CTA's, names no byte the hardware layout gives a meaning: it is reported (rule
//! `cluster-address-undefined`), never resolved to some other place. The shared-memory
//! descriptors of tcgen05 hold 14 bits of `address >> 4`, so the rank bits drop out of them as
//! they do on the GPU.

/// The rank field's position in a shared-memory address.
pub const RANK_SHIFT: u32 = 24;
/// The offset field of a shared-memory address.
pub const OFFSET_MASK: u32 = (1 << RANK_SHIFT) - 1;

/// The `.shared::cta` / `.shared::cluster` address of rank `rank`'s byte `off` (what `mapa`
/// returns, and what a shared variable's address is in CTA `rank`).
pub fn encode(rank: u32, off: u32) -> u32 {
    (rank << RANK_SHIFT) | (off & OFFSET_MASK)
}

/// Where a shared-memory address points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Rank `r`'s memory, at an offset.
    Rank(u32, u32),
    /// A rank field outside the cluster.
    Undefined,
}

/// Decode `a` for a cluster of `cl_size` CTAs.
pub fn decode(a: u32, cl_size: u32) -> Place {
    let r = a >> RANK_SHIFT;
    if r < cl_size {
        Place::Rank(r, a & OFFSET_MASK)
    } else {
        Place::Undefined
    }
}

/// Why the address is undefined, for the report.
pub fn undefined_detail(a: u32, len: u32, cl_size: u32, smem_bytes: u32) -> String {
    format!("shared-memory address {a:#x} ({len} bytes) lies in no CTA's shared memory: a shared::cta or shared::cluster address is (CTA rank << 24) | offset on sm_90/sm_100 (the layout CUTLASS's Sm100MmaPeerBitMask relies on; the PTX ISA itself only defines what mapa returns), and here the rank field {} is not below the cluster's {cl_size} CTAs, or the offset {:#x} is not below the CTA's {smem_bytes:#x} bytes of shared memory", a >> RANK_SHIFT, a & OFFSET_MASK)
}

/// Why a `.shared::cta` access of another CTA's address is undefined, for the report.
pub fn foreign_detail(a: u64, own: u32) -> String {
    format!("shared::cta access to {a:#x}, whose rank field {} is not the executing CTA's rank {own}: a shared::cta address names the executing CTA's memory (PTX ISA, Shared State Space); another CTA's memory is reached through shared::cluster (with mapa or the rank bits)", a >> RANK_SHIFT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_carry_the_rank_at_bit_24() {
        assert_eq!(encode(3, 0x500), 0x0300_0500);
        assert_eq!(decode(encode(3, 0x500), 4), Place::Rank(3, 0x500));
        assert_eq!(decode(0x500, 4), Place::Rank(0, 0x500));
        assert_eq!(decode(encode(4, 0), 4), Place::Undefined);
        // The leader trick: rank 1's own address with bit 24 cleared is rank 0's.
        assert_eq!(
            decode(encode(1, 0x500) & 0xFEFF_FFFF, 2),
            Place::Rank(0, 0x500)
        );
    }
}
