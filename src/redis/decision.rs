use core::time::Duration;
use std::sync::atomic::Ordering;

use ::redis::aio::ConnectionLike;
use ::redis::{Cmd, ErrorKind, RedisError, Script, ServerErrorKind};

use super::lease::{Leases, Local};
use super::options::Plan;
use super::scripts::Kind;
use super::stats::bump;
use super::{breaker, RedisLimiter, REDIS_KEY_ERROR};
#[cfg(doc)]
use super::{FailurePolicy, RedisLimiterBuilder};
use crate::clock::{Clock, StdClock};
use crate::lease::{Reason, Rejection};

/// Who made a [`RedisDecision`].
///
/// ```
/// # use tollgate::redis::doc_support::*;
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
/// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailOpen).build().unwrap();
/// assert_eq!(rt.block_on(limiter.decide("alice", 1)).decided_by, DecidedBy::FailOpen);
/// // Too many permits: refused by this client, without a call.
/// let too_many = rt.block_on(limiter.decide("alice", 101));
/// assert_eq!((too_many.decided_by, too_many.outcome.unwrap_err().reason()), (DecidedBy::Client, Reason::ExceedsLimit));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DecidedBy {
    /// The Redis script.
    Redis,
    /// A cached Redis denial (see [`RedisLimiterBuilder::cache_denials`]).
    CachedDenial,
    /// The failure policy: [`FailurePolicy::FailOpen`].
    FailOpen,
    /// The failure policy: [`FailurePolicy::FailClosed`].
    FailClosed,
    /// The failure policy: the local fallback limiter.
    Fallback,
    /// This client: the limiter is closed, or the request exceeds the limit.
    Client,
    /// Redis answered with an error of the partition's key (see [`REDIS_KEY_ERROR`]): the
    /// request is rejected with that reason, whatever the failure policy.
    KeyError,
    /// This machine's lease of the key's window (see [`RedisLimiterBuilder::lease`]): granted
    /// from the permits leased, or refused because Redis said the window is spent. No round
    /// trip.
    Lease,
}

/// A decision with everything the scripts return (for headers such as `RateLimit`).
///
/// ```
/// # use tollgate::redis::doc_support::*;
/// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// let algorithm = Algorithm::FixedWindow(FixedWindowOptions::new(10, Duration::from_secs(60)));
/// let limiter = RedisLimiter::builder(Down, "api", algorithm, FailurePolicy::fallback(1.0)).build().unwrap();
/// let d: RedisDecision = rt.block_on(limiter.decide("alice", 3));
/// assert!(d.allowed());
/// assert_eq!((d.permits, d.remaining), (3, 7)); // as the local fallback counted
/// assert_eq!(d.server_time_us, None); // Redis did not decide
/// assert_eq!(d.decided_by, DecidedBy::Fallback);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RedisDecision {
    /// The request's permits.
    pub permits: u32,
    /// Granted or not (with the reason and RetryAfter).
    pub outcome: Result<(), Rejection>,
    /// Permits left after this decision (as Redis counted them; 0 if unknown).
    pub remaining: u64,
    /// Time until the limiter is idle again: bucket full, window empty (zero if unknown).
    pub reset: Duration,
    /// Redis's clock at the decision, in microseconds since the Unix epoch (`None` if Redis did
    /// not decide).
    pub server_time_us: Option<u64>,
    /// Who decided.
    pub decided_by: DecidedBy,
}

impl RedisDecision {
    /// Whether the request was granted.
    ///
    /// ```
    /// # use tollgate::redis::doc_support::*;
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// # let per_minute = Algorithm::FixedWindow(FixedWindowOptions::new(100, Duration::from_secs(60)));
    /// let limiter = RedisLimiter::builder(Down, "api", per_minute, FailurePolicy::FailClosed).build().unwrap();
    /// let d = rt.block_on(limiter.decide("alice", 1));
    /// assert!(!d.allowed());
    /// assert_eq!(d.allowed(), d.outcome.is_ok());
    /// ```
    pub const fn allowed(&self) -> bool {
        self.outcome.is_ok()
    }

