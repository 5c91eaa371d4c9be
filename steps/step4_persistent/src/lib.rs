//! Step 4: persistent kernel. Only as many 2-CTA clusters as fit on the GPU are launched; each
//! loops over output tiles, so set-up happens once per CTA and tiles follow each other closely.

use common::gpu::{GpuInfo, LaunchDims};
use common::step::{
    check_tiled, persistent_ctas, ring_smem_bytes, OutputArg, Plan, Step, StepInfo,
};
use common::Shape;

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

impl Default for Config {
    fn default() -> Self {
        Config::DEFAULT
    }
}

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

#[derive(Debug, Clone, Copy, Default)]
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

    fn check_shape(&self, s: Shape) -> Result<(), String> {
        let c = self.config;
        // A cluster covers 2 * tile_m rows and 2 * tile_n columns.
        check_tiled(s, 2 * c.tile_m, 2 * c.tile_n, c.tile_k, INFO.number)
    }

    fn plan(&self, s: Shape, gpu: Option<&GpuInfo>) -> Plan {
        let c = self.config;
        let num_tiles = ((s.m as u32) / (2 * c.tile_m)) * ((s.n as u32) / (2 * c.tile_n));
        // Per warp, two 32-row staging tiles of epilogue_tile_n 16-bit columns.
        let staging = 4 * 2 * 32 * c.epilogue_tile_n * 2;
        let smem_bytes = ring_smem_bytes(c.stages, c.tile_m, c.tile_n, c.tile_k, staging);
        Plan {
            dims: LaunchDims {
                // One cluster per pair of SMs (at most one per tile); each loops over tiles.
                grid: (persistent_ctas(num_tiles, gpu, 2), 1, 1),
                block: 128,
                cluster: (2, 1, 1),
                smem_bytes,
            },
            a_box: (c.tile_m, c.tile_k),
            b_box: (c.tile_n, c.tile_k),
            output: OutputArg::TensorMap {
                box_rows: 32,
                box_cols: c.epilogue_tile_n,
            },
        }
    }
}
