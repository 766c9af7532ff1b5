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
/// (the no-load latency) and the window's mean latency `rtt`, the estimated queue is
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

    /// The same rule growing while the queue is at most `alpha × log10(limit)` and shrinking
    /// past `beta × log10(limit)`.
    pub const fn with_thresholds(self, alpha: u32, beta: u32) -> Self {
        Self {
            alpha,
            beta,
            ..self
        }
    }

    /// The same rule measuring the no-load latency afresh every `windows` windows (0: never).
    pub const fn with_probe_every(self, windows: u32) -> Self {
        Self {
            probe_every: windows,
            ..self
        }
    }

    /// The no-load latency measured so far, in nanoseconds (0 before the first sample).
    pub const fn no_load_ns(&self) -> u64 {
        self.no_load_ns
    }

    /// The limit after a window summarized by `s`, from `limit` (unclamped).
    pub fn next_limit(&mut self, limit: u32, s: &WindowSummary) -> u32 {
        if s.is_empty() || s.min_rtt_ns == 0 || s.avg_rtt_ns == 0 {
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
        // Queue = limit × (1 − no_load / rtt), rounded up: exact in 128 bits. The mean, not
        // the window's minimum: the luckiest request of a window hardly queued at all.
        let rtt = u128::from(s.avg_rtt_ns.max(self.no_load_ns));
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

/// Envoy's gradient controller (its adaptive concurrency filter): the limit follows the
/// gradient `(min_rtt + buffer) / sample_rtt`, clamped to `[0.5, 2]`, plus a headroom of
/// `√limit`, where `sample_rtt` is the window's mean latency and `min_rtt` the latency
/// measured with the concurrency pinned low.
///
/// The minimum is measured every `probe_every` windows (plus a random delay of up to
/// `jitter_permille` of that, so that many instances do not probe together), in one window run
/// at `probe_limit`: the queue drains, and its shortest latency is the unloaded one. Between
/// probes it does not move, so it cannot creep up with the load; a probe window that holds no
/// sample keeps the previous minimum (it never becomes "infinite", which would cut every limit
/// to its floor), and the limit comes back as it was before the probe.
///
/// ```
/// use tollgate::adaptive::{Gradient, WindowSummary};
///
/// let ms = 1_000_000;
/// let mut g = Gradient::new();
/// let w = |rtt: u64, limit: u32| WindowSummary {
///     samples: 50, drops: 0, min_rtt_ns: rtt, avg_rtt_ns: rtt, max_in_flight: limit,
/// };
/// assert_eq!(g.next_limit(100, &w(10 * ms, 100)), 3); // first, measure min_rtt at 3
/// assert_eq!(g.next_limit(3, &w(10 * ms, 3)), 100); // 10 ms unloaded: back to 100
/// assert_eq!(g.min_rtt_ns(), 10 * ms);
/// // At 20 ms the gradient is 12.5 / 20: 100 × 0.625 + √62 = 69.
/// assert_eq!(g.next_limit(100, &w(20 * ms, 100)), 69);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gradient {
    /// The buffer added to the minimum latency, in thousandths of it. Default 250 (25 %).
    pub buffer_permille: u32,
    /// Windows between two measurements of the minimum latency. Default 600 (a minute of the
    /// default 100 ms windows).
    pub probe_every: u32,
    /// A random extra delay before each measurement, up to this many thousandths of
    /// `probe_every`. Default 150.
    pub jitter_permille: u32,
    /// The limit during a measurement. Default 3.
    pub probe_limit: u32,
    /// The unloaded latency (0: not measured yet).
    min_rtt_ns: u64,
    /// Windows until the next measurement.
    windows_left: u32,
    /// While a measurement runs: the limit to come back to.
    resume: Option<u32>,
    /// The jitter's generator (xorshift; never 0).
    seed: u64,
}

impl Default for Gradient {
    fn default() -> Self {
        Self::new()
    }
}

impl Gradient {
    /// Envoy's defaults: a 25 % buffer, a measurement every 600 windows with up to 15 % of
    /// jitter, at a limit of 3.
    pub const fn new() -> Self {
        Self {
            buffer_permille: 250,
            probe_every: 600,
            jitter_permille: 150,
            probe_limit: 3,
            min_rtt_ns: 0,
            windows_left: 0,
            resume: None,
            seed: 0x9E37_79B9_7F4A_7C15,
        }
    }

    /// The same controller with its jitter drawn from `seed` (each instance its own, so that
    /// they do not measure together; 0 is taken as 1).
    pub const fn with_seed(self, seed: u64) -> Self {
        Self {
            seed: if seed == 0 { 1 } else { seed },
            ..self
        }
    }

    /// The same controller with a buffer of `permille` thousandths of the minimum latency.
    pub const fn with_buffer_permille(self, permille: u32) -> Self {
        Self {
            buffer_permille: permille,
            ..self
        }
    }

    /// The same controller measuring the minimum every `windows` windows, plus a random delay
    /// of up to `jitter_permille` thousandths of that, at a limit of `probe_limit`.
    pub const fn with_probes(self, windows: u32, jitter_permille: u32, probe_limit: u32) -> Self {
        Self {
            probe_every: windows,
            jitter_permille,
            probe_limit,
            ..self
        }
    }

    /// The unloaded latency measured last, in nanoseconds (0 before the first measurement).
    pub const fn min_rtt_ns(&self) -> u64 {
        self.min_rtt_ns
    }

    /// Windows from one measurement to the next: `probe_every` and its jitter.
    fn next_interval(&mut self) -> u32 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let spread = u64::from(self.probe_every) * u64::from(self.jitter_permille) / 1_000;
        let extra = if spread == 0 {
            0
        } else {
            self.seed % (spread + 1)
        };
        self.probe_every.saturating_add(extra as u32).max(1)
    }

    /// The limit after a window summarized by `s`, from `limit` (unclamped).
    pub fn next_limit(&mut self, limit: u32, s: &WindowSummary) -> u32 {
        if let Some(resume) = self.resume {
            // The measurement window. With no sample in it, the last minimum stands (or, on
            // the first measurement, the next window measures again).
            if s.min_rtt_ns != 0 {
                self.min_rtt_ns = s.min_rtt_ns;
            }
            if self.min_rtt_ns == 0 {
                return limit;
            }
            self.resume = None;
            self.windows_left = self.next_interval();
            return resume;
        }
        if s.is_empty() || s.avg_rtt_ns == 0 {
            return limit;
        }
        if self.min_rtt_ns == 0 || self.windows_left <= 1 {
            self.resume = Some(limit);
            return self.probe_limit.max(1);
        }
        self.windows_left -= 1;
        let min = u128::from(self.min_rtt_ns);
        let target = min + min * u128::from(self.buffer_permille) / 1_000;
        let gradient = (target * 1_000 / u128::from(s.avg_rtt_ns)).clamp(500, 2_000);
        let scaled = u128::from(limit) * gradient / 1_000;
        let scaled = u64::try_from(scaled).unwrap_or(u64::MAX);
        u32::try_from(scaled.saturating_add(scaled.isqrt())).unwrap_or(u32::MAX)
    }
}

