//! Policies: a limiter, how requests are partitioned, and what a request without a key gets;
//! and [`PolicyLimiter`], the decision trait every policy goes through (the extension point for
//! an async, e.g. Redis-backed, limiter).

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::time::Duration;
use std::hash::RandomState;
use std::net::IpAddr;
use std::sync::Arc;

use http::header::HeaderName;
use http::{Extensions, HeaderMap, Method, Uri};

use super::client_ip::{mask, ClientIp};
use crate::clock::Clock;
use crate::lease::{OwnedLease, Reason, Rejection};
use crate::limiter::{AcquireOwned, Replenishing};
use crate::partition::{
    Partition, PartitionConfig, PartitionKind, PartitionLease, PartitionLimiter, Partitioned,
};
use crate::quota::{Quota, QuotaState};
use crate::{
    ConcurrencyOptions, FixedWindowOptions, KeyedLimiter, OptionsError, SlidingWindowOptions,
    TokenBucketOptions,
};

/// The clock every built-in policy reads: shared, swappable (a `ManualClock` in tests).
pub type SharedClock = Arc<dyn Clock + Send + Sync>;

/// A request's partition key: an IP address (after prefix grouping) kept exactly, or any other
/// value kept as a 128-bit keyed hash (SipHash with per-process random keys, so clients cannot
/// choose collisions). `Copy`, 17 bytes: storing one never allocates.
///
/// ```
/// use tollgate::http::Key;
///
/// assert_eq!(Key::from_bytes(b"alice"), Key::from_bytes(b"alice"));
/// assert_ne!(Key::from_bytes(b"alice"), Key::from_bytes(b"bob"));
/// assert_ne!(Key::ip("10.0.0.1".parse().unwrap()), Key::from_u64(1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    tag: u8,
    bytes: [u8; 16],
}

/// SipHash-2-4 of `bytes` under a fixed key: the same on every machine and Rust release, so a
/// [`Key::from_bytes`] names the same partition in every process (what a limit shared through
/// Redis needs). Two fixed keys give 128 bits; the partition tables hash a `Key` again with
/// their own random seed, so a fixed key here does not expose them to crafted collisions.
#[allow(deprecated)] // `SipHasher` is deprecated only in favour of the unspecified `DefaultHasher`.
fn stable_hash(bytes: &[u8], k0: u64, k1: u64) -> u64 {
    use core::hash::Hasher;
    let mut h = core::hash::SipHasher::new_with_keys(k0, k1);
    h.write(bytes);
    h.finish()
}

impl Key {
    /// The shared key of requests without one, under [`MissingKey::Shared`].
    pub const MISSING: Key = Key {
        tag: 0,
        bytes: [0; 16],
    };
    /// The key of unpartitioned policies.
    pub const GLOBAL: Key = Key {
        tag: 1,
        bytes: [0; 16],
    };

    /// The key of an IP address (IPv4-mapped IPv6 addresses as their IPv4 address).
    pub fn ip(ip: IpAddr) -> Key {
        match ip.to_canonical() {
            IpAddr::V4(v4) => {
                let mut bytes = [0; 16];
                bytes[..4].copy_from_slice(&v4.octets());
                Key { tag: 4, bytes }
            }
            IpAddr::V6(v6) => Key {
                tag: 6,
                bytes: v6.octets(),
            },
        }
    }

    /// The key of any bytes: a header value, a user id, an API key. A 128-bit hash of them,
    /// stable across processes, machines and Rust releases (SipHash-2-4 under two fixed keys),
    /// so that servers sharing a limit through Redis agree on every key.
    ///
    /// ```
    /// use tollgate::http::Key;
    ///
    /// assert_eq!(Key::from_bytes(b"api-key-1"), Key::from_bytes(b"api-key-1"));
    /// assert_ne!(Key::from_bytes(b"api-key-1"), Key::from_bytes(b"api-key-2"));
    /// // The same text in every process:
    /// assert_eq!(Key::from_bytes(b"").to_string(), "02-7cfa464881a05aaaed2f770595ebe793");
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Key {
        let hi = stable_hash(bytes, 0x7461_6c6c_6761_7465, 0x6b65_7973_2d68_6921);
        let lo = stable_hash(bytes, 0x2d31_3238_2d62_6974, 0x7374_6162_6c65_2121);
        Key {
            tag: 2,
            bytes: ((u128::from(hi) << 64) | u128::from(lo)).to_be_bytes(),
        }
    }

