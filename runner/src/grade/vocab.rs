//! The grader's shared words, below every other module of it: a report row's [`Kind`], a
//! check's [`Status`], its [`Flag`]s, a trace fact's [`FactResult`], and what a test or
//! requirement may be named. The rubric, the job, the report, the technique checks and the
//! trace facts all use them; keeping them here keeps those modules from importing each other in
//! a circle.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flag {
    /// A stable name (`out-of-bounds-write`, `stale-output`, ...).
    pub name: String,
    pub detail: String,
}

impl Flag {
    pub fn new(name: &str, detail: impl Into<String>) -> Flag {
        Flag {
            name: name.to_string(),
            detail: detail.into(),
        }
    }
}

/// What a report's row is: a test, or a requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Correctness,
    Performance,
    /// A `[[requirements]]` entry (see [`super::technique`]): reported like a test, never run.
    Technique,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Passed,
    Failed,
    /// Not run here, and not counted: e.g. timing without native hardware.
    Skipped,
    Timeout,
    Error,
}

/// What the run child found for one trace fact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FactResult {
    pub fact: String,
    /// Passed (the records show it), failed (they do not, or the traced launch was wrong), or
    /// error (not checked: an earlier test lost the GPU context).
    pub status: Status,
    /// The fact's summary, or why not: one line.
    pub detail: String,
    /// The traced launch's own flags, if its checks failed.
    pub flags: Vec<Flag>,
}

/// Test and requirement names: what reports and Gradescope show.
pub fn check_name(name: &str) -> Result<()> {
    if name.trim().is_empty() || name.len() > 64 || name.chars().any(|c| c.is_control()) {
        bail!("a test name must be 1 to 64 printable characters");
    }
    Ok(())
}