/// Netflix's `Gradient2Limit`: the limit follows the gradient `tolerance × long_rtt /
/// short_rtt`, clamped to `[0.5, 1]`, plus a queue allowance, smoothed. `short_rtt` is the
/// window's mean latency; `long_rtt` an exponential average of the windows' latencies over
/// `long_window` windows (a plain average over the first 10). It grows while latency stays
/// within `tolerance` of the long-term average, and shrinks, at most by half a window, once it
/// passes it. A window in which less than half the limit was held (the application asked for
/// less) moves the average but not the limit.
///
/// **Two changes from Netflix's**, both for the flaw its users reported, the limit creeping
/// up under sustained overload (the long-term average, fed the overloaded latencies, catches
/// up with them; the gradient returns to 1 and the limit grows by the queue allowance every
/// window, without bound):
/// - a **loaded** window (at least half the limit held) feeds the long-term average at most
///   its own value: under load the average can fall, never rise, so overload cannot pass for
///   normal; windows that are not loaded feed it as they are;
/// - so that a server that got slower for good is measured as it is now, the long-term
///   latency is measured afresh every `probe_every` windows, **unloaded**: one window at a
///   quarter of the limit (the queue drains), whose mean latency becomes the long-term one,
///   and the limit comes back as it was.
///
/// A window with a drop (a timeout, a 503) takes the gradient's floor, 0.5 (Netflix's ignores
/// drops). The limit is kept in thousandths between windows, so that a smoothed step below one
/// request still accumulates.
///
/// ```
/// use tollgate::adaptive::{Gradient2, WindowSummary};
///
/// let ms = 1_000_000;
/// let w = |rtt: u64, limit: u32| WindowSummary {
///     samples: 50, drops: 0, min_rtt_ns: rtt, avg_rtt_ns: rtt, max_in_flight: limit,
/// };
/// let mut g = Gradient2::new();
/// // Latency at the long-term average: gradient 1; + 4 queued, smoothed by 0.2: + 0.8.
/// assert_eq!(g.next_limit(100, &w(10 * ms, 100)), 100); // 100.8
/// assert_eq!(g.next_limit(100, &w(10 * ms, 100)), 101); // 101.6
/// assert_eq!(g.long_rtt_ns(), 10 * ms);
/// // Latency tripled: the gradient 1.5 × 10 / 30 = 0.5, smoothed: 101.6 × 0.9 + 0.8 = 92.2.
/// assert_eq!(g.next_limit(101, &w(30 * ms, 101)), 92);
/// assert_eq!(g.long_rtt_ns(), 10 * ms); // loaded: the overload does not feed the average
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gradient2 {
    /// Latency within this many thousandths of the long-term average counts as no queue.
    /// Default 1,500 (1.5×).
    pub tolerance_permille: u32,
    /// The weight of each window's new limit, in thousandths. Default 200 (0.2).
    pub smoothing_permille: u32,
    /// Requests allowed to queue: added to the gradient's limit each window. Default 4.
    pub queue_size: u32,
    /// Windows the long-term average spans. Default 600.
    pub long_window: u32,
    /// Windows between two unloaded measurements of the long-term latency (0: never).
    /// Default 1,000.
    pub probe_every: u32,
    /// The long-term latency (0: no window yet).
    long_rtt_ns: u64,
    /// Windows averaged so far, up to the warm-up's 10.
    warmed: u32,
    /// The limit as the algorithm last set it, in thousandths.
    estimate_milli: u64,
    /// Windows since the last measurement.
    windows: u32,
    /// While a measurement window runs: the limit to come back to.
    resume: Option<u32>,
}

