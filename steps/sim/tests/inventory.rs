//! The simulator's scope: every opcode (with its modifiers) in the PTX NVRTC produces for the
//! stock Blackwell kernels (`tests/ptx/`, made by `runner inspect N --ptx`) decodes to an
//! instruction the interpreter models. A kernel edit that brings a new instruction fails here
//! first, naming it.

use sim::decode::opcode_inventory;
use sim::{Program, SimError};

pub const FIXTURES: &[&str] = &[
    "step0.f16",
    "step1.f16",
    "step2.f16",
    "step3.f16",
    "step4.f16",
    "step5.f16",
    "step6.f16",
    "step0.bf16",
    "step3.bf16",
    "step6.bf16",
];

fn fixture(name: &str) -> String {
    let path = format!("{}/tests/ptx/{name}.ptx", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The opcodes of the stock kernels, as written in the PTX (the inventory of the first
/// milestone). Keep sorted; a change here is a change of the simulator's scope. The seeded
/// bugs' PTX adds `neg.s32`, `not.pred` and `or.pred`, which are modelled too.
const INVENTORY: &[&str] = &[
    "add.s32",
    "add.s64",
    "and.b32",
    "and.b64",
    "bar.sync",
    "bar.warp.sync",
    "barrier.cluster.arrive.release.aligned",
    "barrier.cluster.wait.acquire.aligned",
    "bra",
    "bra.uni",
    "cp.async.bulk.commit_group",
    "cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.mbarrier::complete_tx::bytes",
    "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group",
    "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
    "cp.async.bulk.wait_group.read",
    "cvt.rn.bf16.f32",
    "cvt.rn.f16.f32",
    "cvt.s64.s32",
    "cvt.u32.u64",
    "cvt.u64.u32",
    "cvta.param.u64",
    "cvta.to.global.u64",
    "div.s32",
    "elect.sync",
    "fence.mbarrier_init.release.cluster",
    "fence.proxy.async.shared::cta",
    "ld.param.u32",
    "ld.param.u64",
    "ld.shared.u32",
    "mad.lo.s64",
    "mapa.shared::cluster.u32",
    "mbarrier.arrive.expect_tx.shared::cta.b64",
    "mbarrier.arrive.release.cluster.shared::cluster.b64",
    "mbarrier.init.shared::cta.b64",
    "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64",
    "mbarrier.try_wait.parity.shared::cta.b64",
    "min.s32",
    "mov.b16",
    "mov.b32",
    "mov.b64",
    "mov.u32",
    "mov.u64",
    "mul.lo.s32",
    "mul.wide.u32",
    "not.b32",
    "or.b32",
    "or.b64",
    "prefetch.tensormap",
    "ret",
    "selp.b32",
    "selp.u32",
    "setp.eq.b32",
    "setp.eq.s32",
    "setp.ge.s32",
    "setp.gt.u32",
    "setp.lt.s32",
    "setp.lt.u32",
    "setp.ne.b32",
    "setp.ne.s32",
    "shl.b32",
    "shl.b64",
    "shr.s32",
    "shr.u32",
    "shr.u64",
    "st.global.v4.u32",
    "st.shared.v4.u32",
    "sub.s32",
    "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32",
    "tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32",
    "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64",
    "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64",
    "tcgen05.dealloc.cta_group::1.sync.aligned.b32",
    "tcgen05.dealloc.cta_group::2.sync.aligned.b32",
    "tcgen05.fence::after_thread_sync",
    "tcgen05.fence::before_thread_sync",
    "tcgen05.ld.sync.aligned.32x32b.x32.b32",
    "tcgen05.mma.cta_group::1.kind::f16",
    "tcgen05.mma.cta_group::2.kind::f16",
    "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned",
    "tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned",
    "tcgen05.wait::ld.sync.aligned",
    "trap",
    "xor.b32",
];

#[test]
fn every_opcode_in_the_stock_ptx_is_modelled() {
    let mut all: Vec<String> = Vec::new();
    for f in FIXTURES {
        let text = fixture(f);
        for op in opcode_inventory(&text).unwrap_or_else(|e| panic!("{f}: {e}")) {
            if !all.contains(&op) {
                all.push(op);
            }
        }
        // Decoding refuses any instruction the interpreter does not model.
        let p = Program::parse(&text).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(p.kernel("gemm_kernel").is_some(), "{f}: no gemm_kernel");
    }
    all.sort();
    let want: Vec<String> = INVENTORY.iter().map(|s| s.to_string()).collect();
    assert_eq!(
        all, want,
        "the stock kernels' opcodes changed: update INVENTORY and the simulator"
    );
}

#[test]
fn an_instruction_not_modelled_is_an_error_naming_it_and_its_line() {
    let ptx = "\n.version 9.0\n.target sm_100a\n.address_size 64\n.visible .entry k()\n{\n\t.reg .b32 %r<3>;\n\tmov.u32 %r1, 1;\n\ttex.1d.v4.s32.s32 {%r1, %r1, %r1, %r1}, [%r2, {%r1}];\n\tret;\n}\n";
    match Program::parse(ptx) {
        Err(SimError::Unsupported { opcode, ptx_line }) => {
            assert_eq!(opcode, "tex.1d.v4.s32.s32");
            assert_eq!(ptx_line, 9);
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
    // A modifier the simulator does not model is refused too, not ignored.
    let ptx2 = ptx.replace(
        "tex.1d.v4.s32.s32 {%r1, %r1, %r1, %r1}, [%r2, {%r1}]",
        "mul.lo.sat.u32 %r1, %r1, %r2",
    );
    assert!(matches!(
        Program::parse(&ptx2),
        Err(SimError::Unsupported { .. })
    ));
}
