//! Grading one submission: read and police its text, derive its seeds, compile it in one child
//! process and run its tests in another, each under its limit, then score what came back.

use super::counts::{BuildMeasured, Measured};
use super::job::{
    target_name, CompiledDtype, EnvInfo, Job, JobTest, MeasureJob, Phase, RunLine, TestResult,
    TestSeeds,
};
use super::policy;
use super::protocol::{CUPTI_MISSING_ENV, LAUNCHING_FILE, MEASURED_FILE, SOURCE_NAME};
use super::report::{CompileReport, CompileStatus, GradeReport, RubricRef, TestReport, SCHEMA};
use super::rubric::Rubric;
use super::scoring;
use super::seeds::{public_seed, sha256_hex, Secret};
use super::technique::{BuildSass, Evidence, Executions, Facts, Requirement};
use super::vocab::{FactResult, Flag, Kind, Status};
use crate::sandbox::{self, truncate_log, ChildSpec, Exit, Outcome};
use anyhow::{anyhow, bail, Context, Result};
use common::run::{choose_target, EmulateMode};
use common::verdict::Verdict;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

/// The compile child's address-space limit: NVRTC needs well under 2 GiB for any stock kernel;
/// a submission built to exhaust the compiler's memory stops here.
pub const COMPILE_ADDRESS_SPACE: u64 = 8 << 30;

/// One student's submission: a kernel file, or a folder holding exactly one.
#[derive(Debug, Clone)]
pub struct Submission {
    pub student: String,
    pub path: PathBuf,
}

impl Submission {
    /// The kernel file of the submission.
    pub fn kernel_file(&self) -> Result<PathBuf> {
        if self.path.is_file() {
            return Ok(self.path.clone());
        }
        let mut cu: Vec<PathBuf> = std::fs::read_dir(&self.path)
            .with_context(|| format!("cannot read the submission {}", self.path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "cu"))
            .collect();
        cu.sort();
        match cu.len() {
            1 => Ok(cu.remove(0)),
            0 => bail!("{} holds no .cu file", self.path.display()),
            n => bail!(
                "{} holds {n} .cu files ({}): a submission is one kernel file",
                self.path.display(),
                cu.iter()
                    .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// The folder of a student's reports in a batch's output: the name itself where it is made of
/// ASCII letters, digits, `_`, `-` and `.` (not leading), every other byte percent-encoded
/// (`王伟` → `%E7%8E%8B%E4%BC%9F`, `carol smith` → `carol%20smith`), so two names never share a
/// folder and the folder gives the name back. A name whose folder would exceed 120 bytes keeps
/// its first 80 and ends `~` and a hash of the whole name (`~` is never in an encoded name).
pub fn report_folder(student: &str) -> String {
    use std::fmt::Write;
    let mut t = String::new();
    for (i, b) in student.bytes().enumerate() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0) {
            t.push(b as char);
        } else {
            let _ = write!(t, "%{b:02X}");
        }
    }
    if t.is_empty() {
        return "%".into();
    }
    if t.len() > 120 {
        let mut cut = 80;
        // Never inside a %XX.
        while t.as_bytes()[cut - 1] == b'%' || t.as_bytes()[cut - 2] == b'%' {
            cut -= 1;
        }
        t = format!("{}~{}", &t[..cut], &sha256_hex(student.as_bytes())[..16]);
    }
    t
}

/// A name safe as a folder name: letters, digits, `.`, `_` and `-`.
pub fn safe_name(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if t.is_empty() || t.starts_with('.') {
        format!("_{t}")
    } else {
        t
    }
}

/// The folder a submission's student controls, resolved: the submission itself when it is a
/// folder, else the folder of its kernel file. `None`: it cannot be resolved.
pub fn submission_folder(path: &Path) -> Option<PathBuf> {
    let p = path.canonicalize().ok()?;
    if p.is_dir() {
        Some(p)
    } else {
        p.parent().map(Path::to_path_buf)
    }
}

/// The file name Gradescope gives its metadata.
pub const METADATA_NAME: &str = "submission_metadata.json";

/// A Gradescope metadata file inside the submission folder, if the student shipped one: never
/// read (the identity comes only from a trusted place), and named in the instructor's report.
pub fn untrusted_metadata(path: &Path) -> Option<PathBuf> {
    let p = submission_folder(path)?.join(METADATA_NAME);
    std::fs::symlink_metadata(&p).is_ok().then_some(p)
}

/// Seeds recorded by an earlier grading (`--replay`), by test name.
pub type Replay = Vec<(String, TestSeeds)>;

pub fn load_replay(path: &Path) -> Result<(String, Replay)> {
    let r = GradeReport::read(path)?;
    Ok((
        r.student.clone(),
        r.tests.into_iter().map(|t| (t.name, t.seeds)).collect(),
    ))
}

pub struct Grader {
    pub rubric: Rubric,
    pub rubric_path: PathBuf,
    pub secret: Option<Secret>,
    pub replay: Option<Replay>,
    /// The runner binary, started again as `grade-worker`.
    pub exe: PathBuf,
    pub scratch: PathBuf,
    pub keep_scratch: bool,
    /// Extra variables for the children (the toolkit's location).
    pub child_env: Vec<(String, String)>,
    /// Whether the children confine themselves (Landlock), as every report states.
    pub confinement: Confinement,
    /// Check and compile only (a pre-screen without a GPU): no test runs.
    pub compile_only: bool,
    /// Testing only: no include screen.
    pub skip_screen: bool,
    /// A Blackwell rubric graded on the PTX simulator (the default): its native sm_100a PTX runs
    /// on the CPU, no GPU is used. False: on the GPU (the tcgen05 emulation on an H100/H200).
    pub simulate: bool,
    /// The scratch folder this grader made, removed with it (none with --keep-scratch).
    #[expect(dead_code, reason = "held for its Drop, which removes the folder")]
    pub cleanup: Option<OwnedScratch>,
}

/// A scratch folder the grader made: removed when the grader is done, on every path out
/// (an error too), so no grading leaves a folder in the temp folder.
#[derive(Debug)]
pub struct OwnedScratch(pub PathBuf);

impl Drop for OwnedScratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How the grading children are confined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// Landlock, at this ABI version of the kernel.
    Landlock(i32),
    /// Not confined: the kernel has no Landlock and the instructor passed `--allow-unconfined`.
    Unconfined,
}

impl Confinement {
    /// The line every report carries.
    pub fn describe(&self) -> String {
        match self {
            Confinement::Landlock(abi) => format!(
                "compile and run children confined by Landlock (ABI {abi}): they read only the toolkit, system libraries and GPU driver files, and write only their own scratch folder"
            ),
            Confinement::Unconfined => "UNCONFINED: this kernel has no Landlock, so the grading children ran unconfined and a submission could read any file the grader can (hidden tests are graded so only on the instructor's --allow-unconfined)".into(),
        }
    }
}

impl Grader {
    /// The seeds of every test for `student`.
    pub fn seeds(&self, student: &str) -> Result<Vec<TestSeeds>> {
        self.rubric
            .tests
            .iter()
            .map(|t| {
                if let Some(replay) = &self.replay {
                    return replay
                        .iter()
                        .find(|(n, _)| *n == t.name)
                        .map(|(_, s)| s.clone())
                        .filter(|s| s.sets.len() == t.sets)
                        .ok_or_else(|| anyhow!("the replayed report has no seeds for test {:?} with {} sets", t.name, t.sets));
                }
                let seed = |purpose: &str, i: u64| -> Result<u64> {
                    match (t.hidden(), &self.secret, t.seed) {
                        (true, Some(s), _) => Ok(s.seed(student, &t.name, purpose, i)),
                        (true, None, _) => bail!("test {:?} is hidden: its seeds need the instructor's secret (--secret-file FILE or {})", t.name, super::seeds::SECRET_ENV),
                        (false, _, Some(rs)) => Ok(public_seed(rs, &t.name, purpose, i)),
                        (false, _, None) => bail!("visible test {:?} has no seed", t.name),
                    }
                };
                Ok(TestSeeds {
                    sets: (0..t.sets as u64).map(|i| seed("set", i)).collect::<Result<_>>()?,
                    refresh: seed("refresh", 0)?,
                    decoy: seed("decoy", 0)?,
                    schedule: seed("schedule", 0)?,
                })
            })
            .collect()
    }

    fn job_tests(&self, seeds: &[TestSeeds]) -> Vec<JobTest> {
        self.rubric
            .tests
            .iter()
            .zip(seeds)
            .map(|(t, s)| JobTest {
                name: t.name.clone(),
                kind: t.kind,
                shape: [t.shape.m, t.shape.n, t.shape.k],
                dtype: t.dtype.to_string(),
                dist: t.dist.to_string(),
                seeds: s.clone(),
                warmup: t.warmup,
                iters: t.iters,
                fresh_rows: t.fresh_rows,
            })
            .collect()
    }