impl Default for Gradient2 {
    fn default() -> Self {
        Self::new()
    }
}

/// Windows of plain average before the long-term latency becomes an exponential one
/// (Netflix's warm-up).
const WARM_UP: u32 = 10;

impl Gradient2 {
    /// Netflix's defaults: tolerance 1.5, smoothing 0.2, a queue of 4, a long-term average
    /// over 600 windows; an unloaded measurement every 1,000 windows.
    pub const fn new() -> Self {
        Self {
            tolerance_permille: 1_500,
            smoothing_permille: 200,
            queue_size: 4,
            long_window: 600,
            probe_every: 1_000,
            long_rtt_ns: 0,
            warmed: 0,
            estimate_milli: 0,
            windows: 0,
            resume: None,
        }
    }

    /// The same rule with a tolerance of `permille` thousandths (at least 1,000: a latency
    /// below the average is never a queue).
    pub const fn with_tolerance_permille(self, permille: u32) -> Self {
        Self {
            tolerance_permille: permille,
            ..self
        }
    }

    /// The same rule with each window's new limit weighted `permille` thousandths (1,000: no
    /// smoothing).
    pub const fn with_smoothing_permille(self, permille: u32) -> Self {
        Self {
            smoothing_permille: permille,
            ..self
        }
    }

    /// The same rule with a queue allowance of `requests`.
    pub const fn with_queue_size(self, requests: u32) -> Self {
        Self {
            queue_size: requests,
            ..self
        }
    }

    /// The same rule measuring the long-term latency unloaded every `windows` windows (0:
    /// never).
    pub const fn with_probe_every(self, windows: u32) -> Self {
        Self {
            probe_every: windows,
            ..self
        }
    }

