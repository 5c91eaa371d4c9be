//! `runner grade-worker --phase P`: the grader's child process (internal); the job comes over
//! stdin.

use anyhow::Result;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The phase: `probe`, `compile`, `run` or `measure`; the job comes over stdin.
    #[arg(long, value_parser = ["probe", "compile", "run", "measure", "simulate"])]
    phase: String,
    /// Run without the Landlock confinement (only on the instructor's --allow-unconfined).
    #[arg(long)]
    unconfined: bool,
}

pub fn run(a: Args) -> Result<ExitCode> {
    crate::grade::child::main(crate::grade::job::Phase::parse(&a.phase)?, !a.unconfined)?;
    Ok(ExitCode::SUCCESS)
}
