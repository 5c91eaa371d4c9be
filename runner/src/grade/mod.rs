//! `runner grade`: grade student kernels against a rubric, in isolated child processes, with
//! hidden tests, integrity checks on every launch and timing that cannot be gamed.
//!
//! - [`rubric`]: the rubric file; [`policy`]: what a submission's text may contain;
//!   [`seeds`]: hidden seeds from the instructor's secret; [`vocab`]: the words every part
//!   shares (a row's kind, a status, a flag).
//! - [`crate::sandbox`] (shared with `runner check`): child processes (own process group,
//!   cleared environment, job over stdin,
//!   rlimits, wall-clock kill); [`confine`]: the children's Landlock confinement;
//!   [`diagnostics`]: what of a compiler log a student may see;
//!   [`protocol`] and [`job`]: what passes between grader and child (names; the job and what
//!   comes back); [`child`]: the child (`grade-worker`), which runs [`worker`]'s phases.
//! - [`integrity`]: guards, input checks, what a wrong output is; [`submission`]: one submission; [`grader`]: grading it, stage by stage; [`child_results`]: what its children
//!   left, read back and scored;
//!   [`batch`]: a class, over several GPUs or shards; [`report`]: grade.json, Gradescope,
//!   summaries; [`selftest`]: the grader graded.
//! - [`technique`]: a rubric's `[[requirements]]`, each decided on the evidence the children
//!   produced and scored by [`scoring`]: the SASS of the launched kernel, from the compile
//!   child's disassembly; [`executed`]: how often it executed them (proof the technique ran),
//!   counted by [`measure`]'s child with CUPTI ([`counts`]); [`trace_facts`]: facts of the
//!   warps' own trace records ([`common::trace_facts`]; Hopper, feedback worth no points), from
//!   the traced launch.
//! - [`simulated`]: a Blackwell rubric's tests and measured launch on the PTX simulator, the
//!   default for `sm_100a` rubrics (the native build, no GPU); `--on-gpu` grades them under the
//!   tcgen05 emulation instead.

pub mod batch;
pub mod child;
pub mod child_results;
pub mod confine;
pub mod counts;
pub mod diagnostics;
pub mod executed;
pub mod grader;
pub mod integrity;
pub mod interrupt;
pub mod job;
pub mod measure;
pub mod policy;
pub mod preflight;
pub mod protocol;
pub mod report;
pub mod resume;
pub mod rubric;
pub mod scoring;
pub mod seeds;
pub mod selftest;
pub mod simulated;
pub mod submission;
pub mod technique;
pub mod trace_facts;
pub mod userfile;
pub mod vocab;
pub mod worker;

use crate::outdir::OutDir;
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
    /// student plus summary.csv and summary.md; --selftest writes its class and reports here
    /// (default: target/grade-selftest in the checkout).
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
    #[arg(long, value_name = "I/N", allow_hyphen_values = true)]
    pub shard: Option<String>,
    /// Grade the stock kernels, seeded bugs and the cheat suite, and check each outcome.
    #[arg(long, conflicts_with_all = ["submission", "batch", "rubric"])]
    pub selftest: bool,
    /// Keep the child processes' scratch folders (logs, cubins, results).
    #[arg(long)]
    pub keep_scratch: bool,
    /// Grade even on a kernel without Landlock, where the children cannot be confined (every
    /// report says so). Without it, such a kernel grades no hidden test.
    #[arg(long)]
    pub allow_unconfined: bool,
    /// Check the submission (one .cu file, the screen) and compile it, in the confined child,
    /// and stop: a pre-screen that needs no GPU and no secret.
    #[arg(long, conflicts_with_all = ["replay", "selftest", "secret_file"])]
    pub compile_only: bool,
    /// Grade the rubric's visible tests alone: no secret needed (a student grading their own
    /// kernel, the workshop's "grade your twin").
    #[arg(long, conflicts_with_all = ["replay", "selftest", "secret_file", "compile_only"])]
    pub public_only: bool,
    /// Gradescope's submission_metadata.json, for the student's identity (default, with
    /// --gradescope: /autograder/submission_metadata.json, where Gradescope puts it, outside the
    /// submission; a file of that name inside the submission is never read).
    #[arg(long, value_name = "JSON", env = METADATA_ENV)]
    pub metadata: Option<PathBuf>,
    /// Testing only: write the simulator's class of 30 (stock, honest variants, three hostile
    /// kernels), its rubric and a secret into DIR, and stop (`scripts/grade-class30.sh`).
    #[arg(long, hide = true, value_name = "DIR", conflicts_with_all = ["selftest", "batch", "submission"])]
    pub write_class30: Option<PathBuf>,
    /// Testing only: skip the include screen, to show the confinement holds on its own.
    #[arg(long, hide = true)]
    pub skip_screen: bool,
    /// Grade N submissions at once where no GPU is used (a Blackwell rubric on the simulator,
    /// --compile-only); default: one per core. On GPUs, --gpus sets how many grade at once.
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Finish an interrupted --batch into the same --out: students whose grade.json there is
    /// complete and graded as this run would grade them are kept, the others graded.
    #[arg(long, requires = "batch")]
    pub resume: bool,
    /// Grade a Blackwell (sm_100a) rubric on the GPU: under the tcgen05 emulation on an
    /// H100/H200. Without it, a Blackwell rubric is graded on the PTX simulator, which runs the
    /// kernel's native sm_100a code on the CPU and needs no GPU.
    #[arg(long, conflicts_with = "selftest")]
    pub on_gpu: bool,
}

