//! `runner grade --selftest`: the grader graded. The stock kernels must score full marks, the
//! seeded bugs must fail, every cheat of `tests/cheats/cheats.toml` must be caught and named,
//! and the GPU must stay usable after each. One command, deterministic (a fixed demonstration
//! secret), a table printed last and JSON written to the output folder.

use super::batch::{grade_all, grader_for};
use super::job::Status;
use super::report::{self, CompileStatus, GradeReport};
use super::rubric::Rubric;
use super::submission::Submission;
use anyhow::{anyhow, bail, Context, Result};
use common::mutation;
use common::step::Arch;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub const CHEATS: &str = include_str!("../../../tests/cheats/cheats.toml");
pub const RUBRICS: &[(&str, &str)] = &[
    (
        "step0-hopper.toml",
        include_str!("../../../rubrics/step0-hopper.toml"),
    ),
    (
        "step3-hopper.toml",
        include_str!("../../../rubrics/step3-hopper.toml"),
    ),
    (
        "step3-blackwell.toml",
        include_str!("../../../rubrics/step3-blackwell.toml"),
    ),
    (
        "selftest-hopper.toml",
        include_str!("../../../rubrics/selftest-hopper.toml"),
    ),
];

/// The demonstration secret of the selftest: the hidden tests run as they would for a class,
/// with seeds anyone can reproduce. Never use it for a real class.
const SELFTEST_SECRET: &str = "workbook selftest secret: not a secret";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cheat {
    pub name: String,
    pub does: String,
    pub caught_as: String,
    edit: Vec<common::edits::Edit>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CheatFile {
    snippets: std::collections::BTreeMap<String, String>,
    cheat: Vec<Cheat>,
}

pub struct Suite {
    file: CheatFile,
}

impl Suite {
    pub fn load() -> Result<Suite> {
        Ok(Suite {
            file: toml::from_str(CHEATS).context("tests/cheats/cheats.toml")?,
        })
    }
    pub fn cheats(&self) -> &[Cheat] {
        &self.file.cheat
    }

    /// The cheat as a complete kernel: the stock step-0 twin with the cheat's edits.
    pub fn kernel(&self, cheat: &Cheat, base: &str) -> Result<String> {
        common::edits::apply(&cheat.name, base, &cheat.edit, &self.file.snippets)
    }
}

/// The stock kernel the cheats edit.
pub fn cheat_base() -> Result<&'static str> {
    Ok(runner::steps::get(0)?.info().kernel(Arch::Hopper).text)
}

/// What a submission of the selftest must come to.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expect {
    /// Every test that ran passed, no flag, full marks of what ran.
    FullMarks,
    /// At least one test failed (a seeded bug).
    Fails,
    /// This flag is raised.
    Flag(String),
    /// Refused before compiling.
    Rejected,
}

#[derive(Debug, Clone, Serialize)]
pub struct Case {
    pub name: String,
    pub rubric: String,
    pub what: String,
    pub expect: Expect,
}

/// Write the class the step-0 rubric grades: the stock twin, a seeded bug, every cheat, and a
/// submission without a kernel.
pub fn write_class(dir: &Path) -> Result<Vec<Case>> {
    let base = cheat_base()?;
    let mut cases = Vec::new();
    let mut put = |name: &str, text: Option<&str>, what: &str, expect: Expect| -> Result<()> {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
        if let Some(t) = text {
            std::fs::write(d.join("kernel.cu"), t)?;
        }
        cases.push(Case {
            name: name.into(),
            rubric: "step0-hopper.toml".into(),
            what: what.into(),
            expect,
        });
        Ok(())
    };
    put(
        "stock",
        Some(base),
        "step 0's Hopper twin as shipped",
        Expect::FullMarks,
    )?;
    let sbo = mutation::find("wrong-sbo")?;
    put(
        "mutant-wrong-sbo",
        Some(&sbo.apply(base)?),
        sbo.description,
        Expect::Fails,
    )?;
    put(
        "no-kernel",
        None,
        "a folder without a .cu file",
        Expect::Rejected,
    )?;
    let suite = Suite::load()?;
    for c in suite.cheats() {
        put(
            &format!("cheat-{}", c.name),
            Some(&suite.kernel(c, base)?),
            &c.does,
            Expect::Flag(c.caught_as.clone()),
        )?;
    }
    Ok(cases)
}

fn check(case: &Case, r: &GradeReport) -> (bool, String) {
    let ran: Vec<_> = r
        .tests
        .iter()
        .filter(|t| t.status != Status::Skipped)
        .collect();
    let outcome = format!(
        "{:.1}/{:.1}{}",
        r.score,
        r.max_score,
        if r.flags.is_empty() {
            String::new()
        } else {
            format!(" [{}]", r.flags.join(", "))
        }
    );
    let ok = match &case.expect {
        Expect::FullMarks => {
            !ran.is_empty()
                && ran.iter().all(|t| t.status == Status::Passed)
                && r.flags.is_empty()
                && r.score == r.max_score
        }
        Expect::Fails => {
            r.compile.status == CompileStatus::Ok
                && r.score < r.max_score
                && ran.iter().any(|t| t.status != Status::Passed)
        }
        Expect::Flag(f) => r.flags.contains(f) && r.score < r.max_score,
        Expect::Rejected => r.compile.status == CompileStatus::Rejected && r.score == 0.0,
    };
    (ok, outcome)
}

