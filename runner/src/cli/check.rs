//! `runner check sim|emulation|twins|agree`: the whole-ladder checks, on the CPU simulator or a pool of GPUs (the work is in `check`).

use super::parse_shape;
use crate::check::cases::{EmulationSet, StressSet, TwinSet};
use crate::check::{self, Pool};
use crate::outdir::OutDir;
use anyhow::{bail, Result};
use common::{Dtype, Shape};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
#[command(
    after_help = "Exit status: 0 every case met its expectation; 1 some did not; 2 an error (bad input, a results file that cannot be written). Each case is a `runner step` child whose outcome is its exit status: 0 pass, 1 fail, 2 error, 124 hang."
)]
pub struct Args {
    #[command(subcommand)]
    check: Which,
}

#[derive(clap::Subcommand)]
enum Which {
    /// Every step's Blackwell kernel under the tcgen05 emulation (on an H100/H200): shapes x
    /// dtypes x seeds, the emulation's schedule seeds, persistent grids capped so each cluster
    /// runs several tiles, and every seeded bug of `runner mutations` on every step it applies
    /// to (static checks off: the emulation must catch it, by the rule it names). First the
    /// selftest (cuBLAS against the CPU). Writes emulation.json, selftest.json and
    /// emulation-log.txt.
    Emulation(EmulationArgs),
    /// Every step's Hopper twin natively on every check shape it accepts (odd sizes included),
    /// both dtypes, seeds, other input distributions, and the persistent twins with capped grids.
    /// Writes twins.json and twins-log.txt. With --stress, the stress pass instead: stress
    /// builds (`runner step --stress SEED`) of every stock twin and of the stress control
    /// 6-wait2, which must verify, and of every twin mutation, each of which must be caught
    /// under every seed and shape on each twin (by its named twin-check rule where it has one,
    /// else a wrong result, hang or fault), or refused by the static check; writes stress.json
    /// and stress-log.txt.
    Twins(TwinArgs),
    /// The emulation check's kinds of case on the CPU simulator, without a GPU: every step's
    /// Blackwell kernel from its sm_100a PTX at small shapes (both dtypes, every input
    /// distribution, persistent grids capped so each cluster runs several tiles) and every
    /// seeded bug on every step it applies to (static checks off; each explores 4 schedules and
    /// must be caught, by the rule or hang report it names, or pass if harmless). Writes sim.json
    /// (the emulation check's case keys) and sim-log.txt. `runner check emulation --sim-cases`
    /// runs the same cases on an H100/H200; `runner check agree` compares the two files.
    Sim(SimCheckArgs),
    /// Whether this machine's CUPTI counts executed instructions the way the grader's technique
    /// requirements need: a probe kernel whose store executes once per warp, and the stock
    /// Hopper twins of steps 0 and 3 at 512x512x256, each counted by CUPTI's SASS metrics in the
    /// grader's configuration (and the probe in variants that tell a refused configuration from
    /// a CUPTI that counts nothing). Needs an H100/H200. Prints a table; exit 0 when every case
    /// in the grader's configuration counted what it must.
    Cupti {
        /// Load CUPTI only after the GPU is opened, to compare.
        #[arg(long, hide = true)]
        gpu_first: bool,
        /// Run one case in this process (the check runs each case as such a child).
        #[arg(long, hide = true, value_enum)]
        case: Option<check::cupti::Case>,
    },
    /// Compare two check files case by case (emulation.json and sim.json): the same verdict
    /// (verified, or caught) and, where both name an ordering rule, the same rule.
    Agree {
        /// The first results file (e.g. target/check-results/emulation.json).
        a: PathBuf,
        /// The second (e.g. target/check-results/sim.json).
        b: PathBuf,
    },
}

