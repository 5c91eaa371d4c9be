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

/// Any shared-memory descriptor from its fields (PTX ISA Table 40): byte values for the start
/// address, LBO and SBO (encoded `>> 4`), the swizzle mode, the matrix base offset; relative
/// LBO mode. For tests and figures of layouts the kernels' builders do not produce.
pub fn encode_smem_desc(start: u32, lbo: u32, sbo: u32, swizzle: Swizzle, base_offset: u32) -> u64 {
    let enc = |x: u32| u64::from((x & 0x3FFFF) >> 4);
    enc(start)
        | (enc(lbo) << 16)
        | (enc(sbo) << 32)
        | (1u64 << 46)
        | (u64::from(base_offset & 7) << 49)
        | ((swizzle as u64) << 61)
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

/// [`make_idesc_f16`] with the transpose bits (PTX ISA Table 42 bits 15 and 16): `a_mn` makes
/// A M-major, `b_mn` makes B N-major.
pub fn make_idesc_f16_major(m: u32, n: u32, bf16: bool, a_mn: bool, b_mn: bool) -> u32 {
    make_idesc_f16(m, n, bf16) | (u32::from(a_mn) << 15) | (u32::from(b_mn) << 16)
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

/// Where a shared-memory MMA operand's rows run: K-major (each row's K elements contiguous, the
/// instruction descriptor's transpose bit 0) or MN-major (transpose bit 1: each K index's M or N
/// elements contiguous). PTX ISA 9.7.16.10.6 "Shared Memory Layout and Swizzling".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Major {
    K,
    Mn,
}

/// An MMA operand of 16-bit elements decoded and checked from its shared-memory descriptor:
/// everything the simulated MMA and `tcgen05.cp` need to find element (row, k) of a K = 16 slice.
/// A row is an M row of A or an N row of B (a row of the matrix in the `.cp` source).
///
/// The canonical layouts are PTX ISA 9.7.16.3.3 "Canonical Layouts" (T = 8 16-bit elements =
/// 16 bytes), with the strides' meanings of 9.7.16.3.1.1 and 9.7.16.3.2:
/// - K-major, no swizzle: `((8,m),(T,2k)):((1T,SBO),(1,LBO))`: 8-row core matrices of 16-byte
///   rows, SBO between 8-row groups, LBO between the two 8-element K chunks;
/// - K-major, swizzle span S: `((8,m),(T,2k)):((S/2,SBO),(1,T))`: rows S bytes apart, K
///   contiguous, SBO between 8-row groups, LBO unused ("assumed to be 1");
/// - MN-major, no swizzle ("interleave"): `((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))`: 8 rows in one
///   16-byte chunk, K indices 16 bytes apart, SBO between 8-row groups, LBO between 8-index K
///   groups;
/// - MN-major, swizzle span S: `((T,S/16,m),(8,k)):((1,T,LBO),(S/2,SBO))`: S/2 rows in one
///   S-byte line, K indices S bytes apart, LBO between S/2-row blocks, SBO between 8-index K
///   groups.
///
/// The swizzle then permutes 16-byte chunks by address ([`SwizzlePattern::apply`]): with the
/// matrix base offset the ISA requires (checked at decode), the phase of the pattern is the
/// address's own, the layout TMA writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmemOperand {
    pub start: u32,
    pub lbo: u32,
    pub sbo: u32,
    pub pattern: SwizzlePattern,
    pub major: Major,
}

/// The K-major operands of `tcgen05.cp` and of an MMA whose transpose bits are 0.
pub type KMajorOperand = SmemOperand;

impl SmemOperand {
    /// [`Self::decode_major`] for a K-major operand.
    pub fn decode(d: u64) -> Result<SmemOperand, UnitError> {
        Self::decode_major(d, Major::K)
    }

