//! Step 6: grid tiling. The persistent loop visits tiles as a planar snake over bands of
//! `grid_tile_width` tiles, so the tiles in flight at once share operand blocks in L2. The Hopper
//! twin visits its tiles in the same order, from the same function.

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
    ("grid_tile_width", 8), // tiles per band of the visiting order
    ("grid_minor_dim", 1), // the dimension bands are cut across: 0 = M, 1 = N (see `common::model::tiling::MinorDim`)
];

/// Tuning parameters of the Hopper twin.
pub const HOPPER: &[(&str, u32)] = &[
    ("tile_m", 128),
    ("tile_n", 256),
    ("tile_k", 64),
    ("stages", 4),
    ("epilogue_tile_n", 64),
    ("grid_tile_width", 8), // tiles per band of the visiting order
    ("grid_minor_dim", 1), // the dimension bands are cut across: 0 = M, 1 = N (see `common::model::tiling::MinorDim`)
];
// ANCHOR_END: config

pub static INFO: StepInfo = StepInfo {
    number: 6,
    crate_dir: "steps/step6_grid_tiling",
    title: "Grid tiling",
    idea: "visit tiles in a snake over narrow bands, so concurrent tiles reuse operands from L2",
    hopper_idea:
        "the consumers and the store warp visit tiles in the same snake order as the Blackwell step",
    blackwell: KernelFile {
        text: include_str!("kernel.cu"),
        params: BLACKWELL,
        sass_expect: &[
            "UTMALDG.2D.2CTA",
            "UTCHMMA.2CTA",
            "UTCBAR.2CTA.MULTICAST",
            "LDTM",
            "UTCATOMSWS.2CTA",
            "UTMASTG",
        ],
        // As step 5: only the order of the tiles changed.
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
        sass_expect: &[
            "UTMALDG",
            "HGMMA",
            "USETMAXREG",
            "UTMASTG",
            "UTMALDG.2D.MULTICAST",
        ],
        // As step 5's twin: only the order of the tiles changed.
        launch: Launch::Hopper(HopperLaunch {
            cluster: 2,
            consumers: 2,
            schedule: Schedule::Persistent,
        }),
        epilogue: Epilogue::StoreWarp,
        lookahead: Lookahead::RingLess(1),
    },
    host: include_str!("lib.rs"),
    chapter: "book/src/step6.md",
};
