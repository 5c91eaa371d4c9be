//! Step 1: warp specialization. Step 0's single loop split into roles: warp 0 only issues TMA
//! loads, warp 1 only issues tcgen05 MMAs; all four warps run the epilogue.

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
    number: 1,
    crate_dir: "steps/step1_warp_specialization",
    title: "Warp specialization",
    idea: "one warp only loads, another only multiplies: neither waits for the other's latency",
    kernel: include_str!("kernel.cu"),
    host: include_str!("lib.rs"),
    chapter: "book/src/step1.md",
    sass_expect: &["UTMALDG", "UTCHMMA", "UTCBAR", "LDTM", "UTCATOMSWS"],
};

#[derive(Debug, Clone, Copy)]
pub struct Step1 {
    pub config: Config,
}

impl Step for Step1 {
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
        // As step 0: only the roles inside the CTA changed.
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
