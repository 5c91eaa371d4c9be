//! The child side of grading (`runner grade-worker JOB`): describe the GPU, compile a
//! submission, or run its tests. It runs in a process group of its own under the grader's
//! clock, with the derived seeds of its tests and nothing secret.
//!
//! A run first draws every input set, uploads it between guard zones and computes its cuBLAS
//! reference, downloads the reference and scrubs the device copy; only then is the submission's
//! module loaded. From then on every launch is preceded by NaN-poisoning C and followed by the
//! guard, input and output checks of [`super::integrity`].

use super::integrity::{classify, dtoh, htod, input_flag, memset8, Evidence, Guarded};
use super::job::{
    CompiledDtype, EnvInfo, Job, JobTest, ResultsWriter, RunLine, TestResult, TimingResult,
    TraceJob,
};
use super::trace_facts::{evaluate, Traced};
use super::vocab::{Flag, Kind, Status};
use crate::sandbox::truncate_log;
use anyhow::{anyhow, bail, Context, Result};
use common::compile::{compile, Compiled, KernelSource, Resources};
use common::cublas::{Blas, Warmup};
use common::emulation::EmuBuffers;
use common::gpu::CudaResultExt;
use common::gpu::{self, Gpu, GpuStatus};
use common::rescale::{self, Pow2};
use common::run::{launch_and_wait, L2Flush, LaunchArgs, LoadedKernel};
use common::step::Plan;
use common::timing::{time_rounds, Protocol, Timed};
use common::trace::TraceBuffer;
use common::trace_facts::Fact;
use common::verify::verify;
use common::{Dist, Dtype, Problem, Shape};
use cudarc::driver::sys;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::time::Duration;

/// fp64 CPU samples checked per launch, besides the full comparison with cuBLAS.
pub(super) const CPU_SAMPLES: usize = 64;

pub(super) fn open_gpu() -> Result<Box<Gpu>> {
    match gpu::open() {
        GpuStatus::Present(g) => Ok(g),
        GpuStatus::Absent(why) => bail!("no GPU to grade on: {why}"),
    }
}

fn device_ordinal() -> usize {
    std::env::var("WORKBOOK_DEVICE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

pub fn env_info(gpu: &Gpu) -> EnvInfo {
    use sys::CUdevice_attribute::*;
    let attr = |a| gpu.ctx.attribute(a).unwrap_or(0);
    let pci = format!(
        "{:08x}:{:02x}:{:02x}.0",
        attr(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID),
        attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID),
        attr(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID)
    );
    let i = &gpu.info;
    EnvInfo {
        device: device_ordinal(),
        name: i.name.clone(),
        compute_capability: i.compute_capability,
        sm_count: i.sm_count,
        max_clock_mhz: i.max_clock_mhz,
        memory_clock_mhz: attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE) as u32 / 1000,
        l2_bytes: i.l2_bytes,
        max_smem_per_block: i.max_smem_per_block,
        driver_version: i.driver_version.clone(),
        peak_tflops: i.peak_tflops(),
        clocks: crate::provenance::nvidia_smi_clocks(&pci),
        pci_bus_id: pci,
        pageable_memory_access: attr(CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS) != 0,
        nvrtc_version: common::compile::nvrtc_version()
            .map(|(a, b)| format!("{a}.{b}"))
            .unwrap_or_default(),
        healthy: false,
        health_detail: String::new(),
    }
}

/// Whether cuBLAS computes a small product correctly on this GPU.
fn health(gpu: &Gpu, blas: &Blas) -> Result<String> {
    let shape = Shape {
        m: 256,
        n: 256,
        k: 256,
    };
    let p = Problem::generate(shape, Dtype::F16, Dist::Gaussian, 1);
    let s = &gpu.stream;
    let a = s.clone_htod(&p.a).cuda("copy to the GPU")?;
    let b = s.clone_htod(&p.b).cuda("copy to the GPU")?;
    let c = s
        .alloc_zeros::<f32>(shape.m * shape.n)
        .cuda("allocate GPU memory")?;
    let ptr = |x: &cudarc::driver::CudaSlice<u16>| common::run::dptr(x, gpu);
    blas.gemm(
        shape,
        Dtype::F16,
        ptr(&a),
        ptr(&b),
        common::run::dptr(&c, gpu),
        true,
    )?;
    let r = s.clone_dtoh(&c).cuda("copy from the GPU")?;
    let out: Vec<u16> = r.iter().map(|&x| Dtype::F16.from_f32(x)).collect();
    let v = verify(&p, &out, &r, 32);
    if v.passed {
        Ok("cuBLAS verified a 256x256x256 product".into())
    } else {
        bail!("cuBLAS gave a wrong 256x256x256 product: {}", v.summary())
    }
}

pub(super) fn probe(dir: &Path, gpu: &Gpu, blas: &Blas, mut env: EnvInfo) -> Result<()> {
    match health(gpu, blas) {
        Ok(d) => {
            env.healthy = true;
            env.health_detail = d;
        }
        Err(e) => env.health_detail = format!("{e:#}"),
    }
    std::fs::write(dir.join("probe.json"), serde_json::to_vec_pretty(&env)?)?;
    Ok(())
}

pub(super) fn cubin_path(dir: &Path, dtype: Dtype) -> std::path::PathBuf {
    dir.join(format!("cubin-{dtype}.bin"))
}

/// The traced build's cubin (copied to the run folders with the others).
fn traced_cubin_path(dir: &Path) -> std::path::PathBuf {
    dir.join(format!("cubin-{}-traced.bin", TraceJob::DTYPE))
}

