//! Proof the technique ran: a rubric's `[[requirements]]` on the instructions of the launched
//! kernel (its SASS). Passing the tests numerically shows the answer is right; it does not show
//! the step's idea is in the kernel (a step-0 kernel is a correct step-3 answer). A requirement
//! names an instruction the technique cannot do without (`UTCHMMA.2CTA`: the 2-CTA tcgen05 MMA;
//! `UTMALDG.MULTICAST`: a TMA load multicast to the cluster) and is worth points of its own.
//!
//! The compile child disassembles the native build it compiled (nvdisasm reads the hostile
//! cubin inside the confinement) and reports the instruction histogram of `gemm_kernel` and the
//! functions it calls ([`common::sass::Sass::of_kernel`]); the grader checks the requirements
//! against it here. No GPU is needed, so `--compile-only` checks them too.
//!
//! A `trace = "fact"` requirement ([`RequirementKind::Trace`]) is checked on Hopper by the run
//! child's one traced launch ([`super::trace_facts::evaluate`]) and decided here the same way;
//! compiled only, it is skipped. Every kind is decided by [`Requirement::check`] on the
//! [`Evidence`] the grading has gathered, and scored by [`super::scoring`].

use super::counts::{BuildMeasured, InstructionClass, Pattern, PtxClass};
use super::executed::{Executed, Unit};
use super::protocol::{ENTRY, NVDISASM_ENV};
use super::vocab::{FactResult, Flag, Status};
use anyhow::{bail, Result};
use common::step::KernelShape;
use common::trace_facts::Fact;
use common::Shape;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A requirement as written in the rubric.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequirementSpec {
    pub name: String,
    pub points: f64,
    /// The instruction pattern ([`Pattern`]); exactly one of `executed`, `sass` and `trace` is
    /// given. `sass` alone is the old form: in the binary, and executed at least `min` times.
    #[serde(default)]
    pub sass: Option<String>,
    /// An instruction class whose executions are counted ([`super::executed`]).
    #[serde(default)]
    pub executed: Option<String>,
    /// What `at_least` and `at_most` count per ([`super::executed::Unit`]; default "launch").
    #[serde(default)]
    pub per: Option<String>,
    /// Fewest executions per `per` (default 1).
    #[serde(default)]
    pub at_least: Option<u64>,
    /// Most executions per `per`.
    #[serde(default)]
    pub at_most: Option<u64>,
    /// A fact of the warps' trace records, on Hopper ([`common::trace_facts::Fact`]).
    #[serde(default)]
    pub trace: Option<String>,
    /// At least this many in the kernel (default 1; 0 when only `max` is given).
    pub min: Option<usize>,
    /// At most this many (`max = 0` forbids the instruction).
    pub max: Option<usize>,
    /// What the instruction shows, for the student's message.
    #[serde(default)]
    pub why: String,
}

/// A requirement, checked and resolved: what every kind shares, and what its kind asks.
#[derive(Debug, Clone, Serialize)]
pub struct Requirement {
    pub name: String,
    pub points: f64,
    /// What it shows, for the student's message.
    pub why: String,
    pub kind: RequirementKind,
}

/// What a requirement asks of the kernel. A new kind is a variant here and its arm in
/// [`Requirement::check`] (with the [`Evidence`] it is decided on).
#[derive(Debug, Clone, Serialize)]
pub enum RequirementKind {
    /// An instruction class in the native binary and, unless it is a ban, executed in the
    /// measured launch (`executed = ...`, or the old `sass = ...`).
    Instructions(Instructions),
    /// A fact of the warps' trace records (`trace = ...`, Hopper), from the one traced launch.
    Trace(#[serde(serialize_with = "fact_name")] Fact),
}

/// An instruction requirement, resolved.
#[derive(Debug, Clone, Serialize)]
pub struct Instructions {
    #[serde(serialize_with = "as_text")]
    pub pattern: Pattern,
    pub min: usize,
    pub max: Option<usize>,
    /// How often it must execute in the measured launch; `None`: a static check only (a ban:
    /// an instruction absent from the binary never executes).
    pub executed: Option<Executed>,
    /// A PTX instruction class (`executed = "tcgen05.mma.cta_group::2"`), counted by the
    /// simulator on a Blackwell kernel's sm_100a PTX; `pattern` then only names it.
    #[serde(skip)]
    pub ptx: Option<PtxClass>,
}

impl Instructions {
    /// What the requirement counts.
    pub fn class(&self) -> InstructionClass {
        match &self.ptx {
            Some(p) => InstructionClass::Ptx(p.clone()),
            None => InstructionClass::Sass(self.pattern.clone()),
        }
    }
}

fn as_text<S: serde::Serializer>(p: &Pattern, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&p.to_string())
}

