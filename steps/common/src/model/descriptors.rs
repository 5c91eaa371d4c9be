//! Host twins of the descriptor builders in `blackwell.cuh`, and their decoders.
//!
//! The device functions are what the kernels use; these mirror them bit for bit so the encodings
//! can be tested without a GPU against the field tables of the PTX ISA ("Shared Memory
//! Descriptor" and "Instruction descriptor" in the tcgen05 chapter).

/// Swizzle modes of the shared-memory descriptor, bits 61-63.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Swizzle {
    None = 0,
    B128Atom32 = 1,
    B128 = 2,
    B64 = 4,
    B32 = 6,
}

/// Decoded shared-memory matrix descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmemDesc {
    pub start_address: u32,
    pub lbo: u32,
    pub sbo: u32,
    pub version: u32,
    pub base_offset: u32,
    pub lbo_mode: u32,
    pub swizzle: u32,
}

/// Mirror of `bw::make_smem_desc_sw128`.
pub fn make_smem_desc_sw128(smem_addr: u32, sbo_bytes: u32) -> u64 {
    let mut d = 0u64;
    d |= ((smem_addr >> 4) & 0x3FFF) as u64;
    d |= (((16u32 >> 4) & 0x3FFF) as u64) << 16;
    d |= (((sbo_bytes >> 4) & 0x3FFF) as u64) << 32;
    d |= 1u64 << 46;
    d |= (Swizzle::B128 as u64) << 61;
    d
}

pub fn decode_smem_desc(d: u64) -> SmemDesc {
    SmemDesc {
        start_address: ((d & 0x3FFF) as u32) << 4,
        lbo: (((d >> 16) & 0x3FFF) as u32) << 4,
        sbo: (((d >> 32) & 0x3FFF) as u32) << 4,
        version: ((d >> 46) & 0x7) as u32,
        base_offset: ((d >> 49) & 0x7) as u32,
        lbo_mode: ((d >> 52) & 0x1) as u32,
        swizzle: ((d >> 61) & 0x7) as u32,
    }
}

/// Decoded kind::f16 instruction descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstrDesc {
    pub d_format: u32,
    pub a_format: u32,
    pub b_format: u32,
    pub a_major: u32,
    pub b_major: u32,
    pub n: u32,
    pub m: u32,
}

/// Mirror of `bw::make_idesc_f16`.
pub fn make_idesc_f16(m: u32, n: u32, bf16: bool) -> u32 {
    let fmt = if bf16 { 1 } else { 0 };
    (1 << 4) | (fmt << 7) | (fmt << 10) | (((n >> 3) & 0x3F) << 17) | (((m >> 4) & 0x1F) << 24)
}

pub fn decode_idesc(d: u32) -> InstrDesc {
    InstrDesc {
        d_format: (d >> 4) & 0x3,
        a_format: (d >> 7) & 0x7,
        b_format: (d >> 10) & 0x7,
        a_major: (d >> 15) & 1,
        b_major: (d >> 16) & 1,
        n: ((d >> 17) & 0x3F) << 3,
        m: ((d >> 24) & 0x1F) << 4,
    }
}

/// Mirror of `wb::sw128_chunk` (`common.cuh`): where the 128-byte swizzle stores 16-byte chunk
/// `chunk` (0..7) of row `row` of a 1024-byte aligned tile of 128-byte rows (PTX ISA "Tensor
/// Swizzling Modes"). `tests/tests/swizzle_twin.rs` compares the two over every row of a
/// 256-row tile.
pub fn sw128_chunk(row: u32, chunk: u32) -> u32 {
    chunk ^ (row % 8)
}