pub(super) fn compile_phase(job: &Job, dir: &Path) -> Result<()> {
    let spec = job.spec()?;
    let target = job.target()?;
    let source = KernelSource {
        path: job.source_name.clone(),
        text: job.source.clone(),
    };
    let mut report = Vec::new();
    for dtype in job.dtypes()? {
        let defines = spec.defines(dtype);
        // A Blackwell kernel gets the static checks every Blackwell build gets (the tcgen05
        // rules on its sm_100a PTX, then the native sm_100a compile), graded natively or under
        // the emulation: then the kernel graded under emulation also builds, from the same text,
        // for the hardware it will run on (the policy refuses every name that could tell the two
        // builds apart).
        let native = match target {
            common::Target::Sm90aEmulated | common::Target::Sm100a => {
                Some(common::static_check::check_blackwell(&source, &defines))
            }
            common::Target::Sm90a => None,
        };
        let compiled = match (native, target) {
            (Some(Err(e)), _) => {
                report.push(CompiledDtype::failed(
                    format!("{dtype} (static checks and native sm_100a build)"),
                    &static_check_log(&e),
                    job.log_bytes,
                    false,
                ));
                continue;
            }
            // Native: that compile is the kernel.
            (Some(Ok(c)), common::Target::Sm100a) => Ok(c),
            (Some(Ok(c)), _) => {
                // Graded under the emulation: the native build's SASS is the one the rubric's
                // requirements check (the emulated build has none of tcgen05 by design).
                // Its log and resources are reported with the emulated build below.
                report.push(CompiledDtype {
                    log: String::new(),
                    registers: 0,
                    spill_bytes: 0,
                    compile_ms: 0.0,
                    nvrtc_version: String::new(),
                    ..CompiledDtype::built(
                        format!("{dtype} (native sm_100a)"),
                        &c,
                        0,
                        native_sass(job, dir, &format!("native-{dtype}"), &c.cubin)?,
                        false,
                    )
                });
                compile(&source, target, &defines)
            }
            (None, _) => compile(&source, target, &defines),
        };
        // The simulator's input: the sm_100a PTX of the same text and definitions (the PTX
        // ptxas just turned into the native cubin).
        // Whether the simulator models every instruction form of the module is decided here,
        // once, on the whole PTX (never by what a test's inputs make execute).
        let mut unsupported = None;
        let compiled = match compiled {
            Ok(c) if job.ptx => {
                match common::compile::compile_ptx(&source, common::Target::Sm100a, &defines) {
                    Ok(ptx) => {
                        unsupported = super::simulated::screen_ptx(&ptx, &job.source_name);
                        std::fs::write(super::protocol::ptx_path(dir, dtype), ptx)?;
                        Ok(c)
                    }
                    Err(e) => Err(e),
                }
            }
            other => other,
        };
        let entry = match compiled {
            Ok(c) if unsupported.is_some() => CompiledDtype {
                unsupported,
                ..CompiledDtype::built(dtype.to_string(), &c, job.log_bytes, None, false)
            },
            Ok(c) => {
                std::fs::write(cubin_path(dir, dtype), &c.cubin)?;
                let sass = if target == common::Target::Sm90aEmulated {
                    None
                } else {
                    native_sass(job, dir, &dtype.to_string(), &c.cubin)?
                };
                CompiledDtype::built(dtype.to_string(), &c, job.log_bytes, sass, false)
            }
            Err(e) => {
                CompiledDtype::failed(dtype.to_string(), &format!("{e:#}"), job.log_bytes, false)
            }
        };
        report.push(entry);
    }
    // The traced build of a rubric with trace facts: the same text and definitions plus the one
    // that turns the `wb::Trace` calls on, compiled as the launched builds are (a Hopper rubric:
    // no static checks beyond the compile). Its failure costs the trace facts only.
    if job.trace.is_some() {
        let dtype = TraceJob::DTYPE;
        let mut defines = spec.defines(dtype);
        defines.push((
            common::trace::DEFINE.0.to_string(),
            common::trace::DEFINE.1.to_string(),
        ));
        let name = format!("{dtype} (traced)");
        report.push(match compile(&source, target, &defines) {
            Ok(c) => {
                std::fs::write(traced_cubin_path(dir), &c.cubin)?;
                CompiledDtype::built(name, &c, job.log_bytes, None, true)
            }
            Err(e) => CompiledDtype::failed(name, &format!("{e:#}"), job.log_bytes, true),
        });
    }
    std::fs::write(
        dir.join("compile.json"),
        serde_json::to_vec_pretty(&report)?,
    )?;
    Ok(())
}

/// The log of a Blackwell kernel's failed static checks, as compiler messages the grader's
/// diagnostics filter understands: each rule broken on its source line, or ptxas' own log.
fn static_check_log(e: &anyhow::Error) -> String {
    if let Some(r) = e.downcast_ref::<common::static_check::RuleError>() {
        format!(
            "{}{} breaks {} rule(s) in its sm_100a PTX (the static checks of every Blackwell build)\n",
            r.as_diagnostics(),
            r.path,
            r.findings.len()
        )
    } else if let Some(c) = e.downcast_ref::<common::compile::CompileError>() {
        format!(
            "{}{} failed to compile for {} (the native build every Blackwell kernel must pass, also when it is graded under emulation)\n",
            c.log, c.path, c.arch
        )
    } else {
        format!("{e:#}")
    }
}

/// The launched kernel's instructions in a native build, where the job asks for them (the
/// rubric has requirements): disassembled here, inside the confinement, from the cubin file.
fn native_sass(
    job: &Job,
    dir: &Path,
    name: &str,
    cubin: &[u8],
) -> Result<Option<Result<std::collections::BTreeMap<String, usize>, String>>> {
    if !job.disassemble {
        return Ok(None);
    }
    let path = dir.join(format!("sass-{name}.cubin"));
    std::fs::write(&path, cubin)?;
    Ok(Some(super::technique::kernel_histogram(&path)))
}

// ---- the run ----------------------------------------------------------------------------

/// One input set on the GPU, between guards, with the grader's copies and reference on the host.
pub(super) struct InputSet {
    problem: Problem,
    pub(super) a: Guarded,
    pub(super) b: Guarded,
    /// cuBLAS's f32 product of the pristine inputs (updated on the host for redrawn rows).
    reference: Vec<f32>,
    a32: Vec<f32>,
    b32: Vec<f32>,
    /// The power-of-two scale the GPU's copies carry now (a timed launch's memoisation
    /// defence), with the scaled inputs and product; None: the GPU holds `problem` itself.
    scaled: Option<(Pow2, Problem, Vec<f32>)>,
    /// The expected output of the last launch on these buffers, if one ran.
    last_expected: Option<Vec<f32>>,
}

