//! Step 2: tiled epilogue. The accumulator leaves in column sub-tiles through a double-buffered
//! shared-memory staging tile and TMA stores, so tensor-memory reads overlap global writes. The
//! Hopper twin does the same from the consumers' registers.

use common::step::{
    BlackwellLaunch, Epilogue, HopperLaunch, KernelFile, Launch, Lookahead, Schedule, StepInfo,
};

// ANCHOR: config
/// Tuning parameters of the Blackwell kernel; each reaches it as `WB_<NAME>`.
pub const BLACKWELL: &[(&str, u32)] = &[
    ("tile_m", 128),
    ("tile_n", 256),
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
    number: 2,
    crate_dir: "steps/step2_tiled_epilogue",
    title: "Tiled epilogue",
    idea: "store the accumulator in sub-tiles through double-buffered shared memory and TMA, overlapping reads and writes",
    hopper_idea: "consumers store C in 64-row sub-tiles through double-buffered swizzled shared memory and TMA stores",
    blackwell: KernelFile {
        text: include_str!("kernel.cu"),
        params: BLACKWELL,
        sass_expect: &["UTMALDG", "UTCHMMA", "UTCBAR", "LDTM", "UTCATOMSWS", "UTMASTG"],
        // C leaves through per-warp staging tiles and TMA stores.
        launch: Launch::Blackwell(BlackwellLaunch {
            cluster: 1,
            threads: 128,
            schedule: Schedule::OnePerTile,
        }),
        epilogue: Epilogue::Staged,
        lookahead: Lookahead::Ring,
    },
    hopper: KernelFile {
        text: include_str!("kernel_sm90.cu"),
        params: HOPPER,
        sass_expect: &["UTMALDG", "HGMMA", "USETMAXREG", "UTMASTG"],
        // C leaves through per-warpgroup staging tiles and TMA stores.
        launch: Launch::Hopper(HopperLaunch {
            cluster: 1,
            consumers: 2,
            schedule: Schedule::OnePerTile,
        }),
        epilogue: Epilogue::Staged,
        lookahead: Lookahead::RingLess(1),
    },
    host: include_str!("lib.rs"),
    chapter: "book/src/step2.md",
};