/// Byte offset of element (row, k) of a K-major, 128B-swizzled tile of 16-bit elements whose
/// base is 1024-byte aligned: the layout TMA writes with CU_TENSOR_MAP_SWIZZLE_128B and the one
/// the descriptors above describe (8-row groups of 1024 B, chunks placed by [`sw128_chunk`]).
pub fn sw128_offset(row: u32, k: u32) -> u32 {
    let byte = k * 2;
    (row / 8) * 1024 + (row % 8) * 128 + sw128_chunk(row, byte / 16) * 16 + byte % 16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smem_desc_fields_for_a_128x64_f16_sw128_tile() {
        // A 128x64 f16 K-major tile at shared address 0x400 (1024-aligned): 8-row groups of
        // 1024 B, so SBO = 1024; LBO unused (16); fixed 0b001 at 46-48; swizzle 2 = 128B.
        let d = make_smem_desc_sw128(0x400, 1024);
        assert_eq!(d & 0x3FFF, 0x40, "start address >> 4");
        assert_eq!((d >> 16) & 0x3FFF, 1, "LBO >> 4");
        assert_eq!((d >> 32) & 0x3FFF, 64, "SBO >> 4");
        assert_eq!((d >> 46) & 0x7, 0b001, "sm_100 descriptor version");
        assert_eq!((d >> 49) & 0x7, 0, "base offset");
        assert_eq!((d >> 52) & 0x1, 0, "LBO mode relative");
        assert_eq!((d >> 53) & 0xFF, 0, "fixed zero field");
        assert_eq!(d >> 61, 2, "128-byte swizzle");
        assert_eq!(d, 0x4000_4040_0001_0040);
        let dec = decode_smem_desc(d);
        assert_eq!(
            dec,
            SmemDesc {
                start_address: 0x400,
                lbo: 16,
                sbo: 1024,
                version: 1,
                base_offset: 0,
                lbo_mode: 0,
                swizzle: Swizzle::B128 as u32
            }
        );
    }

    #[test]
    fn smem_desc_k_steps_only_move_the_start_address() {
        for k in 0..4u32 {
            let d = make_smem_desc_sw128(0x8000 + 32 * k, 1024);
            let dec = decode_smem_desc(d);
            assert_eq!(dec.start_address, 0x8000 + 32 * k);
            assert_eq!(dec.sbo, 1024);
        }
    }

    #[test]
    fn idesc_for_m128_n256_f16_and_bf16() {
        let f16 = make_idesc_f16(128, 256, false);
        // D=F32 (bit 4), N>>3 = 32 at 17-22, M>>4 = 8 at 24-28, bit 23 reserved.
        assert_eq!(f16, (1 << 4) | (32 << 17) | (8 << 24));
        assert_eq!(f16, 0x0840_0010);
        assert_eq!(f16 & (1 << 23), 0);
        let bf16 = make_idesc_f16(128, 256, true);
        assert_eq!(bf16, 0x0840_0490);
        let d = decode_idesc(bf16);
        assert_eq!(
            (d.m, d.n, d.a_format, d.b_format, d.d_format),
            (128, 256, 1, 1, 1)
        );
        assert_eq!((d.a_major, d.b_major), (0, 0), "both K-major");
        for (m, n) in [(64, 8), (128, 16), (128, 128), (256, 256)] {
            let d = decode_idesc(make_idesc_f16(m, n, false));
            assert_eq!((d.m, d.n), (m, n));
        }
    }

    #[test]
    fn sw128_layout_is_a_permutation_of_each_1024_byte_group() {
        let mut seen = vec![false; 8 * 64];
        for row in 0..8 {
            for k in 0..64 {
                let off = sw128_offset(row, k) as usize;
                assert!(off < 1024 && off.is_multiple_of(2));
                assert!(!seen[off / 2], "two elements at byte {off}");
                seen[off / 2] = true;
            }
        }
        // Row 0 is not permuted; row 1's first 16-byte chunk sits in chunk 1.
        assert_eq!(sw128_offset(0, 8), 16);
        assert_eq!(sw128_offset(1, 0), 128 + 16);
        assert_eq!(sw128_offset(9, 0), 1024 + 128 + 16);
    }

    #[test]
    fn sw128_offset_is_the_address_form_of_the_swizzle() {
        // The same permutation as the emulator's address form (tcgen05_emu.cuh): XOR bits [4,7)
        // of the byte offset with bits [7,10), its row within the 8-row group.
        for row in 0..256 {
            for k in 0..64 {
                let logical = (row / 8) * 1024 + (row % 8) * 128 + k * 2;
                assert_eq!(sw128_offset(row, k), logical ^ (((logical >> 7) & 7) << 4));
            }
        }
    }
}