    /// A decision made without Redis's answer (no reset, no server time).
    pub(super) const fn local(
        permits: u32,
        outcome: Result<(), Rejection>,
        remaining: u64,
        decided_by: DecidedBy,
    ) -> Self {
        Self {
            permits,
            outcome,
            remaining,
            reset: Duration::ZERO,
            server_time_us: None,
            decided_by,
        }
    }
}

/// Why a call did not decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CallError {
    /// No answer within the timeout: counts toward the breaker.
    Timeout,
    /// The connection or the server failed (I/O, refused, `LOADING`, `BUSY`, `MASTERDOWN`,
    /// `CLUSTERDOWN`, `TRYAGAIN`, `OOM`, ...), or answered something that is not the script's
    /// reply: counts toward the breaker.
    Server,
    /// `NOSCRIPT` even from the retry (impossible from a server with `EVAL`, kept for a proxy
    /// that answers `NOSCRIPT` on its own): the script did not run; the request goes to the
    /// policy, and the breaker counts an answer, not a failure.
    NoScript,
    /// The key's own error: `WRONGTYPE`, or a script error caused by the key's content (the
    /// scripts' `TOLLGATE` error replies, a Lua runtime error). The server is healthy.
    Key,
    /// A batched decision whose call was led by a caller that was cancelled mid-call: its
    /// outcome is unknown (as after a timeout), and nothing is known of the server either.
    Cancelled,
}

/// Words of a server's failure inside a script's `ERR` reply (Redis 6 wraps the errors of
/// `redis.call` in `ERR Error running script`; Redis 7 keeps their codes).
const SERVER_WORDS: [&str; 10] = [
    "OOM",
    "MISCONF",
    "READONLY",
    "NOREPLICAS",
    "LOADING",
    "BUSY",
    "MASTERDOWN",
    "CLUSTERDOWN",
    "TRYAGAIN",
    "SCRIPT KILL",
];

