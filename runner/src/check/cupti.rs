//! `runner check cupti`: can this machine count the instructions a kernel executed, the way the
//! grader's technique requirements need? CUPTI's SASS metrics (`common::cupti`) are tried on
//! kernels whose counts are known before they run:
//!
//! - `probe`: a kernel of one block-sized store per thread (`out[i] = 3 * i + 1`): the store
//!   executes once per warp, so its warp-level count is the number of warps launched, exactly;
//! - the stock Hopper twins of steps 0 and 3 at 512x512x256 (the grader's measured launch):
//!   every k-block of every CTA tile issues its wgmma, so `HGMMA` executes at least once per CTA
//!   tile and k-block, and step 3 multicasts its B loads.
//!
//! Each case is one enable/disable range around a fresh module load and one launch, with the
//! grader's configuration (three metrics, lazy patching) and, for the probe, the variants that
//! tell a configuration CUPTI refuses from a machine where it counts nothing at all: one metric;
//! every function patched at once; after a cuBLAS GEMM; after `cuptiGetCubinCrc`. The verdict:
//! verified when every grader-configuration case counted what it must.

use anyhow::{anyhow, Context, Result};
use common::compile::{compile, KernelSource, Target};
use common::cublas::Blas;
use common::cupti::{self, Cupti, Measurement, INST_EXECUTED};
use common::gpu::{self, check as cu_check, dptr, CudaResultExt, Gpu, GpuStatus};
use common::problem::{Dist, Problem};
use common::run::{launch_and_wait, DeviceProblem, LoadedKernel};
use common::step::{Arch, KernelSpec};
use common::verdict::Verdict;
use common::{Dtype, Shape};
use cudarc::driver::sys;
use cudarc::nvrtc::Ptx;
use std::collections::BTreeMap;
use std::ffi::c_void;
use std::time::Duration;

const PROBE: &str = r#"extern "C" __global__ void probe(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = 3 * i + 1;
}
"#;
const PROBE_BLOCKS: u32 = 64;
const PROBE_THREADS: u32 = 256;

/// How one case configures CUPTI.
#[derive(Clone, Copy)]
struct Config {
    all_metrics: bool,
    lazy: bool,
}

const GRADER: Config = Config {
    all_metrics: true,
    lazy: true,
};

/// One case's outcome.
#[derive(serde::Serialize, serde::Deserialize)]
struct Row {
    case: String,
    /// Whether it is the grader's configuration (the verdict rests on these).
    grader: bool,
    records: usize,
    instances: usize,
    /// What was expected and what was counted, in words.
    counted: String,
    ok: bool,
}

/// The cases, each run in a child process of its own: CUPTI refuses a second configuration in
/// one process (`cuptiSassMetricsSetConfig` answers out of memory), and the grader's measuring
/// child configures it once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Case {
    /// The probe kernel, the grader's configuration.
    Probe,
    /// The probe, warp-level executions only.
    ProbeInstOnly,
    /// The probe, every function patched at enable.
    ProbeEager,
    /// The probe after a cuBLAS GEMM outside the range.
    ProbeAfterCublas,
    /// The probe after `cuptiGetCubinCrc`.
    ProbeAfterCrc,
    /// The probe loaded and launched through the driver API directly (no cudarc module).
    ProbeRawDriver,
    /// The probe with a `cuMemsetD8Async` inside the range, before its launch.
    ProbeMemsetInside,
    /// The probe compiled by nvcc rather than NVRTC (the cubin named by
    /// `WORKBOOK_CUPTI_PROBE_CUBIN`; skipped without it).
    ProbeNvccCubin,
    /// Step 0's Hopper twin.
    Step0,
    /// Step 3's Hopper twin.
    Step3,
}

