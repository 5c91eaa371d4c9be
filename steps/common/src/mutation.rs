//! Seeded bugs: textual edits of a step kernel that a correct harness must catch. They are the
//! negative controls of the GPU check script, and a way for students to see what a broken
//! kernel looks like (`runner step N --mutate wrong-sbo`).

use anyhow::{bail, Result};
use serde::Serialize;

/// What the emulation check must observe for a seeded bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    /// The bug is caught: a failed verification, an emulator fault or a diagnosed hang.
    Caught,
    /// The edit looks like a bug but is harmless: the kernel must still pass (an exercise in
    /// predicting the outcome before running it).
    Harmless,
}

/// Every step of the ladder, for mutations that apply to all of them.
pub const ALL_STEPS: &[u32] = &[0, 1, 2, 3, 4, 5, 6];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Mutation {
    pub name: &'static str,
    pub description: &'static str,
    /// Every line containing all of these is edited...
    pub anchor: &'static [&'static str],
    /// ...by replacing `from` with `to` (an empty `from` comments the whole line out).
    pub from: &'static str,
    pub to: &'static str,
    /// The steps whose Blackwell kernels it edits (some bugs exist only in persistent kernels).
    pub steps: &'static [u32],
    pub expect: Expect,
}

pub const MUTATIONS: &[Mutation] = &[
    Mutation {
        name: "wrong-sbo",
        description:
            "shared-memory descriptors use an SBO of 2048 bytes instead of 1024 (8 rows of 128 B)",
        anchor: &["SWIZZLE_GROUP_BYTES = 8 * 128"],
        from: "8 * 128",
        to: "16 * 128",
        steps: ALL_STEPS,
        expect: Expect::Caught,
    },
    Mutation {
        name: "skip-acc-wait",
        description: "the epilogue reads the accumulator without waiting on acc_full",
        anchor: &["mbarrier_wait(&smem.acc_full"],
        from: "",
        to: "",
        steps: ALL_STEPS,
        expect: Expect::Caught,
    },
    Mutation {
        name: "skip-acc-commit",
        description:
            "the MMA warp never commits to acc_full, so the epilogue waits forever (a hang)",
        // `mma_commit` (not "commit"): the barrier's init line mentions tcgen05.commit in a comment.
        anchor: &["mma_commit", "&smem.acc_full"],
        from: "",
        to: "",
        steps: ALL_STEPS,
        expect: Expect::Caught,
    },
    Mutation {
        name: "no-fence-after-wait",
        description: "the epilogue reads tensor memory right after its acc_full wait, without tcgen05.fence::after_thread_sync: the tcgen05.ld is not ordered after the wait",
        anchor: &["tcgen05_fence_after_thread_sync", "tcgen05.ld"],
        from: "",
        to: "",
        steps: ALL_STEPS,
        expect: Expect::Caught,
    },
    Mutation {
        name: "wrong-parity",
        description: "the producer waits on load_empty with parity (kb / STAGES) & 1 instead of \
                      ((kb / STAGES) - 1) & 1: the wait names the wrong phase (a race, or a hang)",
        // The consumer's load_full wait and the accumulator's waits have other formulas; only the
        // producer's line waits on load_empty with a "- 1".
        anchor: &[
            "mbarrier_wait(&smem.load_empty[slot]",
            " / STAGES) - 1) & 1",
        ],
        from: " / STAGES) - 1) & 1",
        to: " / STAGES)) & 1",
        steps: ALL_STEPS,
        expect: Expect::Caught,
    },
    Mutation {
        name: "no-wait-ld",
        description: "the epilogue never executes tcgen05.wait::ld: its tensor-memory loads are handed over (barrier, arrive) before they are known complete",
        anchor: &["tmem_wait_ld("],
        from: "",
        to: "",
        steps: ALL_STEPS,
        expect: Expect::Caught,
    },
    Mutation {
        name: "early-acc-release",
        description: "acc_empty counts 4 arrivals instead of 8, so the MMA warp reuses the accumulator once one CTA's epilogue warps released it, while the other CTA's may still be reading it",
        anchor: &["mbarrier_init(&smem.acc_empty"],
        from: "CLUSTER * 4",
        to: "4",
        steps: &[4, 5, 6],
        expect: Expect::Caught,
    },
    Mutation {
        name: "skip-load-full-wait",
        description: "the MMA warp issues each k-block's MMAs without waiting on load_full: the tensor core may read a slot before its TMA loads landed",
        anchor: &["mbarrier_wait(&smem.load_full"],
        from: "",
        to: "",
        steps: ALL_STEPS,
        expect: Expect::Caught,
    },
    Mutation {
        name: "tma-wrong-cta-barrier",
        description: "each CTA's 2-CTA TMA loads signal its own load_full barrier instead of the pair leader's: the leader's barrier never receives the peer's bytes (a hang)",
        anchor: &["tma_load_2d_2cta", "bw::pair_leader(rank)"],
        from: "bw::pair_leader(rank)",
        to: "rank",
        steps: &[3, 4, 5, 6],
        expect: Expect::Caught,
    },
    Mutation {
        name: "wrong-acc-parity",
        description: "the epilogue waits on acc_full with the opposite parity: the wait returns for an older phase and reads an accumulator its MMAs have not finished",
        anchor: &["mbarrier_wait(&smem.acc_full"],
        from: "& 1);",
        to: "& 1 ^ 1);",
        steps: &[4, 5, 6],
        expect: Expect::Caught,
    },
    Mutation {
        name: "no-producer-tail",
        description: "the producer exits without waiting for the last load_empty phases: the leader's final multicast commits may land in a CTA that has already exited",
        anchor: &["mbarrier_wait(&smem.load_empty[", " % STAGES]"],
        from: "",
        to: "",
        steps: &[3, 4, 5, 6],
        expect: Expect::Caught,
    },
    Mutation {
        name: "no-first-round-guard",
        description: "the producer also waits on load_empty in the first round: harmless in \
                      practice, since a parity-1 wait on a fresh barrier falls through on hardware \
                      (the PTX ISA defines no phase before phase 0; the guard stays inside it)",
        anchor: &["mbarrier_wait(&smem.load_empty[slot]", ">= STAGES)"],
        from: "if (",
        to: "if (true || ",
        steps: ALL_STEPS,
        expect: Expect::Harmless,
    },
];

