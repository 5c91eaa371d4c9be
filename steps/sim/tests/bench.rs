//! Speed of the simulator on the benchmark shapes (not timed tests: run with
//! `cargo test --release -p sim --test bench -- --ignored --nocapture`).

mod gemm;

use gemm::{facts, fixture, Dtype, Problem};
use sim::{Options, Policy, Program};
use std::time::Instant;

fn bench(step: u32, m: u32, n: u32, k: u32, max_clusters: u32) {
    let name = format!("step{step}.f16");
    let t0 = Instant::now();
    let prog = Program::parse(&fixture(&name)).unwrap();
    let parse = t0.elapsed().as_secs_f64();
    let mut p = Problem::new(m, n, k, Dtype::F16, 1);
    let l = p.launch(&facts(step), max_clusters).unwrap();
    let mut dev = std::mem::take(&mut p.dev);
    let t1 = Instant::now();
    let r = sim::run(
        &prog,
        &mut dev,
        &l,
        &Options {
            policy: Policy::Random,
            ..Options::default()
        },
    )
    .unwrap();
    let run = t1.elapsed().as_secs_f64();
    let t2 = Instant::now();
    let (bad, _, _) = p.verify(&dev);
    let verify = t2.elapsed().as_secs_f64();
    assert_eq!(bad, 0);
    eprintln!(
        "{name} {m}x{n}x{k}: parse {parse:.3} s, simulate {run:.3} s ({} instructions, {:.1} M/s), verify (fp64 reference) {verify:.3} s",
        r.instructions,
        r.instructions as f64 / run / 1e6
    );
}

#[test]
#[ignore]
fn speed() {
    bench(0, 256, 256, 128, 148);
    bench(6, 512, 512, 256, 148);
    bench(6, 512, 512, 256, 1);
    bench(6, 2048, 2048, 512, 8);
}
