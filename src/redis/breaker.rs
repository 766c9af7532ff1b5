//! The circuit breaker: stops calling a server that keeps failing, and probes it for recovery.
//!
//! A pure state machine over instants given by the caller (so it is tested on a
//! [`ManualClock`](crate::ManualClock)), behind one mutex taken only on failures and while the
//! circuit is not closed; a closed circuit is one relaxed atomic load per call.

use core::time::Duration;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::clock::Instant;

/// When the Redis limiter stops calling Redis, and when it tries again.
///
/// After `failures` consecutive failed calls (timeouts, and errors of the connection or the
/// server; not an error of one key, [`REDIS_KEY_ERROR`](super::REDIS_KEY_ERROR), nor a
/// `NOSCRIPT`, which is retried) the circuit **opens**: for
/// `open_for`, no call goes to Redis and the failure policy decides every request. Then the
/// circuit is **half open**: the next request probes Redis (one at a time; the others keep
/// getting the failure policy); a success closes the circuit, a failure opens it for another
/// `open_for`. A probe that never reports back (its future was dropped) is forgotten after
/// `open_for`, and another request probes.
///
/// ```
/// use core::time::Duration;
/// use tollgate::redis::CircuitBreaker;
///
/// let breaker = CircuitBreaker::new(3, Duration::from_millis(500));
/// assert_eq!((breaker.failures, breaker.open_for), (3, Duration::from_millis(500)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CircuitBreaker {
    /// Consecutive failures that open the circuit (at least 1).
    pub failures: u32,
    /// How long an open circuit stays open before a probe.
    pub open_for: Duration,
}

impl CircuitBreaker {
    /// Opens after `failures` consecutive failures, for `open_for`.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen)
    ///     .circuit_breaker(CircuitBreaker::new(2, Duration::from_secs(60)))
    ///     .build()
    ///     .unwrap();
    /// for _ in 0..3 {
    ///     assert!(rt.block_on(limiter.acquire("user-7", 1)).is_ok()); // failing open
    /// }
    /// let stats = limiter.redis_statistics();
    /// assert_eq!((stats.errors, stats.circuit_opened), (2, 1));
    /// assert_eq!(stats.calls, 2); // the third request did not wait for Redis
    /// assert_eq!(limiter.health(), Health::Degraded(PolicyKind::FailOpen));
    /// ```
    pub const fn new(failures: u32, open_for: Duration) -> Self {
        Self { failures, open_for }
    }
}

impl Default for CircuitBreaker {
    /// Opens after 3 consecutive failures, for 1 second.
    fn default() -> Self {
        Self::new(3, Duration::from_secs(1))
    }
}

/// The breaker's state, as [`Health`](super::Health) reports it.
///
/// ```
/// # use tollgate::redis::doc_support::*;
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
/// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen)
///     .circuit_breaker(CircuitBreaker::new(1, Duration::from_secs(60)))
///     .build()
///     .unwrap();
/// assert_eq!(limiter.circuit(), Circuit::Closed);
/// let _ = rt.block_on(limiter.acquire("user-7", 1)); // one failure opens it
/// assert_eq!(limiter.circuit(), Circuit::Open);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Circuit {
    /// Calls go to Redis.
    Closed,
    /// Calls do not go to Redis; the failure policy decides.
    Open,
    /// One call probes Redis; the others get the failure policy.
    HalfOpen,
}

/// What a request may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admit {
    /// Call Redis (circuit closed).
    Call,
    /// Call Redis as the probe (circuit half open).
    Probe,
    /// Do not call Redis; `for_` more until a probe.
    Skip(Duration),
}

#[derive(Debug)]
struct Inner {
    circuit: Circuit,
    consecutive: u32,
    /// Open: when a probe may go. Half open: when the probe is presumed lost.
    until: Instant,
    opened: u64,
}

/// The breaker's state machine.
#[derive(Debug)]
pub(crate) struct Breaker {
    config: CircuitBreaker,
    /// `true` while the circuit is closed and no failure is pending: the fast path.
    healthy: AtomicBool,
    inner: Mutex<Inner>,
}

