//! What the fuzzer's bytes mean: options, a starting instant and a sequence of operations.
//!
//! Every value is a *selector* read with [`arbitrary`]: one tag byte (taken modulo the number of
//! choices) and, for some choices, a little-endian payload. Selectors are biased towards the
//! edges that matter — 0, 1, the limit, the limit + 1, `u32::MAX`; one period, one period less a
//! nanosecond, the exact RetryAfter just returned, 2^63 ns, `u64::MAX` — and resolved at run time
//! against the limiter's options and the model's state (see `harness`).
//!
//! The encoding is trivially invertible: [`Writer`] writes the bytes that decode to a given
//! scenario, which is how the checked-in seed corpora are made (`cargo run --example make_seeds`).
//! Decoding never fails: bytes that run out read as zeros, and trailing garbage is ignored.

use arbitrary::{Arbitrary, Unstructured};

/// At most this many operations per run (longer inputs are cut).
pub const MAX_OPS: usize = 400;

/// Reads selectors from the fuzzer's bytes.
pub struct Reader<'a, 'b> {
    u: &'b mut Unstructured<'a>,
}

impl<'a, 'b> Reader<'a, 'b> {
    /// A reader over `u`.
    pub fn new(u: &'b mut Unstructured<'a>) -> Self {
        Self { u }
    }
    /// Whether all bytes were read.
    pub fn is_empty(&self) -> bool {
        self.u.is_empty()
    }
    /// One byte (0 once the bytes run out).
    pub fn u8(&mut self) -> u8 {
        self.u.arbitrary().unwrap_or(0)
    }
    /// A tag in `0..count`.
    pub fn tag(&mut self, count: u8) -> u8 {
        self.u8() % count
    }
    /// Four bytes, little-endian.
    pub fn u32(&mut self) -> u32 {
        self.u.arbitrary().unwrap_or(0)
    }
    /// Eight bytes, little-endian.
    pub fn u64(&mut self) -> u64 {
        self.u.arbitrary().unwrap_or(0)
    }
}

/// Writes the bytes a [`Reader`] decodes back to the same selectors (for seed corpora).
#[derive(Default)]
pub struct Writer {
    /// The bytes so far.
    pub bytes: Vec<u8>,
}

impl Writer {
    /// One byte.
    pub fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }
    /// Four bytes, little-endian.
    pub fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
    /// Eight bytes, little-endian.
    pub fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }
}

/// Something that decodes from a [`Reader`] and encodes to a [`Writer`].
pub trait Codec: Sized {
    /// Reads one value.
    fn decode(r: &mut Reader<'_, '_>) -> Self;
    /// Writes the bytes that decode to `self`.
    fn encode(&self, w: &mut Writer);
}

/// A permit count, resolved against the limit and the model's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Permits {
    /// 0: a probe.
    Zero,
    /// 1.
    One,
    /// 2.
    Two,
    /// A small count (0..=255).
    Small(u8),
    /// The limit.
    Limit,
    /// The limit − 1.
    BelowLimit,
    /// The limit + 1 (saturating at `u32::MAX`).
    AboveLimit,
    /// `u32::MAX`.
    Max,
    /// Exactly what the model says is available now.
    Available,
    /// One more than is available now.
    AboveAvailable,
    /// The count of the previous request (to retry it).
    Last,
    /// Any count.
    Any(u32),
}

impl Codec for Permits {
    fn decode(r: &mut Reader<'_, '_>) -> Self {
        match r.tag(16) {
            0 => Permits::Zero,
            1 | 13 | 14 => Permits::One,
            2 => Permits::Two,
            3 | 15 => Permits::Small(r.u8()),
            4 => Permits::Limit,
            5 => Permits::BelowLimit,
            6 => Permits::AboveLimit,
            7 => Permits::Max,
            8 => Permits::Available,
            9 => Permits::AboveAvailable,
            10 | 12 => Permits::Last,
            _ => Permits::Any(r.u32()),
        }
    }
    fn encode(&self, w: &mut Writer) {
        match *self {
            Permits::Zero => w.u8(0),
            Permits::One => w.u8(1),
            Permits::Two => w.u8(2),
            Permits::Small(v) => {
                w.u8(3);
                w.u8(v)
            }
            Permits::Limit => w.u8(4),
            Permits::BelowLimit => w.u8(5),
            Permits::AboveLimit => w.u8(6),
            Permits::Max => w.u8(7),
            Permits::Available => w.u8(8),
            Permits::AboveAvailable => w.u8(9),
            Permits::Last => w.u8(10),
            Permits::Any(v) => {
                w.u8(11);
                w.u32(v)
            }
        }
    }
}

/// Long spans of time, in nanoseconds.
pub const HUGE: [u64; 8] = [
    1 << 62,
    (1 << 63) - 1,
    1 << 63,
    u64::MAX,
    365 * 86_400 * 1_000_000_000,       // a year
    100 * 365 * 86_400 * 1_000_000_000, // a century
    1 << 32,
    (1 << 63) + 1,
];