impl Case {
    const ALL: [Case; 10] = [
        Case::ProbeInstOnly,
        Case::Probe,
        Case::ProbeEager,
        Case::ProbeAfterCublas,
        Case::ProbeAfterCrc,
        Case::ProbeRawDriver,
        Case::ProbeNvccCubin,
        Case::ProbeMemsetInside,
        Case::Step0,
        Case::Step3,
    ];
    fn grader(self) -> bool {
        matches!(
            self,
            Case::Probe | Case::ProbeAfterCublas | Case::Step0 | Case::Step3
        )
    }
    fn describe(self) -> &'static str {
        match self {
            Case::Probe => "probe kernel, the grader's configuration",
            Case::ProbeInstOnly => "probe, one metric (warp-level executions)",
            Case::ProbeEager => "probe, every function patched at enable",
            Case::ProbeAfterCublas => "probe, after a cuBLAS GEMM",
            Case::ProbeAfterCrc => "probe, after cuptiGetCubinCrc",
            Case::ProbeRawDriver => "probe, loaded and launched by the driver API directly",
            Case::ProbeNvccCubin => "probe compiled by nvcc, not NVRTC",
            Case::ProbeMemsetInside => "probe, a cuMemsetD8Async inside the range",
            Case::Step0 => "step 0's Hopper twin at 512x512x256 f16",
            Case::Step3 => "step 3's Hopper twin at 512x512x256 f16",
        }
    }
}

const ROW_PREFIX: &str = "check-cupti-row\t";

/// The parent: every case in a child (`runner check cupti --case X`), one table.
pub fn check(gpu_first: bool) -> Result<Verdict> {
    let exe = std::env::current_exe().context("cannot find the runner's own path")?;
    let mut rows = Vec::new();
    for case in Case::ALL {
        let name = clap::ValueEnum::to_possible_value(&case)
            .map(|v| v.get_name().to_string())
            .unwrap_or_default();
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["check", "cupti", "--case", &name]);
        if gpu_first {
            cmd.arg("--gpu-first");
        }
        let out = cmd
            .output()
            .with_context(|| format!("cannot run {}", exe.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let row = stdout
            .lines()
            .find_map(|l| l.strip_prefix(ROW_PREFIX))
            .and_then(|j| serde_json::from_str::<Row>(j).ok());
        for l in stdout.lines().filter(|l| !l.starts_with(ROW_PREFIX)) {
            println!("  [{name}] {l}");
        }
        rows.push(row.unwrap_or_else(|| Row {
            case: case.describe().to_string(),
            grader: case.grader(),
            records: 0,
            instances: 0,
            counted: format!(
                "the child ended without a result ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ),
            ok: false,
        }));
    }
    println!(
        "\n| case | grader's configuration | records | instances | counted | ok |\n|---|---|---|---|---|---|"
    );
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            r.case,
            if r.grader { "yes" } else { "no" },
            r.records,
            r.instances,
            r.counted,
            if r.ok { "yes" } else { "NO" }
        );
    }
    let ok = rows.iter().filter(|r| r.grader).all(|r| r.ok);
    println!(
        "\n{}",
        if ok {
            "CUPTI counts executed instructions here: the grader's technique requirements can be proven on this machine."
        } else {
            "CUPTI did not count what it must in the grader's configuration: technique requirements graded here earn no points (the report says so per requirement)."
        }
    );
    Ok(if ok {
        Verdict::Verified
    } else {
        Verdict::Failed
    })
}

/// A child: one case, its row printed as one line the parent reads.
pub fn run_case(case: Case, gpu_first: bool) -> Result<Verdict> {
    let row =
        one_case(case, gpu_first).unwrap_or_else(|e| failed(case.describe(), case.grader(), e));
    println!("{ROW_PREFIX}{}", serde_json::to_string(&row)?);
    Ok(if row.ok {
        Verdict::Verified
    } else {
        Verdict::Failed
    })
}

