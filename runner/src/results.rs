//! Every results file the runner writes (`assets/results/*.json` and what `runner bench`,
//! `runner check` write on a GPU machine), one `Serialize + Deserialize` type each: written and
//! read only through these types, so the writer and the book's readers cannot drift apart.
//! Below both `bench` and `book`, so neither imports the other.
//!
//! A file says what it is in its `kind` field; [`Results`] is that tag. Fields added after the
//! first files were committed are `Option`s or default, so the archive still parses (the test
//! below holds every committed file to its type).

use common::confidence::Ratio;
use common::gpu::GpuInfo;
use common::run::DeviceReport;
use common::step::Arch;
use common::timing::{Clocks, Measured, Stats};
use common::toolkit::project_root;
use common::verdict::Verdict;
use common::{Dist, Dtype, Shape};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One results file, by its `kind`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Results {
    /// `runner bench`: every step against cuBLAS.
    Bench(BenchReport),
    /// `runner bench --heatmap`: the same over a grid of shapes.
    Heatmap(BenchReport),
    /// `runner bench --diagnose`: cuBLAS under the protocols the workbook used before.
    Diagnose(DiagnoseReport),
    /// `runner check emulation`: every step and seeded bug under the tcgen05 emulation.
    Emulation(EmulationCheck),
    /// `runner check twins`: every Hopper twin natively.
    Twins(TwinCheck),
    /// `runner check emulation`'s first part: cuBLAS against the CPU reference.
    Selftest(SelftestSummary),
    /// `runner exercise --timings` (`gpu/book.sh`): `runner exercise N.M --json` of every
    /// measuring exercise on one GPU.
    #[serde(rename = "exercise-timings")]
    ExerciseTimings(ExerciseTimings),
    /// `runner check twins --stress`: the twins and their seeded bugs under stress builds.
    #[serde(rename = "twin-stress")]
    TwinStress(TwinStress),
    /// `gpu/stress.sh`: the wall time the emulation's strict rules add, per step.
    #[serde(rename = "emulation-cost")]
    EmulationCost(EmulationCost),
}

impl Results {
    /// The `kind` tag, which also starts the file's name.
    pub fn kind(&self) -> &'static str {
        match self {
            Results::Bench(_) => "bench",
            Results::Heatmap(_) => "heatmap",
            Results::Diagnose(_) => "diagnose",
            Results::Emulation(_) => "emulation",
            Results::Twins(_) => "twins",
            Results::Selftest(_) => "selftest",
            Results::ExerciseTimings(_) => "exercise-timings",
            Results::TwinStress(_) => "twin-stress",
            Results::EmulationCost(_) => "emulation-cost",
        }
    }

    /// The date the file records (ISO, so it sorts); empty where the file records none (an
    /// emulation cost, which sits in its dated folder).
    pub fn date(&self) -> &str {
        match self {
            Results::Bench(r) | Results::Heatmap(r) => &r.date,
            Results::Diagnose(r) => &r.date,
            Results::Emulation(r) => &r.head.date,
            Results::Twins(r) => &r.head.date,
            Results::Selftest(r) => &r.head.date,
            Results::ExerciseTimings(r) => &r.date,
            Results::TwinStress(r) => &r.head.date,
            Results::EmulationCost(_) => "",
        }
    }

    /// Write it as pretty JSON.
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        use anyhow::Context;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        std::fs::write(path, serde_json::to_string_pretty(self)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))
    }
}

/// Where a check ran, shared by the check files: the GPU and driver as nvidia-smi names them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    pub gpu: String,
    pub driver: String,
    pub date: String,
    pub commit: String,
}

// ---------------------------------------------------------------------------------------------
// bench and heatmap

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchCase {
    pub shape: Shape,
    pub dtype: Dtype,
    /// "cublas", "step N" or a contender's name (e.g. "5-pingpong").
    pub kernel: String,
    /// The step, for the ladder's own kernels only (not cuBLAS, not contenders).
    pub step: Option<u32>,
    /// The kernel's parameters, name and value.
    pub params: Option<Vec<(String, u32)>>,
    /// Why the kernel was not timed (a shape it does not accept, a failed verification).
    pub skipped: Option<String>,
    pub verified: bool,
    pub rel_error_norm: Option<f64>,
    pub stats: Option<Stats>,
    /// NVML's readings during this contender's timed launches.
    #[serde(default)]
    pub clocks: Option<Clocks>,
    pub tflops: Option<f64>,
    pub pct_of_peak: Option<f64>,
    pub pct_of_cublas: Option<f64>,
    /// The paired ratios and their verdicts (absent in files written before them).
    #[serde(flatten)]
    pub confidence: CaseConfidence,
}