/// A span of time, resolved against the period and the last RetryAfter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Span {
    /// No time.
    Zero,
    /// 1 ns.
    Nano,
    /// A few nanoseconds.
    Small(u8),
    /// One period (window, segment) less 1 ns.
    PeriodLess1,
    /// One period (the token bucket's period, the fixed window, the sliding window's segment).
    Period,
    /// One period and 1 ns.
    PeriodMore1,
    /// `k` periods.
    Periods(u8),
    /// The sliding window's whole window (segments × segment); one period for the others.
    Window,
    /// Exactly to the start of the next period (tick boundary).
    ToBoundary,
    /// The last RetryAfter the limiter returned (1 ns if none yet).
    RetryAfter,
    /// The last RetryAfter less 1 ns.
    RetryLess1,
    /// One of [`HUGE`].
    Huge(u8),
    /// Any number of nanoseconds.
    Any(u64),
}

impl Codec for Span {
    fn decode(r: &mut Reader<'_, '_>) -> Self {
        match r.tag(16) {
            0 => Span::Zero,
            1 => Span::Nano,
            2 => Span::Small(r.u8()),
            3 => Span::PeriodLess1,
            4 | 14 => Span::Period,
            5 => Span::PeriodMore1,
            6 => Span::Periods(r.u8()),
            7 => Span::Window,
            8 | 15 => Span::ToBoundary,
            9 => Span::RetryAfter,
            10 => Span::RetryLess1,
            11 => Span::Huge(r.u8()),
            _ => Span::Any(r.u64()),
        }
    }
    fn encode(&self, w: &mut Writer) {
        match *self {
            Span::Zero => w.u8(0),
            Span::Nano => w.u8(1),
            Span::Small(v) => {
                w.u8(2);
                w.u8(v)
            }
            Span::PeriodLess1 => w.u8(3),
            Span::Period => w.u8(4),
            Span::PeriodMore1 => w.u8(5),
            Span::Periods(v) => {
                w.u8(6);
                w.u8(v)
            }
            Span::Window => w.u8(7),
            Span::ToBoundary => w.u8(8),
            Span::RetryAfter => w.u8(9),
            Span::RetryLess1 => w.u8(10),
            Span::Huge(v) => {
                w.u8(11);
                w.u8(v)
            }
            Span::Any(v) => {
                w.u8(12);
                w.u64(v)
            }
        }
    }
}

/// An instant to set the clock to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Point {
    /// The limiter's creation instant.
    Origin,
    /// 1 ns before creation (elapsed wraps to 2^64 − 1: a backwards step).
    BeforeOrigin,
    /// Creation + 2^63 − 1 ns: the last instant still read as forward.
    LastForward,
    /// Creation + 2^63 ns: the first instant read as a backwards step.
    FirstBackward,
    /// Creation + a span.
    OriginPlus(Span),
    /// Raw instant 0.
    Zero,
    /// Raw instant `u64::MAX`.
    Max,
    /// Any raw instant.
    Any(u64),
}

impl Codec for Point {
    fn decode(r: &mut Reader<'_, '_>) -> Self {
        match r.tag(8) {
            0 => Point::Origin,
            1 => Point::BeforeOrigin,
            2 => Point::LastForward,
            3 => Point::FirstBackward,
            4 => Point::OriginPlus(Span::decode(r)),
            5 => Point::Zero,
            6 => Point::Max,
            _ => Point::Any(r.u64()),
        }
    }
    fn encode(&self, w: &mut Writer) {
        match *self {
            Point::Origin => w.u8(0),
            Point::BeforeOrigin => w.u8(1),
            Point::LastForward => w.u8(2),
            Point::FirstBackward => w.u8(3),
            Point::OriginPlus(s) => {
                w.u8(4);
                s.encode(w)
            }
            Point::Zero => w.u8(5),
            Point::Max => w.u8(6),
            Point::Any(v) => {
                w.u8(7);
                w.u64(v)
            }
        }
    }
}

/// One operation on the limiter (and the model).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `try_acquire(n)`.
    Acquire(Permits),
    /// Drop the `k % len`-th held lease (concurrency: its permits come back).
    DropLease(u8),
    /// `forget()` the `k % len`-th held lease (its permits never come back).
    ForgetLease(u8),
    /// `Release::release(n)` by hand (concurrency only; a read elsewhere).
    Release(Permits),
    /// `ManualClock::advance` (saturates at `u64::MAX`).
    Advance(Span),
    /// Set the clock back by a span (wrapping).
    Back(Span),
    /// Set the clock to an instant.
    Set(Point),
    /// `Replenishing::replenish()` (rate limiters; a read for the concurrency limiter).
    Replenish,
    /// `close()`.
    Close,
    /// Only compare the observable state (done after every operation anyway).
    Read,
    /// `acquire(n)`: a new waiting future, not polled yet (waiting scenarios only).
    Enqueue(Permits),
    /// Poll the `k % len`-th pending future (its first poll, or a later one).
    Poll(u8),
    /// Drop the `k % len`-th pending future (cancellation at whatever stage it is).
    Cancel(u8),
}