#[derive(clap::Args)]
struct SimCheckArgs {
    /// Where the results files go (default: target/check-results in the checkout, never the
    /// current folder).
    #[arg(long)]
    out: Option<PathBuf>,
    /// One shape, one schedule seed, and each seeded bug on the first step it applies to only.
    #[arg(long)]
    quick: bool,
    /// Only these seeded bugs (default: all).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    mutations: Vec<String>,
    /// The schedule seeds (default: 1,2).
    #[arg(long, value_delimiter = ',')]
    seeds: Vec<u64>,
    /// Cases simulated at a time, one thread each (default: the CPUs here, at most 8; 1 to 256).
    #[arg(long, value_parser = super::count_upto::<256>)]
    jobs: Option<u32>,
}

#[derive(clap::Args)]
struct PoolArgs {
    /// GPUs to run on (default: WORKBOOK_DEVICE or 0).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    gpus: Vec<usize>,
    /// Runs at a time on each GPU (1 to 64).
    #[arg(long, default_value_t = 6, value_parser = super::count_upto::<64>)]
    jobs: u32,
    /// Where the results files go (default: target/check-results in the checkout, never the
    /// current folder).
    #[arg(long)]
    out: Option<PathBuf>,
    /// A reduced set with every kind of case (a few minutes on one GPU, not an hour).
    #[arg(long)]
    quick: bool,
}

impl PoolArgs {
    /// The pool, its results folder checked (not yet made): new, empty, or one a runner command
    /// wrote before; a folder of the user's holding other files is refused, never overwritten.
    fn pool(&self) -> Result<Pool> {
        let out = out_or_default(&self.out);
        OutDir::claim_own(&out, "--out", check::WRITES_RESULTS)?;
        Ok(Pool {
            gpus: self.gpus.clone(),
            jobs: self.jobs as usize,
            out,
        })
    }
}

/// The problems every step runs; each empty list takes the check's own.
#[derive(clap::Args)]
struct ProblemArgs {
    /// Shapes MxNxK (default: five from 512x1024x512 to 4096x8192x4096; the twin check adds
    /// two odd multiples of the tiles, and each twin runs those its tiles divide).
    #[arg(long, value_delimiter = ',', value_parser = parse_shape)]
    shapes: Vec<Shape>,
    /// Dtypes (default: f16,bf16).
    #[arg(long, value_delimiter = ',')]
    dtypes: Vec<Dtype>,
    /// Input seeds (default: 1,2).
    #[arg(long, value_delimiter = ',')]
    seeds: Vec<u64>,
}

#[derive(clap::Args)]
struct EmulationArgs {
    #[command(flatten)]
    pool: PoolArgs,
    #[command(flatten)]
    problems: ProblemArgs,
    /// The emulation's schedule seeds (default: 1,2,3,4,5).
    #[arg(long, value_delimiter = ',')]
    emu_seeds: Vec<u64>,
    /// Only these seeded bugs (default: all).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    mutations: Vec<String>,
    /// Skip the selftest.
    #[arg(long)]
    no_selftest: bool,
    /// Run the cases `runner check sim` runs (its small shapes, distributions and schedule seeds)
    /// instead of the emulation's own, for `runner check agree`.
    #[arg(long)]
    sim_cases: bool,
    /// Not for the emulation (hidden): refused with the reason.
    #[arg(long, hide = true)]
    stress: bool,
}

#[derive(clap::Args)]
struct TwinArgs {
    #[command(flatten)]
    pool: PoolArgs,
    #[command(flatten)]
    problems: ProblemArgs,
    /// The stress pass (common::stress) instead of the twin check: its own shapes (the default
    /// and, for the persistent twins, 2048x2048x512 on 2 clusters), f16. --quick leaves out the
    /// plain runs beside the mutations and the persistent twins' default shape.
    #[arg(long)]
    stress: bool,
    /// The stress seeds (default: 3,6,11, whose hot points together cover every point).
    #[arg(long, value_delimiter = ',', value_name = "SEEDS", requires = "stress")]
    stress_seeds: Vec<u64>,
}

