//! Uninitialised memory (rule `uninitialised-read`), as compute-sanitizer's initcheck reports
//! it: shared memory starts each launch as a poison pattern, not zero (PTX ISA, "Shared State
//! Space": shared variables cannot be initialised, and nothing defines their contents at launch;
//! a simulator that hands out zeros would hide a kernel that accumulates into unwritten
//! memory), and a per-byte bitmap says which bytes something wrote in this launch. A thread's
//! read (`ld`, `atom`), an MMA's operand read through its descriptors, a TMA store's source
//! and a `tcgen05.cp`'s source are checked against it.
//!
//! What counts as a write: a generic store or atomic, an `mbarrier.init` (of the barrier's 8
//! bytes), and a TMA load's whole box, out-of-bound elements included (the ISA defines them:
//! zeros or the NaN the tensor map's fill mode asks for).
//!
//! Tensor memory: PTX ISA, "Tensor Memory Allocation" (9.7.16.1.2) and `tcgen05.alloc` define
//! which columns an allocation gives and nothing about what they hold, so columns nothing
//! wrote in this launch (a `tcgen05.mma`, `tcgen05.st` or `tcgen05.cp`) hold no defined value:
//! a `tcgen05.ld` of them, or an MMA that accumulates into them (`enable_input_d` set on the
//! first MMA of a tile, a classic bug), is `uninitialised-read` too ([`TmemWritten`]).
//!
//! Local memory: its owner calls [`poison_region`] on a thread's frame at launch and keeps a
//! [`Written`] beside it, as shared memory does here.

/// The byte every unwritten shared byte holds: 0xFF makes every f16, bf16 and f32 built from
/// it a NaN, so a value read from it that escapes the check is still seen in the output.
pub const POISON: u8 = 0xFF;

/// Fill a memory region with the poison pattern (what a launch starts it with).
pub fn poison_region(bytes: &mut [u8]) {
    bytes.fill(POISON);
}

/// Which bytes of a region something wrote in this launch: one bit a byte.
#[derive(Debug, Clone, Default)]
pub struct Written {
    bits: Vec<u64>,
}

impl Written {
    pub fn new(bytes: usize) -> Written {
        Written {
            bits: vec![0; bytes.div_ceil(64)],
        }
    }

    /// Bytes `off..off + len` were written.
    pub fn mark(&mut self, off: u32, len: u32) {
        let (mut i, end) = (off as usize, off as usize + len as usize);
        while i < end {
            let (w, b) = (i / 64, i % 64);
            let n = (64 - b).min(end - i);
            let m = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << b
            };
            if let Some(word) = self.bits.get_mut(w) {
                *word |= m;
            }
            i += n;
        }
    }

    /// The first byte of `off..off + len` nothing wrote, if any.
    pub fn first_unwritten(&self, off: u32, len: u32) -> Option<u32> {
        let (mut i, end) = (off as usize, off as usize + len as usize);
        while i < end {
            let (w, b) = (i / 64, i % 64);
            let n = (64 - b).min(end - i);
            let m = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << b
            };
            let have = self.bits.get(w).copied().unwrap_or(0) & m;
            if have != m {
                return Some((w * 64) as u32 + (!have & m).trailing_zeros());
            }
            i += n;
        }
        None
    }
}

/// Written cells of tensor memory: 128 lanes of 512 columns, one bit each.
#[derive(Debug, Clone)]
pub struct TmemWritten {
    lanes: Vec<Written>,
}

impl Default for TmemWritten {
    fn default() -> TmemWritten {
        TmemWritten {
            lanes: (0..128).map(|_| Written::new(512)).collect(),
        }
    }
}

impl TmemWritten {
    /// Columns `col..col + n` of lanes `lanes` were written.
    pub fn mark(&mut self, lanes: std::ops::Range<u32>, col: u32, n: u32) {
        let n = n.min(512u32.saturating_sub(col));
        for l in lanes {
            if let Some(w) = self.lanes.get_mut(l as usize) {
                w.mark(col, n);
            }
        }
    }

