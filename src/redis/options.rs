use core::fmt;
use core::time::Duration;

use ::redis::Script;

use super::scripts::{self, Kind};
#[cfg(doc)]
use super::RedisLimiter;
use crate::options::OptionsError;
use crate::partition::PartitionKind;
use crate::{
    FixedWindowOptions, GcraOptions, LeakyBucketOptions, SlidingCounterOptions,
    SlidingWindowOptions, TokenBucketOptions,
};

/// The most segments a Redis sliding window may have (each decision reads them all).
///
/// ```
/// # use tollgate::redis::doc_support::*;
/// use tollgate::{OptionsError, SlidingWindowOptions};
/// let fine = SlidingWindowOptions::new(100, Duration::from_secs(60), MAX_SEGMENTS + 1);
/// let err = RedisLimiter::builder(Down, "api", Algorithm::SlidingWindow(fine), FailurePolicy::FailOpen).build();
/// assert_eq!(err.unwrap_err(), RedisConfigError::Options(OptionsError::TooManySegments { max: 1024 }));
/// let ok = SlidingWindowOptions::new(100, Duration::from_secs(60), 60); // one segment a second
/// assert!(RedisLimiter::builder(Down, "api", Algorithm::SlidingWindow(ok), FailurePolicy::FailOpen).build().is_ok());
/// ```
pub const MAX_SEGMENTS: u32 = 1024;

/// The longest span a Redis limiter may have: 2^50 µs (about 35.7 years). The span is the time
/// an idle limiter takes to forget everything, which bounds every TTL and RetryAfter: for a
/// token bucket the time to refill from empty (`ceil(token_limit / tokens_per_period)` periods),
/// for a window the window, for GCRA `burst × interval`. The bound keeps every instant
/// the scripts compute exact in a Lua double (below 2^53 µs) for the next 150 years; longer
/// options are refused with [`RedisConfigError::SpanTooLong`].
///
/// ```
/// # use tollgate::redis::doc_support::*;
/// // A bucket of u32::MAX tokens, one a day: 11.7 million years to refill.
/// let slow = TokenBucketOptions::new(u32::MAX, 1, Duration::from_secs(86_400));
/// let err = RedisLimiter::builder(Down, "api", Algorithm::TokenBucket(slow), FailurePolicy::FailOpen).build();
/// assert_eq!(err.unwrap_err(), RedisConfigError::SpanTooLong);
/// let gcra = GcraOptions::with_period(MAX_SPAN / 2).with_burst(2); // exactly MAX_SPAN
/// assert!(RedisLimiter::builder(Down, "api", Algorithm::Gcra(gcra), FailurePolicy::FailOpen).build().is_ok());
/// ```
pub const MAX_SPAN: Duration = Duration::from_micros(MAX_SPAN_US);

pub(super) const MAX_SPAN_US: u64 = 1 << 50;

/// The largest `permit_limit × window` (in µs) of a Redis sliding counter: 2^52, so that the
/// script's exact comparison `prev · (W - into) + (cur + n) · W ≤ limit · W` never leaves a
/// double's exact integers, nor its settle's, whose counts reach twice the limit (a debt: the
/// products at most 2^53); a window of one minute allows 75 million permits, an hour 1.25
/// million, a day 52,000.
pub(super) const MAX_COUNTER_PRODUCT: u128 = 1 << 52;

