//! Step 6: grid tiling. The persistent loop visits tiles as a planar snake over bands of
//! `grid_tile_width` tiles, so the tiles in flight at once share operand blocks in L2.

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
    /// Tiles per band of the visiting order.
    pub grid_tile_width: u32,
    /// The dimension bands are cut across: 0 = M, 1 = N (see `common::tiling::MinorDim`).
    pub grid_minor_dim: u32,
}

impl Config {
    pub const DEFAULT: Config = Config {
        tile_m: 128,
        tile_n: 128,
        tile_k: 64,
        stages: 4,
        epilogue_tile_n: 64,
        grid_tile_width: 8,
        grid_minor_dim: 1,
    };
}

// ANCHOR_END: config

pub static INFO: StepInfo = StepInfo {
    number: 6,
    crate_dir: "steps/step6_grid_tiling",
    title: "Grid tiling",
    idea: "visit tiles in a snake over narrow bands, so concurrent tiles reuse operands from L2",
    kernel: include_str!("kernel.cu"),
    host: include_str!("lib.rs"),
    chapter: "book/src/step6.md",
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
pub struct Step6 {
    pub config: Config,
}

impl Step for Step6 {
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
            ("grid_tile_width", c.grid_tile_width),
            ("grid_minor_dim", c.grid_minor_dim),
        ]
    }

    fn kernel(&self) -> KernelShape {
        let c = self.config;
        // As step 5: only the order of the tiles changed.
        KernelShape {
            tile_m: c.tile_m,
            tile_n: c.tile_n,
            tile_k: c.tile_k,
            stages: c.stages,
            epilogue_tile_n: c.epilogue_tile_n,
            cluster: 2,
            threads: 256,
            persistent: true,
        }
    }
}
