//! What a newcomer meets first on a laptop without a GPU, as the walkthroughs of issue 39 found
//! it: a command typed bare does something useful, and a help text says what the command does
//! without a GPU. Cheap: no kernel is compiled.

use std::process::{Command, Output};

fn runner(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(args)
        .output()
        .expect("runner runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `runner exercise` alone lists the exercises (a student asking what there is), exit 0; with
/// `--kernel` but no exercise it names the missing exercise and how to list them.
#[test]
fn a_bare_exercise_lists_the_exercises() {
    let o = runner(&["exercise"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = stdout(&o);
    for want in ["0.1", "3.2", "Break the byte count", "6.2"] {
        assert!(out.contains(want), "{want}: {out}");
    }
    assert_eq!(out, stdout(&runner(&["exercise", "--list"])));
    let o = runner(&["exercise", "--kernel", "my.cu"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.starts_with("error: give an exercise") && err.contains("`runner exercise` lists them"),
        "{err}"
    );
}

/// `step --help` says what `--trace` writes on the simulator (a text file), not only the GPU's
/// Perfetto JSON and SVG.
#[test]
fn the_trace_help_tells_the_simulators_file() {
    let help = stdout(&runner(&["step", "--help"]));
    let trace: String = help
        .split("--trace")
        .nth(1)
        .unwrap_or_else(|| panic!("{help}"))
        .chars()
        .take(700)
        .collect();
    assert!(trace.contains("-sim.txt"), "{trace}");
    assert!(trace.contains("no folder is created"), "{trace}");
}
