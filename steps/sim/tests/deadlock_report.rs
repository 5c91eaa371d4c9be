//! The deadlock report (`deadlock.rs`): lanes of one warp at different places are each shown,
//! the root waiter is named, and transaction bytes that came before their expect_tx are told.

use sim::{run, Device, Launch, Options, Param, Program, SimError};

const HEAD: &str = ".version 9.0\n.target sm_100a\n.address_size 64\n";

fn deadlock_of(body: &str, threads: u32) -> Vec<String> {
    let ptx = format!(
        "{HEAD}.extern .shared .align 1024 .b8 smem_raw[];\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{{\n\t.reg .pred %p<16>;\n\t.reg .b32 %r<64>;\n\t.reg .b64 %rd<16>;\n\tmov.u32 %r1, %tid.x;\n{body}\n\tret;\n}}\n"
    );
    let p = Program::parse(&ptx).expect("parses");
    let mut dev = Device::new();
    let out = dev.alloc(64);
    let l = Launch {
        kernel: "k".into(),
        grid: [1, 1, 1],
        block: [threads, 1, 1],
        cluster: [1, 1, 1],
        dynamic_smem: 1024,
        params: vec![Param::U64(out)],
        barrier_names: vec![
            (0, "full".into()),
            (8, "empty".into()),
            (16, "bytes".into()),
        ],
        sources: vec![],
    };
    match run(&p, &mut dev, &l, &Options::default()) {
        Err(SimError::Deadlock { report }) => report,
        other => panic!("wanted a deadlock, got {other:?}"),
    }
}

/// `wait PARITY` on the barrier at `reg`, as a loop.
fn wait(label: &str, reg: &str, parity: u32) -> String {
    format!(
        "
	{label}:
	{{
	.reg .pred w;
	mbarrier.try_wait.parity.shared::cta.b64 w, [{reg}], {parity};
	selp.u32 %r4, 1, 0, w;
	}}
	setp.eq.u32 %p9, %r4, 0;
	@%p9 bra {label};"
    )
}

#[test]
fn lanes_apart_are_shown_apart_and_the_root_waiter_is_named() {
    // "empty" (count 1): warp 1 lane 0 arrives once (phase 0), then waits on "full" (count 1),
    // on which nothing ever arrives, before it would arrive again. Warp 0 lane 0 waits for
    // phase 1 of "empty"; warp 0 lanes 1-31 wait on "full". The root: the waiters on "full".
    let body = format!(
        "
	mov.u32 %r2, smem_raw;
	add.s32 %r3, %r2, 8;
	setp.eq.u32 %p1, %r1, 0;
	@%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
	@%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
	bar.sync 0;
	setp.eq.u32 %p2, %r1, 32;
	@%p2 bra $L_producer;
	setp.ge.u32 %p3, %r1, 32;
	@%p3 bra $L_end;
	@!%p1 bra $L_lanes;
	{}
	{}
	bra.uni $L_end;
	$L_lanes:
	{}
	bra.uni $L_end;
	$L_producer:
	mbarrier.arrive.shared::cta.b64 _, [%r3];
	{}
	mbarrier.arrive.shared::cta.b64 _, [%r3];
	$L_end:",
        wait("$L_w0", "%r3", 0),
        wait("$L_w1", "%r3", 1),
        wait("$L_w2", "%r2", 0),
        wait("$L_w3", "%r2", 0),
    );
    let report = deadlock_of(&body, 64);
    let text = report.join("\n");
    let warp0: Vec<&String> = report
        .iter()
        .filter(|l| l.contains("warp 0 (") && !l.starts_with("root waiter"))
        .collect();
    assert_eq!(warp0.len(), 2, "warp 0's lanes at two places: {text}");
    assert!(text.contains("lane(s) 0 at"), "{text}");
    assert!(text.contains("lane(s) 1-31 at"), "{text}");
    // Barriers by name, never by offset alone.
    assert!(text.contains("waits on empty of CTA rank 0"), "{text}");
    let root = report
        .iter()
        .find(|l| l.starts_with("root waiter"))
        .unwrap_or_else(|| panic!("no root waiter: {text}"));
    assert!(root.contains("waits on full"), "{root}");
}

#[test]
fn bytes_that_came_before_their_expect_tx_are_reported() {
    // complete_tx of 64 bytes, then expect_tx of 64 with the arrive: the tx-count went below
    // zero first; here the arrive then completes nothing the waiter waits for (count 2).
    let body = format!(
        "
	mov.u32 %r2, smem_raw;
	add.s32 %r5, %r2, 16;
	setp.eq.u32 %p1, %r1, 0;
	@!%p1 bra $L_end;
	mbarrier.init.shared::cta.b64 [%r5], 2;
	mbarrier.complete_tx.shared::cta.b64 [%r5], 64;
	{}
	$L_end:",
        wait("$L_w", "%r5", 0)
    );
    let report = deadlock_of(&body, 32);
    let text = report.join("\n");
    assert!(
        text.contains("64 transaction bytes arrived before"),
        "{text}"
    );
    assert!(text.contains("waits on bytes"), "{text}");
    assert!(text.contains("root waiter"), "{text}");
}