impl InputSet {
    /// What the GPU's A and B hold now.
    fn current(&self) -> &Problem {
        self.scaled.as_ref().map_or(&self.problem, |(_, p, _)| p)
    }
    /// The exact product of [`Self::current`].
    fn expected(&self) -> &[f32] {
        self.scaled.as_ref().map_or(&self.reference, |(_, _, r)| r)
    }
    fn scale(&self) -> Pow2 {
        self.scaled.as_ref().map_or(Pow2::default(), |(s, _, _)| *s)
    }
}

/// A test with everything it needs before the submission's module is loaded.
pub(super) struct Prepared {
    /// Its place among the run's tests.
    index: usize,
    test: JobTest,
    pub(super) shape: Shape,
    pub(super) dtype: Dtype,
    dist: Dist,
    pub(super) sets: Vec<InputSet>,
    /// C between guards, the decoy reference after the upper guard.
    pub(super) c: Guarded,
    decoy: Vec<f32>,
}

impl Prepared {
    /// The launch arguments of input set `set`, into this test's C.
    pub(super) fn args(&self, plan: &Plan, set: &InputSet) -> Result<LaunchArgs> {
        LaunchArgs::new(
            plan,
            self.dtype,
            self.shape,
            set.a.data(),
            set.b.data(),
            self.c.data(),
        )
    }

    /// C poisoned before a launch (every byte 0xFF: a NaN in f16 and bf16), so an output the
    /// kernel does not write reads as wrong.
    pub(super) fn poison_c(&self, gpu: &Gpu) -> Result<()> {
        memset8(gpu, self.c.data(), 0xFF, self.shape.m * self.shape.n * 2)
    }
}

/// A build the compile child left (`cubin`), loaded for the job's kernel and target: the
/// submission's own module, never compiled again here.
pub(super) fn load_build(gpu: &Gpu, job: &Job, cubin: Vec<u8>) -> Result<LoadedKernel> {
    let compiled = Compiled {
        cubin,
        target: job.target()?,
        compile_ms: 0.0,
        resources: Resources::default(),
        nvrtc_version: String::new(),
        log: String::new(),
    };
    LoadedKernel::from_compiled(gpu, &job.spec()?, compiled, &job.source_name)
}

/// Elements of A and of B set to [`SPIKE`] in an all-ones input set.
const SPIKES: usize = 8;
/// A spike's value: a power of two (exact in f16 and bf16), large enough that a row or column
/// holding one is off from K by far more than bf16's tolerance (K + 63 against K).
const SPIKE: f32 = 64.0;

/// A few elements of an all-ones input set become [`SPIKE`], at places drawn by `seed`: the
/// outputs stay integers (K, or more in the spikes' rows and columns), but a kernel that probes
/// a few elements, sees ones, and writes K everywhere without computing is wrong.
pub(super) fn spike(p: &mut Problem, seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5350_494B_4553);
    let two = p.dtype.from_f32(SPIKE);
    for m in [&mut p.a, &mut p.b] {
        for _ in 0..SPIKES {
            let i = rng.random_range(0..m.len());
            m[i] = two;
        }
    }
}

/// cuBLAS's f32 product, downloaded; its device copy is scrubbed before it is freed.
fn reference(
    gpu: &Gpu,
    blas: &Blas,
    shape: Shape,
    dtype: Dtype,
    a: u64,
    b: u64,
) -> Result<Vec<f32>> {
    let n = shape.m * shape.n;
    let scratch = Guarded::new(gpu, n * 4, 0)?;
    blas.gemm(shape, dtype, a, b, scratch.data(), true)?;
    let r = dtoh::<f32>(gpu, scratch.data(), n)?;
    scratch.scrub(gpu)?;
    Ok(r)
}

fn upload(gpu: &Gpu, data: &[u16]) -> Result<Guarded> {
    let g = Guarded::new(gpu, data.len() * 2, 0)?;
    htod(gpu, g.data(), data)?;
    Ok(g)
}

fn to_f32(dtype: Dtype, v: &[u16]) -> Vec<f32> {
    v.iter().map(|&x| dtype.to_f32(x)).collect()
}

pub(super) fn prepare(gpu: &Gpu, blas: &Blas, test: &JobTest, index: usize) -> Result<Prepared> {
    let (shape, dtype, dist) = (test.shape(), test.dtype()?, test.dist()?);
    let mut sets = Vec::new();
    for &seed in &test.seeds.sets {
        let mut problem = Problem::generate(shape, dtype, dist, seed);
        if dist == Dist::AllOnes {
            spike(&mut problem, seed);
        }
        let a = upload(gpu, &problem.a)?;
        let b = upload(gpu, &problem.b)?;
        let reference = reference(gpu, blas, shape, dtype, a.data(), b.data())?;
        sets.push(InputSet {
            a32: to_f32(dtype, &problem.a),
            b32: to_f32(dtype, &problem.b),
            problem,
            a,
            b,
            reference,
            scaled: None,
            last_expected: None,
        });
    }
    // The decoy must differ from every true answer: all-ones inputs give the same product for
    // any seed (on the H200 the read-reference cheat scored that test), so it draws gaussian.
    let decoy_dist = if dist == Dist::AllOnes {
        Dist::Gaussian
    } else {
        dist
    };
    let decoy_problem = Problem::generate(shape, dtype, decoy_dist, test.seeds.decoy);
    let (da, db) = (
        upload(gpu, &decoy_problem.a)?,
        upload(gpu, &decoy_problem.b)?,
    );
    let decoy = reference(gpu, blas, shape, dtype, da.data(), db.data())?;
    let c = Guarded::new(gpu, shape.m * shape.n * 2, shape.m * shape.n * 4)?;
    htod(gpu, c.tail(), &decoy)?;
    Ok(Prepared {
        index,
        test: test.clone(),
        shape,
        dtype,
        dist,
        sets,
        c,
        decoy,
    })
}

/// The outcome of the checks after one launch.
pub(super) struct Checked {
    pub(super) flags: Vec<Flag>,
    pub(super) summary: String,
}