impl Op {
    /// An operation of a waiting scenario: the same ones, plus waiter operations.
    pub fn decode_waiting(r: &mut Reader<'_, '_>) -> Self {
        match r.tag(30) {
            t @ 0..=19 => Op::from_tag(t, r),
            20..=23 => Op::Enqueue(Permits::decode(r)),
            24..=27 => Op::Poll(r.u8()),
            _ => Op::Cancel(r.u8()),
        }
    }

    fn from_tag(t: u8, r: &mut Reader<'_, '_>) -> Self {
        match t {
            0..=6 => Op::Acquire(Permits::decode(r)),
            7 => Op::DropLease(r.u8()),
            8 => Op::ForgetLease(r.u8()),
            9 => Op::Release(Permits::decode(r)),
            10..=13 => Op::Advance(Span::decode(r)),
            14 => Op::Back(Span::decode(r)),
            15 => Op::Set(Point::decode(r)),
            16 | 17 => Op::Replenish,
            18 => Op::Close,
            _ => Op::Read,
        }
    }
}

impl Codec for Op {
    fn decode(r: &mut Reader<'_, '_>) -> Self {
        let t = r.tag(20);
        Op::from_tag(t, r)
    }
    fn encode(&self, w: &mut Writer) {
        match *self {
            Op::Acquire(p) => {
                w.u8(0);
                p.encode(w)
            }
            Op::DropLease(k) => {
                w.u8(7);
                w.u8(k)
            }
            Op::ForgetLease(k) => {
                w.u8(8);
                w.u8(k)
            }
            Op::Release(p) => {
                w.u8(9);
                p.encode(w)
            }
            Op::Advance(s) => {
                w.u8(10);
                s.encode(w)
            }
            Op::Back(s) => {
                w.u8(14);
                s.encode(w)
            }
            Op::Set(p) => {
                w.u8(15);
                p.encode(w)
            }
            Op::Replenish => w.u8(16),
            Op::Close => w.u8(18),
            Op::Read => w.u8(19),
            Op::Enqueue(p) => {
                w.u8(20);
                p.encode(w)
            }
            Op::Poll(k) => {
                w.u8(24);
                w.u8(k)
            }
            Op::Cancel(k) => {
                w.u8(28);
                w.u8(k)
            }
        }
    }
}

/// A permit limit (or tokens per period). May resolve to 0, which is invalid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Count {
    /// 1.
    One,
    /// 2.
    Two,
    /// 3.
    Three,
    /// 0..=255.
    Small(u8),
    /// `u32::MAX`.
    Max,
    /// `u32::MAX - 1`.
    MaxLess1,
    /// 2^31.
    Half,
    /// The other count of the options (tokens per period = token limit).
    Same,
    /// The other count + 1.
    SamePlus1,
    /// The other count − 1.
    SameLess1,
    /// Any.
    Any(u32),
}

impl Count {
    /// The count; `other` is the related count (the token limit, for tokens per period).
    pub fn resolve(self, other: u32) -> u32 {
        match self {
            Count::One => 1,
            Count::Two => 2,
            Count::Three => 3,
            Count::Small(v) => u32::from(v),
            Count::Max => u32::MAX,
            Count::MaxLess1 => u32::MAX - 1,
            Count::Half => 1 << 31,
            Count::Same => other,
            Count::SamePlus1 => other.saturating_add(1),
            Count::SameLess1 => other.saturating_sub(1),
            Count::Any(v) => v,
        }
    }
}

impl Codec for Count {
    fn decode(r: &mut Reader<'_, '_>) -> Self {
        match r.tag(16) {
            0 | 11 => Count::One,
            1 => Count::Two,
            2 | 12 => Count::Three,
            3 | 13 | 14 => Count::Small(r.u8()),
            4 => Count::Max,
            5 => Count::MaxLess1,
            6 => Count::Half,
            7 => Count::Same,
            8 => Count::SamePlus1,
            9 => Count::SameLess1,
            _ => Count::Any(r.u32()),
        }
    }
    fn encode(&self, w: &mut Writer) {
        match *self {
            Count::One => w.u8(0),
            Count::Two => w.u8(1),
            Count::Three => w.u8(2),
            Count::Small(v) => {
                w.u8(3);
                w.u8(v)
            }
            Count::Max => w.u8(4),
            Count::MaxLess1 => w.u8(5),
            Count::Half => w.u8(6),
            Count::Same => w.u8(7),
            Count::SamePlus1 => w.u8(8),
            Count::SameLess1 => w.u8(9),
            Count::Any(v) => {
                w.u8(10);
                w.u32(v)
            }
        }
    }
}

