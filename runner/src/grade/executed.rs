//! Proof a technique ran: how many times the launched kernel executed an instruction class, at a
//! graded shape, measured by the grader, against the number the shape needs.
//!
//! An instruction in the binary proves nothing: a multicast behind `if (M < 0)`, or issued for
//! k-block 0 only, is in the SASS and does not share B. So a requirement names an instruction
//! class and an executed share of the shape:
//!
//! ```toml
//! [[requirements]]
//! name = "tma-multicast"
//! points = 20
//! executed = "UTMALDG.MULTICAST"   # an opcode and modifiers (see `technique::Pattern`)
//! per = "cta-k-block"              # at least `at_least` per CTA tile and k-block ...
//! at_least = 1                     # ... (default 1); `at_most` caps it the same way
//! ```
//!
//! The units ([`Unit`]) come from the step's tile facts (cluster tile, CTAs per cluster, k-block,
//! C's TMA box) and the measured launch's shape ([`measure_shape`]), never from the submission.
//! The old form `sass = "X"` (with `min`) still parses: it holds only if the instruction is in
//! the binary *and* executes at least `min` times in the measured launch (`per = "launch"`); a
//! ban (`max = 0`, no `min`) stays a static check (an instruction absent from the binary never
//! executes).
//!
//! The measurement: one launch per dtype build in a confined child of its own
//! (`grade-worker --phase measure`), after the tests, never timed, on public inputs, its output
//! verified like a test's (a wrong launch proves nothing). On a GPU the counts are CUPTI's SASS
//! metrics ([`common::cupti`]), per instruction: warp-level executions `n`, active-thread
//! executions `t`, predicated-on thread executions `p`. Each instruction is mapped to its opcode
//! by disassembling the same cubin (nvdisasm, in the child). A warp-execution whose guard was
//! false did not do the instruction's work, so an executed count is the fewest warp-executions
//! with a true guard the three counts allow ([`PcCount::proven`]): all `n` for an unguarded
//! instruction, else `max(ceil(p / 32), n - (t - p))`, exact when one lane is active (an elected
//! thread) or the guard was always true.
//!
//! What the counts cannot show: which warp executed an instruction. "Every tile is stored by a
//! warp that issues no MMA" is a per-warp property; no requirement here awards points for it,
//! and the trace facts that describe it (the submission's own records) carry no points unless a
//! rubric gives them some (see the rubrics' comments).
//!
//! A second source of counts, the PTX simulator's, decides a Blackwell rubric graded on the
//! simulator: its requirements name PTX classes ([`PtxClass`], `executed =
//! "tcgen05.mma.cta_group::2"`), counted in the measured launch the visible tests' simulating
//! child makes after its tests ([`super::simulated`]). Its counts are warp-level: per warp, the
//! most executions of any one lane with a true guard ([`PtxCounts`]). Both sources answer through
//! [`CountSource`], and [`check`] decides the same way from either.

use super::job::{Flag, Status};
use super::technique::Pattern;
use anyhow::{anyhow, bail, Result};
use common::step::{KernelShape, KernelSpec, OutputArg};
use common::Shape;
use serde::{Deserialize, Serialize};

/// The variable naming the CUPTI library for a measuring child (the grader resolves, or
/// installs, it before any child starts).
pub const CUPTI_ENV: &str = "WORKBOOK_GRADE_CUPTI";
/// Set instead of [`CUPTI_ENV`] where none could be found: why (each executed row says so).
pub const CUPTI_MISSING_ENV: &str = "WORKBOOK_GRADE_CUPTI_MISSING";

/// What an executed count is counted per, at the measured shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unit {
    /// The whole launch.
    Launch,
    /// Each CTA's tile (one CTA's share of a cluster tile), each k-block.
    CtaKBlock,
    /// Each cluster tile, each k-block.
    ClusterKBlock,
    /// Each CTA's tile.
    CtaTile,
    /// Each cluster tile.
    ClusterTile,
    /// Each TMA box of C (the output's store box): the whole of C, box by box.
    CBox,
}

impl Unit {
    pub const ALL: [Unit; 6] = [
        Unit::Launch,
        Unit::CtaKBlock,
        Unit::ClusterKBlock,
        Unit::CtaTile,
        Unit::ClusterTile,
        Unit::CBox,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Unit::Launch => "launch",
            Unit::CtaKBlock => "cta-k-block",
            Unit::ClusterKBlock => "cluster-k-block",
            Unit::CtaTile => "cta-tile",
            Unit::ClusterTile => "cluster-tile",
            Unit::CBox => "c-box",
        }
    }

    /// The words a report uses: "per CTA tile and k-block".
    pub fn words(self) -> &'static str {
        match self {
            Unit::Launch => "in the launch",
            Unit::CtaKBlock => "per CTA tile and k-block",
            Unit::ClusterKBlock => "per cluster tile and k-block",
            Unit::CtaTile => "per CTA tile",
            Unit::ClusterTile => "per cluster tile",
            Unit::CBox => "per TMA box of C",
        }
    }

    pub fn parse(s: &str) -> Result<Unit> {
        Unit::ALL
            .into_iter()
            .find(|u| u.name() == s)
            .ok_or_else(|| anyhow!("per {s:?}: one of {}", Unit::ALL.map(Unit::name).join(", ")))
    }

    /// How many of this unit the launch at `s` holds, from the kernel's tile facts.
    pub fn count(self, k: &KernelShape, s: Shape) -> Result<u64> {
        let clusters = u64::from(k.num_tiles(s));
        let k_blocks = (s.k / k.tile_k as usize) as u64;
        let ctas = clusters * u64::from(k.cluster);
        Ok(match self {
            Unit::Launch => 1,
            Unit::CtaKBlock => ctas * k_blocks,
            Unit::ClusterKBlock => clusters * k_blocks,
            Unit::CtaTile => ctas,
            Unit::ClusterTile => clusters,
            Unit::CBox => match k.output {
                OutputArg::TensorMap { box_rows, box_cols } if box_rows > 0 && box_cols > 0 => {
                    let (r, c) = (box_rows as usize, box_cols as usize);
                    if !s.m.is_multiple_of(r) || !s.n.is_multiple_of(c) {
                        bail!("C's TMA box {r} x {c} does not tile {s}");
                    }
                    ((s.m / r) * (s.n / c)) as u64
                }
                _ => {
                    bail!("per \"c-box\": this kernel stores C through a pointer, with no TMA box")
                }
            },
        })
    }
}

