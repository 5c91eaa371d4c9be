//! The attribution record (`sim::attrib`): every technique instruction of step 3's stock kernel
//! is attributed to its cluster, the TMA loads its operands came from, and (a commit) the MMAs
//! it covers and whether its arrivals were waited on by the producer or the epilogue.

mod gemm;

use gemm::{facts, fixture, Dtype, Problem};
use sim::{Options, Program};

#[test]
fn every_mma_and_commit_of_the_stock_kernel_is_attributed_and_used() {
    let prog = Program::parse(&fixture("step3.f16")).unwrap();
    let mut p = Problem::new(256, 512, 256, Dtype::F16, 1);
    let l = p.launch(&facts(3), 1).unwrap();
    let mut dev = std::mem::take(&mut p.dev);
    let r = sim::run(&prog, &mut dev, &l, &Options::default()).unwrap();
    assert_eq!(r.attribution.len() as u64, r.clusters);
    let mut ks = std::collections::BTreeSet::new();
    for c in &r.attribution {
        assert!(!c.mmas.is_empty(), "cluster {:?} issued no MMA", c.cluster);
        for m in &c.mmas {
            let a = m.a.as_ref().expect("A came from a TMA load");
            let b = m.b.as_ref().expect("B came from a TMA load");
            assert_eq!(a.coords[0], b.coords[0], "A and B of one k-block");
            ks.insert(a.coords[0]);
            assert_eq!(m.rank % 2, 0, "the pair's leader issues");
        }
        for cm in &c.commits {
            assert!(cm.arrived && cm.used, "{cm:?}");
            if let Some(mask) = cm.mask {
                assert_eq!(mask & 3, 3, "{cm:?}");
            }
        }
        // Every MMA is covered by exactly one commit.
        let mut covered: Vec<u32> = c.commits.iter().flat_map(|x| x.covers.clone()).collect();
        covered.sort();
        assert_eq!(covered, (0..c.mmas.len() as u32).collect::<Vec<_>>());
        eprintln!(
            "cluster {:?}: {} mmas, {} commits {:?}",
            c.cluster,
            c.mmas.len(),
            c.commits.len(),
            c.commits
                .iter()
                .map(|x| (x.mask, x.covers.len(), x.arrivals.clone()))
                .collect::<Vec<_>>()
        );
    }
    // Four k-blocks of 64.
    assert_eq!(ks.into_iter().collect::<Vec<_>>(), vec![0, 64, 128, 192]);
    assert!(r.instructions < r.steps);
}
