//! `runner step N`: compile, verify and time a step (the work is in `step_cmd`).

use super::{ArchArg, ProblemArgs};
use crate::step_cmd;
use anyhow::Result;
use common::run::{EmulateMode, RunOptions};
use common::Shape;
use runner::steps;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// Step number.
    #[arg(value_name = "STEP")]
    step: u32,
    /// Which kernel: sm_100a (the Blackwell kernel; emulated on an H100/H200) or sm_90a (its
    /// Hopper twin, native and timed on an H100/H200). Default: every kernel this GPU runs.
    #[arg(long, value_enum)]
    arch: Option<ArchArg>,
    #[command(flatten)]
    problem: ProblemArgs,
    /// Override a tuning parameter of the kernel, e.g. --param stages=5 (repeatable).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Timed runs (after warm-up); 0 skips timing.
    #[arg(long, default_value_t = 20)]
    iters: usize,
    /// Untimed warm-up runs.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Do not flush L2 between timed runs.
    #[arg(long)]
    no_flush: bool,
    /// Run the Blackwell kernel under the tcgen05 emulation (sm_90 GPUs; the default there).
    #[arg(long, conflicts_with = "no_emulate")]
    emulate: bool,
    /// Run the Blackwell kernel natively or not at all: fail on a GPU without tcgen05.
    #[arg(long)]
    no_emulate: bool,
    /// Seconds before a running kernel is declared hung.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
    /// Compile and run this kernel file instead of the step's own (a file that includes
    /// hopper.cuh is taken for a Hopper twin unless --arch says otherwise).
    #[arg(long, value_name = "FILE")]
    kernel: Option<PathBuf>,
    /// Seed a known bug into the kernel (`runner mutations` lists them) to see it caught.
    #[arg(long, value_name = "NAME")]
    mutate: Option<String>,
    /// Persistent steps: launch at most N clusters, so each loops over more tiles.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    clusters: Option<u32>,
    /// Seed of the emulation's schedule perturbations (emulated runs only).
    #[arg(long, default_value_t = 0, value_name = "SEED")]
    emu_seed: u64,
    /// Record warp-role timelines and write FILE_STEM-stepN-<arch>.json (Perfetto,
    /// chrome://tracing) and .svg for each kernel run (FILE_STEM defaults to "trace"; a folder
    /// gets trace-stepN-<arch>.* inside it). The kernel is built with its trace calls on; the
    /// recorded launch is verified, not timed. Under emulation only the order of events counts.
    #[arg(long, value_name = "FILE_STEM", num_args = 0..=1, default_missing_value = "trace")]
    trace: Option<PathBuf>,
    /// With --trace: the CTAs of this many clusters (the grid's first) record.
    #[arg(long, value_name = "N", default_value_t = 2, requires = "trace",
          value_parser = clap::value_parser!(u32).range(1..))]
    trace_clusters: u32,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let opts = RunOptions {
        shape: a.problem.shape(Shape::DEFAULT),
        dtype: a.problem.dtype,
        dist: a.problem.dist,
        seed: a.problem.seed,
        warmup: a.warmup,
        iters: a.iters,
        flush_l2: !a.no_flush,
        emulate: if a.emulate {
            EmulateMode::Always
        } else if a.no_emulate {
            EmulateMode::Never
        } else {
            EmulateMode::Auto
        },
        timeout: Duration::from_secs(a.timeout),
        source: None,
        cpu_samples: 256,
        clusters: a.clusters,
        emu_seed: a.emu_seed,
        trace_clusters: a.trace.as_ref().map(|_| a.trace_clusters),
    };
    let request = step_cmd::Request {
        step: steps::get(a.step)?,
        arch: a.arch.map(ArchArg::arch),
        params: a.params,
        kernel_file: a.kernel,
        mutate: a.mutate,
        json: a.json,
        trace: a.trace,
    };
    step_cmd::run(&request, opts)
}
