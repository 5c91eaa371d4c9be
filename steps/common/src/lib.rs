//! Shared host harness of the Blackwell GEMM workbook.
//!
//! A step crate declares its kernels and their facts ([`step::StepInfo`]); everything else lives
//! here once: finding NVRTC ([`toolkit`]), compiling ([`compile`]), disassembling ([`sass`]), the
//! GPU and its launches ([`gpu`]), inputs ([`problem`]), references ([`cublas`], [`verify`]),
//! timing ([`timing`]), the tcgen05 emulation's host side ([`emulation`]), warp-role timelines
//! ([`trace`]) and the whole run ([`run`]).

pub mod arch;
pub mod compile;
pub mod confidence;
pub mod cublas;
pub mod cupti;
pub mod edits;
pub mod emulation;
pub mod emulation_clc;
pub mod gpu;
pub mod model;
pub mod mutation;
pub mod nvml;
pub mod problem;
pub mod progress;
pub mod project;
pub mod ptx_check;
pub mod rescale;
pub mod run;
pub mod sass;
pub mod simulate;
pub mod static_check;
pub mod step;
pub mod stress;
pub mod timing;
pub mod toolkit;
pub mod trace;
pub mod trace_facts;
pub mod verdict;
pub mod verify;

pub use compile::{Compiled, KernelSource, Target};
pub use problem::{Dist, Dtype, Problem, Shape};
pub use step::{Epilogue, Lookahead, OutputArg, Plan, Schedule, Step, StepInfo};
