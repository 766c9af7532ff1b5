//! Option types shared by the limiters, and the error for invalid options (reported once, at construction).

use core::fmt;

/// The queue limit of the quota-style constructors (`per_second`, `per_minute`, `per_hour`,
/// `per`, `with_period`): `u32::MAX` permits, in practice unbounded, oldest first, so that
/// `acquire(n).await` waits, as a Rust user reads it (tokio's `Semaphore::acquire`, governor's
/// `until_ready`). A queue here costs no memory (a waiter's node lives in its future): the bound
/// is the number of futures you create. The .NET-shaped `new` constructors keep .NET's queue
/// limit of 0 (an `acquire` that cannot be granted at once is refused with
/// [`Reason::QueueFull`](crate::Reason::QueueFull)); `with_queue` sets either. A limiter built
/// without a queue ([`NoQueue`](crate::NoQueue)) accepts this default and ignores it.
///
/// ```
/// use tollgate::{QueueOrder, TokenBucketOptions, UNBOUNDED_QUEUE};
///
/// let opts = TokenBucketOptions::per_second(10);
/// assert_eq!((opts.queue_limit, opts.queue_order), (UNBOUNDED_QUEUE, QueueOrder::OldestFirst));
/// assert_eq!(TokenBucketOptions::new(10, 1, core::time::Duration::from_millis(100)).queue_limit, 0);
/// ```
pub const UNBOUNDED_QUEUE: u32 = u32::MAX;

/// Why a limiter's options were refused. Every limiter validates its options once, at
/// construction; a limiter that exists has valid options.
///
/// ```
/// use core::time::Duration;
/// use tollgate::{OptionsError, TokenBucketLimiter, TokenBucketOptions};
///
/// let zero = TokenBucketLimiter::new(TokenBucketOptions::new(0, 1, Duration::from_secs(1)));
/// let err = zero.err().unwrap();
/// assert_eq!(err, OptionsError::ZeroLimit);
/// assert_eq!(err.to_string(), "the permit limit must be at least 1");
/// let no_period = TokenBucketOptions::new(10, 1, Duration::ZERO).validate();
/// assert_eq!(no_period, Err(OptionsError::ZeroPeriod));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum OptionsError {
    /// The permit (or token) limit is zero.
    ZeroLimit,
    /// The token bucket adds zero tokens per period.
    ZeroTokensPerPeriod,
    /// The replenishment period or window is zero.
    ZeroPeriod,
    /// A period or window too long to ever end: a limiter reads its clock as stepped back from
    /// 2^63 ns (292 years) after its creation on, so every wait it gives must end before then.
    /// The bounds:
    /// - a period or window of 2^63 ns or more (every limiter);
    /// - for the [`SlidingCounterLimiter`](crate::SlidingCounterLimiter), a window of 2^62 ns
    ///   (146 years) or more: its estimate reaches back a whole window, so a refusal may wait
    ///   to the end of the next window;
    /// - for GCRA and the leaky buckets, `burst × interval` (or `capacity × leak interval`)
    ///   of 2^61 ns (73 years) or more: the theoretical arrival time and its tolerance share
    ///   the 62 bits of the state word with room for 73 years of uptime.
    PeriodTooLong,
    /// The sliding window has zero segments.
    ZeroSegments,
    /// More segments than the limiter's const capacity `max` holds.
    TooManySegments {
        /// The capacity (the limiter's `N` parameter).
        max: usize,
    },
    /// The window is shorter than one nanosecond per segment.
    SegmentTooShort,
    /// A [`SlidingCounterLimiter`](crate::SlidingCounterLimiter)'s window of 1 ns: it must be
    /// at least 2 ns (its state word counts windows in 62 bits, beside its queue and close
    /// flags, which holds every window of 2 ns or more to the clock's 2^63 ns horizon).
    WindowTooShort,
    /// More than one token per 2 ns: too fast for a `KeyedLimiter`'s 64-bit state.
    RateTooHigh,
    /// A permit limit larger than the limiter's native word holds (a concurrency limiter on a
    /// 32-bit target holds at most 2^27 - 1 permits; a `KeyedLimiter`'s sliding counter, whose
    /// two counts share 64 bits with the window index, about `√(2 × window in ns)`: 32,767 for
    /// a one-second window).
    LimitTooLarge {
        /// The largest limit this target's word holds.
        max: u32,
    },
    /// A partition capacity larger than the limiter's table can hold.
    CapacityTooLarge {
        /// The largest capacity the table can hold on this target.
        max: usize,
    },
    /// The allocator refused the memory the configured capacity needs.
    OutOfMemory {
        /// The bytes asked for.
        bytes: usize,
    },
    /// A limit above the fixed capacity `max` of the limiter's storage (a sliding log's ring).
    ExceedsCapacity {
        /// The capacity (the limiter's `N` parameter).
        max: usize,
    },
    /// A reconfiguration that changes what is fixed when the limiter is created: the period or
    /// window (the time scale its state is counted in) or the queue order.
    FixedAtCreation,
    /// A queue limit above zero for a limiter built without a wait queue
    /// ([`NoQueue`](crate::NoQueue)).
    NoWaitQueue,
    /// An adaptive limiter's bounds out of order: its minimum limit, initial limit and maximum
    /// limit must be at least 1 and in that order
    /// ([`AdaptiveOptions`](crate::adaptive::AdaptiveOptions)).
    LimitBounds,
}

