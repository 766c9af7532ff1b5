//! Time as a parameter: the [`Clock`] trait, the [`Instant`] it returns, and two clocks —
//! [`ManualClock`] for tests and for firmware that drives time itself, and `StdClock` (feature
//! `std`) over the operating system's monotonic clock.
//!
//! Limiters read time only through [`Clock::now`]; nothing in this crate sleeps or reads the
//! system time on its own. Replenishment is computed from the time that has passed, so a limiter is
//! exact with any clock, at any resolution.

use core::fmt;
use core::ops::{Add, Sub};
use core::time::Duration;

use crate::sync::{AtomicU64, Ordering};

/// A point in time: nanoseconds since the epoch of the [`Clock`] that produced it.
///
/// The epoch is whatever the clock chooses (boot, process start, creation of the clock);
/// instants are only compared with instants of the same clock. 64 bits of nanoseconds cover
/// 584 years. A firmware timer with a narrower counter must extend it to 64 bits (count its
/// overflows) before handing instants to a limiter.
///
/// ```
/// use core::time::Duration;
/// use tollgate::Instant;
///
/// let t = Instant::from_nanos(1_000);
/// assert_eq!((t + Duration::from_micros(1)).as_nanos(), 2_000);
/// assert_eq!(t.saturating_duration_since(Instant::from_nanos(400)), Duration::from_nanos(600));
/// // Earlier minus later saturates at zero: a clock that steps back is "no time passed".
/// assert_eq!(Instant::ZERO.saturating_duration_since(t), Duration::ZERO);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The clock's epoch.
    ///
    /// ```
    /// use tollgate::{Clock, Instant, ManualClock};
    ///
    /// assert_eq!(ManualClock::new().now(), Instant::ZERO); // a new manual clock stands at its epoch
    /// assert_eq!(Instant::ZERO.as_nanos(), 0);
    /// ```
    pub const ZERO: Instant = Instant(0);
    /// The last representable instant.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::Instant;
    ///
    /// // Arithmetic saturates at MAX rather than wrapping to the epoch.
    /// assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
    /// assert_eq!(Instant::MAX.checked_add(Duration::from_nanos(1)), None);
    /// ```
    pub const MAX: Instant = Instant(u64::MAX);

    /// The instant `nanos` nanoseconds after the epoch.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::Instant;
    ///
    /// // A 1 MHz hardware timer, extended to 64 bits: one tick is one microsecond.
    /// let ticks: u64 = 2_500;
    /// let t = Instant::from_nanos(ticks * 1_000);
    /// assert_eq!(t - Instant::ZERO, Duration::from_micros(2_500));
    /// ```
    pub const fn from_nanos(nanos: u64) -> Self {
        Instant(nanos)
    }

    /// Nanoseconds since the epoch.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// clock.advance(Duration::from_millis(3));
    /// assert_eq!(clock.now().as_nanos(), 3_000_000);
    /// ```
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time from `earlier` to `self`, or zero if `earlier` is later.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let start = clock.now();
    /// clock.advance(Duration::from_millis(250));
    /// assert_eq!(clock.now().saturating_duration_since(start), Duration::from_millis(250));
    /// // The other way round: no time passed, not a panic.
    /// assert_eq!(start.saturating_duration_since(clock.now()), Duration::ZERO);
    /// ```
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// Time from `earlier` to `self`, or `None` if `earlier` is later.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::Instant;
    ///
    /// let (earlier, later) = (Instant::from_nanos(1_000), Instant::from_nanos(4_000));
    /// assert_eq!(later.checked_duration_since(earlier), Some(Duration::from_nanos(3_000)));
    /// assert_eq!(earlier.checked_duration_since(later), None); // e.g. a clock that stepped back
    /// ```
    pub const fn checked_duration_since(self, earlier: Instant) -> Option<Duration> {
        match self.0.checked_sub(earlier.0) {
            Some(d) => Some(Duration::from_nanos(d)),
            None => None,
        }
    }

    /// `self + d`, or `None` if that is past [`Instant::MAX`].
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::Instant;
    ///
    /// let now = Instant::from_nanos(1_000_000);
    /// let deadline = now.checked_add(Duration::from_millis(5)).unwrap();
    /// assert_eq!(deadline.as_nanos(), 6_000_000);
    /// assert_eq!(now.checked_add(Duration::MAX), None); // past 584 years
    /// ```
    pub fn checked_add(self, d: Duration) -> Option<Instant> {
        let d = u64::try_from(d.as_nanos()).ok()?;
        self.0.checked_add(d).map(Instant)
    }

    /// `self + d`, saturating at [`Instant::MAX`].
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::Instant;
    ///
    /// let start = Instant::from_nanos(10);
    /// assert_eq!(start.saturating_add(Duration::from_nanos(5)), Instant::from_nanos(15));
    /// assert_eq!(start.saturating_add(Duration::MAX), Instant::MAX); // "never"
    /// ```
    pub fn saturating_add(self, d: Duration) -> Instant {
        self.checked_add(d).unwrap_or(Instant::MAX)
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Saturating: an instant never wraps past [`Instant::MAX`].
    fn add(self, d: Duration) -> Instant {
        self.saturating_add(d)
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturating: an earlier instant minus a later one is zero.
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Instant({:?})", Duration::from_nanos(self.0))
    }
}

