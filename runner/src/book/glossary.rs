//! The workbook's terms (`runner glossary`, and the book's glossary page through
//! `{{#glossary}}`): one line each and the chapter that explains it. A test checks that every named
//! chapter really uses the term.

use anyhow::{bail, Result};

pub struct Term {
    pub term: &'static str,
    /// Other spellings the chapter may use.
    pub aliases: &'static [&'static str],
    pub line: &'static str,
    /// The chapter that explains it.
    pub step: Where,
}

/// A chapter a term is explained in.
#[derive(Clone, Copy)]
pub enum Where {
    Step(u32),
    Introduction,
    /// The simulator chapter (`book/src/simulator.md`).
    Simulator,
}

impl Where {
    /// The step's number, for `--json` (null for the other chapters).
    fn number(self) -> Option<u32> {
        match self {
            Where::Step(n) => Some(n),
            _ => None,
        }
    }
}

pub const TERMS: &[Term] = &[
    Term {
        term: "128-byte swizzle",
        aliases: &["SWIZZLE_128B"],
        line: "the shared-memory layout TMA writes and the MMA reads: 16-byte chunk q of row r sits at chunk q XOR (r mod 8), so the rows of an 8 × 128 B group hit different banks",
        step: Where::Step(0),
    },
    Term {
        term: "acc_empty",
        aliases: &[],
        line: "mbarrier by which the epilogue warps of both CTAs hand the accumulator back to the MMA warp before the next tile overwrites it",
        step: Where::Step(4),
    },
    Term {
        term: "acc_full",
        aliases: &[],
        line: "mbarrier the final tcgen05.commit of a tile completes: the accumulator is final and the epilogue may read it",
        step: Where::Step(0),
    },
    Term {
        term: "arithmetic intensity",
        aliases: &["FLOP per byte"],
        line: "FLOPs done per byte moved; a tile below the ratio of peak FLOP/s to the bandwidth of the level that serves its bytes (HBM, or L2 for re-read tiles) leaves the tensor core waiting for data",
        step: Where::Step(3),
    },
    Term {
        term: "budget box",
        aliases: &["budget"],
        line: "the arithmetic of a step at published peak figures (runner budget N): FLOP and bytes per k-block, bandwidth demand, bytes in flight, epilogue share — never a measurement",
        step: Where::Introduction,
    },
    Term {
        term: "bulk async-group",
        aliases: &["commit_group", "wait_group"],
        line: "per-thread group of TMA stores (cp.async.bulk.commit_group); wait_group.read N waits until at most N groups still read their shared-memory source",
        step: Where::Step(2),
    },
    Term {
        term: "cluster",
        aliases: &["CTA pair"],
        line: "CTAs launched together on nearby SMs that can reach each other's shared memory and barriers; here, pairs sharing one cta_group::2 MMA",
        step: Where::Step(3),
    },
    Term {
        term: "complete_tx",
        aliases: &[],
        line: "the byte count a TMA copy subtracts from its mbarrier's phase when it lands",
        step: Where::Step(0),
    },
    Term {
        term: "cta_group",
        aliases: &["cta_group::2"],
        line: "qualifier of tcgen05.alloc, dealloc, relinquish_alloc_permit, mma, cp, shift and commit (not of ld, st, wait or fence): ::1 works on one CTA, ::2 on a CTA pair (M up to 256 across both); one kernel uses one value throughout",
        step: Where::Step(3),
    },
    Term {
        term: "deadlock",
        aliases: &[],
        line: "no thread can make progress: every warp waits on a barrier phase that nothing left can complete; the simulator finds it at once and names each blocked warp, its barrier, the parity awaited and the arrivals missing (exit 124, as a hang)",
        step: Where::Simulator,
    },
    Term {
        term: "DSMEM",
        aliases: &["distributed shared memory"],
        line: "the shared memory of the other CTAs of a cluster, reachable by address (mapa) and by the paired MMA",
        step: Where::Step(3),
    },
    Term {
        term: "elect.sync",
        aliases: &["elect"],
        line: "picks one lane of a warp to issue a single-thread instruction (a TMA, an MMA) while the warp stays converged",
        step: Where::Step(1),
    },
    Term {
        term: "emulation",
        aliases: &["tcgen05_emu"],
        line: "the sm_90 build where each tcgen05 instruction is a function with the PTX ISA's semantics, so the kernels run, and are verified, on a Hopper GPU",
        step: Where::Introduction,
    },
    Term {
        term: "epilogue",
        aliases: &[],
        line: "the part of the kernel that moves the finished accumulator out: tensor memory → registers → (shared memory →) global memory",
        step: Where::Step(2),
    },
    Term {
        term: "expect_tx",
        aliases: &["arrive_expect_tx"],
        line: "mbarrier.arrive.expect_tx: one arrival plus the bytes the current phase must still receive before it completes",
        step: Where::Step(0),
    },
    Term {
        term: "fence.proxy.async",
        aliases: &["proxy fence"],
        line: "makes ordinary shared-memory writes visible to the async proxy (TMA, tcgen05) that reads them next",
        step: Where::Step(2),
    },
    Term {
        term: "grid tiling",
        aliases: &["snake"],
        line: "visiting output tiles in bands with a snake turn, so the tiles in flight at once share operand blocks in L2",
        step: Where::Step(6),
    },
    Term {
        term: "instruction descriptor",
        aliases: &["idesc"],
        line: "32-bit word of a tcgen05.mma: accumulator and input types, operand majorness, M and N",
        step: Where::Step(0),
    },
    Term {
        term: "k-block",
        aliases: &[],
        line: "one TILE_K-wide slice of the reduction dimension: what one ring slot holds and one round of MMAs consumes",
        step: Where::Step(0),
    },
    Term {
        term: "lane quarter",
        aliases: &["lanes 32"],
        line: "the 32 tensor-memory lanes a warp may touch: warp w reaches lanes 32·(w mod 4) to 32·(w mod 4) + 31",
        step: Where::Step(0),
    },
    Term {
        term: "LBO",
        aliases: &["leading byte offset"],
        line: "leading-dimension byte offset of a shared-memory descriptor; unused for swizzled K-major tiles (set to 16 B)",
        step: Where::Step(0),
    },
    Term {
        term: "leader CTA",
        aliases: &["leader"],
        line: "rank 0 of a CTA pair: it issues the pair's MMAs and owns the load_full barrier that counts both CTAs' bytes",
        step: Where::Step(3),
    },
    Term {
        term: "load_empty",
        aliases: &[],
        line: "per-slot mbarrier a tcgen05.commit completes when the MMAs that read the slot are done: the producer may refill it",
        step: Where::Step(0),
    },
    Term {
        term: "load_full",
        aliases: &[],
        line: "per-slot mbarrier the TMA completes when the slot's bytes have landed: the MMA issuer may read it",
        step: Where::Step(0),
    },
    Term {
        term: "mbarrier",
        aliases: &[],
        line: "64-bit shared-memory barrier that counts arrivals and transaction bytes and completes in numbered phases",
        step: Where::Step(0),
    },
    Term {
        term: "multicast commit",
        aliases: &["multicast"],
        line: "tcgen05.commit with a CTA mask: one completion arrives on the same barrier in each CTA of the mask",
        step: Where::Step(3),
    },
    Term {
        term: "ordering rule",
        aliases: &["rule"],
        line: "a condition the hardware's ordering needs (an MMA reads operands only after their load landed, a fence before a hand-over, ...); the simulator and the GPU emulation stop a kernel that breaks one and name it, e.g. rule release-before-overwrite (exit 2)",
        step: Where::Simulator,
    },
    Term {
        term: "parity",
        aliases: &["phase"],
        line: "the low bit of a barrier's phase number; try_wait.parity P returns once the phase with parity P has completed; the ISA allows only the current phase or the one before it, and defines no phase before phase 0 (a parity-1 wait on a fresh barrier falls through on hardware)",
        step: Where::Step(0),
    },
    Term {
        term: "pct",
        aliases: &["pctN"],
        line: "a schedule policy (probabilistic concurrency testing): threads get random priorities that change at a few random points, which finds ordering bugs that need an unlikely interleaving (--sim-policy pct3)",
        step: Where::Simulator,
    },
    Term {
        term: "persistent kernel",
        aliases: &["persistent"],
        line: "one cluster per SM pair that loops over output tiles instead of one launch per tile",
        step: Where::Step(4),
    },
    Term {
        term: "ring",
        aliases: &["stages", "STAGES"],
        line: "the STAGES slots of shared memory that TMA fills and the MMAs drain, each guarded by load_full and load_empty",
        step: Where::Step(0),
    },
    Term {
        term: "SBO",
        aliases: &["stride byte offset"],
        line: "stride-dimension byte offset of a shared-memory descriptor: bytes from one 8-row group to the next (1024 for 128-byte swizzled K-major tiles)",
        step: Where::Step(0),
    },
    Term {
        term: "schedule",
        aliases: &["--sim-seed", "--sim-policy"],
        line: "the order in which the simulator interleaves the threads and completes asynchronous work, chosen by a seed and a policy; the same seed and policy replay the same run (--explore N tries N)",
        step: Where::Simulator,
    },
    Term {
        term: "seeded bug",
        aliases: &["mutation", "--mutate"],
        line: "a known textual edit of a kernel (runner mutations lists them) that the checks must catch — or, for some, must show to be harmless",
        step: Where::Introduction,
    },
    Term {
        term: "shared-memory descriptor",
        aliases: &["smem descriptor", "matrix descriptor"],
        line: "64-bit word telling tcgen05.mma where an operand tile is and how it is laid out: start address, LBO, SBO, version, swizzle",
        step: Where::Step(0),
    },
    Term {
        term: "simulator",
        aliases: &["CPU simulator"],
        line: "the workbook's CPU simulator of the sm_100a PTX: runs a Blackwell kernel's threads, TMA, mbarriers, tensor memory and MMAs without a GPU, verifies the result against fp64, and checks the ordering rules; correctness only, no timings",
        step: Where::Simulator,
    },
    Term {
        term: "tcgen05",
        aliases: &[],
        line: "Blackwell's fifth-generation tensor-core instructions: mma, commit, alloc/dealloc, ld/st, cp, fences",
        step: Where::Step(0),
    },
    Term {
        term: "tcgen05.commit",
        aliases: &["mma_commit"],
        line: "makes an mbarrier arrive once every asynchronous tcgen05 operation (mma, cp, shift) the thread issued before it has completed; tcgen05.ld/st are waited for with tcgen05.wait",
        step: Where::Step(0),
    },
    Term {
        term: "tensor map",
        aliases: &["tmap"],
        line: "the descriptor of a global tensor TMA works from: shape, strides, box size, swizzle",
        step: Where::Step(2),
    },
    Term {
        term: "TMA",
        aliases: &["Tensor Memory Accelerator"],
        line: "the copy engine behind cp.async.bulk.tensor: one thread asks for a box of a tensor map and the bytes arrive in shared memory (or leave it) asynchronously",
        step: Where::Step(0),
    },
    Term {
        term: "TMEM",
        aliases: &["tensor memory"],
        line: "per-SM on-chip memory of 128 lanes × 512 columns of 32-bit cells that holds the MMA accumulator; CTAs allocate columns of it",
        step: Where::Step(0),
    },
    Term {
        term: "UMMA",
        aliases: &[],
        line: "CUTLASS's name for tcgen05.mma: an MMA issued by one thread from shared-memory operands into a tensor-memory accumulator",
        step: Where::Step(0),
    },
    Term {
        term: "warp specialization",
        aliases: &["producer"],
        line: "giving warps one role each (producer, MMA issuer, epilogue) so that each waits only for what it needs",
        step: Where::Step(1),
    },
    Term {
        term: "warpgroup",
        aliases: &[],
        line: "four consecutive warps starting at a multiple of four: together they reach all 128 tensor-memory lanes",
        step: Where::Step(5),
    },
    Term {
        term: "wave",
        aliases: &["round"],
        line: "the tiles the GPU works on at the same time; a problem takes ⌈tiles / clusters at once⌉ of them, persistent or not",
        step: Where::Step(4),
    },
];

