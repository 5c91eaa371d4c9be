//! `{{#verified N}}`: step N's "Verified" line, regenerated at the commit the book is built from
//! (review finding S15). Two parts, each with its commit:
//!
//! - the CPU simulator's run of step N's Blackwell kernel and its seeded bugs: `runner check sim
//!   --quick` (which CI runs on every commit: `runner/tests/simulator.rs` leaves its `sim.json` at
//!   [`sim_record_path`]). A record of another commit is not used: the line then says the check
//!   has not run at this commit and how to run it;
//! - the newest GPU record of step N (the emulation checks in `assets/results/` and its dated
//!   folders, e.g. a `sim-agree-*` run's `emulation.json`), with whether step N's kernel changed
//!   since that record's commit (`git log`, where the checkout has its history).

use crate::results::{self, EmulationCheck, Expected, Results};
use anyhow::Result;
use std::path::PathBuf;

/// Where the book looks for the simulator check of the current commit: `WORKBOOK_SIM_RECORD`, or
/// `target/check-sim/sim.json` in the checkout.
pub fn sim_record_path() -> PathBuf {
    std::env::var_os("WORKBOOK_SIM_RECORD").map_or_else(
        || {
            common::toolkit::project_root()
                .join("target")
                .join("check-sim")
                .join("sim.json")
        },
        PathBuf::from,
    )
}

/// "a of b runs verified, c of d seeded-bug runs caught" for step `n`, if the check ran it.
fn counts(e: &EmulationCheck, n: u32) -> Option<String> {
    let mine: Vec<_> = e.cases.iter().filter(|c| c.step == n).collect();
    if mine.is_empty() {
        return None;
    }
    let (runs, bugs): (Vec<_>, Vec<_>) = mine.iter().partition(|c| c.expected == Expected::Pass);
    let met = |v: &[&&results::EmulationCase]| v.iter().filter(|c| c.met_expectation).count();
    Some(format!(
        "{} of {} runs verified, {} of {} seeded-bug runs caught",
        met(&runs),
        runs.len(),
        met(&bugs),
        bugs.len()
    ))
}

/// The simulator's part, from `record` (the parsed `sim.json`, if any) at commit `now`.
pub fn sim_part(record: Option<&EmulationCheck>, now: &str, n: u32) -> String {
    let how = "`runner check sim --quick --out target/check-sim` runs it; every CI run does";
    match record {
        Some(e) if e.head.commit == now && e.mode.starts_with("simulated") => match counts(e, n) {
            Some(c) => format!(
                "on the CPU simulator (sm_100a PTX) at this commit, `{now}`, by `runner check sim --quick`: {c}"
            ),
            None => format!(
                "on the CPU simulator: the check at `{now}` ran no case of step {n} ({how})"
            ),
        },
        Some(e) => format!(
            "on the CPU simulator: not yet at this commit, `{now}` (the last check found is of `{}`; {how})",
            e.head.commit
        ),
        None => format!("on the CPU simulator: not yet at this commit, `{now}` ({how})"),
    }
}

/// Every committed emulation check run on a GPU, with its path under `assets/results/`: the
/// top-level files and those one folder down.
fn gpu_records() -> Result<Vec<(String, EmulationCheck)>> {
    let mut out: Vec<(String, EmulationCheck)> = Vec::new();
    let mut push = |prefix: &str, files: Vec<(String, Results)>| {
        for (name, r) in files {
            if let Results::Emulation(e) = r {
                if !e.mode.starts_with("simulated") {
                    out.push((format!("{prefix}{name}"), e));
                }
            }
        }
    };
    push("", results::committed()?);
    let dir = results::dir();
    if let Ok(rd) = std::fs::read_dir(&dir) {
        let mut subs: Vec<PathBuf> = rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        subs.sort();
        for sub in subs {
            let Some(folder) = sub.file_name().map(|f| f.to_string_lossy().into_owned()) else {
                continue;
            };
            if folder == "archive" {
                continue;
            }
            let files = results::read_folder(&sub)?;
            push(&format!("{folder}/"), files);
        }
    }
    out.sort_by(|a, b| a.1.head.date.cmp(&b.1.head.date));
    Ok(out)
}

/// The commits since `commit` that touched step `n`'s Blackwell kernel, if git can say.
fn changed_since(commit: &str, n: u32) -> Option<Vec<String>> {
    let info = runner::steps::get(n).ok()?.info();
    let kernel = format!("{}/src/kernel.cu", info.crate_dir);
    let base = commit.trim_end_matches("+changes");
    let o = std::process::Command::new("git")
        .args([
            "log",
            "--format=%h",
            &format!("{base}..HEAD"),
            "--",
            &kernel,
        ])
        .current_dir(common::toolkit::project_root())
        .output()
        .ok()?;
    o.status.success().then(|| {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    })
}

