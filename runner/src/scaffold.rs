//! A step can exist before its GPU run: a step 8 scaffolded from step 7's data
//! (`ladder::scaffold_copy`, in a temporary folder, on this test's thread only) gets every
//! per-step marker of the book rendered and every check's cases listed, with nothing of it
//! measured: what the results do not hold yet reads "not yet measured", never an error. The
//! compiles and the simulator's run of the same scaffold are `tests/tests/scaffold_step8.rs`.

#[test]
fn a_scaffolded_step_8_renders_its_tables_before_its_gpu_run() {
    let dir = std::env::temp_dir().join(format!("wb-scaffold-book-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let info = runner::steps::scaffold_copy(7, 8, &dir.join("step8_scaffold")).unwrap();
    let _guard = runner::steps::scaffold(info);
    let markers = [
        "{{#results emulation 8}}",
        "{{#results emulation-summary}}",
        "{{#budget 8}}",
        "{{#budget-value 8 epilogue}}",
        "{{#phase-outcomes ring}}",
        "{{#phase-timeline 8 none slow-mmas}}",
        "{{#comparables 8}}",
        "{{#diff 7 8}}",
        "{{#bench step 8}}",
        "{{#bench}}",
        "{{#verified 8}}",
        "{{#twins-summary}}",
        "{{#emulation-caught}}",
        "{{#speed-of-light}}",
        "{{#measured-vs-model 8}}",
        "{{#trace-shares 8}}",
        "{{#trace-figure 8 sm_100a}}",
        "{{#published-gain 8}}",
        "{{#twin-gain 8}}",
        "{{#progress 8}}",
        "{{#vs-previous 8}}",
        "{{#headline-call 8}}",
        "{{#heatmap-gains 8}}",
        "{{#grid-footprint 8 b200}}",
    ];
    let mut failed = Vec::new();
    let mut rendered = std::collections::BTreeMap::new();
    for m in markers {
        eprintln!("scaffolded step 8: {m}");
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
        ("{{#measured-vs-model 8}}", "not yet measured"),
        ("{{#verified 8}}", "not yet"),
        ("{{#headline-call 8}}", "not yet measured against step 7"),
        ("{{#comparables 8}}", "No published comparable of step 8"),
        (
            "{{#published-gain 8}}",
            "no version in Pallas:MGPU's ladder",
        ),
    ] {
        assert!(rendered[m].contains(says), "{m}: {}", rendered[m]);
    }
    // Its budget is computed from its declared data, like any step's.
    let budget = &rendered["{{#budget 8}}"];
    assert!(budget.contains("Budget of step 8"), "{budget}");
    // Every check lists cases for it.
    use crate::check::cases;
    let emu = cases::emulation_cases(&cases::EmulationSet::full()).unwrap();
    assert!(emu.iter().any(|c| c.step == 8 && c.mutation.is_none()));
    assert!(emu.iter().any(|c| c.step == 8 && c.mutation.is_some()));
    assert!(cases::twin_cases(&cases::TwinSet::full())
        .iter()
        .any(|c| c.step == 8));
    assert!(cases::stress_cases(&cases::StressSet::full())
        .iter()
        .any(|c| c.case.step == 8));
    std::fs::remove_dir_all(&dir).unwrap();
}
