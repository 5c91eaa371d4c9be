//! The grader's confinement, without a GPU: a compile child cannot read a file outside the
//! toolkit (absolute paths, `..`, `/proc/self/...`, the grader's `/proc/<pid>`, a secret), even
//! with the include screen off, and no report holds a line of such a file. A negative control
//! (the same class graded as on a kernel without Landlock) shows the checks can fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("runner-confine-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn rubric() -> String {
    format!(
        "{}/../rubrics/step0-hopper.toml",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// Every file under `dir`, with its bytes.
fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.filter_map(|e| e.ok()) {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else if let Ok(b) = std::fs::read(&p) {
            out.push((p, b));
        }
    }
    out
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// The attacks: one submission each, every one an `#include` the screen would refuse (so the
/// class is graded with the screen off: the confinement alone must hold).
fn write_class(class: &Path, secret: &Path, parent_pid: u32) {
    let up = "../".repeat(16);
    let rel = secret.to_string_lossy().trim_start_matches('/').to_string();
    let attacks = [
        ("absolute", format!("#include \"{}\"", secret.display())),
        ("dotdot", format!("#include \"{up}{rel}\"")),
        (
            "proc-self-environ",
            "#include \"/proc/self/environ\"".into(),
        ),
        (
            "proc-parent-environ",
            format!("#include \"/proc/{parent_pid}/environ\""),
        ),
        (
            "proc-parent-cmdline",
            format!("#include \"/proc/{parent_pid}/cmdline\""),
        ),
        (
            "proc-self-root",
            format!("#include \"/proc/self/root{}\"", secret.display()),
        ),
        ("etc-passwd", "#include \"/etc/passwd\"".into()),
        ("the-job", "#include \"job.json\"".into()),
        ("the-job-pipe", "#include \"/proc/self/fd/0\"".into()),
        (
            "macro",
            format!("#define F \"{}\"\n#include F", secret.display()),
        ),
        ("angle-path", format!("#include <{up}{rel}>")),
    ];
    for (name, line) in attacks {
        let d = class.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("kernel.cu"),
            format!("// attack: {name}\n{line}\nextern \"C\" __global__ void gemm_kernel() {{}}\n"),
        )
        .unwrap();
    }
}

/// Grade the class, compile only, screen off; scratch kept under `tmpdir`.
fn grade(class: &Path, out: &Path, tmpdir: &Path, unconfined: bool) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_runner"));
    c.args(["grade", "--batch"])
        .arg(class)
        .args(["--rubric", &rubric(), "--compile-only", "--skip-screen"])
        .args(["--keep-scratch", "--json", "--out"])
        .arg(out)
        .env("TMPDIR", tmpdir)
        .env("WORKBOOK_GRADE_SECRET", "a-grading-secret-never-to-be-seen");
    if unconfined {
        c.env("WORKBOOK_GRADE_SIMULATE_NO_LANDLOCK", "1")
            .arg("--allow-unconfined");
    }
    c.output().expect("runner runs")
}

/// Markers that must never be in a child's scratch folder or in a report: the secret's line,
/// lines of the test process's own environment (the grader's parent), /etc/passwd's first line.
fn markers(secret_line: &str) -> Vec<String> {
    let mut m = vec![secret_line.to_string()];
    let environ = std::fs::read("/proc/self/environ").unwrap_or_default();
    m.extend(
        environ
            .split(|&b| b == 0)
            .map(|e| String::from_utf8_lossy(e).into_owned())
            .filter(|e| e.len() >= 12 && e.starts_with("CARGO_PKG_NAME")),
    );
    if let Some(first) = std::fs::read_to_string("/etc/passwd")
        .ok()
        .and_then(|t| t.lines().next().map(str::to_string))
    {
        m.push(first);
    }
    m
}

fn landlock_here() -> bool {
    // SAFETY: the documented version query of landlock_create_ruleset.
    unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            1u32,
        ) > 0
    }
}

