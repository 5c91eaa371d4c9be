//! A Blackwell rubric graded on the PTX simulator: the child side (`grade-worker --phase
//! simulate`). It runs the sm_100a PTX the compile child made from the submission (the PTX
//! ptxas turns into a B200's SASS: no emulation header, nothing a kernel can tell apart from a
//! B200 by its preprocessor) on the CPU, with no GPU, no toolkit and no device file
//! ([`super::confine::Needs::Cpu`]).
//!
//! Each launch gets a fresh simulated device holding A, B and a NaN-poisoned C alone, so no
//! state survives from one launch to the next (nothing to memoise) and nothing of the grader's
//! is within reach; a read or write outside them is a simulator fault. After the launch the
//! inputs must be unchanged and C must match the fp64 reference. A simulator finding (a broken
//! ordering rule, an explained deadlock, an instruction it does not model, a fault, the
//! instruction budget spent) is the test's failure, with its message as the detail.
//!
//! The schedule (which thread runs when, when each asynchronous operation completes) comes from
//! the test's schedule seed, derived per student like the input seeds, and recorded in the
//! instructor's report: `runner step N --sim --kernel FILE --sim-seed S` replays it.
//!
//! After its tests, a child given a [`MeasureJob`] makes the measured launch of the executed
//! requirements (public inputs) for each build, and reports the simulator's warp-level executed
//! counts per PTX opcode ([`PtxCounts`]).

use super::counts::{BuildMeasured, Counts, Measured, PtxCounts};
use super::integrity::{classify, input_flag, Evidence};
use super::job::{Job, JobTest, MeasureJob, ResultsWriter, RunLine, TestResult};
use super::protocol::ptx_path;
use super::vocab::{Flag, Kind, Status};
use super::worker::{exactness_flag, spike, CPU_SAMPLES};
use anyhow::{anyhow, Context, Result};
use common::compile::KernelSource;
use common::simulate::{failure_of, read_u16, sim_launch, Policy};
use common::step::KernelSpec;
use common::verify::{cpu_reference, verify};
use common::{Dist, Dtype, Problem};
use std::path::Path;

/// The schedule policy of the measured launch: random interleavings and completion times, from
/// the seed.
pub const POLICY: Policy = Policy::Random;

/// The schedules every input set of a correctness test runs under, in order: random
/// interleavings, asynchronous operations completing at the last legal moment (a wait that is
/// missing shows there), and PCT's priority changes (an ordering that holds by luck of the
/// interleaving shows there). A finding under any of them fails the test, with the seed and
/// policy that replay it (`runner step N --sim --kernel FILE --sim-seed S --sim-policy P`).
/// At the rubrics' graded shapes three schedules cost three times one (tens of milliseconds
/// each).
pub const POLICIES: [Policy; 3] = [Policy::Random, Policy::AsyncLate, Policy::Pct { depth: 3 }];

/// Why a performance test of a rubric graded on the simulator counts neither way.
pub const NO_SPEED: &str = "skipped: needs a B200. The simulator runs the native sm_100a code and proves it correct, but it does not model time; no B200 grades here";

/// The flag of a kernel the simulator cannot run (an instruction or directive it does not
/// model): the test is the grader's error, for the instructor (`--on-gpu` grades it on a GPU).
pub const UNSUPPORTED: &str = "simulator-unsupported";

/// What a simulated launch came to.
enum Launched {
    /// It finished and was checked: flags (none: right) and the verification's summary.
    Ran {
        flags: Vec<Flag>,
        summary: String,
        per_opcode_warps: Vec<(String, u64)>,
    },
    /// The simulator stopped it: the flag and the simulator's message.
    Stopped(Flag),
}

/// The flag a simulator finding is reported as: the names the GPU path uses where the meaning is
/// the same (a spent budget is a hang, a fault a fault), the rule's own name otherwise.
fn finding_flag(f: &common::simulate::SimFailure, budget: u64) -> Flag {
    let detail = format!(
        "{} (schedule seed {}, policy {})",
        f.message, f.schedule_seed, f.policy
    );
    match f.kind {
        "rule" => Flag::new(
            "ordering-rule",
            format!(
                "broke the ordering rule {}: {detail}",
                f.rule.as_deref().unwrap_or("?")
            ),
        ),
        "deadlock" => Flag::new("deadlock", detail),
        "step-limit" => Flag::new(
            "timeout",
            format!(
                "exceeded its budget of {budget} simulated steps (an instruction each; an MMA or a copy by its size: a kernel that spins, or far more work than the shape needs): {detail}"
            ),
        ),
        "deadline" => Flag::new(
            "timeout",
            format!(
                "ran past the rubric's limit of launch_seconds on the simulator (a kernel that spins, or far more work than the shape needs): {detail}"
            ),
        ),
        "fault" => Flag::new("kernel-fault", detail),
        "unsupported" => Flag::new(UNSUPPORTED, detail),
        _ => Flag::new("kernel-fault", detail),
    }
}

