//! Trace facts: rubric `[[requirements]]` with `trace = "..."`, checked on Hopper from the
//! warp-role records of one traced launch ([`common::trace`]). SASS shows an instruction is in
//! the kernel; a trace fact shows which warps did what when it ran (the producer alone issued
//! the loads; a warp that never multiplies shipped every tile).
//!
//! The records are written by the submission's own code (the `wb::Trace` helpers are compiled
//! into it), so a hostile kernel can forge them, and a kernel can be another one when
//! `WB_TRACE` is defined: a trace fact is feedback for an honest student and carries no points
//! (the rubric refuses any); the grader's own proof is an executed requirement
//! ([`super::executed`]). The facts are a small closed set, each a pure function of the
//! decoded [`Recording`], defined over the phases the warps entered (the records carry phases,
//! not individual instructions).

use super::vocab::{FactResult, Flag, Status};
use anyhow::{bail, Result};
use common::trace::{Phase, Record, Recording, KIND_ENTER, KIND_TILE};
use std::collections::BTreeSet;

/// The facts a rubric can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fact {
    /// `loads-by-producer-only`: every recorded CTA has a warp that entered the load phase; no
    /// warp that entered it also multiplied or ran an epilogue (a dedicated producer); at least
    /// one warp multiplied, and every MMA phase of every warp directly follows its wait for that
    /// same k-block's data (the consumers waited on `load_full` before each k-block).
    LoadsByProducerOnly,
    /// `dedicated-store-warp`: every recorded CTA has a warp that entered the epilogue and never
    /// loaded, waited for data or multiplied (a store warp), and the CTA's store warps together
    /// started every tile its MMA warps started (each tile was shipped by one). The records say
    /// which warps were in an epilogue phase, not which issued each TMA store: pair this with a
    /// SASS requirement on `UTMASTG` for the instruction itself.
    DedicatedStoreWarp,
}

impl Fact {
    pub const ALL: [Fact; 2] = [Fact::LoadsByProducerOnly, Fact::DedicatedStoreWarp];

    pub fn name(self) -> &'static str {
        match self {
            Fact::LoadsByProducerOnly => "loads-by-producer-only",
            Fact::DedicatedStoreWarp => "dedicated-store-warp",
        }
    }

    pub fn parse(s: &str) -> Result<Fact> {
        match Fact::ALL.iter().find(|f| f.name() == s) {
            Some(f) => Ok(*f),
            None => bail!(
                "unknown trace fact {s:?}: one of {}",
                Fact::ALL.map(Fact::name).join(", ")
            ),
        }
    }

    /// Whether the recording shows the fact: `Ok(summary)` or `Err(why not)`, one line each.
    /// `runner step N --arch sm_90a --trace` prints each fact's verdict; the grader's run child
    /// calls it through [`evaluate`] on its one traced launch.
    pub fn check(self, rec: &Recording) -> Result<String, String> {
        if rec.warps.is_empty() {
            return Err("the traced launch wrote no records".into());
        }
        if rec.dropped > 0 {
            // A full region cut some warp's story short: what is missing could be the
            // counter-example.
            return Err(format!(
                "{} trace calls did not fit their warp's region: the trace is incomplete",
                rec.dropped
            ));
        }
        let ctas: BTreeSet<u32> = rec.warps.iter().map(|(c, _, _)| *c).collect();
        match self {
            Fact::LoadsByProducerOnly => loads_by_producer_only(rec, &ctas),
            Fact::DedicatedStoreWarp => dedicated_store_warp(rec, &ctas),
        }
    }
}

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

fn entered(records: &[Record], p: Phase) -> bool {
    records
        .iter()
        .any(|r| r.kind == KIND_ENTER && r.phase == p.id())
}

fn loads_by_producer_only(rec: &Recording, ctas: &BTreeSet<u32>) -> Result<String, String> {
    let mut producers = 0;
    let mut mma_warps = 0;
    for &cta in ctas {
        let warps = rec.warps.iter().filter(|(c, _, _)| *c == cta);
        if !warps.clone().any(|(_, _, r)| entered(r, Phase::Load)) {
            return Err(format!("CTA {cta}: no warp entered the load phase"));
        }
        for (_, warp, records) in warps {
            if entered(records, Phase::Load) {
                producers += 1;
                if entered(records, Phase::Mma) || entered(records, Phase::Epilogue) {
                    return Err(format!(
                        "CTA {cta}, warp {warp}: it loads and also multiplies or stores: not a dedicated producer"
                    ));
                }
            }
            if entered(records, Phase::Mma) {
                mma_warps += 1;
            }
            let mut previous: Option<&Record> = None;
            for r in records {
                if r.kind == KIND_ENTER && r.phase == Phase::Mma.id() {
                    let waited = previous.is_some_and(|p| {
                        p.kind == KIND_ENTER && p.phase == Phase::DataWait.id() && p.arg == r.arg
                    });
                    if !waited {
                        return Err(format!(
                            "CTA {cta}, warp {warp}: it multiplied k-block {} without first waiting for its data",
                            r.arg
                        ));
                    }
                }
                previous = Some(r);
            }
        }
    }
    if mma_warps == 0 {
        return Err("no warp multiplied".into());
    }
    Ok(format!(
        "{producers} producer warp(s) in {} CTA(s) issued the loads; {mma_warps} MMA warp(s) waited for each k-block's data",
        ctas.len()
    ))
}

