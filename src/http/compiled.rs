//! One policy, built: its limiter, its name and header, the partitions paused by an upstream,
//! and its decision for a request.

use core::time::Duration;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use http::header::HeaderValue;

use super::client_ip::ClientIp;
use super::error::BuildError;
use super::granted::Record;
use super::headers::{policy_header, Reported};
use super::meter::{self, Meter, Outcome};
use super::policy::{
    self, Charge, Charged, Charging, Decision, Denial, Grant, Key, MissingKey, Permit, Policy,
    PolicyLimiter, PolicyQuota, Rate, RequestView, SharedClock, NO_KEY, NO_PEER_ADDRESS,
};
use super::reject::UPSTREAM_PAUSE;
use crate::lease::{Reason, Rejection};
use crate::quota::QuotaState;

/// A policy ready to decide.
pub(super) struct Compiled {
    pub(super) name: Box<str>,
    pub(super) policy: Policy,
    pub(super) limiter: Arc<dyn PolicyLimiter>,
    /// The same limiter, direct, when it is a built-in rate policy (the fast path).
    pub(super) rate: Option<Rate>,
    pub(super) describe: PolicyQuota,
    /// Its `RateLimit-Policy` value.
    policy_header: HeaderValue,
    /// Partitions paused by an upstream 429 (client side).
    pauses: Pauses,
    /// In shadow mode: refuses nothing, counts what it would refuse.
    pub(super) shadow: bool,
    /// The requests it would have refused, in shadow mode.
    shadow_rejections: AtomicU64,
    /// Its instruments, when the layer reports metrics.
    pub(super) meter: Option<Arc<Meter>>,
    /// Its limiter's charging handle and rules, when it charges by cost or outcome.
    charge: Option<(Arc<dyn Charge>, Arc<Charging>)>,
}

/// How a policy is built into the layer: its name, its place, and what the layer adds to it.
pub(super) struct Setup<'a> {
    /// The layer's clock.
    pub(super) clock: &'a SharedClock,
    /// The clock is the default one, which the built-in limiters may read directly.
    pub(super) std_clock: bool,
    /// The layer's global policy (its refusals are `global_limiter` in the metrics).
    pub(super) global: bool,
    /// The whole layer is in shadow mode.
    pub(super) shadow: bool,
    /// The layer reports metrics.
    #[cfg(feature = "metrics")]
    pub(super) metrics: bool,
}

/// One policy's decision for a request.
pub(super) enum Step {
    Granted(Grant),
    Denied(Denial),
    /// Wait in the policy's queue, or for its async limiter.
    Wait(Key),
}

impl Compiled {
    /// Builds policy `name` as `setup` says.
    pub(super) fn new(name: String, policy: Policy, setup: &Setup<'_>) -> Result<Self, BuildError> {
        if !valid_name(&name) {
            return Err(BuildError::InvalidName(name));
        }
        if let Some(reason) = policy.charging_unsupported() {
            return Err(BuildError::Charging {
                policy: name,
                reason,
            });
        }
        let (limiter, rate, charge) = policy.build(setup.clock, setup.std_clock)?;

        let describe = limiter.describe();
        let Some(policy_header) = policy_header(&name, &describe) else {
            return Err(BuildError::InvalidName(name));
        };
        #[cfg(feature = "metrics")]
        let meter = setup
            .metrics
            .then(|| Arc::new(Meter::new(&name, setup.global, setup.clock)));
        #[cfg(not(feature = "metrics"))]
        let meter = None;
        let charge = charge
            .filter(|_| policy.charging.charges())
            .map(|c| (c, Arc::new(policy.charging.built(meter.clone()))));
        Ok(Self {
            name: name.into_boxed_str(),
            shadow: policy.shadow || setup.shadow,
            policy,
            limiter,
            rate,
            describe,
            policy_header,
            pauses: Pauses::default(),
            shadow_rejections: AtomicU64::new(0),
            meter,
            charge,
        })
    }

