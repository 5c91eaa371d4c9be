//! Step 1: warp specialization. Step 0's single loop split into roles: warp 0 only issues TMA
//! loads, warp 1 only issues tcgen05 MMAs; all four warps run the epilogue. The Hopper twin: a
//! producer warpgroup only loads, two consumer warpgroups only multiply, and setmaxnreg moves
//! the producer's registers to the consumers.

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
    ("tile_n", 256),
    ("tile_k", 64),
    ("stages", 4),
];
// ANCHOR_END: config

pub static INFO: StepInfo = StepInfo {
    number: 1,
    crate_dir: "steps/step1_warp_specialization",
    title: "Warp specialization",
    idea: "one warp only loads, another only multiplies: neither waits for the other's latency",
    hopper_idea: "a producer warpgroup only loads, two consumer warpgroups only multiply; setmaxnreg gives the consumers the registers a 128 x 256 tile needs",
    blackwell: KernelFile {
        text: include_str!("kernel.cu"),
        params: BLACKWELL,
        sass_expect: &["UTMALDG", "UTCHMMA", "UTCBAR", "LDTM", "UTCATOMSWS"],
        // As step 0: only the roles inside the CTA changed.
        launch: Launch::Blackwell(BlackwellLaunch {
            cluster: 1,
            threads: 128,
            schedule: Schedule::OnePerTile,
        }),
        epilogue: Epilogue::Registers,
        lookahead: Lookahead::Ring,
    },
    hopper: KernelFile {
        text: include_str!("kernel_sm90.cu"),
        params: HOPPER,
        sass_expect: &["UTMALDG", "HGMMA", "USETMAXREG"],
        // A producer warpgroup and two consumer warpgroups of 64 x 256 each.
        launch: Launch::Hopper(HopperLaunch {
            cluster: 1,
            consumers: 2,
            schedule: Schedule::OnePerTile,
        }),
        epilogue: Epilogue::Registers,
        lookahead: Lookahead::RingLess(1),
    },
    host: include_str!("lib.rs"),
    chapter: "book/src/step1.md",
};
