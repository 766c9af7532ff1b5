use core::future::Future;
use core::pin::Pin;
use core::time::Duration;
use std::sync::Arc;

use super::charge::{Charge, Held};
use super::{
    AcquireFuture, Decision, Denial, Grant, Key, KeyBy, Permit, PolicyLimiter, PolicyQuota,
    RequestView, SharedClock,
};
use crate::adaptive::{AdaptiveLimiter, AdaptiveOptions};
use crate::clock::Clock;
use crate::http::client_ip::ClientIp;
use crate::http::key_hash::KeyHashBuilder;
use crate::lease::Release;
use crate::lease::{OwnedLease, Reason, Rejection, SettleError, Settlement};
use crate::limiter::{AcquireAsync, Limiter};
use crate::limiter::{AcquireOwned, Replenishing};
use crate::partition::{
    Compact, Factory, Kind, Member, Partition, PartitionConfig, PartitionLease, PartitionLimiter,
    Partitioned, Visit,
};
use crate::quota::{Quota, QuotaState};
use crate::{KeyedLimiter, OptionsError};

/// A charged request's refusal: the key's quota as it is (a cost may be refused with permits
/// left), with the limiter's RetryAfter.
fn charge_denial(rejection: Rejection, quota: impl FnOnce() -> QuotaState, want: bool) -> Denial {
    Denial {
        rejection,
        quota: want.then(|| QuotaState {
            reset_after: rejection.retry_after(),
            ..quota()
        }),
    }
}

/// A charge's outcome: the lease and, if wanted, the quota after it; or the refusal.
fn charged(
    r: Result<Held, Rejection>,
    quota: impl FnOnce() -> QuotaState,
    want: bool,
) -> Result<(Held, Option<QuotaState>), Denial> {
    match r {
        Ok(held) => Ok((held, want.then(quota))),
        Err(r) => Err(charge_denial(r, quota, want)),
    }
}

fn denial(rejection: Rejection, limit: u64, want_quota: bool) -> Denial {
    Denial {
        rejection,
        quota: want_quota.then(|| QuotaState::exhausted(limit, rejection.retry_after())),
    }
}

/// How a built-in policy queues: at most `max_delay` in its limiter's queue, if given.
#[derive(Clone, Copy, Debug)]
pub(super) struct Queue {
    pub(super) max_delay: Option<Duration>,
}

impl Queue {
    /// What a queueing policy does with its limiter's refusal `r` now: wait in the queue, unless
    /// the limiter says the permit comes only after the maximum delay (a rate limiter's
    /// RetryAfter counts the queue ahead): then the request is refused at once, with it,
    /// rather than held for the whole delay and refused anyway.
    fn decide(self, r: Rejection, limit: u64, want_quota: bool) -> Decision {
        let too_late = matches!(
            (r.retry_after(), self.max_delay),
            (Some(wait), Some(max)) if wait > max
        );
        if r.reason() == Reason::Exhausted && !too_late {
            Decision::Wait
        } else {
            Decision::Denied(denial(r, limit, want_quota))
        }
    }

    /// Runs `wait` for at most the maximum delay; past it, `retry` (a fresh try, after `wait`
    /// has left the queue) decides: a permit that has come by then is taken, and a refusal is
    /// [`Reason::TimedOut`] with the limiter's own RetryAfter, if it has one. A waiter pushed
    /// out of the queue by a newer one ([`Reason::Evicted`], which carries no RetryAfter) is
    /// answered the same way: a fresh try, and [`Reason::Evicted`] with the limiter's
    /// RetryAfter if it refuses.
    async fn bounded<T>(
        self,
        wait: impl Future<Output = Result<T, Rejection>>,
        retry: impl FnOnce() -> Result<T, Rejection>,
    ) -> Result<T, Rejection> {
        let waited = match self.max_delay {
            None => wait.await,
            Some(max) => match tokio::time::timeout(max, wait).await {
                Ok(r) => r,
                Err(_) => return retry().map_err(|r| after_wait(&Reason::TimedOut, r)),
            },
        };
        match waited {
            Err(r) if r.reason() == Reason::Evicted && r.retry_after().is_none() => {
                retry().map_err(|r| after_wait(&Reason::Evicted, r))
            }
            other => other,
        }
    }
}

