//! The happens-before checker (`check/hb.rs`) on the first schedule (default `Options`): for
//! each class of ordering bug a planted kernel that must be reported with its rule name, and a
//! harmless control that must pass. Hand-written PTX in the style of `interp.rs`, and edits of
//! the stock step-3 kernel's PTX.

mod gemm;

use gemm::{facts, Dtype, Problem};
use sim::{run, Device, Launch, Options, Param, Policy, Program, SimError};

const HEAD: &str = ".version 9.0\n.target sm_100a\n.address_size 64\n";

/// `body` in a kernel of `threads` threads per CTA and `cluster` CTAs (one cluster), with
/// `%r1` = `%tid.x`, `%rd4` = this thread's 64 bytes of the output, `smem_raw` dynamic shared
/// memory; one run with the default options (the first schedule).
fn run_body(body: &str, threads: u32, cluster: u32) -> Result<(), SimError> {
    run_body_with(body, threads, cluster, Options::default())
}

/// [`run_body`] under the schedule `o` (its step limit raised to a million).
fn run_body_with(body: &str, threads: u32, cluster: u32, o: Options) -> Result<(), SimError> {
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
        ..o
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
fn alloc_handoff_without_the_before_fence_is_clean_and_without_a_barrier_is_caught() {
    let stock = gemm::fixture("step3.f16");
    // The set-up's tcgen05.fence::before_thread_sync (after tcgen05.alloc), only: harmless,
    // tcgen05.alloc is a synchronous instruction, which the barrier orders by itself.
    let ptx = stock.replacen("tcgen05.fence::before_thread_sync;", "", 1);
    assert_ne!(ptx, stock);
    assert_eq!(rule_of(step3_first_schedule(&ptx)), "passed");
    // Planted: the allocating warp's column address is read by the other warps with no
    // barrier after the allocation: the set-up's cluster barrier moved up to the join after
    // the barrier inits (the first label after fence.mbarrier_init), before the allocation.
    let sync = "barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;";
    let ptx = stock.replacen(sync, "", 1);
    let fence = ptx
        .find("fence.mbarrier_init.release.cluster;")
        .expect("the set-up's fence");
    let label = fence
        + ptx[fence..]
            .find("\n$L__")
            .expect("the join after the inits")
        + 1;
    let end = label + ptx[label..].find('\n').expect("the label's line");
    let ptx = format!("{}\n\t{sync}{}", &ptx[..end], &ptx[end..]);
    assert!(
        ptx.find(sync) < ptx.find("tcgen05.alloc."),
        "the barrier comes first"
    );
    let r = step3_first_schedule(&ptx);
    let text = format!("{r:?}");
    let rule = rule_of(r);
    assert!(
        rule == "alloc-handoff" || rule == "data-race" || rule == "uninitialised-read",
        "{text}"
    );
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
                || rule == "alloc-handoff"
                || rule == "uninitialised-read",
            "seed {seed}: {text}"
        );
    }
}

/// Rank 0's thread 0 initialises a barrier and `publish`es it (every thread runs `publish`, then
/// waits at the cluster barrier); rank 1's thread 0 runs `store` (its own guard) and `arrive`
/// (on rank 0's barrier, address `%r8`; rank 0's data word is `%r6`); rank 0's thread 0 waits
/// with `wait` and reads the word.
fn cluster_handoff(publish: &str, store: &str, arrive: &str, wait: &str) -> String {
    // Rank 0 reads the word only when the peer stores one: a read of a word nothing wrote
    // would be an uninitialised read, not what these cases are about.
    let read = if store.is_empty() {
        ""
    } else {
        "ld.shared.u32 %r7, [%r2];\n\tst.global.u32 [%rd4], %r7;"
    };
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
	{publish}
	barrier.cluster.wait.acquire.aligned;
	mov.u32 %r9, 0;
	mapa.shared::cluster.u32 %r6, %r2, %r9;
	mapa.shared::cluster.u32 %r8, %r30, %r9;
	{store}
	@%p3 {arrive}
	@!%p5 bra $L_done;
	$L_wait:
	{{
	.reg .pred w;
	{wait} w, [%r30], 0;
	selp.u32 %r4, 1, 0, w;
	}}
	setp.eq.u32 %p6, %r4, 0;
	@%p6 bra $L_wait;
	{read}
	$L_done:
	barrier.cluster.arrive.release.aligned;
	barrier.cluster.wait.acquire.aligned;"
    )
}