/// A source of monotonic time.
///
/// Implement it for any type — a firmware timer, a simulated clock, a TSC reader. The limiters
/// tolerate a clock that steps backwards (they treat it as no time passing) and one that jumps
/// forward by any amount, but they can only be as accurate as the clock.
///
/// A clock is `Sync`: every thread (and interrupt handler) that shares a limiter reads it, and
/// a lease refers to its limiter to [settle](crate::Lease::settle).
///
/// ```
/// use tollgate::{Clock, Instant};
///
/// /// A millisecond tick counter kept by an interrupt handler.
/// struct Ticks(core::sync::atomic::AtomicU32);
///
/// impl Clock for Ticks {
///     fn now(&self) -> Instant {
///         let ms = self.0.load(core::sync::atomic::Ordering::Relaxed) as u64;
///         Instant::from_nanos(ms * 1_000_000)
///     }
/// }
/// # let t = Ticks(core::sync::atomic::AtomicU32::new(5));
/// # assert_eq!(t.now().as_nanos(), 5_000_000);
/// ```
pub trait Clock: Sync {
    /// The current instant.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Clock, Instant, ManualClock};
    ///
    /// /// Time since `start` on any clock.
    /// fn elapsed<C: Clock>(clock: &C, start: Instant) -> Duration {
    ///     clock.now().saturating_duration_since(start)
    /// }
    /// let clock = ManualClock::new();
    /// let start = clock.now();
    /// clock.advance(Duration::from_millis(40));
    /// assert_eq!(elapsed(&clock, start), Duration::from_millis(40));
    /// ```
    fn now(&self) -> Instant;

    /// Whether this clock moves with real time by itself ([`StdClock`], a
    /// [`CoarseClock`](crate::CoarseClock) with its refresher running), as opposed to one that
    /// moves only when told to ([`ManualClock`], a tick counter). With feature `std`, the waiters
    /// of a rate limiter on a clock that advances by itself are woken by the process timer when
    /// their permits arrive; on any other clock they are served by later acquisitions,
    /// `replenish()` or a `Driver`. The default is `false`.
    ///
    /// ```
    /// use tollgate::{Clock, ManualClock};
    ///
    /// assert!(!ManualClock::new().advances_by_itself()); // moves only when told to
    /// # #[cfg(feature = "std")]
    /// assert!(tollgate::StdClock.advances_by_itself());
    /// ```
    fn advances_by_itself(&self) -> bool {
        false
    }

