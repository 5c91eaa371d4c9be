//! The simulator widgets in a real browser: `runner book` builds the book (the WebAssembly
//! simulator and every kernel's PTX included), `runner book --serve --kernel FILE --step 3`
//! serves it on 127.0.0.1 with a reader's edited kernel and last trace, and headless Chromium,
//! driven over the DevTools protocol by `book/widgets/test/browser.mjs` (Node's own WebSocket,
//! no npm package), times step 0 and step 6 from page load, runs step 3, a seeded bug, the
//! player, the reader's kernel, the reader's last trace from `runner step 3 --sim --trace` and a
//! dropped trace file, and checks the widget in every mdbook theme. Screenshots and
//! timings.json stay in target/browser-test/; WORKBOOK_UPDATE_SCREENSHOT=1 copies the running
//! chapter's screenshot to book/src/. Needs /usr/bin/chromium and node (.ci/run installs
//! chromium); WORKBOOK_BROWSER_TEST=1 makes their absence a failure, not a skip.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The running chapter's screenshot of the widget, committed.
const SCREENSHOT: &str = "book/src/running-widget.png";

/// Bytes of the files under `dir` whose names end with one of `ends`.
fn weight(dir: &Path, ends: &[&str]) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .filter(|p| ends.iter().any(|e| p.to_string_lossy().ends_with(e)))
        .map(|p| p.metadata().unwrap().len())
        .sum()
}

/// A reader's edit of step 3's kernel: ours with a seeded bug (not the one the page's Break it
/// button runs), so the page must show a stop where our kernel passes.
fn readers_kernel(dir: &Path) -> PathBuf {
    use common::mutation::MUTATIONS;
    use common::step::{Arch, KernelSpec};
    let step = runner::steps::get(3).unwrap();
    let stock = KernelSpec::new(step, Arch::Blackwell).source();
    let m = MUTATIONS
        .iter()
        .find(|m| m.applies_to(step.info(), Arch::Blackwell) && m.name != "no-fence-after-wait")
        .expect("a second seeded bug of step 3");
    let path = dir.join("my_step3.cu");
    std::fs::write(&path, m.apply(&stock.text).unwrap()).unwrap();
    path.canonicalize().unwrap()
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
    // The reader's last trace is recorded here, not in the checkout's target/.
    let last = out.join("last-trace.json");
    std::fs::remove_file(&last).ok();
    let st = Command::new(runner)
        .env("WORKBOOK_LAST_TRACE", &last)
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
    assert!(
        last.is_file(),
        "runner step 3 --trace recorded no last trace"
    );
    let mine = readers_kernel(&out);
    let started = std::time::Instant::now();
    let mut server = Command::new(runner)
        .env("WORKBOOK_LAST_TRACE", &last)
        .args(["book", "--serve", "--port", "0", "--step", "3", "--kernel"])
        .arg(&mine)
        .arg("--out")
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
    // The budget: the book's added WebAssembly and JavaScript under 3 MB.
    let widgets = book.join("widgets");
    let added = weight(&widgets, &[".wasm", ".js"]);
    let ptx = weight(&widgets.join("kernels"), &[".json"]);
    eprintln!("the book's added wasm+JS: {added} bytes; the kernels' PTX: {ptx} bytes");
    assert!(
        added > 0 && added < 3_000_000,
        "wasm+JS weigh {added} bytes, over 3 MB"
    );
    let st = Command::new("node")
        .arg("--experimental-websocket")
        .arg(root().join("book/widgets/test/browser.mjs"))
        .arg(&url)
        .arg(&out)
        .arg(&trace)
        .arg(&mine)
        .status()
        .unwrap();
    server.kill().ok();
    server.wait().ok();
    assert!(
        st.success(),
        "the browser checks failed (screenshots in {})",
        out.display()
    );
    for f in [
        "step3-pass.png",
        "step3-bug.png",
        "step3-bug-coal.png",
        "running-widget.png",
        "timings.json",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let timings = std::fs::read_to_string(out.join("timings.json")).unwrap();
    let mut t: serde_json::Value = serde_json::from_str(&timings).unwrap();
    t["wasm_js_bytes"] = added.into();
    t["ptx_bytes"] = ptx.into();
    std::fs::write(out.join("timings.json"), t.to_string()).unwrap();
    eprintln!("timings: {t}");
    let shot = out.join("running-widget.png");
    if std::env::var_os("WORKBOOK_UPDATE_SCREENSHOT").is_some() {
        std::fs::copy(&shot, root().join(SCREENSHOT)).unwrap();
    }
    let committed = std::fs::metadata(root().join(SCREENSHOT))
        .unwrap_or_else(|_| panic!("{SCREENSHOT} missing: WORKBOOK_UPDATE_SCREENSHOT=1 writes it"));
    assert!(
        committed.len() < 150_000,
        "{SCREENSHOT} weighs {} bytes; keep it under 150 KB",
        committed.len()
    );
}
