//! The proving mode: every distinct order of the scheduler's choices, enumerated depth first.

/// The scheduler's choices in the proving mode: a recorded prefix is replayed, and every new
/// choice point takes option 0 (the depth-first search moves the last one on by one).
#[derive(Debug, Clone, Default)]
pub struct Chooser {
    /// (options, chosen) of each choice point of this run, in order.
    pub points: Vec<(u32, u32)>,
    /// Choices to replay first.
    pub prefix: Vec<u32>,
}

impl Chooser {
    pub(crate) fn choose(&mut self, n: u64) -> u64 {
        let i = self.points.len();
        let c = self.prefix.get(i).copied().unwrap_or(0).min(n as u32 - 1);
        self.points.push((n as u32, c));
        u64::from(c)
    }
}