    /// The key of a number (a tenant id, a shard).
    pub fn from_u64(n: u64) -> Key {
        let mut bytes = [0; 16];
        bytes[..8].copy_from_slice(&n.to_be_bytes());
        Key { tag: 3, bytes }
    }
}

/// The key's stable text: its kind and its 16 bytes in hex, e.g.
/// `04-0a000001000000000000000000000000` for 10.0.0.1 (what a Redis-backed policy uses as the
/// partition's name).
///
/// ```
/// use tollgate::http::Key;
///
/// let k = Key::ip("10.0.0.1".parse().unwrap());
/// assert_eq!(k.to_string(), "04-0a000001000000000000000000000000");
/// ```
impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02x}-", self.tag)?;
        for b in self.bytes {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// What a key extractor sees of a request: borrowed, nothing copied.
#[derive(Clone, Copy, Debug)]
pub struct RequestView<'a> {
    /// The method.
    pub method: &'a Method,
    /// The URI.
    pub uri: &'a Uri,
    /// The headers.
    pub headers: &'a HeaderMap,
    /// The extensions (axum's `ConnectInfo`, `MatchedPath`, your authentication's user).
    pub extensions: &'a Extensions,
}

impl<'a> RequestView<'a> {
    /// A view of `req`.
    pub fn of<B>(req: &'a http::Request<B>) -> Self {
        Self {
            method: req.method(),
            uri: req.uri(),
            headers: req.headers(),
            extensions: req.extensions(),
        }
    }
}

type ExtractFn = dyn Fn(&RequestView<'_>) -> Option<Key> + Send + Sync;

/// How a policy partitions requests: each key gets its own limiter.
#[derive(Clone)]
pub enum KeyBy {
    /// One limiter for every request.
    Global,
    /// The client's IP address (see the layer's [`ClientIp`] setting), IPv6 addresses grouped
    /// by their first `v6_prefix` bits (a client owns a whole /64, so /64 is the default:
    /// rotating addresses inside it gains nothing).
    ClientIp {
        /// The IPv6 prefix length that forms one key (1..=128).
        v6_prefix: u8,
    },
    /// A header's value (e.g. an API key). No header: no key.
    Header(HeaderName),
    /// Your function of the request: an authenticated identity from the extensions, a tenant
    /// from the path, anything. `None`: no key.
    With(Arc<ExtractFn>),
}

impl KeyBy {
    /// The client IP, IPv6 grouped by /64.
    pub const CLIENT_IP: KeyBy = KeyBy::ClientIp { v6_prefix: 64 };

    /// Partition by `f(request)`.
    ///
    /// ```
    /// use tollgate::http::{Key, KeyBy};
    ///
    /// #[derive(Clone)]
    /// struct User { id: u64 }
    /// // Set by your authentication layer, which runs before the rate limiter.
    /// let by_user = KeyBy::with(|req| req.extensions.get::<User>().map(|u| Key::from_u64(u.id)));
    /// # let _ = by_user;
    /// ```
    pub fn with(f: impl Fn(&RequestView<'_>) -> Option<Key> + Send + Sync + 'static) -> KeyBy {
        KeyBy::With(Arc::new(f))
    }

    /// Partition by header `name`.
    pub fn header(name: HeaderName) -> KeyBy {
        KeyBy::Header(name)
    }

    pub(crate) fn extract(&self, req: &RequestView<'_>, ip: &ClientIp) -> Option<Key> {
        match self {
            KeyBy::Global => Some(Key::GLOBAL),
            KeyBy::ClientIp { v6_prefix } => {
                let addr = ip.resolve(ClientIp::peer_of(req.extensions), req.headers)?;
                Some(Key::ip(match addr {
                    IpAddr::V6(_) => mask(addr, *v6_prefix),
                    v4 => v4,
                }))
            }
            KeyBy::Header(name) => req.headers.get(name).map(|v| Key::from_bytes(v.as_bytes())),
            KeyBy::With(f) => f(req),
        }
    }
}

impl core::fmt::Debug for KeyBy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            KeyBy::Global => f.write_str("Global"),
            KeyBy::ClientIp { v6_prefix } => write!(f, "ClientIp {{ v6_prefix: {v6_prefix} }}"),
            KeyBy::Header(h) => write!(f, "Header({h})"),
            KeyBy::With(_) => f.write_str("With(..)"),
        }
    }
}