/// What a requirement counts: a SASS instruction class (CUPTI's counts, on a GPU), or a PTX
/// instruction class (the simulator's, on the sm_100a PTX of a Blackwell kernel).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstructionClass {
    Sass(Pattern),
    Ptx(PtxClass),
}

impl std::fmt::Display for InstructionClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InstructionClass::Sass(p) => write!(f, "{p}"),
            InstructionClass::Ptx(c) => write!(f, "{c}"),
        }
    }
}

/// A PTX instruction class: `tcgen05.mma.cta_group::2`, `cp.async.bulk.tensor.multicast`. An
/// opcode as the PTX writes it (`tcgen05.mma.cta_group::2.kind::f16`) is an instance when its
/// first part is the class's first part and it carries every other part of the class, in any
/// order, either exactly or as the name of a qualified part (`multicast` is carried by
/// `multicast::cluster`; `cta_group::2` only by itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxClass {
    pub parts: Vec<String>,
}

impl PtxClass {
    /// Whether `s` is written as a PTX class (lower case), not a SASS pattern (upper case).
    pub fn looks_like(s: &str) -> bool {
        s.trim().starts_with(|c: char| c.is_ascii_lowercase())
    }

    pub fn parse(s: &str) -> Result<PtxClass> {
        let parts: Vec<String> = s.trim().split('.').map(str::to_string).collect();
        let ok = parts.iter().all(|p| {
            !p.is_empty()
                && !p.starts_with(':')
                && !p.ends_with(':')
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == ':')
        });
        if !ok || !PtxClass::looks_like(s) {
            bail!(
                "{s:?}: write a PTX instruction and the qualifiers it must carry, joined by dots, e.g. \"tcgen05.mma.cta_group::2\" or \"cp.async.bulk.tensor.multicast\""
            );
        }
        Ok(PtxClass { parts })
    }

    /// Whether the PTX opcode `op` (with all its qualifiers) is an instance of this class.
    pub fn matches(&self, op: &str) -> bool {
        let mut have = op.split('.');
        let first = have.next();
        let rest: Vec<&str> = have.collect();
        first == self.parts.first().map(String::as_str)
            && self.parts[1..].iter().all(|want| {
                rest.iter().any(|h| {
                    *h == want.as_str()
                        || (!want.contains("::")
                            && h.split_once("::").is_some_and(|(name, _)| name == want))
                })
            })
    }
}

impl std::fmt::Display for PtxClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.parts.join("."))
    }
}

/// The executed part of a requirement, resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Executed {
    pub per: Unit,
    pub at_least: u64,
    pub at_most: Option<u64>,
}

impl Executed {
    /// `(fewest, most)` executions the launch at `s` must show.
    pub fn bounds(&self, k: &KernelShape, s: Shape) -> Result<(u64, Option<u64>)> {
        let units = self.per.count(k, s)?;
        Ok((
            units.saturating_mul(self.at_least),
            self.at_most.map(|m| units.saturating_mul(m)),
        ))
    }
}

/// The shape of the measured launch: two cluster tiles by two and eight k-blocks (more than
/// any step's stages, so every pipeline slot is reused). Small and public.
pub fn measure_shape(spec: &KernelSpec) -> Result<Shape> {
    super::rubric::trace_shape(spec)
}

// ---- counts ---------------------------------------------------------------------------------

/// One instruction of the launched kernel with its measured counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PcCount {
    pub function: String,
    pub offset: u32,
    pub op: String,
    /// Its guard predicate (`P0`, `!UP1`), none for an unguarded one.
    pub guard: Option<String>,
    /// Warp-level executions (`smsp__sass_inst_executed`).
    pub warp: u64,
    /// Active-thread executions (`smsp__sass_thread_inst_executed`).
    pub threads: u64,
    /// Thread executions with a true guard (`smsp__sass_thread_inst_executed_pred_on`).
    pub pred_on: u64,
}

impl PcCount {
    /// Whether the three counts can all be true: every warp-execution has 1 to 32 active
    /// threads, and no more threads had a true guard than were active.
    pub fn consistent(&self) -> bool {
        self.pred_on <= self.threads
            && self.threads >= self.warp
            && self.threads <= self.warp.saturating_mul(32)
    }

    /// The fewest warp-executions with a true guard these counts allow. Unguarded: every one.
    /// Guarded: each warp-execution with a true guard has at most 32 such threads (so at least
    /// `ceil(p / 32)`), and each with a false guard has at least one active thread whose guard
    /// was false (so at most `t - p` of them, at least `n - (t - p)` true). Counts that cannot
    /// all be true prove nothing.
    pub fn proven(&self) -> u64 {
        if self.guard.is_none() {
            return self.warp;
        }
        if self.warp == 0 || !self.consistent() {
            return 0;
        }
        let by_lanes = self.pred_on.div_ceil(32);
        let by_false = self.warp.saturating_sub(self.threads - self.pred_on);
        by_lanes.max(by_false).min(self.warp)
    }

    /// The most warp-executions with a true guard these counts allow.
    pub fn possible(&self) -> u64 {
        if self.guard.is_none() || !self.consistent() {
            return self.warp;
        }
        self.warp.min(self.pred_on)
    }
}

/// What a source proved about one instruction class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClassCount {
    /// The fewest executions the counts prove.
    pub proven: u64,
    /// The most executions the counts allow.
    pub possible: u64,
    /// Instructions of the class in the launched kernel.
    pub instructions: usize,
    /// Of them, with counts that cannot all be true.
    pub inconsistent: usize,
}

