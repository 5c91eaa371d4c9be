//! Step 7: the last wave. One cluster per tile is launched; a running cluster cancels the launch
//! of one that has not started (`clusterlaunchcontrol.try_cancel`) and computes its tile instead,
//! so the hardware balances the last wave. Hopper has no cluster launch control: its twin keeps
//! step 6's persistent grid and splits only the last, partial wave's tiles along K (stream-K).

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
    number: 7,
    crate_dir: "steps/step7_last_wave",
    title: "The last wave",
    idea: "launch one cluster per tile and let running clusters cancel the launches of those that have not started (cluster launch control), so the hardware balances the last wave",
    hopper_idea:
        "keep the persistent grid's whole waves and split only the last, partial wave's k-blocks evenly over every cluster (stream-K, with a fix-up through a workspace), where that saves more k-blocks than the fix-up costs",
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
            "UGETNEXTWORKID", // clusterlaunchcontrol.try_cancel
        ],
        // One cluster per tile launched; the running ones take the tiles of those they cancel.
        launch: Launch::Blackwell(BlackwellLaunch {
            cluster: 2,
            threads: 256,
            schedule: Schedule::ClusterLaunchControl,
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
        // Step 6's persistent grid (as many clusters as fit at once); the kernel itself decides
        // from the launch whether to split the last wave (`split_tail` in its schedule block).
        launch: Launch::Hopper(HopperLaunch {
            cluster: 2,
            consumers: 2,
            schedule: Schedule::Persistent,
        }),
        epilogue: Epilogue::StoreWarp,
        lookahead: Lookahead::RingLess(1),
    },
    host: include_str!("lib.rs"),
    chapter: "book/src/step7.md",
};
