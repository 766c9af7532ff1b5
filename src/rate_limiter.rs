//! The one wiring of a rate limiter: [`rate_limiter!`] implements `Limiter`, `Peek`,
//! `Replenishing`, the waiting `Source` and the `acquire` / `acquire_blocking` methods for a
//! limiter type whose `core` field is a rate core — [`BucketCore`](crate::bucket::BucketCore)
//! (token bucket, fixed window), [`GcraCore`](crate::gcra::GcraCore) (GCRA, leaky meter,
//! leaky shaper), or the cores of the sliding window, the sliding counter and the sliding log.
//! Every impl here forwards to the core: the behaviour is the core's.
//!
//! What a core provides, by trait: [`RateCore`](crate::rate_core::RateCore) (its limit, period,
//! availability, statistics, idleness and `replenished`, and its side of the waiting protocol:
//! `take_locked`, `take_for_waiter`, `give_back`, `wait_for`, `wait_behind_waiters`), the
//! decision ([`QuickPath`](crate::quick_path::QuickPath): the counted `try_acquire_counted`,
//! `peek`, the uncounted `take`; the sliding log's are inherent), and its state word
//! ([`CellCore`](crate::state_cell::CellCore): `close`, `is_closed`, `has_waiters`,
//! `clear_waiters`; the sliding log's are inherent).

