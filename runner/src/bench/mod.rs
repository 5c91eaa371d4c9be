//! `runner bench`: every step's native kernel against cuBLAS, over shapes and dtypes, in one run.
//!
//! On an H100/H200 the Hopper twins run; on a B200 the Blackwell kernels. For each dtype and
//! shape: fresh seeded inputs, one verified launch of every kernel (NaN-poisoned output, cuBLAS
//! and fp64 references), then `iters` rounds of the one protocol (`common::timing::time_rounds`:
//! primed, cuBLAS and every kernel back to back in rotated order, L2 flushed before each launch,
//! NVML clocks read during each); each kernel writes its own C, and the last timed output of
//! each is verified again. Medians, quartiles and clocks go to a results JSON and an SVG plot
//! (`--heatmap`: over a grid of shapes, [`heatmap`]); `--diagnose` times cuBLAS under the
//! protocols the workbook used before ([`diagnose`]). [`crate::contenders`] names the variants
//! that are timed beside the steps.

pub mod diagnose;
pub mod heatmap;
pub mod measure;

use crate::contenders::Contender;
use crate::provenance;
use crate::results::{AdaptiveRounds, BenchCase, BenchReport, CaseConfidence, Results, VsPrevious};
use anyhow::{anyhow, bail, Context, Result};
use common::compile::Target;
use common::confidence::{Ratio, Stop, StopRule, RESAMPLES, SEED, STOP_RESAMPLES};
use common::cublas::Blas;
use common::cublas::Warmup;
use common::gpu::CudaResultExt;
use common::gpu::{self, Gpu, GpuStatus};
use common::problem::{Dist, Dtype, Problem, Shape};
use common::run::open_nvml;
use common::run::{
    alloc_c, cublas_reference, dptr, launch_and_wait, poison, Buf16, DeviceProblem, L2Flush,
    LoadedKernel,
};
use common::step::{Arch, KernelSpec};
use common::timing::{time_rounds, Launch, Protocol, Timed};
use common::verify::verify;
use common::Step;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub struct BenchOptions {
    pub steps: Vec<&'static dyn Step>,
    /// Named variants timed beside the steps (`contenders`).
    pub contenders: Vec<&'static Contender>,
    pub shapes: Vec<Shape>,
    pub dtypes: Vec<Dtype>,
    pub iters: usize,
    pub warmup: usize,
    pub seed: u64,
    pub out: PathBuf,
    pub timeout: Duration,
    /// Write `heatmap-<gpu>-<date>.json` and its heatmap SVG instead of the bench's files.
    pub heatmap: bool,
    /// Adaptive rounds: `iters` is then the least number of rounds, and more are added until
    /// every interval is narrow enough or the time cap is hit. None: exactly `iters` rounds.
    pub adaptive: Option<Adaptive>,
}

/// The adaptive rounds' settings (`common::confidence::StopRule`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Adaptive {
    /// Stop once every interval's half-width is below this fraction of its median (0.005).
    pub target: f64,
    /// Stop after this long of timed rounds at one shape and dtype, narrow or not.
    pub cap: Duration,
}

/// The most rounds an adaptive run times at one shape and dtype, whatever its cap.
pub const MAX_ROUNDS: usize = 100_000;

impl BenchOptions {
    fn stop_rule(&self) -> Option<StopRule> {
        self.adaptive.map(|a| StopRule {
            target: a.target,
            min_rounds: self.iters,
            max_rounds: MAX_ROUNDS.max(self.iters),
            cap: a.cap,
        })
    }
}

/// The default shapes, and the square sizes `--sweep` adds.
pub const SWEEP_SIZES: [usize; 6] = [1024, 2048, 3072, 4096, 6144, 8192];

