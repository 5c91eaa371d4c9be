//! Running a submission's work in a child process: its own process group (so a kill reaches
//! everything it started), a cleared environment (no secret can leak through it), its job over
//! a pipe (never a file in its folder), resource limits (CPU time, file size, processes, no core
//! dumps, and address space where the CUDA driver allows one), a wall-clock limit, and logs cut
//! to a size a report can hold. The file-system confinement is the child's own first act
//! ([`crate::grade::confine`]). The grader, `runner check` and the exercises run their children
//! through it.

use anyhow::{Context, Result};
use common::verdict::Verdict;
use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Variables a child may inherit: what finding the toolkit, cuBLAS and the GPU needs. Anything
/// else (the grading secret above all) is dropped.
pub const PASSED_ENV: &[&str] = &[
    "PATH",
    "LD_LIBRARY_PATH",
    "HOME",
    "LANG",
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "CUDA_PATH",
    "CUDA_HOME",
    "WORKBOOK_CUDA",
    "WORKBOOK_CUDA_CACHE",
    "WORKBOOK_PYTHON",
    "WORKBOOK_NO_SITE_PYTHON",
];

/// The runner restores SIGPIPE's default action (a closed stdout ends it quietly), so a write
/// into the stdin of a child that has already exited would kill the grader itself. A write's
/// SIGPIPE goes to the writing thread: blocked there, the write fails with EPIPE instead, and the
/// pending signal ends with the thread.
fn block_sigpipe_in_this_thread() {
    // SAFETY: sigemptyset/sigaddset initialise a local set; pthread_sigmask changes only the
    // calling thread's mask and accepts a null old-set pointer.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// One child to run.
pub struct ChildSpec {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Its working directory: a scratch folder of its own.
    pub cwd: PathBuf,
    /// Set on top of the passed variables (e.g. `WORKBOOK_DEVICE`).
    pub env: Vec<(String, String)>,
    pub limit: Duration,
    pub log_bytes: usize,
    /// Written to the child's stdin, which is then closed: the job.
    pub stdin: Vec<u8>,
    pub rlimits: Rlimits,
}

/// Resource limits set between `fork` and `exec` (plain `setrlimit` calls, async-signal-safe).
#[derive(Debug, Clone, Copy)]
pub struct Rlimits {
    /// CPU seconds of all its threads together (`RLIMIT_CPU`).
    pub cpu_seconds: u64,
    /// The largest file it may write (`RLIMIT_FSIZE`): a printf flood fills its log to this
    /// size and no further (`SIGXFSZ` is ignored, so the write fails instead of the process).
    pub file_bytes: u64,
    /// Processes and threads of the user (`RLIMIT_NPROC`; not enforced for root).
    pub processes: u64,
    /// Address space (`RLIMIT_AS`), for a child that does not start the CUDA driver: the driver
    /// reserves terabytes of virtual addresses for unified memory, so a GPU child has none.
    pub address_space: Option<u64>,
}

impl Rlimits {
    /// Limits for a child with wall-clock limit `limit`: CPU time for every core over it.
    pub fn for_limit(limit: Duration, address_space: Option<u64>) -> Rlimits {
        let cores = std::thread::available_parallelism().map_or(16, |n| n.get() as u64);
        Rlimits {
            cpu_seconds: limit.as_secs().max(1) * cores + 10,
            file_bytes: 256 << 20,
            processes: 4096,
            address_space,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// Killed (with its whole process group) at the wall-clock limit.
    TimedOut,
}

impl Exit {
    /// The verdict of this end by the exit-code contract, and the code a shell would show:
    /// killed at the limit is a hang (124); killed by signal N an error (a crash, 128 + N).
    pub fn verdict(&self) -> (Verdict, i32) {
        match *self {
            Exit::Code(c) => (Verdict::from_code(c), c),
            Exit::TimedOut => (Verdict::Hang, i32::from(Verdict::Hang.code())),
            Exit::Signal(s) => (Verdict::Error, 128 + s),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub exit: Exit,
    pub elapsed: Duration,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    pub fn describe(&self) -> String {
        match self.exit {
            Exit::Code(c) => format!("exited with code {c}"),
            Exit::Signal(s) => format!("killed by signal {s}"),
            Exit::TimedOut => format!(
                "ran past its limit of {:.0} s and was killed",
                self.elapsed.as_secs_f64()
            ),
        }
    }
}

/// What a cut log says where it was cut (the number of bytes and the cap around it).
pub const CUT_NOTE: &str = " bytes cut: logs are capped at ";

/// `text` cut to at most about `limit` bytes: its head and tail, with what was cut in between.
pub fn truncate_log(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_string();
    }
    let keep = limit / 2;
    let mut head_end = keep;
    while !text.is_char_boundary(head_end) {
        head_end -= 1;
    }
    let mut tail_start = text.len() - keep;
    while !text.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    format!(
        "{}\n[... {}{CUT_NOTE}{limit} bytes ...]\n{}",
        &text[..head_end],
        tail_start - head_end,
        &text[tail_start..]
    )
}

fn read_log(path: &Path, limit: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => truncate_log(&String::from_utf8_lossy(&bytes), limit),
        Err(_) => String::new(),
    }
}

/// Set (by a caller's SIGINT handler, `runner grade`'s batch): every child [`run`] is waiting on
/// is killed, with its group, and `run` returns an error, so the caller can stop at once.
static CANCEL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Ask every running child to stop (async-signal-safe: one atomic store).
pub fn cancel() {
    CANCEL.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Whether [`cancel`] was called.
pub fn cancelled() -> bool {
    CANCEL.load(std::sync::atomic::Ordering::SeqCst)
}

/// Kill every process of group `pgid`.
fn kill_group(pgid: i32) {
    // SAFETY: plain syscall; a group that is already gone gives ESRCH, which is fine.
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
}

/// Run the child to completion or to its limit.
pub fn run(spec: &ChildSpec) -> Result<Outcome> {
    std::fs::create_dir_all(&spec.cwd)
        .with_context(|| format!("cannot create {}", spec.cwd.display()))?;
    let out_path = spec.cwd.join("child.stdout");
    let err_path = spec.cwd.join("child.stderr");
    let stdout = std::fs::File::create(&out_path)
        .with_context(|| format!("cannot create {}", out_path.display()))?;
    let stderr = std::fs::File::create(&err_path)
        .with_context(|| format!("cannot create {}", err_path.display()))?;
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0);
    for var in PASSED_ENV {
        if let Some(v) = std::env::var_os(var) {
            cmd.env(var, v);
        }
    }
    cmd.env("TMPDIR", &spec.cwd);
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    // A child of a child (an exercise's run under `runner exercise --timings`) cannot raise a
    // hard limit its parent set: each limit is at most the one this process already has
    // (setrlimit above it fails with EPERM, and the child would not start at all).
    let mut limits = spec.rlimits;
    {
        use rlimit::Resource;
        let cap =
            |r: Resource, want: u64| -> u64 { r.get().map_or(want, |(_, hard)| want.min(hard)) };
        limits.cpu_seconds = cap(Resource::CPU, limits.cpu_seconds);
        limits.file_bytes = cap(Resource::FSIZE, limits.file_bytes);
        limits.processes = cap(Resource::NPROC, limits.processes);
        limits.address_space = limits.address_space.map(|b| cap(Resource::AS, b));
    }
    // SAFETY: only async-signal-safe calls (setrlimit, signal, prctl) between fork and exec;
    // `rlimit::setrlimit` is a plain `setrlimit` call.
    unsafe {
        cmd.pre_exec(move || {
            use rlimit::Resource;
            rlimit::setrlimit(Resource::CORE, 0, 0)?;
            rlimit::setrlimit(Resource::CPU, limits.cpu_seconds, limits.cpu_seconds)?;
            rlimit::setrlimit(Resource::FSIZE, limits.file_bytes, limits.file_bytes)?;
            rlimit::setrlimit(Resource::NPROC, limits.processes, limits.processes)?;
            if let Some(bytes) = limits.address_space {
                rlimit::setrlimit(Resource::AS, bytes, bytes)?;
            }
            // A file at its size limit fails the write; it does not kill the process.
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            // Die with the grader rather than run on unsupervised.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot start {}", spec.program.display()))?;
    let pgid = child.id() as i32;
    // The job goes over the pipe from a thread of its own: a child that never reads its stdin
    // must not stall the grader's clock. When the child ends, the write ends too (EPIPE).
    let feeder = child.stdin.take().map(|mut pipe| {
        let bytes = spec.stdin.clone();
        std::thread::spawn(move || {
            use std::io::Write;
            block_sigpipe_in_this_thread();
            let _ = pipe.write_all(&bytes);
        })
    });
    let exit = loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                break match (status.code(), status.signal()) {
                    (Some(c), _) => Exit::Code(c),
                    (None, Some(s)) => Exit::Signal(s),
                    (None, None) => Exit::Code(-1),
                };
            }
            Ok(None) if start.elapsed() >= spec.limit => {
                kill_group(pgid);
                let _ = child.wait();
                break Exit::TimedOut;
            }
            Ok(None) if cancelled() => {
                kill_group(pgid);
                let _ = child.wait();
                anyhow::bail!("interrupted: the grading child was stopped");
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => {
                kill_group(pgid);
                let _ = child.wait();
                return Err(e).context("waiting for the grading child");
            }
        }
    };
    // Anything the child left behind in its group goes too.
    kill_group(pgid);
    if let Some(f) = feeder {
        let _ = f.join();
    }
    Ok(Outcome {
        exit,
        elapsed: start.elapsed(),
        stdout: read_log(&out_path, spec.log_bytes),
        stderr: read_log(&err_path, spec.log_bytes),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, limit_ms: u64, dir: &str) -> ChildSpec {
        ChildSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: std::env::temp_dir().join(format!("grade-sandbox-{}-{dir}", std::process::id())),
            env: vec![("WORKBOOK_DEVICE".into(), "3".into())],
            limit: Duration::from_millis(limit_ms),
            log_bytes: 64,
            stdin: Vec::new(),
            rlimits: Rlimits::for_limit(Duration::from_millis(limit_ms), Some(1 << 30)),
        }
    }

    /// [`run`], then the child's folder removed: the tests leave nothing in the temp folder.
    fn run_clean(spec: &ChildSpec) -> Result<Outcome> {
        let o = run(spec);
        let _ = std::fs::remove_dir_all(&spec.cwd);
        o
    }

    #[test]
    fn a_sleeping_child_and_its_children_are_killed_at_the_limit() {
        let marker =
            std::env::temp_dir().join(format!("grade-sandbox-{}-grandchild", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        // The grandchild would write the marker after 2 s if it survived its group's kill.
        let script = format!("(sleep 2; touch {}) & sleep 30", marker.display());
        let o = run_clean(&sh(&script, 300, "sleep")).unwrap();
        assert_eq!(o.exit, Exit::TimedOut);
        assert!(o.elapsed < Duration::from_secs(5), "{:?}", o.elapsed);
        std::thread::sleep(Duration::from_millis(2500));
        assert!(!marker.exists(), "a process of the group outlived the kill");
    }

    #[test]
    fn a_spinning_child_is_killed_too() {
        let o = run_clean(&sh("while :; do :; done", 300, "spin")).unwrap();
        assert_eq!(o.exit, Exit::TimedOut);
        assert!(o.describe().contains("killed"));
    }

    #[test]
    fn the_environment_is_cleared_but_for_what_cuda_needs() {
        std::env::set_var("WORKBOOK_GRADE_SECRET", "must never reach a child");
        let o = run_clean(&sh("env; echo code; exit 3", 5000, "env")).unwrap();
        assert_eq!(o.exit, Exit::Code(3));
        let mut spec = sh("env", 5000, "env2");
        spec.log_bytes = 1 << 16;
        let o = run_clean(&spec).unwrap();
        assert!(!o.stdout.contains("WORKBOOK_GRADE_SECRET"), "{}", o.stdout);
        assert!(o.stdout.contains("WORKBOOK_DEVICE=3"), "{}", o.stdout);
        assert!(o.stdout.contains("TMPDIR="), "{}", o.stdout);
        for line in o.stdout.lines() {
            let name = line.split('=').next().unwrap_or("");
            assert!(
                PASSED_ENV.contains(&name)
                    || ["WORKBOOK_DEVICE", "TMPDIR", "PWD", "SHLVL", "_", "OLDPWD"].contains(&name),
                "unexpected variable {name}"
            );
        }
    }

    #[test]
    fn logs_are_cut_to_the_limit() {
        let o = run_clean(&sh(
            "i=0; while [ $i -lt 200 ]; do echo line$i; i=$((i+1)); done",
            5000,
            "log",
        ))
        .unwrap();
        assert!(o.stdout.len() < 140, "{}", o.stdout.len());
        assert!(o.stdout.contains("capped at 64 bytes"), "{}", o.stdout);
        assert!(o.stdout.starts_with("line0") && o.stdout.contains("bytes cut"));
        assert!(o.stdout.trim_end().ends_with("line199"));
        assert_eq!(truncate_log("short", 64), "short");
        let s = "é".repeat(100);
        assert!(truncate_log(&s, 11).contains("bytes cut"));
    }

    #[test]
    fn the_job_arrives_on_stdin_and_files_stop_at_their_size_limit() {
        let mut spec = sh(
            "cat; head -c 100000 /dev/zero > big; wc -c < big",
            5000,
            "stdin",
        );
        spec.stdin = b"the job\n".to_vec();
        spec.rlimits.file_bytes = 4096;
        spec.log_bytes = 1024;
        let o = run_clean(&spec).unwrap();
        // Not killed by SIGXFSZ: the write failed, the shell went on.
        assert_eq!(o.exit, Exit::Code(0), "{o:?}");
        let mut lines = o.stdout.lines();
        assert_eq!(lines.next(), Some("the job"));
        assert_eq!(lines.next().map(str::trim), Some("4096"));
    }

    #[test]
    fn a_child_that_exits_before_reading_its_job_does_not_kill_the_grader() {
        // As in the runner binary: SIGPIPE at its default action (the test harness ignores it).
        // SAFETY: setting a signal disposition; restored below.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
        let mut spec = sh("exit 3", 5000, "early-exit");
        spec.stdin = vec![b'x'; 4 << 20]; // far more than a pipe holds
        let o = run_clean(&spec);
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        assert_eq!(o.unwrap().exit, Exit::Code(3));
    }

    #[test]
    fn a_crashing_child_reports_its_signal() {
        let o = run_clean(&sh("kill -SEGV $$", 5000, "segv")).unwrap();
        assert_eq!(o.exit, Exit::Signal(libc::SIGSEGV));
    }
}
