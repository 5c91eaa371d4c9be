//! `runner workshop check`: the pre-flight of a lab machine before a workshop: the GPU and
//! what it runs, the toolkit (NVRTC, headers, nvdisasm), a kernel compile, cuBLAS against the
//! CPU reference, free disk space, and the clocks.

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
}

impl Mark {
    fn word(self) -> &'static str {
        match self {
            Mark::Ok => "ok",
            Mark::Warn => "warn",
            Mark::Fail => "FAIL",
            Mark::Skip => "skip",
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

fn gpu_checks(items: &mut Vec<Item>) {
    let g = match gpu::open() {
        GpuStatus::Present(g) => g,
        GpuStatus::Absent(why) => {
            items.push(Item {
                mark: Mark::Fail,
                what: "GPU",
                detail: format!("{why}: the workshop's runs need an H100/H200 (or a B200)"),
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

/// Run every check; with `json`, print one object `{"checks": [...], "ready": bool}`.
pub fn check(json: bool) -> Result<ExitCode> {
    let mut items = Vec::new();
    project(&mut items);
    toolkit(&mut items);
    disk(&mut items);
    gpu_checks(&mut items);
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
            if fails == 0 {
                "this machine is ready for the workshop (run `runner grade --selftest` too before grading)".to_string()
            } else {
                format!("{fails} check(s) failed: see the instructor chapter (`runner book`) for an offline lab")
            }
        );
    }
    Ok(if fails == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
