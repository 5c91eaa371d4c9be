//! `runner step N`: which of the step's kernels run on this machine, running them, or, where
//! they cannot run, reporting their builds.
//!
//! On an H100/H200 both run: the Hopper twin natively (verified and timed against cuBLAS) and
//! the Blackwell kernel under the tcgen05 emulation (verified). On a B200 the Blackwell kernel
//! runs natively. Without a GPU both compilations are reported. `--arch` picks one.

mod sim;
pub use sim::verdict as sim_verdict;

use crate::{report, trace};
use anyhow::{anyhow, bail, Result};
use common::compile::{compile, read_kernel, KernelSource, Target};
use common::gpu::{self, GpuStatus};
use common::run::{self, choose_target, EmulateMode, RunOptions};
use common::step::{Arch, KernelSpec, MAX_SMEM_PER_CTA};
use common::trace::{timeline, Recording};
use common::verdict::Verdict;
use common::{edits, mutation, sass, Shape};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::step_request::Request;

/// The kernels to consider, and whether the user chose them (then each must run).
/// `mutation_arch`: the kernel `--mutate` edits.
fn kernels(
    req: &Request,
    opts: &RunOptions,
    file: Option<&KernelSource>,
    mutation_arch: Option<Arch>,
) -> Result<(Vec<Arch>, bool)> {
    let blackwell_only = [
        (opts.emulate == EmulateMode::Always, "--emulate"),
        (opts.emulate == EmulateMode::Never, "--no-emulate"),
        (mutation_arch == Some(Arch::Blackwell), "--mutate"),
        (req.time_emulation.is_some(), "--time-emulation"),
        (req.sim.forced, "--sim"),
        (req.sim.options.schedules > 1, "--explore"),
        (req.sim.prove.is_some(), "--explore all"),
        (req.sim.options.replay.is_some(), "--replay"),
    ];
    let hopper_only = [
        (opts.stress.is_some(), "--stress"),
        (opts.hang_diagnosis, "--hang-diagnosis"),
        (mutation_arch == Some(Arch::Hopper), "--mutate twin-..."),
    ];
    if let (Some((_, b)), Some((_, h))) = (
        blackwell_only.iter().find(|(set, _)| *set),
        hopper_only.iter().find(|(set, _)| *set),
    ) {
        bail!("{b} applies to the Blackwell kernel and {h} to the Hopper twin: one run takes one of them");
    }
    if req.arch == Some(Arch::Hopper) {
        if let Some((_, flag)) = blackwell_only.iter().find(|(set, _)| *set) {
            bail!("{flag} applies to the Blackwell kernel (--arch sm_100a); the Hopper twin runs natively on sm_90");
        }
    }
    if req.arch == Some(Arch::Blackwell) {
        if let Some((_, flag)) = hopper_only.iter().find(|(set, _)| *set) {
            bail!("{flag} applies to the Hopper twin (--arch sm_90a), which runs natively; the Blackwell kernel's emulation perturbs its schedule with --emu-seed");
        }
    }
    if let Some(a) = req.arch {
        return Ok((vec![a], true));
    }
    if let Some((_, flag)) = blackwell_only.iter().find(|(set, _)| *set) {
        // A twin would fail on the Blackwell launch's static asserts, far from the cause.
        if let Some(f) = file.filter(|f| f.implied_arch() == Arch::Hopper) {
            bail!(
                "{} is a Hopper twin (it includes hopper.cuh), and {flag} runs the Blackwell kernel: give your copy of kernel.cu, or run the twin on an H100/H200 (--arch sm_90a)",
                f.path
            );
        }
        return Ok((vec![Arch::Blackwell], true));
    }
    if hopper_only.iter().any(|(set, _)| *set) {
        return Ok((vec![Arch::Hopper], true));
    }
    if let Some(f) = file {
        return Ok((vec![f.implied_arch()], true));
    }
    Ok((vec![Arch::Hopper, Arch::Blackwell], false))
}