const PEER_STORE: &str = "@%p3 st.shared::cluster.u32 [%r6], 7;";
const ARRIVE_CLUSTER: &str = "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r8];";
const WAIT_CLUSTER: &str = "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64";
const WAIT_CTA: &str = "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64";

#[test]
fn fence_mbarrier_init_then_a_relaxed_cluster_arrive_publishes_the_init() {
    // PTX ISA "membar/fence" (fence.mbarrier_init) with "barrier.cluster": the init, the
    // light-weight release fence, a relaxed arrive, the wait (acquire): the documented pattern.
    let isa = "fence.mbarrier_init.release.cluster;\n\tbarrier.cluster.arrive.relaxed.aligned;";
    assert_eq!(
        rule_of(run_body(
            &cluster_handoff(isa, PEER_STORE, ARRIVE_CLUSTER, WAIT_CLUSTER),
            32,
            2
        )),
        "passed"
    );
    // A full fence at cluster scope before the relaxed arrive is a release pattern too.
    let full = "fence.acq_rel.cluster;\n\tbarrier.cluster.arrive.relaxed.aligned;";
    assert_eq!(
        rule_of(run_body(
            &cluster_handoff(full, PEER_STORE, ARRIVE_CLUSTER, WAIT_CLUSTER),
            32,
            2
        )),
        "passed"
    );
    // Planted: the relaxed arrive without a fence before it releases nothing; the peer's
    // arrive may reach an uninitialised barrier.
    let bare = "barrier.cluster.arrive.relaxed.aligned;";
    assert_eq!(
        rule_of(run_body(
            &cluster_handoff(bare, PEER_STORE, ARRIVE_CLUSTER, WAIT_CLUSTER),
            32,
            2
        )),
        "mbarrier-before-init"
    );
}

#[test]
fn fence_mbarrier_init_orders_inits_only_not_data() {
    // The peer writes rank 0's word before the cluster barrier; rank 0 reads it after. With
    // fence.mbarrier_init + relaxed arrive nothing but the init is released: a race. With
    // fence.acq_rel.cluster + relaxed arrive (a release pattern) it is ordered.
    let body = |publish: &str| {
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
	{publish}
	barrier.cluster.wait.acquire.aligned;
	setp.eq.u32 %p4, %r5, 0;
	and.pred %p5, %p1, %p4;
	@%p5 ld.shared.u32 %r7, [%r2];
	@%p5 st.global.u32 [%rd4], %r7;"
        )
    };
    assert_race(
        run_body(
            &body(
                "fence.mbarrier_init.release.cluster;\n\tbarrier.cluster.arrive.relaxed.aligned;",
            ),
            32,
            2,
        ),
        "data-race",
    );
    assert_eq!(
        rule_of(run_body(
            &body("fence.acq_rel.cluster;\n\tbarrier.cluster.arrive.relaxed.aligned;"),
            32,
            2
        )),
        "passed"
    );
    // fence.sc is a release fence as well.
    assert_eq!(
        rule_of(run_body(
            &body("fence.sc.cluster;\n\tbarrier.cluster.arrive.relaxed.aligned;"),
            32,
            2
        )),
        "passed"
    );
}

/// Thread 0 writes a data word of global memory and publishes a flag with `release`; thread
/// 32 (another warp) polls the flag with `poll` (a load into %r10) until it reads 1, runs
/// `acquire`, and reads the data.
fn flag_handoff(release: &str, poll: &str, acquire: &str) -> String {
    format!(
        "
	setp.eq.u32 %p1, %r1, 0;
	setp.eq.u32 %p2, %r1, 32;
	add.s64 %rd10, %rd2, 8;
	@!%p1 bra $L_consumer;
	st.global.u32 [%rd2], 42;
	{release}
	bra.uni $L_out;
	$L_consumer:
	@!%p2 bra $L_out;
	$L_poll:
	{poll}
	setp.ne.u32 %p3, %r10, 1;
	@%p3 bra $L_poll;
	{acquire}
	ld.global.u32 %r11, [%rd2];
	st.global.u32 [%rd4+16], %r11;
	$L_out:"
    )
}

