//! Seeded bugs: textual edits of a step kernel ([`crate::edits`]) that a correct harness must
//! catch. They are the negative controls of the GPU check script, and a way for students to see
//! what a broken kernel looks like (`runner step N --mutate wrong-sbo`). The Blackwell kernels'
//! bugs ([`MUTATIONS`]) are caught by the tcgen05 emulation; the Hopper twins'
//! ([`TWIN_MUTATIONS`]) run natively, so their static check or a stress run (`--stress SEED`)
//! must catch them.

use crate::arch::Arch;
use crate::edits;
use crate::step::{Epilogue, KernelFile, StepInfo};
use anyhow::{bail, Result};
use serde::Serialize;
use std::collections::BTreeMap;

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

/// Which kernels a seeded bug edits, by what they are (their declared facts,
/// [`crate::step::KernelFile`]) rather than by step number, so a new step gets the bugs its
/// structure has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Applies {
    /// Every kernel of its architecture.
    Every,
    /// Kernels whose CTAs pair up in 2-CTA clusters (`cta_group::2` on Blackwell, multicast B
    /// on Hopper).
    Pairs,
    /// Kernels whose CTAs loop over tiles (persistent or cluster launch control), so their
    /// barriers' phases and k-block counters run on across tiles.
    Loops,
    /// Kernels that store C with TMA from a staging tile in shared memory.
    TmaStore,
    /// Kernels whose accumulator warps stage and store C themselves (Hopper: named barriers).
    Staged,
    /// Hopper kernels with a dedicated store warp and the `out` hand-off.
    StoreWarp,
    /// Kernels whose running clusters take further tiles by cluster launch control
    /// (`clusterlaunchcontrol.try_cancel`, Blackwell).
    ClusterLaunchControl,
}

