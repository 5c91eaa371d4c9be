//! The rubric: which kernel a submission must be, the tests it is graded on, and the limits.
//!
//! ```toml
//! name = "Step 3, Hopper twin"
//! step = 3
//! arch = "sm_90a"              # sm_90a: the Hopper twin; sm_100a: the Blackwell kernel
//!
//! [limits]                     # all optional
//! compile_seconds = 180        # NVRTC, in a child process
//! run_seconds = 600            # every test of one submission, in a child process
//! launch_seconds = 20          # one launch: longer is a hang
//! log_bytes = 16384            # student-visible logs are cut to this
//! source_bytes = 262144        # larger submissions are refused
//! sim_steps = 100000000        # sm_100a on the simulator: instructions one launch may execute
//!
//! [params]                     # optional: tuning parameters to compile with (default: the step's)
//! stages = 4
//!
//! [[tests]]
//! name = "square-f16"
//! kind = "correctness"         # or "performance"
//! shape = [512, 512, 256]      # M, N, K
//! dtype = "f16"                # or "bf16"
//! dist = "gaussian"            # uniform, small-int, all-ones, wide-range, exact-int
//! points = 10
//! visibility = "visible"       # visible tests use `seed`; hidden, after_due_date and
//!                              # after_published tests derive theirs from the instructor's secret
//! seed = 1
//! sets = 2                     # distinct input sets, one per launch
//!
//! [[tests]]
//! name = "speed"
//! kind = "performance"
//! shape = [4096, 4096, 4096]
//! points = 40
//! sets = 4                     # at least 4, rotated across the timed launches
//! warmup = 2
//! iters = 10
//! fresh_rows = 2               # rows of A and B redrawn before every launch
//! suspicious_above = 1.25      # flag a kernel faster than 1.25 x cuBLAS
//! bands = [{ ratio = 0.9, fraction = 1.0 }, { ratio = 0.5, fraction = 0.5 }, { ratio = 0.0, fraction = 0.1 }]
//!
//! [[requirements]]             # proof the technique ran (see `executed`)
//! name = "tma-multicast"
//! points = 20
//! executed = "UTMALDG.MULTICAST"  # an opcode and modifiers it must carry, in any order; an
//!                              # sm_100a rubric names a PTX class: "tcgen05.mma.cta_group::2"
//! per = "cta-k-block"          # launch, cta-k-block, cluster-k-block, cta-tile, cluster-tile,
//!                              # c-box: counted from the step's tile facts at the measured shape
//! at_least = 1                 # executions per `per` (default 1); at_most caps them
//! why = "cp.async.bulk.tensor .multicast::cluster"  # shown to the student with the verdict
//!
//! [[requirements]]             # the old form: in the binary (min/max, in gemm_kernel) and,
//! name = "no-local-memory"     # with min >= 1, executed min times in the measured launch;
//! points = 5                   # max alone is a ban, checked on the binary
//! sass = "LDL"
//! max = 0
//!
//! [[requirements]]             # Hopper (sm_90a) only: a fact of the warps' trace records
//! name = "store-warp"
//! points = 0                   # always 0: feedback (the kernel writes the records itself)
//! trace = "dedicated-store-warp"  # or "loads-by-producer-only" (see `common::trace_facts`)
//! why = "a warp that never multiplies ships every tile"
//! ```
//!
//! An executed requirement is measured by the grader: one launch per dtype build at
//! [`super::job::measure_shape`], in a child of its own after the tests, never timed, its
//! output verified; `--compile-only` reports it skipped. A `trace` requirement is checked on a
//! Hopper GPU by one traced launch of the f16 build with `-DWB_TRACE=1`, at [`trace_shape`];
//! the records are the submission's own writing, which a hostile kernel can forge, so a trace
//! fact earns no points: it tells an honest student what their warps did.

use super::job::{measure_shape, trace_shape, Job, JobTest, Phase, TraceJob};
use super::protocol::SOURCE_NAME;
use super::technique::{Requirement, RequirementSpec};
use super::vocab::{check_name, Kind};
use anyhow::{anyhow, bail, Context, Result};
use common::step::{Arch, KernelSpec};
use common::{Dist, Dtype, Shape};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Gradescope's visibility values: the type lives with the results files it is written to.
pub use crate::results::Visibility;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Band {
    /// Kernel speed as a fraction of cuBLAS's (cuBLAS time / kernel time) at or above which...
    pub ratio: f64,
    /// ...the test earns this fraction of its points.
    pub fraction: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    #[serde(default = "Limits::compile_default")]
    pub compile_seconds: u64,
    #[serde(default = "Limits::run_default")]
    pub run_seconds: u64,
    #[serde(default = "Limits::launch_default")]
    pub launch_seconds: u64,
    #[serde(default = "Limits::log_default")]
    pub log_bytes: usize,
    #[serde(default = "Limits::source_default")]
    pub source_bytes: usize,
    /// A Blackwell rubric graded on the simulator: simulated instructions (all threads) one
    /// launch may execute before it stops as over its budget (a kernel that spins).
    #[serde(default = "Limits::sim_steps_default")]
    pub sim_steps: u64,
}

