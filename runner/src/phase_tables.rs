//! `{{#phase-outcomes ring}}` and `{{#phase-outcomes per-tile}}`: what the phase simulator
//! (`common::model::phases`) says each parity bug does, per role of the ladder's kernels. The roles come
//! from the steps themselves (through `common::model::budget::BudgetInput`), so the table follows the
//! configuration.

use anyhow::{bail, Result};
use common::model::budget::BudgetInput;
use common::model::phases::{
    simulate, Counter, EmptyWait, Epilogue, FullWait, Outcome, Ring, Roles, Timing,
};

/// K-blocks per tile in the ring table: four rounds of four stages.
const K_BLOCKS: u32 = 16;

/// How the model runs one step's ring: its roles, stages and how many tiles follow each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Model {
    pub roles: Roles,
    pub stages: u32,
    pub tiles: u32,
}

/// The phase simulator's model of a step's ring, from the step's own configuration.
pub fn model(step: u32) -> Result<Model> {
    let i = BudgetInput::from_step(runner::steps::get(step)?);
    let roles = if i.lookahead < i.stages {
        Roles::OneWarp {
            prefetch: i.lookahead,
        }
    } else {
        Roles::Specialized {
            epilogue: if i.epilogue_overlaps {
                Epilogue::Dedicated
            } else {
                Epilogue::SameWarps
            },
        }
    };
    Ok(Model {
        roles,
        stages: i.stages,
        // Two tiles show what the persistent loop carries from one tile to the next.
        tiles: if i.persistent { 2 } else { 1 },
    })
}

/// The steps grouped by identical model, in ladder order: `("steps 1–3", model)`.
fn groups(persistent_only: bool) -> Result<Vec<(String, Model)>> {
    let mut out: Vec<(Vec<u32>, Model)> = Vec::new();
    for s in runner::steps::all() {
        let n = s.info().number;
        let m = model(n)?;
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
    fn the_ladder_has_four_ring_roles() {
        let names: Vec<String> = groups(false).unwrap().into_iter().map(|g| g.0).collect();
        assert_eq!(names, ["step 0", "steps 1–3", "step 4", "steps 5–6"]);
        let persistent: Vec<String> = groups(true).unwrap().into_iter().map(|g| g.0).collect();
        assert_eq!(persistent, ["step 4", "steps 5–6"]);
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
