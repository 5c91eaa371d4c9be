//! The happens-before checker (`check/hb.rs`) on the first schedule (default `Options`): for
//! each class of ordering bug a planted kernel that must be reported with its rule name, and a
//! harmless control that must pass. Hand-written PTX in the style of `interp.rs`, and edits of
//! the stock step-3 kernel's PTX.

mod gemm;

use gemm::{facts, Dtype, Problem};
use sim::{run, Device, Launch, Options, Param, Program, SimError};

const HEAD: &str = ".version 9.0\n.target sm_100a\n.address_size 64\n";

/// `body` in a kernel of `threads` threads per CTA and `cluster` CTAs (one cluster), with
/// `%r1` = `%tid.x`, `%rd4` = this thread's 64 bytes of the output, `smem_raw` dynamic shared
/// memory; one run with the default options (the first schedule).
fn run_body(body: &str, threads: u32, cluster: u32) -> Result<(), SimError> {
    let ptx = format!(
        "{HEAD}.extern .shared .align 1024 .b8 smem_raw[];\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{{\n\t.reg .pred %p<16>;\n\t.reg .b32 %r<64>;\n\t.reg .b64 %rd<16>;\n\tld.param.u64 %rd1, [k_param_0];\n\tcvta.to.global.u64 %rd2, %rd1;\n\tmov.u32 %r1, %tid.x;\n\tmul.wide.u32 %rd3, %r1, 64;\n\tadd.s64 %rd4, %rd2, %rd3;\n{body}\n\tret;\n}}\n"
    );
    let p = Program::parse(&ptx)?;
    let mut dev = Device::new();
    let out = dev.alloc(64 * (threads * cluster) as u64);
    let l = Launch {
        kernel: "k".into(),
        grid: [cluster, 1, 1],
        block: [threads, 1, 1],
        cluster: [cluster, 1, 1],
        dynamic_smem: 8192,
        params: vec![Param::U64(out)],
        barrier_names: vec![],
        sources: vec![],
    };
    let o = Options {
        max_steps: 1_000_000,
        ..Options::default()
    };
    run(&p, &mut dev, &l, &o).map(|_| ())
}

fn rule_of(r: Result<(), SimError>) -> String {
    match r {
        Err(SimError::Rule { rule, .. }) => rule.to_string(),
        Err(e) => format!("not a rule: {e}"),
        Ok(()) => "passed".into(),
    }
}

/// Both sides of a race are named with their lines.
fn assert_race(r: Result<(), SimError>, rule: &str) {
    let text = match &r {
        Err(e) => e.to_string(),
        Ok(()) => String::new(),
    };
    assert_eq!(rule_of(r), rule, "{text}");
    assert!(
        text.matches("PTX line").count() >= 2,
        "both sides named: {text}"
    );
}

#[test]
fn shared_memory_race_between_warps_and_its_bar_sync_control() {
    // Thread 0 writes a word; thread 32 (another warp) reads it.
    let body = |sync: &str| {
        format!(
            "
	mov.u32 %r2, smem_raw;
	setp.eq.u32 %p1, %r1, 0;
	setp.eq.u32 %p2, %r1, 32;
	@%p1 st.shared.u32 [%r2], 7;
	{sync}
	@%p2 ld.shared.u32 %r3, [%r2];
	@%p2 st.global.u32 [%rd4], %r3;"
        )
    };
    assert_race(run_body(&body(""), 64, 1), "data-race");
    assert_eq!(rule_of(run_body(&body("bar.sync 0;"), 64, 1)), "passed");
    // bar.warp.sync orders lanes of one warp only: thread 32 is in another.
    assert_race(run_body(&body("bar.warp.sync -1;"), 64, 1), "data-race");
}

/// CTA rank 1 writes a word of CTA rank 0's shared memory; rank 0 reads it after the cluster
/// barrier, whose arrive is `arrive`.
fn peer_write(arrive: &str) -> String {
    format!(
        "
	mov.u32 %r2, smem_raw;
	mov.u32 %r5, %cluster_ctarank;
	setp.eq.u32 %p1, %r1, 0;
	setp.eq.u32 %p2, %r5, 1;
	and.pred %p3, %p1, %p2;
	mov.u32 %r9, 0;
	mapa.shared::cluster.u32 %r6, %r2, %r9;
	@%p3 st.shared::cluster.u32 [%r6], 7;
	{arrive}
	barrier.cluster.wait.acquire.aligned;
	setp.eq.u32 %p4, %r5, 0;
	and.pred %p5, %p1, %p4;
	@%p5 ld.shared.u32 %r7, [%r2];
	@%p5 st.global.u32 [%rd4], %r7;"
    )
}

