//! Kernels executed in CI, without a GPU: every stock Blackwell kernel and every seeded bug on
//! the CPU simulator, through the product's own path (`runner check sim` and `runner step`:
//! NVRTC's sm_100a PTX of the kernels as they are, the steps' own launch plans, tensor maps and
//! inputs, the fp64 reference), never through a test copy of the host facts.

use std::path::PathBuf;
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

struct Tmp(PathBuf);

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tmp(name: &str) -> Tmp {
    let d = std::env::temp_dir().join(format!("runner-sim-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    Tmp(d)
}

/// The seeded bugs of the Blackwell kernels, as `runner mutations --json` lists them.
fn seeded_bugs() -> Vec<(String, String, String)> {
    let o = runner(&["mutations", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["mutations"]
        .as_array()
        .expect("{\"mutations\": [...]}")
        .iter()
        .filter(|m| m["arch"] == "sm_100a")
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_string(),
                m["expect"].as_str().unwrap().to_string(),
                m["caught_by"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn every_stock_kernel_verifies_and_every_seeded_bug_is_caught_on_the_simulator() {
    let out = tmp("check");
    let dir = out.0.to_str().unwrap();
    let o = runner(&["check", "sim", "--quick", "--out", dir]);
    let log = std::fs::read_to_string(out.0.join("sim-log.txt")).unwrap_or_default();
    assert!(
        o.status.success(),
        "{}\n{}\n{log}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.0.join("sim.json")).unwrap()).unwrap();
    assert_eq!(v["kind"], "emulation", "the emulation check's file format");
    assert_eq!(v["mode"], "simulated (CPU, sm_100a PTX)");
    let cases = v["cases"].as_array().unwrap();
    assert!(cases.iter().all(|c| c["met_expectation"] == true));
    // Every stock kernel, in both dtypes, every distribution, and a persistent grid capped so
    // one cluster runs several tiles.
    for info in runner::steps::infos() {
        let step = u64::from(info.number);
        let stock: Vec<&serde_json::Value> = cases
            .iter()
            .filter(|c| c["step"] == step && c["mutation"].is_null())
            .collect();
        assert!(stock.iter().all(|c| c["outcome"] == "pass"), "step {step}");
        assert!(stock.iter().any(|c| c["dtype"] == "bf16"), "step {step}");
        assert!(
            stock.iter().any(|c| c["dist"] == "exact-int"),
            "step {step}"
        );
        if info.blackwell.launch.schedule().fills_the_gpu() {
            assert!(stock.iter().any(|c| c["clusters"] == 1), "step {step}");
        }
    }
    // The book's "Verified" lines quote this run, at this commit (`runner/src/book/verified.rs`
    // reads it from target/check-sim/sim.json): leave it there, and check that a chapter quotes
    // it with the commit the runner was built from.
    let record = std::env::var_os("WORKBOOK_SIM_RECORD").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/check-sim/sim.json"),
        PathBuf::from,
    );
    std::fs::create_dir_all(record.parent().unwrap()).unwrap();
    std::fs::copy(out.0.join("sim.json"), &record).unwrap();
    let chapter = runner(&["explain", "3", "--markdown"]);
    assert!(chapter.status.success(), "{}", text(&chapter.stderr));
    let verified = text(&chapter.stdout)
        .lines()
        .find(|l| l.starts_with("**Verified**"))
        .map(str::to_string)
        .unwrap_or_default();
    let commit = v["commit"].as_str().unwrap();
    assert!(
        verified.contains(&format!(
            "at this commit, `{commit}`, by `runner check sim --quick`"
        )),
        "{verified}"
    );
    // Every seeded bug ran: a harmless one passed, the others were caught, by what they name.
    for (name, expect, caught_by) in seeded_bugs() {
        let mine: Vec<&serde_json::Value> =
            cases.iter().filter(|c| c["mutation"] == name).collect();
        assert!(!mine.is_empty(), "{name} did not run");
        for c in mine {
            match expect.as_str() {
                "harmless" => assert_eq!(c["outcome"], "pass", "{name}: {c}"),
                _ => {
                    assert_ne!(c["outcome"], "pass", "{name}: {c}");
                    if !caught_by.is_empty() {
                        assert_eq!(c["named"], true, "{name}: {c}");
                        assert!(c["detail"].as_str().unwrap().contains(&caught_by), "{c}");
                    }
                }
            }
        }
    }
}

#[test]
fn step_3_simulates_verifies_and_reports_what_ran() {
    let o = runner(&["step", "3", "--sim", "--json"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "--sim runs the Blackwell kernel only");
    let r = &runs[0];
    assert_eq!(r["simulated"], true);
    assert_eq!(r["target"], "sm_100a");
    assert_eq!(r["verification"]["passed"], true);
    assert!(r["sim"]["instructions"].as_u64().unwrap() > 0);
    assert_eq!(r["sim"]["backend"], "simulated (CPU, sm_100a PTX)");
    let mma = r["sim"]["per_opcode"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p[0].as_str().is_some_and(|o| o.starts_with("tcgen05.mma")));
    assert!(mma.is_some(), "the MMA ran: {r}");
}

#[test]
fn a_seeded_bug_fails_with_its_rule_and_the_seed_that_replays_it() {
    let o = runner(&[
        "step",
        "2",
        "--sim",
        "--mutate",
        "no-proxy-fence",
        "--no-static-check",
        "--explore",
        "2",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let err = text(&o.stderr);
    assert!(out.contains("rule proxy-fence-before-store"), "{out}");
    assert!(out.contains("--sim-seed "), "{out}");
    assert!(
        err.lines().filter(|l| l.starts_with("error: ")).count() == 1,
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_deadlock_names_the_barrier_and_the_missing_arrival() {
    let o = runner(&[
        "step",
        "4",
        "--sim",
        "--mutate",
        "acc-empty-extra-arrival",
        "--no-static-check",
        "--clusters",
        "1",
        "--sim-policy",
        "async-late",
    ]);
    assert_eq!(o.status.code(), Some(124), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("deadlock"), "{out}");
    assert!(
        out.contains("smem.acc_empty"),
        "named from the kernel: {out}"
    );
    assert!(out.contains("of its 9 arrivals; 1 missing"), "{out}");
}

#[test]
fn simulator_flags_are_refused_where_they_cannot_apply() {
    let o = runner(&["step", "1", "--sim", "--arch", "sm_90a"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--sim applies to the Blackwell kernel"));
    let o = runner(&["step", "1", "--sim", "--emulate"]);
    assert_eq!(o.status.code(), Some(2));
    let o = runner(&["step", "1", "--sim", "--clusters", "2"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("persistent"));
    let o = runner(&["step", "5", "--sim", "--m", "100"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("M must be a positive multiple of 256"));
}

#[test]
fn a_trace_of_simulated_events_is_written_as_text() {
    let d = tmp("trace");
    let stem = d.0.join("t");
    let o = runner(&["step", "0", "--sim", "--trace", stem.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let t = std::fs::read_to_string(d.0.join("t-step0-sim.txt")).unwrap();
    assert!(t.starts_with("# step 0"), "{t}");
    assert!(t.lines().count() > 10, "{t}");
}

#[test]
fn a_failing_run_writes_its_trace_up_to_the_failure() {
    // A seeded deadlock: the trace is where a learner reads what led to the hang, so it is
    // written, ending with the stop and who waited on what.
    let d = tmp("trace-fail");
    let stem = d.0.join("t");
    let o = runner(&[
        "step",
        "4",
        "--sim",
        "--mutate",
        "acc-empty-extra-arrival",
        "--no-static-check",
        "--clusters",
        "1",
        "--sim-policy",
        "async-late",
        "--trace",
        stem.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(124), "{}", text(&o.stderr));
    let path = d.0.join("t-step4-sim.txt");
    let t = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no trace at {}: {e}\n{}", path.display(), text(&o.stdout)));
    assert!(t.starts_with("# step 4"), "{t}");
    assert!(
        t.contains("the failing schedule (--sim-seed 1 --sim-policy async-late)"),
        "{t}"
    );
    assert!(t.contains("# stopped: deadlock"), "{t}");
    let tail: Vec<&str> = t.lines().rev().take(40).collect();
    assert!(
        tail.iter().any(|l| l.contains("stopped: deadlock")),
        "the stop is the trace's end: {tail:?}"
    );
    assert!(t.contains("smem.acc_empty"), "{t}");
    assert!(t.lines().count() > 10, "{t}");
    assert!(
        text(&o.stdout).contains("t-step4-sim.txt"),
        "{}",
        text(&o.stdout)
    );
    // A broken rule found while exploring schedules: the failing schedule's trace.
    let stem = d.0.join("r");
    let o = runner(&[
        "step",
        "2",
        "--sim",
        "--mutate",
        "no-proxy-fence",
        "--no-static-check",
        "--explore",
        "2",
        "--trace",
        stem.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let t = std::fs::read_to_string(d.0.join("r-step2-sim.txt")).unwrap();
    assert!(t.contains("stopped: rule proxy-fence-before-store"), "{t}");
}

/// Ordinary CUDA an honest student adds while debugging (`printf`, `assert`, a local array
/// indexed at run time, `sqrtf` and `__expf`) runs on the simulator and verifies; the printf
/// output is shown. A failing `assert` stops the run with its expression, file and line.
#[test]
fn a_kernel_with_printf_assert_a_local_array_and_math_runs_and_verifies() {
    let kernel = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/kernels/step0_ordinary_cuda.toml"
    );
    let o = runner(&["step", "0", "--sim", "--kernel", kernel]);
    let out = text(&o.stdout);
    assert!(o.status.success(), "{out}\n{}", text(&o.stderr));
    assert!(out.contains("verify    PASS"), "{out}");
    assert!(
        out.contains("| step 0: 256 x 256 x 512, 8 k-blocks, tile 128x256, scale 1.000"),
        "{out}"
    );
    // The same kernel with an assertion that fails: the run stops as a GPU trap would.
    let tmpd = tmp("assert");
    let edits = std::fs::read_to_string(kernel).unwrap().replace(
        "assert(num_k_blocks > 0 && ",
        "assert(num_k_blocks > 1000 && ",
    );
    let file = tmpd.0.join("failing_assert.toml");
    std::fs::write(&file, edits).unwrap();
    let o = runner(&["step", "0", "--sim", "--kernel", file.to_str().unwrap()]);
    let out = text(&o.stdout);
    assert!(!o.status.success(), "{out}");
    assert!(
        out.contains("assertion failed: num_k_blocks > 1000 && \"K holds at least one k-block\""),
        "{out}"
    );
    assert!(
        out.contains("FAIL  the simulator stopped the kernel (assert)"),
        "{out}"
    );
}

/// `--explore all`: the proving mode through `runner step`. Step 1 at its proving shape is
/// clean (exit 0); a seeded bug gives an error (exit 1) with a witness whose printed replay
/// command stops on the same rule; a state bound too small is incomplete (exit 3); a shape over
/// the bound is refused with one `error:` line.
#[test]
fn explore_all_proves_step_1_and_a_seeded_bugs_witness_replays_it() {
    let o = runner(&["step", "1", "--sim", "--explore", "all"]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}{}", text(&o.stderr));
    assert!(out.contains("verdict   clean"), "{out}");
    assert!(
        out.contains(" states, ") && out.contains(" transitions"),
        "{out}"
    );

    let o = runner(&[
        "step",
        "1",
        "--sim",
        "--explore",
        "all",
        "--mutate",
        "skip-load-full-wait",
        "--no-static-check",
    ]);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(out.contains("rule operand-loaded"), "{out}");
    assert_eq!(
        err.lines().filter(|l| l.starts_with("error: ")).count(),
        1,
        "{err}"
    );
    let cmd = out
        .lines()
        .find_map(|l| l.strip_prefix("replay    runner "))
        .expect("a replay command");
    assert!(cmd.contains("--replay t"), "{cmd}");
    let args: Vec<&str> = cmd.split_whitespace().collect();
    let o = runner(&args);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    // The replay is an ordinary simulated run: a broken rule exits 2 (`runner --help`).
    assert_eq!(o.status.code(), Some(2), "{out}{err}");
    assert!(
        out.contains("rule operand-loaded"),
        "the replay stops on the same rule: {out}"
    );

    let o = runner(&[
        "step",
        "1",
        "--sim",
        "--explore",
        "all",
        "--prove-states",
        "10",
    ]);
    let out = text(&o.stdout);
    assert_eq!(o.status.code(), Some(3), "{out}{}", text(&o.stderr));
    assert!(out.contains("verdict   incomplete"), "{out}");

    let o = runner(&[
        "step",
        "1",
        "--sim",
        "--explore",
        "all",
        "--m",
        "1024",
        "--n",
        "1024",
        "--k",
        "1024",
    ]);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.starts_with("error: ")).count(),
        1,
        "{err}"
    );
    assert!(err.contains("too large for the proving mode"), "{err}");
}
