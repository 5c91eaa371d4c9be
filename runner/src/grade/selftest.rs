//! `runner grade --selftest`: the grader graded. The stock kernels must score full marks, the
//! seeded bugs must fail, every cheat of `tests/cheats/cheats.toml` must be caught and named,
//! and the GPU must stay usable after each. One command, deterministic (a fixed demonstration
//! secret), a table printed last and JSON written to the output folder.

use super::batch::{grade_all, grader_for};
use super::report::{CompileStatus, GradeReport};
use super::rubric::Rubric;
use super::submission::Submission;
use super::vocab::Status;
use crate::outdir::OutDir;
use crate::results::{GradeSelftest, GradeSelftestRow};
use anyhow::{anyhow, bail, Context, Result};
use common::mutation;
use common::step::Arch;
use serde::Deserialize;
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
    // Not graded by the selftest (its stock step-5 twin gets selftest-hopper.toml); listed so
    // that every shipped rubric is parsed by the tests and written next to the others.
    (
        "step5-hopper.toml",
        include_str!("../../../rubrics/step5-hopper.toml"),
    ),
];

/// Testing only: a comma-separated list of the parts to grade (`class`: the step-0 class and
/// the cheats graded apart; otherwise a group's label, as `step3-hopper-rubric` or
/// `step0-blackwell`), the others skipped: how `gpu/grade-executed.sh` grades the technique
/// cases first, quickly, with their scratch folders kept.
pub const ONLY_ENV: &str = "WORKBOOK_GRADE_SELFTEST_ONLY";

/// The parts graded on the PTX simulator (the Blackwell rubric's groups), which need no GPU:
/// `WORKBOOK_GRADE_SELFTEST_ONLY=step0-blackwell,step3-blackwell runner grade --selftest` runs on
/// any machine.
pub const SIMULATED_PARTS: &[&str] = &["step0-blackwell", "step3-blackwell"];

/// The demonstration secret of the selftest: the hidden tests run as they would for a class,
/// with seeds anyone can reproduce. Never use it for a real class.
const SELFTEST_SECRET: &str = "workbook selftest secret: not a secret";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cheat {
    pub name: String,
    /// The attack it stands for (see [`CLASSES`]).
    pub class: String,
    pub does: String,
    #[serde(default)]
    pub caught_as: String,
    /// "blackwell": an edit of step 0's Blackwell kernel, graded by step3-blackwell.toml;
    /// "step3-hopper" or "step5-hopper": of that step's Hopper twin, graded by its rubric.
    #[serde(default)]
    pub base: Option<String>,
    /// false: graded with the include screen off, so the confinement alone must stop it.
    #[serde(default = "yes")]
    pub screen: bool,
    /// A file ([`SECRET_MARK`] for the selftest's secret) none of whose lines may appear in
    /// anything the grading wrote.
    #[serde(default)]
    pub protect: Option<String>,
    /// Every visible test must still pass.
    #[serde(default)]
    pub visible_pass: bool,
    /// Whether the flag must come with lost points.
    #[serde(default = "yes")]
    pub costs_points: bool,
    /// Graded with this compile limit instead of the rubric's.
    #[serde(default)]
    pub compile_seconds: Option<u64>,
    /// An honest control, not a cheat: full marks, no flag (`caught_as` is empty).
    #[serde(default)]
    pub honest: bool,
    /// Files written beside the kernel in its submission folder (name -> text).
    #[serde(default)]
    pub files: std::collections::BTreeMap<String, String>,
    /// What a student sees of the hidden tests must be one word each, and of time the visible
    /// phase's.
    #[serde(default)]
    pub hidden_quiet: bool,
    /// The hidden run must take at least this long, none of it in the time a student sees
    /// (with an empty `caught_as`: no flag at all).
    #[serde(default)]
    pub hidden_spin_s: Option<f64>,
    /// Words a failed row's detail must hold (the simulator rule that caught it).
    #[serde(default)]
    pub detail: Option<String>,
    edit: Vec<common::edits::Edit>,
}

fn yes() -> bool {
    true
}

/// Stands for the path of the selftest's secret file in a cheat's text and `protect`.
pub const SECRET_MARK: &str = "@SECRET@";

/// The attacks the suite must cover, one cheat at least for each: the classes of issue 22's
/// threat model (the instructor chapter lists what each is caught as).
pub const CLASSES: &[&str] = &[
    "file-via-compile-log",
    "secret-or-job",
    "hidden-inputs-across-tests",
    "arch-conditional",
    "grader-allocations",
    "reduced-precision",
    "log-flood",
    "memoisation",
    "background-work",
    "extra-kernels",
    "timer-games",
    "special-input",
    "early-exit",
    "reading-the-reference",
    "device-trap",
    "compile-time",
    "out-of-bounds",
    "input-modification",
    "hang",
    "changes-when-timed",
    "technique-not-executed",
    "forged-trace",
    "identity",
    "hidden-to-visible",
    "timing-channel",
    // Issue 38: the simulator path.
    "uninitialised-read",
    "race-by-luck",
    "junk-work",
    "huge-globals",
    "unsupported-choice",
    "honest-control",
];

