//! The simulator's front end on what any honest kernel's PTX contains: local memory, labels
//! and declarations scoped to their block, `__shared__` declared in a kernel, `.func` calls
//! (recursive too), printf, assert, structs passed by value, and instruction forms the
//! interpreter does not run refused when the module is decoded.
//!
//! Two sources: hand-written PTX, and NVRTC's own output for `ptx/frontend/printf_local.cu`
//! (committed as `printf_local.ptx`; `ptx/frontend/nvrtc_ptx.py` regenerates it: the sim crate
//! is std-only and cannot call NVRTC). Every planted bug has a harmless control beside it.

use sim::{run_traced, Device, Launch, Options, Param, Program, RunReport, SimError, Stopped};

const NVRTC: &str = include_str!("ptx/frontend/printf_local.ptx");
const HEAD: &str = ".version 9.0\n.target sm_100a\n.address_size 64\n";

fn launch(kernel: &str, threads: u32, params: Vec<Param>) -> Launch {
    Launch {
        kernel: kernel.into(),
        grid: [1, 1, 1],
        block: [threads, 1, 1],
        cluster: [1, 1, 1],
        dynamic_smem: 0,
        params,
        ..Launch::default()
    }
}

fn go(p: &Program, dev: &mut Device, l: &Launch) -> Result<RunReport, Stopped> {
    let o = Options {
        max_steps: 20_000_000,
        ..Options::default()
    };
    run_traced(p, dev, l, &o)
}

fn put_i32(dev: &mut Device, v: &[i32]) -> u64 {
    let a = dev.alloc(v.len() as u64 * 4);
    let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    dev.write(a, &b);
    a
}

