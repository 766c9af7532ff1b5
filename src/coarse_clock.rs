//! A cheap clock for std users: [`CoarseClock`], a cached reading of [`StdClock`] that a
//! background thread (or the program itself) refreshes, read with one relaxed atomic load.
//!
//! Reading the operating system's monotonic clock costs a `clock_gettime` call (about 25 ns on
//! Linux x86_64), more than a limiter's whole decision on an uncontended word. A server that makes
//! millions of decisions a second does not need a fresh nanosecond reading for each: it needs one
//! that is never ahead of real time and at most a bounded time behind. That is what this clock
//! gives.
//!
//! Why not a TSC clock: reading the time-stamp counter is itself 7-20 ns with the scaling to
//! nanoseconds, needs `unsafe` (this crate keeps `unsafe` in one module), a calibration, and a
//! check that the counter is invariant and synchronised across cores and sockets. A cached value
//! is cheaper than any of that, on every architecture.

use core::time::Duration;
use std::io;
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;

// Not `crate::sync`: the clock's cell is no part of any limiter's state, and loom does not model
// it (a loom atomic cannot live in a static). portable-atomic gives a 64-bit atomic even on
// 32-bit std targets without native 64-bit atomics.
use portable_atomic::{AtomicBool, AtomicU64, Ordering};

use crate::clock::{Clock, Instant, StdClock};

/// The cached reading: nanoseconds on [`StdClock`]'s time scale.
static NOW: AtomicU64 = AtomicU64::new(0);
/// The refresher's interval in nanoseconds; 0 while no refresher runs. Written only under
/// [`REFRESHER`].
static INTERVAL_NS: AtomicU64 = AtomicU64::new(0);
/// The refresher thread, while it runs (until [`CoarseClock::stop`]).
static REFRESHER: Mutex<Option<JoinHandle<()>>> = Mutex::new(None);
/// Tells the refresher to exit. Written only under [`REFRESHER`].
static STOP: AtomicBool = AtomicBool::new(false);

/// A clock read with one relaxed atomic load: a cached [`StdClock`] reading that one
/// background thread per process refreshes every `interval` (and that anyone may refresh with
/// [`CoarseClock::refresh`]).
///
/// `CoarseClock` is a zero-sized handle to that process-wide cache: copy it into as many limiters
/// as you like; they all read the same value.
///
/// # Accuracy
/// - **Same time scale as [`StdClock`]**: every reading is a `StdClock` reading taken earlier,
///   so the two clocks' instants can be compared, and a `CoarseClock` reading is never later
///   than a `StdClock` reading taken after it.
/// - **Resolution**: the refresh interval. Readings advance in steps of about `interval`.
/// - **Staleness**: a reading lags real time by the interval, plus the sleep's overshoot (Linux
///   timer slack is 50 µs by default), plus however long the scheduler keeps the refresher from
///   running. That last term has no hard bound: on an overloaded machine the clock lags more, it
///   never runs ahead. [`CoarseClock::refresh`] brings it up to date at once, so an event loop can
///   refresh it at the top of every turn (as nginx does with its cached time) and need no thread.
/// - **Monotonic**: the cache only moves forward (`fetch_max`), whoever refreshes it, so no
///   thread ever reads a value older than one it (or anything that happened before it) read.
///
/// # What that means for a limiter
/// A limiter is exact in the clock's time. Since the clock is late, never early, a rate limiter
/// on it is conservative: tokens and windows come back up to the staleness later than on
/// [`StdClock`], never sooner. Window edges move by up to the staleness in real time, so a fixed
/// window's real length can shrink by the change in lag between its two edges. A RetryAfter is
/// computed from the late reading: waiting that long is enough unless the lag grows in the
/// meantime — add one interval to be certain. Periods shorter than the interval are honoured on
/// average (elapsed periods are counted exactly, they arrive in bursts of about
/// `interval / period`). Choose the interval well below your shortest period: the default, 1 ms,
/// suits periods of 10 ms and more; its refresher wakes 1,000 times a second.
///
/// ```
/// use core::time::Duration;
/// use tollgate::{Clock, CoarseClock, Limiter, StdClock, TokenBucketLimiter, TokenBucketOptions};
///
/// let clock = CoarseClock::start(Duration::from_millis(1)).expect("spawn the refresher");
/// let bucket =
///     TokenBucketLimiter::with_clock(TokenBucketOptions::new(100, 10, Duration::from_millis(100)), clock)
///         .unwrap();
/// assert!(bucket.try_acquire(1).is_ok());
///
/// // Readings are StdClock readings from the recent past: never ahead of StdClock.
/// let coarse = clock.now();
/// assert!(coarse <= StdClock.now());
/// ```
///
/// Without a thread, refreshed by hand:
///
/// ```
/// use tollgate::{Clock, CoarseClock, StdClock};
///
/// let clock = CoarseClock::manual();
/// let before = StdClock.now();
/// CoarseClock::refresh(); // e.g. at the top of every event-loop turn
/// assert!(clock.now() >= before);
/// ```
// No `Default`: every way to get one refreshes the cache first, so a reading is never the 0 of
// a cache nobody has filled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CoarseClock {
    _private: (),
}

