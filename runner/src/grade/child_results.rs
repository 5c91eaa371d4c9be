//! What the grading children leave in their folders, read back and checked: the compile
//! child's report and builds, the run children's result lines (each run may speak only for its
//! own tests), the measuring child's counts; and the tests scored from them. A child runs the
//! submission, so nothing here is believed beyond what the grader can check.

use super::counts::Measured;
use super::job::{CompiledDtype, JobTest, RunLine, TestResult};
use super::protocol::{LAUNCHING_FILE, MEASURED_FILE};
use super::report::{CompileReport, CompileStatus, GradeReport, TestReport};
use super::rubric::Rubric;
use super::submission::own_files;
use super::technique::BuildSass;
use super::vocab::{Flag, Kind, Status};
use crate::sandbox::{self, truncate_log, Exit, Outcome};
use anyhow::Result;
use common::verdict::Verdict;
use std::path::Path;

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
pub(super) struct CompileOutcome {
    pub(super) report: CompileReport,
    /// Flags of what its raw logs show.
    pub(super) flags: Vec<Flag>,
    /// The SASS of its native builds, where the job asked for it.
    pub(super) sass: Vec<BuildSass>,
    /// The traced build, where the job asked for it: `Err` is its first message as a student
    /// may see it.
    pub(super) traced: Option<Result<(), String>>,
    /// What the simulator does not model in a build's PTX, and where (a job with `ptx`).
    pub(super) unsupported: Option<String>,
}

pub(super) fn compile_outcome(
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
    let unsupported = entries.iter().flatten().find_map(|e| e.unsupported.clone());
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
        unsupported,
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

pub(super) fn copy_cubins(from: &Path, to: &Path) -> Result<()> {
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

pub(super) fn read_results(path: &Path) -> Vec<RunLine> {
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
pub(super) fn log_flood(log: &str, cap: usize) -> Option<Flag> {
    (log.len() > cap || log.contains(sandbox::CUT_NOTE)).then(|| {
        Flag::new(
            "log-flood",
            format!("the run wrote more output than the log limit of {cap} bytes: the report keeps its first and last {} bytes", cap / 2),
        )
    })
}

/// The last non-empty line of a child's output.
pub(super) fn last_line(text: &str) -> &str {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
}

#[cfg(test)]
pub mod tests {
    use super::super::job::TimingResult;
    use super::super::report::tests::sample;
    use super::*;
    use std::time::Duration;

    pub fn rubric() -> Rubric {
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
            unsupported: None,
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
}