/// A label, its rubric, and its submissions with what each must come to.
type Group = (String, Rubric, Vec<(Submission, Case)>);

#[derive(Serialize)]
struct Row {
    case: Case,
    ok: bool,
    outcome: String,
    gpu_after: Option<String>,
}

pub fn run(out: &Path, gpus: &[usize], keep_scratch: bool) -> Result<ExitCode> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let rubric_dir = out.join("rubrics");
    std::fs::create_dir_all(&rubric_dir)?;
    for (name, text) in RUBRICS {
        std::fs::write(rubric_dir.join(name), text)?;
    }
    let secret_file = out.join("selftest-secret.txt");
    std::fs::write(&secret_file, SELFTEST_SECRET)?;
    let rubric_text = |name: &str| -> Result<&'static str> {
        RUBRICS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| *t)
            .ok_or_else(|| anyhow!("no rubric {name}"))
    };

    // 1. The class of the step-0 rubric: stock, seeded bug, cheats.
    let class_dir = out.join("class");
    let _ = std::fs::remove_dir_all(&class_dir);
    let mut cases = write_class(&class_dir)?;
    let class_rubric = Rubric::parse(rubric_text("step0-hopper.toml")?)?;
    let grader = grader_for(
        class_rubric,
        &rubric_dir.join("step0-hopper.toml"),
        Some(&secret_file),
        None,
        std::slice::from_ref(&class_dir),
        super::batch::Options {
            keep_scratch,
            ..Default::default()
        },
    )?;
    let subs = super::batch::class(&class_dir, None)?;
    eprintln!(
        "selftest: grading {} submissions of the step-0 class",
        subs.len()
    );
    let mut reports = grade_all(&grader, subs, gpus, &out.join("class-grades"), true, true)?;

    // 2. Every other step's stock Hopper twin; the Blackwell kernels of steps 0 and 3 under
    // emulation (or natively on a B200), and their seeded bugs.
    let stock_dir = out.join("stock");
    let mut groups: Vec<Group> = Vec::new();
    let hopper = rubric_text("selftest-hopper.toml")?;
    for step in runner::steps::all().iter().skip(1) {
        let n = step.info().number;
        let name = format!("step{n}-hopper");
        let d = stock_dir.join(&name);
        std::fs::create_dir_all(&d)?;
        std::fs::write(d.join("kernel.cu"), step.info().kernel(Arch::Hopper).text)?;
        let case = Case {
            name: name.clone(),
            rubric: format!("selftest-hopper.toml (step {n})"),
            what: format!("step {n}'s Hopper twin as shipped"),
            expect: Expect::FullMarks,
        };
        groups.push((
            name.clone(),
            Rubric::parse_for(hopper, Some(n))?,
            vec![(
                Submission {
                    student: name,
                    path: d,
                },
                case,
            )],
        ));
    }
    let bw = rubric_text("step3-blackwell.toml")?;
    for n in [0u32, 3] {
        let info = runner::steps::get(n)?.info();
        let mut subs = Vec::new();
        let mut add = |name: String, text: String, what: String, expect: Expect| -> Result<()> {
            let d = stock_dir.join(&name);
            std::fs::create_dir_all(&d)?;
            std::fs::write(d.join("kernel.cu"), text)?;
            subs.push((
                Submission {
                    student: name.clone(),
                    path: d,
                },
                Case {
                    name,
                    rubric: format!("step3-blackwell.toml (step {n})"),
                    what,
                    expect,
                },
            ));
            Ok(())
        };
        add(
            format!("step{n}-blackwell"),
            info.blackwell.text.to_string(),
            format!("step {n}'s Blackwell kernel as shipped"),
            Expect::FullMarks,
        )?;
        if n == 0 {
            for (m, expect) in [
                ("skip-acc-wait", Expect::Fails),
                ("skip-acc-commit", Expect::Flag("timeout".into())),
            ] {
                let mu = mutation::find(m)?;
                add(
                    format!("step0-blackwell-{m}"),
                    mu.apply(info.blackwell.text)?,
                    mu.description.to_string(),
                    expect,
                )?;
            }
        }
        groups.push((
            format!("step{n}-blackwell"),
            Rubric::parse_for(bw, Some(n))?,
            subs,
        ));
    }
    for (label, rubric, subs) in groups {
        eprintln!("selftest: grading {label}");
        let paths: Vec<PathBuf> = subs.iter().map(|(s, _)| s.path.clone()).collect();
        let g = grader_for(
            rubric,
            &rubric_dir.join(&label),
            Some(&secret_file),
            None,
            &paths,
            super::batch::Options {
                keep_scratch,
                ..Default::default()
            },
        )?;
        let (subs, new_cases): (Vec<Submission>, Vec<Case>) = subs.into_iter().unzip();
        let rs = grade_all(
            &g,
            subs,
            gpus,
            &out.join("stock-grades").join(&label),
            false,
            true,
        )?;
        cases.extend(new_cases);
        reports.extend(rs);
    }

    // 3. The verdict.
    let mut rows = Vec::new();
    for case in cases {
        let Some(r) = reports.iter().find(|r| r.student == case.name) else {
            bail!("no report for {}", case.name);
        };
        let (ok, outcome) = check(&case, r);
        rows.push(Row {
            ok,
            outcome,
            gpu_after: r.gpu_after.clone(),
            case,
        });
    }
    let gpu = reports.iter().find_map(|r| {
        r.gpu
            .as_ref()
            .map(|g| format!("{} (driver {})", g.name, g.driver_version))
    });
    let passed = rows.iter().filter(|r| r.ok).count();
    let json = serde_json::json!({
        "gpu": gpu,
        "passed": passed,
        "total": rows.len(),
        "rows": &rows,
    });
    std::fs::write(out.join("selftest.json"), serde_json::to_vec_pretty(&json)?)?;
    let mut md =
        String::from("| submission | rubric | expected | outcome | ok |\n|---|---|---|---|---|\n");
    for r in &rows {
        let expect = match &r.case.expect {
            Expect::FullMarks => "full marks".to_string(),
            Expect::Fails => "fails".to_string(),
            Expect::Flag(f) => format!("flag {f}"),
            Expect::Rejected => "refused".to_string(),
        };
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.case.name,
            r.case.rubric,
            expect,
            r.outcome.replace('|', "/"),
            if r.ok { "yes" } else { "NO" }
        ));
    }
    std::fs::write(out.join("selftest.md"), &md)?;
    let _ = report::SCHEMA;
    println!("{md}");
    println!(
        "selftest on {}: {passed} of {} as expected; reports in {}",
        gpu.unwrap_or_else(|| "?".into()),
        rows.len(),
        out.display()
    );
    Ok(if passed == rows.len() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cheat_applies_and_only_the_include_cheats_break_the_policy() {
        let suite = Suite::load().unwrap();
        assert!(suite.cheats().len() >= 8, "the suite has at least 8 cheats");
        let base = cheat_base().unwrap();
        for c in suite.cheats() {
            let k = suite.kernel(c, base).unwrap();
            assert_ne!(k, base, "{} edits nothing", c.name);
            assert!(k.contains("gemm_kernel"));
            let refused = super::super::policy::check(&k).is_err();
            assert_eq!(
                refused,
                c.caught_as == "forbidden-source",
                "{}: policy {:?}",
                c.name,
                super::super::policy::check(&k)
            );
        }
        let names: Vec<&str> = suite.cheats().iter().map(|c| c.name.as_str()).collect();
        for needed in [
            "cached-output",
            "write-past-c",
            "edit-a",
            "first-tile-only",
            "spin-forever",
            "system-include",
            "early-return",
            "read-reference",
        ] {
            assert!(names.contains(&needed), "{needed} missing");
        }
    }

    #[test]
    fn every_cheat_that_passes_the_policy_compiles_for_sm90a() {
        // Each must be a real kernel of the contract, so that it would cheat without the
        // grader's defences.
        let suite = Suite::load().unwrap();
        let spec = common::step::KernelSpec::new(runner::steps::get(0).unwrap(), Arch::Hopper);
        for c in suite
            .cheats()
            .iter()
            .filter(|c| c.caught_as != "forbidden-source")
        {
            let src = common::compile::KernelSource {
                path: format!("cheat-{}.cu", c.name),
                text: suite.kernel(c, cheat_base().unwrap()).unwrap(),
            };
            for dtype in [common::Dtype::F16, common::Dtype::Bf16] {
                let compiled =
                    common::compile::compile(&src, common::Target::Sm90a, &spec.defines(dtype))
                        .unwrap_or_else(|e| panic!("{} ({dtype}): {e:#}", c.name));
                assert!(!compiled.cubin.is_empty());
            }
        }
    }

    #[test]
    fn the_class_has_the_stock_kernel_a_bug_and_every_cheat() {
        let d = std::env::temp_dir().join(format!("grade-selftest-class-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let cases = write_class(&d).unwrap();
        assert!(cases.len() >= 10, "a batch of at least 10 submissions");
        assert!(d.join("stock/kernel.cu").is_file());
        assert!(d.join("cheat-cached-output/kernel.cu").is_file());
        assert!(!d.join("no-kernel/kernel.cu").exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_shipped_rubrics_parse() {
        for (name, text) in RUBRICS {
            Rubric::parse(text).unwrap_or_else(|e| panic!("{name}: {e:#}"));
        }
        for step in runner::steps::all() {
            Rubric::parse_for(RUBRICS[3].1, Some(step.info().number)).unwrap();
        }
        Rubric::parse_for(RUBRICS[2].1, Some(0)).unwrap();
    }
}
