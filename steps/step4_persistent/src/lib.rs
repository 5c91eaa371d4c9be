//! Step 4: persistent kernel. Only as many 2-CTA clusters as fit on the GPU are launched; each
//! loops over output tiles, so set-up happens once per CTA and tiles follow each other closely.

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
    number: 4,
    crate_dir: "steps/step4_persistent",
    title: "Persistent kernel",
    idea: "launch one cluster per SM pair and loop over tiles: set-up once, no tail of launches",
    kernel: include_str!("kernel.cu"),
    host: include_str!("lib.rs"),
    chapter: "book/src/step4.md",
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
pub struct Step4 {
    pub config: Config,
}

impl Step for Step4 {
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
        // One cluster per SM pair, looping over tiles.
        KernelShape {
            tile_m: c.tile_m,
            tile_n: c.tile_n,
            tile_k: c.tile_k,
            stages: c.stages,
            epilogue_tile_n: c.epilogue_tile_n,
            cluster: 2,
            threads: 128,
            persistent: true,
        }
    }
}