/// `given` if the user gave any, else the set's own.
fn or<T: Clone>(given: &[T], default: Vec<T>) -> Vec<T> {
    if given.is_empty() {
        default
    } else {
        given.to_vec()
    }
}

pub fn run(a: Args) -> Result<ExitCode> {
    let verdict = match a.check {
        Which::Emulation(e) => {
            if e.stress {
                bail!("--stress applies to the Hopper twins (runner check twins --stress), which run natively; the emulation perturbs the Blackwell kernels' schedule with --emu-seeds instead");
            }
            let base = match (e.sim_cases, e.pool.quick) {
                (true, true) => EmulationSet::simulator_quick(),
                (true, false) => EmulationSet::simulator(),
                (false, true) => EmulationSet::quick(),
                (false, false) => EmulationSet::full(),
            };
            let set = EmulationSet {
                shapes: or(&e.problems.shapes, base.shapes),
                dtypes: or(&e.problems.dtypes, base.dtypes),
                seeds: or(&e.problems.seeds, base.seeds),
                emu_seeds: or(&e.emu_seeds, base.emu_seeds),
                only_mutations: e.mutations.clone(),
                ..base
            };
            check::emulation(&set, &e.pool.pool()?, !e.no_selftest)?
        }
        Which::Twins(t) if t.stress => {
            let p = &t.problems;
            if !(p.shapes.is_empty() && p.dtypes.is_empty() && p.seeds.is_empty()) {
                bail!("--shapes, --dtypes and --seeds choose the twin check's problems; the stress pass runs its own (common::stress): give --stress-seeds to change its seeds");
            }
            let base = if t.pool.quick {
                StressSet::quick()
            } else {
                StressSet::full()
            };
            let set = StressSet {
                seeds: or(&t.stress_seeds, base.seeds),
                ..base
            };
            check::stress(&set, &t.pool.pool()?)?
        }
        Which::Sim(a) => sim(a)?,
        Which::Cupti { gpu_first, case } => match case {
            Some(c) => check::cupti::run_case(c, gpu_first)?,
            None => {
                // Without a GPU every case would fail alike: one line says why instead.
                if let common::gpu::GpuStatus::Absent(why) = common::gpu::open() {
                    bail!("runner check cupti counts executed instructions on a GPU: {why}");
                }
                check::cupti::check(gpu_first)?
            }
        },
        Which::Agree { a, b } => check::agree::agree(&a, &b)?,
        Which::Twins(t) => {
            let base = if t.pool.quick {
                TwinSet::quick()
            } else {
                TwinSet::full()
            };
            let set = TwinSet {
                shapes: or(&t.problems.shapes, base.shapes),
                dtypes: or(&t.problems.dtypes, base.dtypes),
                seeds: or(&t.problems.seeds, base.seeds),
                ..base
            };
            check::twins(&set, &t.pool.pool()?)?
        }
    };
    Ok(verdict.into())
}

fn sim(a: SimCheckArgs) -> Result<common::verdict::Verdict> {
    // Checked before the cases run (minutes), as every other check's --out: a file, or a folder
    // of the user's holding other files, is refused up front.
    let out = out_or_default(&a.out);
    OutDir::make_own(&out, "--out", check::WRITES_RESULTS)?;
    let base = if a.quick {
        EmulationSet::simulator_quick()
    } else {
        EmulationSet::simulator()
    };
    let set = EmulationSet {
        emu_seeds: or(&a.seeds, base.emu_seeds),
        only_mutations: a.mutations,
        ..base
    };
    let jobs = a.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get().min(8)),
        |j| j as usize,
    );
    check::sim::check(&set, &out, jobs)
}

/// `--out`, or the checkout's `target/check-results`.
fn out_or_default(out: &Option<PathBuf>) -> PathBuf {
    out.clone()
        .unwrap_or_else(|| crate::outdir::default_out("check-results"))
}
