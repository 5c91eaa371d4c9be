//! The verdict rule: when the book may call one of our kernels "faster" or "slower" than
//! another. A 95 % interval from the rounds of one run measures that run's noise, not the
//! machine's drift from run to run, and not the spread between GPUs: the two committed H100
//! benches disagree far beyond their intervals at 8192³ (review finding S11). So a verdict needs
//! the effect to repeat:
//!
//! - **faster** (or **slower**): the paired interval lies wholly above (below) 1 in at least two
//!   independent committed runs (another day or another GPU), the effect in each of them is at
//!   least the practical threshold ([`threshold`]), and no committed run measured it the other
//!   way (a point estimate on the other side of 1);
//! - **faster in one run, not yet repeated**: one run's own evidence clears 1 by the threshold
//!   (its paired interval, or, in files written before the intervals, the difference of the
//!   medians beyond the wider interquartile range), and no other run could test it (no other
//!   run recorded an interval for this pair) or measured it the other way;
//! - anything else is **the same within run-to-run variation**, printed with the spread of the
//!   point estimates between runs.
//!
//! Pure: the callers gather one [`Evidence`] per committed run (`claims`).

use std::collections::BTreeSet;

/// The least effect that counts, whatever the runs say: 1 %.
pub const FLOOR: f64 = 0.01;

/// What the committed runs say about kernel A against kernel B.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    Faster,
    Same,
    Slower,
    /// One run cleared 1 upwards by the threshold; no second run has tested it.
    FasterOnce,
    /// One run cleared 1 downwards by the threshold; no second run has tested it.
    SlowerOnce,
}

impl Call {
    /// The words of a `{{#claim ... CALL}}` marker.
    pub fn parse(s: &str) -> Option<Call> {
        Some(match s {
            "faster" => Call::Faster,
            "same" => Call::Same,
            "slower" => Call::Slower,
            "faster-once" => Call::FasterOnce,
            "slower-once" => Call::SlowerOnce,
            _ => return None,
        })
    }

    /// The marker word.
    pub fn tag(self) -> &'static str {
        match self {
            Call::Faster => "faster",
            Call::Same => "same",
            Call::Slower => "slower",
            Call::FasterOnce => "faster-once",
            Call::SlowerOnce => "slower-once",
        }
    }

    /// The words the book prints.
    pub fn words(self) -> &'static str {
        match self {
            Call::Faster => "faster",
            Call::Same => "the same within run-to-run variation",
            Call::Slower => "slower",
            Call::FasterOnce => "faster in one run, not yet repeated",
            Call::SlowerOnce => "slower in one run, not yet repeated",
        }
    }

    /// +1 faster, -1 slower, 0 the same.
    pub fn sign(self) -> i8 {
        match self {
            Call::Faster | Call::FasterOnce => 1,
            Call::Slower | Call::SlowerOnce => -1,
            Call::Same => 0,
        }
    }
}

/// A run's own evidence about the ratio.
#[derive(Debug, Clone, PartialEq)]
pub enum Within {
    /// The percentile bootstrap's 95 % interval of the paired per-round ratio's median.
    Interval { lo: f64, hi: f64, rounds: usize },
    /// No paired rounds recorded (files written before them): the wider of the two kernels'
    /// interquartile ranges over its median.
    Spread(f64),
}

/// One committed run's measurement of kernel A against kernel B.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    /// The results file, under `assets/results/`.
    pub file: String,
    pub gpu: String,
    pub date: String,
    pub commit: String,
    /// B's time over A's (above 1: A is faster): the median of the paired per-round ratios where
    /// the run recorded them, else the ratio of the two medians.
    pub point: f64,
    pub within: Within,
    /// Whether the adaptive rounds stopped at their time cap before the target interval.
    pub cap_hit: bool,
}

impl Evidence {
    /// Which way this run's own evidence clears 1 with an effect of at least `t`: +1, -1 or 0.
    pub fn clears(&self, t: f64) -> i8 {
        let effect = self.point - 1.0;
        if effect.abs() < t {
            return 0;
        }
        let dir = match self.within {
            Within::Interval { lo, hi, .. } => {
                if lo > 1.0 {
                    1
                } else if hi < 1.0 {
                    -1
                } else {
                    0
                }
            }
            Within::Spread(s) => {
                if effect.abs() > s {
                    if effect > 0.0 {
                        1
                    } else {
                        -1
                    }
                } else {
                    0
                }
            }
        };
        // An interval that clears one way while its median lies the other cannot happen with a
        // percentile bootstrap; a hand-made file could say so, and then the run says nothing.
        if dir as f64 * effect > 0.0 {
            dir
        } else {
            0
        }
    }

    fn paired(&self) -> bool {
        matches!(self.within, Within::Interval { .. })
    }

    /// Runs on the same GPU model on the same day are one run for the rule.
    fn run(&self) -> (&str, &str) {
        (&self.gpu, &self.date)
    }
}