    /// Counts one decision of this policy in its metrics, if the layer reports them.
    #[inline(always)]
    pub(super) fn count(&self, outcome: Outcome) {
        meter::count(&self.meter, outcome);
    }

    /// What a refusal of this policy comes to: refused, or let through in shadow mode.
    pub(super) fn refused(&self) -> Outcome {
        if self.shadow {
            Outcome::Shadow
        } else {
            Outcome::Refused
        }
    }

    /// Counts a request this policy, in shadow mode, would have refused.
    pub(super) fn shadow_rejected(&self) {
        self.shadow_rejections.fetch_add(1, Ordering::Relaxed);
        self.count(Outcome::Shadow);
    }

    /// The settles this policy's limiter refused (past its debt limit).
    pub(super) fn unsettled(&self) -> u64 {
        self.charge.as_ref().map_or(0, |(_, c)| c.unsettled())
    }

    /// How many requests this policy would have refused, in shadow mode.
    pub(super) fn shadow_rejections(&self) -> u64 {
        self.shadow_rejections.load(Ordering::Relaxed)
    }

    /// `quota`, as this policy's headers report it.
    pub(super) fn reported(&self, quota: QuotaState) -> Reported<'_> {
        Reported {
            name: &self.name,
            policy: &self.policy_header,
            quota,
        }
    }

    /// The decision for the request `view` (`ip`: how its client IP is found; `clock`: the
    /// time of an upstream's pause; `want_quota`: whether to say the quota left), its key and
    /// charge noted in `note` (for the `on_granted` hook).
    #[inline]
    pub(super) fn decide(
        &self,
        view: &RequestView<'_>,
        ip: &ClientIp,
        clock: &SharedClock,
        want_quota: bool,
        note: &mut impl Record,
    ) -> Step {
        let key = match self.policy.key.extract(view, ip) {
            Some(k) => k,
            None => match self.policy.missing {
                MissingKey::Allow => {
                    note.charged(None, 0);
                    return Step::Granted(Grant {
                        permit: Permit::none(),
                        quota: None,
                    });
                }
                MissingKey::Reject => return Step::Denied(refused(Rejection::new(&NO_KEY))),
                MissingKey::Shared => Key::MISSING,
                MissingKey::Auto if self.policy.key.lacks_peer(view) => {
                    log_missing_peer_once(&self.name);
                    return Step::Denied(refused(Rejection::new(&NO_PEER_ADDRESS)));
                }
                MissingKey::Auto => Key::MISSING,
            },
        };
        if self.policy.pause_on_429 {
            if let Some(d) = self.pauses.remaining(&key, clock.now().as_nanos()) {
                note.charged(Some(key), 0);
                return Step::Denied(refused(Rejection::with_retry_after(&UPSTREAM_PAUSE, d)));
            }
        }
        if let Some((by, rules)) = &self.charge {
            return charge(by, rules, key, view, want_quota, note);
        }
        note.charged(Some(key), 1);
        match self.limiter.try_acquire(key, want_quota) {
            Decision::Granted(g) => Step::Granted(g),
            Decision::Denied(d) => Step::Denied(d),
            Decision::Wait => Step::Wait(key),
        }
    }

    /// Waits for the decision for `key`, bounded by the policy's maximum delay (the built-in
    /// limiters bound their own; a custom one's wait is dropped at the deadline, and a fresh
    /// [`PolicyLimiter::try_acquire`] then decides: a grant by then is taken, a refusal is
    /// [`Reason::TimedOut`] with the limiter's RetryAfter, if it gives one).
    pub(super) async fn wait(&self, key: Key, want_quota: bool) -> Result<Grant, Denial> {
        let fut = self.limiter.clone().acquire(key, want_quota);
        let Some(max) = self.policy.queue.flatten() else {
            return fut.await;
        };
        if self.policy.bounds_its_delay() {
            return fut.await;
        }
        match tokio::time::timeout(max, fut).await {
            Ok(r) => r,
            Err(_) => match self.limiter.try_acquire(key, want_quota) {
                Decision::Granted(g) => Ok(g),
                Decision::Denied(d) => Err(Denial {
                    rejection: policy::after_wait(&Reason::TimedOut, d.rejection),
                    quota: d.quota,
                }),
                Decision::Wait => Err(refused(Rejection::new(&Reason::TimedOut))),
            },
        }
    }

    /// The key to pause on should the upstream answer 429: `Some` only for a policy that
    /// pauses on one, and a request with a key.
    pub(super) fn pause_key(&self, view: &RequestView<'_>, ip: &ClientIp) -> Option<Key> {
        if self.policy.pause_on_429 {
            self.policy.key.extract(view, ip)
        } else {
            None
        }
    }

    /// Pauses `key` for `wait` from `now` (an upstream's 429 said so).
    pub(super) fn pause(&self, key: Key, now: u64, wait: Duration) {
        self.pauses.pause(key, now, wait);
    }
}