/// Periods, in nanoseconds: from 1 ns to years and up to `u64::MAX` ns.
pub const PERIODS: [u64; 20] = [
    1,
    2,
    3,
    7,
    10,
    1_000,
    1_000_000,
    1_000_000_000,
    60_000_000_000,
    3_600_000_000_000,
    86_400_000_000_000,
    365 * 86_400 * 1_000_000_000,
    100 * 365 * 86_400 * 1_000_000_000,
    1 << 62,
    (1 << 63) - 1,
    1 << 63,
    (1 << 63) + 1,
    u64::MAX - 1,
    u64::MAX,
    999_999_999,
];

/// A period (replenishment period, window) in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Period {
    /// One of [`PERIODS`] (index modulo its length).
    Listed(u8),
    /// A few nanoseconds (0 is invalid).
    Small(u8),
    /// Any number of nanoseconds (0 is invalid).
    Any(u64),
}

impl Period {
    /// Nanoseconds.
    pub fn ns(self) -> u64 {
        match self {
            Period::Listed(i) => PERIODS[usize::from(i) % PERIODS.len()],
            Period::Small(v) => u64::from(v),
            Period::Any(v) => v,
        }
    }
}

impl Codec for Period {
    fn decode(r: &mut Reader<'_, '_>) -> Self {
        match r.tag(4) {
            0 | 1 => Period::Listed(r.u8()),
            2 => Period::Small(r.u8()),
            _ => Period::Any(r.u64()),
        }
    }
    fn encode(&self, w: &mut Writer) {
        match *self {
            Period::Listed(i) => {
                w.u8(0);
                w.u8(i)
            }
            Period::Small(v) => {
                w.u8(2);
                w.u8(v)
            }
            Period::Any(v) => {
                w.u8(3);
                w.u64(v)
            }
        }
    }
}

/// The clock's reading when the limiter is created.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// 0.
    Zero,
    /// 1.
    One,
    /// `u64::MAX`.
    Max,
    /// `u64::MAX - v`.
    NearMax(u8),
    /// `u64::MAX - period + 1`: the first period ends exactly where the clock wraps.
    PeriodBeforeMax,
    /// 2^63.
    Half,
    /// Any.
    Any(u64),
}

impl Start {
    /// The raw instant, for a limiter whose period is `period` ns.
    pub fn resolve(self, period: u64) -> u64 {
        match self {
            Start::Zero => 0,
            Start::One => 1,
            Start::Max => u64::MAX,
            Start::NearMax(v) => u64::MAX - u64::from(v),
            Start::PeriodBeforeMax => (u64::MAX - period).wrapping_add(1),
            Start::Half => 1 << 63,
            Start::Any(v) => v,
        }
    }
}

impl Codec for Start {
    fn decode(r: &mut Reader<'_, '_>) -> Self {
        match r.tag(8) {
            0 => Start::Zero,
            1 => Start::One,
            2 => Start::Max,
            3 => Start::NearMax(r.u8()),
            4 => Start::PeriodBeforeMax,
            5 => Start::Half,
            _ => Start::Any(r.u64()),
        }
    }
    fn encode(&self, w: &mut Writer) {
        match *self {
            Start::Zero => w.u8(0),
            Start::One => w.u8(1),
            Start::Max => w.u8(2),
            Start::NearMax(v) => {
                w.u8(3);
                w.u8(v)
            }
            Start::PeriodBeforeMax => w.u8(4),
            Start::Half => w.u8(5),
            Start::Any(v) => {
                w.u8(6);
                w.u64(v)
            }
        }
    }
}

/// Segments per window, resolved against the ring capacity `N`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segments {
    /// 1.
    One,
    /// `N`.
    Cap,
    /// `N − 1` (0 for `N = 1`: invalid).
    CapLess1,
    /// `v % N + 1`.
    Within(u8),
    /// 0 (invalid).
    Zero,
    /// `N + 1` (invalid).
    CapPlus1,
}

impl Segments {
    /// The segment count for a ring of `cap` slots.
    pub fn resolve(self, cap: usize) -> u32 {
        let cap = cap as u32;
        match self {
            Segments::One => 1,
            Segments::Cap => cap,
            Segments::CapLess1 => cap - 1,
            Segments::Within(v) => u32::from(v) % cap + 1,
            Segments::Zero => 0,
            Segments::CapPlus1 => cap + 1,
        }
    }
}

impl Codec for Segments {
    fn decode(r: &mut Reader<'_, '_>) -> Self {
        match r.tag(16) {
            0 | 6 => Segments::One,
            1 | 7 => Segments::Cap,
            2 => Segments::CapLess1,
            3..=5 | 8..=13 => Segments::Within(r.u8()),
            14 => Segments::Zero,
            _ => Segments::CapPlus1,
        }
    }
    fn encode(&self, w: &mut Writer) {
        match *self {
            Segments::One => w.u8(0),
            Segments::Cap => w.u8(1),
            Segments::CapLess1 => w.u8(2),
            Segments::Within(v) => {
                w.u8(3);
                w.u8(v)
            }
            Segments::Zero => w.u8(14),
            Segments::CapPlus1 => w.u8(15),
        }
    }
}

