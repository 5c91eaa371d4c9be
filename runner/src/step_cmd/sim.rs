//! `runner step N` on the CPU simulator: the Blackwell kernel's sm_100a PTX run by
//! `common::simulate` where there is no GPU, or anywhere with `--sim` / `--explore`.

use crate::report;
use crate::step_request::Request;
use anyhow::{bail, Context, Result};
use common::gpu::GpuStatus;
use common::run::RunOptions;
use common::simulate::{self, SimProblem, SimReport};
use common::step::KernelSpec;
use common::verdict::Verdict;
use common::Shape;
use std::path::{Path, PathBuf};

/// The problem of a simulated run: the dimensions given, the others from the simulator's
/// default for this kernel (small: a CPU runs it).
pub fn shape(req: &Request, spec: &KernelSpec) -> Option<Shape> {
    let d = simulate::default_shape(&spec.shape());
    match req.dims {
        (None, None, None) => None,
        (m, n, k) => Some(Shape {
            m: m.unwrap_or(d.m),
            n: n.unwrap_or(d.n),
            k: k.unwrap_or(d.k),
        }),
    }
}

/// The largest M×N×K the simulator takes: 4096³. It runs every thread's instructions on one
/// core, and its time grows with M×N×K (1024³ took 8 s on a loaded 2-core machine, so 4096³
/// takes minutes); a GPU-sized problem (65536³) would run for days and hold A, B and C, three
/// times over, in this machine's memory (the kernel OOM-kills it first).
const SIM_MAX_WORK: u128 = 1 << 36;

/// Refuse a problem too large to simulate, up front and in one line.
fn check_size(s: Shape) -> Result<()> {
    let work = s.m as u128 * s.n as u128 * s.k as u128;
    if work > SIM_MAX_WORK {
        bail!(
            "{}x{}x{} is too large for the CPU simulator (it runs every thread's instructions, and its time grows with M×N×K: 1024x1024x1024 takes seconds, 4096x4096x4096 minutes, the most it takes): give a smaller shape, or run the kernel on a GPU",
            s.m,
            s.n,
            s.k
        );
    }
    Ok(())
}

/// Simulate `spec`'s kernel (the step's own, a user's or a seeded bug's, as `opts.source`
/// says), print or return its report; returns the report (JSON, or Null once printed),
/// its verdict ([`verdict`]), and whether a trace file was written.
pub fn run(
    req: &Request,
    spec: &KernelSpec,
    opts: &RunOptions,
    status: &GpuStatus,
) -> Result<(serde_json::Value, Verdict, bool)> {
    let n = spec.info().number;
    let problem = SimProblem {
        shape: shape(req, spec),
        dtype: opts.dtype,
        dist: opts.dist,
        seed: opts.seed,
        clusters: opts.clusters,
        static_check: opts.static_check,
        cpu_samples: opts.cpu_samples,
    };
    let shown = problem
        .shape
        .unwrap_or_else(|| simulate::default_shape(&spec.shape()));
    check_size(shown)?;
    if !req.json {
        let why = match status {
            GpuStatus::Absent(_) if !req.sim.forced => "no GPU here: simulating",
            _ => "simulating",
        };
        eprintln!(
            "note: {why} step {n}'s Blackwell kernel on the CPU at {}x{}x{} (its sm_100a PTX, verified against an fp64 reference; correctness only, no timings)",
            shown.m, shown.n, shown.k
        );
    }
    let source = opts.source.clone().unwrap_or_else(|| spec.source());
    let r = simulate::simulate(spec, &source, &problem, &req.sim.options)?;
    let trace_file = match (&req.trace, r.trace.is_empty()) {
        (Some(stem), false) => Some(write_trace(stem, &r)?),
        _ => None,
    };
    let passed = r.passed();
    let v = if req.json {
        let mut v = serde_json::to_value(&r)?;
        if let serde_json::Value::Object(o) = &mut v {
            // Every run of `step --json` says whether it ran (a twin only built says false).
            o.insert("ran".into(), true.into());
            o.insert("date".into(), crate::provenance::today().into());
            o.insert("commit".into(), crate::provenance::commit().into());
            if let Some(f) = &trace_file {
                o.insert(
                    "trace_files".into(),
                    serde_json::json!([f.display().to_string()]),
                );
            }
        }
        v
    } else {
        report::print_sim(spec, &r);
        if let Some(f) = &trace_file {
            println!(
                "{:<10}{} ({} events in the order the simulator ran them; a plain-text timeline)",
                "trace",
                f.display(),
                r.trace.len()
            );
        }
        serde_json::Value::Null
    };
    // What failed, on stderr as one `error:` line, with the flags that replay its schedule.
    if !passed {
        let what = match &r.failure {
            Some(f) if req.json => f.message.clone(),
            Some(f) => f.message.lines().next().unwrap_or("").to_string(),
            None => "the result is wrong (see verify)".to_string(),
        };
        eprintln!(
            "error: simulated step {n}: {what} (replay: {})",
            r.replay.as_deref().unwrap_or("the same flags")
        );
    }
    Ok((v, verdict(&r), trace_file.is_some()))
}