impl Applies {
    pub fn to(self, k: &KernelFile) -> bool {
        match self {
            Applies::Every => true,
            Applies::Pairs => k.launch.cluster() == 2,
            Applies::Loops => k.launch.schedule().loops(),
            Applies::TmaStore => k.epilogue.tma_store(),
            Applies::Staged => k.epilogue == Epilogue::Staged,
            Applies::StoreWarp => k.epilogue == Epilogue::StoreWarp,
            Applies::ClusterLaunchControl => {
                k.launch.schedule() == crate::step::Schedule::ClusterLaunchControl
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Mutation {
    pub name: &'static str,
    pub description: &'static str,
    /// Every line containing all of these is edited...
    pub anchor: &'static [&'static str],
    /// ...by replacing `from` with `to` (an empty `from` comments the whole line out).
    pub from: &'static str,
    pub to: &'static str,
    /// The kernels it edits (some bugs exist only in persistent kernels).
    pub applies: Applies,
    pub expect: Expect,
    /// Further line edits, applied in order after the first (a bug that moves a line).
    pub also: &'static [Edit],
    /// What the runner's error output must contain when the emulation catches the bug (with the
    /// static checks off, `--no-static-check`): the emulator rule or hang report that names it.
    /// Empty: any catch counts (a wrong result, say).
    pub caught_by: &'static str,
}

/// One more line edit of a [`Mutation`]: every line containing all of `anchor` gets `from`
/// replaced by `to` (an empty `from` comments the line out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Edit {
    pub anchor: &'static [&'static str],
    pub from: &'static str,
    pub to: &'static str,
}

pub const MUTATIONS: &[Mutation] = &[
    Mutation {
        name: "wrong-sbo",
        description:
            "shared-memory descriptors use an SBO of 2048 bytes instead of 1024 (8 rows of 128 B)",
        anchor: &["SWIZZLE_GROUP_BYTES = 8 * 128"],
        from: "8 * 128",
        to: "16 * 128",
        applies: Applies::Every,
        expect: Expect::Caught,
        also: &[],
        caught_by: "",
    },
    Mutation {
        name: "skip-acc-wait",
        description: "the epilogue reads the accumulator without waiting on acc_full",
        anchor: &["mbarrier_wait(&smem.acc_full"],
        from: "",
        to: "",
        applies: Applies::Every,
        expect: Expect::Caught,
        also: &[],
        caught_by: "",
    },
    Mutation {
        name: "skip-acc-commit",
        description:
            "the MMA warp never commits to acc_full, so the epilogue waits forever (a hang)",
        // `mma_commit` (not "commit"): the barrier's init line mentions tcgen05.commit in a comment.
        anchor: &["mma_commit", "&smem.acc_full"],
        from: "",
        to: "",
        applies: Applies::Every,
        expect: Expect::Caught,
        also: &[],
        caught_by: "",
    },
    Mutation {
        name: "no-fence-after-wait",
        description: "the epilogue reads tensor memory right after its acc_full wait, without tcgen05.fence::after_thread_sync: the tcgen05.ld is not ordered after the wait",
        anchor: &["tcgen05_fence_after_thread_sync", "tcgen05.ld"],
        from: "",
        to: "",
        applies: Applies::Every,
        expect: Expect::Caught,
        also: &[],
        caught_by: "",
    },
    Mutation {
        name: "wrong-parity",
        description: "the producer waits on load_empty with its round's parity (fill.phase(), \
                      (kb / STAGES) & 1) instead of the previous round's (fill.empty_parity()): the \
                      wait names the wrong phase (a race, or a hang)",
        // Only the producer's main-loop line waits on load_empty[slot]; the tail waits on
        // load_empty[fill.index()], the accumulator's waits on acc_empty.
        anchor: &["mbarrier_wait(&smem.load_empty[slot]", ".empty_parity()"],
        from: ".empty_parity()",
        to: ".phase()",
        applies: Applies::Every,
        expect: Expect::Caught,
        also: &[],
        caught_by: "",
    },
    Mutation {
        name: "no-wait-ld",
        description: "the epilogue never executes tcgen05.wait::ld: its tensor-memory loads are handed over (barrier, arrive) before they are known complete",
        anchor: &["tmem_wait_ld("],
        from: "",
        to: "",
        applies: Applies::Every,
        expect: Expect::Caught,
        also: &[],
        caught_by: "wait-ld-before-handoff",
    },
    Mutation {
        name: "early-acc-release",
        description: "acc_empty counts 4 arrivals instead of 8, so the MMA warp reuses the accumulator once one CTA's epilogue warps released it, while the other CTA's may still be reading it",
        anchor: &["mbarrier_init(&smem.acc_empty"],
        from: "CLUSTER * 4",
        to: "4",
        applies: Applies::Loops,
        expect: Expect::Caught,
        also: &[],
        caught_by: "",
    },
    Mutation {
        name: "skip-load-full-wait",
        description: "the MMA warp issues each k-block's MMAs without waiting on load_full: the tensor core may read a slot before its TMA loads landed",
        anchor: &["mbarrier_wait(&smem.load_full"],
        from: "",
        to: "",
        applies: Applies::Every,
        expect: Expect::Caught,
        also: &[],
        caught_by: "",
    },
    Mutation {
        name: "tma-wrong-cta-barrier",
        description: "each CTA's 2-CTA TMA loads signal its own load_full barrier instead of the pair leader's: the leader's barrier never receives the peer's bytes (a hang)",
        anchor: &["tma_load_2d_2cta", "bw::pair_leader(rank)"],
        from: "bw::pair_leader(rank)",
        to: "rank",
        applies: Applies::Pairs,
        expect: Expect::Caught,
        also: &[],
        caught_by: "",
    },
    Mutation {
        name: "wrong-acc-parity",
        description: "the epilogue waits on acc_full with the opposite parity: the wait returns for an older phase and reads an accumulator its MMAs have not finished",
        anchor: &["mbarrier_wait(&smem.acc_full"],
        from: ".phase());",
        to: ".phase() ^ 1);",
        applies: Applies::Loops,
        expect: Expect::Caught,
        also: &[],
        caught_by: "",
    },
    Mutation {
        name: "no-producer-tail",
        description: "the producer exits without waiting for the last load_empty phases: the leader's final multicast commits may land in a CTA that has already exited",
        anchor: &["mbarrier_wait(&smem.load_empty[fill.index()]"],
        from: "",
        to: "",
        applies: Applies::Pairs,
        expect: Expect::Caught,
        also: &[],
        caught_by: "",
    },
    Mutation {
        name: "no-first-round-guard",
        description: "the producer also waits on load_empty in the first round: harmless in \
                      practice, since a parity-1 wait on a fresh barrier falls through on hardware \
                      (the PTX ISA defines no phase before phase 0; the guard stays inside it)",
        anchor: &["mbarrier_wait(&smem.load_empty[slot]", "first_round()"],
        from: "if (",
        to: "if (true || ",
        applies: Applies::Every,
        expect: Expect::Harmless,
        also: &[],
        caught_by: "",
    },
    Mutation {
        name: "no-proxy-fence",
        description: "the epilogue issues its TMA store with no fence.proxy.async.shared::cta after writing the staging tile: the TMA engine (async proxy) may read the tile before the ordinary (generic-proxy) writes reach it",
        anchor: &["wb::fence_proxy_async_shared();"],
        from: "",
        to: "",
        applies: Applies::TmaStore,
        expect: Expect::Caught,
        also: &[],
        caught_by: "rule proxy-fence-before-store",
    },
    Mutation {
        name: "single-staging-buffer",
        description: "the epilogue stages every sub-tile in buffer 0, but still waits with wait_group.read 1: the next sub-tile overwrites the buffer the previous TMA store may still be reading",
        anchor: &["T* stage = smem.epilogue[", "[sub % 2]"],
        from: "[sub % 2]",
        to: "[0]",
        applies: Applies::TmaStore,
        expect: Expect::Caught,
        also: &[],
        caught_by: "rule wait-read-before-reuse",
    },
    Mutation {
        name: "wait-ld-after-use",
        description: "tcgen05.wait::ld comes after the epilogue converts the loaded registers: the tcgen05.ld is asynchronous, so they are read before they hold the accumulator",
        anchor: &["bw::tmem_wait_ld(acc);", "usable from here on"],
        from: "",
        to: "",
        applies: Applies::Every,
        expect: Expect::Caught,
        also: &[Edit {
            anchor: &["out[", "= static_cast<T>(__uint_as_float(acc["],
            from: "]));",
            to: "])); bw::tmem_wait_ld(acc);  // waited for only after the use",
        }],
        caught_by: "",
    },
    Mutation {
        name: "alloc-cta-group-1",
        description: "tensor memory is allocated, relinquished and freed with cta_group::1 in a kernel whose MMAs and commits are cta_group::2 (ptxas refuses it for sm_100a)",
        anchor: &["bw::tmem_", "_2cta("],
        from: "_2cta(",
        to: "(",
        applies: Applies::Pairs,
        expect: Expect::Caught,
        also: &[],
        caught_by: "rule one-cta-group",
    },
    Mutation {
        name: "acc-empty-extra-arrival",
        description: "acc_empty counts one arrival more than the epilogue warps of both CTAs make: the MMA warp waits forever before the cluster's second tile (a deadlock the hang report names)",
        anchor: &["mbarrier_init(&smem.acc_empty", "CLUSTER * 4"],
        from: "CLUSTER * 4",
        to: "CLUSTER * 4 + 1",
        applies: Applies::Loops,
        expect: Expect::Caught,
        also: &[],
        caught_by: "of its 9 arrivals; 1 missing",
    },
    Mutation {
        name: "expect-tx-too-many",
        description: "the producer announces 1024 transaction bytes more than its TMA loads deliver: load_full never completes its first phase (a deadlock the hang report names)",
        anchor: &["mbarrier_arrive_expect_tx(&smem.load_full[slot], "],
        from: "(&smem.load_full[slot], ",
        to: "(&smem.load_full[slot], 1024 + ",
        applies: Applies::Every,
        expect: Expect::Caught,
        also: &[],
        caught_by: "transaction bytes are missing",
    },
    // Cluster launch control (step 7). The emulation's stand-in (clc_emu.cuh) has no rules of
    // its own, so any catch counts there (`caught_by` empty); the simulator's rule for each is
    // pinned by runner/tests/step7.rs on the first schedule of every policy.
    Mutation {
        name: "clc-read-early",
        description: "every warp reads the try_cancel response without waiting on next_tile_full: the asynchronous write of the response may not have landed, so the warp reads the previous response (or none)",
        anchor: &["mbarrier_wait(&smem.next_tile_full"],
        from: "",
        to: "",
        applies: Applies::ClusterLaunchControl,
        expect: Expect::Caught,
        also: &[],
        caught_by: "",
    },
    Mutation {
        name: "clc-stale-response",
        description: "every warp waits on next_tile_full with the first round's parity (0) instead of its ring's: from the second tile on the wait returns at once, before the next response landed, and the warp decodes the id it already took",
        anchor: &["mbarrier_wait(&smem.next_tile_full", "next.phase()"],
        from: "next.phase()",
        to: "0",
        applies: Applies::ClusterLaunchControl,
        expect: Expect::Caught,
        also: &[],
        caught_by: "",
    },
    Mutation {
        name: "clc-stops-asking",
        description: "every warp treats any response after its first as a failure and leaves the tile loop after two tiles, although the request succeeded: the cluster it cancelled never runs and its tile is computed by nobody",
        anchor: &["const bool canceled = bw::clc_is_canceled(response);"],
        from: "bw::clc_is_canceled(response);",
        to: "bw::clc_is_canceled(response) && next.first_round();",
        applies: Applies::ClusterLaunchControl,
        expect: Expect::Caught,
        also: &[],
        caught_by: "",
    },
];

/// How the workbook catches a seeded bug of a Hopper twin, which runs natively: there is no
/// emulation to trap it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TwinCatch {
    /// The twin's static check (`common::static_check::check_twin`) refuses the build, naming
    /// the rule in `caught_by`. Cheaper and certain: where a rule can see the bug, it is the
    /// check, and a stress run adds nothing (a delay cannot slow a wgmma or a TMA copy, so a
    /// missing wait for one shows only by luck).
    Static,
    /// Only a run can show it: a race between threads that the usual timing hides. A stress run
    /// (`--stress SEED`, common::stress) must catch it on every one of the GPU check's seeds: a
    /// stress build carries the twin check (common.cuh's "Twin check builds"), which traps on a
    /// hand-off no wait orders whatever the timing, naming its rule (`caught_by`); where
    /// `caught_by` is empty, a wrong result or a hang counts too. A plain run may or may not.
    Stress,
}

