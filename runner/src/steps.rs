//! The ladder: every step crate, in order.

use anyhow::{bail, Result};
use common::Step;

static STEP0: step0_naive::Step0 = step0_naive::Step0 {
    config: step0_naive::Config::DEFAULT,
};

static STEP1: step1_warp_specialization::Step1 = step1_warp_specialization::Step1 {
    config: step1_warp_specialization::Config::DEFAULT,
};

static STEP2: step2_tiled_epilogue::Step2 = step2_tiled_epilogue::Step2 {
    config: step2_tiled_epilogue::Config::DEFAULT,
};

static STEP3: step3_collective_mma::Step3 = step3_collective_mma::Step3 {
    config: step3_collective_mma::Config::DEFAULT,
};

static STEP4: step4_persistent::Step4 = step4_persistent::Step4 {
    config: step4_persistent::Config::DEFAULT,
};

static STEP5: step5_epilogue_warpgroup::Step5 = step5_epilogue_warpgroup::Step5 {
    config: step5_epilogue_warpgroup::Config::DEFAULT,
};

static STEP6: step6_grid_tiling::Step6 = step6_grid_tiling::Step6 {
    config: step6_grid_tiling::Config::DEFAULT,
};

pub fn all() -> Vec<&'static dyn Step> {
    vec![&STEP0, &STEP1, &STEP2, &STEP3, &STEP4, &STEP5, &STEP6]
}

pub fn get(n: u32) -> Result<&'static dyn Step> {
    let steps = all();
    match steps.iter().find(|s| s.info().number == n) {
        Some(s) => Ok(*s),
        None => bail!(
            "there is no step {n}; steps available: {}",
            steps
                .iter()
                .map(|s| s.info().number.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
