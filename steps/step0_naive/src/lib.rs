//! Step 0: the basic pipelined Blackwell kernel. One CTA per output tile; one warp issues both
//! the TMA loads and the tcgen05 MMAs; the accumulator lives in tensor memory.

use common::gpu::{GpuInfo, LaunchDims};
use common::step::{require_multiple, OutputArg, Plan, Step, StepInfo};
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
        require_multiple("M", s.m, c.tile_m as usize, 0)?;
        require_multiple("N", s.n, c.tile_n as usize, 0)?;
        require_multiple("K", s.k, c.tile_k as usize, 0)
    }

    fn plan(&self, s: Shape, _gpu: Option<&GpuInfo>) -> Plan {
        let c = self.config;
        let stage_bytes = (c.tile_m + c.tile_n) * c.tile_k * 2;
        // The stages, one 1024-byte block for the barriers and the tensor-memory address
        // (SharedStorage rounds up to its 1024-byte alignment), and 1024 bytes of slack for
        // aligning the dynamic shared-memory base by hand.
        let smem_bytes = c.stages * stage_bytes + 1024 + 1024;
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
