//! The scheduler's choices: a small seeded PRNG and the policies that decide which thread runs
//! next and when an asynchronous operation completes.

/// splitmix64 (Steele, Lea, Flood 2014): tiny, fast, and fine for choosing schedules.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}

/// How the scheduler interleaves threads and retires asynchronous operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// A random runnable thread runs a random number of instructions; a pending asynchronous
    /// operation completes with a fixed chance at each decision.
    Random,
    /// Probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010): threads get random
    /// priorities, the highest runnable one runs, and at `depth` random points the running
    /// thread drops to the lowest priority.
    Pct { depth: u32 },
    /// Asynchronous operations complete at the last legal moment: only when no thread can run.
    AsyncLate,
    /// Asynchronous operations complete as soon as they are issued.
    AsyncEarly,
}

impl std::str::FromStr for Policy {
    type Err = String;
    /// `random`, `pct` (depth 3) or `pctN`, `async-late`, `async-early`: as [`Policy::name`]
    /// prints them.
    fn from_str(s: &str) -> Result<Policy, String> {
        match s {
            "random" => Ok(Policy::Random),
            "async-late" => Ok(Policy::AsyncLate),
            "async-early" => Ok(Policy::AsyncEarly),
            "pct" => Ok(Policy::Pct { depth: 3 }),
            _ => match s.strip_prefix("pct").map(str::parse::<u32>) {
                Some(Ok(depth)) if (1..=64).contains(&depth) => Ok(Policy::Pct { depth }),
                _ => Err(format!(
                    "unknown schedule policy `{s}`: random, pct, pctN (N from 1 to 64), async-late or async-early"
                )),
            },
        }
    }
}

impl Policy {
    pub fn name(self) -> String {
        match self {
            Policy::Random => "random".into(),
            Policy::Pct { depth } => format!("pct{depth}"),
            Policy::AsyncLate => "async-late".into(),
            Policy::AsyncEarly => "async-early".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        let mut c = Rng::new(8);
        assert_ne!(Rng::new(7).next_u64(), c.next_u64());
    }

    #[test]
    fn policies_parse_as_they_print() {
        for p in [
            Policy::Random,
            Policy::Pct { depth: 5 },
            Policy::AsyncLate,
            Policy::AsyncEarly,
        ] {
            assert_eq!(p.name().parse::<Policy>(), Ok(p));
        }
        assert!("pct0".parse::<Policy>().is_err());
        assert!("fast".parse::<Policy>().is_err());
    }

    #[test]
    fn below_stays_below() {
        let mut r = Rng::new(1);
        let mut seen = [false; 5];
        for _ in 0..1000 {
            let v = r.below(5) as usize;
            assert!(v < 5);
            seen[v] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
