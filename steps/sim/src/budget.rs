//! What one run may cost, whatever the kernel does: a work budget and a host deadline.
//!
//! The budget ([`crate::Options::max_steps`]) is counted in *steps*. An ordinary instruction of
//! one thread is one step; an instruction whose cost to the simulator grows with its operands is
//! charged by that size, so that no single instruction is a large unpaid cost:
//!
//! - `tcgen05.mma`: M·N·K multiply-adds ([`MACS_PER_STEP`] of them a step), computed by
//!   `units::mma` when it retires;
//! - a TMA load or store (`cp.async.bulk.tensor`) and `tcgen05.cp`: the bytes they copy
//!   ([`BYTES_PER_STEP`] a step, every destination of a multicast counted).
//!
//! The rates are measured, not guessed (`tests/budget.rs` prints them): one step of either kind
//! takes the simulator about as long as one interpreted instruction, so `max_steps` bounds the
//! run's CPU time whatever mix of instructions the kernel executes.
//!
//! The deadline ([`Deadline`]) is the host's wall clock, asked every [`CHECK_EVERY`] steps: the
//! crate stays free of OS calls (`std::time::Instant` panics on wasm32-unknown-unknown), so the
//! host passes a function that says whether time is up.

use crate::error::SimError;
use crate::machine::Machine;
use std::fmt;
use std::sync::Arc;

/// Multiply-adds of a `tcgen05.mma` charged as one step.
pub const MACS_PER_STEP: u64 = 64;
/// Bytes a TMA or `tcgen05.cp` copies charged as one step.
pub const BYTES_PER_STEP: u64 = 16;
/// Bytes of module variables (`__device__`, `__constant__`) a module may declare in all: the
/// simulated device allocates them at every launch, so a larger module is refused when decoded
/// (a 16 GiB `__device__` array would otherwise make the host allocate 16 GiB).
pub const MAX_GLOBAL_BYTES: u64 = 256 << 20;
/// Steps between two questions to the deadline: a few milliseconds of simulation, so that a
/// deadline is kept to within that, and asking costs nothing measurable.
pub const CHECK_EVERY: u64 = 1 << 16;

/// The host's deadline: `true` once the run must stop. Cheap to clone (shared).
#[derive(Clone)]
pub struct Deadline(pub Arc<dyn Fn() -> bool + Send + Sync>);

impl Deadline {
    pub fn new(f: impl Fn() -> bool + Send + Sync + 'static) -> Deadline {
        Deadline(Arc::new(f))
    }
    pub fn passed(&self) -> bool {
        (self.0)()
    }
}

impl fmt::Debug for Deadline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Deadline(..)")
    }
}

/// Multiply-adds of one `tcgen05.mma` of instruction descriptor `idesc`: M·N·K, where K is the
/// 32 bytes of one MMA's K step (16 f16/bf16 elements: PTX ISA "tcgen05.mma", the K of
/// `.kind::f16`; the narrower kinds' K is wider in elements and the same in bytes).
pub fn mma_macs(idesc: u32) -> u64 {
    let id = crate::units::descriptors::decode_idesc(idesc);
    u64::from(id.m) * u64::from(id.n) * 16
}

impl Machine<'_> {
    /// Charge `steps` of work beyond the one step every instruction costs.
    pub(crate) fn charge(&mut self, steps: u64) -> Result<(), SimError> {
        self.steps = self.steps.saturating_add(steps);
        if self.steps >= self.next_check {
            self.check_budget()?;
        }
        Ok(())
    }

    /// The budget spent, or the deadline passed: the run stops. Else the next check is set.
    pub(crate) fn check_budget(&mut self) -> Result<(), SimError> {
        if self.steps > self.o.max_steps {
            return Err(SimError::StepLimit {
                steps: self.o.max_steps,
            });
        }
        if self.o.deadline.as_ref().is_some_and(Deadline::passed) {
            return Err(SimError::Deadline { steps: self.steps });
        }
        self.next_check = self
            .steps
            .saturating_add(CHECK_EVERY)
            .min(self.o.max_steps.saturating_add(1));
        Ok(())
    }
}