/// The sliding window's window: a period, or a per-segment period times the segment count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowLen {
    /// The window itself.
    Whole(Period),
    /// The segment length; the window is this × segments (saturating at `u64::MAX`).
    PerSegment(Period),
}

impl Codec for WindowLen {
    fn decode(r: &mut Reader<'_, '_>) -> Self {
        match r.tag(2) {
            0 => WindowLen::Whole(Period::decode(r)),
            _ => WindowLen::PerSegment(Period::decode(r)),
        }
    }
    fn encode(&self, w: &mut Writer) {
        match *self {
            WindowLen::Whole(p) => {
                w.u8(0);
                p.encode(w)
            }
            WindowLen::PerSegment(p) => {
                w.u8(1);
                p.encode(w)
            }
        }
    }
}

/// Ring capacities `N` the sliding-window target instantiates.
pub const CAPS: [usize; 7] = [1, 2, 3, 4, 8, 16, 64];

/// Options of each limiter, as selectors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `ConcurrencyOptions::new(limit)`.
    Concurrency {
        /// Permit limit.
        limit: Count,
    },
    /// `TokenBucketOptions::new(limit, per_period, period)`.
    TokenBucket {
        /// Token limit.
        limit: Count,
        /// Tokens per period (`Same` = the limit).
        per_period: Count,
        /// Replenishment period.
        period: Period,
    },
    /// `FixedWindowOptions::new(limit, window)`.
    FixedWindow {
        /// Permits per window.
        limit: Count,
        /// Window.
        window: Period,
    },
    /// `SlidingWindowOptions::new(limit, window, segments)` on `SlidingWindowLimiter<_, N>`.
    SlidingWindow {
        /// Index into [`CAPS`] (modulo its length).
        cap: u8,
        /// Permits per window.
        limit: Count,
        /// Segments per window.
        segments: Segments,
        /// Window.
        window: WindowLen,
    },
    /// `GcraOptions::with_period(interval).with_burst(burst)`, no queue.
    Gcra {
        /// Burst.
        burst: Count,
        /// Emission interval.
        interval: Period,
    },
    /// `LeakyBucketOptions::new(capacity, leak, interval)`.
    LeakyMeter {
        /// Capacity.
        capacity: Count,
        /// Units leaked per interval.
        leak: Count,
        /// Leak interval.
        interval: Period,
    },
    /// `ShaperOptions::per(interval, 1).with_max_permits(max)`, no queue.
    LeakyShaper {
        /// Largest request.
        max: Count,
        /// Departure interval.
        interval: Period,
    },
    /// `SlidingCounterOptions::new(limit, window)`.
    SlidingCounter {
        /// Permits per window.
        limit: Count,
        /// Window.
        window: Period,
    },
    /// `SlidingLogOptions::new(limit, window)` on `SlidingLogLimiter<_, N>`.
    SlidingLog {
        /// Index into [`CAPS`] (modulo its length).
        cap: u8,
        /// Permits per window.
        limit: Count,
        /// Window.
        window: Period,
    },
}

/// Which limiter a scenario drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// [`tollgate::ConcurrencyLimiter`].
    Concurrency,
    /// [`tollgate::TokenBucketLimiter`].
    TokenBucket,
    /// [`tollgate::FixedWindowLimiter`].
    FixedWindow,
    /// [`tollgate::SlidingWindowLimiter`].
    SlidingWindow,
    /// [`tollgate::GcraLimiter`].
    Gcra,
    /// [`tollgate::LeakyBucketMeter`].
    LeakyMeter,
    /// [`tollgate::LeakyBucketShaper`].
    LeakyShaper,
    /// [`tollgate::SlidingCounterLimiter`].
    SlidingCounter,
    /// [`tollgate::SlidingLogLimiter`].
    SlidingLog,
}

