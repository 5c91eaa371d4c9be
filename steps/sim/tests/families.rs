//! Instruction families a planted or hostile kernel may use though the stock kernels do not, on
//! tiny hand-written kernels, with the values the PTX ISA's definitions give: `vote` (9.7.13.4),
//! named barriers with a thread count (`bar.sync id, n` and `bar.arrive`, 9.7.13.1), `atom` and
//! `red` on shared and global memory (9.7.13.5, 9.7.13.6), `tcgen05.st` read back by
//! `tcgen05.ld` (9.7.16.8), `tcgen05.shift` and `tcgen05.cp` (9.7.16.9). Each kernel runs once per schedule policy on a fresh device.

use sim::{run, Device, Launch, Options, Param, Program, SimError};

const HEAD: &str = ".version 9.0\n.target sm_100a\n.address_size 64\n";

/// `body` in a kernel of `threads` threads whose thread `t` owns the 64 bytes at `out + 64 t`
/// (`%rd4`), `%r1` = `%tid.x`, `%rd2` = `out` (global) and `smem_raw` dynamic shared memory;
/// returns the first `words` 32-bit words of `out` after each policy's run (they must agree).
fn run_words(body: &str, threads: u32, words: usize) -> Result<Vec<u32>, SimError> {
    run_policies(body, threads, words, true)
}