/// What bounds one simulated launch: its step budget and its wall-clock seconds.
#[derive(Clone, Copy)]
pub struct Bounds {
    pub steps: u64,
    pub seconds: u64,
}

/// One launch of `program` on `problem` under schedule `seed` and `policy`, checked.
fn launch(
    program: &sim::Program,
    source: &KernelSource,
    spec: &KernelSpec,
    problem: &Problem,
    (seed, policy): (u64, Policy),
    bounds: Bounds,
) -> Result<Launched> {
    let budget = bounds.steps;
    let shape = problem.shape;
    let k = spec.shape();
    let plan = k.plan(shape, common::simulate::DEFAULT_CLUSTERS);
    let mut l = sim_launch(source, problem, &plan)?;
    // The rubric's launch_seconds, on the host's clock: the simulator asks every few
    // milliseconds of simulation.
    let started = std::time::Instant::now();
    let limit = std::time::Duration::from_secs(bounds.seconds.max(1));
    let options = sim::Options {
        seed,
        policy,
        max_steps: budget,
        trace: false,
        deadline: Some(sim::budget::Deadline::new(move || {
            started.elapsed() > limit
        })),
        ..sim::Options::default()
    };
    let report = match sim::run(program, &mut l.device, &l.launch, &options) {
        Ok(r) => r,
        Err(e) => {
            return Ok(Launched::Stopped(finding_flag(
                &failure_of(&e, seed, policy),
                budget,
            )))
        }
    };
    let reference = cpu_reference(problem);
    let mut flags = Vec::new();
    for (what, addr, pristine, rows) in [
        ("A", l.a, &problem.a, shape.m),
        ("B", l.b, &problem.b, shape.n),
    ] {
        let now = read_u16(&l.device, addr, rows * shape.k);
        flags.extend(input_flag(what, shape.k, problem.dtype, &now, pristine));
    }
    let out = read_u16(&l.device, l.c, shape.m * shape.n);
    let v = verify(problem, &out, &reference, CPU_SAMPLES);
    if problem.dist == Dist::ExactInt {
        flags.extend(exactness_flag(problem.dtype, shape.n, &out, &reference));
    }
    if !v.passed {
        flags.extend(classify(&Evidence {
            out: &out,
            dtype: problem.dtype,
            cols: shape.n,
            expected: &reference,
            // Nothing is planted beside C on the simulator: a read outside the kernel's
            // buffers is a fault there.
            decoy: &[],
            previous: None,
            same_buffers: None,
        }));
    }
    Ok(Launched::Ran {
        flags,
        summary: v.summary(),
        per_opcode_warps: report.per_opcode_warps,
    })
}

/// The inputs of input set `seed` of a test, as the GPU run draws them.
fn problem(t: &JobTest, seed: u64) -> Result<Problem> {
    let (shape, dtype, dist) = (t.shape(), t.dtype()?, t.dist()?);
    let mut p = Problem::generate(shape, dtype, dist, seed);
    if dist == Dist::AllOnes {
        spike(&mut p, seed);
    }
    Ok(p)
}

fn correctness(
    program: &sim::Program,
    source: &KernelSource,
    spec: &KernelSpec,
    t: &JobTest,
    bounds: Bounds,
) -> Result<TestResult> {
    let sets = t.seeds.sets.len();
    let mut launches = 0;
    for (si, &seed) in t.seeds.sets.iter().enumerate() {
        let p = problem(t, seed)?;
        // One schedule seed per input set, all from the test's schedule seed; each input set
        // runs under every policy of POLICIES.
        let schedule = t.seeds.schedule.wrapping_add(si as u64);
        let mut failed = None;
        for policy in POLICIES {
            let outcome = launch(program, source, spec, &p, (schedule, policy), bounds)?;
            launches += 1;
            match outcome {
                Launched::Ran { flags, .. } if flags.is_empty() => continue,
                Launched::Ran { flags, summary, .. } => {
                    let d = format!(
                        "{summary} (schedule seed {schedule}, policy {})",
                        policy.name()
                    );
                    failed = Some((flags, d));
                }
                Launched::Stopped(f) => {
                    let d = format!("the simulator stopped the kernel: {}", f.detail);
                    failed = Some((vec![f], d));
                }
            }
            break;
        }
        let Some((flags, detail)) = failed else {
            continue;
        };
        // An instruction the simulator does not model is its limit, not the kernel's fault.
        let status = if flags.iter().any(|f| f.name == UNSUPPORTED) {
            Status::Error
        } else {
            Status::Failed
        };
        return Ok(TestResult {
            name: t.name.clone(),
            status,
            launches,
            flags,
            detail: format!("input set {} of {sets}: {detail}", si + 1),
            timing: None,
        });
    }
    Ok(TestResult {
        name: t.name.clone(),
        status: Status::Passed,
        launches,
        flags: Vec::new(),
        detail: format!(
            "{sets} input sets, each under {} schedules (random, async-late, pct3), every output verified against the fp64 reference (simulated: the native sm_100a PTX)", POLICIES.len()
        ),
        timing: None,
    })
}