impl CallError {
    /// Classifies an error reply: only the key's own errors and `NOSCRIPT` are told apart;
    /// everything else (I/O, unknown codes) is the server's, as before.
    pub(super) fn of(e: &RedisError) -> Self {
        match e.kind() {
            ErrorKind::Server(ServerErrorKind::NoScript) => Self::NoScript,
            // `ERR` from inside a script: Redis 7 says "... script: <sha>, on @user_script:N.",
            // Redis 6 "Error running script (call to f_<sha>): ...". A plain `ERR` (say "max
            // number of clients reached") is the server's.
            ErrorKind::Server(ServerErrorKind::ResponseError)
                if e.detail().is_some_and(|d| {
                    d.contains("script") && !SERVER_WORDS.iter().any(|w| d.contains(w))
                }) =>
            {
                Self::Key
            }
            ErrorKind::Extension if matches!(e.code(), Some("WRONGTYPE" | "TOLLGATE")) => Self::Key,
            _ => Self::Server,
        }
    }
}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> RedisLimiter<C> {
    /// The decision, uncounted, and for one made from this machine's lease of the key's window
    /// ([`DecidedBy::Lease`]) that window's index (windows since the Unix epoch; 0 otherwise):
    /// what a settle of its lease needs.
    pub(super) async fn decide_uncounted(
        &self,
        partition: &str,
        permits: u32,
    ) -> (RedisDecision, u64) {
        let mut window = 0;
        let d = self.decide_inner(partition, permits, &mut window).await;
        (d, window)
    }

    async fn decide_inner(&self, partition: &str, permits: u32, window: &mut u64) -> RedisDecision {
        let inner = &*self.inner;
        let client = |r: &'static Reason, decided_by| {
            RedisDecision::local(permits, Err(Rejection::new(r)), 0, decided_by)
        };
        if inner.closed.load(Ordering::Acquire) {
            return client(&Reason::Closed, DecidedBy::Client);
        }
        if permits > inner.plan.limit {
            return client(&Reason::ExceedsLimit, DecidedBy::Client);
        }
        let now = StdClock.now();
        if let Some(leases) = &inner.leases {
            // The table is the limiter's own: the partition names the key.
            let local = |outcome, remaining| {
                RedisDecision::local(permits, outcome, remaining, DecidedBy::Lease)
            };
            match leases.take(partition, permits, now) {
                Local::Granted { left, window: w } => {
                    *window = w;
                    return local(Ok(()), left);
                }
                Local::Spent(d) => {
                    return local(Err(Rejection::with_retry_after(&Reason::Exhausted, d)), 0)
                }
                Local::Ask => {}
            }
        }
        let key = self.key(partition);
        if let Some(cache) = &inner.cache {
            if let Some(left) = cache.get(&key, permits, now) {
                bump(&inner.counts.cached);
                return RedisDecision::local(
                    permits,
                    Err(Rejection::with_retry_after(&Reason::Exhausted, left)),
                    0,
                    DecidedBy::CachedDenial,
                );
            }
        }
        let skip = match inner.breaker.admit(now) {
            breaker::Admit::Call | breaker::Admit::Probe => None,
            breaker::Admit::Skip(d) => Some(d),
        };
        if let Some(left) = skip {
            return self.by_policy(partition, permits, Some(left));
        }
        bump(&inner.counts.calls);
        let answer = match (&inner.leases, &inner.batcher) {
            (Some(leases), _) => {
                bump(&inner.counts.runs);
                self.call_lease(leases, &key, partition, permits, now).await
            }
            (None, Some(b)) => self.call_batched(b, &key, permits).await,
            (None, None) => {
                bump(&inner.counts.runs);
                self.call(&key, permits).await
            }
        };
        match answer {
            Ok(d) => {
                inner.breaker.success();
                if let (Some(cache), Err(r)) = (&inner.cache, &d.outcome) {
                    if let Some(ra) = r.retry_after() {
                        cache.put(&key, permits, now, ra);
                    }
                }
                inner.counts.remaining.store(d.remaining, Ordering::Relaxed);
                d
            }
            Err(CallError::Key) => {
                // Redis answered: it is healthy, and this key alone is the problem.
                inner.breaker.success();
                bump(&inner.counts.key_errors);
                client(&REDIS_KEY_ERROR, DecidedBy::KeyError)
            }
            Err(CallError::Cancelled) => {
                // Not the server's failure: the policy decides, the breaker hears nothing.
                bump(&inner.counts.errors);
                self.by_policy(partition, permits, None)
            }
            Err(CallError::NoScript) => {
                // The script did not run, twice: nothing counted, and the server answered (it is
                // up; its script cache is being flushed, or a proxy lost the script): the policy
                // decides this request only, and the breaker hears of an answer, not a failure.
                inner.breaker.success();
                bump(&inner.counts.errors);
                self.by_policy(partition, permits, None)
            }
            Err(e) => {
                bump(if e == CallError::Timeout {
                    &inner.counts.timeouts
                } else {
                    &inner.counts.errors
                });
                inner.breaker.failure(StdClock.now());
                self.by_policy(partition, permits, None)
            }
        }
    }

    /// One script call deciding `entries` (key, permits) in order, bounded by the timeout:
    /// `EVALSHA`, and after `NOSCRIPT` (the script did not run) `EVAL` with the script's source,
    /// which cannot meet `NOSCRIPT` and caches the script for the next `EVALSHA`. Nothing else
    /// is retried. The outer error is the whole call's; an inner one is that key's alone.
    ///
    /// With `upto` (the fixed window's script only: a lease), each entry asks for *up to* its
    /// permits, and a grant's `permits` is the count taken (at least 1).
    pub(super) async fn call_many(
        &self,
        entries: &[(String, u32)],
        upto: bool,
    ) -> Result<Vec<Result<RedisDecision, CallError>>, CallError> {
        let inner = &*self.inner;
        let plan = &inner.plan;
        // A run whose keys repeat says so with one more argument: only then does the script
        // keep what it wrote under each key (a repeated key must read the run's own write).
        let repeats = entries
            .iter()
            .enumerate()
            .any(|(i, (key, _))| entries[..i].iter().any(|(k, _)| k == key));
        let command = |name: &str, script: &str| {
            let mut c = ::redis::cmd(name);
            c.arg(script).arg(entries.len());
            for (key, _) in entries {
                c.arg(key.as_str());
            }
            for (_, permits) in entries {
                let p = i64::from(*permits);
                c.arg(if upto { -p } else { p });
            }
            if repeats {
                c.arg("r");
            }
            c
        };
        // A run of one decision sends the script's one-decision form if it has one (no batch
        // table, `GET` instead of `MGET`: the same reply for less Redis CPU).
        let (source, script) = match &plan.one {
            Some((source, script)) if entries.len() == 1 => (source, script),
            _ => (&plan.source, &plan.script),
        };
        let reply = self.run_script(source, script, command).await?;
        read_reply(plan, &reply, entries, upto).ok_or(CallError::Server)
    }

    /// One run of a script, bounded by the timeout: `command("EVALSHA", its SHA1)`, and after
    /// `NOSCRIPT` (the script did not run) `command("EVAL", source)`, which cannot meet
    /// `NOSCRIPT` and caches the script for the next `EVALSHA`. Nothing else is retried.
    /// The script's reply, or why there is none.
    pub(super) async fn run_script(
        &self,
        source: &str,
        script: &Script,
        command: impl Fn(&str, &str) -> Cmd,
    ) -> Result<String, CallError> {
        let inner = &*self.inner;
        let mut conn = inner.conn.clone();
        let run = async {
            let sha = command("EVALSHA", script.get_hash());
            match sha.query_async::<String>(&mut conn).await {
                Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                    command("EVAL", source)
                        .query_async::<String>(&mut conn)
                        .await
                }
                other => other,
            }
        };
        match tokio::time::timeout(inner.timeout, run).await {
            Err(_) => Err(CallError::Timeout),
            Ok(Err(e)) => Err(CallError::of(&e)),
            Ok(Ok(v)) => Ok(v),
        }
    }

    /// A lease of up to the lease size (at least `permits`) of `key`'s window: this request's
    /// permits from it, the rest into `partition`'s local slot until the window ends, as
    /// measured from `sent` (before the call: the server read its clock after).
    async fn call_lease(
        &self,
        leases: &Leases,
        key: &str,
        partition: &str,
        permits: u32,
        sent: crate::clock::Instant,
    ) -> Result<RedisDecision, CallError> {
        if permits == 0 {
            // A probe takes nothing, so it leases nothing.
            return self.call(key, 0).await;
        }
        let ask = permits.max(leases.size);
        let d = self
            .call_many(&[(key.to_owned(), ask)], true)
            .await?
            .pop()
            .ok_or(CallError::Server)??;
        // The window Redis decided in (windows since the epoch), for a settle of the lease.
        let w = d.server_time_us.unwrap_or(0) / self.inner.plan.consts[1].max(1);
        let until = |d: Duration| (w, sent.saturating_add(d));
        match d.outcome {
            Ok(()) if d.permits >= permits => {
                let extra = u64::from(d.permits - permits);
                leases.put(partition, extra, false, until(d.reset), StdClock.now());
                Ok(RedisDecision {
                    permits,
                    remaining: d.remaining + extra,
                    ..d
                })
            }
            Ok(()) => {
                // Fewer left in the window than this request needs: they wait in the slot for
                // smaller requests, and this one waits for the next window.
                leases.put(
                    partition,
                    u64::from(d.permits),
                    false,
                    until(d.reset),
                    StdClock.now(),
                );
                Ok(RedisDecision {
                    permits,
                    outcome: Err(Rejection::with_retry_after(
                        &Reason::Exhausted,
                        d.reset.max(Duration::from_micros(1)),
                    )),
                    remaining: u64::from(d.permits),
                    ..d
                })
            }
            Err(r) => {
                let ra = r.retry_after().unwrap_or(Duration::ZERO);
                leases.put(partition, 0, true, until(ra), StdClock.now());
                Ok(RedisDecision { permits, ..d })
            }
        }
    }

    /// One decision in a call of its own.
    pub(super) async fn call(&self, key: &str, permits: u32) -> Result<RedisDecision, CallError> {
        let mut v = self.call_many(&[(key.to_owned(), permits)], false).await?;
        v.pop().ok_or(CallError::Server)?
    }
}

