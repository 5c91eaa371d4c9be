//! Happens-before for the synchronous tcgen05 allocation instructions: `tcgen05.alloc`,
//! `tcgen05.dealloc`, and the CTA pair's collective `.cta_group::2` forms (`exec/pair.rs`).

use super::{Dim, Hb, Vc};
use crate::machine::Machine;

impl Hb {
    /// The view a synchronous tcgen05 instruction of thread `t` is ordered after. `.alloc`,
    /// `.dealloc` and `.relinquish_alloc_permit` are synchronous tcgen05 instructions (PTX ISA
    /// "Memory Consistency Model for 5th generation of TensorCore operations", "Asynchronous
    /// Operations": "inherently ordered with respect to other tcgen05 operations" of the
    /// thread), and "the standard memory consistency model synchronization mechanisms also
    /// apply to the tcgen05 family of instructions" ("Specialized Inter-thread
    /// Synchronization"): `tcgen05.fence::after_thread_sync` orders the *asynchronous* ones
    /// after a synchronisation. So a dealloc after `bar.sync` or the cluster barrier is
    /// ordered by the thread's whole clock, not only by its tcgen05 view; what other warps'
    /// asynchronous tcgen05.ld/st did still reaches it only through their
    /// `tcgen05.fence::before_thread_sync` (their warp dimension in the clock).
    ///
    /// A half of a CTA pair's collective instruction takes effect only once both warps issued
    /// it, so it is ordered after both warps' clocks.
    pub(super) fn sync_tcgen05_view(&self, t: u32, dim: u32, clock: u32) -> Vc {
        let mut v = self.th[t as usize].c.clone();
        if let Some(p) = &self.pair_view {
            v.join(p);
        }
        v.raise(dim, clock);
        v
    }

    /// Warps `a` and `b` of a CTA pair performed one `.cta_group::2` alloc/dealloc (`tmem`) or
    /// relinquish_alloc_permit together. The instruction completes in both warps only when
    /// both issued it (PTX ISA "tcgen05.alloc": "one warp from each of the peer CTAs must
    /// collectively perform the allocation and de-allocation"), so each half is ordered
    /// before both warps' later operations, tcgen05 ones included (a synchronous instruction,
    /// ordered with the thread's later tcgen05 operations). Nothing else of the two warps is
    /// ordered by it: the ISA gives the pair's collective no memory-ordering semantics beyond
    /// the instruction itself.
    ///
    /// Before the halves execute (`done` false): each half's effect is ordered after both
    /// warps' clocks (the collective completes when the last warp issued it), which
    /// [`Hb::sync_tcgen05_view`] uses; nothing else of either warp is.
    pub(super) fn tc_pair(&mut self, m: &Machine, a: &[u32], b: &[u32], tmem: bool, done: bool) {
        if !done {
            let mut j = Vc::default();
            for &x in a.iter().chain(b) {
                j.join(&self.th[x as usize].c);
            }
            self.pair_view = Some(j);
            return;
        }
        self.pair_view = None;
        if !tmem {
            return;
        }
        // Each half's epoch: its warp's tcgen05 dimension, whose last value is this alloc's
        // or dealloc's (emitted just before). Only when every earlier tcgen05.ld/st of that
        // warp was fenced already does the value stand for the instruction alone.
        let mut halves = Vec::new();
        for side in [a, b] {
            let Some(&t0) = side.first() else { continue };
            let th = &m.threads[t0 as usize];
            let d = self.dim(Dim::TcWarp(th.cta, th.warp));
            let k = self.counters[d as usize];
            if side.iter().all(|&y| self.th[y as usize].c.get(d) + 1 >= k) {
                halves.push((d, k));
            }
        }
        for &x in a.iter().chain(b) {
            let th = &mut self.th[x as usize];
            for &(d, k) in &halves {
                th.c.raise(d, k);
                th.tcx.raise(d, k);
                th.tv.raise(d, k);
            }
        }
    }
}

/// Thread `t` is at a `tcgen05.alloc` or `tcgen05.dealloc` (the synchronous tcgen05
/// instructions that touch tensor memory).
pub(super) fn at_sync_tcgen05(m: &Machine, t: u32) -> bool {
    m.threads
        .get(t as usize)
        .and_then(|th| m.k.code.get(th.pc as usize))
        .is_some_and(|i| {
            matches!(
                i.op,
                crate::decode::Op::TcAlloc { .. } | crate::decode::Op::TcDealloc { .. }
            )
        })
}
