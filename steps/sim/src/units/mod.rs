//! Data semantics of the asynchronous units: tensor maps (TMA), tensor memory and the tcgen05
//! MMA, and the numeric conversions they need. Pure functions over byte slices; std and `half`
//! only. The core decides when each runs and which ordering rules apply; the units say what the
//! bytes become, or why the operation is refused ([`UnitError`]).
//!
//! - [`numeric`] holds `cvt` between f32, f16/bf16 (packed too) and integers.
//! - [`descriptors`] holds the tcgen05 shared-memory and instruction descriptors (the one
//!   definition, re-exported by `common::model::descriptors`) and the swizzle address maths.
//! - [`tensormap`] holds `cuTensorMapEncodeTiled`'s parameters and TMA tile loads/stores.
//! - [`tmem`] holds a CTA's tensor memory, its allocator, `tcgen05.ld`/`st` `.32x32b`.
//! - [`tmem_cp`] holds the shapes of `tcgen05.cp` and where each source row lands.
//! - [`mma`] holds `tcgen05.mma.cta_group::{1,2}` of `kind::f16`, and with [`mma_kinds`] the
//!   dense `kind::tf32`, `kind::f8f6f4` and `kind::i8` (K-major operands); [`mma_ts`] the
//!   form with A in tensor memory.
//! - [`mma_sync`] holds the warp-level `mma.sync` fragments and numerics; [`ldmatrix`] the
//!   `ldmatrix`/`stmatrix` fragment layout.

mod error;
pub use error::UnitError;

pub mod descriptors;
pub mod ldmatrix;
pub mod mma;
pub mod mma_kinds;
pub mod mma_sync;
pub mod mma_ts;
pub mod numeric;
pub mod tensormap;
pub mod tmem;
pub mod tmem_cp;
pub mod tmem_shapes;
