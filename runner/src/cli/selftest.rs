//! `runner selftest`: the reference machinery (cuBLAS against the CPU) on this GPU.

use crate::report;
use anyhow::{bail, Result};
use common::gpu::{self, GpuStatus};
use common::{run, Dtype, Shape};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Rows of A and C (default: 4096).
    #[arg(long, allow_negative_numbers = true, value_parser = super::size)]
    m: Option<usize>,
    /// Columns of C, rows of B (default: 8192).
    #[arg(long, allow_negative_numbers = true, value_parser = super::size)]
    n: Option<usize>,
    /// The reduction dimension (default: 4096).
    #[arg(long, allow_negative_numbers = true, value_parser = super::size)]
    k: Option<usize>,
    /// Input and output type: f16 or bf16.
    #[arg(long, default_value = "f16")]
    dtype: Dtype,
    /// Seed of the input generator (gaussian inputs).
    #[arg(long, default_value_t = 2024)]
    seed: u64,
    /// Timed cuBLAS runs.
    #[arg(long, default_value_t = 20)]
    iters: usize,
    /// Print the result as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    device: super::DeviceArg,
}

pub fn run(a: Args) -> Result<ExitCode> {
    a.device.apply();
    let shape = Shape {
        m: a.m.unwrap_or(Shape::DEFAULT.m),
        n: a.n.unwrap_or(Shape::DEFAULT.n),
        k: a.k.unwrap_or(Shape::DEFAULT.k),
    };
    if [shape.m, shape.n, shape.k]
        .iter()
        .any(|&d| d == 0 || d > i32::MAX as usize)
    {
        bail!("{shape}: M, N and K must be positive and below 2^31 (cuBLAS takes 32-bit sizes)");
    }
    let gpu = match gpu::open() {
        GpuStatus::Present(g) => g,
        GpuStatus::Absent(why) => bail!("selftest needs a GPU: {why}"),
    };
    gpu.check_fits(shape.device_bytes(), &shape.to_string())?;
    let t = run::selftest(&gpu, shape, a.dtype, a.seed, a.iters)?;
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
