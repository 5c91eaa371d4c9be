//! `activemask` in divergent code (PTX ISA "activemask": the threads of the warp currently
//! executing it with the caller): after a branch on the lane, each side sees only its own
//! lanes; before the branch, the converged warp sees all 32. Checked under every schedule
//! policy, since lanes of a diverged warp run one group after another.

use sim::{Device, Launch, Options, Param, Policy, Program};

const PTX: &str = ".version 9.0\n.target sm_100a\n.address_size 64\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\t.reg .pred %p<4>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<8>;\n\tld.param.u64 %rd1, [k_param_0];\n\tcvta.to.global.u64 %rd2, %rd1;\n\tmov.u32 %r1, %tid.x;\n\tmul.wide.u32 %rd3, %r1, 8;\n\tadd.s64 %rd4, %rd2, %rd3;\n\tactivemask.b32 %r3;\n\tst.global.u32 [%rd4+4], %r3;\n\tand.b32 %r4, %r1, 31;\n\tsetp.lt.u32 %p1, %r4, 12;\n\t@%p1 bra $L_low;\n\tactivemask.b32 %r2;\n\tbra $L_store;\n$L_low:\n\tactivemask.b32 %r2;\n$L_store:\n\tst.global.u32 [%rd4], %r2;\n\tret;\n}\n";

#[test]
fn activemask_names_only_the_lanes_of_its_branch() {
    let p = Program::parse(PTX).expect("parses");
    for policy in [
        Policy::Random,
        Policy::AsyncLate,
        Policy::AsyncEarly,
        Policy::Pct { depth: 3 },
    ] {
        for seed in 1..4 {
            let mut dev = Device::new();
            let out = dev.alloc(64 * 8);
            let l = Launch {
                kernel: "k".into(),
                grid: [1, 1, 1],
                block: [64, 1, 1],
                cluster: [1, 1, 1],
                dynamic_smem: 0,
                params: vec![Param::U64(out)],
                barrier_names: vec![],
                sources: vec![],
            };
            let o = Options {
                seed,
                policy,
                ..Options::default()
            };
            sim::run(&p, &mut dev, &l, &o).expect("runs");
            let mut b = vec![0u8; 64 * 8];
            assert!(dev.read(out, &mut b));
            for t in 0..64usize {
                let word = |i: usize| {
                    u32::from_le_bytes(b[8 * t + 4 * i..8 * t + 4 * i + 4].try_into().unwrap())
                };
                let want = if t % 32 < 12 {
                    0x0000_0FFF
                } else {
                    0xFFFF_F000
                };
                assert_eq!(
                    word(0),
                    want,
                    "{policy:?} seed {seed}: thread {t} in its branch"
                );
                assert_eq!(
                    word(1),
                    0xFFFF_FFFF,
                    "{policy:?} seed {seed}: thread {t} converged"
                );
            }
        }
    }
}