/// What a request gets when its policy's key cannot be extracted (no peer address, no header,
/// an untrusted proxy chain). Never a 500.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MissingKey {
    /// Rejected with the policy's status, [`Reason::Custom`]`("no partition key")`.
    Reject,
    /// Admitted without limit.
    Allow,
    /// Limited by one partition shared by every keyless request (the default).
    #[default]
    Shared,
}

/// The [`Reason`] of a request rejected for having no key under [`MissingKey::Reject`].
pub const NO_KEY: Reason = Reason::Custom("no partition key");

/// What an admitted request holds until its response body ends: a concurrency permit, or
/// nothing for rate policies.
#[derive(Debug, Default)]
pub struct Permit(PermitInner);

#[derive(Debug, Default)]
enum PermitInner {
    #[default]
    None,
    Owned(OwnedLease),
    Partition(PartitionLease<Key, PartitionLimiter<SharedClock>>),
}

impl Permit {
    /// Nothing held (a rate policy's grant, or an unlimited request).
    pub const fn none() -> Self {
        Permit(PermitInner::None)
    }

    /// A lease held until the response ends (a custom [`PolicyLimiter`]'s permit).
    pub fn lease(lease: OwnedLease) -> Self {
        if lease.returns_permits() {
            Permit(PermitInner::Owned(lease))
        } else {
            Permit::none()
        }
    }

    /// Whether dropping this gives permits back.
    pub fn holds(&self) -> bool {
        match &self.0 {
            PermitInner::None => false,
            PermitInner::Owned(l) => l.returns_permits(),
            PermitInner::Partition(l) => l.returns_permits(),
        }
    }
}

/// A granted request: what it holds, and the quota left (when asked for).
#[derive(Debug)]
pub struct Grant {
    /// Held until the response body ends.
    pub permit: Permit,
    /// The partition's quota after this grant, if the caller asked for it.
    pub quota: Option<QuotaState>,
}

/// A refused request: why, and the partition's quota (when asked for).
#[derive(Clone, Copy, Debug)]
pub struct Denial {
    /// Why, and for rate policies when to retry.
    pub rejection: Rejection,
    /// The partition's quota, if the caller asked for it.
    pub quota: Option<QuotaState>,
}

/// The outcome of [`PolicyLimiter::try_acquire`].
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
pub type AcquireFuture = Pin<Box<dyn Future<Output = Result<Grant, Denial>> + Send>>;

/// What `RateLimit-Policy` says about a policy: its quota, window and unit.
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
///                 Err(Denial { rejection: Rejection::new(Reason::Exhausted), quota: None })
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
    fn try_acquire(&self, key: Key, want_quota: bool) -> Decision;

    /// Waits for a decision for `key` (called after [`Decision::Wait`]). Dropping the future
    /// must cancel the wait and give back anything it was granted.
    fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture;

    /// The policy's quota, for `RateLimit-Policy`.
    fn describe(&self) -> PolicyQuota;

    /// How many partitions are stored now, if the limiter keeps any (for metrics and tests).
    fn partitions(&self) -> Option<usize> {
        None
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Concurrency(ConcurrencyOptions),
    TokenBucket(TokenBucketOptions),
    FixedWindow(FixedWindowOptions),
    SlidingWindow(SlidingWindowOptions),
}

#[derive(Clone)]
enum Source {
    Builtin(Kind, PartitionKind),
    Custom(Arc<dyn PolicyLimiter>),
}

