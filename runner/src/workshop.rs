//! `runner workshop check`: the pre-flight of a machine before a workshop. The laptop path,
//! always: the checkout, the toolkit (NVRTC, headers, nvdisasm), a kernel compile, free disk
//! space, a step simulated and verified on the CPU, a seeded bug caught by the simulator, and
//! the book built. Then the GPU and what it runs, cuBLAS against the CPU reference and the
//! clocks: a failure where a GPU is asked for (`--gpu`) or present, a note of what a GPU would
//! add where there is none.

use anyhow::Result;
use common::gpu::{self, GpuStatus};
use common::step::{Arch, KernelSpec};
use std::path::Path;
use std::process::ExitCode;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    Ok,
    Warn,
    Fail,
    /// Could not run here (no GPU): neither passed nor failed.
    Skip,
    /// Not asked for here: what a GPU would add to a laptop workshop.
    Note,
}

impl Mark {
    fn word(self) -> &'static str {
        match self {
            Mark::Ok => "ok",
            Mark::Warn => "warn",
            Mark::Fail => "FAIL",
            Mark::Skip => "skip",
            Mark::Note => "note",
        }
    }
}

struct Item {
    mark: Mark,
    what: &'static str,
    detail: String,
}

/// Free bytes on the file system holding `path`.
pub fn free_bytes(path: &Path) -> Option<u64> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `s` a writable statvfs.
    (unsafe { libc::statvfs(c.as_ptr(), &mut s) } == 0)
        .then(|| s.f_bavail as u64 * s.f_frsize as u64)
}

/// Disk space a lab machine should have free: the toolkit wheels, builds and grading scratch.
pub const MIN_FREE_BYTES: u64 = 5 << 30;

/// `path`, or its nearest folder that exists (a toolkit cache not created yet).
fn existing(path: &Path) -> &Path {
    path.ancestors().find(|p| p.exists()).unwrap_or(path)
}

/// Which checkout this runner uses, found from where it runs (never where it was built).
fn project(items: &mut Vec<Item>) {
    items.push(match common::project::root() {
        Some(r) => Item {
            mark: Mark::Ok,
            what: "checkout",
            detail: format!("kernels, headers and chapters from {}", r.display()),
        },
        None => Item {
            mark: Mark::Warn,
            what: "checkout",
            detail: "none in this folder or above it: the runner uses its built-in kernels and chapters (run it inside the workbook's folder, or set WORKBOOK_ROOT)".into(),
        },
    });
}

fn disk(item: &mut Vec<Item>) {
    let mut dirs = vec![(
        "disk (toolkit)",
        existing(&common::toolkit::pypi_dir()).to_path_buf(),
    )];
    if let Some(r) = common::project::root() {
        dirs.push(("disk (project)", r.to_path_buf()));
    }
    dirs.push(("disk (temp)", std::env::temp_dir()));
    for (what, dir) in dirs {
        let (mark, detail) = match free_bytes(&dir) {
            Some(b) if b >= MIN_FREE_BYTES => (
                Mark::Ok,
                format!(
                    "{:.1} GiB free in {}",
                    b as f64 / (1u64 << 30) as f64,
                    dir.display()
                ),
            ),
            Some(b) => (
                Mark::Fail,
                format!(
                    "only {:.1} GiB free in {} (want 5 GiB)",
                    b as f64 / (1u64 << 30) as f64,
                    dir.display()
                ),
            ),
            None => (
                Mark::Warn,
                format!("cannot read the free space of {}", dir.display()),
            ),
        };
        item.push(Item { mark, what, detail });
    }
}

fn toolkit(items: &mut Vec<Item>) {
    match common::toolkit::get() {
        Ok(tk) => {
            let v = common::compile::nvrtc_version()
                .map(|(a, b)| format!("{a}.{b}"))
                .unwrap_or_default();
            items.push(Item {
                mark: Mark::Ok,
                what: "toolkit",
                detail: format!("NVRTC {v} from {}", tk.origin),
            });
            match tk.nvdisasm() {
                Ok(p) => items.push(Item {
                    mark: Mark::Ok,
                    what: "nvdisasm",
                    detail: p.display().to_string(),
                }),
                Err(e) => items.push(Item {
                    mark: Mark::Fail,
                    what: "nvdisasm",
                    detail: format!("{e:#}"),
                }),
            }
            let spec = KernelSpec::new(step0(), Arch::Blackwell);
            let t0 = std::time::Instant::now();
            match common::compile::compile(
                &spec.source(),
                common::Target::Sm100a,
                &spec.defines(common::Dtype::F16),
            ) {
                Ok(c) => items.push(Item {
                    mark: Mark::Ok,
                    what: "compile",
                    detail: format!(
                        "step 0 for sm_100a in {:.1} s, {}",
                        t0.elapsed().as_secs_f64(),
                        c.resources.describe()
                    ),
                }),
                Err(e) => items.push(Item {
                    mark: Mark::Fail,
                    what: "compile",
                    detail: format!("{e:#}").lines().next().unwrap_or("").to_string(),
                }),
            }
        }
        Err(e) => items.push(Item {
            mark: Mark::Fail,
            what: "toolkit",
            detail: format!("{e:#}"),
        }),
    }
}