#[test]
fn flag_synchronisation_through_strong_operations_and_fences() {
    let cases: &[(&str, &str, &str, &str)] = &[
        // Release store, acquire load.
        (
            "st.release.gpu.global.u32 [%rd10], 1;",
            "ld.acquire.gpu.global.u32 %r10, [%rd10];",
            "",
            "passed",
        ),
        // Release pattern (fence then relaxed store) and acquire pattern (relaxed load then
        // fence): PTX ISA "Memory Consistency Model", release and acquire patterns.
        (
            "fence.acq_rel.gpu;\n\tst.relaxed.gpu.global.u32 [%rd10], 1;",
            "ld.relaxed.gpu.global.u32 %r10, [%rd10];",
            "fence.acq_rel.gpu;",
            "passed",
        ),
        // Volatile loads are relaxed at system scope; an atomic (relaxed) publishes after a
        // release fence.
        (
            "fence.sc.gpu;\n\tatom.relaxed.gpu.global.exch.b32 %r12, [%rd10], 1;",
            "ld.volatile.global.u32 %r10, [%rd10];",
            "fence.sc.gpu;",
            "passed",
        ),
        (
            "fence.acq_rel.gpu;\n\tred.relaxed.gpu.global.add.u32 [%rd10], 1;",
            "atom.relaxed.gpu.global.or.b32 %r10, [%rd10], 0;",
            "fence.acq_rel.gpu;",
            "passed",
        ),
        // Planted: the reader's acquire fence is missing.
        (
            "fence.acq_rel.gpu;\n\tst.relaxed.gpu.global.u32 [%rd10], 1;",
            "ld.relaxed.gpu.global.u32 %r10, [%rd10];",
            "",
            "data-race",
        ),
        // Planted: the writer's release fence is missing.
        (
            "st.relaxed.gpu.global.u32 [%rd10], 1;",
            "ld.relaxed.gpu.global.u32 %r10, [%rd10];",
            "fence.acq_rel.gpu;",
            "data-race",
        ),
    ];
    for (rel, poll, acq, want) in cases {
        let r = run_body(&flag_handoff(rel, poll, acq), 64, 1);
        let text = format!("{r:?}");
        assert_eq!(&rule_of(r), want, "{rel} / {poll} / {acq}: {text}");
    }
    // The flag itself is not a race: strong operations are morally strong with each other.
    // A plain (weak) flag store against the polling load is.
    let r = run_body(
        &flag_handoff(
            "st.global.u32 [%rd10], 1;",
            "ld.relaxed.gpu.global.u32 %r10, [%rd10];",
            "fence.acq_rel.gpu;",
        ),
        64,
        1,
    );
    assert_eq!(rule_of(r), "data-race");
}

#[test]
fn different_bytes_of_one_word_are_different_locations() {
    // Threads 0 and 32 (two warps, no synchronisation) store the two 16-bit halves of one
    // 32-bit shared word; after bar.sync thread 1 reads the whole word. Thread 1 zeroes the
    // words first (ordered by a bar.sync), so no byte it reads is uninitialised.
    let body = |off0: u32, off1: u32| {
        format!(
            "
	mov.u32 %r2, smem_raw;
	setp.eq.u32 %p0, %r1, 1;
	@%p0 st.shared.u32 [%r2], 0;
	@%p0 st.shared.u32 [%r2+4], 0;
	bar.sync 0;
	setp.eq.u32 %p1, %r1, 0;
	setp.eq.u32 %p2, %r1, 32;
	@%p1 st.shared.u16 [%r2+{off0}], 7;
	@%p2 st.shared.u16 [%r2+{off1}], 9;
	bar.sync 0;
	setp.eq.u32 %p3, %r1, 1;
	@%p3 ld.shared.u32 %r3, [%r2];
	@%p3 st.global.u32 [%rd4], %r3;"
        )
    };
    assert_eq!(rule_of(run_body(&body(0, 2), 64, 1)), "passed");
    // Planted: both store the same half.
    assert_race(run_body(&body(2, 2), 64, 1), "data-race");
    // One byte apart and overlapping by one byte (u16 at 1 and at 2 overlap at byte 2).
    assert_race(run_body(&body(1, 2), 64, 1), "data-race");
    assert_eq!(rule_of(run_body(&body(0, 3), 64, 1)), "passed");
}

