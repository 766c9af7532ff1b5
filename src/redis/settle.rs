//! Settling a lease to its true cost ([`RedisLimiter::settle`]): one script run, or none when
//! this machine's lease of the key's window can take the difference.

use core::fmt;
use std::sync::atomic::Ordering;

use ::redis::aio::ConnectionLike;

use super::decision::CallError;
use super::lease::Local;
use super::scripts::Kind;
use super::{DecidedBy, RedisDecision, RedisLimiter};
use crate::clock::{Clock, StdClock};
use crate::lease::{Lease, SettleError};

/// The low bits of a lease's stamp: the index of the window it was counted in (windows since
/// the Unix epoch; a fixed window or a sliding counter), or of its segment (segments since the
/// epoch; a sliding window), modulo 2^29; 0 for the others.
const WINDOW: u64 = (1 << 29) - 1;
/// A stamp's tag (its two high bits of 31): granted by the failure policy
/// [`FailOpen`](super::FailurePolicy::FailOpen), counted nowhere.
const OPEN: u64 = 1 << 29;
/// A stamp's tag: counted by Redis (a script's grant).
const REDIS: u64 = 2 << 29;
/// A stamp's tag: counted by Redis, handed out from this machine's lease of the window
/// ([`DecidedBy::Lease`]).
const SLOT: u64 = 3 << 29;

// The tags and the window fill a lease's stamp exactly.
const _: () = assert!(SLOT | WINDOW == crate::lease::STAMP_MASK);

/// Why [`RedisLimiter::settle`] changed nothing.
///
/// ```
/// # use tollgate::redis::doc_support::*;
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// use tollgate::{Lease, SettleError};
/// let algorithm = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
/// let limiter = RedisLimiter::builder(Down, "api", algorithm, FailurePolicy::FailOpen).build().unwrap();
/// // A lease made by hand was counted by no limiter.
/// let mut lease = Lease::unreleased(5);
/// let err = rt.block_on(limiter.settle("alice", &mut lease, 2)).unwrap_err();
/// assert_eq!(err, RedisSettleError::Settle(SettleError::Unsupported));
/// assert_eq!(err.settle_error(), Some(SettleError::Unsupported));
/// assert_eq!(lease.permits(), 5);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RedisSettleError {
    /// The settle itself was refused, as a local limiter's would be:
    /// [`SettleError::Unsupported`] (a lease of the local fallback, or a lease this limiter
    /// did not grant) or [`SettleError::DebtLimit`] (the debit would pass the debt bound:
    /// nothing was taken).
    Settle(SettleError),
    /// The call failed: the connection or the server (I/O, refused, `LOADING`, `BUSY`, ...).
    /// The lease is unchanged; nothing was settled.
    Unavailable,
    /// No answer within the limiter's [timeout](super::RedisLimiterBuilder::timeout). The lease
    /// is unchanged; as with a decision, the script may still have run on the server (the
    /// settle is then applied there once). It is not retried.
    Timeout,
    /// The partition's key holds data the script cannot read (see
    /// [`REDIS_KEY_ERROR`](super::REDIS_KEY_ERROR)): nothing was settled.
    KeyError,
}

impl RedisSettleError {
    /// The settle's own refusal ([`Settle`](Self::Settle)), if that is what this is.
    ///
    /// ```
    /// use tollgate::redis::RedisSettleError;
    /// use tollgate::SettleError;
    /// assert_eq!(RedisSettleError::Unavailable.settle_error(), None);
    /// let debt = RedisSettleError::from(SettleError::DebtLimit);
    /// assert_eq!(debt.settle_error(), Some(SettleError::DebtLimit));
    /// ```
    pub const fn settle_error(&self) -> Option<SettleError> {
        match self {
            Self::Settle(e) => Some(*e),
            _ => None,
        }
    }
}

/// [`RedisSettleError::Settle`].
impl From<SettleError> for RedisSettleError {
    fn from(e: SettleError) -> Self {
        Self::Settle(e)
    }
}

/// A short phrase.
///
/// ```
/// use tollgate::redis::RedisSettleError;
/// assert_eq!(RedisSettleError::Unavailable.to_string(), "rate-limit store unavailable: nothing settled");
/// ```
impl fmt::Display for RedisSettleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Settle(e) => fmt::Display::fmt(e, f),
            Self::Unavailable => f.write_str("rate-limit store unavailable: nothing settled"),
            Self::Timeout => f.write_str("rate-limit store timed out: settle unknown"),
            Self::KeyError => f.write_str("rate-limit key unreadable: nothing settled"),
        }
    }
}