/// The GPU part: the newest GPU record that ran step `n`.
fn gpu_part(records: &[(String, EmulationCheck)], n: u32) -> String {
    let Some((name, e, c)) = records
        .iter()
        .rev()
        .find_map(|(name, e)| counts(e, n).map(|c| (name, e, c)))
    else {
        return "on a GPU: no emulation check of this step is recorded yet".into();
    };
    let h = &e.head;
    let since = match changed_since(&h.commit, n) {
        Some(v) if v.is_empty() => "; the kernel is unchanged since".to_string(),
        Some(v) => format!(
            "; **the kernel changed since**, in {} commit{} ({})",
            v.len(),
            if v.len() == 1 { "" } else { "s" },
            v.join(", ")
        ),
        None => String::new(),
    };
    format!(
        "newest GPU record: under the tcgen05 emulation on an {} ({}, commit `{}`; not on a B200): {c}{since} (`assets/results/{name}`)",
        h.gpu, h.date, h.commit
    )
}

/// `{{#verified N}}`.
pub fn marker(spec: &str) -> Result<String> {
    let n: u32 = spec
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("verified wants a step number, got {spec:?}"))?;
    runner::steps::get(n)?;
    let now = crate::provenance::commit();
    let record = std::fs::read_to_string(sim_record_path())
        .ok()
        .and_then(|t| results::parse(&t).ok().flatten())
        .and_then(|r| match r {
            Results::Emulation(e) => Some(e),
            _ => None,
        });
    Ok(format!(
        "**Verified** {}. The {}. [How the kernels are checked](verification.md) says what that proves; [the emulation records](emulation-records.md#step-{n}) list every GPU run.\n",
        sim_part(record.as_ref(), &now, n),
        gpu_part(&gpu_records()?, n)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{EmulationCase, Provenance};
    use common::verdict::Verdict;

    fn check(commit: &str, mode: &str) -> EmulationCheck {
        let case = |step: u32, mutation: Option<&str>, met: bool| EmulationCase {
            step,
            shape: "256x256x512".into(),
            dtype: common::Dtype::F16,
            seed: 1,
            emu_seed: None,
            clusters: None,
            dist: None,
            mutation: mutation.map(str::to_string),
            expected: if mutation.is_some() {
                Expected::Fail
            } else {
                Expected::Pass
            },
            outcome: if met {
                Verdict::Verified
            } else {
                Verdict::Failed
            },
            met_expectation: met,
            exit_code: 0,
            rel_error_norm: None,
            seconds: 1.0,
            caught_by: None,
            named: None,
            detail: String::new(),
        };
        EmulationCheck {
            head: Provenance {
                gpu: "CPU".into(),
                driver: "-".into(),
                date: "2026-11-28".into(),
                commit: commit.into(),
            },
            mode: mode.into(),
            emu_seeds: vec![],
            cases: vec![
                case(0, None, true),
                case(0, None, true),
                case(0, Some("wrong-parity"), true),
                case(1, None, true),
            ],
        }
    }

    #[test]
    fn the_simulator_line_names_this_commit_or_says_it_has_not_run() {
        let sim = check("abc1234", "simulated (CPU, sm_100a PTX)");
        let line = sim_part(Some(&sim), "abc1234", 0);
        assert!(
            line.contains("at this commit, `abc1234`")
                && line.contains("2 of 2 runs verified, 1 of 1 seeded-bug runs caught"),
            "{line}"
        );
        // A record of another commit is never quoted as this one's.
        let stale = sim_part(Some(&sim), "def5678", 0);
        assert!(
            stale.contains("not yet at this commit, `def5678`"),
            "{stale}"
        );
        assert!(
            stale.contains("`abc1234`") && !stale.contains("runs verified"),
            "{stale}"
        );
        assert!(sim_part(None, "def5678", 0).contains("not yet"));
        // A GPU check in the simulator's place is not the simulator's run.
        let gpu = check("abc1234", "emulated (sm_90a)");
        assert!(sim_part(Some(&gpu), "abc1234", 0).contains("not yet"));
        assert!(sim_part(Some(&sim), "abc1234", 5).contains("ran no case of step 5"));
    }

    #[test]
    fn the_committed_records_give_every_step_a_gpu_line_with_its_commit() {
        let records = gpu_records().unwrap();
        assert!(!records.is_empty(), "a GPU emulation check is committed");
        for n in 0..runner::steps::all().len() as u32 {
            let line = gpu_part(&records, n);
            assert!(line.contains("commit `") && line.contains(" of "), "{line}");
        }
        let v = marker("3").unwrap();
        assert!(v.starts_with("**Verified** on the CPU simulator"), "{v}");
        assert!(marker("42").is_err());
    }
}
