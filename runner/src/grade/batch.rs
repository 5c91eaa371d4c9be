//! A class: one subfolder per student, graded on one or several GPUs (one submission per GPU at
//! a time), optionally only one shard of it, with a progress bar and a summary.

use super::grader::{Confinement, Grader, OwnedScratch};
use super::interrupt;
use super::job::EnvInfo;
use super::report::{self, GradeReport};
use super::rubric::Rubric;
use super::seeds::Secret;
use super::submission::Submission;
use anyhow::{anyhow, bail, Context, Result};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// How a grading session may run: the instructor's choices beyond the rubric.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    pub keep_scratch: bool,
    /// Grade even where the kernel has no Landlock (every report says so).
    pub allow_unconfined: bool,
    /// Check and compile only: no GPU, no secret, no test runs.
    pub compile_only: bool,
    /// Testing only: no include screen (the confinement must hold without it).
    pub skip_screen: bool,
    /// Grade a Blackwell rubric on the GPU (the tcgen05 emulation on an H100/H200) instead of
    /// the PTX simulator.
    pub on_gpu: bool,
    /// Submissions graded at once on the simulator or in a pre-screen (0: one per core); on
    /// GPUs, one per GPU.
    pub jobs: usize,
}

impl Options {
    /// Whether `rubric` is graded on the PTX simulator: a Blackwell rubric, unless the
    /// instructor asked for the GPU. The default, because the simulator runs the native sm_100a
    /// build a B200 would run, and needs no GPU.
    pub fn simulate(&self, rubric: &Rubric) -> bool {
        rubric.arch == common::step::Arch::Blackwell && !self.on_gpu
    }
}

/// How this kernel lets the children be confined, given the instructor's choice: an error when
/// it cannot confine them and hidden tests would be graded without `--allow-unconfined`.
pub fn confinement(rubric: &Rubric, opts: Options) -> Result<Confinement> {
    match super::confine::kernel_abi() {
        Some(abi) => Ok(Confinement::Landlock(abi)),
        None if opts.allow_unconfined => Ok(Confinement::Unconfined),
        None if rubric.has_hidden_tests() && !opts.compile_only => bail!(
            "this kernel has no Landlock, so the grading children cannot be confined and a submission could read the secret or other students' files: hidden tests are refused (pass --allow-unconfined to grade anyway; every report will say so)"
        ),
        None => Ok(Confinement::Unconfined),
    }
}