impl Limits {
    /// A hundred times what step 3's kernel executes at 512 x 512 x 512 (about a million), and
    /// about ten seconds of one core.
    fn sim_steps_default() -> u64 {
        100_000_000
    }
    fn compile_default() -> u64 {
        180
    }
    fn run_default() -> u64 {
        600
    }
    fn launch_default() -> u64 {
        20
    }
    fn log_default() -> usize {
        16 * 1024
    }
    fn source_default() -> usize {
        256 * 1024
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            compile_seconds: Self::compile_default(),
            run_seconds: Self::run_default(),
            launch_seconds: Self::launch_default(),
            log_bytes: Self::log_default(),
            source_bytes: Self::source_default(),
            sim_steps: Self::sim_steps_default(),
        }
    }
}

/// One test as written in the rubric.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestSpec {
    pub name: String,
    pub kind: Kind,
    pub shape: [usize; 3],
    #[serde(default = "TestSpec::dtype_default")]
    pub dtype: String,
    #[serde(default = "TestSpec::dist_default")]
    pub dist: String,
    pub points: f64,
    #[serde(default = "TestSpec::visibility_default")]
    pub visibility: Visibility,
    /// Seed of a visible test (hidden tests derive theirs).
    pub seed: Option<u64>,
    pub sets: Option<usize>,
    pub warmup: Option<usize>,
    pub iters: Option<usize>,
    pub fresh_rows: Option<usize>,
    pub suspicious_above: Option<f64>,
    #[serde(default)]
    pub bands: Vec<Band>,
}

