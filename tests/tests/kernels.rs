//! Every step kernel compiles (NVRTC, no GPU needed) and its SASS holds what the step is about.

use common::compile::{compile, compile_ptx, CompileError, KernelSource, Target};
use common::mutation::MUTATIONS;
use common::sass::{disassemble, Sass};
use common::step::{Arch, KernelSpec, OutputArg, Step};
use common::Dtype;

/// Every store to shared memory must be a shared-memory store (`STS`), never a generic `ST`
/// whose state space the hardware looks up at run time: kernels that stage C in shared memory
/// for TMA stores (`output` a tensor map) must show `STS`, and no kernel may store through a
/// generic address at all (C itself goes out by TMA or by `STG`). A `SharedStorage&` computed
/// through `size_t` is what turns the staging stores generic.
fn assert_stores_are_typed(sass: &Sass, output: OutputArg, what: &str) {
    assert_eq!(
        sass.count("ST"),
        0,
        "{what}: generic stores (ST) in the SASS, the staging stores lost their shared state \
         space; histogram {:?}",
        sass.histogram
    );
    if matches!(output, OutputArg::TensorMap { .. }) {
        assert!(
            sass.count("STS") > 0,
            "{what} stages C in shared memory but has no STS; histogram {:?}",
            sass.histogram
        );
    }
}