    pub(super) fn child(
        &self,
        dir: &Path,
        job: &Job,
        device: usize,
        limit: Duration,
    ) -> Result<Outcome> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let mut env = self.child_env.clone();
        env.push(("WORKBOOK_DEVICE".into(), device.to_string()));
        let mut args: Vec<std::ffi::OsString> = vec![
            "grade-worker".into(),
            "--phase".into(),
            job.phase.name().into(),
        ];
        if self.confinement == Confinement::Unconfined {
            args.push("--unconfined".into());
        }
        // The compiler starts no CUDA driver, so its address space can be capped; a GPU child's
        // cannot (the driver reserves terabytes of virtual addresses).
        let address_space = (job.phase == Phase::Compile).then_some(COMPILE_ADDRESS_SPACE);
        sandbox::run(&ChildSpec {
            program: self.exe.clone(),
            args,
            cwd: dir.to_path_buf(),
            env,
            limit,
            log_bytes: self.rubric.limits.log_bytes,
            stdin: job.to_bytes()?,
            rlimits: sandbox::Rlimits::for_limit(limit, address_space),
        })
    }

    /// Describe device `device` and check that it computes correctly, in a child process.
    pub fn probe(&self, device: usize) -> Result<EnvInfo> {
        let dir = self.scratch.join(format!("probe-{device}-{}", unique()));
        let o = self.child(&dir, &Job::probe(), device, Duration::from_secs(120))?;
        let path = dir.join("probe.json");
        let env: Result<EnvInfo> = std::fs::read(&path)
            .map_err(anyhow::Error::from)
            .and_then(|b| Ok(serde_json::from_slice(&b)?));
        if !self.keep_scratch {
            let _ = std::fs::remove_dir_all(&dir);
        }
        env.map_err(|_| {
            anyhow!(
                "GPU {device} cannot be used for grading: the probe {}: {}",
                o.describe(),
                o.stderr
                    .lines()
                    .find(|l| l.starts_with("error"))
                    .unwrap_or(o.stderr.trim())
                    .trim_start_matches("error: ")
            )
        })
    }

    /// Grade one submission on `device` (described by `env`).
    pub fn grade(&self, sub: &Submission, device: usize, env: &EnvInfo) -> GradeReport {
        let start = Instant::now();
        let started = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let dir = self
            .scratch
            .join(format!("{}-{}", safe_name(&sub.student), unique()));
        let mut report = self.grade_in(sub, device, env, &dir, start);
        if let Some(shipped) = untrusted_metadata(&sub.path) {
            report.grading_flags.push(Flag::new(
                "metadata-in-submission",
                format!(
                    "the submission holds {}: ignored (a student could choose their identity with it); the student's identity came from --student or Gradescope's metadata outside the submission",
                    shipped.display()
                ),
            ));
        }
        if !self.keep_scratch {
            let _ = std::fs::remove_dir_all(&dir);
        }
        report.started = started;
        report.elapsed_s = start.elapsed().as_secs_f64();
        // No hidden test ran (none, or the grading stopped before them): all of it was visible.
        if report.visible_elapsed_s == 0.0 {
            report.visible_elapsed_s = report.elapsed_s;
        }
        report.tally();
        report
    }

    fn empty_report(&self, sub: &Submission, env: &EnvInfo, seeds: &[TestSeeds]) -> GradeReport {
        // The requirements, in the rubric's order: reported after the tests.
        let requirements = self.rubric.requirements.iter().map(|q| (&q.name, q.points));
        GradeReport {
            schema: SCHEMA.into(),
            student: sub.student.clone(),
            submission: sub.path.display().to_string(),
            source_sha256: String::new(),
            rubric: RubricRef {
                name: self.rubric.name.clone(),
                path: self.rubric_path.display().to_string(),
                sha256: self.rubric.sha256.clone(),
                step: self.rubric.step,
                arch: self.rubric.arch.sm().to_string(),
            },
            grader_version: env!("CARGO_PKG_VERSION").to_string(),
            grader_commit: env!("WB_BUILD_COMMIT").to_string(),
            gpu: (!self.compile_only).then(|| env.clone()),
            target: None,
            confinement: self.confinement.describe(),
            compile: CompileReport {
                status: CompileStatus::Error,
                message: String::new(),
                log: String::new(),
                registers: 0,
                spill_bytes: 0,
                compile_ms: 0.0,
            },
            tests: self
                .rubric
                .tests
                .iter()
                .enumerate()
                .map(|(i, t)| TestReport {
                    name: t.name.clone(),
                    kind: t.kind,
                    visibility: t.visibility,
                    points: t.points,
                    score: 0.0,
                    max_score: t.points,
                    status: Status::Error,
                    detail: "not run".into(),
                    flags: Vec::new(),
                    seeds: seeds.get(i).cloned().unwrap_or(TestSeeds {
                        sets: Vec::new(),
                        refresh: 0,
                        decoy: 0,
                        schedule: 0,
                    }),
                    shape: [t.shape.m, t.shape.n, t.shape.k],
                    dtype: t.dtype.to_string(),
                    dist: t.dist.to_string(),
                    launches: 0,
                    timing: None,
                })
                .chain(requirements.map(|(name, points)| TestReport {
                    name: name.clone(),
                    kind: Kind::Technique,
                    visibility: super::rubric::Visibility::Visible,
                    points,
                    score: 0.0,
                    max_score: points,
                    status: Status::Error,
                    detail: "not checked".into(),
                    flags: Vec::new(),
                    seeds: TestSeeds {
                        sets: Vec::new(),
                        refresh: 0,
                        decoy: 0,
                        schedule: 0,
                    },
                    shape: [0; 3],
                    dtype: String::new(),
                    dist: String::new(),
                    launches: 0,
                    timing: None,
                }))
                .collect(),
            flags: Vec::new(),
            grading_flags: Vec::new(),
            score: 0.0,
            max_score: 0.0,
            skipped_points: 0.0,
            elapsed_s: 0.0,
            visible_elapsed_s: 0.0,
            hidden_elapsed_s: 0.0,
            started: 0,
            worker_log: String::new(),
            gpu_after: None,
        }
    }

