//! `runner workshop check`: a lab machine's pre-flight (the checks are in `workshop`).

use anyhow::Result;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Check the GPU, the toolkit, a compile, cuBLAS, free disk space and the clocks.
    Check,
}

pub fn run(a: Args) -> Result<ExitCode> {
    match a.cmd {
        Sub::Check => crate::workshop::check(),
    }
}
