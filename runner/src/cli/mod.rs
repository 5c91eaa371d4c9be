//! The command line: one module per subcommand, each with its `Args` (clap derive) and a `run()`.
//! `main.rs` parses and calls [`dispatch`]; the work itself lives in the implementation modules
//! (`step_cmd`, `bench`, `book`, `grade`, ...), which these modules call into.

pub mod bench;
pub mod book;
pub mod budget;
pub mod check;
pub mod diff;
pub mod exercise;
pub mod explain;
pub mod glossary;
pub mod grade;
pub mod grade_worker;
pub mod inspect;
pub mod list;
pub mod mutations;
pub mod phases;
pub mod selftest;
pub mod step;
pub mod workshop;

use anyhow::Result;
use clap::{Parser, Subcommand, ValueEnum};
use common::step::Arch;
use common::{Dist, Dtype, Shape};
use std::process::ExitCode;

/// `runner --version`: the version and the commit the runner was built from.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("WB_BUILD_COMMIT"),
    ")"
);

/// The environment and the exit codes, at the end of `runner --help`.
const AFTER_HELP: &str = "\
Environment:
  WORKBOOK_ROOT            the workbook checkout to use (default: the current folder or one above
                           it, else the checkout the runner sits in; else its built-in copies)
  WORKBOOK_DEVICE          the GPU to run on (default 0; `--device N` of step, bench, selftest,
                           exercise and workshop check sets it too)
  WORKBOOK_CUDA            a CUDA toolkit root (12.8 or newer) to compile with
  WORKBOOK_CUDA_CACHE      where the pinned NVRTC, headers, nvdisasm and cuBLAS wheels are installed
                           (default: <checkout>/.cuda/pypi); share one folder across a lab
  WORKBOOK_WHEELS          a folder of pre-fetched wheels to install from, with no network
  WORKBOOK_NO_INSTALL      never install the toolkit: fail and print the pip command instead
  WORKBOOK_PYTHON          the python whose pip installs the wheels (default: python3)
  WORKBOOK_NO_SITE_PYTHON  ignore the nvidia packages of that python's site-packages
  WORKBOOK_GRADE_SECRET    the instructor's secret for a rubric's hidden tests (`grade`)
  WORKBOOK_WRITE_FIGURES   (tests) rewrite the figures in assets/ from the code
  NO_COLOR, COLUMNS, PAGER plain output; the width; the pager of `explain` on a terminal

Exit status: one story for step, exercise, check, grade and workshop (`common::verdict`; a
parent classifies a child by it, never by parsing its output):
  0    success: everything asked ran and passed. `step`, `exercise`, `check`: every kernel
       ran (on a GPU, under the tcgen05 emulation or on the CPU simulator) and verified;
       `grade`: every submission was graded, whatever its score; `workshop check`: the
       machine is ready
  1    failed: a wrong result (the verification), a check, or an exercise's expectation
  2    error: bad input, a compile error, no GPU or toolkit where one is needed (one `error:`
       line says which); also a kernel stopped before a result: an ordering rule broken
       (`rule NAME`: the emulation faults on it, the simulator stops on it), a fault, PTX the
       simulator cannot run
  3    ran only in part: something asked could not run here (a kernel without a GPU that runs
       it, a timing part, cases in one file only); a closing line says what did not run and
       why, and everything that ran passed
  124  hang: a kernel did not finish within its --timeout, or the simulator found a deadlock
       (no thread can move) or a kernel spinning to its instruction budget
  A reader that closes the output early (`| head`) ends the runner quietly, by SIGPIPE.";

