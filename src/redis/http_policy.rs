//! The Redis limiter as a policy of the HTTP layer (features `redis` and `http`): one limit per
//! request key shared by every server, one round trip per request.

use std::sync::Arc;

use ::redis::aio::ConnectionLike;

use super::{Algorithm, RedisLimiter};
use crate::http::{
    AcquireFuture, Decision, Denial, Grant, Key, Permit, PolicyLimiter, PolicyQuota,
};
use crate::quota::QuotaState;

/// A [`RedisLimiter`] decides an HTTP policy's requests: plug it in with
/// [`Policy::custom`](crate::http::Policy::custom). Each request key (client IP, header, ...)
/// is a Redis partition named by the key's stable text ([`Key`]'s `Display`), so every server
/// with the same prefix shares one limit per key. A decision needs a round trip, so the layer
/// always takes its waiting path (no queue: Redis grants or rejects at once, under the
/// limiter's timeout and failure policy). The quota headers report what the script returns:
/// the permits left, and for `reset` the time until the limit is whole again.
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tollgate::http::{KeyBy, Policy, RateLimiting};
/// use tollgate::redis::{Algorithm, FailurePolicy, RedisLimiter};
/// use tollgate::FixedWindowOptions;
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let conn = redis::Client::open("redis://127.0.0.1/")?.get_connection_manager().await?;
/// let shared = RedisLimiter::builder(
///     conn,
///     "api",
///     Algorithm::FixedWindow(FixedWindowOptions::new(1_000, Duration::from_secs(60))),
///     FailurePolicy::fallback(0.25),
/// )
/// .build()?;
/// let layer = RateLimiting::builder()
///     .global(Policy::custom(Arc::new(shared)).partition_by(KeyBy::header(::http::HeaderName::from_static("x-api-key"))))
///     .build()?
///     .layer();
/// # let _ = layer; Ok(()) }
/// ```
impl<C: ConnectionLike + Clone + Send + Sync + 'static> PolicyLimiter for RedisLimiter<C> {
    fn try_acquire(&self, _key: Key, _want_quota: bool) -> Decision {
        // Never block `Service::call` on the network.
        Decision::Wait
    }

    fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture {
        Box::pin(async move {
            let d = self.decide(&key.to_string(), 1).await;
            let limit = u64::from(self.inner.plan.limit);
            match d.outcome {
                Ok(()) => Ok(Grant {
                    permit: Permit::none(),
                    quota: want_quota.then(|| QuotaState {
                        limit,
                        remaining: d.remaining.min(limit),
                        reset_after: (!d.reset.is_zero()).then_some(d.reset),
                    }),
                }),
                Err(rejection) => Err(Denial {
                    rejection,
                    quota: want_quota
                        .then(|| QuotaState::exhausted(limit, rejection.retry_after())),
                }),
            }
        })
    }

    fn describe(&self) -> PolicyQuota {
        let (quota, window) = match self.inner.algorithm {
            Algorithm::TokenBucket(o) => (
                o.token_limit,
                o.replenishment_period
                    .saturating_mul(o.token_limit.div_ceil(o.tokens_per_period.max(1))),
            ),
            Algorithm::FixedWindow(o) => (o.permit_limit, o.window),
            Algorithm::SlidingWindow(o) => (o.permit_limit, o.window),
            Algorithm::Gcra(o) => (o.burst, o.interval.saturating_mul(o.burst)),
            Algorithm::SlidingCounter(o) => (o.permit_limit, o.window),
            Algorithm::LeakyMeter(o) => (
                o.capacity,
                (o.leak_interval / o.leak.max(1)).saturating_mul(o.capacity),
            ),
        };
        PolicyQuota {
            quota: u64::from(quota),
            window: Some(window),
            concurrent: false,
        }
    }
}
