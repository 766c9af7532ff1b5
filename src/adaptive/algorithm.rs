//! How an adaptive limit moves: each algorithm is a pure function from the limit in force and
//! one window's [`WindowSummary`] (and its own remembered measurements) to the next limit, in
//! integer arithmetic (`no_std`, no floats: ratios are in thousandths).
//!
//! Every algorithm leaves the limit unchanged on an empty window (no sample says anything
//! about capacity), and the limiter clamps what it answers to its bounds.

/// What one window of finished leases says about the server: how many finished and how many of
/// those were dropped (overload: a timeout, a 503, an upstream refusal), their latencies, and
/// the most leases held at once while it lasted. Ignored leases (a client error) are not in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowSummary {
    /// Leases that ended in the window and count (successes and drops).
    pub samples: u32,
    /// Of those, the dropped ones.
    pub drops: u32,
    /// The shortest latency among them, in nanoseconds.
    pub min_rtt_ns: u64,
    /// Their mean latency, in nanoseconds.
    pub avg_rtt_ns: u64,
    /// The most leases held at once during the window.
    pub max_in_flight: u32,
}

impl WindowSummary {
    /// Whether the window holds no sample (an empty window changes no limit).
    pub const fn is_empty(&self) -> bool {
        self.samples == 0
    }
}

/// Additive increase, multiplicative decrease (TCP's, and Netflix's `AIMDLimit`): a window with
/// a drop, or whose mean latency passed the timeout, multiplies the limit by the backoff
/// ratio; a window without, in which the limit was actually used (at least half of it held
/// at once: an application that asks for less says nothing about capacity), adds
/// `increase_by`.
///
/// ```
/// use tollgate::adaptive::{Aimd, WindowSummary};
///
/// let mut aimd = Aimd::new();
/// let busy = WindowSummary { samples: 50, max_in_flight: 20, avg_rtt_ns: 1_000_000, ..Default::default() };
/// assert_eq!(aimd.next_limit(20, &busy), 21);
/// let dropped = WindowSummary { drops: 1, ..busy };
/// assert_eq!(aimd.next_limit(21, &dropped), 18); // 21 × 0.9, rounded down
/// let idle = WindowSummary { max_in_flight: 3, ..busy };
/// assert_eq!(aimd.next_limit(18, &idle), 18); // app-limited: no growth
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aimd {
    /// Added after a good window. Default 1.
    pub increase_by: u32,
    /// The limit is multiplied by this many thousandths after a bad window (below 1,000).
    /// Default 900 (× 0.9).
    pub backoff_permille: u32,
    /// A window whose mean latency passes this many nanoseconds counts as a drop. Default 5 s.
    pub timeout_ns: u64,
}

impl Default for Aimd {
    fn default() -> Self {
        Self::new()
    }
}

impl Aimd {
    /// The defaults: +1, × 0.9, a 5 s timeout.
    pub const fn new() -> Self {
        Self {
            increase_by: 1,
            backoff_permille: 900,
            timeout_ns: 5_000_000_000,
        }
    }

    /// The limit after a window summarized by `s`, from `limit` (unclamped: the limiter
    /// clamps it to its bounds).
    pub fn next_limit(&mut self, limit: u32, s: &WindowSummary) -> u32 {
        if s.is_empty() {
            return limit;
        }
        if s.drops > 0 || s.avg_rtt_ns > self.timeout_ns {
            // At least one less, while above 1: a backoff that rounds to no change is none.
            let cut = (u64::from(limit) * u64::from(self.backoff_permille.min(999)) / 1_000) as u32;
            return cut.min(limit.saturating_sub(1)).max(1);
        }
        if u64::from(s.max_in_flight) * 2 >= u64::from(limit) {
            return limit.saturating_add(self.increase_by);
        }
        limit
    }
}

