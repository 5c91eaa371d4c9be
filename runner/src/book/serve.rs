//! `runner book --serve`: the built book on a local address, plus what the reader brings.
//!
//! Besides the book's files, three answers under `widgets/reader/` feed the step widgets
//! (`book/widgets/sim-widget.js`):
//! - `index.json`: what is on offer: the reader's kernel (`--kernel FILE --step N`) and the
//!   reader's last trace (the JSON the newest `runner step N --trace` wrote, [`last_trace`]);
//! - `kernel.json`: the reader's kernel compiled to sm_100a PTX with NVRTC, with the step's
//!   launch, in the very format of the book's own kernels; recompiled when the file changes,
//!   so an edit shows on the next run in the page (a failed compile is answered as
//!   `{"error": ...}`, which the page shows);
//! - `trace.json`: the last trace's file, for the ring player.
//!
//! The static book writes an `index.json` that offers nothing, so a book read from files or
//! another server makes no failed request.
//!
//! [`last_trace`]: crate::last_trace

use super::widgets;
use anyhow::{anyhow, bail, Result};
use common::step::{Arch, KernelSpec};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The reader's own kernel: a step and a file as `runner step N --kernel FILE` takes them.
pub struct ReaderKernel {
    pub step: u32,
    pub path: PathBuf,
    /// The last compile: the file's modification time then, and the page's answer.
    compiled: Option<(Option<SystemTime>, Result<Value, String>)>,
}

impl ReaderKernel {
    /// Check the step and the file and compile it once: bad input fails here, before the
    /// server listens.
    pub fn new(step: u32, path: PathBuf) -> Result<ReaderKernel> {
        runner::steps::get(step)?;
        let mut k = ReaderKernel {
            step,
            path,
            compiled: None,
        };
        if let Err(e) = k.answer() {
            bail!("{e}");
        }
        Ok(k)
    }

    fn modified(&self) -> Option<SystemTime> {
        std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok()
    }

    /// The kernel's bundle for the page, compiled again when the file changed since.
    fn answer(&mut self) -> Result<Value, String> {
        let now = self.modified();
        if let Some((when, answer)) = &self.compiled {
            if *when == now && now.is_some() {
                return answer.clone();
            }
        }
        let answer = bundle(self.step, &self.path).map_err(|e| format!("{e:#}"));
        self.compiled = Some((now, answer.clone()));
        answer
    }
}

/// The reader's kernel for step `n` as the page runs it: sm_100a PTX of the file (or of a
/// `.toml`'s edits applied to the stock kernel), with the step's launch.
fn bundle(n: u32, path: &Path) -> Result<Value> {
    let step = runner::steps::get(n)?;
    crate::contenders::check_edit_target(path, common::compile::read_kernel, n, None)?;
    let source = crate::step_cmd::kernel_file(path)?;
    if source.text.contains("#include \"hopper.cuh\"") {
        bail!(
            "{} includes hopper.cuh: it is a Hopper twin, and the page simulates Blackwell (sm_100a) kernels only",
            path.display()
        );
    }
    let spec = KernelSpec::new(step, Arch::Blackwell);
    widgets::bundle(
        &spec,
        &source,
        json!({"name": "yours", "path": path.display().to_string()}),
    )
}

/// What `widgets/reader/index.json` says: nothing on offer (the static book), or what the
/// server has.
pub fn offer(kernel: Option<&ReaderKernel>, trace: Option<&(PathBuf, u32)>) -> Value {
    json!({
        "served": kernel.is_some() || trace.is_some(),
        "kernel": kernel.map(|k| json!({"step": k.step, "path": k.path.display().to_string()})),
        "trace": trace.map(|(p, n)| json!({
            "step": n,
            "path": p.display().to_string(),
            "name": p.file_name().map(|f| f.to_string_lossy().into_owned()),
        })),
    })
}

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("css") => "text/css",
        Some("js") => "application/javascript",
        Some("svg") => "image/svg+xml",
        Some("png") => "image/png",
        Some("json") => "application/json",
        Some("wasm") => "application/wasm",
        Some("woff2") => "font/woff2",
        _ => "application/octet-stream",
    }
}

fn respond(req: tiny_http::Request, status: u16, ct: &str, body: Vec<u8>) -> Result<()> {
    let header = tiny_http::Header::from_bytes("Content-Type", ct)
        .map_err(|_| anyhow!("bad header {ct}"))?;
    let no_cache = tiny_http::Header::from_bytes("Cache-Control", "no-store")
        .map_err(|_| anyhow!("bad header"))?;
    // A client that went away is no error of the server's.
    req.respond(
        tiny_http::Response::from_data(body)
            .with_header(header)
            .with_header(no_cache)
            .with_status_code(status),
    )
    .ok();
    Ok(())
}