/// Which kernels this GPU runs natively; emulated times mean nothing, so nothing else is timed.
pub fn native_arch(info: &gpu::GpuInfo) -> Result<Arch> {
    match info.compute_capability {
        (9, 0) => Ok(Arch::Hopper),
        (10, 0) => Ok(Arch::Blackwell),
        _ => bail!(
            "runner bench times kernels natively: the Hopper twins on sm_90 (H100/H200), the Blackwell kernels on sm_100 (B200); {} is {}, where they could only run under emulation, whose times mean nothing",
            info.name,
            info.sm()
        ),
    }
}

pub struct Entry {
    /// The case's `kernel`: "step N" or a contender's name.
    pub name: String,
    pub step: Option<u32>,
    spec: KernelSpec,
    kernel: LoadedKernel,
}

/// Every step's kernel for `arch`, compiled and loaded for `dtype`.
fn step_entries(
    gpu: &Gpu,
    steps: &[&'static dyn Step],
    arch: Arch,
    dtype: Dtype,
) -> Result<Vec<Entry>> {
    steps
        .iter()
        .map(|&step| {
            let n = step.info().number;
            let spec = KernelSpec::new(step, arch);
            let kernel =
                LoadedKernel::load(gpu, &spec, Target::native(arch), &spec.source(), dtype)
                    .with_context(|| format!("step {n}"))?;
            Ok(Entry {
                name: format!("step {n}"),
                step: Some(n),
                spec,
                kernel,
            })
        })
        .collect()
}

impl Entry {
    /// A kernel to time under `name` (the measuring exercises time variants of a twin this way).
    pub fn new(name: String, step: Option<u32>, spec: KernelSpec, kernel: LoadedKernel) -> Entry {
        Entry {
            name,
            step,
            spec,
            kernel,
        }
    }
}

/// Time everything `opts` names and write its results file; returns the report, that file and
/// where its figure goes (drawn here for a heatmap; the ladder plot is `book::plot::ladder`'s).
pub fn run(opts: &BenchOptions) -> Result<(BenchReport, PathBuf, PathBuf)> {
    let gpu = match gpu::open() {
        GpuStatus::Present(g) => g,
        GpuStatus::Absent(why) => bail!("runner bench needs a GPU: {why}"),
    };
    let arch = native_arch(&gpu.info)?;
    let blas = Blas::new(&gpu)?;
    let flush = L2Flush::new(&gpu)?;
    let warm = Warmup::new(&gpu)?;
    let (nvml, device) = open_nvml(&gpu);
    let clocks_before = provenance::clocks();
    let mut cases = Vec::new();
    let kernels = opts.steps.len() + opts.contenders.len();
    let total = (opts.dtypes.len() * opts.shapes.len() * (kernels + 1)) as u64;
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} [{elapsed_precise}]")
            .map_err(|e| anyhow!("{e}"))?,
    );
    for &dtype in &opts.dtypes {
        bar.set_message(format!("compiling the steps ({dtype})"));
        let mut entries = step_entries(&gpu, &opts.steps, arch, dtype)?;
        for c in &opts.contenders {
            if c.arch != arch {
                bail!(
                    "contender {} is a {}, which this GPU does not run natively",
                    c.name,
                    c.arch.name()
                );
            }
            let spec = c.spec()?;
            bar.set_message(format!("compiling {} ({dtype})", c.name));
            let kernel = LoadedKernel::load(&gpu, &spec, Target::native(arch), &c.source()?, dtype)
                .with_context(|| format!("contender {}", c.name))?;
            entries.push(Entry {
                name: c.name.to_string(),
                step: None,
                spec,
                kernel,
            });
        }
        for &shape in &opts.shapes {
            bar.set_message(format!("{shape} {dtype}"));
            let ctx = Ctx {
                gpu: &gpu,
                blas: &blas,
                flush: &flush,
                warm: &warm,
                nvml: nvml.as_ref(),
            };
            cases.extend(bench_shape(&ctx, &entries, shape, dtype, opts, &bar)?);
        }
    }
    bar.finish_and_clear();
    let report = BenchReport {
        peak_tflops: gpu.info.peak_tflops(),
        gpu: gpu.info.clone(),
        driver: provenance::smi("driver_version"),
        arch,
        clocks_before,
        clocks_after: provenance::clocks(),
        date: provenance::today(),
        commit: provenance::commit(),
        iters: opts.iters,
        warmup: opts.warmup,
        l2_flushed: true,
        protocol: Some(PROTOCOL.to_string()),
        device: Some(device),
        seed: opts.seed,
        dist: Dist::Gaussian,
        adaptive: opts.stop_rule().map(|r| AdaptiveRounds {
            target_half_width: r.target,
            time_cap_s: r.cap.as_secs_f64(),
            min_rounds: r.min_rounds,
            max_rounds: r.max_rounds,
            resamples: RESAMPLES,
            bootstrap_seed: SEED,
        }),
        cases,
    };
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("cannot create {}", opts.out.display()))?;
    // The file holds a copy; the table and the plot read the report itself.
    let file = if opts.heatmap {
        Results::Heatmap(report.clone())
    } else {
        Results::Bench(report.clone())
    };
    let base = format!(
        "{}-{}-{}",
        file.kind(),
        provenance::gpu_slug(&report.gpu.name),
        report.date
    );
    // A second run on the same GPU model and day is a run of its own: it never overwrites the
    // first (the book's verdicts count committed runs, `book::rule`).
    let base = (1..)
        .map(|i| {
            if i == 1 {
                base.clone()
            } else {
                format!("{base}-{i}")
            }
        })
        .find(|b| !opts.out.join(format!("{b}.json")).exists())
        .unwrap_or(base);
    let json = opts.out.join(format!("{base}.json"));
    let svg = opts.out.join(format!("{base}.svg"));
    file.write(&json)?;
    // The heatmap is the bench's own figure; the ladder plot is the book's, which the caller
    // draws (`book::plot` reads bench reports: drawing it here would make the two modules
    // import each other).
    if opts.heatmap {
        heatmap::write(&report, &svg)?;
    }
    Ok((report, json, svg))
}

