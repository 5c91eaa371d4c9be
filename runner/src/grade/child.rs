//! The grading child (`runner grade-worker --phase P`), from its start to its phase: what the
//! grader's own code needs from outside first (NVRTC; the GPU, described, and cuBLAS; CUPTI for a
//! measuring child), then the confinement ([`super::confine`]), and only then the job, with the
//! submission's text, read from stdin. The phases themselves: [`super::worker`] (probe, compile,
//! run), [`super::measure`] and [`super::simulated`].

use super::confine::Needs;
use super::job::{Job, Phase};
use super::worker::{compile_phase, env_info, open_gpu, probe, run_phase};
use anyhow::{bail, Context, Result};
use common::cublas::Blas;

/// The grading child: `phase` in the current folder (its scratch folder), confined unless `confined`
/// is false (the instructor's `--allow-unconfined` on a kernel without Landlock).
///
/// Order matters: first what the grader's own code needs from outside (NVRTC loaded; the GPU
/// opened, described and cuBLAS started), then the confinement, and only then the job, with the
/// submission's text, read from stdin.
pub fn main(phase: Phase, confined: bool) -> Result<()> {
    // The workbook headers built into this runner, never files on disk (which the confined
    // child may not read, and which are not what the instructor's grader was built with).
    if !common::project::use_built_in() {
        anyhow::bail!(
            "internal: the grading child looked up a checkout before choosing its headers"
        );
    }
    let dir = std::env::current_dir().context("the grading child has no working folder")?;
    let confine = |needs| -> Result<()> {
        if confined {
            super::confine::confine(&dir, needs).context("cannot confine the grading child")?;
        }
        Ok(())
    };
    match phase {
        Phase::Compile => {
            common::compile::nvrtc_version()?;
            confine(Needs::Compiler)?;
            let job = read_job(phase)?;
            compile_phase(&job, &dir)
        }
        Phase::Simulate => {
            // No GPU, no toolkit: the PTX the compile child left here, and the simulator.
            confine(Needs::Cpu)?;
            let job = read_job(phase)?;
            super::simulated::run(&job, &dir)
        }
        Phase::Measure => {
            let gpu = open_gpu()?;
            // CUPTI is loaded by the grader's code, before the confinement (which then allows
            // its folder, for the libraries CUPTI opens itself), and before any kernel runs.
            let cupti = super::measure::open_cupti(&gpu);
            let env = env_info(&gpu);
            let blas = Blas::new(&gpu)?;
            common::compile::nvrtc_version()?;
            confine(Needs::Measure)?;
            let job = read_job(phase)?;
            super::measure::run(&job, &dir, &gpu, &blas, env, cupti)
        }
        Phase::Probe | Phase::Run => {
            let gpu = open_gpu()?;
            let env = env_info(&gpu);
            let blas = Blas::new(&gpu)?;
            common::compile::nvrtc_version()?;
            confine(Needs::Gpu)?;
            let job = read_job(phase)?;
            if phase == Phase::Probe {
                probe(&dir, &gpu, &blas, env)
            } else {
                run_phase(&job, &dir, &gpu, &blas, env)
            }
        }
    }
}

fn read_job(phase: Phase) -> Result<Job> {
    let job = Job::read_from(std::io::stdin().lock())?;
    if job.phase != phase {
        bail!(
            "the job is for the {:?} phase, the worker was started for {phase:?}",
            job.phase
        );
    }
    Ok(job)
}