    /// The first (lane, column) of the block nothing wrote.
    pub fn first_unwritten(
        &self,
        lanes: std::ops::Range<u32>,
        col: u32,
        n: u32,
    ) -> Option<(u32, u32)> {
        let n = n.min(512u32.saturating_sub(col));
        lanes.into_iter().find_map(|l| {
            let w = self.lanes.get(l as usize)?;
            w.first_unwritten(col, n).map(|c| (l, c))
        })
    }
}

use crate::error::SimError;
use crate::machine::Machine;
use crate::units::tmem::{taddr_col, taddr_lane};

impl Machine<'_> {
    /// `what` by thread `t` reads `len` shared bytes of cluster CTA `cta` at `off`.
    pub(crate) fn check_init(
        &self,
        t: u32,
        cta: u32,
        off: u32,
        len: u32,
        what: &str,
    ) -> Result<(), SimError> {
        match self.ctas[cta as usize].init.first_unwritten(off, len) {
            None => Ok(()),
            Some(b) => {
                // Kept, not raised at once: a read of bytes nothing wrote yet may be one side
                // of a race with the write that comes later (two warps without a barrier), and
                // that race, reported when the write comes, is the bug to name. The first such
                // read is reported when its cluster finishes, unless something stops it first.
                let mut pending = self.uninit.borrow_mut();
                if pending.is_none() {
                    let op = match self.k.code.get(self.threads[t as usize].pc as usize) {
                        Some(i) if what.is_empty() => self.k.opcodes[i.key as usize].as_str(),
                        _ => what,
                    };
                    *pending = Some(self.rule(
                        t,
                        "uninitialised-read",
                        unwritten(op, cta, b, self.dyn_off),
                    ));
                }
                Ok(())
            }
        }
    }

    /// The same for an asynchronous operation issued at `line` by CTA `by`, warp `warp`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check_init_at(
        &self,
        line: (u32, u32),
        by: u32,
        warp: u32,
        cta: u32,
        ranges: &[(u32, u32)],
        what: &str,
    ) -> Result<(), SimError> {
        for &(lo, hi) in ranges {
            if let Some(b) = self.ctas[cta as usize].init.first_unwritten(lo, hi - lo) {
                // Kept, not raised at once: a read of bytes nothing wrote yet may be one side
                // of a race with the write that comes later (two warps without a barrier), and
                // that race, reported when the write comes, is the bug to name. The first such
                // read is reported when its cluster finishes, unless something stops it first.
                let mut pending = self.uninit.borrow_mut();
                if pending.is_none() {
                    *pending = Some(self.rule_at(
                        line,
                        by,
                        warp,
                        "uninitialised-read",
                        unwritten(what, cta, b, self.dyn_off),
                    ));
                }
                return Ok(());
            }
        }
        Ok(())
    }

    /// Shared bytes of an MMA's operands (both CTAs of a pair), checked when it reads them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check_mma_operands(
        &self,
        t: u32,
        cta: u32,
        cg2: bool,
        idesc: u32,
        a: u64,
        b: u64,
        line: (u32, u32),
    ) -> Result<(), SimError> {
        let Ok(reads) = crate::glue::mma_reads(idesc, a, b, if cg2 { 2 } else { 1 }) else {
            // The MMA unit reports a bad descriptor itself.
            return Ok(());
        };
        let warp = self.threads[t as usize].warp;
        let own = self.threads[t as usize].cta;
        for c in if cg2 { cta..cta + 2 } else { cta..cta + 1 } {
            self.check_init_at(line, own, warp, c, &reads, "tcgen05.mma (operand A or B)")?;
        }
        Ok(())
    }

    /// Shared bytes a `tcgen05.cp` of `bytes` a row reads through descriptor `desc`.
    pub(crate) fn check_cp_source(
        &self,
        t: u32,
        cta: u32,
        desc: u64,
        rows: u32,
        row_bytes: u32,
        line: (u32, u32),
    ) -> Result<(), SimError> {
        let Ok(op) = crate::units::descriptors::KMajorOperand::decode(desc) else {
            return Ok(());
        };
        let mut ranges = Vec::new();
        for r in 0..rows {
            for &a in op.chunk_addrs(r).iter().take((row_bytes / 16) as usize) {
                ranges.push((a, a + 16));
            }
        }
        let warp = self.threads[t as usize].warp;
        let own = self.threads[t as usize].cta;
        self.check_init_at(line, own, warp, cta, &ranges, "tcgen05.cp (source)")
    }
}