/// A source of executed-instruction counts for one measured launch.
pub trait CountSource {
    /// Where the counts come from, for the report ("CUPTI SASS metrics on GH100").
    fn describe(&self) -> String;
    /// What the counts prove about `class`; `None` if this source cannot count it (a PTX
    /// opcode from CUPTI, a SASS instruction from the simulator).
    fn count(&self, class: &InstructionClass) -> Option<ClassCount>;
    /// Whether the counts list every instruction of the kernel, executed or not (CUPTI's, per
    /// program counter), or only the forms that executed (the simulator's, per opcode).
    fn lists_unexecuted(&self) -> bool {
        true
    }
}

/// The simulator's counts: warp-level executions per PTX opcode, as `sim`'s run report gives
/// them (per warp of every CTA, the most executions of any one lane with a true guard, summed:
/// never more than the warps executed, exact for an instruction one elected lane issues; an
/// instruction whose guard was false is not counted).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PtxCounts {
    pub source: String,
    pub per_opcode: Vec<(String, u64)>,
}

impl CountSource for PtxCounts {
    fn describe(&self) -> String {
        self.source.clone()
    }
    fn lists_unexecuted(&self) -> bool {
        false
    }
    fn count(&self, class: &InstructionClass) -> Option<ClassCount> {
        let InstructionClass::Ptx(p) = class else {
            return None;
        };
        let mut c = ClassCount::default();
        for (_, n) in self.per_opcode.iter().filter(|(op, _)| p.matches(op)) {
            c.instructions += 1;
            c.proven += n;
            c.possible += n;
        }
        Some(c)
    }
}

/// The counts of one measured launch, from either source: executed requirements are decided the
/// same way from both ([`check`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Counts {
    /// CUPTI on a GPU.
    Sass(SassCounts),
    /// The PTX simulator.
    Ptx(PtxCounts),
}

impl Counts {
    /// Instructions (CUPTI: program counters; the simulator: opcodes) with counts.
    pub fn len(&self) -> usize {
        match self {
            Counts::Sass(c) => c.pcs.len(),
            Counts::Ptx(c) => c.per_opcode.len(),
        }
    }
}

impl CountSource for Counts {
    fn describe(&self) -> String {
        match self {
            Counts::Sass(c) => c.describe(),
            Counts::Ptx(c) => c.describe(),
        }
    }
    fn count(&self, class: &InstructionClass) -> Option<ClassCount> {
        match self {
            Counts::Sass(c) => c.count(class),
            Counts::Ptx(c) => c.count(class),
        }
    }
    fn lists_unexecuted(&self) -> bool {
        match self {
            Counts::Sass(c) => c.lists_unexecuted(),
            Counts::Ptx(c) => c.lists_unexecuted(),
        }
    }
}

/// CUPTI's counts, instruction by instruction.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SassCounts {
    pub source: String,
    pub pcs: Vec<PcCount>,
}

impl CountSource for SassCounts {
    fn describe(&self) -> String {
        self.source.clone()
    }
    fn count(&self, class: &InstructionClass) -> Option<ClassCount> {
        let InstructionClass::Sass(p) = class else {
            return None;
        };
        let mut c = ClassCount::default();
        for pc in self.pcs.iter().filter(|pc| p.matches(&pc.op)) {
            c.instructions += 1;
            c.inconsistent += usize::from(pc.guard.is_some() && !pc.consistent());
            c.proven += pc.proven();
            c.possible += pc.possible();
        }
        Some(c)
    }
}

// ---- the measuring child's report -----------------------------------------------------------

/// What a measuring child reports for one build.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Measured {
    /// The launch ran and was checked: its flags (none: right), their summary, and its counts.
    Ran {
        flags: Vec<Flag>,
        summary: String,
        counts: Counts,
    },
    /// The launch faulted, or could not be made, because of the kernel.
    Failed { detail: String, flags: Vec<Flag> },
    /// The grader could not measure (no CUPTI, not permitted, a CUPTI error): not the student's
    /// doing, and no proof either.
    Error(String),
}

/// One build's measurement: the build's name and what came of it.
#[derive(Debug, Clone)]
pub struct BuildMeasured {
    pub build: String,
    pub measured: Measured,
}

/// The outcome of an executed requirement on the measured builds.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutedVerdict {
    pub status: Status,
    pub detail: String,
    pub flags: Vec<Flag>,
}

