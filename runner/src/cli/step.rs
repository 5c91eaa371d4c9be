//! `runner step N`: compile, verify and time a step (the work is in `step_cmd`).

use super::{ArchArg, ProblemArgs};
use crate::step_cmd;
use anyhow::{bail, Result};
use common::run::{EmulateMode, RunOptions};
use common::step::{Arch, KernelSpec};
use common::{Shape, Step, StepInfo};
use runner::steps;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// Step number.
    #[arg(value_name = "STEP")]
    step: u32,
    /// Which kernel: sm_100a or blackwell (the Blackwell kernel; emulated on an H100/H200) or
    /// sm_90a or hopper (its Hopper twin, native and timed on an H100/H200). Default: every
    /// kernel this GPU runs.
    #[arg(long, value_enum)]
    arch: Option<ArchArg>,
    #[command(flatten)]
    problem: ProblemArgs,
    /// Override a tuning parameter of the kernel, e.g. --param stages=5 (repeatable).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Timed runs (after warm-up); 0 skips timing (default 20; at most 100000). GPU runs only.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    iters: Option<u32>,
    /// Untimed warm-up runs (default 5; at most 100000). GPU runs only.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    warmup: Option<u32>,
    /// Do not flush L2 between timed runs.
    #[arg(long)]
    no_flush: bool,
    /// Run the Blackwell kernel under the tcgen05 emulation (sm_90 GPUs; the default there).
    #[arg(long, conflicts_with = "no_emulate")]
    emulate: bool,
    /// Run the Blackwell kernel natively or not at all: fail on a GPU without tcgen05.
    #[arg(long)]
    no_emulate: bool,
    /// Seconds before a running kernel is declared hung.
    #[arg(long, default_value_t = 30, allow_negative_numbers = true, value_parser = super::at_least::<1>)]
    timeout: u64,
    /// Compile and run this kernel file instead of the step's own (a file that includes
    /// hopper.cuh is taken for a Hopper twin unless --arch says otherwise). A `.toml` file holds
    /// edits of a stock kernel (e.g. exercises/hopper/step4_snake_sm90.toml).
    #[arg(long, value_name = "FILE")]
    kernel: Option<PathBuf>,
    /// Seed a known bug into the kernel (`runner mutations` lists them) to see it caught. A twin
    /// mutation (twin-...) edits the Hopper twin, the others the Blackwell kernel.
    #[arg(long, value_name = "NAME")]
    mutate: Option<String>,
    /// Hopper twin: build it with seeded delays (nanosleep) at the wrappers' named points (after
    /// a wgmma commit or wait, before an mbarrier arrive, after a wait or barrier, before a TMA
    /// load or store), so that an ordering bug the usual timing hides shows as a wrong result.
    /// Verified, not timed; try a handful of seeds.
    #[arg(long, value_name = "SEED")]
    stress: Option<u64>,
    /// Hopper twin: build it with every mbarrier wait bounded (1 s): a wait past the bound
    /// records the warp's role, the barrier, the parity awaited and what arrived, and the
    /// kernel traps; the error is that report. A native twin that hangs is re-run so once by
    /// itself; verified, not timed.
    #[arg(long, conflicts_with_all = ["trace", "time_emulation"])]
    hang_diagnosis: bool,
    /// Blackwell kernel under emulation: time N launches (default 5) of the emulation build
    /// with the emulation's strict rules (async proxy, bulk groups, tcgen05.ld poison, cta_group) off
    /// and N with them on, alternating, each build verified once; prints what the rules cost.
    #[arg(long, value_name = "N", num_args = 0..=1, default_missing_value = "5",
          value_parser = super::positive_u32, conflicts_with = "trace")]
    time_emulation: Option<u32>,
    /// Persistent steps: launch at most N clusters, so each loops over more tiles. Under cluster
    /// launch control (the simulator, the emulation): at most N clusters run at once, so running
    /// ones cancel the launches of the others.
    #[arg(long, value_name = "N", value_parser = super::positive_u32)]
    clusters: Option<u32>,
    /// Seed of the emulation's schedule perturbations (emulated runs only).
    #[arg(long, default_value_t = 0, value_name = "SEED")]
    emu_seed: u64,
    /// Run a kernel even if its static checks fail (Blackwell: the sm_100a PTX rules and the
    /// native sm_100a compile; twin: its PTX's TMA-store rules), to see what the emulation or
    /// the GPU makes of such a bug.
    #[arg(long)]
    no_static_check: bool,
    /// Record what ran. On a GPU: warp-role timelines, FILE_STEM-stepN-<arch>.json (Perfetto,
    /// chrome://tracing) and .svg for each kernel run, the kernel built with its trace calls on
    /// (verified, not timed; under emulation only the order of events counts). On the CPU
    /// simulator: FILE_STEM-stepN-sim.txt, its events one per line in the order they ran.
    /// FILE_STEM defaults to "trace"; a folder gets trace-stepN-* inside it; no folder is created.
    #[arg(long, value_name = "FILE_STEM", num_args = 0..=1, default_missing_value = "trace")]
    trace: Option<PathBuf>,
    /// With --trace: the CTAs of this many clusters (the grid's first) record.
    #[arg(long, value_name = "N", default_value_t = 2, requires = "trace",
          value_parser = super::positive_u32)]
    trace_clusters: u32,
    /// Print one JSON object {"schema", "runner", "runs": [...]} instead of the text report.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    sim: SimArgs,
    #[command(flatten)]
    device: super::DeviceArg,
}

