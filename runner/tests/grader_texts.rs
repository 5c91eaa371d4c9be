//! The grader's texts as a student and an instructor read them on a laptop without a GPU
//! (issue 39; the newcomer walkthrough's N12, N14, N15, N19, N20, P3 and A9): a finding is said
//! once per report; the budget is named by the rubric's key, never by the simulator's API;
//! every row of a class has the same maximum; the summary names the simulator without a device
//! number; no leaderboard row where nothing was timed; report folders carry the student's
//! readable name; a replay of another rubric is refused and one of another file warned about;
//! `--gpus` where no GPU is used, and `--on-gpu` without a GPU, are refused at once.
//!
//! CPU time: about five NVRTC compiles of step 3 and a few simulated launches at the rubric's
//! small shapes (tens of seconds on the 2-core machine).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("runner-texts-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn runner(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(args)
        .env("CUDA_VISIBLE_DEVICES", "")
        .output()
        .expect("runner runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// stderr without the `note:` lines (a first run installs the toolkit and says so).
fn errors(o: &Output) -> String {
    text(&o.stderr)
        .lines()
        .filter(|l| !l.starts_with("note: "))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// A usage error: exit 2, one `error:` line holding `needle`, no clap tip, no panic.
fn assert_one_line_error(o: &Output, needle: &str) {
    let err = errors(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.starts_with("error: "), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.contains(needle), "expected {needle:?} in {err}");
    assert!(!err.contains("tip:") && !err.contains("panicked"), "{err}");
}

/// The cells of a CSV line (quoted cells may hold commas; none here holds a quote).
fn cells(line: &str) -> Vec<String> {
    let (mut out, mut cell, mut quoted) = (Vec::new(), String::new(), false);
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cell)),
            _ => cell.push(c),
        }
    }
    out.push(cell);
    out
}

fn step3() -> String {
    std::fs::read_to_string(root().join("steps/step3_collective_mma/src/kernel.cu")).unwrap()
}

/// Step 3's kernel with its epilogue's `acc_full` wait removed: it reads the accumulator early.
fn reads_early() -> String {
    let k = step3();
    let wait = "  wb::mbarrier_wait(&smem.acc_full, 0);\n";
    assert!(k.contains(wait), "step 3 waits on acc_full");
    k.replacen(wait, "", 1)
}

/// step3-blackwell.toml with its f16 tests only (one build to compile); `edit` changes the text.
fn rubric(dir: &Path, name: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let t = std::fs::read_to_string(root().join("rubrics/step3-blackwell.toml")).unwrap();
    let t = edit(t.replacen("dtype = \"bf16\"\n", "", 1));
    let p = dir.join(name);
    std::fs::write(&p, t).unwrap();
    p
}

fn submit(dir: &Path, name: &str, kernel: &str) -> PathBuf {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("kernel.cu"), kernel).unwrap();
    d
}