/// Guards, inputs and output after a launch on `set`, writing into `c`.
pub(super) fn check_launch(
    gpu: &Gpu,
    p: &Prepared,
    set: &InputSet,
    previous: Option<&[f32]>,
) -> Result<Checked> {
    let Shape { m, n, k } = p.shape;
    let (current, expected) = (set.current(), set.expected());
    let mut flags = Vec::new();
    for (what, g) in [("A", &set.a), ("B", &set.b), ("C", &p.c)] {
        flags.extend(g.check_guards(gpu, what)?);
    }
    for (what, g, pristine, rows) in [
        ("A", &set.a, &current.a, m),
        ("B", &set.b, &current.b, p.shape.n),
    ] {
        let now: Vec<u16> = dtoh(gpu, g.data(), rows * k)?;
        if let Some(f) = input_flag(what, k, p.dtype, &now, pristine) {
            flags.push(f);
            htod(gpu, g.data(), pristine)?;
        }
    }
    let out: Vec<u16> = dtoh(gpu, p.c.data(), m * n)?;
    let v = verify(current, &out, expected, CPU_SAMPLES);
    if p.dist == Dist::ExactInt {
        flags.extend(exactness_flag(p.dtype, n, &out, expected));
    }
    if !v.passed {
        flags.extend(classify(&Evidence {
            out: &out,
            dtype: p.dtype,
            cols: n,
            expected,
            decoy: &p.decoy,
            previous,
            same_buffers: set.last_expected.as_deref(),
        }));
    }
    Ok(Checked {
        flags,
        summary: v.summary(),
    })
}

/// With [`Dist::ExactInt`] inputs every output is an integer exact in fp32 and in `dtype`: any
/// difference from the reference means an intermediate was rounded below fp32 (the tolerance of
/// `verify` would let a few units pass).
pub(super) fn exactness_flag(
    dtype: Dtype,
    cols: usize,
    out: &[u16],
    reference: &[f32],
) -> Option<Flag> {
    let wrong = out
        .iter()
        .zip(reference)
        .filter(|(&o, &r)| dtype.to_f32(o) != r)
        .count();
    let (i, (&o, &r)) = out
        .iter()
        .zip(reference)
        .enumerate()
        .find(|(_, (&o, &r))| dtype.to_f32(o) != r)?;
    Some(Flag::new(
        "inexact-accumulation",
        format!(
            "{wrong} outputs differ from their exact values (first C[{}][{}] = {} where the exact result is {r}): these integer inputs have partial sums beyond f16's exact range, so an intermediate was rounded below fp32",
            i / cols,
            i % cols,
            dtype.to_f32(o)
        ),
    ))
}

/// Redraw `count` random rows of A and of B of `set` (on the host and the GPU) and bring the
/// reference up to date on the host: a kernel cannot keep the answer for an input set.
fn refresh_rows(
    gpu: &Gpu,
    p_shape: Shape,
    dtype: Dtype,
    dist: Dist,
    set: &mut InputSet,
    seed: u64,
    count: usize,
) -> Result<()> {
    let Shape { m, n, k } = p_shape;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (mut rows, mut cols) = (Vec::new(), Vec::new());
    for _ in 0..count {
        let (i, j) = (rng.random_range(0..m), rng.random_range(0..n));
        let fresh = Problem::generate(Shape { m: 1, n: 1, k }, dtype, dist, rng.random());
        set.problem.a[i * k..(i + 1) * k].copy_from_slice(&fresh.a);
        set.problem.b[j * k..(j + 1) * k].copy_from_slice(&fresh.b);
        set.a32[i * k..(i + 1) * k].copy_from_slice(&to_f32(dtype, &fresh.a));
        set.b32[j * k..(j + 1) * k].copy_from_slice(&to_f32(dtype, &fresh.b));
        htod(gpu, set.a.data() + (i * k * 2) as u64, &fresh.a)?;
        htod(gpu, set.b.data() + (j * k * 2) as u64, &fresh.b)?;
        rows.push(i);
        cols.push(j);
    }
    let dot = |a: &[f32], b: &[f32]| -> f32 {
        a.iter()
            .zip(b)
            .map(|(&x, &y)| x as f64 * y as f64)
            .sum::<f64>() as f32
    };
    let (a32, b32) = (&set.a32, &set.b32);
    for &i in &rows {
        let arow = &a32[i * k..(i + 1) * k];
        par_fill(&mut set.reference[i * n..(i + 1) * n], |j| {
            dot(arow, &b32[j * k..(j + 1) * k])
        });
    }
    for &j in &cols {
        let bcol = &b32[j * k..(j + 1) * k];
        let mut col = vec![0f32; m];
        par_fill(&mut col, |i| dot(&a32[i * k..(i + 1) * k], bcol));
        for (i, v) in col.into_iter().enumerate() {
            set.reference[i * n + j] = v;
        }
    }
    Ok(())
}

/// `out[i] = f(i)` for every i, on several threads.
fn par_fill(out: &mut [f32], f: impl Fn(usize) -> f32 + Sync) {
    let threads = std::thread::available_parallelism()
        .map_or(4, |t| t.get())
        .min(16);
    let chunk = out.len().div_ceil(threads).max(1);
    let f = &f;
    std::thread::scope(|s| {
        for (c, part) in out.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                for (x, o) in part.iter_mut().enumerate() {
                    *o = f(c * chunk + x);
                }
            });
        }
    });
}

/// State across the tests of one run.
pub(super) struct Run<'a> {
    gpu: &'a Gpu,
    launch_timeout: Duration,
    /// Launches that passed every check so far.
    passed_launches: usize,
    /// The expected output of the last launch, with its shape and dtype.
    previous: Option<(Shape, Dtype, Vec<f32>)>,
    /// Every grader allocation a launch must leave as it was.
    seals: Vec<Seal>,
    /// The names of the run's tests, by index.
    names: Vec<String>,
}

/// A grader allocation and the digest of all its bytes (guard zones included).
pub(super) struct Seal {
    what: String,
    test: usize,
    ptr: u64,
    bytes: usize,
    digest: u64,
}

/// Allocations up to this size are checked after every launch; larger ones (the inputs of
/// performance-sized tests) after every test.
const SEAL_EVERY_LAUNCH_BYTES: usize = 16 << 20;

fn digest(gpu: &Gpu, ptr: u64, bytes: usize) -> Result<u64> {
    use std::hash::{Hash, Hasher};
    let v: Vec<u8> = dtoh(gpu, ptr, bytes)?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.hash(&mut h);
    Ok(h.finish())
}

