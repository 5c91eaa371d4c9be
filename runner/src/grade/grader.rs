//! The grader: one submission graded in stages, each in the children it needs. Its seeds are
//! derived, its text admitted (read and screened) and its target chosen; it is compiled in a
//! child of its own (the requirements scored on the binary's instructions), then run in one
//! child per visibility class, visible tests first (the traced launch and the measured launches
//! among them, before any hidden input exists), and what came back is read, checked and scored.

use super::child_results::{
    apply_results, compile_outcome, copy_cubins, last_line, log_flood, own_lines, read_measured,
    read_results,
};
use super::counts::{BuildMeasured, Measured};
use super::job::{
    target_name, EnvInfo, Job, JobTest, MeasureJob, Phase, RunLine, TestResult, TestSeeds, TraceJob,
};
use super::protocol::{CUPTI_MISSING_ENV, RESULTS_FILE};
use super::report::{CompileReport, CompileStatus, GradeReport, RubricRef, TestReport, SCHEMA};
use super::rubric::Rubric;
use super::scoring;
use super::seeds::{public_seed, Secret};
use super::submission::{read_source, safe_name, screen, untrusted_metadata, Submission};
use super::technique::{Evidence, Executions, Facts, Requirement};
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
/// The simulating child's address space: the simulated device holds a test's A, B and C (the
/// rubric refuses a simulated shape over [`super::rubric::SIM_MAX_BYTES`]), the module's
/// variables (at most `sim::budget::MAX_GLOBAL_BYTES`), the fp64 reference and the simulator's
/// own state; whatever a kernel does, the child cannot take more of the machine than this.
pub const SIMULATE_ADDRESS_SPACE: u64 = 4 << 30;

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
    /// Submissions graded at once where no GPU is used (0: one per core; `batch::workers`).
    pub jobs: usize,
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
        // The compiler and the simulator start no CUDA driver, so their address space can be
        // capped; a GPU child's cannot (the driver reserves terabytes of virtual addresses).
        let address_space = match job.phase {
            Phase::Compile => Some(COMPILE_ADDRESS_SPACE),
            Phase::Simulate => Some(SIMULATE_ADDRESS_SPACE),
            _ => None,
        };
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
            runner: super::report::RunnerInfo::this(),
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
        let seeds = match self.seeds_to_run(sub) {
            Ok(s) => s,
            Err(e) => {
                let mut r = self.empty_report(sub, env, &[]);
                r.compile.message = format!("{e:#}");
                return r;
            }
        };
        let mut g = Grading {
            dir,
            device,
            start,
            r: self.empty_report(sub, env, &seeds),
            evidence: Evidence::default(),
        };
        // A stage that ends the grading leaves the report as it stands.
        let _ = self.stages(&mut g, sub, env, &seeds);
        g.r
    }

    /// The stages after the seeds, in order; `None`: a stage ended the grading.
    fn stages(
        &self,
        g: &mut Grading,
        sub: &Submission,
        env: &EnvInfo,
        seeds: &[TestSeeds],
    ) -> Option<()> {
        let (source, target) = self.admit(g, sub, env)?;
        let tests = self.job_tests(seeds);
        let built = self.compile_stage(g, &source, target, &tests)?;
        if self.compile_only {
            self.compiled_only(g);
            return Some(());
        }
        let plan = RunPlan {
            trace: self.trace_stage(g, &built),
            // On the simulator, the visible tests' child makes the measured launches itself,
            // after its tests.
            sim_measure: (self.simulate && built.pending)
                .then_some(self.rubric.measure_shape)
                .flatten()
                .map(|s| MeasureJob {
                    shape: [s.m, s.n, s.k],
                    seed: MeasureJob::SEED,
                }),
            source: &source,
            target,
            tests: &tests,
            job: &built.job,
        };
        let runs = self.run_stage(g, &plan, built.pending)?;
        self.finish(g, runs);
        Some(())
    }

    /// Every test's seeds for this student; a compile needs none: a pre-screen derives none
    /// (and needs no secret).
    fn seeds_to_run(&self, sub: &Submission) -> Result<Vec<TestSeeds>> {
        if self.compile_only {
            return Ok(self
                .rubric
                .tests
                .iter()
                .map(|t| TestSeeds {
                    sets: vec![0; t.sets],
                    refresh: 0,
                    decoy: 0,
                    schedule: 0,
                })
                .collect());
        }
        self.seeds(&sub.student)
    }

    /// The submission's text, refused before anything compiles it, and the target it is
    /// built for.
    fn admit(
        &self,
        g: &mut Grading,
        sub: &Submission,
        env: &EnvInfo,
    ) -> Option<(String, common::Target)> {
        let r = &mut g.r;
        let source = match read_source(sub, self.rubric.limits.source_bytes) {
            Ok((s, sha)) => {
                r.source_sha256 = sha;
                s
            }
            Err(e) => {
                r.compile.status = CompileStatus::Rejected;
                r.compile.message = format!("{e:#}");
                not_run(r, "the submission was refused");
                return None;
            }
        };
        if let Err(v) = screen(&source, self.rubric.arch, self.skip_screen, self.simulate) {
            r.compile.status = CompileStatus::Rejected;
            r.compile.message = format!("refused before compiling: kernel.cu {v}");
            not_run(r, "the submission was refused");
            return None;
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
                not_run(r, "this GPU cannot run the rubric's kernel");
                return None;
            }
        };
        r.target = Some(target_name(target).to_string());
        Some((source, target))
    }

    /// Compile, in a child of its own: it learns the dtypes, not the tests. The requirements
    /// are scored on the binary's instructions at once.
    fn compile_stage(
        &self,
        g: &mut Grading,
        source: &str,
        target: common::Target,
        tests: &[JobTest],
    ) -> Option<Built> {
        let mut job = self.rubric.job(Phase::Compile, source, Vec::new(), tests);
        job.target = Some(target_name(target).into());
        job.ptx = self.simulate && !self.compile_only;
        if self.compile_only {
            // No traced launch follows: the traced build would be compiled for nothing.
            job.trace = None;
        }
        let limit = Duration::from_secs(self.rubric.limits.compile_seconds);
        let outcome = self.child(&g.dir.join("compile"), &job, g.device, limit);
        let compiled = compile_outcome(outcome, &g.dir.join("compile/compile.json"), &self.rubric);
        let r = &mut g.r;
        if let Ok(o) = &compiled {
            r.grading_flags.extend(o.flags.iter().cloned());
        }
        // Whether the traced build compiled (rubrics with trace facts): `Err` is what failed.
        let mut traced_build: Result<(), String> = Ok(());
        // Requirements present in the binary whose executions are still to be counted.
        let mut pending: bool;
        match compiled.map(|o| (o.report, o.sass, o.traced, o.unsupported)) {
            Ok((c, _, _, Some(why)))
                if c.status == CompileStatus::Ok && self.simulate && !self.compile_only =>
            {
                r.compile = c;
                self.not_modelled(r, &why);
                return None;
            }
            Ok((mut c, sass, traced, _)) if c.status == CompileStatus::Ok => {
                pending = self
                    .rubric
                    .requirements
                    .iter()
                    .any(|q| q.awaits_execution(&sass));
                g.evidence.sass = Some(sass);
                if target == common::Target::Sm90aEmulated || self.compile_only {
                    let why = if self.compile_only && self.simulate {
                        scoring::COMPILED_ONLY_SIM
                    } else if self.compile_only {
                        scoring::COMPILED_ONLY
                    } else {
                        scoring::EMULATED
                    };
                    g.evidence.executions = Executions::Skipped(why.to_string());
                    pending = false;
                }
                scoring::score(r, &self.rubric, &g.evidence);
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
            Ok((c, ..)) => {
                let why = format!(
                    "the kernel did not compile ({})",
                    super::report::lower(&c.status)
                );
                r.compile = c;
                not_run(r, &why);
                for t in &mut r.tests {
                    t.status = Status::Failed;
                }
                self.skip_untimed(r, target);
                return None;
            }
            Err(e) => {
                r.compile.message = format!("{e:#}");
                not_run(r, "the grader could not compile the submission");
                return None;
            }
        }
        Some(Built {
            job,
            pending,
            traced_build,
        })
    }

    /// A kernel the simulator does not model (`why`, decided on its whole PTX in the compile
    /// child) is not graded: one line for the student (the compile's message), the way to grade
    /// it on a GPU for the instructor (a grading flag), and no row of it is a test's error.
    fn not_modelled(&self, r: &mut GradeReport, why: &str) {
        r.compile.status = CompileStatus::Unsupported;
        r.compile.message = why.to_string();
        r.grading_flags.push(Flag::new(
            super::simulated::UNSUPPORTED,
            format!(
                "not graded: {why}. The simulator decided this when it decoded the kernel's PTX, before any test ran, whatever the inputs. Grade it on a GPU (the tcgen05 emulation on an H100/H200): runner grade {} --rubric {} --student {} --on-gpu",
                shell_word(&r.submission),
                shell_word(&self.rubric_path.display().to_string()),
                shell_word(&r.student)
            ),
        ));
        for t in &mut r.tests {
            t.status = Status::Skipped;
            t.score = 0.0;
            t.flags.clear();
            t.detail = "not graded: the simulator does not model this kernel (the compile line says what and where)".into();
            // A speed test counts neither way on the simulator (as `skip_untimed`).
            if t.kind == Kind::Performance {
                t.max_score = 0.0;
            }
        }
    }

    /// Rows this grading never runs, whatever the kernel (every test of a pre-screen; the
    /// performance tests on the simulator or under the emulation), are skipped on a failed
    /// compile too, as on a compiled one: every row of a class has the same maximum.
    fn skip_untimed(&self, r: &mut GradeReport, target: common::Target) {
        let untimed = self.simulate || target == common::Target::Sm90aEmulated;
        for t in &mut r.tests {
            let why = if self.compile_only && t.kind != Kind::Technique {
                "not run: compiled only (a pre-screen: no GPU was used)"
            } else if untimed && t.kind == Kind::Performance && self.simulate {
                super::simulated::NO_SPEED
            } else if untimed && t.kind == Kind::Performance {
                "skipped: needs native hardware (a B200): the tcgen05 emulation's timings mean nothing"
            } else {
                continue;
            };
            t.status = Status::Skipped;
            t.max_score = 0.0;
            t.detail = why.to_string();
        }
    }

    /// A pre-screen ends after the compile: a requirement the binary fails keeps its verdict;
    /// one it meets is skipped (above), never awarded: only an executed count earns its points.
    fn compiled_only(&self, g: &mut Grading) {
        for t in g.r.tests.iter_mut().filter(|t| t.kind != Kind::Technique) {
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
        g.evidence.facts = Some(Facts {
            found: skipped,
            missing: None,
        });
        scoring::score(&mut g.r, &self.rubric, &g.evidence);
    }

    /// The traced launch the visible run makes, if the rubric has trace facts and the traced
    /// build compiled. One that did not compile shows no fact; the tests run as they would.
    fn trace_stage(&self, g: &mut Grading, built: &Built) -> Option<TraceJob> {
        match &built.traced_build {
            Ok(()) => built.job.trace.clone(),
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
                g.evidence.facts = Some(Facts {
                    found: Vec::new(),
                    missing: Some(failed),
                });
                scoring::score(&mut g.r, &self.rubric, &g.evidence);
                None
            }
        }
    }

    /// Run, in one child per visibility class, visible tests first: a hidden test's inputs are
    /// never in a process (or a loaded module) whose output a student sees. `None`: a run could
    /// not be started.
    fn run_stage(&self, g: &mut Grading, plan: &RunPlan, pending: bool) -> Option<Runs> {
        let mut runs = Runs::default();
        // The measured launches of the requirements the binary meets (one child each, public
        // inputs, never timed) run after the visible tests and before any hidden input exists
        // in a process the submission runs in, like everything whose result a student sees.
        // On the simulator, the visible tests' child makes them (`plan.sim_measure`).
        let mut measured = !pending || self.simulate;
        for (class, hidden) in [("visible", false), ("hidden", true)] {
            if hidden && !measured {
                self.measure(&mut g.r, &mut g.evidence, g.dir, g.device, plan.job);
                measured = true;
            }
            if self.run_class(g, plan, &mut runs, class, hidden)? {
                runs.cut_class = Some(hidden);
                break;
            }
        }
        if !measured {
            self.measure(&mut g.r, &mut g.evidence, g.dir, g.device, plan.job);
        }
        if runs.sim_measured {
            // Every build's graded launches, from both children: a requirement holds only if
            // it holds in every one of them.
            let builds = merge_builds(std::mem::take(&mut runs.sim_builds));
            let outcome = runs.last_outcome.clone();
            self.apply_sim_measured(
                &mut g.r,
                &mut g.evidence,
                plan.job,
                builds,
                outcome.as_ref(),
            );
        }
        if plan.sim_measure.is_some() && !runs.sim_measured {
            g.evidence.executions =
                Executions::Skipped("the grading stopped before the measured launch".into());
            scoring::score(&mut g.r, &self.rubric, &g.evidence);
        }
        Some(runs)
    }

    /// The run child of one visibility class, and what it reported: `Some(true)` if it did not
    /// finish its tests (the grading stops there), `None` if it could not be started.
    fn run_class(
        &self,
        g: &mut Grading,
        plan: &RunPlan,
        runs: &mut Runs,
        class: &str,
        hidden: bool,
    ) -> Option<bool> {
        let class_tests: Vec<JobTest> = self
            .rubric
            .tests
            .iter()
            .zip(plan.tests)
            .filter(|(spec, _)| spec.hidden() == hidden)
            .map(|(_, t)| t.clone())
            .collect();
        // The traced launch runs in the visible tests' child (its inputs are public), which
        // then runs even where the rubric has no visible test.
        let trace = plan.trace.clone().filter(|_| !hidden);
        // On the simulator both children report what their tests' launches executed (the
        // requirements are decided on every graded launch); the visible one runs even without
        // a visible test only for the traced launch.
        let measure = plan.sim_measure.clone().filter(|_| !class_tests.is_empty());
        if class_tests.is_empty() && trace.is_none() && measure.is_none() {
            return Some(false);
        }
        let r = &mut g.r;
        let run_dir = g.dir.join(format!("run-{class}"));
        if let Err(e) = copy_cubins(&g.dir.join("compile"), &run_dir) {
            r.compile.message = format!("{e:#}");
            return None;
        }
        let phase = if self.simulate {
            Phase::Simulate
        } else {
            Phase::Run
        };
        let mut run_job = self.rubric.job(phase, plan.source, class_tests, &[]);
        run_job.target = plan.job.target.clone();
        run_job.trace = trace;
        if let Some(m) = measure {
            // Each build this child grades reports its launches' counts.
            run_job.measure = Some(m);
        }
        let limit = Duration::from_secs(self.rubric.limits.run_seconds);
        if hidden {
            // Everything a student is shown of time ends here, before any hidden input
            // exists in a process the submission runs in.
            r.visible_elapsed_s = g.start.elapsed().as_secs_f64();
        }
        let outcome = match self.child(&run_dir, &run_job, g.device, limit) {
            Ok(o) => o,
            Err(e) => {
                not_run(r, &format!("the grader could not start the run: {e:#}"));
                return None;
            }
        };
        if hidden {
            r.hidden_elapsed_s = outcome.elapsed.as_secs_f64();
        }
        runs.logs.push(format!(
            "[{class} tests: the run {}]\n{}{}",
            outcome.describe(),
            outcome.stdout,
            outcome.stderr
        ));
        // Performance tests the grader skips: under the emulation, and on the simulator.
        let untimed = plan.target == common::Target::Sm90aEmulated || self.simulate;
        let measured_builds: Vec<String> = if run_job.measure.is_some() {
            run_job.dtypes.clone()
        } else {
            Vec::new()
        };
        let (lines, foreign) = own_lines(
            read_results(&run_dir.join(RESULTS_FILE)),
            &run_job.tests,
            |t| t.kind == Kind::Performance && untimed,
            run_job.trace.is_some(),
            &measured_builds,
            class,
        );
        r.grading_flags.extend(foreign);
        if run_job.measure.is_some() {
            runs.sim_measured = true;
            runs.sim_builds
                .extend(super::simulated::measured_builds(&lines));
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
            g.evidence.facts = Some(traced_facts(&lines, unfinished, &outcome));
            scoring::score(r, &self.rubric, &g.evidence);
        }
        runs.lines.extend(lines);
        if unfinished || runs.last_outcome.is_none() {
            runs.last_outcome = Some(outcome);
        }
        Some(unfinished)
    }

    /// What the runs reported, into the report: their log, the GPU as they found it, and every
    /// test's result, scored.
    fn finish(&self, g: &mut Grading, runs: Runs) {
        let r = &mut g.r;
        let log = runs.logs.join("\n");
        r.grading_flags
            .extend(log_flood(&log, self.rubric.limits.log_bytes));
        r.worker_log = truncate_log(&log, self.rubric.limits.log_bytes);
        let outcome = runs.last_outcome.unwrap_or(Outcome {
            exit: Exit::Code(0),
            elapsed: Duration::ZERO,
            stdout: String::new(),
            stderr: String::new(),
        });
        let lines = runs.lines;
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
            r,
            &self.rubric,
            &results,
            &outcome,
            self.rubric.limits.launch_seconds,
            runs.cut_class,
        );
    }
}