/// The CPU simulator: what runs the Blackwell kernel where no GPU does, and on request anywhere.
#[derive(clap::Args, Clone)]
pub struct SimArgs {
    /// Run the Blackwell kernel on the CPU simulator (its sm_100a PTX, verified against an fp64
    /// reference), even on a GPU machine. Without a GPU it is what runs the Blackwell kernel.
    #[arg(long, conflicts_with_all = ["emulate", "no_emulate", "time_emulation", "stress"])]
    pub sim: bool,
    /// The simulator's schedule seed: the same seed replays the same interleaving (default 1).
    #[arg(long, value_name = "SEED")]
    pub sim_seed: Option<u64>,
    /// The simulator's schedule policy: random (the default), pct (random priorities with 3
    /// changes; pctN for N), async-late (asynchronous operations complete at the last moment)
    /// or async-early. Not with --explore, which cycles through the policies itself.
    #[arg(long, value_name = "POLICY", conflicts_with = "explore")]
    pub sim_policy: Option<common::simulate::Policy>,
    /// Simulate N schedules, 1 to 1000 (seeds from --sim-seed on, cycling through async-late,
    /// async-early, random and pct3), verifying each; the first failure is reported with the
    /// seed and policy that replay it. `all`: the proving mode, every distinct order of the
    /// synchronisation events (default problem: one cluster tile and four k-blocks, one
    /// cluster; M×N×K at most 2^25), within --prove-states and --prove-seconds; exit 0 clean, 1
    /// with a failing order (its --replay witness printed), 3 incomplete (a bound was hit).
    #[arg(long, value_name = "N|all", value_parser = explore_arg)]
    pub explore: Option<Explore>,
    /// With --explore all: choice points explored at most (default 200000, at most 2000000).
    #[arg(long, value_name = "N", requires = "explore",
          value_parser = clap::value_parser!(u64).range(1..=2_000_000))]
    pub prove_states: Option<u64>,
    /// With --explore all: seconds at most (default 60, at most 600).
    #[arg(long, value_name = "S", requires = "explore",
          value_parser = clap::value_parser!(u64).range(1..=600))]
    pub prove_seconds: Option<u64>,
    /// Run the Blackwell kernel on the simulator along WITNESS, a failing order --explore all
    /// printed (its comma-separated choices).
    #[arg(long, value_name = "WITNESS", value_parser = witness_arg,
          conflicts_with_all = ["explore", "sim_seed", "sim_policy"])]
    pub replay: Option<sim::prove::Witness>,
}

/// `--explore`: N schedules, or `all` (the proving mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Explore {
    Schedules(u32),
    All,
}

fn explore_arg(s: &str) -> Result<Explore, String> {
    if s == "all" {
        return Ok(Explore::All);
    }
    super::count_upto::<1000>(s)
        .map(Explore::Schedules)
        .map_err(|e| format!("{e}, or `all`"))
}

fn witness_arg(s: &str) -> Result<sim::prove::Witness, String> {
    let w: sim::prove::Witness = s.parse()?;
    if w.0.is_empty() {
        return Err("an empty witness: give the choices --explore all printed".into());
    }
    Ok(w)
}

