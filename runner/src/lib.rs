//! The runner's library half: the ladder of steps (its own crate, `steps/ladder`, which the
//! cross-crate tests use directly), under the name the binary's modules use.

pub use ladder as steps;