/// Reads a script's reply (see [`Kind`]): `sec usec`, then each entry's integers, or `e` for
/// that key's error. `None` if the reply is not the script's.
fn read_reply(
    plan: &Plan,
    reply: &str,
    entries: &[(String, u32)],
    upto: bool,
) -> Option<Vec<Result<RedisDecision, CallError>>> {
    let mut words = reply.split(' ');
    let sec: u64 = words.next()?.parse().ok()?;
    let usec: u64 = words.next()?.parse().ok()?;
    let now = sec.checked_mul(1_000_000)?.checked_add(usec)?;
    let width = match plan.kind {
        Kind::Fixed if upto => 2,
        Kind::Fixed | Kind::Gcra | Kind::BucketOne => 1,
        Kind::Bucket | Kind::Counter => 2,
        Kind::Full => 4,
    };
    // The kinds whose replies may carry a debt after a `+` (in `x[3]`, which their replies
    // use for nothing else).
    let debt_word = (matches!(plan.kind, Kind::Fixed | Kind::BucketOne) && width == 1)
        || plan.kind == Kind::Bucket;
    let mut out = Vec::with_capacity(entries.len());
    let mut x = [0i64; 4];
    for (_, permits) in entries {
        let mut key_error = false;
        let mut carried = 0;
        for slot in x.iter_mut().take(width) {
            match words.next()? {
                "e" => key_error = true,
                // A fixed window's refusal in debt: `x+o`, `o` the debt carried into the next
                // window (in `x[3]`, which no fixed window's reply uses otherwise).
                // A token bucket's refusal in debt: `-1+D` (the one-number bucket's, or the
                // two-number bucket's first integer), `D` owed past the limit.
                w if debt_word && w.contains('+') => {
                    let (a, o) = w.split_once('+')?;
                    *slot = a.parse().ok()?;
                    carried = o.parse().ok()?;
                }
                w => *slot = w.parse().ok()?,
            }
        }
        if debt_word {
            x[3] = carried;
        }
        if key_error {
            out.push(Err(CallError::Key));
            continue;
        }
        out.push(decode(plan, now, *permits, upto, &x));
    }
    if words.next().is_some() {
        return None;
    }
    Some(out)
}

