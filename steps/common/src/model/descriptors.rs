//! Host twins of the descriptor builders in `blackwell.cuh`, and their decoders.
//!
//! The one definition lives in the simulator's units (`sim::units::descriptors`), which the
//! simulated MMA decodes with; this module re-exports it so the harness, the book figures and the
//! emulation's fault messages keep using `common::model::descriptors`. The tests below check the
//! encodings against the field tables of the PTX ISA ("Shared Memory Descriptor" and
//! "Instruction descriptor" in the tcgen05 chapter).

pub use sim::units::descriptors::*;

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