/// Serve a built book on `bind:port` until interrupted (port 0: a free port, announced), with
/// the reader's kernel if given and the reader's last trace.
pub fn serve(
    dir: &Path,
    bind: std::net::IpAddr,
    port: u16,
    mut kernel: Option<ReaderKernel>,
) -> Result<()> {
    let server = tiny_http::Server::http((bind, port)).map_err(|e| {
        anyhow!("cannot listen on {bind}:{port}: {e} (choose another with --port, or --port 0 for a free one)")
    })?;
    let addr = server
        .server_addr()
        .to_ip()
        .map_or_else(|| format!("{bind}:{port}"), |a| a.to_string());
    if let Some(k) = &kernel {
        println!(
            "your kernel: {} (step {}), recompiled when it changes",
            k.path.display(),
            k.step
        );
    }
    match crate::last_trace::last() {
        Ok(Some((p, n))) => println!("your last trace: {} (step {n})", p.display()),
        Ok(None) => {
            println!("your last trace: none yet (`runner step N --sim --trace` writes one)")
        }
        Err(e) => eprintln!("warning: {e:#}"),
    }
    println!(
        "serving {} on http://{addr}/ (Ctrl-C to stop)",
        dir.display()
    );
    // The book's own "not found" page, where the build wrote one.
    let not_found = std::fs::read(dir.join("404.html")).ok();
    for req in server.incoming_requests() {
        let url = req
            .url()
            .split('?')
            .next()
            .unwrap_or("/")
            .trim_start_matches('/')
            .to_string();
        let rel = super::normalise(Path::new(if url.is_empty() { "index.html" } else { &url }));
        let json = "application/json";
        match rel.as_str() {
            "widgets/reader/index.json" => {
                // Read afresh: a `runner step --trace` while serving is offered at once.
                let trace = crate::last_trace::last().unwrap_or(None);
                let body = offer(kernel.as_ref(), trace.as_ref()).to_string();
                respond(req, 200, json, body.into_bytes())?;
            }
            "widgets/reader/kernel.json" => match kernel.as_mut().map(ReaderKernel::answer) {
                Some(Ok(v)) => respond(req, 200, json, v.to_string().into_bytes())?,
                // 200 with the error: the page shows it (a 4xx would also log a console error).
                Some(Err(e)) => {
                    let body = json!({"error": e}).to_string();
                    respond(req, 200, json, body.into_bytes())?;
                }
                None => {
                    let body = json!({"error": "no --kernel was given to runner book --serve"});
                    respond(req, 404, json, body.to_string().into_bytes())?;
                }
            },
            "widgets/reader/trace.json" => match crate::last_trace::last() {
                Ok(Some((p, _))) => match std::fs::read(&p) {
                    Ok(bytes) => respond(req, 200, json, bytes)?,
                    Err(e) => {
                        let body = json!({"error": format!("cannot read {}: {e}", p.display())});
                        respond(req, 404, json, body.to_string().into_bytes())?;
                    }
                },
                Ok(None) => {
                    let body = json!({"error": "no trace recorded yet: run `runner step N --sim --trace`"});
                    respond(req, 404, json, body.to_string().into_bytes())?;
                }
                Err(e) => {
                    let body = json!({"error": format!("{e:#}")});
                    respond(req, 500, json, body.to_string().into_bytes())?;
                }
            },
            _ => {
                let mut path = dir.join(&rel);
                if path.is_dir() {
                    path = path.join("index.html");
                }
                match (std::fs::read(&path), &not_found) {
                    (Ok(bytes), _) => respond(req, 200, content_type(&path), bytes)?,
                    (Err(_), Some(page)) => {
                        respond(req, 404, "text/html; charset=utf-8", page.clone())?;
                    }
                    (Err(_), None) => respond(req, 404, "text/plain", b"not found".to_vec())?,
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offer_says_what_the_server_has() {
        let none = offer(None, None);
        assert_eq!(none["served"], false);
        assert!(none["kernel"].is_null() && none["trace"].is_null());
        let t = (PathBuf::from("/tmp/x/trace-step3-sim.json"), 3);
        let v = offer(None, Some(&t));
        assert_eq!(v["served"], true);
        assert_eq!(v["trace"]["step"], 3);
        assert_eq!(v["trace"]["name"], "trace-step3-sim.json");
    }

    #[test]
    fn a_bad_step_or_file_fails_before_serving() {
        let e = ReaderKernel::new(99, PathBuf::from("x.cu"))
            .err()
            .expect("no step 99");
        assert!(format!("{e:#}").contains("99"), "{e:#}");
        let e = ReaderKernel::new(3, PathBuf::from("/nonexistent/kernel.cu"))
            .err()
            .expect("no such file");
        assert!(format!("{e:#}").contains("/nonexistent/kernel.cu"), "{e:#}");
    }
}