/// The Hopper twins other than step 0's that cheats edit (`base = "stepN-hopper"`), each graded
/// by its own rubric.
pub const HOPPER_BASES: &[(u32, &str, &str)] = &[
    (3, "step3-hopper", "step3-hopper.toml"),
    (5, "step5-hopper", "step5-hopper.toml"),
];

/// The base of the cheats on step 3's Blackwell kernel.
pub const BLACKWELL_STEP3: &str = "step3-blackwell";

/// A cheat whose `caught_as` is `unrewarded:NAME` forges what requirement NAME reads, and must
/// earn nothing by it ([`Expect::Unrewarded`]).
pub const UNREWARDED: &str = "unrewarded:";

impl Cheat {
    pub fn blackwell(&self) -> bool {
        self.base.as_deref() == Some("blackwell")
    }
    /// An edit of step 3's Blackwell kernel, graded by step3-blackwell.toml with its executed
    /// requirements (on the simulator).
    pub fn blackwell_step3(&self) -> bool {
        self.base.as_deref() == Some(BLACKWELL_STEP3)
    }
    /// The step of the Hopper twin it edits, when that is not step 0's.
    pub fn hopper_step(&self) -> Option<u32> {
        HOPPER_BASES
            .iter()
            .find(|(_, name, _)| self.base.as_deref() == Some(*name))
            .map(|(n, _, _)| *n)
    }
    /// The step whose kernel it edits.
    #[cfg(test)]
    pub fn step(&self) -> u32 {
        if self.blackwell_step3() {
            return 3;
        }
        self.hopper_step().unwrap_or(0)
    }
    /// The stock kernel it edits.
    pub fn base_text(&self) -> Result<&'static str> {
        if self.blackwell_step3() {
            return Ok(runner::steps::get(3)?.info().blackwell.text);
        }
        match self.hopper_step() {
            Some(n) => Ok(runner::steps::get(n)?.info().kernel(Arch::Hopper).text),
            None => cheat_base(self.blackwell()),
        }
    }
    /// Graded apart from the step-0 class: its own grader options or rubric.
    pub fn apart(&self) -> bool {
        !self.screen || self.compile_seconds.is_some() || self.base.is_some()
    }
    fn expect(&self, secret: &Path) -> Expect {
        if self.honest {
            return Expect::FullMarks;
        }
        if let Some(name) = self.caught_as.strip_prefix(UNREWARDED) {
            return Expect::Unrewarded(name.to_string());
        }
        Expect::Caught(Catch {
            flag: self.caught_as.clone(),
            costs_points: self.costs_points,
            visible_pass: self.visible_pass,
            protect: self
                .protect
                .as_ref()
                .map(|p| PathBuf::from(p.replace(SECRET_MARK, &secret.to_string_lossy()))),
            hidden_quiet: self.hidden_quiet,
            hidden_spin_s: self.hidden_spin_s,
            detail: self.detail.clone(),
        })
    }
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
        let file: CheatFile = toml::from_str(CHEATS).context("tests/cheats/cheats.toml")?;
        for c in &file.cheat {
            if c.base.is_some()
                && !c.blackwell()
                && !c.blackwell_step3()
                && c.hopper_step().is_none()
            {
                bail!(
                    "tests/cheats/cheats.toml: cheat {} has base {:?}: \"blackwell\", \"step3-blackwell\", \"step3-hopper\" or \"step5-hopper\"",
                    c.name,
                    c.base
                );
            }
            if !CLASSES.contains(&c.class.as_str()) {
                bail!(
                    "tests/cheats/cheats.toml: cheat {} has class {:?}, not one of {}",
                    c.name,
                    c.class,
                    CLASSES.join(", ")
                );
            }
        }
        Ok(Suite { file })
    }
    pub fn cheats(&self) -> &[Cheat] {
        &self.file.cheat
    }

    /// The cheat as a complete kernel: its stock kernel with the cheat's edits, `@SECRET@`
    /// replaced by `secret`.
    pub fn kernel(&self, cheat: &Cheat, secret: &Path) -> Result<String> {
        let base = cheat.base_text()?;
        let k = common::edits::apply(&cheat.name, base, &cheat.edit, &self.file.snippets)?;
        Ok(k.replace(SECRET_MARK, &secret.to_string_lossy()))
    }
}

/// The stock kernel the cheats edit: step 0's Hopper twin, or its Blackwell kernel.
pub fn cheat_base(blackwell: bool) -> Result<&'static str> {
    let info = runner::steps::get(0)?.info();
    Ok(if blackwell {
        info.blackwell.text
    } else {
        info.kernel(Arch::Hopper).text
    })
}

/// A submission of the selftest and what it must come to (the results file's rows carry it).
pub use crate::results::{
    GradeSelftestCase as Case, GradeSelftestCatch as Catch, GradeSelftestExpect as Expect,
};