/// The algorithm of a [`RedisLimiter`] and its options (the local limiters' options types).
///
/// ```
/// # use tollgate::redis::doc_support::*;
/// let algorithms = [
///     Algorithm::TokenBucket(TokenBucketOptions::new(20, 10, Duration::from_secs(1))),
///     Algorithm::FixedWindow(FixedWindowOptions::new(1_000, Duration::from_secs(3600))),
///     Algorithm::Gcra(GcraOptions::with_period(Duration::from_millis(100)).with_burst(5)),
/// ];
/// for algorithm in algorithms {
///     let limiter = RedisLimiter::builder(Down, "api", algorithm, FailurePolicy::FailOpen).build().unwrap();
///     assert_eq!(*limiter.algorithm(), algorithm);
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// A token bucket, as [`TokenBucketLimiter`](crate::TokenBucketLimiter).
    ///
    /// Its state in Redis is **one number** (the instant, counted in tokens, at which the
    /// bucket is full again: `periods since the Unix epoch × tokens per period + tokens
    /// missing`; key shape `tbf<period µs>x<tokens per period>`) for every bucket that refills
    /// **below about 2 million tokens a second** (2 tokens per µs); faster buckets keep **two
    /// numbers** (the tokens missing and their period; key shape `tb<period µs>x<tokens per
    /// period>`), which cost Redis about 10% more CPU per decision. The bound: one number must
    /// stay an exact integer in a Lua double (below 2^53) until the year 2112 (2^52 µs after
    /// the epoch), so `(2^52 µs / period + 1) × tokens per period + 2^33 ≤ 2^53`: with a period
    /// of one second, up to 1,999,998 tokens a period; of a minute, 119,999,885; of one
    /// millisecond, 1,999; of one µs, 1. The form is chosen when the limiter is built, from
    /// the period and the tokens per period alone (the key's shape), so every client of a key
    /// keeps it in the same form; both decide alike (the local limiter's decisions). After
    /// 2112 the one-number script refuses to run (each decision is a key error) rather than
    /// round.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// let bucket = |per, period| {
    ///     let a = Algorithm::TokenBucket(TokenBucketOptions::new(4_000_000, per, period));
    ///     RedisLimiter::builder(Down, "api", a, FailurePolicy::FailOpen).build().unwrap()
    /// };
    /// let second = Duration::from_secs(1);
    /// assert_eq!(bucket(1_999_998, second).key("k"), "api:{k}:tbf1000000x1999998"); // one number
    /// assert_eq!(bucket(1_999_999, second).key("k"), "api:{k}:tb1000000x1999999"); // two numbers
    /// ```
    TokenBucket(TokenBucketOptions),
    /// A fixed window, as [`FixedWindowLimiter`](crate::FixedWindowLimiter).
    FixedWindow(FixedWindowOptions),
    /// A sliding window, as [`SlidingWindowLimiter`](crate::SlidingWindowLimiter).
    SlidingWindow(SlidingWindowOptions),
    /// GCRA, as [`GcraLimiter`](crate::GcraLimiter) and redis-cell's `CL.THROTTLE` (the same
    /// [`GcraOptions`] as the local limiter; the interval in whole microseconds, no queue).
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// // redis-cell's `CL.THROTTLE key 14 30 60`: bursts of 15, 30 per minute.
    /// let gcra = GcraOptions::per_minute(30).with_burst(15);
    /// let limiter = RedisLimiter::builder(Down, "api", Algorithm::Gcra(gcra), FailurePolicy::FailClosed).build().unwrap();
    /// assert_eq!(limiter.limit(), 15);
    /// // 1 s / 3 is not a whole number of microseconds.
    /// let sub_micro = GcraOptions::per_second(3);
    /// let err = RedisLimiter::builder(Down, "api", Algorithm::Gcra(sub_micro), FailurePolicy::FailClosed).build();
    /// assert_eq!(err.unwrap_err(), RedisConfigError::NotWholeMicros);
    /// ```
    Gcra(GcraOptions),
    /// The sliding-window counter, as [`SlidingCounterLimiter`](crate::SlidingCounterLimiter):
    /// the previous fixed window's count weighted by how much of it the rolling window still
    /// overlaps, plus the current window's, compared exactly in integers. Two counts per key,
    /// whatever the window; `permit_limit × window` (µs) must be at most 2^52
    /// ([`RedisConfigError::LimitTimesWindowTooLarge`]).
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// use tollgate::SlidingCounterOptions;
    /// let counter = Algorithm::SlidingCounter(SlidingCounterOptions::per_minute(100));
    /// let limiter = RedisLimiter::builder(Down, "api", counter, FailurePolicy::FailClosed).build().unwrap();
    /// assert_eq!(limiter.key("alice"), "api:{alice}:sc60000000");
    /// let huge = SlidingCounterOptions::new(u32::MAX, Duration::from_secs(86_400));
    /// let err = RedisLimiter::builder(Down, "api", Algorithm::SlidingCounter(huge), FailurePolicy::FailClosed).build();
    /// assert_eq!(err.unwrap_err(), RedisConfigError::LimitTimesWindowTooLarge);
    /// ```
    SlidingCounter(SlidingCounterOptions),
    /// The leaky bucket as a meter, as [`LeakyBucketMeter`](crate::LeakyBucketMeter): GCRA with
    /// `burst = capacity` and one unit leaking every `leak_interval / leak` (whole
    /// microseconds), so it admits exactly what the local meter admits. No queue.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// use tollgate::LeakyBucketOptions;
    /// // Holds 10, leaks 2 a second: one unit every 500 ms.
    /// let meter = Algorithm::LeakyMeter(LeakyBucketOptions::new(10, 2, Duration::from_secs(1)));
    /// let limiter = RedisLimiter::builder(Down, "api", meter, FailurePolicy::FailClosed).build().unwrap();
    /// assert_eq!((limiter.limit(), limiter.key("alice").as_str()), (10, "api:{alice}:lm500000"));
    /// // 1 s / 3 is not a whole number of microseconds.
    /// let thirds = LeakyBucketOptions::new(10, 3, Duration::from_secs(1));
    /// let err = RedisLimiter::builder(Down, "api", Algorithm::LeakyMeter(thirds), FailurePolicy::FailClosed).build();
    /// assert_eq!(err.unwrap_err(), RedisConfigError::NotWholeMicros);
    /// ```
    LeakyMeter(LeakyBucketOptions),
}

