//! Step 3: collective (2-CTA) MMA. Clusters of two CTAs share one tcgen05.mma.cta_group::2 of
//! M = 256: each CTA loads its own rows of A and half of B's rows, halving B traffic per SM. The
//! Hopper twin: each CTA of the pair loads half of the shared B tile and multicasts it to both.

use common::step::{
    BlackwellLaunch, Epilogue, HopperLaunch, KernelFile, Launch, Lookahead, Schedule, StepInfo,
};

// ANCHOR: config
/// Tuning parameters of the Blackwell kernel; each reaches it as `WB_<NAME>`.
pub const BLACKWELL: &[(&str, u32)] = &[
    ("tile_m", 128),
    ("tile_n", 128),
    ("tile_k", 64),
    ("stages", 4),
    ("epilogue_tile_n", 64),
];

/// Tuning parameters of the Hopper twin.
pub const HOPPER: &[(&str, u32)] = &[
    ("tile_m", 128),
    ("tile_n", 256),
    ("tile_k", 64),
    ("stages", 4),
    ("epilogue_tile_n", 64),
];
// ANCHOR_END: config

pub static INFO: StepInfo = StepInfo {
    number: 3,
    crate_dir: "steps/step3_collective_mma",
    title: "Collective 2-CTA MMA",
    idea: "two CTAs of a cluster share one M = 256 MMA: each loads half of B, so each SM moves fewer bytes per FLOP",
    hopper_idea: "two CTAs of a cluster on tiles that share B: each loads half of B's rows and multicasts it to both",
    blackwell: KernelFile {
        text: include_str!("kernel.cu"),
        params: BLACKWELL,
        sass_expect: &["UTMALDG.2D.2CTA", "UTCHMMA.2CTA", "UTCBAR.2CTA.MULTICAST", "LDTM", "UTCATOMSWS.2CTA", "UTMASTG"],
        // Pairs of CTAs share one M = 256 MMA.
        launch: Launch::Blackwell(BlackwellLaunch {
            cluster: 2,
            threads: 128,
            schedule: Schedule::OnePerTile,
        }),
        epilogue: Epilogue::Staged,
        lookahead: Lookahead::Ring,
    },
    hopper: KernelFile {
        text: include_str!("kernel_sm90.cu"),
        params: HOPPER,
        sass_expect: &["UTMALDG", "HGMMA", "USETMAXREG", "UTMASTG", "UTMALDG.2D.MULTICAST"],
        // Pairs of CTAs along M share B through TMA multicast.
        launch: Launch::Hopper(HopperLaunch {
            cluster: 2,
            consumers: 2,
            schedule: Schedule::OnePerTile,
        }),
        epilogue: Epilogue::Staged,
        lookahead: Lookahead::RingLess(1),
    },
    host: include_str!("lib.rs"),
    chapter: "book/src/step3.md",
};
