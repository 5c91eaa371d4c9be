//! `runner check sim`: the emulation check's cases ([`super::cases::emulation_cases`]) on the CPU
//! simulator, in this process, without a GPU. Each case becomes the same row as an emulated
//! run's ([`super::emulation_row`]: the same expectations, the same "caught by" names), so the
//! two results files compare case by case (`runner check agree`).

use super::cases::{EmulationCase, EmulationSet};
use crate::pool::{self, Ran};
use crate::provenance;
use crate::results::{EmulationCheck, Provenance, Results};
use anyhow::{anyhow, Result};
use common::compile::KernelSource;
use common::simulate::{Policy, SimKernel, SimOptions, SimProblem, SimReport, BACKEND};
use common::step::{Arch, KernelSpec};
use common::verdict::Verdict;
use common::Dtype;
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

/// Schedules a seeded bug runs under from its case's seed (`sim::explore`: async-late,
/// async-early, random, pct3), the first failure stopping it; a stock kernel runs one random
/// schedule per seed.
pub const BUG_SCHEDULES: u32 = 4;

/// A kernel built once for every case that runs it: (step, bf16, seeded bug).
type Key = (u32, bool, Option<&'static str>);

/// How one case ran, as the emulation check records a child: a verdict, an exit code, the
/// report as `runner step --json` prints it, and the errors.
pub fn run_case(case: &EmulationCase, kernels: &mut HashMap<Key, SimKernel>) -> Result<Ran> {
    let start = Instant::now();
    let step = runner::steps::get(case.step)?;
    let spec = KernelSpec::new(step, Arch::Blackwell);
    let key = (
        case.step,
        case.dtype == Dtype::Bf16,
        case.mutation.map(|m| m.name),
    );
    let kernel: Result<&SimKernel> = match kernels.entry(key) {
        std::collections::hash_map::Entry::Occupied(e) => Ok(e.into_mut()),
        std::collections::hash_map::Entry::Vacant(e) => {
            let stock = spec.source();
            let source = match case.mutation {
                Some(m) => KernelSource {
                    path: stock.path.clone(),
                    text: m.apply(&stock.text)?,
                },
                None => stock,
            };
            // The seeded bugs run with the static checks off, as in the emulation check: the
            // simulator itself must catch them.
            SimKernel::build(&spec, &source, case.dtype, case.mutation.is_none())
                .map(|k| &*e.insert(k))
        }
    };
    let report = kernel.and_then(|k| {
        k.run(
            &SimProblem {
                shape: Some(case.shape),
                dtype: case.dtype,
                dist: case.dist,
                seed: case.seed,
                clusters: case.clusters,
                static_check: case.mutation.is_none(),
                cpu_samples: 256,
            },
            &SimOptions {
                seed: case.emu_seed,
                policy: Policy::Random,
                schedules: if case.mutation.is_some() {
                    BUG_SCHEDULES
                } else {
                    1
                },
                trace: false,
                replay: None,
            },
        )
    });
    let seconds = start.elapsed().as_secs_f64();
    Ok(match report {
        Ok(r) => ran_of(&r, seconds)?,
        // The harness could not run it (a compile error, a PTX the simulator cannot read).
        Err(e) => Ran {
            verdict: Verdict::Error,
            exit_code: i32::from(Verdict::Error.code()),
            seconds,
            stdout: String::new(),
            stderr: format!("error: {e:#}"),
        },
    })
}

/// A simulated run as a child's exit: the same verdict `runner step` exits with.
fn ran_of(r: &SimReport, seconds: f64) -> Result<Ran> {
    let verdict = crate::step_cmd::sim_verdict(r);
    let stderr = match (&r.failure, &r.verification) {
        (Some(f), _) => format!(
            "error: {} (schedule seed {}, policy {})",
            f.message, f.schedule_seed, f.policy
        ),
        (None, Some(v)) if !v.passed => format!(
            "{}{}",
            v.summary(),
            r.replay
                .as_ref()
                .map_or(String::new(), |x| format!(" (replay: {x})"))
        ),
        _ => String::new(),
    };
    Ok(Ran {
        verdict,
        exit_code: i32::from(verdict.code()),
        seconds,
        stdout: serde_json::to_string(&serde_json::json!({ "runs": [r] }))?,
        stderr,
    })
}

/// Where a simulator check ran: this machine's CPU, with the date and commit.
fn simulator_provenance() -> Provenance {
    Provenance {
        gpu: "none: CPU simulator".into(),
        driver: "-".into(),
        ..provenance::current()
    }
}

/// `runner check sim`: every case of `set` on the simulator, `jobs` at a time. Writes `sim.json` (an emulation
/// check's results file, mode "simulated ...") and `sim-log.txt` in `out`.
pub fn check(set: &EmulationSet, out: &Path, jobs: usize) -> Result<Verdict> {
    let started = std::time::Instant::now();
    let cases = super::cases::emulation_cases(set)?;
    let jobs = jobs.clamp(1, cases.len().max(1));
    println!(
        "{} cases on the CPU simulator ({BACKEND}), {jobs} at a time",
        cases.len()
    );
    let bar = indicatif::ProgressBar::new(cases.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} simulated runs, {elapsed} {msg}",
        )
        .map_err(|e| anyhow!("{e}"))?,
    );
    // Each worker takes the next case and keeps its own built kernels; every case is one
    // simulated run on one thread, so the workers share nothing but the queue and the results.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<std::sync::Mutex<Option<Result<Ran>>>> =
        cases.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                let mut kernels = HashMap::new();
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(c) = cases.get(i) else { break };
                    let r = run_case(c, &mut kernels);
                    if let Ok(r) = &r {
                        bar.set_message(format!("last: {}", r.verdict));
                    }
                    bar.inc(1);
                    if let Ok(mut slot) = results[i].lock() {
                        *slot = Some(r);
                    }
                }
            });
        }
    });
    bar.finish_and_clear();
    let mut ran = Vec::with_capacity(cases.len());
    for (slot, c) in results.into_iter().zip(&cases) {
        let r = slot
            .into_inner()
            .map_err(|_| anyhow!("a simulator worker stopped while running {}", c.name()))?
            .ok_or_else(|| anyhow!("{} was not run", c.name()))??;
        ran.push(r);
    }
    let names: Vec<String> = cases.iter().map(EmulationCase::name).collect();
    pool::write_log(&out.join("sim-log.txt"), &names, &ran)?;
    let check = EmulationCheck {
        head: simulator_provenance(),
        mode: BACKEND.into(),
        emu_seeds: set.emu_seeds.clone(),
        cases: cases
            .iter()
            .zip(&ran)
            .map(|(c, r)| super::emulation_row(c, r))
            .collect(),
    };
    let path = out.join("sim.json");
    Results::Emulation(check.clone()).write(&path)?;
    let met = super::print_cases(&names, &check.cases);
    // Wall time, and the cases' summed time beside it: with several jobs the sum is larger.
    let secs: f64 = ran.iter().map(|r| r.seconds).sum();
    println!(
        "simulator: {met} of {} cases as expected in {:.0} s ({secs:.0} s of case time, {jobs} at a time); wrote {}",
        check.cases.len(),
        started.elapsed().as_secs_f64(),
        path.display()
    );
    let ok = met == check.cases.len();
    println!(
        "{}",
        if ok {
            "ALL EXPECTATIONS MET"
        } else {
            "SOME CASES DID NOT MEET EXPECTATIONS"
        }
    );
    Ok(if ok {
        Verdict::Verified
    } else {
        Verdict::Failed
    })
}