/// The student of a Gradescope submission: the ids of its submitters (a group has several),
/// from `submission_metadata.json`. Two students never share a name, so never hidden seeds.
pub fn gradescope_student(metadata: &std::path::Path) -> Result<String> {
    let text = userfile::read_text(
        metadata,
        userfile::MAX_RUBRIC_BYTES,
        "Gradescope's metadata",
    )?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not JSON", metadata.display()))?;
    let mut ids: Vec<String> = v["users"]
        .as_array()
        .map(|users| {
            users
                .iter()
                .filter_map(|u| match &u["id"] {
                    serde_json::Value::Number(n) => Some(n.to_string()),
                    serde_json::Value::String(s) if !s.trim().is_empty() => {
                        Some(s.trim().to_string())
                    }
                    _ => u["email"].as_str().map(str::to_string),
                })
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids.dedup();
    if ids.is_empty() {
        bail!(
            "{} names no submitter (users[].id): give --student NAME",
            metadata.display()
        );
    }
    Ok(format!("gradescope-{}", ids.join("+")))
}

/// Where Gradescope puts a submission's metadata: beside the submission folder
/// (`/autograder/submission`), which is all the student controls.
pub const GRADESCOPE_METADATA: &str = "/autograder/submission_metadata.json";

/// The variable that names another trusted place for the metadata (as `--metadata` does).
pub const METADATA_ENV: &str = "WORKBOOK_GRADESCOPE_METADATA";

/// The student's identity from Gradescope's metadata, read only from a trusted place: `given`
/// (the instructor's `--metadata` or [`METADATA_ENV`]), else, under `--gradescope`,
/// [`GRADESCOPE_METADATA`] where that file exists. A metadata file inside the submission folder
/// is never read: a student who ships one would choose their identity, and with it their
/// hidden seeds. `Ok(None)`: no trusted metadata.
pub fn trusted_student(
    given: Option<&std::path::Path>,
    gradescope: bool,
    submission: &std::path::Path,
) -> Result<Option<String>> {
    let path = match given {
        Some(p) => p.to_path_buf(),
        None if gradescope => {
            let p = PathBuf::from(GRADESCOPE_METADATA);
            if !p.is_file() {
                return Ok(None);
            }
            p
        }
        None => return Ok(None),
    };
    let folder = submission::submission_folder(submission);
    if let (Ok(meta), Some(folder)) = (path.canonicalize(), folder) {
        if meta.starts_with(&folder) {
            bail!(
                "the metadata {} lies inside the submission folder {}, where the student could write it and so choose their identity: give --student NAME, or keep the metadata outside the submission (as Gradescope does)",
                path.display(),
                folder.display()
            );
        }
    }
    gradescope_student(&path).map(Some)
}

#[derive(clap::Subcommand)]
pub enum GradeSub {
    /// Join the grade.json files of several output folders (e.g. one per shard) into one
    /// summary.csv and summary.md.
    Merge {
        /// The output folders to join (each holding <student>/grade.json, e.g. one per shard).
        #[arg(required = true, value_name = "DIR")]
        dirs: Vec<PathBuf>,
        /// Where summary.csv and summary.md of the whole class are written.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

/// A grading stopped by an unusable GPU names the mode that needs none.
fn suggest_compile_only(e: anyhow::Error) -> anyhow::Error {
    let text = format!("{e:#}");
    if text.contains("cannot be used for grading") {
        anyhow::anyhow!("{text} (--compile-only checks and compiles submissions without a GPU)")
    } else {
        e
    }
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
        let dir = OutDir::claim(out, "--out")?;
        for name in report::SUMMARIES {
            dir.fresh(name)?;
        }
        let mut reports = report::gather(dirs)?;
        dir.create()?;
        report::write_summary(dir.path(), &mut reports)?;
        println!("{}", report::summary_md(&reports));
        println!("merged {} students into {}", reports.len(), out.display());
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(dir) = &args.write_class30 {
        OutDir::make_own(dir, "--write-class30", "a class")?;
        let members = selftest::write_sim_class(dir, 30)?;
        for (name, what) in &members {
            println!("{name}\t{what}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.selftest {
        let out = match &args.out {
            Some(out) => OutDir::claim(out, "--out")?,
            None => {
                let out = crate::outdir::default_out("grade-selftest");
                eprintln!(
                    "selftest: writing into {} (--out DIR to choose)",
                    out.display()
                );
                OutDir::runners(&out, "--out")
            }
        };
        return selftest::run(&out, &args.gpus, args.keep_scratch);
    }
    if args.student.as_deref().is_some_and(|s| s.trim().is_empty()) {
        bail!("--student is empty: give the student's name");
    }
    let rubric_path = args
        .rubric
        .clone()
        .context("--rubric TOML is required (see rubrics/ for examples)")?;
    let opts = batch::Options {
        keep_scratch: args.keep_scratch,
        allow_unconfined: args.allow_unconfined,
        compile_only: args.compile_only,
        skip_screen: args.skip_screen,
        on_gpu: args.on_gpu,
        jobs: args.jobs.unwrap_or(0),
    };
    if let Some(n) = args.jobs {
        if n == 0 || n > batch::max_jobs() {
            bail!(
                "--jobs takes 1 to {} (four per core of this machine), got {n}",
                batch::max_jobs()
            );
        }
    }
    let load_rubric = || -> Result<rubric::Rubric> {
        let mut r = rubric::Rubric::load(&rubric_path)?;
        if args.public_only {
            r.tests.retain(|t| !t.hidden());
            if r.tests.is_empty() {
                bail!(
                    "{} has no visible test: --public-only would grade nothing",
                    rubric_path.display()
                );
            }
        }
        Ok(r)
    };
    let shard = args.shard.as_deref().map(parse_shard).transpose()?;
    if let Some(dir) = &args.batch {
        let out = args
            .out
            .clone()
            .context("--batch needs --out DIR for the reports and the summary")?;
        if args.student.is_some() || args.replay.is_some() {
            bail!("--student and --replay grade one submission, not a --batch");
        }
        // The class before the secret and the GPU: a wrong folder is named as such.
        let rubric = load_rubric()?;
        let mode: preflight::Mode = opts.into();
        preflight::check_flags(&args.gpus, &mode, &rubric)?;
        let subs = batch::class(dir, shard)?;
        let out_dir = OutDir::claim(&out, "--out")?;
        if !args.resume {
            // A folder of the user's takes only new names: every report folder and summary.
            for s in &subs {
                out_dir.fresh(submission::report_folder(&s.student))?;
            }
        }
        let grader = batch::grader_for(
            rubric,
            &rubric_path,
            args.secret_file.as_deref(),
            None,
            std::slice::from_ref(dir),
            opts,
        )?;
        let (kept, subs) = if args.resume {
            let (kept, todo) = resume::split(&grader, subs, &out);
            eprintln!(
                "resume: {} students already graded (kept), {} to grade",
                kept.len(),
                todo.len()
            );
            (kept, todo)
        } else {
            (Vec::new(), subs)
        };
        for name in report::SUMMARIES {
            out_dir.fresh(name)?;
        }
        out_dir.create()?;
        interrupt::install();
        let graded =
            batch::grade_batch(&grader, subs, kept, &args.gpus, &out, args.gradescope, true);
        let reports = match graded {
            Err(e) if e.downcast_ref::<interrupt::Interrupted>().is_some() => {
                // The grader's scratch folder goes with it, before the word that it is done.
                drop(grader);
                let argv: Vec<String> = std::env::args().collect();
                eprintln!(
                    "{e}: their grade.json files are in {}; the unfinished students' scratch folders were removed",
                    out.display()
                );
                eprintln!("resume with: {}", interrupt::resume_command(&argv));
                return Ok(ExitCode::from(130));
            }
            other => other.map_err(suggest_compile_only)?,
        };
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
            let (s, r) = grader::load_replay(p)?;
            (Some(s), Some(r))
        }
        None => (None, None),
    };
    // Hidden seeds follow the student's name: under Gradescope every submission folder is
    // called "submission", so the name comes from Gradescope's metadata (from where Gradescope
    // puts it, never from the submission), or --student.
    let from_metadata = if args.metadata.is_some()
        || (args.gradescope && args.student.is_none() && replay_student.is_none())
    {
        trusted_student(args.metadata.as_deref(), args.gradescope, &path)?
    } else {
        None
    };
    if args.gradescope
        && args.student.is_none()
        && replay_student.is_none()
        && from_metadata.is_none()
    {
        let shipped = submission::untrusted_metadata(&path)
            .map(|p| format!("; the submission's own {} is never read", p.display()))
            .unwrap_or_default();
        bail!(
            "--gradescope needs the student's identity: give --student NAME, or grade where Gradescope puts its metadata ({GRADESCOPE_METADATA}; --metadata FILE or {METADATA_ENV} names another place outside the submission){shipped}"
        );
    }
    let student = args
        .student
        .clone()
        .or(replay_student)
        .or(from_metadata)
        .or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "student".into());
    let rubric = load_rubric()?;
    let mode: preflight::Mode = opts.into();
    preflight::check_flags(&args.gpus, &mode, &rubric)?;
    // Checked before grading: a folder of the user's takes only new names.
    let out_dir = match &args.out {
        Some(out) => {
            let d = OutDir::claim(out, "--out")?;
            d.fresh(report::GRADE_FILE)?;
            if args.gradescope {
                d.fresh(report::GRADESCOPE_FILE)?;
            }
            // The runner's own folder holds one student's report: another's is never replaced.
            report::check_one_student(d.path(), &student)?;
            Some(d)
        }
        None => None,
    };
    let sub = submission::Submission {
        student,
        path: path.clone(),
    };
    if let Some(p) = &args.replay {
        for w in preflight::check_replay(p, &report::GradeReport::read(p)?, &rubric, &sub)? {
            eprintln!("warning: {w}");
        }
    }
    // A submission that cannot be graded (no or several .cu files, too large, refused by the
    // screen) is graded "rejected" at once: it needs no secret and no GPU, so an instructor
    // learns why on any machine, and Gradescope still gets its results.json.
    let grader = match submission::precheck(&sub, &rubric, opts.skip_screen, opts.simulate(&rubric))
    {
        Ok(()) => batch::grader_for(
            rubric,
            &rubric_path,
            args.secret_file.as_deref(),
            replay,
            std::slice::from_ref(&path),
            opts,
        )?,
        Err(_) => batch::refusing_grader(rubric, &rubric_path, opts)?,
    };
    let reports = batch::grade_all(
        &grader,
        vec![sub],
        &args.gpus,
        args.out.as_deref().unwrap_or(std::path::Path::new("")),
        args.gradescope,
        false,
    )
    .map_err(suggest_compile_only)?;
    let r = &reports[0];
    if let Some(out) = &out_dir {
        out.create()?;
        r.write_one(out.path(), args.gradescope)?;
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