impl Shape {
    fn decode(kind: Kind, r: &mut Reader<'_, '_>) -> Self {
        match kind {
            Kind::Concurrency => Shape::Concurrency {
                limit: Count::decode(r),
            },
            Kind::TokenBucket => Shape::TokenBucket {
                limit: Count::decode(r),
                per_period: Count::decode(r),
                period: Period::decode(r),
            },
            Kind::FixedWindow => Shape::FixedWindow {
                limit: Count::decode(r),
                window: Period::decode(r),
            },
            Kind::SlidingWindow => Shape::SlidingWindow {
                cap: r.u8(),
                limit: Count::decode(r),
                segments: Segments::decode(r),
                window: WindowLen::decode(r),
            },
            Kind::Gcra => Shape::Gcra {
                burst: Count::decode(r),
                interval: Period::decode(r),
            },
            Kind::LeakyMeter => Shape::LeakyMeter {
                capacity: Count::decode(r),
                leak: Count::decode(r),
                interval: Period::decode(r),
            },
            Kind::LeakyShaper => Shape::LeakyShaper {
                max: Count::decode(r),
                interval: Period::decode(r),
            },
            Kind::SlidingCounter => Shape::SlidingCounter {
                limit: Count::decode(r),
                window: Period::decode(r),
            },
            Kind::SlidingLog => Shape::SlidingLog {
                cap: r.u8(),
                limit: Count::decode(r),
                window: Period::decode(r),
            },
        }
    }
    fn encode(&self, w: &mut Writer) {
        match *self {
            Shape::Concurrency { limit } => limit.encode(w),
            Shape::TokenBucket {
                limit,
                per_period,
                period,
            } => {
                limit.encode(w);
                per_period.encode(w);
                period.encode(w)
            }
            Shape::FixedWindow { limit, window } => {
                limit.encode(w);
                window.encode(w)
            }
            Shape::SlidingWindow {
                cap,
                limit,
                segments,
                window,
            } => {
                w.u8(cap);
                limit.encode(w);
                segments.encode(w);
                window.encode(w)
            }
            Shape::Gcra { burst, interval } => {
                burst.encode(w);
                interval.encode(w)
            }
            Shape::LeakyMeter {
                capacity,
                leak,
                interval,
            } => {
                capacity.encode(w);
                leak.encode(w);
                interval.encode(w)
            }
            Shape::LeakyShaper { max, interval } => {
                max.encode(w);
                interval.encode(w)
            }
            Shape::SlidingCounter { limit, window } => {
                limit.encode(w);
                window.encode(w)
            }
            Shape::SlidingLog { cap, limit, window } => {
                w.u8(cap);
                limit.encode(w);
                window.encode(w)
            }
        }
    }
}

/// One run: options, the clock's starting instant, and the operations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scenario {
    /// The limiter and its options.
    pub shape: Shape,
    /// The clock's reading at creation.
    pub start: Start,
    /// What to do.
    pub ops: Vec<Op>,
}

impl Scenario {
    /// Decodes a scenario for a limiter of `kind`.
    pub fn decode(kind: Kind, u: &mut Unstructured<'_>) -> Self {
        let mut r = Reader::new(u);
        let shape = Shape::decode(kind, &mut r);
        let start = Start::decode(&mut r);
        let mut ops = Vec::new();
        while !r.is_empty() && ops.len() < MAX_OPS {
            ops.push(Op::decode(&mut r));
        }
        Scenario { shape, start, ops }
    }

    /// The bytes that decode to this scenario.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        self.shape.encode(&mut w);
        self.start.encode(&mut w);
        for op in &self.ops {
            op.encode(&mut w);
        }
        w.bytes
    }
}

macro_rules! scenario_type {
    ($(#[$doc:meta])* $name:ident, $kind:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct $name(pub Scenario);

        impl<'a> Arbitrary<'a> for $name {
            fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
                Ok($name(Scenario::decode($kind, u)))
            }
            fn arbitrary_take_rest(mut u: Unstructured<'a>) -> arbitrary::Result<Self> {
                Ok($name(Scenario::decode($kind, &mut u)))
            }
        }
    };
}

scenario_type!(
    /// A concurrency-limiter scenario (the fuzz target's input).
    ConcurrencyInput,
    Kind::Concurrency
);
scenario_type!(
    /// A token-bucket scenario.
    TokenBucketInput,
    Kind::TokenBucket
);
scenario_type!(
    /// A fixed-window scenario.
    FixedWindowInput,
    Kind::FixedWindow
);
scenario_type!(
    /// A sliding-window scenario.
    SlidingWindowInput,
    Kind::SlidingWindow
);
scenario_type!(
    /// A GCRA scenario.
    GcraInput,
    Kind::Gcra
);
scenario_type!(
    /// A leaky-bucket meter scenario.
    LeakyMeterInput,
    Kind::LeakyMeter
);
scenario_type!(
    /// A leaky-bucket shaper scenario.
    LeakyShaperInput,
    Kind::LeakyShaper
);
scenario_type!(
    /// A sliding-window counter scenario.
    SlidingCounterInput,
    Kind::SlidingCounter
);
scenario_type!(
    /// A sliding-window log scenario.
    SlidingLogInput,
    Kind::SlidingLog
);

/// A waiting scenario: any limiter with a queue, waiters driven by hand; optionally (the
/// moving-clock sliding-window target) short segments and the clock advancing a few
/// nanoseconds after every operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitScenario {
    /// The limiter and its options.
    pub shape: Shape,
    /// Queue limit in permits (`Same` = the permit limit).
    pub queue_limit: Count,
    /// `QueueOrder::NewestFirst` (else `OldestFirst`).
    pub newest_first: bool,
    /// The clock's reading at creation.
    pub start: Start,
    /// Moving clock only: the segment length in ns is `1 + seg % 8`.
    pub seg: u8,
    /// What to do.
    pub ops: Vec<Op>,
    /// Moving clock only: after operation `i`, the clock advances `steps[i] % 4` ns.
    pub steps: Vec<u8>,
}