/// A rate-limiting policy: a limiter kind (or your [`PolicyLimiter`]), how it partitions
/// requests ([`KeyBy`]), what keyless requests get ([`MissingKey`]), whether requests wait in
/// the limiter's queue, and its rejection status.
///
/// ```
/// use std::time::Duration;
/// use tollgate::http::{KeyBy, MissingKey, Policy};
/// use tollgate::{PartitionConfig, TokenBucketOptions};
///
/// let per_ip = Policy::token_bucket(TokenBucketOptions::new(20, 10, Duration::from_secs(1)))
///     .unwrap()
///     .partition_by(KeyBy::CLIENT_IP)
///     .when_missing_key(MissingKey::Reject)
///     .partitions(PartitionConfig::new(1_000_000));
/// # let _ = per_ip;
/// ```
#[derive(Clone)]
pub struct Policy {
    source: Source,
    pub(crate) key: KeyBy,
    pub(crate) missing: MissingKey,
    partitions: PartitionConfig,
    pub(crate) queue: Option<Option<Duration>>,
    pub(crate) status: http::StatusCode,
    pub(crate) unavailable_status: Option<http::StatusCode>,
    pub(crate) pause_on_429: bool,
}

impl Policy {
    fn builtin(kind: Kind, pk: Result<PartitionKind, OptionsError>) -> Result<Self, OptionsError> {
        Ok(Self::from_source(Source::Builtin(kind, pk?)))
    }

    fn from_source(source: Source) -> Self {
        Self {
            source,
            key: KeyBy::Global,
            missing: MissingKey::Shared,
            partitions: PartitionConfig::default(),
            queue: None,
            status: http::StatusCode::TOO_MANY_REQUESTS,
            unavailable_status: None,
            pause_on_429: false,
        }
    }

    /// A concurrency limit: the permit is held until the response body ends.
    pub fn concurrency(options: ConcurrencyOptions) -> Result<Self, OptionsError> {
        Self::builtin(
            Kind::Concurrency(options),
            PartitionKind::concurrency(options),
        )
    }

    /// A token bucket.
    pub fn token_bucket(options: TokenBucketOptions) -> Result<Self, OptionsError> {
        Self::builtin(
            Kind::TokenBucket(options),
            PartitionKind::token_bucket(options),
        )
    }

    /// A fixed window.
    pub fn fixed_window(options: FixedWindowOptions) -> Result<Self, OptionsError> {
        Self::builtin(
            Kind::FixedWindow(options),
            PartitionKind::fixed_window(options),
        )
    }

    /// A sliding window (up to 16 segments).
    pub fn sliding_window(options: SlidingWindowOptions) -> Result<Self, OptionsError> {
        Self::builtin(
            Kind::SlidingWindow(options),
            PartitionKind::sliding_window(options),
        )
    }

    /// Your own limiter (see [`PolicyLimiter`]); it does its own partitioning by the [`Key`]
    /// the policy's [`KeyBy`] extracts.
    pub fn custom(limiter: Arc<dyn PolicyLimiter>) -> Self {
        Self::from_source(Source::Custom(limiter))
    }

    /// Partition requests by `key` (default [`KeyBy::Global`]: one limiter).
    pub fn partition_by(self, key: KeyBy) -> Self {
        Self { key, ..self }
    }

    /// What a request without a key gets (default [`MissingKey::Shared`]).
    pub fn when_missing_key(self, missing: MissingKey) -> Self {
        Self { missing, ..self }
    }

    /// The bounds of the per-key store (default [`PartitionConfig::default`]: 100,000 keys,
    /// idle keys evicted after 10 s, a full store evicts its longest idle key).
    pub fn partitions(self, partitions: PartitionConfig) -> Self {
        Self { partitions, ..self }
    }

    /// Requests wait in the limiter's queue (its options' `queue_limit`, in permits) instead of
    /// being rejected at once, for at most `max_delay` if given. A client that disconnects
    /// leaves the queue at once.
    pub fn queue(self, max_delay: Option<Duration>) -> Self {
        Self {
            queue: Some(max_delay),
            ..self
        }
    }

    /// The status of a rejection (default 429 Too Many Requests).
    pub fn rejection_status(self, status: http::StatusCode) -> Self {
        Self { status, ..self }
    }

    /// The status of a rejection because the limiter is closed or its queue is full (e.g.
    /// 503 Service Unavailable for a concurrency policy); default: the rejection status.
    pub fn unavailable_status(self, status: http::StatusCode) -> Self {
        Self {
            unavailable_status: Some(status),
            ..self
        }
    }