/// The one description of the protocol every results file carries.
pub const PROTOCOL: &str = "common::timing::time_rounds: per round, ~5 ms of cuBLAS tensor-core work on scratch data (prime), then every contender back to back in rotated order, each after an L2 flush (2x the L2) and between two CUDA events; outputs verified before timing; median, min, quartiles; NVML SM clock and power read during each contender's launches; per kernel, the paired per-round speed ratio to cuBLAS and to the kernel before it (common::confidence: median, percentile-bootstrap 95 % interval, verdict)";

/// What every shape of a run shares.
pub struct Ctx<'a> {
    pub gpu: &'a Gpu,
    pub blas: &'a Blas,
    pub flush: &'a L2Flush,
    pub warm: &'a Warmup,
    pub nvml: Option<&'a common::nvml::Nvml>,
}

/// A kernel verified once at a shape, ready to be timed into its own C.
pub struct Ready<'a> {
    entry: &'a Entry,
    plan: common::step::Plan,
    args: common::run::LaunchArgs,
    c: Buf16,
}

impl Ready<'_> {
    /// Launch once (no wait).
    pub fn launch(&self, gpu: &Gpu) -> Result<()> {
        // SAFETY: the arguments were built for this plan over live buffers.
        unsafe { self.entry.kernel.launch(gpu, &self.plan, &self.args) }
    }
    pub fn step(&self) -> u32 {
        self.entry.spec.info().number
    }
}