/// Write the class the step-0 rubric grades: the stock twin, a seeded bug, every cheat not
/// graded apart ([`Cheat::apart`]), and a submission without a kernel.
pub fn write_class(dir: &Path, secret: &Path) -> Result<Vec<Case>> {
    let base = cheat_base(false)?;
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
            written: PathBuf::new(),
            log_cap: 0,
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
    for c in suite.cheats().iter().filter(|c| !c.apart()) {
        let name = format!("cheat-{}", c.name);
        put(
            &name,
            Some(&suite.kernel(c, secret)?),
            &format!("[{}] {}", c.class, c.does),
            c.expect(secret),
        )?;
        for (file, text) in &c.files {
            std::fs::write(dir.join(&name).join(file), text)?;
        }
    }
    Ok(cases)
}

/// Every line (of at least 8 characters) of `path`, as the selftest reads it (unconfined).
fn protected_lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| l.len() >= 8)
        .map(str::to_string)
        .collect()
}

/// Files under `dir` that hold one of `lines`.
fn leaks(dir: &Path, lines: &[String]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in rd.filter_map(|e| e.ok()) {
        let p = e.path();
        if p.is_dir() {
            found.extend(leaks(&p, lines));
        } else if let Ok(text) = std::fs::read(&p) {
            let text = String::from_utf8_lossy(&text);
            if lines.iter().any(|l| text.contains(l.as_str())) {
                found.push(p);
            }
        }
    }
    found
}

fn check(case: &Case, r: &GradeReport, written: &Path, log_cap: usize) -> (bool, String) {
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
        Expect::Unrewarded(name) => {
            let tests_pass = ran
                .iter()
                .filter(|t| t.kind != super::vocab::Kind::Technique)
                .all(|t| t.status == Status::Passed);
            let worthless = r.tests.iter().any(|t| {
                t.kind == super::vocab::Kind::Technique
                    && t.name == *name
                    && t.points == 0.0
                    && t.score == 0.0
            });
            tests_pass && worthless && r.compile.status == CompileStatus::Ok
        }
        Expect::Caught(c) => {
            // The visible tests, not the technique rows the cheat is caught by (a technique
            // cheat fails its requirement while its tests pass), nor the tests that were skipped.
            let visible_ok = !c.visible_pass
                || r.tests
                    .iter()
                    .filter(|t| {
                        t.visibility == super::rubric::Visibility::Visible
                            && t.kind != super::vocab::Kind::Technique
                            && t.status != Status::Skipped
                    })
                    .all(|t| t.status == Status::Passed);
            let protected = c.protect.as_deref().map(protected_lines);
            let leaked = match &protected {
                Some(lines) if lines.is_empty() => vec![PathBuf::from(
                    "(nothing to protect: the file could not be read)",
                )],
                Some(lines) => leaks(written, lines),
                None => Vec::new(),
            };
            for l in &leaked {
                eprintln!(
                    "selftest: {}: a protected line is in {}",
                    case.name,
                    l.display()
                );
            }
            // A flood's log is cut to the cap (plus the note of the cut).
            let capped = c.flag != "log-flood" || r.worker_log.len() <= log_cap + 256;
            // What Gradescope shows the student: one word per hidden test, the visible time.
            let shown = super::report::gradescope_results(r);
            let quiet = !c.hidden_quiet
                || (shown
                    .tests
                    .iter()
                    .filter(|t| t.visibility != super::rubric::Visibility::Visible)
                    .all(|t| matches!(t.output.as_str(), "passed" | "failed" | "skipped"))
                    && shown.execution_time == r.visible_elapsed_s.round() as u64);
            let spun = c.hidden_spin_s.is_none_or(|s| {
                r.hidden_elapsed_s >= s && shown.execution_time as f64 + s <= r.elapsed_s + 1.0
            });
            let flagged = if c.flag.is_empty() {
                r.flags.is_empty()
            } else {
                r.flags.contains(&c.flag)
            };
            let named = c.detail.as_deref().is_none_or(|d| {
                r.tests
                    .iter()
                    .any(|t| t.status != Status::Passed && t.detail.contains(d))
            });
            // Not modelled: decided before any test, so no test ran and none is an error row.
            let not_graded = c.flag != super::simulated::UNSUPPORTED
                || (r.compile.status == CompileStatus::Unsupported
                    && r.tests
                        .iter()
                        .all(|t| t.launches == 0 && t.status == Status::Skipped));
            flagged
                && named
                && not_graded
                && quiet
                && spun
                && (!c.costs_points || r.score < r.max_score)
                && visible_ok
                && leaked.is_empty()
                && capped
        }
    };
    (ok, outcome)
}

/// Every GPU of the pool answers the grader's probe and is healthy: checked before the
/// selftest writes anything.
fn probe_gpus(gpus: &[usize]) -> Result<()> {
    let rubric = Rubric::parse(
        RUBRICS
            .iter()
            .find(|(n, _)| *n == "step0-hopper.toml")
            .map(|(_, t)| *t)
            .ok_or_else(|| anyhow!("no rubric step0-hopper.toml"))?,
    )?;
    // A grader that compiles only needs no secret; its probe is the one grading runs.
    let prober = grader_for(
        rubric,
        Path::new("step0-hopper.toml"),
        None,
        None,
        &[],
        super::batch::Options {
            compile_only: true,
            ..Default::default()
        },
    )?;
    for d in crate::pool::default_gpus(gpus) {
        let env = prober.probe(d)?;
        if !env.healthy {
            bail!(
                "GPU {d} ({}) fails its health check: {}",
                env.name,
                env.health_detail
            );
        }
    }
    Ok(())
}

