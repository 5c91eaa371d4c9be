//! Step 0: the basic pipelined kernel. One CTA per output tile; one warp issues both the TMA
//! loads and the tcgen05 MMAs; the accumulator lives in tensor memory. The Hopper twin: one
//! warpgroup issues both the loads and wgmma; the accumulator lives in its registers.

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
];

/// Tuning parameters of the Hopper twin.
pub const HOPPER: &[(&str, u32)] = &[
    ("tile_m", 128),
    ("tile_n", 128),
    ("tile_k", 64),
    ("stages", 4),
];
// ANCHOR_END: config

pub static INFO: StepInfo = StepInfo {
    number: 0,
    crate_dir: "steps/step0_naive",
    title: "Basic pipelined kernel",
    idea: "TMA fills a ring of shared-memory stages, tcgen05.mma accumulates in tensor memory, one warp drives both",
    hopper_idea: "one warpgroup runs a single loop that issues TMA loads into the ring and wgmma on the landed slots; the accumulator lives in its registers",
    blackwell: KernelFile {
        text: include_str!("kernel.cu"),
        params: BLACKWELL,
        sass_expect: &["UTMALDG", "UTCHMMA", "UTCBAR", "LDTM", "UTCATOMSWS"],
        // One CTA per 128 x 256 tile, 4 warps, C stored from registers.
        launch: Launch::Blackwell(BlackwellLaunch {
            cluster: 1,
            threads: 128,
            schedule: Schedule::OnePerTile,
        }),
        epilogue: Epilogue::Registers,
        lookahead: Lookahead::RingLess(2),
    },
    hopper: KernelFile {
        text: include_str!("kernel_sm90.cu"),
        params: HOPPER,
        sass_expect: &["UTMALDG", "HGMMA", "SYNCS"],
        // One warpgroup per 128 x 128 tile: its registers hold the accumulator, which caps the tile.
        launch: Launch::Hopper(HopperLaunch {
            cluster: 1,
            consumers: 1,
            schedule: Schedule::OnePerTile,
        }),
        epilogue: Epilogue::Registers,
        lookahead: Lookahead::RingLess(2),
    },
    host: include_str!("lib.rs"),
    chapter: "book/src/step0.md",
};