fn fact_name<S: serde::Serializer>(f: &Fact, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(f.name())
}

impl RequirementSpec {
    /// The requirement, resolved: one of `executed`, `sass` and `trace` says its kind. Trace
    /// facts are recorded on Hopper only (`hopper`: the rubric's architecture).
    pub fn resolve(&self, hopper: bool) -> Result<Requirement> {
        self.check_common()?;
        let kind = if let Some(trace) = &self.trace {
            RequirementKind::Trace(self.trace_fact(trace, hopper)?)
        } else if let Some(class) = &self.executed {
            RequirementKind::Instructions(self.executed_class(class)?)
        } else if let Some(sass) = &self.sass {
            RequirementKind::Instructions(self.in_binary(sass)?)
        } else {
            bail!("give executed = \"OPCODE.MOD\" (or sass = ..., or trace = \"fact\")");
        };
        Ok(Requirement {
            name: self.name.clone(),
            points: self.points,
            why: self.why.trim().to_string(),
            kind,
        })
    }

    /// Name, points and why: what every kind of requirement shares.
    fn check_common(&self) -> Result<()> {
        super::vocab::check_name(&self.name)?;
        if !(self.points.is_finite() && self.points >= 0.0) {
            bail!("points must be a non-negative number");
        }
        if self.why.len() > 200 || self.why.chars().any(|c| c.is_control()) {
            bail!("why must be one line of at most 200 characters");
        }
        Ok(())
    }

    /// `executed = "CLASS"`: a SASS pattern or a PTX class, executed `at_least` to `at_most`
    /// times `per` unit.
    fn executed_class(&self, class: &str) -> Result<Instructions> {
        if self.sass.is_some() {
            bail!("give one of executed, sass or trace, not several: write two requirements");
        }
        if self.min.is_some() || self.max.is_some() {
            bail!("min and max count the binary's instructions (sass = ...): an executed requirement counts with at_least and at_most");
        }
        let per = Unit::parse(self.per.as_deref().unwrap_or("launch"))?;
        let at_least = self.at_least.unwrap_or(1);
        if let Some(m) = self.at_most {
            if at_least > m {
                bail!("at_least ({at_least}) is above at_most ({m}): no kernel could meet it");
            }
        } else if at_least == 0 {
            bail!("at_least = 0 without at_most requires nothing");
        }
        let ptx = PtxClass::looks_like(class)
            .then(|| PtxClass::parse(class))
            .transpose()?;
        Ok(Instructions {
            pattern: match &ptx {
                Some(p) => Pattern {
                    opcode: p.to_string(),
                    modifiers: Vec::new(),
                },
                None => Pattern::parse(class)?,
            },
            ptx,
            // In the binary at least once, or it cannot execute (at_most alone: anything).
            min: usize::from(at_least > 0),
            max: None,
            executed: Some(Executed {
                per,
                at_least,
                at_most: self.at_most,
            }),
        })
    }