/// How sure a case's speed is (`common::confidence`): its paired per-round ratio to cuBLAS and
/// to the kernel before it, each with a bootstrap 95 % interval and the verdict it allows.
/// Written beside the other fields of the case (`ratio_to_cublas`, `vs_previous`, `cap_hit`);
/// every field is absent in files written before the intervals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CaseConfidence {
    /// cuBLAS's time over this kernel's, round by round (above 1: faster than cuBLAS).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_to_cublas: Option<Ratio>,
    /// The kernel before it (step N: step N - 1; a contender: the step it varies), timed in the
    /// same rounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_previous: Option<VsPrevious>,
    /// Whether the adaptive rounds stopped at their time cap before every interval of this
    /// shape and dtype was as narrow as the target (absent with a fixed number of rounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap_hit: Option<bool>,
}

/// A kernel against the one before it: the previous kernel's time over this one's, per round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VsPrevious {
    /// The previous kernel's `kernel` ("step 5").
    pub contender: String,
    pub ratio: Ratio,
}

/// The adaptive rounds a bench ran with (`runner bench`, `common::confidence::StopRule`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdaptiveRounds {
    /// Stop once every interval's half-width is below this fraction of its median.
    pub target_half_width: f64,
    /// ...or after this long of timed rounds, per shape and dtype.
    pub time_cap_s: f64,
    pub min_rounds: usize,
    pub max_rounds: usize,
    /// Bootstrap resamples per interval, and their seed.
    pub resamples: usize,
    pub bootstrap_seed: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchReport {
    pub gpu: GpuInfo,
    /// The kernel driver's version as nvidia-smi reports it (e.g. 580.159.04), if it is there;
    /// `gpu.driver_version` is the CUDA driver API's (e.g. 13.0).
    pub driver: Option<String>,
    pub arch: Arch,
    /// nvidia-smi's clock readings (SM and memory, current and maximum) before and after.
    pub clocks_before: Option<String>,
    pub clocks_after: Option<String>,
    pub peak_tflops: Option<f64>,
    pub date: String,
    pub commit: String,
    pub iters: usize,
    pub warmup: usize,
    pub l2_flushed: bool,
    /// How the cases were timed (`common::timing::time_rounds`); absent in files written
    /// before the one timing protocol.
    #[serde(default)]
    pub protocol: Option<String>,
    /// NVML's view of the GPU before the run (driver, clock, power), or why there is none.
    #[serde(default)]
    pub device: Option<DeviceReport>,
    pub seed: u64,
    pub dist: Dist,
    /// The adaptive rounds' rule; absent with a fixed number of rounds (`iters`) and in files
    /// written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adaptive: Option<AdaptiveRounds>,
    pub cases: Vec<BenchCase>,
}

/// The bench's default shapes: the ladder plot draws these, the sweep the square ones.
pub const DEFAULT_SHAPES: [Shape; 2] = [
    Shape {
        m: 4096,
        n: 8192,
        k: 4096,
    },
    Shape {
        m: 8192,
        n: 8192,
        k: 8192,
    },
];

impl BenchReport {
    /// The case of `kernel` at (`shape`, `dtype`).
    pub fn find(&self, shape: Shape, dtype: Dtype, kernel: &str) -> Option<&BenchCase> {
        self.cases
            .iter()
            .find(|c| c.shape == shape && c.dtype == dtype && c.kernel == kernel)
    }

