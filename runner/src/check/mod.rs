//! `runner check emulation`, `runner check twins` and `runner check twins --stress`: the
//! project's GPU evidence, as runner subcommands (they were bash and Python scripts).
//!
//! - [`cases`]: which runs of `runner step` each check makes and what each must come to;
//! - [`crate::pool`]: those runs as children in the grader's sandbox, over the `--gpus` pool,
//!   each classified by its exit status alone ([`Verdict`]);
//! - here: the checks themselves, which write their typed results files
//!   ([`crate::results::EmulationCheck`], [`crate::results::TwinCheck`],
//!   [`crate::results::TwinStress`], [`crate::results::SelftestSummary`]) and print a summary
//!   table.

pub mod agree;
pub mod cases;
pub mod cupti;
pub mod sim;

use crate::outdir::OutDir;
use crate::pool::{self, Child, Ran};
use crate::provenance;
use crate::results::{
    EmulationCase as EmulationRow, EmulationCheck, Expected, Provenance, Results, SelftestCase,
    SelftestSummary, StressExpected, StressOutcome, TwinCase as TwinRow, TwinCheck, TwinStress,
    TwinStressCase, TwinStressVerdict,
};
use anyhow::Result;
use cases::{EmulationCase, EmulationSet, StressCaseRun, StressRun, StressSet, TwinCase, TwinSet};
use common::mutation::TwinCatch;
use common::verdict::Verdict;
use common::{Dtype, Shape};
use serde::Deserialize;
use std::path::PathBuf;

/// Where and how the children run.
pub struct Pool {
    /// GPU ordinals (empty: `WORKBOOK_DEVICE`, else 0).
    pub gpus: Vec<usize>,
    /// Children at a time on each GPU.
    pub jobs: usize,
    /// The folder the results files go to.
    pub out: PathBuf,
}

impl Pool {
    fn gpus(&self) -> Vec<usize> {
        pool::default_gpus(&self.gpus)
    }

    fn run(&self, children: Vec<Child>, what: &str) -> Result<Vec<Ran>> {
        let bar = indicatif::ProgressBar::new(children.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(&format!(
                "{{bar:40}} {{pos}}/{{len}} {what}, {{elapsed}} {{msg}}"
            ))
            .map_err(|e| anyhow::anyhow!("{e}"))?,
        );
        let ran = pool::run_all(children, &self.gpus(), self.jobs, &|_, r| {
            bar.set_message(format!("last: {}", r.verdict));
            bar.inc(1);
        })?;
        bar.finish_and_clear();
        Ok(ran)
    }
}

/// The summary table of an emulation or simulator check, one row per case; returns how many met
/// their expectation.
pub fn print_cases(names: &[String], rows: &[EmulationRow]) -> usize {
    println!(
        "\n{:<58} {:<8} {:<8} {:>6}  rel.err",
        "case", "expected", "outcome", "secs"
    );
    for (name, c) in names.iter().zip(rows) {
        let flag = if c.met_expectation {
            String::new()
        } else if c.named == Some(false) {
            format!(
                "  <-- UNEXPECTED (no '{}' in its errors)",
                c.caught_by.as_deref().unwrap_or("")
            )
        } else {
            "  <-- UNEXPECTED".into()
        };
        println!(
            "{name:<58} {:<8} {:<8} {:>6}  {}{flag}",
            match c.expected {
                Expected::Pass => "pass",
                Expected::Fail => "fail",
            },
            c.outcome,
            c.seconds,
            c.rel_error_norm
                .map_or_else(|| "-".into(), |e| format!("{e:.2e}"))
        );
    }
    rows.iter().filter(|c| c.met_expectation).count()
}

/// What a check does with its `--out` folder, for the refusal of a folder of the user's.
pub const WRITES_RESULTS: &str = "the check writes its results there";

/// What a `runner step --json` run reports that a check keeps beside the verdict.
#[derive(Deserialize, Default)]
struct StepJson {
    #[serde(default)]
    runs: Vec<StepRun>,
}

#[derive(Deserialize)]
struct StepRun {
    verification: Option<Verification>,
    grid: Option<[u32; 3]>,
}

#[derive(Deserialize)]
struct Verification {
    rel_error_norm: Option<f64>,
}