    /// The old form, `sass = "PATTERN"`: `min` to `max` in the binary, and executed at least
    /// `min` times in the launch.
    fn in_binary(&self, sass: &str) -> Result<Instructions> {
        if self.per.is_some() || self.at_least.is_some() || self.at_most.is_some() {
            bail!("per, at_least and at_most belong to executed = ...: sass = ... counts the binary with min and max");
        }
        let pattern = Pattern::parse(sass)?;
        let min = self
            .min
            .unwrap_or(if self.max.is_some() && self.min.is_none() {
                0
            } else {
                1
            });
        if let Some(max) = self.max {
            if min > max {
                bail!("min ({min}) is above max ({max}): no kernel could meet it");
            }
        } else if min == 0 {
            bail!("min = 0 without max requires nothing: give min >= 1, or max");
        }
        Ok(Instructions {
            pattern,
            min,
            max: self.max,
            // Presence in the binary proves nothing: the old form also needs `min` executions.
            executed: (min > 0).then_some(Executed {
                per: Unit::Launch,
                at_least: min as u64,
                at_most: None,
            }),
            ptx: None,
        })
    }

    /// `trace = "fact"`: a fact has no count, and needs a Hopper rubric.
    fn trace_fact(&self, trace: &str, hopper: bool) -> Result<Fact> {
        if self.sass.is_some() || self.executed.is_some() {
            bail!("give one of executed, sass or trace, not several: write two requirements");
        }
        if self.min.is_some()
            || self.max.is_some()
            || self.per.is_some()
            || self.at_least.is_some()
            || self.at_most.is_some()
        {
            bail!(
                "min, max, per, at_least and at_most count instructions: a trace fact holds or not"
            );
        }
        if !hopper {
            bail!("trace facts are checked on Hopper (sm_90a) rubrics only");
        }
        if self.points != 0.0 {
            bail!("a trace fact is read from records the kernel writes itself, which a kernel can forge: give it points = 0 (feedback for the student) and the points to an executed = ... requirement, which the grader measures");
        }
        Fact::parse(trace)
    }
}

/// The instructions of one native build, as the compile child found them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildSass {
    /// The build (`f16`, `bf16 (native sm_100a)`).
    pub build: String,
    /// Opcode with modifiers -> count, in the launched kernel; or why it could not be read.
    pub histogram: Result<BTreeMap<String, usize>, String>,
}

/// What the grading has produced so far that the requirements are decided on. Each part comes
/// from a child the grader ran, never from the submission's files; a part not (yet) there
/// leaves the requirements that need it as they are.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    /// The compile child's disassembly of each native build (once the kernel compiled).
    pub sass: Option<Vec<BuildSass>>,
    /// The executed counts of the measured launches.
    pub executions: Executions,
    /// The traced launch's facts.
    pub facts: Option<Facts>,
}

/// The executed counts an instruction requirement's executed part is decided on.
#[derive(Debug, Clone, Default)]
pub enum Executions {
    /// Not measured (yet): a requirement the binary meets waits for them.
    #[default]
    NotYet,
    /// Not measured, and why (compiled only; the native code does not run on this GPU): the
    /// requirement counts neither way, and is never awarded.
    Skipped(String),
    /// The measured launch of each build, at `shape`, of a kernel with these tile facts.
    Measured {
        builds: Vec<BuildMeasured>,
        kernel: KernelShape,
        shape: Shape,
    },
}

/// The facts a run child found in the traced launch's records, and the grader's account of why
/// a fact did not come back (`missing`: for every fact not in `found`).
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub found: Vec<FactResult>,
    pub missing: Option<FactResult>,
}

/// The outcome of one requirement: its status, the line the student sees, and its flags.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub status: Status,
    pub detail: String,
    pub flags: Vec<Flag>,
}

/// The outcome of an instruction requirement's static part, on the binary alone.
#[derive(Debug, Clone, PartialEq)]
pub struct BinaryVerdict {
    pub passed: bool,
    /// The grader could not read the SASS: its own failure, not the student's.
    pub grader_error: bool,
    pub detail: String,
    pub flag: Option<Flag>,
}

impl Requirement {
    /// `UTCHMMA.2CTA (the 2-CTA tcgen05 MMA)`, `dedicated-store-warp (the epilogue's own warp)`.
    fn describe(&self) -> String {
        let what = match &self.kind {
            RequirementKind::Instructions(q) => q.pattern.to_string(),
            RequirementKind::Trace(fact) => fact.name().to_string(),
        };
        if self.why.is_empty() {
            what
        } else {
            format!("{what} ({})", self.why)
        }
    }

