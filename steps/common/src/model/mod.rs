//! The teaching models: host-side arithmetic the book and `runner budget`/`phases` print, kept
//! apart from the GPU harness (compile, run, verify, time) in the rest of this crate. Each has a
//! device twin that a cross-crate test holds it to (`tests/tests/*_twin.rs`, descriptor goldens).

pub mod budget;
pub mod descriptors;
pub mod phases;
pub mod tiling;