/// Seal every allocation of every test the run holds: each input set's A and B (with their
/// guards) and the decoy reference past C's upper guard. C's own data is the kernel's to write;
/// its guards are checked after every launch.
pub(super) fn seal_all(gpu: &Gpu, prepared: &[Prepared]) -> Result<Vec<Seal>> {
    let mut seals = Vec::new();
    for p in prepared {
        let mut add = |what: String, ptr: u64, bytes: usize| -> Result<()> {
            seals.push(Seal {
                what,
                test: p.index,
                ptr,
                bytes,
                digest: digest(gpu, ptr, bytes)?,
            });
            Ok(())
        };
        for (si, set) in p.sets.iter().enumerate() {
            for (name, g) in [("A", &set.a), ("B", &set.b)] {
                let (ptr, bytes) = g.whole();
                add(format!("{name} of input set {}", si + 1), ptr, bytes)?;
            }
        }
        add(
            "the decoy reference".into(),
            p.c.tail(),
            p.shape.m * p.shape.n * 4,
        )?;
    }
    Ok(seals)
}

impl<'a> Run<'a> {
    /// A run of the tests named `names` (by index), whose allocations are `seals`.
    pub(super) fn new(
        gpu: &'a Gpu,
        launch_timeout: Duration,
        seals: Vec<Seal>,
        names: Vec<String>,
    ) -> Run<'a> {
        Run {
            gpu,
            launch_timeout,
            passed_launches: 0,
            previous: None,
            seals,
            names,
        }
    }
}

impl Run<'_> {
    /// Compare the seals (all of them, or only those up to [`SEAL_EVERY_LAUNCH_BYTES`]), except
    /// the allocations of test `skip` (a performance test redraws its own inputs).
    /// Seal test `test`'s allocations anew (a performance test redraws rows of its inputs).
    fn reseal(&mut self, test: usize) -> Result<()> {
        let gpu = self.gpu;
        for s in self.seals.iter_mut().filter(|s| s.test == test) {
            s.digest = digest(gpu, s.ptr, s.bytes)?;
        }
        Ok(())
    }

    /// A seal found broken is renewed, so the launch that broke it alone is blamed.
    pub(super) fn check_seals(&mut self, all: bool, skip: Option<usize>) -> Result<Option<Flag>> {
        let gpu = self.gpu;
        for s in self.seals.iter_mut() {
            if Some(s.test) == skip || (!all && s.bytes > SEAL_EVERY_LAUNCH_BYTES) {
                continue;
            }
            let now = digest(gpu, s.ptr, s.bytes)?;
            if now != s.digest {
                s.digest = now;
                let test = self.names.get(s.test).map_or("?", String::as_str);
                return Ok(Some(Flag::new(
                    "grader-memory-modified",
                    format!(
                        "the kernel wrote into a buffer of the grader's that it was never given: {} of test {test:?}",
                        s.what
                    ),
                )));
            }
        }
        Ok(None)
    }
}

impl Run<'_> {
    fn previous_for(&self, shape: Shape, dtype: Dtype) -> Option<&[f32]> {
        self.previous
            .as_ref()
            .filter(|(s, d, _)| *s == shape && *d == dtype)
            .map(|(_, _, r)| r.as_slice())
    }

    /// Flags of a failed launch, with `wrong-after-passing` when earlier launches passed.
    fn failure_flags(&self, mut flags: Vec<Flag>) -> Vec<Flag> {
        if self.passed_launches > 0 && flags.iter().any(|f| f.name == "wrong-result") {
            flags.push(Flag::new(
                "wrong-after-passing",
                format!(
                    "the kernel passed its first {} launches, then gave a wrong result: its behaviour changes from launch to launch",
                    self.passed_launches
                ),
            ));
        }
        flags
    }
}

/// A test that could not finish because the kernel faulted (the context is then lost).
struct Fault(String);

fn correctness(run: &mut Run, kernel: &LoadedKernel, p: &Prepared) -> Result<TestResult, Fault> {
    let gpu = run.gpu;
    let fault = |e: anyhow::Error| Fault(format!("{e:#}"));
    let plan = kernel.plan(gpu, p.shape, None).map_err(fault)?;
    let mut emu = if kernel.emulated() {
        let e = EmuBuffers::new(gpu, plan.dims.num_ctas() as usize).map_err(fault)?;
        e.install(gpu, kernel.module()).map_err(fault)?;
        Some(e)
    } else {
        None
    };
    let mut launches = 0;
    for (si, set) in p.sets.iter().enumerate() {
        let args = p.args(&plan, set).map_err(fault)?;
        p.poison_c(gpu).map_err(fault)?;
        launch_and_wait(
            gpu,
            kernel,
            &plan,
            &args,
            emu.as_mut(),
            p.test.seeds.sets[si],
            run.launch_timeout,
        )
        .map_err(fault)?;
        launches += 1;
        let mut checked =
            check_launch(gpu, p, set, run.previous_for(p.shape, p.dtype)).map_err(fault)?;
        let last = si + 1 == p.sets.len();
        if let Some(f) = run.check_seals(last, None).map_err(fault)? {
            checked.flags.push(f);
        }
        if !checked.flags.is_empty() {
            let flags = run.failure_flags(checked.flags);
            return Ok(TestResult {
                name: p.test.name.clone(),
                status: Status::Failed,
                launches,
                detail: format!(
                    "input set {} of {}: {}",
                    si + 1,
                    p.sets.len(),
                    checked.summary
                ),
                flags,
                timing: None,
            });
        }
        run.passed_launches += 1;
        run.previous = Some((p.shape, p.dtype, set.reference.clone()));
    }
    Ok(TestResult {
        name: p.test.name.clone(),
        status: Status::Passed,
        launches,
        flags: Vec::new(),
        detail: format!("{} input sets, every output verified", p.sets.len()),
        timing: None,
    })
}

/// The submission's side of a timed run: rotate the input sets, redraw rows, poison C before
/// each launch; check everything after it.
struct KernelSide<'a> {
    gpu: &'a Gpu,
    kernel: &'a LoadedKernel,
    plan: Plan,
    p: &'a mut Prepared,
    args: Vec<LaunchArgs>,
    current: usize,
    /// The expected output of the previous launch (of whichever set).
    previous: Option<Vec<f32>>,
    launches: usize,
    passed_before: usize,
    failure: Option<(usize, Vec<Flag>, String)>,
}