/// CUDA's launch limits (gridDim.x < 2^31, gridDim.y <= 65535).
const MAX_GRID_X: u64 = (1 << 31) - 1;
const MAX_GRID_Y: u64 = 65535;
/// The most memory of any GPU the workbook runs on (H200: 141 GB).
const MAX_DEVICE_BYTES: u64 = 141_000_000_000;

/// Refuse a shape no launch of `step` can cover, or whose buffers no GPU holds, before anything
/// is compiled or allocated (a shape the kernel's tiles do not divide is reported later, by the
/// kernel's own check).
pub fn check_bounds(step: &'static dyn Step, s: Shape) -> Result<()> {
    let (m, n, k) = (s.m as u64, s.n as u64, s.k as u64);
    if [m, n, k].iter().any(|&d| d > i32::MAX as u64) {
        bail!("{m}x{n}x{k}: each of M, N and K must be below 2^31 (the kernels index with 32-bit integers)");
    }
    // Bounded here by the largest GPU of any kind, so a machine without one refuses it too;
    // on a GPU, by the memory free there (`Gpu::check_fits`, in step_cmd).
    let bytes = s.device_bytes();
    if bytes > MAX_DEVICE_BYTES {
        bail!(
            "{m}x{n}x{k} needs {:.0} GB of GPU memory (A, B, C and the f32 reference); the largest GPU the workbook runs on (H200) has 141 GB",
            bytes as f64 / 1e9
        );
    }
    for arch in Arch::ALL {
        let ks = KernelSpec::new(step, arch).shape();
        let tiles = (m / u64::from(ks.cluster_tile.0)) * (n / u64::from(ks.cluster_tile.1));
        // The grid of one cluster per tile, or the smallest persistent one: the rule of the plan.
        let (x, y) = ks.grid(s, 1);
        if x > MAX_GRID_X || y > MAX_GRID_Y || tiles > u64::from(u32::MAX) {
            bail!(
                "{m}x{n}x{k} needs a grid of {x} x {y} CTAs for step {}'s {}; CUDA allows at most {MAX_GRID_X} x {MAX_GRID_Y}",
                step.info().number,
                arch.name()
            );
        }
    }
    Ok(())
}

/// `--clusters` caps a persistent grid; a step whose kernels launch one cluster per tile has
/// none to cap.
fn check_clusters(a: &Args, step: &'static dyn Step) -> Result<()> {
    let persistent = |s: &StepInfo| {
        Arch::ALL
            .iter()
            .any(|&arch| s.kernel(arch).launch.schedule().fills_the_gpu())
    };
    if a.clusters.is_some() && !persistent(step.info()) {
        let steps: Vec<String> = steps::infos()
            .into_iter()
            .filter(|s| persistent(s))
            .map(|s| s.number.to_string())
            .collect();
        bail!(
            "--clusters caps the grid of the persistent steps ({}); step {} launches one cluster per tile",
            steps.join(", "),
            step.info().number
        );
    }
    Ok(())
}

/// A flag that cannot apply to this run is a usage error that says why (never silently
/// ignored): the GPU's timing flags on the simulator, the simulator's flags on the Hopper twin.
fn refuse_inapplicable(a: &Args) -> Result<()> {
    let simulated = a.sim.sim || a.sim.explore.is_some();
    let timing = [
        (a.iters.is_some(), "--iters"),
        (a.warmup.is_some(), "--warmup"),
        (a.no_flush, "--no-flush"),
    ];
    if let (true, Some((_, flag))) = (simulated, timing.iter().find(|(set, _)| *set)) {
        bail!(
            "{flag} times runs on a GPU; the CPU simulator ({}) verifies and never times",
            if a.sim.sim { "--sim" } else { "--explore" }
        );
    }
    let sim_flags = [
        (a.sim.sim_seed.is_some(), "--sim-seed"),
        (a.sim.sim_policy.is_some(), "--sim-policy"),
        (a.sim.explore.is_some(), "--explore"),
    ];
    if let (Some(ArchArg::Sm90a), Some((_, flag))) =
        (a.arch, sim_flags.iter().find(|(set, _)| *set))
    {
        bail!("{flag} applies to the Blackwell kernel on the CPU simulator; the Hopper twin (--arch sm_90a) runs only on a GPU");
    }
    Ok(())
}

