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
//! A `trace = "fact"` requirement ([`TraceRequirement`]) is checked on Hopper by the run child's
//! one traced launch ([`super::trace_facts::evaluate`]) and scored here the same way; compiled
//! only, it is skipped.

use super::counts::{InstructionClass, Pattern, PtxClass};
use super::executed::{Executed, Unit};
use super::protocol::{ENTRY, NVDISASM_ENV};
use super::trace_facts::Fact;
use super::vocab::{FactResult, Flag, Status};
use anyhow::{bail, Result};
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
    /// A fact of the warps' trace records, on Hopper ([`super::trace_facts::Fact`]).
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

/// A requirement, checked and resolved.
#[derive(Debug, Clone, Serialize)]
pub struct Requirement {
    pub name: String,
    pub points: f64,
    #[serde(serialize_with = "as_text")]
    pub pattern: Pattern,
    pub min: usize,
    pub max: Option<usize>,
    pub why: String,
    /// How often it must execute in the measured launch; `None`: a static check only (a ban:
    /// an instruction absent from the binary never executes).
    pub executed: Option<Executed>,
    /// A PTX instruction class (`executed = "tcgen05.mma.cta_group::2"`), counted by the
    /// simulator on a Blackwell kernel's sm_100a PTX; `pattern` then only names it.
    #[serde(skip)]
    pub ptx: Option<PtxClass>,
}

impl Requirement {
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

impl RequirementSpec {
    pub fn resolve(&self) -> Result<Requirement> {
        self.check_common()?;
        if self.trace.is_some() && (self.sass.is_some() || self.executed.is_some()) {
            bail!("give one of executed, sass or trace, not several: write two requirements");
        }
        if let Some(class) = &self.executed {
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
            return Ok(Requirement {
                name: self.name.clone(),
                points: self.points,
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
                why: self.why.trim().to_string(),
                executed: Some(Executed {
                    per,
                    at_least,
                    at_most: self.at_most,
                }),
            });
        }
        let Some(sass) = &self.sass else {
            bail!("give executed = \"OPCODE.MOD\" (or sass = ..., or trace = \"fact\")");
        };
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
        Ok(Requirement {
            name: self.name.clone(),
            points: self.points,
            pattern,
            min,
            max: self.max,
            why: self.why.trim().to_string(),
            // Presence in the binary proves nothing: the old form also needs `min` executions.
            executed: (min > 0).then_some(Executed {
                per: Unit::Launch,
                at_least: min as u64,
                at_most: None,
            }),
            ptx: None,
        })
    }
}

impl RequirementSpec {
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

    /// A `trace = "fact"` requirement, resolved. Traces are recorded on Hopper only (`hopper`:
    /// the rubric's architecture), and a fact has no count.
    pub fn resolve_trace(&self, hopper: bool) -> Result<TraceRequirement> {
        self.check_common()?;
        let Some(trace) = &self.trace else {
            bail!("internal: not a trace requirement");
        };
        if self.sass.is_some() || self.executed.is_some() {
            bail!("give one of executed, sass or trace, not several: write two requirements");
        }
        if self.min.is_some() || self.max.is_some() || self.at_least.is_some() {
            bail!("min and max count instructions: a trace fact holds or not");
        }
        if !hopper {
            bail!("trace facts are checked on Hopper (sm_90a) rubrics only");
        }
        if self.points != 0.0 {
            bail!("a trace fact is read from records the kernel writes itself, which a kernel can forge: give it points = 0 (feedback for the student) and the points to an executed = ... requirement, which the grader measures");
        }
        Ok(TraceRequirement {
            name: self.name.clone(),
            points: self.points,
            fact: Fact::parse(trace)?,
            why: self.why.trim().to_string(),
        })
    }
}

/// A `trace = "fact"` requirement, checked and resolved. The run child checks it on the records
/// of one traced launch (a Hopper GPU is needed); it is scored like a SASS requirement.
#[derive(Debug, Clone, Serialize)]
pub struct TraceRequirement {
    pub name: String,
    pub points: f64,
    #[serde(serialize_with = "fact_name")]
    pub fact: Fact,
    pub why: String,
}

fn fact_name<S: serde::Serializer>(f: &Fact, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(f.name())
}

impl TraceRequirement {
    /// `dedicated-store-warp (the epilogue's own warp)`.
    fn describe(&self) -> String {
        if self.why.is_empty() {
            self.fact.name().to_string()
        } else {
            format!("{} ({})", self.fact.name(), self.why)
        }
    }