    /// Decodes and checks descriptor `d` (PTX ISA 9.7.16.4.1, Table 40) for an operand of
    /// 16-bit elements laid out `major`: fixed bits 46-48 = 0b001, bits 53-60 and the gaps
    /// 14-15, 30-31 zero, a defined swizzle mode, and the rules below.
    ///
    /// Matrix base offset (bits 49-51), PTX ISA Table 41 and the text after it: 0 when the
    /// pattern starts on its boundary (1024 B for 128B swizzle, 512 B for 64B, 256 B for 32B),
    /// else `(start >> 7) & 7`. Any other value is undefined, so it is refused rather than given
    /// a meaning. The ISA defines it only for a swizzle pattern, so with no swizzle it must be 0.
    ///
    /// Leading-dimension stride mode (bit 52): 1 (LBO an absolute address) is for a K of 48
    /// bytes, which kind::f16 (32-byte K) never has, and the ISA supports it on sm_103a only
    /// (9.7.16.4.1.1 "Target ISA Note"; 9.7.16.3.1.2.1 also limits it to K-major 128B swizzle
    /// with base offset 0): refused on this sm_100a model.
    ///
    /// Swizzle mode 1 (128B with 32B atomicity): PTX ISA Table 54 forbids it for MN-major
    /// 16-bit operands; for K-major ones it lists it, but Table 55 gives no K-major atom for it
    /// ("–"), so the simulator refuses it as not implemented rather than guess a layout.
    pub fn decode_major(d: u64, major: Major) -> Result<SmemOperand, UnitError> {
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
                return Err(match major {
                    Major::Mn => invalid(
                        WHAT,
                        format!("{d:#018x}: swizzle mode 1 (128B with 32B atomicity) with an MN-major 16-bit operand: PTX ISA Table 54 allows it for MN-major 32-bit (tf32) operands only"),
                    ),
                    Major::K => not_implemented(
                        WHAT,
                        format!("{d:#018x}: swizzle mode 1 (128B with 32B atomicity) with a K-major operand (PTX ISA Table 55 gives no K-major atom for it)"),
                    ),
                })
            }
        };
        if f.lbo_mode != 0 {
            return Err(invalid(
                WHAT,
                format!("{d:#018x}: leading-dimension stride mode 1 (absolute address, bit 52) is supported on sm_103a only (PTX ISA 9.7.16.4.1.1), and only for a 48-byte K, which kind::f16 does not have"),
            ));
        }
        if pattern == SwizzlePattern::None {
            if f.base_offset != 0 {
                return Err(invalid(
                    WHAT,
                    format!("{d:#018x}: matrix base offset {} (bits 49-51) with no swizzle: the PTX ISA defines the base offset only for a swizzle pattern (Table 41)", f.base_offset),
                ));
            }
        } else {
            let lines = pattern.repeat() / 128;
            let phase = (f.start_address >> 7) % lines;
            let want = if phase == 0 {
                0
            } else {
                (f.start_address >> 7) & 7
            };
            if f.base_offset != want {
                return Err(invalid(
                    WHAT,
                    format!(
                        "{d:#018x}: matrix base offset {} (bits 49-51), but the start address {:#x} is {} the {}-byte boundary of its swizzle pattern, so the PTX ISA (Table 41 and the formula after it) requires {want}",
                        f.base_offset,
                        f.start_address,
                        if phase == 0 { "on" } else { "off" },
                        pattern.repeat()
                    ),
                ));
            }
        }
        Ok(SmemOperand {
            start: f.start_address,
            lbo: f.lbo,
            sbo: f.sbo,
            pattern,
            major,
        })
    }

    /// K-major: the shared-memory addresses of the two 16-byte chunks (k = 0..7 and k = 8..15)
    /// of row `r` of a K = 16 slice: 8-row groups `sbo` apart; inside a group, rows one swizzle
    /// span apart with the two chunks adjacent, swizzled by address; without swizzle, 8x16-byte
    /// core matrices with rows 16 B apart and the second K chunk `lbo` after the first.
    #[inline]
    pub fn chunk_addrs(&self, r: u32) -> [u32; 2] {
        debug_assert_eq!(self.major, Major::K);
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

    /// MN-major: the shared-memory address of the 16-byte chunk holding rows `8 g .. 8 g + 7`
    /// at K index `k` (0..15) of a K = 16 slice (the MN-major canonical layouts above).
    #[inline]
    pub fn mn_chunk_addr(&self, g: u32, k: u32) -> u32 {
        debug_assert_eq!(self.major, Major::Mn);
        match self.pattern {
            SwizzlePattern::None => self.start + g * self.sbo + (k % 8) * 16 + (k / 8) * self.lbo,
            p => {
                let per_line = p.span() / 16;
                p.apply(
                    self.start
                        + (g % per_line) * 16
                        + (g / per_line) * self.lbo
                        + (k % 8) * p.span()
                        + (k / 8) * self.sbo,
                )
            }
        }
    }

    /// Every 16-byte chunk of a K = 16 slice of `rows` rows (a multiple of 8), each with what
    /// it holds: `(address, row, k, along_k)`: 8 elements from (row, k) on, along K when
    /// `along_k` (K-major), else along the rows (MN-major).
    pub fn chunks(&self, rows: u32) -> Vec<(u32, u32, u32, bool)> {
        let mut out = Vec::with_capacity(rows as usize * 2);
        match self.major {
            Major::K => {
                for r in 0..rows {
                    let [a, b] = self.chunk_addrs(r);
                    out.push((a, r, 0, true));
                    out.push((b, r, 8, true));
                }
            }
            Major::Mn => {
                for g in 0..rows.div_ceil(8) {
                    for k in 0..16 {
                        out.push((self.mn_chunk_addr(g, k), 8 * g, k, false));
                    }
                }
            }
        }
        out
    }

    /// Checks that a K = 16 slice of 16-bit elements (32 bytes) starting at this operand's
    /// start address stays inside one swizzle row, as the canonical layouts require (K-major).
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
        Ok(())
    }

    /// Checks the slice of `rows` rows an MMA reads: K-major, [`Self::check_k16`]; MN-major
    /// with a swizzle, the rows read from one swizzle line (up to span / 2 of them) stay inside
    /// it, the same rule for the other dimension (the canonical layout puts rows
    /// `0 .. span / 2` of an atom in one line).
    pub fn check_slice(&self, rows: u32) -> Result<(), UnitError> {
        match self.major {
            Major::K => self.check_k16(),
            Major::Mn => {
                let span = self.pattern.span();
                let bytes = (2 * rows).min(span);
                if self.pattern != SwizzlePattern::None && (self.start % span) + bytes > span {
                    return Err(invalid(
                        "shared-memory descriptor",
                        format!(
                            "start address {:#x}: the {bytes} bytes of an MN-major swizzle line the operand reads cross the {span}-byte swizzle row",
                            self.start
                        ),
                    ));
                }
                Ok(())
            }
        }
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
    /// Bit 15 (transpose A): A is M-major.
    pub a_major: Major,
    /// Bit 16 (transpose B): B is N-major.
    pub b_major: Major,
}

