//! The tcgen05 descriptors and the shared-memory swizzle, in one place: host twins of the
//! descriptor builders in `blackwell.cuh` (bit for bit), their decoders, the checked decoding the
//! simulated MMA uses, and the swizzle address maths TMA and the MMA share.
//!
//! Sources: PTX ISA "Shared memory descriptor" (tcgen05, Table 40 and the start-address table
//! after it), "Instruction descriptor" (Table 42, kind::f16 column), "Swizzling Modes" (the 16-byte
//! chunk tables of the tensor chapter). `common::model::descriptors` re-exports this module.

use super::error::{invalid, not_implemented};
use super::UnitError;

/// Swizzle modes of the shared-memory descriptor, bits 61-63 (PTX ISA Table 40: values 3, 5
/// and 7 are invalid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Swizzle {
    None = 0,
    B128Atom32 = 1,
    B128 = 2,
    B64 = 4,
    B32 = 6,
}

impl Swizzle {
    /// The mode of descriptor bits 61-63.
    pub fn from_bits(bits: u32) -> Result<Swizzle, UnitError> {
        match bits {
            0 => Ok(Swizzle::None),
            1 => Ok(Swizzle::B128Atom32),
            2 => Ok(Swizzle::B128),
            4 => Ok(Swizzle::B64),
            6 => Ok(Swizzle::B32),
            _ => Err(invalid(
                "shared-memory descriptor",
                format!("swizzle mode {bits} (bits 61-63) is invalid: the PTX ISA defines 0, 1, 2, 4 and 6"),
            )),
        }
    }
}

/// Decoded shared-memory matrix descriptor (raw fields, byte units where the field is encoded
/// `>> 4`).
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

/// The fields of a shared-memory descriptor, unchecked (PTX ISA Table 40).
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

/// Decoded instruction descriptor of kind::f16 (PTX ISA Table 42), unchecked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstrDesc {
    pub d_format: u32,
    pub a_format: u32,
    pub b_format: u32,
    pub a_major: u32,
    pub b_major: u32,
    pub n: u32,
    pub m: u32,
    /// Bits 0-1: sparsity selector.
    pub sparsity_selector: u32,
    /// Bit 2: 1 = sparse A.
    pub sparse: u32,
    /// Bit 3: saturate (integer kinds only).
    pub saturate: u32,
    /// Bits 13 and 14.
    pub negate_a: u32,
    pub negate_b: u32,
    /// Bits 30-31: maximum shift of B reuse (`.ws` only).
    pub max_shift: u32,
    /// Reserved bits 6, 23 and 29, in place.
    pub reserved: u32,
}

/// Mirror of `bw::make_idesc_f16`.
pub fn make_idesc_f16(m: u32, n: u32, bf16: bool) -> u32 {
    let fmt = if bf16 { 1 } else { 0 };
    (1 << 4) | (fmt << 7) | (fmt << 10) | (((n >> 3) & 0x3F) << 17) | (((m >> 4) & 0x1F) << 24)
}

