//! How sure a timing is: the paired per-round ratio of two contenders timed in the same rounds
//! of the one protocol ([`crate::timing::time_rounds`]), its median and a bootstrap 95 %
//! confidence interval, the verdict that interval allows ("faster", "same within noise",
//! "slower"), and the rule that decides when enough rounds have run ([`StopRule`]).
//!
//! Why paired: the GPU's state drifts from round to round (the SM clock under a power cap moved
//! between 1425 and 1980 MHz in one H100 bench), and both contenders of a round see the same
//! state. The ratio of their times in one round cancels most of that drift, so its spread is the
//! spread of the difference between them, not of the GPU.
//!
//! Why a percentile bootstrap of the median: the per-round ratios are not normal (a round that
//! meets a clock change has an outlier), and the median ignores outliers; resampling the rounds
//! with replacement and taking the 2.5th and 97.5th percentiles of the resampled medians gives
//! an interval without assuming a distribution. The resampling is seeded ([`SEED`]), so the same
//! times give the same interval.

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Bootstrap resamples per interval.
pub const RESAMPLES: usize = 2000;
/// Bootstrap resamples per interval while the adaptive rounds decide whether to go on: the
/// width only has to be told from the target, and the check runs while the GPU waits.
pub const STOP_RESAMPLES: usize = 500;
/// The bootstrap's seed: the same times always give the same interval.
pub const SEED: u64 = 0x5EED_0FC0_FF1D_E500;
/// The default target: the interval's half-width below 0.5 % of the median, narrow enough to
/// tell a 1-point difference from noise.
pub const DEFAULT_TARGET: f64 = 0.005;

/// What an interval says about a ratio of speeds (above 1: faster).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// The whole interval lies above 1.
    #[serde(rename = "faster")]
    Faster,
    /// The interval holds 1.
    #[serde(rename = "same within noise")]
    Same,
    /// The whole interval lies below 1.
    #[serde(rename = "slower")]
    Slower,
}

impl Verdict {
    /// From a 95 % interval of a speed ratio.
    pub fn from_interval(lo: f64, hi: f64) -> Verdict {
        if lo > 1.0 {
            Verdict::Faster
        } else if hi < 1.0 {
            Verdict::Slower
        } else {
            Verdict::Same
        }
    }

    /// As the results files and the table write it.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Same => "same within noise",
            Verdict::Slower => "slower",
        }
    }
}

/// A speed ratio measured over paired rounds: `base`'s time over `this`'s in each round, so
/// above 1 means `this` is faster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    /// The median of the per-round ratios.
    pub median: f64,
    /// The percentile bootstrap's 95 % interval of that median.
    pub ci95: [f64; 2],
    /// The rounds it comes from.
    pub rounds: usize,
    pub verdict: Verdict,
}

impl Ratio {
    /// The ratio of `base`'s time to `this`'s, round by round (the two slices are the same
    /// rounds, in order); None with fewer than 2 rounds, slices of different lengths, or a time
    /// that is not positive and finite.
    pub fn paired(base_us: &[f64], this_us: &[f64]) -> Option<Ratio> {
        Ratio::paired_with(base_us, this_us, RESAMPLES)
    }

    /// [`Ratio::paired`] with `resamples` bootstrap resamples.
    pub fn paired_with(base_us: &[f64], this_us: &[f64], resamples: usize) -> Option<Ratio> {
        let ratios = per_round(base_us, this_us)?;
        let (median, lo, hi) = bootstrap_median(&ratios, resamples, SEED);
        Some(Ratio {
            median,
            ci95: [lo, hi],
            rounds: ratios.len(),
            verdict: Verdict::from_interval(lo, hi),
        })
    }

    /// Half the interval's width, relative to the median (0.005: ±0.5 %).
    pub fn half_width(&self) -> f64 {
        (self.ci95[1] - self.ci95[0]) / 2.0 / self.median
    }

    /// `1.014 [1.009, 1.019]`.
    pub fn describe(&self) -> String {
        format!(
            "{:.3} [{:.3}, {:.3}]",
            self.median, self.ci95[0], self.ci95[1]
        )
    }
}

/// `base[i] / this[i]` for every round, if every time is usable.
pub fn per_round(base_us: &[f64], this_us: &[f64]) -> Option<Vec<f64>> {
    if base_us.len() != this_us.len() || base_us.len() < 2 {
        return None;
    }
    let ok = |t: &f64| t.is_finite() && *t > 0.0;
    if !base_us.iter().chain(this_us).all(ok) {
        return None;
    }
    Some(base_us.iter().zip(this_us).map(|(b, t)| b / t).collect())
}

/// splitmix64: a small seeded generator, so the intervals do not depend on a crate's choice of
/// algorithm.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (the multiply-shift map; its bias, below n / 2^64, is nothing here).
    fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next()) * n as u128) >> 64) as usize
    }
}