/// The executed check of requirement `class` x `e` on every measured build (all must hold):
/// `k` and `shape` give the counts it needs. `what` describes the requirement for messages.
pub fn check(
    what: &str,
    class: &InstructionClass,
    e: &Executed,
    k: &KernelShape,
    shape: Shape,
    builds: &[BuildMeasured],
) -> ExecutedVerdict {
    let error = |detail: String| ExecutedVerdict {
        status: Status::Error,
        flags: vec![Flag::new("grader-error", detail.clone())],
        detail,
    };
    let (fewest, most) = match e.bounds(k, shape) {
        Ok(b) => b,
        Err(err) => return error(format!("{what} not checked: {err:#}")),
    };
    let need = match most {
        Some(m) if m == fewest => format!("exactly {fewest}"),
        Some(m) => format!("{fewest} to {m}"),
        None => format!("at least {fewest}"),
    };
    let need = format!(
        "{need} ({} {}, {} at {}x{}x{})",
        e.at_most
            .filter(|m| *m != e.at_least)
            .map_or(e.at_least.to_string(), |m| format!("{} to {m}", e.at_least)),
        e.per.words(),
        e.per.name(),
        shape.m,
        shape.n,
        shape.k
    );
    if builds.is_empty() {
        return error(format!("{what} not checked: no build was measured"));
    }
    let mut found = Vec::new();
    for b in builds {
        let counts = match &b.measured {
            Measured::Error(why) => {
                return error(format!(
                    "{what} not checked: the {} build's executed instructions could not be counted: {why}",
                    b.build
                ))
            }
            Measured::Failed { detail, flags } => {
                return ExecutedVerdict {
                    status: Status::Failed,
                    detail: format!(
                        "{what} not shown: the measured launch of the {} build failed: {detail}",
                        b.build
                    ),
                    flags: flags.clone(),
                }
            }
            Measured::Ran { flags, summary, .. } if !flags.is_empty() => {
                return ExecutedVerdict {
                    status: Status::Failed,
                    detail: format!(
                        "{what} not shown: the measured launch of the {} build was wrong ({summary}): its counts prove nothing",
                        b.build
                    ),
                    flags: flags.clone(),
                }
            }
            Measured::Ran { counts, .. } => counts,
        };
        let Some(c) = counts.count(class) else {
            return error(format!(
                "{what} not checked: {} cannot count {class}",
                counts.describe()
            ));
        };
        let low = c.proven < fewest;
        let high = most.is_some_and(|m| c.possible > m);
        if low || high {
            let shown = if c.proven == c.possible {
                format!("{}", c.proven)
            } else {
                format!("{} to {}", c.proven, c.possible)
            };
            let listed = counts.lists_unexecuted();
            let mut why = format!(
                "the {} build executed {shown} {class} (in {} {}), the rubric requires {need}",
                b.build,
                c.instructions,
                if listed {
                    "instruction(s) of the kernel"
                } else {
                    "executed form(s)"
                }
            );
            if c.instructions == 0 && listed {
                why.push_str(": the kernel has no such instruction");
            } else if c.instructions == 0 {
                why.push_str(": no such instruction executed");
            } else if c.proven == 0 && c.possible == 0 {
                why.push_str(": the instruction is in the kernel but never ran");
            }
            if c.inconsistent > 0 {
                why.push_str(&format!(
                    "; {} of them had counts that cannot all be true and prove nothing",
                    c.inconsistent
                ));
            }
            return ExecutedVerdict {
                status: Status::Failed,
                flags: vec![Flag::new(
                    if low {
                        "technique-not-executed"
                    } else {
                        "technique-forbidden"
                    },
                    format!("{shown} {class} executed in the {} build", b.build),
                )],
                detail: format!("{what}: {why}"),
            };
        }
        found.push(if c.proven == c.possible {
            format!("{} in the {} build", c.proven, b.build)
        } else {
            format!(
                "at least {} (at most {}) in the {} build",
                c.proven, c.possible, b.build
            )
        });
    }
    let source = builds
        .iter()
        .find_map(|b| match &b.measured {
            Measured::Ran { counts, .. } => Some(counts.describe()),
            _ => None,
        })
        .unwrap_or_default();
    ExecutedVerdict {
        status: Status::Passed,
        flags: Vec::new(),
        detail: format!("{what}: executed {} ({need}; {source})", found.join(", ")),
    }
}

// ---- the measured launch, from the grader's side ---------------------------------------------

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
    pub fn as_test(&self, dtype: common::Dtype) -> super::job::JobTest {
        super::job::JobTest {
            name: "measured launch".into(),
            kind: super::rubric::Kind::Correctness,
            shape: self.shape,
            dtype: dtype.to_string(),
            dist: common::Dist::Gaussian.to_string(),
            seeds: super::job::TestSeeds {
                sets: vec![self.seed],
                refresh: self.seed ^ 1,
                decoy: self.seed ^ 2,
                schedule: self.seed ^ 3,
            },
            warmup: 0,
            iters: 0,
            fresh_rows: 0,
        }
    }
}

/// The report row of requirement `name`.
fn row<'a>(
    r: &'a mut super::report::GradeReport,
    name: &str,
) -> Option<&'a mut super::report::TestReport> {
    r.tests
        .iter_mut()
        .find(|t| t.kind == super::rubric::Kind::Technique && t.name == name)
}

/// Score each requirement's static part against the SASS the compile child reported. A static
/// failure is final; a static requirement (a ban) that holds earns its points; one with an
/// executed part that holds is only half shown: its name is returned, for the measurement.
pub fn apply_static(
    r: &mut super::report::GradeReport,
    rubric: &super::rubric::Rubric,
    builds: &[super::technique::BuildSass],
) -> Vec<String> {
    let mut pending = Vec::new();
    for q in &rubric.requirements {
        let Some(t) = row(r, &q.name) else {
            continue;
        };
        if q.ptx.is_some() {
            // A PTX class: no binary to look in (the PTX is the source's own translation);
            // only the simulator's executed count decides it.
            t.max_score = q.points;
            t.score = 0.0;
            t.flags.clear();
            t.status = Status::Error;
            t.detail = "not yet measured".into();
            pending.push(q.name.clone());
            continue;
        }
        let v = q.check(builds);
        t.max_score = q.points;
        t.score = 0.0;
        t.flags = v.flag.into_iter().collect();
        if v.passed && q.executed.is_some() {
            t.status = Status::Error;
            t.detail = format!("in the binary ({}); not yet measured", v.detail);
            pending.push(q.name.clone());
            continue;
        }
        t.status = if v.passed {
            Status::Passed
        } else if v.grader_error {
            Status::Error
        } else {
            Status::Failed
        };
        if v.passed {
            t.score = q.points;
        }
        t.detail = v.detail;
    }
    pending
}

/// The pending requirements `pending` not measured, and why (compiled only; the native code
/// does not run on this GPU): skipped, counting neither way, never awarded.
pub fn skip(r: &mut super::report::GradeReport, pending: &[String], why: &str) {
    for name in pending {
        if let Some(t) = row(r, name) {
            t.status = Status::Skipped;
            t.score = 0.0;
            t.max_score = 0.0;
            t.detail = format!("not measured: {why}");
            t.flags.clear();
        }
    }
}

