//! Stress builds of the Hopper twins (`--stress SEED`, common::stress), the twins' seeded bugs,
//! and the emulation build without the rules of issue 23 (`--time-emulation`): all compile (NVRTC,
//! no GPU needed), and each is what it claims to be.

use common::compile::{compile, compile_ptx, KernelSource};
use common::mutation::{TwinCatch, TWIN_MUTATIONS};
use common::sass::disassemble;
use common::step::{Arch, KernelSpec, Step};
use common::{Dtype, Target};

/// One module per step, so the steps compile in parallel and every failing step is reported.
macro_rules! per_step {
    ($($module:ident => $n:literal),* $(,)?) => {$(
        mod $module {
            fn step() -> &'static dyn common::step::Step {
                ladder::get($n).expect("the ladder has this step")
            }
            #[test]
            fn the_stress_build_sleeps_and_keeps_the_twin_fast() {
                super::the_stress_build_sleeps_and_keeps_the_twin_fast(step());
            }
            #[test]
            fn twin_mutations_apply_and_are_caught_as_they_claim() {
                super::twin_mutations_apply_and_are_caught_as_they_claim(step());
            }
            #[test]
            fn the_emulation_builds_without_the_newer_rules() {
                super::the_emulation_builds_without_the_newer_rules(step());
            }
        }
    )*
        /// The steps this file has a module for.
        const LISTED: &[u32] = &[$($n),*];
    };
}

per_step! {
    step0 => 0,
    step1 => 1,
    step2 => 2,
    step3 => 3,
    step4 => 4,
    step5 => 5,
    step6 => 6,
    step7 => 7,
}

#[test]
fn every_step_of_the_ladder_has_its_module_here() {
    // The per-step modules above name each step, so the steps build in parallel: a new step
    // needs its line in `per_step!`.
    let numbers: Vec<u32> = ladder::STEPS.iter().map(|s| s.number).collect();
    assert_eq!(
        LISTED,
        numbers,
        "per_step! in {} lists other steps than the ladder",
        file!()
    );
}

fn twin_source(step: &'static dyn Step, text: &str) -> KernelSource {
    KernelSource {
        path: step.info().kernel_path(Arch::Hopper),
        text: text.to_string(),
    }
}

fn the_stress_build_sleeps_and_keeps_the_twin_fast(step: &'static dyn Step) {
    let n = step.info().number;
    let spec = KernelSpec::new(step, Arch::Hopper);
    let plain = compile(&spec.source(), Target::Sm90a, &spec.defines(Dtype::F16))
        .unwrap_or_else(|e| panic!("step {n} twin: {e:#}"));
    let plain_sass = disassemble(&plain.cubin).expect("nvdisasm");
    assert_eq!(
        plain_sass.count("NANOSLEEP"),
        0,
        "step {n}: a build without WB_STRESS must not sleep"
    );
    let plain_ptx = compile_ptx(&spec.source(), Target::Sm90a, &spec.defines(Dtype::F16))
        .unwrap_or_else(|e| panic!("step {n} twin: {e:#}"));
    assert!(
        !plain_ptx.contains("wb_check_state"),
        "step {n}: a plain build is checked"
    );
    for seed in common::stress::CHECK_SEEDS {
        eprintln!("twin {n}: stress build, seed {seed}");
        let mut defines = spec.defines(Dtype::F16);
        defines.extend(common::stress::defines(*seed));
        let c = compile(&spec.source(), Target::Sm90a, &defines)
            .unwrap_or_else(|e| panic!("step {n} twin, stress seed {seed}: {e:#}"));
        let sass = disassemble(&c.cubin).expect("nvdisasm");
        assert!(
            sass.count("NANOSLEEP") > 0,
            "step {n} seed {seed}: no NANOSLEEP in the stress build; histogram {:?}",
            sass.histogram
        );
        // A delay must not change how the kernel runs otherwise: ptxas still pipelines the
        // wgmma (a serialised pipeline would hide the very races stress is for) and honours
        // setmaxnreg, with or without the twin check.
        for bad in [
            "wgmma.mma_async instructions are serialized",
            "setmaxnreg ignored",
        ] {
            assert!(!c.log.contains(bad), "step {n} seed {seed}: {}", c.log);
        }
        for op in spec.sass_expect() {
            assert!(sass.count(op) > 0, "step {n} seed {seed}: lost {op}");
        }
        // The twin check (its printf's argument buffer and a few spilled registers are its
        // local memory) aside, the delays alone spill nothing.
        let delays_only: Vec<(String, String)> = defines
            .iter()
            .filter(|(k, _)| k != common::stress::CHECK_DEFINE)
            .cloned()
            .collect();
        let d = compile(&spec.source(), Target::Sm90a, &delays_only)
            .unwrap_or_else(|e| panic!("step {n} twin, delays only, seed {seed}: {e:#}"));
        // Step 7's twin (the stream-K tail) is the one exception, bounded: the delays' registers
        // push its fix-up path over the limit by a few words (16 to 36 bytes, 4 to 9 local loads and
        // stores over the check seeds, measured 2026-11-28); its plain build spills nothing (`kernels.rs`). A larger spill still fails.
        let (spill_limit, ldl_limit) = if n == 7 { (36, 9) } else { (0, 0) };
        let spilled = d.resources.spill_store_bytes + d.resources.spill_load_bytes;
        assert!(
            spilled <= spill_limit,
            "step {n} seed {seed}: the delays alone spill {spilled} bytes"
        );
        let dsass = disassemble(&d.cubin).expect("nvdisasm");
        assert!(
            dsass.local_memory_ops() <= ldl_limit,
            "step {n} seed {seed}: LDL/STL"
        );
        // The twin's static check runs on the stress build (`runner step --stress`): the delays
        // must not look like a rule's violation.
        let ptx = compile_ptx(&spec.source(), Target::Sm90a, &defines)
            .unwrap_or_else(|e| panic!("step {n} seed {seed}: {e:#}"));
        let findings = common::ptx_check::check(&ptx);
        assert!(findings.is_empty(), "step {n} seed {seed}: {findings:?}");
        // The twin check's shadow is in every stress build, and in no other.
        assert!(
            ptx.contains("wb_check_state"),
            "step {n} seed {seed}: no twin check"
        );
    }
}