/// One entry's decision from its integers `x` (see [`Kind`]), at server time `now` (µs).
fn decode(
    plan: &Plan,
    now: u64,
    permits: u32,
    upto: bool,
    x: &[i64; 4],
) -> Result<RedisDecision, CallError> {
    // The constants of these kinds are never 0 (the builder's checks); `max(1)` spares a
    // division by zero all the same.
    let [c0, c1, c2] = plan.consts.map(|c| u128::from(c.max(1)));
    let now128 = u128::from(now);
    let want = u128::from(permits.max(1));
    // -x - 1 for a refusal's count, x for a grant's (the sliding counter's second integer).
    let signed = if plan.kind == Kind::Counter {
        x[1]
    } else {
        x[0]
    };
    let (granted, v) = if signed >= 0 {
        (true, signed.unsigned_abs())
    } else {
        (false, signed.unsigned_abs() - 1)
    };
    let v = u128::from(v);
    let mut permits = permits;
    let (remaining, retry, reset) = match plan.kind {
        Kind::Fixed => {
            // [limit, window]: the window's end is every wait.
            let left = c1 - now128 % c1;
            if upto && granted {
                permits = u32::try_from(x[1]).map_err(|_| CallError::Server)?;
            }
            // A settled lease's debt carried into the next window (`FIXED_SETTLE`, which the
            // script's refusal reads): a request that it refuses there too waits one more.
            let carried = u128::from(x[3].unsigned_abs());
            let next = if carried > 0 { left + c1 } else { left };
            let reset = if v > 0 { next } else { 0 };
            let retry = if granted {
                0
            } else if carried + want > c0 {
                left + c1
            } else {
                left
            };
            (c0.saturating_sub(v), retry, reset)
        }
        Kind::Bucket | Kind::BucketOne => {
            // [limit, tokens per period, period]: v is the tokens missing from full after the
            // grant (granted; one number: the bucket's "full at", k × tokens per period + the
            // tokens missing) or the tokens there (refused), as of the current period k.
            let k = now128 / c2;
            let at = |periods: u128| (k + periods) * c2 - now128;
            let v = if granted && plan.kind == Kind::BucketOne {
                v.saturating_sub(k * c1)
            } else {
                v
            };
            let tokens = if granted { c0.saturating_sub(v) } else { v };
            // A settled lease's debt past the limit (a refusal in debt: `-1+D`).
            let debt = u128::from(x[3].unsigned_abs());
            let owed = c0.saturating_sub(tokens) + debt;
            let reset = if owed > 0 { at(owed.div_ceil(c1)) } else { 0 };
            let retry = if granted {
                0
            } else {
                at((want + debt).saturating_sub(tokens).div_ceil(c1))
            };
            (tokens, retry, reset)
        }
        Kind::Gcra => {
            // [burst × T, T]: v is `tat` (granted) or the debt `tat - now` (refused).
            let v = if granted { v.saturating_sub(now128) } else { v };
            let remaining = c0.saturating_sub(v) / c1;
            let retry = if granted {
                0
            } else {
                (v + want * c1).saturating_sub(c0)
            };
            (remaining, retry, v)
        }
        Kind::Counter => {
            // [limit, window]: x[0] the previous window's count, v the current one's (after
            // the grant, or as the refusal found it), both at most twice the limit (a settled
            // lease's debt); the script's comparison `prev · (W - into) + (cur + n) · W ≤
            // limit · W`, as the local counter.
            let (l, w) = (c0, c1);
            let into = now128 % w;
            let k = now128 / w;
            let prev = u128::from(x[0].unsigned_abs()).min(2 * l);
            let cur = v.min(2 * l);
            let used = prev * (w - into) + cur * w;
            let remaining = (l * w).saturating_sub(used) / w;
            let reset = if cur > 0 {
                (k + 2) * w - now128
            } else if prev > 0 {
                (k + 1) * w - now128
            } else {
                0
            };
            let retry = if granted {
                0
            } else if cur + want <= l {
                // The first offset x into a window with (W - x) · prev ≤ room · prev, for
                // room = floor((limit - cur - want) · W / prev): prev > 0 here (the request
                // would fit otherwise).
                let room = (l - cur - want) * w / prev.max(1);
                w.saturating_sub(room).saturating_sub(into)
            } else {
                match (l.saturating_sub(want) * w).checked_div(cur) {
                    // Nothing in this window: the next one, where the previous weighs less.
                    None => w - into,
                    // This window's count must leave: the next window, then its weight
                    // decays until the count fits.
                    Some(room) => w - into + w.saturating_sub(room),
                }
            };
            (remaining, retry, reset)
        }
        Kind::Full => {
            let u = |i: usize| u128::from(x[i].unsigned_abs());
            match x[0] {
                // The sliding window's grant in its newest segment: [limit, segments, segment].
                2 => (c0.saturating_sub(u(1)), 0, (now128 / c2 + c1) * c2 - now128),
                1 => (u(1), 0, u(3)),
                0 => (u(1), u(2), u(3)),
                _ => return Err(CallError::Key),
            }
        }
    };
    let granted = match plan.kind {
        Kind::Full => x[0] == 1 || x[0] == 2,
        _ => granted,
    };
    let micros = |v: u128| Duration::from_micros(u64::try_from(v).unwrap_or(u64::MAX));
    Ok(RedisDecision {
        permits,
        outcome: if granted {
            Ok(())
        } else {
            Err(Rejection::with_retry_after(
                &Reason::Exhausted,
                micros(retry).max(Duration::from_micros(1)),
            ))
        },
        remaining: u64::try_from(remaining).unwrap_or(u64::MAX),
        reset: micros(reset),
        server_time_us: Some(now),
        decided_by: DecidedBy::Redis,
    })
}
