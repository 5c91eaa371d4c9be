//! Running a kernel on a GPU, in stages that `runner step`, `runner bench` and the grader share:
//! [`LoadedKernel::load`] compiles and loads a kernel, [`LoadedKernel::plan`] sizes its launch
//! for a shape, [`DeviceProblem`] holds the inputs and the output on the GPU, [`LaunchArgs`]
//! binds a launch to buffers, [`launch_and_wait`] runs it once under a hang limit (with the
//! emulation's bookkeeping), [`cublas_reference`] and [`crate::verify`] check it, and
//! [`crate::timing`] times it. [`run`] strings them together for one kernel.

use crate::compile::{compile, Compiled, FuncAttributes, KernelSource, Target};
use crate::cublas::{Blas, Warmup};
use crate::emulation::EmuBuffers;
pub use crate::gpu::dptr;
use crate::gpu::CudaResultExt;
use crate::gpu::{check, launch, max_active_clusters, tensor_map_2d, Gpu, GpuInfo};
use crate::nvml::{DeviceState, Nvml};
use crate::problem::{Dist, Dtype, Problem, Shape};
use crate::step::{Arch, KernelSpec, OutputArg, Params, Plan, Schedule};
use crate::timing::{
    sync_diagnosed, sync_with_timeout, time_rounds, Clocks, Launch, Protocol, Stats,
};
use crate::trace::{self, Recording, TraceBuffer};
use crate::verify::{verify, Verification};
use anyhow::{anyhow, bail, Context, Result};
use cudarc::driver::sys;
use cudarc::driver::{CudaModule, CudaSlice};
use cudarc::nvrtc::Ptx;
use serde::{Deserialize, Serialize};
use std::ffi::c_void;
use std::sync::Arc;
use std::time::Duration;

/// Whether a Blackwell kernel runs under the tcgen05 emulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmulateMode {
    /// Native on sm_100, emulated (with a notice) on sm_90.
    Auto,
    Always,
    Never,
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    /// None: the default shape for the mode (full size native, small emulated).
    pub shape: Option<Shape>,
    pub dtype: Dtype,
    pub dist: Dist,
    pub seed: u64,
    pub warmup: usize,
    pub iters: usize,
    pub flush_l2: bool,
    pub emulate: EmulateMode,
    pub timeout: Duration,
    /// A kernel to run instead of the step's own (a student's edit, a seeded bug).
    pub source: Option<KernelSource>,
    pub cpu_samples: usize,
    /// Persistent kernels: launch at most this many clusters (several tiles per cluster on small
    /// shapes, e.g. for the emulation check). None: as many as fit on the GPU.
    pub clusters: Option<u32>,
    /// Seed of the emulation's schedule perturbations.
    pub emu_seed: u64,
    /// Record warp-role timelines (`--trace`) in the CTAs of the grid's first this-many
    /// clusters: the kernel is built with the trace calls on, and the verified launch records
    /// (after `warmup` unrecorded launches when native). A traced kernel is not timed.
    pub trace_clusters: Option<u32>,
    /// Refuse a build that fails the static checks (`common::static_check`: for a Blackwell
    /// kernel the sm_100a PTX rules and the native sm_100a compile, for a twin its PTX's TMA-store
    /// rules) before running it. Off only to see what the emulation (or the GPU) makes of such a
    /// bug (`--no-static-check`).
    pub static_check: bool,
    /// A stress build of a Hopper twin with this seed (`--stress SEED`, common::stress): seeded
    /// delays at the wrappers' named points. The run is verified, never timed.
    pub stress: Option<u64>,
    /// Build a Hopper twin as a hang diagnosis build (common.cuh's "Hang diagnosis builds"):
    /// every mbarrier wait bounded by `common::stress::HANG_BOUND`, a wait past it recorded
    /// (role, barrier, parity, what arrived) and the kernel trapped; the error is that report.
    /// Verified, never timed.
    pub hang_diagnosis: bool,
    /// When a native twin's run hangs: the command that re-runs it as a hang diagnosis build,
    /// whose report the hang's error then prints. None: the hang is reported bare.
    pub hang_rerun: Option<HangRerun>,
}

/// A command line that re-runs a hung twin as a hang diagnosis build (`runner step` with the
/// same arguments and `--hang-diagnosis`), in a process of its own: the hung kernel keeps
/// running in this one until it exits, and the GPU time-slices the two.
#[derive(Debug, Clone, PartialEq)]
pub struct HangRerun {
    pub program: std::path::PathBuf,
    pub args: Vec<std::ffi::OsString>,
}

impl HangRerun {
    /// Run it, and return its report: the lines of its `error:` (a hang diagnosis build's report
    /// starts with "twin hang:"), or what else came of it.
    pub fn run(&self) -> crate::timing::HangReport {
        let source =
            "re-run once as a hang diagnosis build (every mbarrier wait bounded), it reported"
                .to_string();
        let out = std::process::Command::new(&self.program)
            .args(&self.args)
            .stdin(std::process::Stdio::null())
            .output();
        let lines = match out {
            Err(e) => vec![format!(
                "the re-run could not start ({}: {e})",
                self.program.display()
            )],
            Ok(o) => rerun_lines(o.status.code(), &String::from_utf8_lossy(&o.stderr)),
        };
        crate::timing::HangReport { source, lines }
    }
}