impl Breaker {
    pub(crate) fn new(config: CircuitBreaker) -> Self {
        Self {
            config,
            healthy: AtomicBool::new(true),
            inner: Mutex::new(Inner {
                circuit: Circuit::Closed,
                consecutive: 0,
                until: Instant::ZERO,
                opened: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // The state is a few plain fields, consistent after every statement: a panic elsewhere
        // while holding the lock cannot leave it torn.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// May a request at `now` call Redis?
    pub(crate) fn admit(&self, now: Instant) -> Admit {
        if self.healthy.load(Ordering::Relaxed) {
            return Admit::Call;
        }
        let mut s = self.lock();
        match s.circuit {
            Circuit::Closed => Admit::Call,
            Circuit::Open | Circuit::HalfOpen if now >= s.until => {
                s.circuit = Circuit::HalfOpen;
                s.until = now.saturating_add(self.config.open_for);
                Admit::Probe
            }
            Circuit::Open | Circuit::HalfOpen => Admit::Skip(
                s.until
                    .checked_duration_since(now)
                    .unwrap_or(Duration::ZERO),
            ),
        }
    }

    /// A call succeeded.
    pub(crate) fn success(&self) {
        if self.healthy.load(Ordering::Relaxed) {
            return;
        }
        let mut s = self.lock();
        s.circuit = Circuit::Closed;
        s.consecutive = 0;
        self.healthy.store(true, Ordering::Relaxed);
    }

    /// A call failed at `now`.
    pub(crate) fn failure(&self, now: Instant) {
        let mut s = self.lock();
        self.healthy.store(false, Ordering::Relaxed);
        s.consecutive = s.consecutive.saturating_add(1);
        let open = match s.circuit {
            Circuit::Closed => s.consecutive >= self.config.failures.max(1),
            // A failed probe, or a failure reported late by a call admitted before the circuit
            // opened: (re)open.
            Circuit::HalfOpen | Circuit::Open => true,
        };
        if open {
            if s.circuit == Circuit::Closed {
                s.opened += 1;
            }
            s.circuit = Circuit::Open;
            s.until = now.saturating_add(self.config.open_for);
        }
    }

    /// The circuit now.
    pub(crate) fn circuit(&self) -> Circuit {
        if self.healthy.load(Ordering::Relaxed) {
            return Circuit::Closed;
        }
        self.lock().circuit
    }

    /// Times the circuit went from closed to open.
    pub(crate) fn opened(&self) -> u64 {
        self.lock().opened
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::tests::at;

    #[test]
    fn opens_after_consecutive_failures_only() {
        let b = Breaker::new(CircuitBreaker::new(3, Duration::from_millis(100)));
        b.failure(at(0));
        b.failure(at(1));
        b.success(); // the run is broken
        b.failure(at(2));
        b.failure(at(3));
        assert_eq!(b.circuit(), Circuit::Closed);
        assert_eq!(b.admit(at(3)), Admit::Call);
        b.failure(at(4));
        assert_eq!(b.circuit(), Circuit::Open);
        assert_eq!(b.opened(), 1);
        assert_eq!(b.admit(at(50)), Admit::Skip(Duration::from_millis(54)));
    }

    #[test]
    fn probes_one_at_a_time_and_closes_on_success() {
        let b = Breaker::new(CircuitBreaker::new(1, Duration::from_millis(100)));
        b.failure(at(0));
        assert_eq!(b.admit(at(99)), Admit::Skip(Duration::from_millis(1)));
        assert_eq!(b.admit(at(100)), Admit::Probe);
        assert_eq!(b.circuit(), Circuit::HalfOpen);
        // While the probe is out, the others skip.
        assert_eq!(b.admit(at(150)), Admit::Skip(Duration::from_millis(50)));
        b.success();
        assert_eq!(b.circuit(), Circuit::Closed);
        assert_eq!(b.admit(at(151)), Admit::Call);
    }

    #[test]
    fn a_failed_probe_reopens_and_a_lost_probe_is_replaced() {
        let b = Breaker::new(CircuitBreaker::new(1, Duration::from_millis(100)));
        b.failure(at(0));
        assert_eq!(b.admit(at(100)), Admit::Probe);
        b.failure(at(110));
        assert_eq!(b.circuit(), Circuit::Open);
        assert_eq!(b.admit(at(209)), Admit::Skip(Duration::from_millis(1)));
        assert_eq!(b.admit(at(210)), Admit::Probe);
        // That probe never reports (its future was dropped): after open_for, another probes.
        assert_eq!(b.admit(at(309)), Admit::Skip(Duration::from_millis(1)));
        assert_eq!(b.admit(at(310)), Admit::Probe);
        assert_eq!(b.opened(), 1, "reopening is not a new opening");
    }
}
