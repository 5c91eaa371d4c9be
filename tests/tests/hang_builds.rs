//! Hang diagnosis builds of the Hopper twins (`runner step N --arch sm_90a --hang-diagnosis`,
//! common.cuh's "Hang diagnosis builds", common::stress::hang_defines): every twin builds for
//! sm_90a with its waits bounded, and the normal build is exactly what it was without them.
//! NVRTC only, no GPU.

use common::compile::{compile, KernelSource};
use common::edits::EditFile;
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
            fn the_normal_build_is_unchanged_by_the_hang_diagnosis() {
                super::the_normal_build_is_unchanged_by_the_hang_diagnosis(step());
            }
            #[test]
            fn the_hang_diagnosis_build_bounds_every_wait() {
                super::the_hang_diagnosis_build_bounds_every_wait(step());
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

const COMMON: &str = include_str!("../../steps/include/common.cuh");
const HOPPER: &str = include_str!("../../steps/include/hopper.cuh");

/// A header without the hang diagnosis: its `// BEGIN hang diagnosis` .. `// END hang
/// diagnosis` blocks and every other line that names a `WB_HANG_` macro (the wait wrappers'
/// calls) deleted, and its `#pragma once` and includes of the workbook's headers too (the
/// headers are pasted into one source: the instrumentation headers common.cuh includes are
/// pasted where it includes them, stripped the same way).
fn without_hang_diagnosis(header: &str) -> String {
    let mut out = String::new();
    let mut skipping = false;
    for line in header.lines() {
        let t = line.trim();
        if t == "// BEGIN hang diagnosis" {
            assert!(!skipping, "nested block");
            skipping = true;
            continue;
        }
        if t == "// END hang diagnosis" {
            assert!(skipping, "an END without a BEGIN");
            skipping = false;
            continue;
        }
        if !skipping {
            let included = common::compile::HEADERS
                .iter()
                .find(|(name, _)| *name != "common.cuh" && t == format!("#include \"{name}\""));
            if let Some((_, text)) = included {
                out.push_str(&without_hang_diagnosis(text));
                continue;
            }
        }
        if skipping
            || line.contains("WB_HANG_")
            || t == "#pragma once"
            || t == "#include \"common.cuh\""
        {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    assert!(!skipping, "a BEGIN without an END");
    out
}

/// The instructions of a listing, without their addresses' comments: what the GPU executes.
fn instructions(listing: &str) -> Vec<&str> {
    listing
        .lines()
        .filter_map(|l| {
            let (addr, body) = l.trim_start().strip_prefix("/*")?.split_once("*/")?;
            (!addr.is_empty() && addr.chars().all(|c| c.is_ascii_hexdigit())).then_some(body.trim())
        })
        .collect()
}

fn the_normal_build_is_unchanged_by_the_hang_diagnosis(step: &'static dyn Step) {
    let n = step.info().number;
    let spec = KernelSpec::new(step, Arch::Hopper);
    let source = spec.source();
    assert!(source.text.contains("#include \"hopper.cuh\""), "step {n}");
    // The twin with the headers pasted in, less the hang diagnosis.
    let stripped = KernelSource {
        path: source.path.clone(),
        text: format!(
            "{}{}{}",
            without_hang_diagnosis(COMMON),
            without_hang_diagnosis(HOPPER),
            source.text.replace("#include \"hopper.cuh\"", "")
        ),
    };
    let stripped_common = without_hang_diagnosis(COMMON);
    assert!(!stripped_common.contains("hang_waiting") && !stripped_common.contains("WB_HANG"));
    assert!(COMMON.contains("WB_HANG_HOOK(hang_waiting(bar, parity, hang));"));
    let defines = spec.defines(Dtype::F16);
    let with = compile(&source, Target::Sm90a, &defines).expect("compiles");
    let without = compile(&stripped, Target::Sm90a, &defines).expect("compiles without");
    let (a, b) = (
        disassemble(&with.cubin).expect("nvdisasm"),
        disassemble(&without.cubin).expect("nvdisasm"),
    );
    let (ia, ib) = (instructions(&a.listing), instructions(&b.listing));
    assert!(ia.len() > 100, "step {n}: {} instructions", ia.len());
    assert_eq!(
        ia, ib,
        "step {n}: the hang diagnosis changes the normal build's SASS"
    );
    assert_eq!(with.resources.registers, without.resources.registers);
    assert!(!a.listing.contains("SR_GLOBALTIMER"), "step {n}");
}

fn hang_defines(spec: &KernelSpec) -> Vec<(String, String)> {
    let mut d = spec.defines(Dtype::F16);
    d.extend(common::stress::hang_defines(common::stress::HANG_BOUND));
    d
}

fn the_hang_diagnosis_build_bounds_every_wait(step: &'static dyn Step) {
    let n = step.info().number;
    let spec = KernelSpec::new(step, Arch::Hopper);
    let defines = hang_defines(&spec);
    assert!(defines
        .iter()
        .any(|(k, v)| k == "WB_HANG_DIAG_NS" && v == "1000000000ull"));
    let c = compile(&spec.source(), Target::Sm90a, &defines)
        .unwrap_or_else(|e| panic!("step {n} hang diagnosis build: {e:#}"));
    let sass = disassemble(&c.cubin).expect("nvdisasm");
    // The bound is kept with %globaltimer, the record goes out with system-scope fences, and
    // the kernel traps: none of which the normal build has (its only trap is the shared-memory
    // check, one per kernel).
    assert!(
        sass.listing.contains("SR_GLOBALTIMER"),
        "step {n}: no %globaltimer read; {:?}",
        sass.histogram
    );
    assert!(sass.count("MEMBAR") > 0, "step {n}: {:?}", sass.histogram);
    let plain = compile(&spec.source(), Target::Sm90a, &spec.defines(Dtype::F16)).unwrap();
    let plain_sass = disassemble(&plain.cubin).unwrap();
    assert!(
        sass.count("BPT.TRAP") > plain_sass.count("BPT.TRAP"),
        "step {n}: {} traps against {}",
        sass.count("BPT.TRAP"),
        plain_sass.count("BPT.TRAP")
    );
    // What the twin is about stays: the wgmma pipeline is not serialised, setmaxnreg holds,
    // and the instructions the step is about are all there.
    for bad in [
        "wgmma.mma_async instructions are serialized",
        "setmaxnreg ignored",
    ] {
        assert!(!c.log.contains(bad), "step {n}: {}", c.log);
    }
    for op in spec.sass_expect() {
        assert!(sass.count(op) > 0, "step {n}: lost {op}");
    }
    // Without the twin check there are no records to fill: the build says so.
    let alone: Vec<(String, String)> = defines
        .iter()
        .filter(|(k, _)| k != common::stress::CHECK_DEFINE)
        .cloned()
        .collect();
    let e = compile(&spec.source(), Target::Sm90a, &alone).expect_err("needs the twin check");
    let log = e
        .downcast_ref::<common::compile::CompileError>()
        .map_or_else(|| format!("{e:#}"), |c| c.log.clone());
    assert!(log.contains("needs the twin check"), "{log}");
}

/// The planted hangs of gpu/ladder-ci.sh: each applies to step 6's twin, changes one line, and
/// builds as a hang diagnosis build.
#[test]
fn the_planted_hangs_apply_and_build_for_diagnosis() {
    let step = ladder::get(6).expect("step 6");
    let spec = KernelSpec::new(step, Arch::Hopper);
    let stock = spec.source();
    for (file, text) in [
        (
            "gpu/hang/step6_no_out_empty_arrive.toml",
            include_str!("../../gpu/hang/step6_no_out_empty_arrive.toml"),
        ),
        (
            "gpu/hang/step6_wrong_empty_parity.toml",
            include_str!("../../gpu/hang/step6_wrong_empty_parity.toml"),
        ),
    ] {
        let edits: EditFile = toml::from_str(text).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!((edits.step, edits.arch.as_str()), (6, "hopper"), "{file}");
        let edited = common::edits::apply(file, &stock.text, &edits.edit, &edits.snippets)
            .unwrap_or_else(|e| panic!("{file}: {e:#}"));
        let changed = stock
            .text
            .lines()
            .zip(edited.lines())
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(changed, 1, "{file}");
        assert!(edited.contains("planted hang"), "{file}");
        let src = KernelSource {
            path: format!("{}+{file}", stock.path),
            text: edited,
        };
        compile(&src, Target::Sm90a, &hang_defines(&spec))
            .unwrap_or_else(|e| panic!("{file}: {e:#}"));
    }
}
