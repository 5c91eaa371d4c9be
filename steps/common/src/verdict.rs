//! The exit-code contract of every command that runs a kernel (`runner step`, `runner exercise`,
//! `runner check`, the grader's children): one enum, so a parent classifies a child by its exit
//! status alone and never by parsing what it printed.

use serde::{Deserialize, Serialize};

/// How a run ended, as its exit code says. In results files it is the case's `outcome`
/// (`pass`, `fail`, `error`, `hang`, `partial`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Exit 0: the kernel ran and its output verified.
    #[serde(rename = "pass")]
    Verified,
    /// Exit 1: the kernel ran and its output is wrong (or a check it must meet failed).
    #[serde(rename = "fail")]
    Failed,
    /// Exit 2: it could not run to a verdict: bad input, a compile error, a fault the emulation
    /// or the driver reported, a crash. One `error:` line on stderr says which.
    Error,
    /// Exit 124: it did not finish within its limit (a hang), as `timeout(1)` reports it too.
    Hang,
    /// Exit 3: it could only run in part (no GPU that runs the kernel): neither pass nor fail.
    Partial,
}

impl Verdict {
    pub const ALL: [Verdict; 5] = [
        Verdict::Verified,
        Verdict::Failed,
        Verdict::Error,
        Verdict::Hang,
        Verdict::Partial,
    ];

    pub fn code(self) -> u8 {
        match self {
            Verdict::Verified => 0,
            Verdict::Failed => 1,
            Verdict::Error => 2,
            Verdict::Partial => 3,
            Verdict::Hang => 124,
        }
    }

    /// The verdict of an exit code. 137 is a process killed by SIGKILL, which is what
    /// `timeout -s KILL` (and a parent's wall-clock limit) does to a hang; any other code is an
    /// error, since the contract has no other meaning for it.
    pub fn from_code(code: i32) -> Verdict {
        match code {
            0 => Verdict::Verified,
            1 => Verdict::Failed,
            3 => Verdict::Partial,
            124 | 137 => Verdict::Hang,
            _ => Verdict::Error,
        }
    }

    /// The word results files and summaries use.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Verified => "pass",
            Verdict::Failed => "fail",
            Verdict::Error => "error",
            Verdict::Hang => "hang",
            Verdict::Partial => "partial",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.word())
    }
}

impl From<Verdict> for std::process::ExitCode {
    fn from(v: Verdict) -> Self {
        std::process::ExitCode::from(v.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_verdict_round_trips_through_its_code_and_its_word() {
        for v in Verdict::ALL {
            assert_eq!(Verdict::from_code(i32::from(v.code())), v);
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(json, format!("\"{}\"", v.word()));
            assert_eq!(serde_json::from_str::<Verdict>(&json).unwrap(), v);
        }
        assert_eq!(Verdict::from_code(137), Verdict::Hang);
        assert_eq!(Verdict::from_code(101), Verdict::Error, "a Rust panic");
        assert_eq!(Verdict::from_code(-1), Verdict::Error);
    }
}