impl std::error::Error for RedisSettleError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Settle(e) => Some(e),
            _ => None,
        }
    }
}

/// What the settle script answered.
enum Settled {
    /// Applied.
    Done,
    /// A refund whose window has ended: nothing back, nothing to do.
    WindowEnded,
    /// Past the debt bound: nothing taken.
    DebtLimit,
}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> RedisLimiter<C> {
    /// The stamp a granted lease keeps (see [`settle`](Self::settle)): who counted it, and for
    /// a fixed window or a sliding counter the window it was counted in (`window`, for a
    /// decision from this machine's lease), for a sliding window its segment: the one the
    /// script counted it in, that of the server's time in its reply.
    pub(super) fn stamp_of(&self, d: &RedisDecision, window: u64) -> u64 {
        let plan = &self.inner.plan;
        // The length (µs) of the window or segment a grant is counted in; 0: none kept.
        let unit = match plan.kind {
            Kind::Fixed | Kind::Counter => plan.consts[1],
            Kind::Full => plan.consts[2],
            _ => 0,
        };
        let in_window = |w: u64| if unit == 0 { 0 } else { w & WINDOW };
        match d.decided_by {
            DecidedBy::Redis => {
                let w = d.server_time_us.unwrap_or(0) / unit.max(1);
                REDIS | in_window(w)
            }
            DecidedBy::Lease => SLOT | in_window(window),
            DecidedBy::FailOpen => OPEN,
            // The fallback's lease is its local limiter's, not kept: nothing to settle with.
            _ => 0,
        }
    }

    /// Settles `lease`, granted by [`acquire`](Self::acquire) on `partition` for an estimate,
    /// to its true cost `actual`, in **one round trip** (none when this machine's lease of the
    /// window can take it), as [`Lease::settle`] settles a local limiter's lease:
    /// - **Fixed window**: a refund (`actual` below the lease's permits) goes back into the
    ///   window the lease was counted in if it is still the current one (else nothing comes
    ///   back, and the settle succeeds); a debit (`actual` above) is counted in the current
    ///   window, past the limit into **debt** up to one limit more: later requests are refused
    ///   until the window ends, and the count past the limit is carried into the next window,
    ///   which starts with it counted (a debt of `D` leaves `limit - D` there; the refusals'
    ///   RetryAfter counts it), as the local window's refill repays its debt first.
    /// - **GCRA and the leaky meter**: a refund moves the theoretical arrival time back (never
    ///   before now); a debit moves it forward, up to one burst past the tolerance: later
    ///   requests wait until time repays the debt, and their RetryAfter counts it.
    /// - **Token bucket** (both its states: one number below about 2 million tokens a second,
    ///   two above, see [`Algorithm::TokenBucket`](super::Algorithm::TokenBucket)): a refund
    ///   gives the tokens back (never above the limit), whatever the period; a debit takes them
    ///   now, past an empty bucket into debt up to one limit more: later requests wait until
    ///   the refill repays it, and their RetryAfter counts it.
    /// - **Sliding counter**: a refund comes out of the window the lease was counted in while
    ///   it still counts (the current window, or the previous one, whose weight then drops;
    ///   else nothing comes back); a debit is counted now in the current window, past the
    ///   limit into **debt** as long as the weighted estimate stays within one limit more:
    ///   later requests are refused while the estimate, which decays as the window slides,
    ///   leaves them no room, and their RetryAfter counts it.
    /// - **Sliding window**: a refund comes out of the segment the lease was counted in while
    ///   that segment is in the window (else nothing comes back), never below 0; a debit is
    ///   counted now in the current segment, past the limit into **debt** as long as the
    ///   window holds at most one limit more: later requests are refused until enough of the
    ///   oldest segments have left, and their RetryAfter is the instant they do.
    /// - Past the debt bound: [`SettleError::DebtLimit`], and nothing is taken.
    ///
    /// Where the lease came from decides where it settles: a lease Redis granted settles in
    /// Redis (one `EVALSHA` of a small script of its own, not batched, not gated by the
    /// circuit breaker, bounded by the timeout); a lease from this machine's lease of the
    /// window ([`lease`](super::RedisLimiterBuilder::lease), [`DecidedBy::Lease`]) gives a
    /// refund back to that lease if it still holds the same window (and takes a debit from it
    /// if it has the permits), with no round trip, else settles in Redis; a lease granted by
    /// [`FailOpen`](super::FailurePolicy::FailOpen) was counted nowhere, and settles at once,
    /// with nothing to account; a lease of the [fallback](super::FailurePolicy::Fallback), or
    /// one this limiter did not grant, answers [`SettleError::Unsupported`]. A refund that
    /// reached Redis also drops this machine's cached denial of the key
    /// ([`cache_denials`](super::RedisLimiterBuilder::cache_denials)); other machines' cached
    /// denials stand until they end (they never allow more than the limit).
    ///
    /// On success the lease holds `actual` permits (settle it again from there). On an error
    /// the lease is unchanged and nothing changed on this machine; a connection failure is
    /// [`RedisSettleError::Unavailable`], a timeout [`RedisSettleError::Timeout`] (the script
    /// may have run: it is not retried, as a decision is not). A lease keeps its window (a
    /// sliding window's: its segment) modulo 2^29: a refund is exact for a lease settled within
    /// 2^29 windows or segments (6 days of 1 ms windows).
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// // 10,000 tokens a minute; Redis is down and the limiter fails open: the lease was counted
    /// // nowhere, so it settles at once, with nothing to account.
    /// let tokens = Algorithm::FixedWindow(FixedWindowOptions::new(10_000, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "llm", tokens, FailurePolicy::FailOpen).build().unwrap();
    /// let mut lease = rt.block_on(limiter.acquire("customer-42", 1_000)).unwrap();
    /// rt.block_on(limiter.settle("customer-42", &mut lease, 312)).unwrap();
    /// assert_eq!(lease.permits(), 312);
    /// ```
    ///
    /// Against a server:
    ///
    /// ```no_run
    /// # use core::time::Duration;
    /// # use tollgate::redis::*;
    /// # use tollgate::{FixedWindowOptions, SettleError};
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let conn = ::redis::Client::open("redis://127.0.0.1/")?.get_connection_manager().await?;
    /// let tokens = Algorithm::FixedWindow(FixedWindowOptions::new(10_000, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(conn, "llm", tokens, FailurePolicy::FailClosed).build()?;
    /// let mut lease = limiter.acquire("customer-42", 1_000).await?;
    /// limiter.settle("customer-42", &mut lease, 312).await?; // 688 back
    /// assert_eq!(limiter.decide("customer-42", 0).await.remaining, 10_000 - 312);
    /// let mut lease = limiter.acquire("customer-42", 1_000).await?;
    /// limiter.settle("customer-42", &mut lease, 15_000).await?; // 5,312 into debt
    /// assert!(limiter.acquire("customer-42", 1).await.is_err()); // until the window ends
    /// let mut lease = limiter.acquire("customer-43", 1).await?;
    /// let past = limiter.settle("customer-43", &mut lease, 20_001).await;
    /// assert_eq!(past, Err(RedisSettleError::Settle(SettleError::DebtLimit)));
    /// # Ok(()) }
    /// ```
    pub async fn settle(
        &self,
        partition: &str,
        lease: &mut Lease<'_>,
        actual: u32,
    ) -> Result<(), RedisSettleError> {
        self.settle_within(partition, lease, actual, u32::MAX).await
    }

    /// [`settle`](Self::settle), leaving `partition` owing at most `max_debt` permits (see
    /// [`Lease::settle_within`](crate::Lease::settle_within); the limit of debt is checked in
    /// the same script, in the same round trip). A debit taken from this machine's lease of
    /// the window owes nothing, and is never refused by the bound.
    ///
    /// ```no_run
    /// # use core::time::Duration;
    /// # use tollgate::redis::*;
    /// # use tollgate::{FixedWindowOptions, SettleError};
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let conn = ::redis::Client::open("redis://127.0.0.1/")?.get_connection_manager().await?;
    /// let tokens = Algorithm::FixedWindow(FixedWindowOptions::new(10_000, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(conn, "llm", tokens, FailurePolicy::FailClosed).build()?;
    /// let mut lease = limiter.acquire("customer-42", 10_000).await?;
    /// // A customer may owe at most 500 tokens into the next window.
    /// let past = limiter.settle_within("customer-42", &mut lease, 10_600, 500).await;
    /// assert_eq!(past, Err(RedisSettleError::Settle(SettleError::DebtLimit)));
    /// limiter.settle_within("customer-42", &mut lease, 10_500, 500).await?;
    /// # Ok(()) }
    /// ```
    pub async fn settle_within(
        &self,
        partition: &str,
        lease: &mut Lease<'_>,
        actual: u32,
        max_debt: u32,
    ) -> Result<(), RedisSettleError> {
        let held = lease.permits();
        if actual == held {
            return Ok(());
        }
        // Only a lease of `acquire` (detached: it returns nothing and refers to no limiter)
        // carries a stamp of this limiter's; its stamp is read by taking it apart.
        if lease.returns_permits() {
            return Err(SettleError::Unsupported.into());
        }
        let (_, stamp, _) = core::mem::replace(lease, Lease::unreleased(held)).into_parts();
        *lease = Lease::detached(held, stamp);
        let settled = |lease: &mut Lease<'_>| {
            *lease = Lease::detached(actual, stamp);
            Ok(())
        };
        let tag = stamp & !WINDOW;
        let window = stamp & WINDOW;
        if tag == OPEN {
            return settled(lease);
        }
        if tag != REDIS && tag != SLOT {
            return Err(SettleError::Unsupported.into());
        }
        let inner = &*self.inner;
        if let Some(leases) = &inner.leases {
            // This machine's lease of the window takes the difference if it can.
            let now = StdClock.now();
            let local = if actual < held {
                leases.refund(partition, held - actual, window, now)
            } else {
                matches!(
                    leases.take(partition, actual - held, now),
                    Local::Granted { .. }
                )
            };
            if local {
                return settled(lease);
            }
        }
        let key = self.key(partition);
        let delta = i64::from(actual) - i64::from(held);
        let most = inner.plan.settle_most(max_debt);
        match self.call_settle(&key, delta, window, most).await {
            Ok(Settled::Done) => {
                if delta < 0 {
                    if let Some(cache) = &inner.cache {
                        cache.forget(&key);
                    }
                    if let Some(leases) = &inner.leases {
                        leases.clear_spent(partition);
                    }
                }
                settled(lease)
            }
            Ok(Settled::WindowEnded) => settled(lease),
            Ok(Settled::DebtLimit) => Err(SettleError::DebtLimit.into()),
            Err(CallError::Key) => Err(RedisSettleError::KeyError),
            Err(CallError::Timeout) => Err(RedisSettleError::Timeout),
            Err(_) => Err(RedisSettleError::Unavailable),
        }
    }

    /// One run of the settle script on `key`: `delta` permits more (or fewer), for a lease of
    /// `window` (modulo 2^29; the fixed window's). `EVALSHA`, then `EVAL` after `NOSCRIPT`.
    async fn call_settle(
        &self,
        key: &str,
        delta: i64,
        window: u64,
        most: u64,
    ) -> Result<Settled, CallError> {
        let inner = &*self.inner;
        let (source, script) = &inner.plan.settle;
        let command = |name: &str, script: &str| {
            let mut c = ::redis::cmd(name);
            c.arg(script)
                .arg(1)
                .arg(key)
                .arg(delta)
                .arg(window)
                .arg(most);
            c
        };
        super::stats::bump(&inner.counts.runs);
        let reply = self.run_script(source, script, command).await?;
        let mut words = reply.split(' ');
        let (Some(_), Some(_), Some(x), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return Err(CallError::Server);
        };
        match x {
            "w" => Ok(Settled::WindowEnded),
            "d" => Ok(Settled::DebtLimit),
            "e" => Err(CallError::Key),
            x if x.parse::<u64>().is_ok() => {
                if inner.plan.kind == Kind::Fixed {
                    let count: u64 = x.parse().unwrap_or(0);
                    let left = u64::from(inner.plan.limit).saturating_sub(count);
                    inner.counts.remaining.store(left, Ordering::Relaxed);
                }
                Ok(Settled::Done)
            }
            _ => Err(CallError::Server),
        }
    }
}
