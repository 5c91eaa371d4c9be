//! `runner`: compile, verify, time, diff and explain the steps of the Blackwell GEMM workbook.

mod bench;
mod book;
mod budget;
mod comparables;
mod diagnose;
mod diff;
mod edits;
mod exercise;
mod figures;
mod glossary;
mod grade;
mod heatmap;
mod measured;
mod phase_tables;
mod plot;
mod report;
mod results;
mod step_cmd;
mod terminal;
mod trace;
mod workshop;

use runner::steps;

use anyhow::{anyhow, bail, Result};
use clap::{Parser, Subcommand, ValueEnum};
use common::compile::{compile, Target};
use common::gpu::{self, GpuStatus};
use common::run::{self, EmulateMode, RunOptions};
use common::step::{Arch, KernelSpec};
use common::{mutation, sass, Dist, Dtype, Shape};
use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "runner",
    version,
    about = "The Blackwell GEMM workbook: compile, verify, time, diff and explain each step"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum ArchArg {
    #[value(name = "sm_100a")]
    Sm100a,
    #[value(name = "sm_90a")]
    Sm90a,
}

impl ArchArg {
    fn arch(self) -> Arch {
        match self {
            ArchArg::Sm100a => Arch::Blackwell,
            ArchArg::Sm90a => Arch::Hopper,
        }
    }
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum ColorArg {
    Auto,
    Always,
    Never,
}

#[derive(clap::Args, Clone)]
struct ProblemArgs {
    /// Rows of A and C (default: 4096 natively, 512 under emulation).
    #[arg(long)]
    m: Option<usize>,
    /// Columns of C, rows of B (default: 8192 natively, 1024 under emulation).
    #[arg(long)]
    n: Option<usize>,
    /// The reduction dimension (default: 4096 natively, 512 under emulation).
    #[arg(long)]
    k: Option<usize>,
    /// Input and output type: f16 or bf16.
    #[arg(long, default_value = "f16")]
    dtype: Dtype,
    /// Input distribution: gaussian, uniform or int.
    #[arg(long, default_value = "gaussian")]
    dist: Dist,
    /// Seed of the input generator.
    #[arg(long, default_value_t = 2024)]
    seed: u64,
}

impl ProblemArgs {
    fn shape(&self, default: Shape) -> Option<Shape> {
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

#[derive(Subcommand)]
enum Command {
    /// List the steps of the ladder.
    List {
        /// One JSON array of {number, title, idea, crate}.
        #[arg(long)]
        json: bool,
    },
    /// Compile a step, verify it against cuBLAS and the CPU, and time it. Without a usable GPU,
    /// report its sm_100a compilation (resources, SASS) instead.
    Step {
        /// Step number.
        #[arg(value_name = "STEP")]
        step: u32,
        /// Which kernel: sm_100a (the Blackwell kernel; emulated on an H100/H200) or sm_90a (its
        /// Hopper twin, native and timed on an H100/H200). Default: every kernel this GPU runs.
        #[arg(long, value_enum)]
        arch: Option<ArchArg>,
        #[command(flatten)]
        problem: ProblemArgs,
        /// Override a tuning parameter of the kernel, e.g. --param stages=5 (repeatable).
        #[arg(long = "param", value_name = "NAME=VALUE")]
        params: Vec<String>,
        /// Timed runs (after warm-up); 0 skips timing.
        #[arg(long, default_value_t = 20)]
        iters: usize,
        /// Untimed warm-up runs.
        #[arg(long, default_value_t = 5)]
        warmup: usize,
        /// Do not flush L2 between timed runs.
        #[arg(long)]
        no_flush: bool,
        /// Run the Blackwell kernel under the tcgen05 emulation (sm_90 GPUs; the default there).
        #[arg(long, conflicts_with = "no_emulate")]
        emulate: bool,
        /// Run the Blackwell kernel natively or not at all: fail on a GPU without tcgen05.
        #[arg(long)]
        no_emulate: bool,
        /// Seconds before a running kernel is declared hung.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
        /// Compile and run this kernel file instead of the step's own (a file that includes
        /// hopper.cuh is taken for a Hopper twin unless --arch says otherwise).
        #[arg(long, value_name = "FILE")]
        kernel: Option<std::path::PathBuf>,
        /// Seed a known bug into the kernel (`runner mutations` lists them) to see it caught.
        #[arg(long, value_name = "NAME")]
        mutate: Option<String>,
        /// Persistent steps: launch at most N clusters, so each loops over more tiles.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        clusters: Option<u32>,
        /// Seed of the emulation's schedule perturbations (emulated runs only).
        #[arg(long, default_value_t = 0, value_name = "SEED")]
        emu_seed: u64,
        /// Run a kernel even if its static checks fail (Blackwell: the sm_100a PTX rules and the
        /// native sm_100a compile; twin: its PTX's TMA-store rules), to see what the emulation or
        /// the GPU makes of such a bug.
        #[arg(long)]
        no_static_check: bool,
        /// Record warp-role timelines and write FILE_STEM-stepN-<arch>.json (Perfetto,
        /// chrome://tracing) and .svg for each kernel run (FILE_STEM defaults to "trace"; a folder
        /// gets trace-stepN-<arch>.* inside it). The kernel is built with its trace calls on; the
        /// recorded launch is verified, not timed. Under emulation only the order of events counts.
        #[arg(long, value_name = "FILE_STEM", num_args = 0..=1, default_missing_value = "trace")]
        trace: Option<std::path::PathBuf>,
        /// With --trace: the CTAs of this many clusters (the grid's first) record.
        #[arg(long, value_name = "N", default_value_t = 2, requires = "trace",
              value_parser = clap::value_parser!(u32).range(1..))]
        trace_clusters: u32,
        /// Print one JSON object instead of the text report.
        #[arg(long)]
        json: bool,
    },
    /// Registers, shared memory and the SASS instruction histogram of a step.
    Inspect {
        /// Step number.
        #[arg(value_name = "STEP")]
        step: u32,
        /// Which kernel: sm_100a (the Blackwell kernel) or sm_90a (its Hopper twin).
        #[arg(long, value_enum, default_value = "sm_100a")]
        arch: ArchArg,
        /// The Blackwell kernel's sm_90a build for the tcgen05 emulation.
        #[arg(long)]
        emulate: bool,
        #[arg(long, default_value = "f16")]
        dtype: Dtype,
        /// Override a tuning parameter, e.g. --param stages=5 (repeatable).
        #[arg(long = "param", value_name = "NAME=VALUE")]
        params: Vec<String>,
        /// Print the whole SASS listing.
        #[arg(long)]
        sass: bool,
        #[arg(long)]
        json: bool,
    },
    /// What step B changes relative to step A (kernels; --host adds the host code).
    Diff {
        a: u32,
        b: u32,
        /// Which kernels: sm_100a (the Blackwell kernels) or sm_90a (the Hopper twins).
        #[arg(long, value_enum, default_value = "sm_100a")]
        arch: ArchArg,
        #[arg(long)]
        host: bool,
        #[arg(long, value_enum, default_value = "auto")]
        color: ColorArg,
    },
    /// Render a step's chapter in the terminal, with its code inlined.
    Explain {
        /// Step number.
        #[arg(value_name = "STEP")]
        step: u32,
        /// Print the markdown instead of rendering it.
        #[arg(long)]
        markdown: bool,
        /// Show long tables whole instead of folding them.
        #[arg(long)]
        full: bool,
    },
    /// The budget box of a step: FLOP, bytes, time at peak, operand bandwidth, bytes in flight,
    /// epilogue against main loop — arithmetic from its configuration and published GPU figures.
    Budget {
        /// Step number.
        #[arg(value_name = "STEP")]
        step: u32,
        /// GPUs to compute for (b200, h100, h200); all of them by default.
        #[arg(long = "gpu", value_name = "GPU")]
        gpus: Vec<String>,
        #[arg(long)]
        m: Option<usize>,
        #[arg(long)]
        n: Option<usize>,
        #[arg(long)]
        k: Option<usize>,
        /// Assumed load latency under load, in ns (not a published figure).
        #[arg(long, value_name = "NS")]
        latency_ns: Option<f64>,
    },
    /// The workbook's terms, one line each, with the chapter that explains them.
    Glossary {
        /// Only the terms containing this (case-insensitive).
        term: Option<String>,
    },
    /// Build the book (HTML) and optionally serve it on localhost.
    Book {
        /// Output folder (default: book/build).
        #[arg(long)]
        out: Option<std::path::PathBuf>,
        /// Serve the built book on 127.0.0.1.
        #[arg(long)]
        serve: bool,
        #[arg(long, default_value_t = 3000)]
        port: u16,
    },
    /// The seeded bugs `runner step N --mutate NAME` can plant, with the steps they apply to and
    /// what the emulation check must see.
    Mutations {
        #[arg(long)]
        json: bool,
    },
    /// Time every step's native kernel against cuBLAS (the Hopper twins on an H100/H200, the
    /// Blackwell kernels on a B200), over shapes and dtypes; write a results JSON and an SVG plot.
    Bench {
        /// Steps to time, e.g. 0,3,6 (default: all).
        #[arg(long, value_delimiter = ',')]
        steps: Vec<u32>,
        /// Named variants to time beside the steps, e.g. 5-pingpong (step 5's twin as ping-pong
        /// consumers, exercises/hopper/step5_pingpong_sm90.cu).
        #[arg(long, value_delimiter = ',')]
        contenders: Vec<String>,
        /// Shapes MxNxK (default: 4096x8192x4096 and 8192x8192x8192).
        #[arg(long, value_delimiter = ',', value_parser = parse_shape)]
        shapes: Vec<Shape>,
        /// Add square sizes 1024 to 8192.
        #[arg(long)]
        sweep: bool,
        /// Dtypes (default: f16,bf16).
        #[arg(long, value_delimiter = ',')]
        dtypes: Vec<Dtype>,
        /// Which kernels: must be the ones this GPU runs natively (emulated times mean nothing).
        #[arg(long, value_enum)]
        arch: Option<ArchArg>,
        /// Timed rounds (each kernel once per round, cuBLAS too); at least 20.
        #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(20..))]
        iters: u64,
        #[arg(long, default_value_t = 5)]
        warmup: usize,
        #[arg(long, default_value_t = 2024)]
        seed: u64,
        /// Seconds before a kernel is declared hung.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
        /// Folder for bench-<gpu>-<date>.json and .svg (default: assets/results).
        #[arg(long)]
        out: Option<std::path::PathBuf>,
        /// Instead of the bench: time cuBLAS and step 4 under every timing protocol the workbook
        /// has used and variants that isolate one suspect each (first shape and dtype only);
        /// writes diagnose-<gpu>-<date>.json.
        #[arg(long, conflicts_with_all = ["sweep", "heatmap"])]
        diagnose: bool,
        /// Time every step over a grid of shapes beyond the square (skinny M, small and large
        /// K, sizes that are no power of two; --shapes replaces the grid) and write
        /// heatmap-<gpu>-<date>.json and a heatmap SVG of % of cuBLAS.
        #[arg(long, conflicts_with = "sweep")]
        heatmap: bool,
    },
    /// Grade student kernels against a rubric: isolated child processes, hidden tests, integrity
    /// checks on every launch, timing against cuBLAS; `runner grade merge` joins shards.
    Grade(Box<grade::GradeArgs>),
    /// Run the check a book exercise names (e.g. `runner exercise 2.2`), on the committed
    /// solution or on your kernel.
    Exercise {
        /// The exercise, e.g. 0.1 (step 0, exercise 1); `--list` shows them all.
        #[arg(value_name = "N.M", required_unless_present = "list")]
        id: Option<String>,
        /// Check this kernel file instead of the solution in exercises/solutions.toml.
        #[arg(long, value_name = "FILE")]
        kernel: Option<std::path::PathBuf>,
        /// Write the solution's kernel to FILE instead of checking.
        #[arg(long, value_name = "FILE", conflicts_with = "kernel")]
        write: Option<std::path::PathBuf>,
        /// List the exercises.
        #[arg(long)]
        list: bool,
    },
    /// Workshop tools: `runner workshop check` is a lab machine's pre-flight.
    Workshop {
        #[command(subcommand)]
        cmd: WorkshopCmd,
    },
    /// The grader's child process (internal).
    #[command(name = "grade-worker", hide = true)]
    GradeWorker {
        /// The phase: `probe`, `compile` or `run`; the job comes over stdin.
        #[arg(long, value_parser = ["probe", "compile", "run"])]
        phase: String,
        /// Run without the Landlock confinement (only on the instructor's --allow-unconfined).
        #[arg(long)]
        unconfined: bool,
    },
    /// Check the reference machinery on this GPU: cuBLAS against the CPU fp64 reference, and
    /// cuBLAS's speed.
    Selftest {
        #[command(flatten)]
        problem: ProblemArgs,
        #[arg(long, default_value_t = 20)]
        iters: usize,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum WorkshopCmd {
    /// Check the GPU, the toolkit, a compile, cuBLAS, free disk space and the clocks.
    Check,
}

/// `4096x8192x4096` -> a Shape.
fn parse_shape(s: &str) -> Result<Shape, String> {
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

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("error: internal error: {info}");
    }));
    let cli = Cli::parse();
    match dispatch(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn dispatch(cmd: Command) -> Result<ExitCode> {
    match cmd {
        Command::List { json } => {
            if json {
                let v: Vec<_> = steps::all()
                    .iter()
                    .map(|&s| {
                        let i = s.info();
                        // What one cluster covers (M, N) and the k-block, per kernel: the shapes
                        // a kernel accepts are multiples of these.
                        let tiles: serde_json::Map<String, serde_json::Value> = Arch::ALL
                            .iter()
                            .map(|&a| {
                                let k = KernelSpec::new(s, a).shape();
                                (
                                    a.sm().to_string(),
                                    serde_json::json!([
                                        k.cluster_tile.0,
                                        k.cluster_tile.1,
                                        k.tile_k,
                                        k.persistent
                                    ]),
                                )
                            })
                            .collect();
                        serde_json::json!({"number": i.number, "title": i.title, "idea": i.idea,
                            "hopper_idea": i.hopper_idea, "crate": i.crate_dir, "tiles": tiles})
                    })
                    .collect();
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                report::print_list(&steps::all());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Step {
            step: n,
            arch,
            problem,
            params,
            iters,
            warmup,
            no_flush,
            emulate,
            no_emulate,
            timeout,
            kernel,
            mutate,
            clusters,
            emu_seed,
            no_static_check,
            trace,
            trace_clusters,
            json,
        } => {
            let opts = RunOptions {
                shape: problem.shape(Shape::DEFAULT),
                dtype: problem.dtype,
                dist: problem.dist,
                seed: problem.seed,
                warmup,
                iters,
                flush_l2: !no_flush,
                emulate: if emulate {
                    EmulateMode::Always
                } else if no_emulate {
                    EmulateMode::Never
                } else {
                    EmulateMode::Auto
                },
                timeout: Duration::from_secs(timeout),
                source: None,
                cpu_samples: 256,
                clusters,
                emu_seed,
                trace_clusters: trace.as_ref().map(|_| trace_clusters),
                static_check: !no_static_check,
            };
            let request = step_cmd::Request {
                step: steps::get(n)?,
                arch: arch.map(ArchArg::arch),
                params,
                kernel_file: kernel,
                mutate,
                json,
                trace,
            };
            step_cmd::run(&request, opts)
        }
        Command::Inspect {
            step: n,
            arch,
            emulate,
            dtype,
            params,
            sass: full,
            json,
        } => {
            let arch = arch.arch();
            if emulate && arch != Arch::Blackwell {
                bail!("--emulate builds the Blackwell kernel for the emulation; the Hopper twin runs natively");
            }
            let mut spec = KernelSpec::new(steps::get(n)?, arch);
            spec.params.apply(&params).map_err(|e| anyhow!(e))?;
            let target = if emulate {
                Target::Sm90aEmulated
            } else {
                Target::native(arch)
            };
            let compiled = compile(&spec.source(), target, &spec.defines(dtype))?;
            let listing = sass::disassemble(&compiled.cubin)?;
            let smem = spec.shape().smem_bytes;
            if json {
                let v = serde_json::json!({
                    "step": n, "arch": arch, "target": target, "params": &spec.params,
                    "compile": &compiled, "smem_bytes": smem, "sass": &listing,
                });
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                report::print_header(&spec);
                report::print_compile(&compiled, smem);
                report::print_sass(&listing, spec.sass_expect(), true);
                if full {
                    println!("\n{}", listing.listing);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Diff {
            a,
            b,
            arch,
            host,
            color,
        } => {
            let sa = steps::get(a)?;
            let sb = steps::get(b)?;
            let colored = match color {
                ColorArg::Always => true,
                ColorArg::Never => false,
                ColorArg::Auto => std::io::stdout().is_terminal(),
            };
            print!(
                "{}",
                diff::steps(sa.info(), sb.info(), arch.arch(), host, colored)
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Explain {
            step: n,
            markdown,
            full,
        } => {
            let step = steps::get(n)?;
            let md = book::chapter_markdown(step.info())?;
            if markdown {
                terminal::print(&md)?;
            } else {
                terminal::print(&terminal::render(&md, &terminal::Style::for_stdout(full)))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Budget {
            step: n,
            gpus,
            m,
            n: cols,
            k,
            latency_ns,
        } => {
            let md = budget::command(n, &gpus, (m, cols, k), latency_ns)?;
            terminal::print(&terminal::render(&md, &terminal::Style::for_stdout(true)))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Glossary { term } => {
            let md = glossary::markdown(term.as_deref())?;
            terminal::print(&terminal::render(&md, &terminal::Style::for_stdout(true)))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Book { out, serve, port } => {
            let dir = book::build(out)?;
            println!("book built: {}", dir.join("index.html").display());
            if serve {
                book::serve(&dir, port)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Bench {
            steps: step_numbers,
            contenders,
            shapes,
            sweep,
            dtypes,
            arch,
            iters,
            warmup,
            seed,
            timeout,
            out,
            diagnose,
            heatmap,
        } => {
            let steps = if step_numbers.is_empty() {
                steps::all()
            } else {
                step_numbers
                    .iter()
                    .map(|&n| steps::get(n))
                    .collect::<Result<Vec<_>>>()?
            };
            let mut shapes = if !shapes.is_empty() {
                shapes
            } else if heatmap {
                heatmap::HEATMAP_SHAPES.to_vec()
            } else {
                bench::DEFAULT_SHAPES.to_vec()
            };
            if sweep {
                for s in bench::SWEEP_SIZES {
                    let sq = Shape { m: s, n: s, k: s };
                    if !shapes.contains(&sq) {
                        shapes.push(sq);
                    }
                }
            }
            if let (Some(a), GpuStatus::Present(g)) = (arch, gpu::open()) {
                let native = bench::native_arch(&g.info)?;
                if a.arch() != native {
                    bail!(
                        "{} runs the {}s natively; timing the {}s there would time the emulation, whose times mean nothing",
                        g.info.name,
                        native.name(),
                        a.arch().name()
                    );
                }
            }
            let contenders = contenders
                .iter()
                .map(|name| runner::contenders::find(name))
                .collect::<Result<Vec<_>>>()?;
            let opts = bench::BenchOptions {
                steps,
                contenders,
                shapes,
                dtypes: if dtypes.is_empty() {
                    vec![Dtype::F16, Dtype::Bf16]
                } else {
                    dtypes
                },
                iters: iters as usize,
                warmup,
                seed,
                out: out.unwrap_or_else(|| {
                    common::toolkit::project_root()
                        .join("assets")
                        .join("results")
                }),
                timeout: Duration::from_secs(timeout),
                heatmap,
            };
            if diagnose {
                bench::run_diagnose(&opts)?;
                return Ok(ExitCode::SUCCESS);
            }
            let (report, json, svg) = bench::run(&opts)?;
            bench::print_table(&report, &json, &svg);
            let failed = report.cases.iter().any(|c| {
                c.kernel != "cublas"
                    && c.skipped
                        .as_deref()
                        .is_some_and(|s| s.contains("verification"))
            });
            Ok(if failed {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Mutations { json } => {
            if json {
                println!("{}", serde_json::to_string_pretty(mutation::MUTATIONS)?);
            } else {
                report::print_mutations(mutation::MUTATIONS);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Grade(args) => grade::run(*args),
        Command::Exercise {
            id,
            kernel,
            write,
            list,
        } => {
            if list {
                exercise::list();
                return Ok(ExitCode::SUCCESS);
            }
            let id = id.ok_or_else(|| anyhow!("give an exercise, e.g. 0.1"))?;
            exercise::run(&id, kernel.as_deref(), write.as_deref())
        }
        Command::Workshop {
            cmd: WorkshopCmd::Check,
        } => workshop::check(),
        Command::GradeWorker { phase, unconfined } => {
            grade::worker::main(grade::job::Phase::parse(&phase)?, !unconfined)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Selftest {
            problem,
            iters,
            json,
        } => {
            let gpu = match gpu::open() {
                GpuStatus::Present(g) => g,
                GpuStatus::Absent(why) => bail!("selftest needs a GPU: {why}"),
            };
            let shape = problem.shape(Shape::DEFAULT).unwrap_or(Shape::DEFAULT);
            let t = run::selftest(&gpu, shape, problem.dtype, problem.seed, iters)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&t)?);
            } else {
                report::print_selftest(&t);
            }
            Ok(if t.verification.passed {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
    }
}
