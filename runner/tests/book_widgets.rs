//! The simulator widgets in a real browser: `runner book` builds the book (the WebAssembly
//! simulator and every kernel's PTX included), `runner book --serve` serves it on 127.0.0.1,
//! and headless Chromium, driven over the DevTools protocol by `book/widgets/test/browser.mjs`
//! (Node's own WebSocket, no npm package), runs step 0 and step 3, a seeded bug, the player
//! and a trace file from `runner step 3 --sim --trace`. Screenshots stay in
//! target/browser-test/. Needs /usr/bin/chromium and node (.ci/run installs chromium);
//! WORKBOOK_BROWSER_TEST=1 makes their absence a failure, not a skip.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn widgets_run_break_play_and_load_in_chromium() {
    let chromium =
        std::env::var("WORKBOOK_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let have = std::path::Path::new(&chromium).is_file()
        && Command::new("node")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
    if !have {
        assert!(
            std::env::var("WORKBOOK_BROWSER_TEST").is_err(),
            "WORKBOOK_BROWSER_TEST is set but {chromium} or node is missing"
        );
        eprintln!("skipped: no {chromium} or no node");
        return;
    }
    let runner = env!("CARGO_BIN_EXE_runner");
    let target = root().join("target");
    let out = target.join("browser-test");
    let book = target.join("browser-test-book");
    std::fs::create_dir_all(&out).unwrap();
    // A trace file as a reader makes it.
    let traces = target.join("browser-test-trace");
    std::fs::create_dir_all(&traces).unwrap();
    let st = Command::new(runner)
        .args(["step", "3", "--sim", "--trace"])
        .arg(&traces)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "runner step 3 --sim --trace failed");
    // Canonical: Chromium's file chooser takes no `..` in a path.
    let trace = traces
        .join("trace-step3-sim.json")
        .canonicalize()
        .expect("runner step 3 --sim --trace wrote no trace-step3-sim.json");
    let started = std::time::Instant::now();
    let mut server = Command::new(runner)
        .args(["book", "--serve", "--port", "0", "--out"])
        .arg(&book)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = None;
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(i) = line.find("http://127.0.0.1:") {
            url = Some(line[i..].split_whitespace().next().unwrap().to_string());
            break;
        }
    }
    // Keep reading what the server prints, so its stdout never breaks.
    std::thread::spawn(move || lines.for_each(drop));
    eprintln!(
        "book built and served in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let url = url.expect("runner book --serve announced no address");
    let st = Command::new("node")
        .arg("--experimental-websocket")
        .arg(root().join("book/widgets/test/browser.mjs"))
        .arg(&url)
        .arg(&out)
        .arg(&trace)
        .status()
        .unwrap();
    server.kill().ok();
    server.wait().ok();
    assert!(
        st.success(),
        "the browser checks failed (screenshots in {})",
        out.display()
    );
    for f in ["step3-pass.png", "step3-bug.png", "timings.json"] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
}