/// A Blackwell kernel compiled as a Hopper twin fails in ptxas on its tcgen05 instructions;
/// the log says what, this says what to do.
fn blackwell_on_hopper_hint(e: anyhow::Error, target: Target) -> anyhow::Error {
    let text = format!("{e:#}");
    if target == Target::Sm90a && text.contains("tcgen05") && text.contains("not supported") {
        anyhow!("{text}\nhint: a Blackwell kernel (tcgen05) does not build as a Hopper twin: run it with --arch sm_100a, which an H100/H200 runs under the tcgen05 emulation")
    } else {
        e
    }
}

/// The kernel a `--kernel FILE` names: the file itself, or, for a `.toml` file, the edits it
/// holds applied to the stock kernel they name, as it is now.
pub fn kernel_file(path: &Path) -> Result<KernelSource> {
    if path.extension().is_some_and(|e| e == "toml") {
        let text = read_kernel(path)?;
        edits::edited_kernel(
            &path.display().to_string(),
            &text,
            runner::steps::stock_kernel,
        )
    } else {
        Ok(KernelSource {
            path: path.display().to_string(),
            text: read_kernel(path)?,
        })
    }
}

/// What the kernels of one `runner step` came to, for its exit status and its warnings.
#[derive(Default)]
struct Tally {
    failed: bool,
    /// A simulated run that stopped: a broken rule or a fault (exit 2), a deadlock or a spin to
    /// the instruction budget (exit 124); the first such verdict decides the exit status.
    stopped: Option<Verdict>,
    /// Kernels only built (no GPU that runs them): the exit status says "in part", never
    /// "verified"; each with the reason, for the closing line.
    not_run: Vec<String>,
    traced: usize,
    /// Kernels that ran (on a GPU, under the emulation or on the simulator).
    ran: usize,
    /// Runs under the emulation: without one, --emu-seed changed nothing.
    emulated: usize,
}

pub fn run(req: &Request, mut opts: RunOptions) -> Result<ExitCode> {
    let (specs, chosen) = prepare(req, &mut opts)?;
    if let Some(reps) = req.time_emulation {
        return time_emulation(req, &specs[0], &opts, reps);
    }
    let status = gpu::open();
    // The simulator's flags where nothing is simulated (a GPU runs the Blackwell kernel under
    // the emulation): a usage error, never silently ignored.
    if req.sim.sim_flags_given
        && !specs
            .iter()
            .any(|s| simulate_here(req, &opts, s.arch, &status))
    {
        bail!("--sim-seed and --sim-policy pick the CPU simulator's schedule, and no kernel of this run is simulated here (a GPU runs it): add --sim to simulate it");
    }
    if let (GpuStatus::Present(g), Some(shape)) = (&status, opts.shape) {
        g.check_fits(shape.device_bytes(), &shape.to_string())?;
    }
    let mut outputs = Vec::new();
    let mut tally = Tally::default();
    for spec in &specs {
        let first = outputs.is_empty();
        if simulate_here(req, &opts, spec.arch, &status) {
            if !req.json && !first {
                println!();
            }
            if let Some(po) = &req.sim.prove {
                // The proving mode: clean, an error (failed), or incomplete (ran in part).
                let (v, verdict) = sim::prove(req, spec, &opts, po)?;
                tally.ran += 1;
                tally.failed |= verdict == "error";
                if verdict == "incomplete" {
                    tally.not_run.push(
                        "the proving mode hit a bound (--prove-states or --prove-seconds): its verdict is incomplete".into(),
                    );
                }
                outputs.push(v);
                continue;
            }
            let (v, verdict, wrote_trace) = sim::run(req, spec, &opts, &status)?;
            tally.ran += 1;
            match verdict {
                Verdict::Verified | Verdict::Partial => {}
                Verdict::Failed => tally.failed = true,
                v => {
                    tally.stopped.get_or_insert(v);
                }
            }
            tally.traced += usize::from(wrote_trace);
            outputs.push(v);
            continue;
        }
        let v = match (&status, why_not_here(req, spec, &opts, &status, chosen)?) {
            (GpuStatus::Present(g), None) => run_on_gpu(req, spec, g, &opts, first, &mut tally)?,
            (_, reason) => build_only(req, spec, &opts, &reason.unwrap_or_default(), &mut tally)?,
        };
        outputs.push(v);
    }
    finish(req, &opts, outputs, &tally)
}