/// The refusal of a fresh try `r` made after a wait ended for `reason` (the deadline, or
/// pushed out of the queue): `reason`, with the limiter's RetryAfter when it has one (a rate
/// limiter's); or `r` itself when the limiter refused for another reason (closed).
pub(crate) fn after_wait(reason: &'static Reason, r: Rejection) -> Rejection {
    match (r.reason(), r.retry_after()) {
        (Reason::Exhausted, Some(d)) => Rejection::with_retry_after(reason, d),
        (Reason::Exhausted, None) => Rejection::new(reason),
        _ => r,
    }
}

/// Keeps serving `limiter`'s queue as time brings permits while `acquire` waits, so a queued
/// request on a rate policy is admitted when its permits arrive even if no other request comes.
async fn wait_serving<L, F, T>(limiter: &L, acquire: F) -> T
where
    L: Replenishing + ?Sized,
    F: Future<Output = T>,
{
    let mut acquire = core::pin::pin!(acquire);
    loop {
        let tick = match limiter.next_service() {
            Some(d) => d.max(Duration::from_millis(1)),
            None => Duration::from_millis(50),
        };
        match race(acquire.as_mut(), tick).await {
            Some(out) => return out,
            None => {
                limiter.replenish();
            }
        }
    }
}

/// Polls `fut` for up to `tick`: its output, or `None` when the tick passed first.
async fn race<F: Future + ?Sized>(mut fut: Pin<&mut F>, tick: Duration) -> Option<F::Output> {
    let mut sleep = core::pin::pin!(tokio::time::sleep(tick));
    core::future::poll_fn(|cx| {
        if let core::task::Poll::Ready(v) = fut.as_mut().poll(cx) {
            return core::task::Poll::Ready(Some(v));
        }
        sleep.as_mut().poll(cx).map(|()| None)
    })
    .await
}

/// An unpartitioned policy: one limiter.
pub(super) struct Single<C: Clock> {
    limiter: Arc<PartitionLimiter<C>>,
    describe: PolicyQuota,
    queue: Option<Queue>,
}

impl<C: Clock + Send + Sync + 'static> Single<C> {
    pub(super) fn new(
        limiter: Arc<PartitionLimiter<C>>,
        describe: PolicyQuota,
        queue: Option<Queue>,
    ) -> Self {
        Self {
            limiter,
            describe,
            queue,
        }
    }

    fn grant(&self, lease: OwnedLease, want_quota: bool) -> Grant {
        Grant {
            permit: Permit::lease(lease),
            quota: want_quota.then(|| self.limiter.quota()),
        }
    }
}

impl<C: Clock + Send + Sync + 'static> PolicyLimiter for Single<C> {
    #[inline]
    fn try_acquire(&self, _key: Key, want_quota: bool) -> Decision {
        match self.limiter.try_acquire_owned(1) {
            Ok(lease) => Decision::Granted(self.grant(lease, want_quota)),
            Err(r) => match self.queue {
                Some(q) => q.decide(r, self.describe.quota, want_quota),
                None => Decision::Denied(denial(r, self.describe.quota, want_quota)),
            },
        }
    }

    fn acquire(self: Arc<Self>, _key: Key, want_quota: bool) -> AcquireFuture {
        Box::pin(async move {
            let limiter = self.limiter.clone();
            let wait = async {
                let lease =
                    wait_serving(&*limiter, crate::AcquireAsync::acquire(&*limiter, 1)).await?;
                let returns = lease.returns_permits();
                let n = lease.forget();
                Ok(if returns {
                    OwnedLease::releasing(n, limiter.clone())
                } else {
                    OwnedLease::unreleased(n)
                })
            };
            let queue = self.queue.unwrap_or(Queue { max_delay: None });
            match queue.bounded(wait, || limiter.try_acquire_owned(1)).await {
                Ok(owned) => Ok(self.grant(owned, want_quota)),
                Err(r) => Err(denial(r, self.describe.quota, want_quota)),
            }
        })
    }

    fn describe(&self) -> PolicyQuota {
        self.describe
    }
}

impl<C: Clock + Send + Sync + 'static> Charge for Single<C> {
    fn charge(
        &self,
        _key: Key,
        permits: u32,
        want_quota: bool,
    ) -> Result<(Held, Option<QuotaState>), Denial> {
        let r = self.limiter.try_acquire_owned(permits).map(Held::Owned);
        charged(r, || self.limiter.quota(), want_quota)
    }

    fn quota(&self, _key: &Key) -> QuotaState {
        self.limiter.quota()
    }
}