    /// The (shape, dtype) pairs, in the file's order.
    pub fn shapes_and_dtypes(&self) -> Vec<(Shape, Dtype)> {
        let mut out = Vec::new();
        for c in &self.cases {
            if !out.contains(&(c.shape, c.dtype)) {
                out.push((c.shape, c.dtype));
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// diagnose

/// One timed side of a variant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Side {
    /// "cublas" or "step N".
    pub kernel: String,
    #[serde(flatten)]
    pub measured: Measured,
    pub tflops: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VariantResult {
    pub name: String,
    pub what: String,
    pub primed: bool,
    pub rotated: bool,
    pub wait_after_each_launch: bool,
    pub l2_flushed: bool,
    pub idle_ms_before_round: u64,
    pub soak_ms_before: u64,
    pub warmup: usize,
    pub iters: usize,
    pub cublas: Side,
    /// Step N, where the variant times it.
    pub kernel: Option<Side>,
    pub kernel_pct_of_cublas: Option<f64>,
    pub wall_ms: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DiagnoseReport {
    pub gpu: GpuInfo,
    pub device: DeviceReport,
    pub date: String,
    pub commit: String,
    pub shape: Shape,
    pub dtype: Dtype,
    /// The kernel of the pair variants.
    pub step: u32,
    pub variants: Vec<VariantResult>,
}

// ---------------------------------------------------------------------------------------------
// the GPU checks

/// What a case must do: verify, or (a seeded bug) be caught.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Expected {
    Pass,
    Fail,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EmulationCheck {
    #[serde(flatten)]
    pub head: Provenance,
    pub mode: String,
    /// The emulation's schedule seeds every seeded bug ran under (absent in the first file).
    #[serde(default)]
    pub emu_seeds: Vec<u64>,
    pub cases: Vec<EmulationCase>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EmulationCase {
    pub step: u32,
    /// `MxNxK`.
    pub shape: String,
    pub dtype: Dtype,
    pub seed: u64,
    /// Absent in the first file, which ran one schedule.
    #[serde(default)]
    pub emu_seed: Option<u64>,
    /// The persistent grid's cap (`--clusters`), so that each cluster runs several tiles.
    #[serde(default)]
    pub clusters: Option<u32>,
    /// The input distribution, where not the default (gaussian).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dist: Option<common::Dist>,
    pub mutation: Option<String>,
    pub expected: Expected,
    /// From the exit code alone ([`Verdict`]).
    pub outcome: Verdict,
    pub met_expectation: bool,
    pub exit_code: i32,
    pub rel_error_norm: Option<f64>,
    pub seconds: f64,
    /// The text the runner's errors must contain for the bug to count as caught (the rule or
    /// the hang report that names it), where the mutation says.
    #[serde(default)]
    pub caught_by: Option<String>,
    /// Whether they did.
    #[serde(default)]
    pub named: Option<bool>,
    /// The line of the errors that names the bug, or their last line.
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TwinCheck {
    #[serde(flatten)]
    pub head: Provenance,
    pub mode: String,
    pub cases: Vec<TwinCase>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TwinCase {
    pub step: u32,
    /// `MxNxK`.
    pub shape: String,
    pub dtype: Dtype,
    pub seed: u64,
    pub dist: Dist,
    pub clusters: Option<u32>,
    /// The launch grid, where the run reported it.
    pub grid: Option<[u32; 3]>,
    pub outcome: Verdict,
    pub exit_code: i32,
    pub rel_error_norm: Option<f64>,
    pub seconds: f64,
    pub detail: String,
}

/// The twins' stress pass: stock twins under stress seeds, and twin mutations with what each
/// must come to.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TwinStress {
    #[serde(flatten)]
    pub head: Provenance,
    pub mode: String,
    /// The stress seeds every case ran under (absent in the file the shell script wrote).
    #[serde(default)]
    pub seeds: Vec<u64>,
    pub cases: Vec<TwinStressCase>,
    /// Per twin mutation and twin: under which seeds it was caught (absent in the shell
    /// script's file, whose summary was printed only).
    #[serde(default)]
    pub mutations: Vec<TwinStressVerdict>,
}

/// One twin mutation on one twin, over the stress seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TwinStressVerdict {
    pub mutation: String,
    pub step: u32,
    /// How it must be caught: `stress` (a wrong result, hang or fault under every seed, by its named twin-check rule where it has one) or
    /// `static` (the twin's static check refuses it; its stress runs are for the record).
    pub caught_by: String,
    /// The seeds it ran under, and those under which the run was wrong, hung or faulted.
    pub seeds: Vec<u64>,
    pub caught_under: Vec<u64>,
    /// A plain run beside it (no stress), where one ran: whether the bug is stress-only.
    pub plain: Option<StressOutcome>,
    /// A static one: whether the static check refused it, naming its rule.
    pub refused: Option<bool>,
    pub met_expectation: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TwinStressCase {
    pub name: String,
    pub step: u32,
    /// `MxNxK`.
    pub shape: String,
    pub clusters: Option<u32>,
    /// The `--stress SEED`; none for a plain run.
    pub stress_seed: Option<u64>,
    pub mutation: Option<String>,
    /// A stress control: the contender run in place of the stock twin (`--kernel`), which must
    /// verify under every seed like it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contender: Option<String>,
    /// Whether the static check ran before the build.
    pub static_check: bool,
    pub expected: StressExpected,
    pub outcome: StressOutcome,
    pub met_expectation: bool,
    pub exit_code: i32,
    pub rel_error_norm: Option<f64>,
    pub seconds: f64,
    pub detail: String,
}

/// What a stress case must come to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StressExpected {
    /// A stock twin (or a stress control) verifies.
    Pass,
    /// A static mutation is refused by the static check.
    Refused,
    /// A stress mutation is caught (its twin-check rule, else a wrong output, a hang or a fault) on every seed.
    Caught,
    /// A plain run beside a mutation, for the record only.
    Record,
}

/// How a stress case ended: its exit status, with a fault and a static refusal told apart
/// from other errors by what the run said.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StressOutcome {
    Pass,
    Wrong,
    Hang,
    /// The driver or the kernel reported a fault.
    Fault,
    Refused,
    Error,
}

/// The wall time of `runner step N --emulate` with the strict rules off and on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EmulationCost {
    pub commit: String,
    pub mode: String,
    pub steps: Vec<EmulationCostStep>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EmulationCostStep {
    pub step: u32,
    pub gpu: String,
    /// `MxNxK`.
    pub shape: String,
    pub grid: [u32; 3],
    pub off_median_ms: f64,
    pub on_median_ms: f64,
    pub off_ms: Vec<f64>,
    pub on_ms: Vec<f64>,
    pub cost_pct: f64,
    /// Off, then on.
    pub verified: Vec<bool>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SelftestSummary {
    #[serde(flatten)]
    pub head: Provenance,
    pub cases: Vec<SelftestCase>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SelftestCase {
    /// `MxNxK`.
    pub shape: String,
    pub dtype: Dtype,
    pub cublas_median_us: f64,
    pub cublas_tflops: f64,
    pub peak_tflops: Option<f64>,
    pub verified: bool,
    pub rel_error_norm: f64,
}

// ---------------------------------------------------------------------------------------------
// the measuring exercises (`runner exercise N.M --json`, gathered by `runner exercise --timings`)

/// Every measuring exercise's run on one GPU.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExerciseTimings {
    pub gpu: String,
    pub date: String,
    pub commit: String,
    pub runs: Vec<ExerciseRun>,
}

/// What `runner exercise N.M --json` prints.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExerciseRun {
    pub runner: RunnerVersion,
    /// `N.M`.
    pub exercise: String,
    pub step: u32,
    pub title: String,
    /// The student's kernel (`--kernel`), if one replaced the committed solution.
    pub kernel: Option<String>,
    pub checks: Vec<ExerciseLine>,
    /// The timing on the Hopper twin, where the exercise has one and a GPU ran it.
    pub measured: Option<ExerciseMeasured>,
    /// `pass`, `fail` or `partial`.
    pub result: String,
    pub summary: String,
}

/// The runner that wrote a file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunnerVersion {
    pub version: String,
    pub commit: String,
}

/// One line of an exercise's check.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExerciseLine {
    /// ok, fail, part, note or run.
    pub status: String,
    pub detail: String,
}

/// The variants of a measuring exercise timed against the stock twin.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExerciseMeasured {
    pub exercise: String,
    pub step: u32,
    pub gpu: String,
    /// The CUDA driver API's version.
    pub driver_version: String,
    pub date: String,
    pub commit: String,
    pub shape: Shape,
    pub dtype: Dtype,
    pub protocol: String,
    pub stock: ExerciseStock,
    pub cublas_median_us: Option<f64>,
    /// What "the same" means.
    pub spread: ExerciseSpread,
    /// faster, slower or same, as the student predicted.
    pub prediction: Option<String>,
    pub variants: Vec<ExerciseVariant>,
}

/// The stock twin's time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExerciseStock {
    pub label: String,
    pub median_us: f64,
    pub q1_us: Option<f64>,
    pub q3_us: Option<f64>,
    pub clocks: Option<Clocks>,
}

/// The stock twin's relative interquartile range, and the bench it comes from.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExerciseSpread {
    pub relative: f64,
    pub source: String,
}

