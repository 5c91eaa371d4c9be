//! A CPU simulator of the sm_100a PTX that NVRTC produces for the workbook's Blackwell kernels.
//!
//! The core (parser, interpreter, scheduler, barriers, ordering rules) is std-only so that it
//! builds for `wasm32-unknown-unknown`; the data semantics of TMA, tensor memory and the MMA
//! live in [`units`].

pub mod units;
