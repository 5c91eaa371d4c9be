//! The reader's last trace: every `runner step N --trace` records where it wrote its JSON trace
//! (simulator or GPU path alike), so that `runner book --serve` can hand the newest one to the
//! book's ring player with one click. The record is one small JSON file,
//! `target/runner-last-trace.json` in the checkout (or the file `WORKBOOK_LAST_TRACE` names);
//! outside a checkout nothing is recorded. Recording is best effort: a trace that was written
//! is never failed by its record (a warning says why).

use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// Where the record lives, if anywhere.
pub fn record_file() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("WORKBOOK_LAST_TRACE").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    common::project::root().map(|r| r.join("target").join("runner-last-trace.json"))
}

/// Remember `json` (a trace file just written) as step `step`'s, the reader's last trace.
pub fn record(json: &Path, step: u32) {
    if let Some(file) = record_file() {
        record_to(&file, json, step);
    }
}

fn record_to(file: &Path, json: &Path, step: u32) {
    let path = json.canonicalize().unwrap_or_else(|_| json.to_path_buf());
    let text = json!({"path": path, "step": step}).to_string();
    let wrote = file
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(file, text));
    if let Err(e) = wrote {
        eprintln!(
            "warning: cannot record {} as the last trace in {}: {e} (`runner book --serve` will not offer it)",
            path.display(),
            file.display()
        );
    }
}

/// The last trace recorded: its path and step, or `None` where no run recorded one (or the file
/// it names is gone).
pub fn last() -> Result<Option<(PathBuf, u32)>> {
    record_file().map_or(Ok(None), |f| last_in(&f))
}

fn last_in(file: &Path) -> Result<Option<(PathBuf, u32)>> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
    };
    let v: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a last-trace record", file.display()))?;
    let (Some(path), Some(step)) = (v["path"].as_str(), v["step"].as_u64()) else {
        anyhow::bail!("{} is not a last-trace record", file.display());
    };
    let path = PathBuf::from(path);
    Ok(path
        .is_file()
        .then(|| (path, u32::try_from(step).unwrap_or(u32::MAX))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_finds_the_last_trace() {
        let d = std::env::temp_dir().join(format!("runner-last-trace-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let rec = d.join("rec.json");
        assert!(last_in(&rec).unwrap().is_none(), "no record yet");
        let a = d.join("trace-step3-sim.json");
        std::fs::write(&a, "{}").unwrap();
        record_to(&rec, &a, 3);
        let b = d.join("trace-step5-sim.json");
        std::fs::write(&b, "{}").unwrap();
        record_to(&rec, &b, 5);
        let (p, n) = last_in(&rec).unwrap().expect("recorded");
        assert_eq!((p, n), (b.canonicalize().unwrap(), 5), "the newest wins");
        std::fs::remove_file(&b).unwrap();
        assert!(
            last_in(&rec).unwrap().is_none(),
            "a removed trace is not offered"
        );
        std::fs::write(&rec, "not json").unwrap();
        assert!(
            last_in(&rec).is_err(),
            "a broken record is an error, not a silent none"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }
}
