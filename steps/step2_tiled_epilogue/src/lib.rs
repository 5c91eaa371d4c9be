//! Step 2: tiled epilogue. The accumulator leaves in column sub-tiles through a double-buffered
//! shared-memory staging tile and TMA stores, so tensor-memory reads overlap global writes.

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
        tile_n: 256,
        tile_k: 64,
        stages: 4,
        epilogue_tile_n: 64,
    };
}

// ANCHOR_END: config

pub static INFO: StepInfo = StepInfo {
    number: 2,
    crate_dir: "steps/step2_tiled_epilogue",
    title: "Tiled epilogue",
    idea: "store the accumulator in sub-tiles through double-buffered shared memory and TMA, overlapping reads and writes",
    kernel: include_str!("kernel.cu"),
    host: include_str!("lib.rs"),
    chapter: "book/src/step2.md",
    sass_expect: &["UTMALDG", "UTCHMMA", "UTCBAR", "LDTM", "UTCATOMSWS", "UTMASTG"],
};

#[derive(Debug, Clone, Copy)]
pub struct Step2 {
    pub config: Config,
}

impl Step for Step2 {
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
        // C leaves through per-warp staging tiles and TMA stores.
        KernelShape {
            tile_m: c.tile_m,
            tile_n: c.tile_n,
            tile_k: c.tile_k,
            stages: c.stages,
            epilogue_tile_n: c.epilogue_tile_n,
            cluster: 1,
            threads: 128,
            persistent: false,
        }
    }
}