/// The rule's answer, with what it rests on.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub call: Call,
    /// The practical threshold applied (0.01: 1 %).
    pub threshold: f64,
    /// The independent runs (GPU and day) that measured the pair.
    pub runs: usize,
    /// The independent runs whose paired interval cleared 1 the way of the call, by the
    /// threshold.
    pub confirming: usize,
    /// The lowest and highest point estimate over the runs: the run-to-run spread.
    pub low: f64,
    pub high: f64,
}

impl Decision {
    /// The spread between runs, in points of the ratio (0.109: 10.9 points), where two or more
    /// runs measured the pair.
    pub fn spread(&self) -> Option<f64> {
        (self.runs >= 2).then_some(self.high - self.low)
    }
}

/// The call the committed runs `ev` allow with practical threshold `t` (see the module).
pub fn decide(ev: &[Evidence], t: f64) -> Decision {
    let runs: BTreeSet<(&str, &str)> = ev.iter().map(Evidence::run).collect();
    let low = ev.iter().map(|e| e.point).fold(f64::INFINITY, f64::min);
    let high = ev.iter().map(|e| e.point).fold(f64::NEG_INFINITY, f64::max);
    let mut call = Call::Same;
    let mut confirming = 0;
    for dir in [1i8, -1] {
        // A run that measured it the other way (or exactly even) vetoes the direction.
        let vetoed = ev.iter().any(|e| dir as f64 * (e.point - 1.0) <= 0.0);
        if vetoed {
            continue;
        }
        let paired_clear: BTreeSet<(&str, &str)> = ev
            .iter()
            .filter(|e| e.paired() && e.clears(t) == dir)
            .map(Evidence::run)
            .collect();
        let any_clear: BTreeSet<(&str, &str)> = ev
            .iter()
            .filter(|e| e.clears(t) == dir)
            .map(Evidence::run)
            .collect();
        // Runs with an interval for this pair that did not clear it: a repeat that failed.
        let failed_repeat = ev
            .iter()
            .any(|e| e.paired() && e.clears(t) != dir && !any_clear.contains(&e.run()));
        if failed_repeat {
            continue;
        }
        if paired_clear.len() >= 2 {
            call = if dir > 0 { Call::Faster } else { Call::Slower };
            confirming = paired_clear.len();
        } else if !any_clear.is_empty() {
            // Cleared, but not in two runs with paired intervals: no second run has tested it.
            call = if dir > 0 {
                Call::FasterOnce
            } else {
                Call::SlowerOnce
            };
            confirming = paired_clear.len();
        }
    }
    Decision {
        call,
        threshold: t,
        runs: runs.len(),
        confirming,
        low,
        high,
    }
}