fn get_i32(dev: &Device, a: u64, n: usize) -> Vec<i32> {
    let mut b = vec![0u8; n * 4];
    dev.read(a, &mut b);
    b.chunks(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn nvrtc() -> Program {
    Program::parse(NVRTC).expect("NVRTC's PTX decodes")
}

// ---------------------------------------------------------------------------------------------
// Local memory
// ---------------------------------------------------------------------------------------------

/// `int buf[16]` indexed by a value from memory: NVRTC puts it in `.local` (a
/// `__local_depot`, `%SPL`), which once parsed as the `.loc` directive. Each thread's array is
/// its own: thread t's holds in[i] * t.
#[test]
fn nvrtc_local_array_indexed_dynamically_is_private_to_each_thread() {
    let p = nvrtc();
    let mut dev = Device::new();
    let mut input: Vec<i32> = (1..=16).collect();
    let ks: Vec<i32> = (0..32).map(|t| (t * 7 + 3) % 16).collect();
    input.extend(&ks);
    let a = put_i32(&mut dev, &input);
    let out = dev.alloc(32 * 4);
    let n = 5;
    go(
        &p,
        &mut dev,
        &launch(
            "local_array",
            32,
            vec![Param::U64(a), Param::U64(out), Param::U32(n)],
        ),
    )
    .map_err(|s| s.error)
    .unwrap();
    let got = get_i32(&dev, out, 32);
    for t in 0..32i32 {
        let k = ks[t as usize];
        let buf = |i: i32| (i + 1) * t;
        assert_eq!(
            got[t as usize],
            buf(k) + buf((k + n as i32) & 15),
            "thread {t}"
        );
    }
}

/// A hand-written `.local` array next to `.loc` lines, addressed three ways: by name with
/// `ld.local`, through `cvta.local` and a generic `ld`, and through the `%SP` idiom.
#[test]
fn local_declarations_and_loc_directives_parse_as_what_they_are() {
    let ptx = format!(
        "{HEAD}.visible .entry k(.param .u64 k_param_0)\n{{\n\t.local .align 4 .b8 buf[64];\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<8>;\n\t.loc 1 5 2\n\tld.param.u64 %rd1, [k_param_0];\n\tmov.u32 %r1, %tid.x;\n\tand.b32 %r2, %r1, 15;\n\tmul.wide.u32 %rd2, %r2, 4;\n\tmov.u64 %rd3, buf;\n\tadd.s64 %rd4, %rd3, %rd2;\n\tst.local.u32 [%rd4], %r1;\n\t.loc 1 6 2\n\tcvta.local.u64 %rd5, %rd4;\n\tld.u32 %r3, [%rd5];\n\tld.local.u32 %r4, [buf+4];\n\tadd.s32 %r5, %r3, %r4;\n\tmul.wide.u32 %rd6, %r1, 4;\n\tadd.s64 %rd7, %rd1, %rd6;\n\tst.global.u32 [%rd7], %r5;\n\tret;\n}}\n\t.file 1 \"k.cu\"\n"
    );
    let p = Program::parse(&ptx).unwrap();
    assert_eq!(p.kernel("k").unwrap().local_bytes, 64);
    let mut dev = Device::new();
    let out = dev.alloc(4 * 4);
    go(&p, &mut dev, &launch("k", 4, vec![Param::U64(out)]))
        .map_err(|s| s.error)
        .unwrap();
    // Thread 1 wrote buf[1] = 1 and reads it back twice; the others read their own buf[1],
    // never written: 0 (local memory is per thread).
    assert_eq!(get_i32(&dev, out, 4), [0, 2, 2, 3]);
}

/// Local memory is bounded per thread: 512 KiB, CUDA's limit. A kernel over it is refused at
/// launch; one under it runs.
#[test]
fn local_memory_past_the_per_thread_limit_is_refused_at_launch() {
    let k = |bytes: u32| {
        format!(
            "{HEAD}.visible .entry k()\n{{\n\t.local .align 4 .b8 big[{bytes}];\n\t.reg .b32 %r<2>;\n\tmov.u32 %r1, 7;\n\tst.local.u32 [big], %r1;\n\tret;\n}}\n"
        )
    };
    let p = Program::parse(&k(600_000)).unwrap();
    let e = go(&p, &mut Device::new(), &launch("k", 1, vec![]))
        .unwrap_err()
        .error;
    assert!(
        matches!(&e, SimError::Launch(m) if m.contains("600000 bytes of local memory")),
        "{e}"
    );
    let p = Program::parse(&k(4000)).unwrap();
    go(&p, &mut Device::new(), &launch("k", 1, vec![])).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Scopes: labels and declarations belong to their block
// ---------------------------------------------------------------------------------------------

/// An inline-asm loop `{ .reg .pred p; LAB_WAIT: ... @p bra LAB_WAIT; }` inlined three times:
/// each copy loops on its own label. With kernel-wide labels every copy jumped into the last
/// one's loop.
#[test]
fn nvrtc_inlined_asm_wait_loops_each_jump_to_their_own_label() {
    let p = nvrtc();
    let mut dev = Device::new();
    let a = put_i32(&mut dev, &[3, 5, 7]);
    let out = dev.alloc(3 * 4);
    go(
        &p,
        &mut dev,
        &launch("three_waits", 1, vec![Param::U64(a), Param::U64(out)]),
    )
    .map_err(|s| s.error)
    .unwrap();
    assert_eq!(get_i32(&dev, out, 3), [3, 5, 7]);
}

fn two_blocks(first: &str, second: &str, after: &str) -> String {
    format!(
        "{HEAD}.visible .entry k(.param .u64 k_param_0)\n{{\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [k_param_0];\n\tmov.u32 %r5, 0;\n\tmov.u32 %r6, 0;\n\t{{\n\t.reg .pred p;\n{first}\tadd.u32 %r5, %r5, 1;\n\tsetp.lt.u32 p, %r5, 3;\n\t@p bra L;\n\t}}\n\t{{\n\t.reg .pred p;\n{second}\tadd.u32 %r6, %r6, 2;\n\tsetp.lt.u32 p, %r6, 10;\n\t@p bra L;\n\t}}\n{after}\tst.global.u32 [%rd1], %r5;\n\tst.global.u32 [%rd1+4], %r6;\n\tret;\n}}\n"
    )
}

#[test]
fn the_same_label_in_two_blocks_is_two_labels() {
    let p = Program::parse(&two_blocks("L:\n", "L:\n", "")).unwrap();
    let mut dev = Device::new();
    let out = dev.alloc(8);
    go(&p, &mut dev, &launch("k", 1, vec![Param::U64(out)]))
        .map_err(|s| s.error)
        .unwrap();
    assert_eq!(get_i32(&dev, out, 2), [3, 10]);
}

#[test]
fn an_ambiguous_or_invisible_branch_target_is_a_decode_error() {
    // Twice in one block: which one a branch means is ambiguous.
    let e = Program::parse(&two_blocks("L:\nL:\n", "L:\n", "")).unwrap_err();
    assert!(e.to_string().contains("label L is defined twice"), "{e}");
    // Only in the first block: the second block's branch has no target it can see.
    let e = Program::parse(&two_blocks("L:\n", "", "")).unwrap_err();
    assert!(
        matches!(&e, SimError::Parse { detail, .. } if detail.contains("branch target L is not a label of this block")),
        "{e}"
    );
    // A label of the body is visible in every block inside it (the harmless case).
    let p = Program::parse(
        &two_blocks("", "", "L:\n")
            .replace("@p bra L;", "@p bra M;")
            .replace("\tmov.u32 %r6, 0;\n", "\tmov.u32 %r6, 0;\nM:\n"),
    )
    .unwrap();
    assert!(p.kernel("k").is_some());
}

#[test]
fn an_undefined_branch_target_is_a_decode_error_not_a_jump() {
    let body = |target: &str| {
        format!(
            "{HEAD}.visible .entry k()\n{{\n\t.reg .pred %p<2>;\n\t.reg .b32 %r<2>;\n\tmov.u32 %r1, 1;\n\tsetp.eq.u32 %p1, %r1, 0;\n\t@%p1 bra {target};\n\tmov.u32 %r1, 2;\nDONE:\n\tret;\n}}\n"
        )
    };
    let e = Program::parse(&body("DONE_TYPO")).unwrap_err();
    assert!(
        matches!(&e, SimError::Parse { ptx_line: 10, detail } if detail.contains("DONE_TYPO")),
        "{e:?}"
    );
    Program::parse(&body("DONE")).unwrap();
}

/// NVVM writes a `__shared__` array declared in a kernel as a `.shared` declaration inside the
/// entry's body ("demoted variable").
#[test]
fn nvrtc_shared_declared_in_the_kernel_body() {
    let p = nvrtc();
    let mut dev = Device::new();
    let out = dev.alloc(64 * 4);
    go(
        &p,
        &mut dev,
        &launch("block_shared", 64, vec![Param::U64(out)]),
    )
    .map_err(|s| s.error)
    .unwrap();
    let want: Vec<i32> = (0..64).map(|i| (63 - i) * 3).collect();
    assert_eq!(get_i32(&dev, out, 64), want);
}

/// A body `.shared` variable has a place of its own (not the module's variables', not the
/// dynamic array's) and a name only its block sees.
#[test]
fn body_shared_variables_have_their_own_place_and_block_scope() {
    let k = |use_outside: bool| {
        format!(
            "{HEAD}.shared .align 4 .b8 module_var[16];\n.extern .shared .align 16 .b8 dyn[];\n.visible .entry k(.param .u64 k_param_0)\n{{\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [k_param_0];\n\tmov.u32 %r1, 11;\n\tst.shared.u32 [module_var], %r1;\n\tmov.u32 %r2, 22;\n\tst.shared.u32 [dyn], %r2;\n\t{{\n\t.shared .align 4 .b8 inner[16];\n\tmov.u32 %r3, 33;\n\tst.shared.u32 [inner], %r3;\n\tld.shared.u32 %r4, [inner];\n\t}}\n{}\tld.shared.u32 %r5, [module_var];\n\tld.shared.u32 %r6, [dyn];\n\tst.global.u32 [%rd1], %r4;\n\tst.global.u32 [%rd1+4], %r5;\n\tst.global.u32 [%rd1+8], %r6;\n\tret;\n}}\n",
            if use_outside { "\tld.shared.u32 %r7, [inner];\n" } else { "" }
        )
    };
    let e = Program::parse(&k(true)).unwrap_err();
    assert!(e.to_string().contains("inner"), "{e}");
    let p = Program::parse(&k(false)).unwrap();
    let mut dev = Device::new();
    let out = dev.alloc(12);
    let mut l = launch("k", 1, vec![Param::U64(out)]);
    l.dynamic_smem = 64;
    go(&p, &mut dev, &l).map_err(|s| s.error).unwrap();
    assert_eq!(get_i32(&dev, out, 3), [33, 11, 22]);
}

// ---------------------------------------------------------------------------------------------
// Functions
// ---------------------------------------------------------------------------------------------

#[test]
fn nvrtc_call_of_a_device_function() {
    let p = nvrtc();
    let mut dev = Device::new();
    let a = put_i32(&mut dev, &[5, 1, 10, 0]);
    let out = dev.alloc(16);
    go(
        &p,
        &mut dev,
        &launch("caller", 4, vec![Param::U64(a), Param::U64(out)]),
    )
    .map_err(|s| s.error)
    .unwrap();
    assert_eq!(get_i32(&dev, out, 4), [120, 1, 3_628_800, 1]);
}

const FACT: &str = ".visible .func (.param .b32 fact_ret) fact(.param .b32 fact_n)\n{\n\t.reg .pred %p<2>;\n\t.reg .b32 %r<6>;\n\tld.param.b32 %r1, [fact_n];\n\tsetp.le.s32 %p1, %r1, 1;\n\t@%p1 bra DONE;\n\tsub.s32 %r2, %r1, 1;\n\t{\n\t.param .b32 a0;\n\tst.param.b32 [a0], %r2;\n\t.param .b32 r0;\n\tcall.uni (r0), fact, (a0);\n\tld.param.b32 %r3, [r0];\n\t}\n\tmul.lo.s32 %r4, %r3, %r1;\n\tst.param.b32 [fact_ret], %r4;\n\tret;\nDONE:\n\tst.param.b32 [fact_ret], 1;\n\tret;\n}\n";

fn fact_kernel(func: &str, callee: &str) -> String {
    format!(
        "{HEAD}{func}.visible .entry k(.param .u64 k_param_0, .param .u32 k_param_1)\n{{\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n\tld.param.u64 %rd1, [k_param_0];\n\tld.param.u32 %r1, [k_param_1];\n\tmov.u32 %r2, %tid.x;\n\tadd.s32 %r1, %r1, %r2;\n\t{{\n\t.param .b32 a0;\n\tst.param.b32 [a0], %r1;\n\t.param .b32 r0;\n\tcall.uni (r0), {callee}, (a0);\n\tld.param.b32 %r3, [r0];\n\t}}\n\tmul.wide.u32 %rd2, %r2, 4;\n\tadd.s64 %rd3, %rd1, %rd2;\n\tst.global.u32 [%rd3], %r3;\n\tret;\n}}\n"
    )
}

/// A recursive `.func`: each activation has its own registers (the caller's `n` survives the
/// recursive call) and its own `.param` variables.
#[test]
fn recursion_has_a_register_frame_per_activation() {
    let p = Program::parse(&fact_kernel(FACT, "fact")).unwrap();
    let mut dev = Device::new();
    let out = dev.alloc(4 * 4);
    go(
        &p,
        &mut dev,
        &launch("k", 4, vec![Param::U64(out), Param::U32(3)]),
    )
    .map_err(|s| s.error)
    .unwrap();
    assert_eq!(get_i32(&dev, out, 4), [6, 24, 120, 720]);
}

/// Recursion without a base case ends in a fault naming the bound, not a host stack overflow.
#[test]
fn runaway_recursion_is_bounded() {
    let forever = ".visible .func (.param .b32 f_ret) f(.param .b32 f_n)\n{\n\t.reg .b32 %r<2>;\n\tld.param.b32 %r1, [f_n];\n\t{\n\t.param .b32 a0;\n\tst.param.b32 [a0], %r1;\n\t.param .b32 r0;\n\tcall.uni (r0), f, (a0);\n\t}\n\tst.param.b32 [f_ret], %r1;\n\tret;\n}\n";
    let p = Program::parse(&fact_kernel(forever, "f")).unwrap();
    let mut dev = Device::new();
    let out = dev.alloc(4);
    let e = go(
        &p,
        &mut dev,
        &launch("k", 1, vec![Param::U64(out), Param::U32(1)]),
    )
    .unwrap_err()
    .error;
    assert!(
        matches!(&e, SimError::Fault { detail, .. } if detail.contains("more than 1024 nested calls")),
        "{e}"
    );
}

/// A call whose arguments do not match the callee's parameters is refused at decode.
#[test]
fn a_call_is_checked_against_the_callee() {
    let wrong = fact_kernel(FACT, "fact").replace(
        "\t.param .b32 a0;\n\tst.param.b32 [a0], %r1;",
        "\t.param .b64 a0;\n\tst.param.b64 [a0], %rd1;",
    );
    let e = Program::parse(&wrong).unwrap_err();
    assert!(e.to_string().contains("fact declares"), "{e}");
    let missing = fact_kernel(FACT, "fact_typo");
    let e = Program::parse(&missing).unwrap_err();
    assert!(
        matches!(&e, SimError::Unsupported { opcode, .. } if opcode.contains("fact_typo")),
        "{e}"
    );
}

/// `struct` by value: `.param .align 8 .b8 by_value_param_0[24]`, read with `ld.param` at
/// offsets (`.s32` into a 64-bit register sign-extends).
#[test]
fn nvrtc_struct_passed_by_value() {
    let p = nvrtc();
    let mut dev = Device::new();
    let out = dev.alloc(32);
    let mut s = Vec::new();
    s.extend((-7i32).to_le_bytes());
    s.extend(2.5f32.to_le_bytes());
    s.extend((-(1i64 << 40)).to_le_bytes());
    for d in [1i16, 2, 3] {
        s.extend(d.to_le_bytes());
    }
    s.extend([0u8; 2]);
    go(
        &p,
        &mut dev,
        &launch("by_value", 1, vec![Param::Bytes(s), Param::U64(out)]),
    )
    .map_err(|s| s.error)
    .unwrap();
    let mut b = [0u8; 32];
    dev.read(out, &mut b);
    let got: Vec<i64> = b
        .chunks(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got, [-7, 10, -(1i64 << 40), 1 ^ (2 << 4) ^ (3 << 8)]);
}

// ---------------------------------------------------------------------------------------------
// printf
// ---------------------------------------------------------------------------------------------

fn printer_params(dev: &mut Device) -> Vec<Param> {
    let s = dev.alloc(8);
    dev.write(s, b"text\0");
    vec![
        Param::U32(-42i32 as u32),
        Param::U32(3054),
        Param::U32(1.5f32.to_bits()),
        Param::U64(0.000123456f64.to_bits()),
        Param::U64(-1_234_567_890_123i64 as u64),
        Param::U64(s),
    ]
}

#[test]
fn nvrtc_printf_formats_as_the_c_library_does() {
    let p = nvrtc();
    let mut dev = Device::new();
    let params = printer_params(&mut dev);
    let r = go(&p, &mut dev, &launch("printer", 1, params))
        .map_err(|s| s.error)
        .unwrap();
    assert_eq!(
        r.printf,
        [
            "a=-42 b=3054 x=bee X=0XBEE o=5756 c=Q\n".to_string(),
            "f=1.500000 e=1.235e-04 g=0.000123456 G=1E-07 w=[    1.50] l=[-42   ] z=[-0042]\n"
                .to_string(),
            format!(
                "ll=-1234567890123 llu={} ld=-1234567890123 s=text p=(nil) pct=%\n",
                -1_234_567_890_123i64 as u64
            ),
            "tid 0\n".to_string(),
        ]
    );
    assert_eq!(r.printf_dropped, 0);
}

/// Several threads: each thread's output in its program order; every thread's output there.
#[test]
fn nvrtc_printf_of_several_threads_keeps_each_threads_order() {
    let p = nvrtc();
    let mut dev = Device::new();
    let params = printer_params(&mut dev);
    let r = go(&p, &mut dev, &launch("printer", 8, params))
        .map_err(|s| s.error)
        .unwrap();
    assert_eq!(r.printf.len(), 32);
    for t in 0..8 {
        assert_eq!(
            r.printf
                .iter()
                .filter(|l| **l == format!("tid {t}\n"))
                .count(),
            1
        );
    }
    // Each "tid" line comes after three lines of the same thread: at least 3 * (k + 1) lines
    // precede the k-th "tid" line.
    let tids: Vec<usize> = (0..r.printf.len())
        .filter(|&i| r.printf[i].starts_with("tid "))
        .collect();
    for (k, &i) in tids.iter().enumerate() {
        assert!(i >= 3 * (k + 1), "tid line {k} at {i}");
    }
}

fn print_loop(times: u32) -> String {
    // "%60d\n" then the arguments buffer in local memory; vprintf's return value stored.
    format!(
        "{HEAD}.extern .func (.param .b32 func_retval0) vprintf\n(\n\t.param .b64 vprintf_param_0,\n\t.param .b64 vprintf_param_1\n)\n;\n.global .align 1 .b8 $str[6] = {{37, 54, 48, 100, 10}};\n.visible .entry k(.param .u64 k_param_0)\n{{\n\t.local .align 8 .b8 __local_depot0[8];\n\t.reg .b64 %SP;\n\t.reg .b64 %SPL;\n\t.reg .pred %p<2>;\n\t.reg .b32 %r<6>;\n\t.reg .b64 %rd<6>;\n\tmov.u64 %SPL, __local_depot0;\n\tcvta.local.u64 %SP, %SPL;\n\tld.param.u64 %rd1, [k_param_0];\n\tmov.u64 %rd2, $str;\n\tcvta.global.u64 %rd3, %rd2;\n\tadd.u64 %rd4, %SP, 0;\n\tmov.u32 %r1, 0;\nLOOP:\n\tst.local.u32 [__local_depot0], %r1;\n\t{{\n\t.param .b64 param0;\n\tst.param.b64 [param0], %rd3;\n\t.param .b64 param1;\n\tst.param.b64 [param1], %rd4;\n\t.param .b32 retval0;\n\tcall.uni (retval0), vprintf, (param0, param1);\n\tld.param.b32 %r2, [retval0];\n\t}}\n\tadd.u32 %r1, %r1, 1;\n\tsetp.lt.u32 %p1, %r1, {times};\n\t@%p1 bra LOOP;\n\tst.global.u32 [%rd1], %r2;\n\tret;\n}}\n"
    )
}

/// The printf FIFO holds 1 MiB, like the GPU's default: past it the oldest output goes (the
/// GPU's buffer is circular) and the report counts what went. Under it nothing is dropped.
#[test]
fn printf_output_is_bounded_like_the_gpu_fifo() {
    let line = |i: u32| format!("{i:>60}\n");
    let p = Program::parse(&print_loop(100)).unwrap();
    let mut dev = Device::new();
    let out = dev.alloc(4);
    let r = go(&p, &mut dev, &launch("k", 1, vec![Param::U64(out)]))
        .map_err(|s| s.error)
        .unwrap();
    assert_eq!(r.printf.len(), 100);
    assert_eq!(r.printf_dropped, 0);
    assert_eq!(r.printf[99], line(99));
    // vprintf returns the number of arguments it consumed.
    assert_eq!(get_i32(&dev, out, 1), [1]);

    let n = 20_000u32;
    let p = Program::parse(&print_loop(n)).unwrap();
    let r = go(&p, &mut dev, &launch("k", 1, vec![Param::U64(out)]))
        .map_err(|s| s.error)
        .unwrap();
    let kept = (1u64 << 20) / 61;
    assert_eq!(r.printf.len() as u64, kept);
    assert_eq!(r.printf_dropped, n as u64 - kept);
    assert!(r.printf_bytes <= 1 << 20);
    assert_eq!(r.printf.last(), Some(&line(n - 1)));
    assert_eq!(r.printf[0], line(n - kept as u32));
}

// ---------------------------------------------------------------------------------------------
// assert
// ---------------------------------------------------------------------------------------------

#[test]
fn nvrtc_assert_that_fails_ends_the_run_with_its_message() {
    let p = nvrtc();
    let mut dev = Device::new();
    let a = put_i32(&mut dev, &[1, 2, 3, 100]);
    let out = dev.alloc(16);
    let e = go(
        &p,
        &mut dev,
        &launch("asserter", 4, vec![Param::U64(a), Param::U64(out)]),
    )
    .unwrap_err()
    .error;
    match &e {
        SimError::Assert(a) => {
            assert_eq!(a.message, "v < 100");
            assert_eq!(a.file, "printf_local.cu");
            assert_eq!(a.line, 21);
            assert_eq!(a.function, "void asserter(const int *, int *)");
            assert_eq!(a.thread, [3, 0, 0]);
            assert_eq!(a.block, [0, 0, 0]);
        }
        other => panic!("expected an assertion, got {other:?}"),
    }
    assert!(
        e.to_string()
            .starts_with("assertion failed: v < 100 at printf_local.cu:21"),
        "{e}"
    );
}

#[test]
fn nvrtc_assert_that_holds_changes_nothing() {
    let p = nvrtc();
    let mut dev = Device::new();
    let a = put_i32(&mut dev, &[1, 2, 3, 99]);
    let out = dev.alloc(16);
    go(
        &p,
        &mut dev,
        &launch("asserter", 4, vec![Param::U64(a), Param::U64(out)]),
    )
    .map_err(|s| s.error)
    .unwrap();
    assert_eq!(get_i32(&dev, out, 4), [2, 3, 4, 100]);
}

// ---------------------------------------------------------------------------------------------
// Not modelled: decided when the module is decoded
// ---------------------------------------------------------------------------------------------

fn with_instruction(ins: &str) -> String {
    format!(
        "{HEAD}.visible .entry k(.param .u64 k_param_0)\n{{\n\t.reg .b16 %rs<4>;\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<2>;\n\t.loc 1 12 3\n\tld.param.u64 %rd1, [k_param_0];\n\tmov.u32 %r1, 5;\n\tst.global.u32 [%rd1], %r1;\n\t.loc 1 13 3\n\t{ins}\n\tret;\n}}\n\t.file 1 \"/tmp/k.cu\"\n"
    )
}

/// An instruction the interpreter does not run is refused before any thread runs, naming the
/// instruction, its PTX line and its source line: a saturating integer multiply, a surface load
/// a texture fetch (none of them modelled) and a conversion the ISA does not define.
#[test]
fn an_unsupported_form_is_refused_at_decode_with_its_ptx_and_source_lines() {
    for ins in [
        "mul.lo.sat.u32 %r2, %r1, %r1;",
        "suld.b.1d.b32.trap {%r2}, [%rd1, {%r1}];",
        "tex.1d.v4.f32.s32 {%r1, %r2, %r3, %r3}, [%rd1, {%r1}];",
        // Integral rounding of a narrowing float conversion is not a PTX form.
        "cvt.rni.f16.f32 %rs1, %r1;",
    ] {
        let e = Program::parse(&with_instruction(ins)).unwrap_err();
        let op = ins.split(' ').next().unwrap();
        match &e {
            SimError::Unsupported { opcode, ptx_line } => {
                assert_eq!(*ptx_line, 14, "{e}");
                assert!(opcode.starts_with(op), "{e}");
                assert!(opcode.contains("source k.cu:13"), "{e}");
            }
            other => panic!("expected Unsupported, got {other:?}"),
        }
    }
    // The same kernel with forms the interpreter runs decodes and runs.
    for ins in [
        "add.f32 %r2, %r1, %r1;",
        "cvt.rn.f16.f32 %rs1, %r1;",
        "add.f16 %rs1, %rs2, %rs3;",
        "add.rz.f32 %r2, %r1, %r1;",
    ] {
        let p = Program::parse(&with_instruction(ins)).unwrap();
        let mut dev = Device::new();
        let out = dev.alloc(4);
        go(&p, &mut dev, &launch("k", 1, vec![Param::U64(out)]))
            .map_err(|s| s.error)
            .unwrap();
        assert_eq!(get_i32(&dev, out, 1), [5]);
    }
}

/// A call of a function the module does not define (the CUDA runtime's `malloc`, say) is
/// refused at decode, not at the call.
#[test]
fn a_call_of_an_unknown_external_function_is_refused_at_decode() {
    let ptx = format!(
        "{HEAD}.extern .func (.param .b64 func_retval0) malloc\n(\n\t.param .b64 malloc_param_0\n)\n;\n.visible .entry k()\n{{\n\t.reg .b64 %rd<3>;\n\tmov.u64 %rd1, 16;\n\t{{\n\t.param .b64 param0;\n\tst.param.b64 [param0], %rd1;\n\t.param .b64 retval0;\n\tcall.uni (retval0), malloc, (param0);\n\tld.param.b64 %rd2, [retval0];\n\t}}\n\tret;\n}}\n"
    );
    let e = Program::parse(&ptx).unwrap_err();
    assert!(
        matches!(&e, SimError::Unsupported { opcode, ptx_line: 17 } if opcode.contains("malloc")),
        "{e:?}"
    );
}
