//! The traced launch's facts as the grader reports them: a rubric's trace requirements
//! (`trace = "..."`, Hopper) checked by the run child on its one traced launch, each fact a pure
//! function of the records ([`common::trace_facts`]) and checked only on a launch whose output
//! was right. The records are the submission's own (a hostile kernel can forge them), so a
//! fact carries no points; the grader's own proof is an executed requirement
//! ([`super::executed`]).

use super::vocab::{FactResult, Flag, Status};
use common::trace::Recording;
use common::trace_facts::Fact;

/// What the run child's one traced launch came to.
#[derive(Debug, Clone)]
pub enum Traced {
    /// It ran: the flags of the checks of its output and of the grader's buffers (none: all
    /// right), their summary, and its records (or why they could not be decoded).
    Ran {
        flags: Vec<Flag>,
        summary: String,
        recording: Result<Recording, String>,
    },
    /// It could not be made, or it faulted.
    Failed { detail: String, flags: Vec<Flag> },
    /// It was not made (an earlier test lost the GPU context): why.
    NotRun(String),
}

/// Each fact's result from the traced launch: a fact is checked only on a launch whose output
/// was right and whose records decoded, so a kernel that traces well but computes wrong (or
/// writes where it must not) shows no fact.
pub fn evaluate(facts: &[Fact], traced: &Traced) -> Vec<FactResult> {
    facts
        .iter()
        .map(|&f| {
            let (status, detail, flags) = match traced {
                Traced::NotRun(why) => (Status::Error, why.clone(), Vec::new()),
                Traced::Failed { detail, flags } => (Status::Failed, detail.clone(), flags.clone()),
                Traced::Ran { flags, summary, .. } if !flags.is_empty() => (
                    Status::Failed,
                    format!(
                        "the traced launch was wrong ({summary}): its records count for nothing"
                    ),
                    flags.clone(),
                ),
                Traced::Ran {
                    recording: Err(e), ..
                } => (
                    Status::Failed,
                    format!("the trace buffer is malformed: {e}"),
                    Vec::new(),
                ),
                Traced::Ran {
                    recording: Ok(rec), ..
                } => match f.check(rec) {
                    Ok(summary) => (Status::Passed, summary, Vec::new()),
                    Err(why) => (Status::Failed, why, Vec::new()),
                },
            };
            FactResult {
                fact: f.name().to_string(),
                status,
                detail,
                flags,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::trace::Phase::*;
    use common::trace_facts::sample::*;

    /// A step-3 style rubric: two facts, feedback worth no points (a kernel can forge them).
    const RUBRIC: &str = r#"
name = "t"
step = 3
arch = "sm_90a"
[[tests]]
name = "public"
kind = "correctness"
shape = [512, 512, 256]
points = 10
seed = 1
[[requirements]]
name = "producer"
points = 0
trace = "loads-by-producer-only"
why = "a producer warp alone loads"
[[requirements]]
name = "store-warp"
points = 0
trace = "dedicated-store-warp"
"#;

    /// A report (public passed 10/10, hidden failed 0/10, speed skipped) with the rubric's
    /// trace requirements merged from `traced`, as the grader does with the run child's lines.
    fn graded(traced: Traced) -> crate::grade::report::GradeReport {
        use crate::grade::rubric::Rubric;
        use crate::grade::vocab::Kind;
        let rubric = Rubric::parse(RUBRIC).unwrap();
        let mut r = crate::grade::report::tests::sample("alice", None);
        for q in rubric.requirements.iter().filter(|q| q.fact().is_some()) {
            let mut t = r.tests[0].clone();
            t.name = q.name.clone();
            t.kind = Kind::Technique;
            t.points = q.points;
            (t.score, t.max_score) = (0.0, q.points);
            t.status = Status::Error;
            t.detail = "not checked".into();
            r.tests.push(t);
        }
        let facts: Vec<Fact> = rubric
            .requirements
            .iter()
            .filter_map(|q| q.fact())
            .collect();
        let results = evaluate(&facts, &traced);
        // Over the pipe and back, as the run child's results.jsonl lines.
        let lines: Vec<String> = results
            .iter()
            .map(|f| serde_json::to_string(&crate::grade::job::RunLine::Fact(f.clone())).unwrap())
            .collect();
        let back: Vec<FactResult> = lines
            .iter()
            .map(|l| match serde_json::from_str(l).unwrap() {
                crate::grade::job::RunLine::Fact(f) => f,
                _ => panic!("not a fact line"),
            })
            .collect();
        let evidence = crate::grade::technique::Evidence {
            facts: Some(crate::grade::technique::Facts {
                found: back,
                missing: None,
            }),
            ..Default::default()
        };
        crate::grade::scoring::score(&mut r, &rubric, &evidence);
        r.tally();
        r
    }

    fn ran(recording: Recording, flags: Vec<Flag>) -> Traced {
        Traced::Ran {
            flags,
            summary: "rel. error norm 1e-4".into(),
            recording: Ok(recording),
        }
    }

    #[test]
    fn facts_of_the_traced_launch_are_scored_like_sass_requirements() {
        // The step-3 twin: a producer and consumers that store their own tiles.
        let r = graded(ran(
            rec(vec![
                producer(0, &[0]),
                consumer(0, 4, &[0]),
                producer(1, &[1]),
                consumer(1, 4, &[1]),
            ]),
            Vec::new(),
        ));
        let (producer_req, store_req) = (&r.tests[3], &r.tests[4]);
        assert_eq!(producer_req.status, Status::Passed);
        assert_eq!((producer_req.score, producer_req.max_score), (0.0, 0.0));
        assert_eq!(
            producer_req.detail,
            "loads-by-producer-only (a producer warp alone loads): 2 producer warp(s) in 2 CTA(s) issued the loads; 2 MMA warp(s) waited for each k-block's data"
        );
        assert_eq!(store_req.status, Status::Failed);
        assert_eq!((store_req.score, store_req.max_score), (0.0, 0.0));
        assert_eq!(
            store_req.detail,
            "dedicated-store-warp not shown: CTA 0: no warp ran an epilogue without also loading or multiplying"
        );
        assert_eq!(store_req.flags[0].name, "technique-missing");
        // 10 (public); the hidden test and public's 10 count, the facts nothing.
        assert_eq!((r.score, r.max_score), (10.0, 20.0));
        assert!(r.flags.contains(&"technique-missing".to_string()));
    }

    #[test]
    fn a_consumer_that_also_loads_or_a_wrong_traced_launch_shows_no_fact() {
        let mut loads = consumer(0, 4, &[0]);
        loads.2.insert(2, enter(0, 4, Load, 0));
        let r = graded(ran(rec(vec![producer(0, &[0]), loads]), Vec::new()));
        let q = &r.tests[3];
        assert_eq!((q.status, q.score), (Status::Failed, 0.0));
        assert!(
            q.detail
                .ends_with("not shown: CTA 0, warp 4: it loads and also multiplies or stores: not a dedicated producer"),
            "{}",
            q.detail
        );
        assert_eq!(q.flags[0].name, "technique-missing");
        // Records that show the fact, from a launch whose output was wrong: nothing counts.
        let good = rec(vec![producer(0, &[0]), consumer(0, 4, &[0])]);
        let wrong = vec![Flag::new("wrong-result", "C differs")];
        let r = graded(ran(good, wrong));
        for q in &r.tests[3..] {
            assert_eq!((q.status, q.score), (Status::Failed, 0.0));
            assert!(
                q.detail.contains("the traced launch was wrong"),
                "{}",
                q.detail
            );
            assert_eq!(q.flags[0].name, "wrong-result");
        }
        // A fault, or no launch at all (an earlier test lost the context).
        let r = graded(Traced::Failed {
            detail: "the traced launch faulted".into(),
            flags: vec![Flag::new("kernel-fault", "illegal address")],
        });
        assert_eq!(r.tests[3].flags[0].name, "kernel-fault");
        let r = graded(Traced::NotRun("not run: an earlier test faulted".into()));
        assert_eq!(r.tests[3].status, Status::Error);
        assert!(r.tests[3].detail.contains("not checked: not run"));
    }
}