/// TCP Vegas's delay-based rule (Netflix's `VegasLimit`): from the shortest latency ever seen
/// (the no-load latency) and the window's shortest, the estimated queue is
/// `limit × (1 − no_load / rtt)`; the limit grows while the queue is short and shrinks when it
/// is long, by steps of `log10(limit)`; a drop shrinks it at once. The no-load latency is the
/// minimum over every window, never an average, so sustained overload cannot pass for normal
/// (the limit cannot creep up under it). It is measured again every `probe_every` windows, so
/// that a server that got slower for good is measured as it is now, and measured **unloaded**:
/// the probe window runs at a quarter of the limit (the queue drains), its shortest latency
/// becomes the no-load one, and the limit comes back as it was. (A probe under full load would
/// take a queued latency for the no-load one, and the limit would creep up at every probe.)
///
/// ```
/// use tollgate::adaptive::{Vegas, WindowSummary};
///
/// let mut vegas = Vegas::new();
/// let ms = 1_000_000;
/// let calm = WindowSummary { samples: 100, min_rtt_ns: 10 * ms, avg_rtt_ns: 10 * ms, max_in_flight: 40, drops: 0 };
/// assert_eq!(vegas.next_limit(40, &calm), 40); // the first window measures no-load: 10 ms
/// assert!(vegas.next_limit(40, &calm) > 40); // no queue: grows
/// let queued = WindowSummary { min_rtt_ns: 20 * ms, avg_rtt_ns: 20 * ms, ..calm };
/// assert!(vegas.next_limit(40, &queued) < 40); // latency doubled: half the limit is queue
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vegas {
    /// Grow while the estimated queue is at most `alpha × log10(limit)`. Default 3.
    pub alpha: u32,
    /// Shrink once it passes `beta × log10(limit)`. Default 6.
    pub beta: u32,
    /// Windows between two measurements of the no-load latency (0: never again). Default 1,000.
    pub probe_every: u32,
    /// The no-load latency so far (0: not measured yet).
    no_load_ns: u64,
    /// Windows since it was last measured afresh.
    windows: u32,
    /// While a probe window runs: the limit to come back to after it.
    resume: Option<u32>,
}

impl Default for Vegas {
    fn default() -> Self {
        Self::new()
    }
}

/// `max(1, floor(log10(x)))` for the step sizes: 1 below 100.
const fn log10_at_least_1(x: u32) -> u32 {
    let log = if x == 0 { 0 } else { x.ilog10() };
    if log == 0 {
        1
    } else {
        log
    }
}

impl Vegas {
    /// The defaults: alpha 3, beta 6, a fresh no-load measurement every 1,000 windows.
    pub const fn new() -> Self {
        Self {
            alpha: 3,
            beta: 6,
            probe_every: 1_000,
            no_load_ns: 0,
            windows: 0,
            resume: None,
        }
    }

    /// The no-load latency measured so far, in nanoseconds (0 before the first sample).
    pub const fn no_load_ns(&self) -> u64 {
        self.no_load_ns
    }

    /// The limit after a window summarized by `s`, from `limit` (unclamped).
    pub fn next_limit(&mut self, limit: u32, s: &WindowSummary) -> u32 {
        if s.is_empty() || s.min_rtt_ns == 0 {
            return limit;
        }
        if let Some(resume) = self.resume.take() {
            // The probe window, run at a quarter of the limit: its minimum is the no-load
            // latency now, and the limit comes back.
            self.no_load_ns = s.min_rtt_ns;
            return resume;
        }
        if self.no_load_ns == 0 {
            // The first measurement: this window's own minimum, and no change of limit on it.
            self.no_load_ns = s.min_rtt_ns;
            return limit;
        }
        self.windows += 1;
        if self.probe_every != 0 && self.windows >= self.probe_every {
            self.windows = 0;
            self.resume = Some(limit);
            return (limit / 4).max(1);
        }
        self.no_load_ns = self.no_load_ns.min(s.min_rtt_ns);
        let step = log10_at_least_1(limit);
        if s.drops > 0 {
            return limit.saturating_sub(step).max(1);
        }
        // Queue = limit × (1 − no_load / rtt), rounded up: exact in 128 bits.
        let rtt = u128::from(s.min_rtt_ns);
        let queue = (u128::from(limit) * (rtt - u128::from(self.no_load_ns))).div_ceil(rtt);
        let queue = u32::try_from(queue).unwrap_or(u32::MAX);
        if queue <= step {
            // Hardly any queue: grow fast.
            limit.saturating_add(self.beta * step)
        } else if queue < self.alpha * step {
            limit.saturating_add(step)
        } else if queue > self.beta * step {
            limit.saturating_sub(step).max(1)
        } else {
            limit
        }
    }
}

/// One of the algorithms, as an [`AdaptiveLimiter`](super::AdaptiveLimiter) keeps it (no
/// allocation: an enum, not a trait object).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Algorithm {
    /// [`Aimd`].
    Aimd(Aimd),
    /// [`Vegas`].
    Vegas(Vegas),
}

impl Algorithm {
    /// The next limit after a window summarized by `s` (unclamped).
    pub fn next_limit(&mut self, limit: u32, s: &WindowSummary) -> u32 {
        match self {
            Algorithm::Aimd(a) => a.next_limit(limit, s),
            Algorithm::Vegas(v) => v.next_limit(limit, s),
        }
    }
}

impl From<Aimd> for Algorithm {
    fn from(a: Aimd) -> Self {
        Algorithm::Aimd(a)
    }
}

