//! Instructions of other targets: `wgmma` is an sm_90a instruction (PTX ISA "wgmma.mma_async",
//! target notes), so an sm_100a module holding it is refused at decode as not an sm_100a
//! instruction, not as a gap of the simulator.

use sim::{Program, SimError};

const HEAD: &str = ".version 9.0\n.target sm_100a\n.address_size 64\n";

fn body(ins: &str) -> String {
    format!(
        "{HEAD}.visible .entry k()\n{{\n\t.reg .f32 %f<8>;\n\t.reg .b64 %rd<4>;\n\tmov.u64 %rd1, 0;\n\tmov.u64 %rd2, 0;\n\t{ins}\n\tret;\n}}\n"
    )
}

#[test]
fn wgmma_is_refused_as_an_sm90a_instruction() {
    let e = Program::parse(&body(
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, 1, 1, 1, 0, 0;",
    ))
    .expect_err("wgmma is refused");
    assert!(matches!(e, SimError::Unsupported { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains("not an sm_100a instruction"), "{text}");
    assert!(!text.contains("not modelled"), "{text}");
    // The control: another unknown opcode keeps the ordinary words.
    let e = Program::parse(&body("nosuchop.b32 %f1, %f2;")).expect_err("refused");
    assert!(e.to_string().contains("not modelled"), "{e}");
}