#[test]
fn scope_restricts_the_edge_and_only_a_race_it_leaves_is_reported() {
    // CUTLASS's pattern: a peer's .cta-scoped arrive.expect_tx on rank 0's barrier, a
    // .cta-scoped wait; no generic data flows through the arrive: clean.
    let expect_tx = "mbarrier.arrive.expect_tx.release.cta.shared::cluster.b64 _, [%r8], 0;";
    let publish = "fence.mbarrier_init.release.cluster;\n\tbarrier.cluster.arrive.relaxed.aligned;";
    assert_eq!(
        rule_of(run_body(
            &cluster_handoff(publish, "", expect_tx, WAIT_CTA),
            32,
            2
        )),
        "passed"
    );
    // The same with a .cluster release and a .cta acquire, still no data: clean.
    assert_eq!(
        rule_of(run_body(
            &cluster_handoff(publish, "", ARRIVE_CLUSTER, WAIT_CTA),
            32,
            2
        )),
        "passed"
    );
    // Planted (the case): the peer's generic store published by a .cluster release,
    // waited with a .cta acquire: the read races, and the scope is why.
    let r = run_body(
        &cluster_handoff(publish, PEER_STORE, ARRIVE_CLUSTER, WAIT_CTA),
        32,
        2,
    );
    let text = format!("{r:?}");
    assert_race(r, "cluster-scope-sync");
    assert!(text.contains(".cta scope"), "{text}");
    // Planted: the peer's release is .cta, the wait .cluster.
    let r = run_body(
        &cluster_handoff(
            publish,
            PEER_STORE,
            "mbarrier.arrive.release.cta.shared::cluster.b64 _, [%r8];",
            WAIT_CLUSTER,
        ),
        32,
        2,
    );
    assert_race(r, "cluster-scope-sync");
    // Control: both .cluster.
    assert_eq!(
        rule_of(run_body(
            &cluster_handoff(publish, PEER_STORE, ARRIVE_CLUSTER, WAIT_CLUSTER),
            32,
            2
        )),
        "passed"
    );
}

/// Every schedule the issue names: seeds 1, 2, 3 under each policy.
fn schedules() -> Vec<Options> {
    let mut v = Vec::new();
    for seed in 1..=3 {
        for policy in [
            Policy::Random,
            Policy::Pct { depth: 3 },
            Policy::AsyncLate,
            Policy::AsyncEarly,
        ] {
            v.push(Options {
                seed,
                policy,
                ..Options::default()
            });
        }
    }
    v
}

