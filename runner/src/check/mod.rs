//! `runner check emulation` and `runner check twins`: the project's GPU evidence, as runner
//! subcommands (they were bash and Python scripts).
//!
//! - [`cases`]: which runs of `runner step` each check makes and what each must come to;
//! - [`pool`]: those runs as children in the grader's sandbox, over the `--gpus` pool, each
//!   classified by its exit status alone ([`Verdict`]);
//! - here: the checks themselves, which write their typed results files
//!   ([`crate::results::EmulationCheck`], [`crate::results::TwinCheck`],
//!   [`crate::results::SelftestSummary`]) and print a summary table.

pub mod cases;
pub mod pool;

use crate::results::{
    EmulationCase as EmulationRow, EmulationCheck, Expected, Provenance, Results, SelftestCase,
    SelftestSummary, TwinCase as TwinRow, TwinCheck,
};
use anyhow::{Context, Result};
use cases::{EmulationCase, EmulationSet, TwinCase, TwinSet};
use common::verdict::Verdict;
use common::{Dtype, Shape};
use pool::{Child, Ran};
use serde::Deserialize;
use std::path::{Path, PathBuf};

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
        crate::grade::batch::default_gpus(&self.gpus)
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

/// Both checks run sm_90a code on the GPU itself (the twins natively, the Blackwell kernels
/// under the emulation): without such a GPU a `runner step` child only reports its builds and
/// exits 0, which must not pass for a verified case.
fn require_hopper() -> Result<()> {
    match common::gpu::open() {
        common::gpu::GpuStatus::Present(g) if g.info.compute_capability == (9, 0) => Ok(()),
        common::gpu::GpuStatus::Present(g) => anyhow::bail!(
            "runner check runs sm_90a kernels on an H100 or H200; this GPU is a {} ({})",
            g.info.name,
            g.info.sm()
        ),
        common::gpu::GpuStatus::Absent(why) => anyhow::bail!("runner check needs a GPU: {why}"),
    }
}

/// The GPU, driver, date and commit a check file records.
fn provenance() -> Provenance {
    let smi = crate::bench::smi("name,driver_version").unwrap_or_default();
    let mut parts = smi.splitn(2, ", ");
    Provenance {
        gpu: parts.next().filter(|s| !s.is_empty()).unwrap_or("?").into(),
        driver: parts.next().unwrap_or("?").into(),
        date: crate::bench::today(),
        commit: crate::bench::commit(),
    }
}

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
fn emulation_row(case: &EmulationCase, ran: &Ran) -> EmulationRow {
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
        stress: case.stress,
        outcome: ran.verdict,
        exit_code: ran.exit_code,
        rel_error_norm: rel,
        seconds: (ran.seconds * 100.0).round() / 100.0,
        detail: last_line(ran, 300),
    }
}

/// Each case's name, verdict and errors, for the log beside the results file.
fn write_log(path: &Path, names: &[String], ran: &[Ran]) -> Result<()> {
    let mut log = String::new();
    for (name, r) in names.iter().zip(ran) {
        log.push_str(&format!(
            "== {name}: {} (exit {}, {:.1} s)\n{}\n",
            r.verdict,
            r.exit_code,
            r.seconds,
            crate::grade::sandbox::truncate_log(r.stderr.trim_end(), 4096)
        ));
    }
    std::fs::write(path, log).with_context(|| format!("cannot write {}", path.display()))
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
    require_hopper()?;
    let head = provenance();
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
    write_log(&pool.out.join("emulation-log.txt"), &names, &ran)?;
    let check = EmulationCheck {
        head,
        mode: "tcgen05 emulated on sm_90a".into(),
        emu_seeds: set.emu_seeds.clone(),
        cases: rows,
    };
    Results::Emulation(check.clone()).write(&pool.out.join("emulation.json"))?;
    println!(
        "\n{:<58} {:<8} {:<8} {:>6}  rel.err",
        "case", "expected", "outcome", "secs"
    );
    for (name, c) in names.iter().zip(&check.cases) {
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
    let met = check.cases.iter().filter(|c| c.met_expectation).count();
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
    require_hopper()?;
    let head = provenance();
    println!(
        "{} twin cases, {} at a time on each of GPUs {:?}",
        cases.len(),
        pool.jobs,
        pool.gpus()
    );
    let ran = pool.run(cases.iter().map(TwinCase::child).collect(), "twin runs")?;
    let names: Vec<String> = cases.iter().map(TwinCase::name).collect();
    write_log(&pool.out.join("twins-log.txt"), &names, &ran)?;
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
            stress: None,
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
}
