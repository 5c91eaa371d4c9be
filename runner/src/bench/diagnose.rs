//! `runner bench --diagnose`: cuBLAS (and one kernel) timed under each protocol the workbook
//! has used, and under variants that isolate one suspect each, in one process, so why the
//! bench's cuBLAS ran 12 % slower than `runner step`'s (issue 18) can be settled on a GPU.
//!
//! The hypotheses, from the code before `common::timing::time_rounds` was the only protocol
//! (`time_interleaved`, used by both `runner step` and `runner bench`, waited after every
//! launch; only the grader primed):
//! - H1, sustained power: the bench ran 8 contenders x 35 rounds x 4 cases back to back (seconds
//!   of full tensor-core load), `runner step` 2 x 25 launches (tens of milliseconds). Under a
//!   sustained load the power limit (700 W on an H200) sets the clock, not the boost table;
//!   every contender is slower in the bench, which is what the issue saw. Variants
//!   `old-step`/`old-bench`, and `soak-then-old-step` (the step protocol after 3 s of load).
//!   NVML's clock-event reasons name `sw_power_cap` if so.
//! - H2, position: the bench always timed cuBLAS first in a round, right after the host's wait
//!   for the previous round's last launch; `runner step` timed it second, right after the
//!   kernel. Variant `old-bench-cublas-last`.
//! - H3, idle gaps: every launch was followed by a host wait (a 200 us polling sleep); an idle
//!   H200 drops its working state within ~5 ms (assets/results/grade-timing-h200-2026-11-22.txt).
//!   Gaps this short should not matter; variant `idle-10ms` shows what a real gap costs, and
//!   `idle-10ms-primed` that the prime removes it.
//! - Ruled out by reading the code: the flush (one `L2Flush`, twice the L2, in every path),
//!   the cuBLAS handle, workspace, algorithm and stream (one `Blas::new` on the one stream,
//!   `CUBLAS_GEMM_DEFAULT`, same shape and dtype), event placement (one `enqueue_timed`).
//!   `old-bench-no-nvml` checks that reading NVML during launches does not perturb them.
//! - `new-step`/`new-bench` are the one protocol as `runner step` and `runner bench` now use it:
//!   their cuBLAS figures, and step N's ratio, should agree within the interquartile ranges.
//!   `old-step-again` repeats the first pair variant last, to show the drift over the run.

use crate::bench::{ready_kernels, Ctx, Entry, Ready};
use crate::provenance::{gpu_slug, today};
use crate::results::{DiagnoseReport, Results, Side, VariantResult};
use anyhow::{anyhow, Context, Result};
use common::problem::{Dist, Dtype, Problem, Shape};
use common::run::{alloc_c, cublas_reference, dptr, DeviceProblem, DeviceReport};
use common::timing::{time_rounds, Launch, Measured, Protocol, Timed};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Which contenders a variant times, in their order of round 0.
#[derive(Debug, Clone, Copy)]
enum Who {
    Cublas,
    /// Step N's kernel, then cuBLAS (the order `runner step` used).
    KernelThenCublas,
    /// cuBLAS, then every kernel (the order `runner bench` used).
    CublasThenAll,
    /// Every kernel, then cuBLAS.
    AllThenCublas,
}

struct Variant {
    name: &'static str,
    what: &'static str,
    who: Who,
    primed: bool,
    rotate: bool,
    sync_each: bool,
    flush: bool,
    nvml: bool,
    warmup: usize,
    iters: usize,
    /// Host sleep before every round (the GPU idles).
    idle_ms: u64,
    /// Back-to-back cuBLAS products for this long before the variant.
    soak_ms: u64,
}

const fn old(name: &'static str, what: &'static str, who: Who, iters: usize) -> Variant {
    Variant {
        name,
        what,
        who,
        primed: false,
        rotate: false,
        sync_each: true,
        flush: true,
        nvml: true,
        warmup: 5,
        iters,
        idle_ms: 0,
        soak_ms: 0,
    }
}

const fn new(name: &'static str, what: &'static str, who: Who, iters: usize) -> Variant {
    Variant {
        primed: true,
        rotate: true,
        sync_each: false,
        ..old(name, what, who, iters)
    }
}

