//! Step 4: persistent kernel. Only as many 2-CTA clusters as fit on the GPU are launched; each
//! loops over output tiles, so set-up happens once per CTA and tiles follow each other closely.
//! The Hopper twin loops the same way: the producer loads the next tile while the consumers
//! store this one.

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
    number: 4,
    crate_dir: "steps/step4_persistent",
    title: "Persistent kernel",
    idea: "launch one cluster per SM pair and loop over tiles: set-up once, no tail of launches",
    hopper_idea: "as many clusters as fit loop over tiles: set-up once, and the producer loads tile i + 1 while the consumers store tile i",
    blackwell: KernelFile {
        text: include_str!("kernel.cu"),
        params: BLACKWELL,
        sass_expect: &["UTMALDG.2D.2CTA", "UTCHMMA.2CTA", "UTCBAR.2CTA.MULTICAST", "LDTM", "UTCATOMSWS.2CTA", "UTMASTG"],
        // One cluster per SM pair, looping over tiles.
        launch: Launch::Blackwell(BlackwellLaunch {
            cluster: 2,
            threads: 128,
            schedule: Schedule::Persistent,
        }),
        epilogue: Epilogue::Staged,
        lookahead: Lookahead::Ring,
    },
    hopper: KernelFile {
        text: include_str!("kernel_sm90.cu"),
        params: HOPPER,
        sass_expect: &["UTMALDG", "HGMMA", "USETMAXREG", "UTMASTG", "UTMALDG.2D.MULTICAST"],
        // As many clusters as fit, looping over tiles.
        launch: Launch::Hopper(HopperLaunch {
            cluster: 2,
            consumers: 2,
            schedule: Schedule::Persistent,
        }),
        epilogue: Epilogue::Staged,
        lookahead: Lookahead::RingLess(1),
    },
    host: include_str!("lib.rs"),
    chapter: "book/src/step4.md",
};