/// Why a [`RedisLimiter`] could not be built.
///
/// ```
/// # use tollgate::redis::doc_support::*;
/// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
/// use tollgate::QueueOrder;
/// let queued = TokenBucketOptions::new(10, 1, Duration::from_secs(1)).with_queue(5, QueueOrder::OldestFirst);
/// let err = RedisLimiter::builder(Down, "api", Algorithm::TokenBucket(queued), FailurePolicy::FailOpen).build();
/// assert_eq!(err.unwrap_err(), RedisConfigError::QueueNotSupported);
/// let err = RedisLimiter::builder(Down, "api{v2}", per_minute, FailurePolicy::FailOpen).build().unwrap_err();
/// assert_eq!(err, RedisConfigError::PrefixBraces);
/// assert_eq!(err.to_string(), "the key prefix must not contain '{' or '}'");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RedisConfigError {
    /// The algorithm's options are invalid (as the local limiter would say).
    Options(OptionsError),
    /// A period, window, segment or emission interval is not a whole number of microseconds
    /// (the scripts' resolution), or is longer than 2^53 µs.
    NotWholeMicros,
    /// The options ask for a queue: a Redis limiter has none (it grants or rejects at once).
    QueueNotSupported,
    /// The prefix contains `{` or `}`, which would take the hash tag from the partition.
    PrefixBraces,
    /// The fallback share is not in (0, 1].
    Share,
    /// The timeout is zero.
    ZeroTimeout,
    /// The circuit breaker opens after zero failures.
    ZeroFailures,
    /// The limiter's span — the time to refill an empty bucket, the window, or GCRA's
    /// `burst × interval` — is longer than [`MAX_SPAN`] (2^50 µs, about 35.7 years).
    SpanTooLong,
    /// A sliding counter's `permit_limit × window` (in µs) is above 2^52: its exact comparison
    /// would leave a Lua double's exact integers.
    LimitTimesWindowTooLarge,
    /// Leases ([`RedisLimiterBuilder::lease`](super::RedisLimiterBuilder::lease)) are for a
    /// fixed window only: its leased permits expire with the window, so they never overshoot.
    LeaseNotSupported,
}

impl From<OptionsError> for RedisConfigError {
    fn from(e: OptionsError) -> Self {
        Self::Options(e)
    }
}

impl fmt::Display for RedisConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Options(e) => write!(f, "invalid limiter options: {e:?}"),
            Self::NotWholeMicros => f.write_str("durations must be whole microseconds below 2^53"),
            Self::QueueNotSupported => f.write_str("a Redis limiter has no queue (queue_limit 0)"),
            Self::PrefixBraces => f.write_str("the key prefix must not contain '{' or '}'"),
            Self::Share => f.write_str("the fallback share must be in (0, 1]"),
            Self::ZeroTimeout => f.write_str("the timeout must be longer than zero"),
            Self::ZeroFailures => f.write_str("the circuit breaker needs at least one failure"),
            Self::SpanTooLong => f.write_str("the limiter's span is longer than 2^50 µs"),
            Self::LeaseNotSupported => f.write_str("leases are for a fixed window only"),
            Self::LimitTimesWindowTooLarge => {
                f.write_str("the sliding counter's permit_limit × window (µs) is above 2^52")
            }
        }
    }
}

impl std::error::Error for RedisConfigError {}