impl StepJson {
    /// The first run's relative error and grid, where the child got that far.
    fn of(ran: &Ran) -> (Option<f64>, Option<[u32; 3]>) {
        let j: StepJson = serde_json::from_str(&ran.stdout).unwrap_or_default();
        j.runs.into_iter().next().map_or((None, None), |r| {
            (r.verification.and_then(|v| v.rel_error_norm), r.grid)
        })
    }
}

/// The last line of a child's errors (notes left out), cut to `limit` bytes.
fn last_line(ran: &Ran, limit: usize) -> String {
    let line = ran
        .stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty() && !l.starts_with("note: "))
        .unwrap_or("");
    cut(line, limit)
}

fn cut(s: &str, limit: usize) -> String {
    let mut end = s.len().min(limit);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// An emulation case's row: whether it met its expectation, from its verdict and, for a seeded
/// bug that names what must catch it, whether the errors say so.
pub fn emulation_row(case: &EmulationCase, ran: &Ran) -> EmulationRow {
    let must_say = case.mutation.map(|m| m.caught_by).filter(|s| !s.is_empty());
    let named = must_say.is_none_or(|s| ran.stderr.contains(s));
    let met = match case.expected {
        Expected::Pass => ran.verdict == Verdict::Verified,
        // Caught: a failed verification, an emulator fault (an error) or a diagnosed hang.
        Expected::Fail => {
            matches!(
                ran.verdict,
                Verdict::Failed | Verdict::Error | Verdict::Hang
            ) && named
        }
    };
    let detail = match must_say {
        Some(s) if named => ran
            .stderr
            .lines()
            .find(|l| l.contains(s))
            .map_or_else(|| last_line(ran, 600), |l| cut(l, 600)),
        _ => last_line(ran, 600),
    };
    EmulationRow {
        step: case.step,
        shape: case.shape.to_string(),
        dtype: case.dtype,
        seed: case.seed,
        emu_seed: Some(case.emu_seed),
        clusters: case.clusters,
        dist: (case.dist != common::Dist::Gaussian).then_some(case.dist),
        mutation: case.mutation.map(|m| m.name.to_string()),
        expected: case.expected,
        outcome: ran.verdict,
        met_expectation: met,
        exit_code: ran.exit_code,
        rel_error_norm: StepJson::of(ran).0,
        seconds: (ran.seconds * 100.0).round() / 100.0,
        caught_by: must_say.map(str::to_string),
        named: must_say.map(|_| named),
        detail,
    }
}

fn twin_row(case: &TwinCase, ran: &Ran) -> TwinRow {
    let (rel, grid) = StepJson::of(ran);
    TwinRow {
        step: case.step,
        shape: case.shape.to_string(),
        dtype: case.dtype,
        seed: case.seed,
        dist: case.dist,
        clusters: case.clusters,
        grid,
        outcome: ran.verdict,
        exit_code: ran.exit_code,
        rel_error_norm: rel,
        seconds: (ran.seconds * 100.0).round() / 100.0,
        detail: last_line(ran, 300),
    }
}

/// `runner selftest` per dtype, in the pool: cuBLAS against the CPU reference.
fn selftest(pool: &Pool, head: &Provenance) -> Result<(SelftestSummary, bool)> {
    #[derive(Deserialize)]
    struct Out {
        shape: Shape,
        dtype: Dtype,
        verification: SelfVerification,
        cublas: common::timing::Stats,
        cublas_tflops: f64,
        peak_tflops: Option<f64>,
    }
    #[derive(Deserialize)]
    struct SelfVerification {
        passed: bool,
        rel_error_norm: f64,
    }
    let dtypes = [Dtype::F16, Dtype::Bf16];
    let children = dtypes
        .iter()
        .map(|d| Child {
            args: vec![
                "selftest".into(),
                "--dtype".into(),
                d.to_string(),
                "--json".into(),
            ],
            limit: std::time::Duration::from_secs(300),
        })
        .collect();
    let ran = pool.run(children, "selftests")?;
    let mut cases = Vec::new();
    let mut ok = true;
    for (d, r) in dtypes.iter().zip(&ran) {
        // The verdict is the exit status; the numbers are what a verified run printed.
        let out = (r.verdict == Verdict::Verified)
            .then(|| serde_json::from_str::<Out>(&r.stdout).ok())
            .flatten();
        match out {
            Some(o) => cases.push(SelftestCase {
                shape: o.shape.to_string(),
                dtype: o.dtype,
                cublas_median_us: o.cublas.median_us,
                cublas_tflops: o.cublas_tflops,
                peak_tflops: o.peak_tflops,
                verified: o.verification.passed,
                rel_error_norm: o.verification.rel_error_norm,
            }),
            None => {
                ok = false;
                eprintln!("selftest {d}: {} ({})", r.verdict, last_line(r, 300));
            }
        }
    }
    Ok((
        SelftestSummary {
            head: head.clone(),
            cases,
        },
        ok,
    ))
}

/// `runner check emulation`: every step under the tcgen05 emulation (each must pass) and every
/// seeded bug (each must be caught, or pass if it is harmless), after the selftest. Writes
/// `emulation.json`, `selftest.json` and `emulation-log.txt` in `pool.out`.
pub fn emulation(set: &EmulationSet, pool: &Pool, with_selftest: bool) -> Result<Verdict> {
    let cases = cases::emulation_cases(set)?;
    pool::require_hopper("runner check")?;
    OutDir::make_own(&pool.out, "--out", WRITES_RESULTS)?;
    let head = provenance::current();
    let mut ok = true;
    if with_selftest {
        let (summary, passed) = selftest(pool, &head)?;
        Results::Selftest(summary.clone()).write(&pool.out.join("selftest.json"))?;
        for c in &summary.cases {
            println!(
                "selftest {} {}: cuBLAS {:.1} us, {:.0} TFLOP/s, verified {} (rel. error {:.2e})",
                c.shape, c.dtype, c.cublas_median_us, c.cublas_tflops, c.verified, c.rel_error_norm
            );
        }
        ok &= passed && summary.cases.iter().all(|c| c.verified);
    }
    println!(
        "{} emulation cases, {} at a time on each of GPUs {:?}",
        cases.len(),
        pool.jobs,
        pool.gpus()
    );
    let ran = pool.run(
        cases.iter().map(EmulationCase::child).collect(),
        "emulated runs",
    )?;
    let rows: Vec<EmulationRow> = cases
        .iter()
        .zip(&ran)
        .map(|(c, r)| emulation_row(c, r))
        .collect();
    let names: Vec<String> = cases.iter().map(EmulationCase::name).collect();
    pool::write_log(&pool.out.join("emulation-log.txt"), &names, &ran)?;
    let check = EmulationCheck {
        head,
        mode: "tcgen05 emulated on sm_90a".into(),
        emu_seeds: set.emu_seeds.clone(),
        cases: rows,
    };
    Results::Emulation(check.clone()).write(&pool.out.join("emulation.json"))?;
    let met = print_cases(&names, &check.cases);
    ok &= met == check.cases.len();
    println!(
        "emulation: {met} of {} cases as expected; wrote {}",
        check.cases.len(),
        pool.out.join("emulation.json").display()
    );
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

/// `runner check twins`: every step's Hopper twin natively on every check shape it accepts;
/// each must verify. Writes `twins.json` and `twins-log.txt` in `pool.out`.
pub fn twins(set: &TwinSet, pool: &Pool) -> Result<Verdict> {
    let cases = cases::twin_cases(set);
    pool::require_hopper("runner check")?;
    OutDir::make_own(&pool.out, "--out", WRITES_RESULTS)?;
    let head = provenance::current();
    println!(
        "{} twin cases, {} at a time on each of GPUs {:?}",
        cases.len(),
        pool.jobs,
        pool.gpus()
    );
    let ran = pool.run(cases.iter().map(TwinCase::child).collect(), "twin runs")?;
    let names: Vec<String> = cases.iter().map(TwinCase::name).collect();
    pool::write_log(&pool.out.join("twins-log.txt"), &names, &ran)?;
    let check = TwinCheck {
        head,
        mode: "Hopper twins, native sm_90a, verified against cuBLAS and fp64 samples".into(),
        cases: cases
            .iter()
            .zip(&ran)
            .map(|(c, r)| twin_row(c, r))
            .collect(),
    };
    Results::Twins(check.clone()).write(&pool.out.join("twins.json"))?;
    println!(
        "\n{:<52} {:<8} {:>6}  rel.err",
        "twin case", "outcome", "secs"
    );
    for (name, c) in names.iter().zip(&check.cases) {
        println!(
            "{name:<52} {:<8} {:>6}  {}{}",
            c.outcome,
            c.seconds,
            c.rel_error_norm
                .map_or_else(|| "-".into(), |e| format!("{e:.2e}")),
            if c.outcome == Verdict::Verified {
                ""
            } else {
                "  <-- UNEXPECTED"
            }
        );
    }
    let verified = check
        .cases
        .iter()
        .filter(|c| c.outcome == Verdict::Verified)
        .count();
    println!(
        "twins: {verified} of {} verified; wrote {}",
        check.cases.len(),
        pool.out.join("twins.json").display()
    );
    let ok = verified == check.cases.len();
    println!(
        "{}",
        if ok {
            "ALL TWIN CHECKS MET"
        } else {
            "SOME TWIN CHECKS FAILED"
        }
    );
    Ok(if ok {
        Verdict::Verified
    } else {
        Verdict::Failed
    })
}

/// How a stress case ended: its verdict, and for an error whether the errors say the GPU
/// faulted (a seeded bug caught) or the static check refused the build by the mutation's rule.
fn stress_outcome(case: &StressCaseRun, ran: &Ran) -> StressOutcome {
    match ran.verdict {
        Verdict::Verified => StressOutcome::Pass,
        Verdict::Failed => StressOutcome::Wrong,
        Verdict::Hang => StressOutcome::Hang,
        Verdict::Error | Verdict::Partial => {
            let rule = case
                .mutation()
                .map(|t| t.mutation.caught_by)
                .filter(|r| !r.is_empty());
            // The GPU faulted, or a stress build's twin check trapped (`twin check RULE: ...`).
            if ran.stderr.contains("faulted") || ran.stderr.contains("twin check ") {
                StressOutcome::Fault
            } else if case.run == StressRun::Refusal && rule.is_some_and(|r| ran.stderr.contains(r))
            {
                StressOutcome::Refused
            } else {
                StressOutcome::Error
            }
        }
    }
}

/// Whether one case met its expectation. A stress-caught mutation is judged per twin over the
/// seeds ([`stress_verdicts`]); its case says whether this seed caught it.
fn stress_met(expected: StressExpected, outcome: StressOutcome) -> bool {
    match expected {
        StressExpected::Pass => outcome == StressOutcome::Pass,
        StressExpected::Caught => matches!(
            outcome,
            StressOutcome::Wrong | StressOutcome::Hang | StressOutcome::Fault
        ),
        StressExpected::Refused => outcome == StressOutcome::Refused,
        StressExpected::Record => outcome != StressOutcome::Error,
    }
}

/// Whether a run that must catch a stress mutation caught it as its catch says: where the
/// mutation names a twin-check rule, only that rule's trap counts (`twin check RULE:`), so a
/// bug caught by luck as a wrong result or a hang does not pass for the check's doing.
fn caught_as_named(case: &StressCaseRun, ran: &Ran, outcome: StressOutcome) -> bool {
    if !stress_met(StressExpected::Caught, outcome) {
        return false;
    }
    match case.mutation().map(|t| t.mutation.caught_by) {
        Some(rule) if !rule.is_empty() => ran.stderr.contains(&format!("twin check {rule}:")),
        _ => true,
    }
}

fn stress_row(case: &StressCaseRun, ran: &Ran) -> TwinStressCase {
    let c = &case.case;
    let outcome = stress_outcome(case, ran);
    let met_expectation = if case.expected == StressExpected::Caught {
        caught_as_named(case, ran, outcome)
    } else {
        stress_met(case.expected, outcome)
    };
    TwinStressCase {
        name: case.name(),
        step: c.step,
        shape: c.shape.to_string(),
        clusters: c.clusters,
        stress_seed: (case.run == StressRun::Stressed).then_some(c.seed),
        mutation: c.mutation.map(str::to_string),
        contender: case.contender.map(|k| k.name.to_string()),
        static_check: case.run == StressRun::Refusal || c.mutation.is_none(),
        expected: case.expected,
        outcome,
        met_expectation,
        exit_code: ran.exit_code,
        rel_error_norm: StepJson::of(ran).0,
        seconds: (ran.seconds * 100.0).round() / 100.0,
        detail: last_line(ran, 300),
    }
}

/// Per twin mutation and twin, in the order of the cases: the seeds that caught it, its plain
/// run, its refusal, and whether it met what its catch requires (stress: caught under every
/// seed, by its named twin-check rule where it has one; static: refused, its stress runs only
/// recorded).
fn stress_verdicts(rows: &[TwinStressCase]) -> Vec<TwinStressVerdict> {
    let mut out: Vec<TwinStressVerdict> = Vec::new();
    for r in rows {
        let Some(m) = &r.mutation else { continue };
        let at = match out
            .iter()
            .position(|v| &v.mutation == m && v.step == r.step)
        {
            Some(i) => i,
            None => {
                let by_stress =
                    common::mutation::find_twin(m).is_none_or(|t| t.caught == TwinCatch::Stress);
                out.push(TwinStressVerdict {
                    mutation: m.clone(),
                    step: r.step,
                    caught_by: if by_stress { "stress" } else { "static" }.into(),
                    seeds: Vec::new(),
                    caught_under: Vec::new(),
                    plain: None,
                    refused: None,
                    met_expectation: false,
                });
                out.len() - 1
            }
        };
        let v = &mut out[at];
        match (r.stress_seed, r.expected) {
            (Some(seed), expected) => {
                v.seeds.push(seed);
                let caught = if expected == StressExpected::Caught {
                    r.met_expectation
                } else {
                    stress_met(StressExpected::Caught, r.outcome)
                };
                if caught {
                    v.caught_under.push(seed);
                }
            }
            (None, StressExpected::Refused) => v.refused = Some(r.met_expectation),
            (None, _) => v.plain = Some(r.outcome),
        }
    }
    for v in &mut out {
        v.met_expectation = if v.caught_by == "stress" {
            !v.seeds.is_empty() && v.caught_under.len() == v.seeds.len()
        } else {
            v.refused == Some(true)
        };
    }
    out
}

fn outcome_word(o: StressOutcome) -> &'static str {
    match o {
        StressOutcome::Pass => "pass",
        StressOutcome::Wrong => "wrong",
        StressOutcome::Hang => "hang",
        StressOutcome::Fault => "fault",
        StressOutcome::Refused => "refused",
        StressOutcome::Error => "error",
    }
}

/// `runner check twins --stress`: every stock twin under every stress seed (each must verify)
/// and every twin mutation under the same seeds (each stress-caught one must be caught, as a
/// wrong result, a hang or a fault (its named twin-check rule where it has one), under every
/// seed on each twin; each static one
/// refused by the static check). Writes `stress.json` and `stress-log.txt` in `pool.out`.
pub fn stress(set: &StressSet, pool: &Pool) -> Result<Verdict> {
    let cases = cases::stress_cases(set);
    let children = cases
        .iter()
        .map(StressCaseRun::child)
        .collect::<Result<Vec<_>>>()?;
    pool::require_hopper("runner check")?;
    OutDir::make_own(&pool.out, "--out", WRITES_RESULTS)?;
    let head = provenance::current();
    println!(
        "{} stress cases (seeds {:?}), {} at a time on each of GPUs {:?}",
        cases.len(),
        set.seeds,
        pool.jobs,
        pool.gpus()
    );
    let ran = pool.run(children, "stress runs")?;
    let names: Vec<String> = cases.iter().map(StressCaseRun::name).collect();
    pool::write_log(&pool.out.join("stress-log.txt"), &names, &ran)?;
    let rows: Vec<TwinStressCase> = cases
        .iter()
        .zip(&ran)
        .map(|(c, r)| stress_row(c, r))
        .collect();
    let check = TwinStress {
        head,
        mode: "Hopper twins, native sm_90a stress builds (common::stress), verified against cuBLAS and fp64 samples".into(),
        seeds: set.seeds.clone(),
        mutations: stress_verdicts(&rows),
        cases: rows,
    };
    Results::TwinStress(check.clone()).write(&pool.out.join("stress.json"))?;
    print!("{}", stress_summary(&check));
    let ok = stress_ok(&check);
    println!(
        "wrote {}\n{}",
        pool.out.join("stress.json").display(),
        if ok {
            "ALL STRESS CHECKS MET"
        } else {
            "SOME STRESS CHECKS FAILED"
        }
    );
    Ok(if ok {
        Verdict::Verified
    } else {
        Verdict::Failed
    })
}

/// Every case met its expectation, a stress-caught mutation on each twin under every seed.
fn stress_ok(check: &TwinStress) -> bool {
    check
        .cases
        .iter()
        .all(|c| c.met_expectation || c.expected == StressExpected::Caught)
        && check.mutations.iter().all(|v| v.met_expectation)
}

/// The case table, the per-mutation table and the stock twins' count.
fn stress_summary(check: &TwinStress) -> String {
    let mut s = format!(
        "\n{:<62} {:<8} {:<8} {:>6}\n",
        "stress case", "expected", "outcome", "secs"
    );
    for c in &check.cases {
        let flag = match (c.met_expectation, c.expected) {
            (true, _) => "",
            (false, StressExpected::Caught) => "  (not caught under this seed)",
            (false, _) => "  <-- UNEXPECTED",
        };
        s.push_str(&format!(
            "{:<62} {:<8} {:<8} {:>6}{flag}\n",
            c.name,
            serde_json::to_value(c.expected)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            outcome_word(c.outcome),
            c.seconds
        ));
    }
    s.push_str(&format!(
        "\n{:<32} {:>4} {:<7} {:<22} {:<8} {:<8}\n",
        "twin mutation", "twin", "catch", "caught under seeds", "plain", "refused"
    ));
    for v in &check.mutations {
        s.push_str(&format!(
            "{:<32} {:>4} {:<7} {:<22} {:<8} {:<8}{}\n",
            v.mutation,
            v.step,
            v.caught_by,
            format!("{:?} of {}", v.caught_under, v.seeds.len()),
            v.plain.map_or("-", outcome_word),
            v.refused.map_or("-", |r| if r { "yes" } else { "no" }),
            if v.met_expectation {
                ""
            } else {
                "  <-- UNEXPECTED"
            }
        ));
    }
    let verified = |contender: bool| {
        let runs: Vec<_> = check
            .cases
            .iter()
            .filter(|c| c.mutation.is_none() && c.contender.is_some() == contender)
            .collect();
        let pass = runs
            .iter()
            .filter(|c| c.outcome == StressOutcome::Pass)
            .count();
        format!("{pass} of {}", runs.len())
    };
    s.push_str(&format!(
        "\nstock twins under stress: {} verified\nstress controls ({}): {} verified\n",
        verified(false),
        cases::STRESS_CONTROLS.join(", "),
        verified(true)
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::mutation;

    fn ran(verdict: Verdict, stdout: &str, stderr: &str) -> Ran {
        Ran {
            verdict,
            exit_code: i32::from(verdict.code()),
            seconds: 1.234,
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    fn case(mutation: Option<&str>, expected: Expected) -> EmulationCase {
        EmulationCase {
            step: 4,
            shape: Shape {
                m: 512,
                n: 1024,
                k: 512,
            },
            dtype: Dtype::F16,
            seed: 1,
            emu_seed: 2,
            clusters: Some(1),
            dist: common::Dist::Gaussian,
            mutation: mutation.map(|m| mutation::find(m).unwrap()),
            expected,
        }
    }

    #[test]
    fn a_harmless_bug_that_exits_0_passes_whatever_it_printed() {
        // The old script parsed stdout for the verdict and recorded 35 of these as `error`
        // under load (rc 0, unparsable output): the exit status alone decides now.
        let c = case(Some("no-first-round-guard"), Expected::Pass);
        let row = emulation_row(&c, &ran(Verdict::Verified, "not json {", ""));
        assert_eq!(row.outcome, Verdict::Verified);
        assert!(row.met_expectation);
        assert_eq!(row.rel_error_norm, None);
    }

    #[test]
    fn a_caught_bug_must_be_named_where_the_mutation_says_by_what() {
        let m = mutation::MUTATIONS
            .iter()
            .find(|m| !m.caught_by.is_empty() && m.expect == mutation::Expect::Caught)
            .expect("a mutation that names what catches it");
        let c = case(Some(m.name), Expected::Fail);
        let said = format!("error: emulator: {} at CTA 0\nnote: x\n", m.caught_by);
        let row = emulation_row(&c, &ran(Verdict::Error, "", &said));
        assert!(row.met_expectation && row.named == Some(true));
        assert!(row.detail.contains(m.caught_by), "{}", row.detail);
        let silent = emulation_row(&c, &ran(Verdict::Error, "", "error: something else"));
        assert!(!silent.met_expectation && silent.named == Some(false));
        let passed = emulation_row(&c, &ran(Verdict::Verified, "", &said));
        assert!(!passed.met_expectation, "a bug that verifies is not caught");
        let hung = emulation_row(&c, &ran(Verdict::Hang, "", &said));
        assert!(hung.met_expectation);
    }

    #[test]
    fn a_stock_run_keeps_its_error_norm_and_grid() {
        let out = r#"{"runner": {}, "runs": [{"grid": [16, 1, 1],
            "verification": {"passed": true, "rel_error_norm": 0.00012}}]}"#;
        let c = case(None, Expected::Pass);
        let row = emulation_row(&c, &ran(Verdict::Verified, out, "note: emulated\n"));
        assert!(row.met_expectation);
        assert_eq!(row.rel_error_norm, Some(0.00012));
        assert_eq!(row.seconds, 1.23);
        let failed = emulation_row(&c, &ran(Verdict::Failed, out, "error: 3 wrong\n"));
        assert!(!failed.met_expectation);
        assert_eq!(failed.detail, "error: 3 wrong");
        let t = TwinCase {
            step: 6,
            shape: c.shape,
            dtype: Dtype::Bf16,
            seed: 1,
            dist: common::Dist::Int,
            clusters: None,
        };
        let row = twin_row(&t, &ran(Verdict::Verified, out, ""));
        assert_eq!(row.grid, Some([16, 1, 1]));
        // And the rows are what the results types read back.
        let file = Results::Twins(TwinCheck {
            head: Provenance {
                gpu: "g".into(),
                driver: "d".into(),
                date: "2026-01-01".into(),
                commit: "c".into(),
            },
            mode: "m".into(),
            cases: vec![row],
        });
        let text = serde_json::to_string(&file).unwrap();
        assert!(matches!(
            crate::results::parse(&text).unwrap(),
            Some(Results::Twins(_))
        ));
    }

    #[test]
    fn a_stress_case_is_caught_by_a_wrong_result_a_hang_or_a_fault_and_refused_by_its_rule() {
        let set = cases::StressSet::full();
        let all = cases::stress_cases(&set);
        let pick = |m: &str, run: StressRun| {
            all.iter()
                .find(|c| c.case.mutation == Some(m) && c.run == run)
                .unwrap()
                .clone()
        };
        // A bug with no twin-check rule: a wrong result, a hang or a fault catches it.
        let bug = pick("twin-out-full-one-arrival", StressRun::Stressed);
        assert_eq!(bug.mutation().unwrap().mutation.caught_by, "");
        let row = |c: &StressCaseRun, v, err: &str| stress_row(c, &ran(v, "", err));
        assert_eq!(row(&bug, Verdict::Failed, "").outcome, StressOutcome::Wrong);
        assert!(row(&bug, Verdict::Failed, "").met_expectation);
        assert_eq!(row(&bug, Verdict::Hang, "").outcome, StressOutcome::Hang);
        assert!(row(&bug, Verdict::Hang, "").met_expectation);
        let fault = row(
            &bug,
            Verdict::Error,
            "error: the kernel faulted: ILLEGAL_ADDRESS",
        );
        assert!(fault.outcome == StressOutcome::Fault && fault.met_expectation);
        // A bug the twin check names: only its rule's trap counts, not a lucky wrong result.
        let named = pick("twin-no-out-empty-wait", StressRun::Stressed);
        let rule = named.mutation().unwrap().mutation.caught_by;
        assert!(!rule.is_empty());
        assert!(!row(&named, Verdict::Failed, "").met_expectation);
        let trapped = row(
            &named,
            Verdict::Error,
            &format!("error: twin check {rule}: CTA 3, warp 4 ..."),
        );
        assert!(trapped.outcome == StressOutcome::Fault && trapped.met_expectation);
        let other = row(
            &named,
            Verdict::Error,
            "error: twin check some-other-rule: CTA 3 ...",
        );
        assert!(other.outcome == StressOutcome::Fault && !other.met_expectation);
        let missed = row(&bug, Verdict::Verified, "");
        assert!(!missed.met_expectation, "a bug that verifies is not caught");
        assert_eq!(missed.stress_seed, Some(bug.case.seed));
        // A compile error is no catch.
        assert_eq!(
            row(&bug, Verdict::Error, "error: no such file").outcome,
            StressOutcome::Error
        );
        let refusal = pick("twin-wgmma-wait-shallow", StressRun::Refusal);
        let rule = refusal.mutation().unwrap().mutation.caught_by;
        let refused = row(&refusal, Verdict::Error, &format!("error: {rule}: ..."));
        assert!(refused.outcome == StressOutcome::Refused && refused.met_expectation);
        assert!(refused.static_check && refused.stress_seed.is_none());
        assert!(!row(&refusal, Verdict::Error, "error: other").met_expectation);
        assert!(!row(&refusal, Verdict::Verified, "").met_expectation);
        let stock = all.iter().find(|c| c.case.mutation.is_none()).unwrap();
        assert!(row(stock, Verdict::Verified, "").met_expectation);
        assert!(!row(stock, Verdict::Failed, "").met_expectation);
    }

    #[test]
    fn a_stress_mutation_passes_when_every_seed_catches_it_and_the_file_reads_back() {
        let set = cases::StressSet::full();
        let all: Vec<StressCaseRun> = cases::stress_cases(&set)
            .into_iter()
            .filter(|c| {
                c.case.step == 5
                    && matches!(
                        c.case.mutation,
                        Some("twin-no-out-empty-wait" | "twin-out-empty-same-tile-only") | None
                    )
            })
            .collect();
        // no-out-empty-wait: trapped by its rule under every seed and shape; same-tile-only:
        // under every seed but the last at one shape, which is not enough.
        let last = *set.seeds.last().unwrap();
        let trap = "error: twin check staging-rewrite-before-read: CTA 0 ...";
        let rows: Vec<TwinStressCase> = all
            .iter()
            .map(|c| {
                let (v, err) = match (c.case.mutation, c.run, c.case.seed) {
                    (Some("twin-no-out-empty-wait"), StressRun::Stressed, _) => {
                        (Verdict::Error, trap)
                    }
                    (Some("twin-out-empty-same-tile-only"), StressRun::Stressed, s)
                        if s != last || c.case.shape != common::stress::PERSISTENT_SHAPE =>
                    {
                        (Verdict::Error, trap)
                    }
                    _ => (Verdict::Verified, ""),
                };
                stress_row(c, &ran(v, "", err))
            })
            .collect();
        let verdicts = stress_verdicts(&rows);
        assert_eq!(verdicts.len(), 2, "{verdicts:?}");
        let v = &verdicts[0];
        assert_eq!(v.mutation, "twin-no-out-empty-wait");
        assert_eq!(v.caught_under, v.seeds);
        assert_eq!(v.seeds.len(), 2 * set.seeds.len(), "two shapes");
        assert_eq!(v.plain, Some(StressOutcome::Pass));
        assert!(v.met_expectation && v.caught_by == "stress");
        let w = &verdicts[1];
        assert_eq!(w.caught_under.len() + 1, w.seeds.len());
        assert!(!w.met_expectation);
        let check = TwinStress {
            head: Provenance {
                gpu: "g".into(),
                driver: "d".into(),
                date: "2026-01-01".into(),
                commit: "c".into(),
            },
            mode: "m".into(),
            seeds: set.seeds.clone(),
            mutations: verdicts,
            cases: rows,
        };
        assert!(
            !stress_ok(&check),
            "same-tile-only was not caught under one seed"
        );
        let summary = stress_summary(&check);
        assert!(summary.contains("not caught under this seed"), "{summary}");
        assert!(summary.contains("<-- UNEXPECTED"), "{summary}");
        // Written and read back through its type, as the committed file is.
        let dir = std::env::temp_dir().join(format!("wb-stress-{}", std::process::id()));
        let path = dir.join("stress.json");
        Results::TwinStress(check.clone()).write(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let Some(Results::TwinStress(back)) = crate::results::parse(&text).unwrap() else {
            panic!("not a twin-stress file: {text}")
        };
        assert_eq!(back.mutations, check.mutations);
        assert_eq!(back.seeds, check.seeds);
        assert_eq!(back.cases.len(), check.cases.len());
        assert_eq!(
            serde_json::to_string(&back.cases).unwrap(),
            serde_json::to_string(&check.cases).unwrap()
        );
        // With the last seed catching same-tile-only too, the pass is met.
        let mut caught = check;
        for c in caught.cases.iter_mut().filter(|c| {
            c.mutation.as_deref() == Some("twin-out-empty-same-tile-only")
                && c.stress_seed == Some(last)
        }) {
            c.outcome = StressOutcome::Fault;
            c.met_expectation = true;
        }
        caught.mutations = stress_verdicts(&caught.cases);
        assert!(stress_ok(&caught));
    }
}
