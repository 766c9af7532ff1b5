//! Code shared by the rate limiters' fronts and cores.

/// The public face of a rate limiter, in one invocation of the four macros every rate limiter
/// uses: its options' [`with_queue`](crate::options::with_queue), its constructors ([`limiter_front!`](crate::rate_limiter::limiter_front), whose doc
/// examples build options with `new`), its queueless constructors
/// ([`unqueued_constructors!`](crate::rate_limiter::unqueued_constructors), with `unqueued` if
/// given, else `new`; `apply` changes a queueless limiter's configuration) and its capabilities
/// ([`rate_limiter!`](crate::rate_limiter::rate_limiter), whose examples wait in a queue of
/// `queued`).
macro_rules! rate_limiter_front {
    (
        $ty:ident $(<const $n:ident = $d:literal>)?, $options:ident, $what:literal,
        apply = $apply:expr, new: $opts:literal, queued: $queued:literal $(,)?
    ) => {
        $crate::core_common::rate_limiter_front! {
            $ty $(<const $n = $d>)?, $options, $what,
            apply = $apply, new: $opts, unqueued: $opts, queued: $queued,
        }
    };
    (
        $ty:ident $(<const $n:ident = $d:literal>)?, $options:ident, $what:literal,
        apply = $apply:expr, new: $opts:literal, unqueued: $unqueued:literal,
        queued: $queued:literal $(,)?
    ) => {
        $crate::options::with_queue!($options, $opts);
        $crate::rate_limiter::limiter_front!($ty $(<const $n = $d>)?, $options, $what, $opts);
        $crate::rate_limiter::unqueued_constructors!(
            $ty $(<const $n = $d>)?,
            $options,
            $unqueued,
            apply = $apply,
        );
        $crate::rate_limiter::rate_limiter!($ty $(<const $n>)?, $queued);
    };
}
pub(crate) use rate_limiter_front;

/// What every rate core holds besides its state and its configuration: its time in its own
/// unit, its statistics, its queue (or `NoQueue`) and its clock.
///
/// Laid out in declaration order (`repr(C)`): with the compiler's order, the counters (zero at
/// creation) sat right after the state's padding, and building a limiter at run time on a
/// 32-bit MCU copied the two with a `memcpy` call, which linked compiler_builtins' 730-byte
/// `memcpy` into every firmware image (`benches/firmware-size`: the token bucket program 1,688
/// B, 924 B in this order).
#[derive(Debug)]
#[repr(C)]
pub(crate) struct RateBase<C, Q> {
    pub(crate) ticker: crate::ticks::Ticker,
    pub(crate) counters: crate::stats::Counters,
    pub(crate) queue: Q,
    pub(crate) clock: C,
}

impl<C, Q> RateBase<C, Q> {
    crate::sync::const_unless_loom! {
        /// Time in units of `unit` ns counted from `origin`, nothing counted yet.
        pub(crate) fn new(origin: crate::clock::Instant, unit: u64, queue: Q, clock: C) -> Self {
            Self {
                ticker: crate::ticks::Ticker::new(origin, unit),
                counters: crate::stats::Counters::new(),
                queue,
                clock,
            }
        }
    }
}

impl<C: crate::clock::Clock, Q> RateBase<C, Q> {
    /// Now, in nanoseconds since the core's origin (one clock reading).
    #[inline(always)]
    pub(crate) fn elapsed(&self) -> u64 {
        self.ticker.elapsed(self.clock.now())
    }

    /// [`elapsed`](Self::elapsed) unclamped ([`Ticker::elapsed_raw`](crate::ticks::Ticker::elapsed_raw)).
    #[inline(always)]
    pub(crate) fn elapsed_raw(&self) -> u64 {
        self.ticker.elapsed_raw(self.clock.now())
    }

    /// Now, as the tick it falls in and the nanoseconds into that tick (one clock reading).
    #[inline(always)]
    pub(crate) fn tick(&self) -> (u64, u64) {
        self.ticker.tick(self.clock.now())
    }
}

/// The debt bound of a window limiter (sliding window, counter, log) of `limit` whose counts
/// hold at most `field_max`: one limit past it, less where the count would pass its field
/// (`min(limit, field_max - limit)`, as the token bucket bounds its debt).
#[inline]
pub(crate) const fn window_debt_bound(limit: u32, field_max: u32) -> u32 {
    let room = field_max.saturating_sub(limit);
    if limit < room {
        limit
    } else {
        room
    }
}

/// A window limiter's constants as one decision reads them: the sliding counter's and the
/// sliding log's `Shape`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowShape {
    /// Permits per window, at least 1 (for the sliding log, at most its ring's `N`).
    pub limit: u32,
    /// The window in nanoseconds, at least 1.
    pub window: u64,
}