    fn grade_in(
        &self,
        sub: &Submission,
        device: usize,
        env: &EnvInfo,
        dir: &Path,
        start: Instant,
    ) -> GradeReport {
        // A compile needs no seed: a pre-screen derives none (and needs no secret).
        let seeds = if self.compile_only {
            Ok(self
                .rubric
                .tests
                .iter()
                .map(|t| TestSeeds {
                    sets: vec![0; t.sets],
                    refresh: 0,
                    decoy: 0,
                    schedule: 0,
                })
                .collect())
        } else {
            self.seeds(&sub.student)
        };
        let seeds = match seeds {
            Ok(s) => s,
            Err(e) => {
                let mut r = self.empty_report(sub, env, &[]);
                r.compile.message = format!("{e:#}");
                return r;
            }
        };
        let mut r = self.empty_report(sub, env, &seeds);
        let not_run = |r: &mut GradeReport, why: &str| {
            for t in &mut r.tests {
                t.detail = format!("not run: {why}");
            }
        };
        // The text, refused before anything compiles it.
        let source = match read_source(sub, self.rubric.limits.source_bytes) {
            Ok((s, sha)) => {
                r.source_sha256 = sha;
                s
            }
            Err(e) => {
                r.compile.status = CompileStatus::Rejected;
                r.compile.message = format!("{e:#}");
                not_run(&mut r, "the submission was refused");
                return r;
            }
        };
        if let Err(v) = screen(&source, self.rubric.arch, self.skip_screen, self.simulate) {
            r.compile.status = CompileStatus::Rejected;
            r.compile.message = format!("refused before compiling: kernel.cu {v}");
            not_run(&mut r, "the submission was refused");
            return r;
        }
        let chosen = if self.compile_only || self.simulate {
            // No GPU: the native build of the rubric's architecture.
            Ok(match self.rubric.arch {
                common::step::Arch::Hopper => common::Target::Sm90a,
                common::step::Arch::Blackwell => common::Target::Sm100a,
            })
        } else {
            choose_target(&env.gpu_info(), self.rubric.arch, EmulateMode::Auto)
        };
        let target = match chosen {
            Ok(t) => t,
            Err(e) => {
                r.compile.message = e;
                not_run(&mut r, "this GPU cannot run the rubric's kernel");
                return r;
            }
        };
        r.target = Some(target_name(target).to_string());
        let tests = self.job_tests(&seeds);

        // Compile, in a child of its own: it learns the dtypes, not the tests.
        let mut job = self.rubric.job(Phase::Compile, &source, Vec::new(), &tests);
        job.target = Some(target_name(target).into());
        job.ptx = self.simulate && !self.compile_only;
        if self.compile_only {
            // No traced launch follows: the traced build would be compiled for nothing.
            job.trace = None;
        }
        let limit = Duration::from_secs(self.rubric.limits.compile_seconds);
        let outcome = self.child(&dir.join("compile"), &job, device, limit);
        let compiled = compile_outcome(outcome, &dir.join("compile/compile.json"), &self.rubric);
        if let Ok(o) = &compiled {
            r.grading_flags.extend(o.flags.iter().cloned());
        }
        // Whether the traced build compiled (rubrics with trace facts): `Err` is what failed.
        let mut traced_build: Result<(), String> = Ok(());
        // What the requirements are decided on, gathered as the children report it.
        let mut evidence = Evidence::default();
        // Requirements present in the binary whose executions are still to be counted.
        let mut pending: bool;
        match compiled.map(|o| (o.report, o.sass, o.traced)) {
            Ok((mut c, sass, traced)) if c.status == CompileStatus::Ok => {
                pending = self
                    .rubric
                    .requirements
                    .iter()
                    .any(|q| q.awaits_execution(&sass));
                evidence.sass = Some(sass);
                if target == common::Target::Sm90aEmulated || self.compile_only {
                    let why = if self.compile_only && self.simulate {
                        scoring::COMPILED_ONLY_SIM
                    } else if self.compile_only {
                        scoring::COMPILED_ONLY
                    } else {
                        scoring::EMULATED
                    };
                    evidence.executions = Executions::Skipped(why.to_string());
                    pending = false;
                }
                scoring::score(&mut r, &self.rubric, &evidence);
                if self.rubric.requirements.iter().any(|q| q.fact().is_some()) {
                    traced_build = traced.unwrap_or_else(|| {
                        Err("the compile child reported no traced build".into())
                    });
                }
                if target == common::Target::Sm90aEmulated {
                    c.message.push_str(
                        "; the native sm_100a build compiles too. Verified under emulation: the tests ran under the tcgen05 emulation on this Hopper GPU, not on Blackwell hardware",
                    );
                }
                if self.simulate && !self.compile_only {
                    c.message.push_str(
                        "; graded on the PTX simulator: the tests ran this native sm_100a build's PTX on the CPU (verified, not timed), no GPU was used",
                    );
                }
                r.compile = c;
            }
            Ok((c, _, _)) => {
                let why = format!(
                    "the kernel did not compile ({})",
                    super::report::lower(&c.status)
                );
                r.compile = c;
                not_run(&mut r, &why);
                for t in &mut r.tests {
                    t.status = Status::Failed;
                }
                return r;
            }
            Err(e) => {
                r.compile.message = format!("{e:#}");
                not_run(&mut r, "the grader could not compile the submission");
                return r;
            }
        }
        if self.compile_only {
            // A requirement the binary fails keeps its verdict; one it meets is skipped above,
            // never awarded: only an executed count earns its points.
            for t in r.tests.iter_mut().filter(|t| t.kind != Kind::Technique) {
                t.detail = "not run: compiled only (a pre-screen: no GPU was used)".into();
                t.status = Status::Skipped;
                // Like every skipped test, it counts neither way.
                t.max_score = 0.0;
            }
            // A trace fact needs the traced launch: skipped like the tests.
            let skipped: Vec<FactResult> = self
                .rubric
                .requirements
                .iter()
                .filter_map(Requirement::fact)
                .map(|fact| FactResult {
                    fact: fact.name().to_string(),
                    status: Status::Skipped,
                    detail: "compiled only (a pre-screen: no GPU was used), and a trace fact needs one traced launch on a Hopper GPU".into(),
                    flags: Vec::new(),
                })
                .collect();
            evidence.facts = Some(Facts {
                found: skipped,
                missing: None,
            });
            scoring::score(&mut r, &self.rubric, &evidence);
            return r;
        }
        // A traced build that did not compile shows no fact; the tests run as they would.
        let trace_job = match &traced_build {
            Ok(()) => job.trace.clone(),
            Err(why) => {
                let failed = FactResult {
                    fact: String::new(),
                    status: Status::Failed,
                    detail: format!("the traced build (-DWB_TRACE=1) did not compile: {why}"),
                    flags: vec![Flag::new(
                        "compile-error",
                        "the traced build did not compile",
                    )],
                };
                evidence.facts = Some(Facts {
                    found: Vec::new(),
                    missing: Some(failed),
                });
                scoring::score(&mut r, &self.rubric, &evidence);
                None
            }
        };

        // Run, in one child per visibility class, visible tests first: a hidden test's inputs
        // are never in a process (or a loaded module) whose output a student sees.
        let mut results: Vec<RunLine> = Vec::new();
        let mut logs = Vec::new();
        let mut last_outcome: Option<Outcome> = None;
        // The visibility class of the run that was cut short, if one was.
        let mut cut_class: Option<bool> = None;
        // The measured launches of the requirements the binary meets (one child each, public
        // inputs, never timed) run after the visible tests and before any hidden input exists
        // in a process the submission runs in, like everything whose result a student sees.
        // On the simulator, the visible tests' child makes the measured launches itself, after
        // its tests.
        let mut measured = !pending || self.simulate;
        let sim_measure = (self.simulate && pending)
            .then_some(self.rubric.measure_shape)
            .flatten()
            .map(|s| MeasureJob {
                shape: [s.m, s.n, s.k],
                seed: MeasureJob::SEED,
            });
        let mut sim_measured = false;
        for (class, hidden) in [("visible", false), ("hidden", true)] {
            if hidden && !measured {
                self.measure(&mut r, &mut evidence, dir, device, &job);
                measured = true;
            }
            let class_tests: Vec<JobTest> = self
                .rubric
                .tests
                .iter()
                .zip(&tests)
                .filter(|(spec, _)| spec.hidden() == hidden)
                .map(|(_, t)| t.clone())
                .collect();
            // The traced launch runs in the visible tests' child (its inputs are public), which
            // then runs even where the rubric has no visible test.
            let trace = trace_job.clone().filter(|_| !hidden);
            let measure = sim_measure.clone().filter(|_| !hidden);
            if class_tests.is_empty() && trace.is_none() && measure.is_none() {
                continue;
            }
            let run_dir = dir.join(format!("run-{class}"));
            if let Err(e) = copy_cubins(&dir.join("compile"), &run_dir) {
                r.compile.message = format!("{e:#}");
                return r;
            }
            let phase = if self.simulate {
                Phase::Simulate
            } else {
                Phase::Run
            };
            let mut run_job = self.rubric.job(phase, &source, class_tests, &[]);
            run_job.target = job.target.clone();
            run_job.trace = trace;
            if let Some(m) = measure {
                // Every build the compile made, measured once each.
                run_job.dtypes = job.dtypes.clone();
                run_job.measure = Some(m);
            }
            let limit = Duration::from_secs(self.rubric.limits.run_seconds);
            if hidden {
                // Everything a student is shown of time ends here, before any hidden input
                // exists in a process the submission runs in.
                r.visible_elapsed_s = start.elapsed().as_secs_f64();
            }
            let outcome = match self.child(&run_dir, &run_job, device, limit) {
                Ok(o) => o,
                Err(e) => {
                    not_run(
                        &mut r,
                        &format!("the grader could not start the run: {e:#}"),
                    );
                    return r;
                }
            };
            if hidden {
                r.hidden_elapsed_s = outcome.elapsed.as_secs_f64();
            }
            logs.push(format!(
                "[{class} tests: the run {}]\n{}{}",
                outcome.describe(),
                outcome.stdout,
                outcome.stderr
            ));
            // Performance tests the grader skips: under the emulation, and on the simulator.
            let untimed = target == common::Target::Sm90aEmulated || self.simulate;
            let measured_builds: Vec<String> = if run_job.measure.is_some() {
                run_job.dtypes.clone()
            } else {
                Vec::new()
            };
            let (lines, foreign) = own_lines(
                read_results(&run_dir.join("results.jsonl")),
                &run_job.tests,
                |t| t.kind == Kind::Performance && untimed,
                run_job.trace.is_some(),
                &measured_builds,
                class,
            );
            r.grading_flags.extend(foreign);
            if run_job.measure.is_some() {
                sim_measured = true;
                let builds = super::simulated::measured_builds(&lines);
                self.apply_sim_measured(&mut r, &mut evidence, &job, builds, &outcome);
            }
            // Tests a run never finished are named by its outcome.
            let done: Vec<&str> = lines
                .iter()
                .filter_map(|l| match l {
                    RunLine::Test(t) => Some(t.name.as_str()),
                    RunLine::Env(_) | RunLine::Fact(_) | RunLine::Measured { .. } => None,
                })
                .collect();
            let unfinished = self
                .rubric
                .tests
                .iter()
                .any(|t| t.hidden() == hidden && !done.contains(&t.name.as_str()));
            if run_job.trace.is_some() {
                // Facts that did not come back: the run stopped before the traced launch
                // (an earlier test did not finish), or in it (a hang, a crash).
                let (status, detail, flags) = if unfinished {
                    (
                        Status::Error,
                        "not run: an earlier test did not finish".to_string(),
                        Vec::new(),
                    )
                } else {
                    let why = format!(
                        "the traced launch did not report: the run {}: {}",
                        outcome.describe(),
                        last_line(&outcome.stderr)
                    );
                    let flag = match outcome.exit.verdict().0 {
                        Verdict::Hang => "timeout",
                        _ => "worker-crash",
                    };
                    (Status::Failed, why.clone(), vec![Flag::new(flag, why)])
                };
                let missing = FactResult {
                    fact: String::new(),
                    status,
                    detail,
                    flags,
                };
                let facts: Vec<FactResult> = lines
                    .iter()
                    .filter_map(|l| match l {
                        RunLine::Fact(f) => Some(f.clone()),
                        _ => None,
                    })
                    .collect();
                evidence.facts = Some(Facts {
                    found: facts,
                    missing: Some(missing),
                });
                scoring::score(&mut r, &self.rubric, &evidence);
            }
            results.extend(lines);
            if unfinished || last_outcome.is_none() {
                last_outcome = Some(outcome);
            }
            if unfinished {
                cut_class = Some(hidden);
                break;
            }
        }
        if !measured {
            self.measure(&mut r, &mut evidence, dir, device, &job);
        }
        if sim_measure.is_some() && !sim_measured {
            evidence.executions =
                Executions::Skipped("the grading stopped before the measured launch".into());
            scoring::score(&mut r, &self.rubric, &evidence);
        }
        let log = logs.join("\n");
        r.grading_flags
            .extend(log_flood(&log, self.rubric.limits.log_bytes));
        r.worker_log = truncate_log(&log, self.rubric.limits.log_bytes);
        let outcome = last_outcome.unwrap_or(Outcome {
            exit: Exit::Code(0),
            elapsed: Duration::ZERO,
            stdout: String::new(),
            stderr: String::new(),
        });
        let lines = results;
        if let Some(mut env) = lines.iter().find_map(|l| match l {
            RunLine::Env(e) => Some(e.as_ref().clone()),
            RunLine::Test(_) | RunLine::Fact(_) | RunLine::Measured { .. } => None,
        }) {
            // The run describes the GPU as it found it; whether cuBLAS worked there is the
            // probe's finding, which the run does not repeat.
            if let Some(probe) = &r.gpu {
                env.healthy = probe.healthy;
                env.health_detail = probe.health_detail.clone();
            }
            r.gpu = Some(env);
        }
        let results: Vec<TestResult> = lines
            .into_iter()
            .filter_map(|l| match l {
                RunLine::Test(t) => Some(t),
                RunLine::Env(_) | RunLine::Fact(_) | RunLine::Measured { .. } => None,
            })
            .collect();
        apply_results(
            &mut r,
            &self.rubric,
            &results,
            &outcome,
            self.rubric.limits.launch_seconds,
            cut_class,
        );
        r
    }
}