/// Implements the queued rate limiter's traits and waiting methods for `$ty<C>` (see the
/// module docs). `$opts` is the text of options for the examples of the `acquire` methods:
/// one permit now, the next 100 ms later, a queue of at least one.
macro_rules! rate_limiter {
    // The core's traits, in scope for the impls: `RateCore`; `CellCore` for the cores whose
    // state is one word (`close`, `is_closed`, `has_waiters`, `clear_waiters`) and `QuickPath`
    // for those with a quick path (the decision); the sliding log's are its own.
    (@traits) => {
        #[allow(unused_imports)]
        use $crate::state_cell::CellCore as _;
        #[allow(unused_imports)]
        use $crate::quick_path::QuickPath as _;
        #[allow(unused_imports)]
        use $crate::rate_core::RateCore as _;
    };
    // What both forms of `Limiter` read from the core the same way.
    (@read) => {
        fn available_permits(&self) -> u64 {
            self.core.available()
        }
        fn statistics(&self) -> $crate::lease::Statistics {
            self.core.statistics()
        }
        fn idle_duration(&self) -> Option<::core::time::Duration> {
            self.core.idle_duration()
        }
    };
    // The `NoQueue` form: `Limiter`, `Peek` and `Replenishing`, the same decisions with nothing
    // to serve or wait in.
    (unqueued $ty:ident $(<const $n:ident>)?, $opts:literal) => {
        $crate::rate_limiter::rate_limiter!(@traits);

        /// Nothing to release: a rate limiter's permits come back with time. A settle gives
        /// back or takes more (see [`Lease::settle`](crate::Lease::settle)).
        impl<C: $crate::clock::Clock $(, const $n: usize)?> $crate::lease::Release for $ty<C, $($n,)? $crate::queue_kind::NoQueue> {
            fn release(&self, _permits: u32) {}
            fn settle(&self, s: $crate::lease::Settlement) -> Result<(), $crate::lease::SettleError> {
                if s.actual < s.held {
                    self.core.give_back(s.held - s.actual, self.core.unmark(s.stamp));
                    Ok(())
                } else {
                    self.core.take_debt(s.actual - s.held, s.max_debt)
                }
            }
        }

        impl<C: $crate::clock::Clock $(, const $n: usize)?> $ty<C, $($n,)? $crate::queue_kind::NoQueue> {
            /// Settles `lease`, taken from this limiter, to its true cost `actual` (see
            /// [`Lease::settle`](crate::Lease::settle)). A lease of a limiter without a queue
            /// refers to no limiter, so that a firmware image links no settle code it does not
            /// call: it is settled here, by the limiter that granted it.
            ///
            #[doc = concat!(
                "```\n",
                "use core::time::Duration;\nuse tollgate::*;\n",
                "\n",
                "let limiter = ", stringify!($ty), "::without_queue(", $opts, ", ManualClock::new()).unwrap();\n",
                "let all = limiter.available_permits() as u32;\n",
                "let mut lease = limiter.try_acquire(all).unwrap();\n",
                "limiter.settle(&mut lease, 0).unwrap(); // used nothing: all of it back\n",
                "assert_eq!(limiter.available_permits(), u64::from(all));\n",
                "```",
            )]
            pub fn settle(
                &self,
                lease: &mut $crate::lease::Lease<'_>,
                actual: u32,
            ) -> Result<(), $crate::lease::SettleError> {
                lease.settle_with(self, actual)
            }

            /// [`settle`](Self::settle), owing at most `max_debt` permits after it (see
            /// [`Lease::settle_within`](crate::Lease::settle_within)).
            pub fn settle_within(
                &self,
                lease: &mut $crate::lease::Lease<'_>,
                actual: u32,
                max_debt: u32,
            ) -> Result<(), $crate::lease::SettleError> {
                lease.settle_with_within(self, actual, max_debt)
            }
        }

        impl<C: $crate::clock::Clock $(, const $n: usize)?> $crate::limiter::Peek for $ty<C, $($n,)? $crate::queue_kind::NoQueue> {
            fn peek(&self, permits: u32) -> Result<(), $crate::lease::Rejection> {
                self.core.peek(permits)
            }
        }

        /// Without a queue: the same decisions, nothing to serve or wait in.
        impl<C: $crate::clock::Clock $(, const $n: usize)?> $crate::limiter::Limiter for $ty<C, $($n,)? $crate::queue_kind::NoQueue> {
            #[inline]
            fn try_acquire(&self, permits: u32) -> Result<$crate::lease::Lease<'_>, $crate::lease::Rejection> {
                // A detached lease: settled through the limiter (`settle`), so that a firmware
                // image links no settle code it does not call (a lease referring to its limiter
                // keeps the limiter's whole `Release` vtable, settle included: +600 bytes).
                self.core.try_acquire_counted(
                    permits,
                    $crate::lease::Lease::detached,
                    || {},
                )
            }
            $crate::rate_limiter::rate_limiter!(@read);
            fn close(&self) {
                self.core.close();
            }
            fn is_closed(&self) -> bool {
                self.core.is_closed()
            }
        }

        /// Without a queue there is nobody to serve: `replenish` only brings the state up to
        /// date, and `next_service` is always `None`.
        impl<C: $crate::clock::Clock $(, const $n: usize)?> $crate::limiter::Replenishing for $ty<C, $($n,)? $crate::queue_kind::NoQueue> {
            fn replenishment_period(&self) -> ::core::time::Duration {
                self.core.period()
            }
            fn replenish(&self) -> u64 {
                self.core.replenished()
            }
        }
    };
    ($ty:ident $(<const $n:ident>)?, $opts:literal) => {
        $crate::rate_limiter::rate_limiter!(@traits);

        impl<C: $crate::clock::Clock $(, const $n: usize)?> $ty<C $(, $n)?> {
            /// Waits for `permits` in the queue (see [`Acquire`](crate::wait::Acquire)); queued
            /// waiters are served when their permits come, each as of the instant they came:
            /// by any later acquisition, by [`replenish`](crate::Replenishing::replenish), by
            /// the process timer (feature `std`, on a clock that moves by itself), or by a
            /// registered `Driver`.
            ///
            #[doc = concat!(
                "```\n",
                "use core::future::Future;\n",
                "use core::task::{Context, Poll, Waker};\n",
                "use ::core::time::Duration;\n",
                "use tollgate::*;\n",
                "\n",
                "let clock = ManualClock::new();\n",
                "let limiter = ", stringify!($ty), "::with_clock(", $opts, ", &clock).unwrap();\n",
                "let _first = limiter.try_acquire(1).unwrap();\n",
                "let mut cx = Context::from_waker(Waker::noop());\n",
                "let mut waiter = core::pin::pin!(limiter.acquire(1));\n",
                "assert!(waiter.as_mut().poll(&mut cx).is_pending()); // queued: its permit is 100 ms away\n",
                "clock.advance(Duration::from_millis(100));\n",
                "limiter.replenish(); // or any later acquisition, or a `Driver`\n",
                "assert!(matches!(waiter.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));\n",
                "```",
            )]
            pub fn acquire(&self, permits: u32) -> $crate::wait::Acquire<'_, Self> {
                $crate::wait::Acquire::new(self, permits)
            }

            /// Waits on this thread for `permits`, for up to `timeout` (`None`: no limit); the
            /// thread wakes itself when the permits come, so no driver is needed.
            ///
            #[doc = concat!(
                "```\n",
                "use ::core::time::Duration;\n",
                "use tollgate::*;\n",
                "\n",
                "let clock = ManualClock::new();\n",
                "let limiter = ", stringify!($ty), "::with_clock(", $opts, ", &clock).unwrap();\n",
                "// A permit is there: granted at once.\n",
                "assert_eq!(limiter.acquire_blocking(1, None).unwrap().permits(), 1);\n",
                "// The next is 100 ms of clock time away, and this clock stands still:\n",
                "// the wait gives up after its 1 ms timeout and leaves the queue.\n",
                "let r = limiter.acquire_blocking(1, Some(Duration::from_millis(1))).unwrap_err();\n",
                "assert_eq!(r.reason(), Reason::TimedOut);\n",
                "assert_eq!(limiter.statistics().queued_permits, 0);\n",
                "```",
            )]
            #[cfg(feature = "std")]
            pub fn acquire_blocking(
                &self,
                permits: u32,
                timeout: Option<::core::time::Duration>,
            ) -> Result<$crate::lease::Lease<'_>, $crate::lease::Rejection> {
                $crate::wait::acquire_blocking(self, permits, timeout)
            }

            /// Waits for `permits` as [`acquire`](Self::acquire) does, then a random extra
            /// delay drawn from `jitter` (see [`Jitter`](crate::Jitter)), so that waiters
            /// granted together do not all resume together.
            ///
            /// The queue is unchanged: the waiter is granted in queue order at the instant its
            /// permits fit, as with `acquire`; only its completion is delayed, by up to
            /// `jitter`'s bound for the time it waited, counted on this limiter's clock from
            /// the poll that finds the grant. It never completes before its permits came. With
            /// feature `std` (or `embassy-time`) on a clock that moves by itself, the waiters'
            /// timer wakes it when the delay is over; on any other clock (a
            /// [`ManualClock`](crate::ManualClock)) it completes when polled at or after that
            /// instant. A request granted at its first poll waited for nothing and is not
            /// delayed.
            ///
            /// Cancellation-safe as `acquire`: dropped during the delay, the waiter gives its
            /// permits back and is not counted (a waiter dropped after its grant but before it
            /// completed).
            ///
            #[doc = concat!(
                "```\n",
                "use core::future::Future;\n",
                "use core::task::{Context, Waker};\n",
                "use ::core::time::Duration;\n",
                "use tollgate::*;\n",
                "\n",
                "let clock = ManualClock::new();\n",
                "let limiter = ", stringify!($ty), "::with_clock(", $opts, ", &clock).unwrap();\n",
                "let jitter = Jitter::up_to(Duration::from_millis(50)).with_seed(7);\n",
                "let _first = limiter.try_acquire(1).unwrap();\n",
                "let mut cx = Context::from_waker(Waker::noop());\n",
                "let mut waiter = core::pin::pin!(limiter.acquire_jittered(1, &jitter));\n",
                "assert!(waiter.as_mut().poll(&mut cx).is_pending()); // queued: its permit is 100 ms away\n",
                "clock.advance(Duration::from_millis(100)); // granted at the next poll, then held\n",
                "let mut extra = Duration::ZERO;\n",
                "while waiter.as_mut().poll(&mut cx).is_pending() {\n",
                "    clock.advance(Duration::from_millis(1));\n",
                "    extra += Duration::from_millis(1);\n",
                "}\n",
                "assert!(extra <= Duration::from_millis(50)); // within the jitter's bound\n",
                "```",
            )]
            pub fn acquire_jittered<'a>(
                &'a self,
                permits: u32,
                jitter: &'a $crate::jitter::Jitter,
            ) -> impl ::core::future::Future<
                Output = Result<$crate::lease::Lease<'a>, $crate::lease::Rejection>,
            > + 'a {
                $crate::jitter::acquire(self, &self.core.base.clock, permits, jitter)
            }

            /// [`acquire_blocking`](Self::acquire_blocking) with a jittered completion, as
            /// [`acquire_jittered`](Self::acquire_jittered): once granted, the thread sleeps out
            /// an extra delay drawn from `jitter`, on this limiter's clock. `timeout` bounds
            /// the whole call: if it ends during the delay, the grant is returned then (jitter
            /// never turns a grant into a timeout).
            ///
            #[doc = concat!(
                "```\n",
                "use ::core::time::Duration;\n",
                "use tollgate::*;\n",
                "\n",
                "let limiter = ", stringify!($ty), "::new(", $opts, ").unwrap(); // on `StdClock`\n",
                "let jitter = Jitter::up_to(Duration::from_millis(20));\n",
                "let _first = limiter.try_acquire(1).unwrap();\n",
                "let start = std::time::Instant::now();\n",
                "let lease = limiter.acquire_blocking_jittered(1, None, &jitter).unwrap();\n",
                "assert_eq!(lease.permits(), 1);\n",
                "assert!(start.elapsed() >= Duration::from_millis(100)); // never before its permit came\n",
                "```",
            )]
            #[cfg(feature = "std")]
            pub fn acquire_blocking_jittered(
                &self,
                permits: u32,
                timeout: Option<::core::time::Duration>,
                jitter: &$crate::jitter::Jitter,
            ) -> Result<$crate::lease::Lease<'_>, $crate::lease::Rejection> {
                $crate::jitter::acquire_blocking(self, &self.core.base.clock, permits, timeout, jitter)
            }
        }

        /// Nothing to release: a rate limiter's permits come back with time. A settle gives
        /// back (serving the waiters that then fit, as a release would) or takes more (see
        /// [`Lease::settle`](crate::Lease::settle)).
        impl<C: $crate::clock::Clock $(, const $n: usize)?> $crate::lease::Release for $ty<C $(, $n)?> {
            fn release(&self, _permits: u32) {}
            fn settle(&self, s: $crate::lease::Settlement) -> Result<(), $crate::lease::SettleError> {
                if s.actual < s.held {
                    let stamp = self.core.unmark(s.stamp);
                    $crate::wait::Source::give_back(self, s.held - s.actual, stamp);
                    Ok(())
                } else {
                    self.core.take_debt(s.actual - s.held, s.max_debt)
                }
            }
        }

        impl<C: $crate::clock::Clock $(, const $n: usize)?> $crate::limiter::Peek for $ty<C $(, $n)?> {
            fn peek(&self, permits: u32) -> Result<(), $crate::lease::Rejection> {
                self.core.peek(permits)
            }
        }

        impl<C: $crate::clock::Clock $(, const $n: usize)?> $crate::limiter::Limiter for $ty<C $(, $n)?> {
            #[inline]
            fn try_acquire(&self, permits: u32) -> Result<$crate::lease::Lease<'_>, $crate::lease::Rejection> {
                self.core.try_acquire_counted(
                    permits,
                    // By value (`move`): one register each on the general path's call.
                    move |n, stamp| $crate::lease::Lease::settling(n, stamp, self),
                    move || self.core.base.queue.serve(self),
                )
            }
            $crate::rate_limiter::rate_limiter!(@read);
            fn close(&self) {
                self.core.close();
                self.core.base.queue.close(self);
            }
            fn is_closed(&self) -> bool {
                self.core.is_closed()
            }
        }

        impl<C: $crate::clock::Clock $(, const $n: usize)?> $crate::limiter::Replenishing for $ty<C $(, $n)?> {
            /// The period (token bucket), window (fixed window) or emission interval (GCRA and
            /// the leaky buckets: one permit comes back every this long).
            fn replenishment_period(&self) -> ::core::time::Duration {
                self.core.period()
            }
            fn replenish(&self) -> u64 {
                // Nobody waiting, in the common case: no lock (the core's one step from a word
                // with no waiter flag orders this call with a waiter deciding on an earlier
                // clock reading; see `replenished_unwaited`). Reading the flag alone would not:
                // such a waiter may set it just after, and nobody would serve it (the loom
                // models `waiter_served_by_time` find it stranded).
                if let Some(available) = self.core.replenished_unwaited() {
                    return available;
                }
                // Served first: bringing the word up to date caps the refills at the limit,
                // which would lose those that came after a waiter fit.
                self.core.base.queue.serve(self);
                self.core.replenished()
            }
            fn next_service(&self) -> Option<::core::time::Duration> {
                $crate::wait::next_service(self)
            }
            #[cfg(feature = "std")]
            fn attach_driver(&self, handle: $crate::wait::DriverHandle) {
                self.core.base.queue.attach(handle);
            }
        }

        impl<C: $crate::clock::Clock $(, const $n: usize)?> $crate::wait::private::Sealed for $ty<C $(, $n)?> {}

        $crate::limiter::queued_capabilities!($ty<C $(, const $n: usize)?> where C: $crate::clock::Clock);

        impl<C: $crate::clock::Clock $(, const $n: usize)?> $crate::wait::Source for $ty<C $(, $n)?> {
            fn queue(&self) -> &$crate::wait::WaitQueue {
                &self.core.base.queue
            }
            fn counters(&self) -> &$crate::stats::Counters {
                &self.core.base.counters
            }
            fn limit(&self) -> u32 {
                self.core.limit()
            }
            fn take_now(&self, n: u32) -> Result<u64, $crate::lease::Rejection> {
                self.core.take(n, || self.core.base.queue.serve(self))
            }
            fn take_locked(&self, n: u32, flag: bool) -> $crate::wait::LockedTake {
                self.core.take_locked(n, flag)
            }
            fn take_for_waiter(&self, n: u32) -> $crate::wait::LockedTake {
                self.core.take_for_waiter(n)
            }
            fn wait_behind(
                &self,
                ahead: &mut dyn Iterator<Item = u32>,
                n: u32,
            ) -> Option<::core::time::Duration> {
                Some(self.core.wait_behind_waiters(ahead, n))
            }
            fn clear_waiters(&self) {
                self.core.clear_waiters()
            }
            fn give_back(&self, n: u32, stamp: u64) {
                // The waiters whose permits came before now are granted first, as of then:
                // giving back brings the word up to date.
                if self.core.has_waiters() {
                    self.core.base.queue.serve(self);
                }
                if self.core.give_back(n, stamp) {
                    self.core.base.queue.serve(self);
                }
            }
            fn wait_for_permits(&self, total: u64) -> Option<::core::time::Duration> {
                Some(self.core.wait_for(total))
            }
            fn lease(&self, n: u32, stamp: u64) -> $crate::lease::Lease<'_> {
                $crate::lease::Lease::settling(n, stamp, self)
            }
            fn timed(&self) -> bool {
                $crate::clock::Clock::advances_by_itself(&self.core.base.clock)
            }
            fn served_on_return(&self) -> bool {
                false // time brings permits
            }
        }
    };
}
pub(crate) use rate_limiter;

