//! What `runner step N` was asked, parsed: the request that the command line (`cli::step`)
//! builds and that the step's runs read, on a GPU (`step_cmd`) or on the simulator
//! (`step_cmd::sim`).

use common::step::{Arch, Step};
use std::path::PathBuf;

pub struct Request {
    pub step: &'static dyn Step,
    /// `--arch`, if given.
    pub arch: Option<Arch>,
    /// `--param NAME=VALUE` overrides.
    pub params: Vec<String>,
    pub kernel_file: Option<PathBuf>,
    pub mutate: Option<String>,
    pub json: bool,
    /// `--trace FILE_STEM`: where the timelines go.
    pub trace: Option<PathBuf>,
    /// `--time-emulation N`: time N emulated launches with the strict rules off and on.
    pub time_emulation: Option<u32>,
    /// `--m`, `--n`, `--k` as given: a simulated run fills the others from its own defaults.
    pub dims: (Option<usize>, Option<usize>, Option<usize>),
    pub sim: SimRequest,
}

/// The CPU simulator's part of a request.
#[derive(Debug, Clone, Default)]
pub struct SimRequest {
    /// `--sim`: simulate the Blackwell kernel even where a GPU could run it.
    pub forced: bool,
    /// `--sim-seed` or `--sim-policy` given: a run where no kernel is simulated refuses them.
    pub sim_flags_given: bool,
    pub options: common::simulate::SimOptions,
    /// `--explore all`: the proving mode, with its bounds.
    pub prove: Option<common::simulate::ProveOptions>,
}