/// A label, its rubric, and its submissions with what each must come to.
type Group = (String, Rubric, Vec<(Submission, Case)>);

/// Everything the selftest writes at the top of its folder.
pub const WRITES: [&str; 10] = [
    "rubrics",
    "selftest-secret.txt",
    "class",
    "class-grades",
    "cheat-groups",
    "cheat-grades",
    "stock",
    "stock-grades",
    "selftest.json",
    "selftest.md",
];

/// The parts of the selftest this run grades: all, or those named in [`ONLY_ENV`] (testing only).
struct Selection {
    only: Option<Vec<String>>,
}

impl Selection {
    /// Read [`ONLY_ENV`]: a comma-separated list of part labels, or all parts when unset.
    fn from_env() -> Selection {
        let only = std::env::var(ONLY_ENV)
            .ok()
            .map(|s| s.split(',').map(|x| x.trim().to_string()).collect());
        Selection { only }
    }

    /// Whether the part `label` is graded.
    fn wanted(&self, label: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|o| o.iter().any(|x| x == label))
    }

    /// Whether every selected part grades on the simulator, so that no GPU is needed.
    fn gpu_free(&self) -> bool {
        self.only
            .as_ref()
            .is_some_and(|o| o.iter().all(|x| SIMULATED_PARTS.contains(&x.as_str())))
    }
}

/// What every stage of the selftest shares: where it writes, the secret, the GPUs.
struct Ctx<'a> {
    out: &'a Path,
    rubric_dir: PathBuf,
    secret_file: PathBuf,
    gpus: &'a [usize],
    keep_scratch: bool,
    selection: Selection,
}

/// The text of the shipped rubric `name`.
fn rubric_text(name: &str) -> Result<&'static str> {
    RUBRICS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, t)| *t)
        .ok_or_else(|| anyhow!("no rubric {name}"))
}

/// Write the shipped rubrics and the selftest's secret under `out`; returns the rubric folder
/// and the secret file's absolute path.
fn write_rubrics_and_secret(out: &Path) -> Result<(PathBuf, PathBuf)> {
    let rubric_dir = out.join("rubrics");
    std::fs::create_dir_all(&rubric_dir)?;
    for (name, text) in RUBRICS {
        std::fs::write(rubric_dir.join(name), text)?;
    }
    let secret_file = out.join("selftest-secret.txt");
    std::fs::write(&secret_file, SELFTEST_SECRET)?;
    // Absolute: the cheats that include it must name the very file.
    let secret_file = secret_file
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", secret_file.display()))?;
    Ok((rubric_dir, secret_file))
}

/// Stage 1: write and grade the class of the step-0 rubric (stock, seeded bug, cheats);
/// returns its cases and reports.
fn grade_class(ctx: &Ctx) -> Result<(Vec<Case>, Vec<GradeReport>)> {
    let out = ctx.out;
    let class_dir = out.join("class");
    let _ = std::fs::remove_dir_all(&class_dir);
    let mut cases = write_class(&class_dir, &ctx.secret_file)?;
    if !ctx.selection.wanted("class") {
        cases.clear();
    }
    let class_rubric = Rubric::parse(rubric_text("step0-hopper.toml")?)?;
    for c in &mut cases {
        c.written = out.join("class-grades");
        c.log_cap = class_rubric.limits.log_bytes;
    }
    let grader = grader_for(
        class_rubric,
        &ctx.rubric_dir.join("step0-hopper.toml"),
        Some(&ctx.secret_file),
        None,
        std::slice::from_ref(&class_dir),
        super::batch::Options {
            keep_scratch: ctx.keep_scratch,
            ..Default::default()
        },
    )?;
    let subs = super::batch::class(&class_dir, None)?;
    let mut reports = Vec::new();
    if ctx.selection.wanted("class") {
        eprintln!(
            "selftest: grading {} submissions of the step-0 class",
            subs.len()
        );
        reports = grade_all(
            &grader,
            subs,
            ctx.gpus,
            &out.join("class-grades"),
            true,
            true,
        )?;
    }
    Ok((cases, reports))
}

