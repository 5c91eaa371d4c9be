//! Step 7 (cluster launch control) on the CPU simulator, through `runner step --sim`: the stock
//! kernel verifies at its default shape and at an odd one, in both dtypes, with several tiles per
//! cluster; each of its seeded bugs is caught on the first schedule of every policy, by one
//! rule, the same under each.

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

/// `runner step 7 --sim --json` with `extra`; the one run's report.
fn sim_run(extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["step", "7", "--sim", "--json"];
    args.extend_from_slice(extra);
    let o = runner(&args);
    assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("--json prints JSON");
    let runs = v["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{v}");
    runs[0].clone()
}

#[test]
fn step_7_verifies_on_the_simulator_at_its_default_and_an_odd_shape_in_both_dtypes() {
    // 1280 x 1536 x 320: 5 x 6 cluster tiles of 256 x 256, 5 k-blocks (not a multiple of the
    // 4-deep ring), so the rings' phases wrap mid-tile.
    for shape in [&[][..], &["--m", "1280", "--n", "1536", "--k", "320"][..]] {
        for dtype in ["f16", "bf16"] {
            let mut extra = vec!["--dtype", dtype];
            extra.extend_from_slice(shape);
            let r = sim_run(&extra);
            assert_eq!(r["simulated"], true, "{r}");
            assert_eq!(r["verification"]["passed"], true, "{extra:?}: {r}");
            let try_cancel = r["sim"]["per_opcode"]
                .as_array()
                .expect("per_opcode")
                .iter()
                .find(|p| {
                    p[0].as_str()
                        .is_some_and(|o| o.starts_with("clusterlaunchcontrol.try_cancel"))
                })
                .and_then(|p| p[1].as_u64())
                .unwrap_or(0);
            // One request per tile a cluster computed: fewer clusters run than were launched
            // only if requests succeeded, so some cluster took several tiles.
            assert!(try_cancel > 0, "{extra:?}: no try_cancel ran: {r}");
        }
    }
}

/// Every schedule policy `--sim-policy` takes.
const POLICIES: [&str; 4] = ["random", "pct", "async-early", "async-late"];

#[test]
fn each_seeded_bug_of_step_7_is_caught_on_the_first_schedule_of_every_policy_by_one_rule() {
    let try_cancel_line = try_cancel_line_of_step7();
    for (bug, rule) in [
        ("clc-read-early", "clc-read-before-complete"),
        ("clc-stale-response", "clc-id-used-twice"),
        ("clc-stops-asking", "clc-canceled-id-dropped"),
    ] {
        for policy in POLICIES {
            let o = runner(&[
                "step",
                "7",
                "--sim",
                "--mutate",
                bug,
                "--no-static-check",
                "--sim-policy",
                policy,
            ]);
            let out = text(&o.stdout);
            assert_eq!(
                o.status.code(),
                Some(2),
                "{bug} {policy}: {out}{}",
                text(&o.stderr)
            );
            assert!(
                out.contains(&format!("rule {rule}")),
                "{bug} under {policy}: not named {rule}: {out}"
            );
            assert!(
                out.contains("--sim-seed 1 "),
                "{bug} under {policy}: caught on the first schedule: {out}"
            );
            // Every report names the instruction: the dropped id (found when the cluster ends)
            // at the try_cancel whose answer was dropped.
            assert!(!out.contains("PTX line 0 "), "{bug} {policy}: {out}");
            if rule == "clc-canceled-id-dropped" {
                let at = format!("(source line {try_cancel_line}): the cluster ends");
                assert!(out.contains(&at), "{bug} {policy}: not at {at}: {out}");
            }
        }
    }
}

#[test]
fn a_response_read_early_is_named_so_whatever_the_schedule_decodes() {
    // At the agreement check's case (one cluster at a time, three tiles) some schedules read the
    // empty buffer, decode a failure and ask again: the defect is still the early read, so the
    // rule is clc-read-before-complete, never clc-after-failure (seen as a disagreement with the
    // GPU emulation on schedule 2). The stock kernel verifies on the same schedules.
    for seed in ["1", "2"] {
        for policy in POLICIES {
            for bug in [Some("clc-read-early"), None] {
                let mut args = vec![
                    "step",
                    "7",
                    "--sim",
                    "--m",
                    "256",
                    "--n",
                    "768",
                    "--k",
                    "512",
                    "--clusters",
                    "1",
                    "--sim-seed",
                    seed,
                    "--sim-policy",
                    policy,
                ];
                if let Some(b) = bug {
                    args.extend(["--mutate", b, "--no-static-check"]);
                }
                let o = runner(&args);
                let out = text(&o.stdout);
                match bug {
                    Some(b) => assert!(
                        out.contains("rule clc-read-before-complete"),
                        "{b} seed {seed} {policy}: {out}{}",
                        text(&o.stderr)
                    ),
                    None => assert_eq!(
                        o.status.code(),
                        Some(0),
                        "stock seed {seed} {policy}: {out}"
                    ),
                }
            }
        }
    }
}

/// The source line of step 7's `clusterlaunchcontrol.try_cancel`.
fn try_cancel_line_of_step7() -> usize {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../steps/step7_last_wave/src/kernel.cu"
    );
    let src = std::fs::read_to_string(path).expect("step 7's kernel");
    let lines: Vec<usize> = src
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("bw::clc_try_cancel_multicast("))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(lines.len(), 1, "one request in step 7: {lines:?}");
    lines[0]
}

#[test]
fn the_proving_mode_refuses_cluster_launch_control_rather_than_report_a_false_result() {
    let o = runner(&["step", "7", "--sim", "--explore", "all"]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(!o.status.success(), "{out}{err}");
    assert!(
        err.contains("does not model clusterlaunchcontrol"),
        "{out}{err}"
    );
    assert!(
        !out.contains("deadlock") && !err.contains("deadlock"),
        "{out}{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}
