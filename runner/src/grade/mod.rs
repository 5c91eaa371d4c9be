//! `runner grade`: grade student kernels against a rubric, in isolated child processes, with
//! hidden tests, integrity checks on every launch and timing that cannot be gamed.
//!
//! - [`rubric`]: the rubric file; [`policy`]: what a submission's text may contain;
//!   [`seeds`]: hidden seeds from the instructor's secret.
//! - [`sandbox`]: child processes (own process group, cleared environment, wall-clock kill);
//!   [`job`]: what passes between grader and child; [`worker`]: the child (`grade-worker`).
//! - [`integrity`]: guards, input checks, what a wrong output is; [`submission`]: one submission;
//!   [`batch`]: a class, over several GPUs or shards; [`report`]: grade.json, Gradescope,
//!   summaries; [`selftest`]: the grader graded.

pub mod batch;
pub mod integrity;
pub mod job;
pub mod policy;
pub mod report;
pub mod rubric;
pub mod sandbox;
pub mod seeds;
pub mod selftest;
pub mod submission;
pub mod worker;

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct GradeArgs {
    #[command(subcommand)]
    pub sub: Option<GradeSub>,
    /// A student's kernel file, or a folder holding one.
    #[arg(value_name = "SUBMISSION")]
    pub submission: Option<PathBuf>,
    /// The rubric (TOML): the step and architecture, the tests, the limits.
    #[arg(long, value_name = "TOML")]
    pub rubric: Option<PathBuf>,
    /// Write grade.json (and with --gradescope results.json) here; a batch writes one folder per
    /// student plus summary.csv and summary.md.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Also write Gradescope's results.json.
    #[arg(long)]
    pub gradescope: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Grade every subfolder of DIR (one per student).
    #[arg(long, value_name = "DIR", conflicts_with = "submission")]
    pub batch: Option<PathBuf>,
    /// The student's name (default: the submission's file or folder name).
    #[arg(long)]
    pub student: Option<String>,
    /// The instructor's secret for hidden tests (else the WORKBOOK_GRADE_SECRET variable).
    #[arg(long, value_name = "FILE")]
    pub secret_file: Option<PathBuf>,
    /// Regrade with the seeds recorded in an earlier grade.json (no secret needed).
    #[arg(long, value_name = "GRADE_JSON")]
    pub replay: Option<PathBuf>,
    /// GPUs to grade on, one submission per GPU at a time (default: WORKBOOK_DEVICE or 0).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub gpus: Vec<usize>,
    /// Grade only shard I of N (0 <= I < N) of a batch; `runner grade merge` joins the shards.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<String>,
    /// Grade the stock kernels, seeded bugs and the cheat suite, and check each outcome.
    #[arg(long, conflicts_with_all = ["submission", "batch", "rubric"])]
    pub selftest: bool,
    /// Keep the child processes' scratch folders (jobs, logs, cubins).
    #[arg(long)]
    pub keep_scratch: bool,
}

#[derive(clap::Subcommand)]
pub enum GradeSub {
    /// Join the grade.json files of several output folders (e.g. one per shard) into one
    /// summary.csv and summary.md.
    Merge {
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

/// `I/N` with 0 <= I < N.
pub fn parse_shard(s: &str) -> Result<(usize, usize)> {
    let parsed = s.split_once('/').and_then(|(i, n)| {
        Some((
            i.trim().parse::<usize>().ok()?,
            n.trim().parse::<usize>().ok()?,
        ))
    });
    match parsed {
        Some((i, n)) if n > 0 && i < n => Ok((i, n)),
        _ => bail!("--shard takes I/N with 0 <= I < N, e.g. 0/4 (got {s:?})"),
    }
}

pub fn run(args: GradeArgs) -> Result<ExitCode> {
    if let Some(GradeSub::Merge { dirs, out }) = &args.sub {
        let reports = report::merge(dirs, out)?;
        println!("{}", report::summary_md(&reports));
        println!("merged {} students into {}", reports.len(), out.display());
        return Ok(ExitCode::SUCCESS);
    }
    if args.selftest {
        let out = args
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from("grade-selftest"));
        return selftest::run(&out, &args.gpus, args.keep_scratch);
    }
    let rubric_path = args
        .rubric
        .clone()
        .context("--rubric TOML is required (see rubrics/ for examples)")?;
    let shard = args.shard.as_deref().map(parse_shard).transpose()?;
    if let Some(dir) = &args.batch {
        let out = args
            .out
            .clone()
            .context("--batch needs --out DIR for the reports and the summary")?;
        if args.student.is_some() || args.replay.is_some() {
            bail!("--student and --replay grade one submission, not a --batch");
        }
        let grader = batch::grader_for(
            rubric::Rubric::load(&rubric_path)?,
            &rubric_path,
            args.secret_file.as_deref(),
            None,
            std::slice::from_ref(dir),
            args.keep_scratch,
        )?;
        let subs = batch::class(dir, shard)?;
        let reports = batch::grade_all(&grader, subs, &args.gpus, &out, args.gradescope, true)?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&reports)?);
        } else {
            println!("{}", report::summary_md(&reports));
            println!(
                "{} submissions graded: {}",
                reports.len(),
                out.join("summary.csv").display()
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    if shard.is_some() {
        bail!("--shard splits a --batch");
    }
    let path = args.submission.clone().context(
        "give a SUBMISSION (a kernel file or a folder), --batch DIR, --selftest or `merge`",
    )?;
    if !path.exists() {
        bail!("{} does not exist", path.display());
    }
    let (replay_student, replay) = match &args.replay {
        Some(p) => {
            let (s, r) = submission::load_replay(p)?;
            (Some(s), Some(r))
        }
        None => (None, None),
    };
    let student = args
        .student
        .clone()
        .or(replay_student)
        .or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "student".into());
    let grader = batch::grader_for(
        rubric::Rubric::load(&rubric_path)?,
        &rubric_path,
        args.secret_file.as_deref(),
        replay,
        std::slice::from_ref(&path),
        args.keep_scratch,
    )?;
    let sub = submission::Submission { student, path };
    let reports = batch::grade_all(
        &grader,
        vec![sub],
        &args.gpus,
        args.out.as_deref().unwrap_or(std::path::Path::new("")),
        args.gradescope,
        false,
    )?;
    let r = &reports[0];
    if let Some(out) = &args.out {
        r.write(out, args.gradescope)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(r)?);
    } else {
        print!("{}", r.text());
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse() {
        assert_eq!(parse_shard("0/4").unwrap(), (0, 4));
        assert_eq!(parse_shard(" 3 / 4 ").unwrap(), (3, 4));
        for bad in ["4/4", "1", "a/b", "0/0", "-1/2"] {
            assert!(parse_shard(bad).is_err(), "{bad}");
        }
    }
}