#[test]
fn each_finding_fires_on_every_first_schedule_with_one_rule_name() {
    // Happens-before decides these from any one execution: every seed and policy's first run
    // must report the same rule (and each control must pass on every one).
    let publish = "fence.mbarrier_init.release.cluster;\n\tbarrier.cluster.arrive.relaxed.aligned;";
    let sync_race = |sync: &str| {
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
    let cases: Vec<(&str, String, u32, u32, &str)> = vec![
        ("shared race", sync_race(""), 64, 1, "data-race"),
        (
            "shared race, bar.sync",
            sync_race("bar.sync 0;"),
            64,
            1,
            "passed",
        ),
        (
            "scope",
            cluster_handoff(publish, PEER_STORE, ARRIVE_CLUSTER, WAIT_CTA),
            32,
            2,
            "cluster-scope-sync",
        ),
        (
            "scope, both .cluster",
            cluster_handoff(publish, PEER_STORE, ARRIVE_CLUSTER, WAIT_CLUSTER),
            32,
            2,
            "passed",
        ),
        (
            "init not published",
            cluster_handoff(
                "barrier.cluster.arrive.relaxed.aligned;",
                PEER_STORE,
                ARRIVE_CLUSTER,
                WAIT_CLUSTER,
            ),
            32,
            2,
            "mbarrier-before-init",
        ),
        (
            "init released without fence.mbarrier_init",
            cluster_handoff(
                "barrier.cluster.arrive.release.aligned;",
                PEER_STORE,
                ARRIVE_CLUSTER,
                WAIT_CLUSTER,
            ),
            32,
            2,
            "fence-mbarrier-init",
        ),
        (
            "flag without acquire fence",
            flag_handoff(
                "fence.acq_rel.gpu;\n\tst.relaxed.gpu.global.u32 [%rd10], 1;",
                "ld.relaxed.gpu.global.u32 %r10, [%rd10];",
                "",
            ),
            64,
            1,
            "data-race",
        ),
        (
            "flag with fences",
            flag_handoff(
                "fence.acq_rel.gpu;\n\tst.relaxed.gpu.global.u32 [%rd10], 1;",
                "ld.relaxed.gpu.global.u32 %r10, [%rd10];",
                "fence.acq_rel.gpu;",
            ),
            64,
            1,
            "passed",
        ),
        (
            "tcgen05 hand-off without bar.sync",
            handoff(&format!(
                "{WARP0_WAITS}\n\ttcgen05.fence::after_thread_sync;"
            )),
            128,
            1,
            "ld-after-commit-wait",
        ),
        (
            "tcgen05 hand-off",
            handoff(&format!(
                "{WARP0_WAITS}\n\tbar.sync 0;\n\ttcgen05.fence::after_thread_sync;"
            )),
            128,
            1,
            "passed",
        ),
        (
            "tcgen05.cp source without fence.proxy.async",
            handoff(&format!(
                "{WARP0_WAITS}\n\tbar.sync 0;\n\ttcgen05.fence::after_thread_sync;"
            ))
            .replace("fence.proxy.async.shared::cta;", ""),
            128,
            1,
            "proxy-fence-before-async",
        ),
        (
            "tcgen05.shift covered by the commit",
            handoff(&format!(
                "{WARP0_WAITS}\n\tbar.sync 0;\n\ttcgen05.fence::after_thread_sync;"
            ))
            .replace(COMMIT, &format!("{SHIFT}\n\t{COMMIT}")),
            128,
            1,
            "passed",
        ),
        (
            "tcgen05.shift issued after the commit",
            handoff(&format!(
                "{WARP0_WAITS}\n\tbar.sync 0;\n\ttcgen05.fence::after_thread_sync;"
            ))
            .replace(COMMIT, &format!("{COMMIT}\n\t{SHIFT}")),
            128,
            1,
            "ld-after-commit-wait",
        ),
        (
            "cp.async read before its barrier phase",
            cp_async_barrier(false),
            32,
            1,
            "cp-async-wait-before-read",
        ),
        (
            "cp.async read after its barrier phase",
            cp_async_barrier(true),
            32,
            1,
            "passed",
        ),
    ];
    for (name, body, threads, cluster, want) in &cases {
        for o in schedules() {
            let what = format!("{name}, seed {} {:?}", o.seed, o.policy);
            let r = run_body_with(body, *threads, *cluster, o);
            let text = format!("{r:?}");
            assert_eq!(&rule_of(r), want, "{what}: {text}");
        }
    }
}

/// The commit of [`handoff`], and a tcgen05.shift of lane quarter 0 of the copied columns
/// (PTX ISA "tcgen05.shift": asynchronous, tracked by a later tcgen05.commit).
const COMMIT: &str =
    "@%p1 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r30];";
const SHIFT: &str = "@%p1 tcgen05.shift.cta_group::1.down [%r3];";

/// Thread 0 copies 16 bytes of global memory into shared memory with cp.async, tracked by
/// `cp.async.mbarrier.arrive.noinc`; thread 32 (another warp) waits on the barrier's phase
/// (if `wait`) and reads them.
fn cp_async_barrier(wait: bool) -> String {
    let wait = if wait {
        "
	$L_wait:
	{
	.reg .pred w;
	mbarrier.try_wait.parity.shared::cta.b64 w, [%r30], 0;
	selp.u32 %r4, 1, 0, w;
	}
	setp.eq.u32 %p6, %r4, 0;
	@%p6 bra $L_wait;"
    } else {
        ""
    };
    format!(
        "
	mov.u32 %r2, smem_raw;
	add.s32 %r30, %r2, 64;
	setp.eq.u32 %p1, %r1, 0;
	@%p1 st.global.v4.u32 [%rd2+256], {{%r1, %r1, %r1, %r1}};
	@%p1 mbarrier.init.shared::cta.b64 [%r30], 1;
	bar.sync 0;
	@!%p1 bra $L_reader;
	add.s64 %rd9, %rd2, 256;
	cp.async.cg.shared.global [%r2], [%rd9], 16;
	cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%r30];
	$L_reader:
	setp.ne.u32 %p2, %r1, 16;
	@%p2 bra $L_end;
	{wait}
	ld.shared.u32 %r7, [%r2];
	st.global.u32 [%rd4], %r7;
	$L_end:
	cp.async.wait_all;"
    )
}

