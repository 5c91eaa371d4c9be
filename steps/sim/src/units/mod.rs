//! Data semantics of the asynchronous units: tensor maps (TMA), tensor memory and the tcgen05
//! MMA, and the numeric conversions they need. Pure functions over byte slices.