/// Which waiting target a [`WaitScenario`] belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitKind {
    /// Any of the four limiters (the first byte chooses), clock moved by operations only.
    Any,
    /// The sliding window with 1–8 ns segments, the clock moving after every operation.
    MovingSliding,
}

const KINDS: [Kind; 4] = [
    Kind::Concurrency,
    Kind::TokenBucket,
    Kind::FixedWindow,
    Kind::SlidingWindow,
];

impl WaitScenario {
    /// Whether the clock moves after every operation.
    pub fn moving(&self) -> bool {
        self.seg > 0
    }

    /// Decodes a waiting scenario.
    pub fn decode(which: WaitKind, u: &mut Unstructured<'_>) -> Self {
        let mut r = Reader::new(u);
        let kind = match which {
            WaitKind::Any => KINDS[usize::from(r.tag(4))],
            WaitKind::MovingSliding => Kind::SlidingWindow,
        };
        let shape = Shape::decode(kind, &mut r);
        let queue_limit = Count::decode(&mut r);
        let newest_first = r.u8() & 1 == 1;
        let start = Start::decode(&mut r);
        let seg = match which {
            WaitKind::Any => 0,
            WaitKind::MovingSliding => r.u8() % 8 + 1,
        };
        let mut ops = Vec::new();
        let mut steps = Vec::new();
        while !r.is_empty() && ops.len() < MAX_OPS {
            ops.push(Op::decode_waiting(&mut r));
            if which == WaitKind::MovingSliding {
                steps.push(r.u8());
            }
        }
        WaitScenario {
            shape,
            queue_limit,
            newest_first,
            start,
            seg,
            ops,
            steps,
        }
    }

    /// The bytes that decode to this scenario.
    pub fn encode(&self, which: WaitKind) -> Vec<u8> {
        let mut w = Writer::default();
        if which == WaitKind::Any {
            let kind = match self.shape {
                Shape::Concurrency { .. } => 0,
                Shape::TokenBucket { .. } => 1,
                Shape::FixedWindow { .. } => 2,
                Shape::SlidingWindow { .. } => 3,
                // Not waiting shapes: never decoded into a waiting scenario.
                Shape::Gcra { .. }
                | Shape::LeakyMeter { .. }
                | Shape::LeakyShaper { .. }
                | Shape::SlidingCounter { .. }
                | Shape::SlidingLog { .. } => 255,
            };
            w.u8(kind);
        }
        self.shape.encode(&mut w);
        self.queue_limit.encode(&mut w);
        w.u8(u8::from(self.newest_first));
        self.start.encode(&mut w);
        if which == WaitKind::MovingSliding {
            w.u8(self.seg.saturating_sub(1));
        }
        for (i, op) in self.ops.iter().enumerate() {
            // Tags 0..=19 mean the same under both decoders; 20.. are the waiter operations.
            op.encode(&mut w);
            if which == WaitKind::MovingSliding {
                w.u8(self.steps.get(i).copied().unwrap_or(0));
            }
        }
        w.bytes
    }
}

/// The `waiting` target's input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitingInput(pub WaitScenario);

impl<'a> Arbitrary<'a> for WaitingInput {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(WaitingInput(WaitScenario::decode(WaitKind::Any, u)))
    }
    fn arbitrary_take_rest(mut u: Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(WaitingInput(WaitScenario::decode(WaitKind::Any, &mut u)))
    }
}

/// The `sliding_window_moving` target's input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MovingSlidingInput(pub WaitScenario);

impl<'a> Arbitrary<'a> for MovingSlidingInput {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(MovingSlidingInput(WaitScenario::decode(
            WaitKind::MovingSliding,
            u,
        )))
    }
    fn arbitrary_take_rest(mut u: Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(MovingSlidingInput(WaitScenario::decode(
            WaitKind::MovingSliding,
            &mut u,
        )))
    }
}

/// A duration given to the options target: edge values and arbitrary ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dur {
    /// Zero.
    Zero,
    /// 1 ns.
    Nano,
    /// `u64::MAX` ns: the longest valid period.
    MaxNanos,
    /// `u64::MAX` ns + 1 ns (2^64 ns).
    MaxNanosPlus1,
    /// `Duration::MAX`.
    Max,
    /// One of [`PERIODS`].
    Listed(u8),
    /// Any seconds and nanoseconds (nanoseconds taken modulo 10^9).
    Any(u64, u32),
}

impl Dur {
    /// The duration.
    pub fn resolve(self) -> core::time::Duration {
        use core::time::Duration;
        match self {
            Dur::Zero => Duration::ZERO,
            Dur::Nano => Duration::from_nanos(1),
            Dur::MaxNanos => Duration::from_nanos(u64::MAX),
            Dur::MaxNanosPlus1 => Duration::from_nanos(u64::MAX) + Duration::from_nanos(1),
            Dur::Max => Duration::MAX,
            Dur::Listed(i) => Duration::from_nanos(PERIODS[usize::from(i) % PERIODS.len()]),
            Dur::Any(s, n) => Duration::new(s, n % 1_000_000_000),
        }
    }
}