fn one_case(case: Case, gpu_first: bool) -> Result<Row> {
    let open_gpu = || match gpu::open() {
        GpuStatus::Present(g) => Ok(g),
        GpuStatus::Absent(why) => Err(anyhow!(
            "runner check cupti counts executed instructions on a GPU: {why}"
        )),
    };
    let (gpu, mut c) = if gpu_first {
        let g = open_gpu()?;
        (g, Cupti::open(&cupti::find_or_install()?)?)
    } else {
        let c = Cupti::open(&cupti::find_or_install()?)?;
        (open_gpu()?, c)
    };
    gpu.ctx
        .bind_to_thread()
        .map_err(|e| anyhow!("cannot make the context current: {e:?}"))?;
    c.initialize(gpu.ctx.ordinal() as u32)?;
    println!(
        "GPU {} ({}), CUPTI {} (API version {}), chip {}, loaded {} the GPU was opened",
        gpu.info.name,
        gpu.info.sm(),
        c.path.display(),
        c.api_version,
        c.chip.as_deref().unwrap_or("?"),
        if gpu_first { "after" } else { "before" }
    );
    for line in loaded_libraries() {
        println!("loaded: {line}");
    }
    let tk = common::toolkit::get()?;
    let nvdisasm = tk.nvdisasm()?;
    let shape = Shape {
        m: 512,
        n: 512,
        k: 256,
    };
    match case {
        Case::Step0 | Case::Step3 => {
            let dp = DeviceProblem::upload(
                &gpu,
                Problem::generate(shape, Dtype::F16, Dist::Gaussian, 7),
            )?;
            step_case(
                &gpu,
                &c,
                &nvdisasm,
                if case == Case::Step0 { 0 } else { 3 },
                &dp,
            )
        }
        _ => {
            let probe_src = KernelSource {
                path: "probe.cu".into(),
                text: PROBE.into(),
            };
            let mut probe =
                compile(&probe_src, Target::Sm90a, &[]).context("compiling the probe kernel")?;
            if let Some(dump) = std::env::var_os("WORKBOOK_CUPTI_PROBE_DUMP") {
                std::fs::write(&dump, &probe.cubin).context("writing the probe's cubin")?;
            }
            if case == Case::ProbeNvccCubin {
                let path = std::env::var_os("WORKBOOK_CUPTI_PROBE_CUBIN").ok_or_else(|| {
                    anyhow!("skipped: WORKBOOK_CUPTI_PROBE_CUBIN names no nvcc-built probe cubin")
                })?;
                probe.cubin = std::fs::read(&path).context("reading the nvcc-built probe")?;
            }
            let map = instruction_map(&nvdisasm, &probe.cubin, "probe")?;
            let cfg = match case {
                Case::ProbeInstOnly => Config {
                    all_metrics: false,
                    lazy: true,
                },
                Case::ProbeEager => Config {
                    all_metrics: true,
                    lazy: false,
                },
                _ => GRADER,
            };
            if case == Case::ProbeAfterCublas {
                let blas = Blas::new(&gpu)?;
                let dp = DeviceProblem::upload(
                    &gpu,
                    Problem::generate(shape, Dtype::F16, Dist::Gaussian, 7),
                )?;
                let (a, b, _) = dp.ptrs(&gpu);
                let scratch = gpu
                    .stream
                    .alloc_zeros::<f32>(shape.m * shape.n)
                    .cuda("allocate GPU memory")?;
                blas.gemm(shape, Dtype::F16, a, b, dptr(&scratch, &gpu), true)?;
                gpu.stream.synchronize().cuda("cuBLAS GEMM")?;
            }
            if case == Case::ProbeAfterCrc {
                let crc = c.cubin_crc(&probe.cubin)?;
                println!("cuptiGetCubinCrc: {crc:#x}");
            }
            probe_case(&gpu, &c, &probe.cubin, &map, case, cfg)
        }
    }
}

