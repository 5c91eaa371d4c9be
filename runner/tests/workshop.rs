//! The laptop workshop end to end (issue 39): the instructor chapter's laptop plan is run, every
//! command of its table in order, as a participant types it, on a machine without a GPU. The
//! commands are read from the chapter itself (the table after the `laptop-plan` marker), so the
//! plan a teacher prints is the plan this test runs.
//!
//! What each command must do: a command that plants a bug (`--mutate`) fails, as the bug is
//! meant to, with the failure's exit status (1, 2 or 124) and its rule or deadlock in the
//! report; every other command passes (0) or runs in part (3) with a line saying what did not
//! run; none panics. On a machine with a GPU the same commands run there and must pass too.

use std::path::{Path, PathBuf};
use std::process::Command;

fn checkout() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the runner crate sits in the checkout")
        .to_path_buf()
}

/// The `runner ...` and `cp ...` commands of the laptop plan's table, in order.
fn plan_commands(chapter: &str) -> Vec<String> {
    let start = chapter
        .find("<!-- laptop-plan")
        .expect("the instructor chapter holds the laptop plan's marker");
    let mut cmds = Vec::new();
    for line in chapter[start..].lines().skip(1) {
        let line = line.trim();
        if !line.starts_with('|') {
            break;
        }
        // The last cell holds the commands, each in backticks.
        let cell = line.trim_end_matches('|').rsplit('|').next().unwrap_or("");
        for (i, part) in cell.split('`').enumerate() {
            if i % 2 == 1 && (part.starts_with("runner ") || part.starts_with("cp ")) {
                cmds.push(part.to_string());
            }
        }
    }
    cmds
}

#[test]
fn the_laptop_plan_is_read_from_the_chapter() {
    let md = std::fs::read_to_string(checkout().join("book/src/instructor.md")).unwrap();
    let cmds = plan_commands(&md);
    assert!(cmds.len() >= 15, "{cmds:?}");
    assert_eq!(cmds[0], "runner workshop check", "the pre-flight first");
    assert!(
        cmds.iter().any(|c| c.starts_with("runner grade ")
            && c.contains("rubrics/step3-blackwell.toml")
            && c.contains("--public-only")),
        "grade your own kernel on the Blackwell rubric: {cmds:?}"
    );
    // Every hands-on command is one the laptop runs: no GPU-only flag or Hopper rubric.
    for c in &cmds {
        for gpu_only in [
            "--on-gpu",
            "-hopper.toml",
            "--arch sm_90a",
            "bench",
            "--emulate",
        ] {
            assert!(!c.contains(gpu_only), "{c} needs a GPU");
        }
    }
}

/// Run `cmd` (a line of the plan) in `dir` with the built runner first on PATH.
fn run_line(cmd: &str, dir: &Path) -> std::process::Output {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_runner"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .current_dir(dir)
        .env("PATH", path)
        .env("WORKBOOK_ROOT", checkout())
        .env_remove("PAGER")
        .output()
        .expect("sh runs")
}