#[test]
fn a_compile_child_reads_no_file_outside_the_toolkit() {
    if !landlock_here() {
        eprintln!("this kernel has no Landlock: the confinement cannot be tested here");
        return;
    }
    let d = tmp("confined");
    let secret_dir = tmp("secret-home");
    let secret = secret_dir.join("secret.txt");
    let secret_line = format!("TOP-SECRET-{}-LINE", std::process::id());
    std::fs::write(&secret, format!("{secret_line}\n")).unwrap();
    let class = d.join("class");
    write_class(&class, &secret, std::process::id());
    let scratch = d.join("tmp");
    std::fs::create_dir_all(&scratch).unwrap();
    let o = grade(&class, &d.join("out"), &scratch, false);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    let reports: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let reports = reports.as_array().unwrap();
    assert_eq!(reports.len(), 11, "{stdout}");
    for r in reports {
        assert!(
            r["confinement"]
                .as_str()
                .unwrap()
                .contains("confined by Landlock"),
            "{r}"
        );
        let log = r["compile"]["log"].as_str().unwrap();
        assert_eq!(r["compile"]["status"], "failed", "{}: {log}", r["student"]);
        // The compiler was refused the file (or it does not exist in its view).
        assert!(
            log.contains("Permission denied") || log.contains("cannot open source file"),
            "{}: {log}",
            r["student"]
        );
        // ... and the report names the attempt.
        let flags = r["flags"].as_array().unwrap();
        assert!(
            flags.contains(&"blocked-include".into()) && flags.contains(&"compile-error".into()),
            "{}: {flags:?}",
            r["student"]
        );
    }
    let all_reports = files(&d.join("out"));
    let all_scratch = files(&scratch);
    assert!(
        all_scratch
            .iter()
            .any(|(p, _)| p.ends_with("compile/compile.json")),
        "the compile children's reports were kept"
    );
    for m in markers(&secret_line) {
        for (p, b) in all_reports.iter().chain(&all_scratch) {
            assert!(!contains(b, &m), "{} holds {m:?}", p.display());
        }
        assert!(!stdout.contains(&m), "the JSON report holds {m:?}");
    }
    // No child's folder holds a hidden test's name (the job came over a pipe, without tests).
    for (p, b) in &all_scratch {
        assert!(!contains(b, "hidden-uniform-f16"), "{}", p.display());
        assert!(!contains(b, "a-grading-secret"), "{}", p.display());
    }
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_dir_all(&secret_dir);
}

/// The negative control: graded as on a kernel without Landlock, the compile child does read
/// the secret (so the test above can fail), and the log filter alone still keeps it out of
/// every report.
#[test]
fn unconfined_the_same_class_leaks_into_the_child_but_not_the_report() {
    let d = tmp("unconfined");
    let secret_dir = tmp("secret-home-2");
    let secret = secret_dir.join("secret.txt");
    let secret_line = format!("TOP-SECRET-{}-LINE", std::process::id());
    std::fs::write(&secret, format!("{secret_line}\n")).unwrap();
    let class = d.join("class");
    write_class(&class, &secret, std::process::id());
    // Two attacks are enough to show the leak.
    for e in std::fs::read_dir(&class).unwrap().filter_map(|e| e.ok()) {
        if !["absolute", "dotdot"].contains(&e.file_name().to_str().unwrap()) {
            std::fs::remove_dir_all(e.path()).unwrap();
        }
    }
    let scratch = d.join("tmp");
    std::fs::create_dir_all(&scratch).unwrap();
    let o = grade(&class, &d.join("out"), &scratch, true);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(stdout.contains("UNCONFINED"), "{stdout}");
    let leaked = files(&scratch)
        .into_iter()
        .filter(|(_, b)| contains(b, &secret_line))
        .count();
    assert_eq!(
        leaked, 2,
        "unconfined, each compile child reads the secret into its log"
    );
    for (p, b) in files(&d.join("out")) {
        assert!(!contains(&b, &secret_line), "{}", p.display());
    }
    assert!(!stdout.contains(&secret_line));
    let _ = std::fs::remove_dir_all(&d);
    let _ = std::fs::remove_dir_all(&secret_dir);
}