impl Timed for KernelSide<'_> {
    fn prepare(&mut self, round: usize) -> Result<()> {
        let s = round % self.p.sets.len();
        self.current = s;
        if self.p.test.fresh_rows > 0 {
            let seed =
                self.p.test.seeds.refresh ^ (round as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let (shape, dtype, dist, rows) = (
                self.p.shape,
                self.p.dtype,
                self.p.dist,
                self.p.test.fresh_rows,
            );
            refresh_rows(
                self.gpu,
                shape,
                dtype,
                dist,
                &mut self.p.sets[s],
                seed,
                rows,
            )?;
        }
        memset8(
            self.gpu,
            self.p.c.data(),
            0xFF,
            self.p.shape.m * self.p.shape.n * 2,
        )
    }
    /// A fresh power-of-two scale of this round's A and B (exact: see `common::rescale`), with a,
    /// b and a+b all different from the last launch on these buffers, so that a kernel keeping
    /// outputs by their inputs' addresses returns a wrong one; the expected output is the
    /// reference times 2^(a+b), no new product needed.
    fn rescale(&mut self, round: usize) -> Result<()> {
        let dtype = self.p.dtype;
        let seed = self.p.test.seeds.refresh
            ^ 0x5343_414C_4553 // "SCALES"
            ^ (round as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
        let set = &mut self.p.sets[self.current];
        let chosen = rescale::choose(
            seed,
            set.scale(),
            rescale::exact_range(dtype, &set.problem.a),
            rescale::exact_range(dtype, &set.problem.b),
            rescale::output_range(dtype, &set.reference),
        );
        // None (no scale fits this set's values): the current one is kept, and written again,
        // since redrawn rows arrived unscaled.
        let s = chosen.unwrap_or(set.scale());
        let scaled = |v: &[u16], e: i32| {
            rescale::scale(dtype, v, e)
                .ok_or_else(|| anyhow!("internal: a scale of 2^{e} is not exact for these inputs"))
        };
        let problem = Problem {
            a: scaled(&set.problem.a, s.a)?,
            b: scaled(&set.problem.b, s.b)?,
            shape: set.problem.shape,
            dtype,
            dist: set.problem.dist,
            seed: set.problem.seed,
        };
        htod(self.gpu, set.a.data(), &problem.a)?;
        htod(self.gpu, set.b.data(), &problem.b)?;
        let f = s.c_factor();
        let reference = set.reference.iter().map(|&r| r * f).collect();
        set.scaled = Some((s, problem, reference));
        Ok(())
    }
    fn launch(&mut self) -> Result<()> {
        self.launches += 1;
        // SAFETY: the arguments name this test's live buffers, for this plan.
        unsafe {
            self.kernel
                .launch(self.gpu, &self.plan, &self.args[self.current])
        }
    }
    fn check(&mut self, round: usize) -> Result<()> {
        let set = &self.p.sets[self.current];
        let checked = check_launch(self.gpu, self.p, set, self.previous.as_deref())?;
        let expected = set.expected().to_vec();
        self.p.sets[self.current].last_expected = Some(expected.clone());
        self.previous = Some(expected);
        if !checked.flags.is_empty() {
            self.failure = Some((round, checked.flags, checked.summary));
            bail!("launch {} failed its checks", round + 1);
        }
        self.passed_before += 1;
        Ok(())
    }
}

/// cuBLAS on the same input set, into its own buffer, poisoned after each run so no later
/// launch of the submission can find its product.
struct CublasSide<'a> {
    gpu: &'a Gpu,
    blas: &'a Blas,
    p_shape: Shape,
    dtype: Dtype,
    ptrs: Vec<(u64, u64)>,
    out: Guarded,
    current: usize,
}

impl Timed for CublasSide<'_> {
    fn prepare(&mut self, round: usize) -> Result<()> {
        self.current = round % self.ptrs.len();
        Ok(())
    }
    fn launch(&mut self) -> Result<()> {
        let (a, b) = self.ptrs[self.current];
        self.blas
            .gemm(self.p_shape, self.dtype, a, b, self.out.data(), false)
    }
    /// Rounds rotate, so the submission may run right after cuBLAS on the same inputs: poison
    /// this round's answer before it can.
    fn after_launch(&mut self) -> Result<()> {
        memset8(self.gpu, self.out.data(), 0xFF, self.out.data_bytes)
    }
    fn check(&mut self, _round: usize) -> Result<()> {
        memset8(self.gpu, self.out.data(), 0xFF, self.out.data_bytes)
    }
}