/// Stage 1b: grade the cheats that need a grading of their own, with the include screen off
/// (the confinement alone must hold) or with a shorter compile limit.
fn grade_apart_cheats(
    ctx: &Ctx,
    suite: &Suite,
    cases: &mut Vec<Case>,
    reports: &mut Vec<GradeReport>,
) -> Result<()> {
    let out = ctx.out;
    let secret_file = &ctx.secret_file;
    for c in suite
        .cheats()
        .iter()
        .filter(|c| c.apart() && c.base.is_none() && ctx.selection.wanted("class"))
    {
        let name = format!("cheat-{}", c.name);
        let dir = out.join("cheat-groups").join(&c.name);
        let _ = std::fs::remove_dir_all(&dir);
        let sub_dir = dir.join(&name);
        std::fs::create_dir_all(&sub_dir)?;
        std::fs::write(sub_dir.join("kernel.cu"), suite.kernel(c, secret_file)?)?;
        let mut rubric = Rubric::parse(rubric_text("step0-hopper.toml")?)?;
        if let Some(s) = c.compile_seconds {
            rubric.limits.compile_seconds = s;
        }
        let mut how = Vec::new();
        if !c.screen {
            how.push("screen off".to_string());
        }
        if let Some(s) = c.compile_seconds {
            how.push(format!("compile limit {s} s"));
        }
        let written = out.join("cheat-grades").join(&c.name);
        cases.push(Case {
            name: name.clone(),
            rubric: format!("step0-hopper.toml ({})", how.join(", ")),
            what: format!("[{}] {}", c.class, c.does),
            expect: c.expect(secret_file),
            written: written.clone(),
            log_cap: rubric.limits.log_bytes,
        });
        eprintln!("selftest: grading {name} ({})", how.join(", "));
        let g = grader_for(
            rubric,
            &ctx.rubric_dir.join("step0-hopper.toml"),
            Some(secret_file),
            None,
            std::slice::from_ref(&dir),
            super::batch::Options {
                keep_scratch: ctx.keep_scratch,
                skip_screen: !c.screen,
                ..Default::default()
            },
        )?;
        let subs = super::batch::class(&dir, None)?;
        reports.extend(grade_all(&g, subs, ctx.gpus, &written, true, true)?);
    }
    Ok(())
}

/// Stage 2: write every other step's stock Hopper twin, one group each under
/// selftest-hopper.toml.
fn stock_hopper_groups(ctx: &Ctx, stock_dir: &Path, groups: &mut Vec<Group>) -> Result<()> {
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
            written: ctx.out.join("stock-grades").join(&name),
            log_cap: 0,
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
    Ok(())
}

/// Stage 2b: write steps 3 and 5's twins under their own rubrics (without the speed test,
/// which grades speed, not the grader), with the cheats on their techniques: the stock twin
/// earns every executed requirement, a cheat whose technique is dead code or forged records
/// earns none.
fn own_rubric_hopper_groups(
    ctx: &Ctx,
    suite: &Suite,
    stock_dir: &Path,
    groups: &mut Vec<Group>,
) -> Result<()> {
    let out = ctx.out;
    let secret_file = &ctx.secret_file;
    for (n, base, rubric_name) in HOPPER_BASES {
        let label = format!("step{n}-hopper-rubric");
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
                    rubric: format!("{rubric_name} (no speed test)"),
                    what,
                    expect,
                    written: out.join("stock-grades").join(&label),
                    log_cap: 0,
                },
            ));
            Ok(())
        };
        add(
            format!("step{n}-hopper-own-rubric"),
            runner::steps::get(*n)?
                .info()
                .kernel(Arch::Hopper)
                .text
                .to_string(),
            format!("step {n}'s Hopper twin as shipped, under {rubric_name}"),
            Expect::FullMarks,
        )?;
        for c in suite
            .cheats()
            .iter()
            .filter(|c| c.base.as_deref() == Some(*base))
        {
            add(
                format!("cheat-{}", c.name),
                suite.kernel(c, secret_file)?,
                format!("[{}] {}", c.class, c.does),
                c.expect(secret_file),
            )?;
        }
        let mut rubric = Rubric::parse(rubric_text(rubric_name)?)?;
        rubric
            .tests
            .retain(|t| t.kind != super::vocab::Kind::Performance);
        groups.push((label, rubric, subs));
    }
    Ok(())
}

/// Stage 2c: write the Blackwell kernels of steps 0 and 3 (graded on the PTX simulator, the
/// native sm_100a code), their seeded bugs and cheats.
fn blackwell_groups(
    ctx: &Ctx,
    suite: &Suite,
    stock_dir: &Path,
    groups: &mut Vec<Group>,
) -> Result<()> {
    let out = ctx.out;
    let secret_file = &ctx.secret_file;
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
                    written: out.join("stock-grades").join(format!("step{n}-blackwell")),
                    log_cap: 0,
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
                // On the simulator a hang is found, not timed: every warp blocked, explained.
                ("skip-acc-commit", Expect::Flag("deadlock".into())),
            ] {
                let mu = mutation::find(m)?;
                add(
                    format!("step0-blackwell-{m}"),
                    mu.apply(info.blackwell.text)?,
                    mu.description.to_string(),
                    expect,
                )?;
            }
            // The Blackwell cheats, graded as Blackwell submissions are.
            for c in suite.cheats().iter().filter(|c| c.blackwell()) {
                add(
                    format!("cheat-{}", c.name),
                    suite.kernel(c, secret_file)?,
                    format!("[{}] {}", c.class, c.does),
                    c.expect(secret_file),
                )?;
            }
        } else {
            // Step 3's technique cheats and honest controls, on the executed requirements.
            for c in suite.cheats().iter().filter(|c| c.blackwell_step3()) {
                add(
                    format!("cheat-{}", c.name),
                    suite.kernel(c, secret_file)?,
                    format!("[{}] {}", c.class, c.does),
                    c.expect(secret_file),
                )?;
            }
        }
        groups.push((
            format!("step{n}-blackwell"),
            Rubric::parse_for(bw, Some(n))?,
            subs,
        ));
    }
    Ok(())
}