fn variants() -> Vec<Variant> {
    vec![
        old(
            "old-selftest",
            "cuBLAS alone, a wait after every launch, no prime (runner selftest before)",
            Who::Cublas,
            20,
        ),
        old(
            "old-step",
            "step N then cuBLAS, a wait after every launch, no prime (runner step before)",
            Who::KernelThenCublas,
            20,
        ),
        old(
            "old-bench",
            "cuBLAS then every step, a wait after every launch, no prime (runner bench before)",
            Who::CublasThenAll,
            30,
        ),
        old(
            "old-bench-cublas-last",
            "as old-bench with cuBLAS last in every round (H2: position)",
            Who::AllThenCublas,
            30,
        ),
        Variant {
            nvml: false,
            ..old(
                "old-bench-no-nvml",
                "as old-bench, no NVML readings (does reading perturb?)",
                Who::CublasThenAll,
                30,
            )
        },
        Variant {
            soak_ms: 3000,
            ..old(
                "soak-then-old-step",
                "3 s of back-to-back cuBLAS, then old-step (H1: sustained power)",
                Who::KernelThenCublas,
                20,
            )
        },
        Variant {
            idle_ms: 10,
            ..old(
                "idle-10ms",
                "cuBLAS alone after 10 ms of host sleep every round, no prime (H3)",
                Who::Cublas,
                20,
            )
        },
        Variant {
            idle_ms: 10,
            ..new(
                "idle-10ms-primed",
                "as idle-10ms with the prime (what the prime is for)",
                Who::Cublas,
                20,
            )
        },
        new(
            "new-step",
            "the one protocol, step N and cuBLAS (runner step now)",
            Who::KernelThenCublas,
            20,
        ),
        new(
            "new-bench",
            "the one protocol, cuBLAS and every step (runner bench now)",
            Who::CublasThenAll,
            30,
        ),
        Variant {
            flush: false,
            ..new(
                "new-step-no-flush",
                "as new-step without the L2 flush (what the flush costs)",
                Who::KernelThenCublas,
                20,
            )
        },
        old(
            "old-step-again",
            "old-step repeated last (drift over the run)",
            Who::KernelThenCublas,
            20,
        ),
    ]
}

/// A contender that sleeps on the host before its round: the GPU idles meanwhile.
struct Idle<T: Timed>(Duration, T);

impl<T: Timed> Timed for Idle<T> {
    fn prepare(&mut self, round: usize) -> Result<()> {
        std::thread::sleep(self.0);
        self.1.prepare(round)
    }
    fn launch(&mut self) -> Result<()> {
        self.1.launch()
    }
}