impl Grader {
    /// Measure the requirements present in the binary whose executions are still to count,
    /// and score them into `r`: the measured launches of [`Self::measure_builds`].
    pub(super) fn measure(
        &self,
        r: &mut GradeReport,
        evidence: &mut Evidence,
        dir: &Path,
        device: usize,
        job: &Job,
    ) {
        let builds = self.measure_builds(dir, device, job.target.clone(), &job.dtypes);
        self.score_measured(r, evidence, job, builds);
    }

    /// Score the requirements waiting for their executions on the measured launches a
    /// simulating child reported (`builds`); a build of the compile that has none (the child
    /// stopped before it) failed to show anything, and fails.
    pub(super) fn apply_sim_measured(
        &self,
        r: &mut GradeReport,
        evidence: &mut Evidence,
        job: &Job,
        mut builds: Vec<BuildMeasured>,
        outcome: &Outcome,
    ) {
        for d in &job.dtypes {
            if !builds.iter().any(|b| &b.build == d) {
                builds.push(BuildMeasured {
                    build: d.clone(),
                    measured: Measured::Failed {
                        detail: format!(
                            "the simulating child {} before its measured launch reported",
                            outcome.describe()
                        ),
                        flags: Vec::new(),
                    },
                });
            }
        }
        self.score_measured(r, evidence, job, builds);
    }

    /// The measured `builds` as evidence, at the rubric's measured shape, and the requirements
    /// scored on them.
    fn score_measured(
        &self,
        r: &mut GradeReport,
        evidence: &mut Evidence,
        job: &Job,
        builds: Vec<BuildMeasured>,
    ) {
        let spec = match job.spec() {
            Ok(spec) => spec,
            Err(e) => {
                r.compile.message = format!("{e:#}");
                return;
            }
        };
        let Some(shape) = self.rubric.measure_shape else {
            return;
        };
        evidence.executions = Executions::Measured {
            builds,
            kernel: spec.shape(),
            shape,
        };
        scoring::score(r, &self.rubric, evidence);
    }

    /// One measured launch per dtype build in `dtypes` (the builds the compile child left in
    /// `dir/compile`), each in a confined measuring child of its own, after the tests: a fresh
    /// process, so the counting never touches a timed launch.
    pub(super) fn measure_builds(
        &self,
        dir: &Path,
        device: usize,
        target: Option<String>,
        dtypes: &[String],
    ) -> Vec<BuildMeasured> {
        let Some(shape) = self.rubric.measure_shape else {
            return Vec::new();
        };
        let missing = self
            .child_env
            .iter()
            .find(|(k, _)| k == CUPTI_MISSING_ENV)
            .map(|(_, why)| why.clone());
        dtypes
            .iter()
            .map(|d| {
                let measured = match &missing {
                    Some(why) => Measured::Error(why.clone()),
                    None => self
                        .measure_one(dir, device, target.clone(), d, shape)
                        .unwrap_or_else(|e| Measured::Error(format!("{e:#}"))),
                };
                BuildMeasured {
                    build: d.clone(),
                    measured,
                }
            })
            .collect()
    }

    fn measure_one(
        &self,
        dir: &Path,
        device: usize,
        target: Option<String>,
        dtype: &str,
        shape: common::Shape,
    ) -> Result<Measured> {
        use anyhow::Context;
        let mdir = dir.join(format!("measure-{dtype}"));
        std::fs::create_dir_all(&mdir)
            .with_context(|| format!("cannot create {}", mdir.display()))?;
        let name = format!("cubin-{dtype}.bin");
        std::fs::copy(dir.join("compile").join(&name), mdir.join(&name))
            .with_context(|| format!("no {name} from the compile"))?;
        let mut job = self.rubric.job(Phase::Measure, "", Vec::new(), &[]);
        job.dtypes = vec![dtype.to_string()];
        job.target = target;
        job.measure = Some(MeasureJob {
            shape: [shape.m, shape.n, shape.k],
            seed: MeasureJob::SEED,
        });
        // The launch's own limit, and room for the GPU's start, the reference and CUPTI.
        let limit = Duration::from_secs(self.rubric.limits.launch_seconds + 120);
        let o = self.child(&mdir, &job, device, limit)?;
        Ok(read_measured(&mdir, &o))
    }
}

/// What a measuring child's folder holds when it is done, or the grader's account of why not:
/// a hang or a crash during the launch is the kernel's failure, a missing report before it the
/// grader's.
pub fn read_measured(dir: &Path, outcome: &Outcome) -> Measured {
    match std::fs::read(dir.join(MEASURED_FILE)) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            Measured::Error(format!("the measuring child's report is malformed: {e}"))
        }),
        Err(_) => {
            let launched = dir.join(LAUNCHING_FILE).exists();
            let why = format!(
                "the measuring child {}: {}",
                outcome.describe(),
                outcome
                    .stderr
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .chars()
                    .take(300)
                    .collect::<String>()
            );
            if launched {
                let flag = match outcome.exit.verdict().0 {
                    Verdict::Hang => "timeout",
                    _ => "worker-crash",
                };
                Measured::Failed {
                    detail: why.clone(),
                    flags: vec![Flag::new(flag, why)],
                }
            } else {
                Measured::Error(why)
            }
        }
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// The submission's text (UTF-8, within the size limit) and its SHA-256.
/// The include screen and, for a Blackwell rubric, the architecture rules: what refuses a
/// source before anything compiles it.
///
/// The names that could tell the GPU emulation's build from the native one are refused only
/// where the emulation grades (`simulate` false): the simulator runs the native build itself, so
/// a kernel that tells the builds apart only does its own native work.
fn screen(
    source: &str,
    arch: common::step::Arch,
    skip_screen: bool,
    simulate: bool,
) -> Result<(), String> {
    if !skip_screen {
        policy::check(source).map_err(|v| v.to_string())?;
    }
    if arch == common::step::Arch::Blackwell && !simulate {
        policy::check_arch_neutral(source).map_err(|v| v.to_string())?;
    }
    Ok(())
}

