//! `runner grade --batch DIR --resume`: finish a batch a signal stopped. A student whose
//! `grade.json` in the output folder is complete and was graded as this run would grade them is
//! kept; every other student is graded (again).
//!
//! "As this run would": the same student, this runner build (its commit), the same rubric file
//! (its SHA-256), the same submission text (its SHA-256), the same seeds for every test (so the
//! same secret, or the same `--public-only`), and the same place (the simulator, a pre-screen, or
//! a GPU). A report is written whole (a temporary file renamed), so one that parses is complete.

use super::grader::Grader;
use super::report::{GradeReport, GRADE_FILE};
use super::submission::{read_source, report_folder, Submission};
use std::path::Path;

/// Why `r` (read from `out`) cannot stand for `sub`'s grade in this run; `None`: it can.
pub fn mismatch(grader: &Grader, sub: &Submission, r: &GradeReport) -> Option<String> {
    if r.student != sub.student {
        return Some(format!("it is {:?}'s", r.student));
    }
    if r.grader_commit != env!("WB_BUILD_COMMIT") {
        return Some(format!(
            "another runner build graded it (commit {})",
            r.grader_commit
        ));
    }
    if r.rubric.sha256 != grader.rubric.sha256 {
        return Some("another rubric graded it".into());
    }
    let source = read_source(sub, grader.rubric.limits.source_bytes)
        .map(|(_, sha)| sha)
        .unwrap_or_default();
    if r.source_sha256 != source {
        return Some("the submission changed since".into());
    }
    let on = r.gpu.as_ref().map(|g| g.name.as_str());
    let simulator = super::batch::simulator_env().name;
    let same_place = if grader.compile_only {
        on.is_none()
    } else if grader.simulate {
        on == Some(simulator.as_str())
    } else {
        // On GPUs: any GPU of the pool (a report names the one it ran on).
        on.is_some_and(|n| n != simulator)
    };
    if !same_place {
        return Some("it was graded elsewhere (simulator, GPU or pre-screen)".into());
    }
    if grader.compile_only {
        // A pre-screen derives no seeds.
        return None;
    }
    let seeds = match grader.seeds(&sub.student) {
        Ok(s) => s,
        Err(e) => return Some(format!("{e:#}")),
    };
    let tests = r
        .tests
        .iter()
        .filter(|t| t.kind != super::vocab::Kind::Technique)
        .count();
    let same = grader.rubric.tests.len() == tests
        && grader
            .rubric
            .tests
            .iter()
            .zip(&seeds)
            .all(|(t, s)| r.tests.iter().any(|x| x.name == t.name && x.seeds == *s));
    if !same {
        return Some("its tests or seeds differ (another secret, or --public-only)".into());
    }
    None
}

/// Split a class into the students whose grade `out` already holds (their reports) and those
/// still to grade.
pub fn split(
    grader: &Grader,
    subs: Vec<Submission>,
    out: &Path,
) -> (Vec<GradeReport>, Vec<Submission>) {
    let mut kept = Vec::new();
    let mut todo = Vec::new();
    for sub in subs {
        let path = out.join(report_folder(&sub.student)).join(GRADE_FILE);
        if !path.is_file() {
            todo.push(sub);
            continue;
        }
        match GradeReport::read(&path) {
            Ok(r) => match mismatch(grader, &sub, &r) {
                None => kept.push(r),
                Some(why) => {
                    eprintln!("resume: grading {} again: {why}", sub.student);
                    todo.push(sub);
                }
            },
            Err(e) => {
                eprintln!("resume: grading {} again: {e:#}", sub.student);
                todo.push(sub);
            }
        }
    }
    (kept, todo)
}
