//! The proving mode at issue 37's target: step 1 at one tile, 4 k-blocks and 2 stages
//! (`--param stages=2` sets the kernel's compile-time ring depth, WB_STAGES). The stock kernel is
//! proved clean with its states counted; the seeded `wrong-parity` bug, which a 4-stage ring
//! never reaches at 4 k-blocks (the producer waits on load_empty only from its second round),
//! is an error at 2 stages with a witness that replays the same stop.

use std::process::{Command, Output};

fn runner(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(args)
        .output()
        .expect("runner runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The numbers of the `explored` line: (runs, states).
fn explored(out: &str) -> (u64, u64) {
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("explored  "))
        .unwrap_or_else(|| panic!("an explored line: {out}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let num = |after: &str| -> u64 {
        let i = words
            .iter()
            .position(|w| w.trim_end_matches(',') == after)
            .unwrap_or_else(|| panic!("`{after}` in {line}"));
        words[i - 1].parse().expect("a count")
    };
    (num("runs"), num("states"))
}

const PROVE_STEP1: [&str; 5] = ["step", "1", "--sim", "--explore", "all"];

#[test]
fn step1_with_two_stages_is_proved_clean_and_its_wrong_parity_has_a_witness() {
    let args = [&PROVE_STEP1[..], &["--param", "stages=2"]].concat();
    let o = runner(&args);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert!(out.contains("128x256x256 (proving mode)"), "{out}");
    assert!(out.contains("verdict   clean"), "{out}");
    let (runs, states) = explored(&out);
    assert!(runs >= 2 && states > 1000, "{out}");

    // The control: at the kernel's own 4 stages, 4 k-blocks fill the ring once, so the wrong
    // parity is never waited on.
    let bug = ["--mutate", "wrong-parity", "--no-static-check"];
    let o = runner(&[&PROVE_STEP1[..], &bug].concat());
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert!(out.contains("verdict   clean"), "{out}");

    // With 2 stages the producer's second round waits on the wrong phase of load_empty.
    let o = runner(&[&args[..], &bug].concat());
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    let verdict = out
        .lines()
        .find_map(|l| l.strip_prefix("verdict   error: "))
        .unwrap_or_else(|| panic!("an error verdict: {out}"));
    assert!(verdict.contains("load_full"), "{verdict}");
    let cmd = out
        .lines()
        .find_map(|l| l.strip_prefix("replay    runner "))
        .expect("a replay command");
    assert!(
        cmd.contains("--param stages=2") && cmd.contains("--replay t"),
        "{cmd}"
    );
    let o = runner(&cmd.split_whitespace().collect::<Vec<_>>());
    let (rout, rerr) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(2), "{rout}{rerr}");
    // The same stop: the fault's words after its location.
    let what = verdict.split("): ").nth(1).unwrap_or(verdict);
    assert!(
        rout.contains(what) || rerr.contains(what),
        "the replay stops as the witness did ({what}): {rout}{rerr}"
    );
}