/// The report in a hang diagnosis re-run's stderr, given its exit code.
pub fn rerun_lines(code: Option<i32>, stderr: &str) -> Vec<String> {
    let errors: Vec<&str> = stderr
        .lines()
        .skip_while(|l| !l.starts_with("error: "))
        .collect();
    let mut lines: Vec<String> = errors
        .iter()
        .map(|l| l.strip_prefix("error: ").unwrap_or(l).to_string())
        .collect();
    if code == Some(0) {
        lines = vec!["the diagnosis build ran to the end and verified: the hang did not recur (a race that only sometimes deadlocks?)".into()];
    } else if code == Some(124) {
        lines.insert(
            0,
            "the diagnosis build hung too, and no mbarrier wait outlived its bound: the warps wait elsewhere (a thread barrier, cluster barrier or wgmma wait), or cannot run".into(),
        );
    } else if lines.is_empty() {
        lines.push(format!(
            "the re-run ended with exit code {code:?} and no error line; its last output: {}",
            stderr.lines().last().unwrap_or("")
        ));
    }
    lines
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            shape: None,
            dtype: Dtype::F16,
            dist: Dist::Gaussian,
            seed: 2024,
            warmup: 5,
            iters: 20,
            flush_l2: true,
            emulate: EmulateMode::Auto,
            timeout: Duration::from_secs(30),
            source: None,
            cpu_samples: 256,
            clusters: None,
            emu_seed: 0,
            trace_clusters: None,
            static_check: true,
            stress: None,
            hang_diagnosis: false,
            hang_rerun: None,
        }
    }
}

/// How a step's `arch` kernel runs on this GPU, or why it cannot.
pub fn choose_target(info: &GpuInfo, arch: Arch, mode: EmulateMode) -> Result<Target, String> {
    let cc = info.compute_capability;
    match (arch, cc, mode) {
        (Arch::Hopper, (9, 0), _) => Ok(Target::Sm90a),
        (Arch::Hopper, _, _) => Err(format!(
            "the Hopper twins run on sm_90 GPUs (H100/H200); {} is {}",
            info.name,
            info.sm()
        )),
        (Arch::Blackwell, (10, 0), EmulateMode::Always) => Err(format!(
            "{} is sm_100: the emulation is built for sm_90 (Hopper) only; run natively instead",
            info.name
        )),
        (Arch::Blackwell, (10, 0), _) => Ok(Target::Sm100a),
        (Arch::Blackwell, (9, 0), EmulateMode::Never) => Err(format!(
            "{} is {}, which has no tcgen05 instructions or tensor memory; drop --no-emulate to run the kernel under the tcgen05 emulation",
            info.name,
            info.sm()
        )),
        (Arch::Blackwell, (9, 0), _) => Ok(Target::Sm90aEmulated),
        (Arch::Blackwell, _, _) => Err(format!(
            "{} is {}: the workbook's Blackwell kernels run natively on sm_100 (B200/GB200) and under emulation on sm_90 (H100/H200); here they can only be compiled",
            info.name,
            info.sm()
        )),
    }
}

/// A device buffer of 16-bit matrix elements.
pub type Buf16 = CudaSlice<u16>;

/// An M x N output buffer, uninitialised: poison it before every checked launch.
pub fn alloc_c(gpu: &Gpu, shape: Shape) -> Result<Buf16> {
    // SAFETY: callers poison it (or let a kernel write it) before reading it.
    unsafe { gpu.stream.alloc::<u16>(shape.m * shape.n) }
        .map_err(|e| anyhow!("cannot allocate C ({shape}): {e:?}"))
}

/// Every element to all-ones bits, a NaN in both formats: an element a kernel never writes
/// fails verification.
pub fn poison(gpu: &Gpu, buf: &Buf16) -> Result<()> {
    // SAFETY: `buf` is a live device buffer of `len` 16-bit elements.
    check(
        unsafe {
            sys::cuMemsetD8Async(dptr(buf, gpu), 0xFF, buf.len() * 2, gpu.stream.cu_stream())
        },
        "poisoning C",
    )
}

/// The kernel's dynamic shared memory, or why this GPU cannot give it that much.
fn check_smem(gpu: &Gpu, spec: &KernelSpec) -> Result<u32> {
    let smem = spec.shape().smem_bytes;
    if smem > gpu.info.max_smem_per_block {
        bail!(
            "step {} ({}) needs {smem} bytes of shared memory per CTA; {} allows {}",
            spec.info().number,
            spec.arch.name(),
            gpu.info.name,
            gpu.info.max_smem_per_block
        );
    }
    Ok(smem)
}

