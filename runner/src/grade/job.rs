//! What the grader hands a child process (a job, as JSON over the child's stdin) and what the
//! child hands back (JSON files in its scratch folder). A job carries the submission's text and
//! the derived seeds of the tests of its phase only: never a path into the submission folder,
//! never the instructor's secret, never a test another child runs (the compile child gets no
//! test at all, only the dtypes to compile for).

use super::counts::Measured;
use super::protocol::RESULTS_FILE;
use super::vocab::{FactResult, Flag, Kind, Status};
use anyhow::{anyhow, bail, Context, Result};
use common::step::KernelSpec;
use common::{Dist, Dtype, Shape, Target};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Describe and health-check the GPU.
    Probe,
    /// Compile the submission with NVRTC (no GPU needed).
    Compile,
    /// Run every test on the GPU.
    Run,
    /// Count the instructions one launch executes (the executed requirements), on the GPU.
    Measure,
    /// Run every test of a Blackwell rubric on the PTX simulator (no GPU), and the measured
    /// launch of its executed requirements where the job carries one.
    Simulate,
}

impl Phase {
    pub fn parse(s: &str) -> Result<Phase> {
        Ok(match s {
            "probe" => Phase::Probe,
            "compile" => Phase::Compile,
            "run" => Phase::Run,
            "measure" => Phase::Measure,
            "simulate" => Phase::Simulate,
            other => bail!("unknown phase {other:?}"),
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Phase::Probe => "probe",
            Phase::Compile => "compile",
            Phase::Run => "run",
            Phase::Measure => "measure",
            Phase::Simulate => "simulate",
        }
    }
}

/// The seeds of one test, derived by the grader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestSeeds {
    /// One per input set.
    pub sets: Vec<u64>,
    /// The rows redrawn before each launch of a performance test.
    pub refresh: u64,
    /// The decoy reference planted next to C.
    pub decoy: u64,
    /// The simulator's schedule seed (a Blackwell rubric graded on the simulator): derived per
    /// student like the input seeds, recorded so a failure replays.
    #[serde(default)]
    pub schedule: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JobTest {
    pub name: String,
    pub kind: Kind,
    pub shape: [usize; 3],
    pub dtype: String,
    pub dist: String,
    pub seeds: TestSeeds,
    pub warmup: usize,
    pub iters: usize,
    pub fresh_rows: usize,
}

impl JobTest {
    /// A launch the grader makes on public inputs (the traced and the measured launches): one
    /// gaussian input set from the fixed `seed`, its reference and checks a correctness test's,
    /// never timed.
    fn public(name: &str, shape: [usize; 3], dtype: Dtype, seed: u64) -> JobTest {
        JobTest {
            name: name.into(),
            kind: Kind::Correctness,
            shape,
            dtype: dtype.to_string(),
            dist: Dist::Gaussian.to_string(),
            seeds: TestSeeds {
                sets: vec![seed],
                refresh: seed ^ 1,
                decoy: seed ^ 2,
                schedule: seed ^ 3,
            },
            warmup: 0,
            iters: 0,
            fresh_rows: 0,
        }
    }

    pub fn shape(&self) -> Shape {
        Shape {
            m: self.shape[0],
            n: self.shape[1],
            k: self.shape[2],
        }
    }
    pub fn dtype(&self) -> Result<Dtype> {
        self.dtype.parse()
    }
    pub fn dist(&self) -> Result<Dist> {
        self.dist.parse()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    pub phase: Phase,
    pub step: u32,
    /// `sm_90a` or `sm_100a`.
    pub arch: String,
    pub params: Vec<String>,
    /// `Sm90a`, `Sm90aEmulated` or `Sm100a`: chosen by the grader for the GPU it probed.
    pub target: Option<String>,
    /// The name compiler messages use (a bare file name: no folder NVRTC could search).
    pub source_name: String,
    pub source: String,
    /// The dtypes to compile for (the compile child) or to load (a run child).
    pub dtypes: Vec<String>,
    /// The tests this child runs (none for the compile child).
    pub tests: Vec<JobTest>,
    pub launch_seconds: u64,
    pub log_bytes: usize,
    /// The compile child also disassembles the native build, for the rubric's requirements.
    #[serde(default)]
    pub disassemble: bool,
    /// The rubric's trace facts (Hopper): the compile child also makes the traced f16 build,
    /// and the run child that gets this makes one traced launch after its tests.
    #[serde(default)]
    pub trace: Option<TraceJob>,
    /// The measured launch of a measuring child (its one dtype is `dtypes`), or of a
    /// simulating child (one per dtype of `dtypes`, after its tests).
    #[serde(default)]
    pub measure: Option<MeasureJob>,
    /// The compile child also writes each build's sm_100a PTX, for the simulator.
    #[serde(default)]
    pub ptx: bool,
    /// A simulating child's budget: simulated instructions (all threads) per launch.
    #[serde(default)]
    pub sim_steps: u64,
}

/// The one traced launch of a rubric with trace requirements: public, like a visible test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceJob {
    /// The facts to check (names, each once).
    pub facts: Vec<String>,
    /// M, N, K of the launch (f16, gaussian inputs).
    pub shape: [usize; 3],
    pub seed: u64,
    /// The CTAs of the grid's first this-many clusters record.
    pub clusters: u32,
}

impl TraceJob {
    /// The dtype of the traced build.
    pub const DTYPE: Dtype = Dtype::F16;
    /// The seed of the traced launch's inputs: fixed and public (nothing of a hidden test).
    pub const SEED: u64 = 0x7472_6163_6564; // "traced"
    /// Clusters that record: two, as `runner step --trace` records by default.
    pub const CLUSTERS: u32 = 2;