/// The fields of an instruction descriptor, unchecked (PTX ISA Table 42).
pub fn decode_idesc(d: u32) -> InstrDesc {
    InstrDesc {
        d_format: (d >> 4) & 0x3,
        a_format: (d >> 7) & 0x7,
        b_format: (d >> 10) & 0x7,
        a_major: (d >> 15) & 1,
        b_major: (d >> 16) & 1,
        n: ((d >> 17) & 0x3F) << 3,
        m: ((d >> 24) & 0x1F) << 4,
        sparsity_selector: d & 0x3,
        sparse: (d >> 2) & 1,
        saturate: (d >> 3) & 1,
        negate_a: (d >> 13) & 1,
        negate_b: (d >> 14) & 1,
        max_shift: (d >> 30) & 0x3,
        reserved: d & ((1 << 6) | (1 << 23) | (1 << 29)),
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

/// As [`sw128_offset`] for the 64-byte swizzle: rows of 64 B (32 16-bit elements), the pattern
/// repeating every 512 B (PTX ISA "Swizzling Modes": 64-byte table, 512-byte aligned start).
pub fn sw64_offset(row: u32, k: u32) -> u32 {
    SwizzlePattern::B64.apply(row * 64 + k * 2)
}

/// As [`sw128_offset`] for the 32-byte swizzle: rows of 32 B (16 16-bit elements), the pattern
/// repeating every 256 B.
pub fn sw32_offset(row: u32, k: u32) -> u32 {
    SwizzlePattern::B32.apply(row * 32 + k * 2)
}

/// The byte permutation of a swizzle mode with 16-byte atomicity, as a function of the
/// shared-memory address (PTX ISA "Swizzling Modes"): in each 128-byte line, the 16-byte chunk
/// index (address bits 4..) is XORed with the line index modulo the pattern's height (address
/// bits 7..): 2 lines for 32B, 4 for 64B, 8 for 128B. The ISA's tables show exactly these rows
/// ("1 0 3 2 5 4 7 6", "2 3 0 1 6 7 4 5", ...), and its base-offset formula `(addr / 128) % 8`
/// says the phase comes from the address itself. An involution: applying it twice is identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwizzlePattern {
    None,
    B32,
    B64,
    B128,
}

impl SwizzlePattern {
    /// Bytes per swizzle row (the "span" of the driver's CUtensorMapSwizzle comments); 16 for
    /// none, the unit of the no-swizzle K-major layout.
    pub fn span(self) -> u32 {
        match self {
            SwizzlePattern::None => 16,
            SwizzlePattern::B32 => 32,
            SwizzlePattern::B64 => 64,
            SwizzlePattern::B128 => 128,
        }
    }

    /// Bytes after which the pattern repeats (PTX ISA: 256, 512, 1024).
    pub fn repeat(self) -> u32 {
        match self {
            SwizzlePattern::None => 16,
            SwizzlePattern::B32 => 256,
            SwizzlePattern::B64 => 512,
            SwizzlePattern::B128 => 1024,
        }
    }

    fn mask(self) -> u32 {
        match self {
            SwizzlePattern::None => 0,
            SwizzlePattern::B32 => 1,
            SwizzlePattern::B64 => 3,
            SwizzlePattern::B128 => 7,
        }
    }

    /// The physical shared-memory address of logical address `addr`.
    #[inline]
    pub fn apply(self, addr: u32) -> u32 {
        addr ^ (((addr >> 7) & self.mask()) << 4)
    }
}

/// A K-major MMA operand decoded and checked from its shared-memory descriptor: everything the
/// simulated MMA needs to find element (row, k) of a K = 16 slice of 16-bit elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KMajorOperand {
    pub start: u32,
    pub lbo: u32,
    pub sbo: u32,
    pub pattern: SwizzlePattern,
}

impl KMajorOperand {
    /// Decodes and checks descriptor `d` (PTX ISA Table 40): fixed bits 46-48 = 0b001, bits
    /// 53-60 and the gaps 14-15, 30-31 zero, a defined swizzle mode. Not implemented (an error,
    /// never a guess): the absolute LBO mode (bit 52), a non-zero base offset, a start address
    /// inside a swizzle pattern (its row bits not 0: the ISA then wants a base offset whose
    /// effect the simulator does not model), and the 128B/32B-atom mode (PTX ISA: MN-major only
    /// except for kind::tf32).
    pub fn decode(d: u64) -> Result<KMajorOperand, UnitError> {
        const WHAT: &str = "shared-memory descriptor";
        let f = decode_smem_desc(d);
        if f.version != 1 {
            return Err(invalid(
                WHAT,
                format!(
                    "{d:#018x}: bits 46-48 are {:#05b}, must be the fixed 0b001 of sm_100",
                    f.version
                ),
            ));
        }
        let fixed_zero = (d >> 53) & 0xFF;
        let gaps = d & ((3u64 << 14) | (3u64 << 30));
        if fixed_zero != 0 || gaps != 0 {
            return Err(invalid(
                WHAT,
                format!("{d:#018x}: bits 14-15, 30-31 and 53-60 must be 0"),
            ));
        }
        let pattern = match Swizzle::from_bits(f.swizzle)? {
            Swizzle::None => SwizzlePattern::None,
            Swizzle::B32 => SwizzlePattern::B32,
            Swizzle::B64 => SwizzlePattern::B64,
            Swizzle::B128 => SwizzlePattern::B128,
            Swizzle::B128Atom32 => {
                return Err(invalid(
                    WHAT,
                    format!("{d:#018x}: swizzle mode 1 (128B with 32B atomicity) is for MN-major operands of kind::tf32 only, and this operand is K-major"),
                ))
            }
        };
        if f.lbo_mode != 0 {
            return Err(not_implemented(
                WHAT,
                format!("{d:#018x}: leading-dimension stride mode 1 (absolute address, bit 52)"),
            ));
        }
        if f.base_offset != 0 {
            return Err(not_implemented(
                WHAT,
                format!(
                    "{d:#018x}: matrix base offset {} (bits 49-51)",
                    f.base_offset
                ),
            ));
        }
        let rows_per_pattern = pattern.repeat() / 128;
        if pattern != SwizzlePattern::None
            && !(f.start_address >> 7).is_multiple_of(rows_per_pattern)
        {
            return Err(not_implemented(
                WHAT,
                format!(
                    "{d:#018x}: start address {:#x} is not on a {}-byte swizzle-pattern boundary (plus an offset inside its first 128-byte line) with base offset 0",
                    f.start_address,
                    pattern.repeat()
                ),
            ));
        }
        Ok(KMajorOperand {
            start: f.start_address,
            lbo: f.lbo,
            sbo: f.sbo,
            pattern,
        })
    }

