//! The book's phase simulator (`common::model::phases`) models the ring's two wait lines by formula. This
//! test cuts those lines out of every step's kernel — as written, and as the seeded bugs
//! `wrong-parity` and `no-first-round-guard` rewrite them — compiles them on the host, and checks
//! that they wait on the parities the simulator uses, so the chapter's outcome table speaks about
//! the kernels' own code.

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
    // Each line becomes the body of a function of the ring counter (`kb` in steps 0-3, `it` in
    // 4-6) that reports the parity it waits on, or -1 when it does not wait.
    let mut program = String::from(
        r#"#include <cstdio>
typedef unsigned long long u64;
typedef unsigned u32;
namespace wb {
static int waited;
inline void mbarrier_wait(u64*, u32 parity) { waited = int(parity & 1); }
}
static struct { u64 load_empty[8]; u64 load_full[8]; } smem;
static int STAGES;
"#,
    );
    for (i, (_, _, empty, full)) in cases.iter().enumerate() {
        for (kind, line) in [("empty", empty), ("full", full)] {
            program.push_str(&format!(
                "static int {kind}_{i}(int counter) {{\n  const int kb = counter, it = counter, slot = 0;\n  (void)kb; (void)it; (void)slot;\n  wb::waited = -1;\n  {line}\n  return wb::waited;\n}}\n"
            ));
        }
    }
    program.push_str("int main() {\n  for (STAGES = 2; STAGES <= 6; ++STAGES)\n    for (int c = 0; c < 40; ++c) {\n");
    for i in 0..cases.len() {
        program.push_str(&format!(
            "      std::printf(\"{i} %d %d %d %d\\n\", STAGES, c, empty_{i}(c), full_{i}(c));\n"
        ));
    }
    program.push_str("    }\n}\n");

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
        checked += 1;
    }
    assert_eq!(checked, cases.len() * 5 * 40);
}
