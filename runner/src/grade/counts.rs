//! What a measured launch counted, and the instruction classes the counts are matched against:
//! CUPTI's counts per instruction of the launched kernel ([`SassCounts`]) or the simulator's per
//! PTX opcode ([`PtxCounts`]), both answering through [`CountSource`]. This is the measuring
//! child's report ([`Measured`]) as the grader reads it back; what a count must be is decided in
//! [`super::executed`].

use super::vocab::Flag;
use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `OPCODE.MOD.MOD`: an opcode and modifiers an instruction must carry, in any order, among
/// others (`UTMALDG.MULTICAST` matches `UTMALDG.2D.MULTICAST`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    pub opcode: String,
    pub modifiers: Vec<String>,
}

impl Pattern {
    pub fn parse(s: &str) -> Result<Pattern> {
        let bad = || {
            anyhow::anyhow!(
                "{s:?}: write an upper-case SASS opcode and, if needed, modifiers it must carry, joined by dots, e.g. \"UTCHMMA.2CTA\" or \"UTMALDG.MULTICAST\""
            )
        };
        let mut parts = s.trim().split('.');
        let opcode = parts.next().unwrap_or("");
        let opcode_ok = opcode.starts_with(|c: char| c.is_ascii_uppercase())
            && opcode
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !opcode_ok {
            return Err(bad());
        }
        let modifiers: Vec<String> = parts.map(str::to_string).collect();
        if modifiers
            .iter()
            .any(|m| m.is_empty() || !m.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        {
            return Err(bad());
        }
        Ok(Pattern {
            opcode: opcode.to_string(),
            modifiers,
        })
    }

    /// Whether the histogram key `op` (`UTMALDG.2D.MULTICAST`) is an instance of this pattern.
    pub fn matches(&self, op: &str) -> bool {
        let mut parts = op.split('.');
        if parts.next() != Some(self.opcode.as_str()) {
            return false;
        }
        let mods: Vec<&str> = parts.collect();
        self.modifiers.iter().all(|m| mods.contains(&m.as_str()))
    }

    pub fn count(&self, histogram: &BTreeMap<String, usize>) -> usize {
        histogram
            .iter()
            .filter(|(op, _)| self.matches(op))
            .map(|(_, n)| n)
            .sum()
    }

    /// The forms of the same opcode the kernel does have (`UTCHMMA x4` where `UTCHMMA.2CTA` is
    /// required): what a student needs to see to know what to change.
    pub fn near_misses(&self, histogram: &BTreeMap<String, usize>) -> Vec<String> {
        histogram
            .iter()
            .filter(|(op, _)| {
                !self.matches(op) && op.split('.').next() == Some(self.opcode.as_str())
            })
            .map(|(op, n)| format!("{op} x{n}"))
            .collect()
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.opcode)?;
        for m in &self.modifiers {
            write!(f, ".{m}")?;
        }
        Ok(())
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
    /// The graded launches these counts come from, each with its technique instructions
    /// attributed to their units ([`LaunchUnits`]): a per-unit requirement is decided on these,
    /// launch by launch (`super::executed`).
    #[serde(default)]
    pub launches: Vec<LaunchUnits>,
}

/// One graded launch on the simulator: its shape, and each technique instruction that did the
/// technique's work, attributed to the cluster that issued it, the cluster tile and the k-block
/// (`sim::attrib`, turned into units with the step's tile facts in `super::simulated`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LaunchUnits {
    /// The test and input set (and schedule) of the launch, for messages.
    pub test: String,
    /// M, N, K.
    pub shape: [usize; 3],
    /// Warp-level executed counts per opcode in this launch.
    pub per_opcode: Vec<(String, u64)>,
    /// The (cluster, cluster tile) pairs the launch multiplied: a tile is a cluster's when it
    /// issued an MMA whose A and B came from that tile's rows and columns.
    pub processed: Vec<(u32, [u32; 2])>,
    /// Attributed executions.
    pub records: Vec<UnitRecord>,
}

/// `n` executions of `op` by cluster `cluster` for cluster tile `tile`, k-block `kb`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct UnitRecord {
    pub op: String,
    pub cluster: u32,
    pub tile: [u32; 2],
    pub kb: u32,
    pub n: u64,
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
/// same way from both ([`super::executed::check`]).
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