/// A built-in rate policy that never queues, called directly by the layer's fast path: no
/// `dyn PolicyLimiter` call, no [`Decision`] (a grant holds no permit), no quota.
pub(crate) enum Rate {
    /// A keyed token bucket or fixed window.
    Keyed(Arc<Keyed<SharedClock>>),
    /// The same on the default clock.
    KeyedStd(Arc<Keyed<crate::StdClock>>),
    /// One unpartitioned token bucket, fixed or sliding window (its lease releases nothing).
    Single(Arc<PartitionLimiter<SharedClock>>),
    /// The same on the default clock.
    SingleStd(Arc<PartitionLimiter<crate::StdClock>>),
}

impl Rate {
    /// One permit for the request's key (found by `key`, `ip`) now, or the rejection; `None`
    /// if the request has no key. An unpartitioned limiter looks for no key.
    #[inline]
    pub(crate) fn try_acquire(
        &self,
        key: &KeyBy,
        req: &RequestView<'_>,
        ip: &ClientIp,
    ) -> Option<Result<(), Rejection>> {
        match self {
            Rate::Keyed(k) => {
                let key = key.extract(req, ip)?;
                Some(k.limiter.try_acquire(&key, 1).map(drop))
            }
            Rate::KeyedStd(k) => {
                let key = key.extract(req, ip)?;
                Some(k.limiter.try_acquire(&key, 1).map(drop))
            }
            Rate::Single(l) => Some(crate::Limiter::try_acquire(&**l, 1).map(drop)),
            Rate::SingleStd(l) => Some(crate::Limiter::try_acquire(&**l, 1).map(drop)),
        }
    }
}

/// A token bucket or fixed window per key, in the bounded lock-free table.
pub(crate) struct Keyed<C: Clock> {
    limiter: KeyedLimiter<Key, C, KeyHashBuilder>,
    describe: PolicyQuota,
}

impl<C: Clock> Keyed<C> {
    /// The keyed limiter of `kind` on `clock`, if `kind` has a compact keyed form (token
    /// bucket, fixed window, GCRA, leaky meter, sliding counter within its keyed limit).
    pub(super) fn new(
        kind: Kind,
        partitions: PartitionConfig,
        clock: C,
        describe: PolicyQuota,
    ) -> Result<Option<Self>, OptionsError> {
        let hasher = KeyHashBuilder::new();
        let limiter = match kind {
            Kind::TokenBucket(o) => {
                KeyedLimiter::with_hasher_token_bucket(o, partitions, clock, hasher)?
            }
            Kind::FixedWindow(o) => {
                KeyedLimiter::with_hasher_fixed_window(o, partitions, clock, hasher)?
            }
            Kind::Gcra(o) => KeyedLimiter::with_hasher_gcra(o, partitions, clock, hasher)?,
            Kind::LeakyMeter(o) => {
                KeyedLimiter::with_hasher_leaky_meter(o, partitions, clock, hasher)?
            }
            Kind::SlidingCounter(o) => {
                // Limits beyond the keyed form's word (a cap that grows with the window) take
                // a limiter per key instead.
                match KeyedLimiter::with_hasher_sliding_counter(o, partitions, clock, hasher) {
                    Err(OptionsError::LimitTooLarge { .. }) => return Ok(None),
                    other => other?,
                }
            }
            Kind::NoLimit
            | Kind::Concurrency(_)
            | Kind::SlidingWindow(_)
            | Kind::LeakyShaper(_)
            | Kind::SlidingLog(_) => return Ok(None),
        };
        Ok(Some(Self { limiter, describe }))
    }
}

impl<C: Clock + Send + Sync + 'static> PolicyLimiter for Keyed<C> {
    fn partitions(&self) -> Option<usize> {
        Some(self.limiter.len())
    }

    #[inline]
    fn try_acquire(&self, key: Key, want_quota: bool) -> Decision {
        match self.limiter.try_acquire(&key, 1) {
            Ok(_) => Decision::Granted(Grant {
                permit: Permit::none(),
                quota: want_quota.then(|| self.limiter.quota(&key)),
            }),
            Err(r) => Decision::Denied(denial(r, self.describe.quota, want_quota)),
        }
    }

    fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture {
        let d = self.try_acquire(key, want_quota);
        Box::pin(async move {
            match d {
                Decision::Granted(g) => Ok(g),
                Decision::Denied(d) => Err(d),
                Decision::Wait => unreachable_wait(),
            }
        })
    }

    fn describe(&self) -> PolicyQuota {
        self.describe
    }
}

