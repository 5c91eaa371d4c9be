//! Trace facts: what the warp-role records of one traced launch ([`crate::trace`]) show about
//! which warps did what when the kernel ran (the producer alone issued the loads; a warp that
//! never multiplies shipped every tile), where SASS shows only that an instruction is in the
//! kernel. A rubric names them (`trace = "..."`, checked on Hopper by the grader), and
//! `runner step N --arch sm_90a --trace` prints each one's verdict.
//!
//! The records are written by the kernel's own code (the `wb::Trace` helpers are compiled into
//! it), so a hostile kernel can forge them, and a kernel can be another one when `WB_TRACE` is
//! defined: a trace fact is feedback for an honest student and carries no points (the grader's
//! rubric refuses any; its own proof is an executed requirement). The facts are a small closed
//! set, each a pure function of the decoded [`Recording`], defined over the phases the warps
//! entered (the records carry phases, not individual instructions).

use crate::trace::{Phase, Record, Recording, KIND_ENTER, KIND_TILE};
use anyhow::{bail, Result};
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
    /// checks each of a rubric's facts on its one traced launch.
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

/// Synthetic warp stories for tests of the facts (here and in the grader): records as the
/// `wb::Trace` helpers write them, for a producer, a store warp and Hopper consumers.
pub mod sample {
    use crate::trace::{Layout, Phase, Record, Recording, KIND_ENTER, KIND_TILE};
    use Phase::*;

    pub fn enter(cta: u32, warp: u16, phase: Phase, arg: u32) -> Record {
        Record {
            cta,
            warp,
            phase: phase.id(),
            kind: KIND_ENTER,
            arg,
            ..Default::default()
        }
    }
    pub fn tile(cta: u32, warp: u16, t: u32) -> Record {
        Record {
            cta,
            warp,
            kind: KIND_TILE,
            arg: t,
            ..Default::default()
        }
    }
    pub fn rec(warps: Vec<(u32, u32, Vec<Record>)>) -> Recording {
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
    pub fn producer(cta: u32, tiles: &[u32]) -> (u32, u32, Vec<Record>) {
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
    pub fn store(cta: u32, warp: u16, tiles: &[u32]) -> (u32, u32, Vec<Record>) {
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
    pub fn consumer(cta: u32, warp: u16, tiles: &[u32]) -> (u32, u32, Vec<Record>) {
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
    pub fn step5() -> Recording {
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
}

#[cfg(test)]
mod tests {
    use super::sample::*;
    use super::*;
    use crate::trace::{decode, Layout};
    use Phase::*;

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