#[derive(Parser)]
#[command(
    name = "runner",
    version = VERSION,
    about = "The Blackwell GEMM workbook: compile, verify, time, diff and explain each step",
    after_help = AFTER_HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// List the steps of the ladder.
    List(list::Args),
    /// Compile a step, verify it against cuBLAS and the CPU, and time it. Without a usable GPU,
    /// simulate the Blackwell kernel's sm_100a PTX on the CPU (verified, not timed) and report
    /// the Hopper twin's build; exit 3 when a kernel was only built (the exit codes: `runner --help`).
    Step(Box<step::Args>),
    /// Registers, shared memory and the SASS instruction histogram of a step.
    Inspect(inspect::Args),
    /// What step B changes relative to step A (kernels; --host adds the host code).
    Diff(diff::Args),
    /// Read a chapter in the terminal: a step's, with its code inlined, or the introduction,
    /// emulation or instructor chapter.
    Explain(explain::Args),
    /// The budget box of a step: FLOP, bytes, time at peak, operand bandwidth, bytes in flight,
    /// epilogue against main loop — arithmetic from its configuration and published GPU figures.
    Budget(budget::Args),
    /// The workbook's terms, one line each, with the chapter that explains them.
    Glossary(glossary::Args),
    /// Build the book (HTML) and optionally serve it on localhost.
    Book(book::Args),
    /// The seeded bugs `runner step N --mutate NAME` can plant, with the steps they apply to and
    /// what the simulator (or the emulation on a GPU) must see.
    Mutations(mutations::Args),
    /// The mbarrier phase model's timeline of one run of a step's ring, event by event: what
    /// the barriers chapter's figure draws (`--bug wrong-parity --timing slow-loads`).
    Phases(phases::Args),
    /// Time every step's native kernel against cuBLAS (the Hopper twins on an H100/H200, the
    /// Blackwell kernels on a B200), over shapes and dtypes; write a results JSON and an SVG plot.
    Bench(bench::Args),
    /// Grade student kernels against a rubric: isolated child processes, hidden tests, integrity
    /// checks on every launch, timing against cuBLAS; `runner grade merge` joins shards.
    Grade(Box<grade::Args>),
    /// Run the check a book exercise names (e.g. `runner exercise 2.2`), on the committed
    /// solution or on your kernel; `runner exercise` alone lists them.
    Exercise(exercise::Args),
    /// Workshop tools: `runner workshop check` is a machine's pre-flight (a laptop's by
    /// default: toolkit, simulator, a step, a seeded bug, the book; `--gpu` for a GPU lab).
    Workshop(workshop::Args),
    /// The grader's child process (internal).
    #[command(name = "grade-worker", hide = true)]
    GradeWorker(grade_worker::Args),
    /// Check the reference machinery on this GPU: cuBLAS against the CPU fp64 reference, and
    /// cuBLAS's speed.
    Selftest(selftest::Args),
    /// The whole-ladder checks: `check sim` (every step and seeded bug on the CPU simulator, no
    /// GPU), `check emulation` (the same under the tcgen05 emulation) and `check twins` (every
    /// Hopper twin natively) over a pool of GPUs, `check agree` (two results files); each
    /// writes a results JSON.
    Check(check::Args),
}

/// Parse the command line. Every option and argument that takes a value also takes one that
/// looks like a negative number, so that `--seed -1` or `runner step -1` meets the value's own
/// check (an `error:` line naming the value) rather than clap's "unexpected argument" and its tip
/// to write `-- -1`.
pub fn parse() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let matches = negative_numbers(Cli::command()).get_matches();
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

fn negative_numbers(cmd: clap::Command) -> clap::Command {
    // The command-wide form of `Arg::allow_negative_numbers`, applied to every subcommand.
    #[allow(deprecated)]
    cmd.allow_negative_numbers(true)
        .mut_subcommands(negative_numbers)
}

/// Run one parsed command.
pub fn dispatch(cmd: Command) -> Result<ExitCode> {
    if !matches!(cmd, Command::GradeWorker(_)) {
        if let Some(note) = common::project::embedded_note() {
            eprintln!("{note}");
        }
    }
    match cmd {
        Command::List(a) => list::run(a),
        Command::Step(a) => step::run(*a),
        Command::Inspect(a) => inspect::run(a),
        Command::Diff(a) => diff::run(a),
        Command::Explain(a) => explain::run(a),
        Command::Budget(a) => budget::run(a),
        Command::Glossary(a) => glossary::run(a),
        Command::Book(a) => book::run(a),
        Command::Mutations(a) => mutations::run(a),
        Command::Phases(a) => phases::run(a),
        Command::Bench(a) => bench::run(a),
        Command::Grade(a) => grade::run(*a),
        Command::Exercise(a) => exercise::run(a),
        Command::Check(a) => check::run(a),
        Command::Workshop(a) => workshop::run(a),
        Command::GradeWorker(a) => grade_worker::run(a),
        Command::Selftest(a) => selftest::run(a),
    }
}

/// `--arch`: which of a step's two kernels.
#[derive(Clone, Copy, ValueEnum)]
pub enum ArchArg {
    #[value(name = "sm_100a", alias = "blackwell")]
    Sm100a,
    #[value(name = "sm_90a", alias = "hopper")]
    Sm90a,
}