/// Whether `sub` can be graded at all (one `.cu` file, within the size limit, UTF-8 text that
/// passes the screen), found without the secret, a toolkit or a GPU: a submission that fails
/// here is graded "rejected" on any machine, so the grader says so before it asks for either.
pub fn precheck(
    sub: &Submission,
    rubric: &Rubric,
    skip_screen: bool,
    simulate: bool,
) -> Result<()> {
    let (source, _) = read_source(sub, rubric.limits.source_bytes)?;
    screen(&source, rubric.arch, skip_screen, simulate)
        .map_err(|v| anyhow!("refused before compiling: kernel.cu {v}"))
}

fn read_source(sub: &Submission, limit: usize) -> Result<(String, String)> {
    let path = sub.kernel_file()?;
    // A link could point the grader (which reads as the instructor) at any file of the machine.
    let meta = std::fs::symlink_metadata(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    if !meta.file_type().is_file() {
        bail!(
            "{} is not a regular file (links are refused)",
            path.display()
        );
    }
    if meta.len() as usize > limit {
        bail!(
            "{} is {} bytes; submissions are limited to {limit}",
            path.display(),
            meta.len()
        );
    }
    let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
    let sha = sha256_hex(&bytes);
    let text =
        String::from_utf8(bytes).map_err(|_| anyhow!("{} is not UTF-8 text", path.display()))?;
    Ok((text, sha))
}

/// The names whose compiler messages a student may see: the submission's and the headers'.
pub fn own_files() -> Vec<&'static str> {
    let mut v = vec![SOURCE_NAME];
    v.extend(policy::allowed_headers());
    v
}

/// A compiler log as a student may see it: only messages about [`own_files`], capped.
fn student_log(log: &str, cap: usize) -> String {
    truncate_log(&super::diagnostics::student_log(log, &own_files()), cap)
}

/// What NVRTC says when a file an `#include` names cannot be opened: under the confinement, any
/// file outside the toolkit and the workbook's (built-in) headers.
const CANNOT_OPEN: [&str; 2] = ["cannot open source file", "could not open source file"];

/// The flag of a compile whose raw logs (before the diagnostics filter) show an include the
/// compiler could not open.
fn blocked_include(logs: &[&str]) -> Option<Flag> {
    logs.iter()
        .any(|l| CANNOT_OPEN.iter().any(|m| l.contains(m)))
        .then(|| {
            Flag::new(
                "blocked-include",
                "the kernel includes a file the compiler could not open: the grading children read only the toolkit and the workbook's own headers, so the include reached nothing",
            )
        })
}

/// What the compile child came to.
struct CompileOutcome {
    report: CompileReport,
    /// Flags of what its raw logs show.
    flags: Vec<Flag>,
    /// The SASS of its native builds, where the job asked for it.
    sass: Vec<BuildSass>,
    /// The traced build, where the job asked for it: `Err` is its first message as a student
    /// may see it.
    traced: Option<Result<(), String>>,
}

fn compile_outcome(
    outcome: Result<Outcome>,
    report: &Path,
    rubric: &Rubric,
) -> Result<CompileOutcome> {
    let outcome = outcome?;
    let entries: Option<Vec<CompiledDtype>> = std::fs::read(report)
        .ok()
        .map(|b| serde_json::from_slice(&b))
        .transpose()?;
    let mut logs: Vec<&str> = vec![&outcome.stderr];
    logs.extend(entries.iter().flatten().map(|e| e.log.as_str()));
    let flags: Vec<Flag> = blocked_include(&logs).into_iter().collect();
    let traced = entries.iter().flatten().find(|e| e.traced).map(|e| {
        if e.ok {
            Ok(())
        } else {
            let shown = student_log(&e.log, rubric.limits.log_bytes);
            Err(shown
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no message of the submission's own file")
                .chars()
                .take(300)
                .collect())
        }
    });
    // The traced build decides the trace facts alone, not the compile's status or resources.
    let entries: Option<Vec<CompiledDtype>> =
        entries.map(|v| v.into_iter().filter(|e| !e.traced).collect());
    let sass: Vec<BuildSass> = entries
        .iter()
        .flatten()
        .filter_map(|e| {
            e.sass.clone().map(|histogram| BuildSass {
                build: e.dtype.clone(),
                histogram,
            })
        })
        .collect();
    Ok(CompileOutcome {
        report: compile_report(&outcome, entries, rubric),
        flags,
        sass,
        traced,
    })
}

fn compile_report(
    outcome: &Outcome,
    entries: Option<Vec<CompiledDtype>>,
    rubric: &Rubric,
) -> CompileReport {
    let cap = rubric.limits.log_bytes;
    if outcome.exit == Exit::TimedOut {
        return CompileReport {
            status: CompileStatus::Timeout,
            message: format!(
                "compiling took longer than {:.0} s: the compiler was stopped",
                outcome.elapsed.as_secs_f64()
            ),
            log: String::new(),
            registers: 0,
            spill_bytes: 0,
            compile_ms: outcome.elapsed.as_secs_f64() * 1e3,
        };
    }
    let entries = match entries {
        Some(e) => e,
        None => {
            return CompileReport {
                status: CompileStatus::Error,
                message: format!("the compiler process {}", outcome.describe()),
                log: student_log(&outcome.stderr, cap),
                registers: 0,
                spill_bytes: 0,
                compile_ms: 0.0,
            }
        }
    };
    let failed: Vec<&CompiledDtype> = entries.iter().filter(|e| !e.ok).collect();
    if let Some(f) = failed.first() {
        CompileReport {
            status: CompileStatus::Failed,
            message: format!("the kernel does not compile for {}", f.dtype),
            log: student_log(&f.log, cap),
            registers: 0,
            spill_bytes: 0,
            compile_ms: 0.0,
        }
    } else {
        // The launched builds; a Blackwell kernel's extra native sm_100a entries (named
        // "f16 (native sm_100a)") carry no NVRTC version or log of their own.
        let launched: Vec<&CompiledDtype> = entries
            .iter()
            .filter(|e| !e.nvrtc_version.is_empty())
            .collect();
        let dtypes: Vec<&str> = launched.iter().map(|e| e.dtype.as_str()).collect();
        CompileReport {
            status: CompileStatus::Ok,
            message: format!(
                "compiled for {} with NVRTC {}",
                dtypes.join(" and "),
                launched.first().map_or("", |e| e.nvrtc_version.as_str())
            ),
            log: launched
                .first()
                .map_or(String::new(), |e| student_log(&e.log, cap)),
            registers: entries.iter().map(|e| e.registers).max().unwrap_or(0),
            spill_bytes: entries.iter().map(|e| e.spill_bytes).max().unwrap_or(0),
            compile_ms: entries.iter().map(|e| e.compile_ms).sum(),
        }
    }
}

fn copy_cubins(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)?.filter_map(|e| e.ok()) {
        let name = e.file_name();
        // The builds a run loads: cubins for the GPU, PTX for the simulator.
        let name_s = name.to_string_lossy();
        if name_s.starts_with("cubin-") || name_s.starts_with("ptx-") {
            std::fs::copy(e.path(), to.join(&name))?;
        }
    }
    Ok(())
}