fn performance(
    run: &mut Run,
    kernel: &LoadedKernel,
    blas: &Blas,
    p: &mut Prepared,
) -> Result<TestResult, Fault> {
    let gpu = run.gpu;
    let fault = |e: anyhow::Error| Fault(format!("{e:#}"));
    let name = p.test.name.clone();
    if kernel.emulated() {
        return Ok(TestResult {
            name,
            status: Status::Skipped,
            launches: 0,
            flags: Vec::new(),
            detail: format!(
                "skipped: needs native hardware. {} runs this Blackwell kernel under the tcgen05 emulation, whose timings mean nothing; a B200 times it (a Hopper twin is timed on an H100/H200)",
                gpu.info.name
            ),
            timing: None,
        });
    }
    let plan = kernel.plan(gpu, p.shape, None).map_err(fault)?;
    let mut args = Vec::new();
    let mut ptrs = Vec::new();
    for set in &p.sets {
        args.push(p.args(&plan, set).map_err(fault)?);
        ptrs.push((set.a.data(), set.b.data()));
    }
    let flush = L2Flush::new(gpu).map_err(fault)?;
    let warm = Warmup::new(gpu).map_err(fault)?;
    let out = Guarded::new(gpu, p.shape.m * p.shape.n * 2, 0).map_err(fault)?;
    let (shape, dtype, sets, warmup, iters) =
        (p.shape, p.dtype, p.sets.len(), p.test.warmup, p.test.iters);
    let mut cublas = CublasSide {
        gpu,
        blas,
        p_shape: shape,
        dtype,
        ptrs,
        out,
        current: 0,
    };
    let mut side = KernelSide {
        gpu,
        kernel,
        plan,
        p,
        args,
        current: 0,
        previous: None,
        launches: 0,
        passed_before: 0,
        failure: None,
    };
    // The workbook's one protocol (rotated rounds: cuBLAS poisons its answer right after each
    // of its launches), with fresh power-of-two scales of the inputs every round. No NVML in
    // the sandboxed worker: clocks are read by `runner step` and `runner bench`.
    let mut prime = || warm.run(gpu, blas);
    let mut protocol = Protocol::standard(
        warmup,
        iters,
        Some(flush.arg(gpu)),
        run.launch_timeout,
        &mut prime,
        None,
    );
    protocol.rescale = true;
    let stats = time_rounds(gpu, &mut protocol, &mut [&mut side, &mut cublas]);
    let launches = side.launches;
    run.passed_launches += side.passed_before;
    let stats = match (stats, side.failure.take()) {
        (_, Some((round, flags, summary))) => {
            let flags = run.failure_flags(flags);
            return Ok(TestResult {
                name,
                status: Status::Failed,
                launches,
                flags,
                detail: format!(
                    "launch {} of {} ({}, input set {} of {sets}) failed: {summary}",
                    round + 1,
                    warmup + iters,
                    if round < warmup { "warm-up" } else { "timed" },
                    round % sets + 1
                ),
                timing: None,
            });
        }
        (Err(e), None) => return Err(fault(e)),
        (Ok(s), None) => s,
    };
    // Every other test's buffers, after all of this test's launches.
    if let Some(f) = run.check_seals(true, Some(p.index)).map_err(fault)? {
        return Ok(TestResult {
            name,
            status: Status::Failed,
            launches,
            flags: vec![f],
            detail: format!("after {launches} launches, a buffer of the grader's had changed"),
            timing: None,
        });
    }
    let (k, c) = (&stats[0].stats, &stats[1].stats);
    let flops = shape.flops();
    let tflops = k.tflops(flops);
    let timing = TimingResult {
        kernel_median_us: k.median_us,
        kernel_min_us: k.min_us,
        kernel_max_us: k.max_us,
        cublas_median_us: c.median_us,
        cublas_min_us: c.min_us,
        ratio: c.median_us / k.median_us,
        tflops,
        cublas_tflops: c.tflops(flops),
        peak_tflops: gpu.info.peak_tflops(),
        timed_launches: iters,
        input_sets: sets,
        l2_flushed: true,
    };
    Ok(TestResult {
        name,
        status: Status::Passed,
        launches,
        flags: Vec::new(),
        detail: format!(
            "{:.1} TFLOP/s, {:.2}x cuBLAS ({:.1} TFLOP/s): medians of {iters} timed launches over {sets} rotating input sets, every output verified",
            tflops,
            timing.ratio,
            timing.cublas_tflops
        ),
        timing: Some(timing),
    })
}

pub(super) fn run_phase(job: &Job, dir: &Path, gpu: &Gpu, blas: &Blas, env: EnvInfo) -> Result<()> {
    let mut results = ResultsWriter::create(dir)?;
    results.emit(&RunLine::Env(Box::new(env)))?;
    // The kernel and target the builds load for ([`load_build`]): a job naming neither is
    // refused before any input is drawn.
    job.spec()?;
    job.target()?;

    // Inputs and references first: no code of the submission is loaded yet.
    let mut prepared = Vec::new();
    for (i, t) in job.tests.iter().enumerate() {
        prepared.push(
            prepare(gpu, blas, t, i).with_context(|| format!("preparing test {:?}", t.name))?,
        );
    }
    // The traced launch's too, when the rubric has trace facts: a test of its own, run after
    // the others.
    let mut traced = match &job.trace {
        Some(t) => Some(
            prepare(gpu, blas, &t.as_test(), prepared.len())
                .context("preparing the traced launch")?,
        ),
        None => None,
    };
    let mut seals = seal_all(gpu, &prepared)?;
    seals.extend(seal_all(gpu, traced.as_slice())?);

    // Now the submission's module, once per dtype.
    let mut kernels: Vec<(Dtype, LoadedKernel)> = Vec::new();
    for dtype in job.dtypes()? {
        let cubin = std::fs::read(cubin_path(dir, dtype))
            .with_context(|| format!("no compiled kernel for {dtype}"))?;
        kernels.push((dtype, load_build(gpu, job, cubin)?));
    }

    let mut run = Run {
        gpu,
        launch_timeout: Duration::from_secs(job.launch_seconds),
        passed_launches: 0,
        previous: None,
        seals,
        names: job
            .tests
            .iter()
            .chain(traced.iter().map(|p| &p.test))
            .map(|t| t.name.clone())
            .collect(),
    };
    let mut lost: Option<String> = None;
    for p in prepared.iter_mut() {
        let result = if let Some(why) = &lost {
            TestResult {
                name: p.test.name.clone(),
                status: Status::Error,
                launches: 0,
                flags: Vec::new(),
                detail: format!("not run: {why}"),
                timing: None,
            }
        } else {
            let kernel = &kernels
                .iter()
                .find(|(d, _)| *d == p.dtype)
                .ok_or_else(|| anyhow!("no kernel for {}", p.dtype))?
                .1;
            let outcome = match p.test.kind {
                Kind::Correctness => correctness(&mut run, kernel, p),
                Kind::Performance => performance(&mut run, kernel, blas, p).and_then(|r| {
                    run.reseal(p.index).map_err(|e| Fault(format!("{e:#}")))?;
                    Ok(r)
                }),
                // Requirements are checked from the compile child's SASS, never sent to a run.
                Kind::Technique => bail!("internal: a requirement was sent to the run as a test"),
            };
            outcome.unwrap_or_else(|Fault(why)| {
                lost = Some(format!(
                    "an earlier test ({}) faulted and the GPU context was lost",
                    p.test.name
                ));
                TestResult {
                    name: p.test.name.clone(),
                    status: Status::Failed,
                    launches: 1,
                    flags: vec![Flag::new("kernel-fault", truncate_log(&why, 2048))],
                    detail: "the kernel faulted".into(),
                    timing: None,
                }
            })
        };
        results.emit(&RunLine::Test(result))?;
    }
    // After every test, never among the timed launches: the one traced launch.
    if let (Some(tj), Some(p)) = (&job.trace, traced.as_mut()) {
        let facts: Vec<Fact> = tj
            .facts
            .iter()
            .map(|f| Fact::parse(f))
            .collect::<Result<_>>()?;
        let outcome = match &lost {
            Some(why) => Traced::NotRun(format!("not run: {why}")),
            None => traced_launch(&mut run, job, tj, dir, p),
        };
        for r in evaluate(&facts, &outcome) {
            results.emit(&RunLine::Fact(r))?;
        }
    }
    Ok(())
}