impl CoarseClock {
    /// The refresh interval of [`CoarseClock::new`]: 1 ms.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::CoarseClock;
    ///
    /// let _clock = CoarseClock::new().unwrap();
    /// assert_eq!(CoarseClock::interval(), Some(CoarseClock::DEFAULT_INTERVAL));
    /// assert_eq!(CoarseClock::DEFAULT_INTERVAL, Duration::from_millis(1));
    /// # CoarseClock::stop();
    /// ```
    pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(1);

    /// The shortest interval the refresher accepts: 10 µs (shorter ones are raised to it).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::CoarseClock;
    ///
    /// let _clock = CoarseClock::start(Duration::from_nanos(1)).unwrap(); // raised to the minimum
    /// assert_eq!(CoarseClock::interval(), Some(CoarseClock::MIN_INTERVAL));
    /// # CoarseClock::stop();
    /// ```
    pub const MIN_INTERVAL: Duration = Duration::from_micros(10);

    /// The clock, with its refresher running every [`DEFAULT_INTERVAL`](Self::DEFAULT_INTERVAL)
    /// (or faster, if it was already started with a shorter interval).
    ///
    /// # Errors
    /// The refresher thread could not be spawned.
    ///
    /// # Examples
    ///
    /// ```
    /// use tollgate::{Clock, CoarseClock, GcraLimiter, GcraOptions, Limiter};
    ///
    /// let clock = CoarseClock::new()?;
    /// let gcra = GcraLimiter::with_clock(GcraOptions::per_second(100), clock).unwrap();
    /// assert!(gcra.try_acquire(1).is_ok());
    /// // Its refresher runs: waiters on the limiter are woken by the process timer.
    /// assert!(clock.advances_by_itself());
    /// # CoarseClock::stop();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn new() -> io::Result<Self> {
        Self::start(Self::DEFAULT_INTERVAL)
    }

    /// The clock, with its refresher running every `interval` or less.
    ///
    /// The first call spawns the process's refresher thread (named `tollgate-coarse-clock`),
    /// which runs until [`stop`](Self::stop) (or the end of the process). A later call with a shorter interval makes the
    /// running refresher wake that much more often (from its next wake-up on); a longer one
    /// changes nothing: the shortest interval asked for wins. `interval` is clamped to
    /// [`MIN_INTERVAL`](Self::MIN_INTERVAL)..=1 hour.
    ///
    /// The cache is refreshed before this returns, so the clock is current at once.
    ///
    /// # Errors
    /// The refresher thread could not be spawned. Nothing refreshes the cache then: take a
    /// [`manual`](Self::manual) clock and refresh it yourself, or call `start` again later (it
    /// tries to spawn the thread again).
    ///
    /// # Examples
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::{Clock, CoarseClock, StdClock};
    ///
    /// let clock = CoarseClock::start(Duration::from_millis(5))?;
    /// assert_eq!(CoarseClock::interval(), Some(Duration::from_millis(5)));
    /// CoarseClock::start(Duration::from_millis(2))?; // shorter: the refresher wakes more often
    /// assert_eq!(CoarseClock::interval(), Some(Duration::from_millis(2)));
    /// CoarseClock::start(Duration::from_secs(1))?; // longer: changes nothing
    /// assert_eq!(CoarseClock::interval(), Some(Duration::from_millis(2)));
    /// assert!(clock.now() <= StdClock.now()); // refreshed before `start` returned, never ahead
    /// # CoarseClock::stop();
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn start(interval: Duration) -> io::Result<Self> {
        let ns = clamp_interval(interval);
        Self::refresh();
        let mut running = REFRESHER.lock().unwrap_or_else(PoisonError::into_inner);
        if running.is_some() {
            // The running refresher reads the interval before every sleep.
            INTERVAL_NS.fetch_min(ns, Ordering::Relaxed);
        } else {
            INTERVAL_NS.store(ns, Ordering::Relaxed);
            match std::thread::Builder::new()
                .name("tollgate-coarse-clock".into())
                .spawn(refresher)
            {
                Ok(handle) => *running = Some(handle),
                Err(e) => {
                    INTERVAL_NS.store(0, Ordering::Relaxed);
                    return Err(e);
                }
            }
        }
        Ok(Self { _private: () })
    }

    /// Stops the refresher thread, if one runs, and waits for it to exit; returns whether one
    /// ran. Every `CoarseClock` keeps working but moves only when [`refresh`](Self::refresh) is
    /// called (as a [`manual`](Self::manual) clock does), until [`start`](Self::start) spawns a
    /// refresher again. For programs (and test suites) that must end with no thread left behind.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::CoarseClock;
    ///
    /// let _clock = CoarseClock::start(Duration::from_millis(1)).unwrap();
    /// assert!(CoarseClock::interval().is_some());
    /// assert!(CoarseClock::stop());
    /// assert_eq!(CoarseClock::interval(), None);
    /// ```
    pub fn stop() -> bool {
        let mut running = REFRESHER.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(handle) = running.take() else {
            return false;
        };
        STOP.store(true, Ordering::SeqCst);
        handle.thread().unpark();
        // The refresher never panics; a join error could only carry its panic, and there is none.
        let _ = handle.join();
        STOP.store(false, Ordering::SeqCst);
        INTERVAL_NS.store(0, Ordering::Relaxed);
        true
    }

    /// The clock without starting a refresher: it moves only when [`CoarseClock::refresh`] is
    /// called (or when a refresher started by [`start`](Self::start) runs). For programs that
    /// refresh it themselves, e.g. once per event-loop turn.
    ///
    /// The cache is refreshed before this returns.
    ///
    /// ```
    /// use tollgate::{Clock, CoarseClock};
    ///
    /// let clock = CoarseClock::manual();
    /// assert!(!clock.advances_by_itself()); // no refresher: it moves when refreshed
    /// let t = clock.now();
    /// // ... one turn of the event loop ...
    /// CoarseClock::refresh();
    /// assert!(clock.now() >= t);
    /// ```
    pub fn manual() -> Self {
        Self::refresh();
        Self { _private: () }
    }

    /// Brings the process-wide cache up to [`StdClock::now`]. Safe to call from any number of
    /// threads at once, alongside the refresher: the cache keeps the latest reading.
    ///
    /// ```
    /// use tollgate::{Clock, CoarseClock, StdClock};
    ///
    /// let clock = CoarseClock::manual();
    /// let before = StdClock.now();
    /// CoarseClock::refresh();
    /// let after = StdClock.now();
    /// assert!(before <= clock.now() && clock.now() <= after);
    /// ```
    pub fn refresh() {
        NOW.fetch_max(StdClock.now().as_nanos(), Ordering::Relaxed);
    }

    /// The running refresher's interval, or `None` if no refresher runs.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::CoarseClock;
    ///
    /// assert_eq!(CoarseClock::interval(), None); // nothing started it yet
    /// let _clock = CoarseClock::start(Duration::from_millis(1)).unwrap();
    /// assert_eq!(CoarseClock::interval(), Some(Duration::from_millis(1)));
    /// CoarseClock::stop();
    /// assert_eq!(CoarseClock::interval(), None);
    /// ```
    pub fn interval() -> Option<Duration> {
        match INTERVAL_NS.load(Ordering::Relaxed) {
            0 => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }
}

