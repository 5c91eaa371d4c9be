//! What a launch is: the kernel's arguments ([`Param`]), its geometry and shared memory
//! ([`Launch`]), and how the scheduler runs it ([`Options`]). The crate's root re-exports them;
//! the machine and the interpreter read them.

use crate::sched::Policy;
use crate::units;

/// A kernel argument, in the order of the kernel's parameters.
#[derive(Debug, Clone)]
pub enum Param {
    U32(u32),
    U64(u64),
    /// A `CUtensorMap` passed by value (`__grid_constant__`): the simulator gives it a 128-byte
    /// parameter slot and resolves `cp.async.bulk.tensor` operands that point there to this
    /// description.
    TensorMap(units::tensormap::TensorMapDesc),
    Bytes(Vec<u8>),
}

/// One kernel launch.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    pub kernel: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// [1, 1, 1] without clusters.
    pub cluster: [u32; 3],
    pub dynamic_smem: u32,
    pub params: Vec<Param>,
    /// Names of mbarriers for hang reports: (offset from the start of dynamic shared memory,
    /// name).
    pub barrier_names: Vec<(u32, String)>,
    /// Source files of the kernel, (path suffix, text): a hang report names a barrier after the
    /// expression its `mbarrier.init` was given in the source (`smem.load_full[2]`), as the GPU
    /// emulation does, when no `barrier_names` entry names it.
    pub sources: Vec<(String, String)>,
}

/// How to schedule one run.
#[derive(Debug, Clone)]
pub struct Options {
    pub seed: u64,
    pub policy: Policy,
    /// Steps (all threads) before the run stops with `SimError::StepLimit`: one per executed
    /// instruction, more for an MMA or a copy, by its size ([`crate::budget`]). The
    /// default, 400 million, is about a minute on one core: a hundred times what the stock
    /// kernels execute at 512 x 512 x 256 (waits block rather than spin, so only a kernel's
    /// own loops count).
    pub max_steps: u64,
    pub trace: bool,
    /// The host's wall-clock deadline, asked every few milliseconds of simulation (see
    /// [`crate::budget`]): the run stops with `SimError::Deadline` once it says so.
    pub deadline: Option<crate::budget::Deadline>,
    /// SMs of the simulated GPU: with one CTA resident per SM, `sms / cluster size` clusters
    /// run at the same time (the rest wait until one finishes, as on the GPU). The default is
    /// a B200's 148. Clusters interleave instruction by instruction under the one scheduler.
    pub sms: u32,
    /// Replay a schedule the proving mode found ([`crate::prove::explore_all`]'s witness; its
    /// text form parses with `str::parse`) instead of the seeded choices: what a runner's
    /// `--sim-policy replay:WITNESS` sets.
    pub replay: Option<crate::prove::Witness>,
    /// Record the first cluster's event trace for people (the ring player, Perfetto) into this
    /// sink ([`crate::trace_events`]); None records nothing.
    pub events: Option<crate::trace_events::Sink>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            seed: 1,
            policy: Policy::Random,
            max_steps: 400_000_000,
            trace: false,
            deadline: None,
            sms: 148,
            replay: None,
            events: None,
        }
    }
}
