//! The static check of the sm_100a PTX (`common::ptx_check`): every stock kernel follows the
//! tcgen05 ordering rules, and the seeded bugs that break them are found.

use common::compile::{compile_ptx, KernelSource};
use common::mutation::find;
use common::ptx_check::check;
use common::step::{Arch, KernelSpec};
use common::{Dtype, Target};

fn ptx(step: &'static dyn common::Step, text: &str) -> String {
    let spec = KernelSpec::new(step, Arch::Blackwell);
    let src = KernelSource {
        path: step.info().kernel_path(Arch::Blackwell),
        text: text.to_string(),
    };
    compile_ptx(&src, Target::Sm100a, &spec.defines(Dtype::Bf16))
        .unwrap_or_else(|e| panic!("step {}: {e:#}", step.info().number))
}

#[test]
fn every_traced_build_passes_the_ptx_check() {
    // `runner step --trace` checks the traced build: its record stores must not look like
    // staging writes to the store rules.
    for step in ladder::all() {
        for arch in [Arch::Blackwell, Arch::Hopper] {
            eprintln!(
                "traced build of step {} {arch}: PTX check",
                step.info().number
            );
            let spec = KernelSpec::new(step, arch);
            let mut defines = spec.defines(Dtype::F16);
            defines.push((
                common::trace::DEFINE.0.to_string(),
                common::trace::DEFINE.1.to_string(),
            ));
            let src = KernelSource {
                path: step.info().kernel_path(arch),
                text: step.info().kernel(arch).text.to_string(),
            };
            let target = match arch {
                Arch::Blackwell => Target::Sm100a,
                Arch::Hopper => Target::Sm90a,
            };
            let text = compile_ptx(&src, target, &defines)
                .unwrap_or_else(|e| panic!("step {}: {e:#}", step.info().number));
            let findings = check(&text);
            assert!(
                findings.is_empty(),
                "step {} {arch:?} traced: {findings:?}",
                step.info().number
            );
        }
    }
}