fn step0() -> &'static dyn common::Step {
    runner::steps::all()[0]
}

/// The laptop path: step 0's Blackwell kernel simulated on the CPU and verified, then a seeded
/// bug (`wrong-parity`) that the simulator must report as a deadlock. Needs the toolkit (the
/// simulator runs NVRTC's PTX).
fn simulator(items: &mut Vec<Item>) {
    use common::simulate::{self, SimOptions, SimProblem};
    let spec = KernelSpec::new(step0(), Arch::Blackwell);
    let problem = SimProblem {
        shape: None,
        dtype: common::Dtype::F16,
        dist: common::Dist::Gaussian,
        seed: 2024,
        clusters: None,
        static_check: true,
        cpu_samples: 256,
    };
    let t0 = std::time::Instant::now();
    let stock = simulate::simulate(&spec, &spec.source(), &problem, &SimOptions::default());
    items.push(match stock {
        Ok(r) if r.passed() => Item {
            mark: Mark::Ok,
            what: "simulator",
            detail: format!(
                "step 0's Blackwell kernel simulated at {} and verified in {:.1} s (`runner step 0`)",
                r.shape,
                t0.elapsed().as_secs_f64()
            ),
        },
        Ok(r) => Item {
            mark: Mark::Fail,
            what: "simulator",
            detail: format!(
                "step 0's stock kernel did not verify on the simulator: {}",
                r.failure.as_ref().map_or_else(
                    || r.verification.as_ref().map_or(String::new(), |v| v.summary()),
                    |f| f.message.lines().next().unwrap_or("").to_string()
                )
            ),
        },
        Err(e) => Item {
            mark: Mark::Fail,
            what: "simulator",
            detail: format!("{e:#}").lines().next().unwrap_or("").to_string(),
        },
    });
    const BUG: &str = "wrong-parity";
    let seeded = common::mutation::lookup(BUG).and_then(|(m, _)| {
        let source = common::compile::KernelSource {
            path: spec.source().path,
            text: m.apply(&spec.source().text)?,
        };
        simulate::simulate(&spec, &source, &problem, &SimOptions::default())
    });
    items.push(match seeded {
        // A wrong parity shows as a deadlock or, when the producer refills a slot the MMA
        // still reads, as that ordering rule: either way the simulator catches it.
        Ok(r) if r.failure.as_ref().is_some_and(|f| f.kind == "deadlock" || f.kind == "rule") => Item {
            mark: Mark::Ok,
            what: "seeded bug",
            detail: format!(
                "step 0 with {BUG}: the simulator catches it ({}; `runner step 0 --mutate {BUG}`)",
                r.failure.as_ref().map_or("", |f| match &f.rule {
                    Some(rule) => rule.as_str(),
                    None => "a deadlock",
                })
            ),
        },
        Ok(r) => Item {
            mark: Mark::Fail,
            what: "seeded bug",
            detail: format!(
                "step 0 with {BUG} should be caught on the simulator (a rule or a deadlock), but it {}",
                match &r.failure {
                    Some(f) => format!("stopped otherwise: {}", f.message.lines().next().unwrap_or("")),
                    None if r.passed() => "verified".to_string(),
                    None => "gave a wrong result".to_string(),
                }
            ),
        },
        Err(e) => Item {
            mark: Mark::Fail,
            what: "seeded bug",
            detail: format!("{e:#}").lines().next().unwrap_or("").to_string(),
        },
    });
}

/// The book builds (into a scratch folder of the temp folder, removed afterwards): the chapters,
/// the figures and the instructor chapter's plans are what a workshop reads.
fn book(items: &mut Vec<Item>) {
    let dir = std::env::temp_dir().join(format!("workbook-workshop-book-{}", std::process::id()));
    let t0 = std::time::Instant::now();
    let built = crate::book::build(Some(dir.clone()));
    let _ = std::fs::remove_dir_all(&dir);
    items.push(match built {
        Ok(_) => Item {
            mark: Mark::Ok,
            what: "book",
            detail: format!(
                "built in {:.1} s (`runner book --serve` shows it; `runner explain N` in the terminal)",
                t0.elapsed().as_secs_f64()
            ),
        },
        Err(e) => Item {
            mark: Mark::Fail,
            what: "book",
            detail: format!("{e:#}").lines().next().unwrap_or("").to_string(),
        },
    });
}

/// What a GPU adds to the laptop workshop, said where there is none.
pub const GPU_ADDS: &str = "timings against cuBLAS, the Hopper twins run natively, the timed parts of exercises 0.1, 1.2, 2.1 and 6.2, `runner bench`, and grading of Hopper rubrics";

