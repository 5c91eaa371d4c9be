//! `runner budget N`: a step's budget box, arithmetic from its configuration.

use crate::terminal;
use anyhow::Result;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Step number.
    #[arg(value_name = "STEP")]
    step: u32,
    /// GPUs to compute for (b200, h100, h200); all of them by default.
    #[arg(long = "gpu", value_name = "GPU")]
    gpus: Vec<String>,
    #[arg(long)]
    m: Option<usize>,
    #[arg(long)]
    n: Option<usize>,
    #[arg(long)]
    k: Option<usize>,
    /// Assumed load latency under load, in ns (not a published figure).
    #[arg(long, value_name = "NS")]
    latency_ns: Option<f64>,
}

pub fn run(a: Args) -> Result<ExitCode> {
    let md = crate::budget::command(a.step, &a.gpus, (a.m, a.n, a.k), a.latency_ns)?;
    terminal::print(&terminal::render(&md, &terminal::Style::for_stdout(true)))?;
    Ok(ExitCode::SUCCESS)
}