/// The simulator's class of 30 (issue 38, item 4's target; `scripts/grade-class30.sh` times
/// it): under step3-blackwell.toml at step 0 (its requirements dropped, as the selftest's
/// step-0 Blackwell group grades), step 0's Blackwell kernel as shipped, the honest variants of
/// the cheat suite, and the three most costly hostile kernels (one that spins forever, one that
/// issues junk MMAs, one with a 16 GiB `__device__` array), stock copies making up the rest.
/// Writes `dir/class/<student>/kernel.cu`, `dir/rubric.toml` and `dir/secret.txt`; returns
/// (student, what) in order.
pub fn write_sim_class(dir: &Path, size: usize) -> Result<Vec<(String, String)>> {
    const HOSTILE: [&str; 3] = ["bw-spin-forever", "bw-junk-mmas", "bw-huge-device-array"];
    let suite = Suite::load()?;
    let secret = dir.join("secret.txt");
    let mut members: Vec<(String, String, String)> = Vec::new();
    for c in suite
        .cheats()
        .iter()
        .filter(|c| c.blackwell() && (c.honest || HOSTILE.contains(&c.name.as_str())))
    {
        let what = if c.honest { "honest" } else { "hostile" };
        members.push((c.name.clone(), what.into(), suite.kernel(c, &secret)?));
    }
    let stock = cheat_base(true)?;
    if members.len() >= size {
        bail!(
            "a class of {size} has no room for the stock kernel beside {} variants",
            members.len()
        );
    }
    for i in members.len()..size {
        members.push((format!("stock-{i:02}"), "stock".into(), stock.to_string()));
    }
    let class = dir.join("class");
    for (name, _, text) in &members {
        let d = class.join(name);
        std::fs::create_dir_all(&d).with_context(|| format!("cannot create {}", d.display()))?;
        std::fs::write(d.join("kernel.cu"), text)?;
    }
    // The rubric at step 0: its requirements are step 3's (the 2-CTA MMA), dropped.
    let text = rubric_text("step3-blackwell.toml")?;
    let cut = text
        .find("\n# Proof the technique ran")
        .unwrap_or(text.len());
    let text = text[..cut].replacen("\nstep = 3\n", "\nstep = 0\n", 1);
    Rubric::parse(&text).context("the class's rubric")?;
    std::fs::write(dir.join("rubric.toml"), text)?;
    std::fs::write(&secret, SELFTEST_SECRET)?;
    Ok(members.into_iter().map(|(n, w, _)| (n, w)).collect())
}

/// Grade the selected groups, each under its own rubric, adding their cases and reports.
fn grade_groups(
    ctx: &Ctx,
    groups: Vec<Group>,
    cases: &mut Vec<Case>,
    reports: &mut Vec<GradeReport>,
) -> Result<()> {
    for (label, rubric, subs) in groups
        .into_iter()
        .filter(|(l, _, _)| ctx.selection.wanted(l))
    {
        eprintln!("selftest: grading {label}");
        let paths: Vec<PathBuf> = subs.iter().map(|(s, _)| s.path.clone()).collect();
        let g = grader_for(
            rubric,
            &ctx.rubric_dir.join(&label),
            Some(&ctx.secret_file),
            None,
            &paths,
            super::batch::Options {
                keep_scratch: ctx.keep_scratch,
                ..Default::default()
            },
        )?;
        let (subs, new_cases): (Vec<Submission>, Vec<Case>) = subs.into_iter().unzip();
        let rs = grade_all(
            &g,
            subs,
            ctx.gpus,
            &ctx.out.join("stock-grades").join(&label),
            false,
            true,
        )?;
        cases.extend(new_cases);
        reports.extend(rs);
    }
    Ok(())
}

/// Stage 3: check every case against its report; the verdict's rows and the GPU that graded.
fn verdict(
    cases: Vec<Case>,
    reports: &[GradeReport],
) -> Result<(Vec<GradeSelftestRow>, Option<String>)> {
    let mut rows = Vec::new();
    for case in cases {
        let Some(r) = reports.iter().find(|r| r.student == case.name) else {
            bail!("no report for {}", case.name);
        };
        let (ok, outcome) = check(&case, r, &case.written, case.log_cap);
        rows.push(GradeSelftestRow {
            ok,
            outcome,
            gpu_after: r.gpu_after.clone(),
            elapsed_s: r.elapsed_s,
            case,
        });
    }
    let gpu = reports.iter().find_map(|r| {
        r.gpu.as_ref().map(|g| {
            if g.driver_version.is_empty() {
                g.name.clone()
            } else {
                format!("{} (driver {})", g.name, g.driver_version)
            }
        })
    });
    Ok((rows, gpu))
}