/// A simulated run's exit status, the contract of `runner --help` (`common::verdict`), as the
/// GPU emulation's runs have it: verified 0; a wrong result 1; an ordering rule broken 2 (the
/// emulation reports it as a fault, and so does the simulator); a deadlock, or a kernel that
/// spins to the instruction budget, 124 (a hang, found rather than timed out); any other stop
/// (PTX the simulator cannot run, a fault, a launch it refuses) 2.
pub fn verdict(r: &SimReport) -> Verdict {
    match (&r.failure, r.passed()) {
        (None, true) => Verdict::Verified,
        (None, false) => Verdict::Failed,
        (Some(f), _) if matches!(f.kind, "deadlock" | "step-limit") => Verdict::Hang,
        (Some(_), _) => Verdict::Error,
    }
}

/// `STEM-stepN-sim.txt` (or `trace-stepN-sim.txt` inside a folder): the simulated run's events,
/// one per line, in the order they happened.
fn trace_path(stem: &Path, step: u32) -> PathBuf {
    let (dir, base) = if stem.is_dir() {
        (stem.to_path_buf(), "trace".to_string())
    } else {
        (
            stem.parent().map(Path::to_path_buf).unwrap_or_default(),
            stem.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "trace".into()),
        )
    };
    dir.join(format!("{base}-step{step}-sim.txt"))
}

fn write_trace(stem: &Path, r: &SimReport) -> Result<PathBuf> {
    let path = trace_path(stem, r.step);
    // The folder exists: `outdir::check_trace_stem` refused the run otherwise.
    // A failed run's trace is the failing schedule's, up to the failure (its last lines).
    let schedule = match &r.replay {
        Some(replay) => format!("the failing schedule ({replay})"),
        None => format!(
            "schedule seed {} policy {}",
            r.sim.schedule_seed, r.sim.policy
        ),
    };
    let outcome = match (&r.failure, &r.verification) {
        (Some(f), _) => format!("stopped: {}", f.message.lines().next().unwrap_or("")),
        (None, Some(v)) if !v.passed => format!("finished, wrong result: {}", v.summary()),
        (None, Some(_)) => "finished and verified".to_string(),
        (None, None) => "finished".to_string(),
    };
    let mut text = format!(
        "# step {} {} {} {}, {}, {schedule}: events in simulated order\n# {outcome}\n",
        r.step, r.shape, r.dtype, r.kernel_path, r.sim.backend
    );
    for e in &r.trace {
        text.push_str(e);
        text.push('\n');
    }
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    // The event trace (Perfetto/chrome://tracing JSON, the book's ring player) and its picture.
    if let Some(json) = &r.events {
        let j = path.with_extension("json");
        std::fs::write(&j, json).with_context(|| format!("cannot write {}", j.display()))?;
        let s = path.with_extension("svg");
        std::fs::write(&s, crate::trace_sim::svg(json)?)
            .with_context(|| format!("cannot write {}", s.display()))?;
        crate::last_trace::record(&j, r.step);
        eprintln!(
            "{:<10}{} and {} (the first cluster's ring: Perfetto, chrome://tracing or the book's player)",
            "trace",
            j.display(),
            s.display()
        );
    }
    Ok(path)
}