/// Each kernel: one verified launch into its own C (then poisoned again), or the reason it is
/// not timed, as a case.
pub fn ready_kernels<'e>(
    gpu: &Gpu,
    entries: &'e [Entry],
    dp: &DeviceProblem,
    reference: &[f32],
    timeout: Duration,
    bar: &ProgressBar,
) -> Result<(Vec<Ready<'e>>, Vec<BenchCase>)> {
    let (shape, dtype) = (dp.shape(), dp.problem.dtype);
    let (pa, pb, _) = dp.ptrs(gpu);
    let check = |c: &Buf16| -> Result<common::verify::Verification> {
        let out = gpu.stream.clone_dtoh(c).cuda("copy from the GPU")?;
        Ok(verify(&dp.problem, &out, reference, 256))
    };

    let mut timed = Vec::new();
    let mut cases = Vec::new();
    for e in entries {
        let name = &e.name;
        let mut case = BenchCase {
            shape,
            dtype,
            kernel: name.clone(),
            step: e.step,
            params: Some(
                e.spec
                    .params
                    .iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect(),
            ),
            skipped: None,
            verified: false,
            rel_error_norm: None,
            stats: None,
            clocks: None,
            tflops: None,
            pct_of_peak: None,
            pct_of_cublas: None,
            confidence: CaseConfidence::default(),
        };
        let plan = match e.kernel.plan(gpu, shape, None) {
            Ok(p) => p,
            Err(err) => {
                case.skipped = Some(format!("{err:#}"));
                cases.push(case);
                bar.inc(1);
                continue;
            }
        };
        let c = alloc_c(gpu, shape)?;
        let args = common::run::LaunchArgs::new(&plan, dtype, shape, pa, pb, dptr(&c, gpu))?;
        poison(gpu, &c)?;
        launch_and_wait(gpu, &e.kernel, &plan, &args, None, 0, timeout)
            .with_context(|| format!("{name} at {shape} {dtype}"))?;
        let v = check(&c)?;
        case.rel_error_norm = Some(v.rel_error_norm);
        if !v.passed {
            case.skipped = Some(format!("verification failed: {}", v.summary()));
            cases.push(case);
            bar.inc(1);
            continue;
        }
        poison(gpu, &c)?; // the timed launches must write it again
        cases.push(case);
        timed.push(Ready {
            entry: e,
            plan,
            args,
            c,
        });
    }

    Ok((timed, cases))
}

/// `runner bench --diagnose`: the protocol variants of [`diagnose`] on the first shape
/// and dtype, with the first persistent step asked for (step 4 of the ladder), or else the last
/// one, as the kernel of the pair variants.
pub fn run_diagnose(opts: &BenchOptions) -> Result<()> {
    let gpu = match gpu::open() {
        GpuStatus::Present(g) => g,
        GpuStatus::Absent(why) => bail!("runner bench --diagnose needs a GPU: {why}"),
    };
    let arch = native_arch(&gpu.info)?;
    let (Some(&shape), Some(&dtype)) = (opts.shapes.first(), opts.dtypes.first()) else {
        bail!("--diagnose needs a shape and a dtype");
    };
    // The first persistent kernel asked for (step 4 of the stock ladder), else the last step.
    let step = opts
        .steps
        .iter()
        .find(|s| s.info().kernel(arch).launch.schedule().fills_the_gpu())
        .or(opts.steps.last())
        .map(|s| s.info().number)
        .ok_or_else(|| anyhow!("--diagnose needs at least one step"))?;
    let blas = Blas::new(&gpu)?;
    let flush = L2Flush::new(&gpu)?;
    let warm = Warmup::new(&gpu)?;
    let (nvml, device) = open_nvml(&gpu);
    let entries = step_entries(&gpu, &opts.steps, arch, dtype)?;
    let ctx = Ctx {
        gpu: &gpu,
        blas: &blas,
        flush: &flush,
        warm: &warm,
        nvml: nvml.as_ref(),
    };
    let report = diagnose::run(
        &ctx,
        &entries,
        step,
        shape,
        dtype,
        opts.seed,
        opts.timeout,
        device,
    )?;
    let path = diagnose::write(&report, &opts.out)?;
    diagnose::print(&report, &path);
    Ok(())
}

