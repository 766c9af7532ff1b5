use core::future::Future;
use core::pin::Pin;
use core::time::Duration;
use std::sync::Arc;

use super::charge::Charged;
use super::Key;
#[cfg(doc)]
use super::Policy;
use crate::http::meter::Meter;
#[cfg(doc)]
use crate::lease::Reason;
use crate::lease::{OwnedLease, Rejection, SettleError};
use crate::quota::QuotaState;

/// What an admitted request holds until its response body ends: a concurrency permit, or
/// nothing for rate policies.
///
/// ```
/// # use std::sync::Arc;
/// use tollgate::http::Permit;
/// use tollgate::ConcurrencyOptions;
///
/// use tollgate::{AcquireOwned, ConcurrencyLimiter};
/// let pool = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap());
/// let permit = Permit::lease(pool.try_acquire_owned(1).unwrap());
/// assert!(permit.holds());
/// assert!(pool.try_acquire_owned(1).is_err());
/// drop(permit); // the response ended
/// assert!(pool.try_acquire_owned(1).is_ok());
/// ```
#[derive(Debug, Default)]
pub struct Permit(pub(super) PermitInner);

/// A granted request's permit, timed for the layer's metrics: the timer records the lease's
/// duration when dropped, as the permit goes.
#[cfg(feature = "metrics")]
#[derive(Debug)]
pub(in crate::http) struct Metered {
    pub(in crate::http) inner: Permit,
    /// Held for its drop, which records the duration.
    _timer: crate::http::meter::LeaseTimer,
}

#[derive(Debug, Default)]
pub(super) enum PermitInner {
    #[default]
    None,
    Owned(OwnedLease),
    /// An adaptive limiter's lease: released, and its latency and outcome sampled, when the
    /// response ends.
    Adaptive(crate::adaptive::OwnedAdaptiveLease),
    /// A permit timed for the layer's metrics, from the grant to the end of the response.
    #[cfg(feature = "metrics")]
    Metered(Box<Metered>),
    /// A cost or outcome policy's lease, settled by the response.
    Charged(Box<Charged>),
}

impl Permit {
    /// Nothing held (a rate policy's grant, or an unlimited request).
    ///
    /// ```
    /// use tollgate::http::{Grant, Permit};
    ///
    /// let grant = Grant { permit: Permit::none(), quota: None };
    /// assert!(!grant.permit.holds());
    /// ```
    pub const fn none() -> Self {
        Permit(PermitInner::None)
    }

    /// A lease held until the response ends (a custom [`PolicyLimiter`]'s permit).
    ///
    /// ```
    /// # use std::{sync::Arc, time::Duration};
    /// use tollgate::http::Permit;
    /// use tollgate::{ConcurrencyOptions, TokenBucketOptions};
    ///
    /// use tollgate::{AcquireOwned, ConcurrencyLimiter, TokenBucketLimiter};
    /// let pool = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(8)).unwrap());
    /// assert!(Permit::lease(pool.try_acquire_owned(1).unwrap()).holds());
    /// // A rate limiter's lease has nothing to give back: no permit is kept.
    /// let rate = Arc::new(TokenBucketLimiter::new(TokenBucketOptions::new(8, 8, Duration::from_secs(1))).unwrap());
    /// assert!(!Permit::lease(rate.try_acquire_owned(1).unwrap()).holds());
    /// ```
    pub fn lease(lease: OwnedLease) -> Self {
        if lease.returns_permits() {
            Permit(PermitInner::Owned(lease))
        } else {
            Permit::none()
        }
    }

