//! Data semantics of the asynchronous units: tensor maps (TMA), tensor memory and the tcgen05
//! MMA, and the numeric conversions they need. Pure functions over byte slices.

mod error;
pub use error::UnitError;

pub mod descriptors;
pub mod mma;
pub mod numeric;
pub mod tensormap;
pub mod tmem;