/// One submission's grading as it goes: where its children work, its report so far and the
/// evidence its requirements are decided on.
struct Grading<'a> {
    dir: &'a Path,
    device: usize,
    start: Instant,
    r: GradeReport,
    evidence: Evidence,
}

/// What the compile stage leaves the runs.
struct Built {
    /// The compile job (its target and dtypes are the runs').
    job: Job,
    /// Requirements present in the binary whose executions are still to be counted.
    pending: bool,
    /// Whether the traced build compiled (rubrics with trace facts): `Err` is what failed.
    traced_build: Result<(), String>,
}

/// What every run child of a submission shares, and what the visible one adds.
struct RunPlan<'a> {
    source: &'a str,
    target: common::Target,
    /// Every test, with its seeds, in the rubric's order.
    tests: &'a [JobTest],
    job: &'a Job,
    /// The traced launch (visible run).
    trace: Option<TraceJob>,
    /// The simulator's measured launches (visible run).
    sim_measure: Option<MeasureJob>,
}

/// What the run children reported, class by class.
#[derive(Default)]
struct Runs {
    lines: Vec<RunLine>,
    logs: Vec<String>,
    /// The run that was cut short, else the first.
    last_outcome: Option<Outcome>,
    /// The visibility class of the run that was cut short, if one was.
    cut_class: Option<bool>,
    /// Whether a simulating child reported its graded launches' counts.
    sim_measured: bool,
    /// What the simulating children reported, build by build (merged when scored).
    sim_builds: Vec<BuildMeasured>,
}