/// `try_wait.parity` loop on the barrier at `reg` for `parity`, with its own labels.
fn wait_loop(label: &str, reg: &str, parity: u32) -> String {
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

/// A one-slot TMA ring: thread 0 loads a 512-byte box into the slot (barrier `full`), waiting
/// on `empty` before each refill as `producer` says; thread 32 waits on `full` with parity 0
/// then 1, reading the slot after each and arriving on `empty`. Run under `o`.
fn one_slot_ring(producer: &str, o: Options) -> Result<(), SimError> {
    let load = "
	mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 512;
	cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes [%r8], [%rd6, {%r22, %r22}], [%r2];";
    let producer = producer.replace("LOAD", load);
    let ptx = format!(
        "{HEAD}.extern .shared .align 1024 .b8 smem_raw[];
.visible .entry k(
	.param .u64 k_param_0,
	.param .align 64 .b8 k_param_1[128]
)
{{
	.reg .pred %p<16>;
	.reg .b32 %r<64>;
	.reg .b64 %rd<16>;
	ld.param.u64 %rd1, [k_param_0];
	cvta.to.global.u64 %rd2, %rd1;
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd3, %r1, 4;
	add.s64 %rd4, %rd2, %rd3;
	mov.u32 %r2, smem_raw;
	add.s32 %r3, %r2, 8;
	add.s32 %r8, %r2, 1024;
	mov.b64 %rd5, k_param_1;
	cvta.param.u64 %rd6, %rd5;
	mov.u32 %r22, 0;
	setp.eq.u32 %p1, %r1, 0;
	@%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
	@%p1 mbarrier.init.shared::cta.b64 [%r3], 1;
	bar.sync 0;
	setp.eq.u32 %p2, %r1, 32;
	@%p2 bra $L_consumer;
	@!%p1 bra $L_end;
	{producer}
	bra.uni $L_end;
	$L_consumer:
	{}
	ld.shared.u32 %r10, [%r8];
	mbarrier.arrive.shared::cta.b64 _, [%r3];
	{}
	ld.shared.u32 %r11, [%r8];
	mbarrier.arrive.shared::cta.b64 _, [%r3];
	st.global.u32 [%rd4], %r11;
	$L_end:
	ret;
}}
",
        wait_loop("$L_c0", "%r2", 0),
        wait_loop("$L_c1", "%r2", 1),
    );
    let p = Program::parse(&ptx)?;
    let mut dev = Device::new();
    let out = dev.alloc(4 * 64);
    let data = dev.alloc(32 * 32);
    use sim::units::tensormap::*;
    let map = TensorMapDesc::encode_tiled(
        TmaDtype::Bf16,
        2,
        data,
        &[16, 32],
        &[32],
        &[8, 32],
        &[1, 1],
        TmaInterleave::None,
        TmaSwizzle::None,
        TmaL2Promotion::None,
        TmaOobFill::None,
    )
    .expect("tensor map");
    let l = Launch {
        kernel: "k".into(),
        grid: [1, 1, 1],
        block: [64, 1, 1],
        cluster: [1, 1, 1],
        dynamic_smem: 4096,
        params: vec![Param::U64(out), Param::TensorMap(map)],
        barrier_names: vec![(0, "full".into()), (8, "empty".into())],
        sources: vec![],
    };
    let o = Options {
        max_steps: 1_000_000,
        ..o
    };
    run(&p, &mut dev, &l, &o).map(|_| ())
}

#[test]
fn a_waiter_two_phases_behind_is_prior_generation_wait_on_every_schedule() {
    // Control: the producer refills after waiting for the consumer's release of the phase.
    // (The producer also waits for each phase of `full` to complete before arming the next,
    // as an arrive beyond a phase's count is not allowed while its bytes are in flight, and
    // for the last before it exits.)
    let good = format!(
        "LOAD\n{}\n{}\nLOAD\n{}",
        wait_loop("$L_f0", "%r2", 0),
        wait_loop("$L_p0", "%r3", 0),
        wait_loop("$L_f1", "%r2", 1)
    );
    // Planted: after the first refill the producer stops waiting on `empty` and loads phases
    // 2 and 3 ahead of the consumer, which ends two phases behind. Its parity-1 wait then
    // either observes phase 1 while the refill of phase 2 or 3 may overwrite the slot (the
    // data belongs to a newer phase than the one it consumed), or observes phase 3 (the
    // parity aliases a newer phase than the phase 1 it meant): both are prior-generation
    // consumption, whatever the schedule.
    let bad = format!(
        "LOAD\n{}\n{}\nLOAD\n{}\nLOAD\n{}\nLOAD\n{}",
        wait_loop("$L_f0", "%r2", 0),
        wait_loop("$L_p0", "%r3", 0),
        wait_loop("$L_f1", "%r2", 1),
        wait_loop("$L_f2", "%r2", 0),
        wait_loop("$L_f3", "%r2", 1)
    );
    let mut kinds = Vec::new();
    for o in schedules() {
        let what = format!("seed {} {:?}", o.seed, o.policy);
        let r = one_slot_ring(&good, o.clone());
        assert_eq!(rule_of(r), "passed", "control, {what}");
        let r = one_slot_ring(&bad, o);
        let text = format!("{r:?}");
        kinds.push(text.contains("matched a newer phase"));
        assert_eq!(rule_of(r), "prior-generation-wait", "{what}: {text}");
    }
    // Both cases occur among the schedules: an older phase consumed (a race with the refill)
    // and a newer one (the parity matched phase 3).
    assert!(kinds.contains(&true) && kinds.contains(&false), "{kinds:?}");
}

/// Thread 0 stages a 512-byte box in shared memory and stores it to global memory with a TMA
/// store (`cp.async.bulk.tensor` shared -> global), then runs `after_store`; thread 32 runs
/// `sync` and then writes the first word the store writes.
fn tma_store_and_a_write(after_store: &str, sync: &str, o: Options) -> Result<(), SimError> {
    let ptx = format!(
        "{HEAD}.extern .shared .align 1024 .b8 smem_raw[];
.visible .entry k(
	.param .align 64 .b8 k_param_0[128],
	.param .u64 k_param_1
)
{{
	.reg .pred %p<16>;
	.reg .b32 %r<64>;
	.reg .b64 %rd<16>;
	ld.param.u64 %rd1, [k_param_1];
	cvta.to.global.u64 %rd2, %rd1;
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, smem_raw;
	mov.b64 %rd5, k_param_0;
	cvta.param.u64 %rd6, %rd5;
	mov.u32 %r22, 0;
	setp.eq.u32 %p1, %r1, 0;
	setp.eq.u32 %p2, %r1, 32;
	@!%p1 bra $L_other;
	mov.u32 %r5, 0;
	$L_fill:
	add.s32 %r6, %r2, %r5;
	st.shared.u32 [%r6], %r5;
	add.s32 %r5, %r5, 4;
	setp.lt.u32 %p3, %r5, 512;
	@%p3 bra $L_fill;
	fence.proxy.async.shared::cta;
	cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd6, {{%r22, %r22}}], [%r2];
	cp.async.bulk.commit_group;
	{after_store}
	$L_other:
	{sync}
	@%p2 st.global.u32 [%rd2], 5;
	ret;
}}
"
    );
    let p = Program::parse(&ptx)?;
    let mut dev = Device::new();
    let c = dev.alloc(32 * 32);
    use sim::units::tensormap::*;
    let map = TensorMapDesc::encode_tiled(
        TmaDtype::Bf16,
        2,
        c,
        &[16, 32],
        &[32],
        &[8, 32],
        &[1, 1],
        TmaInterleave::None,
        TmaSwizzle::None,
        TmaL2Promotion::None,
        TmaOobFill::None,
    )
    .expect("tensor map");
    let l = Launch {
        kernel: "k".into(),
        grid: [1, 1, 1],
        block: [64, 1, 1],
        cluster: [1, 1, 1],
        dynamic_smem: 4096,
        params: vec![Param::TensorMap(map), Param::U64(c)],
        barrier_names: vec![],
        sources: vec![],
    };
    run(&p, &mut dev, &l, &o).map(|_| ())
}