    /// The long-term latency, in nanoseconds (0 before the first sample).
    pub const fn long_rtt_ns(&self) -> u64 {
        self.long_rtt_ns
    }

    /// The limit as the rule last set it, in thousandths (0 before the first window that
    /// moved it): the fraction a smoothed step keeps from one window to the next. It is used
    /// while the limit in force is its whole part; a limit clamped or set otherwise restarts
    /// it from that limit.
    pub const fn estimate_milli(&self) -> u64 {
        self.estimate_milli
    }

    /// Feeds one window's latency `short` to the long-term average (`loaded`: at most its
    /// own value), then brings an average more than twice the window's back by 5 % (Netflix's
    /// recovery after a long overload).
    fn feed(&mut self, short: u64, loaded: bool) {
        let long = self.long_rtt_ns;
        let fed = if loaded && long != 0 {
            short.min(long)
        } else {
            short
        };
        self.long_rtt_ns = if self.warmed < WARM_UP {
            // A plain average of the windows so far.
            let n = u128::from(self.warmed);
            self.warmed += 1;
            ((u128::from(long) * n + u128::from(fed)) / (n + 1)) as u64
        } else {
            // Exponential, with a factor of 2 / (window + 1).
            let span = u128::from(self.long_window) + 1;
            let (long, fed) = (u128::from(long), u128::from(fed));
            let next = (long * (span - 2) + fed * 2) / span;
            next as u64
        };
        if self.long_rtt_ns / 2 > short {
            self.long_rtt_ns -= self.long_rtt_ns / 20;
        }
    }

