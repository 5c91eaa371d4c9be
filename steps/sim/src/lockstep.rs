//! Warps in lockstep: the scheduler's unit of execution is a warp, not a thread.
//!
//! Each thread is its own interpreter, but on the GPU a converged warp issues one instruction
//! for all its active lanes (PTX ISA, "Parallel Thread Execution Machine Model" / SIMT: the
//! threads of a warp execute one common instruction at a time; divergent paths are executed
//! one after another). Running one lane alone for a quantum let the lanes of one converged
//! warp sample `mbarrier.try_wait` at different moments: a lane that sampled late could see a
//! barrier two phases further on (its parity back to "not complete") and wait for ever, a
//! deadlock the hardware cannot have (it issues one try_wait for the converged warp, so every
//! lane sees one barrier state).
//!
//! So the scheduler picks a warp and runs its runnable lanes for a quantum of rounds: in each
//! round every runnable lane steps one instruction, the lanes at one pc back to back, with no
//! other warp, no asynchronous completion and no scheduler choice between them. Lanes at
//! different pcs (a diverged warp) still each step one instruction per round, the groups in
//! ascending pc order; which warp runs next and for how long stays the seeded policy's choice.

use crate::error::SimError;
use crate::machine::{Machine, St};

impl Machine<'_> {
    /// The thread numbers of the warp of thread `t`: its CTA's threads are contiguous, and a
    /// warp is 32 consecutive linear thread ids of its CTA (the last one may be partial).
    pub(crate) fn warp_range(&self, t: u32) -> std::ops::Range<u32> {
        let th = &self.threads[t as usize];
        let base = t - th.lane;
        let cta_end = (th.cta + 1) * self.nthreads;
        base..(base + 32).min(cta_end)
    }

    /// Run the runnable lanes of thread `t`'s warp for up to `rounds` rounds (see the module
    /// comment); stops early when no lane of the warp can run.
    pub(crate) fn run_warp(&mut self, t: u32, rounds: u32) -> Result<(), SimError> {
        let range = self.warp_range(t);
        let mut lanes = [(0u32, 0u32); 32];
        for _ in 0..rounds {
            self.round += 1;
            let mut n = 0;
            for x in range.clone() {
                let th = &self.threads[x as usize];
                if th.st == St::Run {
                    lanes[n] = (th.pc, x);
                    n += 1;
                }
            }
            if n == 0 {
                return Ok(());
            }
            // Group the lanes by pc (a converged warp is one group: nothing to move). Stable,
            // so lanes of one group keep lane order.
            let group = &mut lanes[..n];
            if group.windows(2).any(|w| w[0].0 != w[1].0) {
                group.sort_by_key(|&(pc, _)| pc);
            }
            for &(pc, x) in &lanes[..n] {
                // A collective completed by a later lane of this round advanced the lanes that
                // waited at it: they took part in it already and do not step again.
                let th = &self.threads[x as usize];
                if th.st == St::Run && th.pc == pc {
                    self.run_thread(x, 1)?;
                }
            }
        }
        Ok(())
    }
}