fn twin_mutations_apply_and_are_caught_as_they_claim(step: &'static dyn Step) {
    let n = step.info().number;
    let spec = KernelSpec::new(step, Arch::Hopper);
    let stock = step.info().hopper.text;
    for t in TWIN_MUTATIONS.iter().filter(|t| t.applies_to(step.info())) {
        let m = &t.mutation;
        eprintln!("twin {n} with {}: builds", m.name);
        let text = m.apply(stock).unwrap_or_else(|e| panic!("step {n}: {e:#}"));
        assert_ne!(text, stock, "step {n}: {} changes nothing", m.name);
        let src = twin_source(step, &text);
        // The GPU check runs every one of them: each must build, with and without stress.
        let mut defines = spec.defines(Dtype::F16);
        defines.extend(common::stress::defines(1));
        compile(&src, Target::Sm90a, &defines)
            .unwrap_or_else(|e| panic!("step {n} with {}: {e:#}", m.name));
        let found =
            common::static_check::ptx_findings_for(&src, Target::Sm90a, &spec.defines(Dtype::F16))
                .unwrap_or_else(|e| panic!("step {n} with {}: {e:#}", m.name));
        match t.caught {
            TwinCatch::Static => assert!(
                found.iter().any(|f| f.rule == m.caught_by),
                "step {n} with {}: the static check does not find {}: {found:?}",
                m.name,
                m.caught_by
            ),
            // A bug a static rule sees belongs to the static check: stress is for the others.
            TwinCatch::Stress => assert!(
                found.is_empty(),
                "step {n} with {}: the static check already finds it ({found:?}): make it a static mutation",
                m.name
            ),
        }
    }
}

fn the_emulation_builds_without_the_newer_rules(step: &'static dyn Step) {
    let n = step.info().number;
    let spec = KernelSpec::new(step, Arch::Blackwell);
    let mut defines = spec.defines(Dtype::F16);
    defines.push((common::run::EMU_STRICT_DEFINE.to_string(), "0".to_string()));
    let c = compile(&spec.source(), Target::Sm90aEmulated, &defines)
        .unwrap_or_else(|e| panic!("step {n} with the rules off: {e:#}"));
    let strict = compile(
        &spec.source(),
        Target::Sm90aEmulated,
        &spec.defines(Dtype::F16),
    )
    .unwrap_or_else(|e| panic!("step {n}: {e:#}"));
    // The switch must change the build: the rules off are fewer instructions.
    let (off, on) = (
        disassemble(&c.cubin).expect("nvdisasm"),
        disassemble(&strict.cubin).expect("nvdisasm"),
    );
    assert!(
        off.total() < on.total(),
        "step {n}: {} instructions with the rules off, {} with them on",
        off.total(),
        on.total()
    );
}

#[test]
fn every_twin_mutation_applies_somewhere_and_names_are_unique() {
    let mut names: Vec<&str> = common::mutation::MUTATIONS
        .iter()
        .map(|m| m.name)
        .chain(TWIN_MUTATIONS.iter().map(|t| t.mutation.name))
        .collect();
    let all = names.len();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), all, "a mutation name is used twice");
    for t in TWIN_MUTATIONS {
        assert!(
            t.mutation.name.starts_with("twin-"),
            "{}: twin mutations are named twin-...",
            t.mutation.name
        );
        assert!(
            !t.mutation.steps(ladder::STEPS, Arch::Hopper).is_empty(),
            "{} edits no twin of the ladder",
            t.mutation.name
        );
    }
    // The stress pass has something to catch on a store-warp twin.
    let store_warp = ladder::STEPS
        .iter()
        .find(|s| s.hopper.epilogue == common::Epilogue::StoreWarp)
        .expect("a twin with a store warp");
    assert!(TWIN_MUTATIONS
        .iter()
        .any(|t| t.caught == TwinCatch::Stress && t.applies_to(store_warp)));
}

#[test]
fn the_host_and_the_device_agree_on_a_seed_s_hot_points() {
    // Every stress build passes the host's hot points (common::stress::hot_points) for the
    // device to assert against its own: a wrong mirror does not compile.
    let step = ladder::get(0).expect("step 0");
    let spec = KernelSpec::new(step, Arch::Hopper);
    let mut defines = spec.defines(Dtype::F16);
    defines.extend(common::stress::defines(11));
    assert!(compile(&spec.source(), Target::Sm90a, &defines).is_ok());
    let wrong = common::stress::hot_points(11) ^ 1;
    if let Some(d) = defines
        .iter_mut()
        .find(|(k, _)| k == common::stress::HOT_DEFINE)
    {
        d.1 = format!("{wrong}u");
    }
    let err = compile(&spec.source(), Target::Sm90a, &defines)
        .expect_err("a hot-point mask that disagrees must not compile");
    assert!(format!("{err:#}").contains("hot_points"), "{err:#}");
}
