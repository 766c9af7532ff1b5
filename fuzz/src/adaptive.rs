//! The adaptive limiter's algorithms against their reference formulas, and the limiter's
//! invariants (issue 39).
//!
//! - **The algorithms** ([`Aimd`], [`Vegas`], [`Gradient`], [`Gradient2`]), each fed a run of
//!   random windows (empty ones included) from a random limit, are checked window by window
//!   against the formula each implements, written here plainly in `f64`: AIMD's
//!   `limit × ratio` or `limit + 1`; Vegas's queue `limit × (1 − no_load / rtt)` against its
//!   thresholds; the gradient's `limit × clamp((min_rtt + buffer) / rtt, 0.5, 2) + √(that)`;
//!   Gradient2's long-term average (plain, then exponential over 600 windows; a loaded window
//!   feeds at most the average) and `0.8 × limit + 0.2 × (limit × clamp(1.5 × long / rtt,
//!   0.5, 1) + 4)`. An empty window
//!   changes nothing; no input panics or overflows; the limit never reaches 0.
//! - **The limiter**, on a manual clock: random acquisitions, ends (success, drop, ignored)
//!   and clock steps. No grant takes the leases held past the limit of its instant, the limit
//!   stays within its bounds, and once every lease has ended the whole limit is free.

use core::time::Duration;

use tollgate::adaptive::{
    AdaptiveLease, AdaptiveLimiter, AdaptiveOptions, Aimd, Gradient, Gradient2, Vegas,
    WindowSummary,
};
use tollgate::ManualClock;

/// A scenario.
#[derive(Clone, Debug)]
pub struct Input {
    /// Which algorithm (0: AIMD, 1: Vegas, 2: gradient, 3: Gradient2).
    pub algorithm: u8,
    /// The starting limit: 1..=256 (scaled by `big`).
    pub limit: u32,
    /// Latencies and limits at the extremes of their types.
    pub big: bool,
    /// Windows: (samples, drops, min latency, mean latency, most in flight), each from 4 bytes.
    pub windows: Vec<[u8; 4]>,
}

impl Input {
    /// Reads a scenario from the fuzzer's bytes (never fails: missing bytes read as zeros).
    pub fn decode(data: &[u8]) -> Input {
        let mut bytes = data.iter().copied();
        let mut byte = || bytes.next().unwrap_or(0);
        let algorithm = byte() % 4;
        let limit = 1 + u32::from(byte());
        let big = byte() % 8 == 0;
        let windows = data
            .get(3..)
            .unwrap_or(&[])
            .chunks_exact(4)
            .map(|c| [c[0], c[1], c[2], c[3]])
            .collect();
        Input {
            algorithm,
            limit,
            big,
            windows,
        }
    }

    /// The bytes [`decode`](Self::decode) reads back as this scenario.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![
            self.algorithm,
            (self.limit - 1) as u8,
            if self.big { 0 } else { 1 },
        ];
        for w in &self.windows {
            v.extend(w);
        }
        v
    }

    /// The window of four bytes: a sample count, drops among them, a minimum latency and a
    /// mean at or above it, the most held at once.
    fn window(&self, w: [u8; 4], limit: u32) -> WindowSummary {
        let samples = u32::from(w[0] % 16);
        let unit = if self.big { u64::MAX / 300 } else { 1_000_000 };
        let min = (1 + u64::from(w[2] % 64)) * unit / 4;
        let mean = min.saturating_add(u64::from(w[3] % 64) * unit / 8);
        WindowSummary {
            samples,
            drops: if w[1] % 4 == 0 {
                u32::from(w[1] >> 2) % (samples + 1)
            } else {
                0
            },
            min_rtt_ns: if samples == 0 { 0 } else { min },
            avg_rtt_ns: if samples == 0 { 0 } else { mean },
            max_in_flight: (u64::from(limit) * u64::from(w[3]) / 128) as u32,
        }
    }
}

/// `|a − b| ≤ 1 + b · 1e−9`: an integer result against its `f64` formula (rounding).
fn close(a: u32, b: f64, at: &str) {
    assert!(
        (f64::from(a) - b).abs() <= 1.0 + b.abs() * 1e-9,
        "{at}: {a} against {b}"
    );
}