/// A cost or outcome policy's decision: `key` charged what `rules` say `view` costs. Out of
/// line, as the compiler chose before it was generic: the plain policies' decision stays small.
#[inline(never)]
fn charge(
    by: &Arc<dyn Charge>,
    rules: &Arc<Charging>,
    key: Key,
    view: &RequestView<'_>,
    want_quota: bool,
    note: &mut impl Record,
) -> Step {
    let cost = rules.cost(view);
    note.charged(Some(key), cost);
    if cost == 0 {
        return Step::Granted(Grant {
            permit: Permit::none(),
            quota: want_quota.then(|| by.quota(&key)),
        });
    }
    match by.charge(key, cost, want_quota) {
        Ok((held, quota)) => {
            let charged = Charged::new(held, key, by.clone(), rules.clone());
            let permit = if rules.settles() || charged.holds() {
                Permit::charged(charged)
            } else {
                Permit::none() // a plain cost on a rate limiter: nothing to keep
            };
            Step::Granted(Grant { permit, quota })
        }
        Err(d) => Step::Denied(d),
    }
}

/// A denial that says no quota.
fn refused(rejection: Rejection) -> Denial {
    Denial {
        rejection,
        quota: None,
    }
}

/// Valid as a structured-field string without escapes.
pub(super) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
}

/// Says once per process that a client-IP policy saw a request with no peer address
/// ([`MissingKey::Auto`]): the server was started without `ConnectInfo`.
#[cold]
fn log_missing_peer_once(policy: &str) {
    static LOGGED: AtomicBool = AtomicBool::new(false);
    if LOGGED.swap(true, Ordering::Relaxed) {
        return;
    }
    #[cfg(feature = "tracing")]
    tracing::error!(target: "tollgate", policy, "{}", NO_PEER_ADDRESS.phrase());
    #[cfg(not(feature = "tracing"))]
    std::eprintln!("tollgate: policy {policy:?}: {}", NO_PEER_ADDRESS.phrase());
}

/// Partitions paused by an upstream 429 (client side), bounded.
#[derive(Default)]
struct Pauses {
    any: AtomicBool,
    until: Mutex<HashMap<Key, u64>>,
}

const MAX_PAUSES: usize = 4096;

impl Pauses {
    /// How long `key` stays paused at `now`.
    fn remaining(&self, key: &Key, now: u64) -> Option<Duration> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let map = self.until.lock().unwrap_or_else(|e| e.into_inner());
        let until = *map.get(key)?;
        (until > now).then(|| Duration::from_nanos(until - now))
    }

    fn pause(&self, key: Key, now: u64, d: Duration) {
        let until = now.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let mut map = self.until.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_PAUSES {
            map.retain(|_, u| *u > now);
        }
        if map.len() < MAX_PAUSES || map.contains_key(&key) {
            let e = map.entry(key).or_insert(until);
            *e = (*e).max(until);
            self.any.store(true, Ordering::Release);
        }
    }
}
