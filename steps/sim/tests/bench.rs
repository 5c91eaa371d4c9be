//! Speed of the simulator on the benchmark shapes (not timed tests: run with
//! `cargo test --release -p sim --test bench -- --ignored --nocapture`).

mod gemm;

use gemm::{facts, fixture, mutant, Dtype, Problem};
use sim::{Options, Policy, Program, SimError};
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

/// How long after the last thread blocks a deadlock is reported: a seeded deadlock (step 6's
/// `acc-empty-extra-arrival`, one cluster looping over four tiles, async-late) run whole, minus
/// the same schedule stopped by the step limit just before the instruction the deadlock was
/// found after (the same seed executes the same instructions up to there). Medians of `runs`
/// of each; prints one `deadlock-latency {json}` line for `scripts/sim-speed.py`.
#[test]
#[ignore]
fn deadlock_latency() {
    let runs: usize = std::env::var("SIM_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let prog = Program::parse(&mutant("acc-empty-extra-arrival", 6).unwrap()).unwrap();
    let mut p = Problem::new(512, 512, 512, Dtype::F16, 1);
    let l = p.launch(&facts(6), 1).unwrap();
    let dev = std::mem::take(&mut p.dev);
    let o = Options {
        seed: 1,
        policy: Policy::AsyncLate,
        ..Options::default()
    };
    // The instruction count at which the deadlock was found, from the trace's last line.
    let traced = Options {
        trace: true,
        ..o.clone()
    };
    let stop = sim::run_traced(&prog, &mut dev.clone(), &l, &traced).unwrap_err();
    assert!(
        matches!(stop.error, SimError::Deadlock { .. }),
        "{}",
        stop.error
    );
    let found_at: u64 = stop
        .trace
        .iter()
        .rev()
        .find_map(|e| {
            let (n, rest) = e.trim_start().split_once(' ')?;
            rest.starts_with("stopped:").then(|| n.parse().ok())?
        })
        .expect("the trace ends with the stop");
    let time = |o: &Options, want_deadlock: bool| {
        let t = Instant::now();
        let e = sim::run(&prog, &mut dev.clone(), &l, o).unwrap_err();
        let s = t.elapsed().as_secs_f64();
        assert_eq!(matches!(e, SimError::Deadlock { .. }), want_deadlock, "{e}");
        s
    };
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let before = Options {
        max_steps: found_at - 1,
        ..o.clone()
    };
    let (mut whole, mut upto) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        whole.push(time(&o, true));
        upto.push(time(&before, false));
    }
    let (w, u) = (median(whole.clone()), median(upto.clone()));
    println!(
        "deadlock-latency {{\"case\": \"step 6 acc-empty-extra-arrival, 512x512x512 f16, 1 cluster, seed 1 async-late\", \"instructions_to_deadlock\": {found_at}, \"runs\": {runs}, \"whole_run_s\": {whole:?}, \"run_to_last_block_s\": {upto:?}, \"median_whole_s\": {w:.6}, \"median_to_last_block_s\": {u:.6}, \"latency_s\": {:.6}}}",
        (w - u).max(0.0)
    );
}

/// Every stock step (f16) at the runner's default shapes (256 x 256 x 512, persistent kernels
/// 768 x 512 x 512 with up to 148 clusters), one seeded run each: the wall time of each
/// simulation (run with `-- --ignored --nocapture`; `SIM_SMS=2` runs one cluster at a time).
#[test]
#[ignore]
fn default_shapes() {
    for step in 0..=6 {
        let f = facts(step);
        let (m, n, k) = if f.persistent {
            (768, 512, 512)
        } else {
            (256, 256, 512)
        };
        let prog = Program::parse(&fixture(&format!("step{step}.f16"))).unwrap();
        let mut p = Problem::new(m, n, k, Dtype::F16, 1);
        let l = p.launch(&f, 148).unwrap();
        let mut dev = std::mem::take(&mut p.dev);
        let t = Instant::now();
        let o = Options {
            sms: std::env::var("SIM_SMS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(148),
            ..Options::default()
        };
        let r = sim::run(&prog, &mut dev, &l, &o).unwrap();
        let s = t.elapsed().as_secs_f64();
        assert_eq!(p.verify(&dev).0, 0);
        eprintln!(
            "default shape step {step} {m}x{n}x{k}: {s:.3} s, {} instructions, {} clusters",
            r.instructions, r.clusters
        );
    }
}
