//! Jitter: a random extra delay, so that clients refused or queued at one instant do not all
//! come back at the next (the thundering herd).
//!
//! A [`Jitter`] draws an extra delay, uniform in `[0, bound]`, where the bound is a fixed
//! duration ([`Jitter::up_to`]) or a fraction of the exact wait ([`Jitter::per_mille`],
//! [`Jitter::percent`]), optionally capped ([`Jitter::at_most`]). It only ever adds: a jittered
//! RetryAfter is never shorter than the exact one ([`Jitter::retry_after`]), and a jittered
//! waiter (`acquire_jittered` on every rate limiter) is never woken before its permits came.
//!
//! The random numbers come from SplitMix64 over one atomic 64-bit word: one `fetch_add` per
//! draw (lock-free wherever the target has 64-bit atomics; on 32-bit MCUs one critical section,
//! as the crate's other 64-bit words), integer arithmetic only. A seeded jitter
//! ([`Jitter::with_seed`]) gives the same sequence every run: tests on a
//! [`ManualClock`](crate::ManualClock) are deterministic.

use core::future::{poll_fn, Future};
use core::pin::{pin, Pin};
use core::task::{Context, Poll};
use core::time::Duration;

use crate::clock::{Clock, Instant};
use crate::lease::{Lease, Rejection};
use crate::reciprocal::Reciprocal;
use crate::sync::{AtomicU64, Ordering};
use crate::wait::{Acquire, Source};

/// Division by 1000, by multiplication.
const THOUSAND: Reciprocal = Reciprocal::of(1000);

/// SplitMix64's increment: 2^64 / φ, odd, so the state visits every 64-bit value.
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The seed of a jitter built without [`Jitter::with_seed`] (mixed with a per-process random
/// key when feature `std` is on).
const DEFAULT_SEED: u64 = 0x2545_F491_4F6C_DD1D;

/// SplitMix64's output function: a bijection that spreads every bit of the state.
const fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Nanoseconds of `d`, saturating at `u64::MAX` (584 years).
const fn nanos(d: Duration) -> u64 {
    match d.as_secs().checked_mul(1_000_000_000) {
        Some(s) => s.saturating_add(d.subsec_nanos() as u64),
        None => u64::MAX,
    }
}

/// How large the extra delay may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Bound {
    /// Up to this many nanoseconds, whatever the wait.
    Fixed(u64),
    /// Up to `per_mille / 1000` of the wait (rounded down to the nanosecond), and never more
    /// than `cap` nanoseconds.
    Fraction { per_mille: u32, cap: u64 },
}

/// A random extra delay for waits and RetryAfters: uniform in `[0, bound]`, the bound a fixed
/// duration or a fraction of the exact wait. It only ever adds.
///
/// Built in a constant (a `static` works, on firmware too); shared by reference between threads
/// and tasks (each draw is one atomic read-modify-write of its generator). Use it:
///
/// - on a RetryAfter: [`apply`](Self::apply) or [`retry_after`](Self::retry_after);
/// - on waiting: `acquire_jittered(n, &jitter)` and (feature `std`)
///   `acquire_blocking_jittered(n, timeout, &jitter)` on every rate limiter
///   ([`TokenBucketLimiter::acquire_jittered`](crate::TokenBucketLimiter::acquire_jittered)
///   and the same on the others);
/// - on an HTTP layer's `Retry-After` (feature `http`):
///   `RateLimitingBuilder::retry_after_jitter`.
///
/// Seeding: [`with_seed`](Self::with_seed) fixes the sequence (tests, simulations). Without a
/// seed, with feature `std`, each process draws its own sequence (mixed with a random key taken
/// once per process, so that replicas of one program do not jitter in step); without `std` an
/// unseeded jitter uses a fixed default seed: on firmware give each device its own (a serial
/// number, a noise reading).
///
/// ```
/// use core::time::Duration;
/// use tollgate::{Jitter, Limiter, ManualClock, TokenBucketLimiter, TokenBucketOptions};
///
/// static JITTER: Jitter = Jitter::up_to(Duration::from_secs(2));
///
/// let clock = ManualClock::new();
/// let bucket =
///     TokenBucketLimiter::with_clock(TokenBucketOptions::new(1, 1, Duration::from_secs(10)), &clock)
///         .unwrap();
/// let _ = bucket.try_acquire(1).unwrap();
/// let refused = bucket.try_acquire(1).unwrap_err();
/// let exact = refused.retry_after().unwrap();
/// let told = JITTER.retry_after(&refused).unwrap();
/// assert!(told >= exact && told <= exact + Duration::from_secs(2));
/// ```
pub struct Jitter {
    bound: Bound,
    seeded: bool,
    state: AtomicU64,
}