    /// The instruction requirement's part, if this is one.
    pub fn instructions(&self) -> Option<&Instructions> {
        match &self.kind {
            RequirementKind::Instructions(q) => Some(q),
            RequirementKind::Trace(_) => None,
        }
    }

    /// The trace fact, if this is a trace requirement.
    pub fn fact(&self) -> Option<Fact> {
        match &self.kind {
            RequirementKind::Trace(f) => Some(*f),
            RequirementKind::Instructions(_) => None,
        }
    }

    /// Whether the binary in `sass` meets the requirement's static part and leaves its executed
    /// part to the measured launch (a PTX class always does: the binary holds no PTX).
    pub fn awaits_execution(&self, sass: &[BuildSass]) -> bool {
        self.instructions().is_some_and(|q| {
            q.ptx.is_some() || (q.executed.is_some() && self.in_binary(q, sass).passed)
        })
    }

    /// The requirement decided on `evidence`; `None` while what it needs is not there.
    pub fn check(&self, evidence: &Evidence) -> Option<Verdict> {
        match &self.kind {
            RequirementKind::Instructions(q) => self.check_instructions(q, evidence),
            RequirementKind::Trace(fact) => {
                let facts = evidence.facts.as_ref()?;
                let res = facts
                    .found
                    .iter()
                    .find(|f| f.fact == fact.name())
                    .or(facts.missing.as_ref())?;
                Some(self.check_fact(*fact, res))
            }
        }
    }

    /// The static part against the SASS the compile child reported (a static failure is final;
    /// a ban that holds is passed), then the executed part against the measured launches.
    fn check_instructions(&self, q: &Instructions, evidence: &Evidence) -> Option<Verdict> {
        let sass = evidence.sass.as_ref()?;
        let (waiting, flags) = if q.ptx.is_some() {
            // A PTX class: no binary to look in (the PTX is the source's own translation);
            // only the simulator's executed count decides it.
            ("not yet measured".to_string(), Vec::new())
        } else {
            let v = self.in_binary(q, sass);
            if !(v.passed && q.executed.is_some()) {
                return Some(Verdict {
                    status: if v.passed {
                        Status::Passed
                    } else if v.grader_error {
                        Status::Error
                    } else {
                        Status::Failed
                    },
                    detail: v.detail,
                    flags: v.flag.into_iter().collect(),
                });
            }
            (
                format!("in the binary ({}); not yet measured", v.detail),
                v.flag.into_iter().collect(),
            )
        };
        Some(match (&evidence.executions, &q.executed) {
            (Executions::Skipped(why), _) => Verdict {
                status: Status::Skipped,
                detail: format!("not measured: {why}"),
                flags: Vec::new(),
            },
            (
                Executions::Measured {
                    builds,
                    kernel,
                    shape,
                },
                Some(e),
            ) => {
                let class = q.class();
                let what = if self.why.is_empty() {
                    class.to_string()
                } else {
                    format!("{class} ({})", self.why)
                };
                let v = super::executed::check(&what, &class, e, kernel, *shape, builds);
                Verdict {
                    status: v.status,
                    detail: v.detail,
                    flags: v.flags,
                }
            }
            _ => Verdict {
                status: Status::Error,
                detail: waiting,
                flags,
            },
        })
    }

    /// The outcome of the run child's result for this requirement's fact (or, where none came
    /// back, the grader's account of why).
    fn check_fact(&self, fact: Fact, res: &FactResult) -> Verdict {
        let (detail, flags) = match res.status {
            Status::Passed => (format!("{}: {}", self.describe(), res.detail), Vec::new()),
            Status::Error | Status::Skipped => (
                format!("{} not checked: {}", self.describe(), res.detail),
                res.flags.clone(),
            ),
            _ => (
                format!("{} not shown: {}", self.describe(), res.detail),
                // The traced launch's own flags (a wrong output, a write out of bounds) name
                // what went wrong; a launch that was right but lacks the fact is this flag.
                if res.flags.is_empty() {
                    vec![Flag::new(
                        "technique-missing",
                        format!("the trace does not show {}", fact.name()),
                    )]
                } else {
                    res.flags.clone()
                },
            ),
        };
        Verdict {
            status: res.status,
            detail,
            flags,
        }
    }

