//! `runner selftest`: the reference machinery (cuBLAS against the CPU) on this GPU.

use super::ProblemArgs;
use crate::report;
use anyhow::{bail, Result};
use common::gpu::{self, GpuStatus};
use common::{run, Shape};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    problem: ProblemArgs,
    /// Timed cuBLAS runs.
    #[arg(long, default_value_t = 20)]
    iters: usize,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let gpu = match gpu::open() {
        GpuStatus::Present(g) => g,
        GpuStatus::Absent(why) => bail!("selftest needs a GPU: {why}"),
    };
    let shape = a.problem.shape(Shape::DEFAULT).unwrap_or(Shape::DEFAULT);
    let t = run::selftest(&gpu, shape, a.problem.dtype, a.problem.seed, a.iters)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&t)?);
    } else {
        report::print_selftest(&t);
    }
    Ok(if t.verification.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