/// The loaded function's registers, local memory, static shared memory and thread limit.
fn func_attributes(func: sys::CUfunction) -> Result<FuncAttributes> {
    use sys::CUfunction_attribute::*;
    let get = |a: sys::CUfunction_attribute| -> Result<u32> {
        let mut v: i32 = 0;
        // SAFETY: valid function handle; plain out-parameter.
        check(
            unsafe { sys::cuFuncGetAttribute(&mut v, a, func) },
            "cuFuncGetAttribute",
        )?;
        u32::try_from(v).map_err(|_| anyhow!("cuFuncGetAttribute({a:?}) returned {v}"))
    };
    Ok(FuncAttributes {
        registers: get(CU_FUNC_ATTRIBUTE_NUM_REGS)?,
        local_bytes: get(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
        static_shared_bytes: get(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
        max_threads_per_block: get(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
    })
}

/// A kernel compiled for a target and loaded into the GPU's context.
pub struct LoadedKernel {
    pub spec: KernelSpec,
    pub target: Target,
    /// The path compiler messages used: the step's file or the user's.
    pub source_path: String,
    pub compiled: Compiled,
    module: Arc<CudaModule>,
    func: sys::CUfunction,
}

impl LoadedKernel {
    /// Compile `source` (the spec's own kernel or a replacement) and load its `gemm_kernel`.
    pub fn load(
        gpu: &Gpu,
        spec: &KernelSpec,
        target: Target,
        source: &KernelSource,
        dtype: Dtype,
    ) -> Result<LoadedKernel> {
        LoadedKernel::load_with(gpu, spec, target, source, dtype, &[])
    }

    /// As `load`, with more compiler definitions (the trace build's `WB_TRACE`).
    pub fn load_with(
        gpu: &Gpu,
        spec: &KernelSpec,
        target: Target,
        source: &KernelSource,
        dtype: Dtype,
        extra_defines: &[(String, String)],
    ) -> Result<LoadedKernel> {
        check_smem(gpu, spec)?;
        let mut defines = spec.defines(dtype);
        defines.extend_from_slice(extra_defines);
        let compiled = compile(source, target, &defines)?;
        LoadedKernel::from_compiled(gpu, spec, compiled, &source.path)
    }

    /// Load a kernel compiled earlier (the grader compiles in one process and runs in another).
    pub fn from_compiled(
        gpu: &Gpu,
        spec: &KernelSpec,
        compiled: Compiled,
        source_path: &str,
    ) -> Result<LoadedKernel> {
        let smem = check_smem(gpu, spec)?;
        let target = compiled.target;
        let module = gpu
            .ctx
            .load_module(Ptx::from_binary(compiled.cubin.clone()))
            .map_err(|e| anyhow!("cannot load the compiled kernel: {e:?}"))?;
        let func = module
            .load_function("gemm_kernel")
            .map_err(|_| anyhow!("{source_path} has no extern \"C\" kernel named gemm_kernel"))?;
        let func = func.cu_function();
        // SAFETY: valid function handle and attribute.
        check(
            unsafe {
                sys::cuFuncSetAttribute(
                    func,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    smem as i32,
                )
            },
            "setting the dynamic shared-memory size",
        )?;
        // What was loaded, read back from the function itself: the registers and local memory
        // reported are those of this build even when no ptxas log came with it.
        let mut compiled = compiled;
        compiled.resources = compiled
            .resources
            .clone()
            .with_loaded(func_attributes(func)?);
        Ok(LoadedKernel {
            spec: spec.clone(),
            target,
            source_path: source_path.to_string(),
            compiled,
            module,
            func,
        })
    }

    pub fn module(&self) -> &Arc<CudaModule> {
        &self.module
    }
    pub fn emulated(&self) -> bool {
        self.target == Target::Sm90aEmulated
    }

    /// The launch for `shape`. A persistent kernel gets as many clusters as
    /// cuOccupancyMaxActiveClusters says fit at once, or `cap` if that is fewer.
    pub fn plan(&self, gpu: &Gpu, shape: Shape, cap: Option<u32>) -> Result<Plan> {
        self.spec.check_shape(shape).map_err(|e| anyhow!(e))?;
        let k = self.spec.shape();
        // Under cluster launch control the grid stays whole; on the emulation `--clusters` caps
        // how many clusters the stand-in lets run at once (see `emu_buffers`), as on the simulator.
        let clc = k.schedule == crate::step::Schedule::ClusterLaunchControl && self.emulated();
        if cap.is_some() && !k.schedule.fills_the_gpu() && !clc {
            bail!(
                "--clusters caps the grid of a persistent kernel; step {} launches one cluster per tile",
                self.spec.info().number
            );
        }
        let fit = if k.schedule.fills_the_gpu() {
            let dims = k.plan(shape, 1).dims;
            // SAFETY: `func` belongs to `module`, which `self` keeps loaded.
            unsafe { max_active_clusters(self.func, &dims, &gpu.stream) }.with_context(|| {
                format!("sizing step {}'s persistent grid", self.spec.info().number)
            })?
        } else {
            1
        };
        let cap = if clc { None } else { cap };
        Ok(k.plan(shape, cap.map_or(fit, |c| c.min(fit))))
    }

    /// Launch once on the GPU's stream.
    ///
    /// # Safety
    /// `args` must name live device buffers of the shape the plan was made for.
    pub unsafe fn launch(&self, gpu: &Gpu, plan: &Plan, args: &LaunchArgs) -> Result<()> {
        let mut a = args.clone();
        let mut params: Vec<*mut c_void> = vec![
            (&mut a.tmap_a as *mut sys::CUtensorMap).cast(),
            (&mut a.tmap_b as *mut sys::CUtensorMap).cast(),
            match &mut a.c {
                COut::Map(t) => (t as *mut sys::CUtensorMap).cast(),
                COut::Ptr(p) => (p as *mut sys::CUdeviceptr).cast(),
            },
            (&mut a.m as *mut i32).cast(),
            (&mut a.n as *mut i32).cast(),
            (&mut a.k as *mut i32).cast(),
        ];
        launch(self.func, &plan.dims, &gpu.stream, &mut params)
    }
}

#[derive(Clone)]
enum COut {
    Map(sys::CUtensorMap),
    Ptr(sys::CUdeviceptr),
}

/// The kernel arguments of one launch: tensor maps over A, B (and C) plus the sizes.
#[derive(Clone)]
pub struct LaunchArgs {
    tmap_a: sys::CUtensorMap,
    tmap_b: sys::CUtensorMap,
    c: COut,
    m: i32,
    n: i32,
    k: i32,
}

impl LaunchArgs {
    pub fn new(
        plan: &Plan,
        dtype: Dtype,
        shape: Shape,
        a: sys::CUdeviceptr,
        b: sys::CUdeviceptr,
        c: sys::CUdeviceptr,
    ) -> Result<LaunchArgs> {
        let tmap_a = tensor_map_2d(a, dtype, shape.m, shape.k, plan.a_box.0, plan.a_box.1)
            .context("tensor map for A")?;
        let tmap_b = tensor_map_2d(b, dtype, shape.n, shape.k, plan.b_box.0, plan.b_box.1)
            .context("tensor map for B")?;
        let c = match plan.output {
            OutputArg::TensorMap { box_rows, box_cols } => COut::Map(
                tensor_map_2d(c, dtype, shape.m, shape.n, box_rows, box_cols)
                    .context("tensor map for C")?,
            ),
            OutputArg::Pointer => COut::Ptr(c),
        };
        Ok(LaunchArgs {
            tmap_a,
            tmap_b,
            c,
            m: shape.m as i32,
            n: shape.n as i32,
            k: shape.k as i32,
        })
    }
}

/// One problem's inputs and output on the GPU.
pub struct DeviceProblem {
    pub problem: Problem,
    pub a: Buf16,
    pub b: Buf16,
    pub c: Buf16,
}

impl DeviceProblem {
    pub fn upload(gpu: &Gpu, problem: Problem) -> Result<DeviceProblem> {
        let s = &gpu.stream;
        let shape = problem.shape;
        let a = s.clone_htod(&problem.a).cuda("copy to the GPU")?;
        let b = s.clone_htod(&problem.b).cuda("copy to the GPU")?;
        let c = alloc_c(gpu, shape)?;
        Ok(DeviceProblem { problem, a, b, c })
    }
    pub fn shape(&self) -> Shape {
        self.problem.shape
    }
    pub fn ptrs(&self, gpu: &Gpu) -> (sys::CUdeviceptr, sys::CUdeviceptr, sys::CUdeviceptr) {
        (dptr(&self.a, gpu), dptr(&self.b, gpu), dptr(&self.c, gpu))
    }
    /// C to all-ones bits (NaN in both formats): an element a kernel never writes fails.
    pub fn poison_c(&self, gpu: &Gpu) -> Result<()> {
        poison(gpu, &self.c)
    }
    pub fn download_c(&self, gpu: &Gpu) -> Result<Vec<u16>> {
        gpu.stream.clone_dtoh(&self.c).cuda("copy from the GPU")
    }
    /// Launch arguments for `plan` over these buffers.
    pub fn args(&self, gpu: &Gpu, plan: &Plan) -> Result<LaunchArgs> {
        let (a, b, c) = self.ptrs(gpu);
        LaunchArgs::new(plan, self.problem.dtype, self.shape(), a, b, c)
    }
}

/// cuBLAS's C = A * B^T with an f32 output: the reference every output is compared with.
pub fn cublas_reference(gpu: &Gpu, blas: &Blas, dp: &DeviceProblem) -> Result<Vec<f32>> {
    let shape = dp.shape();
    let s = &gpu.stream;
    let dref = s
        .alloc_zeros::<f32>(shape.m * shape.n)
        .cuda("allocate GPU memory")?;
    let (a, b, _) = dp.ptrs(gpu);
    blas.gemm(shape, dp.problem.dtype, a, b, dptr(&dref, gpu), true)?;
    s.clone_dtoh(&dref).cuda("copy from the GPU")
}

/// A buffer twice the L2's size, overwritten before each timed launch so every run reads its
/// operands from HBM.
pub struct L2Flush {
    buf: CudaSlice<u8>,
    bytes: usize,
}

impl L2Flush {
    pub fn new(gpu: &Gpu) -> Result<L2Flush> {
        let bytes = (gpu.info.l2_bytes as usize * 2).max(1 << 20);
        let buf = gpu
            .stream
            .alloc_zeros::<u8>(bytes)
            .cuda("allocate GPU memory")?;
        Ok(L2Flush { buf, bytes })
    }
    pub fn arg(&self, gpu: &Gpu) -> (sys::CUdeviceptr, usize) {
        (dptr(&self.buf, gpu), self.bytes)
    }
    /// Overwrite the buffer now (on the stream), evicting the L2 as a timed run would find it.
    pub fn evict(&self, gpu: &Gpu) -> Result<()> {
        let (ptr, bytes) = self.arg(gpu);
        // SAFETY: `ptr` is this live device buffer of `bytes` bytes.
        check(
            unsafe { sys::cuMemsetD8Async(ptr, 0x5A, bytes, gpu.stream.cu_stream()) },
            "L2 flush",
        )
    }
}

/// Launch once and wait, under `timeout`. Under emulation the bookkeeping is reset first and
/// checked after: a trap is reported as the emulator's diagnosis, and tensor memory left
/// allocated is an error.
pub fn launch_and_wait(
    gpu: &Gpu,
    kernel: &LoadedKernel,
    plan: &Plan,
    args: &LaunchArgs,
    emu: Option<&mut EmuBuffers>,
    emu_seed: u64,
    timeout: Duration,
) -> Result<()> {
    launch_and_wait_rerun(gpu, kernel, plan, args, emu, emu_seed, timeout, None)
}

/// [`launch_and_wait`], where a hang (natively) is explained by `rerun`'s report.
#[allow(clippy::too_many_arguments)]
pub fn launch_and_wait_rerun(
    gpu: &Gpu,
    kernel: &LoadedKernel,
    plan: &Plan,
    args: &LaunchArgs,
    emu: Option<&mut EmuBuffers>,
    emu_seed: u64,
    timeout: Duration,
    rerun: Option<&HangRerun>,
) -> Result<()> {
    let emu = match emu {
        Some(e) => {
            e.set_watchdog(timeout);
            e.reset(gpu, emu_seed)?;
            Some(e)
        }
        None => None,
    };
    // SAFETY: the caller's `args` were built for this plan over live buffers.
    unsafe { kernel.launch(gpu, plan, args)? };
    let step = kernel.spec.info().number;
    let recorded = || emu.as_ref().and_then(|e| e.fault()).map(|f| f.describe());
    let waiting = || match (emu.as_ref(), rerun) {
        (Some(e), _) => Some(crate::timing::HangReport {
            source: "the emulation's watchdog saw these mbarrier waits never succeed".into(),
            lines: e
                .hang_report()
                .iter()
                .map(|w| format!("waiting: {w}"))
                .collect(),
        }),
        (None, Some(r)) => Some(r.run()),
        (None, None) => None,
    };
    if let Err(err) = sync_diagnosed(gpu, timeout, "the kernel", &recorded, &waiting) {
        if let Some(f) = emu.as_ref().and_then(|e| e.fault()) {
            bail!("{}", f.describe());
        }
        return Err(err.context(format!("step {step} kernel")));
    }
    if let Some(e) = emu {
        let leaked = e.leaked_ctas(gpu)?;
        if !leaked.is_empty() {
            bail!(
                "tcgen05 emulation: {} CTA(s) (first: {}) exited with tensor memory still allocated; tcgen05.dealloc must free every allocation before the CTA exits",
                leaked.len(),
                leaked[0]
            );
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Serialize)]
pub struct Timing {
    pub kernel: Stats,
    pub tflops: f64,
    pub pct_of_peak: Option<f64>,
    pub peak_tflops: Option<f64>,
    pub cublas: Stats,
    pub cublas_tflops: f64,
    pub pct_of_cublas: f64,
    pub l2_flushed: bool,
    /// NVML's readings during each side's timed launches (`timing::Clocks`).
    pub kernel_clocks: Option<Clocks>,
    pub cublas_clocks: Option<Clocks>,
    /// The driver and the GPU's state before timing, or why NVML could not say.
    pub device: DeviceReport,
}

/// NVML's view of the GPU before timing: its state, or why there is none.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceReport {
    pub state: Option<DeviceState>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvml_error: Option<String>,
}

/// NVML for `gpu` and its state now, or why there is none (timing goes on without clocks).
pub fn open_nvml(gpu: &Gpu) -> (Option<Nvml>, DeviceReport) {
    match Nvml::open(gpu).and_then(|n| n.state().map(|s| (n, s))) {
        Ok((n, s)) => (
            Some(n),
            DeviceReport {
                state: Some(s),
                nvml_error: None,
            },
        ),
        Err(e) => (
            None,
            DeviceReport {
                state: None,
                nvml_error: Some(format!("{e:#}")),
            },
        ),
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub step: u32,
    pub arch: Arch,
    pub kernel_path: String,
    pub gpu: GpuInfo,
    pub target: Target,
    pub emulated: bool,
    pub shape: Shape,
    pub dtype: Dtype,
    pub dist: Dist,
    pub seed: u64,
    pub params: Params,
    pub compile: Compiled,
    pub smem_bytes: u32,
    pub grid: (u32, u32, u32),
    pub cluster: (u32, u32, u32),
    pub block: u32,
    pub verification: Verification,
    /// Absent under emulation (emulated timings mean nothing) and when traced.
    pub timing: Option<Timing>,
    /// What the traced launch recorded (`RunOptions::trace_clusters`).
    #[serde(skip)]
    pub trace: Option<Recording>,
    /// The seed of a stress build (`RunOptions::stress`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stress_seed: Option<u64>,
}

/// Compile, run once, verify against cuBLAS and the CPU, and (natively) time against cuBLAS
/// with the one protocol ([`time_rounds`]: primed rounds, the two in rotated order).
pub fn run(spec: &KernelSpec, gpu: &Gpu, opts: &RunOptions) -> Result<RunReport> {
    let info = spec.info();
    let target = choose_target(&gpu.info, spec.arch, opts.emulate).map_err(|e| anyhow!(e))?;
    let emulated = target == Target::Sm90aEmulated;
    let shape = opts.shape.unwrap_or(if emulated {
        Shape::EMULATION_DEFAULT
    } else {
        Shape::DEFAULT
    });
    spec.check_shape(shape).map_err(|e| anyhow!(e))?;
    let source = opts.source.clone().unwrap_or_else(|| spec.source());
    let extra_defines = instrumentation_defines(spec, opts, emulated)?;
    if opts.static_check {
        static_checks(spec, &source, target, opts, &extra_defines)?;
    }
    let kernel = LoadedKernel::load_with(gpu, spec, target, &source, opts.dtype, &extra_defines)?;
    let plan = kernel.plan(gpu, shape, opts.clusters)?;

    // Inputs: fresh, seeded; output poisoned with NaN.
    let dp = DeviceProblem::upload(
        gpu,
        Problem::generate(shape, opts.dtype, opts.dist, opts.seed),
    )?;
    let args = dp.args(gpu, &plan)?;
    let mut emu = if emulated {
        let mut e = EmuBuffers::new(gpu, plan.dims.num_ctas() as usize)?;
        if let Some(c) = opts.clusters {
            e.resident_clusters = c;
        }
        e.install(gpu, kernel.module())?;
        Some(e)
    } else {
        None
    };

    // Traced: warm launches first (natively), then a clean buffer and, as before a timed run, a
    // flushed L2 (below), so the recorded launch is a typical one rather than the module's first.
    let mut tracer = match opts.trace_clusters {
        Some(clusters) => {
            let mut t = TraceBuffer::new(gpu, trace_layout(spec, &plan, shape, clusters))?;
            t.install(gpu, kernel.module())?;
            if !emulated {
                for _ in 0..opts.warmup {
                    // SAFETY: as for the verified run below.
                    unsafe { kernel.launch(gpu, &plan, &args)? };
                }
                sync_with_timeout(gpu, opts.timeout, "warm-up")?;
                t.install(gpu, kernel.module())?;
            }
            Some(t)
        }
        None => None,
    };

    // The verified run.
    dp.poison_c(gpu)?;
    // Kept alive until the launch is done: the eviction is queued, not finished.
    let _evicted = if tracer.is_some() && !emulated && opts.flush_l2 {
        let f = L2Flush::new(gpu)?;
        f.evict(gpu)?;
        Some(f)
    } else {
        None
    };
    // A stress build's twin check records its first failure in host memory before it traps,
    // and a hang diagnosis build its waits past their bound.
    let check = if !emulated && (opts.stress.is_some() || opts.hang_diagnosis) {
        let bound = opts.hang_diagnosis.then_some(crate::stress::HANG_BOUND);
        Some(crate::stress::CheckRecord::install(
            gpu,
            kernel.module(),
            bound,
        )?)
    } else {
        None
    };
    // A hang is re-run as a hang diagnosis build where asked, natively, unless this is one.
    let rerun = opts
        .hang_rerun
        .as_ref()
        .filter(|_| !emulated && !opts.hang_diagnosis && spec.arch == Arch::Hopper);
    let launched = launch_and_wait_rerun(
        gpu,
        &kernel,
        &plan,
        &args,
        emu.as_mut(),
        opts.emu_seed,
        opts.timeout,
        rerun,
    );
    if let Some(report) = check.as_ref().and_then(|c| c.report()) {
        bail!("{report}");
    }
    launched?;
    let trace = match tracer.as_mut() {
        Some(t) => Some(t.read(gpu, kernel.module())?),
        None => None,
    };
    let out = dp.download_c(gpu)?;
    let blas = Blas::new(gpu)?;
    let reference = cublas_reference(gpu, &blas, &dp)?;
    let verification = verify(&dp.problem, &out, &reference, opts.cpu_samples);

    // Never time what did not verify, nor a traced or stressed build.
    let timing = if emulated
        || opts.iters == 0
        || !verification.passed
        || trace.is_some()
        || opts.stress.is_some()
        || opts.hang_diagnosis
    {
        None
    } else {
        Some(time_against_cublas(
            gpu, &kernel, &plan, &args, &dp, &blas, opts,
        )?)
    };

    Ok(RunReport {
        step: info.number,
        arch: spec.arch,
        kernel_path: kernel.source_path.clone(),
        gpu: gpu.info.clone(),
        target,
        emulated,
        shape,
        dtype: opts.dtype,
        dist: opts.dist,
        seed: opts.seed,
        params: spec.params.clone(),
        compile: kernel.compiled.clone(),
        smem_bytes: plan.dims.smem_bytes,
        grid: plan.dims.grid,
        cluster: plan.dims.cluster,
        block: plan.dims.block,
        verification,
        timing,
        trace,
        stress_seed: opts.stress,
    })
}

/// The definitions a run adds to the kernel's own: the trace recorder (`--trace`), a stress
/// build with its twin check (`--stress SEED`), a hang diagnosis build.
fn instrumentation_defines(
    spec: &KernelSpec,
    opts: &RunOptions,
    emulated: bool,
) -> Result<Vec<(String, String)>> {
    let mut extra_defines: Vec<(String, String)> = opts
        .trace_clusters
        .map(|_| (trace::DEFINE.0.to_string(), trace::DEFINE.1.to_string()))
        .into_iter()
        .collect();
    if let Some(seed) = opts.stress {
        crate::stress::check_arch(spec.arch)?;
        extra_defines.extend(crate::stress::defines(seed));
    }
    if opts.hang_diagnosis {
        if spec.arch != Arch::Hopper || emulated {
            bail!("a hang diagnosis build is for a Hopper twin running natively (--arch sm_90a on an H100/H200); the emulation's own watchdog explains a Blackwell kernel's hang");
        }
        for d in crate::stress::hang_defines(crate::stress::HANG_BOUND) {
            if !extra_defines.iter().any(|(k, _)| *k == d.0) {
                extra_defines.push(d);
            }
        }
    }
    Ok(extra_defines)
}

/// The static checks a GPU run makes before it loads the kernel: the twin's, or the Blackwell
/// kernel's PTX rules (and its native sm_100a compile, unless that is the build that runs).
fn static_checks(
    spec: &KernelSpec,
    source: &KernelSource,
    target: Target,
    opts: &RunOptions,
    extra_defines: &[(String, String)],
) -> Result<()> {
    let mut defines = spec.defines(opts.dtype);
    defines.extend_from_slice(extra_defines);
    if spec.arch == Arch::Hopper {
        crate::static_check::check_twin(source, &defines)?;
    } else if target == Target::Sm100a {
        // The native build that runs is the sm_100a compile; the PTX rules remain.
        crate::static_check::check_ptx(source, &defines)?;
    } else {
        crate::static_check::check_blackwell(source, &defines)?;
    }
    Ok(())
}

/// The verified kernel timed against cuBLAS at the same shape and dtype, with the one protocol
/// ([`time_rounds`]: primed rounds, the two in rotated order, L2 flushed where asked).
fn time_against_cublas(
    gpu: &Gpu,
    kernel: &LoadedKernel,
    plan: &Plan,
    args: &LaunchArgs,
    dp: &DeviceProblem,
    blas: &Blas,
    opts: &RunOptions,
) -> Result<Timing> {
    let shape = dp.problem.shape;
    let flush = if opts.flush_l2 {
        Some(L2Flush::new(gpu)?)
    } else {
        None
    };
    let flush_arg = flush.as_ref().map(|f| f.arg(gpu));
    let dc16 = alloc_c(gpu, shape)?;
    let (pa, pb, _) = dp.ptrs(gpu);
    let pc16 = dptr(&dc16, gpu);
    let mut run_kernel = Launch(|| -> Result<()> {
        // SAFETY: as for the verified run.
        unsafe { kernel.launch(gpu, plan, args) }
    });
    let mut run_cublas = Launch(|| blas.gemm(shape, opts.dtype, pa, pb, pc16, false));
    let warm = Warmup::new(gpu)?;
    let mut prime = || warm.run(gpu, blas);
    let (nvml, device) = open_nvml(gpu);
    let stats = time_rounds(
        gpu,
        &mut Protocol::standard(
            opts.warmup,
            opts.iters,
            flush_arg,
            opts.timeout,
            &mut prime,
            nvml.as_ref(),
        ),
        &mut [&mut run_kernel, &mut run_cublas],
    )?;
    let (kernel_stats, cublas) = (stats[0].stats.clone(), stats[1].stats.clone());
    let flops = shape.flops();
    let peak = gpu.info.peak_tflops();
    let tflops = kernel_stats.tflops(flops);
    let cublas_tflops = cublas.tflops(flops);
    Ok(Timing {
        tflops,
        pct_of_peak: peak.map(|p| 100.0 * tflops / p),
        peak_tflops: peak,
        pct_of_cublas: 100.0 * tflops / cublas_tflops,
        cublas_tflops,
        kernel: kernel_stats,
        cublas,
        l2_flushed: opts.flush_l2,
        kernel_clocks: stats[0].clocks.clone(),
        cublas_clocks: stats[1].clocks.clone(),
        device,
    })
}

/// The compiler definition that keeps (1, the default) or drops (0) the emulation's rules of
/// issue 23: the async proxy and bulk groups, tcgen05.ld's poison, cta_group consistency
/// (tcgen05_emu.cuh, `WB_EMU_STRICT`).
pub const EMU_STRICT_DEFINE: &str = "WB_EMU_STRICT";

/// One emulation build's verified launch and timed launches.
#[derive(Debug, Clone, Serialize)]
pub struct EmulatedTiming {
    /// Whether the build has the rules of issue 23 ([`EMU_STRICT_DEFINE`]).
    pub strict: bool,
    pub verification: Verification,
    /// Wall time of each timed launch and wait, the reset of the emulation's bookkeeping
    /// included, in ms.
    pub launches_ms: Vec<f64>,
    pub median_ms: f64,
    pub min_ms: f64,
}

/// What the emulation's newer rules cost: the same kernel built without and with them, on one
/// problem, timed in alternating launches (`runner step N --emulate --time-emulation`).
#[derive(Debug, Clone, Serialize)]
pub struct EmulationCost {
    pub step: u32,
    pub kernel_path: String,
    pub gpu: GpuInfo,
    pub shape: Shape,
    pub dtype: Dtype,
    pub emu_seed: u64,
    pub grid: (u32, u32, u32),
    pub rules_off: EmulatedTiming,
    pub rules_on: EmulatedTiming,
    /// (rules_on.median / rules_off.median - 1) in percent.
    pub cost_pct: f64,
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => 0.5 * (s[n / 2 - 1] + s[n / 2]),
    }
}

/// Build a Blackwell kernel for the sm_90a emulation twice, with the rules of issue 23 off and
/// on, verify each once, then time `reps` launches of each, alternating so that both see the
/// same GPU state. Both builds run the same problem and the same schedule seed.
pub fn emulation_cost(
    spec: &KernelSpec,
    gpu: &Gpu,
    opts: &RunOptions,
    reps: usize,
) -> Result<EmulationCost> {
    if spec.arch != Arch::Blackwell {
        bail!("--time-emulation times the Blackwell kernel's emulation (--arch sm_100a); the Hopper twin runs natively and is timed by `runner step` itself");
    }
    let target =
        choose_target(&gpu.info, spec.arch, EmulateMode::Always).map_err(|e| anyhow!(e))?;
    if reps == 0 {
        bail!("--time-emulation needs at least one timed launch");
    }
    let shape = opts.shape.unwrap_or(Shape::EMULATION_DEFAULT);
    spec.check_shape(shape).map_err(|e| anyhow!(e))?;
    let source = opts.source.clone().unwrap_or_else(|| spec.source());
    if opts.static_check {
        crate::static_check::check_blackwell(&source, &spec.defines(opts.dtype))?;
    }
    let dp = DeviceProblem::upload(
        gpu,
        Problem::generate(shape, opts.dtype, opts.dist, opts.seed),
    )?;
    let blas = Blas::new(gpu)?;
    let reference = cublas_reference(gpu, &blas, &dp)?;
    struct Build {
        kernel: LoadedKernel,
        plan: Plan,
        args: LaunchArgs,
        emu: EmuBuffers,
        verification: Verification,
        times: Vec<f64>,
    }
    let mut builds = Vec::new();
    for strict in [false, true] {
        let define = [(
            EMU_STRICT_DEFINE.to_string(),
            if strict { "1" } else { "0" }.to_string(),
        )];
        let kernel = LoadedKernel::load_with(gpu, spec, target, &source, opts.dtype, &define)?;
        let plan = kernel.plan(gpu, shape, opts.clusters)?;
        let args = dp.args(gpu, &plan)?;
        let mut emu = EmuBuffers::new(gpu, plan.dims.num_ctas() as usize)?;
        emu.install(gpu, kernel.module())?;
        dp.poison_c(gpu)?;
        launch_and_wait(
            gpu,
            &kernel,
            &plan,
            &args,
            Some(&mut emu),
            opts.emu_seed,
            opts.timeout,
        )
        .with_context(|| {
            format!(
                "the build with the emulation's strict rules {}",
                if strict { "on" } else { "off" }
            )
        })?;
        let out = dp.download_c(gpu)?;
        let verification = verify(&dp.problem, &out, &reference, opts.cpu_samples);
        builds.push(Build {
            kernel,
            plan,
            args,
            emu,
            verification,
            times: Vec::with_capacity(reps),
        });
    }
    for _ in 0..reps {
        for b in builds.iter_mut() {
            let start = std::time::Instant::now();
            launch_and_wait(
                gpu,
                &b.kernel,
                &b.plan,
                &b.args,
                Some(&mut b.emu),
                opts.emu_seed,
                opts.timeout,
            )?;
            b.times.push(start.elapsed().as_secs_f64() * 1e3);
        }
    }
    let grid = builds[0].plan.dims.grid;
    let mut timings = builds
        .into_iter()
        .zip([false, true])
        .map(|(b, strict)| EmulatedTiming {
            strict,
            verification: b.verification,
            median_ms: median(&b.times),
            min_ms: b.times.iter().copied().fold(f64::INFINITY, f64::min),
            launches_ms: b.times,
        });
    let (Some(rules_off), Some(rules_on)) = (timings.next(), timings.next()) else {
        bail!("internal: two emulation builds expected");
    };
    Ok(EmulationCost {
        step: spec.info().number,
        kernel_path: source.path,
        gpu: gpu.info.clone(),
        shape,
        dtype: opts.dtype,
        emu_seed: opts.emu_seed,
        grid,
        cost_pct: 100.0 * (rules_on.median_ms / rules_off.median_ms - 1.0),
        rules_off,
        rules_on,
    })
}

/// The trace buffer for a launch: the CTAs of the first `clusters` clusters record, each warp
/// with room for every k-block of every tile its cluster may take.
pub fn trace_layout(spec: &KernelSpec, plan: &Plan, shape: Shape, clusters: u32) -> trace::Layout {
    let k = spec.shape();
    let cluster = plan.dims.cluster.0.max(1);
    let launched = (plan.dims.num_ctas() / cluster).max(1);
    let tiles = match k.schedule {
        Schedule::OnePerTile => 1,
        Schedule::Persistent => k.num_tiles(shape).div_ceil(launched),
        // A running cluster may take any tile whose cluster has not started.
        Schedule::ClusterLaunchControl => k.num_tiles(shape),
    };
    trace::Layout::new(
        plan.dims.num_ctas(),
        plan.dims.block,
        clusters.saturating_mul(cluster),
        tiles,
        (shape.k as u32) / k.tile_k,
    )
}

#[derive(Debug, Clone, Serialize)]
pub struct SelfTest {
    pub gpu: GpuInfo,
    pub shape: Shape,
    pub dtype: Dtype,
    pub verification: Verification,
    pub cublas: Stats,
    pub cublas_tflops: f64,
    pub peak_tflops: Option<f64>,
    pub clocks: Option<Clocks>,
    pub device: DeviceReport,
}

/// Check the reference machinery itself: cuBLAS (f16/bf16 output, as timed) against the CPU
/// reference, and its speed on `shape`.
pub fn selftest(
    gpu: &Gpu,
    shape: Shape,
    dtype: Dtype,
    seed: u64,
    iters: usize,
) -> Result<SelfTest> {
    let dp = DeviceProblem::upload(gpu, Problem::generate(shape, dtype, Dist::Gaussian, seed))?;
    let (pa, pb, pc) = dp.ptrs(gpu);
    dp.poison_c(gpu)?;
    let blas = Blas::new(gpu)?;
    blas.gemm(shape, dtype, pa, pb, pc, false)?;
    let out = dp.download_c(gpu)?;
    let reference = cublas_reference(gpu, &blas, &dp)?;
    let verification = verify(&dp.problem, &out, &reference, 256);
    let flush = L2Flush::new(gpu)?;
    let mut run_cublas = Launch(|| blas.gemm(shape, dtype, pa, pb, pc, false));
    let warm = Warmup::new(gpu)?;
    let mut prime = || warm.run(gpu, &blas);
    let (nvml, device) = open_nvml(gpu);
    let measured = time_rounds(
        gpu,
        &mut Protocol::standard(
            5,
            iters,
            Some(flush.arg(gpu)),
            Duration::from_secs(60),
            &mut prime,
            nvml.as_ref(),
        ),
        &mut [&mut run_cublas],
    )?;
    let cublas = measured[0].stats.clone();
    let clocks = measured[0].clocks.clone();
    Ok(SelfTest {
        gpu: gpu.info.clone(),
        shape,
        dtype,
        verification,
        cublas_tflops: cublas.tflops(shape.flops()),
        cublas,
        peak_tflops: gpu.info.peak_tflops(),
        clocks,
        device,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hang_rerun_reports_its_error_or_what_else_came_of_it() {
        let stderr = "note: seeded bug\nerror: twin hang: 3 warp(s) waited longer than 1.0 s\n  waiting: CTA 0 warp 0, the producer\n";
        assert_eq!(
            rerun_lines(Some(2), stderr),
            vec![
                "twin hang: 3 warp(s) waited longer than 1.0 s".to_string(),
                "  waiting: CTA 0 warp 0, the producer".to_string()
            ]
        );
        assert!(rerun_lines(Some(0), "")[0].contains("the hang did not recur"));
        let hung = rerun_lines(
            Some(124),
            "error: the kernel did not finish within 30 s: it hangs.",
        );
        assert!(
            hung[0].contains("no mbarrier wait outlived its bound"),
            "{hung:?}"
        );
        assert_eq!(hung.len(), 2);
        let odd = rerun_lines(Some(101), "thread panicked\nat the end");
        assert!(
            odd[0].contains("exit code Some(101)") && odd[0].ends_with("at the end"),
            "{odd:?}"
        );
        let r = HangRerun {
            program: "/nonexistent/runner".into(),
            args: vec![],
        }
        .run();
        assert!(
            r.lines[0].starts_with("the re-run could not start"),
            "{r:?}"
        );
    }

    fn gpu(cc: (i32, i32)) -> GpuInfo {
        GpuInfo {
            name: "test".into(),
            compute_capability: cc,
            sm_count: 132,
            max_clock_mhz: 1980,
            l2_bytes: 50 << 20,
            max_smem_per_block: 232448,
            driver_version: "13.0".into(),
        }
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn targets_by_gpu_and_kernel() {
        let bw = Arch::Blackwell;
        assert_eq!(
            choose_target(&gpu((10, 0)), bw, EmulateMode::Auto),
            Ok(Target::Sm100a)
        );
        assert!(choose_target(&gpu((10, 0)), bw, EmulateMode::Always).is_err());
        assert_eq!(
            choose_target(&gpu((9, 0)), bw, EmulateMode::Auto),
            Ok(Target::Sm90aEmulated)
        );
        assert!(choose_target(&gpu((9, 0)), bw, EmulateMode::Never)
            .unwrap_err()
            .contains("no tcgen05"));
        assert!(choose_target(&gpu((8, 9)), bw, EmulateMode::Auto).is_err());
        assert_eq!(
            choose_target(&gpu((9, 0)), Arch::Hopper, EmulateMode::Auto),
            Ok(Target::Sm90a)
        );
        assert!(
            choose_target(&gpu((10, 0)), Arch::Hopper, EmulateMode::Auto)
                .unwrap_err()
                .contains("sm_90 GPUs")
        );
    }
}