#[test]
fn a_tma_store_races_with_an_unordered_write_of_its_global_bytes() {
    for o in schedules() {
        let what = format!("seed {} {:?}", o.seed, o.policy);
        // Control: the store is waited for (wait_group 0: its writes are complete), then a
        // bar.sync orders the other thread's write after it.
        let r = tma_store_and_a_write("cp.async.bulk.wait_group 0;", "bar.sync 0;", o.clone());
        assert_eq!(rule_of(r), "passed", "control, {what}");
        // Planted: no wait and no synchronisation: the write may land before or after the
        // TMA engine's (async-proxy) write of the same bytes.
        let r = tma_store_and_a_write("cp.async.bulk.wait_group 0;", "", o.clone());
        let text = format!("{r:?}");
        assert_eq!(rule_of(r), "data-race", "{what}: {text}");
        assert!(text.contains("TMA store"), "{text}");
        // Planted: bar.sync without the wait: the store may still be writing.
        let r = tma_store_and_a_write("", "bar.sync 0;", o);
        assert_eq!(rule_of(r), "data-race", "{what}");
    }
}

#[test]
fn a_relaxed_cluster_barrier_carries_the_tcgen05_fences() {
    // Warp 1 allocates 32 columns (column 0: the first allocation), then every thread runs
    // `before`, a relaxed cluster barrier and tcgen05.fence::after_thread_sync; warp 0 then
    // writes column 0 of its lanes. The tcgen05 fences pair with any thread synchronisation:
    // the relaxed barrier orders execution, which is what they need.
    let body = |before: &str| {
        format!(
            "
	mov.u32 %r2, smem_raw;
	shr.u32 %r5, %r1, 5;
	setp.eq.u32 %p1, %r5, 1;
	setp.eq.u32 %p2, %r5, 0;
	@%p1 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r2], 32;
	@%p1 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
	{before}
	barrier.cluster.arrive.relaxed.aligned;
	barrier.cluster.wait.acquire.aligned;
	tcgen05.fence::after_thread_sync;
	mov.u32 %r3, 0;
	@%p2 tcgen05.st.sync.aligned.32x32b.x1.b32 [%r3], {{%r1}};
	@%p2 tcgen05.wait::st.sync.aligned;
	tcgen05.fence::before_thread_sync;
	bar.sync 0;
	tcgen05.fence::after_thread_sync;
	@%p1 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r3, 32;"
        )
    };
    for o in schedules() {
        let what = format!("seed {} {:?}", o.seed, o.policy);
        let r = run_body_with(
            &body("tcgen05.fence::before_thread_sync;"),
            64,
            1,
            o.clone(),
        );
        assert_eq!(rule_of(r), "passed", "{what}");
        // tcgen05.alloc is synchronous: the barrier carries it without the fence (CUTLASS's
        // sm100 kernels hand the allocation on so).
        let r = run_body_with(&body(""), 64, 1, o.clone());
        assert_eq!(rule_of(r), "passed", "{what}");
        // Planted: no barrier between the allocation and warp 0's tcgen05.st.
        let no_sync = body("").replacen(
            "barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.acquire.aligned;",
            "",
            1,
        );
        assert_ne!(no_sync, body(""));
        let r = run_body_with(&no_sync, 64, 1, o);
        let text = format!("{r:?}");
        assert!(
            rule_of(r) == "alloc-handoff" || text.contains("not allocated"),
            "{what}: {text}"
        );
    }
}