/// A seeded bug of a Hopper twin (`src/kernel_sm90.cu`): an edit as for the Blackwell kernels,
/// and how it is caught.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TwinMutation {
    #[serde(flatten)]
    pub mutation: Mutation,
    pub caught: TwinCatch,
}

impl TwinMutation {
    /// Whether it edits `step`'s Hopper twin.
    pub fn applies_to(&self, step: &StepInfo) -> bool {
        self.mutation.applies_to(step, Arch::Hopper)
    }
}

pub const TWIN_MUTATIONS: &[TwinMutation] = &[
    TwinMutation {
        mutation: Mutation {
            name: "twin-wgmma-wait-shallow",
            description: "the consumer reads its accumulator after wgmma.wait_group 1 instead of 0: the tile's last wgmma group may still be writing the registers the epilogue reads",
            anchor: &["hp::wgmma_wait_group<0>();"],
            from: "<0>",
            to: "<1>",
            applies: Applies::Every,
            expect: Expect::Caught,
            also: &[],
            caught_by: "wgmma-wait-before-use",
        },
        caught: TwinCatch::Static,
    },
    TwinMutation {
        mutation: Mutation {
            name: "twin-no-staging-barriers",
            description: "the epilogue's named barriers are gone: warp 0 issues the TMA store of a sub-tile without waiting for the other three warps' rows, and they refill a staging buffer without waiting for warp 0's wait_group.read",
            anchor: &["hp::named_barrier_sync(barrier, 128);"],
            from: "",
            to: "",
            applies: Applies::Staged,
            expect: Expect::Caught,
            also: &[],
            caught_by: "barrier-before-store",
        },
        caught: TwinCatch::Static,
    },
    TwinMutation {
        mutation: Mutation {
            name: "twin-no-out-empty-wait",
            description: "a consumer writes its rows into `out` without waiting on out_empty: it overwrites the other consumer's rows before (or while) the store warp's TMA stores read them",
            anchor: &["mbarrier_wait(&smem.out_empty"],
            from: "",
            to: "",
            applies: Applies::StoreWarp,
            expect: Expect::Caught,
            also: &[],
            caught_by: "staging-rewrite-before-read",
        },
        caught: TwinCatch::Stress,
    },
    TwinMutation {
        mutation: Mutation {
            name: "twin-out-empty-same-tile-only",
            description: "consumer 0 no longer waits for the previous tile's consumer-1 rows to be read before refilling `out`: harmless while its next main loop outlasts the store warp's stores, wrong when the store warp is slow",
            anchor: &["mbarrier_wait(&smem.out_empty", "if (other_local >= 0)"],
            from: "if (other_local >= 0)",
            to: "if (consumer == 1)",
            applies: Applies::StoreWarp,
            expect: Expect::Caught,
            also: &[],
            caught_by: "staging-rewrite-before-read",
        },
        caught: TwinCatch::Stress,
    },
    TwinMutation {
        mutation: Mutation {
            name: "twin-out-full-one-arrival",
            description: "out_full counts 1 arrival instead of the consumer's 4 warps: the store warp ships `out` once the first warp's 16 rows are in, while the other warps may still be writing theirs",
            anchor: &["mbarrier_init(&smem.out_full[c], 4)"],
            from: "out_full[c], 4)",
            to: "out_full[c], 1)",
            applies: Applies::StoreWarp,
            expect: Expect::Caught,
            also: &[],
            caught_by: "",
        },
        caught: TwinCatch::Stress,
    },
    TwinMutation {
        mutation: Mutation {
            name: "twin-release-before-wgmma-done",
            description: "the main loop waits with wgmma.wait_group 2 instead of 1 before releasing the previous slot on load_empty: the slot goes back to the producer while the wgmma group reading it may still run",
            anchor: &["hp::wgmma_wait_group<1>();"],
            from: "<1>",
            to: "<2>",
            applies: Applies::Every,
            expect: Expect::Caught,
            also: &[],
            caught_by: "release-before-wgmma-done",
        },
        caught: TwinCatch::Stress,
    },
    TwinMutation {
        mutation: Mutation {
            name: "twin-release-before-wgmma-wait",
            description: "the consumer releases the previous slot on load_empty before its wgmma.wait_group 1 instead of after it: the group reading that slot may still run when the producer refills it",
            anchor: &["hp::wgmma_wait_group<1>();"],
            from: "",
            to: "",
            applies: Applies::Loops,
            expect: Expect::Caught,
            // The main loop's release (at least 10 spaces in, inside its `for r` loop), not the
            // one after it (8 or 6 spaces in): the tail's comes after wgmma.wait_group 0, where a
            // wait_group 1 more would change nothing. Step 7's twin names the slot by
            // `(it - 1) % STAGES`, the others by `release.index()`.
            also: &[Edit {
                anchor: &["          wb::mbarrier_arrive_cluster_relaxed(&smem.load_empty[", "], r);"],
                from: "r);",
                to: "r); hp::wgmma_wait_group<1>();  // waited for only after the release",
            }],
            caught_by: "release-before-wgmma-done",
        },
        caught: TwinCatch::Stress,
    },
    TwinMutation {
        mutation: Mutation {
            name: "twin-out-empty-before-read-retired",
            description: "the store warp frees `out` (out_empty) after cp.async.bulk.wait_group.read 1 instead of 0: the latest stores may still be reading it when the other consumer refills it",
            anchor: &["wb::tma_store_wait_read<0>();", "the other consumer may refill it"],
            from: "<0>",
            to: "<1>",
            applies: Applies::StoreWarp,
            expect: Expect::Caught,
            also: &[],
            caught_by: "staging-rewrite-before-read",
        },
        caught: TwinCatch::Stress,
    },
];

