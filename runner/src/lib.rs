//! The runner's library half: the ladder of steps, shared by the binary and the cross-crate
//! tests.

pub mod contenders;
pub mod steps;
