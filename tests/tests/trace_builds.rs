//! The warp-role trace (`runner step N --trace`, `wb::Trace` in common.cuh): invisible in the
//! normal builds, present in every kernel's trace build, and mirrored by the host.

use common::compile::{compile, KernelSource, Target};
use common::sass::disassemble;
use common::step::{Arch, KernelSpec};
use common::trace::{Phase, DEFINE, RECORD_BYTES};
use common::Dtype;

/// A kernel's lines that are trace calls: the declaration and `trace.` statements.
fn is_trace_line(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("trace.") || t.starts_with("wb::Trace trace;")
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

fn trace_defines(spec: &KernelSpec) -> Vec<(String, String)> {
    let mut d = spec.defines(Dtype::F16);
    d.push((DEFINE.0.to_string(), DEFINE.1.to_string()));
    d
}

#[test]
fn trace_calls_compile_to_nothing_without_the_trace_define() {
    for step in ladder::all() {
        for arch in Arch::ALL {
            let spec = KernelSpec::new(step, arch);
            let n = step.info().number;
            let source = spec.source();
            let calls = source.text.lines().filter(|l| is_trace_line(l)).count();
            assert!(calls >= 9, "step {n} {arch}: only {calls} trace lines");
            let stripped = KernelSource {
                path: source.path.clone(),
                text: source
                    .text
                    .lines()
                    .filter(|l| !is_trace_line(l))
                    .map(|l| format!("{l}\n"))
                    .collect(),
            };
            let target = Target::native(arch);
            let defines = spec.defines(Dtype::F16);
            let with = compile(&source, target, &defines).expect("compiles");
            let without = compile(&stripped, target, &defines).expect("compiles without trace");
            let (a, b) = (
                disassemble(&with.cubin).expect("nvdisasm"),
                disassemble(&without.cubin).expect("nvdisasm"),
            );
            assert_eq!(
                instructions(&a.listing),
                instructions(&b.listing),
                "step {n} {arch}: the trace calls change the normal build's SASS"
            );
            assert!(!a.listing.contains("SR_GLOBALTIMER"), "step {n} {arch}");
            assert_eq!(
                with.resources.registers, without.resources.registers,
                "step {n} {arch}"
            );
        }
    }
}

#[test]
fn every_kernel_builds_with_its_trace_calls_on() {
    for step in ladder::all() {
        for arch in Arch::ALL {
            let spec = KernelSpec::new(step, arch);
            let n = step.info().number;
            let source = spec.source();
            let call_sites = source.text.lines().filter(|l| is_trace_line(l)).count();
            let mut targets = vec![Target::native(arch)];
            if arch == Arch::Blackwell {
                // What an H100/H200 runs for `runner step N --arch sm_100a --trace`.
                targets.push(Target::Sm90aEmulated);
            }
            for target in targets {
                let c = compile(&source, target, &trace_defines(&spec)).unwrap_or_else(|e| {
                    panic!("step {n} {arch} trace build for {target:?}: {e:#}")
                });
                let sass = disassemble(&c.cubin).expect("nvdisasm");
                let timer_reads = sass.listing.matches("SR_GLOBALTIMER").count();
                // One read per call site at least (the declaration's constructor records too).
                assert!(
                    timer_reads >= call_sites,
                    "step {n} {arch} {target:?}: {timer_reads} timer reads for {call_sites} trace lines"
                );
                if target == Target::native(arch) {
                    assert_eq!(
                        sass.local_memory_ops(),
                        0,
                        "step {n} {arch}: the trace build spills"
                    );
                    for bad in [
                        "wgmma.mma_async instructions are serialized",
                        "setmaxnreg ignored",
                    ] {
                        assert!(
                            !c.log.contains(bad),
                            "step {n} {arch} trace build: {}",
                            c.log
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn the_host_mirrors_the_device_trace_record_and_phases() {
    let mut text = String::from("#include \"common.cuh\"\n");
    for p in Phase::ALL {
        text.push_str(&format!(
            "static_assert(wb::{} == {}, \"common::trace::Phase::{p:?}\");\n",
            p.device_name(),
            p.id()
        ));
    }
    text.push_str(&format!(
        "static_assert(sizeof(wb::TraceRecord) == {RECORD_BYTES}, \"size\");\n\
         static_assert(wb::TRACE_KIND_ENTER == {} && wb::TRACE_KIND_TILE == {}, \"kinds\");\n\
         extern \"C\" __global__ void gemm_kernel() {{}}\n",
        common::trace::KIND_ENTER,
        common::trace::KIND_TILE
    ));
    let src = KernelSource {
        path: "trace_mirror.cu".into(),
        text,
    };
    compile(&src, Target::Sm90a, &[])
        .unwrap_or_else(|e| panic!("common::trace disagrees with common.cuh: {e:#}"));
}

/// The phases each kernel marks, so that every step records the same points where its structure
/// has them and `runner diff` shows only what a step changes.
#[test]
fn every_kernel_marks_the_phases_its_structure_has() {
    use Phase::*;
    for step in ladder::all() {
        let n = step.info().number;
        for arch in Arch::ALL {
            let kernel = step.info().kernel(arch);
            let text = kernel.text;
            // What the kernel is, as its crate declares it, decides the phases it has.
            let persistent = kernel.launch.schedule().loops();
            let pairs = kernel.launch.cluster() == 2;
            let mut expected = vec![Idle, SlotWait, Load, DataWait, Mma, AccWait, Epilogue, Exit];
            match arch {
                Arch::Blackwell => {
                    expected.push(Teardown);
                    if pairs {
                        // The producer waits out its peer's last multicast commits.
                        expected.push(Tail);
                    }
                    if persistent {
                        expected.push(AccEmptyWait);
                    }
                }
                Arch::Hopper => {
                    expected.push(MmaWait);
                    if pairs {
                        expected.push(Teardown);
                    }
                    if kernel.epilogue == common::Epilogue::StoreWarp {
                        // The consumers wait for the store warp to have read `out`.
                        expected.push(OutEmptyWait);
                    }
                }
            }
            for p in Phase::ALL {
                if p == Setup {
                    continue; // entered by the declaration
                }
                let used = text.contains(&format!("trace.enter(wb::{}", p.device_name()));
                assert_eq!(
                    used,
                    expected.contains(&p),
                    "step {n} {arch}: {} {}",
                    p.device_name(),
                    if used {
                        "is marked but not expected"
                    } else {
                        "is not marked"
                    }
                );
            }
            assert_eq!(
                text.contains("trace.start_tile(tile);"),
                persistent,
                "step {n} {arch}: tile marks go with the persistent loop"
            );
            assert_eq!(
                text.matches("wb::Trace trace;").count(),
                1,
                "step {n} {arch}"
            );
        }
    }
}
