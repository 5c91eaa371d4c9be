//! `{{#phase-outcomes ring}}` and `{{#phase-outcomes per-tile}}`: what the phase model
//! (`common::model::phases`) says each parity bug does, per role of the ladder's kernels. The roles come
//! from the steps themselves (through `common::model::budget::BudgetInput`), so the table follows the
//! configuration.

use anyhow::{bail, Result};
use common::model::phases::{
    model, simulate, Counter, EmptyWait, FullWait, Model, Outcome, Ring, Timing,
};

/// K-blocks per tile in the ring table: four rounds of four stages.
const K_BLOCKS: u32 = 16;

/// The steps grouped by identical model, in ladder order: `("steps 1–3", model)`.
fn groups(persistent_only: bool) -> Result<Vec<(String, Model)>> {
    let mut out: Vec<(Vec<u32>, Model)> = Vec::new();
    for s in runner::steps::all() {
        let n = s.info().number;
        let m = model(s);
        if persistent_only && m.tiles == 1 {
            continue;
        }
        match out.last_mut() {
            Some((steps, last)) if *last == m => steps.push(n),
            _ => out.push((vec![n], m)),
        }
    }
    Ok(out
        .into_iter()
        .map(|(steps, m)| {
            let name = match (steps.first(), steps.last()) {
                (Some(a), Some(b)) if a != b => format!("steps {a}–{b}"),
                (Some(a), _) => format!("step {a}"),
                _ => String::new(),
            };
            (name, m)
        })
        .collect())
}

const TIMINGS: [(&str, Timing); 2] = [
    ("slow loads", Timing::LOAD_BOUND),
    ("slow MMAs", Timing::MMA_BOUND),
];

/// A cell: the outcome and the first k-block it showed at.
fn cell(o: &Outcome) -> String {
    o.label().replace(" k-block ", " ")
}

/// One row of a table: the same wait lines and timing in every column's model.
fn run_row(
    columns: &[(String, Model)],
    k_blocks: u32,
    (empty_wait, full_wait, counter): (EmptyWait, FullWait, Counter),
    timing: Timing,
) -> Vec<Outcome> {
    columns
        .iter()
        .map(|(_, m)| {
            simulate(&Ring {
                stages: m.stages,
                k_blocks,
                tiles: m.tiles,
                roles: m.roles,
                empty_wait,
                full_wait,
                counter,
                timing,
            })
            .outcome
        })
        .collect()
}

struct Row {
    label: String,
    timing: &'static str,
    cells: Vec<Outcome>,
}

