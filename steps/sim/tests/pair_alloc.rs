//! The CTA pair's collective `.cta_group::2` allocation instructions (`exec/pair.rs`,
//! `check/hb/pair.rs`). PTX ISA "tcgen05.alloc": "When .cta_group::2 is specified, one warp
//! from each of the peer CTAs must collectively perform the allocation and de-allocation."
//! Harmless controls (the pair allocates together, the leader writes the peer's columns at
//! once; a warp other than the allocating one frees the columns after the cluster barrier)
//! pass on every schedule; planted bugs (one CTA of the pair never allocates; the pair frees
//! the columns while the leader's tcgen05 operation on them may still run) are caught on the
//! first schedule.

use sim::{run, Device, Launch, Options, Param, Program, SimError};

const HEAD: &str = ".version 9.0\n.target sm_100a\n.address_size 64\n";

/// `body` in a cluster of two CTAs of 64 threads (two warps) under `o`; `%r1` = `%tid.x`,
/// `%r2` = the shared address of `smem_raw` (the column address at +0, an mbarrier at +8),
/// `%r5` = `%cluster_ctarank`, `%rd1` a 4 KiB output buffer.
fn run_pair(body: &str, o: Options) -> Result<(), SimError> {
    let ptx = format!(
        "{HEAD}.extern .shared .align 1024 .b8 smem_raw[];\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n.explicitcluster\n.reqnctapercluster 2, 1, 1\n{{\n\t.reg .pred %p<16>;\n\t.reg .b16 %rs<8>;\n\t.reg .b32 %r<64>;\n\t.reg .b64 %rd<16>;\n\tld.param.u64 %rd1, [k_param_0];\n\tcvta.to.global.u64 %rd1, %rd1;\n\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r2, smem_raw;\n\tmov.u32 %r5, %cluster_ctarank;\n{body}\n\tret;\n}}\n"
    );
    let p = Program::parse(&ptx)?;
    let mut dev = Device::new();
    let out = dev.alloc(4096);
    let l = Launch {
        kernel: "k".into(),
        grid: [2, 1, 1],
        block: [64, 1, 1],
        cluster: [2, 1, 1],
        dynamic_smem: 4096,
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

fn verdict(r: &Result<(), SimError>) -> String {
    match r {
        Ok(()) => "passed".into(),
        Err(SimError::Rule { rule, .. }) => rule.to_string(),
        Err(SimError::Deadlock { .. }) => "deadlock".into(),
        Err(e) => format!("other: {e}"),
    }
}

/// Who waits for the commit of the leader's tcgen05 operation (it arrives on the barriers of
/// the CTAs that wait).
#[derive(Clone, Copy)]
enum Wait {
    Both,
    Leader,
    Nobody,
}

/// The pair's kernel. Warp `alloc_warp` of each CTA allocates 32 columns together (`alloc`,
/// the instruction or nothing); lane 0 of that warp in the leader (rank 0) shifts the pair's
/// columns at once (a `.cta_group::2` tcgen05 operation that writes both CTAs' tensor memory,
/// ordered after the allocation by the leader's program order only) and commits to the
/// barriers of the CTAs that wait (`wait`); the cluster barrier; warp `free_warp` of each CTA
/// frees the columns together.
fn pair_kernel(alloc: &str, alloc_warp: u32, wait: Wait, free_warp: u32) -> String {
    pair_kernel_sync(alloc, alloc_warp, wait, free_warp, true)
}

/// [`pair_kernel`], with the cluster barrier before the free (`sync`) or without it.
fn pair_kernel_sync(
    alloc: &str,
    alloc_warp: u32,
    wait: Wait,
    free_warp: u32,
    sync: bool,
) -> String {
    let sync = if sync {
        "tcgen05.fence::before_thread_sync;\n\tbarrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
    } else {
        ""
    };
    let poll =
        "WAIT:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p5, [%r2+8], 0;\n\t@!%p5 bra WAIT;";
    let (wait, mask) = match wait {
        Wait::Both => (poll.to_string(), 3),
        Wait::Leader => (format!("@!%p3 bra WAITED;\n\t{poll}\nWAITED:"), 1),
        Wait::Nobody => (String::new(), 3),
    };
    let lead = 32 * alloc_warp;
    format!(
        "
	shr.u32 %r3, %r1, 5;
	setp.eq.u32 %p1, %r1, 0;
	setp.eq.u32 %p2, %r3, {alloc_warp};
	setp.eq.u32 %p6, %r3, {free_warp};
	setp.eq.u32 %p3, %r5, 0;
	setp.eq.u32 %p7, %r1, {lead};
	and.pred %p4, %p7, %p3;
	@%p1 mbarrier.init.shared::cta.b64 [%r2+8], 1;
	@%p1 fence.mbarrier_init.release.cluster;
	barrier.cluster.arrive.release.aligned;
	barrier.cluster.wait.acquire.aligned;
	tcgen05.fence::after_thread_sync;
	@!%p2 bra ALLOCATED;
	{alloc}
	ld.shared.u32 %r4, [%r2];
	mov.u16 %rs1, {mask};
	@%p4 tcgen05.shift.cta_group::2.down [%r4];
	@%p4 tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%r2+8], %rs1;
ALLOCATED:
	{wait}
	{sync}
	@!%p6 bra FREED;
	ld.shared.u32 %r4, [%r2];
	tcgen05.dealloc.cta_group::2.sync.aligned.b32 %r4, 32;
FREED:"
    )
}

const ALLOC: &str = "tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%r2], 32;";

#[test]
fn the_pair_allocates_together_so_the_leader_may_use_the_peers_columns_at_once() {
    // Control: no barrier between the allocation and the leader's use of the peer's columns;
    // the allocation completed in both CTAs before the leader's warp went on.
    let body = pair_kernel(ALLOC, 0, Wait::Both, 0);
    for policy in sim::EXPLORE_POLICIES {
        let o = Options {
            policy,
            ..Options::default()
        };
        let r = run_pair(&body, o);
        assert_eq!(verdict(&r), "passed", "{policy:?}: {r:?}");
    }
    // Control: warp 1 allocates, warp 0 frees after the cluster barrier, with no
    // tcgen05.fence::after_thread_sync (dealloc is a synchronous tcgen05 instruction; the
    // fence orders the asynchronous ones).
    let body = pair_kernel(ALLOC, 1, Wait::Both, 0);
    for policy in sim::EXPLORE_POLICIES {
        let o = Options {
            policy,
            ..Options::default()
        };
        let r = run_pair(&body, o);
        assert_eq!(verdict(&r), "passed", "{policy:?}: {r:?}");
    }
}

#[test]
fn the_pairs_free_takes_effect_once_both_warps_issued_it() {
    // Control: only the leader waits for its shift of the pair's columns; the peer frees its
    // half with no wait of its own and no barrier with the leader. The collective dealloc
    // completes in the peer only after the leader issued it, after its wait, so the peer's
    // half is ordered after the shift.
    let body = pair_kernel_sync(ALLOC, 0, Wait::Leader, 0, false);
    for policy in sim::EXPLORE_POLICIES {
        let o = Options {
            policy,
            ..Options::default()
        };
        let r = run_pair(&body, o);
        assert_eq!(verdict(&r), "passed", "{policy:?}: {r:?}");
    }
}

#[test]
fn only_the_leader_allocating_is_a_deadlock_that_names_the_missing_peer() {
    // Planted: the odd CTA of the pair skips the allocation (and so its use and its free).
    let alloc = format!("@!%p3 bra ALLOCATED;\n\t{ALLOC}");
    let body = pair_kernel(&alloc, 0, Wait::Nobody, 9);
    let r = run_pair(&body, Options::default());
    let text = match &r {
        Err(e) => e.to_string(),
        Ok(()) => String::new(),
    };
    assert_eq!(verdict(&r), "deadlock", "{text}");
    assert!(
        text.contains("tcgen05.alloc.cta_group::2")
            && text.contains("peer CTA (cluster rank 1)")
            && text.contains("never came"),
        "{text}"
    );
}

#[test]
fn a_cta_group_2_alloc_without_a_peer_cta_is_refused() {
    // A cluster of one CTA has no pair.
    let ptx = format!(
        "{HEAD}.extern .shared .align 1024 .b8 smem_raw[];\n.visible .entry k()\n{{\n\t.reg .b32 %r<4>;\n\tmov.u32 %r2, smem_raw;\n\t{ALLOC}\n\tret;\n}}\n"
    );
    let p = Program::parse(&ptx).expect("parses");
    let mut dev = Device::new();
    let l = Launch {
        kernel: "k".into(),
        grid: [1, 1, 1],
        block: [32, 1, 1],
        cluster: [1, 1, 1],
        dynamic_smem: 1024,
        params: vec![],
        barrier_names: vec![],
        sources: vec![],
    };
    let e = run(&p, &mut dev, &l, &Options::default()).expect_err("no peer");
    assert!(e.to_string().contains("no peer CTA"), "{e}");
}

#[test]
fn freeing_the_pairs_columns_while_the_leaders_operation_may_run_is_caught() {
    // Planted: no thread waits for the commit of the leader's shift before the pair frees the
    // columns it writes in both CTAs.
    let body = pair_kernel(ALLOC, 0, Wait::Nobody, 0);
    let r = run_pair(&body, Options::default());
    let v = verdict(&r);
    assert!(
        v != "passed" && v != "deadlock" && !v.starts_with("other"),
        "{v}: {r:?}"
    );
}