    /// The shared-memory addresses of the two 16-byte chunks (k = 0..7 and k = 8..15) of row
    /// `r` of a K = 16 slice of 16-bit elements (PTX ISA "Shared Memory Matrix Layout", K-major
    /// canonical layouts): 8-row groups `sbo` apart; inside a group, rows one swizzle span
    /// apart with the two chunks adjacent, swizzled by address; without swizzle, 8x16-byte core
    /// matrices with rows 16 B apart and the second K chunk `lbo` after the first.
    #[inline]
    pub fn chunk_addrs(&self, r: u32) -> [u32; 2] {
        let group = self.start + (r / 8) * self.sbo;
        match self.pattern {
            SwizzlePattern::None => {
                let row = group + (r % 8) * 16;
                [row, row + self.lbo]
            }
            p => {
                let row = group + (r % 8) * p.span();
                [p.apply(row), p.apply(row + 16)]
            }
        }
    }

    /// Checks that a K = 16 slice of 16-bit elements (32 bytes) starting at this operand's
    /// start address stays inside one swizzle row, as the canonical layouts require.
    pub fn check_k16(&self) -> Result<(), UnitError> {
        let span = self.pattern.span();
        if self.pattern != SwizzlePattern::None && (self.start % span) + 32 > span {
            return Err(invalid(
                "shared-memory descriptor",
                format!(
                    "start address {:#x}: a K = 16 slice of 16-bit elements (32 bytes) crosses the {span}-byte swizzle row",
                    self.start
                ),
            ));
        }
        if self.pattern == SwizzlePattern::None && !self.start.is_multiple_of(16) {
            return Err(invalid(
                "shared-memory descriptor",
                format!("start address {:#x} is not 16-byte aligned", self.start),
            ));
        }
        Ok(())
    }
}

/// A kind::f16 instruction descriptor checked for what the simulator implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct F16Instr {
    /// Rows of D over the whole CTA group (cta_group::2: both CTAs).
    pub m: u32,
    pub n: u32,
    /// Operand format: false = F16, true = BF16 (A and B alike).
    pub bf16: bool,
}

