//! `runner bench`: time every step's native kernel against cuBLAS (the work is in `bench`).

use super::{parse_shape, ArchArg};
use crate::outdir::OutDir;
use anyhow::{bail, Result};
use common::gpu::{self, GpuStatus};
use common::{Dtype, Shape};
use runner::steps;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// Steps to time, e.g. 0,3,6 (default: all).
    #[arg(long, value_delimiter = ',')]
    steps: Vec<u32>,
    /// Named variants to time beside the steps, e.g. 5-pingpong (step 5's twin as ping-pong
    /// consumers, exercises/hopper/step5_pingpong_sm90.toml).
    #[arg(long, value_delimiter = ',')]
    contenders: Vec<String>,
    /// Shapes MxNxK (default: 4096x8192x4096 and 8192x8192x8192).
    #[arg(long, value_delimiter = ',', value_parser = parse_shape)]
    shapes: Vec<Shape>,
    /// Add square sizes 1024 to 8192.
    #[arg(long)]
    sweep: bool,
    /// Dtypes (default: f16,bf16).
    #[arg(long, value_delimiter = ',')]
    dtypes: Vec<Dtype>,
    /// Which kernels: must be the ones this GPU runs natively (emulated times mean nothing).
    #[arg(long, value_enum)]
    arch: Option<ArchArg>,
    /// Timed rounds (each kernel once per round, cuBLAS too); at least 20. With adaptive rounds
    /// (the default of the bench) the least number: more are added until every interval is
    /// narrow enough (--ci-target) or the time cap is hit (--time-cap).
    #[arg(long, default_value_t = 30, value_parser = super::at_least::<20>)]
    iters: u64,
    /// Adaptive rounds stop once every kernel's 95 % interval of its speed ratio, to cuBLAS and
    /// to the kernel before it, is narrower than ± this many percent of its median.
    #[arg(long, value_name = "PERCENT", default_value_t = 0.5, value_parser = positive_percent)]
    ci_target: f64,
    /// Adaptive rounds stop after this many seconds of timed rounds at each shape and dtype,
    /// narrow or not (the results say where the cap came first).
    #[arg(long, value_name = "SECONDS", default_value_t = 60, value_parser = super::at_least::<1>)]
    time_cap: u64,
    /// Time exactly --iters rounds, without adaptive rounds (the default with --heatmap, whose
    /// grid of shapes would take too long otherwise).
    #[arg(long)]
    fixed: bool,
    /// Untimed warm-up rounds.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Seed of the input generator.
    #[arg(long, default_value_t = 2024)]
    seed: u64,
    /// Seconds before a kernel is declared hung.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Folder for bench-<gpu>-<date>.json and .svg (default: assets/results).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Instead of the bench: time cuBLAS and the first persistent step (4) under every timing
    /// protocol the workbook
    /// has used and variants that isolate one suspect each (first shape and dtype only);
    /// writes diagnose-<gpu>-<date>.json.
    #[arg(long, conflicts_with_all = ["sweep", "heatmap"])]
    diagnose: bool,
    /// Time every step over a grid of shapes beyond the square (skinny M, small and large
    /// K, sizes that are no power of two; --shapes replaces the grid) and write
    /// heatmap-<gpu>-<date>.json and a heatmap SVG of % of cuBLAS.
    #[arg(long, conflicts_with = "sweep")]
    heatmap: bool,
    #[command(flatten)]
    device: super::DeviceArg,
}

/// A percentage above 0 and below 100.
fn positive_percent(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x > 0.0 && x < 100.0 => Ok(x),
        _ => Err(format!("{s:?} is not a percentage above 0 and below 100")),
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    a.device.apply();
    let steps = if a.steps.is_empty() {
        steps::all()
    } else {
        a.steps
            .iter()
            .map(|&n| steps::get(n))
            .collect::<Result<Vec<_>>>()?
    };
    let mut shapes = if !a.shapes.is_empty() {
        a.shapes
    } else if a.heatmap {
        crate::bench::heatmap::HEATMAP_SHAPES.to_vec()
    } else {
        crate::results::DEFAULT_SHAPES.to_vec()
    };
    if a.sweep {
        for s in crate::bench::SWEEP_SIZES {
            let sq = Shape { m: s, n: s, k: s };
            if !shapes.contains(&sq) {
                shapes.push(sq);
            }
        }
    }
    // Every shape within the launch limits and some GPU's memory, before any GPU work; then
    // the largest within this GPU's free memory.
    for &shape in &shapes {
        for &step in &steps {
            super::step::check_bounds(step, shape)?;
        }
    }
    let gpu = match gpu::open() {
        GpuStatus::Present(g) => Some(g),
        GpuStatus::Absent(_) => None,
    };
    if let (Some(g), Some(largest)) = (&gpu, shapes.iter().max_by_key(|s| s.device_bytes())) {
        g.check_fits(largest.device_bytes(), &largest.to_string())?;
    }
    if let (Some(arch), Some(g)) = (a.arch, &gpu) {
        let native = crate::bench::native_arch(&g.info)?;
        if arch.arch() != native {
            bail!(
                "{} runs the {}s natively; timing the {}s there would time the emulation, whose times mean nothing",
                g.info.name,
                native.name(),
                arch.arch().name()
            );
        }
    }
    // bench opens the GPU itself.
    drop(gpu);
    let contenders = a
        .contenders
        .iter()
        .map(|name| crate::contenders::find(name))
        .collect::<Result<Vec<_>>>()?;
    let opts = crate::bench::BenchOptions {
        steps,
        contenders,
        shapes,
        dtypes: if a.dtypes.is_empty() {
            vec![Dtype::F16, Dtype::Bf16]
        } else {
            a.dtypes
        },
        iters: a.iters as usize,
        warmup: a.warmup,
        seed: a.seed,
        out: match a.out {
            // A folder of the user's holding other files is refused, never overwritten.
            Some(out) => {
                let d = OutDir::claim_own(&out, "--out", "the bench writes its results there")?;
                d.create()?;
                out
            }
            None => common::toolkit::project_root()
                .join("assets")
                .join("results"),
        },
        timeout: Duration::from_secs(a.timeout),
        heatmap: a.heatmap,
        adaptive: (!a.fixed && !a.heatmap && !a.diagnose).then(|| crate::bench::Adaptive {
            target: a.ci_target / 100.0,
            cap: Duration::from_secs(a.time_cap),
        }),
    };
    if a.diagnose {
        crate::bench::run_diagnose(&opts)?;
        return Ok(ExitCode::SUCCESS);
    }
    let (report, json, svg) = crate::bench::run(&opts)?;
    if !opts.heatmap {
        crate::book::plot::ladder(&report, &svg)?;
    }
    crate::bench::print_table(&report, &json, &svg);
    let failed = report.cases.iter().any(|c| {
        c.kernel != "cublas"
            && c.skipped
                .as_deref()
                .is_some_and(|s| s.contains("verification"))
    });
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
