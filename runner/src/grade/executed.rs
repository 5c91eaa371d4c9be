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
//! C's TMA box) and the measured launch's shape ([`super::job::measure_shape`]), never from the submission.
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
//! with a true guard the three counts allow ([`super::counts::PcCount::proven`]): all `n` for an unguarded
//! instruction, else `max(ceil(p / 32), n - (t - p))`, exact when one lane is active (an elected
//! thread) or the guard was always true.
//!
//! What the counts cannot show: which warp executed an instruction. "Every tile is stored by a
//! warp that issues no MMA" is a per-warp property; no requirement here awards points for it,
//! and the trace facts that describe it (the submission's own records) carry no points unless a
//! rubric gives them some (see the rubrics' comments).
//!
//! A second source of counts, the PTX simulator's, decides a Blackwell rubric graded on the
//! simulator: its requirements name PTX classes ([`super::counts::PtxClass`], `executed =
//! "tcgen05.mma.cta_group::2"`), counted in the measured launch the visible tests' simulating
//! child makes after its tests ([`super::simulated`]). Its counts are warp-level: per warp, the
//! most executions of any one lane with a true guard ([`super::counts::PtxCounts`]). Both sources answer through
//! [`CountSource`], and [`check`] decides the same way from either.

use super::counts::{
    BuildMeasured, CountSource, Counts, InstructionClass, Measured, PtxClass, PtxCounts,
};
use super::vocab::{Flag, Status};
use anyhow::{anyhow, bail, Result};
use common::step::{KernelShape, OutputArg};
use common::Shape;
use serde::{Deserialize, Serialize};

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
    let mut all_per_unit = true;
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
        if let (Counts::Ptx(p), InstructionClass::Ptx(pc)) = (counts, class) {
            if !p.launches.is_empty() {
                match per_unit(what, pc, e, k, &b.build, p) {
                    Ok(shown) => {
                        found.push(shown);
                        continue;
                    }
                    Err(v) => return v,
                }
            }
        }
        all_per_unit = false;
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
    let need = if all_per_unit {
        format!(
            "{} {} in every cluster of every graded launch",
            e.at_most.filter(|m| *m != e.at_least).map_or(
                format!("at least {}", e.at_least),
                |m| format!("{} to {m}", e.at_least)
            ),
            e.per.words()
        )
    } else {
        need
    };
    ExecutedVerdict {
        status: Status::Passed,
        flags: Vec::new(),
        detail: format!("{what}: executed {} ({need}; {source})", found.join(", ")),
    }
}

