//! Step 3: collective (2-CTA) MMA. Clusters of two CTAs share one tcgen05.mma.cta_group::2 of
//! M = 256: each CTA loads its own rows of A and half of B's rows, halving B traffic per SM.

use common::step::{KernelShape, Step, StepInfo};

// ANCHOR: config
/// Tuning parameters; each reaches the kernel as `WB_<NAME>`.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub tile_m: u32,
    pub tile_n: u32,
    pub tile_k: u32,
    pub stages: u32,
    pub epilogue_tile_n: u32,
}

impl Config {
    pub const DEFAULT: Config = Config {
        tile_m: 128,
        tile_n: 128,
        tile_k: 64,
        stages: 4,
        epilogue_tile_n: 64,
    };
}

// ANCHOR_END: config

pub static INFO: StepInfo = StepInfo {
    number: 3,
    crate_dir: "steps/step3_collective_mma",
    title: "Collective 2-CTA MMA",
    idea: "two CTAs of a cluster share one M = 256 MMA: each loads half of B, so each SM moves fewer bytes per FLOP",
    kernel: include_str!("kernel.cu"),
    host: include_str!("lib.rs"),
    chapter: "book/src/step3.md",
    sass_expect: &[
        "UTMALDG.2D.2CTA",
        "UTCHMMA.2CTA",
        "UTCBAR.2CTA.MULTICAST",
        "LDTM",
        "UTCATOMSWS.2CTA",
        "UTMASTG",
    ],
};

#[derive(Debug, Clone, Copy)]
pub struct Step3 {
    pub config: Config,
}

impl Step for Step3 {
    fn info(&self) -> &'static StepInfo {
        &INFO
    }

    fn params(&self) -> Vec<(&'static str, u32)> {
        let c = self.config;
        vec![
            ("tile_m", c.tile_m),
            ("tile_n", c.tile_n),
            ("tile_k", c.tile_k),
            ("stages", c.stages),
            ("epilogue_tile_n", c.epilogue_tile_n),
        ]
    }

    fn kernel(&self) -> KernelShape {
        let c = self.config;
        // Pairs of CTAs share one cta_group::2 MMA.
        KernelShape {
            tile_m: c.tile_m,
            tile_n: c.tile_n,
            tile_k: c.tile_k,
            stages: c.stages,
            epilogue_tile_n: c.epilogue_tile_n,
            cluster: 2,
            threads: 128,
            persistent: false,
        }
    }
}