/// [`run_words`]; `agree`: every policy must give the same words (not so where the order of
/// atomics is the schedule's); returns the last policy's.
fn run_policies(body: &str, threads: u32, words: usize, agree: bool) -> Result<Vec<u32>, SimError> {
    let ptx = format!(
        "{HEAD}.extern .shared .align 1024 .b8 smem_raw[];\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{{\n\t.reg .pred %p<16>;\n\t.reg .b16 %rs<8>;\n\t.reg .b32 %r<64>;\n\t.reg .f32 %f<8>;\n\t.reg .b64 %rd<16>;\n\tld.param.u64 %rd1, [k_param_0];\n\tcvta.to.global.u64 %rd2, %rd1;\n\tmov.u32 %r1, %tid.x;\n\tmul.wide.u32 %rd3, %r1, 64;\n\tadd.s64 %rd4, %rd2, %rd3;\n{body}\n\tret;\n}}\n"
    );
    let p = Program::parse(&ptx)?;
    let mut seen: Option<Vec<u32>> = None;
    for policy in sim::EXPLORE_POLICIES {
        let mut dev = Device::new();
        let out = dev.alloc(64 * threads as u64);
        let l = Launch {
            kernel: "k".into(),
            grid: [1, 1, 1],
            block: [threads, 1, 1],
            cluster: [1, 1, 1],
            dynamic_smem: 8192,
            params: vec![Param::U64(out)],
            barrier_names: vec![],
            sources: vec![],
        };
        let o = Options {
            policy,
            max_steps: 1_000_000,
            ..Options::default()
        };
        run(&p, &mut dev, &l, &o)?;
        let mut b = vec![0u8; words * 4];
        dev.read(out, &mut b);
        let w: Vec<u32> = b
            .chunks(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if let (Some(s), true) = (&seen, agree) {
            assert_eq!(s, &w, "policy {} gave another result", policy.name());
        }
        seen = Some(w);
    }
    Ok(seen.expect("at least one policy"))
}

#[test]
fn vote_any_all_uni_and_ballot_per_warp() {
    // Lanes 0-15 of warp 0 hold the predicate; warp 1 holds it nowhere.
    let body = "
	setp.lt.u32 %p1, %r1, 16;
	vote.sync.any.pred %p2, %p1, 0xffffffff;
	vote.sync.all.pred %p3, %p1, 0xffffffff;
	vote.sync.uni.pred %p4, %p1, 0xffffffff;
	vote.sync.ballot.b32 %r2, %p1, 0xffffffff;
	setp.lt.u32 %p5, %r1, 64;
	vote.sync.all.pred %p6, %p5, 0xffffffff;
	selp.u32 %r3, 1, 0, %p2;
	selp.u32 %r4, 1, 0, %p3;
	selp.u32 %r5, 1, 0, %p4;
	selp.u32 %r6, 1, 0, %p6;
	st.global.u32 [%rd4], %r3;
	st.global.u32 [%rd4+4], %r4;
	st.global.u32 [%rd4+8], %r5;
	st.global.u32 [%rd4+12], %r2;
	st.global.u32 [%rd4+16], %r6;";
    let w = run_words(body, 64, 16 * 64).unwrap();
    for t in 0..64usize {
        let r = &w[t * 16..t * 16 + 5];
        let warp0 = t < 32;
        assert_eq!(r[0], warp0 as u32, "thread {t}: any");
        assert_eq!(r[1], 0, "thread {t}: all (half the lanes)");
        assert_eq!(r[2], !warp0 as u32, "thread {t}: uni");
        assert_eq!(r[3], if warp0 { 0xFFFF } else { 0 }, "thread {t}: ballot");
        assert_eq!(r[4], 1, "thread {t}: all (every lane)");
    }
}

#[test]
fn named_barriers_count_their_own_threads() {
    // Warp 0 produces into shared memory and arrives on barrier 3 (64 threads); warp 1 syncs
    // on it and reads. Warps 2-3 meanwhile meet on barrier 1 (64 threads) alone: neither pair
    // waits for the other, as `bar.sync 0` would make them.
    let body = "
	mov.u32 %r2, smem_raw;
	shl.b32 %r3, %r1, 2;
	add.s32 %r4, %r2, %r3;
	setp.lt.u32 %p1, %r1, 32;
	setp.lt.u32 %p2, %r1, 64;
	@!%p2 bra $L_pair;
	@!%p1 bra $L_consumer;
	add.s32 %r5, %r1, 1000;
	st.shared.u32 [%r4], %r5;
	bar.arrive 3, 64;
	bra $L_done;
	$L_consumer:
	bar.sync 3, 64;
	sub.s32 %r6, %r4, 128;
	ld.shared.u32 %r7, [%r6];
	st.global.u32 [%rd4], %r7;
	bra $L_done;
	$L_pair:
	add.s32 %r5, %r1, 2000;
	st.shared.u32 [%r4], %r5;
	barrier.sync 1, 64;
	xor.b32 %r8, %r3, 128;
	add.s32 %r9, %r2, %r8;
	ld.shared.u32 %r10, [%r9];
	st.global.u32 [%rd4], %r10;
	$L_done:";
    let w = run_words(body, 128, 16 * 128).unwrap();
    for t in 32..64usize {
        assert_eq!(w[t * 16], (t - 32 + 1000) as u32, "consumer {t}");
    }
    for t in 64..128usize {
        assert_eq!(w[t * 16], ((t ^ 32) + 2000) as u32, "pair thread {t}");
    }
}

#[test]
fn a_named_barrier_short_of_its_count_is_a_deadlock_naming_it() {
    // 64 threads expected, 32 arrive: a hang, reported, not timed out.
    let e = run_words("\tbar.sync 2, 64;", 32, 1).unwrap_err();
    assert!(matches!(e, SimError::Deadlock { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("CTA barrier 2 (bar.sync): 32 of 64 threads arrived"),
        "{e}"
    );
    // One barrier used with two counts at once is a fault a GPU leaves undefined.
    let body = "
	setp.lt.u32 %p1, %r1, 32;
	@%p1 bar.sync 1, 64;
	@!%p1 bar.sync 1, 96;";
    let e = run_words(body, 64, 1).unwrap_err();
    assert!(e.to_string().contains("barrier 1 used with"), "{e}");
}

#[test]
fn atom_and_red_on_shared_and_global_memory() {
    // Shared: every thread takes a ticket with atom.add (old values 0..63 in some order) and
    // red.add adds 2; global: the same on word 1 of thread 0's row, plus max, min, exch, cas
    // and inc (wraps to 0 past its bound) from thread 0 alone, then a float add.
    let body = "
	mov.u32 %r2, smem_raw;
	setp.eq.u32 %p1, %r1, 0;
	@%p1 st.shared.u32 [%r2], 0;
	@%p1 st.shared.u32 [%r2+4], 0;
	bar.sync 0;
	atom.shared.add.u32 %r3, [%r2], 1;
	red.shared.add.u32 [%r2+4], 2;
	st.global.u32 [%rd4], %r3;
	atom.global.add.u32 %r4, [%rd2+4], 1;
	red.global.add.u32 [%rd2+8], 3;
	atom.global.max.s32 %r5, [%rd2+12], %r1;
	red.global.add.f32 [%rd2+36], 0f3F000000;
	bar.sync 0;
	@!%p1 bra $L_end;
	ld.shared.u32 %r6, [%r2];
	ld.shared.u32 %r7, [%r2+4];
	st.global.u32 [%rd2+16], %r6;
	st.global.u32 [%rd2+20], %r7;
	st.global.u32 [%rd2+24], 7;
	atom.global.exch.b32 %r8, [%rd2+24], 9;
	atom.global.cas.b32 %r9, [%rd2+24], 9, 11;
	atom.global.cas.b32 %r10, [%rd2+24], 5, 13;
	st.global.u32 [%rd2+28], 2;
	atom.global.inc.u32 %r11, [%rd2+28], 2;
	atom.global.min.s32 %r12, [%rd2+12], -5;
	ld.global.u32 %r13, [%rd2+12];
	st.global.u32 [%rd2+40], %r8;
	st.global.u32 [%rd2+44], %r9;
	st.global.u32 [%rd2+48], %r10;
	st.global.u32 [%rd2+52], %r11;
	st.global.u32 [%rd2+56], %r12;
	st.global.u32 [%rd2+60], %r13;
	$L_end:";
    let w = run_policies(body, 64, 16 * 64, false).unwrap();
    // Word 0 of each row is the shared ticket (row 0's words 1.. are the global counters).
    let mut tickets: Vec<u32> = (1..64).map(|t| w[t * 16]).collect();
    tickets.push(w[0]);
    tickets.sort();
    assert_eq!(
        tickets,
        (0..64).collect::<Vec<u32>>(),
        "atom.shared.add tickets"
    );
    assert_eq!(w[1], 64, "atom.global.add");
    assert_eq!(w[2], 3 * 64, "red.global.add");
    assert_eq!(w[4], 64, "shared counter after 64 atom.add");
    assert_eq!(w[5], 2 * 64, "red.shared.add");
    assert_eq!(w[6], 11, "exch 9, then cas 9 -> 11, then cas 5 (no match)");
    assert_eq!(w[7], 0, "inc of 2 with bound 2 wraps to 0");
    assert_eq!(f32::from_bits(w[9]), 32.0, "red.global.add.f32 of 0.5 x 64");
    let r = &w[10..16];
    assert_eq!(r[0], 7, "exch returns the old value");
    assert_eq!(r[1], 9, "cas returns the old value (it matched)");
    assert_eq!(r[2], 11, "cas returns the old value (no match)");
    assert_eq!(r[3], 2, "inc returns the old value");
    assert_eq!(r[4], 63, "atom.max of 0..63 left 63; min returns it");
    assert_eq!(r[5] as i32, -5, "min of 63 and -5");
}

#[test]
fn tcgen05_st_then_ld_round_trips_through_tensor_memory() {
    // Warp 0 allocates 32 columns; each of the 4 warps stores 4 words into its quarter of the
    // lanes (32x32b: warp w reaches lanes 32w..32w+31), then every thread loads them back.
    let body = "
	mov.u32 %r2, smem_raw;
	setp.lt.u32 %p1, %r1, 32;
	@%p1 tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r2], 32;
	@%p1 tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
	tcgen05.fence::before_thread_sync;
	bar.sync 0;
	tcgen05.fence::after_thread_sync;
	ld.shared.u32 %r3, [%r2];
	and.b32 %r4, %r1, 96;
	shl.b32 %r5, %r4, 16;
	add.s32 %r6, %r3, %r5;
	mul.lo.u32 %r10, %r1, 10;
	add.s32 %r11, %r10, 1;
	add.s32 %r12, %r10, 2;
	add.s32 %r13, %r10, 3;
	tcgen05.st.sync.aligned.32x32b.x4.b32 [%r6], {%r10, %r11, %r12, %r13};
	tcgen05.wait::st.sync.aligned;
	tcgen05.ld.sync.aligned.32x32b.x4.b32 {%r20, %r21, %r22, %r23}, [%r6];
	tcgen05.wait::ld.sync.aligned;
	st.global.u32 [%rd4], %r20;
	st.global.u32 [%rd4+4], %r21;
	st.global.u32 [%rd4+8], %r22;
	st.global.u32 [%rd4+12], %r23;
	tcgen05.fence::before_thread_sync;
	bar.sync 0;
	tcgen05.fence::after_thread_sync;
	@%p1 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r3, 32;";
    let w = run_words(body, 128, 16 * 128).unwrap();
    for t in 0..128usize {
        let r = &w[t * 16..t * 16 + 4];
        let b = t as u32 * 10;
        assert_eq!(r, [b, b + 1, b + 2, b + 3], "thread {t}");
    }
}

#[test]
fn tcgen05_shift_moves_rows_down_one_lane_after_its_commit() {
    // Warp 0 fills 8 columns of lanes 0-31 (lane l, column c: 100 l + c), thread 0 shifts them
    // down (PTX ISA tcgen05.shift: 31 rows of 256 bits move one lane down) and commits to an
    // mbarrier; after the phase completes the warp reads them back.
    let body = "
	mov.u32 %r2, smem_raw;
	add.s32 %r30, %r2, 64;
	setp.eq.u32 %p1, %r1, 0;
	tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r2], 32;
	tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;
	@%p1 mbarrier.init.shared::cta.b64 [%r30], 1;
	tcgen05.fence::before_thread_sync;
	bar.sync 0;
	tcgen05.fence::after_thread_sync;
	ld.shared.u32 %r3, [%r2];
	mul.lo.u32 %r10, %r1, 100;
	add.s32 %r11, %r10, 1;
	add.s32 %r12, %r10, 2;
	add.s32 %r13, %r10, 3;
	add.s32 %r14, %r10, 4;
	add.s32 %r15, %r10, 5;
	add.s32 %r16, %r10, 6;
	add.s32 %r17, %r10, 7;
	tcgen05.st.sync.aligned.32x32b.x8.b32 [%r3], {%r10, %r11, %r12, %r13, %r14, %r15, %r16, %r17};
	tcgen05.wait::st.sync.aligned;
	tcgen05.fence::before_thread_sync;
	bar.sync 0;
	tcgen05.fence::after_thread_sync;
	@%p1 tcgen05.shift.cta_group::1.down [%r3];
	@%p1 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r30];
	$L_wait:
	{
	.reg .pred w;
	mbarrier.try_wait.parity.shared::cta.b64 w, [%r30], 0;
	selp.u32 %r4, 1, 0, w;
	}
	setp.eq.u32 %p2, %r4, 0;
	@%p2 bra $L_wait;
	tcgen05.fence::after_thread_sync;
	tcgen05.ld.sync.aligned.32x32b.x8.b32 {%r20, %r21, %r22, %r23, %r24, %r25, %r26, %r27}, [%r3];
	tcgen05.wait::ld.sync.aligned;
	st.global.u32 [%rd4], %r20;
	st.global.u32 [%rd4+4], %r21;
	st.global.u32 [%rd4+8], %r22;
	st.global.u32 [%rd4+12], %r23;
	st.global.u32 [%rd4+16], %r24;
	st.global.u32 [%rd4+20], %r25;
	st.global.u32 [%rd4+24], %r26;
	st.global.u32 [%rd4+28], %r27;
	tcgen05.fence::before_thread_sync;
	bar.sync 0;
	tcgen05.fence::after_thread_sync;
	tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r3, 32;";
    let w = run_words(body, 32, 16 * 32).unwrap();
    for l in 0..32usize {
        let from = l.saturating_sub(1) as u32;
        let want: Vec<u32> = (0..8).map(|c| from * 100 + c).collect();
        assert_eq!(&w[l * 16..l * 16 + 8], &want[..], "lane {l}");
    }
    // The lane of the address must start a quarter of the 128 lanes.
    let e = run_words(
        "
	mov.u32 %r2, smem_raw;
	add.s32 %r30, %r2, 64;
	setp.eq.u32 %p1, %r1, 0;
	@%p1 mbarrier.init.shared::cta.b64 [%r30], 1;
	bar.sync 0;
	tcgen05.fence::after_thread_sync;
	tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r2], 32;
	ld.shared.u32 %r3, [%r2];
	add.s32 %r4, %r3, 1048576;
	@%p1 tcgen05.shift.cta_group::1.down [%r4];
	@%p1 tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r30];
	$L_wait:
	{
	.reg .pred w;
	mbarrier.try_wait.parity.shared::cta.b64 w, [%r30], 0;
	selp.u32 %r5, 1, 0, w;
	}
	setp.eq.u32 %p2, %r5, 0;
	@%p2 bra $L_wait;",
        32,
        1,
    )
    .unwrap_err();
    assert!(e.to_string().contains("must be 0, 32, 64 or 96"), "{e}");
}

