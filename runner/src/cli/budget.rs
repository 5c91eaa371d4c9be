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
    /// Assumed load latency under load, in ns (not a published figure; 1 to 100000).
    #[arg(long, value_name = "NS", allow_negative_numbers = true, value_parser = latency)]
    latency_ns: Option<f64>,
    /// Print one JSON object {"schema", "runner", "step", "shape", "tiles", "gpus": [...]}: the same
    /// arithmetic as numbers (ns, bytes, FLOP).
    #[arg(long)]
    json: bool,
}

/// A latency a GPU could have (DRAM under load is hundreds of ns): 1e300 would print a
/// 300-digit byte count, 1e-300 a budget of nothing. The message quotes what was typed.
fn latency(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(l) if (1.0..=100_000.0).contains(&l) => Ok(l),
        _ => Err(format!(
            "{s:?} is not a latency: give a number of nanoseconds from 1 to 100000"
        )),
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    // The bounds `runner step` holds a shape to (32-bit indices, a GPU's memory): a budget of a
    // problem no kernel launch can run would be arithmetic about nothing.
    if a.m.is_some() || a.n.is_some() || a.k.is_some() {
        let d = common::Shape::DEFAULT;
        let shape = common::Shape {
            m: a.m.unwrap_or(d.m),
            n: a.n.unwrap_or(d.n),
            k: a.k.unwrap_or(d.k),
        };
        super::step::check_bounds(runner::steps::get(a.step)?, shape)?;
    }
    if a.json {
        let v = crate::report::envelope(
            "budget",
            crate::book::budget::json(a.step, &a.gpus, (a.m, a.n, a.k), a.latency_ns)?,
        );
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let md = crate::book::budget::command(a.step, &a.gpus, (a.m, a.n, a.k), a.latency_ns)?;
    terminal::show(&md, true)?;
    Ok(ExitCode::SUCCESS)
}