    /// Client side: when the upstream answers 429 with a `Retry-After` (delay seconds), reject
    /// this request's partition locally until then.
    pub fn pause_on_upstream_429(self) -> Self {
        Self {
            pause_on_429: true,
            ..self
        }
    }

    pub(crate) fn status_for(&self, reason: Reason) -> http::StatusCode {
        match (reason, self.unavailable_status) {
            (Reason::Closed | Reason::QueueFull, Some(s)) => s,
            _ => self.status,
        }
    }

    /// Makes the policy's limiter on `clock`.
    pub(crate) fn build(
        &self,
        clock: &SharedClock,
    ) -> Result<Arc<dyn PolicyLimiter>, OptionsError> {
        let (kind, pk) = match &self.source {
            Source::Custom(l) => return Ok(l.clone()),
            Source::Builtin(k, pk) => (*k, *pk),
        };
        let describe = describe(kind);
        let queue = self.queue.is_some();
        if matches!(self.key, KeyBy::Global) {
            return Ok(Arc::new(Single {
                limiter: Arc::new(pk.limiter(clock.clone())),
                describe,
                queue,
            }));
        }
        match kind {
            Kind::TokenBucket(o) if !queue => Ok(Arc::new(Keyed {
                limiter: KeyedLimiter::with_hasher_token_bucket(
                    o,
                    self.partitions,
                    clock.clone(),
                    RandomState::new(),
                )?,
                describe,
            })),
            Kind::FixedWindow(o) if !queue => Ok(Arc::new(Keyed {
                limiter: KeyedLimiter::with_hasher_fixed_window(
                    o,
                    self.partitions,
                    clock.clone(),
                    RandomState::new(),
                )?,
                describe,
            })),
            _ => {
                let partitioner: Box<PartitionerFn> =
                    Box::new(move |k: &Key| Partition::new(*k, pk));
                Ok(Arc::new(Many {
                    limiter: Partitioned::with_clock(partitioner, self.partitions, clock.clone()),
                    describe,
                    queue,
                }))
            }
        }
    }
}

impl core::fmt::Debug for Policy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Policy")
            .field("key", &self.key)
            .field("missing", &self.missing)
            .field("queue", &self.queue)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

fn describe(kind: Kind) -> PolicyQuota {
    match kind {
        Kind::Concurrency(o) => PolicyQuota {
            quota: u64::from(o.permit_limit),
            window: None,
            concurrent: true,
        },
        Kind::TokenBucket(o) => PolicyQuota {
            quota: u64::from(o.token_limit),
            // The time to refill an empty bucket.
            window: Some(
                o.replenishment_period
                    .saturating_mul(o.token_limit.div_ceil(o.tokens_per_period.max(1))),
            ),
            concurrent: false,
        },
        Kind::FixedWindow(o) => PolicyQuota {
            quota: u64::from(o.permit_limit),
            window: Some(o.window),
            concurrent: false,
        },
        Kind::SlidingWindow(o) => PolicyQuota {
            quota: u64::from(o.permit_limit),
            window: Some(o.window),
            concurrent: false,
        },
    }
}