#[test]
fn every_command_of_the_laptop_plan_runs_as_the_plan_says() {
    let root = checkout();
    let md = std::fs::read_to_string(root.join("book/src/instructor.md")).unwrap();
    // A participant's folder: the checkout's steps and rubrics as they see them, and room for
    // their my.cu and grades/ (the test never writes into the checkout).
    let dir = std::env::temp_dir().join(format!("workbook-laptop-plan-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for link in ["steps", "rubrics"] {
        std::os::unix::fs::symlink(root.join(link), dir.join(link)).unwrap();
    }
    for cmd in plan_commands(&md) {
        let o = run_line(&cmd, &dir);
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        let code = o.status.code();
        assert!(
            !err.contains("panicked") && code != Some(101),
            "{cmd}: {err}"
        );
        if cmd.contains("--mutate") {
            // A planted bug is caught: a rule (2), a deadlock (124) or a wrong result (1), with
            // the report naming it.
            assert!(
                matches!(code, Some(1 | 2 | 124)),
                "{cmd}: exit {code:?}\n{out}{err}"
            );
            assert!(
                out.contains("rule ") || out.contains("deadlock") || out.contains("FAIL"),
                "{cmd}: the report names the bug\n{out}{err}"
            );
            continue;
        }
        match code {
            Some(0) => {}
            // Ran in part: a line says what did not run, and why.
            Some(3) => assert!(
                err.contains("note: exit status 3 (ran in part)")
                    || out.contains("was skipped here")
                    || out.contains("ran only in part"),
                "{cmd}: exit 3 without its line\n{out}{err}"
            ),
            other => panic!("{cmd}: exit {other:?}\n{out}{err}"),
        }
        if cmd.starts_with("runner grade ") {
            assert!(out.contains("points"), "{cmd}: a grade\n{out}");
            assert!(dir.join("grades/my/grade.json").is_file(), "{cmd}");
        }
        if cmd == "runner workshop check" {
            assert!(out.contains("ready for the"), "{out}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn runner(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(args)
        .output()
        .expect("runner runs")
}

/// One `error:` line (after any `note:`), exit 2, naming `needle`, no panic.
fn assert_refused(o: &std::process::Output, needle: &str) {
    let err: String = String::from_utf8_lossy(&o.stderr)
        .lines()
        .filter(|l| !l.starts_with("note: "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.starts_with("error: "), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.contains("error")).count(),
        1,
        "{err}"
    );
    assert!(err.contains(needle), "expected {needle:?} in {err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// N23: a FIFO or a device given as a kernel is refused at once (it used to block forever).
#[test]
fn fifos_and_devices_are_refused_as_inputs_at_once() {
    let dir = std::env::temp_dir().join(format!("workbook-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fifo = dir.join("fifo.cu");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let f = fifo.to_str().unwrap();
    let t0 = std::time::Instant::now();
    assert_refused(&runner(&["step", "3", "--kernel", f]), "is a FIFO");
    assert_refused(&runner(&["exercise", "2.2", "--kernel", f]), "is a FIFO");
    assert_refused(&runner(&["inspect", "3", "--kernel", f]), "is a FIFO");
    assert_refused(
        &runner(&["step", "3", "--kernel", "/dev/zero"]),
        "is a device",
    );
    assert!(t0.elapsed().as_secs() < 60, "refused at once");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// N11: `--trace` takes an existing folder or a file stem in one; it creates no folder and
/// writes nothing beside a device.
#[test]
fn trace_takes_an_existing_folder_or_a_stem_in_one() {
    let missing = std::env::temp_dir().join(format!("workbook-no-such-{}", std::process::id()));
    let stem = missing.join("deeper/t");
    assert_refused(
        &runner(&["step", "3", "--trace", stem.to_str().unwrap()]),
        "does not exist",
    );
    assert!(!missing.exists(), "no folder created");
    assert_refused(
        &runner(&["step", "3", "--trace", "/dev/full"]),
        "is a device",
    );
    assert_refused(
        &runner(&["step", "3", "--trace", "/dev/t"]),
        "holds devices",
    );
}

/// N12: a flag that cannot apply is a usage error saying why; every count has an upper bound.
#[test]
fn flags_that_cannot_apply_are_refused_and_counts_are_bounded() {
    assert_refused(
        &runner(&["step", "3", "--sim", "--iters", "5"]),
        "never times",
    );
    assert_refused(
        &runner(&["step", "3", "--explore", "2", "--warmup", "2"]),
        "never times",
    );
    assert_refused(
        &runner(&["step", "3", "--arch", "sm_90a", "--sim-seed", "5"]),
        "Hopper twin",
    );
    assert_refused(
        &runner(&["step", "3", "--explore", "2", "--sim-policy", "pct"]),
        "--sim-policy",
    );
    assert_refused(
        &runner(&["step", "3", "--explore", "4294967295"]),
        "1 to 1000",
    );
    assert_refused(
        &runner(&["check", "sim", "--jobs", "100000", "--out", "/tmp/never"]),
        "1 to 256",
    );
    assert!(!Path::new("/tmp/never").exists());
}

/// N9: one exit-status story in `runner --help`, and exit 3 is never silent.
#[test]
fn the_exit_status_story_is_told_once_and_kept() {
    let help = String::from_utf8_lossy(&runner(&["--help"]).stdout).into_owned();
    for needle in [
        "one story for step, exercise, check, grade and workshop",
        "an ordering rule broken",
        "a closing line says what did not run",
        "the simulator found a deadlock",
    ] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
    // Without a GPU: the twin is built, the Blackwell kernel simulated; exit 3 with its line.
    let o = runner(&["step", "2"]);
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.code() == Some(3) {
        assert!(
            err.contains(
                "note: exit status 3 (ran in part): step 2's Hopper twin was built, not run"
            ),
            "{err}"
        );
    }
}

/// N18, P22: a "break it" exercise passes only on the break it asks for, and a "change it"
/// exercise fails on the stock kernel.
#[test]
fn exercise_checks_check_the_thing_they_name() {
    let root = checkout();
    let dir = std::env::temp_dir().join(format!("workbook-exercise-thing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The stock step-0 kernel verifies, but exercise 0.1 asks for PREFETCH = STAGES - 1.
    let stock0 = root.join("steps/step0_naive/src/kernel.cu");
    let o = runner(&["exercise", "0.1", "--kernel", stock0.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("does not make the exercise's edit"), "{out}");
    // A spin loop after the acc_full wait stops the kernel too, but it is not exercise 3.2's
    // broken byte count: it fails.
    let stock3 =
        std::fs::read_to_string(root.join("steps/step3_collective_mma/src/kernel.cu")).unwrap();
    let wait = "  wb::mbarrier_wait(&smem.acc_full, 0);";
    assert!(stock3.contains(wait));
    let spin = stock3.replacen(
        wait,
        &format!(
            "{wait}\n  {{ long long t0 = clock64(); while (clock64() - t0 < (1ll << 40)) {{}} }}"
        ),
        1,
    );
    let spin_path = dir.join("spin3.cu");
    std::fs::write(&spin_path, spin).unwrap();
    let o = runner(&["exercise", "3.2", "--kernel", spin_path.to_str().unwrap()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("not the break this exercise asks for"),
        "{out}"
    );
    assert!(
        out.contains("the rule operand-loaded"),
        "names what it wants: {out}"
    );
    // The committed solutions still pass: the break named, the edit made.
    for id in ["3.2", "4.2", "2.2", "5.1"] {
        let o = runner(&["exercise", id]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(matches!(o.status.code(), Some(0 | 3)), "{id}: {out}");
        assert!(out.contains("the check passes"), "{id}: {out}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// N21, N22, N24: the simulator's terms are in the glossary; "1 cluster"; every run of `step
/// --json` says whether it ran; a twin given to `--sim` is named as one.
#[test]
fn simulator_words_numbers_and_json_keys() {
    for term in ["simulator", "deadlock", "schedule", "pct", "rule"] {
        let o = runner(&["glossary", term]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{term}: {out}");
        assert!(out.contains("the simulator chapter"), "{term}: {out}");
    }
    let o = runner(&["step", "4", "--sim", "--clusters", "1"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains(" 1 cluster, "), "{out}");
    let o = runner(&["step", "3", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for r in v["runs"].as_array().unwrap() {
        assert!(r["ran"].is_boolean(), "{r}");
    }
    let twin = checkout().join("steps/step3_collective_mma/src/kernel_sm90.cu");
    assert_refused(
        &runner(&["step", "3", "--sim", "--kernel", twin.to_str().unwrap()]),
        "is a Hopper twin",
    );
}