/// Score the pending requirements on the measured builds.
pub fn apply_measured(
    r: &mut super::report::GradeReport,
    rubric: &super::rubric::Rubric,
    spec: &KernelSpec,
    pending: &[String],
    builds: &[BuildMeasured],
) {
    let Some(shape) = rubric.measure_shape else {
        return;
    };
    let k = spec.shape();
    for q in rubric
        .requirements
        .iter()
        .filter(|q| pending.contains(&q.name))
    {
        let Some(e) = &q.executed else { continue };
        let Some(t) = row(r, &q.name) else { continue };
        let class = q.class();
        let what = if q.why.is_empty() {
            class.to_string()
        } else {
            format!("{class} ({})", q.why)
        };
        let v = check(&what, &class, e, &k, shape, builds);
        t.score = if v.status == Status::Passed {
            q.points
        } else {
            0.0
        };
        t.max_score = q.points;
        t.status = v.status;
        t.detail = v.detail;
        t.flags = v.flags;
    }
}

/// Why the executed requirements of a Blackwell kernel graded under the emulation are skipped.
pub const EMULATED: &str = "this GPU runs the Blackwell kernel under the tcgen05 emulation, so its native sm_100a instructions never execute here: their executed counts need a B200 (CUPTI) or the PTX simulator";

/// Why they are skipped in a compile-only grading.
pub const COMPILED_ONLY: &str =
    "compiled only (a pre-screen: no GPU was used), and an executed count needs the measured launch on a GPU";

/// Why they are skipped in a compile-only grading of a rubric graded on the simulator.
pub const COMPILED_ONLY_SIM: &str =
    "compiled only (a pre-screen: no GPU was used), and an executed count needs the measured launch on the simulator";

/// What a measuring child's folder holds when it is done, or the grader's account of why not:
/// a hang or a crash during the launch is the kernel's failure, a missing report before it the
/// grader's.
pub fn read_measured(dir: &std::path::Path, outcome: &crate::sandbox::Outcome) -> Measured {
    match std::fs::read(dir.join(MEASURED_FILE)) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            Measured::Error(format!("the measuring child's report is malformed: {e}"))
        }),
        Err(_) => {
            let launched = dir.join(LAUNCHING_FILE).exists();
            let why = format!(
                "the measuring child {}: {}",
                outcome.describe(),
                outcome
                    .stderr
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .chars()
                    .take(300)
                    .collect::<String>()
            );
            if launched {
                let flag = match outcome.exit.verdict().0 {
                    common::verdict::Verdict::Hang => "timeout",
                    _ => "worker-crash",
                };
                Measured::Failed {
                    detail: why.clone(),
                    flags: vec![Flag::new(flag, why)],
                }
            } else {
                Measured::Error(why)
            }
        }
    }
}

/// The measuring child's report, in its folder.
pub const MEASURED_FILE: &str = "measure.json";
/// Written by the measuring child just before the launch: a missing report after it is the
/// kernel's doing.
pub const LAUNCHING_FILE: &str = "measure-launching";
/// The measuring child's account of every count (for the instructor: `--keep-scratch`).
pub const DEBUG_FILE: &str = "measure-debug.txt";

impl super::submission::Grader {
    /// Measure the `pending` requirements (present in the binary, executions still to count)
    /// and score them into `r`: the measured launches of [`Self::measure_builds`].
    pub(super) fn measure(
        &self,
        r: &mut super::report::GradeReport,
        dir: &std::path::Path,
        device: usize,
        job: &super::job::Job,
        pending: &[String],
    ) {
        let builds = self.measure_builds(dir, device, job.target.clone(), &job.dtypes);
        match job.spec() {
            Ok(spec) => apply_measured(r, &self.rubric, &spec, pending, &builds),
            Err(e) => r.compile.message = format!("{e:#}"),
        }
    }

    /// Score the `pending` requirements on the measured launches a simulating child reported
    /// (`builds`); a build of the compile that has none (the child stopped before it) failed to
    /// show anything, and fails.
    pub(super) fn apply_sim_measured(
        &self,
        r: &mut super::report::GradeReport,
        job: &super::job::Job,
        pending: &[String],
        mut builds: Vec<BuildMeasured>,
        outcome: &crate::sandbox::Outcome,
    ) {
        for d in &job.dtypes {
            if !builds.iter().any(|b| &b.build == d) {
                builds.push(BuildMeasured {
                    build: d.clone(),
                    measured: Measured::Failed {
                        detail: format!(
                            "the simulating child {} before its measured launch reported",
                            outcome.describe()
                        ),
                        flags: Vec::new(),
                    },
                });
            }
        }
        match job.spec() {
            Ok(spec) => apply_measured(r, &self.rubric, &spec, pending, &builds),
            Err(e) => r.compile.message = format!("{e:#}"),
        }
    }

    /// One measured launch per dtype build in `dtypes` (the builds the compile child left in
    /// `dir/compile`), each in a confined measuring child of its own, after the tests: a fresh
    /// process, so the counting never touches a timed launch.
    pub(super) fn measure_builds(
        &self,
        dir: &std::path::Path,
        device: usize,
        target: Option<String>,
        dtypes: &[String],
    ) -> Vec<BuildMeasured> {
        let Some(shape) = self.rubric.measure_shape else {
            return Vec::new();
        };
        let missing = self
            .child_env
            .iter()
            .find(|(k, _)| k == CUPTI_MISSING_ENV)
            .map(|(_, why)| why.clone());
        dtypes
            .iter()
            .map(|d| {
                let measured = match &missing {
                    Some(why) => Measured::Error(why.clone()),
                    None => self
                        .measure_one(dir, device, target.clone(), d, shape)
                        .unwrap_or_else(|e| Measured::Error(format!("{e:#}"))),
                };
                BuildMeasured {
                    build: d.clone(),
                    measured,
                }
            })
            .collect()
    }