impl ArchArg {
    pub fn arch(self) -> Arch {
        match self {
            ArchArg::Sm100a => Arch::Blackwell,
            ArchArg::Sm90a => Arch::Hopper,
        }
    }
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum ColorArg {
    Auto,
    Always,
    Never,
}

/// The problem a run multiplies: its shape, dtype, input distribution and seed.
#[derive(clap::Args, Clone)]
pub struct ProblemArgs {
    /// Rows of A and C (default: 4096 natively, 512 under emulation, 256 on the simulator, 768 for
    /// its persistent steps).
    #[arg(long, allow_negative_numbers = true, value_parser = size)]
    pub m: Option<usize>,
    /// Columns of C, rows of B (default: 8192 natively, 1024 under emulation, 256 on the simulator,
    /// 512 for its persistent steps).
    #[arg(long, allow_negative_numbers = true, value_parser = size)]
    pub n: Option<usize>,
    /// The reduction dimension (default: 4096 natively, 512 under emulation and on the simulator).
    #[arg(long, allow_negative_numbers = true, value_parser = size)]
    pub k: Option<usize>,
    /// Input and output type: f16 or bf16.
    #[arg(long, default_value = "f16")]
    pub dtype: Dtype,
    /// Input distribution: gaussian, uniform, int, all-ones, wide-range or exact-int.
    #[arg(long, default_value = "gaussian")]
    pub dist: Dist,
    /// Seed of the input generator.
    #[arg(long, default_value_t = 2024)]
    pub seed: u64,
}

impl ProblemArgs {
    pub fn shape(&self, default: Shape) -> Option<Shape> {
        if self.m.is_none() && self.n.is_none() && self.k.is_none() {
            return None;
        }
        Some(Shape {
            m: self.m.unwrap_or(default.m),
            n: self.n.unwrap_or(default.n),
            k: self.k.unwrap_or(default.k),
        })
    }
}

/// `--device N`: the GPU a command runs on (also `WORKBOOK_DEVICE`).
#[derive(clap::Args, Clone, Copy)]
pub struct DeviceArg {
    /// The GPU to run on (CUDA device number; default 0).
    #[arg(long, value_name = "N", env = "WORKBOOK_DEVICE", allow_negative_numbers = true,
          value_parser = parse_device)]
    pub device: Option<usize>,
}

/// A CUDA device number, from `--device` or `WORKBOOK_DEVICE` (the message names both: the
/// user may have set either).
fn parse_device(s: &str) -> Result<usize, String> {
    s.trim().parse::<usize>().map_err(|_| {
        format!(
            "{s:?} is not a GPU number (0, 1, ...): check --device or the WORKBOOK_DEVICE variable"
        )
    })
}

impl DeviceArg {
    /// Make the choice the process's: `common::gpu::open` and the grader's children read
    /// `WORKBOOK_DEVICE`. Called first thing in a command, before any thread starts.
    pub fn apply(self) {
        if let Some(d) = self.device {
            std::env::set_var("WORKBOOK_DEVICE", d.to_string());
        }
    }
}

/// `4096x8192x4096` -> a Shape.
pub fn parse_shape(s: &str) -> Result<Shape, String> {
    let dims: Vec<usize> = s
        .split(['x', 'X'])
        .map(|d| d.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|_| format!("{s:?} is not a shape MxNxK"))?;
    match dims[..] {
        [m, n, k] if m > 0 && n > 0 && k > 0 => Ok(Shape { m, n, k }),
        _ => Err(format!("{s:?} is not a shape MxNxK of positive sizes")),
    }
}

/// A whole number of at least `min`, with an error that says so (clap's ranges print their upper
/// end, 18446744073709551615).
pub fn at_least<const MIN: u64>(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(v) if v >= MIN => Ok(v),
        Ok(v) => Err(format!("{v} is too small: give at least {MIN}")),
        Err(_) => Err(format!("{s:?} is not a whole number (at least {MIN})")),
    }
}

/// A whole number of at least 1 that fits 32 bits.
pub fn positive_u32(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(v) if v >= 1 => Ok(v),
        Ok(_) => Err("give at least 1".to_string()),
        Err(_) => Err(format!(
            "{s:?} is not a whole number from 1 to {}",
            u32::MAX
        )),
    }
}

/// A count from 1 to `MAX`: every count the runner takes has a sane upper bound, named in the
/// refusal (`--explore 4294967295` would run for years; `--jobs 100000` asks for threads that
/// would only wait).
pub fn count_upto<const MAX: u32>(s: &str) -> Result<u32, String> {
    match s.parse::<u64>() {
        Ok(v) if (1..=u64::from(MAX)).contains(&v) => Ok(v as u32),
        Ok(v) => Err(format!("{v} is out of range: give 1 to {MAX}")),
        Err(_) => Err(format!("{s:?} is not a whole number from 1 to {MAX}")),
    }
}

/// A matrix dimension: a whole number (clap's own message for `-5` is a misleading tip; the
/// kernel's shape check then names the multiple it needs, 0 included).
pub fn size(s: &str) -> Result<usize, String> {
    s.parse::<usize>()
        .map_err(|_| format!("{s:?} is not a size: give a positive whole number"))
}
