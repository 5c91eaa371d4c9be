//! Running a step on a GPU: compile, launch (natively or under emulation), verify, time.

use crate::compile::{compile, Compiled, KernelSource, Target};
use crate::cublas::Blas;
use crate::emulation::EmuBuffers;
use crate::gpu::{check, launch, tensor_map_2d, Gpu, GpuInfo};
use crate::problem::{Dist, Dtype, Problem, Shape};
use crate::step::{OutputArg, Step};
use crate::timing::{sync_with_timeout, time_launches, Stats};
use crate::verify::{verify, Verification};
use anyhow::{anyhow, bail, Context, Result};
use cudarc::driver::sys;
use cudarc::driver::{CudaSlice, DevicePtr};
use cudarc::nvrtc::Ptx;
use serde::Serialize;
use std::ffi::c_void;
use std::time::Duration;

/// Whether to run under the tcgen05 emulation.
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
        }
    }
}

/// How the kernel ran, or why it cannot run on this GPU.
pub fn choose_target(info: &GpuInfo, mode: EmulateMode) -> Result<Target, String> {
    let cc = info.compute_capability;
    match (cc, mode) {
        ((10, 0), EmulateMode::Always) => Err(format!(
            "{} is sm_100: the emulation is built for sm_90 (Hopper) only; run natively instead",
            info.name
        )),
        ((10, 0), _) => Ok(Target::Sm100a),
        ((9, 0), EmulateMode::Never) => Err(format!(
            "{} is {}, which has no tcgen05 instructions or tensor memory; drop --no-emulate to run the kernel under the tcgen05 emulation",
            info.name,
            info.sm()
        )),
        ((9, 0), _) => Ok(Target::Sm90aEmulated),
        _ => Err(format!(
            "{} is {}: the workbook's kernels run natively on sm_100 (B200/GB200) and under emulation on sm_90 (H100/H200); here they can only be compiled",
            info.name,
            info.sm()
        )),
    }
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
}

#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub step: u32,
    pub gpu: GpuInfo,
    pub target: Target,
    pub emulated: bool,
    pub shape: Shape,
    pub dtype: Dtype,
    pub dist: Dist,
    pub seed: u64,
    pub params: Vec<(String, u32)>,
    pub compile: Compiled,
    pub smem_bytes: u32,
    pub grid: (u32, u32, u32),
    pub cluster: (u32, u32, u32),
    pub block: u32,
    pub verification: Verification,
    /// Absent under emulation: emulated timings mean nothing.
    pub timing: Option<Timing>,
}

fn dptr<T>(s: &CudaSlice<T>, gpu: &Gpu) -> sys::CUdeviceptr {
    s.device_ptr(&gpu.stream).0
}