#[test]
fn without_landlock_hidden_tests_are_refused_unless_allowed() {
    // A Blackwell rubric (graded on the simulator, so no GPU is needed here): a Hopper rubric on a
    // machine without a GPU is refused for that first, before any secret is read.
    let d = tmp("refuse");
    let k = d.join("k.cu");
    std::fs::copy(
        format!(
            "{}/../steps/step3_collective_mma/src/kernel.cu",
            env!("CARGO_MANIFEST_DIR")
        ),
        &k,
    )
    .unwrap();
    let secret = d.join("secret.txt");
    std::fs::write(&secret, "an instructor secret of length").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("grade")
        .arg(&k)
        .arg("--rubric")
        .arg(format!(
            "{}/../rubrics/step3-blackwell.toml",
            env!("CARGO_MANIFEST_DIR")
        ))
        .arg("--secret-file")
        .arg(&secret)
        .env("WORKBOOK_GRADE_SIMULATE_NO_LANDLOCK", "1")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("hidden tests are refused"), "{err}");
    assert!(err.contains("--allow-unconfined"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

/// `runner grade` as Gradescope's script runs it, with `METADATA` (the trusted place of the
/// metadata) unset unless `env` sets it.
fn grade_cmd(sub: &Path, extra: &[&str], env: Option<&Path>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_runner"));
    c.arg("grade")
        .arg(sub)
        .args(["--rubric", &rubric(), "--gradescope"])
        .args(extra)
        .env_remove("WORKBOOK_GRADESCOPE_METADATA");
    // No secret needed: the visible tests only, or (a usage conflict with that) compiled only.
    if !extra.contains(&"--compile-only") {
        c.arg("--public-only");
    }
    if let Some(p) = env {
        c.env("WORKBOOK_GRADESCOPE_METADATA", p);
    }
    c.output().unwrap()
}

#[test]
fn gradescope_identity_comes_only_from_a_trusted_place() {
    let d = tmp("gradescope");
    let sub = d.join("submission");
    std::fs::create_dir_all(&sub).unwrap();
    let kernel = sub.join("kernel.cu");
    std::fs::write(&kernel, "#include \"hopper.cuh\"\n").unwrap();
    let one_error = |o: &Output, needle: &str| {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(lines[0].starts_with("error: "), "{err}");
        assert!(lines[0].contains(needle), "{err}");
    };
    // No identity at all.
    one_error(&grade_cmd(&sub, &[], None), "needs the student's identity");
    // A student who ships Gradescope's file names nobody: it is never read, whether the folder
    // or its kernel file is graded.
    let forged = r#"{"id": 1, "users": [{"email": "b@x.edu", "id": 1, "name": "B"}]}"#;
    std::fs::write(sub.join("submission_metadata.json"), forged).unwrap();
    for s in [&sub, &kernel] {
        let o = grade_cmd(s, &[], None);
        one_error(&o, "needs the student's identity");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("is never read"),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // Pointing the trusted place into the submission is refused too.
    let inside = sub.join("submission_metadata.json");
    one_error(
        &grade_cmd(&sub, &["--metadata", inside.to_str().unwrap()], None),
        "inside the submission folder",
    );
    one_error(
        &grade_cmd(&sub, &[], Some(&inside)),
        "inside the submission folder",
    );
    // Gradescope's metadata where Gradescope puts it (outside the submission, here named by the
    // variable) names the student; the shipped file is ignored and the instructor's report says so.
    let trusted = d.join("submission_metadata.json");
    std::fs::write(
        &trusted,
        r#"{"id": 1, "users": [{"email": "a@x.edu", "id": 4711, "name": "A"}]}"#,
    )
    .unwrap();
    let out_dir = d.join("out");
    let o = grade_cmd(
        &sub,
        &["--compile-only", "--out", out_dir.to_str().unwrap()],
        Some(&trusted),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("grade.json")).unwrap()).unwrap();
    assert_eq!(report["student"], "gradescope-4711", "{report}");
    let flags = report["grading_flags"].to_string();
    assert!(flags.contains("metadata-in-submission"), "{flags}");
    // The student's own results never mention it.
    let results = std::fs::read_to_string(out_dir.join("results.json")).unwrap();
    assert!(!results.contains("metadata"), "{results}");
    // --student wins over any metadata.
    let o = grade_cmd(
        &sub,
        &["--compile-only", "--json", "--student", "carol"],
        Some(&trusted),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("\"student\": \"carol\""), "{out}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A compile that would take hours (2^24 template instantiations) is stopped at the rubric's
/// compile limit, with its process group, and reported as a compile timeout.
#[test]
fn a_compile_bomb_stops_at_the_compile_limit() {
    let d = tmp("bomb");
    let rubric_text = std::fs::read_to_string(rubric()).unwrap();
    assert!(rubric_text.contains("compile_seconds = 120"));
    let short = d.join("short.toml");
    std::fs::write(
        &short,
        rubric_text.replace("compile_seconds = 120", "compile_seconds = 5"),
    )
    .unwrap();
    let k = d.join("bomb.cu");
    std::fs::write(
        &k,
        "template <int N, int V> struct Bomb {\n  static constexpr int value = Bomb<N - 1, 2 * V>::value + Bomb<N - 1, 2 * V + 1>::value;\n};\ntemplate <int V> struct Bomb<0, V> { static constexpr int value = V & 1; };\nstatic_assert(Bomb<24, 1>::value >= 0, \"the bomb\");\nextern \"C\" __global__ void gemm_kernel() {}\n",
    )
    .unwrap();
    let t0 = std::time::Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_runner"))
        .arg("grade")
        .arg(&k)
        .arg("--rubric")
        .arg(&short)
        .args(["--compile-only", "--json"])
        .env("TMPDIR", &d)
        .output()
        .unwrap();
    let took = t0.elapsed().as_secs_f64();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(r["compile"]["status"], "timeout", "{r}");
    assert!(
        r["flags"]
            .as_array()
            .unwrap()
            .contains(&"compile-timeout".into()),
        "{r}"
    );
    // Two compiles at most (one per dtype), each stopped at 5 s, plus starting the children.
    assert!(took < 40.0, "the bomb held the grader for {took:.0} s");
    let _ = std::fs::remove_dir_all(&d);
}