#[test]
fn a_peer_write_needs_a_release_of_the_cluster_barrier() {
    assert_eq!(
        rule_of(run_body(
            &peer_write("barrier.cluster.arrive.release.aligned;"),
            32,
            2
        )),
        "passed"
    );
    // A relaxed arrive releases nothing: the read is not ordered after the peer's write.
    assert_race(
        run_body(
            &peer_write("barrier.cluster.arrive.relaxed.aligned;"),
            32,
            2,
        ),
        "data-race",
    );
}

/// CTA rank 1 writes a word of rank 0's shared memory, then arrives (`.release.cluster`) on
/// rank 0's barrier; rank 0 waits with `wait` and reads the word.
fn remote_arrive(wait: &str) -> String {
    format!(
        "
	mov.u32 %r2, smem_raw;
	add.s32 %r30, %r2, 64;
	mov.u32 %r5, %cluster_ctarank;
	setp.eq.u32 %p1, %r1, 0;
	setp.eq.u32 %p2, %r5, 1;
	and.pred %p3, %p1, %p2;
	setp.eq.u32 %p4, %r5, 0;
	and.pred %p5, %p1, %p4;
	@%p5 mbarrier.init.shared::cta.b64 [%r30], 1;
	fence.mbarrier_init.release.cluster;
	barrier.cluster.arrive.release.aligned;
	barrier.cluster.wait.acquire.aligned;
	mov.u32 %r9, 0;
	mapa.shared::cluster.u32 %r6, %r2, %r9;
	mapa.shared::cluster.u32 %r8, %r30, %r9;
	@%p3 st.shared::cluster.u32 [%r6], 7;
	@%p3 mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r8];
	@!%p5 bra $L_done;
	$L_wait:
	{{
	.reg .pred w;
	{wait} w, [%r30], 0;
	selp.u32 %r4, 1, 0, w;
	}}
	setp.eq.u32 %p6, %r4, 0;
	@%p6 bra $L_wait;
	ld.shared.u32 %r7, [%r2];
	st.global.u32 [%rd4], %r7;
	$L_done:
	barrier.cluster.arrive.release.aligned;
	barrier.cluster.wait.acquire.aligned;"
    )
}

#[test]
fn a_cta_scoped_acquire_does_not_synchronise_with_a_peer_cluster_release() {
    assert_eq!(
        rule_of(run_body(
            &remote_arrive("mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64"),
            32,
            2
        )),
        "passed"
    );
    let r = run_body(
        &remote_arrive("mbarrier.try_wait.parity.shared::cta.b64"),
        32,
        2,
    );
    let text = format!("{r:?}");
    assert_eq!(rule_of(r), "cluster-scope-sync", "{text}");
}

/// tcgen05.cp by thread 0 into tensor memory, committed to a barrier; `wait_then_ld` decides
/// who waits and how the other warps are ordered before reading the columns back.
fn handoff(wait_then_ld: &str) -> String {
    format!(
        "
	mov.u32 %r2, smem_raw;
	add.s32 %r30, %r2, 64;
	add.s32 %r31, %r2, 1024;
	setp.eq.u32 %p1, %r1, 0;
	setp.lt.u32 %p3, %r1, 32;
	@%p1 mbarrier.init.shared::cta.b64 [%r30], 1;
	@%p3 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r2], 32;
	@%p3 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
	shl.b32 %r5, %r1, 5;
	add.s32 %r6, %r31, %r5;
	st.shared.v4.u32 [%r6], {{%r1, %r1, %r1, %r1}};
	st.shared.v4.u32 [%r6+16], {{%r1, %r1, %r1, %r1}};
	fence.proxy.async.shared::cta;
	tcgen05.fence::before_thread_sync;
	bar.sync 0;
	tcgen05.fence::after_thread_sync;
	ld.shared.u32 %r3, [%r2];
	cvt.u64.u32 %rd5, %r31;
	shr.u64 %rd6, %rd5, 4;
	and.b64 %rd7, %rd6, 16383;
	or.b64 %rd8, %rd7, 70437464178688;
	@%p1 tcgen05.cp.cta_group::1.128x256b [%r3], %rd8;
	@%p1 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r30];
	{wait_then_ld}
	and.b32 %r15, %r1, 96;
	shl.b32 %r16, %r15, 16;
	add.s32 %r17, %r3, %r16;
	tcgen05.ld.sync.aligned.32x32b.x8.b32 {{%r20, %r21, %r22, %r23, %r24, %r25, %r26, %r27}}, [%r17];
	tcgen05.wait::ld.sync.aligned;
	st.global.u32 [%rd4], %r20;
	tcgen05.fence::before_thread_sync;
	bar.sync 0;
	tcgen05.fence::after_thread_sync;
	@%p3 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r3, 32;"
    )
}

