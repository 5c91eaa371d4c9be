//! The pool of children that `runner check` and `runner exercise --timings` run: `runner`
//! itself, once per case, in the grader's sandbox (own process group, cleared environment,
//! wall-clock kill), `jobs` at a time on each GPU of the pool ([`default_gpus`], which the grader
//! shares). A child's verdict is its exit status, by the one contract ([`Verdict`]); what it
//! printed is kept for the log ([`write_log`]), never parsed for the verdict.
use crate::sandbox::{self, ChildSpec};
use anyhow::{anyhow, bail, Context, Result};
use common::gpu::{self, GpuStatus};
use common::verdict::Verdict;
use std::collections::VecDeque;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// One child: `runner ARGS`, killed at `limit`.
#[derive(Debug, Clone)]
pub struct Child {
    pub args: Vec<String>,
    pub limit: Duration,
}

/// How a child ended.
#[derive(Debug, Clone)]
pub struct Ran {
    pub verdict: Verdict,
    /// Its exit code; 124 for one killed at its limit, 128 + N for one killed by signal N.
    pub exit_code: i32,
    pub seconds: f64,
    pub stdout: String,
    pub stderr: String,
}

/// Run every child, `jobs` at a time on each of `gpus` (`WORKBOOK_DEVICE`), and return how each
/// ended, in the order given. `done` is called as each finishes (a progress bar).
pub fn run_all(
    children: Vec<Child>,
    gpus: &[usize],
    jobs: usize,
    done: &(dyn Fn(usize, &Ran) + Sync),
) -> Result<Vec<Ran>> {
    let program = std::env::current_exe()?;
    let scratch = std::env::temp_dir().join(format!("workbook-check-{}", std::process::id()));
    let total = children.len();
    let queue = Arc::new(Mutex::new(
        children.into_iter().enumerate().collect::<VecDeque<_>>(),
    ));
    let (tx, rx) = mpsc::channel::<(usize, Result<Ran>)>();
    std::thread::scope(|s| {
        for &device in gpus {
            for slot in 0..jobs.max(1) {
                let (queue, tx, program, scratch) =
                    (queue.clone(), tx.clone(), program.clone(), scratch.clone());
                s.spawn(move || {
                    let cwd = scratch.join(format!("gpu{device}-{slot}"));
                    while let Some((i, child)) = queue.lock().map_or(None, |mut q| q.pop_front()) {
                        let r = run_one(&program, &cwd, device, &child);
                        if tx.send((i, r)).is_err() {
                            break;
                        }
                    }
                    let _ = std::fs::remove_dir_all(&cwd);
                });
            }
        }
        drop(tx);
    });
    let _ = std::fs::remove_dir_all(&scratch);
    let mut out: Vec<Option<Ran>> = vec![None; total];
    for (i, r) in rx {
        let r = r?;
        done(i, &r);
        out[i] = Some(r);
    }
    out.into_iter()
        .enumerate()
        .map(|(i, r)| r.ok_or_else(|| anyhow!("case {i} never ran")))
        .collect()
}

fn run_one(program: &Path, cwd: &Path, device: usize, child: &Child) -> Result<Ran> {
    let mut env = vec![("WORKBOOK_DEVICE".to_string(), device.to_string())];
    // The child runs in a scratch folder: it compiles with this checkout's kernels and headers,
    // not with whatever it would find (or not) from there.
    if let Some(root) = common::project::root() {
        env.push((
            common::project::ROOT_ENV.to_string(),
            root.display().to_string(),
        ));
    }
    let o = sandbox::run(&ChildSpec {
        program: program.to_path_buf(),
        args: child.args.iter().map(Into::into).collect(),
        cwd: cwd.to_path_buf(),
        env,
        limit: child.limit,
        log_bytes: 1 << 20,
        stdin: Vec::new(),
        // A GPU child: no address-space limit (the CUDA driver reserves terabytes of it).
        rlimits: sandbox::Rlimits::for_limit(child.limit, None),
    })?;
    let (verdict, exit_code) = o.exit.verdict();
    Ok(Ran {
        verdict,
        exit_code,
        seconds: o.elapsed.as_secs_f64(),
        stdout: o.stdout,
        stderr: o.stderr,
    })
}

/// The GPUs of a pool: those given (`--gpus`), else `WORKBOOK_DEVICE`, else GPU 0. The grader,
/// `runner check` and the exercises' timings share it.
pub fn default_gpus(gpus: &[usize]) -> Vec<usize> {
    if gpus.is_empty() {
        vec![std::env::var("WORKBOOK_DEVICE")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)]
    } else {
        gpus.to_vec()
    }
}

/// The checks run sm_90a code on the GPU itself (the twins natively, the Blackwell kernels
/// under the emulation): without such a GPU a `runner step` child only reports its builds and
/// exits 0, which must not pass for a verified case (nor a partial exercise for a timed one).
/// `what` is the command, for the error.
pub fn require_hopper(what: &str) -> Result<()> {
    match gpu::open() {
        GpuStatus::Present(g) if g.info.compute_capability == (9, 0) => Ok(()),
        GpuStatus::Present(g) => bail!(
            "{what} runs sm_90a kernels on an H100 or H200; this GPU is a {} ({})",
            g.info.name,
            g.info.sm()
        ),
        GpuStatus::Absent(why) => bail!("{what} needs a GPU: {why}"),
    }
}

/// Each case's name, verdict and errors, for the log beside the results file.
pub fn write_log(path: &Path, names: &[String], ran: &[Ran]) -> Result<()> {
    let mut log = String::new();
    for (name, r) in names.iter().zip(ran) {
        log.push_str(&format!(
            "== {name}: {} (exit {}, {:.1} s)\n{}\n",
            r.verdict,
            r.exit_code,
            r.seconds,
            sandbox::truncate_log(r.stderr.trim_end(), 4096)
        ));
    }
    // The log is written first: its folder (`--out`) may not exist yet.
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(path, log).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Exit;

    #[test]
    fn a_childs_verdict_is_its_exit_status() {
        assert_eq!(Exit::Code(0).verdict(), (Verdict::Verified, 0));
        assert_eq!(Exit::Code(1).verdict(), (Verdict::Failed, 1));
        assert_eq!(Exit::Code(2).verdict(), (Verdict::Error, 2));
        assert_eq!(Exit::Code(124).verdict(), (Verdict::Hang, 124));
        assert_eq!(Exit::TimedOut.verdict(), (Verdict::Hang, 124));
        assert_eq!(Exit::Signal(11).verdict(), (Verdict::Error, 139));
    }

    #[test]
    fn children_run_in_order_of_the_list_whatever_order_they_end_in() {
        // The runner's own `--version` and a bad subcommand: no GPU needed. Under `cargo test`
        // the current executable is the test binary, which takes other arguments: a filter
        // that matches no test exits 0, an unknown flag exits non-zero.
        let kids = vec![
            Child {
                args: vec!["--exact".into(), "no-such-test".into()],
                limit: Duration::from_secs(60),
            },
            Child {
                args: vec!["--no-such-flag".into()],
                limit: Duration::from_secs(60),
            },
        ];
        let seen = Mutex::new(0);
        let ran = run_all(kids, &[0], 2, &|_, _| *seen.lock().unwrap() += 1).unwrap();
        assert_eq!(*seen.lock().unwrap(), 2);
        assert_eq!(ran[0].verdict, Verdict::Verified, "{}", ran[0].stderr);
        assert_ne!(ran[1].verdict, Verdict::Verified);
    }
}