#[test]
fn a_broken_rule_is_said_once_in_a_students_report() {
    let d = tmp("once");
    let sub = submit(&d, "eve", &reads_early());
    let r = rubric(&d, "r.toml", |t| t);
    let o = runner(&[
        "grade",
        sub.to_str().unwrap(),
        "--rubric",
        r.to_str().unwrap(),
        "--public-only",
        "--allow-unconfined",
    ]);
    assert!(o.status.success(), "{}", errors(&o));
    let out = text(&o.stdout);
    // The rule is named once, its paragraph (with the source line) printed once; the flag on
    // the same row and the requirements that failed because of the test point back to it.
    assert!(
        out.contains("broke the ordering rule ld-after-commit-wait: CTA"),
        "{out}"
    );
    assert!(!out.contains("rule ld-after-commit-wait: rule"), "{out}");
    assert_eq!(out.matches("(source line ").count(), 1, "{out}");
    assert!(out.contains("flag ordering-rule: as above"), "{out}");
    assert!(
        out.contains("[said in public-gaussian-f16, above]"),
        "{out}"
    );
    // The skipped speed test is said to need a B200, not "native hardware".
    assert!(
        out.lines()
            .next()
            .unwrap()
            .contains("the simulator does not time kernels"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_kernel_over_its_budget_is_told_in_the_rubrics_words() {
    let d = tmp("budget");
    let spin = step3().replacen(
        "  const int num_k_blocks = K / TILE_K;",
        "  const int num_k_blocks = K / TILE_K;\n  { volatile int spin = 0; while (M > 0) spin = spin + 1; }",
        1,
    );
    let sub = submit(&d, "spin", &spin);
    let r = rubric(&d, "r.toml", |t| {
        t.replacen("[limits]\n", "[limits]\nsim_steps = 2000000\n", 1)
    });
    let o = runner(&[
        "grade",
        sub.to_str().unwrap(),
        "--rubric",
        r.to_str().unwrap(),
        "--public-only",
        "--allow-unconfined",
        "--json",
    ]);
    assert!(o.status.success(), "{}", errors(&o));
    let all = text(&o.stdout);
    assert!(!all.contains("Options::"), "no Rust API shown: {all}");
    let v: Value = serde_json::from_str(&all).unwrap();
    let row = &v["tests"][0];
    assert_eq!(row["flags"][0]["name"], "timeout", "{row:#}");
    let said = row["flags"][0]["detail"].as_str().unwrap();
    assert!(
        said.contains("budget of 2000000 simulated steps") && said.contains("[limits] sim_steps"),
        "{said}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_class_on_the_simulator_has_one_maximum_readable_folders_and_no_empty_leaderboard() {
    let d = tmp("class");
    let class = d.join("class");
    submit(&class, "王伟", &step3());
    submit(&class, "carol smith", &step3());
    submit(&class, "bob", "this is not CUDA\n");
    let r = rubric(&d, "r.toml", |t| t);
    let out = d.join("out");
    let o = runner(&[
        "grade",
        "--batch",
        class.to_str().unwrap(),
        "--rubric",
        r.to_str().unwrap(),
        "--public-only",
        "--gradescope",
        "--allow-unconfined",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", errors(&o));
    let csv = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    let rows: Vec<Vec<String>> = csv.lines().skip(1).map(cells).collect();
    assert_eq!(rows.len(), 3, "{csv}");
    let maxima: Vec<&str> = rows
        .iter()
        .map(|r| r[5].split('/').nth(1).unwrap())
        .collect();
    assert!(maxima.iter().all(|m| *m == maxima[0]), "one maximum: {csv}");
    for r in &rows {
        assert!(
            !r[6].contains('#'),
            "the simulator has no device number: {csv}"
        );
        assert_ne!(
            r[3], "failed",
            "a speed test no one can run is not failed: {csv}"
        );
    }
    assert!(csv.contains("bob,failed,"), "{csv}");
    // Readable folders, each holding its student's report and Gradescope file.
    for (folder, student) in [
        ("王伟", "王伟"),
        ("carol smith", "carol smith"),
        ("bob", "bob"),
    ] {
        let g: Value =
            serde_json::from_slice(&std::fs::read(out.join(folder).join("grade.json")).unwrap())
                .unwrap();
        assert_eq!(g["student"], student);
        let gs: Value =
            serde_json::from_slice(&std::fs::read(out.join(folder).join("results.json")).unwrap())
                .unwrap();
        assert!(
            gs.get("leaderboard").is_none(),
            "nothing was timed: no leaderboard row ({folder}): {gs:#}"
        );
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_replay_of_another_rubric_is_refused_and_of_another_file_warned() {
    let d = tmp("replay");
    let r = rubric(&d, "r.toml", |t| t);
    let secret = d.join("secret.txt");
    std::fs::write(&secret, "the grader texts test's secret: long enough\n").unwrap();
    let alice = submit(&d, "alice", &step3());
    let first = d.join("first");
    let o = runner(&[
        "grade",
        alice.to_str().unwrap(),
        "--rubric",
        r.to_str().unwrap(),
        "--secret-file",
        secret.to_str().unwrap(),
        "--allow-unconfined",
        "--out",
        first.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", errors(&o));
    let recorded = first.join("grade.json");
    // Another rubric (step 0's): refused before anything is graded, naming both.
    let step0 = rubric(&d, "step0.toml", |t| {
        t.replacen("\nstep = 3\n", "\nstep = 0\n", 1)
    });
    assert_one_line_error(
        &runner(&[
            "grade",
            alice.to_str().unwrap(),
            "--rubric",
            step0.to_str().unwrap(),
            "--replay",
            recorded.to_str().unwrap(),
        ]),
        "a replay regrades with the seeds of the same rubric's tests",
    );
    // A rubric without a recorded test: refused, naming the test.
    let renamed = rubric(&d, "renamed.toml", |t| {
        t.replacen("public-gaussian-f16", "public-renamed", 1)
    });
    assert_one_line_error(
        &runner(&[
            "grade",
            alice.to_str().unwrap(),
            "--rubric",
            renamed.to_str().unwrap(),
            "--replay",
            recorded.to_str().unwrap(),
        ]),
        "records no seeds for test \"public-renamed\"",
    );
    // Another file, labelled as another student: graded, with a warning for each.
    let mallory = submit(&d, "mallory", &format!("// mallory's copy\n{}", step3()));
    let o = runner(&[
        "grade",
        mallory.to_str().unwrap(),
        "--rubric",
        r.to_str().unwrap(),
        "--replay",
        recorded.to_str().unwrap(),
        "--student",
        "mallory",
        "--allow-unconfined",
    ]);
    assert!(o.status.success(), "{}", errors(&o));
    let err = errors(&o);
    assert!(
        err.contains("warning: ") && err.contains("is not the kernel") && err.contains("\"alice\""),
        "{err}"
    );
    assert!(err.contains("reported as \"mallory\""), "{err}");
    assert!(
        text(&o.stdout).starts_with("mallory: "),
        "{}",
        text(&o.stdout)
    );
    // The same file and student: no warning.
    let o = runner(&[
        "grade",
        alice.to_str().unwrap(),
        "--rubric",
        r.to_str().unwrap(),
        "--replay",
        recorded.to_str().unwrap(),
        "--allow-unconfined",
    ]);
    assert!(o.status.success(), "{}", errors(&o));
    assert!(!errors(&o).contains("warning"), "{}", errors(&o));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn gpus_where_no_gpu_is_used_is_a_usage_error() {
    let d = tmp("gpus");
    let sub = submit(&d, "alice", &step3());
    let blackwell = root().join("rubrics/step3-blackwell.toml");
    assert_one_line_error(
        &runner(&[
            "grade",
            sub.to_str().unwrap(),
            "--rubric",
            blackwell.to_str().unwrap(),
            "--public-only",
            "--gpus",
            "0,1,7",
        ]),
        "--gpus picks the GPUs a grading runs on, and this one uses none: the sm_100a rubric",
    );
    let hopper = root().join("rubrics/step3-hopper.toml");
    assert_one_line_error(
        &runner(&[
            "grade",
            "--batch",
            d.to_str().unwrap(),
            "--rubric",
            hopper.to_str().unwrap(),
            "--compile-only",
            "--gpus",
            "0",
            "--out",
            d.join("out").to_str().unwrap(),
        ]),
        "--compile-only compiles on the CPU",
    );
    // --on-gpu where it changes nothing: a Hopper rubric, or a pre-screen.
    assert_one_line_error(
        &runner(&[
            "grade",
            sub.to_str().unwrap(),
            "--rubric",
            hopper.to_str().unwrap(),
            "--public-only",
            "--on-gpu",
        ]),
        "--on-gpu applies to a Blackwell (sm_100a) rubric",
    );
    assert_one_line_error(
        &runner(&[
            "grade",
            sub.to_str().unwrap(),
            "--rubric",
            blackwell.to_str().unwrap(),
            "--compile-only",
            "--on-gpu",
        ]),
        "--compile-only runs no test",
    );
    // A shard that looks like a negative number meets the shard's own check, not clap's tip.
    assert_one_line_error(
        &runner(&[
            "grade",
            "--batch",
            d.to_str().unwrap(),
            "--rubric",
            blackwell.to_str().unwrap(),
            "--public-only",
            "--shard",
            "-1/2",
            "--out",
            d.join("out").to_str().unwrap(),
        ]),
        "--shard takes I/N with 0 <= I < N",
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// On a machine without a CUDA driver (CI, a laptop), `--on-gpu` is refused at once, before any
/// toolkit or CUPTI download, pointing at the simulator; on a GPU machine it is not refused so.
#[test]
fn on_gpu_without_a_gpu_is_refused_before_any_download() {
    let d = tmp("ongpu");
    let sub = submit(&d, "alice", &step3());
    let cache = d.join("cache");
    let start = std::time::Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_runner"))
        .args([
            "grade",
            sub.to_str().unwrap(),
            "--rubric",
            root()
                .join("rubrics/step3-blackwell.toml")
                .to_str()
                .unwrap(),
            "--public-only",
            "--on-gpu",
        ])
        .env("WORKBOOK_CUDA_CACHE", &cache)
        .env("WORKBOOK_NO_INSTALL", "1")
        .output()
        .unwrap();
    let no_driver = [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/lib64",
    ]
    .iter()
    .all(|l| {
        !Path::new(l).join("libcuda.so.1").exists() && !Path::new(l).join("libcuda.so").exists()
    });
    let err = errors(&o);
    if no_driver {
        assert_one_line_error(
            &o,
            "grade --on-gpu needs a GPU, and this machine has no CUDA driver",
        );
        assert!(err.contains("leave out --on-gpu"), "{err}");
        assert!(!cache.exists(), "nothing installed first");
        assert!(start.elapsed().as_secs() < 10, "{:?}", start.elapsed());
    } else {
        assert!(!err.contains("has no CUDA driver"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&d);
}