/// cuBLAS and every kernel of `entries` at one shape and dtype, by the one protocol: the cases,
/// cuBLAS first.
pub fn bench_shape(
    ctx: &Ctx<'_>,
    entries: &[Entry],
    shape: Shape,
    dtype: Dtype,
    opts: &BenchOptions,
    bar: &ProgressBar,
) -> Result<Vec<BenchCase>> {
    let Ctx {
        gpu,
        blas,
        flush,
        warm,
        nvml,
    } = *ctx;
    let dp = DeviceProblem::upload(
        gpu,
        Problem::generate(shape, dtype, Dist::Gaussian, opts.seed),
    )?;
    let reference = cublas_reference(gpu, blas, &dp)?;
    let (pa, pb, _) = dp.ptrs(gpu);
    let check = |c: &Buf16| -> Result<common::verify::Verification> {
        let out = gpu.stream.clone_dtoh(c).cuda("copy from the GPU")?;
        Ok(verify(&dp.problem, &out, &reference, 256))
    };
    let (timed, mut cases) = ready_kernels(gpu, entries, &dp, &reference, opts.timeout, bar)?;

    // cuBLAS and every verified kernel, in rotated order round by round (common::timing).
    let c_blas = alloc_c(gpu, shape)?;
    let p_blas = dptr(&c_blas, gpu);
    let mut contenders: Vec<Box<dyn Timed + '_>> = vec![Box::new(Launch(|| {
        blas.gemm(shape, dtype, pa, pb, p_blas, false)
    }))];
    for t in &timed {
        contenders.push(Box::new(Launch(move || t.launch(gpu))));
    }
    let mut refs: Vec<&mut dyn Timed> = contenders.iter_mut().map(|b| b.as_mut() as _).collect();
    let mut prime = || warm.run(gpu, blas);
    // The pairs whose intervals the adaptive rounds watch: every kernel against cuBLAS (index
    // 0) and against the kernel before it, where that one is timed too.
    let previous: Vec<Option<usize>> = timed
        .iter()
        .map(|t| {
            let name = previous_kernel(t.entry.step, t.step())?;
            timed.iter().position(|u| u.entry.name == name)
        })
        .collect();
    let pairs: Vec<(usize, usize)> = (0..timed.len())
        .flat_map(|j| std::iter::once((0, j + 1)).chain(previous[j].map(|p| (p + 1, j + 1))))
        .collect();
    let rule = opts.stop_rule();
    let mut started: Option<Instant> = None;
    let mut checked = 0;
    let mut stopped: Option<Stop> = None;
    let mut until = |samples: &[Vec<f64>]| -> bool {
        let Some(rule) = rule else { return false };
        let t0 = *started.get_or_insert_with(Instant::now);
        let n = samples.first().map_or(0, Vec::len);
        let widest = rule.due(n, checked).then(|| {
            checked = n;
            widest_half_width(samples, &pairs)
        });
        stopped = rule.stop(n, t0.elapsed(), widest);
        stopped.is_some()
    };
    let mut protocol = Protocol::standard(
        opts.warmup,
        rule.map_or(opts.iters, |r| r.max_rounds),
        Some(flush.arg(gpu)),
        opts.timeout,
        &mut prime,
        nvml,
    );
    protocol.until = Some(&mut until);
    let measured = time_rounds(gpu, &mut protocol, &mut refs)?;
    drop(refs);
    drop(contenders);
    let cap_hit = rule.map(|_| matches!(stopped, Some(Stop::TimeCap | Stop::MaxRounds)));
    let flops = shape.flops();
    let peak = gpu.info.peak_tflops();
    let blas_stats = measured[0].stats.clone();
    let blas_tflops = blas_stats.tflops(flops);
    bar.inc(1);

    // The last timed output of every kernel, verified.
    for (j, (t, m)) in timed.iter().zip(&measured[1..]).enumerate() {
        let st = &m.stats;
        let v = check(&t.c)?;
        let name = &t.entry.name;
        let case = cases
            .iter_mut()
            .find(|c| &c.kernel == name)
            .ok_or_else(|| anyhow!("internal: no case for {name}"))?;
        let tflops = st.tflops(flops);
        case.verified = v.passed;
        case.rel_error_norm = Some(v.rel_error_norm);
        if !v.passed {
            case.skipped = Some(format!("timed output failed verification: {}", v.summary()));
        } else {
            case.stats = Some(st.clone());
            case.clocks = m.clocks.clone();
            case.tflops = Some(tflops);
            case.pct_of_peak = peak.map(|p| 100.0 * tflops / p);
            case.pct_of_cublas = Some(100.0 * tflops / blas_tflops);
            case.confidence = CaseConfidence {
                ratio_to_cublas: Ratio::paired(&measured[0].samples_us, &m.samples_us),
                vs_previous: previous[j].and_then(|p| {
                    Some(VsPrevious {
                        contender: timed[p].entry.name.clone(),
                        ratio: Ratio::paired(&measured[p + 1].samples_us, &m.samples_us)?,
                    })
                }),
                cap_hit,
            };
        }
        bar.inc(1);
    }
    bar.inc((entries.len() - timed.len()) as u64);
    cases.insert(
        0,
        BenchCase {
            shape,
            dtype,
            kernel: "cublas".into(),
            step: None,
            params: None,
            skipped: None,
            verified: true,
            rel_error_norm: None,
            stats: Some(blas_stats),
            clocks: measured[0].clocks.clone(),
            tflops: Some(blas_tflops),
            pct_of_peak: peak.map(|p| 100.0 * blas_tflops / p),
            pct_of_cublas: Some(100.0),
            confidence: CaseConfidence {
                cap_hit,
                ..CaseConfidence::default()
            },
        },
    );
    Ok(cases)
}