    /// The traced launch as a test of the run (its inputs, reference and checks are a test's).
    pub fn as_test(&self) -> JobTest {
        JobTest::public("traced launch", self.shape, TraceJob::DTYPE, self.seed)
    }
}

/// The shape of the traced launch: two cluster tiles by two (several clusters, so the first two
/// that record are ordinary ones) and eight k-blocks (more than any step's stages, so every
/// pipeline slot is reused). Small and public: it is not one of the rubric's tests.
pub fn trace_shape(spec: &KernelSpec) -> Result<Shape> {
    let k = spec.shape();
    let s = Shape {
        m: 2 * k.cluster_tile.0 as usize,
        n: 2 * k.cluster_tile.1 as usize,
        k: 8 * k.tile_k as usize,
    };
    spec.check_shape(s).map_err(|e| anyhow!(e))?;
    Ok(s)
}

/// The measured launch a measuring child makes: public inputs at [`measure_shape`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeasureJob {
    pub shape: [usize; 3],
    pub seed: u64,
}

impl MeasureJob {
    /// The seed of the measured launch's inputs: fixed and public (nothing of a hidden test).
    pub const SEED: u64 = 0x6d65_6173_7572_6564; // "measured"

    /// The measured launch as a test of the child (its inputs, reference and checks are a
    /// test's), in `dtype`.
    pub fn as_test(&self, dtype: Dtype) -> JobTest {
        JobTest::public("measured launch", self.shape, dtype, self.seed)
    }
}

/// The shape of the measured launch: two cluster tiles by two and eight k-blocks (more than
/// any step's stages, so every pipeline slot is reused). Small and public.
pub fn measure_shape(spec: &KernelSpec) -> Result<Shape> {
    trace_shape(spec)
}

impl Job {
    pub fn probe() -> Job {
        Job {
            phase: Phase::Probe,
            step: 0,
            arch: "sm_90a".into(),
            params: Vec::new(),
            target: None,
            source_name: String::new(),
            source: String::new(),
            dtypes: Vec::new(),
            tests: Vec::new(),
            launch_seconds: 30,
            log_bytes: 16 * 1024,
            disassemble: false,
            trace: None,
            measure: None,
            ptx: false,
            sim_steps: 0,
        }
    }

    pub fn spec(&self) -> Result<KernelSpec> {
        let arch = match self.arch.as_str() {
            "sm_90a" => common::step::Arch::Hopper,
            "sm_100a" => common::step::Arch::Blackwell,
            a => bail!("unknown arch {a:?}"),
        };
        let mut spec = KernelSpec::new(runner::steps::get(self.step)?, arch);
        spec.params.apply(&self.params).map_err(|e| anyhow!(e))?;
        Ok(spec)
    }

    pub fn target(&self) -> Result<Target> {
        target_from_name(self.target.as_deref().unwrap_or(""))
    }

    /// The dtypes to compile or load, each once.
    pub fn dtypes(&self) -> Result<Vec<Dtype>> {
        self.dtypes.iter().map(|d| d.parse()).collect()
    }

    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        Ok(serde_json::to_vec(self)?)
    }
    /// The job from a reader (the child's stdin).
    pub fn read_from(mut r: impl std::io::Read) -> Result<Job> {
        let mut bytes = Vec::new();
        r.read_to_end(&mut bytes)
            .context("cannot read the job from stdin")?;
        serde_json::from_slice(&bytes).context("stdin holds no job")
    }
}

pub fn target_name(t: Target) -> &'static str {
    match t {
        Target::Sm100a => "Sm100a",
        Target::Sm90aEmulated => "Sm90aEmulated",
        Target::Sm90a => "Sm90a",
    }
}

pub fn target_from_name(s: &str) -> Result<Target> {
    Ok(match s {
        "Sm100a" => Target::Sm100a,
        "Sm90aEmulated" => Target::Sm90aEmulated,
        "Sm90a" => Target::Sm90a,
        other => bail!("unknown target {other:?}"),
    })
}

/// The GPU and software a run saw, recorded in every report.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EnvInfo {
    pub device: usize,
    pub name: String,
    pub compute_capability: (i32, i32),
    pub sm_count: u32,
    pub max_clock_mhz: u32,
    pub memory_clock_mhz: u32,
    pub l2_bytes: u32,
    pub max_smem_per_block: u32,
    pub driver_version: String,
    pub peak_tflops: Option<f64>,
    pub pci_bus_id: String,
    /// Clocks, temperature and power state from nvidia-smi, where it runs.
    pub clocks: Option<std::collections::BTreeMap<String, String>>,
    /// Whether kernels can dereference pageable host memory here (HMM/ATS): the grader's
    /// host-side copies are then reachable in principle (see the instructor chapter).
    pub pageable_memory_access: bool,
    pub nvrtc_version: String,
    /// Whether cuBLAS ran a small product correctly (the GPU is usable).
    pub healthy: bool,
    pub health_detail: String,
}