/// The practical threshold from the run-to-run spreads `spreads` (each the highest minus the
/// lowest point estimate of one pair over runs on the same GPU model): the median of them, or
/// [`FLOOR`] where that is smaller or there are none. Returns (threshold, median spread).
pub fn threshold(spreads: &[f64]) -> (f64, Option<f64>) {
    let mut v: Vec<f64> = spreads.iter().copied().filter(|s| s.is_finite()).collect();
    if v.is_empty() {
        return (FLOOR, None);
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    (FLOOR.max(median), Some(median))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(gpu: &str, date: &str, point: f64, ci: Option<(f64, f64)>) -> Evidence {
        Evidence {
            file: format!("bench-{gpu}-{date}.json"),
            gpu: gpu.into(),
            date: date.into(),
            commit: "c".into(),
            point,
            within: match ci {
                Some((lo, hi)) => Within::Interval {
                    lo,
                    hi,
                    rounds: 100,
                },
                None => Within::Spread(0.02),
            },
            cap_hit: false,
        }
    }

    #[test]
    fn two_independent_runs_that_clear_by_the_threshold_are_needed() {
        let a = run("H100", "2026-11-26", 1.059, Some((1.057, 1.060)));
        // One run alone: not yet repeated.
        assert_eq!(
            decide(std::slice::from_ref(&a), FLOOR).call,
            Call::FasterOnce
        );
        // The same GPU on another day: faster.
        let b = run("H100", "2026-11-27", 1.052, Some((1.049, 1.055)));
        let d = decide(&[a.clone(), b.clone()], FLOOR);
        assert_eq!(d.call, Call::Faster);
        assert_eq!((d.runs, d.confirming), (2, 2));
        assert!((d.spread().unwrap() - 0.007).abs() < 1e-9, "{d:?}");
        // Another GPU on the same day: faster too.
        let c = run("H200", "2026-11-26", 1.04, Some((1.03, 1.05)));
        assert_eq!(decide(&[a.clone(), c], FLOOR).call, Call::Faster);
        // The same GPU on the same day twice is one run.
        let again = run("H100", "2026-11-26", 1.06, Some((1.05, 1.07)));
        let d = decide(&[a.clone(), again], FLOOR);
        assert_eq!((d.call, d.runs), (Call::FasterOnce, 1));
        // Slower is symmetric.
        let s1 = run("H100", "2026-11-26", 0.75, Some((0.745, 0.753)));
        let s2 = run("H200", "2026-11-28", 0.72, Some((0.71, 0.73)));
        assert_eq!(decide(&[s1.clone(), s2], FLOOR).call, Call::Slower);
        assert_eq!(decide(&[s1], FLOOR).call, Call::SlowerOnce);
    }

    #[test]
    fn an_effect_below_the_threshold_is_the_same_however_narrow() {
        // 400.1 over 400.0 µs with a hair-thin interval, twice: the same.
        let a = run("H100", "2026-11-26", 1.004, Some((1.004, 1.004)));
        let b = run("H200", "2026-11-28", 1.003, Some((1.002, 1.004)));
        assert_eq!(decide(&[a.clone(), b.clone()], FLOOR).call, Call::Same);
        assert_eq!(decide(&[a], FLOOR).call, Call::Same);
        // A measured threshold above the floor raises the bar: 1.5 % clears 1 % but not 2 %.
        let c = run("H100", "2026-11-26", 1.015, Some((1.012, 1.018)));
        let d = run("H200", "2026-11-28", 1.016, Some((1.013, 1.019)));
        assert_eq!(decide(&[c.clone(), d.clone()], FLOOR).call, Call::Faster);
        assert_eq!(decide(&[c, d], 0.02).call, Call::Same);
    }

    #[test]
    fn a_run_the_other_way_or_a_failed_repeat_makes_it_the_same() {
        // S11's step 3 over step 2 at 8192³ f16: +22 % in one run, -0.2 % in the other.
        let bad = run("H100", "2026-11-26", 1.221, Some((1.209, 1.234)));
        let other = run("H100", "2026-11-25", 0.998, None);
        let d = decide(&[bad.clone(), other], FLOOR);
        assert_eq!(d.call, Call::Same);
        assert!((d.spread().unwrap() - 0.223).abs() < 1e-9, "{d:?}");
        // A repeat with an interval that does not clear: the same.
        let flat = run("H200", "2026-11-28", 1.004, Some((0.995, 1.012)));
        assert_eq!(decide(&[bad.clone(), flat.clone()], FLOOR).call, Call::Same);
        // Two that clear and a third with an interval that does not: the same.
        let good = run("H100", "2026-11-27", 1.2, Some((1.19, 1.21)));
        assert_eq!(
            decide(&[bad.clone(), good.clone()], FLOOR).call,
            Call::Faster
        );
        assert_eq!(decide(&[bad.clone(), good, flat], FLOOR).call, Call::Same);
        // A run without an interval that agrees cannot test it: once.
        let agrees = run("H100", "2026-11-25", 1.15, None);
        assert_eq!(decide(&[bad, agrees], FLOOR).call, Call::FasterOnce);
    }

    #[test]
    fn a_run_without_intervals_clears_only_beyond_its_spread() {
        // 2 % spread: +1.5 % does not clear, +3 % does (once).
        assert_eq!(
            decide(&[run("H100", "d", 1.015, None)], FLOOR).call,
            Call::Same
        );
        assert_eq!(
            decide(&[run("H100", "d", 1.03, None)], FLOOR).call,
            Call::FasterOnce
        );
        // Two such runs never make "faster": a verdict needs paired intervals.
        let d = decide(
            &[run("H100", "d1", 1.05, None), run("H100", "d2", 1.05, None)],
            FLOOR,
        );
        assert_eq!(d.call, Call::FasterOnce);
        // A run without an interval that clears, beside one with an interval that clears: not
        // two paired runs, so once.
        let d = decide(
            &[
                run("H100", "d1", 1.05, None),
                run("H100", "d2", 1.05, Some((1.04, 1.06))),
            ],
            FLOOR,
        );
        assert_eq!((d.call, d.confirming), (Call::FasterOnce, 1));
    }

    #[test]
    fn the_threshold_is_the_median_spread_or_the_floor() {
        assert_eq!(threshold(&[]), (FLOOR, None));
        assert_eq!(threshold(&[0.001, 0.007, 0.2]), (FLOOR, Some(0.007)));
        let (t, m) = threshold(&[0.01, 0.02, 0.03, 0.5]);
        assert!((t - 0.025).abs() < 1e-12 && m == Some(t), "{t} {m:?}");
    }

    #[test]
    fn calls_parse_from_their_tags() {
        for c in [
            Call::Faster,
            Call::Same,
            Call::Slower,
            Call::FasterOnce,
            Call::SlowerOnce,
        ] {
            assert_eq!(Call::parse(c.tag()), Some(c));
        }
        assert_eq!(Call::parse("quicker"), None);
    }
}