fn gpu_checks(items: &mut Vec<Item>, gpu_asked: bool) {
    let g = match gpu::open() {
        GpuStatus::Present(g) => g,
        GpuStatus::Absent(why) if !gpu_asked => {
            items.push(Item {
                mark: Mark::Note,
                what: "GPU",
                detail: format!("none ({why}): the laptop workshop needs none; a GPU would add {GPU_ADDS} (`workshop check --gpu` requires one)"),
            });
            return;
        }
        GpuStatus::Absent(why) => {
            items.push(Item {
                mark: Mark::Fail,
                what: "GPU",
                detail: format!("{why}: a GPU workshop's runs need an H100/H200 (or a B200); without one, run the laptop workshop (`runner workshop check` without --gpu)"),
            });
            for what in ["cuBLAS", "clocks"] {
                items.push(Item {
                    mark: Mark::Skip,
                    what,
                    detail: "needs the GPU".into(),
                });
            }
            return;
        }
    };
    let runs = match g.info.compute_capability {
        (9, 0) => "Hopper twins natively (timed), Blackwell kernels under the tcgen05 emulation",
        (10, 0) => "Blackwell kernels natively (timed)",
        _ => "nothing: the kernels need sm_90 or sm_100",
    };
    let mark = if matches!(g.info.compute_capability, (9, 0) | (10, 0)) {
        Mark::Ok
    } else {
        Mark::Fail
    };
    items.push(Item {
        mark,
        what: "GPU",
        detail: format!(
            "{} ({}, {} SMs, driver {}): runs {runs}",
            g.info.name,
            g.info.sm(),
            g.info.sm_count,
            g.info.driver_version
        ),
    });
    let shape = common::Shape {
        m: 1024,
        n: 1024,
        k: 1024,
    };
    match common::run::selftest(&g, shape, common::Dtype::F16, 1, 5) {
        Ok(t) if t.verification.passed => items.push(Item {
            mark: Mark::Ok,
            what: "cuBLAS",
            detail: format!(
                "verified against fp64; {:.0} TFLOP/s at 1024^3",
                t.cublas_tflops
            ),
        }),
        Ok(t) => items.push(Item {
            mark: Mark::Fail,
            what: "cuBLAS",
            detail: t.verification.summary(),
        }),
        Err(e) => items.push(Item {
            mark: Mark::Fail,
            what: "cuBLAS",
            detail: format!("{e:#}"),
        }),
    }
    match crate::provenance::smi(
        "clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,persistence_mode",
    ) {
        Some(line) => {
            let persistence_on = line.to_ascii_lowercase().contains("enabled");
            items.push(Item {
                mark: if persistence_on { Mark::Ok } else { Mark::Warn },
                what: "clocks",
                detail: format!("SM, max SM, memory, temperature, persistence: {line}{}", if persistence_on { "" } else { " (persistence mode off: the first run of each process pays for initialisation)" }),
            });
        }
        None => items.push(Item {
            mark: Mark::Warn,
            what: "clocks",
            detail: "nvidia-smi is not available: clocks unchecked".into(),
        }),
    }
}

/// Run every check; with `json`, print one object `{"checks": [...], "ready": bool}`. `gpu`: the
/// machine must have a GPU that runs the kernels (a GPU lab); else the laptop path decides.
pub fn check(json: bool, gpu: bool) -> Result<ExitCode> {
    let mut items = Vec::new();
    project(&mut items);
    toolkit(&mut items);
    disk(&mut items);
    // The simulator compiles with the toolkit: without one its failure would only repeat it.
    if items
        .iter()
        .any(|i| i.what == "toolkit" && i.mark == Mark::Ok)
    {
        simulator(&mut items);
    } else {
        items.push(Item {
            mark: Mark::Skip,
            what: "simulator",
            detail: "needs the toolkit (above)".into(),
        });
    }
    book(&mut items);
    gpu_checks(&mut items, gpu);
    let no_gpu = items
        .iter()
        .any(|i| i.what == "GPU" && i.mark == Mark::Note);
    let fails = items.iter().filter(|i| i.mark == Mark::Fail).count();
    if json {
        let checks: Vec<_> = items
            .iter()
            .map(|i| serde_json::json!({"check": i.what, "status": i.mark.word().to_ascii_lowercase(), "detail": i.detail}))
            .collect();
        let v = crate::report::envelope(
            "workshop-check",
            serde_json::json!({ "checks": checks, "ready": fails == 0 }),
        );
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for i in &items {
            println!("{:<4}  {:<16} {}", i.mark.word(), i.what, i.detail);
        }
        println!(
            "{}",
            if fails > 0 {
                format!("{fails} check(s) failed: see the instructor chapter (`runner explain instructor`) for an offline lab")
            } else if no_gpu {
                "this machine is ready for the laptop workshop: every hands-on step runs on the CPU simulator (the plan: `runner explain instructor`, \"A workshop on laptops\")".to_string()
            } else {
                "this machine is ready for the workshop (run `runner grade --selftest` too before grading)".to_string()
            }
        );
    }
    Ok(if fails == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
