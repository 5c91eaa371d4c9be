//! Step 5: dedicated epilogue warpgroup. A second warpgroup only runs the epilogue, and the
//! accumulator is double-buffered in tensor memory, so tile i's epilogue overlaps tile i+1's MMAs.
//! The Hopper twin has no tensor memory to hand over: its accumulators live in the consumer
//! warpgroups' registers. What it moves off their critical path is the stores: each consumer
//! writes its rows of C into a shared `out` tile and returns to its wgmma, and a dedicated store
//! warp issues the TMA stores. (Ping-pong, where the two consumers take turns on different tiles,
//! halves the tile each consumer multiplies and loses on Hopper: it is a bench contender and an
//! exercise of chapter 5, `exercises/hopper/step5_pingpong_sm90.toml`.)

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
    number: 5,
    crate_dir: "steps/step5_epilogue_warpgroup",
    title: "Epilogue warpgroup",
    idea: "a second warpgroup drains one tensor-memory accumulator while the MMAs fill the other",
    hopper_idea: "the consumers hand their rows of C to a dedicated store warp through shared memory and go back to their wgmma: the TMA stores overlap the next tile's math",
    blackwell: KernelFile {
        text: include_str!("kernel.cu"),
        params: BLACKWELL,
        sass_expect: &["UTMALDG.2D.2CTA", "UTCHMMA.2CTA", "UTCBAR.2CTA.MULTICAST", "LDTM", "UTCATOMSWS.2CTA", "UTMASTG"],
        // Two warpgroups: producer/MMA and epilogue.
        launch: Launch::Blackwell(BlackwellLaunch {
            cluster: 2,
            threads: 256,
            schedule: Schedule::Persistent,
        }),
        epilogue: Epilogue::Warpgroup,
        lookahead: Lookahead::Ring,
    },
    hopper: KernelFile {
        text: include_str!("kernel_sm90.cu"),
        params: HOPPER,
        sass_expect: &["UTMALDG", "HGMMA", "USETMAXREG", "UTMASTG", "UTMALDG.2D.MULTICAST"],
        // As step 4's twin: the store warp is one of the producer warpgroup's, and `out`
        // (one consumer's 64 rows) is the size of step 4's staging buffers.
        launch: Launch::Hopper(HopperLaunch {
            cluster: 2,
            consumers: 2,
            schedule: Schedule::Persistent,
        }),
        epilogue: Epilogue::StoreWarp,
        lookahead: Lookahead::RingLess(1),
    },
    host: include_str!("lib.rs"),
    chapter: "book/src/step5.md",
};