#[test]
fn tcgen05_cp_copies_a_128_row_matrix_from_its_descriptor() {
    // 128 rows of 32 bytes in the no-swizzle K-major layout at smem_raw + 1024 (core matrices
    // of 8 rows x 16 bytes: a row's second chunk LBO = 128 bytes on, 8-row groups SBO = 256
    // bytes apart); shared word i holds i. Thread 0 copies them (.128x256b) to columns 0-7 and
    // commits; each warp then reads its 32 lanes back.
    let body = "
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
	shl.b32 %r7, %r1, 3;
	add.s32 %r8, %r7, 1;
	add.s32 %r9, %r7, 2;
	add.s32 %r10, %r7, 3;
	st.shared.v4.u32 [%r6], {%r7, %r8, %r9, %r10};
	add.s32 %r11, %r7, 4;
	add.s32 %r12, %r7, 5;
	add.s32 %r13, %r7, 6;
	add.s32 %r14, %r7, 7;
	st.shared.v4.u32 [%r6+16], {%r11, %r12, %r13, %r14};
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
	$L_wait:
	{
	.reg .pred w;
	mbarrier.try_wait.parity.shared::cta.b64 w, [%r30], 0;
	selp.u32 %r4, 1, 0, w;
	}
	setp.eq.u32 %p2, %r4, 0;
	@%p2 bra $L_wait;
	tcgen05.fence::after_thread_sync;
	and.b32 %r15, %r1, 96;
	shl.b32 %r16, %r15, 16;
	add.s32 %r17, %r3, %r16;
	tcgen05.ld.sync.aligned.32x32b.x8.b32 {%r20, %r21, %r22, %r23, %r24, %r25, %r26, %r27}, [%r17];
	tcgen05.wait::ld.sync.aligned;
	st.global.u32 [%rd4], %r20;
	st.global.u32 [%rd4+4], %r21;
	st.global.u32 [%rd4+8], %r22;
	st.global.u32 [%rd4+12], %r23;
	st.global.u32 [%rd4+16], %r24;
	st.global.u32 [%rd4+20], %r25;
	st.global.u32 [%rd4+24], %r26;
	st.global.u32 [%rd4+28], %r27;
	tcgen05.fence::before_thread_sync;
	bar.sync 0;
	tcgen05.fence::after_thread_sync;
	@%p3 tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r3, 32;";
    let w = run_words(body, 128, 16 * 128).unwrap();
    for r in 0..128u32 {
        // Byte offsets of the row's two chunks in the region, as words.
        let w0 = ((r / 8) * 256 + (r % 8) * 16) / 4;
        let want: Vec<u32> = (w0..w0 + 4).chain(w0 + 32..w0 + 36).collect();
        let at = r as usize * 16;
        assert_eq!(&w[at..at + 8], &want[..], "lane {r}");
    }
    // Shapes and forms not modelled are refused by name, never skipped.
    let e = run_words(
        "\ttcgen05.cp.cta_group::1.128x128b.b8x16.b6x16_p32 [%r1], %rd1;",
        32,
        1,
    )
    .unwrap_err();
    assert!(
        matches!(e, SimError::Unsupported { ref opcode, .. } if opcode.contains("b6x16_p32")),
        "{e}"
    );
}