fn whole_micros(d: Duration) -> Result<u64, RedisConfigError> {
    if d.subsec_nanos() % 1_000 != 0 || d.is_zero() {
        return Err(RedisConfigError::NotWholeMicros);
    }
    let us = u64::try_from(d.as_micros()).map_err(|_| RedisConfigError::NotWholeMicros)?;
    if us >= 1 << 53 {
        return Err(RedisConfigError::NotWholeMicros);
    }
    Ok(us)
}

/// The script (its constants written in), how to read its reply, the limit, and the key's
/// shape tag.
#[derive(Clone, Debug)]
pub(super) struct Plan {
    /// How the script's reply reads.
    pub(super) kind: Kind,
    /// The script's source (sent with `EVAL` after `NOSCRIPT`).
    pub(super) source: String,
    /// The script (for its SHA1).
    pub(super) script: Script,
    /// The one-decision form of the script (its source and SHA1), if it has one
    /// ([`scripts::render_one`]): what a run of one decision sends, the same reply.
    pub(super) one: Option<(String, Script)>,
    /// The settle script (its source and SHA1): the fixed window's
    /// ([`scripts::FIXED_SETTLE`]), GCRA's and the leaky meter's ([`scripts::GCRA_SETTLE`]),
    /// the token bucket's ([`scripts::BUCKET_ONE_SETTLE`] for the one-number state,
    /// [`scripts::BUCKET_SETTLE`] for the two-number one), the sliding counter's
    /// ([`scripts::COUNTER_SETTLE`]), the sliding window's ([`scripts::SLIDING_SETTLE`]).
    pub(super) settle: (String, Script),
    /// What the client needs to read the reply: `[limit, window µs, 0]` (fixed window),
    /// `[limit, tokens per period, period µs]` (bucket), `[burst × T, T, 0]` (GCRA), `[limit,
    /// window µs, 0]` (sliding counter), `[limit, segments, segment µs]` (sliding window).
    pub(super) consts: [u64; 3],
    pub(super) limit: u32,
    /// The key's suffix naming the algorithm and its time parameters (not its limit).
    pub(super) shape: String,
}

impl Plan {
    /// The plan of the decision script `template` and the settle script `settle`, with
    /// `constants` written into both.
    fn new(
        kind: Kind,
        template: &str,
        settle: &str,
        constants: &[(&str, u64)],
        consts: [u64; 3],
        limit: u32,
        shape: String,
    ) -> Self {
        let source = scripts::render(template, constants);
        let one = scripts::render_one(template, constants).map(|s| {
            let script = Script::new(&s);
            (s, script)
        });
        let settle = scripts::render(settle, constants);
        Self {
            kind,
            script: Script::new(&source),
            source,
            one,
            settle: (settle.clone(), Script::new(&settle)),
            consts,
            limit,
            shape,
        }
    }

    /// The most a settle may leave a key at (the settle scripts' `ARGV[3]`), owing at most
    /// `max_debt` permits and no more than one limit: for GCRA and the leaky meter the debt
    /// in µs, the tolerance `burst × T` and `min(burst, max_debt) × T` more; for the others
    /// a count (taken, missing from full, or weighted), the limit and `min(limit, max_debt)`
    /// more.
    pub(super) fn settle_most(&self, max_debt: u32) -> u64 {
        let owed = u64::from(self.limit.min(max_debt));
        match self.kind {
            Kind::Gcra => self.consts[0] + owed * self.consts[1],
            _ => u64::from(self.limit) + owed,
        }
    }

    /// GCRA's plan (also the leaky meter's): `burst` cells of `t` µs each, keys named
    /// `<tag><t>`.
    fn gcra(burst: u32, t: u64, tag: &str) -> Self {
        let cap = u64::from(burst) * t;
        // The tolerance and one burst of debt: within 2^51 µs (the span is at most 2^50).
        let constants = [("CAP", cap), ("DEBT", 2 * cap), ("EM", t)];
        Self::new(
            Kind::Gcra,
            scripts::GCRA,
            scripts::GCRA_SETTLE,
            &constants,
            [cap, t, 0],
            burst,
            format!("{tag}{t}"),
        )
    }
}

/// Until when a token bucket's one-number state must stay exact: 2^52 µs after the Unix epoch
/// (September 2112), as [`ONE_NUMBER_MAX`] says.
pub(super) const ONE_NUMBER_HORIZON_US: u64 = 1 << 52;

/// The largest "full at" a one-number bucket may hold: `k × tokens per period + owed` (with
/// `owed` up to the largest limit, `u32::MAX`, and one request's permits) stays below 2^53, a
/// Lua double's last exact integer.
const ONE_NUMBER_MAX: u64 = (1 << 53) - (1 << 33);