/// `--explore all`: the proving mode on `spec`'s kernel. Prints the verdict (or returns its
/// JSON), states and transitions explored, and for a failing order the witness and the exact
/// command that replays it; returns the report and the verdict word ("clean", "incomplete",
/// "error").
pub fn prove(
    req: &Request,
    spec: &KernelSpec,
    opts: &RunOptions,
    bounds: &simulate::ProveOptions,
) -> Result<(serde_json::Value, &'static str)> {
    let n = spec.info().number;
    let problem = SimProblem {
        shape: shape(req, spec),
        dtype: opts.dtype,
        dist: opts.dist,
        seed: opts.seed,
        clusters: opts.clusters,
        static_check: opts.static_check,
        cpu_samples: opts.cpu_samples,
    };
    let source = opts.source.clone().unwrap_or_else(|| spec.source());
    let s = problem
        .shape
        .unwrap_or_else(|| simulate::prove_shape(&spec.shape()));
    if s.m as u128 * s.n as u128 * s.k as u128 > simulate::PROVE_MAX_WORK {
        bail!(
            "{}x{}x{} is too large for the proving mode (it reruns the launch for every order of its synchronisation events): M×N×K must be at most {} (e.g. 256x256x512); without --m/--n/--k it takes one cluster tile and four k-blocks",
            s.m,
            s.n,
            s.k,
            simulate::PROVE_MAX_WORK
        );
    }
    let kernel = simulate::SimKernel::build(spec, &source, opts.dtype, opts.static_check)?;
    if !req.json {
        eprintln!(
            "note: proving step {n}'s Blackwell kernel on the CPU at {}x{}x{}: every distinct order of its synchronisation events, at most {} states and {} s",
            s.m, s.n, s.k, bounds.max_states, bounds.seconds
        );
    }
    let r = kernel.prove(&problem, bounds)?;
    let replay = r
        .witness
        .as_ref()
        .map(|w| replay_command(req, opts, n, r.shape, w));
    let covered = format!(
        "{} runs, {} states, {} transitions ({} runs cut by sleep sets, deepest {}), {:.1} s",
        r.runs, r.states, r.transitions, r.pruned, r.max_depth, r.wall_s
    );
    let v = if req.json {
        let mut v = serde_json::to_value(&r)?;
        if let (serde_json::Value::Object(o), Some(c)) = (&mut v, &replay) {
            o.insert("replay_command".into(), c.clone().into());
        }
        v
    } else {
        println!(
            "{:<10}step {n} {} {}x{}x{} (proving mode)",
            "kernel", source.path, r.shape.m, r.shape.n, r.shape.k
        );
        let line = match r.verdict {
            "clean" => {
                "clean: every order of the synchronisation events ran and verified".to_string()
            }
            "incomplete" => format!("incomplete: {}", r.detail),
            _ => format!("error: {}", r.detail),
        };
        println!("{:<10}{line}", "verdict");
        println!("{:<10}{covered}", "explored");
        if let (Some(w), Some(c)) = (&r.witness, &replay) {
            println!("{:<10}{w}", "witness");
            println!("{:<10}{c}", "replay");
        }
        serde_json::Value::Null
    };
    match r.verdict {
        "error" => eprintln!(
            "error: proving step {n}: {} (replay: {})",
            r.detail,
            replay.as_deref().unwrap_or("")
        ),
        "incomplete" => eprintln!(
            "warning: proving step {n} is incomplete ({covered}): raise --prove-states or --prove-seconds, or give a smaller shape"
        ),
        _ => {}
    }
    Ok((v, r.verdict))
}

/// The command that replays a witness: the same kernel, problem and build, along the witness.
fn replay_command(req: &Request, opts: &RunOptions, n: u32, s: Shape, w: &str) -> String {
    let mut c = format!(
        "runner step {n} --sim --m {} --n {} --k {} --dtype {} --dist {} --seed {}",
        s.m, s.n, s.k, opts.dtype, opts.dist, opts.seed
    );
    if let Some(k) = &req.kernel_file {
        c.push_str(&format!(" --kernel {}", k.display()));
    }
    if let Some(m) = &req.mutate {
        c.push_str(&format!(" --mutate {m}"));
    }
    for p in &req.params {
        c.push_str(&format!(" --param {p}"));
    }
    if let Some(k) = opts.clusters {
        c.push_str(&format!(" --clusters {k}"));
    }
    if !opts.static_check {
        c.push_str(" --no-static-check");
    }
    c.push_str(&format!(" --replay {w}"));
    c
}
