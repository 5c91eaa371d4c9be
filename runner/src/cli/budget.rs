//! `runner budget N`: a step's budget box, arithmetic from its configuration.

use crate::book::terminal;
use anyhow::Result;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Step number.
    #[arg(value_name = "STEP")]
    step: u32,
    /// GPUs to compute for (b200, h100, h200; repeat or separate by commas); all by default.
    #[arg(long = "gpu", value_name = "GPU", value_delimiter = ',')]
    gpus: Vec<String>,
    /// Rows of A and C (default: 4096).
    #[arg(long, allow_negative_numbers = true, value_parser = super::size)]
    m: Option<usize>,
    /// Columns of C, rows of B (default: 8192).
    #[arg(long, allow_negative_numbers = true, value_parser = super::size)]
    n: Option<usize>,
    /// The reduction dimension (default: 4096).
    #[arg(long, allow_negative_numbers = true, value_parser = super::size)]
    k: Option<usize>,
    /// Assumed load latency under load, in ns (not a published figure).
    #[arg(long, value_name = "NS")]
    latency_ns: Option<f64>,
    /// Print one JSON object {"runner", "step", "shape", "tiles", "gpus": [...]}: the same
    /// arithmetic as numbers (ns, bytes, FLOP).
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    if a.json {
        let mut v = crate::book::budget::json(a.step, &a.gpus, (a.m, a.n, a.k), a.latency_ns)?;
        v["runner"] = crate::report::version_info();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let md = crate::book::budget::command(a.step, &a.gpus, (a.m, a.n, a.k), a.latency_ns)?;
    terminal::show(&md, true)?;
    Ok(ExitCode::SUCCESS)
}
