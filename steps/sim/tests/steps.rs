//! Every stock Blackwell kernel's sm_100a PTX, simulated and verified against an fp64
//! reference.

mod gemm;

use gemm::{facts, fixture, simulate_gemm, Dtype};
use sim::Policy;

fn check(
    step: u32,
    dtype: Dtype,
    m: u32,
    n: u32,
    k: u32,
    seed: u64,
    policy: Policy,
    max_clusters: u32,
) {
    let name = format!(
        "step{step}.{}",
        if dtype == Dtype::F16 { "f16" } else { "bf16" }
    );
    let f = facts(step);
    let out = simulate_gemm(
        &fixture(&name),
        &f,
        m,
        n,
        k,
        dtype,
        seed,
        policy,
        max_clusters,
    )
    .unwrap_or_else(|e| panic!("{name} {m}x{n}x{k} seed {seed} {}: {e}", policy.name()));
    assert_eq!(
        out.bad, 0,
        "{name} {m}x{n}x{k}: {} wrong elements, first {:?}, max error {}",
        out.bad, out.first_bad, out.max_err
    );
    assert!(out.report.executed("tcgen05.mma") > 0, "no MMA executed");
}

#[test]
fn step0_f16_verifies() {
    check(0, Dtype::F16, 256, 256, 128, 1, Policy::Random, 148);
}