/// The traced build, launched once on the traced launch's inputs with a trace buffer installed,
/// its output and the grader's buffers checked as after any test's launch, its records decoded.
fn traced_launch(run: &mut Run, job: &Job, tj: &TraceJob, dir: &Path, p: &Prepared) -> Traced {
    let gpu = run.gpu;
    let failed = |what: &str, e: anyhow::Error| Traced::Failed {
        detail: format!("{what}: {}", one_line(&format!("{e:#}"))),
        flags: Vec::new(),
    };
    let loaded = (|| -> Result<LoadedKernel> {
        let cubin = std::fs::read(traced_cubin_path(dir))
            .context("internal: no traced build in the run's folder")?;
        load_build(gpu, job, cubin)
    })();
    let kernel = match loaded {
        Ok(k) if k.emulated() => {
            return Traced::Failed {
                detail: "traces are recorded on native Hopper only".into(),
                flags: Vec::new(),
            }
        }
        Ok(k) => k,
        Err(e) => return failed("the traced build could not be loaded", e),
    };
    let set = &p.sets[0];
    let prepared = (|| -> Result<(common::step::Plan, LaunchArgs, TraceBuffer)> {
        let plan = kernel.plan(gpu, p.shape, None)?;
        let args = p.args(&plan, set)?;
        let layout = common::run::trace_layout(&kernel.spec, &plan, p.shape, tj.clusters);
        let mut buffer = TraceBuffer::new(gpu, layout)?;
        buffer.install(gpu, kernel.module())?;
        p.poison_c(gpu)?;
        Ok((plan, args, buffer))
    })();
    let (plan, args, buffer) = match prepared {
        Ok(x) => x,
        Err(e) => return failed("the traced launch could not be set up", e),
    };
    if let Err(e) = launch_and_wait(
        gpu,
        &kernel,
        &plan,
        &args,
        None,
        tj.seed,
        run.launch_timeout,
    ) {
        let why = format!("{e:#}");
        return Traced::Failed {
            detail: "the traced launch faulted".into(),
            flags: vec![Flag::new("kernel-fault", truncate_log(&why, 2048))],
        };
    }
    let recording = buffer
        .read(gpu, kernel.module())
        .map_err(|e| one_line(&format!("{e:#}")));
    let checked = check_launch(gpu, p, set, None).and_then(|mut c| {
        c.flags.extend(run.check_seals(true, None)?);
        Ok(c)
    });
    match checked {
        Ok(c) => Traced::Ran {
            flags: c.flags,
            summary: c.summary,
            recording,
        },
        Err(e) => failed("the traced launch's output could not be checked", e),
    }
}

/// The first line of an error, at most 300 characters: what a report's detail carries.
pub(super) fn one_line(s: &str) -> String {
    s.lines().next().unwrap_or("").chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blackwell_rule_findings_reach_the_student_on_their_source_line() {
        // Step 4's kernel with a seeded tcgen05 rule break (the cli test's), named as the
        // grader names a submission.
        let step = runner::steps::get(4).unwrap();
        let text = step.info().blackwell.text;
        let source = KernelSource {
            path: super::super::protocol::SOURCE_NAME.into(),
            text: common::mutation::find("alloc-cta-group-1")
                .unwrap()
                .apply(text)
                .unwrap(),
        };
        let line = source
            .text
            .lines()
            .position(|l| l.contains("bw::mma_f16_2cta("))
            .unwrap()
            + 1;
        let spec = common::step::KernelSpec::new(step, common::step::Arch::Blackwell);
        let e =
            common::static_check::check_blackwell(&source, &spec.defines(Dtype::F16)).unwrap_err();
        let log = static_check_log(&e);
        let shown =
            super::super::diagnostics::student_log(&log, &super::super::submission::own_files());
        assert!(
            shown.starts_with(&format!("kernel.cu({line}): error: one-cta-group: ")),
            "{shown}"
        );
        assert!(shown.contains("bw::mma_f16_2cta("), "{shown}");
        assert!(shown.contains("kernel.cu breaks 1 rule(s)"), "{shown}");
        assert!(!shown.contains("withheld"), "{shown}");
    }

    #[test]
    fn all_ones_sets_get_a_few_spikes_and_nothing_else_changes() {
        let shape = Shape {
            m: 64,
            n: 32,
            k: 96,
        };
        let mut p = Problem::generate(shape, Dtype::Bf16, Dist::AllOnes, 9);
        spike(&mut p, 9);
        let one = Dtype::Bf16.from_f32(1.0);
        let big = Dtype::Bf16.from_f32(SPIKE);
        for m in [&p.a, &p.b] {
            let spikes = m.iter().filter(|&&x| x == big).count();
            assert!((1..=SPIKES).contains(&spikes), "{spikes}");
            assert!(m.iter().all(|&x| x == one || x == big));
        }
        // The same seed, the same places.
        let mut q = Problem::generate(shape, Dtype::Bf16, Dist::AllOnes, 9);
        spike(&mut q, 9);
        assert_eq!((p.a, p.b), (q.a, q.b));
    }

    #[test]
    fn exact_integer_inputs_flag_any_rounding() {
        let reference = [2048.0f32, -3.0, 17.0, 0.0];
        let exact: Vec<u16> = reference.iter().map(|&x| Dtype::F16.from_f32(x)).collect();
        assert!(exactness_flag(Dtype::F16, 2, &exact, &reference).is_none());
        let mut off = exact.clone();
        off[2] = Dtype::F16.from_f32(16.0);
        let f = exactness_flag(Dtype::F16, 2, &off, &reference).unwrap();
        assert_eq!(f.name, "inexact-accumulation");
        assert!(f.detail.starts_with("1 outputs differ") && f.detail.contains("C[1][0] = 16"));
    }
}