impl Jitter {
    crate::sync::const_unless_loom! {
        /// Up to `max` extra, whatever the exact wait: uniform in `[0, max]`.
        ///
        /// ```
        /// use core::time::Duration;
        /// use tollgate::Jitter;
        ///
        /// let jitter = Jitter::up_to(Duration::from_millis(100)).with_seed(1);
        /// for _ in 0..1_000 {
        ///     let d = jitter.apply(Duration::from_secs(1));
        ///     assert!(d >= Duration::from_secs(1) && d <= Duration::from_millis(1_100));
        /// }
        /// ```
        pub fn up_to(max: Duration) -> Jitter {
            Jitter {
                bound: Bound::Fixed(nanos(max)),
                seeded: false,
                state: AtomicU64::new(DEFAULT_SEED),
            }
        }
    }

    crate::sync::const_unless_loom! {
        /// Up to `per_mille` thousandths of the exact wait: uniform in `[0, wait × per_mille /
        /// 1000]` (more than 1000 is allowed: `2000` adds up to twice the wait). A wait of zero
        /// gets no jitter.
        ///
        /// ```
        /// use core::time::Duration;
        /// use tollgate::Jitter;
        ///
        /// let quarter = Jitter::per_mille(250).with_seed(1);
        /// let d = quarter.apply(Duration::from_secs(8));
        /// assert!(d >= Duration::from_secs(8) && d <= Duration::from_secs(10));
        /// assert_eq!(quarter.bound(Duration::from_secs(8)), Duration::from_secs(2));
        /// ```
        pub fn per_mille(per_mille: u32) -> Jitter {
            Jitter {
                bound: Bound::Fraction {
                    per_mille,
                    cap: u64::MAX,
                },
                seeded: false,
                state: AtomicU64::new(DEFAULT_SEED),
            }
        }
    }

    crate::sync::const_unless_loom! {
        /// Up to `percent` hundredths of the exact wait (as [`per_mille`](Self::per_mille) of
        /// ten times as much, saturating).
        ///
        /// ```
        /// use core::time::Duration;
        /// use tollgate::Jitter;
        ///
        /// let tenth = Jitter::percent(10);
        /// assert_eq!(tenth.bound(Duration::from_secs(30)), Duration::from_secs(3));
        /// ```
        pub fn percent(percent: u32) -> Jitter {
            Jitter::per_mille(percent.saturating_mul(10))
        }
    }

    crate::sync::const_unless_loom! {
        /// The same jitter, its sequence fixed by `seed`: two jitters of one seed draw the same
        /// delays in the same order (deterministic tests and simulations).
        ///
        /// ```
        /// use core::time::Duration;
        /// use tollgate::Jitter;
        ///
        /// let a = Jitter::up_to(Duration::from_secs(1)).with_seed(42);
        /// let b = Jitter::up_to(Duration::from_secs(1)).with_seed(42);
        /// let wait = Duration::from_secs(3);
        /// for _ in 0..100 {
        ///     assert_eq!(a.apply(wait), b.apply(wait));
        /// }
        /// ```
        pub fn with_seed(self, seed: u64) -> Jitter {
            Jitter {
                bound: self.bound,
                seeded: true,
                state: AtomicU64::new(seed),
            }
        }
    }

    /// The same jitter, never adding more than `max` (a cap on a fractional jitter's bound).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::Jitter;
    ///
    /// let jitter = Jitter::percent(50).at_most(Duration::from_secs(5));
    /// assert_eq!(jitter.bound(Duration::from_secs(4)), Duration::from_secs(2));
    /// assert_eq!(jitter.bound(Duration::from_secs(60)), Duration::from_secs(5));
    /// ```
    #[must_use]
    pub const fn at_most(mut self, max: Duration) -> Jitter {
        let max = nanos(max);
        self.bound = match self.bound {
            Bound::Fixed(b) => Bound::Fixed(if b < max { b } else { max }),
            Bound::Fraction { per_mille, cap } => Bound::Fraction {
                per_mille,
                cap: if cap < max { cap } else { max },
            },
        };
        self
    }

    /// The largest extra delay this jitter adds to a wait of `exact` (it draws in `[0, bound]`).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::Jitter;
    ///
    /// assert_eq!(Jitter::up_to(Duration::from_millis(300)).bound(Duration::from_secs(9)), Duration::from_millis(300));
    /// assert_eq!(Jitter::per_mille(100).bound(Duration::from_secs(9)), Duration::from_millis(900));
    /// assert_eq!(Jitter::per_mille(100).bound(Duration::ZERO), Duration::ZERO);
    /// ```
    pub fn bound(&self, exact: Duration) -> Duration {
        Duration::from_nanos(self.bound_ns(nanos(exact)))
    }