impl Codec for Dur {
    fn decode(r: &mut Reader<'_, '_>) -> Self {
        match r.tag(8) {
            0 => Dur::Zero,
            1 => Dur::Nano,
            2 => Dur::MaxNanos,
            3 => Dur::MaxNanosPlus1,
            4 => Dur::Max,
            5 | 6 => Dur::Listed(r.u8()),
            _ => Dur::Any(r.u64(), r.u32()),
        }
    }
    fn encode(&self, w: &mut Writer) {
        match *self {
            Dur::Zero => w.u8(0),
            Dur::Nano => w.u8(1),
            Dur::MaxNanos => w.u8(2),
            Dur::MaxNanosPlus1 => w.u8(3),
            Dur::Max => w.u8(4),
            Dur::Listed(i) => {
                w.u8(5);
                w.u8(i)
            }
            Dur::Any(s, n) => {
                w.u8(7);
                w.u64(s);
                w.u32(n)
            }
        }
    }
}

/// A 32-bit option value for the options target: 0, 1, `u32::MAX` or anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Num {
    /// 0.
    Zero,
    /// 1.
    One,
    /// A small value.
    Small(u8),
    /// `u32::MAX`.
    Max,
    /// Anything.
    Any(u32),
}

impl Num {
    /// The value.
    pub fn resolve(self) -> u32 {
        match self {
            Num::Zero => 0,
            Num::One => 1,
            Num::Small(v) => u32::from(v),
            Num::Max => u32::MAX,
            Num::Any(v) => v,
        }
    }
}

impl Codec for Num {
    fn decode(r: &mut Reader<'_, '_>) -> Self {
        match r.tag(6) {
            0 => Num::Zero,
            1 => Num::One,
            2 | 5 => Num::Small(r.u8()),
            3 => Num::Max,
            _ => Num::Any(r.u32()),
        }
    }
    fn encode(&self, w: &mut Writer) {
        match *self {
            Num::Zero => w.u8(0),
            Num::One => w.u8(1),
            Num::Small(v) => {
                w.u8(2);
                w.u8(v)
            }
            Num::Max => w.u8(3),
            Num::Any(v) => {
                w.u8(4);
                w.u32(v)
            }
        }
    }
}

/// One set of options for every limiter, tried against every constructor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionsInput {
    /// Permit/token limit.
    pub limit: Num,
    /// Tokens per period.
    pub per_period: Num,
    /// Segments per window.
    pub segments: Num,
    /// Queue limit (validated by nothing yet; must never matter).
    pub queue_limit: Num,
    /// Newest-first queue order.
    pub newest_first: bool,
    /// Period / window.
    pub period: Dur,
    /// The clock's reading at creation.
    pub start: u64,
}

impl Codec for OptionsInput {
    fn decode(r: &mut Reader<'_, '_>) -> Self {
        OptionsInput {
            limit: Num::decode(r),
            per_period: Num::decode(r),
            segments: Num::decode(r),
            queue_limit: Num::decode(r),
            newest_first: r.u8() & 1 == 1,
            period: Dur::decode(r),
            start: r.u64(),
        }
    }
    fn encode(&self, w: &mut Writer) {
        self.limit.encode(w);
        self.per_period.encode(w);
        self.segments.encode(w);
        self.queue_limit.encode(w);
        w.u8(u8::from(self.newest_first));
        self.period.encode(w);
        w.u64(self.start);
    }
}

impl<'a> Arbitrary<'a> for OptionsInput {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Ok(OptionsInput::decode(&mut Reader::new(u)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips() {
        let s = Scenario {
            shape: Shape::SlidingWindow {
                cap: 5,
                limit: Count::Any(77),
                segments: Segments::Within(3),
                window: WindowLen::PerSegment(Period::Any(12345)),
            },
            start: Start::NearMax(3),
            ops: vec![
                Op::Acquire(Permits::Any(9)),
                Op::Acquire(Permits::Small(4)),
                Op::Advance(Span::Any(u64::MAX)),
                Op::Back(Span::Huge(2)),
                Op::Set(Point::OriginPlus(Span::Periods(3))),
                Op::Set(Point::Any(42)),
                Op::DropLease(3),
                Op::ForgetLease(1),
                Op::Release(Permits::Limit),
                Op::Replenish,
                Op::Close,
                Op::Read,
            ],
        };
        let bytes = s.encode();
        let back = Scenario::decode(Kind::SlidingWindow, &mut Unstructured::new(&bytes));
        assert_eq!(back, s);
        let o = OptionsInput {
            limit: Num::Any(5),
            per_period: Num::Small(3),
            segments: Num::Max,
            queue_limit: Num::Zero,
            newest_first: true,
            period: Dur::Any(7, 8),
            start: 99,
        };
        let mut w = Writer::default();
        o.encode(&mut w);
        let back = OptionsInput::decode(&mut Reader::new(&mut Unstructured::new(&w.bytes)));
        assert_eq!(back, o);
    }
}
