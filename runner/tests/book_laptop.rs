//! Issue 40, item 5: every step chapter has an "On a laptop" box, and its commands run. The
//! commands are read from the chapter (the table after the `laptop-box` marker), so the box a
//! reader copies is the box this test runs, on a machine without a GPU (`--sim`).
//!
//! What each command must do: a plain run verifies (exit 0); a run with `--mutate` is caught, as
//! the seeded bug is meant to be, with a rule, a deadlock or a wrong result (exit 1, 2 or 124) and
//! the report naming it; a run with `--trace STEM` leaves the simulator's trace at
//! `STEM-stepN-sim.txt`, ending with the failure for a failing run.

use std::path::{Path, PathBuf};
use std::process::Command;

fn checkout() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the runner crate sits in the checkout")
        .to_path_buf()
}

/// The `runner ...` commands of a chapter's laptop box, in order.
fn box_commands(chapter: &str) -> Vec<String> {
    let Some(start) = chapter.find("<!-- laptop-box") else {
        return Vec::new();
    };
    let mut cmds = Vec::new();
    for line in chapter[start..].lines().skip(1) {
        let line = line.trim();
        if !line.starts_with('|') {
            break;
        }
        let cell = line.trim_end_matches('|').rsplit('|').next().unwrap_or("");
        for (i, part) in cell.split('`').enumerate() {
            if i % 2 == 1 && part.starts_with("runner ") {
                cmds.push(part.to_string());
            }
        }
    }
    cmds
}

fn step_chapters() -> Vec<(u32, String)> {
    (0..)
        .map(|n| (n, checkout().join(format!("book/src/step{n}.md"))))
        .take_while(|(_, p)| p.is_file())
        .map(|(n, p)| (n, std::fs::read_to_string(p).expect("chapter")))
        .collect()
}

#[test]
fn every_step_chapter_has_a_laptop_box_that_runs_breaks_and_traces_its_step() {
    let chapters = step_chapters();
    assert!(chapters.len() >= 7, "steps 0-6 at least");
    for (n, md) in &chapters {
        let cmds = box_commands(md);
        assert!(
            md.contains("## On a laptop"),
            "step{n}.md has an \"On a laptop\" box"
        );
        let run = format!("runner step {n} --sim");
        assert!(cmds.contains(&run), "step{n}.md: `{run}` in {cmds:?}");
        assert!(
            cmds.iter()
                .any(|c| c.starts_with(&format!("runner step {n} "))
                    && c.contains("--mutate ")
                    && c.contains("--trace ")),
            "step{n}.md: a seeded bug, traced, in {cmds:?}"
        );
        // Only what a laptop runs.
        for c in &cmds {
            for gpu_only in ["--on-gpu", "--arch sm_90a", "bench", "--emulate"] {
                assert!(!c.contains(gpu_only), "step{n}.md: {c} needs a GPU");
            }
        }
    }
}

fn run_line(cmd: &str, dir: &Path) -> std::process::Output {
    let args: Vec<&str> = cmd.split_whitespace().skip(1).collect();
    Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(&args)
        .current_dir(dir)
        .env("WORKBOOK_ROOT", checkout())
        .env_remove("PAGER")
        .output()
        .expect("the runner starts")
}

#[test]
fn every_laptop_box_command_runs_as_its_chapter_says() {
    let dir = std::env::temp_dir().join(format!("workbook-laptop-box-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (n, md) in step_chapters() {
        for cmd in box_commands(&md) {
            let o = run_line(&cmd, &dir);
            let out = String::from_utf8_lossy(&o.stdout);
            let err = String::from_utf8_lossy(&o.stderr);
            let code = o.status.code();
            assert!(!err.contains("panicked"), "{cmd}: {err}");
            if cmd.contains("--mutate ") {
                assert!(
                    matches!(code, Some(1 | 2 | 124)),
                    "{cmd}: the seeded bug is caught: exit {code:?}\n{out}{err}"
                );
                assert!(
                    out.contains("rule ") || out.contains("deadlock") || out.contains("FAIL"),
                    "{cmd}: the report names the bug\n{out}{err}"
                );
            } else {
                assert_eq!(code, Some(0), "{cmd}: verifies\n{out}{err}");
                assert!(out.contains("PASS"), "{cmd}: verifies\n{out}");
            }
            if let Some(stem) = cmd
                .split("--trace ")
                .nth(1)
                .and_then(|r| r.split(' ').next())
            {
                let trace = dir.join(format!("{stem}-step{n}-sim.txt"));
                let text = std::fs::read_to_string(&trace)
                    .unwrap_or_else(|e| panic!("{cmd}: no trace at {}: {e}", trace.display()));
                // The failing schedule's trace ends with the failure, named.
                assert!(
                    text.contains("stopped") || text.contains("deadlock"),
                    "{cmd}: the trace names the failure\n{text}"
                );
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_box_reader_finds_the_commands_of_the_table_only() {
    let md = "x\n<!-- laptop-box -->\n| to | run |\n|---|---|\n| a | `runner step 0 --sim` |\n\
              | b | `runner step 0 --sim --mutate x --trace t0` |\n\nafter `runner step 9`\n";
    assert_eq!(
        box_commands(md),
        [
            "runner step 0 --sim",
            "runner step 0 --sim --mutate x --trace t0"
        ]
    );
    assert!(box_commands("no box").is_empty());
}