    fn bound_ns(&self, exact: u64) -> u64 {
        match self.bound {
            Bound::Fixed(b) => b,
            Bound::Fraction { per_mille, cap } => {
                // exact × p / 1000 = (a × 1000 + b) × p / 1000 = a × p + b × p / 1000, with
                // b × p < 2^42: exact, and no division (by multiplication, `Reciprocal`).
                let p = u64::from(per_mille);
                let (a, b) = THOUSAND.div_rem(exact, 1000);
                let (c, _) = THOUSAND.div_rem(b * p, 1000);
                let f = u128::from(a) * u128::from(p) + u128::from(c);
                u64::try_from(f).unwrap_or(u64::MAX).min(cap)
            }
        }
    }

    /// The next 64 random bits (one atomic read-modify-write).
    fn next_u64(&self) -> u64 {
        let s = self
            .state
            .fetch_add(GOLDEN, Ordering::Relaxed)
            .wrapping_add(GOLDEN);
        #[cfg(feature = "std")]
        if !self.seeded {
            return mix(s ^ process_key());
        }
        mix(s)
    }

    /// An extra delay for a wait of `exact`: uniform in `[0, bound(exact)]` (to the
    /// nanosecond). A bound of zero draws nothing.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::Jitter;
    ///
    /// let jitter = Jitter::up_to(Duration::from_millis(10)).with_seed(3);
    /// assert!(jitter.extra(Duration::from_secs(1)) <= Duration::from_millis(10));
    /// assert_eq!(Jitter::up_to(Duration::ZERO).extra(Duration::from_secs(1)), Duration::ZERO);
    /// ```
    pub fn extra(&self, exact: Duration) -> Duration {
        Duration::from_nanos(self.extra_ns(nanos(exact)))
    }

    fn extra_ns(&self, exact: u64) -> u64 {
        let bound = self.bound_ns(exact);
        if bound == 0 {
            return 0;
        }
        // Lemire's multiply-shift: `r × (bound + 1) / 2^64`, uniform to within 2^-64.
        let r = u128::from(self.next_u64());
        ((r * (u128::from(bound) + 1)) >> 64) as u64
    }

    /// `exact` plus an [`extra`](Self::extra) delay: never shorter than `exact` (saturating at
    /// `Duration::MAX`), never longer than `exact + bound(exact)`.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::Jitter;
    ///
    /// let jitter = Jitter::percent(20).with_seed(9);
    /// let d = jitter.apply(Duration::from_secs(10));
    /// assert!(d >= Duration::from_secs(10) && d <= Duration::from_secs(12));
    /// assert_eq!(jitter.apply(Duration::MAX), Duration::MAX);
    /// ```
    pub fn apply(&self, exact: Duration) -> Duration {
        exact.saturating_add(self.extra(exact))
    }

    /// A rejection's [`retry_after`](Rejection::retry_after), jittered: `None` where the
    /// rejection has none, else never shorter than it. The rejection itself is unchanged.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Jitter, Reason, Rejection};
    ///
    /// let jitter = Jitter::up_to(Duration::from_secs(1)).with_seed(5);
    /// let r = Rejection::with_retry_after(&Reason::Exhausted, Duration::from_secs(4));
    /// let told = jitter.retry_after(&r).unwrap();
    /// assert!(told >= Duration::from_secs(4) && told <= Duration::from_secs(5));
    /// assert_eq!(jitter.retry_after(&Rejection::new(&Reason::Closed)), None);
    /// ```
    pub fn retry_after(&self, rejection: &Rejection) -> Option<Duration> {
        rejection.retry_after().map(|d| self.apply(d))
    }
}

/// A clone draws on: the same bound, and a generator that continues from where this one is
/// now (a seeded jitter's clone repeats what the original draws next).
impl Clone for Jitter {
    fn clone(&self) -> Self {
        Jitter {
            bound: self.bound,
            seeded: self.seeded,
            state: AtomicU64::new(self.state.load(Ordering::Relaxed)),
        }
    }
}

impl core::fmt::Debug for Jitter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let mut d = f.debug_struct("Jitter");
        match self.bound {
            Bound::Fixed(ns) => d.field("up_to", &Duration::from_nanos(ns)),
            Bound::Fraction { per_mille, cap, .. } => {
                d.field("per_mille", &per_mille);
                if cap != u64::MAX {
                    d.field("at_most", &Duration::from_nanos(cap));
                }
                &mut d
            }
        };
        d.field("seeded", &self.seeded).finish()
    }
}

/// A random key drawn once per process (the standard library's hash keys come from the OS),
/// mixed into every unseeded jitter's sequence.
#[cfg(feature = "std")]
fn process_key() -> u64 {
    use core::hash::BuildHasher;
    static KEY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *KEY.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(GOLDEN))
}

