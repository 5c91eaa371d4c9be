//! Reports: `grade.json` per submission (everything: tests, flags, seeds, GPU, clocks), the
//! Gradescope `results.json`, and a class's `summary.csv` and `summary.md`.

use super::job::{EnvInfo, TestSeeds, TimingResult};
use super::rubric::Visibility;
use super::userfile;
use super::vocab::{Flag, Kind, Status};
use crate::results::{GradescopeResults, GradescopeTest, LeaderboardEntry};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub const SCHEMA: &str = "workbook-grade/1";

/// A status's name as reports print it (`passed`, `timeout`, ...).
pub fn lower(x: &impl std::fmt::Debug) -> String {
    format!("{x:?}").to_lowercase()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RubricRef {
    pub name: String,
    pub path: String,
    pub sha256: String,
    pub step: u32,
    pub arch: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompileStatus {
    Ok,
    /// Refused before compiling (include policy, size, encoding).
    Rejected,
    Failed,
    Timeout,
    Error,
    /// Compiled, and not graded: the simulator does not model an instruction form of its PTX
    /// (decided when the PTX was decoded, before any test). An instructor grades it on a GPU.
    Unsupported,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompileReport {
    pub status: CompileStatus,
    pub message: String,
    /// The compiler's log, cut to the rubric's log limit.
    pub log: String,
    pub registers: u32,
    pub spill_bytes: u32,
    pub compile_ms: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TestReport {
    pub name: String,
    pub kind: Kind,
    pub visibility: Visibility,
    pub points: f64,
    pub score: f64,
    /// `points`, or 0 for a skipped test (it counts neither way).
    pub max_score: f64,
    pub status: Status,
    pub detail: String,
    pub flags: Vec<Flag>,
    pub seeds: TestSeeds,
    pub shape: [usize; 3],
    pub dtype: String,
    pub dist: String,
    pub launches: usize,
    pub timing: Option<TimingResult>,
}

/// `"runner": {"version", "commit"}`, the object of every `--json` output.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunnerInfo {
    pub version: String,
    pub commit: String,
}

impl RunnerInfo {
    /// This runner's.
    pub fn this() -> RunnerInfo {
        RunnerInfo {
            version: env!("CARGO_PKG_VERSION").into(),
            commit: env!("WB_BUILD_COMMIT").into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GradeReport {
    pub schema: String,
    pub student: String,
    pub submission: String,
    pub source_sha256: String,
    pub rubric: RubricRef,
    pub grader_version: String,
    /// The commit the runner was built from (absent in reports of older runners).
    #[serde(default)]
    pub grader_commit: String,
    /// The runner's version and commit, as every `--json` output carries them (the same as
    /// `grader_version` and `grader_commit`; absent in reports of older runners).
    #[serde(default)]
    pub runner: RunnerInfo,
    pub gpu: Option<EnvInfo>,
    pub target: Option<String>,
    /// How the grading children were confined (every report says so, and so does Gradescope's
    /// output).
    #[serde(default)]
    pub confinement: String,
    pub compile: CompileReport,
    pub tests: Vec<TestReport>,
    /// Every flag name raised, once.
    pub flags: Vec<String>,
    /// Flags of the grading as a whole rather than of one test: what the compile or the logs
    /// showed (a blocked include, a log flood).
    #[serde(default)]
    pub grading_flags: Vec<Flag>,
    pub score: f64,
    pub max_score: f64,
    /// Points of tests skipped here (e.g. timing without native hardware).
    pub skipped_points: f64,
    pub elapsed_s: f64,
    /// Seconds from the start of grading to the end of the visible phase (the compile and the
    /// visible tests' child), before any hidden input existed: the only time a student is shown
    /// (`execution_time`), so no hidden test can signal through its own duration.
    #[serde(default)]
    pub visible_elapsed_s: f64,
    /// Seconds the hidden tests' child ran (0: none ran): for the instructor only.
    #[serde(default)]
    pub hidden_elapsed_s: f64,
    /// Seconds since the Unix epoch when grading started.
    pub started: u64,
    /// The run child's stderr, cut to the log limit.
    pub worker_log: String,
    /// Whether the GPU passed its health check after this submission, if it was checked.
    pub gpu_after: Option<String>,
}

impl GradeReport {
    pub fn tally(&mut self) {
        self.score = self.tests.iter().map(|t| t.score).sum();
        self.max_score = self.tests.iter().map(|t| t.max_score).sum();
        // A kernel the simulator does not model was not graded at all: none of it was skipped
        // for want of hardware.
        let not_graded = self.compile.status == CompileStatus::Unsupported;
        self.skipped_points = self
            .tests
            .iter()
            .filter(|t| t.status == Status::Skipped && !not_graded)
            .map(|t| t.points)
            .sum();
        let mut flags: Vec<String> = self
            .tests
            .iter()
            .flat_map(|t| t.flags.iter().map(|f| f.name.clone()))
            .collect();
        // Refused by the screen (or a link): a flag. Two .cu files, none, or an oversized or
        // non-UTF-8 file are mistakes the compile line names, not something to flag.
        let screened = ["refused before compiling", "links are refused"]
            .iter()
            .any(|why| self.compile.message.contains(why));
        let compile_flag = match self.compile.status {
            CompileStatus::Rejected if screened => Some("forbidden-source"),
            CompileStatus::Failed => Some("compile-error"),
            CompileStatus::Timeout => Some("compile-timeout"),
            CompileStatus::Unsupported => Some(super::simulated::UNSUPPORTED),
            _ => None,
        };
        let grading = self.grading_flags.iter().map(|f| f.name.clone());
        flags.splice(
            0..0,
            compile_flag.map(String::from).into_iter().chain(grading),
        );
        let mut seen = std::collections::HashSet::new();
        flags.retain(|f| seen.insert(f.clone()));
        self.flags = flags;
    }

    /// Whether the tests ran on the PTX simulator (which opens no device), as its environment
    /// is named ([`super::batch::simulator_env`]).
    pub fn simulated(&self) -> bool {
        self.gpu
            .as_ref()
            .is_some_and(|g| g.name.ends_with(common::simulate::BACKEND))
    }

    /// Whether a requirement was skipped: an executed count (compiled only, or native code that
    /// does not run on this GPU) or a trace fact (no traced launch).
    pub fn technique_skipped(&self) -> bool {
        self.tests
            .iter()
            .any(|t| t.kind == Kind::Technique && t.status == Status::Skipped)
    }

    pub fn correctness(&self) -> (usize, usize) {
        let c: Vec<&TestReport> = self
            .tests
            .iter()
            .filter(|t| t.kind == Kind::Correctness)
            .collect();
        (
            c.iter().filter(|t| t.status == Status::Passed).count(),
            c.len(),
        )
    }

    /// "0.87x cuBLAS", "skipped", "failed" or "-" (no performance test).
    pub fn performance(&self) -> String {
        let perf: Vec<&TestReport> = self
            .tests
            .iter()
            .filter(|t| t.kind == Kind::Performance)
            .collect();
        if perf.is_empty() {
            return "-".into();
        }
        if let Some(t) = perf.iter().find_map(|t| t.timing.as_ref()) {
            return format!("{:.2}x cuBLAS ({:.0} TFLOP/s)", t.ratio, t.tflops);
        }
        if perf.iter().all(|t| t.status == Status::Skipped) && self.gpu.is_none() {
            "skipped (compiled only)".into()
        } else if perf.iter().all(|t| t.status == Status::Skipped) && self.simulated() {
            "skipped (needs a B200)".into()
        } else if perf.iter().all(|t| t.status == Status::Skipped) {
            "skipped (needs native hardware)".into()
        } else {
            "failed".into()
        }
    }

    /// The best TFLOP/s of the visible tests: what a student may see (a hidden test's speed
    /// depends on its hidden inputs, so a kernel could encode them in it).
    pub fn visible_tflops(&self) -> Option<f64> {
        self.tests
            .iter()
            .filter(|t| t.visibility == Visibility::Visible)
            .filter_map(|t| t.timing.as_ref().map(|x| x.tflops))
            .fold(None, |a, b| Some(a.map_or(b, |a: f64| a.max(b))))
    }

    /// Write grade.json (and results.json) into `dir`, each whole: written to a temporary name
    /// and renamed, grade.json last, so a grade.json that exists is complete (`--resume` keeps
    /// it) whenever the grader stops.
    pub fn write(&self, dir: &Path, gradescope: bool) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let whole = |name: &str, bytes: Vec<u8>| -> Result<()> {
            let p = dir.join(name);
            let tmp = dir.join(format!(".{name}.partial"));
            std::fs::write(&tmp, bytes)
                .and_then(|()| std::fs::rename(&tmp, &p))
                .with_context(|| format!("cannot write {}", p.display()))
        };
        if gradescope {
            whole(
                GRADESCOPE_FILE,
                serde_json::to_vec_pretty(&gradescope_results(self))?,
            )?;
        }
        whole(GRADE_FILE, serde_json::to_vec_pretty(self)?)
    }

    /// Write grade.json (and results.json) into the `--out` folder of one submission, which
    /// holds one student's report: another student's is refused, never replaced (a regrade of
    /// the same student replaces its own). The check and the write hold a lock on grade.json,
    /// so two gradings into one folder at once cannot both pass the check.
    pub fn write_one(&self, dir: &Path, gradescope: bool) -> Result<()> {
        use std::io::{Read, Seek, Write};
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let p = dir.join(GRADE_FILE);
        let mut f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&p)
            .with_context(|| format!("cannot write {}", p.display()))?;
        f.lock()
            .with_context(|| format!("cannot lock {}", p.display()))?;
        let mut held = Vec::new();
        (&mut f)
            .take(userfile::MAX_REPORT_BYTES + 1)
            .read_to_end(&mut held)
            .with_context(|| format!("cannot read {}", p.display()))?;
        if !held.is_empty() {
            refuse_another_student(&p, &held, &self.student)?;
        }
        f.set_len(0)
            .and_then(|()| f.rewind())
            .and_then(|()| f.write_all(&serde_json::to_vec_pretty(self)?))
            .with_context(|| format!("cannot write {}", p.display()))?;
        if gradescope {
            let p = dir.join(GRADESCOPE_FILE);
            std::fs::write(&p, serde_json::to_vec_pretty(&gradescope_results(self))?)
                .with_context(|| format!("cannot write {}", p.display()))?;
        }
        Ok(())
    }

    pub fn read(path: &Path) -> Result<GradeReport> {
        let bytes = userfile::read(path, userfile::MAX_REPORT_BYTES, "the grade report")?;
        Self::parse(path, &bytes)
    }

    /// A grade.json's bytes, read from `path` (named in errors).
    fn parse(path: &Path, bytes: &[u8]) -> Result<GradeReport> {
        let r: GradeReport = serde_json::from_slice(bytes)
            .with_context(|| format!("{} is not a grade.json", path.display()))?;
        if r.schema != SCHEMA {
            bail!(
                "{} has schema {:?}, not {SCHEMA:?}",
                path.display(),
                r.schema
            );
        }
        Ok(r)
    }

    /// The report as text for the terminal.
    pub fn text(&self) -> String {
        let mut s = format!(
            "{}: {:.1} / {:.1} points{}\n",
            self.student,
            self.score,
            self.max_score,
            if self.skipped_points > 0.0 && self.gpu.is_none() {
                format!(
                    " (compiled only: no test ran{}; {:.1} points skipped)",
                    if !self.technique_skipped() {
                        ""
                    } else if self.rubric.arch == "sm_100a" {
                        " and no technique was measured, which needs a graded run (on the simulator, no GPU: without --compile-only)"
                    } else {
                        " and no technique was measured, which needs a GPU"
                    },
                    self.skipped_points
                )
            } else if self.skipped_points > 0.0 && self.simulated() {
                format!(
                    " ({:.1} points of speed tests skipped: the simulator does not time kernels, a B200 does)",
                    self.skipped_points
                )
            } else if self.skipped_points > 0.0 {
                format!(
                    " ({:.1} points skipped here: they need native hardware)",
                    self.skipped_points
                )
            } else {
                String::new()
            }
        );
        match &self.gpu {
            // The simulator's grading opened no GPU: no device, no driver.
            Some(g) if g.driver_version.is_empty() => {
                s.push_str(&format!("  GPU       {}\n", g.name));
            }
            Some(g) => s.push_str(&format!(
                "  GPU       {} (device {}, driver {})\n",
                g.name, g.device, g.driver_version
            )),
            None => {}
        }
        if !self.confinement.is_empty() {
            s.push_str(&format!("  children  {}\n", self.confinement));
        }
        s.push_str(&format!(
            "  compile   {}: {}\n",
            lower(&self.compile.status),
            self.compile.message
        ));
        if self.compile.status != CompileStatus::Ok {
            s.push_str(&compile_log_excerpt(&self.compile.log));
        }
        // A finding's paragraph is said once: where it shows again (the same flag on the row
        // itself, a requirement that failed because of that test) it is named, not repeated.
        let mut said = Said::default();
        for t in &self.tests {
            let detail = said.once(t.detail.lines().next().unwrap_or(""), &t.name);
            s.push_str(&format!(
                "  {:<24} {:<8} {:>5.1}/{:<5.1} {detail}\n",
                t.name,
                lower(&t.status),
                t.score,
                t.max_score,
            ));
            for f in &t.flags {
                s.push_str(&format!(
                    "      flag {}: {}\n",
                    f.name,
                    said.once(&f.detail, &t.name)
                ));
            }
        }
        if !self.flags.is_empty() {
            s.push_str(&format!("  flags     {}\n", self.flags.join(", ")));
        }
        s
    }
}

/// The long paragraphs a report has printed (a flag's finding), each with the row it was first
/// printed in, so that a later line names it rather than print it again.
#[derive(Default)]
struct Said {
    paragraphs: Vec<(String, String)>,
}

impl Said {
    /// Below this many characters a text is short enough to repeat.
    const LONG: usize = 60;

    /// `text` of row `row`, with each paragraph printed before replaced by a pointer to where;
    /// the text itself, if long, is remembered as printed in `row`.
    fn once(&mut self, text: &str, row: &str) -> String {
        let long = text.chars().count() >= Self::LONG;
        if let Some(at) = self
            .paragraphs
            .iter()
            .find(|(p, _)| long && p.contains(text))
            .map(|(_, at)| at.clone())
        {
            // Said already, within a longer line: the shorter text is a paragraph of its own.
            self.paragraphs.push((text.to_string(), at.clone()));
            return if at == row {
                "as above".into()
            } else {
                format!("as in {at}, above")
            };
        }
        let mut out = text.to_string();
        for (p, at) in &self.paragraphs {
            if out.contains(p.as_str()) {
                let pointer = if at == row {
                    "[said above]".to_string()
                } else {
                    format!("[said in {at}, above]")
                };
                out = out.replace(p.as_str(), &pointer);
            }
        }
        if long {
            self.paragraphs.push((text.to_string(), row.to_string()));
        }
        out
    }
}

/// Refuse to write `student`'s grade over `held`, the grade.json at `path`, unless it is the
/// same student's (a regrade). A file that is no grade report is refused too: nothing the
/// runner cannot read back is replaced.
fn refuse_another_student(path: &Path, held: &[u8], student: &str) -> Result<()> {
    let folder = path.parent().unwrap_or(Path::new("."));
    let other = match GradeReport::parse(path, held) {
        Ok(r) => r.student,
        Err(e) => bail!(
            "{} is not a grade report this runner wrote ({e:#}): give another --out, or move it aside",
            path.display()
        ),
    };
    if other != student {
        bail!(
            "{} holds {other:?}'s grade, not {student:?}'s: give each student an --out of their own (a regrade of {other:?} into {} replaces that report)",
            path.display(),
            folder.display()
        );
    }
    Ok(())
}

/// Checked before grading: `dir` (an `--out` folder) takes `student`'s grade.json, being new,
/// empty, or holding the same student's. [`GradeReport::write_one`] checks again as it writes.
pub fn check_one_student(dir: &Path, student: &str) -> Result<()> {
    let p = dir.join(GRADE_FILE);
    if std::fs::symlink_metadata(&p).is_err() {
        return Ok(());
    }
    let held = userfile::read(&p, userfile::MAX_REPORT_BYTES, "the grade report")?;
    if held.is_empty() {
        return Ok(());
    }
    refuse_another_student(&p, &held, student)
}

/// Lines of a failed compile's log the terminal report shows (the whole log is in grade.json).
const LOG_LINES: usize = 40;
/// Characters of one log line the terminal report shows (NVRTC echoes the source line).
const LOG_LINE_CHARS: usize = 200;

/// The first [`LOG_LINES`] lines of a compiler log (the submission's own visible build, as
/// [`super::diagnostics`] filtered it for the student), indented under the compile line; a
/// control character (an escape sequence a kernel's source could carry into the log) is shown
/// as `?`, never sent to the terminal.
fn compile_log_excerpt(log: &str) -> String {
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut s = String::new();
    for l in lines.iter().take(LOG_LINES) {
        let mut shown: String = l
            .chars()
            .take(LOG_LINE_CHARS)
            .map(|c| if c.is_control() && c != '\t' { '?' } else { c })
            .collect();
        if l.chars().count() > LOG_LINE_CHARS {
            shown.push('…');
        }
        s.push_str(&format!("            {shown}\n"));
    }
    if lines.len() > LOG_LINES {
        s.push_str(&format!(
            "            … {} more lines in grade.json (or --json)\n",
            lines.len() - LOG_LINES
        ));
    }
    s
}

// ---- Gradescope -------------------------------------------------------------------------

/// Gradescope's autograder `results.json`: one entry per test (score, max_score, status,
/// output, visibility), the compile log as the overall output, the visible tests' TFLOP/s on the
/// leaderboard. Nothing a student sees is computed from a hidden input beyond a hidden test's
/// own score: a hidden test's output is one word (passed, failed or skipped), with no detail
/// and no flag (a kernel could choose which flag to raise by its hidden inputs), and the time
/// shown is the visible phase's.
pub fn gradescope_results(r: &GradeReport) -> GradescopeResults {
    let tests: Vec<GradescopeTest> = r
        .tests
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let hidden = t.visibility != Visibility::Visible;
            let output = if hidden {
                match t.status {
                    Status::Passed => "passed",
                    Status::Skipped => "skipped",
                    _ => "failed",
                }
                .to_string()
            } else {
                // The flag's finding is usually the detail's own: said once.
                let mut said = Said::default();
                let mut output = said.once(&t.detail, &t.name);
                for f in &t.flags {
                    output.push_str(&format!(
                        "\nflag {}: {}",
                        f.name,
                        said.once(&f.detail, &t.name)
                    ));
                }
                output
            };
            GradescopeTest {
                name: t.name.clone(),
                number: format!("{}", i + 1),
                score: t.score,
                max_score: t.max_score,
                output,
                visibility: t.visibility,
                tags: vec![match t.kind {
                    Kind::Correctness => "correctness".into(),
                    Kind::Performance => "performance".into(),
                    Kind::Technique => "technique".into(),
                }],
                status: match t.status {
                    Status::Passed => Some("passed".into()),
                    Status::Skipped => None,
                    _ => Some("failed".into()),
                },
            }
        })
        .collect();
    let mut output = format!("Compile: {}", r.compile.message);
    if !r.compile.log.trim().is_empty() && r.compile.status != CompileStatus::Ok {
        output.push_str(&format!("\n\n{}", r.compile.log));
    }
    if r.skipped_points > 0.0 && r.gpu.is_none() {
        output.push_str(&format!(
            "\n\n{:.1} points were skipped: compiled only, no test ran{}.",
            r.skipped_points,
            if r.technique_skipped() {
                " and no technique was measured"
            } else {
                ""
            }
        ));
    } else if r.skipped_points > 0.0 && r.simulated() {
        output.push_str(&format!(
            "\n\n{:.1} points of performance tests were skipped: the simulator does not time kernels, a B200 does.",
            r.skipped_points
        ));
    } else if r.skipped_points > 0.0 {
        output.push_str(&format!(
            "\n\n{:.1} points of performance tests were skipped: they need native hardware.",
            r.skipped_points
        ));
    }
    if !r.confinement.is_empty() {
        output.push_str(&format!("\n\nGrading: {}", r.confinement));
    }
    GradescopeResults {
        score: r.score,
        execution_time: r.visible_elapsed_s.round() as u64,
        output,
        stdout_visibility: "hidden".into(),
        tests,
        // Only a speed a visible test measured: a rubric without a speed test, a pre-screen, a
        // kernel that failed or was graded where nothing is timed posts no row (not a 0.0).
        leaderboard: r
            .visible_tflops()
            .map(|t| LeaderboardEntry {
                name: "TFLOP/s".into(),
                value: (t * 10.0).round() / 10.0,
                order: "desc".into(),
            })
            .into_iter()
            .collect(),
    }
}

// ---- class summaries -----------------------------------------------------------------------

/// Columns of `summary.csv` and `summary.md`.
pub const SUMMARY_COLUMNS: [&str; 8] = [
    "student",
    "compile",
    "correctness",
    "performance",
    "flags",
    "total",
    "gpu",
    "time_s",
];

fn summary_row(r: &GradeReport) -> [String; 8] {
    let (ok, n) = r.correctness();
    let correctness = r
        .tests
        .iter()
        .filter(|t| t.kind == Kind::Correctness)
        .all(|t| t.status == Status::Skipped);
    [
        r.student.clone(),
        lower(&r.compile.status),
        // Tests that did not run (compiled only) are neither passed nor failed.
        if n > 0 && correctness {
            "skipped".into()
        } else {
            format!("{ok}/{n}")
        },
        r.performance(),
        r.flags.join(";"),
        format!("{:.1}/{:.1}", r.score, r.max_score),
        // The simulator opened no device: its name alone, no `#0`.
        r.gpu.as_ref().map_or("-".into(), |g| {
            if r.simulated() {
                g.name.clone()
            } else {
                format!("{} #{}", g.name, g.device)
            }
        }),
        format!("{:.1}", r.elapsed_s),
    ]
}

pub fn summary_csv(reports: &[GradeReport]) -> Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(SUMMARY_COLUMNS)?;
    for r in reports {
        w.write_record(summary_row(r))?;
    }
    Ok(String::from_utf8(
        w.into_inner().map_err(|e| anyhow::anyhow!("{e}"))?,
    )?)
}

pub fn summary_md(reports: &[GradeReport]) -> String {
    let esc = |s: &str| s.replace('|', "\\|");
    let mut s = format!(
        "| {} |\n|{}\n",
        SUMMARY_COLUMNS.join(" | "),
        "---|".repeat(8)
    );
    for r in reports {
        let row: Vec<String> = summary_row(r).iter().map(|c| esc(c)).collect();
        s.push_str(&format!("| {} |\n", row.join(" | ")));
    }
    s
}

/// A report's file, Gradescope's file, and a batch's two summaries.
pub const GRADE_FILE: &str = "grade.json";
pub const GRADESCOPE_FILE: &str = "results.json";
pub const SUMMARIES: [&str; 2] = ["summary.csv", "summary.md"];

/// Write `summary.csv` and `summary.md` for `reports` (sorted by student) into `dir`.
pub fn write_summary(dir: &Path, reports: &mut [GradeReport]) -> Result<()> {
    reports.sort_by(|a, b| a.student.cmp(&b.student));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(dir.join(SUMMARIES[0]), summary_csv(reports)?)?;
    std::fs::write(dir.join(SUMMARIES[1]), summary_md(reports))?;
    Ok(())
}

/// Every `grade.json` in `dir` and its subfolders (one level down).
pub fn collect(dir: &Path) -> Result<Vec<(PathBuf, GradeReport)>> {
    let mut found = Vec::new();
    let own = dir.join("grade.json");
    if own.is_file() {
        found.push((own.clone(), GradeReport::read(&own)?));
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("grade.json").is_file())
        .collect();
    entries.sort();
    for e in entries {
        let p = e.join("grade.json");
        found.push((p.clone(), GradeReport::read(&p)?));
    }
    Ok(found)
}

/// The students a batch's `summary.csv` in `dir` lists, if it has one.
fn summary_students(dir: &Path) -> Result<Option<Vec<String>>> {
    let path = dir.join(SUMMARIES[0]);
    if !path.is_file() {
        return Ok(None);
    }
    let bytes = userfile::read(&path, userfile::MAX_REPORT_BYTES, "the summary")?;
    let mut rd = csv::Reader::from_reader(bytes.as_slice());
    let mut students = Vec::new();
    for row in rd.records() {
        let row = row.with_context(|| format!("{} is not a summary", path.display()))?;
        students.push(row.get(0).unwrap_or_default().to_string());
    }
    Ok(Some(students))
}

/// `runner grade merge`: the reports of several output folders (e.g. one per shard), checked:
/// every student once, one rubric, and every student a folder's `summary.csv` lists found in it
/// (a folder that lost a report is refused, naming the students missing).
pub fn gather(dirs: &[PathBuf]) -> Result<Vec<GradeReport>> {
    let mut reports: Vec<GradeReport> = Vec::new();
    let mut from: Vec<PathBuf> = Vec::new();
    for d in dirs {
        let found = collect(d)?;
        if found.is_empty() {
            bail!(
                "{} holds no grade.json (neither in it nor in its subfolders)",
                d.display()
            );
        }
        if let Some(mut listed) = summary_students(d)? {
            let mut held: Vec<String> = found.iter().map(|(_, r)| r.student.clone()).collect();
            listed.sort();
            held.sort();
            if listed != held {
                let apart = |a: &[String], b: &[String]| -> Vec<String> {
                    a.iter().filter(|s| !b.contains(s)).cloned().collect()
                };
                let (missing, extra) = (apart(&listed, &held), apart(&held, &listed));
                let mut why = Vec::new();
                if !missing.is_empty() {
                    why.push(format!("missing: {}", missing.join(", ")));
                }
                if !extra.is_empty() {
                    why.push(format!("not in the summary: {}", extra.join(", ")));
                }
                bail!(
                    "{} lists {} students in summary.csv but holds {} grade.json ({}): regrade the folder into a new one (its reports were overwritten, removed, or left from another batch)",
                    d.display(),
                    listed.len(),
                    held.len(),
                    why.join("; ")
                );
            }
        }
        for (path, r) in found {
            if let Some(i) = reports.iter().position(|o| o.student == r.student) {
                bail!(
                    "student {:?} is graded twice: {} and {}",
                    r.student,
                    from[i].display(),
                    path.display()
                );
            }
            if let Some(first) = reports.first() {
                if first.rubric.sha256 != r.rubric.sha256 {
                    bail!(
                        "{} was graded with another rubric ({}) than {} ({})",
                        path.display(),
                        r.rubric.name,
                        from[0].display(),
                        first.rubric.name
                    );
                }
            }
            reports.push(r);
            from.push(path);
        }
    }
    Ok(reports)
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// Every grader report committed under `assets/results/` reads through its type, and back
    /// (`results`' test classifies the files; this one reads the grader's).
    #[test]
    fn every_committed_grade_report_parses_through_its_type() {
        let mut files = Vec::new();
        crate::results::tests::every_json(&crate::results::dir(), &mut files);
        let mut n = 0;
        for path in &files {
            let text = std::fs::read_to_string(path).expect("readable");
            let name = path.file_name().unwrap().to_string_lossy();
            if !crate::results::is_grade_report(&name, &text) {
                continue;
            }
            let r: GradeReport =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let again = serde_json::to_string(&r).unwrap();
            serde_json::from_str::<GradeReport>(&again)
                .unwrap_or_else(|e| panic!("{}: written back: {e}", path.display()));
            n += 1;
        }
        assert!(n > 0, "no grader report is committed under assets/results/");
    }

    pub fn sample(student: &str, perf: Option<f64>) -> GradeReport {
        let seeds = TestSeeds {
            sets: vec![1, 2],
            refresh: 3,
            decoy: 4,
            schedule: 0,
        };
        let test = |name: &str,
                    kind: Kind,
                    vis: Visibility,
                    status: Status,
                    score: f64,
                    timing: Option<TimingResult>,
                    flags: Vec<Flag>| TestReport {
            name: name.into(),
            kind,
            visibility: vis,
            points: 10.0,
            score,
            max_score: if status == Status::Skipped { 0.0 } else { 10.0 },
            status,
            detail: format!("{name} detail"),
            flags,
            seeds: seeds.clone(),
            shape: [256, 256, 128],
            dtype: "f16".into(),
            dist: "gaussian".into(),
            launches: 2,
            timing,
        };
        let timing = perf.map(|ratio| TimingResult {
            kernel_median_us: 100.0,
            kernel_min_us: 90.0,
            kernel_max_us: 120.0,
            cublas_median_us: 100.0 * ratio,
            cublas_min_us: 90.0,
            ratio,
            tflops: 512.25,
            cublas_tflops: 600.0,
            peak_tflops: Some(989.0),
            timed_launches: 10,
            input_sets: 4,
            l2_flushed: true,
        });
        let mut r = GradeReport {
            schema: SCHEMA.into(),
            student: student.into(),
            submission: format!("class/{student}"),
            source_sha256: "00".repeat(32),
            rubric: RubricRef {
                name: "r".into(),
                path: "rubrics/r.toml".into(),
                sha256: "ab".repeat(32),
                step: 0,
                arch: "sm_90a".into(),
            },
            grader_version: "0.1.0".into(),
            runner: RunnerInfo::this(),
            grader_commit: "abc1234".into(),
            confinement: String::new(),
            gpu: Some(EnvInfo {
                name: "NVIDIA H100".into(),
                device: 1,
                ..Default::default()
            }),
            target: Some("Sm90a".into()),
            compile: CompileReport {
                status: CompileStatus::Ok,
                message: "compiled".into(),
                log: String::new(),
                registers: 90,
                spill_bytes: 0,
                compile_ms: 900.0,
            },
            tests: vec![
                test(
                    "public",
                    Kind::Correctness,
                    Visibility::Visible,
                    Status::Passed,
                    10.0,
                    None,
                    vec![],
                ),
                test(
                    "hidden",
                    Kind::Correctness,
                    Visibility::AfterPublished,
                    Status::Failed,
                    0.0,
                    None,
                    vec![Flag::new("stale-output", "secret details")],
                ),
                test(
                    "speed",
                    Kind::Performance,
                    Visibility::Visible,
                    if perf.is_some() {
                        Status::Passed
                    } else {
                        Status::Skipped
                    },
                    if perf.is_some() { 8.0 } else { 0.0 },
                    timing,
                    vec![],
                ),
            ],
            flags: vec![],
            grading_flags: Vec::new(),
            score: 0.0,
            max_score: 0.0,
            skipped_points: 0.0,
            elapsed_s: 12.34,
            visible_elapsed_s: 4.6,
            hidden_elapsed_s: 7.5,
            started: 0,
            worker_log: String::new(),
            gpu_after: Some("usable".into()),
        };
        r.tally();
        r
    }

    #[test]
    fn a_failed_compile_shows_its_first_log_lines_bounded_and_without_escapes() {
        let mut r = sample("alice", None);
        r.compile.status = CompileStatus::Failed;
        r.compile.message = "the kernel does not compile for f16".into();
        let mut log = String::from("kernel.cu(3): error: expected a \"}\"\n\x1b]0;owned\x07\n");
        for i in 0..50 {
            log.push_str(&format!("kernel.cu({i}): error: line {i}\n"));
        }
        r.compile.log = log;
        let text = r.text();
        assert!(
            text.contains("\n            kernel.cu(3): error: expected a \"}\"\n"),
            "{text}"
        );
        assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text}");
        assert!(text.contains("            ?]0;owned?\n"), "{text}");
        assert!(text.contains("… 12 more lines in grade.json"), "{text}");
        assert!(!text.contains("line 38\n"), "{text}");
        // A compile that went well shows no log (ptxas' resource lines stay in grade.json).
        r.compile.status = CompileStatus::Ok;
        assert!(!r.text().contains("expected a"), "{}", r.text());
    }

    #[test]
    fn a_compiled_only_grade_has_its_correctness_skipped_not_zero() {
        let mut r = sample("alice", None);
        for t in r.tests.iter_mut().filter(|t| t.kind == Kind::Correctness) {
            t.status = Status::Skipped;
        }
        let (_, n) = r.correctness();
        assert!(n > 0);
        assert_eq!(summary_row(&r)[2], "skipped");
        r.tests
            .iter_mut()
            .find(|t| t.kind == Kind::Correctness)
            .unwrap()
            .status = Status::Passed;
        assert_eq!(summary_row(&r)[2], format!("1/{n}"));
    }

    #[test]
    fn a_finding_is_said_once_and_named_after() {
        let finding = "broke the ordering rule ld-after-commit-wait: CTA 0, warp 3, PTX line 858 (source line 176): the epilogue read the accumulator before its wait";
        let mut said = Said::default();
        let first = said.once(
            &format!("input set 1 of 2: the simulator stopped the kernel: {finding}"),
            "public",
        );
        assert!(first.ends_with(finding), "{first}");
        assert_eq!(said.once(finding, "public"), "as above");
        let later = said.once(
            &format!("2-CTA MMA not shown: a graded launch failed (public: the simulator stopped the kernel: {finding}): its counts prove nothing"),
            "2cta-mma",
        );
        assert!(!later.contains("ld-after-commit-wait"), "{later}");
        assert!(later.contains("[said in public, above]"), "{later}");
        assert_eq!(said.once(finding, "2cta-mma"), "as in public, above");
        // Short texts repeat: a pointer would be longer than they are.
        assert_eq!(said.once("passed", "a"), "passed");
        assert_eq!(said.once("passed", "b"), "passed");
    }

    #[test]
    fn tallies_count_skipped_tests_neither_way() {
        let r = sample("alice", None);
        assert_eq!((r.score, r.max_score, r.skipped_points), (10.0, 20.0, 10.0));
        assert_eq!(r.flags, vec!["stale-output".to_string()]);
        assert_eq!(r.performance(), "skipped (needs native hardware)");
        let r = sample("bob", Some(0.87));
        assert_eq!((r.score, r.max_score), (18.0, 30.0));
        assert_eq!(r.performance(), "0.87x cuBLAS (512 TFLOP/s)");
        assert_eq!(r.correctness(), (1, 2));
    }

    #[test]
    fn gradescope_results_follow_the_autograder_format() {
        // Checked as the JSON Gradescope reads.
        let v = serde_json::to_value(gradescope_results(&sample("bob", Some(0.87)))).unwrap();
        assert_eq!(v["score"], 18.0);
        // The visible phase's time, never the hidden tests' (12.34 s in all).
        assert_eq!(v["execution_time"], 5);
        let tests = v["tests"].as_array().unwrap();
        assert_eq!(tests.len(), 3);
        for t in tests {
            for key in ["name", "score", "max_score", "output", "visibility"] {
                assert!(t.get(key).is_some(), "{key} missing in {t}");
            }
        }
        assert_eq!(tests[0]["status"], "passed");
        assert_eq!(tests[1]["status"], "failed");
        assert_eq!(tests[1]["visibility"], "after_published");
        // A hidden test says passed or failed, nothing its run computed: no detail, no flag.
        assert_eq!(tests[1]["output"], "failed");
        assert!(
            !v.to_string().contains("\"seeds\""),
            "seeds never reach students"
        );
        assert_eq!(v["leaderboard"][0]["name"], "TFLOP/s");
        assert_eq!(v["leaderboard"][0]["value"], 512.3);
        // A hidden test's speed never reaches the leaderboard (its time could carry its inputs).
        let mut h = sample("bob", Some(0.87));
        h.tests[2].visibility = Visibility::Hidden;
        let hv = serde_json::to_value(gradescope_results(&h)).unwrap();
        assert!(hv.get("leaderboard").is_none(), "{hv}");
        assert_eq!(hv["tests"][2]["output"], "passed");
        assert!(!hv.to_string().contains("TFLOP/s ("), "{hv}");
        let skipped = serde_json::to_value(gradescope_results(&sample("alice", None))).unwrap();
        let t = &skipped["tests"][2];
        assert_eq!(t["max_score"], 0.0);
        assert!(
            t.get("status").is_none(),
            "a skipped test is neither passed nor failed"
        );
        assert!(skipped["output"]
            .as_str()
            .unwrap()
            .contains("need native hardware"));
    }

    #[test]
    fn summaries_have_a_row_per_student() {
        let reports = vec![sample("alice", None), sample("bob, jr", Some(0.5))];
        let csv = summary_csv(&reports).unwrap();
        let mut rd = csv::Reader::from_reader(csv.as_bytes());
        assert_eq!(
            rd.headers().unwrap().iter().collect::<Vec<_>>(),
            SUMMARY_COLUMNS
        );
        let rows: Vec<csv::StringRecord> = rd.records().map(|r| r.unwrap()).collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(&rows[1][0], "bob, jr");
        assert_eq!(&rows[1][5], "18.0/30.0");
        assert_eq!(&rows[0][6], "NVIDIA H100 #1");
        // The simulator has no device number.
        let mut sim = sample("carol", None);
        sim.gpu = Some(super::super::batch::simulator_env());
        assert_eq!(
            summary_row(&sim)[6],
            format!("no GPU: {}", common::simulate::BACKEND)
        );
        assert_eq!(sim.performance(), "skipped (needs a B200)");
        let md = summary_md(&reports);
        assert_eq!(md.lines().count(), 4);
        assert!(
            md.contains(
                "| alice | ok | 1/2 | skipped (needs native hardware) | stale-output | 10.0/20.0 |"
            ),
            "{md}"
        );
    }

    fn merge(dirs: &[PathBuf], out: &Path) -> Result<Vec<GradeReport>> {
        let mut reports = gather(dirs)?;
        write_summary(out, &mut reports)?;
        Ok(reports)
    }

    #[test]
    fn merge_joins_shards_and_refuses_duplicates() {
        let root = std::env::temp_dir().join(format!("grade-merge-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        for (shard, students) in [("s0", ["alice", "carol"]), ("s1", ["bob", "dave"])] {
            for s in students {
                sample(s, Some(0.9))
                    .write(&root.join(shard).join(s), true)
                    .unwrap();
            }
        }
        let merged = merge(&[root.join("s0"), root.join("s1")], &root.join("all")).unwrap();
        assert_eq!(
            merged
                .iter()
                .map(|r| r.student.as_str())
                .collect::<Vec<_>>(),
            ["alice", "bob", "carol", "dave"]
        );
        let csv = std::fs::read_to_string(root.join("all/summary.csv")).unwrap();
        assert_eq!(csv.lines().count(), 5);
        assert!(root.join("s0/alice/results.json").is_file());
        sample("alice", None)
            .write(&root.join("s1/alice"), false)
            .unwrap();
        let e = merge(&[root.join("s0"), root.join("s1")], &root.join("all")).unwrap_err();
        assert!(e.to_string().contains("graded twice"), "{e}");
        // A shard whose summary lists a student whose report is gone is refused.
        std::fs::remove_dir_all(root.join("s1/alice")).unwrap();
        let mut s0: Vec<GradeReport> = ["alice", "carol", "erin"]
            .iter()
            .map(|s| sample(s, Some(0.9)))
            .collect();
        write_summary(&root.join("s0"), &mut s0).unwrap();
        let e = merge(&[root.join("s0"), root.join("s1")], &root.join("all"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("lists 3 students in summary.csv but holds 2 grade.json (missing: erin)"),
            "{e}"
        );
        assert!(merge(&[root.join("nothing")], &root.join("x")).is_err());
        let _ = std::fs::remove_dir_all(&root);
    }
}
