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
fn every_stock_kernel_passes_the_ptx_check() {
    for step in runner::steps::all() {
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
    ] {
        let m = find(mutation).expect("known mutation");
        for step in runner::steps::all() {
            if !m.applies_to(step.info().number) {
                continue;
            }
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
        for step in runner::steps::all() {
            if !m.applies_to(step.info().number) {
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