/// The median of `v` (reordered in place); NaN for none.
fn median_in_place(v: &mut [f64]) -> f64 {
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    let (left, upper, _) = v.select_nth_unstable_by(n / 2, |a, b| a.total_cmp(b));
    let upper = *upper;
    if n % 2 == 1 {
        upper
    } else {
        let lower = left.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lower + upper) / 2.0
    }
}

/// The `p`-quantile of sorted values, interpolating between neighbours.
fn quantile(sorted: &[f64], p: f64) -> f64 {
    let x = p * (sorted.len() - 1) as f64;
    let (lo, hi) = (x.floor() as usize, x.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (x - lo as f64)
}

/// The median of `values` and the percentile bootstrap's 95 % interval of it: `resamples`
/// times, draw as many values with replacement and take their median; the interval is the 2.5th
/// and 97.5th percentiles of those medians.
pub fn bootstrap_median(values: &[f64], resamples: usize, seed: u64) -> (f64, f64, f64) {
    let mut scratch = values.to_vec();
    let median = median_in_place(&mut scratch);
    if values.len() < 2 || resamples == 0 {
        return (median, median, median);
    }
    let mut rng = SplitMix(seed);
    let mut medians = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        for s in scratch.iter_mut() {
            *s = values[rng.below(values.len())];
        }
        medians.push(median_in_place(&mut scratch));
    }
    medians.sort_by(|a, b| a.total_cmp(b));
    (median, quantile(&medians, 0.025), quantile(&medians, 0.975))
}

/// When the adaptive protocol stops adding rounds: once every interval it watches is narrower
/// than `target` (relative half-width) after at least `min_rounds`, or at `cap` of timing, or at
/// `max_rounds`. The intervals are recomputed only every so often ([`StopRule::due`]): each
/// costs [`RESAMPLES`] medians per ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StopRule {
    pub target: f64,
    pub min_rounds: usize,
    pub max_rounds: usize,
    pub cap: Duration,
}

/// Why the rounds stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Every interval is narrower than the target.
    Narrow,
    /// The time cap came first.
    TimeCap,
    /// The round limit came first.
    MaxRounds,
}

impl StopRule {
    /// Whether the intervals are worth recomputing after `rounds` rounds, the last check having
    /// been after `checked`: from `min_rounds` on, then every 10 % more rounds (at least 10), so
    /// the checks cost little against the rounds.
    pub fn due(&self, rounds: usize, checked: usize) -> bool {
        rounds >= self.min_rounds
            && (checked < self.min_rounds || rounds >= checked + (checked / 10).max(10))
    }