    /// The static part on every build: it holds only if it holds in each.
    pub fn in_binary(&self, q: &Instructions, builds: &[BuildSass]) -> BinaryVerdict {
        if builds.is_empty() {
            return BinaryVerdict {
                passed: false,
                grader_error: true,
                detail: "not checked: the compile child reported no SASS".into(),
                flag: Some(Flag::new("grader-error", "no SASS to check")),
            };
        }
        let mut found = Vec::new();
        for b in builds {
            let h = match &b.histogram {
                Ok(h) => h,
                Err(e) => {
                    return BinaryVerdict {
                        passed: false,
                        grader_error: true,
                        detail: format!(
                            "not checked: the SASS of the {} build could not be read: {e}",
                            b.build
                        ),
                        flag: Some(Flag::new("grader-error", "the SASS could not be read")),
                    }
                }
            };
            let n = q.pattern.count(h);
            let ok = n >= q.min && q.max.is_none_or(|m| n <= m);
            if !ok {
                let (name, detail) = if n < q.min {
                    let near = q.pattern.near_misses(h);
                    let instead = if near.is_empty() {
                        String::new()
                    } else {
                        format!("; it has {} instead", near.join(", "))
                    };
                    (
                        "technique-missing",
                        format!(
                            "missing {}: the {} build's kernel has {n} {}, the rubric requires {}{instead}",
                            self.describe(),
                            b.build,
                            q.pattern,
                            q.bounds()
                        ),
                    )
                } else {
                    (
                        "technique-forbidden",
                        format!(
                            "{}: the {} build's kernel has {n} {}, the rubric allows {}",
                            self.describe(),
                            b.build,
                            q.pattern,
                            q.bounds()
                        ),
                    )
                };
                return BinaryVerdict {
                    passed: false,
                    grader_error: false,
                    flag: Some(Flag::new(
                        name,
                        format!("{n} {} in the {} build's kernel", q.pattern, b.build),
                    )),
                    detail,
                };
            }
            found.push(format!("{n} in the {} build", b.build));
        }
        BinaryVerdict {
            passed: true,
            grader_error: false,
            detail: format!(
                "{}: {} ({} required)",
                self.describe(),
                found.join(", "),
                q.bounds()
            ),
            flag: None,
        }
    }
}

impl Instructions {
    fn bounds(&self) -> String {
        match self.max {
            Some(0) => "none".into(),
            Some(max) if max == self.min => format!("exactly {max}"),
            Some(max) if self.min > 0 => format!("{} to {max}", self.min),
            Some(max) => format!("at most {max}"),
            None => format!("at least {}", self.min),
        }
    }
}