pub fn find(name: &str) -> Result<&'static Mutation> {
    match MUTATIONS.iter().find(|m| m.name == name) {
        Some(m) => Ok(m),
        None => bail!(
            "unknown mutation {name:?}; known: {}",
            MUTATIONS
                .iter()
                .map(|m| m.name)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

impl Mutation {
    pub fn applies_to(&self, step: u32) -> bool {
        self.steps.contains(&step)
    }

    /// The kernel with the bug seeded; an error if the anchor is not in it.
    pub fn apply(&self, kernel: &str) -> Result<String> {
        let mut hits = 0;
        let out: Vec<String> = kernel
            .lines()
            .map(|l| {
                if !self.anchor.iter().all(|a| l.contains(a)) {
                    return l.to_string();
                }
                hits += 1;
                if self.from.is_empty() {
                    format!("// [mutation {}] {}", self.name, l.trim_start())
                } else {
                    l.replace(self.from, self.to)
                }
            })
            .collect();
        if hits == 0 {
            bail!(
                "mutation {} does not apply: no line contains all of {:?}",
                self.name,
                self.anchor
            );
        }
        Ok(out.join("\n") + "\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_edit_what_they_name() {
        let k = "constexpr u32 SWIZZLE_GROUP_BYTES = 8 * 128;\n  wb::mbarrier_wait(&smem.acc_full, 0);\n  bw::mma_commit(&smem.acc_full);\n";
        let a = find("wrong-sbo").unwrap().apply(k).unwrap();
        assert!(a.contains("SWIZZLE_GROUP_BYTES = 16 * 128;"));
        let b = find("skip-acc-wait").unwrap().apply(k).unwrap();
        assert!(b.contains("// [mutation skip-acc-wait] wb::mbarrier_wait(&smem.acc_full, 0);"));
        assert!(!b.contains("// [mutation skip-acc-wait] bw::mma_commit"));
        let c = find("skip-acc-commit").unwrap().apply(k).unwrap();
        assert!(c.contains("// [mutation skip-acc-commit] bw::mma_commit(&smem.acc_full);"));
        assert!(
            c.contains("\n  wb::mbarrier_wait(&smem.acc_full, 0);"),
            "the wait stays"
        );
        let init = "    wb::mbarrier_init(&smem.acc_full, 1);  // the final tcgen05.commit\n";
        let d = find("skip-acc-commit")
            .unwrap()
            .apply(&format!("{init}{k}"))
            .unwrap();
        assert_eq!(
            d.lines().next(),
            Some(init.trim_end()),
            "the barrier is still initialised"
        );
        assert!(find("skip-acc-wait").unwrap().apply("nothing\n").is_err());
        let parity = find("wrong-acc-parity")
            .unwrap()
            .apply("  wb::mbarrier_wait(&smem.acc_full[acc_slot], (local / ACC_STAGES) & 1);\n")
            .unwrap();
        assert!(
            parity.contains("(local / ACC_STAGES) & 1 ^ 1);"),
            "{parity}: & binds tighter than ^, so this flips the parity"
        );
        let tma = find("tma-wrong-cta-barrier").unwrap().apply(
            "      bw::tma_load_2d_2cta(smem.a[slot], &tmap_a, &smem.load_full[slot], bw::pair_leader(rank),\n",
        );
        assert!(tma.unwrap().contains("&smem.load_full[slot], rank,"));
        let producer = "      if (it >= STAGES) wb::mbarrier_wait(&smem.load_empty[slot], ((it / STAGES) - 1) & 1);\n      wb::mbarrier_wait(&smem.load_full[slot], (it / STAGES) & 1);\n      wb::mbarrier_wait_cluster(&smem.acc_empty[acc_slot], ((local / ACC_STAGES) - 1) & 1);\n";
        let e = find("wrong-parity").unwrap().apply(producer).unwrap();
        assert!(e.contains("load_empty[slot], ((it / STAGES)) & 1);"), "{e}");
        assert!(
            e.contains("((local / ACC_STAGES) - 1) & 1"),
            "the accumulator's wait is untouched"
        );
        let f = find("no-first-round-guard")
            .unwrap()
            .apply(producer)
            .unwrap();
        assert!(f.starts_with("      if (true || it >= STAGES) wb::mbarrier_wait(&smem.load_empty"));
        assert_eq!(
            f.lines().skip(1).collect::<Vec<_>>(),
            producer.lines().skip(1).collect::<Vec<_>>()
        );
        assert!(find("nope").is_err());
    }
}
