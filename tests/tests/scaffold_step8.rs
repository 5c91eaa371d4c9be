//! A step can exist before its GPU run. A step 8 is scaffolded the way a newcomer starts one
//! (step 7's kernels copied into a crate folder of its own, its declared facts, number 8; in a
//! temporary folder, so nothing is committed as a step) and added to this thread's ladder
//! (`ladder::scaffold`). Then the GPU-free suite's step-generic checks run on it: the static
//! checks and the native sm_100a compile with its SASS asserted, the sm_90a compile of its twin
//! with its SASS asserted, the CPU simulator's run of its Blackwell kernel (verified against the
//! fp64 reference), its budget, its seeded bugs and its stress cases. None of it needs a GPU or a
//! committed result; the book's tables for it are the runner's test
//! (`scaffold::a_scaffolded_step_8_renders_its_tables_before_its_gpu_run`).

use common::compile::{compile, Target};
use common::model::budget::{budget, Assumptions, BudgetInput, B200};
use common::mutation::{TwinCatch, MUTATIONS, TWIN_MUTATIONS};
use common::sass::disassemble;
use common::simulate::{simulate, SimOptions, SimProblem};
use common::step::{Arch, KernelSpec};
use common::{Dist, Dtype, Shape, StepInfo};

fn step8(dir: &std::path::Path) -> &'static StepInfo {
    ladder::scaffold_copy(7, 8, &dir.join("step8_scaffold")).expect("scaffolding step 8")
}

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("wb-scaffold-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn a_scaffolded_step_joins_the_ladder_of_its_thread_only() {
    let dir = tmp("ladder");
    let info = step8(&dir);
    let before = ladder::all().len();
    {
        let _guard = ladder::scaffold(info);
        assert_eq!(ladder::all().len(), before + 1);
        let s = ladder::get(8).expect("step 8 while scaffolded");
        assert_eq!(s.info().title, info.title);
        // Its kernels are read from its own folder, not step 7's.
        let src = KernelSpec::new(s, Arch::Blackwell).source();
        assert!(src.path.starts_with(dir.to_str().unwrap()), "{}", src.path);
        // Another thread's ladder is the committed one.
        let other = std::thread::spawn(|| ladder::all().len()).join().unwrap();
        assert_eq!(other, before);
    }
    assert!(ladder::get(8).is_err(), "gone with its guard");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_scaffolded_step_8_passes_the_step_generic_checks_without_a_gpu() {
    let dir = tmp("checks");
    let info = step8(&dir);
    let _guard = ladder::scaffold(info);
    let step = ladder::get(8).unwrap();

    // Blackwell: the static checks and the native sm_100a compile, its SASS as declared.
    eprintln!("scaffolded step 8: sm_100a static checks and compile");
    let bw = KernelSpec::new(step, Arch::Blackwell);
    let compiled =
        common::static_check::check_blackwell(&bw.source(), &bw.defines(Dtype::F16)).unwrap();
    let sass = disassemble(&compiled.cubin).expect("nvdisasm");
    for op in bw.sass_expect() {
        assert!(sass.count(op) > 0, "step 8's SASS lost {op}");
    }
    assert_eq!(sass.local_memory_ops(), 0);

    // Hopper: the twin compiles for sm_90a, its SASS as declared.
    eprintln!("scaffolded step 8: sm_90a compile");
    let hp = KernelSpec::new(step, Arch::Hopper);
    let c = compile(&hp.source(), Target::Sm90a, &hp.defines(Dtype::F16)).unwrap();
    let sass = disassemble(&c.cubin).expect("nvdisasm");
    for op in hp.sass_expect() {
        assert!(sass.count(op) > 0, "step 8's twin SASS lost {op}");
    }

    // The CPU simulator runs the Blackwell kernel at its default (multi-tile) problem.
    eprintln!("scaffolded step 8: the simulator's run");
    let report = simulate(
        &bw,
        &bw.source(),
        &SimProblem {
            shape: None,
            dtype: Dtype::F16,
            dist: Dist::Gaussian,
            seed: 1,
            clusters: None,
            static_check: false,
            cpu_samples: 256,
        },
        &SimOptions::default(),
    )
    .unwrap();
    assert!(report.passed(), "{report:?}");

    // The budget reads its declared facts.
    let b = budget(
        BudgetInput::from_step(step),
        &B200,
        Shape::DEFAULT,
        Assumptions::DEFAULT,
    );
    assert!(b.problem_ns > 0.0);
    assert!(b.input.epilogue_overlaps && b.input.acc_stages == 2);

    // The seeded bugs that apply to it by its facts edit its kernels; the stress pass covers it.
    let bugs: Vec<_> = MUTATIONS
        .iter()
        .filter(|m| m.applies_to(info, Arch::Blackwell))
        .collect();
    assert_eq!(
        bugs.len(),
        MUTATIONS
            .iter()
            .filter(|m| m.applies_to(ladder::STEPS[7], Arch::Blackwell))
            .count(),
        "step 7's facts, step 7's bugs"
    );
    for m in bugs {
        m.apply(info.blackwell.text)
            .unwrap_or_else(|e| panic!("{}: {e:#}", m.name));
    }
    let stress = common::stress::cases(&ladder::infos(), &[1]);
    assert!(stress.iter().any(|c| c.step == 8 && c.mutation.is_none()));
    assert!(TWIN_MUTATIONS
        .iter()
        .filter(|t| t.caught == TwinCatch::Stress && t.applies_to(info))
        .all(|t| stress
            .iter()
            .any(|c| c.step == 8 && c.mutation == Some(t.mutation.name))));
    std::fs::remove_dir_all(&dir).unwrap();
}