    /// Whether [`now`](Self::now) costs about as much as an atomic load (the default: `true`).
    ///
    /// Limiters read a clock whose reading is cheap even where the reading only dates something
    /// that may be asked about later; for a clock that says `false` ([`StdClock`]) they skip
    /// those reads. Today that is the [`ConcurrencyLimiter`](crate::ConcurrencyLimiter)'s
    /// release: with a cheap clock, the release that makes it fully available reads the clock to
    /// date its idleness exactly; with an expensive one, it reads nothing and the limiter dates
    /// its idleness when [`idle_duration`](crate::Limiter::idle_duration) first sees it (see
    /// there).
    ///
    /// ```
    /// use tollgate::{Clock, ManualClock};
    /// assert!(ManualClock::new().now_is_cheap());
    /// # #[cfg(feature = "std")]
    /// assert!(!tollgate::StdClock.now_is_cheap());
    /// ```
    #[inline]
    fn now_is_cheap(&self) -> bool {
        true
    }
}

/// A clock behind a pointer (`&C`, `Arc<C>`) is the clock it points to.
macro_rules! clock_by_deref {
    ($($(#[$attr:meta])* $ptr:ty $(where $bound:path)?),+) => {$(
        $(#[$attr])*
        impl<C: Clock $(+ $bound)? + ?Sized> Clock for $ptr {
            #[inline]
            fn now(&self) -> Instant {
                (**self).now()
            }
            fn advances_by_itself(&self) -> bool {
                (**self).advances_by_itself()
            }
            #[inline]
            fn now_is_cheap(&self) -> bool {
                (**self).now_is_cheap()
            }
        }
    )+};
}

clock_by_deref!(&C, #[cfg(feature = "alloc")] alloc::sync::Arc<C> where Send);

/// A clock that moves only when told to: for deterministic tests, simulations, and firmware that
/// keeps time itself. Share it by reference (`&ManualClock` is a [`Clock`]) or in an `Arc`.
///
/// ```
/// use core::time::Duration;
/// use tollgate::{Clock, Instant, ManualClock};
///
/// let clock = ManualClock::new();
/// assert_eq!(clock.now(), Instant::ZERO);
/// clock.advance(Duration::from_secs(2));
/// assert_eq!(clock.now(), Instant::from_nanos(2_000_000_000));
/// clock.set(Instant::from_nanos(5));
/// assert_eq!(clock.now().as_nanos(), 5);
/// ```
pub struct ManualClock {
    nanos: AtomicU64,
}

impl ManualClock {
    /// A clock standing at [`Instant::ZERO`].
    ///
    /// ```
    /// use tollgate::{Clock, Instant, ManualClock};
    ///
    /// // `const`: the clock can be a `static`, shared by every limiter of a firmware.
    /// static CLOCK: ManualClock = ManualClock::new();
    /// assert_eq!(CLOCK.now(), Instant::ZERO);
    /// ```
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self::starting_at(Instant::ZERO)
    }

    /// A clock standing at [`Instant::ZERO`].
    #[cfg(loom)]
    pub fn new() -> Self {
        Self::starting_at(Instant::ZERO)
    }

    /// A clock standing at `start`.
    ///
    /// ```
    /// use tollgate::{Clock, Instant, ManualClock};
    ///
    /// // A simulation resumed one hour in.
    /// let clock = ManualClock::starting_at(Instant::from_nanos(3_600_000_000_000));
    /// assert_eq!(clock.now().as_nanos(), 3_600_000_000_000);
    /// ```
    #[cfg(not(loom))]
    pub const fn starting_at(start: Instant) -> Self {
        Self {
            nanos: AtomicU64::new(start.0),
        }
    }

    /// A clock standing at `start`.
    #[cfg(loom)]
    pub fn starting_at(start: Instant) -> Self {
        Self {
            nanos: AtomicU64::new(start.0),
        }
    }

    /// Moves the clock forward by `d` (saturating at [`Instant::MAX`]).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{GcraLimiter, GcraOptions, Limiter, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let gcra = GcraLimiter::with_clock(GcraOptions::per_second(1), &clock).unwrap();
    /// let _first = gcra.try_acquire(1).unwrap();
    /// assert!(gcra.try_acquire(1).is_err());
    /// clock.advance(Duration::from_secs(1)); // a test steps time instead of sleeping
    /// assert!(gcra.try_acquire(1).is_ok());
    /// ```
    pub fn advance(&self, d: Duration) {
        let d = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let mut cur = self.nanos.load(Ordering::Acquire);
        loop {
            let next = cur.saturating_add(d);
            match self
                .nanos
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(v) => cur = v,
            }
        }
    }

    /// Sets the clock to `t`, forwards or backwards.
    ///
    /// ```
    /// use tollgate::{Clock, GcraLimiter, GcraOptions, Instant, Limiter, ManualClock};
    ///
    /// let clock = ManualClock::new();
    /// let gcra = GcraLimiter::with_clock(GcraOptions::per_second(1), &clock).unwrap();
    /// clock.set(Instant::from_nanos(5_000_000_000));
    /// let _lease = gcra.try_acquire(1).unwrap();
    /// clock.set(Instant::from_nanos(4_000_000_000)); // a step back: no time passed, nothing comes back
    /// assert!(gcra.try_acquire(1).is_err());
    /// assert_eq!(clock.now().as_nanos(), 4_000_000_000);
    /// ```
    pub fn set(&self, t: Instant) {
        self.nanos.store(t.0, Ordering::Release);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ManualClock").field(&self.now()).finish()
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now(&self) -> Instant {
        Instant(self.nanos.load(Ordering::Acquire))
    }
}

/// The operating system's monotonic clock (`std::time::Instant`), as nanoseconds since the first
/// time any `StdClock` was read in this process.
///
/// A zero-sized type: every `StdClock` shares one epoch. Reading it costs one `clock_gettime`
/// (about 25 ns on Linux x86_64), which is more than a limiter's decision itself.
///
/// ```
/// use tollgate::{Clock, StdClock};
/// let a = StdClock.now();
/// let b = StdClock.now();
/// assert!(b >= a);
/// ```
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug, Default)]
pub struct StdClock;