/// The kernel an entry is compared with besides cuBLAS: step N's is step N - 1 (none for step
/// 0), a contender's (`step` None) the step whose kernel it varies, `varies`.
fn previous_kernel(step: Option<u32>, varies: u32) -> Option<String> {
    match step {
        Some(0) => None,
        Some(n) => Some(format!("step {}", n - 1)),
        None => Some(format!("step {varies}")),
    }
}

/// The widest relative half-width of the intervals of `pairs` (base, kernel: indices into
/// `samples`), from [`STOP_RESAMPLES`] resamples each; infinite where one cannot be computed
/// yet.
fn widest_half_width(samples: &[Vec<f64>], pairs: &[(usize, usize)]) -> f64 {
    pairs
        .iter()
        .map(|&(b, k)| {
            Ratio::paired_with(&samples[b], &samples[k], STOP_RESAMPLES)
                .map_or(f64::INFINITY, |r| r.half_width())
        })
        .fold(0.0, f64::max)
}

/// The table printed last.
pub fn print_table(r: &BenchReport, json: &Path, svg: &Path) {
    let rounds = match &r.adaptive {
        Some(a) => format!(
            "adaptive rounds (at least {}, until every 95 % interval is within ±{}% of its median or {:.0} s per shape and dtype)",
            a.min_rounds,
            100.0 * a.target_half_width,
            a.time_cap_s
        ),
        None => format!("{} primed rotated rounds", r.iters),
    };
    println!(
        "bench: {} ({}, driver {}), {} kernels, {rounds} after {} warm-up, L2 flushed, commit {}, {}",
        r.gpu.name,
        r.gpu.sm(),
        r.gpu.driver_version,
        r.arch.name(),
        r.warmup,
        r.commit,
        r.date
    );
    if let Some(c) = &r.clocks_before {
        println!("clocks (sm, max sm, mem, max mem, temp, power): before {c}");
    }
    if let Some(device) = &r.device {
        match (&device.state, &device.nvml_error) {
            (Some(d), _) => println!(
                "NVML: driver {}, SM {} MHz before the run; SM MHz and W below are read during each contender's launches",
                d.driver, d.sm_mhz
            ),
            (None, Some(e)) => println!("NVML: no readings ({e})"),
            (None, None) => {}
        }
    }
    println!("x cuBLAS and vs prev: the median of the per-round speed ratios (the other's time over this one's, in the same round) [95 % bootstrap interval], and what the interval says");
    println!(
        "{:<16} {:<5} {:<10} {:>10} {:>7} {:>9} {:>8} {:>9} {:>7} {:>5} {:>6}  {:<40} {:<50} note",
        "shape",
        "dtype",
        "kernel",
        "median us",
        "IQR us",
        "TFLOP/s",
        "% peak",
        "% cuBLAS",
        "SM MHz",
        "W",
        "rounds",
        "x cuBLAS [95% CI]",
        "vs prev [95% CI]"
    );
    for c in &r.cases {
        let f = |v: Option<f64>, p: usize| v.map_or("-".to_string(), |x| format!("{x:.p$}"));
        let conf = &c.confidence;
        let reasons = c
            .clocks
            .as_ref()
            .filter(|k| !k.clock_event_reasons.is_empty())
            .map(|k| format!("clock held by {}", k.clock_event_reasons.join("+")));
        let cap = (conf.cap_hit == Some(true)).then_some("time cap before the target interval");
        let note = [c.skipped.as_deref(), cap, reasons.as_deref()]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join("; ");
        println!(
            "{:<16} {:<5} {:<10} {:>10} {:>7} {:>9} {:>8} {:>9} {:>7} {:>5} {:>6}  {:<40} {:<50} {}",
            c.shape.to_string(),
            c.dtype.to_string(),
            c.kernel,
            f(c.stats.as_ref().map(|s| s.median_us), 1),
            f(c.stats.as_ref().map(|s| s.iqr_us()), 1),
            f(c.tflops, 1),
            f(c.pct_of_peak, 1),
            f(c.pct_of_cublas, 1),
            f(c.clocks.as_ref().map(|k| k.sm_mhz_median), 0),
            f(c.clocks.as_ref().and_then(|k| k.power_w_median), 0),
            c.stats.as_ref().map_or("-".to_string(), |s| s.runs.to_string()),
            conf.ratio_to_cublas
                .as_ref()
                .map_or("-".to_string(), |x| format!("{} {}", x.describe(), x.verdict.word())),
            conf.vs_previous.as_ref().map_or("-".to_string(), |v| format!(
                "{}: {} {}",
                v.contender,
                v.ratio.describe(),
                v.ratio.verdict.word()
            )),
            note
        );
    }
    println!("wrote {} and {}", json.display(), svg.display());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kernel_is_paired_with_the_one_before_it() {
        assert_eq!(previous_kernel(Some(0), 0), None);
        assert_eq!(previous_kernel(Some(4), 4).as_deref(), Some("step 3"));
        assert_eq!(previous_kernel(None, 6).as_deref(), Some("step 6"));
        // The widest interval decides; one that cannot be computed yet is infinitely wide.
        let flat = vec![100.0; 40];
        let noisy: Vec<f64> = (0..40).map(|i| 100.0 + (i % 7) as f64).collect();
        let samples = vec![flat.clone(), flat.clone(), noisy];
        assert_eq!(widest_half_width(&samples, &[(0, 1)]), 0.0);
        let w = widest_half_width(&samples, &[(0, 1), (0, 2)]);
        assert!(w > 0.0 && w.is_finite(), "{w}");
        let short = vec![flat, vec![100.0]];
        assert_eq!(widest_half_width(&short, &[(0, 1)]), f64::INFINITY);
    }

    #[test]
    fn only_native_kernels_are_timed() {
        let mut g = gpu::GpuInfo {
            name: "x".into(),
            compute_capability: (9, 0),
            sm_count: 132,
            max_clock_mhz: 1980,
            l2_bytes: 1,
            max_smem_per_block: 1,
            driver_version: "13.0".into(),
        };
        assert_eq!(native_arch(&g).unwrap(), Arch::Hopper);
        g.compute_capability = (10, 0);
        assert_eq!(native_arch(&g).unwrap(), Arch::Blackwell);
        g.compute_capability = (8, 0);
        assert!(native_arch(&g)
            .unwrap_err()
            .to_string()
            .contains("times mean nothing"));
    }
}
