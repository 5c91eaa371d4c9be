//! Step 0: the basic pipelined Blackwell kernel. One CTA per output tile; one warp issues both
//! the TMA loads and the tcgen05 MMAs; the accumulator lives in tensor memory.

use common::gpu::{GpuInfo, LaunchDims};
use common::step::{check_tiled, ring_smem_bytes, OutputArg, Plan, Step, StepInfo};
use common::Shape;

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

impl Default for Config {
    fn default() -> Self {
        Config::DEFAULT
    }
}

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

#[derive(Debug, Clone, Copy, Default)]
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

    fn check_shape(&self, s: Shape) -> Result<(), String> {
        let c = self.config;
        check_tiled(s, c.tile_m, c.tile_n, c.tile_k, INFO.number)
    }

    fn plan(&self, s: Shape, _gpu: Option<&GpuInfo>) -> Plan {
        let c = self.config;
        let smem_bytes = ring_smem_bytes(c.stages, c.tile_m, c.tile_n, c.tile_k, 0);
        Plan {
            dims: LaunchDims {
                grid: ((s.n as u32) / c.tile_n, (s.m as u32) / c.tile_m, 1),
                block: 128,
                cluster: (1, 1, 1),
                smem_bytes,
            },
            a_box: (c.tile_m, c.tile_k),
            b_box: (c.tile_n, c.tile_k),
            output: OutputArg::Pointer,
        }
    }
}