/// One module per step, so the steps compile in parallel and every failing step is reported,
/// not only the first.
macro_rules! per_step {
    ($($module:ident => $n:literal),* $(,)?) => {$(
        mod $module {
            fn step() -> &'static dyn common::step::Step {
                ladder::get($n).expect("the ladder has this step")
            }
            #[test]
            fn compiles_for_sm100a_with_its_instructions_and_no_spills() {
                super::compiles_for_sm100a(step());
            }
            #[test]
            fn builds_for_the_sm90a_emulation() {
                super::builds_for_the_sm90a_emulation(step());
            }
            #[test]
            fn every_seeded_bug_still_applies() {
                super::every_seeded_bug_still_applies(step());
            }
            // Three tests of a third of the seeded bugs each: one test compiling all of them
            // for the emulation ran for over a minute with nothing printed.
            #[test]
            fn every_seeded_bug_compiles_for_the_emulation_part_1_of_3() {
                super::every_seeded_bug_compiles_for_the_emulation(step(), 0);
            }
            #[test]
            fn every_seeded_bug_compiles_for_the_emulation_part_2_of_3() {
                super::every_seeded_bug_compiles_for_the_emulation(step(), 1);
            }
            #[test]
            fn every_seeded_bug_compiles_for_the_emulation_part_3_of_3() {
                super::every_seeded_bug_compiles_for_the_emulation(step(), 2);
            }
            #[test]
            fn hopper_twin_compiles_for_sm90a_with_its_instructions_and_no_spills() {
                super::hopper_twin_compiles_for_sm90a(step());
            }
            #[test]
            fn both_kernels_refuse_a_launch_they_were_not_written_for() {
                for arch in common::step::Arch::ALL {
                    let spec = common::step::KernelSpec::new(step(), arch);
                    super::a_launch_mismatch_fails_to_compile(&spec, &spec.source());
                }
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

fn compiles_for_sm100a(step: &'static dyn Step) {
    let info = step.info();
    let spec = KernelSpec::new(step, Arch::Blackwell);
    for dtype in [Dtype::F16, Dtype::Bf16] {
        let c = compile(&spec.source(), Target::Sm100a, &spec.defines(dtype))
            .unwrap_or_else(|e| panic!("step {} ({dtype}) does not compile: {e:#}", info.number));
        let sass = disassemble(&c.cubin).expect("nvdisasm");
        for op in spec.sass_expect() {
            assert!(
                sass.count(op) > 0,
                "step {} ({dtype}): SASS lost {op}; histogram {:?}",
                info.number,
                sass.histogram
            );
        }
        assert_eq!(
            sass.local_memory_ops(),
            0,
            "step {} ({dtype}) uses local memory (LDL/STL)",
            info.number
        );
        assert_eq!(
            c.resources.spill_store_bytes + c.resources.spill_load_bytes,
            0,
            "step {} spills",
            info.number
        );
        assert!(c.resources.registers > 0 && c.resources.registers <= 255);
        assert_stores_are_typed(
            &sass,
            spec.shape().output,
            &format!("step {} ({dtype})", info.number),
        );
    }
}

fn builds_for_the_sm90a_emulation(step: &'static dyn Step) {
    let info = step.info();
    let spec = KernelSpec::new(step, Arch::Blackwell);
    let c = compile(
        &spec.source(),
        Target::Sm90aEmulated,
        &spec.defines(Dtype::Bf16),
    )
    .unwrap_or_else(|e| panic!("step {} does not build for emulation: {e:#}", info.number));
    let sass = disassemble(&c.cubin).expect("nvdisasm");
    assert_eq!(
        sass.count("UTCHMMA"),
        0,
        "sm_90 has no tcgen05: the emulation must replace it"
    );
    assert_eq!(sass.count("LDTM"), 0);
    assert!(
        sass.count("UTMALDG") > 0,
        "TMA stays native under emulation"
    );
}

fn every_seeded_bug_still_applies(step: &'static dyn Step) {
    // The negative controls of the GPU check are only meaningful while they edit the kernels.
    for m in MUTATIONS
        .iter()
        .filter(|m| m.applies_to(step.info(), Arch::Blackwell))
    {
        let k = m
            .apply(step.info().blackwell.text)
            .unwrap_or_else(|e| panic!("step {}: {e:#}", step.info().number));
        assert_ne!(k, step.info().blackwell.text);
        // A seeded bug edits what it names and nothing else: no barrier loses its init.
        let inits = |src: &str| {
            src.lines()
                .filter(|l| l.contains("wb::mbarrier_init(") && !l.trim_start().starts_with("//"))
                .count()
        };
        let edited = k.lines().filter(|l| l.contains("[mutation ")).count();
        assert_eq!(
            inits(&k),
            inits(step.info().blackwell.text),
            "step {}: {} removed an init",
            step.info().number,
            m.name
        );
        assert!(
            (1..=2).contains(&edited) || !m.from.is_empty(),
            "step {}: {} commented out {edited} lines",
            step.info().number,
            m.name
        );
    }
}

/// Every `WB_LAUNCH_<FACT>` the host passes is tied to the kernel by a `static_assert`: changing
/// any one of them (as a host whose plan drifted from its kernel would) makes the kernel fail to
/// compile with the definition's name in the log. The unchanged definitions compile (the other
/// tests of this file).
fn a_launch_mismatch_fails_to_compile(spec: &KernelSpec, src: &KernelSource) {
    let target = Target::native(spec.arch);
    // WB_LAUNCH_PERSISTENT is passed for kernels written before SCHEDULE; the steps check SCHEDULE.
    let launch: Vec<(String, String)> = spec
        .shape()
        .launch_defines()
        .into_iter()
        .filter(|(k, _)| k != "WB_LAUNCH_PERSISTENT")
        .collect();
    assert_eq!(launch.len(), 10, "the facts the kernels check");
    // Every fact wrong at once, in one compile: each check is a `static_assert` of its own and
    // the compiler reports every one that fails, so the log must name all ten (one compile per
    // kernel, not ten, keeps CI short).
    let wrong = |name: &str, v: u32| match name {
        "WB_LAUNCH_SCHEDULE" => v ^ 1,
        // Enough for SharedStorage, but not for aligning it by hand.
        "WB_LAUNCH_SMEM_BYTES" => v - 1024,
        _ => v + 1,
    };
    let defines: Vec<(String, String)> = spec
        .defines(Dtype::F16)
        .into_iter()
        .map(|(k, val)| match launch.iter().find(|(n, _)| *n == k) {
            Some(_) => {
                let v: u32 = val.parse().expect("a number");
                let w = wrong(&k, v).to_string();
                (k, w)
            }
            None => (k, val),
        })
        .collect();
    let err = compile(src, target, &defines)
        .err()
        .unwrap_or_else(|| panic!("{} compiles with every launch fact wrong", src.path));
    let log = &err
        .downcast_ref::<CompileError>()
        .unwrap_or_else(|| panic!("{}: not a compile error: {err:#}", src.path))
        .log;
    for (name, value) in &launch {
        assert!(
            log.contains(&format!("\"{name}: ")),
            "{} with {name} wrong (the plan says {value}): the error does not name it:\n{log}",
            src.path
        );
    }
}

#[test]
fn a_compile_error_names_file_line_and_shows_the_source() {
    let src = KernelSource {
        path: "steps/broken/kernel.cu".into(),
        text: "#include \"blackwell.cuh\"\nextern \"C\" __global__ void gemm_kernel() {\n  int x = not_declared;\n}\n".into(),
    };
    let err = compile(&src, Target::Sm100a, &[]).expect_err("must not compile");
    let ce = err.downcast_ref::<CompileError>().expect("a CompileError");
    assert!(
        ce.log.contains("steps/broken/kernel.cu(3): error"),
        "{}",
        ce.log
    );
    assert!(
        ce.log.contains("    3 |   int x = not_declared;"),
        "{}",
        ce.log
    );
}

fn hopper_twin_compiles_for_sm90a(step: &'static dyn Step) {
    let spec = KernelSpec::new(step, Arch::Hopper);
    let n = step.info().number;
    for dtype in [Dtype::F16, Dtype::Bf16] {
        let c = compile(&spec.source(), Target::Sm90a, &spec.defines(dtype))
            .unwrap_or_else(|e| panic!("step {n}'s Hopper twin ({dtype}) does not compile: {e:#}"));
        let sass = disassemble(&c.cubin).expect("nvdisasm");
        for op in spec.sass_expect() {
            assert!(
                sass.count(op) > 0,
                "step {n} twin ({dtype}): SASS lost {op}; histogram {:?}",
                sass.histogram
            );
        }
        assert_eq!(
            sass.local_memory_ops(),
            0,
            "step {n} twin ({dtype}) uses local memory (LDL/STL)"
        );
        assert_stores_are_typed(
            &sass,
            spec.shape().output,
            &format!("step {n} twin ({dtype})"),
        );
        assert_eq!(
            c.resources.spill_store_bytes + c.resources.spill_load_bytes,
            0,
            "step {n} twin spills"
        );
        // ptxas says so when it must wait for each wgmma before the next (accumulators
        // touched in between, or a register budget too small): the twin would crawl.
        assert!(
            !c.log
                .contains("wgmma.mma_async instructions are serialized"),
            "step {n} twin ({dtype}): {}",
            c.log
        );
        assert!(
            !c.log.contains("setmaxnreg ignored"),
            "step {n} twin ({dtype}): {}",
            c.log
        );
    }
}

/// How many parts the seeded bugs of a step are compiled in (the `part_N_of_3` tests).
const MUTATION_PARTS: usize = 3;

fn every_seeded_bug_compiles_for_the_emulation(step: &'static dyn Step, part: usize) {
    // The GPU check runs each of them; a variant that does not compile would report an error
    // instead of the bug being caught. Part `part` takes every third one that applies.
    //
    // A seeded bug edits a few source lines (a wait skipped, a parity flipped, a fence
    // dropped): what can break is the C++ (a name, a `static_assert`), which NVRTC's front end
    // and NVVM check on the way to PTX. ptxas turns that PTX into SASS the same way it does the
    // stock kernel's (`builds_for_the_sm90a_emulation`), so every bug is compiled to PTX and the
    // first of each part all the way to a CUBIN. ptxas is most of a build's time (`runner
    // inspect 3 --emulate --mutate wrong-sbo`: 5.9 CPU-s for the CUBIN and its disassembly,
    // 1.7 with --ptx), and ~100 builds of seeded bugs were most of this file's CPU time.
    let info = step.info();
    let spec = KernelSpec::new(step, Arch::Blackwell);
    let applicable = MUTATIONS
        .iter()
        .filter(|m| m.applies_to(info, Arch::Blackwell));
    for (i, m) in applicable.skip(part).step_by(MUTATION_PARTS).enumerate() {
        eprintln!("step {} with {}: emulation build", info.number, m.name);
        let text = m.apply(info.blackwell.text).expect("applies");
        let src = KernelSource {
            path: info.kernel_path(Arch::Blackwell),
            text,
        };
        let start = std::time::Instant::now();
        let defines = spec.defines(Dtype::F16);
        let what = if i == 0 {
            compile(&src, Target::Sm90aEmulated, &defines).map(|_| "a CUBIN")
        } else {
            compile_ptx(&src, Target::Sm90aEmulated, &defines).map(|_| "PTX")
        }
        .unwrap_or_else(|e| {
            panic!(
                "step {} with {} does not compile: {e:#}",
                info.number, m.name
            )
        });
        // Seen with --nocapture: what each of these tests spends its time on.
        eprintln!(
            "step {} with {}: {what} for the emulation in {:.1} s",
            info.number,
            m.name,
            start.elapsed().as_secs_f64()
        );
    }
}

#[test]
fn the_host_sizes_the_emulation_state_as_the_header_defines_it() {
    let src = KernelSource {
        path: "state_size.cu".into(),
        text: "#include \"blackwell.cuh\"\n\
               static_assert(sizeof(bw::emu::CtaState) == WB_EXPECT_STATE_BYTES, \"CTA_STATE_BYTES\");\n\
               extern \"C\" __global__ void gemm_kernel() {}\n"
            .into(),
    };
    let defines = [(
        "WB_EXPECT_STATE_BYTES".to_string(),
        common::emulation::CTA_STATE_BYTES.to_string(),
    )];
    compile(&src, Target::Sm90aEmulated, &defines)
        .unwrap_or_else(|e| panic!("CTA_STATE_BYTES disagrees with tcgen05_emu.cuh: {e:#}"));
}

#[test]
fn the_step6_gap_contenders_compile_and_pass_the_twin_check() {
    // The bench contenders of issue 18's "remaining gap" (stream-K tail, whole waves, two wgmma
    // groups in flight, the stream-K control), under step 6's parameters: they build without
    // spills or wgmma serialization, keep the twin's instructions and typed stores, and pass the
    // static check `runner bench` runs before it launches them.
    // Full kernels (.cu) and edit files of step 6's twin (.toml).
    for path in [
        "steps/step7_last_wave/src/kernel_sm90.cu", // 6-streamk: step 7's twin
        "exercises/hopper/step6_waves_sm90.toml",
        "exercises/hopper/step6_wait2_sm90.toml",
        "exercises/hopper/step6_workspace_sm90.toml",
    ] {
        let path = path.to_string();
        let spec = KernelSpec::new(ladder::get(6).expect("step 6"), Arch::Hopper);
        let text = std::fs::read_to_string(format!("{}/../{path}", env!("CARGO_MANIFEST_DIR")))
            .expect("the contender kernel is in the repository");
        let text = if path.ends_with(".toml") {
            let file: common::edits::EditFile = toml::from_str(&text).expect("an edit file");
            assert_eq!((file.step, file.arch.as_str()), (6, "hopper"), "{path}");
            let base = spec.source();
            common::edits::apply(&path, &base.text, &file.edit, &file.snippets)
                .unwrap_or_else(|e| panic!("{path}: {e:#}"))
        } else {
            text
        };
        let src = KernelSource {
            path: path.clone(),
            text,
        };
        for dtype in [Dtype::F16, Dtype::Bf16] {
            let defines = spec.defines(dtype);
            common::static_check::check_twin(&src, &defines)
                .unwrap_or_else(|e| panic!("{path} ({dtype}): {e:#}"));
            let c = compile(&src, Target::Sm90a, &defines)
                .unwrap_or_else(|e| panic!("{path} ({dtype}): {e:#}"));
            assert_eq!(
                c.resources.spill_store_bytes + c.resources.spill_load_bytes,
                0,
                "{path} ({dtype}) spills"
            );
            assert!(
                !c.log
                    .contains("wgmma.mma_async instructions are serialized"),
                "{path} ({dtype}): {}",
                c.log
            );
            let sass = disassemble(&c.cubin).expect("nvdisasm");
            for key in ["HGMMA", "UTMASTG", "UTMALDG.2D.MULTICAST"] {
                assert!(sass.count(key) > 0, "{path} ({dtype}): no {key}");
            }
            assert_stores_are_typed(&sass, spec.shape().output, &format!("{path} ({dtype})"));
        }
    }
}
