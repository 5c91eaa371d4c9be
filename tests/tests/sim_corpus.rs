//! The simulator's instruction-coverage corpus cannot rot: `steps/sim/tests/corpus/math.ptx` (and `ftz_atom.ptx`)
//! must be what the workbook's own NVRTC wrapper makes of `math.cu` today (the options of
//! `compile_ptx` for sm_100a, which `corpus/gen.py` repeats), or the simulator's coverage
//! proof would be about PTX that NVRTC no longer emits.

use common::compile::{compile_ptx, KernelSource};
use common::Target;
use std::path::Path;

/// The PTX without its header comment (the compiler's build line may name another build of
/// the same NVRTC version) and without the `.file` table of the line information (absolute
/// paths of the checkout and of the CUDA headers, which differ between machines).
fn body(ptx: &str) -> String {
    ptx.lines()
        .skip_while(|l| l.starts_with("//") || l.trim().is_empty())
        .filter(|l| !l.trim_start().starts_with(".file"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn committed_corpus_ptx_is_what_nvrtc_makes_of_math_cu() {
    check_current("math");
}

#[test]
fn committed_corpus_ptx_is_what_nvrtc_makes_of_ftz_atom_cu() {
    check_current("ftz_atom");
}

fn check_current(stem: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../steps/sim/tests/corpus");
    let read = |n: &str| {
        std::fs::read_to_string(dir.join(n)).unwrap_or_else(|e| panic!("cannot read {n}: {e}"))
    };
    let src = KernelSource {
        path: format!("steps/sim/tests/corpus/{stem}.cu"),
        text: read(&format!("{stem}.cu")),
    };
    let fresh = compile_ptx(&src, Target::Sm100a, &[])
        .unwrap_or_else(|e| panic!("{stem}.cu does not compile: {e:#}"));
    let committed = read(&format!("{stem}.ptx"));
    let (f, c) = (body(&fresh), body(&committed));
    if f != c {
        let line = f
            .lines()
            .zip(c.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(f.lines().count().min(c.lines().count()));
        panic!(
            "steps/sim/tests/corpus/{stem}.ptx is stale (first difference at body line {}): \
             regenerate it with steps/sim/tests/corpus/gen.py",
            line + 1
        );
    }
}