impl Clock for CoarseClock {
    /// One relaxed atomic load.
    #[inline]
    fn now(&self) -> Instant {
        Instant::from_nanos(NOW.load(Ordering::Relaxed))
    }
    /// True while the refresher runs.
    fn advances_by_itself(&self) -> bool {
        INTERVAL_NS.load(Ordering::Relaxed) != 0
    }
}

/// `interval` in nanoseconds, within [`CoarseClock::MIN_INTERVAL`]..=1 hour.
fn clamp_interval(interval: Duration) -> u64 {
    let min = CoarseClock::MIN_INTERVAL.as_nanos() as u64;
    let max = 3_600_000_000_000;
    u64::try_from(interval.as_nanos())
        .unwrap_or(max)
        .clamp(min, max)
}

/// The refresher thread: refresh, sleep one interval, until told to stop (the stop unparks it).
fn refresher() {
    while !STOP.load(Ordering::SeqCst) {
        CoarseClock::refresh();
        std::thread::park_timeout(Duration::from_nanos(INTERVAL_NS.load(Ordering::Relaxed)));
    }
}

#[cfg(test)]
mod tests {
    //! Deterministic properties only: nothing here sleeps or depends on how long anything takes.
    use super::*;

    /// Loop counts scaled down under miri (an interpreter, ~1000x slower): the properties are
    /// the same, checked over fewer rounds.
    const fn rounds(n: usize) -> usize {
        if cfg!(miri) {
            n / 100
        } else {
            n
        }
    }

