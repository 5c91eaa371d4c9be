//! The committed results files (`assets/results/*.json`) as the book and its measured tables read
//! them; below both, so neither imports the other.

use common::toolkit::project_root;
use serde_json::Value;
use std::path::PathBuf;

/// Every results JSON in `assets/results/`, by file name, in name order; unreadable files are
/// skipped here (the test below holds every committed file to parse).
pub fn results_files() -> Vec<(String, Value)> {
    let dir = project_root().join("assets/results");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "json"));
    files.sort();
    files
        .into_iter()
        .filter_map(|p| {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).ok()?).ok()?;
            Some((p.file_name()?.to_string_lossy().into_owned(), v))
        })
        .collect()
}

/// A field of a results JSON as table text ("-" when absent).
pub fn s(v: &Value, k: &str) -> String {
    match &v[k] {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_committed_results_file_parses() {
        let dir = project_root().join("assets/results");
        let mut json = 0;
        for entry in std::fs::read_dir(&dir).expect("assets/results exists") {
            let path = entry.expect("a directory entry").path();
            if path.extension().is_some_and(|e| e == "json") {
                let text = std::fs::read_to_string(&path).expect("readable");
                serde_json::from_str::<Value>(&text)
                    .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
                json += 1;
            }
        }
        assert_eq!(results_files().len(), json);
    }
}