    /// An adaptive limiter's lease, held until the response ends: then released, with the
    /// response's latency (from the grant to the body's end) and outcome sampled — a 5xx, a
    /// 429 from upstream or a failed inner service is a drop, another 4xx says nothing about
    /// capacity and is not sampled.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::http::Permit;
    /// use tollgate::adaptive::{AdaptiveLimiter, AdaptiveOptions};
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(AdaptiveOptions::new(4)).unwrap());
    /// let permit = Permit::adaptive(limiter.try_acquire_owned(1).unwrap());
    /// assert!(permit.holds());
    /// ```
    pub fn adaptive(lease: crate::adaptive::OwnedAdaptiveLease) -> Self {
        Permit(PermitInner::Adaptive(lease))
    }

    /// This permit, timed by `meter` as a lease until it is dropped (the layer's metrics).
    /// Out of line: a layer without metrics never calls it.
    #[inline(never)]
    pub(in crate::http) fn timed(self, meter: &Arc<Meter>) -> Self {
        #[cfg(feature = "metrics")]
        return Permit(PermitInner::Metered(Box::new(Metered {
            _timer: meter.lease(),
            inner: self,
        })));
        #[cfg(not(feature = "metrics"))]
        match **meter {}
    }

    /// A charged request's permit (see [`Policy::cost`]).
    pub(crate) fn charged(charged: Charged) -> Self {
        Permit(PermitInner::Charged(Box::new(charged)))
    }

    /// Settles the permits this holds to `actual` (see [`OwnedLease::settle`]): a refund
    /// when `actual` is less than what was taken, a debit (bounded by the limiter's debt
    /// limit) when it is more. The layer settles a [cost](Policy::cost) or
    /// [outcome](Policy::charge_when) policy's permit itself, from the response; this is for
    /// a custom [`PolicyLimiter`]'s or a test's. A permit that holds nothing to settle
    /// ([`Permit::none`], a rate limiter's lease given to [`Permit::lease`], an adaptive
    /// lease) answers [`SettleError::Unsupported`]; past the debt limit,
    /// [`SettleError::DebtLimit`], and nothing changes.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use tollgate::http::Permit;
    /// use tollgate::{AcquireOwned, ConcurrencyLimiter, ConcurrencyOptions, Limiter, SettleError};
    ///
    /// let pool = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(8)).unwrap());
    /// let mut permit = Permit::lease(pool.try_acquire_owned(4).unwrap());
    /// permit.settle(1).unwrap(); // three back at once
    /// assert_eq!(pool.available_permits(), 7);
    /// assert_eq!(Permit::none().settle(1), Err(SettleError::Unsupported));
    /// ```
    pub fn settle(&mut self, actual: u32) -> Result<(), SettleError> {
        match &mut self.0 {
            PermitInner::Owned(l) => l.settle(actual),
            PermitInner::Charged(c) => c.settle(actual),
            #[cfg(feature = "metrics")]
            PermitInner::Metered(m) => m.inner.settle(actual),
            PermitInner::None | PermitInner::Adaptive(_) => Err(SettleError::Unsupported),
        }
    }

    /// The response head, for a charged permit: the quota after its settle, if it settled.
    pub(crate) fn respond(&mut self, head: &http::response::Parts) -> Option<QuotaState> {
        match &mut self.0 {
            PermitInner::Charged(c) => c.respond(head),
            #[cfg(feature = "metrics")]
            PermitInner::Metered(m) => m.inner.respond(head),
            _ => None,
        }
    }

    /// Whether this is a charged permit (its response head settles it).
    pub(crate) fn is_charged(&self) -> bool {
        match &self.0 {
            PermitInner::Charged(_) => true,
            #[cfg(feature = "metrics")]
            PermitInner::Metered(m) => m.inner.is_charged(),
            _ => false,
        }
    }

    /// The response body yielded `n` bytes.
    pub(crate) fn sent(&mut self, n: usize) {
        match &mut self.0 {
            PermitInner::Charged(c) => c.sent(n),
            #[cfg(feature = "metrics")]
            PermitInner::Metered(m) => m.inner.sent(n),
            _ => {}
        }
    }

    /// What the response's status says about the server's capacity, for an adaptive lease:
    /// a 5xx or a 429 (from upstream) is a drop, another 4xx nothing.
    pub(crate) fn observe(&mut self, status: http::StatusCode) {
        let dropped = status.is_server_error() || status == http::StatusCode::TOO_MANY_REQUESTS;
        match &mut self.0 {
            PermitInner::Adaptive(lease) => {
                if dropped {
                    lease.dropped();
                } else if status.is_client_error() {
                    lease.ignore();
                }
            }
            // A partition's lease (an adaptive limit per key reports it; others ignore it).
            PermitInner::Owned(lease) => {
                if dropped {
                    lease.dropped();
                } else if status.is_client_error() {
                    lease.ignore();
                }
            }
            #[cfg(feature = "metrics")]
            PermitInner::Metered(m) => m.inner.observe(status),
            _ => {}
        }
    }

    /// The inner service failed (an error, a timeout): a drop, for an adaptive lease.
    pub(crate) fn fail(&mut self) {
        match &mut self.0 {
            PermitInner::Adaptive(lease) => lease.dropped(),
            PermitInner::Owned(lease) => lease.dropped(),
            #[cfg(feature = "metrics")]
            PermitInner::Metered(m) => m.inner.fail(),
            _ => {}
        }
    }

    /// Whether the response body must keep this until it ends: it gives permits back, or the
    /// metrics time it.
    pub(crate) fn kept(&self) -> bool {
        #[cfg(feature = "metrics")]
        if matches!(self.0, PermitInner::Metered(_)) {
            return true;
        }
        matches!(self.0, PermitInner::Charged(_)) || self.holds()
    }

    /// Whether dropping this gives permits back.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// use tollgate::http::Permit;
    /// use tollgate::ConcurrencyOptions;
    ///
    /// use tollgate::{AcquireOwned, ConcurrencyLimiter};
    /// let pool = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(2)).unwrap());
    /// assert!(Permit::lease(pool.try_acquire_owned(1).unwrap()).holds());
    /// assert!(!Permit::none().holds());
    /// ```
    pub fn holds(&self) -> bool {
        match &self.0 {
            PermitInner::None => false,
            PermitInner::Owned(l) => l.returns_permits(),
            PermitInner::Adaptive(l) => l.permits() > 0,
            PermitInner::Charged(c) => c.holds(),
            #[cfg(feature = "metrics")]
            PermitInner::Metered(m) => m.inner.holds(),
        }
    }
}

