//! The rubric's requirements scored into the report's rows, one path for every kind: each
//! requirement decided on the [`Evidence`] gathered so far ([`super::technique`]), all the
//! points or none; a skipped row counts neither way. The grader scores again as each piece of
//! evidence arrives (the compile child's disassembly, the measured launches, the traced
//! launch's facts); a requirement whose evidence is not there yet keeps its row.

use super::report::{GradeReport, TestReport};
use super::rubric::Rubric;
use super::technique::Evidence;
use super::vocab::{Kind, Status};

/// The report's row of the requirement named `name`, if the report has one.
fn row<'a>(r: &'a mut GradeReport, name: &str) -> Option<&'a mut TestReport> {
    r.tests
        .iter_mut()
        .find(|t| t.kind == Kind::Technique && t.name == name)
}

/// Score every requirement of `rubric` that `evidence` decides into its row of `r`.
pub fn score(r: &mut GradeReport, rubric: &Rubric, evidence: &Evidence) {
    for q in &rubric.requirements {
        let Some(t) = row(r, &q.name) else {
            continue;
        };
        let Some(v) = q.check(evidence) else {
            continue;
        };
        t.score = if v.status == Status::Passed {
            q.points
        } else {
            0.0
        };
        // Skipped (compiled only, or not measured here) counts neither way, as a skipped test.
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

/// Why the executed requirements of a Blackwell kernel graded under the emulation are skipped.
pub const EMULATED: &str = "this GPU runs the Blackwell kernel under the tcgen05 emulation, so its native sm_100a instructions never execute here: their executed counts need a B200 (CUPTI) or the PTX simulator";

/// Why they are skipped in a compile-only grading.
pub const COMPILED_ONLY: &str =
    "compiled only (a pre-screen: no GPU was used), and an executed count needs the measured launch on a GPU";

/// Why they are skipped in a compile-only grading of a rubric graded on the simulator.
pub const COMPILED_ONLY_SIM: &str =
    "compiled only (a pre-screen: no GPU was used), and an executed count needs the measured launch on the simulator";