fn denial(rejection: Rejection, limit: u64, want_quota: bool) -> Denial {
    Denial {
        rejection,
        quota: want_quota.then(|| QuotaState::exhausted(limit, rejection.retry_after())),
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
struct Single {
    limiter: Arc<PartitionLimiter<SharedClock>>,
    describe: PolicyQuota,
    queue: bool,
}

impl Single {
    fn grant(&self, lease: OwnedLease, want_quota: bool) -> Grant {
        Grant {
            permit: Permit::lease(lease),
            quota: want_quota.then(|| self.limiter.quota()),
        }
    }
}

impl PolicyLimiter for Single {
    #[inline]
    fn try_acquire(&self, _key: Key, want_quota: bool) -> Decision {
        match self.limiter.try_acquire_owned(1) {
            Ok(lease) => Decision::Granted(self.grant(lease, want_quota)),
            Err(r) if self.queue && r.reason() == Reason::Exhausted => Decision::Wait,
            Err(r) => Decision::Denied(denial(r, self.describe.quota, want_quota)),
        }
    }

    fn acquire(self: Arc<Self>, _key: Key, want_quota: bool) -> AcquireFuture {
        Box::pin(async move {
            let limiter = self.limiter.clone();
            let acquired =
                wait_serving(&*limiter, crate::AcquireAsync::acquire(&*limiter, 1)).await;
            match acquired {
                Ok(lease) => {
                    let returns = lease.returns_permits();
                    let n = lease.forget();
                    let owned = if returns {
                        OwnedLease::releasing(n, limiter.clone())
                    } else {
                        OwnedLease::unreleased(n)
                    };
                    Ok(self.grant(owned, want_quota))
                }
                Err(r) => Err(denial(r, self.describe.quota, want_quota)),
            }
        })
    }

    fn describe(&self) -> PolicyQuota {
        self.describe
    }
}

/// A token bucket or fixed window per key, in the bounded lock-free table.
struct Keyed {
    limiter: KeyedLimiter<Key, SharedClock>,
    describe: PolicyQuota,
}

impl PolicyLimiter for Keyed {
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

fn unreachable_wait() -> Result<Grant, Denial> {
    // `Keyed::try_acquire` never answers `Wait`; should it ever, refuse rather than panic.
    Err(Denial {
        rejection: Rejection::new(Reason::Exhausted),
        quota: None,
    })
}

type PartitionerFn = dyn Fn(&Key) -> Partition<Key> + Send + Sync;
type ManyLimiter = Partitioned<Key, PartitionLimiter<SharedClock>, Box<PartitionerFn>, SharedClock>;
type ManyLease = PartitionLease<Key, PartitionLimiter<SharedClock>>;

/// `limiter.acquire(key)`, boxed where its lifetime is concrete (so that it is provably `Send`).
fn wait_partition<'a>(
    limiter: &'a ManyLimiter,
    key: &Key,
) -> Pin<Box<dyn Future<Output = Result<ManyLease, Rejection>> + Send + 'a>> {
    Box::pin(limiter.acquire(key, 1))
}

/// Any kind per key, waitable: the sharded map of full limiters.
struct Many {
    limiter: ManyLimiter,
    describe: PolicyQuota,
    queue: bool,
}

impl Many {
    fn quota(&self, key: &Key) -> QuotaState {
        self.limiter
            .with_limiter(key, |l| l.quota())
            .unwrap_or(QuotaState {
                limit: self.describe.quota,
                remaining: self.describe.quota,
                reset_after: None,
            })
    }
}

impl PolicyLimiter for Many {
    fn partitions(&self) -> Option<usize> {
        Some(self.limiter.len())
    }

    #[inline]
    fn try_acquire(&self, key: Key, want_quota: bool) -> Decision {
        match self.limiter.try_acquire(&key, 1) {
            Ok(lease) => Decision::Granted(Grant {
                permit: Permit(PermitInner::Partition(lease)),
                quota: want_quota.then(|| self.quota(&key)),
            }),
            Err(r) if self.queue && r.reason() == Reason::Exhausted => Decision::Wait,
            Err(r) => Decision::Denied(denial(r, self.describe.quota, want_quota)),
        }
    }

    fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture {
        Box::pin(async move {
            // Rate-limited partitions are served by the partition's later requests, or by the
            // periodic replenish below; concurrency partitions by releases.
            let mut acquire = wait_partition(&self.limiter, &key);
            let r = loop {
                let tick = self.describe.window.map_or(Duration::from_millis(50), |w| {
                    (w / 16).clamp(Duration::from_millis(1), Duration::from_millis(250))
                });
                if let Some(out) = race(acquire.as_mut(), tick).await {
                    break out;
                }
                if self.describe.window.is_some() {
                    self.limiter.with_limiter(&key, |l| l.replenish());
                }
            };
            match r {
                Ok(lease) => Ok(Grant {
                    permit: Permit(PermitInner::Partition(lease)),
                    quota: want_quota.then(|| self.quota(&key)),
                }),
                Err(r) => Err(denial(r, self.describe.quota, want_quota)),
            }
        })
    }

    fn describe(&self) -> PolicyQuota {
        self.describe
    }
}
