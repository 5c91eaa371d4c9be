//! `runner grade --batch` on the simulator (no GPU): several students at once (`--jobs`), each
//! grade.json written as its student finishes, and Ctrl-C: a real SIGINT to the grading process
//! keeps every finished grade, removes the scratch folders, exits 130 and prints the command
//! that resumes it; `--resume` then grades only the students left.
//!
//! CPU time: about four gradings of step 0's Blackwell kernel (one f16 build each).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("runner-gradebatch-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// step3-blackwell.toml at step 0 without its requirements, with f16 tests only: one build each.
fn rubric(dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(root().join("rubrics/step3-blackwell.toml")).unwrap();
    // Step 3's requirements (the 2-CTA MMA) are not step 0's: cut.
    let cut = text.find("\n# Proof the technique ran").unwrap();
    let text = text[..cut]
        .replacen("\nstep = 3\n", "\nstep = 0\n", 1)
        .replacen("dtype = \"bf16\"\n", "", 1);
    let path = dir.join("step0-blackwell-f16.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn class(dir: &Path, students: &[&str]) -> PathBuf {
    let kernel = std::fs::read_to_string(root().join("steps/step0_naive/src/kernel.cu")).unwrap();
    let c = dir.join("class");
    for s in students {
        std::fs::create_dir_all(c.join(s)).unwrap();
        std::fs::write(c.join(s).join("kernel.cu"), &kernel).unwrap();
    }
    c
}

fn batch(dir: &Path, extra: &[&str]) -> Command {
    let secret = dir.join("secret.txt");
    std::fs::write(&secret, "the gradebatch test's secret: long enough\n").unwrap();
    let scratch = dir.join("tmp");
    std::fs::create_dir_all(&scratch).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_runner"));
    cmd.arg("grade")
        .arg("--batch")
        .arg(dir.join("class"))
        .arg("--rubric")
        .arg(rubric(dir))
        .arg("--secret-file")
        .arg(&secret)
        .arg("--out")
        .arg(dir.join("out"))
        .arg("--allow-unconfined")
        .args(extra)
        // The grader's scratch folders go here, where the test can see what is left.
        .env("TMPDIR", &scratch)
        .env("CUDA_VISIBLE_DEVICES", "");
    cmd
}

fn graded(out: &Path, students: &[&str]) -> Vec<String> {
    students
        .iter()
        .filter(|s| out.join(s).join("grade.json").is_file())
        .map(|s| s.to_string())
        .collect()
}

#[test]
fn ctrl_c_keeps_finished_grades_cleans_up_and_resume_grades_the_rest() {
    let d = tmp("interrupt");
    let students = ["ann", "ben", "cat"];
    class(&d, &students);
    let out = d.join("out");
    let mut child = batch(&d, &["--jobs", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first grade, then interrupt while the second student grades.
    let start = Instant::now();
    while graded(&out, &students).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no grade in 300 s"
        );
        assert!(child.try_wait().unwrap().is_none(), "the batch ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: a signal to our own child, by its id.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let o = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted: "), "{stderr}");
    let resume = stderr
        .lines()
        .find_map(|l| l.strip_prefix("resume with: "))
        .unwrap_or_else(|| panic!("no resume command: {stderr}"));
    assert!(resume.ends_with(" --resume"), "{resume}");
    // Every finished grade stayed (whole), nothing unfinished was written, no summary yet.
    let kept = graded(&out, &students);
    assert!(!kept.is_empty() && kept.len() < students.len(), "{kept:?}");
    let first = std::fs::read(out.join(&kept[0]).join("grade.json")).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&first).unwrap();
    assert_eq!(v["score"], v["max_score"], "{v:#}");
    assert!(!out.join("summary.csv").exists());
    // No scratch folder of the grading is left.
    let left: Vec<_> = std::fs::read_dir(d.join("tmp"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "scratch left: {left:?}");

    // Resume: the finished students are kept as they were; only the others are graded.
    let o = batch(&d, &["--jobs", "2", "--resume"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "resume: {} students already graded (kept), {} to grade",
            kept.len(),
            students.len() - kept.len()
        )),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(out.join(&kept[0]).join("grade.json")).unwrap(),
        first,
        "a kept grade is not rewritten"
    );
    assert_eq!(graded(&out, &students).len(), students.len());
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    for s in students {
        assert!(summary.contains(s), "{summary}");
    }
    let _ = std::fs::remove_dir_all(&d);
}