/// The constructors and `reconfigure` of a rate limiter's [`NoQueue`](crate::NoQueue) form, for a
/// type whose generic impl has `build(options, clock)` (run-time construction, generic over the
/// queue kind), `at_epoch_with(options, queue, clock)` (constant construction) and
/// `checked(&options)` (the validation `reconfigure` does). `$apply` applies what `checked`
/// returned, with no queue to serve. `$opts` is the text of options for the examples; a ring
/// size `N = d` names the ring `without_queue` builds (the default).
macro_rules! unqueued_constructors {
    (
        $ty:ident $(<const $n:ident = $d:literal>)?,
        $options:ty,
        $opts:literal,
        apply = $apply:expr $(,)?
    ) => {
        impl<C: $crate::clock::Clock> $ty<C, $($d,)? $crate::queue_kind::NoQueue> {
            /// A limiter without a wait queue ([`NoQueue`](crate::NoQueue)), reading time from
            /// `clock`: the decisions of `with_clock`'s limiter, with no `acquire` and none of
            /// the queue's code or memory. The options' queue limit must be 0
            /// ([`OptionsError::NoWaitQueue`](crate::OptionsError::NoWaitQueue) otherwise).
            ///
            #[doc = concat!(
                "```\n",
                "use core::time::Duration;\n",
                "use tollgate::*;\n",
                "\n",
                "let opts = ", $opts, ";\n",
                "let limiter = ", stringify!($ty), "::without_queue(opts, ManualClock::new()).unwrap();\n",
                "let all = limiter.available_permits() as u32;\n",
                "assert!(limiter.try_acquire(all).is_ok());\n",
                "assert!(limiter.try_acquire(1).unwrap_err().retry_after().is_some());\n",
                "\n",
                "let queued = opts.with_queue(1, QueueOrder::OldestFirst);\n",
                "let refused = ", stringify!($ty), "::without_queue(queued, ManualClock::new());\n",
                "assert_eq!(refused.unwrap_err(), OptionsError::NoWaitQueue);\n",
                "```",
            )]
            pub fn without_queue(options: $options, clock: C) -> Result<Self, $crate::options::OptionsError> {
                Self::build(options, clock)
            }
        }

        impl<C: $crate::clock::Clock $(, const $n: usize)?> $ty<C, $($n,)? $crate::queue_kind::NoQueue> {
            $crate::sync::const_unless_loom! {
                /// `at_epoch` without a wait queue ([`NoQueue`](crate::NoQueue)): a `static`
                /// limiter for firmware that shares it with interrupt handlers and never waits.
                /// Invalid options, or a queue limit above 0, stop the build.
                ///
                #[doc = concat!(
                    "```\n",
                    "use core::time::Duration;\n",
                    "use tollgate::*;\n",
                    "\n",
                    "static LIMITER: ", stringify!($ty), "<ManualClock, ", $(stringify!($d), ", ",)? "NoQueue> =\n",
                    "    ", stringify!($ty), "::at_epoch_without_queue(", $opts, ", ManualClock::new());\n",
                    "\n",
                    "let all = LIMITER.available_permits() as u32;\n",
                    "assert!(LIMITER.try_acquire(all).is_ok());\n",
                    "assert!(LIMITER.try_acquire(1).is_err());\n",
                    "```",
                )]
                pub fn at_epoch_without_queue(options: $options, clock: C) -> Self {
                    Self::at_epoch_with(options, $crate::queue_kind::NoQueue::in_const(options.queue_limit), clock)
                }
            }

            /// `reconfigure` without a queue: the same rule, and the queue limit must stay 0
            /// ([`OptionsError::NoWaitQueue`](crate::OptionsError::NoWaitQueue)); the order of
            /// the queue that does not exist may change.
            ///
            #[doc = concat!(
                "```\n",
                "# use core::time::Duration;\n",
                "# use tollgate::*;\n",
                "let bare = ", stringify!($ty), "::without_queue(", $opts, ", ManualClock::new()).unwrap();\n",
                "let queued = ", $opts, ".with_queue(1, QueueOrder::OldestFirst);\n",
                "assert_eq!(bare.reconfigure(queued), Err(OptionsError::NoWaitQueue));\n",
                "assert!(bare.reconfigure(", $opts, ".with_queue(0, QueueOrder::NewestFirst)).is_ok());\n",
                "```",
            )]
            pub fn reconfigure(&self, options: $options) -> Result<(), $crate::options::OptionsError> {
                let checked = self.checked(&options)?;
                $crate::queue_kind::NoQueue::checked(options.queue_limit)?;
                let apply: fn(&Self, _, $options) = $apply;
                apply(self, checked, options);
                Ok(())
            }
        }

        $crate::rate_limiter::rate_limiter!(unqueued $ty $(<const $n>)?, $opts);
    };
}
pub(crate) use unqueued_constructors;

