//! `runner grade-worker JOB`: the grader's child process (internal).

use anyhow::Result;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[arg(value_name = "JOB")]
    job: PathBuf,
}

pub fn run(a: Args) -> Result<ExitCode> {
    crate::grade::worker::main(&a.job)?;
    Ok(ExitCode::SUCCESS)
}