/// The measured launch of one build, with the simulator's counts.
fn measured(
    program: &sim::Program,
    source: &KernelSource,
    spec: &KernelSpec,
    m: &MeasureJob,
    dtype: Dtype,
    bounds: Bounds,
) -> Result<Measured> {
    let t = m.as_test(dtype);
    let p = problem(&t, m.seed)?;
    Ok(match launch(program, source, spec, &p, (t.seeds.schedule, POLICY), bounds)? {
        Launched::Ran {
            flags,
            summary,
            per_opcode_warps,
        } => Measured::Ran {
            flags,
            summary,
            counts: Counts::Ptx(PtxCounts {
                source: format!(
                    "the PTX simulator's warp-level executed counts (sm_100a PTX, schedule seed {})",
                    t.seeds.schedule
                ),
                per_opcode: per_opcode_warps,
            }),
        },
        Launched::Stopped(f) if f.name == UNSUPPORTED => Measured::Error(f.detail),
        Launched::Stopped(f) => Measured::Failed {
            detail: format!("the simulator stopped the kernel: {}", f.detail),
            flags: vec![f],
        },
    })
}

/// The simulating child: every test of the job, then the measured launches, as lines of
/// `results.jsonl` (the run child's format).
pub fn run(job: &Job, dir: &Path) -> Result<()> {
    let mut results = ResultsWriter::create(dir)?;
    let spec = job.spec()?;
    let source = KernelSource {
        path: job.source_name.clone(),
        text: job.source.clone(),
    };
    let bounds = Bounds {
        steps: job.sim_steps.max(1),
        seconds: job.launch_seconds,
    };
    // Each build's PTX, decoded; `Err`: what the simulator cannot read (its limit: the tests of
    // that build are the grader's error).
    let mut programs: Vec<(Dtype, Result<sim::Program, String>)> = Vec::new();
    for dtype in job.dtypes()? {
        let path = ptx_path(dir, dtype);
        let ptx = std::fs::read_to_string(&path)
            .with_context(|| format!("no sm_100a PTX for {dtype} from the compile"))?;
        let program = sim::Program::parse(&ptx).map_err(|e| {
            format!("the simulator cannot run the {dtype} build's PTX: {e}; grade it on a GPU (--on-gpu)")
        });
        programs.push((dtype, program));
    }
    let program_for = |d: Dtype| -> Result<&Result<sim::Program, String>> {
        programs
            .iter()
            .find(|(x, _)| *x == d)
            .map(|(_, p)| p)
            .ok_or_else(|| anyhow!("internal: no {d} build in the simulating child"))
    };
    for t in &job.tests {
        let result = match (t.kind, program_for(t.dtype()?)?) {
            (Kind::Correctness, Err(why)) => TestResult {
                name: t.name.clone(),
                status: Status::Error,
                launches: 0,
                flags: vec![Flag::new(UNSUPPORTED, why.clone())],
                detail: format!("not run: {why}"),
                timing: None,
            },
            (Kind::Correctness, Ok(program)) => correctness(program, &source, &spec, t, bounds)
                .with_context(|| format!("test {:?}", t.name))?,
            (Kind::Performance, _) => TestResult {
                name: t.name.clone(),
                status: Status::Skipped,
                launches: 0,
                flags: Vec::new(),
                detail: NO_SPEED.into(),
                timing: None,
            },
            (Kind::Technique, _) => {
                anyhow::bail!("internal: a requirement was sent to the simulator as a test")
            }
        };
        results.emit(&RunLine::Test(result))?;
    }
    if let Some(m) = &job.measure {
        for (dtype, program) in &programs {
            let measured = match program {
                Ok(program) => measured(program, &source, &spec, m, *dtype, bounds)
                    .unwrap_or_else(|e| Measured::Error(format!("{e:#}"))),
                Err(why) => Measured::Error(why.clone()),
            };
            results.emit(&RunLine::Measured {
                build: dtype.to_string(),
                measured,
            })?;
        }
    }
    Ok(())
}

/// The measured builds among a simulating child's lines.
pub fn measured_builds(lines: &[RunLine]) -> Vec<BuildMeasured> {
    lines
        .iter()
        .filter_map(|l| match l {
            RunLine::Measured { build, measured } => Some(BuildMeasured {
                build: build.clone(),
                measured: measured.clone(),
            }),
            _ => None,
        })
        .collect()
}