impl From<Vegas> for Algorithm {
    fn from(v: Vegas) -> Self {
        Algorithm::Vegas(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn window(samples: u32, drops: u32, min: u64, avg: u64, in_flight: u32) -> WindowSummary {
        WindowSummary {
            samples,
            drops,
            min_rtt_ns: min,
            avg_rtt_ns: avg,
            max_in_flight: in_flight,
        }
    }

    #[test]
    fn an_empty_window_changes_no_limit() {
        let empty = WindowSummary::default();
        assert_eq!(Aimd::new().next_limit(17, &empty), 17);
        let mut v = Vegas::new();
        assert_eq!(v.next_limit(17, &empty), 17);
        assert_eq!(v.no_load_ns(), 0); // and measures nothing
    }

    #[test]
    fn aimd_adds_when_used_and_multiplies_down_on_drops_and_timeouts() {
        let mut a = Aimd::new();
        assert_eq!(a.next_limit(10, &window(10, 0, MS, MS, 5)), 11);
        assert_eq!(a.next_limit(10, &window(10, 0, MS, MS, 4)), 10); // under half used
        assert_eq!(a.next_limit(100, &window(10, 1, MS, MS, 100)), 90);
        assert_eq!(a.next_limit(100, &window(10, 0, MS, 6_000 * MS, 100)), 90); // timeout
        assert_eq!(a.next_limit(5, &window(10, 1, MS, MS, 5)), 4); // 4.5: down, not stuck
        assert_eq!(a.next_limit(1, &window(10, 1, MS, MS, 1)), 1); // never 0
        assert_eq!(
            a.next_limit(u32::MAX, &window(1, 0, MS, MS, u32::MAX)),
            u32::MAX
        );
    }

    #[test]
    fn vegas_grows_without_queue_shrinks_with_one_and_on_drops() {
        let mut v = Vegas::new();
        // The first window measures the no-load latency and changes nothing.
        assert_eq!(
            v.next_limit(100, &window(50, 0, 10 * MS, 10 * MS, 100)),
            100
        );
        assert_eq!(v.no_load_ns(), 10 * MS);
        // No queue (latency at no-load): + beta × log10(100) = 12.
        assert_eq!(
            v.next_limit(100, &window(50, 0, 10 * MS, 10 * MS, 100)),
            112
        );
        // A queue of 100 × (1 − 10/11) = 9.09 → 10: above alpha × 2 = 6, at most beta × 2 =
        // 12: unchanged.
        assert_eq!(
            v.next_limit(100, &window(50, 0, 11 * MS, 11 * MS, 100)),
            100
        );
        // Latency doubled: a queue of 50, past 12: − 2.
        assert_eq!(v.next_limit(100, &window(50, 0, 20 * MS, 20 * MS, 100)), 98);
        // A queue of 5 (alpha × 2 = 6 above it): + 2.
        assert_eq!(
            v.next_limit(100, &window(50, 0, 10_500_000, 10_500_000, 100)),
            102
        );
        // A drop: − 2 at once.
        assert_eq!(v.next_limit(100, &window(50, 1, 10 * MS, 10 * MS, 100)), 98);
    }

    /// Under sustained overload the no-load latency stays the minimum ever seen: the limit
    /// keeps falling instead of creeping back up as an average of the overload would let it.
    #[test]
    fn vegas_does_not_creep_up_under_sustained_overload() {
        let mut v = Vegas::new();
        let mut limit = v.next_limit(200, &window(50, 0, 10 * MS, 10 * MS, 200));
        for _ in 0..200 {
            // Latency stuck at three times no-load, whatever the limit.
            let next = v.next_limit(limit, &window(50, 0, 30 * MS, 30 * MS, limit));
            assert!(next <= limit, "{next} > {limit}");
            limit = next;
        }
        assert!(limit < 20, "{limit}");
    }

    #[test]
    fn vegas_measures_no_load_again_unloaded_after_its_probe_interval() {
        let mut v = Vegas {
            probe_every: 3,
            ..Vegas::new()
        };
        v.next_limit(50, &window(10, 0, 10 * MS, 10 * MS, 50));
        assert_eq!(v.no_load_ns(), 10 * MS);
        // The server got slower for good: 40 ms unloaded, 80 ms at this load.
        let mut limit = 50;
        for _ in 0..2 {
            limit = v.next_limit(limit, &window(10, 0, 80 * MS, 80 * MS, limit));
        }
        assert_eq!((v.no_load_ns(), limit), (10 * MS, 48)); // − log10(50) twice
                                                            // The third window starts a probe at a quarter of the limit...
        assert_eq!(
            v.next_limit(limit, &window(10, 0, 80 * MS, 80 * MS, limit)),
            12
        );
        // ...whose unloaded minimum is the new no-load latency; the limit comes back.
        assert_eq!(v.next_limit(12, &window(10, 0, 40 * MS, 40 * MS, 12)), 48);
        assert_eq!(v.no_load_ns(), 40 * MS);
    }

    #[test]
    fn log10_steps() {
        assert_eq!(
            [0, 1, 9, 10, 99, 100, 999, 1_000, u32::MAX].map(log10_at_least_1),
            [1, 1, 1, 1, 1, 2, 2, 3, 9]
        );
    }
}
