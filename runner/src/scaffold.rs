//! A step can exist before its GPU run: a step 7 scaffolded from step 6's data
//! (`ladder::scaffold_copy`, in a temporary folder, on this test's thread only) gets every
//! per-step marker of the book rendered and every check's cases listed, with nothing of it
//! measured: what the results do not hold yet reads "not yet measured", never an error. The
//! compiles and the simulator's run of the same scaffold are `tests/tests/scaffold_step7.rs`.

#[test]
fn a_scaffolded_step_7_renders_its_tables_before_its_gpu_run() {
    let dir = std::env::temp_dir().join(format!("wb-scaffold-book-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let info = runner::steps::scaffold_copy(6, 7, &dir.join("step7_scaffold")).unwrap();
    let _guard = runner::steps::scaffold(info);
    let markers = [
        "{{#results emulation 7}}",
        "{{#results emulation-summary}}",
        "{{#budget 7}}",
        "{{#budget-value 7 epilogue}}",
        "{{#phase-outcomes ring}}",
        "{{#phase-timeline 7 none slow-mmas}}",
        "{{#comparables 7}}",
        "{{#diff 6 7}}",
        "{{#bench step 7}}",
        "{{#bench}}",
        "{{#verified 7}}",
        "{{#twins-summary}}",
        "{{#emulation-caught}}",
        "{{#speed-of-light}}",
        "{{#measured-vs-model 7}}",
        "{{#trace-shares 7}}",
        "{{#trace-figure 7 sm_100a}}",
        "{{#published-gain 7}}",
        "{{#twin-gain 7}}",
        "{{#progress 7}}",
        "{{#vs-previous 7}}",
        "{{#headline-call 7}}",
        "{{#heatmap-gains 7}}",
        "{{#grid-footprint 7 b200}}",
    ];
    let mut failed = Vec::new();
    let mut rendered = std::collections::BTreeMap::new();
    for m in markers {
        eprintln!("scaffolded step 7: {m}");
        match crate::book::expand_markers(m, false) {
            Ok(md) => {
                assert!(!md.contains("{{#"), "{m} left unexpanded: {md}");
                rendered.insert(m, md);
            }
            Err(e) => failed.push(format!("{m}: {e:#}")),
        }
    }
    assert!(
        failed.is_empty(),
        "markers that fail for a step not yet measured:\n{}",
        failed.join("\n")
    );
    // What no result holds yet says so, where a committed result would stand.
    for (m, says) in [
        ("{{#measured-vs-model 7}}", "not yet measured"),
        ("{{#verified 7}}", "not yet"),
        ("{{#headline-call 7}}", "not yet measured against step 6"),
        ("{{#comparables 7}}", "No published comparable of step 7"),
        (
            "{{#published-gain 7}}",
            "no version in Pallas:MGPU's ladder",
        ),
    ] {
        assert!(rendered[m].contains(says), "{m}: {}", rendered[m]);
    }
    // Its budget is computed from its declared data, like any step's.
    let budget = &rendered["{{#budget 7}}"];
    assert!(budget.contains("Budget of step 7"), "{budget}");
    // Every check lists cases for it.
    use crate::check::cases;
    let emu = cases::emulation_cases(&cases::EmulationSet::full()).unwrap();
    assert!(emu.iter().any(|c| c.step == 7 && c.mutation.is_none()));
    assert!(emu.iter().any(|c| c.step == 7 && c.mutation.is_some()));
    assert!(cases::twin_cases(&cases::TwinSet::full())
        .iter()
        .any(|c| c.step == 7));
    assert!(cases::stress_cases(&cases::StressSet::full())
        .iter()
        .any(|c| c.case.step == 7));
    std::fs::remove_dir_all(&dir).unwrap();
}