/// Compile, run once, verify against cuBLAS and the CPU, and (natively) time.
pub fn run(step: &dyn Step, gpu: &Gpu, opts: &RunOptions) -> Result<RunReport> {
    let info = step.info();
    let target = choose_target(&gpu.info, opts.emulate).map_err(|e| anyhow!(e))?;
    let emulated = target == Target::Sm90aEmulated;
    let shape = opts.shape.unwrap_or(if emulated {
        Shape::EMULATION_DEFAULT
    } else {
        Shape::DEFAULT
    });
    step.check_shape(shape).map_err(|e| anyhow!(e))?;
    let mut plan = step.plan(shape, Some(&gpu.info));
    if let Some(clusters) = opts.clusters {
        let k = step.kernel();
        if !k.persistent {
            bail!(
                "--clusters caps the grid of a persistent kernel; step {} launches one cluster per tile",
                info.number
            );
        }
        plan.dims.grid.0 = plan.dims.grid.0.min(clusters * k.cluster);
    }
    if plan.dims.smem_bytes > gpu.info.max_smem_per_block {
        bail!(
            "step {} needs {} bytes of shared memory per CTA; {} allows {}",
            info.number,
            plan.dims.smem_bytes,
            gpu.info.name,
            gpu.info.max_smem_per_block
        );
    }

    let source = opts.source.clone().unwrap_or_else(|| info.kernel_source());
    let compiled = compile(&source, target, &step.defines(opts.dtype))?;

    let module = gpu
        .ctx
        .load_module(Ptx::from_binary(compiled.cubin.clone()))
        .map_err(|e| anyhow!("cannot load the compiled kernel: {e:?}"))?;
    let func = module.load_function("gemm_kernel").map_err(|_| {
        anyhow!(
            "{} has no extern \"C\" kernel named gemm_kernel",
            source.path
        )
    })?;
    // SAFETY: valid function handle and attribute.
    check(
        unsafe {
            sys::cuFuncSetAttribute(
                func.cu_function(),
                sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                plan.dims.smem_bytes as i32,
            )
        },
        "setting the dynamic shared-memory size",
    )?;

    // Inputs: fresh, seeded; output poisoned with NaN.
    let problem = Problem::generate(shape, opts.dtype, opts.dist, opts.seed);
    let s = &gpu.stream;
    let da = s.clone_htod(&problem.a).map_err(|e| anyhow!("{e:?}"))?;
    let db = s.clone_htod(&problem.b).map_err(|e| anyhow!("{e:?}"))?;
    // SAFETY: poisoned below before any read.
    let dc = unsafe { s.alloc::<u16>(shape.m * shape.n) }.map_err(|e| anyhow!("{e:?}"))?;
    let (pa, pb, pc) = (dptr(&da, gpu), dptr(&db, gpu), dptr(&dc, gpu));
    let poison = || -> Result<()> {
        // SAFETY: `pc` is the M x N output buffer.
        check(
            unsafe { sys::cuMemsetD8Async(pc, 0xFF, shape.m * shape.n * 2, s.cu_stream()) },
            "poisoning C",
        )
    };

    let tmap_a = tensor_map_2d(pa, opts.dtype, shape.m, shape.k, plan.a_box.0, plan.a_box.1)
        .context("tensor map for A")?;
    let tmap_b = tensor_map_2d(pb, opts.dtype, shape.n, shape.k, plan.b_box.0, plan.b_box.1)
        .context("tensor map for B")?;
    let tmap_c = match plan.output {
        OutputArg::TensorMap { box_rows, box_cols } => Some(
            tensor_map_2d(pc, opts.dtype, shape.m, shape.n, box_rows, box_cols)
                .context("tensor map for C")?,
        ),
        OutputArg::Pointer => None,
    };

    let mut emu = if emulated {
        let e = EmuBuffers::new(gpu, plan.dims.num_ctas() as usize)?;
        e.install(gpu, &module)?;
        Some(e)
    } else {
        None
    };

    let (mut m, mut n, mut k) = (shape.m as i32, shape.n as i32, shape.k as i32);
    let mut c_ptr = pc;
    let mut tmap_a_v = tmap_a;
    let mut tmap_b_v = tmap_b;
    let mut tmap_c_v = tmap_c;
    let mut params: Vec<*mut c_void> = vec![
        (&mut tmap_a_v as *mut sys::CUtensorMap).cast(),
        (&mut tmap_b_v as *mut sys::CUtensorMap).cast(),
        match tmap_c_v.as_mut() {
            Some(t) => (t as *mut sys::CUtensorMap).cast(),
            None => (&mut c_ptr as *mut sys::CUdeviceptr).cast(),
        },
        (&mut m as *mut i32).cast(),
        (&mut n as *mut i32).cast(),
        (&mut k as *mut i32).cast(),
    ];
    let func_handle = func.cu_function();
    let dims = plan.dims;

    // The verified run.
    poison()?;
    if let Some(e) = emu.as_mut() {
        e.reset(gpu, opts.emu_seed)?;
    }
    // SAFETY: `params` matches the kernel contract documented in `step`.
    unsafe { launch(func_handle, &dims, s, &mut params)? };
    if let Err(err) = sync_with_timeout(gpu, opts.timeout, "the kernel") {
        if let Some(f) = emu.as_ref().and_then(|e| e.fault()) {
            bail!("{}", f.describe());
        }
        return Err(err.context(format!("step {} kernel", info.number)));
    }
    if let Some(e) = emu.as_ref() {
        let leaked = e.leaked_ctas(gpu)?;
        if !leaked.is_empty() {
            bail!(
                "tcgen05 emulation: {} CTA(s) (first: {}) exited with tensor memory still allocated; tcgen05.dealloc must free every allocation before the CTA exits",
                leaked.len(),
                leaked[0]
            );
        }
    }
    let out = s.clone_dtoh(&dc).map_err(|e| anyhow!("{e:?}"))?;

    let blas = Blas::new(gpu)?;
    let dref = s
        .alloc_zeros::<f32>(shape.m * shape.n)
        .map_err(|e| anyhow!("{e:?}"))?;
    blas.gemm(shape, opts.dtype, pa, pb, dptr(&dref, gpu), true)?;
    let reference = s.clone_dtoh(&dref).map_err(|e| anyhow!("{e:?}"))?;
    drop(dref);
    let verification = verify(&problem, &out, &reference, opts.cpu_samples);

    let timing = if emulated || opts.iters == 0 {
        None
    } else {
        let flush_bytes = (gpu.info.l2_bytes as usize * 2).max(1 << 20);
        let flush_buf = if opts.flush_l2 {
            Some(
                s.alloc_zeros::<u8>(flush_bytes)
                    .map_err(|e| anyhow!("{e:?}"))?,
            )
        } else {
            None
        };
        let flush = flush_buf.as_ref().map(|b| (dptr(b, gpu), flush_bytes));
        let kernel = time_launches(gpu, opts.warmup, opts.iters, flush, opts.timeout, || {
            // SAFETY: as for the verified run.
            unsafe { launch(func_handle, &dims, s, &mut params) }
        })?;
        // SAFETY: C is only overwritten; freed after the timing.
        let dc16 = unsafe { s.alloc::<u16>(shape.m * shape.n) }.map_err(|e| anyhow!("{e:?}"))?;
        let pc16 = dptr(&dc16, gpu);
        let cublas = time_launches(gpu, opts.warmup, opts.iters, flush, opts.timeout, || {
            blas.gemm(shape, opts.dtype, pa, pb, pc16, false)
        })?;
        let flops = shape.flops();
        let peak = gpu.info.peak_tflops();
        let tflops = kernel.tflops(flops);
        let cublas_tflops = cublas.tflops(flops);
        Some(Timing {
            tflops,
            pct_of_peak: peak.map(|p| 100.0 * tflops / p),
            peak_tflops: peak,
            pct_of_cublas: 100.0 * tflops / cublas_tflops,
            cublas_tflops,
            kernel,
            cublas,
            l2_flushed: opts.flush_l2,
        })
    };

    Ok(RunReport {
        step: info.number,
        gpu: gpu.info.clone(),
        target,
        emulated,
        shape,
        dtype: opts.dtype,
        dist: opts.dist,
        seed: opts.seed,
        params: step
            .params()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        compile: compiled,
        smem_bytes: dims.smem_bytes,
        grid: dims.grid,
        cluster: dims.cluster,
        block: dims.block,
        verification,
        timing,
    })
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
    let problem = Problem::generate(shape, dtype, Dist::Gaussian, seed);
    let s = &gpu.stream;
    let da = s.clone_htod(&problem.a).map_err(|e| anyhow!("{e:?}"))?;
    let db = s.clone_htod(&problem.b).map_err(|e| anyhow!("{e:?}"))?;
    let dc = s
        .alloc_zeros::<u16>(shape.m * shape.n)
        .map_err(|e| anyhow!("{e:?}"))?;
    let dref = s
        .alloc_zeros::<f32>(shape.m * shape.n)
        .map_err(|e| anyhow!("{e:?}"))?;
    let (pa, pb, pc) = (dptr(&da, gpu), dptr(&db, gpu), dptr(&dc, gpu));
    // SAFETY: `pc` is the output buffer.
    check(
        unsafe { sys::cuMemsetD8Async(pc, 0xFF, shape.m * shape.n * 2, s.cu_stream()) },
        "poisoning C",
    )?;
    let blas = Blas::new(gpu)?;
    blas.gemm(shape, dtype, pa, pb, pc, false)?;
    blas.gemm(shape, dtype, pa, pb, dptr(&dref, gpu), true)?;
    let out = s.clone_dtoh(&dc).map_err(|e| anyhow!("{e:?}"))?;
    let reference = s.clone_dtoh(&dref).map_err(|e| anyhow!("{e:?}"))?;
    let verification = verify(&problem, &out, &reference, 256);
    let flush_bytes = (gpu.info.l2_bytes as usize * 2).max(1 << 20);
    let flush_buf = s
        .alloc_zeros::<u8>(flush_bytes)
        .map_err(|e| anyhow!("{e:?}"))?;
    let cublas = time_launches(
        gpu,
        5,
        iters,
        Some((dptr(&flush_buf, gpu), flush_bytes)),
        Duration::from_secs(60),
        || blas.gemm(shape, dtype, pa, pb, pc, false),
    )?;
    Ok(SelfTest {
        gpu: gpu.info.clone(),
        shape,
        dtype,
        verification,
        cublas_tflops: cublas.tflops(shape.flops()),
        cublas,
        peak_tflops: gpu.info.peak_tflops(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn targets_by_gpu() {
        assert_eq!(
            choose_target(&gpu((10, 0)), EmulateMode::Auto),
            Ok(Target::Sm100a)
        );
        assert!(choose_target(&gpu((10, 0)), EmulateMode::Always).is_err());
        assert_eq!(
            choose_target(&gpu((9, 0)), EmulateMode::Auto),
            Ok(Target::Sm90aEmulated)
        );
        assert!(choose_target(&gpu((9, 0)), EmulateMode::Never)
            .unwrap_err()
            .contains("no tcgen05"));
        assert!(choose_target(&gpu((8, 9)), EmulateMode::Auto).is_err());
    }
}
