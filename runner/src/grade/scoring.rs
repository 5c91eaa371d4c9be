//! The rubric's requirements scored into the report's rows: each SASS requirement's static part
//! against the compile child's disassembly, its executed part against the measured launches
//! (or skipped where none can run), and each trace requirement against the traced launch's
//! facts. All the points or none; a skipped row counts neither way.

use super::counts::BuildMeasured;
use super::executed::check;
use super::report::{GradeReport, TestReport};
use super::rubric::Rubric;
use super::technique::BuildSass;
use super::vocab::{FactResult, Kind, Status};
use common::step::KernelSpec;

/// The report's row of the requirement named `name` (SASS or trace), if the report has one.
fn row<'a>(r: &'a mut GradeReport, name: &str) -> Option<&'a mut TestReport> {
    r.tests
        .iter_mut()
        .find(|t| t.kind == Kind::Technique && t.name == name)
}

/// Merge the trace facts a run child found (or the grader's account of why none came back:
/// `missing`, for every requirement whose fact is not in `facts`) into the report's trace
/// requirements, scored like SASS requirements: all the points or none.
pub fn apply_facts(
    r: &mut GradeReport,
    rubric: &Rubric,
    facts: &[FactResult],
    missing: Option<&FactResult>,
) {
    for q in &rubric.trace_requirements {
        let Some(t) = row(r, &q.name) else {
            continue;
        };
        let Some(res) = facts.iter().find(|f| f.fact == q.fact.name()).or(missing) else {
            continue;
        };
        let v = q.check(res);
        t.score = if v.status == Status::Passed {
            q.points
        } else {
            0.0
        };
        // Skipped (compiled only) counts neither way, as a skipped test.
        t.max_score = if v.status == Status::Skipped {
            0.0
        } else {
            q.points
        };
        t.status = v.status;
        t.detail = v.detail;
        t.flags = v.flags;
    }
}

/// Score each requirement's static part against the SASS the compile child reported. A static
/// failure is final; a static requirement (a ban) that holds earns its points; one with an
/// executed part that holds is only half shown: its name is returned, for the measurement.
pub fn apply_static(r: &mut GradeReport, rubric: &Rubric, builds: &[BuildSass]) -> Vec<String> {
    let mut pending = Vec::new();
    for q in &rubric.requirements {
        let Some(t) = row(r, &q.name) else {
            continue;
        };
        if q.ptx.is_some() {
            // A PTX class: no binary to look in (the PTX is the source's own translation);
            // only the simulator's executed count decides it.
            t.max_score = q.points;
            t.score = 0.0;
            t.flags.clear();
            t.status = Status::Error;
            t.detail = "not yet measured".into();
            pending.push(q.name.clone());
            continue;
        }
        let v = q.check(builds);
        t.max_score = q.points;
        t.score = 0.0;
        t.flags = v.flag.into_iter().collect();
        if v.passed && q.executed.is_some() {
            t.status = Status::Error;
            t.detail = format!("in the binary ({}); not yet measured", v.detail);
            pending.push(q.name.clone());
            continue;
        }
        t.status = if v.passed {
            Status::Passed
        } else if v.grader_error {
            Status::Error
        } else {
            Status::Failed
        };
        if v.passed {
            t.score = q.points;
        }
        t.detail = v.detail;
    }
    pending
}

/// The pending requirements `pending` not measured, and why (compiled only; the native code
/// does not run on this GPU): skipped, counting neither way, never awarded.
pub fn skip(r: &mut GradeReport, pending: &[String], why: &str) {
    for name in pending {
        if let Some(t) = row(r, name) {
            t.status = Status::Skipped;
            t.score = 0.0;
            t.max_score = 0.0;
            t.detail = format!("not measured: {why}");
            t.flags.clear();
        }
    }
}

/// Score the pending requirements on the measured builds.
pub fn apply_measured(
    r: &mut GradeReport,
    rubric: &Rubric,
    spec: &KernelSpec,
    pending: &[String],
    builds: &[BuildMeasured],
) {
    let Some(shape) = rubric.measure_shape else {
        return;
    };
    let k = spec.shape();
    for q in rubric
        .requirements
        .iter()
        .filter(|q| pending.contains(&q.name))
    {
        let Some(e) = &q.executed else { continue };
        let Some(t) = row(r, &q.name) else { continue };
        let class = q.class();
        let what = if q.why.is_empty() {
            class.to_string()
        } else {
            format!("{class} ({})", q.why)
        };
        let v = check(&what, &class, e, &k, shape, builds);
        t.score = if v.status == Status::Passed {
            q.points
        } else {
            0.0
        };
        t.max_score = q.points;
        t.status = v.status;
        t.detail = v.detail;
        t.flags = v.flags;
    }
}

/// Why the executed requirements of a Blackwell kernel graded under the emulation are skipped.
pub const EMULATED: &str = "this GPU runs the Blackwell kernel under the tcgen05 emulation, so its native sm_100a instructions never execute here: their executed counts need a B200 (CUPTI) or the PTX simulator";

/// Why they are skipped in a compile-only grading.
pub const COMPILED_ONLY: &str =
    "compiled only (a pre-screen: no GPU was used), and an executed count needs the measured launch on a GPU";

/// Why they are skipped in a compile-only grading of a rubric graded on the simulator.
pub const COMPILED_ONLY_SIM: &str =
    "compiled only (a pre-screen: no GPU was used), and an executed count needs the measured launch on the simulator";
