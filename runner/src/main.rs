//! `runner`: compile, verify, time, diff and explain the steps of the Blackwell GEMM workbook.

mod book;
mod budget;
mod diff;
mod figures;
mod glossary;
mod phase_tables;
mod report;
mod terminal;

use runner::steps;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use common::compile::{compile, KernelSource, Target};
use common::gpu::{self, GpuStatus};
use common::run::{self, EmulateMode, RunOptions};
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
        #[command(flatten)]
        problem: ProblemArgs,
        /// Timed runs (after warm-up); 0 skips timing.
        #[arg(long, default_value_t = 20)]
        iters: usize,
        /// Untimed warm-up runs.
        #[arg(long, default_value_t = 5)]
        warmup: usize,
        /// Do not flush L2 between timed runs.
        #[arg(long)]
        no_flush: bool,
        /// Run under the tcgen05 emulation (sm_90 GPUs; the default there).
        #[arg(long, conflicts_with = "no_emulate")]
        emulate: bool,
        /// Never emulate: fail on a GPU without tcgen05.
        #[arg(long)]
        no_emulate: bool,
        /// Seconds before a running kernel is declared hung.
        #[arg(long, default_value_t = 30)]
        timeout: u64,
        /// Compile and run this kernel file instead of the step's own.
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
        /// Print one JSON object instead of the text report.
        #[arg(long)]
        json: bool,
    },
    /// Registers, shared memory and the SASS instruction histogram of a step.
    Inspect {
        /// Step number.
        #[arg(value_name = "STEP")]
        step: u32,
        /// Target: sm_100a (native) or sm_90a (the emulation build).
        #[arg(long, value_enum, default_value = "sm_100a")]
        arch: ArchArg,
        #[arg(long, default_value = "f16")]
        dtype: Dtype,
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
                    .map(|s| {
                        let i = s.info();
                        serde_json::json!({"number": i.number, "title": i.title, "idea": i.idea, "crate": i.crate_dir})
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
            problem,
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
            json,
        } => {
            let step = steps::get(n)?;
            let mut source = match &kernel {
                Some(path) => Some(KernelSource {
                    path: path.display().to_string(),
                    text: std::fs::read_to_string(path)
                        .with_context(|| format!("cannot read {}", path.display()))?,
                }),
                None => None,
            };
            if let Some(name) = &mutate {
                let m = mutation::find(name)?;
                if !m.applies_to(n) {
                    bail!(
                        "the seeded bug {name:?} does not apply to step {n} (it applies to steps {:?})",
                        m.steps
                    );
                }
                let base = source
                    .clone()
                    .unwrap_or_else(|| step.info().kernel_source());
                source = Some(KernelSource {
                    path: base.path.clone(),
                    text: m.apply(&base.text)?,
                });
                if !json {
                    eprintln!("note: seeded bug {:?}: {}", m.name, m.description);
                }
            }
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
                source,
                cpu_samples: 256,
                clusters,
                emu_seed,
            };
            step_command(step, &opts, emulate || no_emulate, json)
        }
        Command::Inspect {
            step: n,
            arch,
            dtype,
            sass: full,
            json,
        } => {
            let step = steps::get(n)?;
            let target = match arch {
                ArchArg::Sm100a => Target::Sm100a,
                ArchArg::Sm90a => Target::Sm90aEmulated,
            };
            let compiled = compile(&step.info().kernel_source(), target, &step.defines(dtype))?;
            let listing = sass::disassemble(&compiled.cubin)?;
            let plan = step.plan(Shape::DEFAULT, None);
            if json {
                let v = serde_json::json!({
                    "step": n, "target": target, "compile": &compiled,
                    "smem_bytes": plan.dims.smem_bytes, "sass": &listing,
                });
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                report::print_header(step);
                report::print_compile(&compiled, plan.dims.smem_bytes);
                report::print_sass(&listing, step.info().sass_expect, true);
                if full {
                    println!("\n{}", listing.listing);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Diff { a, b, host, color } => {
            let sa = steps::get(a)?;
            let sb = steps::get(b)?;
            let colored = match color {
                ColorArg::Always => true,
                ColorArg::Never => false,
                ColorArg::Auto => std::io::stdout().is_terminal(),
            };
            print!("{}", diff::steps(sa.info(), sb.info(), host, colored));
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
        Command::Mutations { json } => {
            if json {
                println!("{}", serde_json::to_string_pretty(mutation::MUTATIONS)?);
            } else {
                report::print_mutations(mutation::MUTATIONS);
            }
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

/// `runner step N`: run where the GPU allows it, otherwise report the sm_100a build.
fn step_command(
    step: &'static dyn common::Step,
    opts: &RunOptions,
    mode_forced: bool,
    json: bool,
) -> Result<ExitCode> {
    let status = gpu::open();
    let why_not = match &status {
        GpuStatus::Present(g) => match run::choose_target(&g.info, opts.emulate) {
            Ok(Target::Sm90aEmulated) if !mode_forced && !json => {
                eprintln!(
                    "note: {} is {}: no tcgen05 there, so step {} runs under the tcgen05 emulation (correctness only; no timings). Use --no-emulate to refuse.",
                    g.info.name, g.info.sm(), step.info().number
                );
                None
            }
            Ok(_) => None,
            Err(e) if mode_forced => return Err(anyhow!(e)),
            Err(e) => Some(e),
        },
        GpuStatus::Absent(why) => {
            if mode_forced && opts.emulate == EmulateMode::Always {
                bail!("--emulate needs an sm_90 GPU: {why}");
            }
            Some(format!("no GPU to run on ({why})"))
        }
    };
    match (status, why_not) {
        (GpuStatus::Present(g), None) => {
            let r = run::run(step, &g, opts)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else {
                report::print_run(step, &r);
            }
            Ok(if r.verification.passed {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        (_, reason) => {
            let reason = reason.unwrap_or_default();
            // Shapes are still checked, so a bad --m is reported here too.
            let shape = opts.shape.unwrap_or(Shape::DEFAULT);
            step.check_shape(shape).map_err(|e| anyhow!(e))?;
            let source = opts
                .source
                .clone()
                .unwrap_or_else(|| step.info().kernel_source());
            let compiled = compile(&source, Target::Sm100a, &step.defines(opts.dtype))?;
            let listing = sass::disassemble(&compiled.cubin)?;
            let plan = step.plan(shape, None);
            if json {
                let v = serde_json::json!({
                    "step": step.info().number, "ran": false, "reason": reason,
                    "target": Target::Sm100a, "compile": &compiled,
                    "smem_bytes": plan.dims.smem_bytes, "grid": plan.dims.grid, "sass": &listing,
                });
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                report::print_header(step);
                println!("{:<10}{reason}: compiled for sm_100a only", "GPU");
                report::print_compile(&compiled, plan.dims.smem_bytes);
                report::print_sass(&listing, step.info().sass_expect, false);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
