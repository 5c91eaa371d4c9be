//! Step 0: the basic pipelined Blackwell kernel. One CTA per output tile; one warp issues both
//! the TMA loads and the tcgen05 MMAs; the accumulator lives in tensor memory.

use common::step::{KernelShape, Step, StepInfo};

// ANCHOR: config
/// Tuning parameters; each reaches the kernel as `WB_<NAME>`.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub tile_m: u32,
    pub tile_n: u32,
    pub tile_k: u32,
    pub stages: u32,
}

impl Config {
    pub const DEFAULT: Config = Config {
        tile_m: 128,
        tile_n: 256,
        tile_k: 64,
        stages: 4,
    };
}

// ANCHOR_END: config

pub static INFO: StepInfo = StepInfo {
    number: 0,
    crate_dir: "steps/step0_naive",
    title: "Basic pipelined kernel",
    idea: "TMA fills a ring of shared-memory stages, tcgen05.mma accumulates in tensor memory, one warp drives both",
    kernel: include_str!("kernel.cu"),
    host: include_str!("lib.rs"),
    chapter: "book/src/step0.md",
    sass_expect: &["UTMALDG", "UTCHMMA", "UTCBAR", "LDTM", "UTCATOMSWS"],
};

#[derive(Debug, Clone, Copy)]
pub struct Step0 {
    pub config: Config,
}

impl Step for Step0 {
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
        ]
    }

    fn kernel(&self) -> KernelShape {
        let c = self.config;
        // One CTA per 128 x 256 tile, 4 warps, C stored from registers.
        KernelShape {
            tile_m: c.tile_m,
            tile_n: c.tile_n,
            tile_k: c.tile_k,
            stages: c.stages,
            epilogue_tile_n: 0,
            cluster: 1,
            threads: 128,
            persistent: false,
        }
    }
}