/// One variant against the stock twin.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExerciseVariant {
    pub label: String,
    /// The kernel's parameters, name and value.
    pub params: Vec<(String, u32)>,
    pub median_us: f64,
    pub q1_us: f64,
    pub q3_us: f64,
    pub relative_pct: f64,
    /// faster, slower or same.
    pub verdict: String,
    /// The stock twin's time over this variant's, round by round in the same run, with its
    /// bootstrap 95 % interval: what decided `verdict` (absent in files written before it,
    /// whose verdicts used the committed bench's spread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_stock: Option<Ratio>,
}

// ---------------------------------------------------------------------------------------------
// traces (`runner step --trace`): Perfetto JSON, with what it is in `otherData`

/// A trace file as the book reads it: its `otherData` (the events are Perfetto's).
#[derive(Debug, Clone, Deserialize)]
pub struct TraceFile {
    #[serde(rename = "otherData")]
    pub other: TraceHead,
}

/// A trace's `otherData`: the recorded launch, how its clocks were mapped and what was cut.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TraceHead {
    #[serde(flatten)]
    pub meta: TraceMeta,
    /// Always `trace`.
    pub kind: String,
    /// What the times mean, in one sentence.
    pub timing: String,
    pub clocks: Vec<CtaClock>,
    /// Warps whose trace region filled up ("CTA c warp w").
    pub cut_short: Vec<String>,
    pub end_us: f64,
    /// A note added by hand to a committed trace (which commit's kernel it shows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_note: Option<String>,
}