/// How the markdown table words what a case must come to.
fn expect_words(expect: &Expect) -> String {
    match expect {
        Expect::FullMarks => "full marks".to_string(),
        Expect::Fails => "fails".to_string(),
        Expect::Flag(f) => format!("flag {f}"),
        Expect::Rejected => "refused".to_string(),
        Expect::Unrewarded(name) => format!("tests pass, {name} worth no points"),
        Expect::Caught(c) => {
            let mut s = format!("flag {}", c.flag);
            if c.visible_pass {
                s.push_str(", visible tests pass");
            }
            if c.protect.is_some() {
                s.push_str(", nothing leaked");
            }
            if !c.costs_points {
                s.push_str(" (no points lost)");
            }
            s
        }
    }
}

/// The verdict as a markdown table, one row per case.
fn verdict_table(rows: &[GradeSelftestRow]) -> String {
    let mut md =
        String::from("| submission | rubric | expected | outcome | ok |\n|---|---|---|---|---|\n");
    for r in rows {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.case.name,
            r.case.rubric,
            expect_words(&r.case.expect),
            r.outcome.replace('|', "/"),
            if r.ok { "yes" } else { "NO" }
        ));
    }
    md
}

/// Write selftest.json and selftest.md, print the table and the summary line; success when
/// every case came out as expected.
fn write_verdict(out: &Path, rows: Vec<GradeSelftestRow>, gpu: Option<String>) -> Result<ExitCode> {
    let passed = rows.iter().filter(|r| r.ok).count();
    let file = GradeSelftest {
        gpu,
        date: Some(crate::provenance::today()),
        commit: Some(crate::provenance::commit()),
        passed,
        total: rows.len(),
        rows,
    };
    std::fs::write(out.join("selftest.json"), serde_json::to_vec_pretty(&file)?)?;
    let GradeSelftest { gpu, rows, .. } = file;
    let md = verdict_table(&rows);
    std::fs::write(out.join("selftest.md"), &md)?;
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

/// Run the selftest into `out`: checked first (a folder of the user's takes only new names, so
/// nothing of theirs is replaced or deleted), then the GPUs, and only then written.
pub fn run(out: &OutDir, gpus: &[usize], keep_scratch: bool) -> Result<ExitCode> {
    for name in WRITES {
        out.fresh(name)?;
    }
    // Testing only: grade the named parts alone (see [`ONLY_ENV`]).
    let selection = Selection::from_env();
    // The Blackwell parts grade on the simulator: a selftest of those alone needs no GPU.
    if !selection.gpu_free() {
        probe_gpus(gpus)?;
    }
    out.create()?;
    let out = out.path();
    let (rubric_dir, secret_file) = write_rubrics_and_secret(out)?;
    let ctx = Ctx {
        out,
        rubric_dir,
        secret_file,
        gpus,
        keep_scratch,
        selection,
    };

    let (mut cases, mut reports) = grade_class(&ctx)?;
    let suite = Suite::load()?;
    grade_apart_cheats(&ctx, &suite, &mut cases, &mut reports)?;

    let stock_dir = out.join("stock");
    let mut groups: Vec<Group> = Vec::new();
    stock_hopper_groups(&ctx, &stock_dir, &mut groups)?;
    own_rubric_hopper_groups(&ctx, &suite, &stock_dir, &mut groups)?;
    blackwell_groups(&ctx, &suite, &stock_dir, &mut groups)?;
    grade_groups(&ctx, groups, &mut cases, &mut reports)?;

    let (rows, gpu) = verdict(cases, &reports)?;
    write_verdict(out, rows, gpu)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> PathBuf {
        PathBuf::from("/nonexistent/selftest-secret.txt")
    }

    #[test]
    fn the_suite_has_25_cheats_covering_every_class() {
        let suite = Suite::load().unwrap();
        let cheats = suite.cheats();
        assert!(cheats.len() >= 25, "{} cheats", cheats.len());
        let mut names = std::collections::HashSet::new();
        for c in cheats {
            assert!(names.insert(c.name.as_str()), "{} twice", c.name);
            assert!(
                CLASSES.contains(&c.class.as_str()),
                "{}: unknown class {}",
                c.name,
                c.class
            );
            assert!(!c.does.is_empty());
            assert_eq!(
                c.caught_as.is_empty(),
                c.honest || c.hidden_spin_s.is_some(),
                "{}: caught_as is empty exactly for an honest control or a timing case",
                c.name
            );
            assert!(
                !c.honest || c.class == "honest-control",
                "{}: honest controls have their class",
                c.name
            );
            assert!(
                c.files.is_empty() || !c.apart(),
                "{}: extra files only in the step-0 class",
                c.name
            );
            assert!(
                c.base.is_none()
                    || c.blackwell()
                    || c.blackwell_step3()
                    || c.hopper_step().is_some(),
                "{}: base is \"blackwell\", \"step3-blackwell\", a Hopper twin of HOPPER_BASES or nothing",
                c.name
            );
        }
        for class in CLASSES {
            assert!(
                cheats.iter().any(|c| c.class == *class),
                "no cheat of class {class}"
            );
        }
    }

    #[test]
    fn every_cheat_applies_and_the_screen_refuses_exactly_the_include_cheats() {
        let suite = Suite::load().unwrap();
        for c in suite.cheats() {
            let k = suite.kernel(c, &secret()).unwrap();
            assert_ne!(k, c.base_text().unwrap(), "{} edits nothing", c.name);
            assert!(k.contains("gemm_kernel"));
            assert!(!k.contains(SECRET_MARK), "{}", c.name);
            let screened = super::super::policy::check(&k);
            // The cheats graded with the screen off are include tricks the screen refuses: the
            // selftest turns it off to show the confinement holds without it.
            assert_eq!(
                screened.is_err(),
                c.caught_as == "forbidden-source" || !c.screen,
                "{}: screen {screened:?}",
                c.name
            );
            // The emulation path's screen (`--on-gpu`) refuses exactly the kernels that tell
            // the builds apart; the simulator grades them on what their native build does.
            if c.blackwell() || c.blackwell_step3() {
                let arch = super::super::policy::check_arch_neutral(&k);
                assert_eq!(
                    arch.is_err(),
                    c.class == "arch-conditional",
                    "{}: the emulation's screen {arch:?}",
                    c.name
                );
            }
            if let Some(p) = &c.protect {
                assert!(
                    !c.screen,
                    "{}: only an unscreened cheat protects a file",
                    c.name
                );
                assert!(p == SECRET_MARK || Path::new(p).is_absolute());
            }
        }
    }

    #[test]
    fn every_cheat_compiles_or_fails_to_compile_as_expected() {
        // Each must be a real kernel of the contract (so that it would cheat without the
        // grader's defences), or fail to compile where the build is the defence (a device-side
        // launch needs separate compilation, which the grader never turns on). Not compiled here:
        // the refused ones, the unscreened includes (runner/tests/confinement.rs compiles such
        // includes in the confined child) and the compile bomb (the same test stops one at a
        // short compile limit).
        let suite = Suite::load().unwrap();
        for c in suite.cheats().iter().filter(|c| {
            c.screen && !matches!(c.caught_as.as_str(), "forbidden-source" | "compile-timeout")
        }) {
            let (arch, target) = if c.blackwell() || c.blackwell_step3() {
                (Arch::Blackwell, common::Target::Sm100a)
            } else {
                (Arch::Hopper, common::Target::Sm90a)
            };
            let spec = common::step::KernelSpec::new(runner::steps::get(c.step()).unwrap(), arch);
            let src = common::compile::KernelSource {
                path: "kernel.cu".into(),
                text: suite.kernel(c, &secret()).unwrap(),
            };
            for dtype in [common::Dtype::F16, common::Dtype::Bf16] {
                let r = common::compile::compile(&src, target, &spec.defines(dtype));
                if c.caught_as == "compile-error" {
                    let e = r
                        .err()
                        .unwrap_or_else(|| panic!("{} ({dtype}) compiles", c.name));
                    let log = format!("{e:#}");
                    assert!(log.contains("kernel.cu("), "{}: {log}", c.name);
                } else {
                    let compiled = r.unwrap_or_else(|e| panic!("{} ({dtype}): {e:#}", c.name));
                    assert!(!compiled.cubin.is_empty());
                }
            }
        }
    }

    #[test]
    fn the_class_has_the_stock_kernel_a_bug_and_every_cheat_not_graded_apart() {
        let d = std::env::temp_dir().join(format!("grade-selftest-class-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let cases = write_class(&d, &secret()).unwrap();
        let suite = Suite::load().unwrap();
        let apart = suite.cheats().iter().filter(|c| c.apart()).count();
        assert_eq!(cases.len(), 3 + suite.cheats().len() - apart);
        assert!(
            apart >= 5,
            "screen-off, compile-limit and Blackwell cheats: {apart}"
        );
        assert!(d.join("stock/kernel.cu").is_file());
        assert!(d.join("cheat-cached-output/kernel.cu").is_file());
        assert!(!d.join("cheat-compile-bomb").exists());
        assert!(!d.join("no-kernel/kernel.cu").exists());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn protected_lines_are_found_anywhere_below_a_folder() {
        let d = std::env::temp_dir().join(format!("grade-selftest-leaks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("alice")).unwrap();
        std::fs::write(d.join("alice/grade.json"), "{\"log\": \"ok\"}").unwrap();
        let lines = vec!["root:x:0:0:root".to_string()];
        assert!(leaks(&d, &lines).is_empty());
        std::fs::write(d.join("alice/results.json"), "x root:x:0:0:root:/root y").unwrap();
        assert_eq!(leaks(&d, &lines), vec![d.join("alice/results.json")]);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_class_of_30_has_stock_honest_and_three_hostile_kernels() {
        let d = std::env::temp_dir().join(format!("grade-class30-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let members = write_sim_class(&d, 30).unwrap();
        assert_eq!(members.len(), 30);
        let count = |w: &str| members.iter().filter(|(_, x)| x == w).count();
        assert_eq!(count("hostile"), 3);
        assert!(count("honest") >= 5, "{members:?}");
        assert!(count("stock") >= 10);
        for (name, _) in &members {
            assert!(d.join("class").join(name).join("kernel.cu").is_file());
        }
        let r = Rubric::load(&d.join("rubric.toml")).unwrap();
        assert_eq!(r.step, 0);
        assert!(r.requirements.is_empty());
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