/// Everything a grading session needs: the rubric, the secret (or replayed seeds), the runner
/// binary to start children from, a scratch folder, the toolkit's location for the children.
pub fn grader_for(
    rubric: Rubric,
    rubric_path: &Path,
    secret_file: Option<&Path>,
    replay: Option<super::grader::Replay>,
    submissions: &[PathBuf],
    opts: Options,
) -> Result<Grader> {
    let secret = if opts.compile_only {
        None
    } else {
        Secret::load(secret_file, submissions)?
    };
    if rubric.has_hidden_tests() && secret.is_none() && replay.is_none() && !opts.compile_only {
        bail!(
            "the rubric has hidden tests: give the instructor's secret with --secret-file FILE or {} (or grade the visible tests alone with --public-only)",
            super::seeds::SECRET_ENV
        );
    }
    // No CUDA driver where the grading needs a GPU: said now, before any toolkit or CUPTI
    // download (the secret and the class are checked first).
    super::preflight::require_gpu(&opts.into(), &rubric)?;
    if opts.simulate(&rubric) && !opts.compile_only {
        // Checked before anything runs: a shape the simulator cannot take in its limits would
        // fail every honest kernel as one that spins.
        rubric
            .check_simulated()
            .with_context(|| format!("rubric {}", rubric_path.display()))?;
    }
    let confinement = confinement(&rubric, opts)?;
    // Find (or install) the toolkit here, once, and point every child at it.
    let tk = common::toolkit::find_or_install()?;
    let root = tk
        .include_dir
        .parent()
        .ok_or_else(|| anyhow!("the toolkit's include folder has no parent"))?;
    if let Some(file) = secret_file.filter(|_| secret.is_some()) {
        let mut toolkit = vec![tk.include_dir.clone()];
        toolkit.extend(tk.nvrtc_lib.parent().map(Path::to_path_buf));
        let readable = super::confine::read_only(super::confine::Needs::Gpu, &toolkit);
        if let Ok(canon) = file.canonicalize() {
            if let Some(r) = readable.iter().find(|r| canon.starts_with(r)) {
                bail!(
                    "the secret file {} lies in {}, which the grading children may read: keep it elsewhere",
                    file.display(),
                    r.display()
                );
            }
        }
    }
    let mut child_env = vec![
        ("WORKBOOK_CUDA".to_string(), root.display().to_string()),
        ("WORKBOOK_NO_INSTALL".to_string(), "1".to_string()),
    ];
    if rubric.reads_sass() {
        // Found (or installed) here: a confined compile child can do neither.
        let nvdisasm = tk
            .nvdisasm()
            .context("the rubric's requirements check SASS, which needs nvdisasm")?;
        child_env.push((
            super::protocol::NVDISASM_ENV.to_string(),
            nvdisasm.display().to_string(),
        ));
    }
    if rubric.measure_shape.is_some() && !opts.compile_only && !opts.simulate(&rubric) {
        // The executed requirements count a launch's instructions with CUPTI: found (or
        // installed) here, as nvdisasm is. None found: every executed row says why.
        match common::cupti::find_or_install() {
            Ok(p) => child_env.push((
                super::protocol::CUPTI_ENV.to_string(),
                p.display().to_string(),
            )),
            Err(e) => child_env.push((
                super::protocol::CUPTI_MISSING_ENV.to_string(),
                format!("{e:#}").lines().next().unwrap_or("").to_string(),
            )),
        }
    }
    let simulate = opts.simulate(&rubric);
    let exe = std::env::current_exe().context("cannot find the runner binary")?;
    // One folder per grader (the selftest makes several in one process).
    static GRADERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let scratch = std::env::temp_dir().join(format!(
        "workbook-grade-{}-{}",
        std::process::id(),
        GRADERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&scratch)
        .with_context(|| format!("cannot create {}", scratch.display()))?;
    let cleanup = (!opts.keep_scratch).then(|| OwnedScratch(scratch.clone()));
    Ok(Grader {
        rubric,
        rubric_path: rubric_path.to_path_buf(),
        secret,
        replay,
        exe,
        scratch,
        keep_scratch: opts.keep_scratch,
        child_env,
        confinement,
        compile_only: opts.compile_only,
        skip_screen: opts.skip_screen,
        simulate,
        jobs: opts.jobs,
        cleanup,
    })
}

/// A grader for a submission [`super::submission::precheck`] refused: its report says why and
/// runs nothing, so it needs no secret, toolkit, GPU or scratch folder.
pub fn refusing_grader(rubric: Rubric, rubric_path: &Path, opts: Options) -> Result<Grader> {
    let compile_only = Options {
        compile_only: true,
        ..opts
    };
    Ok(Grader {
        confinement: confinement(&rubric, compile_only)?,
        simulate: opts.simulate(&rubric),
        rubric,
        rubric_path: rubric_path.to_path_buf(),
        secret: None,
        replay: None,
        exe: std::env::current_exe().context("cannot find the runner binary")?,
        // Never created: nothing runs (grade() only removes a folder of its own under it).
        scratch: std::env::temp_dir().join(format!("workbook-grade-{}", std::process::id())),
        keep_scratch: false,
        child_env: Vec::new(),
        compile_only: true,
        skip_screen: opts.skip_screen,
        jobs: opts.jobs,
        cleanup: None,
    })
}

/// The students of a class folder (every subfolder not starting with a dot), sorted, and the
/// shard `(i, n)` of them: the k-th student (by name) belongs to shard k mod n.
pub fn class(dir: &Path, shard: Option<(usize, usize)>) -> Result<Vec<Submission>> {
    let mut subs: Vec<Submission> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read the class folder {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .filter_map(|p| {
            let name = p.file_name()?.to_string_lossy().into_owned();
            if name.starts_with('.') {
                // A folder the class's tools keep (.git, .cache) is no student; said, not dropped
                // silently, in case it is one.
                eprintln!(
                    "warning: skipped hidden folder {} (not a student)",
                    p.display()
                );
                return None;
            }
            Some(Submission {
                student: name,
                path: p,
            })
        })
        .collect();
    subs.sort_by(|a, b| a.student.cmp(&b.student));
    if subs.is_empty() {
        bail!(
            "{} has no subfolders: a batch grades one subfolder per student",
            dir.display()
        );
    }
    Ok(match shard {
        Some((i, n)) => subs
            .into_iter()
            .enumerate()
            .filter(|(k, _)| k % n == i)
            .map(|(_, s)| s)
            .collect(),
        None => subs,
    })
}

/// What a report records as the machine of a simulated grading: no GPU.
pub fn simulator_env() -> EnvInfo {
    EnvInfo {
        name: format!("no GPU: {}", common::simulate::BACKEND),
        nvrtc_version: common::compile::nvrtc_version()
            .map(|(a, b)| format!("{a}.{b}"))
            .unwrap_or_default(),
        healthy: true,
        health_detail: "the simulator needs no GPU".into(),
        ..EnvInfo::default()
    }
}

/// After a submission that hung, faulted or crashed, check the GPU again (a few tries: the
/// driver needs a moment to tear down a killed context).
fn recheck(grader: &Grader, device: usize) -> Result<EnvInfo> {
    let mut last = anyhow!("not checked");
    for attempt in 0..3 {
        if attempt > 0 {
            std::thread::sleep(Duration::from_secs(5));
        }
        match grader.probe(device) {
            Ok(env) if env.healthy => return Ok(env),
            Ok(env) => last = anyhow!("GPU {device} is unhealthy: {}", env.health_detail),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn needs_recheck(r: &GradeReport) -> bool {
    r.tests.iter().any(|t| {
        t.flags
            .iter()
            .any(|f| ["timeout", "kernel-fault", "worker-crash"].contains(&f.name.as_str()))
    })
}

/// How many submissions grade at once where no GPU is used (the simulator, a pre-screen): the
/// instructor's `--jobs`, else one per core, and never more than there are submissions.
pub fn workers(jobs: usize, submissions: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let wanted = if jobs == 0 { cores } else { jobs };
    wanted.min(submissions).max(1)
}

/// The most `--jobs` accepts: four per core (each grading holds a child of up to
/// [`super::grader::SIMULATE_ADDRESS_SPACE`] at a time).
pub fn max_jobs() -> usize {
    4 * std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Grade `subs` over `gpus` (one child at a time per GPU; on the simulator or in a pre-screen,
/// [`workers`] at a time). With `write`, each report goes to `out/<student>/` as its student
/// finishes, and the summaries to `out/` at the end.
pub fn grade_all(
    grader: &Grader,
    subs: Vec<Submission>,
    gpus: &[usize],
    out: &Path,
    gradescope: bool,
    write: bool,
) -> Result<Vec<GradeReport>> {
    grade_batch(grader, subs, Vec::new(), gpus, out, gradescope, write)
}

/// [`grade_all`], with the reports of students graded earlier (`kept`, by `--resume`) counted in
/// the progress and the summaries. A signal (Ctrl-C) stops it with [`Interrupted`]: every
/// grade written so far stays, no summary is written, the running children are stopped and
/// their scratch folders removed.
pub fn grade_batch(
    grader: &Grader,
    subs: Vec<Submission>,
    kept: Vec<GradeReport>,
    gpus: &[usize],
    out: &Path,
    gradescope: bool,
    write: bool,
) -> Result<Vec<GradeReport>> {
    let gpus = crate::pool::default_gpus(gpus);
    let mut envs = Vec::new();
    if grader.compile_only || grader.simulate {
        // No GPU is opened: a pre-screen compiles, the simulator grades, on the CPU's cores.
        let env = if grader.compile_only {
            EnvInfo::default()
        } else {
            simulator_env()
        };
        for _ in 0..workers(grader.jobs, subs.len()) {
            envs.push((0, env.clone()));
        }
    }
    for &d in gpus
        .iter()
        .filter(|_| !grader.compile_only && !grader.simulate)
    {
        let env = grader.probe(d)?;
        if !env.healthy {
            bail!(
                "GPU {d} ({}) fails its health check: {}",
                env.name,
                env.health_detail
            );
        }
        envs.push((d, env));
    }
    let total = subs.len() + kept.len();
    let at_once = envs.len();
    // Drawn on a terminal only (indicatif draws nothing when stderr is not one).
    let bar = indicatif::ProgressBar::new(total as u64);
    if write {
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} graded, {elapsed} {msg}")
                .map_err(|e| anyhow!("{e}"))?,
        );
        bar.set_position(kept.len() as u64);
        bar.set_message(format!("({at_once} at a time)"));
    } else {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let queue = Arc::new(Mutex::new(subs.into_iter().collect::<VecDeque<_>>()));
    let (tx, rx) = mpsc::channel::<Result<GradeReport>>();
    let mut reports = kept;
    let mut errors = Vec::new();
    std::thread::scope(|s| {
        for (device, env) in envs {
            let (queue, tx) = (queue.clone(), tx.clone());
            s.spawn(move || {
                let mut env = env;
                while let Some(sub) = queue.lock().map_or(None, |mut q| q.pop_front()) {
                    if interrupt::requested() {
                        break;
                    }
                    let mut r = grader.grade(&sub, device, &env);
                    if interrupt::requested() {
                        // Stopped part-way (its children were killed): no grade; its scratch
                        // folder is gone with the grading.
                        break;
                    }
                    if !grader.simulate && needs_recheck(&r) {
                        match recheck(grader, device) {
                            Ok(e) => {
                                r.gpu_after = Some("usable".into());
                                env = e;
                            }
                            Err(e) => {
                                r.gpu_after = Some(format!("unusable: {e:#}"));
                                let _ = tx.send(Ok(r));
                                let _ =
                                    tx.send(Err(anyhow!("GPU {device} stopped grading: {e:#}")));
                                break;
                            }
                        }
                    }
                    if tx.send(Ok(r)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        // Each report is written as its student finishes, while the others grade on.
        for msg in rx {
            match msg {
                Ok(r) => {
                    bar.set_message(format!(
                        "({at_once} at a time) last: {} {:.1}/{:.1}",
                        r.student, r.score, r.max_score
                    ));
                    bar.inc(1);
                    if write {
                        if let Err(e) = r.write(
                            &out.join(super::submission::report_folder(&r.student)),
                            gradescope,
                        ) {
                            errors.push(e);
                        }
                    }
                    reports.push(r);
                }
                Err(e) => errors.push(e),
            }
        }
    });
    bar.finish_and_clear();
    if interrupt::requested() {
        return Err(anyhow::Error::new(interrupt::Interrupted {
            graded: reports.len(),
            total,
        }));
    }
    if write {
        report::write_summary(out, &mut reports)?;
    }
    if let Some(e) = errors.into_iter().next() {
        return Err(e.context(format!(
            "{} of {total} submissions graded (reports so far in {})",
            reports.len(),
            out.display()
        )));
    }
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_class_is_its_subfolders_split_into_shards() {
        let d = std::env::temp_dir().join(format!("grade-class-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        for s in ["dave", "alice", "carol", "bob", "erin", ".git"] {
            std::fs::create_dir_all(d.join(s)).unwrap();
        }
        std::fs::write(d.join("README.txt"), "not a student").unwrap();
        let names = |v: Vec<Submission>| v.into_iter().map(|s| s.student).collect::<Vec<_>>();
        assert_eq!(
            names(class(&d, None).unwrap()),
            ["alice", "bob", "carol", "dave", "erin"]
        );
        assert_eq!(
            names(class(&d, Some((0, 2))).unwrap()),
            ["alice", "carol", "erin"]
        );
        assert_eq!(names(class(&d, Some((1, 2))).unwrap()), ["bob", "dave"]);
        let all: usize = (0..3).map(|i| class(&d, Some((i, 3))).unwrap().len()).sum();
        assert_eq!(all, 5, "the shards cover the class exactly once");
        let empty = d.join("alice");
        assert!(class(&empty, None)
            .unwrap_err()
            .to_string()
            .contains("no subfolders"));
        let _ = std::fs::remove_dir_all(&d);
    }
}