/// The last period (since the Unix epoch) in which a token bucket of `per` tokens every `p` µs
/// can keep its state as one number, `k × per + owed` ([`scripts::BUCKET_ONE`]), if that is at
/// or after [`ONE_NUMBER_HORIZON_US`]; `None` (the two-number state, [`scripts::BUCKET`]) for a
/// bucket faster than that allows: about 2 tokens per µs (2 million tokens a second) or more.
/// A function of the key's shape alone (period and tokens per period, not the limit), so that
/// every writer of a key keeps its state in the same form.
pub(super) fn one_number_last_period(p: u64, per: u64) -> Option<u64> {
    let kmax = (ONE_NUMBER_MAX / per.max(1)).checked_sub(1)?;
    (kmax >= ONE_NUMBER_HORIZON_US / p.max(1)).then_some(kmax)
}

/// `Ok(())` if `span_us` (a u128 product of the options) is at most [`MAX_SPAN`].
fn within_span(span_us: u128) -> Result<(), RedisConfigError> {
    if span_us > u128::from(MAX_SPAN_US) {
        return Err(RedisConfigError::SpanTooLong);
    }
    Ok(())
}

/// Whether options with `queue_limit` ask for a queue: any limit but 0 and the quota-style
/// constructors' waiting default ([`UNBOUNDED_QUEUE`](crate::UNBOUNDED_QUEUE)), which a
/// limiter without a queue accepts and ignores.
fn asks_for_queue(queue_limit: u32) -> bool {
    queue_limit != 0 && queue_limit != crate::options::UNBOUNDED_QUEUE
}

impl Algorithm {
    pub(super) fn plan(&self) -> Result<Plan, RedisConfigError> {
        match *self {
            Algorithm::TokenBucket(o) => {
                o.validate()?;
                if asks_for_queue(o.queue_limit) {
                    return Err(RedisConfigError::QueueNotSupported);
                }
                let p = whole_micros(o.replenishment_period)?;
                let periods = o.token_limit.div_ceil(o.tokens_per_period.max(1));
                within_span(u128::from(periods) * u128::from(p))?;
                let (l, per) = (u64::from(o.token_limit), u64::from(o.tokens_per_period));
                Ok(match one_number_last_period(p, per) {
                    Some(kmax) => {
                        let constants = [
                            ("L", l),
                            ("L2", 2 * l),
                            ("PER", per),
                            ("P", p),
                            ("KMAX", kmax),
                        ];
                        Plan::new(
                            Kind::BucketOne,
                            scripts::BUCKET_ONE,
                            scripts::BUCKET_ONE_SETTLE,
                            &constants,
                            [l, per, p],
                            o.token_limit,
                            format!("tbf{p}x{per}"),
                        )
                    }
                    None => {
                        let constants = [("L", l), ("L2", 2 * l), ("PER", per), ("P", p)];
                        Plan::new(
                            Kind::Bucket,
                            scripts::BUCKET,
                            scripts::BUCKET_SETTLE,
                            &constants,
                            [l, per, p],
                            o.token_limit,
                            format!("tb{p}x{per}"),
                        )
                    }
                })
            }
            Algorithm::FixedWindow(o) => {
                o.validate()?;
                if asks_for_queue(o.queue_limit) {
                    return Err(RedisConfigError::QueueNotSupported);
                }
                let w = whole_micros(o.window)?;
                within_span(u128::from(w))?;
                let l = u64::from(o.permit_limit);
                Ok(Plan::new(
                    Kind::Fixed,
                    scripts::FIXED,
                    scripts::FIXED_SETTLE,
                    &[("L", l), ("L2", 2 * l), ("W", w)],
                    [l, w, 0],
                    o.permit_limit,
                    format!("fw{w}"),
                ))
            }
            Algorithm::SlidingWindow(o) => {
                o.validate(MAX_SEGMENTS as usize)?;
                if asks_for_queue(o.queue_limit) {
                    return Err(RedisConfigError::QueueNotSupported);
                }
                let w = whole_micros(o.window)?;
                let n = u64::from(o.segments_per_window);
                if w % n != 0 {
                    return Err(RedisConfigError::NotWholeMicros);
                }
                within_span(u128::from(w))?;
                let l = u64::from(o.permit_limit);
                Ok(Plan::new(
                    Kind::Full,
                    scripts::SLIDING,
                    scripts::SLIDING_SETTLE,
                    &[("L", l), ("L2", 2 * l), ("SEGS", n), ("SEG", w / n)],
                    [l, n, w / n],
                    o.permit_limit,
                    format!("swt{w}x{n}"),
                ))
            }
            Algorithm::Gcra(o) => {
                if o.burst == 0 {
                    return Err(OptionsError::ZeroLimit.into());
                }
                if asks_for_queue(o.queue_limit) {
                    return Err(RedisConfigError::QueueNotSupported);
                }
                let t = whole_micros(o.interval)?;
                within_span(u128::from(o.burst) * u128::from(t))?;
                // Within the Redis span (2^50 µs), the local rules (2^61 ns) hold too.
                o.validate()?;
                Ok(Plan::gcra(o.burst, t, "gcra"))
            }
            Algorithm::SlidingCounter(o) => {
                if asks_for_queue(o.queue_limit) {
                    return Err(RedisConfigError::QueueNotSupported);
                }
                o.validate()?;
                let w = whole_micros(o.window)?;
                within_span(u128::from(w))?;
                if u128::from(o.permit_limit) * u128::from(w) > MAX_COUNTER_PRODUCT {
                    return Err(RedisConfigError::LimitTimesWindowTooLarge);
                }
                let l = u64::from(o.permit_limit);
                Ok(Plan::new(
                    Kind::Counter,
                    scripts::COUNTER,
                    scripts::COUNTER_SETTLE,
                    &[("L", l), ("L2", 2 * l), ("W", w)],
                    [l, w, 0],
                    o.permit_limit,
                    format!("sc{w}"),
                ))
            }
            Algorithm::LeakyMeter(o) => {
                if asks_for_queue(o.queue_limit) {
                    return Err(RedisConfigError::QueueNotSupported);
                }
                if o.capacity == 0 {
                    return Err(OptionsError::ZeroLimit.into());
                }
                if o.leak == 0 {
                    return Err(OptionsError::ZeroTokensPerPeriod.into());
                }
                let li = whole_micros(o.leak_interval)?;
                if li % u64::from(o.leak) != 0 {
                    return Err(RedisConfigError::NotWholeMicros);
                }
                let t = li / u64::from(o.leak);
                within_span(u128::from(o.capacity) * u128::from(t))?;
                // Within the Redis span (2^50 µs), the local rules hold too.
                o.validate()?;
                Ok(Plan::gcra(o.capacity, t, "lm"))
            }
        }
    }