/// In the compile child: the instruction histogram of the launched kernel in the cubin file
/// `cubin`, disassembled with the nvdisasm the grader named ([`NVDISASM_ENV`]); an error as the
/// one line the report shows.
pub fn kernel_histogram(cubin: &std::path::Path) -> Result<BTreeMap<String, usize>, String> {
    let nvdisasm = std::env::var_os(NVDISASM_ENV)
        .ok_or_else(|| format!("internal: the grader named no nvdisasm ({NVDISASM_ENV})"))?;
    common::sass::listing_of(std::path::Path::new(&nvdisasm), cubin)
        .and_then(|listing| common::sass::Sass::of_kernel(&listing, ENTRY))
        .map(|s| s.histogram)
        .map_err(|e| {
            let line = format!("{e:#}");
            line.lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(300)
                .collect()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn patterns_match_modifiers_in_any_order() {
        let p = Pattern::parse("UTMALDG.MULTICAST").unwrap();
        assert!(p.matches("UTMALDG.2D.MULTICAST"));
        assert!(!p.matches("UTMALDG.2D"));
        assert!(!p.matches("UTMALDGX.MULTICAST"));
        let hist = h(&[
            ("UTMALDG.2D", 2),
            ("UTMALDG.2D.MULTICAST", 1),
            ("HGMMA.64x256x16.F32", 4),
        ]);
        assert_eq!(p.count(&hist), 1);
        assert_eq!(Pattern::parse("HGMMA.F32").unwrap().count(&hist), 4);
        assert_eq!(Pattern::parse("HGMMA.F16").unwrap().count(&hist), 0);
        assert_eq!(Pattern::parse("UTMALDG").unwrap().count(&hist), 3);
        assert_eq!(p.to_string(), "UTMALDG.MULTICAST");
        for bad in [
            "",
            "utchmma",
            "UTCHMMA.",
            "UTCHMMA..2CTA",
            ".2CTA",
            "UTC HMMA",
            "UTCHMMA.2-CTA",
        ] {
            let e = Pattern::parse(bad).unwrap_err().to_string();
            assert!(e.contains("upper-case SASS opcode"), "{bad}: {e}");
        }
    }

    fn req(sass: &str, min: Option<usize>, max: Option<usize>) -> Requirement {
        RequirementSpec {
            name: "r".into(),
            points: 10.0,
            sass: Some(sass.into()),
            trace: None,
            executed: None,
            per: None,
            at_least: None,
            at_most: None,
            min,
            max,
            why: "the 2-CTA MMA".into(),
        }
        .resolve(true)
        .unwrap()
    }

    /// The static part of an instruction requirement, on the binary alone.
    fn check(r: &Requirement, builds: &[BuildSass]) -> BinaryVerdict {
        r.in_binary(r.instructions().unwrap(), builds)
    }

    #[test]
    fn a_missing_instruction_is_named_with_what_the_kernel_has_instead() {
        let r = req("UTCHMMA.2CTA", None, None);
        let builds = |hist| {
            vec![
                BuildSass {
                    build: "f16".into(),
                    histogram: Ok(h(&[("UTCHMMA.2CTA", 4)])),
                },
                BuildSass {
                    build: "bf16".into(),
                    histogram: Ok(hist),
                },
            ]
        };
        let v = check(&r, &builds(h(&[("UTCHMMA.2CTA", 4)])));
        assert!(v.passed, "{v:?}");
        assert!(v.detail.contains("4 in the f16 build, 4 in the bf16 build"));
        let v = check(&r, &builds(h(&[("UTCHMMA", 4)])));
        assert!(!v.passed && !v.grader_error);
        assert_eq!(
            v.detail,
            "missing UTCHMMA.2CTA (the 2-CTA MMA): the bf16 build's kernel has 0 UTCHMMA.2CTA, the rubric requires at least 1; it has UTCHMMA x4 instead"
        );
        assert_eq!(v.flag.unwrap().name, "technique-missing");
        let forbid = req("LDL", None, Some(0));
        let v = check(&forbid, &builds(h(&[("LDL", 2)])));
        assert_eq!(v.flag.unwrap().name, "technique-forbidden");
        assert!(v.detail.contains("allows none"), "{}", v.detail);
        let unreadable = vec![BuildSass {
            build: "f16".into(),
            histogram: Err("nvdisasm failed".into()),
        }];
        let v = check(&r, &unreadable);
        assert!(!v.passed && v.grader_error);
    }

    #[test]
    fn bounds_that_no_kernel_meets_are_refused() {
        let spec = |min, max| RequirementSpec {
            name: "r".into(),
            points: 1.0,
            sass: Some("HGMMA".into()),
            trace: None,
            executed: None,
            per: None,
            at_least: None,
            at_most: None,
            min,
            max,
            why: String::new(),
        };
        assert!(spec(Some(3), Some(2))
            .resolve(true)
            .unwrap_err()
            .to_string()
            .contains("min (3) is above max (2)"));
        assert!(spec(Some(0), None)
            .resolve(true)
            .unwrap_err()
            .to_string()
            .contains("requires nothing"));
        let min = |q: Requirement| q.instructions().unwrap().min;
        assert_eq!(min(spec(None, Some(0)).resolve(true).unwrap()), 0);
        assert_eq!(min(spec(None, None).resolve(true).unwrap()), 1);
    }
}