/// Checks one scenario.
pub fn check(input: &Input) {
    let start = if input.big {
        u32::MAX - 256 + input.limit
    } else {
        input.limit
    };
    let mut limit = start;
    match input.algorithm {
        0 => {
            let mut a = Aimd::new();
            for (i, &w) in input.windows.iter().enumerate() {
                let s = input.window(w, limit);
                let next = a.next_limit(limit, &s);
                let at = format!("AIMD window {i}: {s:?} from {limit}");
                let expected = if s.samples == 0 {
                    f64::from(limit)
                } else if s.drops > 0 || s.avg_rtt_ns > a.timeout_ns {
                    (f64::from(limit) * 0.9)
                        .floor()
                        .min(f64::from(limit) - 1.0)
                        .max(1.0)
                } else if 2.0 * f64::from(s.max_in_flight) >= f64::from(limit) {
                    (f64::from(limit) + 1.0).min(f64::from(u32::MAX))
                } else {
                    f64::from(limit)
                };
                close(next, expected, &at);
                assert!(next >= 1, "{at}");
                limit = next;
            }
        }
        1 => {
            // No re-measurement here (its probe is unit-tested): the formula alone.
            let mut v = Vegas::new().with_probe_every(0);
            let mut no_load = 0u64;
            for (i, &w) in input.windows.iter().enumerate() {
                let s = input.window(w, limit);
                let next = v.next_limit(limit, &s);
                let at = format!("Vegas window {i}: {s:?} from {limit}");
                if s.samples == 0 {
                    assert_eq!(next, limit, "{at}");
                } else if no_load == 0 {
                    // The first window measures; nothing changes.
                    no_load = s.min_rtt_ns;
                    assert_eq!((next, v.no_load_ns()), (limit, no_load), "{at}");
                } else {
                    no_load = no_load.min(s.min_rtt_ns);
                    assert_eq!(v.no_load_ns(), no_load, "{at}");
                    let step = f64::from(limit.max(1).ilog10().max(1));
                    let rtt = s.avg_rtt_ns.max(no_load) as f64;
                    let queue = (f64::from(limit) * (1.0 - no_load as f64 / rtt)).ceil();
                    let l = f64::from(limit);
                    let expected = if s.drops > 0 {
                        (l - step).max(1.0)
                    } else if queue <= step {
                        (l + 6.0 * step).min(f64::from(u32::MAX))
                    } else if queue < 3.0 * step {
                        (l + step).min(f64::from(u32::MAX))
                    } else if queue > 6.0 * step {
                        (l - step).max(1.0)
                    } else {
                        l
                    };
                    // The queue's rounding decides the branch at its boundaries: accept the
                    // integer code's answer if a queue within 1e-6 of the float's gives it.
                    if (f64::from(next) - expected).abs() > 1.0 {
                        let q = f64::from(limit) * (1.0 - no_load as f64 / rtt);
                        assert!(
                            (q - q.round()).abs() < 1e-6,
                            "{at}: {next} against {expected}"
                        );
                    }
                    assert!(next >= 1, "{at}");
                }
                limit = next;
            }
        }
        2 => {
            // A measurement every 4 windows, no jitter, at 3; the reference keeps the same
            // schedule.
            let mut g = Gradient::new().with_probes(4, 0, 3);
            let (mut probing, mut left, mut min) = (None::<u32>, 0u32, 0u64);
            for (i, &w) in input.windows.iter().enumerate() {
                let s = input.window(w, limit);
                let next = g.next_limit(limit, &s);
                let at = format!("gradient window {i}: {s:?} from {limit}");
                if let Some(resume) = probing {
                    if s.min_rtt_ns != 0 {
                        min = s.min_rtt_ns;
                    }
                    if min == 0 {
                        assert_eq!(next, limit, "{at}");
                    } else {
                        assert_eq!(next, resume, "{at}: the limit comes back");
                        probing = None;
                        left = 4;
                    }
                } else if s.samples == 0 {
                    assert_eq!(next, limit, "{at}");
                } else if min == 0 || left <= 1 {
                    assert_eq!(next, 3, "{at}: a measurement at 3");
                    probing = Some(limit);
                } else {
                    left -= 1;
                    let ratio = (min as f64 * 1.25 / s.avg_rtt_ns as f64).clamp(0.5, 2.0);
                    let scaled = (f64::from(limit) * ratio).floor();
                    let expected = (scaled + scaled.sqrt().floor()).min(f64::from(u32::MAX));
                    // Integer thousandths of the gradient, and the product and its root each
                    // rounded down: within 2 and a 500th of the limit.
                    let slack = 2.0 + f64::from(limit) / 500.0;
                    assert!(
                        (f64::from(next) - expected).abs() <= slack,
                        "{at}: {next} against {expected}"
                    );
                }
                assert_eq!(g.min_rtt_ns(), min, "{at}");
                limit = next;
            }
        }
        _ => gradient2(input, limit),
    }
    limiter(input);
}