/// What a run child may report: the GPU it found, each of its own tests once (skipped only
/// where `may_skip` says the grader skips it), and the trace facts where its job had the traced
/// launch, and each measured build once where its job had the measured launch (`measured`: the
/// builds). The worker writes nothing else, so anything else comes from a child whose memory
/// the kernel wrote (or from a hidden-test child speaking for a visible test): it is dropped
/// and flagged for the instructor (`foreign-result`), and never reaches a student.
pub fn own_lines(
    lines: Vec<RunLine>,
    tests: &[JobTest],
    may_skip: impl Fn(&JobTest) -> bool,
    traced: bool,
    measured: &[String],
    class: &str,
) -> (Vec<RunLine>, Option<Flag>) {
    let mut kept = Vec::new();
    let mut dropped: Vec<String> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for line in lines {
        let why = match &line {
            RunLine::Env(_) => None,
            RunLine::Fact(f) if traced => (seen.contains(&format!("fact {}", f.fact)))
                .then(|| format!("fact {:?} twice", f.fact)),
            RunLine::Fact(f) => Some(format!(
                "fact {:?} from a run without the traced launch",
                f.fact
            )),
            RunLine::Measured { build, .. } if !measured.contains(build) => Some(format!(
                "a measured launch of {build:?} from a run that was not asked for it"
            )),
            RunLine::Measured { build, .. } => (seen.contains(&format!("measured {build}")))
                .then(|| format!("measured launch of {build:?} twice")),
            RunLine::Test(t) => match tests.iter().find(|j| j.name == t.name) {
                None => Some(format!("test {:?}, not one of this run's", t.name)),
                Some(_) if seen.contains(&format!("test {}", t.name)) => {
                    Some(format!("test {:?} twice", t.name))
                }
                Some(j) if t.status == Status::Skipped && !may_skip(j) => Some(format!(
                    "test {:?} skipped, which the grader does not do here",
                    t.name
                )),
                Some(_) => None,
            },
        };
        match why {
            Some(w) => dropped.push(w),
            None => {
                match &line {
                    RunLine::Test(t) => seen.push(format!("test {}", t.name)),
                    RunLine::Fact(f) => seen.push(format!("fact {}", f.fact)),
                    RunLine::Measured { build, .. } => seen.push(format!("measured {build}")),
                    RunLine::Env(_) => {}
                }
                kept.push(line);
            }
        }
    }
    let flag = (!dropped.is_empty()).then(|| {
        Flag::new(
            "foreign-result",
            format!(
                "the {class} tests' run reported what it was not asked (dropped: {}): the grader's worker writes no such line, so the kernel wrote into the worker's memory",
                truncate_log(&dropped.join("; "), 1024)
            ),
        )
    });
    (kept, flag)
}

fn read_results(path: &Path) -> Vec<RunLine> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Fill the report's tests from what the run children wrote, naming what happened to the tests
/// the run of `cut_class` (hidden or not; `None`: any) never finished (a hang, the run's time
/// limit, a crash), and score them.
pub fn apply_results(
    r: &mut GradeReport,
    rubric: &Rubric,
    results: &[TestResult],
    outcome: &Outcome,
    launch_seconds: u64,
    cut_class: Option<bool>,
) {
    let mut cut_short = false;
    for (t, spec) in r.tests.iter_mut().zip(&rubric.tests) {
        let in_cut_run = cut_class.is_none_or(|h| h == spec.hidden());
        if let Some(res) = results.iter().find(|x| x.name == t.name) {
            t.status = res.status;
            t.detail = res.detail.clone();
            t.flags = res.flags.clone();
            t.launches = res.launches;
            t.timing = res.timing.clone();
        } else if !cut_short && in_cut_run {
            cut_short = true;
            // The worker's exit status by the one contract (`Verdict`).
            let (status, flag, why) = match (outcome.exit.verdict().0, &outcome.exit) {
                (Verdict::Hang, Exit::TimedOut) => (
                    Status::Timeout,
                    "timeout",
                    format!("the run passed its limit of {} s and was killed with its process group", rubric.limits.run_seconds),
                ),
                (Verdict::Hang, _) => (
                    Status::Timeout,
                    "timeout",
                    format!("a launch did not finish within {launch_seconds} s (a hang); the run was stopped"),
                ),
                (Verdict::Verified, _) => (Status::Error, "grader-error", "the run ended without a result for this test".into()),
                // The emulator recorded a fault, but the kernel had not ended by the launch limit
                // (its trap was late): the worker reported the fault and stopped at once.
                (Verdict::Error, Exit::Code(_)) if last_line(&outcome.stderr).contains(common::emulation::FAULT_PREFIX) => (
                    Status::Failed,
                    "kernel-fault",
                    last_line(&outcome.stderr).trim_start_matches("error: ").to_string(),
                ),
                _ => (
                    Status::Error,
                    "worker-crash",
                    format!(
                        "the run {}: {}",
                        outcome.describe(),
                        last_line(&outcome.stderr)
                    ),
                ),
            };
            t.status = status;
            t.detail = why.clone();
            t.flags = vec![Flag::new(flag, why)];
        } else {
            t.status = Status::Error;
            t.detail = "not run: an earlier test did not finish".into();
            t.flags = Vec::new();
        }
        score(t, spec);
    }
}

/// Points for one test: all or nothing for correctness; the band of its speed for
/// performance; skipped tests count neither way. A speed above `suspicious_above` is flagged
/// and keeps its score; a speed above the GPU's peak is physically impossible, so the test
/// fails (pending the instructor's review of the kernel).
pub fn score(t: &mut TestReport, spec: &super::rubric::Test) {
    t.max_score = if t.status == Status::Skipped {
        0.0
    } else {
        spec.points
    };
    t.score = match (t.status, spec.kind, &t.timing) {
        (Status::Passed, Kind::Correctness, _) => spec.points,
        (Status::Passed, Kind::Performance, Some(timing)) => {
            if timing.ratio > spec.suspicious_above {
                t.flags.push(Flag::new(
                    "suspiciously-fast",
                    format!(
                        "{:.2}x cuBLAS is above the rubric's suspicious_above ({:.2}x): review the kernel",
                        timing.ratio, spec.suspicious_above
                    ),
                ));
            }
            if let Some(peak) = timing.peak_tflops.filter(|&p| timing.tflops > p) {
                t.flags.push(Flag::new(
                    "faster-than-peak",
                    format!("{:.0} TFLOP/s is above this GPU's peak of {peak:.0} TFLOP/s: the timing cannot be right, so the test fails pending review", timing.tflops),
                ));
                t.status = Status::Failed;
                t.detail = format!("failed pending review: {}", t.detail);
                t.score = 0.0;
                return;
            }
            spec.points * spec.band_fraction(timing.ratio)
        }
        _ => 0.0,
    };
}

/// The flag of run logs over the rubric's cap (each child's output is already cut to the cap
/// when read, with a note; the report keeps the cap's worth of their head and tail).
fn log_flood(log: &str, cap: usize) -> Option<Flag> {
    (log.len() > cap || log.contains(sandbox::CUT_NOTE)).then(|| {
        Flag::new(
            "log-flood",
            format!("the run wrote more output than the log limit of {cap} bytes: the report keeps its first and last {} bytes", cap / 2),
        )
    })
}