/// Run every variant on `shape` and `dtype` with the loaded `entries`; the pair variants use
/// step `step` (which must be among them and verify).
#[allow(clippy::too_many_arguments)]
pub fn run(
    ctx: &Ctx<'_>,
    entries: &[Entry],
    step: u32,
    shape: Shape,
    dtype: Dtype,
    seed: u64,
    timeout: Duration,
    device: DeviceReport,
) -> Result<DiagnoseReport> {
    let gpu = ctx.gpu;
    let dp = DeviceProblem::upload(gpu, Problem::generate(shape, dtype, Dist::Gaussian, seed))?;
    let reference = cublas_reference(gpu, ctx.blas, &dp)?;
    let bar = indicatif::ProgressBar::hidden();
    let (ready, cases) = ready_kernels(gpu, entries, &dp, &reference, timeout, &bar)?;
    if let Some(c) = cases.iter().find(|c| c.skipped.is_some()) {
        return Err(anyhow!(
            "--diagnose times only kernels that verify; {} at {shape} {dtype}: {}",
            c.kernel,
            c.skipped.as_deref().unwrap_or("")
        ));
    }
    let pair = ready
        .iter()
        .find(|r| r.step() == step)
        .ok_or_else(|| anyhow!("--diagnose: step {step} is not among the steps timed"))?;
    let (pa, pb, _) = dp.ptrs(gpu);
    let c_blas = alloc_c(gpu, shape)?;
    let p_blas = dptr(&c_blas, gpu);
    let gemm = || ctx.blas.gemm(shape, dtype, pa, pb, p_blas, false);
    let flops = shape.flops();
    let mut results = Vec::new();
    for v in variants() {
        eprintln!("diagnose: {} ...", v.name);
        let t0 = Instant::now();
        if v.soak_ms > 0 {
            while t0.elapsed() < Duration::from_millis(v.soak_ms) {
                for _ in 0..20 {
                    gemm()?;
                }
                common::timing::sync_with_timeout(gpu, timeout, "soak")?;
            }
        }
        let kernels: Vec<&Ready> = match v.who {
            Who::Cublas => vec![],
            Who::KernelThenCublas => vec![pair],
            Who::CublasThenAll | Who::AllThenCublas => ready.iter().collect(),
        };
        // Contender order of round 0, and where cuBLAS is in it.
        let cublas_first = matches!(v.who, Who::Cublas | Who::CublasThenAll);
        let mut contenders: Vec<Box<dyn Timed + '_>> = Vec::new();
        let idle = Duration::from_millis(v.idle_ms);
        let blas_side = Launch(gemm);
        if cublas_first {
            contenders.push(Box::new(Idle(idle, blas_side)));
        }
        for r in &kernels {
            contenders.push(Box::new(Launch(move || r.launch(gpu))));
        }
        if !cublas_first {
            contenders.push(Box::new(Launch(gemm)));
        }
        let blas_at = if cublas_first { 0 } else { kernels.len() };
        let mut refs: Vec<&mut dyn Timed> =
            contenders.iter_mut().map(|b| b.as_mut() as _).collect();
        let mut prime = || ctx.warm.run(gpu, ctx.blas);
        let measured = time_rounds(
            gpu,
            &mut Protocol {
                warmup: v.warmup,
                iters: v.iters,
                flush: v.flush.then(|| ctx.flush.arg(gpu)),
                timeout,
                prime: if v.primed { Some(&mut prime) } else { None },
                rotate: v.rotate,
                nvml: if v.nvml { ctx.nvml } else { None },
                sync_each: v.sync_each,
                rescale: false,
                until: None,
            },
            &mut refs,
        )
        .with_context(|| format!("variant {}", v.name))?;
        let wall_ms = t0.elapsed().as_secs_f64() * 1e3;
        let side = |kernel: String, m: &Measured| Side {
            kernel,
            tflops: m.stats.tflops(flops),
            measured: m.clone(),
        };
        let cublas = side("cublas".into(), &measured[blas_at]);
        // Step N's side: where the variant times it.
        let kernel = kernels.iter().position(|r| r.step() == step).map(|i| {
            let at = if cublas_first { i + 1 } else { i };
            side(format!("step {step}"), &measured[at])
        });
        results.push(VariantResult {
            name: v.name.into(),
            what: v.what.replace("step N", &format!("step {step}")),
            primed: v.primed,
            rotated: v.rotate,
            wait_after_each_launch: v.sync_each,
            l2_flushed: v.flush,
            idle_ms_before_round: v.idle_ms,
            soak_ms_before: v.soak_ms,
            warmup: v.warmup,
            iters: v.iters,
            kernel_pct_of_cublas: kernel.as_ref().map(|k| 100.0 * k.tflops / cublas.tflops),
            cublas,
            kernel,
            wall_ms,
        });
    }
    Ok(DiagnoseReport {
        gpu: gpu.info.clone(),
        device,
        date: today(),
        commit: crate::provenance::commit(),
        shape,
        dtype,
        step,
        variants: results,
    })
}

/// Write the report as `diagnose-<gpu>-<date>.json` in `out`.
pub fn write(r: &DiagnoseReport, out: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let path = out.join(format!(
        "diagnose-{}-{}.json",
        gpu_slug(&r.gpu.name),
        r.date
    ));
    Results::Diagnose(r.clone()).write(&path)?;
    Ok(path)
}

pub fn print(r: &DiagnoseReport, path: &Path) {
    println!(
        "diagnose: cuBLAS and step {} at {} {} on {} (driver {}), commit {}, {}",
        r.step,
        r.shape,
        r.dtype,
        r.gpu.name,
        r.device
            .state
            .as_ref()
            .map_or("?".to_string(), |d| d.driver.clone()),
        r.commit,
        r.date
    );
    println!(
        "{:<22} {:>9} {:>7} {:>8} {:>7} {:>5} {:>9} {:>8}  clock held by",
        "variant", "cuBLAS us", "IQR us", "TFLOP/s", "SM MHz", "W", "step %", "wall ms"
    );
    for v in &r.variants {
        let c = &v.cublas.measured;
        let f = |x: Option<f64>, p: usize| x.map_or("-".to_string(), |x| format!("{x:.p$}"));
        println!(
            "{:<22} {:>9.1} {:>7.1} {:>8.1} {:>7} {:>5} {:>9} {:>8.0}  {}",
            v.name,
            c.stats.median_us,
            c.stats.iqr_us(),
            v.cublas.tflops,
            f(c.clocks.as_ref().map(|k| k.sm_mhz_median), 0),
            f(c.clocks.as_ref().and_then(|k| k.power_w_median), 0),
            f(v.kernel_pct_of_cublas, 1),
            v.wall_ms,
            c.clocks
                .as_ref()
                .map(|k| k.clock_event_reasons.join("+"))
                .unwrap_or_default()
        );
    }
    for v in &r.variants {
        println!("  {:<22} {}", v.name, v.what);
    }
    println!("wrote {}", path.display());
}
