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
//! After its tests, a child given a [`super::job::MeasureJob`] reports, for each build it
//! graded, what the tests' own launches executed: the simulator's warp-level counts per PTX
//! opcode and each technique instruction attributed to its unit ([`PtxCounts`],
//! [`LaunchUnits`]). There is no separate measured launch: the counts are the graded launches'.

use super::counts::{BuildMeasured, Counts, LaunchUnits, Measured, PtxCounts, UnitRecord};
use super::integrity::{classify, input_flag, Evidence};
use super::job::{Job, JobTest, ResultsWriter, RunLine, TestResult};
use super::protocol::ptx_path;
use super::vocab::{Flag, Kind, Status};
use super::worker::{exactness_flag, spike, CPU_SAMPLES};
use anyhow::{Context, Result};
use common::compile::KernelSource;
use common::simulate::{failure_of, read_u16, sim_launch, Policy};
use common::step::KernelSpec;
use common::verify::{cpu_reference, verify};
use common::{Dist, Dtype, Problem};
use std::path::Path;

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
        units: LaunchUnits,
    },
    /// The simulator stopped it: the flag and the simulator's message.
    Stopped(Flag),
}

/// The flag a simulator finding is reported as: the names the GPU path uses where the meaning is
/// the same (a spent budget is a hang, a fault a fault), the rule's own name otherwise. The
/// texts speak the rubric's words (`[limits] sim_steps`), never the simulator's API.
fn finding_flag(f: &common::simulate::SimFailure, budget: u64) -> Flag {
    let schedule = format!("schedule seed {}, policy {}", f.schedule_seed, f.policy);
    let detail = format!("{} ({schedule})", f.message);
    match f.kind {
        "rule" => {
            let rule = f.rule.as_deref().unwrap_or("?");
            // The simulator's message starts `rule NAME: `; the flag says it once.
            let said = f
                .message
                .strip_prefix(&format!("rule {rule}: "))
                .unwrap_or(&f.message);
            Flag::new(
                "ordering-rule",
                format!("broke the ordering rule {rule}: {said} ({schedule})"),
            )
        }
        "deadlock" => Flag::new("deadlock", detail),
        "step-limit" => Flag::new(
            "timeout",
            format!(
                "exceeded its budget of {budget} simulated steps (an instruction each; an MMA or a copy by its size): a kernel that spins, or far more work than the shape needs; the rubric's [limits] sim_steps sets the budget ({schedule})"
            ),
        ),
        "deadline" => Flag::new(
            "timeout",
            format!(
                "ran past the rubric's [limits] launch_seconds on the simulator: a kernel that spins, or far more work than the shape needs ({schedule})"
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
    label: &str,
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
    let units = units_of(&report, (l.a, l.b), &k, problem, label);
    Ok(Launched::Ran {
        flags,
        summary: v.summary(),
        units,
    })
}

/// The technique instructions of a launch that did the technique's work, attributed to units
/// with the step's tile facts (`k`, never the submission's): the definitions the rubric docs
/// state (`rubrics/step3-blackwell.toml`).
///
/// - An MMA belongs to (its cluster, the cluster tile, the k-block) of the data it multiplied:
///   the TMA loads that last wrote the first bytes of its A and its B operand (`sim::attrib`),
///   A's from the A tensor at (k, row), B's from the B tensor at (k, column). The tile is
///   (row / the cluster tile's rows, column / its columns), the k-block k / TILE_K. An MMA whose
///   operands no TMA load of A and B wrote, or whose A and B are of different k, belongs to
///   no unit.
/// - A commit belongs to the units of the MMAs it covers (those its thread issued since its
///   previous commit), once each, and counts only if it did a commit's work: it arrived, every
///   arrival was waited on by a thread of that CTA that refills with TMA or reads the
///   accumulator, and, multicast, its CTA mask names both CTAs of the issuing CTA's pair.
fn units_of(
    report: &sim::RunReport,
    (a, b): (u64, u64),
    k: &common::step::KernelShape,
    problem: &Problem,
    label: &str,
) -> LaunchUnits {
    let s = problem.shape;
    let (ctm, ctn, tk) = (
        k.cluster_tile.0.max(1),
        k.cluster_tile.1.max(1),
        k.tile_k.max(1),
    );
    let mut processed = Vec::new();
    let mut records: Vec<UnitRecord> = Vec::new();
    let mut add = |op: &str, cluster: u32, tile: [u32; 2], kb: u32| match records
        .iter_mut()
        .find(|r| r.op == op && r.cluster == cluster && r.tile == tile && r.kb == kb)
    {
        Some(r) => r.n += 1,
        None => records.push(UnitRecord {
            op: op.to_string(),
            cluster,
            tile,
            kb,
            n: 1,
        }),
    };
    for (ci, c) in report.attribution.iter().enumerate() {
        let ci = ci as u32;
        let unit_of = |m: &sim::attrib::MmaRecord| -> Option<([u32; 2], u32)> {
            let (oa, ob) = (m.a.as_ref()?, m.b.as_ref()?);
            if oa.tensor != a || ob.tensor != b || oa.coords.len() < 2 || ob.coords.len() < 2 {
                return None;
            }
            let (ka, row, kb_, col) = (oa.coords[0], oa.coords[1], ob.coords[0], ob.coords[1]);
            if ka != kb_ || ka < 0 || row < 0 || col < 0 {
                return None;
            }
            let tile = [row as u32 / ctm, col as u32 / ctn];
            if tile[0] as usize >= s.m / ctm as usize || tile[1] as usize >= s.n / ctn as usize {
                return None;
            }
            Some((tile, ka as u32 / tk))
        };
        let mma_units: Vec<Option<([u32; 2], u32)>> = c.mmas.iter().map(unit_of).collect();
        for (m, u) in c.mmas.iter().zip(&mma_units) {
            if let Some((tile, kb)) = *u {
                add(&m.op, ci, tile, kb);
                if !processed.contains(&(ci, tile)) {
                    processed.push((ci, tile));
                }
            }
        }
        for cm in &c.commits {
            let pair = cm.rank & !1;
            let mask_ok = cm
                .mask
                .is_none_or(|mask| (u32::from(mask) >> pair) & 3 == 3);
            if !(cm.arrived && cm.used && mask_ok) {
                continue;
            }
            let mut units: Vec<([u32; 2], u32)> = cm
                .covers
                .iter()
                .filter_map(|&i| mma_units.get(i as usize).copied().flatten())
                .collect();
            units.sort();
            units.dedup();
            for (tile, kb) in units {
                add(&cm.op, ci, tile, kb);
            }
        }
    }
    LaunchUnits {
        test: label.to_string(),
        shape: [s.m, s.n, s.k],
        per_opcode: report.per_opcode_warps.clone(),
        processed,
        records,
    }
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

/// A build's graded launches so far: what they executed, per unit, or the first that failed
/// (a wrong launch's counts prove nothing).
#[derive(Default)]
struct Graded {
    launches: Vec<LaunchUnits>,
    failed: Option<(String, Vec<Flag>)>,
}

fn correctness(
    program: &sim::Program,
    source: &KernelSource,
    spec: &KernelSpec,
    t: &JobTest,
    bounds: Bounds,
    graded: &mut Graded,
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
            let label = format!(
                "{}, input set {} of {sets}, schedule seed {schedule}, policy {}",
                t.name,
                si + 1,
                policy.name()
            );
            let outcome = launch(
                program,
                source,
                spec,
                &p,
                (schedule, policy),
                bounds,
                &label,
            )?;
            launches += 1;
            match outcome {
                Launched::Ran { flags, units, .. } if flags.is_empty() => {
                    graded.launches.push(units);
                    continue;
                }
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
        if graded.failed.is_none() {
            graded.failed = Some((format!("{}: {detail}", t.name), flags.clone()));
        }
        // A form the decoder let through and the simulator then could not run is its limit
        // (a gap in the decode-time refusal), not the kernel's fault.
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

/// What one build's graded launches executed, as the requirements read it: the counts of every
/// correctness launch of the build in this child (no separate measured launch: a kernel that
/// turns a technique on only at a shape no test uses shows nothing).
fn measured(dtype: Dtype, graded: Graded) -> Measured {
    if let Some((detail, flags)) = graded.failed {
        return Measured::Failed {
            detail: format!(
                "a graded launch of the {dtype} build failed ({detail}): its counts prove nothing"
            ),
            flags,
        };
    }
    let mut per_opcode: Vec<(String, u64)> = Vec::new();
    for l in &graded.launches {
        for (op, n) in &l.per_opcode {
            match per_opcode.iter_mut().find(|(o, _)| o == op) {
                Some(e) => e.1 += n,
                None => per_opcode.push((op.clone(), *n)),
            }
        }
    }
    per_opcode.sort();
    Measured::Ran {
        flags: Vec::new(),
        summary: format!(
            "{} graded launches of the {dtype} build, every one verified",
            graded.launches.len()
        ),
        counts: Counts::Ptx(PtxCounts {
            source: "the PTX simulator, in the graded launches of the tests (sm_100a PTX; each technique instruction attributed to its cluster, cluster tile and k-block)".into(),
            per_opcode,
            launches: graded.launches,
        }),
    }
}

/// The simulating child: every test of the job, then (with a [`MeasureJob`]) what each build's
/// graded launches executed, as lines of `results.jsonl` (the run child's format).
///
/// Whether the simulator models the kernel is decided first, once per build, when its PTX is
/// decoded (`sim::Program::parse` refuses every form it does not model, naming the PTX and
/// source line): a build it cannot run has none of its tests run, each reported as not graded
/// (never a per-test failure that depends on the inputs).
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
    let mut programs: Vec<(Dtype, Result<sim::Program, String>, Graded, bool)> = Vec::new();
    for dtype in job.dtypes()? {
        let path = ptx_path(dir, dtype);
        let ptx = std::fs::read_to_string(&path)
            .with_context(|| format!("no sm_100a PTX for {dtype} from the compile"))?;
        let program =
            sim::Program::parse(&ptx).map_err(|e| unsupported_words(dtype, &e.to_string()));
        programs.push((dtype, program, Graded::default(), false));
    }
    for t in &job.tests {
        let dtype = t.dtype()?;
        let Some((_, program, graded, tested)) = programs.iter_mut().find(|(d, ..)| *d == dtype)
        else {
            anyhow::bail!("internal: no {dtype} build in the simulating child");
        };
        let result = match (t.kind, &*program) {
            (Kind::Correctness, Err(why)) => TestResult {
                name: t.name.clone(),
                status: Status::Error,
                launches: 0,
                flags: vec![Flag::new(UNSUPPORTED, why.clone())],
                detail: format!("not graded: {why}"),
                timing: None,
            },
            (Kind::Correctness, Ok(program)) => {
                *tested = true;
                correctness(program, &source, &spec, t, bounds, graded)
                    .with_context(|| format!("test {:?}", t.name))?
            }
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
    if job.measure.is_some() {
        for (dtype, program, graded, tested) in programs {
            let measured = match program {
                Err(why) => Measured::Error(why),
                // A build this child graded no test of: the other child reports it.
                Ok(_) if !tested => continue,
                Ok(_) => measured(dtype, graded),
            };
            results.emit(&RunLine::Measured {
                build: dtype.to_string(),
                measured,
            })?;
        }
    }
    Ok(())
}

/// What a student and the instructor read when the simulator cannot run a build: what it does
/// not model and where (the simulator's decode error names the PTX and source line), and how
/// to grade it anyway.
pub fn unsupported_words(dtype: Dtype, error: &str) -> String {
    format!(
        "the simulator does not model this kernel's {dtype} build: {error}. The kernel was not graded; the instructor can grade it on a GPU with --on-gpu"
    )
}

/// Whether the simulator models every instruction form of a build's PTX, decided on the whole
/// module when it is decoded (`sim::Program::parse` refuses each form `steps/sim/src/forms.rs`
/// and the decoder do not run, naming it with its PTX and source line), in the compile child:
/// `None` when it does, else one line for the student, "the simulator does not model X, at
/// your line L". Never data-dependent: a form on a path only hidden inputs take is refused as
/// surely as one every launch executes.
pub fn screen_ptx(ptx: &str, source_name: &str) -> Option<String> {
    let e = sim::Program::parse(ptx).err()?;
    Some(match e {
        sim::SimError::Unsupported { opcode, ptx_line } => {
            not_modelled_words(&opcode, ptx_line, source_name)
        }
        other => format!("the simulator cannot read this kernel's PTX: {other}"),
    })
}

/// "the simulator does not model X, at your line L" from the decoder's refusal: `what` is the
/// form, with " (source FILE:L ...)" after it where the PTX's `.loc` says where it came from.
fn not_modelled_words(what: &str, ptx_line: u32, source_name: &str) -> String {
    let (form, source) = match what.find(" (source ") {
        Some(i) => (&what[..i], Some(&what[i + " (source ".len()..])),
        None => (what, None),
    };
    // The first FILE:LINE of the source part: the submission's own line where the form was
    // written there or inlined from a header into it.
    let line_in = |file: &str| -> Option<u32> {
        let src = source?;
        let at = src.find(&format!("{file}:"))? + file.len() + 1;
        let digits: String = src[at..].chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok()
    };
    let own = std::path::Path::new(source_name)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| source_name.to_string());
    match (line_in(&own), source) {
        (Some(l), _) => format!("the simulator does not model {form}, at your line {l}"),
        (None, Some(src)) => format!(
            "the simulator does not model {form}, at {}",
            src.trim_end_matches(')')
        ),
        (None, None) if ptx_line > 0 => {
            format!("the simulator does not model {form}, at PTX line {ptx_line}")
        }
        (None, None) => format!("the simulator does not model {form}"),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_form_and_the_students_line() {
        assert_eq!(
            not_modelled_words(
                "tcgen05.shift.cta_group::1.down (source kernel.cu:120 (inlined from blackwell.cuh:45))",
                812,
                "kernel.cu"
            ),
            "the simulator does not model tcgen05.shift.cta_group::1.down, at your line 120"
        );
        assert_eq!(
            not_modelled_words("prmt.b32.f4e (source kernel.cu:7)", 30, "kernel.cu"),
            "the simulator does not model prmt.b32.f4e, at your line 7"
        );
        assert_eq!(
            not_modelled_words("x (source blackwell.cuh:9)", 3, "kernel.cu"),
            "the simulator does not model x, at blackwell.cuh:9"
        );
        assert_eq!(
            not_modelled_words("module variables of more than 256 MiB", 0, "kernel.cu"),
            "the simulator does not model module variables of more than 256 MiB"
        );
    }

    #[test]
    fn a_form_on_any_path_is_refused_when_the_module_is_decoded() {
        // A `trap`-free kernel whose only unmodelled instruction sits behind a branch no
        // launch would take with these parameters: refused all the same, before any test.
        let ptx = ".version 8.7\n.target sm_100a\n.address_size 64\n.visible .entry k(.param .u32 p)\n{\n.reg .pred %p<2>;\n.reg .b32 %r<4>;\n.loc 1 5 0\nld.param.u32 %r1, [p];\nsetp.eq.u32 %p1, %r1, 12345;\n@!%p1 bra DONE;\n.loc 1 9 0\nfns.b32 %r2, %r1, 0, 1;\nDONE:\nret;\n}\n.file 1 \"kernel.cu\"\n";
        let refused = screen_ptx(ptx, "kernel.cu");
        let Some(why) = refused else {
            panic!("decoded without a refusal");
        };
        assert_eq!(
            why, "the simulator does not model fns.b32, at your line 9",
            "the form and the line of the source (`.loc 1 9`), though no launch reaches it"
        );
    }
}