/// What the files say about the recorded launch.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TraceMeta {
    pub step: u32,
    pub arch: Arch,
    pub kernel: String,
    pub gpu: String,
    pub driver: String,
    pub date: String,
    pub commit: String,
    pub shape: Shape,
    pub dtype: Dtype,
    pub params: String,
    /// The Blackwell kernel ran under the tcgen05 emulation: only the order means something.
    pub emulated: bool,
    pub grid: (u32, u32, u32),
    pub cluster: u32,
    pub block: u32,
    pub layout: common::trace::Layout,
    pub records: usize,
    /// Trace calls that found their warp's region full (none recorded past that point).
    pub dropped: u64,
}

/// How one CTA's `%clock64` readings became ns.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CtaClock {
    pub cta: u32,
    pub sm: u32,
    pub clock_map: common::trace::ClockMap,
    pub clock_mhz: f64,
}

impl TraceFile {
    pub fn parse(text: &str) -> anyhow::Result<TraceFile> {
        let t: TraceFile = serde_json::from_str(text)?;
        if t.other.kind != "trace" {
            anyhow::bail!("its otherData says kind {:?}, not trace", t.other.kind);
        }
        Ok(t)
    }
}

// ---------------------------------------------------------------------------------------------
// the grader's files besides `grade.json` (whose type is `grade::report::GradeReport`)

/// Gradescope's visibility values; every one but `visible` makes the test hidden. A rubric's
/// tests name one (`grade::rubric` re-exports it): it is defined here, with the files it is
/// written to, so that this module depends on no other of the runner's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Visibility {
    Visible,
    Hidden,
    AfterDueDate,
    AfterPublished,
}

/// Gradescope's autograder `results.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GradescopeResults {
    pub score: f64,
    pub execution_time: u64,
    pub output: String,
    pub stdout_visibility: String,
    pub tests: Vec<GradescopeTest>,
    /// The visible tests' best TFLOP/s; absent where no visible test was timed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leaderboard: Vec<LeaderboardEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GradescopeTest {
    pub name: String,
    pub number: String,
    pub score: f64,
    pub max_score: f64,
    pub output: String,
    pub visibility: Visibility,
    pub tags: Vec<String>,
    /// `passed` or `failed`; absent for a skipped test (Gradescope then shows no status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeaderboardEntry {
    pub name: String,
    pub value: f64,
    pub order: String,
}

/// `runner grade selftest`'s `selftest.json`: the grader graded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GradeSelftest {
    pub gpu: Option<String>,
    /// The day it ran and the runner's commit (absent in files written before they were recorded).
    #[serde(default)]
    pub date: Option<String>,
    #[serde(default)]
    pub commit: Option<String>,
    pub passed: usize,
    pub total: usize,
    pub rows: Vec<GradeSelftestRow>,
}

/// A submission of the grader's selftest.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GradeSelftestCase {
    pub name: String,
    pub rubric: String,
    pub what: String,
    pub expect: GradeSelftestExpect,
    /// Where its grading's reports are written.
    #[serde(skip)]
    pub written: PathBuf,
    /// Its rubric's log cap.
    #[serde(skip)]
    pub log_cap: usize,
}

/// What a submission of the selftest must come to.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GradeSelftestExpect {
    /// Every test that ran passed, no flag, full marks of what ran.
    FullMarks,
    /// At least one test failed (a seeded bug).
    Fails,
    /// This flag is raised.
    Flag(String),
    /// Refused before compiling.
    Rejected,
    /// A cheat caught as it must be.
    Caught(GradeSelftestCatch),
    /// A forgery that buys nothing: every test passes (the kernel is correct), and the named
    /// requirement, whatever the kernel's own records show, is worth no points.
    Unrewarded(String),
}