impl<C: Clock + Send + Sync + 'static> Charge for Keyed<C> {
    fn charge(
        &self,
        key: Key,
        permits: u32,
        want_quota: bool,
    ) -> Result<(Held, Option<QuotaState>), Denial> {
        let r = self.limiter.try_acquire(&key, permits).map(Held::Keyed);
        charged(r, || self.limiter.quota(&key), want_quota)
    }

    fn settle(&self, key: &Key, held: &mut Held, s: Settlement) -> Result<(), SettleError> {
        match held {
            Held::Keyed(l) => self.limiter.settle_within(key, l, s.actual, s.max_debt),
            Held::Owned(_) => Err(SettleError::Unsupported),
        }
    }

    fn quota(&self, key: &Key) -> QuotaState {
        self.limiter.quota(key)
    }
}

fn unreachable_wait() -> Result<Grant, Denial> {
    // `Keyed::try_acquire` never answers `Wait`; should it ever, refuse rather than panic.
    Err(Denial {
        rejection: Rejection::new(&Reason::Exhausted),
        quota: None,
    })
}

/// Makes a partition's limiter of the policy's one type (see [`Many`]).
pub(super) struct Make<L>(Arc<dyn Fn(SharedClock) -> L + Send + Sync>);

impl<K, L: Part> Factory<K, SharedClock> for Make<L> {
    type Limiter = L;

    fn create(self, _key: &K, clock: &SharedClock) -> L {
        let limiter = (self.0)(clock.clone());
        limiter.compact();
        limiter
    }
}

type PartitionerFn<L> = dyn Fn(&Key) -> Partition<Key, Make<L>> + Send + Sync;

/// A partition's limiter type the layer can hold across tasks: one of the built-in kinds, or
/// an adaptive limiter (one per key).
pub(super) trait Part:
    Compact + Limiter + Release + AcquireAsync + Quota + Send + Sync + 'static
{
    /// Serves the waiters time brought permits to (a rate limiter's `replenish`).
    fn nudge(&self);
}

impl<L: Member<SharedClock> + Send + Sync + 'static> Part for L {
    fn nudge(&self) {
        Member::nudge(self);
    }
}

/// Served by releases alone.
impl Part for AdaptiveLimiter<SharedClock> {
    fn nudge(&self) {}
}
type ManyLimiter<L> = Partitioned<Key, L, Box<PartitionerFn<L>>, SharedClock>;

/// What a partition's waiting acquisition ends with.
type Acquired<L> = Result<PartitionLease<Key, L>, Rejection>;

/// `limiter.acquire(key)`, boxed where its lifetime is concrete (so that it is provably `Send`).
fn wait_partition<'a, L: Part>(
    limiter: &'a ManyLimiter<L>,
    key: &Key,
) -> Pin<Box<dyn Future<Output = Acquired<L>> + Send + 'a>>
where
    for<'b> L::Acquire<'b>: Send,
{
    Box::pin(limiter.acquire(key, 1))
}

/// Any kind per key, waitable: the sharded map of full limiters, all of the policy's one type
/// `L` (a token bucket's partition holds a token bucket, not an enum as large as the largest
/// kind's limiter).
pub(super) struct Many<L: Part> {
    limiter: ManyLimiter<L>,
    describe: PolicyQuota,
    queue: Option<Queue>,
}

/// Builds a policy's [`Many`] from the maker of its limiter type ([`PartitionKind::visit`]).
pub(super) struct ManyOf {
    pub(super) partitions: PartitionConfig,
    pub(super) clock: SharedClock,
    pub(super) describe: PolicyQuota,
    pub(super) queue: Option<Queue>,
}

impl Visit<SharedClock> for ManyOf {
    type Out = (Arc<dyn PolicyLimiter>, Arc<dyn Charge>);