/// (function, offset) -> opcode of `entry` and its callees in `cubin`.
fn instruction_map(
    nvdisasm: &std::path::Path,
    cubin: &[u8],
    entry: &str,
) -> Result<BTreeMap<(String, u32), String>> {
    let dir = std::env::temp_dir().join(format!(
        "workbook-check-cupti-{}-{entry}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let file = dir.join("kernel.cubin");
    std::fs::write(&file, cubin).with_context(|| format!("cannot write {}", file.display()))?;
    let listing = common::sass::listing_of(nvdisasm, &file);
    let _ = std::fs::remove_dir_all(&dir);
    let listing = listing?;
    Ok(common::sass::instructions_of_kernel(&listing, entry)?
        .into_iter()
        .map(|i| ((i.function, i.offset), i.op))
        .collect())
}

/// Warp-level executions per opcode prefix of the records that map to `map`.
fn by_opcode(m: &Measurement, map: &BTreeMap<(String, u32), String>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for r in &m.records {
        if let Some(op) = map.get(&(r.function.clone(), r.pc_offset)) {
            *out.entry(op.clone()).or_insert(0) +=
                r.values.get(INST_EXECUTED).copied().unwrap_or(0);
        }
    }
    out
}

fn session<'a>(gpu: &Gpu, c: &'a Cupti, cfg: Config) -> Result<cupti::Session<'a>> {
    gpu.ctx
        .bind_to_thread()
        .map_err(|e| anyhow!("cannot make the context current: {e:?}"))?;
    let metrics: &[&str] = if cfg.all_metrics {
        &cupti::METRICS
    } else {
        &[INST_EXECUTED]
    };
    c.start_with(
        gpu.ctx.cu_ctx() as *mut c_void,
        gpu.ctx.ordinal() as u32,
        metrics,
        cfg.lazy,
    )
}

fn failed(case: &str, grader: bool, e: anyhow::Error) -> Row {
    Row {
        case: case.to_string(),
        grader,
        records: 0,
        instances: 0,
        counted: format!("error: {}", format!("{e:#}").replace('\n', " ")),
        ok: false,
    }
}

fn probe_case(
    gpu: &Gpu,
    c: &Cupti,
    cubin: &[u8],
    map: &BTreeMap<(String, u32), String>,
    case: Case,
    cfg: Config,
) -> Result<Row> {
    let run = || -> Result<Row> {
        let n = (PROBE_BLOCKS * PROBE_THREADS) as i32;
        let out = gpu
            .stream
            .alloc_zeros::<i32>(n as usize)
            .cuda("allocate GPU memory")?;
        gpu.stream.synchronize().cuda("allocate GPU memory")?;
        let mut ptr = dptr(&out, gpu);
        let s = session(gpu, c, cfg)?;
        println!("metric ids: {:?}", s.metric_ids());
        if case == Case::ProbeMemsetInside {
            // SAFETY: `out` holds n ints.
            cu_check(
                unsafe { sys::cuMemsetD8Async(ptr, 0, n as usize * 4, gpu.stream.cu_stream()) },
                "cuMemsetD8Async",
            )?;
        }
        let (_module, func) = if case == Case::ProbeRawDriver {
            (None, raw_load(cubin)?)
        } else {
            let module = gpu
                .ctx
                .load_module(Ptx::from_binary(cubin.to_vec()))
                .map_err(|e| anyhow!("cannot load the probe: {e:?}"))?;
            let func = module
                .load_function("probe")
                .map_err(|e| anyhow!("no probe function: {e:?}"))?
                .cu_function();
            (Some(module), func)
        };
        let mut n_arg = n;
        let mut params: [*mut c_void; 2] = [
            (&mut ptr as *mut sys::CUdeviceptr).cast(),
            (&mut n_arg as *mut i32).cast(),
        ];
        // SAFETY: `func` takes (int*, int); `params` points at live values of those types.
        cu_check(
            unsafe {
                sys::cuLaunchKernel(
                    func,
                    PROBE_BLOCKS,
                    1,
                    1,
                    PROBE_THREADS,
                    1,
                    1,
                    0,
                    gpu.stream.cu_stream(),
                    params.as_mut_ptr(),
                    std::ptr::null_mut(),
                )
            },
            "launching the probe",
        )?;
        gpu.stream.synchronize().cuda("the probe")?;
        let m = s.finish()?;
        let ops = by_opcode(&m, map);
        let stores: u64 = ops
            .iter()
            .filter(|(op, _)| op.starts_with("STG"))
            .map(|(_, v)| *v)
            .sum();
        let warps = u64::from(PROBE_BLOCKS * PROBE_THREADS / 32);
        Ok(Row {
            case: case.describe().to_string(),
            grader: case.grader(),
            records: m.records.len(),
            instances: m.instances,
            counted: format!("STG executed by {stores} warps (expected {warps})"),
            ok: stores == warps,
        })
    };
    run()
}

