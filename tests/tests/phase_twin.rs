//! The book's phase simulator (`common::model::phases`) models the ring's two wait lines by formula. This
//! test cuts those lines out of every step's kernel — as written, and as the seeded bugs
//! `wrong-parity` and `no-first-round-guard` rewrite them — compiles them on the host with the
//! kernels' own ring (`wb::Ring`, steps/include/pipeline.cuh) advanced as the kernels advance it,
//! and checks that they wait on the parities the simulator uses, in the slot it uses, so the
//! chapter's outcome table speaks about the kernels' own code.

use common::model::phases::{EmptyWait, FullWait};
use common::mutation;
use workbook_tests::run_host_cpp;

/// The one line of `kernel` containing `needle`.
fn the_line<'a>(kernel: &'a str, needle: &str, what: &str) -> &'a str {
    let lines: Vec<&str> = kernel.lines().filter(|l| l.contains(needle)).collect();
    assert_eq!(lines.len(), 1, "{what}: one line waits on {needle}");
    lines[0].trim()
}

#[test]
fn the_kernels_wait_lines_match_the_simulator() {
    let mut cases: Vec<(String, EmptyWait, String, String)> = Vec::new();
    for step in ladder::all() {
        let info = step.info();
        for variant in EmptyWait::ALL {
            let kernel = match variant.mutation() {
                None => info.blackwell.text.to_string(),
                Some(name) => mutation::find(name)
                    .and_then(|m| m.apply(info.blackwell.text))
                    .unwrap_or_else(|e| panic!("step {}: {e:#}", info.number)),
            };
            let what = format!("step {} {variant:?}", info.number);
            let empty = the_line(&kernel, "mbarrier_wait(&smem.load_empty[slot]", &what);
            let full = the_line(&kernel, "mbarrier_wait(&smem.load_full[slot]", &what);
            cases.push((what, variant, empty.to_string(), full.to_string()));
        }
    }
    // Each line becomes the body of a function of the ring counter (the k-blocks so far) that
    // advances the kernels' rings (the producer's `fill`, the MMA side's `drain`) that many times
    // and reports the parity the line waits on, or -1 when it does not wait, and the slot.
    let ring = include_str!("../../steps/include/pipeline.cuh").replace("#pragma once", "");
    let mut program = String::from(
        r#"#include <cstdio>
#define __device__
#define __forceinline__ inline
typedef unsigned long long u64;
typedef unsigned u32;
namespace wb {
static int waited, slot_waited;
static struct { u64 load_empty[8]; u64 load_full[8]; } smem;
inline void mbarrier_wait(u64* bar, u32 parity) {
  waited = int(parity & 1);
  slot_waited = int(bar - (bar >= smem.load_full ? smem.load_full : smem.load_empty));
}
}
using wb::smem;
"#,
    );
    program.push_str(&ring);
    for (i, (_, _, empty, full)) in cases.iter().enumerate() {
        for (kind, line) in [("empty", empty), ("full", full)] {
            program.push_str(&format!(
                "template <int STAGES> static int {kind}_{i}(int counter, int* slot_out) {{\n  wb::Ring<STAGES> fill, drain;\n  for (int k = 0; k < counter; ++k) {{ fill.advance(); drain.advance(); }}\n  const int slot = {ring}.index();\n  wb::waited = -1;\n  wb::slot_waited = slot;\n  {line}\n  *slot_out = wb::slot_waited;\n  return wb::waited;\n}}\n",
                ring = if kind == "empty" { "fill" } else { "drain" },
            ));
        }
    }
    program.push_str("template <int STAGES> static void run() {\n  for (int c = 0; c < 40; ++c) {\n    int se = 0, sf = 0;\n");
    for i in 0..cases.len() {
        program.push_str(&format!(
            "    {{ const int e = empty_{i}<STAGES>(c, &se), f = full_{i}<STAGES>(c, &sf);\n      std::printf(\"{i} %d %d %d %d %d %d\\n\", STAGES, c, e, f, se, sf); }}\n"
        ));
    }
    program
        .push_str("  }\n}\nint main() {\n  run<2>(); run<3>(); run<4>(); run<5>(); run<6>();\n}\n");

    let out = run_host_cpp("phase-twin", &program);
    let mut checked = 0;
    for line in out.lines() {
        let v: Vec<i64> = line
            .split(' ')
            .map(|x| x.parse().expect("numbers"))
            .collect();
        let (what, variant, _, _) = &cases[v[0] as usize];
        let (stages, counter) = (v[1] as u32, v[2] as u32);
        let model_empty = variant.parity(counter, stages).map_or(-1, i64::from);
        assert_eq!(
            v[3], model_empty,
            "{what}: load_empty wait for counter {counter}, {stages} stages"
        );
        assert_eq!(
            v[4],
            i64::from(FullWait::Correct.parity(counter, stages)),
            "{what}: load_full wait for counter {counter}, {stages} stages"
        );
        let slot = i64::from(counter % stages);
        assert_eq!(
            (v[5], v[6]),
            (slot, slot),
            "{what}: the slots of the waits for counter {counter}, {stages} stages"
        );
        checked += 1;
    }
    assert_eq!(checked, cases.len() * 5 * 40);
}