    fn visit<L>(self, make: impl Fn(SharedClock) -> L + Send + Sync + 'static) -> Self::Out
    where
        L: Member<SharedClock> + Send + Sync + 'static,
        for<'a> L::Acquire<'a>: Send,
    {
        let make: Arc<dyn Fn(SharedClock) -> L + Send + Sync> = Arc::new(make);
        let partitioner: Box<PartitionerFn<L>> =
            Box::new(move |k: &Key| Partition::new(*k, Make(make.clone())));
        let many = Arc::new(Many {
            limiter: Partitioned::with_clock(partitioner, self.partitions, self.clock),
            describe: self.describe,
            queue: self.queue,
        });
        (many.clone(), many)
    }
}

impl Many<AdaptiveLimiter<SharedClock>> {
    /// An adaptive limit per key, each made with `options` when its key is first seen, waiting
    /// in its queue (`queue`) when the options allow one.
    pub(super) fn adaptive(
        options: AdaptiveOptions,
        partitions: PartitionConfig,
        clock: SharedClock,
        queue: Option<Queue>,
    ) -> Arc<dyn PolicyLimiter> {
        let make: Arc<dyn Fn(SharedClock) -> AdaptiveLimiter<SharedClock> + Send + Sync> =
            Arc::new(move |clock| {
                // Valid: `Policy::adaptive` checked the options.
                AdaptiveLimiter::with_clock(options, clock).expect("options checked")
            });
        let partitioner: Box<PartitionerFn<AdaptiveLimiter<SharedClock>>> =
            Box::new(move |k: &Key| Partition::new(*k, Make(make.clone())));
        Arc::new(Many {
            limiter: Partitioned::with_clock(partitioner, partitions, clock),
            describe: PolicyQuota {
                quota: u64::from(options.initial_limit),
                window: None,
                concurrent: true,
            },
            queue: queue.filter(|_| options.queue_limit > 0),
        })
    }
}

impl<L: Part> Many<L> {
    fn quota(&self, key: &Key) -> QuotaState {
        self.limiter
            .with_limiter(key, |l| l.quota())
            .unwrap_or(QuotaState {
                limit: self.describe.quota,
                remaining: self.describe.quota,
                reset_after: None,
            })
    }

    fn grant(&self, key: &Key, lease: PartitionLease<Key, L>, want_quota: bool) -> Grant {
        Grant {
            permit: Permit::lease(lease.into_owned()),
            quota: want_quota.then(|| self.quota(key)),
        }
    }
}

impl<L: Part> Charge for Many<L> {
    fn charge(
        &self,
        key: Key,
        permits: u32,
        want_quota: bool,
    ) -> Result<(Held, Option<QuotaState>), Denial> {
        let r = self.limiter.try_acquire(&key, permits);
        charged(
            r.map(|l| Held::Owned(l.into_owned())),
            || self.quota(&key),
            want_quota,
        )
    }

    fn quota(&self, key: &Key) -> QuotaState {
        Many::quota(self, key)
    }
}

impl<L: Part> PolicyLimiter for Many<L>
where
    for<'a> L::Acquire<'a>: Send,
{
    fn partitions(&self) -> Option<usize> {
        Some(self.limiter.len())
    }

    #[inline]
    fn try_acquire(&self, key: Key, want_quota: bool) -> Decision {
        match self.limiter.try_acquire(&key, 1) {
            Ok(lease) => Decision::Granted(self.grant(&key, lease, want_quota)),
            Err(r) => match self.queue {
                Some(q) => q.decide(r, self.describe.quota, want_quota),
                None => Decision::Denied(denial(r, self.describe.quota, want_quota)),
            },
        }
    }

    fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture {
        Box::pin(async move {
            // Rate-limited partitions are served by the partition's later requests, or by the
            // periodic nudge below; concurrency partitions by releases.
            let wait = async {
                let mut acquire = wait_partition(&self.limiter, &key);
                loop {
                    let tick = self.describe.window.map_or(Duration::from_millis(50), |w| {
                        (w / 16).clamp(Duration::from_millis(1), Duration::from_millis(250))
                    });
                    if let Some(out) = race(acquire.as_mut(), tick).await {
                        break out;
                    }
                    if self.describe.window.is_some() {
                        self.limiter.with_limiter(&key, |l| l.nudge());
                    }
                }
            };
            let queue = self.queue.unwrap_or(Queue { max_delay: None });
            let r = queue
                .bounded(wait, || self.limiter.try_acquire(&key, 1))
                .await;
            match r {
                Ok(lease) => Ok(self.grant(&key, lease, want_quota)),
                Err(r) => Err(denial(r, self.describe.quota, want_quota)),
            }
        })
    }

    fn describe(&self) -> PolicyQuota {
        self.describe
    }
}