impl F16Instr {
    /// Decodes and checks `d` for `tcgen05.mma.cta_group::{cta_group}.kind::f16` (PTX ISA
    /// Table 42 and Table 39 "Various combinations of .kind and shapes"). Implemented: dense,
    /// F32 accumulator, A and B both F16 or both BF16, either major-ness (bits 15-16, 9.7.16.10.6),
    /// no negation, every dense non-`.ws` shape: cta_group::1 with M = 64 or 128 and N a
    /// multiple of 8 from 8 to 256; cta_group::2 with M = 128 or 256 and N a multiple of 16
    /// from 16 to 256.
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
        if f.max_shift != 0 {
            return Err(not_implemented(
                WHAT,
                format!("{d:#010x}: maximum B-reuse shift (bits 30-31, .ws only)"),
            ));
        }
        // PTX ISA Table 39, kind::f16 without .ws: the M values and the N step of each group.
        let (legal_m, n_step): (&[u32], u32) = match cta_group {
            1 => (&[64, 128], 8),
            2 => (&[128, 256], 16),
            _ => {
                return Err(invalid(
                    "tcgen05.mma",
                    format!("cta_group::{cta_group}: the PTX ISA has ::1 and ::2"),
                ))
            }
        };
        if !legal_m.contains(&f.m) {
            return Err(invalid(
                WHAT,
                format!(
                    "{d:#010x}: M = {} (bits 24-28): cta_group::{cta_group} kind::f16 has M in {legal_m:?}",
                    f.m
                ),
            ));
        }
        if f.n < n_step || f.n > 256 || !f.n.is_multiple_of(n_step) {
            return Err(invalid(
                WHAT,
                format!(
                    "{d:#010x}: N = {} (bits 17-22): cta_group::{cta_group} needs N a multiple of {n_step} from {n_step} to 256",
                    f.n
                ),
            ));
        }
        let major = |bit: u32| if bit == 0 { Major::K } else { Major::Mn };
        Ok(F16Instr {
            m: f.m,
            n: f.n,
            bf16: f.a_format == 1,
            a_major: major(f.a_major),
            b_major: major(f.b_major),
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
                pattern: SwizzlePattern::B128,
                major: Major::K,
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
                bf16: true,
                a_major: Major::K,
                b_major: Major::K,
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
                F16Instr {
                    m,
                    n,
                    bf16,
                    a_major: Major::K,
                    b_major: Major::K
                },
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
        assert!(err(good | (1 << 52)).contains("sm_103a"));
        assert!(err(good | (1 << 49)).contains("base offset"));
        assert!(err((good & !(7 << 61)) | (3 << 61)).contains("invalid"));
        assert!(matches!(
            KMajorOperand::decode((good & !(7 << 61)) | (1 << 61)),
            Err(UnitError::NotImplemented { .. })
        ));
        assert!(matches!(
            SmemOperand::decode_major((good & !(7 << 61)) | (1 << 61), Major::Mn),
            Err(UnitError::Invalid { .. })
        ));
        // A tile starting 128 B into a 1024-B pattern needs base offset 1 (PTX ISA Table 41).
        assert!(err(make_smem_desc_sw128(0x480, 1024)).contains("requires 1"));
        assert!(KMajorOperand::decode(make_smem_desc_sw128(0x480, 1024) | (1 << 49)).is_ok());
        // 96 bytes into the row is the last K step; 112 bytes in, the 32-byte slice crosses
        // the 128-byte row.
        let op = KMajorOperand::decode(make_smem_desc_sw128(0x460, 1024)).unwrap();
        assert!(op.check_k16().is_ok());
        let op = KMajorOperand::decode(make_smem_desc_sw128(0x470, 1024)).unwrap();
        assert!(op.check_k16().is_err());

        let idesc = make_idesc_f16(128, 256, false);
        let ierr = |d: u32, g: u32| F16Instr::decode(d, g).unwrap_err();
        let msg = |e: UnitError| e.to_string();
        assert!(msg(ierr(idesc | (1 << 2), 1)).contains("sparse"));
        assert!(msg(ierr(idesc | (1 << 13), 1)).contains("negate"));
        assert!(msg(ierr(idesc & !(1 << 4), 1)).contains("D format F16"));
        assert!(msg(ierr(idesc | (1 << 23), 1)).contains("reserved"));
        assert!(msg(ierr(idesc | (1 << 7), 1)).contains("mixed"));
        // PTX ISA Table 39: N steps of 8 with cta_group::1, of 16 with ::2; M = 64 is ::1 only,
        // M = 256 ::2 only.
        assert!(F16Instr::decode(make_idesc_f16(64, 8, false), 1).is_ok());
        assert!(F16Instr::decode(make_idesc_f16(128, 24, false), 1).is_ok());
        assert!(F16Instr::decode(make_idesc_f16(128, 16, false), 2).is_ok());
        assert!(F16Instr::decode(idesc, 2).is_ok());
        for (m, n, g) in [
            (128, 24, 2),
            (64, 64, 2),
            (256, 64, 1),
            (128, 0, 1),
            (32, 64, 1),
        ] {
            assert!(
                matches!(
                    ierr(make_idesc_f16(m, n, false), g),
                    UnitError::Invalid { .. }
                ),
                "M = {m}, N = {n}, cta_group::{g}"
            );
        }
        let t = F16Instr::decode(make_idesc_f16_major(128, 64, false, true, false), 1).unwrap();
        assert_eq!((t.a_major, t.b_major), (Major::Mn, Major::K));
        let t = F16Instr::decode(make_idesc_f16_major(128, 64, false, false, true), 1).unwrap();
        assert_eq!((t.a_major, t.b_major), (Major::K, Major::Mn));
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
