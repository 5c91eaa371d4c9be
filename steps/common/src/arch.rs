//! The two architectures a step targets; below both the compiler driver and the step contract,
//! which each name it.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Which of a step's two kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    /// The step's subject: `src/kernel.cu` for sm_100a (tcgen05, tensor memory).
    Blackwell,
    /// Its Hopper twin: `src/kernel_sm90.cu` for sm_90a (wgmma, accumulator in registers), the
    /// same idea with Hopper's tools, timed natively on an H100/H200.
    Hopper,
}

impl Arch {
    pub const ALL: [Arch; 2] = [Arch::Blackwell, Arch::Hopper];

    /// The architecture name users type (`--arch sm_100a`).
    pub fn sm(self) -> &'static str {
        match self {
            Arch::Blackwell => "sm_100a",
            Arch::Hopper => "sm_90a",
        }
    }
    /// The kernel file in a step crate's `src/`.
    pub fn file(self) -> &'static str {
        match self {
            Arch::Blackwell => "kernel.cu",
            Arch::Hopper => "kernel_sm90.cu",
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Arch::Blackwell => "Blackwell kernel",
            Arch::Hopper => "Hopper twin",
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.sm())
    }
}
