//! Every cost of a run is bounded whatever the kernel does (`sim::budget`): an MMA and a copy are
//! charged by their size, the host's deadline stops a run, a module too large to hold is refused
//! when decoded.

mod gemm;

use gemm::{facts, fixture, Dtype, Problem};
use sim::budget::{Deadline, MACS_PER_STEP, MAX_GLOBAL_BYTES};
use sim::{Options, Policy, Program, SimError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

fn run_step3(o: &Options, m: u32, n: u32, k: u32) -> Result<sim::RunReport, SimError> {
    let prog = Program::parse(&fixture("step3.f16")).unwrap();
    let mut p = Problem::new(m, n, k, Dtype::F16, 1);
    let l = p.launch(&facts(3), 1).unwrap();
    let mut dev = std::mem::take(&mut p.dev);
    sim::run(&prog, &mut dev, &l, o)
}

#[test]
fn an_mma_is_charged_by_its_multiply_adds() {
    let o = Options {
        policy: Policy::Random,
        ..Options::default()
    };
    let r = run_step3(&o, 256, 256, 256).unwrap();
    let executed: u64 = r.per_opcode.iter().map(|(_, n)| n).sum();
    let mmas: u64 = r
        .per_opcode
        .iter()
        .filter(|(op, _)| op.starts_with("tcgen05.mma"))
        .map(|(_, n)| n)
        .sum();
    assert!(mmas > 0);
    // The 2-CTA MMA of step 3 is at least 128 x 64 x 16 multiply-adds.
    let mma_steps = mmas * 128 * 64 * 16 / MACS_PER_STEP;
    assert!(
        r.steps >= executed + mma_steps,
        "{} steps for {executed} instructions and {mmas} MMAs",
        r.steps
    );
    // `instructions` stays what it says: the instructions executed, not the charged steps.
    // (Every counted opcode is an executed instruction; a branch is executed and not counted.)
    assert!(r.instructions >= executed);
    assert!(r.instructions < r.steps);
    // A budget that covers the instructions alone, not the MMAs' work, stops the run.
    let short = Options {
        max_steps: executed + mma_steps / 2,
        ..o.clone()
    };
    assert!(matches!(
        run_step3(&short, 256, 256, 256),
        Err(SimError::StepLimit { .. })
    ));
}

/// The charged rates keep a step's time within a small factor whatever the mix: the wall time per
/// step of step 3 (MMA- and TMA-heavy) against step 0 (instructions only). Printed for
/// calibrating `MACS_PER_STEP` and `BYTES_PER_STEP`; asserted within a factor of 8.
#[test]
fn a_step_costs_about_the_same_whatever_the_instruction() {
    let per_step = |fixture_name: &str, step: u32| {
        let prog = Program::parse(&fixture(fixture_name)).unwrap();
        let mut p = Problem::new(256, 256, 256, Dtype::F16, 1);
        let l = p.launch(&facts(step), 1).unwrap();
        let mut dev = std::mem::take(&mut p.dev);
        let t = Instant::now();
        let r = sim::run(&prog, &mut dev, &l, &Options::default()).unwrap();
        t.elapsed().as_secs_f64() / r.steps as f64
    };
    let plain = per_step("step0.f16", 0);
    let heavy = per_step("step3.f16", 3);
    eprintln!(
        "ns per step: step 0 {:.1}, step 3 {:.1}",
        plain * 1e9,
        heavy * 1e9
    );
    assert!(heavy < plain * 8.0 && plain < heavy * 8.0);
}

#[test]
fn the_hosts_deadline_stops_a_run() {
    let asked = Arc::new(AtomicU64::new(0));
    let a = asked.clone();
    let o = Options {
        // Time is up at the third question.
        deadline: Some(Deadline::new(move || {
            a.fetch_add(1, Ordering::Relaxed) >= 2
        })),
        ..Options::default()
    };
    let e = run_step3(&o, 256, 256, 512).unwrap_err();
    assert!(matches!(e, SimError::Deadline { .. }), "{e}");
    assert_eq!(asked.load(Ordering::Relaxed), 3);
    // A deadline never reached changes nothing.
    let o = Options {
        deadline: Some(Deadline::new(|| false)),
        ..Options::default()
    };
    run_step3(&o, 256, 256, 128).unwrap();
}

#[test]
fn a_huge_device_global_is_refused_when_decoded() {
    let module = |bytes: u64| {
        format!(
            ".version 9.0\n.target sm_100a\n.address_size 64\n.global .align 4 .b8 big[{bytes}];\n.visible .entry k()\n{{\n\tret;\n}}\n"
        )
    };
    let e = Program::parse(&module(16 << 30)).unwrap_err();
    assert!(matches!(e, SimError::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("256 MiB"), "{e}");
    // Control: a module at the limit decodes.
    Program::parse(&module(MAX_GLOBAL_BYTES)).unwrap();
    // Static shared memory past what a CTA has is refused too (it would not fit the launch's
    // arithmetic).
    let shared = ".version 9.0\n.target sm_100a\n.address_size 64\n.shared .align 4 .b8 s[4294967312];\n.visible .entry k()\n{\n\tret;\n}\n";
    assert!(matches!(
        Program::parse(shared),
        Err(SimError::Unsupported { .. })
    ));
}

/// The ordering rules' bookkeeping grows with the work, not with its square: twice the K (twice
/// the MMAs, commits and refills in flight over one launch) costs about twice the time.
#[test]
fn rule_bookkeeping_stays_linear_in_the_mmas() {
    let time = |k: u32| {
        let t = Instant::now();
        let r = run_step3(&Options::default(), 256, 256, k).unwrap();
        (t.elapsed().as_secs_f64(), r.steps)
    };
    let _ = time(256);
    let (t1, s1) = time(1024);
    let (t2, s2) = time(4096);
    eprintln!("K=1024: {t1:.3}s {s1} steps; K=4096: {t2:.3}s {s2} steps");
    // 4x the work: well under 4x squared.
    assert!(t2 < t1 * 8.0, "{t1} s then {t2} s");
}