impl fmt::Display for OptionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OptionsError::ZeroLimit => f.write_str("the permit limit must be at least 1"),
            OptionsError::ZeroTokensPerPeriod => {
                f.write_str("tokens per period must be at least 1")
            }
            OptionsError::ZeroPeriod => {
                f.write_str("the period or window must be longer than zero")
            }
            OptionsError::PeriodTooLong => f.write_str(
                "the period or window is too long: every wait must end within 2^63 nanoseconds \
                 (292 years) of the limiter's creation (2^63 ns for a period, 2^62 ns for a \
                 sliding counter's window, 2^61 ns for GCRA's burst × interval)",
            ),
            OptionsError::ZeroSegments => f.write_str("segments per window must be at least 1"),
            OptionsError::TooManySegments { max } => {
                write!(
                    f,
                    "segments per window must be at most {max} (the limiter's capacity)"
                )
            }
            OptionsError::SegmentTooShort => {
                f.write_str("the window must be at least one nanosecond per segment")
            }
            OptionsError::WindowTooShort => {
                f.write_str("a sliding counter's window must be at least 2 nanoseconds")
            }
            OptionsError::RateTooHigh => {
                f.write_str("a keyed limiter allows at most one token per 2 nanoseconds")
            }
            OptionsError::LimitTooLarge { max } => {
                write!(f, "the permit limit must be at most {max} for this limiter")
            }
            OptionsError::CapacityTooLarge { max } => {
                write!(f, "the partition capacity must be at most {max}")
            }
            OptionsError::OutOfMemory { bytes } => {
                write!(
                    f,
                    "could not allocate {bytes} bytes for the partition capacity"
                )
            }
            OptionsError::ExceedsCapacity { max } => {
                write!(
                    f,
                    "the limit must be at most {max} (the limiter's capacity)"
                )
            }
            OptionsError::FixedAtCreation => f.write_str(
                "the period, window and queue order cannot change after the limiter is created",
            ),
            OptionsError::NoWaitQueue => f.write_str(
                "the queue limit must be 0 for a limiter built without a wait queue (NoQueue)",
            ),
            OptionsError::LimitBounds => f.write_str(
                "an adaptive limiter's minimum, initial and maximum limits must be at least 1 \
                 and in that order",
            ),
        }
    }
}

impl core::error::Error for OptionsError {}

impl OptionsError {
    /// A period (or window) option in nanoseconds: longer than zero, and shorter than 2^63 ns,
    /// since a limiter reads its clock as stepped back from 2^63 ns after its creation on, so a
    /// longer period would never end ([`period_nanos`](crate::ticks::period_nanos)).
    pub(crate) const fn period_ns(period: core::time::Duration) -> Result<u64, Self> {
        match crate::ticks::period_nanos(period) {
            None => Err(OptionsError::PeriodTooLong),
            Some(0) => Err(OptionsError::ZeroPeriod),
            Some(ns) => Ok(ns),
        }
    }

    /// The value of `result` in a constant, or a stop of the build with the error's message
    /// (a `const` panic is a compile error).
    #[track_caller]
    pub(crate) const fn valid_in_const<T: Copy>(result: Result<T, Self>) -> T {
        match result {
            Ok(value) => value,
            Err(e) => e.panic_in_const(),
        }
    }

    /// Stops the evaluation of a constant with this error's message: the `at_epoch`
    /// constructors, which build `static` limiters, turn invalid options into a compile error.
    #[track_caller]
    pub(crate) const fn panic_in_const(self) -> ! {
        match self {
            OptionsError::ZeroLimit => {
                panic!("invalid options: the permit limit must be at least 1")
            }
            OptionsError::ZeroTokensPerPeriod => {
                panic!("invalid options: tokens per period must be at least 1")
            }
            OptionsError::ZeroPeriod => {
                panic!("invalid options: the period or window must be longer than zero")
            }
            OptionsError::PeriodTooLong => {
                panic!("invalid options: the period or window is too long")
            }
            OptionsError::ZeroSegments => {
                panic!("invalid options: segments per window must be at least 1")
            }
            OptionsError::TooManySegments { .. } => {
                panic!("invalid options: more segments than the limiter's capacity")
            }
            OptionsError::SegmentTooShort => {
                panic!("invalid options: the window must be at least one nanosecond per segment")
            }
            OptionsError::LimitTooLarge { .. } => {
                panic!("invalid options: the permit limit is too large for this target")
            }
            OptionsError::NoWaitQueue => {
                panic!("invalid options: the queue limit must be 0 for a limiter without a queue")
            }
            _ => panic!("invalid options"),
        }
    }
}