    /// The outcome of the run child's result for this requirement's fact (or, where none came
    /// back, the grader's account of why).
    pub fn check(&self, res: &FactResult) -> TraceVerdict {
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
                        format!("the trace does not show {}", self.fact.name()),
                    )]
                } else {
                    res.flags.clone()
                },
            ),
        };
        TraceVerdict {
            status: res.status,
            detail,
            flags,
        }
    }
}

/// The outcome of one trace requirement.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceVerdict {
    pub status: Status,
    pub detail: String,
    pub flags: Vec<Flag>,
}

/// The instructions of one native build, as the compile child found them.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildSass {
    /// The build (`f16`, `bf16 (native sm_100a)`).
    pub build: String,
    /// Opcode with modifiers -> count, in the launched kernel; or why it could not be read.
    pub histogram: Result<BTreeMap<String, usize>, String>,
}

/// The outcome of one requirement: passed or not, the line the student sees, and the flag.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub passed: bool,
    /// The grader could not read the SASS: its own failure, not the student's.
    pub grader_error: bool,
    pub detail: String,
    pub flag: Option<Flag>,
}

impl Requirement {
    /// `UTCHMMA.2CTA (the 2-CTA tcgen05 MMA)`.
    fn describe(&self) -> String {
        if self.why.is_empty() {
            self.pattern.to_string()
        } else {
            format!("{} ({})", self.pattern, self.why)
        }
    }

    fn bounds(&self) -> String {
        match self.max {
            Some(0) => "none".into(),
            Some(max) if max == self.min => format!("exactly {max}"),
            Some(max) if self.min > 0 => format!("{} to {max}", self.min),
            Some(max) => format!("at most {max}"),
            None => format!("at least {}", self.min),
        }
    }

    /// Check every build: the requirement holds only if it holds in each.
    pub fn check(&self, builds: &[BuildSass]) -> Verdict {
        if builds.is_empty() {
            return Verdict {
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
                    return Verdict {
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
            let n = self.pattern.count(h);
            let ok = n >= self.min && self.max.is_none_or(|m| n <= m);
            if !ok {
                let (name, detail) = if n < self.min {
                    let near = self.pattern.near_misses(h);
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
                            self.pattern,
                            self.bounds()
                        ),
                    )
                } else {
                    (
                        "technique-forbidden",
                        format!(
                            "{}: the {} build's kernel has {n} {}, the rubric allows {}",
                            self.describe(),
                            b.build,
                            self.pattern,
                            self.bounds()
                        ),
                    )
                };
                return Verdict {
                    passed: false,
                    grader_error: false,
                    flag: Some(Flag::new(
                        name,
                        format!("{n} {} in the {} build's kernel", self.pattern, b.build),
                    )),
                    detail,
                };
            }
            found.push(format!("{n} in the {} build", b.build));
        }
        Verdict {
            passed: true,
            grader_error: false,
            detail: format!(
                "{}: {} ({} required)",
                self.describe(),
                found.join(", "),
                self.bounds()
            ),
            flag: None,
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
        .resolve()
        .unwrap()
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
        let v = r.check(&builds(h(&[("UTCHMMA.2CTA", 4)])));
        assert!(v.passed, "{v:?}");
        assert!(v.detail.contains("4 in the f16 build, 4 in the bf16 build"));
        let v = r.check(&builds(h(&[("UTCHMMA", 4)])));
        assert!(!v.passed && !v.grader_error);
        assert_eq!(
            v.detail,
            "missing UTCHMMA.2CTA (the 2-CTA MMA): the bf16 build's kernel has 0 UTCHMMA.2CTA, the rubric requires at least 1; it has UTCHMMA x4 instead"
        );
        assert_eq!(v.flag.unwrap().name, "technique-missing");
        let forbid = req("LDL", None, Some(0));
        let v = forbid.check(&builds(h(&[("LDL", 2)])));
        assert_eq!(v.flag.unwrap().name, "technique-forbidden");
        assert!(v.detail.contains("allows none"), "{}", v.detail);
        let unreadable = vec![BuildSass {
            build: "f16".into(),
            histogram: Err("nvdisasm failed".into()),
        }];
        let v = r.check(&unreadable);
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
            .resolve()
            .unwrap_err()
            .to_string()
            .contains("min (3) is above max (2)"));
        assert!(spec(Some(0), None)
            .resolve()
            .unwrap_err()
            .to_string()
            .contains("requires nothing"));
        assert_eq!(spec(None, Some(0)).resolve().unwrap().min, 0);
        assert_eq!(spec(None, None).resolve().unwrap().min, 1);
    }
}