    #[test]
    fn zero_sized_and_copy() {
        assert_eq!(core::mem::size_of::<CoarseClock>(), 0);
        let a = CoarseClock::manual();
        let b = a;
        assert_eq!(a, b);
    }

    #[test]
    fn refresh_brackets_std_clock() {
        let clock = CoarseClock::manual();
        for _ in 0..rounds(1_000) {
            let lo = StdClock.now();
            CoarseClock::refresh();
            let v = clock.now();
            let hi = StdClock.now();
            // The cache holds a StdClock reading taken no earlier than `lo` (refresh) and no
            // later than the read (anything a refresher stored was read from StdClock before).
            assert!(lo <= v && v <= hi, "{lo:?} <= {v:?} <= {hi:?}");
        }
    }

    #[test]
    fn never_goes_backwards_with_racing_refreshers() {
        let clock = CoarseClock::manual();
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..rounds(10_000) {
                        CoarseClock::refresh();
                    }
                });
            }
            let mut last = clock.now();
            for _ in 0..rounds(100_000) {
                let v = clock.now();
                assert!(v >= last, "{v:?} < {last:?}");
                last = v;
            }
        });
    }

    #[test]
    fn the_shortest_interval_wins_and_intervals_are_clamped() {
        let clock = CoarseClock::start(Duration::from_secs(30)).unwrap();
        assert!(CoarseClock::interval().unwrap() <= Duration::from_secs(30));
        let _ = CoarseClock::start(Duration::from_millis(2)).unwrap();
        assert!(CoarseClock::interval().unwrap() <= Duration::from_millis(2));
        // A longer interval asked for later changes nothing.
        let _ = CoarseClock::start(Duration::from_secs(3_600)).unwrap();
        assert!(CoarseClock::interval().unwrap() <= Duration::from_millis(2));
        assert!(clock.now() <= StdClock.now());
        // Below the minimum or past an hour: clamped (never zero, which means "not running").
        assert_eq!(clamp_interval(Duration::ZERO), 10_000);
        assert_eq!(clamp_interval(Duration::MAX), 3_600_000_000_000);
        assert_eq!(clamp_interval(Duration::from_millis(1)), 1_000_000);
        // Stopped, the clock keeps its last reading and moves only when refreshed; no thread is
        // left behind (miri checks that every thread has ended when the suite does).
        assert!(clock.advances_by_itself());
        assert!(CoarseClock::stop());
        assert!(!clock.advances_by_itself());
        assert_eq!(CoarseClock::interval(), None);
        assert!(!CoarseClock::stop());
    }

    #[test]
    fn drives_a_limiter() {
        use crate::{FixedWindowLimiter, FixedWindowOptions, Limiter, Reason};
        // A window of 100 years: nothing this test does can reach its end.
        let window = Duration::from_secs(100 * 365 * 24 * 3600);
        let clock = CoarseClock::manual();
        let limiter =
            FixedWindowLimiter::with_clock(FixedWindowOptions::new(2, window), clock).unwrap();
        assert!(limiter.try_acquire(2).is_ok());
        CoarseClock::refresh();
        let denied = limiter.try_acquire(1).unwrap_err();
        assert_eq!(denied.reason(), Reason::Exhausted);
        assert!(denied.retry_after().unwrap() <= window);
    }
}