/// Say which given flags this run will not use, rather than ignore them silently.
fn warn_ignored(a: &Args) {
    if a.emu_seed != 0 && (matches!(a.arch, Some(ArchArg::Sm90a)) || a.stress.is_some()) {
        eprintln!("warning: --emu-seed applies to emulated runs of the Blackwell kernel; the Hopper twin runs natively: ignored");
    }
    let mut seen: Vec<&str> = Vec::new();
    for p in &a.params {
        let name = p.split('=').next().unwrap_or(p);
        if seen.contains(&name) {
            eprintln!("warning: --param {name} is given more than once: the last one counts");
        }
        seen.push(name);
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    a.device.apply();
    let step = steps::get(a.step)?;
    if let Some(shape) = a.problem.shape(Shape::DEFAULT) {
        check_bounds(step, shape)?;
    }
    check_clusters(&a, step)?;
    refuse_inapplicable(&a)?;
    if let Some(t) = &a.trace {
        crate::outdir::check_trace_stem(t)?;
    }
    if let Some(k) = &a.kernel {
        crate::contenders::check_edit_target(k, common::compile::read_kernel, a.step, None)?;
    }
    if !a.json {
        warn_ignored(&a);
    }
    let diagnosis = a.hang_diagnosis;
    let (request, mut opts) = request(a)?;
    // A native twin that hangs is re-run once as a hang diagnosis build: this very command
    // with --hang-diagnosis, in a process of its own.
    if !diagnosis {
        if let Ok(program) = std::env::current_exe() {
            // Its report is its error, in text (not --json's object).
            let mut args: Vec<std::ffi::OsString> = std::env::args_os()
                .skip(1)
                .filter(|a| a != "--json")
                .collect();
            args.push("--hang-diagnosis".into());
            opts.hang_rerun = Some(common::run::HangRerun { program, args });
        }
    }
    step_cmd::run(&request, opts)
}

/// What `runner step` with these arguments asks of `step_cmd`: the request and the run options
/// (the GPU checks' tests parse their children's arguments back through this).
pub fn request(a: Args) -> Result<(crate::step_request::Request, RunOptions)> {
    let step = steps::get(a.step)?;
    let opts = RunOptions {
        shape: a.problem.shape(Shape::DEFAULT),
        dtype: a.problem.dtype,
        dist: a.problem.dist,
        seed: a.problem.seed,
        warmup: a.warmup.unwrap_or(5) as usize,
        iters: a.iters.unwrap_or(20) as usize,
        flush_l2: !a.no_flush,
        emulate: if a.emulate {
            EmulateMode::Always
        } else if a.no_emulate {
            EmulateMode::Never
        } else {
            EmulateMode::Auto
        },
        timeout: Duration::from_secs(a.timeout),
        source: None,
        cpu_samples: 256,
        clusters: a.clusters,
        emu_seed: a.emu_seed,
        trace_clusters: a.trace.as_ref().map(|_| a.trace_clusters),
        static_check: !a.no_static_check,
        stress: a.stress,
        hang_diagnosis: a.hang_diagnosis,
        hang_rerun: None,
    };
    let sim = crate::step_request::SimRequest {
        forced: a.sim.sim,
        sim_flags_given: a.sim.sim_seed.is_some() || a.sim.sim_policy.is_some(),
        options: common::simulate::SimOptions {
            seed: a.sim.sim_seed.unwrap_or(1),
            policy: a.sim.sim_policy.unwrap_or(common::simulate::Policy::Random),
            schedules: match a.sim.explore {
                Some(Explore::Schedules(n)) => n,
                _ => 1,
            },
            trace: a.trace.is_some(),
            replay: a.sim.replay.clone(),
        },
        prove: match a.sim.explore {
            Some(Explore::All) => Some(common::simulate::ProveOptions {
                max_states: a
                    .sim
                    .prove_states
                    .unwrap_or(common::simulate::PROVE_STATES.0),
                seconds: a
                    .sim
                    .prove_seconds
                    .unwrap_or(common::simulate::PROVE_SECONDS.0),
            }),
            _ => {
                if a.sim.prove_states.is_some() || a.sim.prove_seconds.is_some() {
                    bail!("--prove-states and --prove-seconds bound --explore all");
                }
                None
            }
        },
    };
    let request = crate::step_request::Request {
        step,
        arch: a.arch.map(ArchArg::arch),
        params: a.params,
        kernel_file: a.kernel,
        mutate: a.mutate,
        json: a.json,
        trace: a.trace,
        time_emulation: a.time_emulation,
        dims: (a.problem.m, a.problem.n, a.problem.k),
        sim,
    };
    Ok((request, opts))
}