impl TestSpec {
    fn dtype_default() -> String {
        "f16".into()
    }
    fn dist_default() -> String {
        "gaussian".into()
    }
    fn visibility_default() -> Visibility {
        Visibility::Visible
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RubricFile {
    name: String,
    step: u32,
    arch: String,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    params: toml::Table,
    tests: Vec<TestSpec>,
    #[serde(default)]
    requirements: Vec<RequirementSpec>,
}

/// A test, checked and resolved.
#[derive(Debug, Clone, Serialize)]
pub struct Test {
    pub name: String,
    pub kind: Kind,
    pub shape: Shape,
    pub dtype: Dtype,
    pub dist: Dist,
    pub points: f64,
    pub visibility: Visibility,
    pub seed: Option<u64>,
    pub sets: usize,
    pub warmup: usize,
    pub iters: usize,
    pub fresh_rows: usize,
    pub suspicious_above: f64,
    pub bands: Vec<Band>,
}

impl Test {
    pub fn hidden(&self) -> bool {
        self.visibility != Visibility::Visible
    }
    /// The fraction of the points a speed (fraction of cuBLAS) earns.
    pub fn band_fraction(&self, ratio: f64) -> f64 {
        self.bands
            .iter()
            .find(|b| ratio >= b.ratio)
            .map_or(0.0, |b| b.fraction)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Rubric {
    pub name: String,
    pub step: u32,
    pub arch: Arch,
    pub limits: Limits,
    /// Parameter overrides as `NAME=VALUE`.
    pub params: Vec<String>,
    pub tests: Vec<Test>,
    /// What the kernel must show beyond its answers, in the rubric's order (reported after the
    /// tests): instructions its SASS holds and executes, facts of its trace records.
    pub requirements: Vec<Requirement>,
    /// The shape of the measured launches of the executed requirements, if any.
    pub measure_shape: Option<Shape>,
    /// The shape of the one traced launch that checks them ([`trace_shape`]).
    pub trace_shape: Option<Shape>,
    /// SHA-256 of the rubric's text, recorded in every report.
    pub sha256: String,
}

/// The most memory a simulated test's data may take in the simulating child: A, B and C as
/// 16-bit elements on the simulated device, and C's fp32 reference (see
/// [`super::grader::SIMULATE_ADDRESS_SPACE`], the child's whole address space).
pub const SIM_MAX_BYTES: u64 = 1 << 30;
/// Simulated steps a kernel takes per `sim::budget::MACS_PER_STEP` multiply-adds of its MMAs, at
/// most, counting its instructions too: the stock kernels take under 1.5 (step 3 at 256 x 256 x
/// 1024: 1.4 million steps for 1.05 million MMA steps); twice that, for a slower honest kernel.
pub const SIM_STEPS_PER_MMA_STEP: u64 = 3;
/// Wall time of one simulated step at most, in nanoseconds: measured about 40 (`steps/sim/tests/
/// budget.rs`); two and a half times that, for a slower machine.
pub const SIM_NS_PER_STEP: u64 = 100;

/// The cost of simulating one launch of `shape` an honest kernel may take: (steps, seconds,
/// bytes).
pub fn simulated_cost(shape: Shape) -> (u64, f64, u64) {
    let (m, n, k) = (shape.m as u64, shape.n as u64, shape.k as u64);
    let steps = (m * n * k / sim::budget::MACS_PER_STEP).saturating_mul(SIM_STEPS_PER_MMA_STEP);
    let seconds = steps as f64 * SIM_NS_PER_STEP as f64 * 1e-9;
    let bytes = (m * k + n * k + m * n) * 2 + m * n * 4;
    (steps, seconds, bytes)
}

/// Fewest input sets of a performance test: fewer and a kernel could keep every answer.
pub const MIN_PERF_SETS: usize = 4;

/// TOML's diagnostic with its message moved up: the first line says where and what ("TOML parse
/// error at line 1, column 12: unclosed array"), the source line and its caret follow, indented,
/// as TOML draws them (joined onto one line, the caret pointed nowhere).
fn toml_error(diagnostic: &str) -> String {
    let mut lines = diagnostic.lines().map(str::trim_end);
    let head = lines.next().unwrap_or("TOML parse error");
    let (snippet, message): (Vec<&str>, Vec<&str>) =
        lines.filter(|l| !l.trim().is_empty()).partition(|l| {
            l.trim_start()
                .split_once('|')
                .is_some_and(|(gutter, _)| gutter.trim().chars().all(|c| c.is_ascii_digit()))
        });
    let mut s = head.to_string();
    if !message.is_empty() {
        s.push_str(": ");
        s.push_str(
            &message
                .iter()
                .map(|l| l.trim())
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    for l in snippet.iter().filter(|l| l.trim() != "|") {
        s.push_str("\n    ");
        s.push_str(l);
    }
    s
}

impl Rubric {
    pub fn load(path: &Path) -> Result<Rubric> {
        let text =
            super::userfile::read_text(path, super::userfile::MAX_RUBRIC_BYTES, "the rubric")?;
        Rubric::parse(&text).with_context(|| format!("rubric {}", path.display()))
    }

    pub fn parse(text: &str) -> Result<Rubric> {
        Rubric::parse_for(text, None)
    }

    /// The rubric with its `step` replaced (the selftest grades every step with one rubric).
    /// Its requirements name the technique of its own step, so with another step they are
    /// dropped (step 0's kernel has no 2-CTA MMA to find).
    pub fn parse_for(text: &str, step: Option<u32>) -> Result<Rubric> {
        let mut file: RubricFile =
            toml::from_str(text).map_err(|e| anyhow!("{}", toml_error(&e.to_string())))?;
        if let Some(s) = step.filter(|s| *s != file.step) {
            file.step = s;
            file.requirements.clear();
        }
        let arch = match file.arch.as_str() {
            "sm_90a" => Arch::Hopper,
            "sm_100a" => Arch::Blackwell,
            other => bail!(
                "arch {other:?}: use sm_90a (the Hopper twin) or sm_100a (the Blackwell kernel)"
            ),
        };
        let step = runner::steps::get(file.step)?;
        let mut params = Vec::new();
        for (k, v) in &file.params {
            let n = v
                .as_integer()
                .filter(|n| *n >= 0 && *n <= u32::MAX as i64)
                .ok_or_else(|| anyhow!("params.{k}: a whole number is expected (got {v})"))?;
            params.push(format!("{k}={n}"));
        }
        let mut spec = KernelSpec::new(step, arch);
        spec.params
            .apply(&params)
            .map_err(|e| anyhow!("params: {e}"))?;
        let l = &file.limits;
        if l.compile_seconds == 0 || l.run_seconds == 0 || l.launch_seconds == 0 {
            bail!("limits: every time limit must be at least 1 second");
        }
        if l.sim_steps == 0 {
            bail!("limits: sim_steps must be at least 1");
        }
        if l.log_bytes < 256 || l.source_bytes < 1024 {
            bail!("limits: log_bytes must be at least 256 and source_bytes at least 1024");
        }
        if file.tests.is_empty() {
            bail!("no [[tests]]: a rubric grades at least one test");
        }
        let mut tests = Vec::new();
        for (i, t) in file.tests.iter().enumerate() {
            let test = resolve(t, &spec).with_context(|| format!("tests[{i}] ({:?})", t.name))?;
            if tests.iter().any(|o: &Test| o.name == test.name) {
                bail!("tests[{i}]: the name {:?} is used twice", test.name);
            }
            tests.push(test);
        }
        let mut requirements: Vec<Requirement> = Vec::new();
        for (i, q) in file.requirements.iter().enumerate() {
            let context = || format!("requirements[{i}] ({:?})", q.name);
            let req = q.resolve(arch == Arch::Hopper).with_context(context)?;
            if let Some(ins) = req.instructions() {
                if ins.ptx.is_some() && arch == Arch::Hopper {
                    bail!(
                        "requirements[{i}] ({:?}): {} is a PTX instruction class, which the simulator counts on a Blackwell (sm_100a) kernel; a Hopper rubric names a SASS class (executed = \"UTMALDG.MULTICAST\"), counted on the GPU",
                        q.name,
                        ins.pattern
                    );
                }
                if let Some(e) = &ins.executed {
                    // Counted from the step's tile facts: a unit this kernel lacks is the
                    // rubric's mistake, said now.
                    let s = measure_shape(&spec)
                        .context("the measured launch of the executed requirements")?;
                    e.bounds(&spec.shape(), s).with_context(context)?;
                }
            }
            if tests.iter().any(|t| t.name == req.name)
                || requirements.iter().any(|o| o.name == req.name)
            {
                bail!("requirements[{i}]: the name {:?} is used twice", req.name);
            }
            requirements.push(req);
        }
        let trace_shape = if requirements.iter().any(|q| q.fact().is_some()) {
            Some(trace_shape(&spec).context("the traced launch of the trace requirements")?)
        } else {
            None
        };
        let measure_shape = if requirements
            .iter()
            .any(|q| q.instructions().is_some_and(|i| i.executed.is_some()))
        {
            Some(measure_shape(&spec)?)
        } else {
            None
        };
        Ok(Rubric {
            name: file.name,
            step: file.step,
            arch,
            limits: file.limits,
            params,
            tests,
            requirements,
            measure_shape,
            trace_shape,
            sha256: super::seeds::sha256_hex(text.as_bytes()),
        })
    }

    /// A rubric graded on the PTX simulator: every launch it makes must fit the simulator's
    /// limits with room for an honest kernel, so that a correct kernel never fails as one that
    /// spins. Each correctness test (and the measured launch) is refused, naming the limit,
    /// where its shape's estimated cost ([`simulated_cost`]) exceeds `limits.sim_steps`,
    /// `limits.launch_seconds`, or [`SIM_MAX_BYTES`]; all of them together must fit
    /// `limits.run_seconds` (each input set runs under `simulated::POLICIES.len()` schedules).
    /// Performance tests are not run on the simulator and are not checked.
    pub fn check_simulated(&self) -> Result<()> {
        let l = &self.limits;
        let schedules = super::simulated::POLICIES.len() as f64;
        let launches: Vec<(String, Shape, f64)> = self
            .tests
            .iter()
            .filter(|t| t.kind == Kind::Correctness)
            .map(|t| {
                (
                    format!("test {:?}", t.name),
                    t.shape,
                    t.sets as f64 * schedules,
                )
            })
            .collect();
        // No measured launch on the simulator: the requirements are decided on the tests' own
        // launches (`super::simulated`), so the tests' shapes are all it runs.
        let mut total = 0.0;
        for (what, shape, n) in &launches {
            let (steps, seconds, bytes) = simulated_cost(*shape);
            if steps > l.sim_steps {
                bail!("{what}: shape {shape} is beyond the simulator's limit: an honest kernel may take about {steps} simulated steps there, over limits.sim_steps = {} (use a smaller shape, or raise sim_steps)", l.sim_steps);
            }
            if seconds > l.launch_seconds as f64 {
                bail!("{what}: shape {shape} is beyond the simulator's limit: a launch may take about {seconds:.0} s on the simulator, over limits.launch_seconds = {} (use a smaller shape, or raise launch_seconds)", l.launch_seconds);
            }
            if bytes > SIM_MAX_BYTES {
                bail!("{what}: shape {shape} is beyond the simulator's limit: its matrices take {} MiB, over the simulator's {} MiB (use a smaller shape)", bytes >> 20, SIM_MAX_BYTES >> 20);
            }
            total += seconds * n;
        }
        if total > l.run_seconds as f64 {
            bail!("the simulated tests may take about {total:.0} s in all (each input set under {schedules} schedules), over limits.run_seconds = {} (use smaller shapes or fewer sets, or raise run_seconds)", l.run_seconds);
        }
        Ok(())
    }

    pub fn has_hidden_tests(&self) -> bool {
        self.tests.iter().any(Test::hidden)
    }

    /// Whether a requirement names a SASS class, which the compile child's disassembly of the
    /// binary decides (nvdisasm needed).
    pub fn reads_sass(&self) -> bool {
        self.requirements
            .iter()
            .any(|q| q.instructions().is_some_and(|i| i.ptx.is_none()))
    }

    /// A job of `phase` for `tests`; the dtypes are those of `tests`, or, for a compile job
    /// (which is given no test), of `dtypes_of`.
    pub fn job(
        &self,
        phase: Phase,
        source: &str,
        tests: Vec<JobTest>,
        dtypes_of: &[JobTest],
    ) -> Job {
        let mut dtypes: Vec<String> = Vec::new();
        for t in tests.iter().chain(dtypes_of) {
            if !dtypes.contains(&t.dtype) {
                dtypes.push(t.dtype.clone());
            }
        }
        Job {
            dtypes,
            phase,
            step: self.step,
            arch: self.arch.sm().to_string(),
            params: self.params.clone(),
            target: None,
            source_name: SOURCE_NAME.into(),
            source: source.to_string(),
            tests,
            launch_seconds: self.limits.launch_seconds,
            log_bytes: self.limits.log_bytes,
            disassemble: phase == Phase::Compile && self.reads_sass(),
            trace: self
                .trace_job()
                .filter(|_| matches!(phase, Phase::Compile | Phase::Run)),
            measure: None,
            ptx: false,
            sim_steps: self.limits.sim_steps,
        }
    }

    /// The one traced launch of the trace requirements, if the rubric has any: each fact once,
    /// in the rubric's order.
    pub fn trace_job(&self) -> Option<TraceJob> {
        let shape = self.trace_shape?;
        let mut facts: Vec<String> = Vec::new();
        for fact in self.requirements.iter().filter_map(Requirement::fact) {
            let f = fact.name().to_string();
            if !facts.contains(&f) {
                facts.push(f);
            }
        }
        Some(TraceJob {
            facts,
            shape: [shape.m, shape.n, shape.k],
            seed: TraceJob::SEED,
            clusters: TraceJob::CLUSTERS,
        })
    }
}

fn resolve(t: &TestSpec, spec: &KernelSpec) -> Result<Test> {
    check_name(&t.name)?;
    if t.kind == Kind::Technique {
        bail!("kind \"technique\" is not a test: write it as a [[requirements]] entry");
    }
    let shape = Shape {
        m: t.shape[0],
        n: t.shape[1],
        k: t.shape[2],
    };
    spec.check_shape(shape).map_err(|e| anyhow!(e))?;
    if shape.m * shape.n > 1 << 28 || shape.k > 1 << 16 {
        bail!("shape {shape} is too large for grading");
    }
    let dtype: Dtype = t.dtype.parse()?;
    let dist: Dist = t.dist.parse()?;
    if !(t.points.is_finite() && t.points >= 0.0) {
        bail!("points must be a non-negative number");
    }
    let hidden = t.visibility != Visibility::Visible;
    if hidden && t.seed.is_some() {
        bail!("a hidden test takes no seed: its seeds come from the instructor's secret");
    }
    if !hidden && t.seed.is_none() {
        bail!("a visible test needs a seed (students can reproduce it)");
    }
    let perf = t.kind == Kind::Performance;
    if perf && dist == Dist::AllOnes {
        bail!("a performance test needs inputs that differ from launch to launch; all-ones inputs are the same every time");
    }
    let sets = t.sets.unwrap_or(if perf { MIN_PERF_SETS } else { 2 });
    if perf && sets < MIN_PERF_SETS {
        bail!("a performance test rotates at least {MIN_PERF_SETS} input sets (sets = {sets})");
    }
    if !(1..=16).contains(&sets) {
        bail!("sets must be between 1 and 16");
    }
    let only_perf = [
        ("warmup", t.warmup.is_some()),
        ("iters", t.iters.is_some()),
        ("fresh_rows", t.fresh_rows.is_some()),
        ("suspicious_above", t.suspicious_above.is_some()),
        ("bands", !t.bands.is_empty()),
    ];
    if !perf {
        if let Some((f, _)) = only_perf.iter().find(|(_, set)| *set) {
            bail!("{f} applies to performance tests only");
        }
    }
    let iters = t.iters.unwrap_or(10);
    if perf && !(3..=1000).contains(&iters) {
        bail!("iters must be between 3 and 1000");
    }
    let fresh_rows = t.fresh_rows.unwrap_or(if perf { 2 } else { 0 });
    if fresh_rows > shape.m.min(shape.n) {
        bail!("fresh_rows ({fresh_rows}) exceeds the rows of A or B");
    }
    let suspicious_above = t.suspicious_above.unwrap_or(1.25);
    if !(suspicious_above.is_finite() && suspicious_above > 0.0) {
        bail!("suspicious_above must be a positive number");
    }
    let mut bands = t.bands.clone();
    if perf {
        if bands.is_empty() {
            bands = vec![
                Band {
                    ratio: 0.9,
                    fraction: 1.0,
                },
                Band {
                    ratio: 0.7,
                    fraction: 0.8,
                },
                Band {
                    ratio: 0.5,
                    fraction: 0.6,
                },
                Band {
                    ratio: 0.25,
                    fraction: 0.4,
                },
                Band {
                    ratio: 0.0,
                    fraction: 0.2,
                },
            ];
        }
        for b in &bands {
            if !(b.ratio.is_finite() && b.ratio >= 0.0 && (0.0..=1.0).contains(&b.fraction)) {
                bail!("bands: ratio must be >= 0 and fraction between 0 and 1");
            }
        }
        if bands
            .windows(2)
            .any(|w| w[0].ratio <= w[1].ratio || w[0].fraction < w[1].fraction)
        {
            bail!(
                "bands must be listed from the highest ratio down, with fractions that do not rise"
            );
        }
    }
    Ok(Test {
        name: t.name.clone(),
        kind: t.kind,
        shape,
        dtype,
        dist,
        points: t.points,
        visibility: t.visibility,
        seed: t.seed,
        sets,
        warmup: t.warmup.unwrap_or(2),
        iters,
        fresh_rows,
        suspicious_above,
        bands,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "Step 0 twin"
step = 0
arch = "sm_90a"

[limits]
run_seconds = 120

[params]
stages = 3

[[tests]]
name = "small"
kind = "correctness"
shape = [256, 256, 128]
dist = "small-int"
points = 10
seed = 4

[[tests]]
name = "hidden-bf16"
kind = "correctness"
shape = [384, 256, 192]
dtype = "bf16"
dist = "wide-range"
points = 10
visibility = "after_published"

[[tests]]
name = "speed"
kind = "performance"
shape = [1024, 1024, 1024]
points = 30
seed = 9
bands = [{ ratio = 0.8, fraction = 1.0 }, { ratio = 0.0, fraction = 0.25 }]
"#;

    #[test]
    fn a_good_rubric_parses_with_defaults() {
        let r = Rubric::parse(GOOD).unwrap();
        assert_eq!((r.step, r.arch), (0, Arch::Hopper));
        assert_eq!(r.params, vec!["stages=3".to_string()]);
        assert_eq!(r.limits.run_seconds, 120);
        assert_eq!(r.limits.compile_seconds, 180);
        assert_eq!(r.tests.len(), 3);
        assert_eq!(r.tests[0].dist, Dist::Int);
        assert_eq!(r.tests[0].sets, 2);
        assert!(!r.tests[0].hidden() && r.tests[1].hidden());
        assert_eq!(r.tests[1].dtype, Dtype::Bf16);
        assert_eq!(r.tests[1].dist, Dist::WideRange);
        let p = &r.tests[2];
        assert_eq!((p.sets, p.iters, p.fresh_rows), (4, 10, 2));
        assert_eq!(p.band_fraction(0.95), 1.0);
        assert_eq!(p.band_fraction(0.5), 0.25);
        assert!(r.has_hidden_tests());
        assert_eq!(r.sha256.len(), 64);
    }

    fn err(text: &str) -> String {
        format!("{:#}", Rubric::parse(text).unwrap_err())
    }

    #[test]
    fn mistakes_are_named() {
        let with = |from: &str, to: &str| GOOD.replacen(from, to, 1);
        assert!(err(&with("arch = \"sm_90a\"", "arch = \"sm_80\"")).contains("sm_90a"));
        assert!(err(&with("step = 0", "step = 9")).contains("no step 9"));
        assert!(err(&with("stages = 3", "stage = 3")).contains("unknown parameter"));
        assert!(err(&with("[256, 256, 128]", "[100, 256, 128]"))
            .contains("M must be a positive multiple of 128"));
        assert!(err(&with("dist = \"small-int\"", "dist = \"cauchy\""))
            .contains("unknown distribution"));
        assert!(err(&with("seed = 4", "")).contains("needs a seed"));
        assert!(err(&with(
            "visibility = \"after_published\"",
            "visibility = \"after_published\"\nseed = 3"
        ))
        .contains("takes no seed"));
        assert!(err(&with("seed = 9", "seed = 9\nsets = 2")).contains("at least 4 input sets"));
        assert!(err(&with("name = \"hidden-bf16\"", "name = \"small\"")).contains("used twice"));
        assert!(err(&with(
            "points = 10\nseed = 4",
            "points = 10\nseed = 4\niters = 5"
        ))
        .contains("performance tests only"));
        assert!(err(&with("ratio = 0.8", "ratio = 0.0")).contains("highest ratio down"));
        assert!(err(&with("run_seconds = 120", "run_seconds = 0")).contains("at least 1 second"));
        assert!(err(&with(
            "points = 30\nseed = 9",
            "points = 30\nseed = 9\ndist = \"all-ones\""
        ))
        .contains("differ from launch to launch"));
        assert!(
            err(&with("kind = \"correctness\"", "kind = \"speed\"")).contains("unknown variant")
        );
        assert!(err(&with(
            "points = 10\nseed = 4",
            "points = 10\nseed = 4\ncolour = 1"
        ))
        .contains("unknown field"));
        assert!(
            err("name = \"x\"\nstep = 0\narch = \"sm_90a\"\ntests = []\n").contains("no [[tests]]")
        );
        // The first line says where and what; TOML's source line and caret follow.
        let e = err("garbage = [\n");
        let first = e.lines().next().unwrap();
        assert!(
            first.contains("line 1, column 12") && first.contains("unclosed array"),
            "{e}"
        );
        assert!(e.lines().any(|l| l.trim() == "1 | garbage = ["), "{e}");
        assert!(e.lines().any(|l| l.trim_end().ends_with('^')), "{e}");
    }

    const REQ: &str = "\n[[requirements]]\nname = \"multicast\"\npoints = 15\nsass = \"UTMALDG.MULTICAST\"\nwhy = \"B shared by TMA multicast\"\n";

    #[test]
    fn requirements_parse() {
        let r = Rubric::parse(&format!("{GOOD}{REQ}")).unwrap();
        assert_eq!(r.requirements.len(), 1);
        let q = &r.requirements[0];
        let i = q.instructions().unwrap();
        assert_eq!(
            (i.pattern.to_string().as_str(), i.min, i.max),
            ("UTMALDG.MULTICAST", 1, None)
        );
        assert_eq!(q.points, 15.0);
        assert!(Rubric::parse(GOOD).unwrap().requirements.is_empty());
        // Another step has another technique: its requirements do not carry over.
        let text = format!("{GOOD}{REQ}");
        assert_eq!(
            Rubric::parse_for(&text, Some(0))
                .unwrap()
                .requirements
                .len(),
            1
        );
        assert!(Rubric::parse_for(&text, Some(1))
            .unwrap()
            .requirements
            .is_empty());
    }

    #[test]
    fn requirement_mistakes_are_named() {
        let with = |from: &str, to: &str| format!("{GOOD}{}", REQ.replacen(from, to, 1));
        let e = err(&with("UTMALDG.MULTICAST", "utmaldg.multicast"));
        assert!(
            e.contains("requirements[0] (\"multicast\")") && e.contains("upper-case SASS opcode"),
            "{e}"
        );
        assert!(err(&with("UTMALDG.MULTICAST", "UTMALDG..MULTICAST")).contains("joined by dots"));
        assert!(err(&with("points = 15", "points = 15\nmin = 4\nmax = 2"))
            .contains("min (4) is above max (2)"));
        assert!(err(&with("points = 15", "points = -1")).contains("non-negative"));
        assert!(err(&with("points = 15", "points = 15\nmin = 0")).contains("requires nothing"));
        assert!(err(&with("name = \"multicast\"", "name = \"small\"")).contains("used twice"));
        assert!(err(&with("sass =", "trac =")).contains("unknown field"));
        assert!(err(&with("sass = \"UTMALDG.MULTICAST\"\n", "")).contains("give executed = "));
        assert!(err(&with("points = 15", "points = 15\nmin = \"two\"")).contains("invalid type"));
        let kind = GOOD.replacen("kind = \"correctness\"", "kind = \"technique\"", 1);
        assert!(err(&kind).contains("[[requirements]] entry"));
    }

    #[test]
    fn trace_requirements_name_a_known_fact_on_hopper() {
        let sass = "sass = \"UTMALDG.MULTICAST\"";
        let zero = REQ.replacen("points = 15", "points = 0", 1);
        let with = |to: &str| format!("{GOOD}{}", zero.replacen(sass, to, 1));
        let fact = "trace = \"dedicated-store-warp\"";
        // Points on a fact the kernel's own records decide: refused, with the reason.
        let e = err(&format!("{GOOD}{}", REQ.replacen(sass, fact, 1)));
        assert!(e.contains("points = 0") && e.contains("forge"), "{e}");
        // Well formed on a Hopper rubric: accepted, with the shape of its one traced launch
        // (step 0's twin: 128 x 128 tiles, 64-wide k-blocks).
        let r = Rubric::parse(&with(fact)).unwrap();
        assert_eq!(r.requirements.len(), 1);
        let q = &r.requirements[0];
        assert_eq!((q.name.as_str(), q.points), ("multicast", 0.0));
        assert_eq!(
            q.fact(),
            Some(common::trace_facts::Fact::DedicatedStoreWarp)
        );
        assert_eq!(
            r.trace_shape,
            Some(Shape {
                m: 256,
                n: 256,
                k: 512
            })
        );
        assert!(Rubric::parse(GOOD).unwrap().trace_shape.is_none());
        // Next to a SASS requirement, under its own name.
        let both = format!(
            "{GOOD}{REQ}{}",
            zero.replacen(sass, fact, 1)
                .replacen("\"multicast\"", "\"store-warp\"", 1)
        );
        let r = Rubric::parse(&both).unwrap();
        // One list, in the rubric's order: the SASS requirement, then the fact.
        assert_eq!(r.requirements.len(), 2);
        assert!(r.requirements[0].instructions().is_some() && r.requirements[1].fact().is_some());
        assert!(err(&format!("{GOOD}{REQ}{}", zero.replacen(sass, fact, 1))).contains("used twice"));
        assert!(
            err(&with("trace = \"loads-by-producer-only\"\nname2 = 1")).contains("unknown field")
        );
        let e = err(&with("trace = \"stores-by-magic\""));
        assert!(
            e.contains("requirements[0]") && e.contains("unknown trace fact"),
            "{e}"
        );
        assert!(err(&with(&format!("{sass}\n{fact}"))).contains("one of executed, sass or trace"));
        assert!(err(&with(&format!("{fact}\nmin = 2"))).contains("a trace fact holds or not"));
        // Every count is refused, not ignored.
        for count in ["per = \"launch\"", "at_least = 1", "at_most = 3"] {
            let e = err(&with(&format!("{fact}\n{count}")));
            assert!(e.contains("a trace fact holds or not"), "{count}: {e}");
        }
        // Blackwell: one clear error (the rubric, the requirement, why).
        let blackwell = with(fact).replacen("arch = \"sm_90a\"", "arch = \"sm_100a\"", 1);
        let e = err(&blackwell);
        assert_eq!(
            e,
            "requirements[0] (\"multicast\"): trace facts are checked on Hopper (sm_90a) rubrics only"
        );
    }

    #[test]
    fn executed_requirements_parse_and_old_sass_ones_need_executions_too() {
        let exec = "\n[[requirements]]\nname = \"multicast\"\npoints = 20\nexecuted = \"UTMALDG.MULTICAST\"\nper = \"cta-k-block\"\n";
        let r = Rubric::parse(&format!("{GOOD}{exec}")).unwrap();
        let q = r.requirements[0].instructions().unwrap();
        let e = q.executed.as_ref().unwrap();
        assert_eq!(
            (e.per, e.at_least, e.at_most),
            (super::super::executed::Unit::CtaKBlock, 1, None)
        );
        // In the binary at least once (or it cannot have executed).
        assert_eq!((q.min, q.max), (1, None));
        // Measured at two cluster tiles by two, eight k-blocks (step 0: 128 x 128 x 64).
        assert_eq!(
            r.measure_shape,
            Some(Shape {
                m: 256,
                n: 256,
                k: 512
            })
        );
        // The old form: present, and executed `min` times in the launch.
        let r = Rubric::parse(&format!("{GOOD}{REQ}")).unwrap();
        let e = r.requirements[0]
            .instructions()
            .unwrap()
            .executed
            .as_ref()
            .unwrap();
        assert_eq!(
            (e.per, e.at_least),
            (super::super::executed::Unit::Launch, 1)
        );
        assert!(r.measure_shape.is_some());
        // A ban stays a static check: absent from the binary, never executed.
        let ban = REQ.replacen("points = 15", "points = 15\nmax = 0", 1);
        let r = Rubric::parse(&format!("{GOOD}{ban}")).unwrap();
        assert!(r.requirements[0].instructions().unwrap().executed.is_none());
        assert!(r.measure_shape.is_none());
        // Mistakes, each named.
        let with = |from: &str, to: &str| format!("{GOOD}{}", exec.replacen(from, to, 1));
        assert!(err(&with("cta-k-block", "per-tile")).contains("one of launch, cta-k-block"));
        assert!(err(&with("points = 20", "points = 20\nmin = 2")).contains("at_least and at_most"));
        assert!(err(&with(
            "points = 20",
            "points = 20\nat_least = 3\nat_most = 2"
        ))
        .contains("at_least (3) is above at_most (2)"));
        assert!(err(&with("points = 20", "points = 20\nat_least = 0")).contains("requires nothing"));
        assert!(err(&with("points = 20", "points = 20\nsass = \"HGMMA\""))
            .contains("one of executed, sass or trace"));
        assert!(err(&format!(
            "{GOOD}{}",
            REQ.replacen("points = 15", "points = 15\nper = \"launch\"", 1)
        ))
        .contains("belong to executed"));
        let e = err(&with("UTMALDG.MULTICAST", "UTMALDG..X"));
        assert!(
            e.contains("requirements[0]") && e.contains("upper-case SASS opcode"),
            "{e}"
        );
        // Lower case is a PTX class: the simulator's, on a Blackwell rubric only.
        let e = err(&with("UTMALDG.MULTICAST", "cp.async.bulk.tensor.multicast"));
        assert!(
            e.contains("requirements[0]") && e.contains("a Hopper rubric names a SASS class"),
            "{e}"
        );
        let e = err(&with("UTMALDG.MULTICAST", "cp..async"));
        assert!(e.contains("write a PTX instruction"), "{e}");
    }

    const TRACED: &str = r#"
name = "t"
step = 3
arch = "sm_90a"
[[tests]]
name = "public"
kind = "correctness"
shape = [512, 512, 256]
points = 10
seed = 1
[[requirements]]
name = "producer"
points = 0
trace = "loads-by-producer-only"
[[requirements]]
name = "store"
points = 0
trace = "dedicated-store-warp"
[[requirements]]
name = "producer-again"
points = 0
trace = "loads-by-producer-only"
"#;

    #[test]
    fn jobs_carry_the_rubrics_trace_facts_over_the_pipe() {
        let rubric = Rubric::parse(TRACED).unwrap();
        for phase in [Phase::Compile, Phase::Run] {
            let job = rubric.job(phase, "src", Vec::new(), &[]);
            let back = Job::read_from(job.to_bytes().unwrap().as_slice()).unwrap();
            let t = back.trace.expect("the trace job");
            // Each fact once, in the rubric's order; the launch is the rubric's trace shape.
            assert_eq!(t.facts, ["loads-by-producer-only", "dedicated-store-warp"]);
            let s = rubric.trace_shape.unwrap();
            assert_eq!(t.shape, [s.m, s.n, s.k]);
            assert_eq!((t.seed, t.clusters), (TraceJob::SEED, 2));
            assert_eq!(Some(t), job.trace);
        }
        // Its inputs are a public test's: one set, from the fixed seed.
        let test = rubric.trace_job().unwrap().as_test();
        assert_eq!(test.seeds.sets, [TraceJob::SEED]);
        assert_eq!(
            (test.dtype.as_str(), test.dist.as_str()),
            ("f16", "gaussian")
        );
        // No trace facts: no trace job; an older job without the key reads as none.
        let plain = Rubric::parse(&TRACED[..TRACED.find("[[requirements]]").unwrap()]).unwrap();
        assert!(plain
            .job(Phase::Compile, "src", Vec::new(), &[])
            .trace
            .is_none());
        let mut v: serde_json::Value = serde_json::from_slice(
            &plain
                .job(Phase::Run, "src", Vec::new(), &[])
                .to_bytes()
                .unwrap(),
        )
        .unwrap();
        v.as_object_mut().unwrap().remove("trace");
        let old = Job::read_from(serde_json::to_vec(&v).unwrap().as_slice()).unwrap();
        assert!(old.trace.is_none());
    }

    #[test]
    fn a_simulated_shape_beyond_the_simulators_limits_is_refused_naming_the_limit() {
        let stock = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../rubrics/step3-blackwell.toml"
        ))
        .unwrap();
        // The shipped rubric fits, its performance test (not simulated) included.
        Rubric::parse(&stock).unwrap().check_simulated().unwrap();
        let big = stock.replacen("shape = [256, 512, 256]", "shape = [4096, 4096, 4096]", 1);
        let e = format!(
            "{:#}",
            Rubric::parse(&big).unwrap().check_simulated().unwrap_err()
        );
        assert!(e.contains("limits.sim_steps"), "{e}");
        assert!(e.contains("public-gaussian-f16"), "{e}");
        // Within the steps, past the wall clock of one launch.
        let slow = big.replacen("[limits]\n", "[limits]\nsim_steps = 100000000000\n", 1);
        let e = format!(
            "{:#}",
            Rubric::parse(&slow).unwrap().check_simulated().unwrap_err()
        );
        assert!(e.contains("limits.launch_seconds"), "{e}");
        // Every launch fits, their sum does not fit run_seconds.
        let many = stock
            .replacen("seed = 21", "seed = 21\nsets = 16", 1)
            .replacen("shape = [256, 512, 256]", "shape = [1024, 1024, 1024]", 1)
            .replacen("run_seconds = 300", "run_seconds = 5", 1);
        let e = format!(
            "{:#}",
            Rubric::parse(&many).unwrap().check_simulated().unwrap_err()
        );
        assert!(e.contains("limits.run_seconds"), "{e}");
    }
}