/// Gradient2 against its formula, window by window: a measurement every 5 windows. The
/// long-term latency is checked against the reference's and then taken from the code (so that
/// rounding does not accumulate), as is the fraction of the limit it keeps.
fn gradient2(input: &Input, mut limit: u32) {
    let mut g = Gradient2::new().with_probe_every(5);
    let (mut probing, mut windows, mut warmed) = (None::<u32>, 0u32, 0u32);
    for (i, &w) in input.windows.iter().enumerate() {
        let s = input.window(w, limit);
        let (long, kept) = (g.long_rtt_ns() as f64, g.estimate_milli());
        let next = g.next_limit(limit, &s);
        let at = format!("gradient2 window {i}: {s:?} from {limit}");
        if s.samples == 0 {
            assert_eq!(next, limit, "{at}: an empty window changes nothing");
        } else if let Some(resume) = probing.take() {
            assert_eq!(next, resume, "{at}: the limit comes back");
            assert_eq!(g.long_rtt_ns(), s.min_rtt_ns, "{at}: measured unloaded");
        } else {
            let short = s.avg_rtt_ns as f64;
            let loaded = u64::from(s.max_in_flight) * 2 >= u64::from(limit);
            let fed = if loaded && long != 0.0 {
                short.min(long)
            } else {
                short
            };
            let averaged = if warmed < 10 {
                warmed += 1;
                (long * f64::from(warmed - 1) + fed) / f64::from(warmed)
            } else {
                (long * 599.0 + fed * 2.0) / 601.0
            };
            // Brought back by 5 % when more than twice the window's (either way within the
            // `f64` rounding of that boundary).
            let got = g.long_rtt_ns() as f64;
            let near = |x: f64| (got - x).abs() <= 2.0 + x * 1e-9;
            let cut = averaged / 20.0 * 19.0;
            if (averaged / 2.0 - short).abs() <= 2.0 + short * 1e-12 {
                assert!(
                    near(averaged) || near(cut),
                    "{at}: long {got} against {averaged}"
                );
            } else if averaged / 2.0 > short {
                assert!(near(cut), "{at}: long {got} against {cut}");
            } else {
                assert!(near(averaged), "{at}: long {got} against {averaged}");
            }
            windows += 1;
            if windows >= 5 {
                windows = 0;
                probing = Some(limit);
                assert_eq!(next, (limit / 4).max(1), "{at}: a measurement");
            } else if !loaded {
                assert_eq!(next, limit, "{at}: not loaded");
            } else {
                let estimate = if kept / 1_000 == u64::from(limit) {
                    kept as f64 / 1_000.0
                } else {
                    f64::from(limit)
                };
                let gradient = if s.drops > 0 {
                    0.5
                } else {
                    (1.5 * got / short).clamp(0.5, 1.0)
                };
                let target = estimate * gradient + 4.0;
                let expected = (estimate * 0.8 + target * 0.2).max(1.0).floor();
                // The code's gradient in millionths, its limit in thousandths.
                let expected = expected.min(f64::from(u32::MAX));
                assert!(
                    (f64::from(next) - expected).abs() <= 1.0 + estimate * 1e-6,
                    "{at}: {next} against {expected}"
                );
            }
        }
        assert!(next >= 1, "{at}");
        limit = next;
    }
}

/// The limiter's invariants over the scenario's bytes read as operations.
fn limiter(input: &Input) {
    let clock = ManualClock::new();
    let (min, max) = (1, 1 + input.limit % 32);
    let opts = AdaptiveOptions::new(max)
        .with_bounds(min, max)
        .with_window(Duration::from_millis(1), 2);
    let opts = match input.algorithm {
        0 => opts.with_algorithm(Aimd::new()),
        1 => opts.with_algorithm(Vegas::new().with_probe_every(8)),
        2 => opts.with_algorithm(Gradient::new().with_probes(6, 500, 1)),
        _ => opts.with_algorithm(Gradient2::new().with_probe_every(7)),
    };
    let l = AdaptiveLimiter::with_clock(opts, &clock).unwrap();
    let mut held: Vec<AdaptiveLease<'_>> = Vec::new();
    for &[a, b, c, d] in &input.windows {
        match a % 4 {
            0 | 1 => {
                if let Ok(lease) = l.try_acquire(1) {
                    held.push(lease);
                    assert!(
                        held.len() as u32 <= l.limit(),
                        "{} held over {}",
                        held.len(),
                        l.limit()
                    );
                }
            }
            2 if !held.is_empty() => {
                let mut lease = held.swap_remove(usize::from(b) % held.len());
                match c % 3 {
                    0 => lease.dropped(),
                    1 => lease.ignore(),
                    _ => {}
                }
            }
            _ => clock.advance(Duration::from_micros(u64::from(d) * 20)),
        }
        assert!((min..=max).contains(&l.limit()), "{}", l.limit());
    }
    held.clear();
    assert_eq!(l.available_permits(), u64::from(l.limit()));
}
