//! The facts each step crate declares about its kernels (`common::step::KernelFile`: launch,
//! epilogue, lookahead) are what the kernels are: the harness, the budget and the seeded bugs
//! read them instead of guessing from thread counts, step numbers or kernel text, so a wrong
//! declaration must fail here. (The launch itself is tied to each kernel by its
//! `WB_EXPECT_LAUNCH` checks, which `tests/tests/kernels.rs` compiles.) GPU-free, no compiles.

use common::step::{Arch, Launch};
use common::{Epilogue, Lookahead};

#[test]
fn each_kernel_is_what_its_step_declares() {
    for info in ladder::STEPS {
        let n = info.number;
        for arch in Arch::ALL {
            let k = info.kernel(arch);
            assert_eq!(
                k.launch.arch(),
                arch,
                "step {n} {arch}: a launch of the other GPU"
            );
            let staged_output = k
                .params
                .iter()
                .any(|&(p, v)| p == "epilogue_tile_n" && v > 0);
            assert_eq!(
                k.epilogue.tma_store(),
                staged_output,
                "step {n} {arch}: {:?} but epilogue_tile_n says otherwise",
                k.epilogue
            );
            match (arch, k.epilogue) {
                (Arch::Hopper, Epilogue::Warpgroup) | (Arch::Blackwell, Epilogue::StoreWarp) => {
                    panic!(
                        "step {n} {arch}: {:?} is the other GPU's epilogue",
                        k.epilogue
                    )
                }
                _ => {}
            }
            // The twins' store warp takes C through `out_full` / `out_empty`.
            assert_eq!(
                k.epilogue == Epilogue::StoreWarp,
                k.text.contains("out_full"),
                "step {n} {arch}"
            );
            if let Launch::Blackwell(l) = k.launch {
                // A dedicated epilogue warpgroup is a second warpgroup and a second accumulator.
                let warpgroup = k.epilogue == Epilogue::Warpgroup;
                assert_eq!(warpgroup, l.threads == 256, "step {n}: {l:?}");
                assert_eq!(warpgroup, k.text.contains("ACC_STAGES = 2"), "step {n}");
            }
            // A single warp that both loads and multiplies prefetches `PREFETCH = STAGES - 2`
            // k-blocks; a twin's consumer releases a slot after the next k-block's wgmma group
            // (`wgmma_wait_group<1>`), keeping one back; otherwise the producer has the ring.
            let expected = if k.text.contains("PREFETCH = STAGES - 2") {
                Lookahead::RingLess(2)
            } else if k.text.contains("wgmma_wait_group<1>") {
                Lookahead::RingLess(1)
            } else {
                Lookahead::Ring
            };
            assert_eq!(k.lookahead, expected, "step {n} {arch}");
        }
    }
}
