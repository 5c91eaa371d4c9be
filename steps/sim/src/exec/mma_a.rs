//! The A operand of a `tcgen05.mma` that reads it from tensor memory (`units/mma_ts.rs`):
//! checked, when the MMA runs, to have been written in this launch (reported when the
//! cluster finishes, if no other rule stopped it first).

use crate::error::SimError;
use crate::machine::Machine;

impl Machine<'_> {
    /// An MMA whose A is in tensor memory (`a` its tagged `[a-tmem]` word; nothing to do for
    /// a shared-memory descriptor) reads A's 8 columns in the lanes its rows use, in CTA `cta`
    /// (and its peer with `cg2`): a cell nothing wrote in this launch holds no defined value
    /// (PTX ISA "Tensor Memory Allocation": an allocation's columns are not initialised), as
    /// for an accumulator read before any write (`uninitialised-read`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check_mma_a_init(
        &self,
        t: u32,
        cta: u32,
        cg2: bool,
        idesc: u32,
        a: u64,
        b: u64,
        line: (u32, u32),
    ) -> Result<(), SimError> {
        let group = if cg2 { 2 } else { 1 };
        let Some((lanes, col, n)) = crate::glue::mma_a_tmem(idesc, a, b, group) else {
            return Ok(());
        };
        let th = &self.threads[t as usize];
        let (by, warp) = (th.cta, th.warp);
        for c in cta..cta + group {
            let Some(x) = self.ctas.get(c as usize) else {
                continue;
            };
            for &l in &lanes {
                if let Some((l, k)) = x.tinit.first_unwritten(l..l + 1, col, n) {
                    // Kept until the cluster finishes, as for a tcgen05.ld (`poison.rs`): a
                    // store of A that comes after the MMA without an order is a race, which
                    // happens-before names when the store runs.
                    let rank = x.rank;
                    let mut pending = self.uninit.borrow_mut();
                    if pending.is_some() {
                        return Ok(());
                    }
                    *pending = Some(self.rule_at(line, by, warp, "uninitialised-read", format!("tcgen05.mma reads its A operand from tensor memory lane {l}, column {k} of CTA rank {rank}, which nothing wrote in this launch: an allocation's columns hold no defined value (PTX ISA, Tensor Memory Allocation). Store A there with tcgen05.st or tcgen05.cp before the MMA")));
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}