pub fn find(name: &str) -> Result<&'static Mutation> {
    match MUTATIONS.iter().find(|m| m.name == name) {
        Some(m) => Ok(m),
        None => bail!("unknown mutation {name:?}; known: {}", known_names()),
    }
}

/// A seeded bug of either kernel: the Blackwell kernels' [`MUTATIONS`], the twins'
/// [`TWIN_MUTATIONS`]; with the kernel it edits.
pub fn lookup(name: &str) -> Result<(&'static Mutation, Arch)> {
    if let Some(m) = MUTATIONS.iter().find(|m| m.name == name) {
        return Ok((m, Arch::Blackwell));
    }
    match TWIN_MUTATIONS.iter().find(|t| t.mutation.name == name) {
        Some(t) => Ok((&t.mutation, Arch::Hopper)),
        None => bail!("unknown mutation {name:?}; known: {}", known_names()),
    }
}

/// The twin mutation named `name`, if there is one.
pub fn find_twin(name: &str) -> Option<&'static TwinMutation> {
    TWIN_MUTATIONS.iter().find(|t| t.mutation.name == name)
}

fn known_names() -> String {
    MUTATIONS
        .iter()
        .chain(TWIN_MUTATIONS.iter().map(|t| &t.mutation))
        .map(|m| m.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Every seeded bug as `runner mutations --json` lists it: the Blackwell kernels' with
/// `"arch": "sm_100a"` and `"caught": "emulation"` (static checks off), then the twins' with
/// `"arch": "sm_90a"` and `"caught": "static" | "stress"`; each with the numbers of the `steps`
/// (of `ladder`) whose kernel it applies to.
pub fn listing(ladder: &[&StepInfo]) -> Result<serde_json::Value> {
    let mut out = Vec::new();
    let steps = |m: &Mutation, arch: Arch| -> serde_json::Value { m.steps(ladder, arch).into() };
    for m in MUTATIONS {
        let mut v = serde_json::to_value(m)?;
        if let serde_json::Value::Object(o) = &mut v {
            o.insert("steps".into(), steps(m, Arch::Blackwell));
            o.insert("arch".into(), Arch::Blackwell.sm().into());
            o.insert("kernel".into(), "blackwell".into());
            o.insert("caught".into(), "emulation".into());
        }
        out.push(v);
    }
    for t in TWIN_MUTATIONS {
        let mut v = serde_json::to_value(t)?;
        if let serde_json::Value::Object(o) = &mut v {
            o.insert("steps".into(), steps(&t.mutation, Arch::Hopper));
            o.insert("arch".into(), Arch::Hopper.sm().into());
            o.insert("kernel".into(), "hopper".into());
        }
        out.push(v);
    }
    Ok(serde_json::Value::Array(out))
}

impl Mutation {
    /// Whether it edits `step`'s kernel for `arch` (a Blackwell bug the Blackwell kernel, a
    /// twin's bug the twin).
    pub fn applies_to(&self, step: &StepInfo, arch: Arch) -> bool {
        self.applies.to(step.kernel(arch))
    }

    /// The numbers of the steps of `ladder` whose kernel for `arch` it edits.
    pub fn steps(&self, ladder: &[&StepInfo], arch: Arch) -> Vec<u32> {
        ladder
            .iter()
            .filter(|s| self.applies_to(s, arch))
            .map(|s| s.number)
            .collect()
    }

    /// The kernel with the bug seeded; an error if an anchor is not in it. Each of the
    /// mutation's line edits is an [`edits::Edit`] of every line its anchor matches.
    pub fn apply(&self, kernel: &str) -> Result<String> {
        let first = Edit {
            anchor: self.anchor,
            from: self.from,
            to: self.to,
        };
        let all: Vec<edits::Edit> = std::iter::once(&first)
            .chain(self.also)
            .map(|e| e.as_edit(self.name))
            .collect();
        edits::apply(
            &format!("mutation {}", self.name),
            kernel,
            &all,
            &BTreeMap::new(),
        )
    }
}

impl Edit {
    fn as_edit(&self, name: &str) -> edits::Edit {
        let (anchor, containing) = self.anchor.split_first().unwrap_or((&"", &[]));
        let (from, to, comment_out) = if self.from.is_empty() {
            (None, None, Some(format!("mutation {name}")))
        } else {
            (Some(self.from.to_string()), Some(self.to.to_string()), None)
        };
        edits::Edit {
            replace: Some(anchor.to_string()),
            containing: containing.iter().map(|c| c.to_string()).collect(),
            every: true,
            from,
            to,
            comment_out,
            ..edits::Edit::default()
        }
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
            .apply("  wb::mbarrier_wait(&smem.acc_full[acc_slot], acc_ring.phase());\n")
            .unwrap();
        assert!(
            parity.contains("acc_ring.phase() ^ 1);"),
            "{parity}: the other parity"
        );
        let tma = find("tma-wrong-cta-barrier").unwrap().apply(
            "      bw::tma_load_2d_2cta(smem.a[slot], &tmap_a, &smem.load_full[slot], bw::pair_leader(rank),\n",
        );
        assert!(tma.unwrap().contains("&smem.load_full[slot], rank,"));
        let producer = "      if (!fill.first_round()) wb::mbarrier_wait(&smem.load_empty[slot], fill.empty_parity());\n      wb::mbarrier_wait(&smem.load_full[slot], drain.phase());\n      wb::mbarrier_wait_cluster(&smem.acc_empty[acc_slot], acc_ring.empty_parity());\n      if (!fill.first_round()) wb::mbarrier_wait(&smem.load_empty[fill.index()], fill.empty_parity());\n";
        let e = find("wrong-parity").unwrap().apply(producer).unwrap();
        assert!(e.contains("load_empty[slot], fill.phase());"), "{e}");
        assert_eq!(
            e.lines().skip(1).collect::<Vec<_>>(),
            producer.lines().skip(1).collect::<Vec<_>>(),
            "the consumer's, the accumulator's and the tail's waits are untouched"
        );
        let tail = find("no-producer-tail").unwrap().apply(producer).unwrap();
        assert_eq!(
            tail.lines()
                .filter(|l| l.contains("[mutation no-producer-tail]"))
                .count(),
            1,
            "{tail}"
        );
        assert!(tail
            .lines()
            .last()
            .unwrap()
            .contains("[mutation no-producer-tail]"));
        let f = find("no-first-round-guard")
            .unwrap()
            .apply(producer)
            .unwrap();
        assert!(f.starts_with(
            "      if (true || !fill.first_round()) wb::mbarrier_wait(&smem.load_empty"
        ));
        assert_eq!(
            f.lines().skip(1).collect::<Vec<_>>(),
            producer.lines().skip(1).collect::<Vec<_>>()
        );
        assert!(find("nope").is_err());
    }

    #[test]
    fn a_mutation_with_further_edits_moves_a_line() {
        let k = "      bw::tmem_wait_ld(acc);  // acc is usable from here on\n        for (int e = 0; e < 8; ++e) out[e] = static_cast<T>(__uint_as_float(acc[j + e]));\n";
        let m = find("wait-ld-after-use").unwrap().apply(k).unwrap();
        let lines: Vec<&str> = m.lines().collect();
        assert!(lines[0].starts_with("// [mutation wait-ld-after-use] bw::tmem_wait_ld(acc);"));
        assert!(
            lines[1].ends_with(
                "acc[j + e])); bw::tmem_wait_ld(acc);  // waited for only after the use"
            ),
            "{m}"
        );
        // Each edit must apply.
        assert!(find("wait-ld-after-use")
            .unwrap()
            .apply(k.lines().next().unwrap())
            .is_err());
        let cg = find("alloc-cta-group-1")
            .unwrap()
            .apply("    bw::tmem_alloc_2cta(&smem.tmem_base, TMEM_COLS);\n    bw::tmem_relinquish_alloc_permit_2cta();\n    bw::mma_f16_2cta(tmem_acc, a, b, idesc, true);\n    bw::tmem_dealloc_2cta(tmem_acc, TMEM_COLS);\n")
            .unwrap();
        assert!(cg.contains("bw::tmem_alloc(&smem.tmem_base"));
        assert!(cg.contains("bw::tmem_relinquish_alloc_permit();"));
        assert!(cg.contains("bw::tmem_dealloc(tmem_acc"));
        assert!(
            cg.contains("bw::mma_f16_2cta("),
            "the MMAs stay cta_group::2"
        );
    }
}