#[cfg(feature = "std")]
impl Clock for StdClock {
    #[inline]
    fn now(&self) -> Instant {
        static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        let epoch = EPOCH.get_or_init(std::time::Instant::now);
        let d = std::time::Instant::now().saturating_duration_since(*epoch);
        // Seconds and nanoseconds in 64 bits (no 128-bit product), saturating as before.
        let nanos = d
            .as_secs()
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::from(d.subsec_nanos()));
        Instant(nanos)
    }
    fn advances_by_itself(&self) -> bool {
        true
    }
    /// `false`: a system call (through the vDSO), 20-70 ns.
    #[inline]
    fn now_is_cheap(&self) -> bool {
        false
    }
}

/// The clock a limiter reads when its type names none: [`StdClock`] with `std`, so that
/// `Arc<TokenBucketLimiter>` is a whole type, as tokio's `Semaphore` or governor's
/// `DefaultDirectRateLimiter` are.
///
/// ```
/// use core::time::Duration;
/// use std::sync::Arc;
/// use tollgate::*;
///
/// struct App {
///     api: Arc<TokenBucketLimiter>,
///     uploads: ConcurrencyLimiter,
/// }
/// let app = App {
///     api: Arc::new(TokenBucketLimiter::new(TokenBucketOptions::new(10, 10, Duration::from_secs(1))).unwrap()),
///     uploads: ConcurrencyLimiter::new(ConcurrencyOptions::new(4)).unwrap(),
/// };
/// assert!(app.api.try_acquire(1).is_ok());
/// # let _ = app.uploads;
/// ```
#[cfg(feature = "std")]
pub type DefaultClock = StdClock;

/// The clock a limiter reads when its type names none. Without `std` no clock reads time by
/// itself, so this is [`NoClock`], which cannot be made: name your own clock
/// (`TokenBucketLimiter<MyClock>`).
#[cfg(not(feature = "std"))]
pub type DefaultClock = NoClock;

/// A clock that cannot exist: the [`DefaultClock`] without `std`, where a limiter's type must
/// name its clock. (No value of this type can be made, so no limiter on it can be built.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoClock {}

impl Clock for NoClock {
    fn now(&self) -> Instant {
        match *self {}
    }
}