    /// The limit after a window summarized by `s`, from `limit` (unclamped).
    pub fn next_limit(&mut self, limit: u32, s: &WindowSummary) -> u32 {
        if s.is_empty() || s.avg_rtt_ns == 0 {
            return limit;
        }
        let short = s.avg_rtt_ns;
        if let Some(resume) = self.resume.take() {
            // The measurement window, run at a quarter of the limit: its shortest latency is
            // the long-term one now (its mean still holds leases granted before it, at the
            // full limit), and the limit comes back.
            self.long_rtt_ns = if s.min_rtt_ns != 0 {
                s.min_rtt_ns
            } else {
                short
            };
            return resume;
        }
        // The limit in thousandths: the remembered fraction while the limit is the one set.
        let milli = u64::from(limit) * 1_000;
        let estimate = if self.estimate_milli / 1_000 == u64::from(limit) {
            self.estimate_milli
        } else {
            milli
        };
        let loaded = u64::from(s.max_in_flight) * 2 >= u64::from(limit);
        self.feed(short, loaded);
        self.windows += 1;
        if self.probe_every != 0 && self.windows >= self.probe_every {
            self.windows = 0;
            self.resume = Some(limit);
            return (limit / 4).max(1);
        }
        if !loaded {
            self.estimate_milli = estimate;
            return limit;
        }
        // In millionths: a gradient in thousandths would move a large limit by its rounding.
        let gradient = if s.drops > 0 {
            500_000
        } else {
            let g = u128::from(self.tolerance_permille) * 1_000 * u128::from(self.long_rtt_ns)
                / u128::from(short);
            g.clamp(500_000, 1_000_000)
        };
        let scaled = (u128::from(estimate) * gradient / 1_000_000) as u64;
        let target = scaled + u64::from(self.queue_size) * 1_000;
        let weight = u64::from(self.smoothing_permille.min(1_000));
        let next = (estimate * (1_000 - weight) + target * weight) / 1_000;
        self.estimate_milli = next.max(1_000);
        u32::try_from(self.estimate_milli / 1_000).unwrap_or(u32::MAX)
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
    /// [`Gradient`].
    Gradient(Gradient),
    /// [`Gradient2`].
    Gradient2(Gradient2),
}

impl Algorithm {
    /// The next limit after a window summarized by `s` (unclamped).
    pub fn next_limit(&mut self, limit: u32, s: &WindowSummary) -> u32 {
        match self {
            Algorithm::Aimd(a) => a.next_limit(limit, s),
            Algorithm::Vegas(v) => v.next_limit(limit, s),
            Algorithm::Gradient(g) => g.next_limit(limit, s),
            Algorithm::Gradient2(g) => g.next_limit(limit, s),
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

impl From<Gradient> for Algorithm {
    fn from(g: Gradient) -> Self {
        Algorithm::Gradient(g)
    }
}

impl From<Gradient2> for Algorithm {
    fn from(g: Gradient2) -> Self {
        Algorithm::Gradient2(g)
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
        let mut g = Gradient2::new();
        assert_eq!(g.next_limit(17, &empty), 17);
        assert_eq!(g, Gradient2::new());
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
    fn gradient_measures_unloaded_then_follows_the_gradient_with_headroom() {
        let mut g = Gradient {
            jitter_permille: 0,
            probe_every: 3,
            ..Gradient::new()
        };
        assert_eq!(g.next_limit(100, &WindowSummary::default()), 100); // empty: nothing
        assert_eq!(g.next_limit(100, &window(50, 0, 10 * MS, 10 * MS, 100)), 3);
        assert_eq!(g.next_limit(3, &window(5, 0, 10 * MS, 10 * MS, 3)), 100);
        // At the buffer exactly (12.5 ms): gradient 1, + √100.
        assert_eq!(
            g.next_limit(100, &window(50, 0, 12 * MS, 12_500_000, 100)),
            110
        );
        // Far over: the gradient stops at 0.5.
        assert_eq!(g.next_limit(100, &window(50, 0, 90 * MS, 90 * MS, 100)), 57);
        // Third window: the next measurement, at 3; a window with no sample keeps 10 ms.
        assert_eq!(g.next_limit(57, &window(50, 0, 90 * MS, 90 * MS, 57)), 3);
        assert_eq!(g.next_limit(3, &WindowSummary::default()), 57);
        assert_eq!(g.min_rtt_ns(), 10 * MS);
        // Far under: at most doubled.
        assert_eq!(g.next_limit(57, &window(50, 0, MS, MS, 57)), 124);
    }

    /// The minimum stays what was measured unloaded while the load rises, so the limit under
    /// sustained overload falls to the gradient's fixed point and stays there.
    #[test]
    fn gradient_does_not_creep_up_under_sustained_overload() {
        let mut g = Gradient {
            jitter_permille: 0,
            ..Gradient::new()
        };
        g.next_limit(200, &window(50, 0, 10 * MS, 10 * MS, 200));
        let mut limit = g.next_limit(3, &window(5, 0, 10 * MS, 10 * MS, 3));
        for _ in 0..500 {
            // A server of capacity 50 at 10 ms: queueing past it.
            let rtt = 10 * MS * u64::from(limit.max(50)) / 50;
            limit = g.next_limit(limit, &window(50, 0, rtt, rtt, limit));
        }
        assert!((60..=80).contains(&limit), "{limit}");
    }

    #[test]
    fn gradient_jitter_spreads_measurements() {
        let mut a = Gradient::new().with_seed(1);
        let mut b = Gradient::new().with_seed(2);
        let (ia, ib): (std::vec::Vec<u32>, std::vec::Vec<u32>) = (0..8)
            .map(|_| (a.next_interval(), b.next_interval()))
            .unzip();
        assert!(
            ia.iter().chain(&ib).all(|&i| (600..=690).contains(&i)),
            "{ia:?} {ib:?}"
        );
        assert_ne!(ia, ib);
    }

    #[test]
    fn gradient2_grows_within_tolerance_and_shrinks_past_it() {
        let mut g = Gradient2::new().with_probe_every(0);
        // Warm-up: a plain average of the windows' latencies.
        for (rtt, avg) in [(10, 10), (20, 15), (30, 20)] {
            g.next_limit(10, &window(50, 0, MS, rtt * MS, 2)); // not loaded: fed as is
            assert_eq!(g.long_rtt_ns(), avg * MS);
        }
        // Not loaded (2 of 10 held): the limit stays.
        assert_eq!(g.next_limit(10, &window(50, 0, MS, 20 * MS, 2)), 10);
        // Within 1.5× of 20 ms: gradient 1; + 4 × 0.2 a window, kept in thousandths.
        let mut limit = 10;
        let mut seen = std::vec::Vec::new();
        for _ in 0..5 {
            limit = g.next_limit(limit, &window(50, 0, MS, 25 * MS, limit));
            seen.push(limit);
        }
        assert_eq!(seen, [10, 11, 12, 13, 14]); // 10.8, 11.6, 12.4, 13.2, 14.0
                                                // Four times the average: the gradient's floor, 0.5: 14 × 0.9 + 0.8 = 13.4.
        assert_eq!(g.next_limit(14, &window(50, 0, MS, 80 * MS, 14)), 13);
        // A drop takes the floor too, whatever the latency: 13.4 × 0.9 + 0.8 = 12.86.
        assert_eq!(g.next_limit(13, &window(50, 1, MS, 20 * MS, 13)), 12);
    }

    /// Netflix's reported flaw: fed the overloaded latencies, its long-term average catches up
    /// with them and the limit grows without bound. Here a loaded window never raises it.
    #[test]
    fn gradient2_does_not_creep_up_under_sustained_overload() {
        let mut g = Gradient2::new().with_probe_every(0);
        let mut limit = 50;
        for _ in 0..20 {
            limit = g.next_limit(limit, &window(50, 0, 10 * MS, 10 * MS, 10));
        }
        let calm = g.long_rtt_ns();
        let mut highest = 0;
        for _ in 0..5_000 {
            // A server of capacity 50 at 10 ms, queueing past it; demand always above.
            let rtt = 10 * MS * u64::from(limit.max(50)) / 50;
            limit = g.next_limit(limit, &window(50, 0, rtt, rtt, limit));
            highest = highest.max(limit);
        }
        assert!(g.long_rtt_ns() <= calm);
        // The fixed point of a tolerance of 1.5: latency 1.5× unloaded, 75 in flight.
        assert!(
            (70..=80).contains(&limit) && highest <= 90,
            "{limit} {highest}"
        );
    }

    /// Every `probe_every` windows, one window at a quarter of the limit measures the long-term
    /// latency unloaded: a server that got slower for good is then measured as it is now, and
    /// the limit comes back.
    #[test]
    fn gradient2_measures_a_slower_server_afresh() {
        let mut g = Gradient2::new().with_probe_every(50);
        let mut limit = 40;
        for _ in 0..20 {
            limit = g.next_limit(limit, &window(50, 0, 10 * MS, 10 * MS, limit));
        }
        // From now on 40 ms unloaded, whatever the load: the loaded windows cannot raise the
        // average, so the limit falls...
        let mut probe = None;
        for i in 0..60 {
            let next = g.next_limit(limit, &window(50, 0, 40 * MS, 40 * MS, limit));
            if next == (limit / 4).max(1) && g.resume.is_some() {
                probe = Some((i, limit));
                limit = next;
                break;
            }
            limit = next;
        }
        let (_, before) = probe.expect("a measurement window");
        // ...until the measurement: 40 ms is the long-term latency, the limit comes back.
        assert_eq!(
            g.next_limit(limit, &window(50, 0, 40 * MS, 40 * MS, limit)),
            before
        );
        assert_eq!(g.long_rtt_ns(), 40 * MS);
        // And grows again at that latency.
        assert!(g.next_limit(before + 1, &window(50, 0, 40 * MS, 40 * MS, before)) > before);
    }

    /// The limit the limiter clamped (or set) is the one the next step starts from: no windup
    /// of an estimate past the bounds.
    #[test]
    fn gradient2_resumes_from_the_limit_in_force() {
        let mut g = Gradient2::new().with_probe_every(0);
        for _ in 0..30 {
            g.next_limit(100, &window(50, 0, 10 * MS, 10 * MS, 100));
        }
        // Clamped to 20 by the limiter: 20 + 0.8.
        assert_eq!(g.next_limit(20, &window(50, 0, 10 * MS, 10 * MS, 20)), 20);
        assert_eq!(g.next_limit(20, &window(50, 0, 10 * MS, 10 * MS, 20)), 21);
        assert_eq!(g.next_limit(7, &WindowSummary::default()), 7);
    }

    #[test]
    fn log10_steps() {
        assert_eq!(
            [0, 1, 9, 10, 99, 100, 999, 1_000, u32::MAX].map(log10_at_least_1),
            [1, 1, 1, 1, 1, 2, 2, 3, 9]
        );
    }
}