/// The order in which queued requests are served.
///
/// ```
/// use core::{future::Future, pin::pin, task::{Context, Poll, Waker}};
/// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Limiter, QueueOrder, Reason};
///
/// let mut cx = Context::from_waker(Waker::noop());
/// // One permit, a queue of one: a newcomer evicts the oldest waiter.
/// let opts = ConcurrencyOptions::new(1).with_queue(1, QueueOrder::NewestFirst);
/// let limiter = ConcurrencyLimiter::new(opts).unwrap();
/// let held = limiter.try_acquire(1).unwrap();
/// let mut old = pin!(limiter.acquire(1));
/// assert!(old.as_mut().poll(&mut cx).is_pending());
/// let mut new = pin!(limiter.acquire(1));
/// assert!(new.as_mut().poll(&mut cx).is_pending());
/// assert!(matches!(old.poll(&mut cx), Poll::Ready(Err(r)) if r.reason() == Reason::Evicted));
/// drop(held); // the newest waiter gets the permit
/// assert!(matches!(new.poll(&mut cx), Poll::Ready(Ok(_))));
/// assert_eq!(QueueOrder::default(), QueueOrder::OldestFirst);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum QueueOrder {
    /// First come, first served; a non-empty queue blocks newcomers.
    #[default]
    OldestFirst,
    /// Last come, first served; newcomers may take free permits ahead of the queue, and a full
    /// queue evicts its oldest waiters to make room.
    NewestFirst,
}

/// `with_queue` for an options type with `queue_limit` and `queue_order` fields: one definition
/// for every queued limiter's options. `$example` is an expression of the type, for the doc test.
macro_rules! with_queue {
    ($ty:ident, $example:literal) => {
        impl $ty {
            /// The same options with a wait queue of up to `limit` permits, served in `order`
            /// (a limit of 0: nothing waits, and a waiting acquisition that does not fit at
            /// once is refused).
            ///
            #[doc = concat!(
                "```\n",
                "use core::time::Duration;\n",
                "use tollgate::*;\n",
                "\n",
                "let q = ", $example, ".with_queue(3, QueueOrder::NewestFirst);\n",
                "assert_eq!((q.queue_limit, q.queue_order), (3, QueueOrder::NewestFirst));\n",
                "```",
            )]
            pub const fn with_queue(self, limit: u32, order: $crate::options::QueueOrder) -> Self {
                Self {
                    queue_limit: limit,
                    queue_order: order,
                    ..self
                }
            }
        }
    };
}
pub(crate) use with_queue;

/// An options type of `permit_limit`, `window` (their docs given), `queue_limit` and
/// `queue_order`, with `new(permit_limit, window)` (no queue), and with `per`, `per(period, n)`,
/// the same as `new(n, period)`. `$what` completes the sentence "`permit_limit` permits ..." in
/// the docs of `new`.
macro_rules! limit_per_window {
    (
        $(#[$doc:meta])*
        pub struct $ty:ident {
            $(#[$limit:meta])* permit_limit,
            $(#[$window:meta])* window $(,)?
        }
        $what:literal $(, per = $per_what:literal)?
    ) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub struct $ty {
            $(#[$limit])*
            pub permit_limit: u32,
            $(#[$window])*
            pub window: ::core::time::Duration,
            /// Permits that may wait in the queue (for waiting acquisitions).
            #[doc(alias = "QueueLimit")]
            pub queue_limit: u32,
            /// The order queued requests are served in.
            #[doc(alias = "QueueProcessingOrder")]
            pub queue_order: $crate::options::QueueOrder,
        }

        impl $ty {
            #[doc = concat!(
                "`permit_limit` permits ", $what, "; no queue.\n\n",
                "```\n",
                "use core::time::Duration;\n",
                "use tollgate::", stringify!($ty), ";\n",
                "\n",
                "let opts = ", stringify!($ty), "::new(10, Duration::from_secs(60));\n",
                "assert_eq!((opts.permit_limit, opts.window), (10, Duration::from_secs(60)));\n",
                "assert_eq!(opts.queue_limit, 0);\n",
                "```",
            )]
            pub const fn new(permit_limit: u32, window: ::core::time::Duration) -> Self {
                Self {
                    permit_limit,
                    window,
                    queue_limit: 0,
                    queue_order: $crate::options::QueueOrder::OldestFirst,
                }
            }

            $(
                #[doc = concat!(
                    "`n` permits ", $per_what, " (the same as [`new`](Self::new)).\n\n",
                    "```\n",
                    "use core::time::Duration;\n",
                    "use tollgate::", stringify!($ty), ";\n",
                    "\n",
                    "let day = Duration::from_secs(86_400);\n",
                    "let waiting = (tollgate::UNBOUNDED_QUEUE, tollgate::QueueOrder::OldestFirst);\n",
                    "assert_eq!(", stringify!($ty), "::per(day, 10), ", stringify!($ty), "::new(10, day).with_queue(waiting.0, waiting.1));\n",
                    "```",
                )]
                pub const fn per(period: ::core::time::Duration, n: u32) -> Self {
                    Self::new(n, period).with_queue($crate::options::UNBOUNDED_QUEUE, $crate::options::QueueOrder::OldestFirst)
                }
            )?
        }
    };
}
pub(crate) use limit_per_window;
