//! What the grader reads from a run: warp-level executed counts per opcode (the proof a technique
//! ran), and global variables initialised with another variable's address (`generic($str)`, as
//! NVRTC writes a `const char*` initialised with a string literal, which an honest kernel may
//! hold).

use sim::{run, Device, Launch, Options, Param, Program};

const HEAD: &str = ".version 9.0\n.target sm_100a\n.address_size 64\n";

fn launch(threads: u32, out: u64) -> Launch {
    Launch {
        kernel: "k".into(),
        grid: [2, 1, 1],
        block: [threads, 1, 1],
        cluster: [1, 1, 1],
        dynamic_smem: 0,
        params: vec![Param::U64(out)],
        barrier_names: vec![],
        sources: vec![],
    }
}

fn kernel(globals: &str, body: &str) -> String {
    format!(
        "{HEAD}{globals}.visible .entry k(\n\t.param .u64 k_param_0\n)\n{{\n\t.reg .pred %p<8>;\n\t.reg .b16 %rs<8>;\n\t.reg .b32 %r<64>;\n\t.reg .b64 %rd<16>;\n\tld.param.u64 %rd1, [k_param_0];\n\tcvta.to.global.u64 %rd2, %rd1;\n\tmov.u32 %r1, %tid.x;\n{body}\n\tret;\n}}\n"
    )
}

fn count(of: &[(String, u64)], op: &str) -> u64 {
    of.iter().find(|(o, _)| o == op).map_or(0, |(_, n)| *n)
}

#[test]
fn warp_level_counts_take_the_busiest_lane_of_each_warp_and_skip_false_guards() {
    // Two CTAs of two warps. Every lane multiplies once; lane 0 of each warp adds three times;
    // a subtraction under a guard that is never true.
    let body = "
	and.b32 %r2, %r1, 31;
	setp.eq.u32 %p1, %r2, 0;
	setp.eq.u32 %p2, %r1, 1000;
	mul.lo.u32 %r3, %r1, 3;
	@%p1 add.s32 %r4, %r3, 1;
	@%p1 add.s32 %r4, %r4, 1;
	@%p1 add.s32 %r4, %r4, 1;
	@%p2 sub.s32 %r4, %r4, 1;";
    let p = Program::parse(&kernel("", body)).unwrap();
    let mut dev = Device::new();
    let out = dev.alloc(64);
    for seed in 1..4 {
        let o = Options {
            seed,
            max_steps: 100_000,
            ..Options::default()
        };
        let r = run(&p, &mut dev, &launch(64, out), &o).unwrap();
        // Per thread: every lane's executions; per warp: one per warp-wide instruction.
        assert_eq!(count(&r.per_opcode, "mul.lo.u32"), 128);
        assert_eq!(count(&r.per_opcode_warps, "mul.lo.u32"), 4);
        // An elected lane's instruction: the warp count is the lane's.
        assert_eq!(count(&r.per_opcode, "add.s32"), 12);
        assert_eq!(count(&r.per_opcode_warps, "add.s32"), 12);
        // A false guard did none of the work: counted nowhere.
        assert_eq!(count(&r.per_opcode, "sub.s32"), 0);
        assert_eq!(count(&r.per_opcode_warps, "sub.s32"), 0);
    }
}

#[test]
fn a_pointer_initialised_with_a_strings_address_points_at_it() {
    // One thread of CTA 0 stores: the same store from both CTAs would be a race between them.
    let globals = ".global .align 1 .b8 $str[3] = {104, 105, 0};\n.global .align 8 .u64 note = generic($str);\n";
    let body = "
	ld.global.u64 %rd3, [note];
	ld.u8 %rs1, [%rd3+1];
	cvt.u32.u16 %r2, %rs1;
	mov.u32 %r5, %ctaid.x;
	or.b32 %r6, %r1, %r5;
	setp.eq.u32 %p1, %r6, 0;
	@%p1 st.global.u32 [%rd2], %r2;";
    let p = Program::parse(&kernel(globals, body)).unwrap();
    let mut dev = Device::new();
    let out = dev.alloc(64);
    run(&p, &mut dev, &launch(32, out), &Options::default()).unwrap();
    let mut b = [0u8; 4];
    dev.read(out, &mut b);
    assert_eq!(u32::from_le_bytes(b), 105, "the second byte of \"hi\"");
    // A name that is no variable is refused when the module is decoded.
    let bad = ".global .align 8 .u64 note = generic(nowhere);\n";
    assert!(Program::parse(&kernel(bad, "")).is_err());
}
