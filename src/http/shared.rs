//! The state every layer and service of one [`RateLimiting`](super::RateLimiting) shares:
//! the built policies and what a request's way through them needs, immutable once built.

use std::sync::Arc;

use http::header::RETRY_AFTER;
use http::{Response, StatusCode};

use super::body::LimitedBody;
use super::client_ip::ClientIp;
use super::compiled::{Compiled, Step};
use super::endpoint::{Endpoint, Mode, Selector};
use super::granted::{GrantHook, Hooked, Record};
use super::headers::Headers;
use super::meter::QueueTimer;
use super::policy::{Denial, Grant, Key, RequestView, SharedClock};
use super::reject::Refusals;
use super::retry_after;
use crate::quota::QuotaState;

pub(super) struct Shared {
    pub(super) policies: Vec<Compiled>,
    /// The global policy's index.
    pub(super) global: Option<usize>,
    pub(super) selector: Option<Arc<Selector>>,
    pub(super) client_ip: ClientIp,
    pub(super) headers: Headers,
    pub(super) refusals: Refusals,
    pub(super) clock: SharedClock,
    /// The `on_granted` hook.
    pub(super) on_granted: Option<Arc<GrantHook>>,
}

/// The policies a request goes through, in order: the global one, then its endpoint's.
pub(super) type Plan = [Option<usize>; 2];

/// The quotas an admitted request reports: each with the index of its policy.
pub(super) type Quotas = [Option<(usize, QuotaState)>; 2];

impl Hooked for Shared {
    fn hook(&self) -> Option<&GrantHook> {
        self.on_granted.as_deref()
    }

    fn policy_name(&self, i: usize) -> &str {
        &self.policies[i].name
    }
}

impl Shared {
    /// The index of the policy `name`.
    pub(super) fn index(&self, name: &str) -> Option<usize> {
        self.policies.iter().position(|p| &*p.name == name)
    }

    /// The policies a request goes through; or the name the selector chose that names no
    /// policy.
    #[inline]
    pub(super) fn plan(&self, mode: Mode, view: &RequestView<'_>) -> Result<Plan, &'static str> {
        match mode {
            Mode::Policy(i) => Ok([Some(i), None]),
            Mode::Router => {
                let endpoint = match &self.selector {
                    Some(s) => s(view),
                    None => Endpoint::Default,
                };
                match endpoint {
                    Endpoint::Default => Ok([self.global, None]),
                    Endpoint::Disabled => Ok([None, None]),
                    Endpoint::Policy(name) => match self.index(name) {
                        Some(i) => Ok([self.global, Some(i)]),
                        None => Err(name),
                    },
                }
            }
        }
    }

    /// The one rate policy every request of `mode` goes through, if it has a direct handle
    /// and nothing to report or pause on: no selector can route a request elsewhere.
    pub(super) fn fast(&self, mode: Mode) -> Option<usize> {
        let i = match mode {
            Mode::Policy(i) => i,
            Mode::Router if self.selector.is_none() => self.global?,
            Mode::Router => return None,
        };
        let p = &self.policies[i];
        // The `on_granted` hook needs what the general path notes (the key, the permits).
        let plain =
            !p.policy.pause_on_429 && !p.shadow && p.meter.is_none() && self.on_granted.is_none();
        (p.rate.is_some() && !self.headers.want_quota() && plain).then_some(i)
    }

    /// Policy `i`'s decision for a request (its key and charge noted in `note`). Out of line:
    /// inlined (as its generic form tempts the compiler to), it makes `RateLimit::call` larger
    /// and slower on every path, the fast path's refusal included (+31 instructions a request).
    #[inline(never)]
    pub(super) fn decide(&self, i: usize, view: &RequestView<'_>, note: &mut impl Record) -> Step {
        let want_quota = self.headers.want_quota();
        self.policies[i].decide(view, &self.client_ip, &self.clock, want_quota, note)
    }

    /// Waits for policy `i`'s decision for `key`.
    pub(super) async fn wait(&self, i: usize, key: Key) -> Result<Grant, Denial> {
        self.policies[i].wait(key, self.headers.want_quota()).await
    }

    /// The response to a request policy `i` refused.
    pub(super) fn refuse<B>(
        &self,
        i: usize,
        d: Denial,
        view: &RequestView<'_>,
    ) -> Response<LimitedBody<B>> {
        let p = &self.policies[i];
        let report = d.quota.map(|q| p.reported(q));
        let who = (&*p.name, &p.policy);
        self.refusals.refuse(&self.headers, who, d, report, view)
    }

    /// A request policy `i`, in shadow mode, would have refused: counted, and shown to the
    /// `on_rejected` hook.
    #[cold]
    pub(super) fn shadow_refused(&self, i: usize, d: &Denial, view: &RequestView<'_>) {
        let p = &self.policies[i];
        p.shadow_rejected();
        self.refusals.shadow((&p.name, &p.policy), d, view);
    }

    /// The timer of a request that starts waiting in policy `i`'s queue, if the layer
    /// reports metrics.
    pub(super) fn queued(&self, i: usize) -> Option<QueueTimer> {
        self.policies[i].meter.as_ref().map(|m| m.queued())
    }

    /// The response to a request whose selector chose `name`, which names no policy.
    #[cold]
    pub(super) fn unknown_policy<B>(
        &self,
        name: &str,
        view: &RequestView<'_>,
    ) -> Response<LimitedBody<B>> {
        self.refusals.unknown_policy(&self.headers, name, view)
    }

    /// On the inner service's response: the quota headers, and the pause on an upstream 429.
    pub(super) fn after(
        &self,
        parts: &mut http::response::Parts,
        quotas: &Quotas,
        pause: Option<(usize, Key)>,
    ) {
        let reported = quotas.map(|q| q.map(|(i, q)| self.policies[i].reported(q)));
        self.headers.report(&mut parts.headers, &reported);
        if let Some((i, key)) = pause {
            if parts.status == StatusCode::TOO_MANY_REQUESTS {
                // Delay-seconds or an HTTP-date (against the wall clock, which is what a
                // date is in); the pause itself runs on the layer's clock.
                if let Some(wait) = parts
                    .headers
                    .get(RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|s| retry_after::delay(s, std::time::SystemTime::now()))
                {
                    self.policies[i].pause(key, self.clock.now().as_nanos(), wait);
                }
            }
        }
    }
}