#[test]
fn every_stock_kernel_passes_the_ptx_check() {
    for step in ladder::all() {
        eprintln!("stock step {}: PTX check", step.info().number);
        let text = ptx(step, step.info().blackwell.text);
        assert!(
            text.contains("tcgen05.ld"),
            "the PTX has the epilogue's loads"
        );
        let findings = check(&text);
        assert!(
            findings.is_empty(),
            "step {}: {}",
            step.info().number,
            findings
                .iter()
                .map(|f| f.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

#[test]
fn the_seeded_ordering_bugs_fail_the_ptx_check_on_every_step() {
    for (mutation, rule) in [
        ("no-fence-after-wait", "fence-after-wait"),
        ("no-wait-ld", "wait-before-use"),
        ("wait-ld-after-use", "wait-before-use"),
        ("no-proxy-fence", "proxy-fence-before-store"),
    ] {
        let m = find(mutation).expect("known mutation");
        for step in ladder::all() {
            if !m.applies_to(step.info(), Arch::Blackwell) {
                continue;
            }
            eprintln!("step {} with {mutation}: PTX check", step.info().number);
            let text = ptx(step, &m.apply(step.info().blackwell.text).expect("applies"));
            let findings = check(&text);
            assert!(
                findings.iter().any(|f| f.rule == rule),
                "step {} with {mutation}: no {rule} finding in {findings:?}",
                step.info().number
            );
        }
    }
}

#[test]
fn static_findings_point_at_the_source_line_of_the_bug() {
    // common::static_check places each PTX finding in the kernel through the PTX's .loc lines:
    // the runner's error names the line the mutation edited.
    for (mutation, rule, needle) in [
        (
            "wait-ld-after-use",
            "wait-before-use",
            "waited for only after the use",
        ),
        ("alloc-cta-group-1", "one-cta-group", "mma_f16_2cta("),
    ] {
        let m = find(mutation).expect("known mutation");
        for step in ladder::all() {
            if !m.applies_to(step.info(), Arch::Blackwell) {
                continue;
            }
            let spec = KernelSpec::new(step, Arch::Blackwell);
            let src = KernelSource {
                path: step.info().kernel_path(Arch::Blackwell),
                text: m.apply(step.info().blackwell.text).expect("applies"),
            };
            let findings = common::static_check::ptx_findings(&src, &spec.defines(Dtype::F16))
                .unwrap_or_else(|e| panic!("step {}: {e:#}", step.info().number));
            let f = findings.iter().find(|f| f.rule == rule).unwrap_or_else(|| {
                panic!("step {} with {mutation}: {findings:?}", step.info().number)
            });
            let line = f.line.expect("a source line");
            assert!(
                src.text
                    .lines()
                    .nth(line - 1)
                    .unwrap_or("")
                    .contains(needle),
                "step {} with {mutation}: line {line} is {:?}",
                step.info().number,
                f.source
            );
        }
    }
}

#[test]
fn every_hopper_twin_fences_and_syncs_its_staging_before_the_tma_store() {
    // The store rules and the wgmma rule of ptx_check hold for the twins' PTX (the tcgen05 rules
    // are vacuous there), as `runner step` checks on every twin build.
    for step in ladder::all() {
        eprintln!("twin {}: PTX store rules", step.info().number);
        let spec = KernelSpec::new(step, Arch::Hopper);
        let src = KernelSource {
            path: step.info().kernel_path(Arch::Hopper),
            text: step.info().hopper.text.to_string(),
        };
        let text = compile_ptx(&src, Target::Sm90a, &spec.defines(Dtype::Bf16))
            .unwrap_or_else(|e| panic!("step {}: {e:#}", step.info().number));
        let findings = check(&text);
        assert!(
            findings.is_empty(),
            "step {} twin: {}",
            step.info().number,
            findings
                .iter()
                .map(|f| f.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

#[test]
fn a_twin_without_the_barrier_before_its_tma_store_is_found() {
    // The missed twin bug: the warpgroup's staging writes are fenced, but the thread that
    // issues the TMA store does not wait for the other threads' writes.
    for n in [2u32, 3, 4] {
        let step = ladder::get(n).expect("step");
        let stock = step.info().hopper.text;
        let lines: Vec<&str> = stock.lines().collect();
        let fence = lines
            .iter()
            .position(|l| l.contains("wb::fence_proxy_async_shared();"))
            .expect("the staging fence");
        assert!(
            lines[fence + 1].contains("named_barrier_sync"),
            "step {n}: the fence is followed by the barrier"
        );
        let text: String = lines
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != fence + 1)
            .map(|(_, l)| format!("{l}\n"))
            .collect();
        let spec = KernelSpec::new(step, Arch::Hopper);
        let src = KernelSource {
            path: step.info().kernel_path(Arch::Hopper),
            text,
        };
        let ptx = compile_ptx(&src, Target::Sm90a, &spec.defines(Dtype::F16))
            .unwrap_or_else(|e| panic!("step {n}: {e:#}"));
        let findings = check(&ptx);
        assert!(
            findings.iter().any(|f| f.rule == "barrier-before-store"),
            "step {n}: {findings:?}"
        );
    }
}

#[test]
fn a_twin_that_waits_one_wgmma_group_too_few_is_found() {
    // The other missed twin bug: wgmma.wait_group 1 where the accumulator's use needs 0.
    for step in ladder::all() {
        let n = step.info().number;
        let stock = step.info().hopper.text;
        if !stock.contains("hp::wgmma_wait_group<0>();") {
            continue;
        }
        let spec = KernelSpec::new(step, Arch::Hopper);
        let src = KernelSource {
            path: step.info().kernel_path(Arch::Hopper),
            text: stock.replace("hp::wgmma_wait_group<0>();", "hp::wgmma_wait_group<1>();"),
        };
        let ptx = compile_ptx(&src, Target::Sm90a, &spec.defines(Dtype::F16))
            .unwrap_or_else(|e| panic!("step {n}: {e:#}"));
        let findings = check(&ptx);
        assert!(
            findings.iter().any(|f| f.rule == "wgmma-wait-before-use"),
            "step {n}: {findings:?}"
        );
    }
}
