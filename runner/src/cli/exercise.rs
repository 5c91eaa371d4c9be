//! `runner exercise N.M`: the check a book exercise names (the checks are in `exercise`).

use crate::outdir::OutDir;
use anyhow::{anyhow, Result};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 every check passed; 1 a check failed; 2 an error (e.g. no such exercise); 3 the check ran only in part (a kernel compiled but could not run here: no GPU). With --timings: 0 every timed exercise passed and was timed, 1 not, 2 an error (no H100/H200)."
)]
pub struct Args {
    /// The exercise, e.g. 0.1 (step 0, exercise 1); without one (or with `--list`), the list
    /// of exercises.
    #[arg(value_name = "N.M")]
    id: Option<String>,
    /// Check this kernel file (your edited copy) instead of the solution in
    /// exercises/solutions.toml.
    #[arg(long, value_name = "FILE")]
    kernel: Option<PathBuf>,
    /// In exercise 2.1, whose timed variant edits the Hopper twin: your edited copy of the twin
    /// (kernel_sm90.cu), timed against the stock twin instead of the committed edit (0.1, 1.2
    /// and 6.2 time parameter changes of the stock twin: there it is not used).
    #[arg(long, value_name = "FILE")]
    twin: Option<PathBuf>,
    /// Your prediction for a timed exercise, recorded before the GPU answers: the variant
    /// against the stock twin (asked on a terminal when not given).
    #[arg(long, value_name = "WHICH")]
    predict: Option<crate::bench::measure::Verdict>,
    /// Write the solution's kernel to FILE instead of checking. FILE must be new (or give
    /// --force); a file git tracks (a kernel of the workbook) is always refused.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["kernel", "json"])]
    write: Option<PathBuf>,
    /// With --write: overwrite FILE if it exists (never a file git tracks).
    #[arg(long, requires = "write")]
    force: bool,
    /// List the exercises (with --json: one object {"schema", "runner", "exercises": [...]}).
    #[arg(long, conflicts_with_all = ["kernel", "twin", "predict", "write"])]
    list: bool,
    /// On an H100/H200: run every exercise timed on the Hopper twin (0.1, 1.2, 2.1, 6.2), each
    /// as `runner exercise N.M --json`, and write them as one results file,
    /// exercises-<gpu>-<date>.json (kind exercise-timings), in --out.
    #[arg(long, conflicts_with_all = ["id", "kernel", "twin", "predict", "write", "list", "json"])]
    timings: bool,
    /// With --timings: the folder of the results file (default: assets/results).
    #[arg(long, value_name = "DIR", requires = "timings")]
    out: Option<PathBuf>,
    /// Print one JSON object {"schema", "runner", "exercise", "checks": [{status, detail}], "result":
    /// pass|fail|partial}, e.g. to collect a class's checks.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    device: super::DeviceArg,
}

pub fn run(a: Args) -> Result<ExitCode> {
    a.device.apply();
    if a.list && a.id.is_some() {
        eprintln!("warning: --list lists every exercise: the exercise given is ignored");
    }
    // `runner exercise` alone is a student asking what there is: the list, not a usage error.
    let bare = a.id.is_none()
        && !a.timings
        && a.kernel.is_none()
        && a.twin.is_none()
        && a.predict.is_none()
        && a.write.is_none();
    if a.list || bare {
        crate::exercise::list(a.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    if a.timings {
        let out = match a.out {
            // A folder of the user's holding other files is refused, never overwritten.
            // Checked here, made once the GPU is found.
            Some(out) => {
                OutDir::claim_own(&out, "--out", "the timings write their results there")?;
                out
            }
            None => common::toolkit::project_root().join("assets/results"),
        };
        return Ok(crate::exercise::timings(&out)?.into());
    }
    let id =
        a.id.ok_or_else(|| anyhow!("give an exercise, e.g. 0.1 (`runner exercise` lists them)"))?;
    crate::exercise::run(
        &id,
        &crate::exercise::Options {
            kernel: a.kernel.as_deref(),
            twin: a.twin.as_deref(),
            predict: a.predict,
            write: a.write.as_deref(),
            force: a.force,
            json: a.json,
        },
    )
}