impl EnvInfo {
    pub fn gpu_info(&self) -> common::gpu::GpuInfo {
        common::gpu::GpuInfo {
            name: self.name.clone(),
            compute_capability: self.compute_capability,
            sm_count: self.sm_count,
            max_clock_mhz: self.max_clock_mhz,
            l2_bytes: self.l2_bytes,
            max_smem_per_block: self.max_smem_per_block,
            driver_version: self.driver_version.clone(),
        }
    }
}

/// The compile phase's report, per dtype.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CompiledDtype {
    pub dtype: String,
    pub ok: bool,
    /// The compiler's log (errors annotated with the source line), cut to the log limit.
    pub log: String,
    pub registers: u32,
    pub spill_bytes: u32,
    pub compile_ms: f64,
    pub nvrtc_version: String,
    /// The native build's instructions in the launched kernel (opcode -> count), or why they
    /// could not be read; only where the job asked to disassemble.
    #[serde(default)]
    pub sass: Option<Result<std::collections::BTreeMap<String, usize>, String>>,
    /// The traced build (`WB_TRACE`) of a rubric with trace facts: it decides those facts
    /// only, never the compile's status.
    #[serde(default)]
    pub traced: bool,
    /// The simulator's refusal of this build's sm_100a PTX, decided when the compile child
    /// decoded it (a job with `ptx`): what it does not model and where, as a student reads it.
    #[serde(default)]
    pub unsupported: Option<String>,
}

impl CompiledDtype {
    /// A build that compiled: its log (cut to `log_bytes`), resources and SASS.
    pub fn built(
        name: String,
        c: &common::compile::Compiled,
        log_bytes: usize,
        sass: Option<Result<std::collections::BTreeMap<String, usize>, String>>,
        traced: bool,
    ) -> CompiledDtype {
        CompiledDtype {
            dtype: name,
            ok: true,
            log: crate::sandbox::truncate_log(&c.log, log_bytes),
            registers: c.resources.registers,
            spill_bytes: c.resources.spill_store_bytes + c.resources.spill_load_bytes,
            compile_ms: c.compile_ms,
            nvrtc_version: c.nvrtc_version.clone(),
            sass,
            traced,
            unsupported: None,
        }
    }

    /// A build that did not compile (or was refused before compiling): why, cut to `log_bytes`.
    pub fn failed(name: String, log: &str, log_bytes: usize, traced: bool) -> CompiledDtype {
        CompiledDtype {
            dtype: name,
            ok: false,
            log: crate::sandbox::truncate_log(log, log_bytes),
            registers: 0,
            spill_bytes: 0,
            compile_ms: 0.0,
            nvrtc_version: String::new(),
            sass: None,
            traced,
            unsupported: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimingResult {
    pub kernel_median_us: f64,
    pub kernel_min_us: f64,
    pub kernel_max_us: f64,
    pub cublas_median_us: f64,
    pub cublas_min_us: f64,
    /// cuBLAS time / kernel time: 1.0 is level with cuBLAS.
    pub ratio: f64,
    pub tflops: f64,
    pub cublas_tflops: f64,
    pub peak_tflops: Option<f64>,
    pub timed_launches: usize,
    pub input_sets: usize,
    pub l2_flushed: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TestResult {
    pub name: String,
    pub status: Status,
    /// Launches of the submission's kernel this test made (every one verified).
    pub launches: usize,
    pub flags: Vec<Flag>,
    pub detail: String,
    pub timing: Option<TimingResult>,
}

/// A run child's `results.jsonl` ([`RESULTS_FILE`]) as it writes it: a line at a time, each
/// flushed at once, so a child that dies mid-run leaves every line before.
pub struct ResultsWriter(std::fs::File);

impl ResultsWriter {
    /// The file, new, in the child's folder `dir`.
    pub fn create(dir: &std::path::Path) -> Result<ResultsWriter> {
        let path = dir.join(RESULTS_FILE);
        let file = std::fs::File::create(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        Ok(ResultsWriter(file))
    }

    pub fn emit(&mut self, line: &RunLine) -> Result<()> {
        use std::io::Write;
        let mut s = serde_json::to_string(line)?;
        s.push('\n');
        self.0.write_all(s.as_bytes())?;
        self.0.flush()?;
        Ok(())
    }
}

/// One line of the run phase's `results.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunLine {
    Env(Box<EnvInfo>),
    Test(TestResult),
    /// A trace fact, from the traced launch after the tests.
    Fact(FactResult),
    /// A simulating child's measured launch of one build (after its tests; public inputs).
    Measured {
        build: String,
        measured: Measured,
    },
}