/// The kernels to run (the step's, or `--arch`'s choice, or the one a `--kernel` file or a seeded
/// bug is for), each with its parameters; the source they run (`--kernel`, with `--mutate`'s
/// bug seeded) into `opts`. `true` with them: the kernel was chosen, not defaulted.
fn prepare(req: &Request, opts: &mut RunOptions) -> Result<(Vec<KernelSpec>, bool)> {
    let n = req.step.info().number;
    let file = match &req.kernel_file {
        Some(path) => Some(kernel_file(path)?),
        None => None,
    };
    let seeded = match &req.mutate {
        Some(name) => Some(mutation::lookup(name)?),
        None => None,
    };
    let (archs, chosen) = kernels(req, opts, file.as_ref(), seeded.map(|(_, a)| a))?;
    let mut specs = Vec::new();
    for &arch in &archs {
        let mut spec = KernelSpec::new(req.step, arch);
        spec.params
            .apply(&req.params)
            .map_err(|e| anyhow!("step {n} {}: {e}", arch.name()))?;
        specs.push(spec);
    }
    opts.source = file;
    if let Some((m, arch)) = seeded {
        let name = m.name;
        if !m.applies_to(req.step.info(), arch) {
            bail!(
                "the seeded bug {name:?} does not apply to step {n} (it applies to steps {})",
                m.steps(&runner::steps::infos(), arch)
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let base = opts
            .source
            .clone()
            .unwrap_or_else(|| req.step.info().kernel_source(arch));
        opts.source = Some(KernelSource {
            path: base.path.clone(),
            text: m.apply(&base.text)?,
        });
        if !req.json {
            eprintln!("note: seeded bug {:?}: {}", m.name, m.description);
        }
        // A persistent grid as wide as the GPU gives each cluster one tile of the default
        // shape, and a bug of the second tile's handover (a parity, an extra arrival) would
        // pass: the seeded run launches the few clusters the simulator launches, so each
        // cluster loops over several tiles, as the seeded-bug checks do.
        let persistent = specs
            .iter()
            .any(|s| s.arch == arch && s.shape().schedule.fills_the_gpu());
        if persistent && opts.clusters.is_none() {
            opts.clusters = Some(common::simulate::DEFAULT_CLUSTERS);
            if !req.json {
                eprintln!(
                    "note: {} clusters launched (--clusters {0}), so each loops over several tiles and the bug's later tiles run; --clusters N overrides",
                    common::simulate::DEFAULT_CLUSTERS
                );
            }
        }
    }
    Ok((specs, chosen))
}

/// Why `spec` cannot run here (`None`: it can, on the GPU); an error where the user asked for
/// something only a GPU gives (a chosen kernel, a trace, `--emulate`, `--no-emulate`).
fn why_not_here(
    req: &Request,
    spec: &KernelSpec,
    opts: &RunOptions,
    status: &GpuStatus,
    chosen: bool,
) -> Result<Option<String>> {
    let n = req.step.info().number;
    Ok(match status {
        GpuStatus::Present(g) => match choose_target(&g.info, spec.arch, opts.emulate) {
            Ok(Target::Sm90aEmulated) => {
                if !req.json && opts.emulate != EmulateMode::Always {
                    eprintln!(
                        "note: {} is {}: no tcgen05 there, so step {n}'s Blackwell kernel runs under the tcgen05 emulation (correctness only; no timings). Use --no-emulate to refuse.",
                        g.info.name,
                        g.info.sm()
                    );
                }
                None
            }
            Ok(_) => None,
            Err(e) if chosen => return Err(anyhow!(e)),
            Err(e) => Some(e),
        },
        GpuStatus::Absent(why) => {
            if req.trace.is_some() && spec.arch == Arch::Hopper && chosen {
                bail!("--trace records a launch and needs a GPU that runs the kernel (the Hopper twin: an H100/H200): {why}");
            }
            if opts.emulate == EmulateMode::Always && req.trace.is_some() {
                bail!("--emulate needs an sm_90 GPU to run on: {why}");
            }
            if opts.emulate == EmulateMode::Never {
                bail!("--no-emulate needs an sm_100 GPU: {why}");
            }
            Some(format!("no GPU to run on ({why})"))
        }
    })
}

/// Run, verify and time `spec` on the GPU; its report (JSON, or printed and `Null`).
fn run_on_gpu(
    req: &Request,
    spec: &KernelSpec,
    g: &gpu::Gpu,
    opts: &RunOptions,
    first: bool,
    tally: &mut Tally,
) -> Result<serde_json::Value> {
    tally.emulated +=
        usize::from(choose_target(&g.info, spec.arch, opts.emulate) == Ok(Target::Sm90aEmulated));
    let r = run::run(spec, g, opts)
        .map_err(|e| blackwell_on_hopper_hint(e, Target::native(spec.arch)))?;
    tally.failed |= !r.verification.passed;
    tally.ran += 1;
    let files = match (&req.trace, &r.trace) {
        (Some(stem), Some(recording)) => Some(write_trace(stem, &r, recording, g)?),
        _ => None,
    };
    tally.traced += usize::from(files.is_some());
    if req.json {
        let mut v = serde_json::to_value(&r)?;
        if let serde_json::Value::Object(o) = &mut v {
            // What a results file needs beside the run: when, and of which commit.
            o.insert("date".into(), crate::provenance::today().into());
            o.insert("commit".into(), crate::provenance::commit().into());
        }
        if let (Some((json, svg)), serde_json::Value::Object(o)) = (&files, &mut v) {
            o.insert(
                "trace_files".into(),
                serde_json::json!([json.display().to_string(), svg.display().to_string()]),
            );
        }
        Ok(v)
    } else {
        if !first {
            println!();
        }
        report::print_run(spec, &r);
        if let (Some((json, svg)), Some(rec)) = (&files, &r.trace) {
            print_trace_summary(&r, rec, json, svg);
        }
        Ok(serde_json::Value::Null)
    }
}

/// `spec` cannot run here (`reason`): build it and report the build.
fn build_only(
    req: &Request,
    spec: &KernelSpec,
    opts: &RunOptions,
    reason: &str,
    tally: &mut Tally,
) -> Result<serde_json::Value> {
    let n = req.step.info().number;
    if req.trace.is_some() && !req.json {
        eprintln!(
            "note: step {n}'s {} cannot run here, so --trace records nothing for it",
            spec.arch.name()
        );
    }
    tally.not_run.push(format!(
        "step {n}'s {} was built, not run: {reason}",
        spec.arch.name()
    ));
    // Without a GPU, --emulate reports the emulation build (what CI checks).
    let target = if opts.emulate == EmulateMode::Always {
        Target::Sm90aEmulated
    } else {
        Target::native(spec.arch)
    };
    let (report, missing) = compile_report(spec, opts, target, reason, req.json)
        .map_err(|e| blackwell_on_hopper_hint(e, target))?;
    // A user's kernel that lacks the step's key instructions is not the step's kernel: a check
    // on it must not pass.
    if req.kernel_file.is_some() && !missing.is_empty() {
        tally.failed = true;
        if !req.json {
            eprintln!(
                "error: {} lacks step {n}'s key instructions ({}): it is not a complete {}",
                opts.source
                    .as_ref()
                    .map_or("the kernel", |s| s.path.as_str()),
                missing.join(", "),
                spec.arch.name()
            );
        }
    }
    Ok(report)
}

/// The JSON of every kernel (with `--json`), the warnings about flags that changed nothing, and
/// the exit status.
fn finish(
    req: &Request,
    opts: &RunOptions,
    mut outputs: Vec<serde_json::Value>,
    tally: &Tally,
) -> Result<ExitCode> {
    let n = req.step.info().number;
    if req.json {
        // Always {"runner", "runs": [...]}, one or two runs (crate::report::json).
        for v in &mut outputs {
            crate::report::json::normalise(v);
        }
        let v = crate::report::json::runs(outputs);
        println!("{}", serde_json::to_string_pretty(&v)?);
    }
    if opts.emu_seed != 0 && tally.emulated == 0 && !req.json {
        eprintln!(
            "warning: --emu-seed applies to runs under the tcgen05 emulation, and none ran here: ignored"
        );
    }
    if req.trace.is_some() && tally.traced == 0 {
        bail!("--trace: no kernel of step {n} runs on this GPU, so nothing was recorded");
    }
    if let Some(v) = tally.stopped {
        return Ok(v.into());
    }
    // Exit 3 is never silent: one line says what did not run, and why.
    if !tally.failed && !tally.not_run.is_empty() {
        eprintln!(
            "note: exit status 3 (ran in part): {}{}",
            tally.not_run.join("; "),
            if tally.ran > 0 {
                "; what ran verified"
            } else {
                ""
            }
        );
    }
    Ok(if tally.failed {
        Verdict::Failed
    } else if !tally.not_run.is_empty() {
        Verdict::Partial
    } else {
        Verdict::Verified
    }
    .into())
}

/// Whether `arch`'s kernel runs on the CPU simulator: asked for (`--sim`, `--explore`), or the
/// Blackwell kernel where there is no GPU (unless `--emulate` asks for the emulation build's
/// compile report, or `--no-emulate` for a native run).
fn simulate_here(req: &Request, opts: &RunOptions, arch: Arch, status: &GpuStatus) -> bool {
    if arch != Arch::Blackwell {
        return false;
    }
    if req.sim.forced
        || req.sim.options.schedules > 1
        || req.sim.prove.is_some()
        || req.sim.options.replay.is_some()
    {
        return true;
    }
    matches!(status, GpuStatus::Absent(_)) && opts.emulate == EmulateMode::Auto
}

/// `--time-emulation`: the emulation build with its strict rules off and on, timed.
fn time_emulation(
    req: &Request,
    spec: &common::step::KernelSpec,
    opts: &RunOptions,
    reps: u32,
) -> Result<ExitCode> {
    let g = match gpu::open() {
        GpuStatus::Present(g) => g,
        GpuStatus::Absent(why) => {
            bail!("--time-emulation runs the emulation and needs an sm_90 GPU: {why}")
        }
    };
    let c = run::emulation_cost(spec, &g, opts, reps as usize)?;
    if req.json {
        let v = crate::report::envelope(
            "emulation-cost",
            serde_json::json!({
                "date": crate::provenance::today(),
                "commit": crate::provenance::commit(),
                "emulation_cost": c,
            }),
        );
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        report::print_emulation_cost(spec, &c);
    }
    Ok(
        if c.rules_off.verification.passed && c.rules_on.verification.passed {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        },
    )
}

/// The traced launch's timelines as files: the Chrome trace JSON and the SVG.
fn write_trace(
    stem: &std::path::Path,
    r: &run::RunReport,
    rec: &Recording,
    g: &gpu::Gpu,
) -> Result<(PathBuf, PathBuf)> {
    if rec.records() == 0 {
        bail!(
            "{} recorded nothing: it makes no wb::Trace calls (common.cuh), so there is no timeline to write",
            r.kernel_path
        );
    }
    let timeline = timeline(rec, r.arch, f64::from(g.info.max_clock_mhz));
    let meta = trace::Meta {
        step: r.step,
        arch: r.arch,
        kernel: r.kernel_path.clone(),
        gpu: r.gpu.name.clone(),
        driver: r.gpu.driver_version.clone(),
        date: crate::provenance::today(),
        commit: crate::provenance::commit(),
        shape: r.shape,
        dtype: r.dtype,
        params: r.params.to_string(),
        emulated: r.emulated,
        grid: r.grid,
        cluster: r.cluster.0,
        block: r.block,
        layout: rec.layout,
        records: rec.records(),
        dropped: rec.dropped,
    };
    let files = trace::write(stem, &timeline, &meta)?;
    crate::last_trace::record(&files.0, meta.step);
    Ok(files)
}

fn print_trace_summary(r: &run::RunReport, rec: &Recording, json: &Path, svg: &Path) {
    println!(
        "{:<10}{} records from CTAs 0..{} ({} warps each){}",
        "trace",
        rec.records(),
        rec.layout.ctas,
        rec.layout.warps_per_cta,
        if rec.dropped > 0 {
            format!("; {} calls did not fit and were dropped", rec.dropped)
        } else {
            String::new()
        }
    );
    println!(
        "{:<10}{} (open in ui.perfetto.dev or chrome://tracing)",
        "",
        json.display()
    );
    println!("{:<10}{}", "", svg.display());
    if r.emulated {
        println!(
            "{:<10}emulated: only the order of events means something, not the durations",
            ""
        );
    } else {
        println!(
            "{:<10}the traced build was verified, not timed; run without --trace to time it",
            ""
        );
    }
    // The facts a rubric's `trace = "..."` requirement names, on this launch's records: what
    // an instructor checks before requiring one (Hopper only: the emulation's order of events
    // is not the native kernel's).
    if r.arch == Arch::Hopper && !r.emulated {
        for f in common::trace_facts::Fact::ALL {
            match f.check(rec) {
                Ok(how) => println!("{:<10}{} met: {how}", "fact", f.name()),
                Err(why) => println!("{:<10}{} not met: {why}", "fact", f.name()),
            }
        }
    }
}

/// SASS the emulation build must have: TMA stays native, tcgen05 is gone.
const EMULATION_SASS: &[&str] = &["UTMALDG"];

/// Where a kernel cannot run: the registers, shared memory and SASS of its `target` build (the
/// native one, or with `--emulate` the sm_90a emulation build), after the static checks; returns
/// the report (JSON, or Null once printed) and the key instructions the build lacks.
fn compile_report(
    spec: &KernelSpec,
    opts: &RunOptions,
    target: Target,
    reason: &str,
    json: bool,
) -> Result<(serde_json::Value, Vec<String>)> {
    // Shapes are still checked, so a bad --m is reported here too.
    let shape = opts.shape.unwrap_or(Shape::DEFAULT);
    spec.check_shape(shape).map_err(|e| anyhow!(e))?;
    // A user's file or a seeded bug only ever comes with a single kernel.
    let source = opts.source.clone().unwrap_or_else(|| spec.source());
    let smem = spec.shape().smem_bytes;
    if smem > MAX_SMEM_PER_CTA {
        bail!(
            "step {} ({}) needs {smem} bytes of shared memory per CTA; {} allows at most {MAX_SMEM_PER_CTA}",
            spec.info().number,
            spec.arch.name(),
            spec.arch.sm()
        );
    }
    let mut defines = spec.defines(opts.dtype);
    if let Some(seed) = opts.stress {
        common::stress::check_arch(spec.arch)?;
        defines.extend(common::stress::defines(seed));
    }
    if opts.hang_diagnosis {
        common::stress::check_arch(spec.arch)?;
        for d in common::stress::hang_defines(common::stress::HANG_BOUND) {
            if !defines.iter().any(|(k, _)| *k == d.0) {
                defines.push(d);
            }
        }
    }
    let compiled = match (spec.arch, opts.static_check, target) {
        // The sm_100a PTX rules, then the sm_100a compile: what every Blackwell build passes.
        (Arch::Blackwell, true, Target::Sm100a) => {
            common::static_check::check_blackwell(&source, &defines)?
        }
        (Arch::Blackwell, true, _) => {
            common::static_check::check_blackwell(&source, &defines)?;
            compile(&source, target, &defines)?
        }
        (Arch::Hopper, true, _) => {
            common::static_check::check_twin(&source, &defines)?;
            compile(&source, target, &defines)?
        }
        _ => compile(&source, target, &defines)?,
    };
    // ptxas names each entry it compiles; without `gemm_kernel` there is nothing to launch.
    if !compiled.log.contains("entry function 'gemm_kernel'") {
        bail!(
            "{} defines no kernel `extern \"C\" __global__ void gemm_kernel(...)`: there is nothing to run",
            source.path
        );
    }
    let listing = sass::disassemble(&compiled.cubin)?;
    let expect = if target == Target::Sm90aEmulated {
        EMULATION_SASS
    } else {
        spec.sass_expect()
    };
    let missing = report::missing_instructions(&listing, expect);
    let k = spec.shape();
    let plan = k.plan(shape, k.default_max_clusters(None));
    if json {
        let v = serde_json::json!({
            "step": spec.info().number, "arch": spec.arch, "ran": false, "reason": reason,
            "kernel_path": source.path, "shape": shape, "dtype": opts.dtype,
            "dist": opts.dist, "seed": opts.seed,
            "target": target, "params": &spec.params, "compile": &compiled,
            "smem_bytes": plan.dims.smem_bytes, "grid": plan.dims.grid, "sass": &listing,
            "missing_instructions": missing,
        });
        return Ok((v, missing));
    }
    report::print_header(spec, &source.path);
    let what = if target == Target::Sm90aEmulated {
        format!("{} (the emulation build)", target.arch())
    } else {
        target.arch().to_string()
    };
    println!("{:<10}{reason}: compiled for {what} only", "GPU");
    report::print_compile(&compiled, plan.dims.smem_bytes);
    report::print_sass(&listing, expect, false);
    println!();
    Ok((serde_json::Value::Null, missing))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step_request::SimRequest;

    fn request(step: u32, mutate: &str) -> Request {
        Request {
            step: runner::steps::get(step).expect("a ladder step"),
            arch: None,
            params: Vec::new(),
            kernel_file: None,
            mutate: Some(mutate.to_string()),
            json: true,
            trace: None,
            time_emulation: None,
            dims: (None, None, None),
            sim: SimRequest::default(),
        }
    }

    /// A seeded bug of the second tile's handover must meet a second tile: on a GPU as wide as
    /// the grid, the default launch gives each cluster one, so the seeded run caps the clusters
    /// (the bug passed on an H200 at 512x1024x512 before); `--clusters` still wins, and a step
    /// that launches one cluster per tile keeps its grid.
    #[test]
    fn a_seeded_bug_runs_several_tiles_per_cluster() {
        let mut opts = RunOptions::default();
        prepare(&request(6, "acc-empty-extra-arrival"), &mut opts).expect("step 6 seeds it");
        assert_eq!(opts.clusters, Some(common::simulate::DEFAULT_CLUSTERS));

        let mut opts = RunOptions {
            clusters: Some(5),
            ..RunOptions::default()
        };
        prepare(&request(6, "wrong-acc-parity"), &mut opts).expect("step 6 seeds it");
        assert_eq!(opts.clusters, Some(5));

        let mut opts = RunOptions::default();
        prepare(&request(2, "skip-acc-wait"), &mut opts).expect("step 2 seeds it");
        assert_eq!(opts.clusters, None);
    }
}