    /// Whether to stop after `rounds` rounds and `elapsed` of timing, the widest interval now
    /// being `widest` (relative half-width; None: not recomputed this round).
    pub fn stop(&self, rounds: usize, elapsed: Duration, widest: Option<f64>) -> Option<Stop> {
        if rounds >= self.min_rounds && widest.is_some_and(|w| w < self.target) {
            Some(Stop::Narrow)
        } else if rounds >= self.max_rounds {
            Some(Stop::MaxRounds)
        } else if elapsed >= self.cap {
            Some(Stop::TimeCap)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Synthetic rounds: a drift every contender of a round shares (the clock: up to ±10 %),
    /// times each contender's own noise (about ±1 %, uniform), times its speed.
    fn rounds(n: usize, speed: f64, seed: u64) -> (Vec<f64>, Vec<f64>) {
        let mut rng = SplitMix(seed);
        let mut u = move || (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
        let mut base = Vec::new();
        let mut this = Vec::new();
        for _ in 0..n {
            let drift = 1.0 + 0.2 * (u() - 0.5);
            base.push(1000.0 * drift * (1.0 + 0.02 * (u() - 0.5)));
            this.push(1000.0 / speed * drift * (1.0 + 0.02 * (u() - 0.5)));
        }
        (base, this)
    }

    #[test]
    fn a_two_percent_difference_is_resolved_and_none_is_the_same() {
        let (base, this) = rounds(200, 1.02, 1);
        let r = Ratio::paired(&base, &this).unwrap();
        assert_eq!(r.verdict, Verdict::Faster, "{r:?}");
        assert!(r.ci95[0] < 1.02 && 1.02 < r.ci95[1], "{r:?}");
        assert!(r.half_width() < 0.005, "{r:?}");
        assert_eq!(r.rounds, 200);
        // The same times the other way round: slower, by the reciprocal.
        let s = Ratio::paired(&this, &base).unwrap();
        assert_eq!(s.verdict, Verdict::Slower, "{s:?}");
        assert!((s.median * r.median - 1.0).abs() < 0.002, "{s:?} {r:?}");
        // No difference: the interval holds 1, in about 95 % of runs (a 95 % interval misses
        // the truth once in twenty); never "slower" or "faster" by more than a hair.
        let runs: Vec<Ratio> = (100..140)
            .map(|seed| {
                let (base, this) = rounds(200, 1.0, seed);
                Ratio::paired(&base, &this).unwrap()
            })
            .collect();
        let same = runs.iter().filter(|r| r.verdict == Verdict::Same).count();
        assert!(same >= 34, "{same} of 40: {runs:?}");
        assert!(
            runs.iter().all(|r| (r.median - 1.0).abs() < 0.003),
            "{runs:?}"
        );
        // Unpaired medians could not tell 2 % inside a ±10 % drift from noise in 20 rounds;
        // paired, the drift cancels.
        let (base, this) = rounds(20, 1.02, 7);
        assert_eq!(
            Ratio::paired(&base, &this).unwrap().verdict,
            Verdict::Faster
        );
    }

    #[test]
    fn the_bootstrap_is_seeded_and_bounds_the_median() {
        let (base, this) = rounds(50, 1.01, 9);
        let a = Ratio::paired(&base, &this).unwrap();
        assert_eq!(
            a,
            Ratio::paired(&base, &this).unwrap(),
            "same times, same interval"
        );
        assert!(a.ci95[0] <= a.median && a.median <= a.ci95[1], "{a:?}");
        let v = [3.0, 1.0, 2.0, 4.0];
        assert_eq!(bootstrap_median(&v, 0, 1), (2.5, 2.5, 2.5));
        let (m, lo, hi) = bootstrap_median(&v, 500, 1);
        assert_eq!(m, 2.5);
        assert!(
            (1.0..=2.5).contains(&lo) && (2.5..=4.0).contains(&hi),
            "{lo} {hi}"
        );
        // Unusable times give no ratio.
        assert!(Ratio::paired(&[1.0], &[1.0]).is_none());
        assert!(Ratio::paired(&[1.0, 2.0], &[1.0]).is_none());
        assert!(Ratio::paired(&[1.0, 0.0], &[1.0, 1.0]).is_none());
        assert!(Ratio::paired(&[1.0, f64::NAN], &[1.0, 1.0]).is_none());
        assert_eq!(Verdict::from_interval(0.99, 1.01), Verdict::Same);
        assert_eq!(Verdict::from_interval(1.001, 1.01), Verdict::Faster);
        assert_eq!(Verdict::from_interval(0.9, 0.999), Verdict::Slower);
    }

    #[test]
    fn the_stop_rule_waits_for_a_narrow_interval_or_the_cap() {
        let rule = StopRule {
            target: 0.005,
            min_rounds: 20,
            max_rounds: 1000,
            cap: Duration::from_secs(60),
        };
        let s = Duration::from_secs;
        // Never before the minimum, however narrow.
        assert_eq!(rule.stop(10, s(1), Some(0.001)), None);
        assert_eq!(rule.stop(20, s(1), Some(0.001)), Some(Stop::Narrow));
        assert_eq!(rule.stop(20, s(1), Some(0.006)), None);
        assert_eq!(rule.stop(20, s(1), None), None);
        assert_eq!(rule.stop(300, s(60), Some(0.006)), Some(Stop::TimeCap));
        assert_eq!(rule.stop(1000, s(5), Some(0.006)), Some(Stop::MaxRounds));
        // Checks: at the minimum, then every 10 % more (at least 10 rounds).
        assert!(!rule.due(19, 0));
        assert!(rule.due(20, 0));
        assert!(!rule.due(29, 20) && rule.due(30, 20));
        assert!(!rule.due(219, 200) && rule.due(220, 200));
        // The synthetic 2 % difference: the rule stops it well before 1000 rounds.
        let (base, this) = rounds(1000, 1.02, 11);
        let mut checked = 0;
        let stopped = (1..=1000).find_map(|n| {
            let widest = rule.due(n, checked).then(|| {
                checked = n;
                Ratio::paired(&base[..n], &this[..n]).unwrap().half_width()
            });
            rule.stop(n, s(1), widest).map(|why| (n, why))
        });
        let (n, why) = stopped.unwrap();
        assert_eq!(why, Stop::Narrow);
        assert!((20..200).contains(&n), "{n}");
    }

    #[test]
    fn the_json_form_is_the_books() {
        let r = Ratio {
            median: 1.01,
            ci95: [1.005, 1.015],
            rounds: 120,
            verdict: Verdict::Same,
        };
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"median": 1.01, "ci95": [1.005, 1.015], "rounds": 120,
                               "verdict": "same within noise"})
        );
        let back: Ratio = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
        for w in [Verdict::Faster, Verdict::Same, Verdict::Slower] {
            assert_eq!(serde_json::to_value(w).unwrap(), w.word());
        }
        assert_eq!(r.describe(), "1.010 [1.005, 1.015]");
    }
}