/// Every row's detail, where the grading stopped before running anything: why.
fn not_run(r: &mut GradeReport, why: &str) {
    for t in &mut r.tests {
        t.detail = format!("not run: {why}");
    }
}

/// The facts of the traced launch a run reported, and the grader's account of those that did not
/// come back: the run stopped before the traced launch (an earlier test did not finish), or in
/// it (a hang, a crash).
fn traced_facts(lines: &[RunLine], unfinished: bool, outcome: &Outcome) -> Facts {
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
    Facts {
        found: lines
            .iter()
            .filter_map(|l| match l {
                RunLine::Fact(f) => Some(f.clone()),
                _ => None,
            })
            .collect(),
        missing: Some(FactResult {
            fact: String::new(),
            status,
            detail,
            flags,
        }),
    }
}

/// The builds the simulating children reported, one per build: a build both reported is the
/// union of their graded launches; a failure or an error in either is the build's.
fn merge_builds(builds: Vec<BuildMeasured>) -> Vec<BuildMeasured> {
    use super::counts::Counts;
    let mut out: Vec<BuildMeasured> = Vec::new();
    for b in builds {
        let Some(have) = out.iter_mut().find(|x| x.build == b.build) else {
            out.push(b);
            continue;
        };
        let merged = match (
            std::mem::replace(&mut have.measured, Measured::Error(String::new())),
            b.measured,
        ) {
            (Measured::Error(e), _) | (_, Measured::Error(e)) => Measured::Error(e),
            (f @ Measured::Failed { .. }, _) | (_, f @ Measured::Failed { .. }) => f,
            (
                Measured::Ran {
                    flags,
                    summary,
                    counts: Counts::Ptx(mut p),
                },
                Measured::Ran {
                    flags: f2,
                    summary: s2,
                    counts: Counts::Ptx(q),
                },
            ) => {
                for (op, n) in q.per_opcode {
                    match p.per_opcode.iter_mut().find(|(o, _)| *o == op) {
                        Some(e) => e.1 += n,
                        None => p.per_opcode.push((op, n)),
                    }
                }
                p.launches.extend(q.launches);
                let mut flags = flags;
                flags.extend(f2);
                Measured::Ran {
                    flags,
                    summary: format!("{summary}; {s2}"),
                    counts: Counts::Ptx(p),
                }
            }
            (m, _) => m,
        };
        have.measured = merged;
    }
    out
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
        outcome: Option<&Outcome>,
    ) {
        for d in &job.dtypes {
            if !builds.iter().any(|b| &b.build == d) {
                builds.push(BuildMeasured {
                    build: d.clone(),
                    measured: Measured::Failed {
                        detail: format!(
                            "no graded launch of the {d} build reported its counts (the simulating child {})",
                            outcome.map_or("did not run".to_string(), |o| o.describe())
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

/// `word` as a POSIX shell reads it back (for a command the instructor copies).
fn shell_word(word: &str) -> String {
    super::interrupt::quote(word)
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::super::child_results::tests::rubric;
    use super::*;

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
            jobs: 1,
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

    /// A stand-in worker that logs when each child starts and ends, and what its job holds.
    const ORDER_WORKER: &str = r#"#!/bin/sh
cat > job.json
what="$3"
if [ "$3" = run ]; then
  if grep -q '"name":"hidden"' job.json; then what=run-hidden; else what=run-visible; fi
fi
echo "start $what $(date +%s%N)" >> "$ORDER_LOG"
case "$3" in
compile)
  printf '[{"dtype":"f16","ok":true,"log":"","registers":1,"spill_bytes":0,"compile_ms":1.0,"nvrtc_version":"13.0"}]' > compile.json
  : > cubin-f16.bin ;;
run)
  if [ "$what" = run-hidden ]; then
    echo '{"test":{"name":"hidden","status":"passed","launches":1,"flags":[],"detail":"ok","timing":null}}' >> results.jsonl
  else
    echo '{"test":{"name":"public","status":"passed","launches":1,"flags":[],"detail":"ok","timing":null}}' >> results.jsonl
    echo '{"test":{"name":"speed","status":"failed","launches":1,"flags":[],"detail":"too slow","timing":null}}' >> results.jsonl
  fi
  sleep 0.2 ;;
esac
echo "end $what $(date +%s%N)" >> "$ORDER_LOG"
"#;

    /// Issue 38, item 7, on the Hopper path, without a GPU: every visible result (the speed test
    /// among them) comes from a child whose job holds no hidden test, name or seed, and that
    /// child has exited before the first process that holds hidden inputs starts; the hidden
    /// child's job holds the hidden test alone.
    #[test]
    fn no_visible_result_comes_from_a_process_that_saw_hidden_inputs() {
        let d = std::env::temp_dir().join(format!("grade-order-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("bob")).unwrap();
        let worker = d.join("worker.sh");
        std::fs::write(&worker, ORDER_WORKER).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&worker, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(
            d.join("bob/kernel.cu"),
            "#include \"hopper.cuh\"\nextern \"C\" __global__ void gemm_kernel() {}\n",
        )
        .unwrap();
        let log = d.join("order.log");
        let mut g = grader(Some("an instructor secret of length"));
        g.exe = worker;
        g.scratch = d.join("scratch");
        g.keep_scratch = true;
        g.child_env = vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("ORDER_LOG".into(), log.display().to_string()),
        ];
        let env = EnvInfo {
            name: "a GPU of the test".into(),
            compute_capability: (9, 0),
            ..Default::default()
        };
        let sub = Submission {
            student: "bob".into(),
            path: d.join("bob"),
        };
        let r = g.grade(&sub, 0, &env);
        let events: Vec<(String, String, u128)> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(|l| {
                let w: Vec<&str> = l.split(' ').collect();
                (w[0].to_string(), w[1].to_string(), w[2].parse().unwrap())
            })
            .collect();
        let at = |edge: &str, what: &str| {
            events
                .iter()
                .find(|(e, w, _)| e == edge && w == what)
                .map(|e| e.2)
                .unwrap_or_else(|| panic!("no {edge} of {what}: {events:?}"))
        };
        // One child per class, in order; the visible one gone before the hidden one starts.
        let order: Vec<&str> = events
            .iter()
            .filter(|(e, ..)| e == "start")
            .map(|(_, w, _)| w.as_str())
            .collect();
        assert_eq!(order, ["compile", "run-visible", "run-hidden"]);
        assert!(at("end", "run-visible") <= at("start", "run-hidden"));
        assert!(at("end", "compile") <= at("start", "run-visible"));
        // What each run child was given.
        let run_dir = std::fs::read_dir(&g.scratch)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| p.join("run-visible").is_dir())
            .expect("the grading's scratch folder");
        let job = |class: &str| -> (Job, String) {
            let bytes = std::fs::read(run_dir.join(class).join("job.json")).unwrap();
            (
                serde_json::from_slice(&bytes).unwrap(),
                String::from_utf8(bytes).unwrap(),
            )
        };
        let (visible, visible_text) = job("run-visible");
        let names: Vec<&str> = visible.tests.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["public", "speed"],
            "the speed test runs with the visible ones"
        );
        let hidden_row = r.tests.iter().find(|t| t.name == "hidden").unwrap();
        assert!(!visible_text.contains("\"hidden\""));
        for seed in hidden_row
            .seeds
            .sets
            .iter()
            .chain([&hidden_row.seeds.decoy, &hidden_row.seeds.refresh])
        {
            assert!(
                !visible_text.contains(&seed.to_string()),
                "hidden seed {seed}"
            );
        }
        let (hidden, _) = job("run-hidden");
        let names: Vec<&str> = hidden.tests.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["hidden"]);
        // Every visible row is the visible child's.
        let speed = r.tests.iter().find(|t| t.name == "speed").unwrap();
        assert_eq!(speed.detail, "too slow");
        assert_eq!(r.tests[0].status, Status::Passed);
        assert!(r.grading_flags.iter().all(|f| f.name != "foreign-result"));
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
}