impl F16Instr {
    /// Decodes and checks `d` for `tcgen05.mma.cta_group::{cta_group}.kind::f16` (PTX ISA
    /// Table 42 and the kind::f16 shapes). Implemented: dense, F32 accumulator, A and B both
    /// F16 or both BF16, K-major, no negation; M = 128 with cta_group::1 (data-path layout D:
    /// row i in lane i) or M = 256 with cta_group::2 (each CTA's 128 rows in its lanes 0-127);
    /// N a multiple of 16 from 16 to 256.
    pub fn decode(d: u32, cta_group: u32) -> Result<F16Instr, UnitError> {
        const WHAT: &str = "instruction descriptor (kind::f16)";
        let f = decode_idesc(d);
        if f.reserved != 0 {
            return Err(invalid(
                WHAT,
                format!("{d:#010x}: reserved bits 6, 23 and 29 must be 0"),
            ));
        }
        if f.sparse != 0 {
            return Err(not_implemented(
                WHAT,
                format!("{d:#010x}: sparse A (bit 2)"),
            ));
        }
        if f.sparsity_selector != 0 {
            return Err(invalid(
                WHAT,
                format!("{d:#010x}: sparsity selector (bits 0-1) set on a dense MMA"),
            ));
        }
        if f.saturate != 0 {
            return Err(invalid(
                WHAT,
                format!("{d:#010x}: saturate (bit 3) is for kind::i8 only"),
            ));
        }
        match f.d_format {
            1 => {}
            0 => {
                return Err(not_implemented(
                    WHAT,
                    format!("{d:#010x}: D format F16 (bits 4-5 = 0)"),
                ))
            }
            x => {
                return Err(invalid(
                    WHAT,
                    format!("{d:#010x}: D format {x} (bits 4-5): kind::f16 has F16 = 0, F32 = 1"),
                ))
            }
        }
        for (name, fmt) in [("A", f.a_format), ("B", f.b_format)] {
            if fmt > 1 {
                return Err(invalid(
                    WHAT,
                    format!("{d:#010x}: {name} format {fmt}: kind::f16 has F16 = 0, BF16 = 1"),
                ));
            }
        }
        if f.a_format != f.b_format {
            return Err(not_implemented(
                WHAT,
                format!(
                    "{d:#010x}: A format {} with B format {} (mixed F16/BF16)",
                    f.a_format, f.b_format
                ),
            ));
        }
        if f.negate_a != 0 || f.negate_b != 0 {
            return Err(not_implemented(
                WHAT,
                format!("{d:#010x}: negate A/B (bits 13-14)"),
            ));
        }
        if f.a_major != 0 || f.b_major != 0 {
            return Err(not_implemented(
                WHAT,
                format!(
                    "{d:#010x}: MN-major (transposed) A or B (bits 15-16 = {}/{})",
                    f.a_major, f.b_major
                ),
            ));
        }
        if f.max_shift != 0 {
            return Err(not_implemented(
                WHAT,
                format!("{d:#010x}: maximum B-reuse shift (bits 30-31, .ws only)"),
            ));
        }
        let (implemented, legal): (u32, &[u32]) = match cta_group {
            1 => (128, &[64, 128]),
            2 => (256, &[128, 256]),
            _ => {
                return Err(invalid(
                    "tcgen05.mma",
                    format!("cta_group::{cta_group}: the PTX ISA has ::1 and ::2"),
                ))
            }
        };
        if f.m != implemented {
            return Err(if legal.contains(&f.m) {
                not_implemented(
                    WHAT,
                    format!("{d:#010x}: M = {} with cta_group::{cta_group}", f.m),
                )
            } else {
                invalid(
                    WHAT,
                    format!(
                        "{d:#010x}: M = {} (bits 24-28): cta_group::{cta_group} kind::f16 has M in {legal:?}",
                        f.m
                    ),
                )
            });
        }
        if f.n < 16 || f.n > 256 || !f.n.is_multiple_of(16) {
            return Err(invalid(
                WHAT,
                format!(
                    "{d:#010x}: N = {} (bits 17-22): M = {} needs N a multiple of 16 from 16 to 256",
                    f.n, f.m
                ),
            ));
        }
        Ok(F16Instr {
            m: f.m,
            n: f.n,
            bf16: f.a_format == 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_decode_of_the_kernels_descriptors() {
        // make_smem_desc_sw128(0x400, 1024): start 0x400, SBO 1024, 128B swizzle.
        let op = KMajorOperand::decode(make_smem_desc_sw128(0x400, 1024)).unwrap();
        assert_eq!(
            op,
            KMajorOperand {
                start: 0x400,
                lbo: 16,
                sbo: 1024,
                pattern: SwizzlePattern::B128
            }
        );
        op.check_k16().unwrap();
        // K steps of 32 bytes inside the first 128-byte line keep the pattern boundary.
        for k in 0..4 {
            let op = KMajorOperand::decode(make_smem_desc_sw128(0x8000 + 32 * k, 1024)).unwrap();
            op.check_k16().unwrap();
        }
        let i = F16Instr::decode(make_idesc_f16(128, 256, true), 1).unwrap();
        assert_eq!(
            i,
            F16Instr {
                m: 128,
                n: 256,
                bf16: true
            }
        );
        let i = F16Instr::decode(make_idesc_f16(256, 128, false), 2).unwrap();
        assert_eq!((i.m, i.n, i.bf16), (256, 128, false));
    }

    #[test]
    fn cutlass_goldens_pass_the_checked_decoders() {
        // Descriptors CUTLASS's own sm100 code produced (recorded with their provenance in
        // tests/tests/descriptor_goldens.rs): an encoder other than ours.
        for (golden, group, m, n, bf16) in [
            (0x0840_0010, 1, 128, 256, false),
            (0x0840_0490, 1, 128, 256, true),
            (0x1040_0010, 2, 256, 256, false),
            (0x1040_0490, 2, 256, 256, true),
            (0x0820_0010, 1, 128, 128, false),
        ] {
            assert_eq!(
                F16Instr::decode(golden, group).unwrap(),
                F16Instr { m, n, bf16 },
                "{golden:#010x}"
            );
        }
        for (golden, start) in [
            (0x4000_4040_0001_0040u64, 0x400),
            (0x4000_4040_0001_0046, 0x460),
            (0x4000_4040_0001_0806, 0x8060),
            (0x4000_4040_0001_1c44, 0x1c440),
        ] {
            let op = KMajorOperand::decode(golden).unwrap();
            op.check_k16().unwrap();
            assert_eq!(
                (op.start, op.sbo, op.pattern),
                (start, 1024, SwizzlePattern::B128)
            );
        }
    }

    #[test]
    fn checked_decode_rejects_what_is_not_modelled_by_name() {
        let good = make_smem_desc_sw128(0x400, 1024);
        let err = |d: u64| KMajorOperand::decode(d).unwrap_err().to_string();
        assert!(err(good & !(1 << 46)).contains("0b001"));
        assert!(err(good | (1 << 55)).contains("53-60"));
        assert!(err(good | (1 << 52)).contains("bit 52"));
        assert!(err(good | (1 << 49)).contains("base offset"));
        assert!(err((good & !(7 << 61)) | (3 << 61)).contains("invalid"));
        assert!(err((good & !(7 << 61)) | (1 << 61)).contains("MN-major"));
        // A tile starting 128 B into a 1024-B pattern would need a base offset.
        assert!(matches!(
            KMajorOperand::decode(make_smem_desc_sw128(0x480, 1024)),
            Err(UnitError::NotImplemented { .. })
        ));
        // 96 bytes into the row is the last K step; 112 bytes in, the 32-byte slice crosses
        // the 128-byte row.
        let op = KMajorOperand::decode(make_smem_desc_sw128(0x460, 1024)).unwrap();
        assert!(op.check_k16().is_ok());
        let op = KMajorOperand::decode(make_smem_desc_sw128(0x470, 1024)).unwrap();
        assert!(op.check_k16().is_err());

        let idesc = make_idesc_f16(128, 256, false);
        let ierr = |d: u32, g: u32| F16Instr::decode(d, g).unwrap_err();
        let msg = |e: UnitError| e.to_string();
        assert!(msg(ierr(idesc | (1 << 15), 1)).contains("MN-major"));
        assert!(msg(ierr(idesc | (1 << 16), 1)).contains("MN-major"));
        assert!(msg(ierr(idesc | (1 << 2), 1)).contains("sparse"));
        assert!(msg(ierr(idesc | (1 << 13), 1)).contains("negate"));
        assert!(msg(ierr(idesc & !(1 << 4), 1)).contains("D format F16"));
        assert!(msg(ierr(idesc | (1 << 23), 1)).contains("reserved"));
        assert!(msg(ierr(idesc | (1 << 7), 1)).contains("mixed"));
        assert!(matches!(
            ierr(make_idesc_f16(64, 64, false), 1),
            UnitError::NotImplemented { .. }
        ));
        assert!(matches!(ierr(idesc, 2), UnitError::NotImplemented { .. }));
        assert!(matches!(
            ierr(make_idesc_f16(128, 24, false), 1),
            UnitError::Invalid { .. }
        ));
        assert!(matches!(ierr(idesc, 3), UnitError::Invalid { .. }));
    }

    #[test]
    fn swizzle_patterns_match_the_isa_tables() {
        // PTX ISA "Swizzling Modes": rows of 16-byte chunk numbers, one row per 128-byte line.
        let table = |p: SwizzlePattern, line: u32| -> Vec<u32> {
            (0..8)
                .map(|chunk| {
                    // Which logical chunk lands in physical chunk `chunk` of this line.
                    let phys = line * 128 + chunk * 16;
                    (p.apply(phys) % 128) / 16
                })
                .collect()
        };
        assert_eq!(table(SwizzlePattern::B32, 1), [1, 0, 3, 2, 5, 4, 7, 6]);
        assert_eq!(table(SwizzlePattern::B32, 2), [0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(table(SwizzlePattern::B64, 2), [2, 3, 0, 1, 6, 7, 4, 5]);
        assert_eq!(table(SwizzlePattern::B64, 3), [3, 2, 1, 0, 7, 6, 5, 4]);
        assert_eq!(table(SwizzlePattern::B64, 4), [0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(table(SwizzlePattern::B128, 4), [4, 5, 6, 7, 0, 1, 2, 3]);
        assert_eq!(table(SwizzlePattern::B128, 7), [7, 6, 5, 4, 3, 2, 1, 0]);
        for p in [
            SwizzlePattern::None,
            SwizzlePattern::B32,
            SwizzlePattern::B64,
            SwizzlePattern::B128,
        ] {
            for a in 0..4096 {
                assert_eq!(p.apply(p.apply(a)), a, "an involution");
                assert_eq!(
                    p.apply(a) / p.repeat(),
                    a / p.repeat(),
                    "stays in its pattern"
                );
            }
        }
        // The 128B pattern is the one sw128_offset describes.
        for row in 0..64 {
            for k in 0..64 {
                assert_eq!(
                    sw128_offset(row, k),
                    SwizzlePattern::B128.apply(row * 128 + k * 2)
                );
            }
        }
        assert_eq!(
            sw64_offset(2, 0),
            128 + 16,
            "line 1 of the 64B pattern swaps chunk pairs"
        );
        assert_eq!(sw32_offset(4, 0), 128 + 16);
        assert_eq!(
            sw32_offset(8, 0),
            256,
            "the 32B pattern repeats every 256 B"
        );
    }

    #[test]
    fn operand_rows_follow_the_canonical_k_major_layouts() {
        let op = KMajorOperand::decode(make_smem_desc_sw128(0x400 + 32, 1024)).unwrap();
        // Row 9: group 1 (SBO 1024), line 1 of it; K offset 32 B = chunks 2 and 3, XOR 1.
        assert_eq!(
            op.chunk_addrs(9),
            [0x400 + 1024 + 128 + 3 * 16, 0x400 + 1024 + 128 + 2 * 16]
        );
        for r in 0..128 {
            for (c, addr) in op.chunk_addrs(r).into_iter().enumerate() {
                assert_eq!(addr, 0x400 + sw128_offset(r, 16 + 8 * c as u32));
            }
        }
        // No swizzle: core matrices of 8 rows x 16 B, K chunks LBO apart.
        let d = (0x200u64 >> 4) | ((256u64 >> 4) << 16) | ((128u64 >> 4) << 32) | (1 << 46);
        let op = KMajorOperand::decode(d).unwrap();
        assert_eq!(op.pattern, SwizzlePattern::None);
        assert_eq!(op.chunk_addrs(3), [0x200 + 48, 0x200 + 48 + 256]);
        assert_eq!(op.chunk_addrs(8), [0x200 + 128, 0x200 + 128 + 256]);
    }
}