/// What a cheat's report must show.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GradeSelftestCatch {
    pub flag: String,
    /// The flag comes with lost points.
    pub costs_points: bool,
    /// Every visible test passed.
    pub visible_pass: bool,
    /// No line of this file is in anything the grading wrote.
    pub protect: Option<PathBuf>,
    /// What a student sees of the hidden tests is one word each, and of time the visible
    /// phase's (absent in files written before it was checked).
    #[serde(default)]
    pub hidden_quiet: bool,
    /// The hidden run took at least this long, none of it in the time a student sees.
    #[serde(default)]
    pub hidden_spin_s: Option<f64>,
    /// A failed row's detail names this (the simulator's rule, say).
    #[serde(default)]
    pub detail: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GradeSelftestRow {
    pub case: GradeSelftestCase,
    pub ok: bool,
    pub outcome: String,
    pub gpu_after: Option<String>,
    /// How long grading it took (absent in files written before it was recorded).
    #[serde(default)]
    pub elapsed_s: f64,
}

// ---------------------------------------------------------------------------------------------
// reading the committed files

/// The committed results folder.
pub fn dir() -> PathBuf {
    project_root().join("assets/results")
}

/// Every results file directly in `assets/results/`, by file name, in name order. A JSON file
/// that is not a results file (a trace) is passed over; one that claims a kind and does not
/// parse as it is an error, never a silently missing table.
pub fn committed() -> anyhow::Result<Vec<(String, Results)>> {
    read_dir(&dir())
}

/// Every results file directly in `dir` (a dated folder of `assets/results/`), as [`committed`]
/// reads the top level.
pub fn read_folder(dir: &Path) -> anyhow::Result<Vec<(String, Results)>> {
    read_dir(dir)
}

fn read_dir(dir: &Path) -> anyhow::Result<Vec<(String, Results)>> {
    use anyhow::Context;
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        // A runner without its checkout (the book is embedded) has no results to show.
        Err(_) => return Ok(Vec::new()),
    };
    files.retain(|p| p.extension().is_some_and(|e| e == "json"));
    files.sort();
    let mut out = Vec::new();
    for p in files {
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))?;
        if let Some(r) = parse(&text).with_context(|| format!("{}", p.display()))? {
            let name = p
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            out.push((name, r));
        }
    }
    Ok(out)
}

/// A results file's text: `None` if it names no kind this module knows (a trace, a grade
/// report: their own types read them), an error if it names one and does not match it.
pub fn parse(text: &str) -> anyhow::Result<Option<Results>> {
    #[derive(Deserialize)]
    struct Head {
        kind: Option<String>,
    }
    const KINDS: [&str; 9] = [
        "bench",
        "heatmap",
        "diagnose",
        "emulation",
        "twins",
        "selftest",
        "exercise-timings",
        "twin-stress",
        "emulation-cost",
    ];
    let head: Head = serde_json::from_str(text)?;
    match head.kind {
        Some(k) if KINDS.contains(&k.as_str()) => Ok(Some(serde_json::from_str(text)?)),
        _ => Ok(None),
    }
}

/// The committed files of one kind, oldest first by the date each records (`bench-h200-…`
/// sorts after `bench-h100-…` whatever their dates); files of one date keep their name order.
pub fn oldest_first<T>(
    files: &[(String, Results)],
    pick: impl Fn(&Results) -> Option<&T>,
) -> Vec<(String, &T, String)> {
    let mut out: Vec<(String, &T, String)> = files
        .iter()
        .filter_map(|(n, r)| pick(r).map(|t| (n.clone(), t, r.date().to_string())))
        .collect();
    out.sort_by(|a, b| a.2.cmp(&b.2));
    out
}

#[cfg(test)]
pub mod fixtures {
    //! Synthetic reports for the drawing tests: they check a picture, not a measurement.
    use super::*;

    pub fn case(shape: Shape, dtype: Dtype, step: Option<u32>, tflops: f64) -> BenchCase {
        BenchCase {
            shape,
            dtype,
            kernel: step.map_or_else(|| "cublas".to_string(), |n| format!("step {n}")),
            step,
            params: None,
            skipped: None,
            verified: true,
            rel_error_norm: None,
            stats: None,
            clocks: None,
            tflops: Some(tflops),
            pct_of_peak: None,
            pct_of_cublas: None,
            confidence: CaseConfidence::default(),
        }
    }

