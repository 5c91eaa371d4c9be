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
    /// Check the laptop path (the checkout, the toolkit, a compile, free disk space, a step
    /// simulated and verified on the CPU, a seeded bug caught, the book), then the GPU, cuBLAS
    /// and the clocks where there is a GPU. Without one it says what a GPU would add. Exit 0:
    /// ready (without a GPU: for the laptop workshop); 1: a check failed; 2: the checks could
    /// not run.
    Check {
        /// A GPU lab: fail without a GPU that runs the kernels (an H100/H200 or a B200).
        #[arg(long)]
        gpu: bool,
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
        Sub::Check { json, gpu, device } => {
            device.apply();
            crate::workshop::check(json, gpu)
        }
    }
}