/// A granted request: what it holds, and the quota left (when asked for).
///
/// ```
/// use tollgate::http::{Decision, Grant, Permit};
///
/// use tollgate::QuotaState;
/// let grant = Grant { permit: Permit::none(), quota: Some(QuotaState { limit: 10, remaining: 9, reset_after: None }) };
/// let decision = Decision::Granted(grant);
/// assert!(matches!(decision, Decision::Granted(Grant { quota: Some(q), .. }) if q.remaining == 9));
/// ```
#[derive(Debug)]
pub struct Grant {
    /// Held until the response body ends.
    pub permit: Permit,
    /// The partition's quota after this grant, if the caller asked for it.
    pub quota: Option<QuotaState>,
}

/// A refused request: why, and the partition's quota (when asked for).
///
/// ```
/// # use std::time::Duration;
/// use tollgate::http::Denial;
/// use tollgate::Reason;
///
/// use tollgate::{QuotaState, Rejection};
/// let retry = Duration::from_secs(30);
/// let denial = Denial {
///     rejection: Rejection::with_retry_after(&Reason::Exhausted, retry),
///     quota: Some(QuotaState::exhausted(100, Some(retry))),
/// };
/// assert_eq!(denial.rejection.retry_after(), Some(retry)); // becomes `Retry-After: 30`
/// assert_eq!(denial.quota.unwrap().remaining, 0);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Denial {
    /// Why, and for rate policies when to retry.
    pub rejection: Rejection,
    /// The partition's quota, if the caller asked for it.
    pub quota: Option<QuotaState>,
}

/// The outcome of [`PolicyLimiter::try_acquire`].
///
/// ```
/// use tollgate::http::{Decision, Denial, Grant, Permit};
/// use tollgate::{Reason, Rejection};
///
/// // What a `PolicyLimiter::try_acquire` answers: here, from the requests left in a budget.
/// fn decide(left: u64) -> Decision {
///     if left > 0 {
///         Decision::Granted(Grant { permit: Permit::none(), quota: None })
///     } else {
///         Decision::Denied(Denial { rejection: Rejection::new(&Reason::Exhausted), quota: None })
///     }
/// }
/// assert!(matches!(decide(1), Decision::Granted(_)));
/// assert!(matches!(decide(0), Decision::Denied(d) if d.rejection.reason() == Reason::Exhausted));
/// ```
#[derive(Debug)]
pub enum Decision {
    /// Admitted.
    Granted(Grant),
    /// Refused.
    Denied(Denial),
    /// Cannot be decided without waiting: the layer awaits [`PolicyLimiter::acquire`].
    Wait,
}