#[test]
fn a_long_trace_keeps_its_latest_events_and_a_stopped_run_its_stop() {
    // One thread completes 300 000 phases of a one-arrival mbarrier (an event each), then
    // traps: the trace keeps the latest events, says how many it dropped, and ends with the stop.
    let ptx = format!(
        "{HEAD}.extern .shared .align 1024 .b8 smem_raw[];\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{{\n\t.reg .pred %p<4>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<4>;\n\tmov.u32 %r1, smem_raw;\n\tmbarrier.init.shared::cta.b64 [%r1], 1;\n\tmov.u32 %r2, 0;\n$L_loop:\n\tmbarrier.arrive.shared::cta.b64 %rd1, [%r1];\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, 300000;\n\t@%p1 bra $L_loop;\n\ttrap;\n}}\n"
    );
    let p = Program::parse(&ptx).unwrap();
    let mut dev = Device::new();
    let l = Launch {
        kernel: "k".into(),
        grid: [1, 1, 1],
        block: [1, 1, 1],
        cluster: [1, 1, 1],
        dynamic_smem: 1024,
        params: vec![Param::U64(0)],
        barrier_names: vec![],
        sources: vec![],
    };
    let o = Options {
        trace: true,
        ..Options::default()
    };
    let s = sim::run_traced(&p, &mut dev, &l, &o).unwrap_err();
    assert!(s.error.to_string().contains("trap"), "{}", s.error);
    assert!(
        s.trace[0].contains("earlier events dropped"),
        "{}",
        s.trace[0]
    );
    assert!(s.trace.len() <= 200_002, "{}", s.trace.len());
    let last = s.trace.last().unwrap();
    assert!(
        last.contains("stopped: fault") && last.contains("trap"),
        "{last}"
    );
    // The event before the stop is the last phase, not one of the first.
    let before = &s.trace[s.trace.len() - 2];
    assert!(before.contains("completes phase 299999"), "{before}");
}