const WARP0_WAITS: &str = "
	@!%p3 bra $L_waited;
	$L_wait:
	{
	.reg .pred w;
	mbarrier.try_wait.parity.shared::cta.b64 w, [%r30], 0;
	selp.u32 %r4, 1, 0, w;
	}
	setp.eq.u32 %p2, %r4, 0;
	@%p2 bra $L_wait;
	$L_waited:";

#[test]
fn a_wait_handed_on_through_bar_sync_and_the_fence_is_credited() {
    // The standard hand-off: warp 0 waits, bar.sync, tcgen05.fence::after_thread_sync, every
    // warp reads tensor memory. Clean (ld-after-commit-wait used to flag it).
    let ok = format!("{WARP0_WAITS}\n\tbar.sync 0;\n\ttcgen05.fence::after_thread_sync;");
    assert_eq!(rule_of(run_body(&handoff(&ok), 128, 1)), "passed");
    // Without the bar.sync the other warps read columns whose commit they are not ordered
    // after (the commit may even be in flight).
    let bad = format!("{WARP0_WAITS}\n\ttcgen05.fence::after_thread_sync;");
    // (Or, where the warps run in lockstep and a reading warp gets there before the copy
    // landed: the read of columns nothing wrote yet, the same bug seen by its effect.)
    let r = rule_of(run_body(&handoff(&bad), 128, 1));
    assert!(
        r == "ld-after-commit-wait" || r == "ld-in-flight" || r == "uninitialised-read",
        "wanted a read before the wait, got {r}"
    );
    // Warp 0 waits after the bar.sync: its wait is not handed on, whatever the schedule.
    let late = format!(
        "bar.sync 0;\n\ttcgen05.fence::after_thread_sync;\n{WARP0_WAITS}\n\ttcgen05.fence::after_thread_sync;"
    );
    let r = rule_of(run_body(&handoff(&late), 128, 1));
    assert!(
        r == "ld-after-commit-wait" || r == "ld-in-flight" || r == "uninitialised-read",
        "wanted a read before the wait, got {r}"
    );
}

fn step3_first_schedule(ptx: &str) -> Result<(), SimError> {
    let prog = Program::parse(ptx)?;
    let mut p = Problem::new(256, 512, 256, Dtype::F16, 3);
    let l = p.launch(&facts(3), 148).expect("launch");
    let mut dev = std::mem::take(&mut p.dev);
    run(&prog, &mut dev, &l, &Options::default()).map(|_| ())
}

#[test]
fn step3_stock_is_clean_on_the_first_schedule() {
    assert_eq!(
        rule_of(step3_first_schedule(&gemm::fixture("step3.f16"))),
        "passed"
    );
}

#[test]
fn alloc_handoff_without_its_fence_is_caught_on_the_first_schedule() {
    let stock = gemm::fixture("step3.f16");
    // The set-up's tcgen05.fence::before_thread_sync (after tcgen05.alloc), only.
    let ptx = stock.replacen("tcgen05.fence::before_thread_sync;", "", 1);
    assert_ne!(ptx, stock);
    let r = step3_first_schedule(&ptx);
    let text = format!("{r:?}");
    assert_eq!(rule_of(r), "fence-before-handoff", "{text}");
    assert!(text.contains("tcgen05.alloc"), "{text}");
}

#[test]
fn a_peer_using_a_barrier_before_its_init_is_ordered_is_caught_on_the_first_schedule() {
    let stock = gemm::fixture("step3.f16");
    // The set-up's cluster barrier (init -> fence.mbarrier_init -> cluster barrier -> use).
    let ptx = stock.replacen(
        "barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;",
        "",
        1,
    );
    assert_ne!(ptx, stock);
    for seed in 1..4 {
        let prog = Program::parse(&ptx).unwrap();
        let mut p = Problem::new(256, 512, 256, Dtype::F16, 3);
        let l = p.launch(&facts(3), 148).unwrap();
        let mut dev = std::mem::take(&mut p.dev);
        let o = Options {
            seed,
            ..Options::default()
        };
        let r = run(&prog, &mut dev, &l, &o).map(|_| ());
        let text = format!("{r:?}");
        let rule = rule_of(r);
        // Without the set-up's barrier a warp may also read the shared word tcgen05.alloc
        // writes before it is written: the same missing order, seen by its effect.
        assert!(
            rule == "mbarrier-before-init"
                || rule == "fence-before-handoff"
                || rule == "uninitialised-read",
            "seed {seed}: {text}"
        );
    }
}