/// Where a term is explained, for people.
pub fn chapter_name(step: Where) -> String {
    match step {
        Where::Step(n) => format!("chapter {n} (runner explain {n})"),
        Where::Introduction => "the introduction".to_string(),
        Where::Simulator => "the simulator chapter (runner explain simulator)".to_string(),
    }
}

/// The glossary, or the terms matching `filter`, as a markdown list.
pub fn markdown(filter: Option<&str>) -> Result<String> {
    Ok(matching(filter)?
        .iter()
        .map(|t| format!("- **{}**: {} — {}.\n", t.term, t.line, chapter_name(t.step)))
        .collect())
}

/// `runner glossary --json`: the terms matching `filter` as objects (term, aliases, line, the
/// chapter's step or null for the introduction, and how to read it).
pub fn json(filter: Option<&str>) -> Result<serde_json::Value> {
    Ok(matching(filter)?
        .iter()
        .map(|t| {
            serde_json::json!({
                "term": t.term,
                "aliases": t.aliases,
                "line": t.line,
                "step": t.step.number(),
                "chapter": chapter_name(t.step),
            })
        })
        .collect())
}

/// The terms whose name or an alias contains `filter` (case-insensitive); all without one.
fn matching(filter: Option<&str>) -> Result<Vec<&'static Term>> {
    let want = filter.map(str::to_lowercase);
    let matches: Vec<&Term> = TERMS
        .iter()
        .filter(|t| {
            want.as_ref().is_none_or(|w| {
                t.term.to_lowercase().contains(w.as_str())
                    || t.aliases
                        .iter()
                        .any(|a| a.to_lowercase().contains(w.as_str()))
            })
        })
        .collect();
    if matches.is_empty() {
        bail!(
            "no term matches {:?}; runner glossary lists all {}",
            filter.unwrap_or_default(),
            TERMS.len()
        );
    }
    Ok(matches)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chapter file of a term, relative to the repository root.
    fn chapter_path(step: Where) -> String {
        match step {
            Where::Step(n) => format!("book/src/step{n}.md"),
            Where::Introduction => "book/src/introduction.md".to_string(),
            Where::Simulator => "book/src/simulator.md".to_string(),
        }
    }

    #[test]
    fn terms_are_sorted_and_unique() {
        let keys: Vec<String> = TERMS.iter().map(|t| t.term.to_lowercase()).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(keys, sorted, "alphabetical, no duplicates");
    }

    #[test]
    fn every_term_is_used_by_the_chapter_it_names() {
        for t in TERMS {
            let path = common::toolkit::project_root().join(chapter_path(t.step));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
                .to_lowercase();
            assert!(
                std::iter::once(&t.term)
                    .chain(t.aliases)
                    .any(|a| text.contains(&a.to_lowercase())),
                "{} does not mention {:?}",
                path.display(),
                t.term
            );
        }
    }

    #[test]
    fn filters_find_terms_and_aliases() {
        let md = markdown(Some("tmem")).unwrap();
        assert!(md.starts_with("- **TMEM**:"), "{md}");
        assert!(markdown(Some("stride byte")).unwrap().contains("**SBO**"));
        assert!(markdown(Some("zzz")).is_err());
        assert_eq!(markdown(None).unwrap().lines().count(), TERMS.len());
    }
}