/// A held grant's delay: ready once the limiter's clock reaches `until`. On a clock that moves
/// by itself the waiters' timer wakes it then; on any other clock it is ready when polled at
/// or after `until`.
struct Delay<'c, C: Clock + ?Sized> {
    clock: &'c C,
    until: Instant,
    #[cfg(all(any(feature = "std", feature = "embassy-time"), not(loom)))]
    timer: Option<crate::wait::Timer>,
}

impl<C: Clock + ?Sized> Future for Delay<'_, C> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let now = this.clock.now();
        if now >= this.until {
            #[cfg(all(any(feature = "std", feature = "embassy-time"), not(loom)))]
            if let Some(t) = &mut this.timer {
                t.disarm();
            }
            return Poll::Ready(());
        }
        #[cfg(all(any(feature = "std", feature = "embassy-time"), not(loom)))]
        if let Some(t) = &mut this.timer {
            t.arm(this.until.saturating_duration_since(now), cx.waker());
        }
        #[cfg(not(all(any(feature = "std", feature = "embassy-time"), not(loom))))]
        let _ = cx;
        Poll::Pending
    }
}

impl<C: Clock + ?Sized> Drop for Delay<'_, C> {
    fn drop(&mut self) {
        #[cfg(all(any(feature = "std", feature = "embassy-time"), not(loom)))]
        if let Some(t) = &mut self.timer {
            t.disarm();
        }
    }
}

/// The jittered wait of `acquire_jittered`: queued as `acquire` is; a grant made while queued
/// is held (unreceived) for an extra delay drawn from `jitter` for the time waited, counted on
/// `clock` from the poll that found the grant; then received.
pub(crate) async fn acquire<'a, L, C>(
    limiter: &'a L,
    clock: &'a C,
    permits: u32,
    jitter: &'a Jitter,
) -> Result<Lease<'a>, Rejection>
where
    L: Source + ?Sized,
    C: Clock + ?Sized,
{
    let start = clock.now();
    let mut waiter = pin!(Acquire::new(limiter, permits).held());
    // Until granted: what completes at once (a grant, a refusal) is not jittered.
    let done = poll_fn(|cx| match waiter.as_mut().poll(cx) {
        Poll::Ready(r) => Poll::Ready(Some(r)),
        Poll::Pending if waiter.as_mut().is_held() => Poll::Ready(None),
        Poll::Pending => Poll::Pending,
    })
    .await;
    if let Some(done) = done {
        return done;
    }
    // Granted, held: dropping this future now gives the permits back (uncounted), as for any
    // waiter dropped between its grant and its completion.
    let granted = clock.now();
    let extra = jitter.extra(granted.saturating_duration_since(start));
    Delay {
        clock,
        until: granted.saturating_add(extra),
        #[cfg(all(any(feature = "std", feature = "embassy-time"), not(loom)))]
        timer: limiter.timed().then(crate::wait::Timer::new),
    }
    .await;
    waiter.as_mut().unhold();
    waiter.await
}

/// The blocking form of [`acquire`]: as `acquire_blocking` until the grant, then the thread
/// sleeps out the jitter on `clock`. The timeout bounds the whole call: if it ends during the
/// jitter, the grant is returned then (jitter never turns a grant into a timeout).
#[cfg(feature = "std")]
pub(crate) fn acquire_blocking<'a, L, C>(
    limiter: &'a L,
    clock: &'a C,
    permits: u32,
    timeout: Option<Duration>,
    jitter: &Jitter,
) -> Result<Lease<'a>, Rejection>
where
    L: Source + ?Sized,
    C: Clock + ?Sized,
{
    use crate::wait::blocking::{drive, park, thread_waker, time_left};

    let left = time_left(timeout);
    let waker = thread_waker();
    let mut cx = Context::from_waker(&waker);
    let start = clock.now();
    let mut waiter = pin!(Acquire::new(limiter, permits).self_timed().held());
    if let Some(done) = drive(limiter, waiter.as_mut(), &mut cx, &left, park) {
        return done;
    }
    let granted = clock.now();
    let until = granted.saturating_add(jitter.extra(granted.saturating_duration_since(start)));
    loop {
        let now = clock.now();
        if now >= until {
            break;
        }
        let mut nap = until.saturating_duration_since(now);
        match left() {
            Some(d) if d.is_zero() => break,
            Some(d) => nap = nap.min(d),
            None => {}
        }
        park(Some(nap));
    }
    waiter.as_mut().unhold();
    loop {
        // Held grants complete without the lock: ready at once.
        if let Poll::Ready(done) = waiter.as_mut().poll(&mut cx) {
            return done;
        }
        park(Some(Duration::from_micros(1)));
    }
}

#[cfg(test)]
mod tests;
