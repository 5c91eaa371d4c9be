//! Checks that watch execution through [`crate::observe::Observer`].

pub(crate) mod hb;
pub(crate) mod vector_clock;
