//! Vector clocks and epochs (FastTrack, Flanagan & Freund, PLDI 2009): a clock per agent
//! dimension; an epoch is one agent's clock value, which is all a location needs to remember
//! of its last write.

/// A vector clock over dimensions `0..len()`; missing dimensions are 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Vc(Vec<u32>);

impl Vc {
    #[inline]
    pub fn get(&self, d: u32) -> u32 {
        self.0.get(d as usize).copied().unwrap_or(0)
    }

    pub fn set(&mut self, d: u32, v: u32) {
        let d = d as usize;
        if d >= self.0.len() {
            self.0.resize(d + 1, 0);
        }
        self.0[d] = v;
    }

    /// Raise dimension `d` to at least `v`.
    pub fn raise(&mut self, d: u32, v: u32) {
        if self.get(d) < v {
            self.set(d, v);
        }
    }

    /// Pointwise maximum with `o`.
    pub fn join(&mut self, o: &Vc) {
        if o.0.len() > self.0.len() {
            self.0.resize(o.0.len(), 0);
        }
        for (a, &b) in self.0.iter_mut().zip(&o.0) {
            if b > *a {
                *a = b;
            }
        }
    }

    #[inline]
    pub fn covers(&self, e: Epoch) -> bool {
        e.clock <= self.get(e.dim)
    }
}

/// One agent dimension's clock value, and the instruction (program counter) that made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Epoch {
    pub dim: u32,
    pub clock: u32,
    pub pc: u32,
}

impl Epoch {
    pub const NONE: Epoch = Epoch {
        dim: u32::MAX,
        clock: 0,
        pc: 0,
    };
    #[inline]
    pub fn is_none(self) -> bool {
        self.dim == u32::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_and_cover() {
        let mut a = Vc::default();
        a.set(2, 5);
        let mut b = Vc::default();
        b.set(0, 1);
        b.set(2, 3);
        a.join(&b);
        assert_eq!((a.get(0), a.get(1), a.get(2), a.get(9)), (1, 0, 5, 0));
        assert!(a.covers(Epoch {
            dim: 2,
            clock: 5,
            pc: 0
        }));
        assert!(!a.covers(Epoch {
            dim: 2,
            clock: 6,
            pc: 0
        }));
        assert!(!a.covers(Epoch {
            dim: 7,
            clock: 1,
            pc: 0
        }));
    }
}