/// A boxed future of a waited decision.
///
/// ```
/// use tollgate::http::{AcquireFuture, Grant, Permit};
///
/// // What `PolicyLimiter::acquire` returns: the decision, once waited for (here at once).
/// let granted: AcquireFuture = Box::pin(async { Ok(Grant { permit: Permit::none(), quota: None }) });
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// assert!(rt.block_on(granted).is_ok());
/// ```
pub type AcquireFuture = Pin<Box<dyn Future<Output = Result<Grant, Denial>> + Send>>;

/// What `RateLimit-Policy` says about a policy: its quota, window and unit.
///
/// ```
/// # use std::time::Duration;
/// use tollgate::http::{Policy, PolicyQuota, RateLimiting};
/// use tollgate::{ConcurrencyOptions, TokenBucketOptions};
///
/// let limits = RateLimiting::builder()
///     .policy("pool", Policy::concurrency(ConcurrencyOptions::new(10)).unwrap())
///     .policy("rate", Policy::token_bucket(TokenBucketOptions::new(20, 10, Duration::from_secs(1))).unwrap())
///     .build()
///     .unwrap();
/// assert_eq!(limits.describe("pool"), Some(PolicyQuota { quota: 10, window: None, concurrent: true }));
/// // A token bucket's window: the time to refill it from empty.
/// assert_eq!(limits.describe("rate").unwrap().window, Some(Duration::from_secs(2)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PolicyQuota {
    /// `q`: the quota (permits per window, or concurrent requests).
    pub quota: u64,
    /// `w`: the window, for rate policies.
    pub window: Option<Duration>,
    /// `qu="concurrent-requests"` instead of requests per window.
    pub concurrent: bool,
}