/// A rolling window's limit, which `reconfigure` changes while decisions read it (only ever a
/// `u32`), and its length in nanoseconds, fixed at creation: what the sliding counter's and the
/// sliding log's cores read their window's shape from.
#[derive(Debug)]
pub(crate) struct WindowLimit {
    limit: crate::sync::AtomicU64,
    /// The window in nanoseconds.
    pub(crate) window: u64,
}

impl WindowLimit {
    crate::sync::const_unless_loom! {
        pub(crate) fn new(limit: u32, window: u64) -> Self {
            Self {
                limit: crate::sync::AtomicU64::new(limit as u64),
                window,
            }
        }
    }

    /// Permits per window now.
    #[inline(always)]
    pub(crate) fn limit(&self) -> u32 {
        // Only ever stored from a `u32`.
        self.limit.load(crate::sync::Ordering::Acquire) as u32
    }

    /// The shape now: one reading of the limit.
    #[inline(always)]
    pub(crate) fn shape(&self) -> WindowShape {
        WindowShape {
            limit: self.limit(),
            window: self.window,
        }
    }

    /// The window.
    pub(crate) fn window(&self) -> core::time::Duration {
        core::time::Duration::from_nanos(self.window)
    }

    /// Changes the limit (its writers are serialized by the caller).
    pub(crate) fn set(&self, limit: u32) {
        self.limit
            .store(u64::from(limit), crate::sync::Ordering::Release);
    }
}

/// A sliding limiter: its type (the generics are the clock `C`, the ring's `N` if any, and the
/// queue `Q`; the fields are given), its constructors, `reconfigure` and front
/// ([`rate_limiter_front!`]).
///
/// `make` builds the limiter from its `options`, what their `validate` returned, its queue, the
/// instant its time counts from and its clock; `build` and `at_epoch_with` (and with a ring of
/// `N`, the public `with_capacity`, with the docs given) validate the options and make it.
/// `reconfigure`, with the docs given, takes the new limit from `checked` and applies it under
/// the queue lock with the core's `set_limit` (the queue then fails the waiters larger than the
/// new limit and serves the rest); a queueless limiter sets it at once.
macro_rules! sliding_limiter {
    (
        $(#[$doc:meta])*
        pub struct $ty:ident $(<const $n:ident = $d:literal>)? { $($fields:tt)* }
        options: $options:ident, front: $what:literal,
        new: $new:literal, queued: $queued:literal;
        make = |$o:ident, $valid:ident, $q:ident, $origin:ident, $c:ident| $make:expr;
        $(with_capacity { $(#[$with_capacity:meta])* })?
        $(#[$reconfigure:meta])* reconfigure;
    ) => {
        $(#[$doc])*
        pub struct $ty<
            C: $crate::clock::Clock = $crate::clock::DefaultClock,
            $(const $n: usize = $d,)?
            Q = $crate::wait::WaitQueue,
        > {
            $($fields)*
        }

        impl<
            C: $crate::clock::Clock,
            $(const $n: usize,)?
            Q: $crate::queue_kind::QueueKind,
        > $ty<C, $($n,)? Q> {
            $(
                $(#[$with_capacity])*
                pub fn with_capacity(options: $options, clock: C) -> Result<Self, $crate::options::OptionsError> {
                    Self::build(options, clock)
                }
            )?

            fn build($o: $options, $c: C) -> Result<Self, $crate::options::OptionsError> {
                let $valid = $o.validate($($n)?)?;
                let $q = Q::for_options($o.queue_limit, $o.queue_order)?;
                let $origin = $c.now();
                Ok($make)
            }

            $crate::sync::const_unless_loom! {
                /// A limiter of valid `options` whose time counts from the clock's epoch.
                fn at_epoch_with($o: $options, $q: Q, $c: C) -> Self {
                    let $valid = $crate::options::OptionsError::valid_in_const($o.validate($($n)?));
                    let $origin = $crate::clock::Instant::ZERO;
                    $make
                }
            }
        }

        impl<C: $crate::clock::Clock $(, const $n: usize)?> $ty<C $(, $n)?> {
            $(#[$reconfigure])*
            pub fn reconfigure(&self, options: $options) -> Result<(), $crate::options::OptionsError> {
                let limit = self.checked(&options)?;
                let queue = &self.core.base.queue;
                queue.reconfigure(self, options.queue_limit, limit, || {
                    self.core.set_limit(limit)
                });
                Ok(())
            }
        }

        $crate::core_common::rate_limiter_front! {
            $ty $(<const $n = $d>)?, $options, $what,
            apply = |l, limit, _| l.core.set_limit(limit),
            new: $new, queued: $queued,
        }
    };
}
pub(crate) use sliding_limiter;