    pub fn report(cases: Vec<BenchCase>) -> BenchReport {
        BenchReport {
            gpu: GpuInfo {
                name: "Test <GPU>".into(),
                compute_capability: (9, 0),
                sm_count: 132,
                max_clock_mhz: 1980,
                l2_bytes: 1,
                max_smem_per_block: 1,
                driver_version: "0".into(),
            },
            driver: None,
            arch: Arch::Hopper,
            clocks_before: None,
            clocks_after: None,
            peak_tflops: None,
            date: "2026-01-01".into(),
            commit: "abc".into(),
            iters: 20,
            warmup: 5,
            l2_flushed: true,
            protocol: Some("test".into()),
            device: Some(DeviceReport {
                state: None,
                nvml_error: Some("test".into()),
            }),
            seed: 1,
            dist: Dist::Gaussian,
            adaptive: None,
            cases,
        }
    }
}

/// Whether a results file is a grader's report (`grade::report::GradeReport`).
#[cfg(test)]
pub fn is_grade_report(name: &str, text: &str) -> bool {
    name == "grade.json" || text.contains("\"schema\": \"workbook-grade/")
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// Every JSON file under `assets/results/`, archive and grade folders included.
    pub fn every_json(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("a results folder") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                every_json(&path, out);
            } else if path.extension().is_some_and(|e| e == "json") {
                out.push(path);
            }
        }
    }

    /// (Only this test reads it: nothing in the runner consumes the file.) `scripts/sim-speed.py`'s `sim-speed-DATE.json`: the simulator's speed targets, measured on a
    /// machine without a GPU (the fields the book cites; the rest is the script's own detail).
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct SimSpeed {
        /// `sim-speed/1`.
        pub schema: String,
        pub date: String,
        pub commit: String,
        pub machine: SimSpeedMachine,
        pub runs: u32,
        pub step0: serde_json::Value,
        pub step6: serde_json::Value,
        pub seeded_bugs: serde_json::Value,
        pub deadlock: serde_json::Value,
    }

    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct SimSpeedMachine {
        pub cpu: String,
        pub cores: u32,
        pub gpu: String,
        pub note: String,
    }

    #[test]
    fn every_committed_results_file_parses_through_its_type() {
        let mut files = Vec::new();
        every_json(&dir(), &mut files);
        let mut by_kind = std::collections::BTreeMap::<&str, usize>::new();
        for path in &files {
            let text = std::fs::read_to_string(path).expect("readable");
            let name = path.file_name().unwrap().to_string_lossy();
            let what = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
            let kind = if let Some(r) = parse(&text).unwrap_or_else(|e| panic!("{}", what(&e))) {
                // And back: what the type writes is what it reads.
                let again = serde_json::to_string(&r).unwrap();
                assert!(parse(&again).unwrap().is_some(), "{}", path.display());
                r.kind()
            } else if name.starts_with("trace-") && name.ends_with("-sim.json") {
                // The simulator's Perfetto trace (`sim::trace_events`), read by its own type in
                // the book (`book::step0_figure`, tested there): here, its envelope.
                let v: serde_json::Value =
                    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}", what(&e)));
                assert!(
                    v.get("traceEvents").is_some_and(|e| e.is_array()),
                    "{}: a simulator trace holds traceEvents",
                    path.display()
                );
                "sim-trace"
            } else if name.starts_with("trace-") {
                TraceFile::parse(&text).unwrap_or_else(|e| panic!("{}", what(&e)));
                "trace"
            } else if is_grade_report(&name, &text) {
                // Read through its type by grade::report's own test (this module depends on
                // none of the runner's others).
                "grade"
            } else if name == "results.json" {
                serde_json::from_str::<GradescopeResults>(&text)
                    .unwrap_or_else(|e| panic!("{}", what(&e)));
                "gradescope"
            } else if name == "selftest.json"
                || (name.starts_with("selftest-") && name.ends_with(".json"))
            {
                serde_json::from_str::<GradeSelftest>(&text)
                    .unwrap_or_else(|e| panic!("{}", what(&e)));
                "grade selftest"
            } else if name.starts_with("sim-speed-") {
                let r = serde_json::from_str::<SimSpeed>(&text)
                    .unwrap_or_else(|e| panic!("{}", what(&e)));
                assert_eq!(r.schema, "sim-speed/1", "{}", path.display());
                "sim speed"
            } else {
                panic!("{}: no results type reads this file", path.display())
            };
            *by_kind.entry(kind).or_default() += 1;
        }
        // Each kind is committed at least once, so none of the branches above is vacuous.
        for kind in [
            "bench",
            "heatmap",
            "diagnose",
            "emulation",
            "twins",
            "selftest",
            "exercise-timings",
            "twin-stress",
            "emulation-cost",
            "trace",
            "sim-trace",
            "grade",
            "gradescope",
            "grade selftest",
        ] {
            assert!(
                by_kind.get(kind).is_some_and(|&n| n > 0),
                "{kind}: {by_kind:?}"
            );
        }
        assert_eq!(by_kind.values().sum::<usize>(), files.len());
    }

    #[test]
    fn bench_cases_carry_their_intervals_and_older_files_load_without_them() {
        use common::confidence::Verdict;
        // The bench of record predates the intervals: it loads, with none.
        let text = std::fs::read_to_string(dir().join("bench-h100-2026-11-25.json")).unwrap();
        let Some(Results::Bench(old)) = parse(&text).unwrap() else {
            panic!("a bench file")
        };
        assert!(old.adaptive.is_none());
        assert!(old
            .cases
            .iter()
            .all(|c| c.confidence == CaseConfidence::default()));
        // A case with both ratios, as the book reads it: the fields beside the others.
        let ratio = |median: f64, verdict| Ratio {
            median,
            ci95: [median - 0.004, median + 0.004],
            rounds: 240,
            verdict,
        };
        let mut case = fixtures::case(DEFAULT_SHAPES[1], Dtype::Bf16, Some(6), 800.0);
        case.confidence = CaseConfidence {
            ratio_to_cublas: Some(ratio(1.034, Verdict::Faster)),
            vs_previous: Some(VsPrevious {
                contender: "step 5".into(),
                ratio: ratio(1.001, Verdict::Same),
            }),
            cap_hit: Some(false),
        };
        let mut report = fixtures::report(vec![case]);
        report.adaptive = Some(AdaptiveRounds {
            target_half_width: 0.005,
            time_cap_s: 60.0,
            min_rounds: 30,
            max_rounds: 100_000,
            resamples: 2000,
            bootstrap_seed: 7,
        });
        let json = serde_json::to_value(Results::Bench(report)).unwrap();
        let c = &json["cases"][0];
        assert_eq!(c["kernel"], "step 6");
        assert_eq!(
            c["ratio_to_cublas"],
            serde_json::json!({"median": 1.034, "ci95": [1.034 - 0.004, 1.034 + 0.004],
                               "rounds": 240, "verdict": "faster"})
        );
        assert_eq!(c["vs_previous"]["contender"], "step 5");
        assert_eq!(c["vs_previous"]["ratio"]["verdict"], "same within noise");
        assert_eq!(c["cap_hit"], false);
        assert_eq!(json["adaptive"]["target_half_width"], 0.005);
        let Some(Results::Bench(back)) = parse(&json.to_string()).unwrap() else {
            panic!("a bench file")
        };
        assert_eq!(
            back.cases[0]
                .confidence
                .vs_previous
                .as_ref()
                .unwrap()
                .ratio
                .median,
            1.001
        );
        // A case without them writes none of the three fields.
        let plain =
            serde_json::to_value(fixtures::case(DEFAULT_SHAPES[0], Dtype::F16, None, 700.0))
                .unwrap();
        for field in ["ratio_to_cublas", "vs_previous", "cap_hit"] {
            assert!(plain.get(field).is_none(), "{field}");
        }
    }

    #[test]
    fn a_file_that_names_its_kind_must_match_it() {
        assert!(parse(r#"{"kind": "trace"}"#).unwrap().is_none());
        assert!(parse(r#"{"schema": "x"}"#).unwrap().is_none());
        // A twins file whose case lost its outcome is an error, not a file passed over.
        let bad = r#"{"kind": "twins", "gpu": "g", "driver": "d", "date": "2026-01-01",
            "commit": "c", "mode": "m", "cases": [{"step": 0, "shape": "1x1x1",
            "dtype": "f16", "seed": 1, "dist": "gaussian", "clusters": null, "grid": null,
            "exit_code": 0, "rel_error_norm": null, "seconds": 1.0, "detail": ""}]}"#;
        let e = parse(bad).unwrap_err();
        assert!(format!("{e:#}").contains("outcome"), "{e:#}");
        assert!(
            parse(&bad.replace("\"exit_code\"", "\"outcome\": \"pass\", \"exit_code\""))
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn the_committed_folder_reads_and_sorts_by_recorded_date() {
        let files = committed().unwrap();
        assert!(files.iter().any(|(_, r)| r.kind() == "bench"));
        let benches = oldest_first(&files, |r| match r {
            Results::Bench(b) => Some(b),
            _ => None,
        });
        assert!(benches.windows(2).all(|w| w[0].2 <= w[1].2));
    }
}
