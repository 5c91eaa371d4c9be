//! What `--trace` and the barrier reports say, in a student's words (review finding N10, issue 37
//! item 7): barriers by the name the kernel gave them, sizes with units, never a Rust tuple such
//! as `landed in [(1, 33792)]` or `[(0, 164896, 0)] (cta, offset, phase)`.

mod gemm;

use gemm::{facts, fixture, Dtype, Problem};
use sim::{run, run_traced, Device, Launch, Options, Program};

/// Step 3's stock kernel (a 2-CTA cluster: multicast TMA loads, commits to both CTAs), traced.
fn step3_trace() -> Vec<String> {
    let prog = Program::parse(&fixture("step3.f16")).expect("the fixture parses");
    let mut p = Problem::new(256, 512, 512, Dtype::F16, 5);
    let l = p.launch(&facts(3), 148).expect("a legal shape");
    let o = Options {
        trace: true,
        ..Options::default()
    };
    let r = run(&prog, &mut p.dev, &l, &o).expect("the stock kernel runs");
    assert_eq!(p.verify(&p.dev).0, 0, "the stock kernel verifies");
    r.trace
}

#[test]
fn trace_lines_name_barriers_and_sizes_in_words() {
    let trace = step3_trace();
    let find = |what: &[&str]| {
        trace
            .iter()
            .find(|l| what.iter().all(|w| l.contains(w)))
            .unwrap_or_else(|| panic!("no trace line with {what:?}"))
            .clone()
    };
    // A TMA load: its bytes with a unit, where they landed, the barrier by its name.
    let landed = find(&["TMA load", "landed"]);
    assert!(
        landed.contains(" KiB into shared-memory offset 0x"),
        "{landed}"
    );
    assert!(
        landed.contains("(complete_tx on smem.load_full["),
        "{landed}"
    );
    let issued = find(&["TMA load issued"]);
    assert!(issued.contains("completes on smem.load_full["), "{issued}");
    // A commit: each barrier by name with its phase.
    let arrived = find(&["tcgen05.commit", "arrived on"]);
    assert!(arrived.contains("of CTA rank 0 (phase "), "{arrived}");
    assert!(arrived.contains("smem."), "{arrived}");
    let commit = find(&["tcgen05.commit issued"]);
    assert!(commit.contains("will arrive on smem."), "{commit}");
    // A phase completing: the barrier's name, not its offset.
    let phase = find(&["completes phase"]);
    assert!(phase.contains(": smem."), "{phase}");
    // No line prints a tuple or a bare offset for a barrier.
    for l in &trace {
        assert!(!l.contains("[("), "a Rust tuple in {l}");
        assert!(!l.contains("(cta, offset, phase)"), "{l}");
        assert!(!l.contains("mbarrier at 0x"), "{l}");
        assert!(!l.contains("barrier at 0x"), "{l}");
    }
}

/// A kernel that waits on a barrier nobody initialised, at dynamic shared-memory offset 8.
const UNINIT_WAIT: &str = "
.version 9.0
.target sm_100a
.address_size 64
.extern .shared .align 16 .b8 smem[];
.visible .entry k()
{
\t.reg .pred %p<2>;
\t.reg .b32 %r<4>;
\tmov.u32 %r1, smem;
\tadd.u32 %r2, %r1, 8;
\tmbarrier.try_wait.parity.shared.b64 %p1, [%r2], 0;
\tret;
}
";

fn uninit_wait(names: Vec<(u32, String)>) -> String {
    let prog = Program::parse(UNINIT_WAIT).expect("parses");
    let l = Launch {
        kernel: "k".into(),
        grid: [1, 1, 1],
        block: [32, 1, 1],
        cluster: [1, 1, 1],
        dynamic_smem: 64,
        params: vec![],
        barrier_names: names,
        sources: vec![],
    };
    let mut dev = Device::new();
    match run_traced(&prog, &mut dev, &l, &Options::default()) {
        Ok(_) => panic!("a wait on an uninitialised barrier ran"),
        Err(s) => s.error.to_string(),
    }
}

#[test]
fn a_barrier_that_holds_nothing_is_named_where_the_kernel_names_it() {
    let named = uninit_wait(vec![(8, "smem.ready".into())]);
    assert!(named.contains("smem.ready of CTA rank 0"), "{named}");
    // The control: with no name for that place, its offset is all there is to say.
    let unnamed = uninit_wait(vec![]);
    assert!(!unnamed.contains("smem.ready"), "{unnamed}");
    assert!(unnamed.contains("shared-memory offset 0x"), "{unnamed}");
}