/// A requirement on the simulator's graded launches (`p.launches`), decided unit by unit in
/// every launch: each cluster, in each cluster tile it multiplied and (per `cluster-k-block`)
/// each k-block of it, must show `at_least` (at most `at_most`) attributed executions of the
/// class, and every cluster tile of the shape must have been multiplied by some cluster. The
/// attribution (which executions did the technique's work, and for which unit) is
/// `super::simulated::units_of`'s. `per = "launch"` counts each launch's executions against its
/// own shape; the per-CTA and per-box units have no attribution on the simulator and count the
/// same way (the launch's total against the launch's number of units). `Ok`: what was shown.
fn per_unit(
    what: &str,
    class: &PtxClass,
    e: &Executed,
    k: &KernelShape,
    build: &str,
    p: &PtxCounts,
) -> std::result::Result<String, ExecutedVerdict> {
    let fail = |shown: u64, detail: String| ExecutedVerdict {
        status: Status::Failed,
        flags: vec![Flag::new(
            if shown < e.at_least {
                "technique-not-executed"
            } else {
                "technique-forbidden"
            },
            format!("{shown} {class} executed in one unit of the {build} build"),
        )],
        detail: format!("{what}: {detail}"),
    };
    let need = match e.at_most {
        Some(m) if m == e.at_least => format!("exactly {m}"),
        Some(m) => format!("{} to {m}", e.at_least),
        None => format!("at least {}", e.at_least),
    };
    let out_of = |n: u64| n < e.at_least || e.at_most.is_some_and(|m| n > m);
    let mut least: Option<u64> = None;
    for l in &p.launches {
        let s = Shape {
            m: l.shape[0],
            n: l.shape[1],
            k: l.shape[2],
        };
        let at = format!("in the launch of {} ({}x{}x{})", l.test, s.m, s.n, s.k);
        match e.per {
            Unit::ClusterKBlock | Unit::ClusterTile => {
                let (ctm, ctn) = (
                    k.cluster_tile.0.max(1) as usize,
                    k.cluster_tile.1.max(1) as usize,
                );
                let kbs = (s.k / k.tile_k.max(1) as usize) as u32;
                for tm in 0..(s.m / ctm) as u32 {
                    for tn in 0..(s.n / ctn) as u32 {
                        if !l.processed.iter().any(|(_, t)| *t == [tm, tn]) {
                            return Err(fail(0, format!("the {build} build: no cluster multiplied cluster tile ({tm}, {tn}) from TMA loads of A and B {at}, so no unit of it shows {class}; the rubric requires {need} {}", e.per.words())));
                        }
                    }
                }
                for &(cluster, tile) in &l.processed {
                    let n_of = |kb: Option<u32>| -> u64 {
                        l.records
                            .iter()
                            .filter(|r| {
                                r.cluster == cluster
                                    && r.tile == tile
                                    && kb.is_none_or(|kb| r.kb == kb)
                                    && class.matches(&r.op)
                            })
                            .map(|r| r.n)
                            .sum()
                    };
                    let units: Vec<Option<u32>> = if e.per == Unit::ClusterKBlock {
                        (0..kbs).map(Some).collect()
                    } else {
                        vec![None]
                    };
                    for kb in units {
                        let n = n_of(kb);
                        least = Some(least.map_or(n, |x| x.min(n)));
                        if out_of(n) {
                            let unit = match kb {
                                Some(kb) => {
                                    format!("cluster tile ({}, {}), k-block {kb}", tile[0], tile[1])
                                }
                                None => format!("cluster tile ({}, {})", tile[0], tile[1]),
                            };
                            return Err(fail(n, format!(
                                "the {build} build: cluster {cluster} executed {n} {class} that did the technique's work for {unit} {at}; the rubric requires {need} {} in every cluster and every unit (an MMA counts for the tile and k-block its TMA-loaded operands came from; a commit for the MMAs it covers, and only if it arrived on a barrier the producer or the epilogue waited on and, multicast, its CTA mask names both CTAs of the pair)",
                                e.per.words()
                            )));
                        }
                    }
                }
            }
            _ => {
                let (fewest, most) = e.bounds(k, s).map_err(|err| ExecutedVerdict {
                    status: Status::Error,
                    flags: vec![Flag::new("grader-error", format!("{err:#}"))],
                    detail: format!("{what} not checked: {err:#}"),
                })?;
                let n: u64 = l
                    .per_opcode
                    .iter()
                    .filter(|(op, _)| class.matches(op))
                    .map(|(_, n)| n)
                    .sum();
                least = Some(least.map_or(n, |x| x.min(n)));
                if n < fewest || most.is_some_and(|m| n > m) {
                    return Err(fail(
                        if n < fewest { 0 } else { u64::MAX },
                        format!("the {build} build executed {n} {class} {at}; the rubric requires {need} {} ({} of them)", e.per.words(), e.per.count(k, s).unwrap_or(0)),
                    ));
                }
            }
        }
    }
    Ok(format!(
        "at least {} per unit in each of the {} graded launches of the {build} build",
        least.unwrap_or(0),
        p.launches.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::super::counts::{Counts, Pattern, PcCount, PtxClass, PtxCounts, SassCounts};
    use super::super::job::measure_shape;
    use super::*;
    use common::step::{Arch, KernelSpec};

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
                    launches: Vec::new(),
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