/// The constructors every rate limiter shares: `new` (on the system clock), `with_clock` and
/// the constant `at_epoch`, for a type whose generic impl has `build(options, clock)` and
/// `at_epoch_with(options, queue, clock)` (see [`unqueued_constructors!`]). `$what` names the
/// limiter in the docs; `$opts` is the text of valid options for the examples; a ring size
/// `N = d` names the ring `new` and `with_clock` build (the default).
macro_rules! limiter_front {
    ($ty:ident $(<const $n:ident = $d:literal>)?, $options:ty, $what:literal, $opts:literal $(,)?) => {
        #[cfg(feature = "std")]
        impl $ty<$crate::clock::StdClock> {
            #[doc = concat!(
                "A ", $what, " on the system clock",
                $(", with the default ring of ", stringify!($d), " (another size: `with_capacity`)",)?
                ".\n\n",
                "```\n",
                "use core::time::Duration;\n",
                "use tollgate::*;\n",
                "\n",
                "let limiter = ", stringify!($ty), "::new(", $opts, ").unwrap();\n",
                "assert!(limiter.try_acquire(1).is_ok());\n",
                "```",
            )]
            pub fn new(options: $options) -> Result<Self, $crate::options::OptionsError> {
                Self::with_clock(options, $crate::clock::StdClock)
            }
        }

        impl<C: $crate::clock::Clock> $ty<C> {
            #[doc = concat!(
                "A ", $what, " reading time from `clock`",
                $(", with the default ring of ", stringify!($d), " (another size: `with_capacity`)",)?
                "; its time counts from `clock.now()`, and it starts with every permit available. ",
                "Invalid options are refused with an [`OptionsError`](crate::OptionsError) naming ",
                "what is wrong.\n\n",
                "```\n",
                "use core::time::Duration;\n",
                "use tollgate::*;\n",
                "\n",
                "let clock = ManualClock::new();\n",
                "let limiter = ", stringify!($ty), "::with_clock(", $opts, ", &clock).unwrap();\n",
                "let all = limiter.available_permits() as u32;\n",
                "assert!(limiter.try_acquire(all).is_ok());\n",
                "let denied = limiter.try_acquire(1).unwrap_err();\n",
                "assert_eq!(denied.reason(), Reason::Exhausted);\n",
                "assert!(denied.retry_after().is_some());\n",
                "```",
            )]
            pub fn with_clock(options: $options, clock: C) -> Result<Self, $crate::options::OptionsError> {
                Self::build(options, clock)
            }
        }

        impl<C: $crate::clock::Clock $(, const $n: usize)?> $ty<C $(, $n)?> {
            $crate::sync::const_unless_loom! {
                #[doc = concat!(
                    "A ", $what, " built in a constant, so it can be a `static` shared by thread ",
                    "code and interrupt handlers (firmware). Its time counts from the clock's ",
                    "epoch ([`Instant::ZERO`](crate::Instant::ZERO), e.g. boot) rather than from ",
                    "a reading at creation — the only difference from `with_clock`. Invalid ",
                    "options stop the build (a `const` panic is a compile error); at run time use ",
                    "`with_clock`, which returns an [`OptionsError`](crate::OptionsError).\n\n",
                    "```\n",
                    "use core::time::Duration;\n",
                    "use tollgate::*;\n",
                    "\n",
                    "static LIMITER: ", stringify!($ty), "<ManualClock", $(", ", stringify!($d),)? "> =\n",
                    "    ", stringify!($ty), "::at_epoch(", $opts, ", ManualClock::new());\n",
                    "\n",
                    "let all = LIMITER.available_permits() as u32;\n",
                    "assert!(LIMITER.try_acquire(all).is_ok());\n",
                    "assert!(LIMITER.try_acquire(1).is_err());\n",
                    "```",
                )]
                pub fn at_epoch(options: $options, clock: C) -> Self {
                    let queue = $crate::wait::WaitQueue::new(options.queue_limit, options.queue_order);
                    Self::at_epoch_with(options, queue, clock)
                }
            }
        }
    };
}
pub(crate) use limiter_front;
