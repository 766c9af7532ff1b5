//! The HTTP policy of an [`AdaptiveLimiter`]: one limit for every request it covers, found by
//! the limiter; each admitted request holds its lease until its response body ends, and its
//! latency and outcome (a 5xx, a 429 from upstream or a failed inner service: a drop) are
//! sampled then.

use std::sync::Arc;

use super::limiter::{AcquireFuture, Decision, Denial, Grant, Permit, PolicyLimiter, PolicyQuota};
use super::Key;
use crate::adaptive::AdaptiveLimiter;
use crate::clock::Clock;
use crate::lease::{Reason, Rejection};
use crate::quota::QuotaState;

/// An adaptive limiter as a [`PolicyLimiter`]: `queued` when its options allow waiting.
pub(super) struct AdaptivePolicy<C: Clock> {
    pub(super) limiter: Arc<AdaptiveLimiter<C>>,
    pub(super) queued: bool,
}

impl<C: Clock + Send + Sync + 'static> AdaptivePolicy<C> {
    fn quota(&self, want: bool) -> Option<QuotaState> {
        want.then(|| QuotaState {
            limit: u64::from(self.limiter.limit()),
            remaining: self.limiter.available_permits(),
            reset_after: None,
        })
    }

    fn denial(&self, rejection: Rejection, want: bool) -> Denial {
        Denial {
            rejection,
            quota: self.quota(want),
        }
    }
}

impl<C: Clock + Send + Sync + 'static> PolicyLimiter for AdaptivePolicy<C> {
    fn try_acquire(&self, _key: Key, want_quota: bool) -> Decision {
        match self.limiter.try_acquire_owned(1) {
            Ok(lease) => Decision::Granted(Grant {
                permit: Permit::adaptive(lease),
                quota: self.quota(want_quota),
            }),
            Err(r) if self.queued && r.reason() == Reason::Exhausted => Decision::Wait,
            Err(r) => Decision::Denied(self.denial(r, want_quota)),
        }
    }

    fn acquire(self: Arc<Self>, _key: Key, want_quota: bool) -> AcquireFuture {
        Box::pin(async move {
            match self.limiter.acquire_owned(1).await {
                Ok(lease) => Ok(Grant {
                    permit: Permit::adaptive(lease),
                    quota: self.quota(want_quota),
                }),
                Err(r) => Err(self.denial(r, want_quota)),
            }
        })
    }

    fn describe(&self) -> PolicyQuota {
        PolicyQuota {
            quota: u64::from(self.limiter.limit()),
            window: None,
            concurrent: true,
        }
    }
}
