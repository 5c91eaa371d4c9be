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
    /// Check the checkout, the toolkit, a compile, free disk space, the GPU, cuBLAS and the
    /// clocks. Exit code 0: ready; 1: a check failed; 2: the checks could not run.
    Check {
        /// One JSON object {"schema", "runner", "checks": [{check, status, detail}], "ready"}, e.g. to
        /// collect a lab's machines.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        device: super::DeviceArg,
    },
}

pub fn run(a: Args) -> Result<ExitCode> {
    match a.cmd {
        Sub::Check { json, device } => {
            device.apply();
            crate::workshop::check(json)
        }
    }
}