/// The decision every policy goes through: **the extension point** for your own limiter — an
/// async one backed by Redis, a remote quota service, anything.
///
/// The layer calls [`try_acquire`](Self::try_acquire) synchronously in `Service::call`: the
/// built-in limiters decide there, lock-free, without allocating. A limiter that must wait —
/// a queueing policy whose permits are taken, or an async backend that needs a network round
/// trip — returns [`Decision::Wait`], and the layer then awaits
/// [`acquire`](Self::acquire) (one boxed future per waiting request). An async backend should
/// return `Wait` from `try_acquire` at once and do its I/O in `acquire`: never block in
/// `try_acquire` (a blocking sync path exhausts executor threads).
///
/// Under [`Policy::queue`] with a maximum delay, the layer drops a waiting `acquire` at the
/// deadline and calls `try_acquire` once more: a grant is taken; a denial is answered as
/// [`Reason::TimedOut`], with the denial's RetryAfter (so give one if you know it); `Wait`, as
/// a plain [`Reason::TimedOut`].
///
/// ```
/// use std::sync::Arc;
/// use tollgate::http::{AcquireFuture, Decision, Denial, Grant, Key, Permit, PolicyLimiter, PolicyQuota};
/// use tollgate::{Reason, Rejection};
///
/// /// Admits even keys, denies odd ones — after an "I/O" await.
/// struct Remote;
/// impl PolicyLimiter for Remote {
///     fn try_acquire(&self, _key: Key, _quota: bool) -> Decision {
///         Decision::Wait // always ask the remote store
///     }
///     fn acquire(self: Arc<Self>, key: Key, _quota: bool) -> AcquireFuture {
///         Box::pin(async move {
///             // ... a Redis EVALSHA would go here ...
///             if key == Key::from_u64(1) {
///                 Err(Denial { rejection: Rejection::new(&Reason::Exhausted), quota: None })
///             } else {
///                 Ok(Grant { permit: Permit::none(), quota: None })
///             }
///         })
///     }
///     fn describe(&self) -> PolicyQuota {
///         PolicyQuota { quota: 100, window: Some(std::time::Duration::from_secs(60)), concurrent: false }
///     }
/// }
/// let policy = tollgate::http::Policy::custom(Arc::new(Remote));
/// # let _ = policy;
/// ```
pub trait PolicyLimiter: Send + Sync + 'static {
    /// Decides for `key` now, without waiting; fills in the quota if `want_quota`.
    ///
    /// ```
    /// # use std::{sync::Arc, time::Duration};
    /// use tollgate::http::{AcquireFuture, Decision, Denial, Grant, Key, Permit, PolicyLimiter, PolicyQuota};
    /// use tollgate::Reason;
    /// use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    /// use tollgate::Rejection;
    ///
    /// /// A request budget kept by a quota service (here: a counter).
    /// struct Budget(AtomicU64);
    ///
    /// impl PolicyLimiter for Budget {
    ///     fn try_acquire(&self, _key: Key, _want_quota: bool) -> Decision {
    ///         match self.0.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)) {
    ///             Ok(_) => Decision::Granted(Grant { permit: Permit::none(), quota: None }),
    ///             Err(_) => Decision::Denied(Denial { rejection: Rejection::new(&Reason::Exhausted), quota: None }),
    ///         }
    ///     }
    ///     fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture {
    ///         Box::pin(async move {
    ///             match self.try_acquire(key, want_quota) {
    ///                 Decision::Granted(g) => Ok(g),
    ///                 Decision::Denied(d) => Err(d),
    ///                 Decision::Wait => unreachable!(),
    ///             }
    ///         })
    ///     }
    ///     fn describe(&self) -> PolicyQuota {
    ///         PolicyQuota { quota: 1_000, window: Some(Duration::from_secs(86_400)), concurrent: false }
    ///     }
    /// }
    /// let budget = Budget(AtomicU64::new(2));
    /// let key = Key::from_bytes(b"tenant-1");
    /// assert!(matches!(budget.try_acquire(key, false), Decision::Granted(_)));
    /// assert!(matches!(budget.try_acquire(key, false), Decision::Granted(_)));
    /// assert!(matches!(budget.try_acquire(key, false), Decision::Denied(_)));
    /// ```
    fn try_acquire(&self, key: Key, want_quota: bool) -> Decision;

    /// Waits for a decision for `key` (called after [`Decision::Wait`]). Dropping the future
    /// must cancel the wait and give back anything it was granted.
    ///
    /// ```
    /// # use std::{sync::Arc, time::Duration};
    /// use tollgate::http::{AcquireFuture, Decision, Denial, Grant, Key, Permit, PolicyLimiter, PolicyQuota};
    /// use tollgate::Reason;
    /// use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    /// use tollgate::Rejection;
    ///
    /// /// A request budget kept by a quota service (here: a counter).
    /// struct Budget(AtomicU64);
    ///
    /// impl PolicyLimiter for Budget {
    ///     fn try_acquire(&self, _key: Key, _want_quota: bool) -> Decision {
    ///         match self.0.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)) {
    ///             Ok(_) => Decision::Granted(Grant { permit: Permit::none(), quota: None }),
    ///             Err(_) => Decision::Denied(Denial { rejection: Rejection::new(&Reason::Exhausted), quota: None }),
    ///         }
    ///     }
    ///     fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture {
    ///         Box::pin(async move {
    ///             match self.try_acquire(key, want_quota) {
    ///                 Decision::Granted(g) => Ok(g),
    ///                 Decision::Denied(d) => Err(d),
    ///                 Decision::Wait => unreachable!(),
    ///             }
    ///         })
    ///     }
    ///     fn describe(&self) -> PolicyQuota {
    ///         PolicyQuota { quota: 1_000, window: Some(Duration::from_secs(86_400)), concurrent: false }
    ///     }
    /// }
    /// let budget = Arc::new(Budget(AtomicU64::new(1)));
    /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let grant = rt.block_on(budget.clone().acquire(Key::GLOBAL, false)).unwrap();
    /// assert!(!grant.permit.holds());
    /// let denial = rt.block_on(budget.acquire(Key::GLOBAL, false)).unwrap_err();
    /// assert_eq!(denial.rejection.reason(), Reason::Exhausted);
    /// ```
    fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture;

    /// The policy's quota, for `RateLimit-Policy`.
    ///
    /// ```
    /// # use std::{sync::Arc, time::Duration};
    /// use tollgate::http::{AcquireFuture, Decision, Denial, Grant, Key, Permit, Policy, PolicyLimiter, PolicyQuota, RateLimiting};
    /// use tollgate::Reason;
    /// use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    /// use tollgate::Rejection;
    ///
    /// /// A request budget kept by a quota service (here: a counter).
    /// struct Budget(AtomicU64);
    ///
    /// impl PolicyLimiter for Budget {
    ///     fn try_acquire(&self, _key: Key, _want_quota: bool) -> Decision {
    ///         match self.0.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)) {
    ///             Ok(_) => Decision::Granted(Grant { permit: Permit::none(), quota: None }),
    ///             Err(_) => Decision::Denied(Denial { rejection: Rejection::new(&Reason::Exhausted), quota: None }),
    ///         }
    ///     }
    ///     fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture {
    ///         Box::pin(async move {
    ///             match self.try_acquire(key, want_quota) {
    ///                 Decision::Granted(g) => Ok(g),
    ///                 Decision::Denied(d) => Err(d),
    ///                 Decision::Wait => unreachable!(),
    ///             }
    ///         })
    ///     }
    ///     fn describe(&self) -> PolicyQuota {
    ///         PolicyQuota { quota: 1_000, window: Some(Duration::from_secs(86_400)), concurrent: false }
    ///     }
    /// }
    /// let budget = Arc::new(Budget(AtomicU64::new(1_000)));
    /// assert_eq!(budget.describe().window, Some(Duration::from_secs(86_400)));
    /// let limits = RateLimiting::builder().policy("daily", Policy::custom(budget)).build().unwrap();
    /// // The layer's `RateLimit-Policy` header says `"daily";q=1000;w=86400`.
    /// assert_eq!(limits.describe("daily").unwrap().quota, 1_000);
    /// ```
    fn describe(&self) -> PolicyQuota;

    /// How many partitions are stored now, if the limiter keeps any (for metrics and tests).
    ///
    /// ```
    /// # use std::{sync::Arc, time::Duration};
    /// use tollgate::http::{AcquireFuture, Decision, Denial, Grant, Key, Permit, Policy, PolicyLimiter, PolicyQuota, RateLimiting};
    /// use tollgate::Reason;
    /// use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    /// use tollgate::Rejection;
    ///
    /// /// A request budget kept by a quota service (here: a counter).
    /// struct Budget(AtomicU64);
    ///
    /// impl PolicyLimiter for Budget {
    ///     fn try_acquire(&self, _key: Key, _want_quota: bool) -> Decision {
    ///         match self.0.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)) {
    ///             Ok(_) => Decision::Granted(Grant { permit: Permit::none(), quota: None }),
    ///             Err(_) => Decision::Denied(Denial { rejection: Rejection::new(&Reason::Exhausted), quota: None }),
    ///         }
    ///     }
    ///     fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture {
    ///         Box::pin(async move {
    ///             match self.try_acquire(key, want_quota) {
    ///                 Decision::Granted(g) => Ok(g),
    ///                 Decision::Denied(d) => Err(d),
    ///                 Decision::Wait => unreachable!(),
    ///             }
    ///         })
    ///     }
    ///     fn describe(&self) -> PolicyQuota {
    ///         PolicyQuota { quota: 1_000, window: Some(Duration::from_secs(86_400)), concurrent: false }
    ///     }
    /// }
    /// let budget = Budget(AtomicU64::new(10));
    /// assert_eq!(budget.partitions(), None); // the default: one shared budget
    /// let limits = RateLimiting::builder().policy("daily", Policy::custom(Arc::new(budget))).build().unwrap();
    /// assert_eq!(limits.partitions("daily"), None);
    /// ```
    fn partitions(&self) -> Option<usize> {
        None
    }
}