    /// The same algorithm with `share` of the quota, as a local partition kind.
    pub(super) fn local_share(&self, share: f64) -> Result<PartitionKind, RedisConfigError> {
        let scale = |n: u32| -> u32 { ((f64::from(n) * share).ceil() as u32).max(1) };
        Ok(match *self {
            Algorithm::TokenBucket(o) => PartitionKind::token_bucket(TokenBucketOptions::new(
                scale(o.token_limit),
                scale(o.tokens_per_period),
                o.replenishment_period,
            ))?,
            Algorithm::FixedWindow(o) => PartitionKind::fixed_window(FixedWindowOptions::new(
                scale(o.permit_limit),
                o.window,
            ))?,
            Algorithm::SlidingWindow(o) => PartitionKind::sliding_window(
                SlidingWindowOptions::new(scale(o.permit_limit), o.window, o.segments_per_window),
            )?,
            Algorithm::Gcra(o) => {
                // A local GCRA: one permit every T / share, bursts of B × share. A tiny share
                // makes that interval longer than a `Duration` holds: refused, as the local
                // limiter refuses spans of 73 years or more.
                let t = o.interval.as_secs_f64() / share;
                let interval = Duration::try_from_secs_f64(t)
                    .map_err(|_| RedisConfigError::Options(OptionsError::PeriodTooLong))?;
                PartitionKind::gcra(GcraOptions::with_period(interval).with_burst(scale(o.burst)))?
            }
            // No local partition kind is a sliding counter: its fallback is a fixed window of
            // the same window and share (as strict over a window, without the weighting).
            Algorithm::SlidingCounter(o) => PartitionKind::fixed_window(FixedWindowOptions::new(
                scale(o.permit_limit),
                o.window,
            ))?,
            Algorithm::LeakyMeter(o) => PartitionKind::leaky_meter(LeakyBucketOptions::new(
                scale(o.capacity),
                scale(o.leak),
                o.leak_interval,
            ))?,
        })
    }
}