fn step_case(
    gpu: &Gpu,
    c: &Cupti,
    nvdisasm: &std::path::Path,
    step: u32,
    dp: &DeviceProblem,
) -> Result<Row> {
    let case = format!("step {step}'s Hopper twin at 512x512x256 f16");
    let run = || -> Result<Row> {
        let spec = KernelSpec::new(runner::steps::get(step)?, Arch::Hopper);
        let compiled = compile(&spec.source(), Target::Sm90a, &spec.defines(Dtype::F16))?;
        let map = instruction_map(nvdisasm, &compiled.cubin, "gemm_kernel")?;
        let s = session(gpu, c, GRADER)?;
        let kernel = LoadedKernel::from_compiled(gpu, &spec, compiled, &spec.source().path)?;
        let plan = kernel.plan(gpu, dp.shape(), None)?;
        let args = dp.args(gpu, &plan)?;
        launch_and_wait(gpu, &kernel, &plan, &args, None, 0, Duration::from_secs(30))?;
        let m = s.finish()?;
        let ops = by_opcode(&m, &map);
        let sum = |p: &str| -> u64 {
            ops.iter()
                .filter(|(op, _)| op.starts_with(p))
                .map(|(_, v)| *v)
                .sum()
        };
        let (hgmma, multicast) = (sum("HGMMA"), sum("UTMALDG.2D.MULTICAST"));
        let tiles = u64::from(plan.dims.num_ctas());
        let kblocks = (dp.shape().k as u64) / u64::from(spec.shape().tile_k);
        let ok = hgmma >= tiles * kblocks && (step != 3 || multicast > 0);
        Ok(Row {
            case: case.clone(),
            grader: true,
            records: m.records.len(),
            instances: m.instances,
            counted: format!(
                "HGMMA {hgmma} warp-executions (at least {} expected: {tiles} CTAs x {kblocks} k-blocks){}",
                tiles * kblocks,
                if step == 3 {
                    format!(", UTMALDG.2D.MULTICAST {multicast}")
                } else {
                    String::new()
                }
            ),
            ok,
        })
    };
    run()
}

/// The CUDA driver and CUPTI libraries this process has mapped: two drivers in one process
/// (one loaded by name, one by CUPTI's link) would each see half of the work.
fn loaded_libraries() -> Vec<String> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return vec!["(no /proc/self/maps)".into()];
    };
    let mut seen: Vec<String> = Vec::new();
    for line in maps.lines() {
        let Some(path) = line.split_whitespace().nth(5) else {
            continue;
        };
        let name = path.rsplit('/').next().unwrap_or(path);
        if (name.starts_with("libcuda")
            || name.starts_with("libcupti")
            || name.starts_with("libnvperf"))
            && !seen.iter().any(|s| s == path)
        {
            seen.push(path.to_string());
        }
    }
    seen
}

/// Load `cubin` and find `probe` through the driver API alone (`cuModuleLoadData`,
/// `cuModuleGetFunction`), as a C program does. The module stays loaded for the process's life.
fn raw_load(cubin: &[u8]) -> Result<sys::CUfunction> {
    let mut module: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: `cubin` is a complete cubin image; the out pointer is valid.
    cu_check(
        unsafe { sys::cuModuleLoadData(&mut module, cubin.as_ptr().cast()) },
        "cuModuleLoadData",
    )?;
    let mut func: sys::CUfunction = std::ptr::null_mut();
    // SAFETY: `module` was loaded above; the name is NUL-terminated.
    cu_check(
        unsafe { sys::cuModuleGetFunction(&mut func, module, c"probe".as_ptr()) },
        "cuModuleGetFunction",
    )?;
    Ok(func)
}