impl Machine<'_> {
    /// The accumulator an MMA of CTA `cta` (and its peer with `cg2`) writes at `d`: checked
    /// first when it accumulates, then marked written. Lanes: all 128 of each CTA for M = 128
    /// and M = 256 (a pair); other shapes are marked but not checked (their lane layout is
    /// not modelled here, and a check must not report what the MMA did write).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn mma_accumulator(
        &mut self,
        t: u32,
        cta: u32,
        cg2: bool,
        idesc: u32,
        d: u32,
        acc: bool,
        line: (u32, u32),
    ) -> Result<(), SimError> {
        let f = crate::units::descriptors::decode_idesc(idesc);
        let col = taddr_col(d);
        // An f32 accumulator takes a column an element; f16 packs two.
        let cols = if f.d_format == 1 { f.n } else { f.n / 2 };
        let full = f.m == 128 || (cg2 && f.m == 256);
        let ctas = if cg2 { cta..cta + 2 } else { cta..cta + 1 };
        if acc && full && taddr_lane(d) == 0 {
            let th = &self.threads[t as usize];
            let (by, warp) = (th.cta, th.warp);
            for c in ctas.clone() {
                if let Some((l, k)) = self.ctas[c as usize]
                    .tinit
                    .first_unwritten(0..128, col, cols)
                {
                    return Err(self.rule_at(line, by, warp, "uninitialised-read", format!("tcgen05.mma accumulates into tensor memory lane {l}, column {k} of CTA rank {c}, which nothing wrote in this launch: an allocation's columns hold no defined value (PTX ISA, Tensor Memory Allocation), so the first MMA of a tile must not accumulate (enable_input_d false)")));
                }
            }
        }
        for c in ctas {
            if let Some(x) = self.ctas.get_mut(c as usize) {
                x.tinit.mark(0..128, col, f.n.max(cols));
            }
        }
        Ok(())
    }

    /// A `tcgen05.ld` of `n` columns at `taddr` by lane thread `x` (its row: the address's lane
    /// plus the thread's lane).
    pub(crate) fn check_tmem_init(&self, x: u32, taddr: u32, n: u32) -> Result<(), SimError> {
        let th = &self.threads[x as usize];
        let row = taddr_lane(taddr) + th.lane;
        let col = taddr_col(taddr);
        match self.ctas[th.cta as usize]
            .tinit
            .first_unwritten(row..row + 1, col, n)
        {
            None => Ok(()),
            Some((l, k)) => {
                // Kept until the cluster finishes, as for shared memory: a load before the MMA
                // that writes these columns is a missing wait, which the ordering checks name
                // when the MMA completes.
                let mut pending = self.uninit.borrow_mut();
                if pending.is_none() {
                    *pending = Some(self.rule(x, "uninitialised-read", format!("tcgen05.ld reads tensor memory lane {l}, column {k}, which nothing wrote in this launch (no tcgen05.mma, st or cp): an allocation's columns hold no defined value (PTX ISA, Tensor Memory Allocation)")));
                }
                Ok(())
            }
        }
    }
}

fn unwritten(what: &str, cta: u32, byte: u32, dyn_off: u32) -> String {
    let place = if byte >= dyn_off {
        format!("byte {:#x} of dynamic shared memory", byte - dyn_off)
    } else {
        format!("shared-memory offset {byte:#x} (static shared memory)")
    };
    format!("{what} reads {place} of CTA rank {cta}, which nothing wrote in this launch: shared memory is not initialised at launch (PTX ISA, Shared State Space), so the value is undefined (the simulator fills it with 0xFF bytes)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_and_finds_across_words() {
        let mut w = Written::new(300);
        w.mark(10, 100);
        assert_eq!(w.first_unwritten(10, 100), None);
        assert_eq!(w.first_unwritten(5, 10), Some(5));
        assert_eq!(w.first_unwritten(100, 20), Some(110));
        w.mark(0, 300);
        assert_eq!(w.first_unwritten(0, 300), None);
    }
}