/// The last non-empty line of a child's output.
fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::super::job::TimingResult;
    use super::super::report::tests::sample;
    use super::*;

    fn rubric() -> Rubric {
        Rubric::parse(
            r#"
name = "t"
step = 0
arch = "sm_90a"
[[tests]]
name = "public"
kind = "correctness"
shape = [256, 256, 128]
points = 10
seed = 1
[[tests]]
name = "hidden"
kind = "correctness"
shape = [256, 256, 128]
points = 10
visibility = "hidden"
[[tests]]
name = "speed"
kind = "performance"
shape = [256, 256, 128]
points = 10
seed = 2
suspicious_above = 1.2
bands = [{ ratio = 0.8, fraction = 1.0 }, { ratio = 0.0, fraction = 0.5 }]
"#,
        )
        .unwrap()
    }

    fn grader(secret: Option<&str>) -> Grader {
        Grader {
            rubric: rubric(),
            rubric_path: "r.toml".into(),
            secret: secret.map(|s| Secret::new(s.as_bytes().to_vec()).unwrap()),
            replay: None,
            exe: "/bin/false".into(),
            scratch: std::env::temp_dir(),
            keep_scratch: false,
            child_env: Vec::new(),
            confinement: Confinement::Landlock(7),
            compile_only: false,
            skip_screen: false,
            simulate: false,
            cleanup: None,
        }
    }

    #[test]
    fn hidden_seeds_need_the_secret_and_differ_per_student() {
        let e = grader(None).seeds("alice").unwrap_err();
        assert!(e.to_string().contains("--secret-file"), "{e}");
        let g = grader(Some("an instructor secret of length"));
        let (a, b) = (g.seeds("alice").unwrap(), g.seeds("bob").unwrap());
        assert_eq!(a[0], b[0], "visible tests are the same for everyone");
        assert_ne!(a[1], b[1], "hidden tests differ per student");
        assert_eq!(a[1].sets.len(), 2);
        assert_eq!(a[2].sets.len(), 4);
        let other = grader(Some("another instructor secret here"));
        assert_ne!(other.seeds("alice").unwrap()[1], a[1]);
        // A replay uses the recorded seeds, without the secret.
        let mut replay = grader(None);
        replay.replay = Some(
            g.rubric
                .tests
                .iter()
                .map(|t| t.name.clone())
                .zip(a.clone())
                .collect(),
        );
        assert_eq!(replay.seeds("whoever").unwrap(), a);
    }

    fn outcome(exit: Exit) -> Outcome {
        Outcome {
            exit,
            elapsed: Duration::from_secs(3),
            stdout: String::new(),
            stderr: "error: boom\n".into(),
        }
    }

    fn passed(name: &str, timing: Option<TimingResult>) -> TestResult {
        TestResult {
            name: name.into(),
            status: Status::Passed,
            launches: 2,
            flags: Vec::new(),
            detail: "ok".into(),
            timing,
        }
    }

    #[test]
    fn a_run_cut_short_names_the_test_it_stopped_in() {
        let rubric = rubric();
        for (exit, status, flag) in [
            (Exit::TimedOut, Status::Timeout, "timeout"),
            (Exit::Code(124), Status::Timeout, "timeout"),
            (Exit::Signal(9), Status::Error, "worker-crash"),
        ] {
            let mut r = sample("alice", None);
            apply_results(
                &mut r,
                &rubric,
                &[passed("public", None)],
                &outcome(exit.clone()),
                20,
                None,
            );
            r.tally();
            assert_eq!(r.tests[0].status, Status::Passed);
            assert_eq!(r.tests[1].status, status, "{exit:?}");
            assert_eq!(r.tests[1].flags[0].name, flag);
            assert_eq!(r.tests[2].status, Status::Error);
            assert!(r.tests[2].detail.contains("not run"));
            assert_eq!(r.score, 10.0);
        }
    }

    #[test]
    fn the_test_named_is_one_of_the_run_that_was_cut_short() {
        // The hidden run finished; the visible run hung in "speed", after "public" passed.
        let rubric = rubric();
        let mut r = sample("alice", None);
        apply_results(
            &mut r,
            &rubric,
            &[passed("public", None), passed("hidden", None)],
            &outcome(Exit::TimedOut),
            20,
            Some(false),
        );
        assert_eq!(r.tests[1].status, Status::Passed);
        assert_eq!(r.tests[2].status, Status::Timeout);
        // The visible run crashed before any result: its first test, not the hidden one, is
        // named; the hidden test, never run, is "not run".
        let mut r = sample("alice", None);
        apply_results(
            &mut r,
            &rubric,
            &[],
            &outcome(Exit::Signal(9)),
            20,
            Some(false),
        );
        assert_eq!(r.tests[0].flags[0].name, "worker-crash");
        assert!(r.tests[1].flags.is_empty());
        assert!(r.tests[1].detail.contains("not run"));
    }

    #[test]
    fn a_fault_reported_at_the_launch_limit_is_a_kernel_fault() {
        let rubric = rubric();
        let mut r = sample("alice", None);
        let mut o = outcome(Exit::Code(2));
        o.stderr = "error: tcgen05 emulation fault in CTA 1, warp 0, lane 0: rule wait-for-peer-commits: x\n".into();
        apply_results(&mut r, &rubric, &[passed("public", None)], &o, 20, None);
        assert_eq!(r.tests[1].status, Status::Failed);
        assert_eq!(r.tests[1].flags[0].name, "kernel-fault");
        assert!(r.tests[1]
            .detail
            .starts_with("tcgen05 emulation fault in CTA 1"));
        // Any other exit 2 is the worker's own failure.
        let mut r = sample("alice", None);
        apply_results(
            &mut r,
            &rubric,
            &[passed("public", None)],
            &outcome(Exit::Code(2)),
            20,
            None,
        );
        assert_eq!(r.tests[1].flags[0].name, "worker-crash");
    }

    #[test]
    fn speed_is_scored_by_band_and_flagged_when_implausible() {
        let rubric = rubric();
        let timing = |ratio: f64, tflops: f64| TimingResult {
            kernel_median_us: 1.0,
            kernel_min_us: 1.0,
            kernel_max_us: 1.0,
            cublas_median_us: ratio,
            cublas_min_us: ratio,
            ratio,
            tflops,
            cublas_tflops: 1.0,
            peak_tflops: Some(989.0),
            timed_launches: 10,
            input_sets: 4,
            l2_flushed: true,
        };
        let mut r = sample("alice", None);
        let results = [
            passed("public", None),
            passed("hidden", None),
            passed("speed", Some(timing(0.5, 400.0))),
        ];
        apply_results(&mut r, &rubric, &results, &outcome(Exit::Code(0)), 20, None);
        r.tally();
        assert_eq!((r.score, r.max_score), (25.0, 30.0));
        assert!(r.flags.is_empty(), "{:?}", r.flags);
        let results = [
            passed("public", None),
            passed("hidden", None),
            passed("speed", Some(timing(1.5, 1200.0))),
        ];
        apply_results(&mut r, &rubric, &results, &outcome(Exit::Code(0)), 20, None);
        r.tally();
        // Above the peak: failed pending review.
        assert_eq!(r.score, 20.0);
        assert_eq!(r.tests[2].status, Status::Failed);
        assert!(r.tests[2].detail.starts_with("failed pending review"));
        assert_eq!(
            r.flags,
            vec![
                "suspiciously-fast".to_string(),
                "faster-than-peak".to_string()
            ]
        );
        // Suspiciously fast but physically possible: flagged, the score stands.
        let results = [
            passed("public", None),
            passed("hidden", None),
            passed("speed", Some(timing(1.5, 900.0))),
        ];
        apply_results(&mut r, &rubric, &results, &outcome(Exit::Code(0)), 20, None);
        r.tally();
        assert_eq!(r.score, 30.0);
        assert_eq!(r.flags, vec!["suspiciously-fast".to_string()]);
    }

    #[test]
    fn a_traced_build_that_fails_costs_the_facts_alone_and_shows_only_the_students_lines() {
        let d = std::env::temp_dir().join(format!("grade-traced-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let entry = |dtype: &str, ok: bool, log: &str, traced: bool| CompiledDtype {
            dtype: dtype.into(),
            ok,
            log: log.into(),
            registers: if traced { 200 } else { 90 },
            spill_bytes: 0,
            compile_ms: 10.0,
            nvrtc_version: "13.0".into(),
            sass: None,
            traced,
        };
        let entries = vec![
            entry("f16", true, "", false),
            entry("bf16", true, "", false),
            entry(
                "f16 (traced)",
                false,
                "/etc/passwd(1): error: root:x:0:0\nkernel.cu(12): error: identifier \"t\" is undefined\n",
                true,
            ),
        ];
        let path = d.join("compile.json");
        std::fs::write(&path, serde_json::to_vec(&entries).unwrap()).unwrap();
        let o = compile_outcome(Ok(outcome(Exit::Code(0))), &path, &rubric()).unwrap();
        // The compile is the launched builds': ok, their registers, no traced build named.
        assert_eq!(o.report.status, CompileStatus::Ok);
        assert_eq!(
            o.report.message,
            "compiled for f16 and bf16 with NVRTC 13.0"
        );
        assert_eq!(o.report.registers, 90);
        // The traced build's first line a student may see, never the toolkit's or the system's.
        assert_eq!(
            o.traced,
            Some(Err(
                "kernel.cu(12): error: identifier \"t\" is undefined".to_string()
            ))
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    /// A stand-in for `runner grade-worker` (no GPU, no NVRTC): it keeps its job, "compiles"
    /// by writing a report and an empty cubin, and "runs" by writing results. Its hidden-test
    /// run takes `HIDDEN_SECONDS` and also speaks for the visible test "public", with a detail
    /// computed from its (hidden) inputs, as a kernel that wrote into its worker could.
    const FAKE_WORKER: &str = r#"#!/bin/sh
cat > job.json
case "$3" in
compile)
  printf '[{"dtype":"f16","ok":true,"log":"","registers":1,"spill_bytes":0,"compile_ms":1.0,"nvrtc_version":"13.0"}]' > compile.json
  : > cubin-f16.bin ;;
run)
  if grep -q '"name":"hidden"' job.json; then
    sleep HIDDEN_SECONDS
    echo '{"test":{"name":"hidden","status":"failed","launches":1,"flags":[{"name":"wrong-result","detail":"C[3][4] = 17.5, expected 2"}],"detail":"C[3][4] = 17.5, expected 2","timing":null}}' >> results.jsonl
    echo '{"test":{"name":"public","status":"failed","launches":1,"flags":[{"name":"hidden-value-17.5","detail":"x"}],"detail":"C[0][0] = 17.5, expected 1","timing":null}}' >> results.jsonl
    echo '{"test":{"name":"speed","status":"skipped","launches":0,"flags":[],"detail":"skipped","timing":null}}' >> results.jsonl
  else
    echo '{"test":{"name":"public","status":"passed","launches":2,"flags":[],"detail":"2 launches verified","timing":null}}' >> results.jsonl
    echo '{"test":{"name":"speed","status":"failed","launches":1,"flags":[],"detail":"too slow","timing":null}}' >> results.jsonl
  fi ;;
esac
"#;

    #[test]
    fn the_visible_phase_knows_nothing_hidden_and_the_hidden_one_cannot_speak_for_it() {
        let d = std::env::temp_dir().join(format!("grade-phases-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("alice")).unwrap();
        let worker = d.join("worker.sh");
        std::fs::write(&worker, FAKE_WORKER.replace("HIDDEN_SECONDS", "3")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&worker, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(
            d.join("alice/kernel.cu"),
            "#include \"hopper.cuh\"\nextern \"C\" __global__ void gemm_kernel() {}\n",
        )
        .unwrap();
        let mut g = grader(Some("an instructor secret of length"));
        g.exe = worker;
        g.scratch = d.join("scratch");
        g.keep_scratch = true;
        g.child_env = vec![("PATH".into(), "/usr/bin:/bin".into())];
        let env = EnvInfo {
            name: "a GPU of the test".into(),
            compute_capability: (9, 0),
            ..Default::default()
        };
        let sub = Submission {
            student: "alice".into(),
            path: d.join("alice"),
        };
        let r = g.grade(&sub, 0, &env);
        // The visible run's job holds the visible tests only: no hidden name, shape or seed.
        let run_dir = std::fs::read_dir(&g.scratch)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| p.join("run-visible").is_dir())
            .expect("the grading's scratch folder");
        let visible: Job =
            serde_json::from_slice(&std::fs::read(run_dir.join("run-visible/job.json")).unwrap())
                .unwrap();
        let names: Vec<&str> = visible.tests.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["public", "speed"]);
        let hidden_seeds = &r.tests[1].seeds;
        let text = String::from_utf8(std::fs::read(run_dir.join("run-visible/job.json")).unwrap())
            .unwrap();
        for seed in hidden_seeds.sets.iter().chain([&hidden_seeds.decoy]) {
            assert!(
                !text.contains(&seed.to_string()),
                "a hidden seed in the visible job"
            );
        }
        // What the hidden run said about visible tests was dropped and flagged; the visible
        // test keeps its own result, with nothing of the hidden inputs in it.
        assert_eq!(r.tests[0].status, Status::Passed, "{:?}", r.tests[0]);
        assert_eq!(r.tests[0].detail, "2 launches verified");
        assert_eq!(r.tests[2].status, Status::Failed);
        assert_eq!(r.tests[1].status, Status::Failed);
        let foreign: Vec<&Flag> = r
            .grading_flags
            .iter()
            .filter(|f| f.name == "foreign-result")
            .collect();
        assert_eq!(foreign.len(), 1, "{:?}", r.grading_flags);
        assert!(
            foreign[0].detail.contains("\"public\""),
            "{}",
            foreign[0].detail
        );
        assert!(
            foreign[0].detail.contains("\"speed\""),
            "{}",
            foreign[0].detail
        );
        let shown = serde_json::to_string(&super::super::report::gradescope_results(&r)).unwrap();
        assert!(!shown.contains("17.5"), "{shown}");
        assert!(!shown.contains("wrong-result"), "{shown}");
        // The time a student sees is the visible phase's; the hidden run's 3 s are the
        // instructor's alone.
        assert!(r.hidden_elapsed_s >= 3.0, "{}", r.hidden_elapsed_s);
        assert!(r.visible_elapsed_s < 2.0, "{}", r.visible_elapsed_s);
        assert!(r.elapsed_s >= 3.0);
        let v: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert!(v["execution_time"].as_u64().unwrap() <= 2, "{v}");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_run_reports_only_its_own_tests_each_once() {
        let tests: Vec<JobTest> = grader(Some("an instructor secret of length")).job_tests(
            &grader(Some("an instructor secret of length"))
                .seeds("bob")
                .unwrap(),
        );
        let mine: Vec<JobTest> = tests.into_iter().filter(|t| t.name != "hidden").collect();
        let line = |name: &str, status: Status| {
            RunLine::Test(TestResult {
                name: name.into(),
                status,
                launches: 1,
                flags: Vec::new(),
                detail: String::new(),
                timing: None,
            })
        };
        let fact = RunLine::Fact(FactResult {
            fact: "dedicated-store-warp".into(),
            status: Status::Passed,
            detail: String::new(),
            flags: Vec::new(),
        });
        let lines = vec![
            RunLine::Env(Box::default()),
            line("public", Status::Passed),
            line("public", Status::Failed),
            line("hidden", Status::Failed),
            line("speed", Status::Skipped),
            fact.clone(),
        ];
        // Not traced, no skip allowed: the env and the first "public" only.
        let (kept, flag) = own_lines(lines.clone(), &mine, |_| false, false, &[], "visible");
        assert_eq!(kept.len(), 2);
        let detail = flag.unwrap().detail;
        for why in [
            "\"public\" twice",
            "\"hidden\", not one",
            "\"speed\" skipped",
            "without the traced launch",
        ] {
            assert!(detail.contains(why), "{why}: {detail}");
        }
        // A skip the grader makes (a performance test under emulation) and the traced launch's
        // fact are the run's own.
        let (kept, flag) = own_lines(
            vec![line("speed", Status::Skipped), fact],
            &mine,
            |t| t.kind == Kind::Performance,
            true,
            &[],
            "visible",
        );
        assert_eq!(kept.len(), 2);
        assert!(flag.is_none());
    }

    #[test]
    fn folders_hold_exactly_one_kernel() {
        let d = std::env::temp_dir().join(format!("grade-sub-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let sub = Submission {
            student: "x".into(),
            path: d.clone(),
        };
        std::os::unix::fs::symlink("/etc/passwd", d.join("link.cu")).unwrap();
        let e = read_source(&sub, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("links are refused"), "{e}");
        std::fs::remove_file(d.join("link.cu")).unwrap();
        assert!(sub
            .kernel_file()
            .unwrap_err()
            .to_string()
            .contains("no .cu file"));
        std::fs::write(d.join("a.cu"), "").unwrap();
        assert_eq!(sub.kernel_file().unwrap(), d.join("a.cu"));
        std::fs::write(d.join("b.cu"), "").unwrap();
        assert!(sub
            .kernel_file()
            .unwrap_err()
            .to_string()
            .contains("2 .cu files (a.cu, b.cu)"));
        let _ = std::fs::remove_dir_all(&d);
        assert_eq!(safe_name("bob smith/../x"), "bob_smith_.._x");
        assert_eq!(safe_name(".hidden"), "_.hidden");
    }

    /// Percent-decoding, to show the folder names give the student's name back.
    fn decode(folder: &str) -> String {
        let b = folder.as_bytes();
        let (mut out, mut i) = (Vec::new(), 0);
        while i < b.len() {
            if b[i] == b'%' && i + 3 <= b.len() {
                out.push(u8::from_str_radix(&folder[i + 1..i + 3], 16).unwrap());
                i += 3;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn report_folders_are_unique_and_give_the_name_back() {
        let names = [
            "alice",
            "王伟",
            "李娜",
            "éve",
            "ève",
            "carol smith",
            "carol_smith",
            "carol%20smith",
            "bob/../x",
            ".hidden",
            "..",
            "a.b-c_d",
            "gradescope-4242+777",
        ];
        let folders: Vec<String> = names.iter().map(|n| report_folder(n)).collect();
        let mut unique = folders.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{folders:?}");
        for (n, f) in names.iter().zip(&folders) {
            assert!(
                f.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"%._-".contains(&b)),
                "{f}"
            );
            assert!(!f.starts_with('.') && !f.is_empty(), "{f}");
            assert_eq!(&decode(f), n, "{f}");
        }
        assert_eq!(report_folder("alice"), "alice");
        assert_eq!(report_folder("王伟"), "%E7%8E%8B%E4%BC%9F");
        assert_eq!(report_folder("carol smith"), "carol%20smith");
        // A long name stays under the file system's limit, and distinct.
        let long_a = "名".repeat(100);
        let long_b = format!("{}字", "名".repeat(99));
        let (fa, fb) = (report_folder(&long_a), report_folder(&long_b));
        assert!(fa.len() <= 120 && fb.len() <= 120, "{fa} {fb}");
        assert_ne!(fa, fb);
        assert_eq!(report_folder(""), "%");
    }
}