    fn measure_one(
        &self,
        dir: &std::path::Path,
        device: usize,
        target: Option<String>,
        dtype: &str,
        shape: Shape,
    ) -> Result<Measured> {
        use anyhow::Context;
        let mdir = dir.join(format!("measure-{dtype}"));
        std::fs::create_dir_all(&mdir)
            .with_context(|| format!("cannot create {}", mdir.display()))?;
        let name = format!("cubin-{dtype}.bin");
        std::fs::copy(dir.join("compile").join(&name), mdir.join(&name))
            .with_context(|| format!("no {name} from the compile"))?;
        let mut job = super::job::Job::for_rubric(
            &self.rubric,
            super::job::Phase::Measure,
            "",
            Vec::new(),
            &[],
        );
        job.dtypes = vec![dtype.to_string()];
        job.target = target;
        job.measure = Some(MeasureJob {
            shape: [shape.m, shape.n, shape.k],
            seed: MeasureJob::SEED,
        });
        // The launch's own limit, and room for the GPU's start, the reference and CUPTI.
        let limit = std::time::Duration::from_secs(self.rubric.limits.launch_seconds + 120);
        let o = self.child(&mdir, &job, device, limit)?;
        Ok(read_measured(&mdir, &o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::step::Arch;

    fn step(n: u32) -> KernelSpec {
        KernelSpec::new(runner::steps::get(n).unwrap(), Arch::Hopper)
    }

    #[test]
    fn ptx_classes_match_an_opcode_and_its_qualifiers_in_any_order() {
        let c = |s: &str| PtxClass::parse(s).unwrap();
        let mma = "tcgen05.mma.cta_group::2.kind::f16";
        let commit = "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64";
        let load = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster";
        assert!(c("tcgen05.mma.cta_group::2").matches(mma));
        assert!(!c("tcgen05.mma.cta_group::1").matches(mma));
        assert!(!c("tcgen05.mma.cta_group").matches("tcgen05.mma.kind::f16"));
        assert!(c("tcgen05.commit.multicast").matches(commit));
        assert!(c("tcgen05.commit.cta_group::2.multicast").matches(commit));
        assert!(!c("tcgen05.commit.multicast")
            .matches("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.b64"));
        assert!(c("cp.async.bulk.tensor.multicast").matches(load));
        assert!(!c("cp.async.bulk.tensor.multicast")
            .matches("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"));
        // The first part is the instruction: a qualifier elsewhere is not it.
        assert!(!c("multicast").matches(load));
        for bad in [
            "",
            "UTCHMMA.2CTA",
            "tcgen05..mma",
            "tcgen05.mma.",
            "tcgen05.:2",
            "tcgen05 mma",
        ] {
            assert!(PtxClass::parse(bad).is_err(), "{bad:?}");
        }
        assert!(PtxClass::looks_like("tcgen05.mma") && !PtxClass::looks_like("UTCHMMA"));
    }

    #[test]
    fn the_simulators_counts_decide_as_cuptis_do() {
        // Step 3 at its measured shape: 4 cluster tiles of 8 k-blocks.
        let spec = KernelSpec::new(runner::steps::get(3).unwrap(), Arch::Blackwell);
        let k = spec.shape();
        let s = measure_shape(&spec).unwrap();
        let class = InstructionClass::Ptx(PtxClass::parse("tcgen05.commit.multicast").unwrap());
        let e = Executed {
            per: Unit::ClusterKBlock,
            at_least: 1,
            at_most: None,
        };
        let measured = |n: u64| {
            BuildMeasured {
            build: "f16".into(),
            measured: Measured::Ran {
                flags: Vec::new(),
                summary: "verified".into(),
                counts: Counts::Ptx(PtxCounts {
                    source: "the simulator (test)".into(),
                    per_opcode: vec![
                        ("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64".into(), n),
                        ("tcgen05.mma.cta_group::2.kind::f16".into(), 128),
                    ],
                }),
            },
        }
        };
        let v = check("multicast", &class, &e, &k, s, &[measured(36)]);
        assert_eq!(v.status, Status::Passed, "{v:?}");
        // Once per tile (k-block 0, or only the accumulator's commit): 4 of the 32 needed.
        let v = check("multicast", &class, &e, &k, s, &[measured(4)]);
        assert_eq!(v.status, Status::Failed, "{v:?}");
        assert_eq!(v.flags[0].name, "technique-not-executed");
        assert!(
            v.detail
                .contains("executed 4 tcgen05.commit.multicast (in 1 executed form(s))"),
            "{}",
            v.detail
        );
        // Never executed: the simulator lists no such form.
        let none =
            InstructionClass::Ptx(PtxClass::parse("cp.async.bulk.tensor.multicast").unwrap());
        let v = check("loads", &none, &e, &k, s, &[measured(36)]);
        assert!(
            v.detail.ends_with(": no such instruction executed"),
            "{}",
            v.detail
        );
        // CUPTI cannot count a PTX class: the grader's error, never a pass.
        let sass = BuildMeasured {
            build: "f16".into(),
            measured: Measured::Ran {
                flags: Vec::new(),
                summary: "verified".into(),
                counts: Counts::Sass(SassCounts {
                    source: "CUPTI (test)".into(),
                    pcs: Vec::new(),
                }),
            },
        };
        assert_eq!(check("x", &class, &e, &k, s, &[sass]).status, Status::Error);
    }

    #[test]
    fn units_count_the_shape_from_the_steps_tile_facts() {
        // Step 3's twin: clusters of two CTAs along M, each 128 x 256, 64-wide k-blocks.
        let spec = step(3);
        let k = spec.shape();
        let s = measure_shape(&spec).unwrap();
        assert_eq!((k.cluster, k.cluster_tile, k.tile_k), (2, (256, 256), 64));
        assert_eq!((s.m, s.n, s.k), (512, 512, 512));
        let n = |u: Unit| u.count(&k, s).unwrap();
        assert_eq!(n(Unit::Launch), 1);
        assert_eq!(n(Unit::ClusterTile), 4);
        assert_eq!(n(Unit::CtaTile), 8);
        assert_eq!(n(Unit::ClusterKBlock), 32);
        // Every CTA multicasts its half of B each k-block: 8 CTAs x 8 k-blocks.
        assert_eq!(n(Unit::CtaKBlock), 64);
        // C leaves in 64-row boxes as wide as the epilogue's sub-tile.
        let OutputArg::TensorMap { box_rows, box_cols } = k.output else {
            panic!("step 3 stores C with TMA");
        };
        assert_eq!(n(Unit::CBox), (512 / box_rows * 512 / box_cols) as u64);
        // Step 0's twin stores C with TMA too; step 1's? Whatever each says, a pointer output
        // has no box to count.
        let mut ptr = k;
        ptr.output = OutputArg::Pointer;
        assert!(Unit::CBox
            .count(&ptr, s)
            .unwrap_err()
            .to_string()
            .contains("through a pointer"));
        let e = Executed {
            per: Unit::CtaKBlock,
            at_least: 1,
            at_most: Some(2),
        };
        assert_eq!(e.bounds(&k, s).unwrap(), (64, Some(128)));
        assert!(Unit::parse("per-tile")
            .unwrap_err()
            .to_string()
            .contains("cta-k-block"));
    }

    fn pc(op: &str, guard: Option<&str>, warp: u64, threads: u64, pred_on: u64) -> PcCount {
        PcCount {
            function: "gemm_kernel".into(),
            offset: 0x100,
            op: op.into(),
            guard: guard.map(str::to_string),
            warp,
            threads,
            pred_on,
        }
    }

    #[test]
    fn a_guarded_instruction_counts_only_the_executions_its_guard_allowed() {
        // Unguarded: every warp-execution did the work.
        assert_eq!(pc("UTMALDG", None, 64, 64, 64).proven(), 64);
        // An elected lane, guard always true: exact.
        assert_eq!(pc("UTMALDG", Some("P0"), 64, 64, 64).proven(), 64);
        // Dead code behind a false (uniform) guard: reached 64 times, done none.
        assert_eq!(pc("UTMALDG", Some("UP0"), 64, 64, 0).proven(), 0);
        assert_eq!(pc("UTMALDG", Some("UP0"), 64, 2048, 0).proven(), 0);
        // One lane active, true for k-block 0 of 8 only: 8 of 64.
        assert_eq!(pc("UTMALDG", Some("P1"), 64, 64, 8).proven(), 8);
        // Whole warps active, guard true in 8 of 64: exact again (every false one had 32).
        assert_eq!(pc("UTMALDG", Some("P1"), 64, 2048, 256).proven(), 8);
        // Mixed activity: the fewest the counts allow.
        assert_eq!(pc("UTMALDG", Some("P1"), 64, 95, 32).proven(), 1);
        assert_eq!(pc("UTMALDG", Some("P1"), 64, 95, 32).possible(), 32);
        // Counts that cannot all be true prove nothing.
        let bad = pc("UTMALDG", Some("P1"), 64, 10, 64);
        assert!(!bad.consistent());
        assert_eq!(bad.proven(), 0);
    }

    fn ran(pcs: Vec<PcCount>) -> Measured {
        Measured::Ran {
            flags: Vec::new(),
            summary: "every element verified".into(),
            counts: Counts::Sass(SassCounts {
                source: "CUPTI SASS metrics (test)".into(),
                pcs,
            }),
        }
    }

    fn verdict(pcs: Vec<PcCount>) -> ExecutedVerdict {
        let spec = step(3);
        let k = spec.shape();
        let s = measure_shape(&spec).unwrap();
        let class = InstructionClass::Sass(Pattern::parse("UTMALDG.MULTICAST").unwrap());
        let e = Executed {
            per: Unit::CtaKBlock,
            at_least: 1,
            at_most: None,
        };
        check(
            "UTMALDG.MULTICAST (B shared)",
            &class,
            &e,
            &k,
            s,
            &[BuildMeasured {
                build: "f16".into(),
                measured: pcs_or(pcs),
            }],
        )
    }

    fn pcs_or(pcs: Vec<PcCount>) -> Measured {
        ran(pcs)
    }

    #[test]
    fn the_decision_from_counts_catches_dead_code_and_k_block_zero_only() {
        let load = |warp, pred_on| {
            vec![
                pc("UTMALDG.2D", Some("P0"), 64, 64, 64),
                pc("UTMALDG.2D.MULTICAST", Some("P0"), warp, warp, pred_on),
                pc("HGMMA.64x256x16.F32", None, 2048, 65536, 65536),
            ]
        };
        // Stock: each of 8 CTAs multicasts its half of B for each of 8 k-blocks.
        let v = verdict(load(64, 64));
        assert_eq!(v.status, Status::Passed, "{v:?}");
        assert!(
            v.detail.contains("executed 64 in the f16 build"),
            "{}",
            v.detail
        );
        assert!(v.detail.contains("at least 64"), "{}", v.detail);
        // Behind `if (M < 0)`, compiled as a branch: never reached.
        let v = verdict(load(0, 0));
        assert_eq!(v.status, Status::Failed);
        assert_eq!(v.flags[0].name, "technique-not-executed");
        assert!(v.detail.contains("never ran"), "{}", v.detail);
        // ... compiled as a guard: reached, never done.
        let v = verdict(load(64, 0));
        assert_eq!(v.status, Status::Failed);
        // k-block 0 only: 8 of the 64 needed (a branch, or a guard).
        for pcs in [load(8, 8), load(64, 8)] {
            let v = verdict(pcs);
            assert_eq!(v.status, Status::Failed, "{v:?}");
            assert!(
                v.detail.contains("executed 8 UTMALDG.MULTICAST"),
                "{}",
                v.detail
            );
        }
        // Not in the kernel at all.
        let v = verdict(vec![pc("UTMALDG.2D", None, 128, 128, 128)]);
        assert!(v.detail.contains("no such instruction"), "{}", v.detail);
        // Split over two instructions (two call sites): they add up.
        let two = vec![
            pc("UTMALDG.2D.MULTICAST", None, 32, 32, 32),
            pc("UTMALDG.2D.MULTICAST", None, 32, 32, 32),
        ];
        assert_eq!(verdict(two).status, Status::Passed);
    }

    #[test]
    fn a_wrong_or_unmeasured_launch_proves_nothing() {
        let spec = step(3);
        let (k, s) = (spec.shape(), measure_shape(&spec).unwrap());
        let class = InstructionClass::Sass(Pattern::parse("UTMALDG.MULTICAST").unwrap());
        let e = Executed {
            per: Unit::Launch,
            at_least: 1,
            at_most: None,
        };
        let one = |m: Measured| {
            check(
                "multicast",
                &class,
                &e,
                &k,
                s,
                &[BuildMeasured {
                    build: "f16".into(),
                    measured: m,
                }],
            )
        };
        let wrong = Measured::Ran {
            flags: vec![Flag::new("wrong-result", "C[0][0] = 1")],
            summary: "1 wrong".into(),
            counts: Counts::Sass(SassCounts {
                source: "test".into(),
                pcs: vec![pc("UTMALDG.MULTICAST", None, 64, 64, 64)],
            }),
        };
        let v = one(wrong);
        assert_eq!(v.status, Status::Failed);
        assert_eq!(v.flags[0].name, "wrong-result");
        let v = one(Measured::Error(
            "no usable CUPTI library: libcupti.so not found".into(),
        ));
        assert_eq!(v.status, Status::Error);
        assert!(
            v.detail.contains("could not be counted: no usable CUPTI"),
            "{}",
            v.detail
        );
        // A source that cannot count the class says so.
        let ptx = InstructionClass::Ptx(PtxClass::parse("tcgen05.mma.cta_group::2").unwrap());
        let v = check(
            "2-CTA MMA",
            &ptx,
            &e,
            &k,
            s,
            &[BuildMeasured {
                build: "f16".into(),
                measured: ran(vec![]),
            }],
        );
        assert_eq!(v.status, Status::Error);
        assert!(
            v.detail.contains("cannot count tcgen05.mma"),
            "{}",
            v.detail
        );
        // Too many: an at_most is checked on the most the counts allow.
        let capped = Executed {
            per: Unit::CtaKBlock,
            at_least: 1,
            at_most: Some(1),
        };
        let v = check(
            "multicast",
            &class,
            &capped,
            &k,
            s,
            &[BuildMeasured {
                build: "f16".into(),
                measured: ran(vec![pc("UTMALDG.MULTICAST", None, 128, 128, 128)]),
            }],
        );
        assert_eq!(v.flags[0].name, "technique-forbidden");
    }

    /// The map from a measured instruction's (function, offset) to its opcode, on the cubin of
    /// step 3's twin compiled here (NVRTC needs no GPU) and disassembled by the grader's
    /// nvdisasm: every instruction of gemm_kernel at its own offset, and the multicast loads the
    /// rubric counts among them; the dead-code cheat keeps them in the binary (so only an
    /// executed count tells it from the stock kernel).
    #[test]
    fn the_offset_map_of_a_cubin_compiled_here_names_the_multicast_loads() {
        let tk = common::toolkit::find_or_install().expect("a toolkit");
        let nvdisasm = tk.nvdisasm().expect("nvdisasm");
        let spec = step(3);
        let suite = super::super::selftest::Suite::load().unwrap();
        let dead = suite
            .cheats()
            .iter()
            .find(|c| c.name == "multicast-dead-code")
            .unwrap();
        let secret = std::path::Path::new("/nonexistent");
        let dir = std::env::temp_dir().join(format!("executed-map-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let multicast = Pattern::parse("UTMALDG.MULTICAST").unwrap();
        // CUPTI names a measured instruction's cubin by its CRC: the grader's CUPTI (found, or
        // the pinned wheel installed) loads without a GPU and tells the two builds apart.
        let cupti = common::cupti::Cupti::open(&common::cupti::find_or_install().unwrap()).unwrap();
        assert!(cupti.api_version >= 24, "{}", cupti.api_version);
        let mut crcs = Vec::new();
        for (name, text) in [
            (
                "stock",
                spec.step
                    .info()
                    .kernel(common::step::Arch::Hopper)
                    .text
                    .to_string(),
            ),
            ("dead", suite.kernel(dead, secret).unwrap()),
        ] {
            let src = common::compile::KernelSource {
                path: "kernel.cu".into(),
                text,
            };
            let c = common::compile::compile(
                &src,
                common::Target::Sm90a,
                &spec.defines(common::Dtype::F16),
            )
            .unwrap();
            let file = dir.join(format!("{name}.cubin"));
            std::fs::write(&file, &c.cubin).unwrap();
            let crc = cupti.cubin_crc(&c.cubin).unwrap();
            assert_eq!(
                crc,
                cupti.cubin_crc(&c.cubin).unwrap(),
                "{name}: the same CRC twice"
            );
            crcs.push(crc);
            let listing = common::sass::listing_of(&nvdisasm, &file).unwrap();
            let map = common::sass::instructions_of_kernel(&listing, "gemm_kernel").unwrap();
            // Every instruction once, 16 bytes apart, at the offsets nvdisasm printed.
            let mut places: Vec<(&str, u32)> = map
                .iter()
                .map(|i| (i.function.as_str(), i.offset))
                .collect();
            places.sort();
            places.dedup();
            assert_eq!(places.len(), map.len(), "{name}: an offset twice");
            assert!(map.iter().all(|i| i.offset % 16 == 0), "{name}");
            // The same instructions the histogram of the static check counts.
            let hist = common::sass::Sass::of_kernel(&listing, "gemm_kernel")
                .unwrap()
                .histogram;
            assert_eq!(map.len(), hist.values().sum::<usize>(), "{name}");
            let loads: Vec<&common::sass::Instruction> =
                map.iter().filter(|i| multicast.matches(&i.op)).collect();
            assert!(!loads.is_empty(), "{name}: no multicast load in the binary");
            assert_eq!(loads.len(), multicast.count(&hist), "{name}");
            for l in &loads {
                let line = format!("/*{:04x}*/", l.offset);
                assert!(
                    listing
                        .lines()
                        .any(|x| x.trim_start().starts_with(&line) && x.contains(&l.op)),
                    "{name}: {} not at {line}",
                    l.op
                );
            }
        }
        assert_ne!(crcs[0], crcs[1], "two different kernels, one CRC");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