fn dedicated_store_warp(rec: &Recording, ctas: &BTreeSet<u32>) -> Result<String, String> {
    let mut store_warps = 0;
    for &cta in ctas {
        let mut shipped = BTreeSet::new();
        let mut multiplied = BTreeSet::new();
        let mut found = false;
        for (_, _, records) in rec.warps.iter().filter(|(c, _, _)| *c == cta) {
            let tiles = records
                .iter()
                .filter(|r| r.kind == KIND_TILE)
                .map(|r| r.arg);
            let works = [Phase::Load, Phase::DataWait, Phase::Mma]
                .iter()
                .any(|&p| entered(records, p));
            if entered(records, Phase::Epilogue) && !works {
                found = true;
                store_warps += 1;
                shipped.extend(tiles);
            } else if entered(records, Phase::Mma) {
                multiplied.extend(tiles);
            }
        }
        if !found {
            return Err(format!(
                "CTA {cta}: no warp ran an epilogue without also loading or multiplying"
            ));
        }
        if let Some(t) = multiplied.difference(&shipped).next() {
            return Err(format!(
                "CTA {cta}: tile {t} was multiplied but no store warp started it"
            ));
        }
    }
    Ok(format!(
        "{store_warps} store warp(s) in {} CTA(s) shipped every tile and never multiplied",
        ctas.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::trace::{decode, Layout};
    use Phase::*;

    fn enter(cta: u32, warp: u16, phase: Phase, arg: u32) -> Record {
        Record {
            cta,
            warp,
            phase: phase.id(),
            kind: KIND_ENTER,
            arg,
            ..Default::default()
        }
    }
    fn tile(cta: u32, warp: u16, t: u32) -> Record {
        Record {
            cta,
            warp,
            kind: KIND_TILE,
            arg: t,
            ..Default::default()
        }
    }
    fn rec(warps: Vec<(u32, u32, Vec<Record>)>) -> Recording {
        Recording {
            layout: Layout {
                ctas: 1,
                warps_per_cta: 12,
                per_warp: 64,
            },
            warps,
            dropped: 0,
        }
    }
    fn producer(cta: u32, tiles: &[u32]) -> (u32, u32, Vec<Record>) {
        let mut r = vec![enter(cta, 0, Idle, 0)];
        for &t in tiles {
            r.push(tile(cta, 0, t));
            for kb in 0..2 {
                r.extend([enter(cta, 0, SlotWait, kb), enter(cta, 0, Load, kb)]);
            }
        }
        r.push(enter(cta, 0, Exit, 0));
        (cta, 0, r)
    }
    fn store(cta: u32, warp: u16, tiles: &[u32]) -> (u32, u32, Vec<Record>) {
        let mut r = vec![enter(cta, warp, Idle, 0)];
        for &t in tiles {
            r.extend([
                tile(cta, warp, t),
                enter(cta, warp, AccWait, 0),
                enter(cta, warp, Epilogue, 0),
            ]);
        }
        r.push(enter(cta, warp, Exit, 0));
        (cta, u32::from(warp), r)
    }
    /// A Hopper consumer: waits for each k-block, multiplies it, stages its tile (epilogue).
    fn consumer(cta: u32, warp: u16, tiles: &[u32]) -> (u32, u32, Vec<Record>) {
        let mut r = vec![enter(cta, warp, Idle, 0)];
        for &t in tiles {
            r.push(tile(cta, warp, t));
            for kb in 0..2 {
                r.extend([
                    enter(cta, warp, DataWait, kb),
                    enter(cta, warp, Mma, kb),
                    enter(cta, warp, MmaWait, kb),
                ]);
            }
            r.extend([enter(cta, warp, AccWait, 0), enter(cta, warp, Epilogue, 0)]);
        }
        r.push(enter(cta, warp, Exit, 0));
        (cta, u32::from(warp), r)
    }
    /// The step-5 twin: producer (warp 0), store warp (1), consumers (4..12), two CTAs.
    fn step5() -> Recording {
        let mut w = Vec::new();
        for cta in 0..2 {
            w.push(producer(cta, &[0, 3]));
            w.push(store(cta, 1, &[0, 3]));
            for warp in 4..12 {
                w.push(consumer(cta, warp, &[0, 3]));
            }
        }
        rec(w)
    }

    #[test]
    fn fact_names_parse_and_unknown_ones_are_listed() {
        for f in Fact::ALL {
            assert_eq!(Fact::parse(f.name()).unwrap(), f);
        }
        let e = Fact::parse("stores-by-magic").unwrap_err().to_string();
        assert!(e.contains("loads-by-producer-only") && e.contains("dedicated-store-warp"));
    }

    #[test]
    fn the_step5_twin_shows_both_facts() {
        let r = step5();
        let ok = Fact::DedicatedStoreWarp.check(&r).unwrap();
        assert!(ok.starts_with("2 store warp(s) in 2 CTA(s)"), "{ok}");
        let ok = Fact::LoadsByProducerOnly.check(&r).unwrap();
        assert!(ok.starts_with("2 producer warp(s)"), "{ok}");
    }

    #[test]
    fn consumers_that_store_have_no_store_warp() {
        // The step-3 twin: the consumers run the whole epilogue.
        let r = rec(vec![producer(0, &[0]), consumer(0, 4, &[0])]);
        let e = Fact::DedicatedStoreWarp.check(&r).unwrap_err();
        assert!(e.contains("CTA 0: no warp ran an epilogue"), "{e}");
        assert!(Fact::LoadsByProducerOnly.check(&r).is_ok());
    }

    #[test]
    fn a_store_warp_that_skips_a_tile_fails() {
        let r = rec(vec![
            producer(0, &[0, 3]),
            store(0, 1, &[0]),
            consumer(0, 4, &[0, 3]),
        ]);
        let e = Fact::DedicatedStoreWarp.check(&r).unwrap_err();
        assert!(e.contains("tile 3 was multiplied"), "{e}");
        // Every recorded CTA needs its own store warp.
        let mut w = step5().warps;
        w.retain(|(c, warp, _)| !(*c == 1 && *warp == 1));
        let e = Fact::DedicatedStoreWarp.check(&rec(w)).unwrap_err();
        assert!(e.starts_with("CTA 1:"), "{e}");
    }

    #[test]
    fn a_producer_that_multiplies_or_a_consumer_that_does_not_wait_fails() {
        // One warp loads and multiplies (step 0/1 style).
        let mut mixed = producer(0, &[0]);
        mixed.2.insert(3, enter(0, 0, DataWait, 0));
        mixed.2.insert(4, enter(0, 0, Mma, 0));
        let e = Fact::LoadsByProducerOnly
            .check(&rec(vec![mixed, consumer(0, 4, &[0])]))
            .unwrap_err();
        assert!(e.contains("warp 0: it loads and also multiplies"), "{e}");
        // A consumer multiplies k-block 1 after waiting for k-block 0's data only.
        let mut c = consumer(0, 4, &[0]);
        let at =
            c.2.iter()
                .position(|r| r.phase == DataWait.id() && r.arg == 1);
        c.2[at.unwrap()].arg = 0;
        let e = Fact::LoadsByProducerOnly
            .check(&rec(vec![producer(0, &[0]), c]))
            .unwrap_err();
        assert!(e.contains("k-block 1 without first waiting"), "{e}");
        // No producer at all, or nobody multiplies.
        let e = Fact::LoadsByProducerOnly
            .check(&rec(vec![consumer(0, 4, &[0])]))
            .unwrap_err();
        assert!(e.contains("no warp entered the load phase"), "{e}");
        let e = Fact::LoadsByProducerOnly
            .check(&rec(vec![producer(0, &[0])]))
            .unwrap_err();
        assert_eq!(e, "no warp multiplied");
    }

    #[test]
    fn empty_or_incomplete_traces_show_nothing() {
        for f in Fact::ALL {
            assert_eq!(
                f.check(&rec(Vec::new())).unwrap_err(),
                "the traced launch wrote no records"
            );
            let mut r = step5();
            r.dropped = 3;
            assert!(f
                .check(&r)
                .unwrap_err()
                .contains("3 trace calls did not fit"));
        }
    }

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

    #[test]
    fn malformed_buffers_are_refused_before_any_fact() {
        // A forged record naming another warp's region: decode refuses it, so the grader
        // reports the trace as malformed instead of checking a fact on it.
        let layout = Layout {
            ctas: 1,
            warps_per_cta: 2,
            per_warp: 2,
        };
        let mut bytes = vec![0u8; layout.bytes()];
        bytes[..32].copy_from_slice(&enter(0, 1, Load, 0).encode());
        assert!(decode(&bytes, layout, 0).is_err());
        assert!(decode(&bytes[1..], layout, 0).is_err());
        // An unknown phase.
        bytes[..32].copy_from_slice(&enter(0, 0, Load, 0).encode());
        bytes[30] = 200;
        assert!(decode(&bytes, layout, 0).is_err());
    }
}