fn table(columns: &[(String, Model)], rows: &[Row]) -> String {
    let mut md = String::from("| wait lines | timing |");
    for (name, _) in columns {
        md.push_str(&format!(" {name} |"));
    }
    md.push_str("\n|---|---|");
    md.push_str(&"---|".repeat(columns.len()));
    md.push('\n');
    for r in rows {
        md.push_str(&format!("| {} | {} |", r.label, r.timing));
        for c in &r.cells {
            md.push_str(&format!(" {} |", cell(c)));
        }
        md.push('\n');
    }
    // What each failure was, once per distinct story, with where it happened.
    // (story, [(row label, timing, columns)])
    type Where = (String, &'static str, Vec<String>);
    let mut stories: Vec<(String, Vec<Where>)> = Vec::new();
    for r in rows {
        for (c, outcome) in r.cells.iter().enumerate() {
            if outcome.is_completes() {
                continue;
            }
            let story = outcome.to_string();
            let at = match stories.iter_mut().find(|(s, _)| *s == story) {
                Some((_, at)) => at,
                None => {
                    stories.push((story, Vec::new()));
                    &mut stories.last_mut().expect("just pushed").1
                }
            };
            let column = columns[c].0.clone();
            match at
                .iter_mut()
                .find(|(label, timing, _)| *label == r.label && *timing == r.timing)
            {
                Some((_, _, cols)) => cols.push(column),
                None => at.push((r.label.clone(), r.timing, vec![column])),
            }
        }
    }
    if !stories.is_empty() {
        md.push_str(
            "\nA cell names the k-block at which the model first saw the failure (numbered across \
             tiles). What it saw:\n\n",
        );
        for (story, at) in stories {
            let at: Vec<String> = at
                .iter()
                .map(|(label, timing, cols)| {
                    format!("{label} with {timing} in {}", cols.join(", "))
                })
                .collect();
            md.push_str(&format!("- *{}*: {story}.\n", at.join("; ")));
        }
    }
    md
}

/// The seeded bugs and one more off-by-one, in every role of the ladder.
fn ring_table() -> Result<String> {
    let columns = groups(false)?;
    let variants = [
        ("the kernels' code", EmptyWait::Correct, FullWait::Correct),
        (
            "no-first-round-guard",
            EmptyWait::NoFirstRoundGuard,
            FullWait::Correct,
        ),
        ("wrong-parity", EmptyWait::WrongParity, FullWait::Correct),
        (
            "load_full off by one",
            EmptyWait::Correct,
            FullWait::OffByOne,
        ),
    ];
    let mut rows = Vec::new();
    for (label, empty_wait, full_wait) in variants {
        for (timing_name, timing) in TIMINGS {
            let cells = run_row(
                &columns,
                K_BLOCKS,
                (empty_wait, full_wait, Counter::AcrossTiles),
                timing,
            );
            rows.push(Row {
                label: label.to_string(),
                timing: timing_name,
                cells,
            });
        }
    }
    Ok(table(&columns, &rows))
}

/// The persistent steps with the ring counter reset per tile (`kb` for `it`).
fn per_tile_table() -> Result<String> {
    let columns = groups(true)?;
    let mut rows = Vec::new();
    for (counter, name) in [(Counter::AcrossTiles, "it"), (Counter::PerTile, "kb")] {
        for k_blocks in [8, 6] {
            for (timing_name, timing) in TIMINGS {
                let cells = run_row(
                    &columns,
                    k_blocks,
                    (EmptyWait::Correct, FullWait::Correct, counter),
                    timing,
                );
                rows.push(Row {
                    label: format!("`{name}`, {k_blocks} k-blocks/tile"),
                    timing: timing_name,
                    cells,
                });
            }
        }
    }
    Ok(table(&columns, &rows))
}

/// `{{#phase-timeline STEP BUG TIMING [K]}}`: what the phase model does, event by event, for
/// step STEP's ring with the wait lines of BUG (`none`, `no-first-round-guard`, `wrong-parity`,
/// `load-full-off-by-one`) and TIMING (`slow-loads`, `slow-mmas`), over K k-blocks (default 8):
/// the same run the chapter's figure draws, as text, ending with the model's verdict.
pub fn timeline(spec: &str) -> Result<String> {
    let words: Vec<&str> = spec.split_whitespace().collect();
    let (step, bug, timing, k_blocks) = match words.as_slice() {
        [s, b, t] => (*s, *b, *t, "8"),
        [s, b, t, k] => (*s, *b, *t, *k),
        _ => bail!("phase-timeline wants STEP BUG TIMING [K-BLOCKS]"),
    };
    let step: u32 = step
        .parse()
        .map_err(|_| anyhow::anyhow!("phase-timeline: {step:?} is not a step number"))?;
    let k_blocks: u32 = k_blocks
        .parse()
        .ok()
        .filter(|k| (1..=64).contains(k))
        .ok_or_else(|| {
            anyhow::anyhow!("phase-timeline: k-blocks must be 1 to 64, got {k_blocks:?}")
        })?;
    let (empty_wait, full_wait) = match bug {
        "none" => (EmptyWait::Correct, FullWait::Correct),
        "no-first-round-guard" => (EmptyWait::NoFirstRoundGuard, FullWait::Correct),
        "wrong-parity" => (EmptyWait::WrongParity, FullWait::Correct),
        "load-full-off-by-one" => (EmptyWait::Correct, FullWait::OffByOne),
        other => bail!(
            "phase-timeline: unknown bug {other:?} (none, no-first-round-guard, wrong-parity, load-full-off-by-one)"
        ),
    };
    let timing = match timing {
        "slow-loads" => Timing::LOAD_BOUND,
        "slow-mmas" => Timing::MMA_BOUND,
        other => bail!("phase-timeline: unknown timing {other:?} (slow-loads, slow-mmas)"),
    };
    let m = model(runner::steps::get(step)?);
    let sim = simulate(&Ring {
        stages: m.stages,
        k_blocks,
        tiles: 1,
        roles: m.roles,
        empty_wait,
        full_wait,
        counter: Counter::AcrossTiles,
        timing,
    });
    let t = &sim.trace;
    // (tick, order within a tick, text): completions before the waits they release.
    let mut events: Vec<(u64, u8, String)> = Vec::new();
    for l in &t.loads {
        events.push((
            l.issued,
            2,
            format!(
                "TMA load of k-block {} into slot {} issued",
                l.k_block, l.slot
            ),
        ));
        if let Some(at) = l.landed {
            events.push((
                at,
                0,
                format!("k-block {} landed in slot {}", l.k_block, l.slot),
            ));
        }
    }
    for p in &t.phases {
        events.push((
            p.at,
            0,
            format!(
                "{}[{}] completes phase {} (parity {})",
                p.barrier,
                p.slot,
                p.completed - 1,
                (p.completed - 1) & 1
            ),
        ));
    }
    for w in &t.waits {
        let what = format!(
            "{} waits on {}[{}], parity {}, for k-block {}",
            w.actor, w.barrier, w.slot, w.parity, w.k_block
        );
        if w.to > w.from {
            events.push((w.from, 1, format!("{what}: blocks")));
            events.push((
                w.to,
                1,
                format!("{what}: passes after {} ticks", w.to - w.from),
            ));
        } else {
            events.push((w.from, 1, format!("{what}: passes at once")));
        }
    }
    for mma in &t.mmas {
        events.push((
            mma.start,
            2,
            format!("MMAs of k-block {} start on slot {}", mma.k_block, mma.slot),
        ));
    }
    events.sort_by_key(|e| (e.0, e.1));
    let mut md = format!(
        "```text\nphase model: step {step}, {} stages, {k_blocks} k-blocks, wait lines: {bug}, timing: {}\n",
        m.stages,
        if timing == Timing::LOAD_BOUND { "slow loads" } else { "slow MMAs" }
    );
    for (at, _, text) in &events {
        md.push_str(&format!("{at:>5}  {text}\n"));
    }
    md.push_str(&format!("=> {}\n```\n", sim.outcome));
    Ok(md)
}

pub fn outcomes(spec: &str) -> Result<String> {
    match spec.trim() {
        "ring" => ring_table(),
        "per-tile" => per_tile_table(),
        other => bail!("phase-outcomes wants `ring` or `per-tile`, got {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeline_shows_the_models_run() {
        let ok = timeline("1 none slow-mmas").unwrap();
        assert!(ok.contains("=> completes at tick"), "{ok}");
        assert!(
            ok.contains("the producer waits on load_empty[0], parity 0, for k-block 4"),
            "{ok}"
        );
        assert!(
            ok.contains("load_empty[0] completes phase 0 (parity 0)"),
            "{ok}"
        );
        let race = timeline("1 wrong-parity slow-mmas").unwrap();
        assert!(race.contains("=> race:"), "{race}");
        assert!(
            race.contains("parity 1, for k-block 4: passes at once"),
            "{race}"
        );
        let hang = timeline("0 wrong-parity slow-loads").unwrap();
        assert!(hang.contains("=> hang:"), "{hang}");
        assert!(timeline("1 none").is_err());
        assert!(timeline("1 bogus slow-mmas").is_err());
        assert!(timeline("1 none slow-mmas 0").is_err());
        assert!(timeline("9 none slow-mmas").is_err());
    }

    #[test]
    fn the_ladder_has_four_ring_roles() {
        let names: Vec<String> = groups(false).unwrap().into_iter().map(|g| g.0).collect();
        assert_eq!(names, ["step 0", "steps 1–3", "step 4", "steps 5–7"]);
        let persistent: Vec<String> = groups(true).unwrap().into_iter().map(|g| g.0).collect();
        assert_eq!(persistent, ["step 4", "steps 5–7"]);
    }

    #[test]
    fn the_tables_say_what_the_model_says() {
        let t = ring_table().unwrap();
        let row = |label: &str, timing: &str| {
            t.lines()
                .find(|l| l.starts_with(&format!("| {label} | {timing} |")))
                .unwrap_or_else(|| panic!("no row {label} / {timing} in\n{t}"))
                .to_string()
        };
        for timing in ["slow loads", "slow MMAs"] {
            assert_eq!(
                row("the kernels' code", timing)
                    .matches("completes")
                    .count(),
                4
            );
            assert_eq!(
                row("no-first-round-guard", timing)
                    .matches("completes")
                    .count(),
                4,
                "harmless everywhere"
            );
            assert_eq!(row("wrong-parity", timing).matches("completes").count(), 0);
        }
        assert!(row("wrong-parity", "slow loads").contains("| hang at 4 |"));
        assert!(t.contains("What it saw"));
        let p = per_tile_table().unwrap();
        assert!(
            p.contains("| `it`, 6 k-blocks/tile | slow loads | completes | completes |"),
            "{p}"
        );
        assert!(outcomes("bogus").is_err());
    }
}
