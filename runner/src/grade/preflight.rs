//! What `runner grade` checks before it installs, compiles or probes anything: flags that
//! cannot apply to this grading (`--gpus` where no GPU is used), a grading that needs a GPU on
//! a machine without a CUDA driver (said at once, before any download), and a `--replay` of a
//! report made for another rubric or another file.

use super::report::GradeReport;
use super::rubric::Rubric;
use super::submission::{read_source, Submission};
use anyhow::{bail, Result};
use std::path::Path;

/// What a grading uses, as the flags decide it (with the rubric's architecture).
pub struct Mode {
    /// `--compile-only`: a pre-screen (no GPU).
    pub compile_only: bool,
    /// `--on-gpu` was given.
    pub on_gpu: bool,
    /// The options, which say with the rubric whether the simulator grades.
    opts: super::batch::Options,
}

impl From<super::batch::Options> for Mode {
    fn from(opts: super::batch::Options) -> Mode {
        Mode {
            compile_only: opts.compile_only,
            on_gpu: opts.on_gpu,
            opts,
        }
    }
}

impl Mode {
    fn uses_gpu(&self, rubric: &Rubric) -> bool {
        !self.opts.simulate(rubric) && !self.compile_only
    }

    /// Why this grading opens no GPU, or `None` where it does.
    fn no_gpu_because(&self, rubric: &Rubric) -> Option<String> {
        if self.compile_only {
            Some("--compile-only compiles on the CPU".into())
        } else if self.opts.simulate(rubric) {
            Some(format!(
                "the {} rubric {:?} is graded on the PTX simulator, on the CPU (--on-gpu grades it under the emulation on a GPU)",
                rubric.arch.sm(),
                rubric.name
            ))
        } else {
            None
        }
    }
}

/// Flags that cannot apply to this grading are refused, naming why, rather than ignored:
/// `--gpus` where no GPU is used, `--on-gpu` where it changes nothing.
pub fn check_flags(gpus: &[usize], mode: &Mode, rubric: &Rubric) -> Result<()> {
    if mode.on_gpu && mode.compile_only {
        bail!(
            "--on-gpu grades the tests on a GPU, and --compile-only runs no test: give one of them"
        );
    }
    if mode.on_gpu && rubric.arch != common::step::Arch::Blackwell {
        bail!(
            "--on-gpu applies to a Blackwell (sm_100a) rubric, which is otherwise graded on the simulator; {:?} is a {} rubric, always graded on a GPU: leave --on-gpu out",
            rubric.name,
            rubric.arch.sm()
        );
    }
    if gpus.is_empty() {
        return Ok(());
    }
    if let Some(why) = mode.no_gpu_because(rubric) {
        bail!("--gpus picks the GPUs a grading runs on, and this one uses none: {why}; leave --gpus out");
    }
    Ok(())
}

/// A grading that needs a GPU, on a machine without a CUDA driver: refused at once, before the
/// toolkit, CUPTI or anything else is installed, naming the way that needs none.
pub fn require_gpu(mode: &Mode, rubric: &Rubric) -> Result<()> {
    if !mode.uses_gpu(rubric) || common::gpu::driver_present() {
        return Ok(());
    }
    let instead = if mode.on_gpu {
        format!(
            "leave out --on-gpu: the {} rubric is then graded on the PTX simulator, on the CPU",
            rubric.arch.sm()
        )
    } else {
        "a Hopper (sm_90a) rubric runs on an H100/H200 (--compile-only checks and compiles submissions without a GPU)".into()
    };
    bail!(
        "{} needs a GPU, and this machine has no CUDA driver (libcuda.so): {instead}",
        if mode.on_gpu {
            "grade --on-gpu".to_string()
        } else {
            format!("grading the {} rubric {:?}", rubric.arch.sm(), rubric.name)
        }
    )
}

/// A `--replay` of `recorded` (read from `path`) for `sub` under `rubric`: refused where the
/// rubric lacks a test's recorded seeds (another rubric, or one whose tests changed); a warning
/// for each other difference: a rubric changed in another way, another kernel file than the
/// recorded one, or another student's name on the result. Returns the warnings, one line each.
pub fn check_replay(
    path: &Path,
    recorded: &GradeReport,
    rubric: &Rubric,
    sub: &Submission,
) -> Result<Vec<String>> {
    let shown = path.display();
    let then = &recorded.rubric;
    if then.step != rubric.step || then.arch != rubric.arch.sm() {
        bail!(
            "{shown} was graded with rubric {:?} (step {}, {}), not {:?} (step {}, {}): a replay regrades with the seeds of the same rubric's tests",
            then.name,
            then.step,
            then.arch,
            rubric.name,
            rubric.step,
            rubric.arch.sm()
        );
    }
    let missing: Vec<String> = rubric
        .tests
        .iter()
        .filter(|t| {
            !recorded
                .tests
                .iter()
                .any(|r| r.name == t.name && r.seeds.sets.len() == t.sets)
        })
        .map(|t| format!("{:?}", t.name))
        .collect();
    if !missing.is_empty() {
        bail!(
            "{shown} records no seeds for test {} of rubric {:?} (or another number of input sets): it was graded with another rubric ({:?}); a replay needs the rubric it recorded",
            missing.join(", "),
            rubric.name,
            then.name
        );
    }
    let mut warnings = Vec::new();
    if then.sha256 != rubric.sha256 {
        warnings.push(format!(
            "{shown} was graded with another version of rubric {:?} (its SHA-256 differs): its tests' seeds are reused by name, under today's points and limits",
            rubric.name
        ));
    }
    if let Ok((_, sha)) = read_source(sub, rubric.limits.source_bytes) {
        if !recorded.source_sha256.is_empty() && sha != recorded.source_sha256 {
            warnings.push(format!(
                "{} is not the kernel {shown} graded (their SHA-256 differ): it is graded with {:?}'s recorded seeds",
                sub.path.display(),
                recorded.student
            ));
        }
    }
    if sub.student != recorded.student {
        warnings.push(format!(
            "the result is reported as {:?}, with the seeds {shown} recorded for {:?}",
            sub.student, recorded.student
        ));
    }
    Ok(warnings)
}
