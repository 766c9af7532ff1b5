//! Policies: a limiter, how requests are partitioned, and what a request without a key gets;
//! and [`PolicyLimiter`], the decision trait every policy goes through (the extension point for
//! an async, e.g. Redis-backed, limiter).

mod adaptive;
mod builtin;
mod charge;
mod key;
mod limiter;

use core::time::Duration;
use std::sync::Arc;

use crate::clock::Clock;
use crate::lease::Reason;
use crate::partition::{Kind, PartitionConfig, PartitionKind};
#[cfg(doc)]
use crate::KeyedLimiter;
use crate::{
    ConcurrencyOptions, FixedWindowOptions, GcraOptions, LeakyBucketOptions, OptionsError,
    ShaperOptions, SlidingCounterOptions, SlidingLogOptions, SlidingWindowOptions,
    TokenBucketOptions,
};
pub(crate) use builtin::{after_wait, Rate};
use builtin::{Keyed, Queue, Single};
pub use charge::Settle;
pub(crate) use charge::{Charge, Charged, Charging};
pub use key::{Key, KeyBy, MissingKey, RequestView, NO_KEY, NO_PEER_ADDRESS};
pub use limiter::{AcquireFuture, Decision, Denial, Grant, Permit, PolicyLimiter, PolicyQuota};

/// The clock every built-in policy reads: shared, swappable (a `ManualClock` in tests).
///
/// ```
/// # use std::{sync::Arc, time::Duration};
/// use tollgate::http::SharedClock;
/// use tollgate::ManualClock;
/// use tollgate::Clock;
///
/// let clock = Arc::new(ManualClock::new());
/// let shared: SharedClock = clock.clone();
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(shared.now(), clock.now()); // one clock, seen through the alias
/// ```
pub type SharedClock = Arc<dyn Clock + Send + Sync>;

#[derive(Clone)]
enum Source {
    Builtin(PartitionKind),
    Custom(Arc<dyn PolicyLimiter>),
    /// An adaptive limit, made with the layer (one, or one per key).
    Adaptive(crate::adaptive::AdaptiveOptions),
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
    pub(crate) shadow: bool,
    /// What a request is charged, and what its response settles it to.
    pub(crate) charging: Charging,
}

/// The constructors of the built-in rules: each `name(options)` builds the [`PartitionKind`] of
/// the same name, its options validated there.
macro_rules! builtin_constructors {
    ($($(#[$doc:meta])* $name:ident($options:ty);)*) => {$(
        $(#[$doc])*
        pub fn $name(options: $options) -> Result<Self, OptionsError> {
            Self::builtin(PartitionKind::$name(options))
        }
    )*};
}

/// Every rate limiter of the roster ([`rate_limiters!`](crate::roster::rate_limiters)) has its
/// `Policy` constructor.
macro_rules! policies_cover_the_roster {
    (() $($(#[$doc:meta])* $variant:ident($m:ident::$limiter:ident, $opts:ident) $ctor:ident $(, $per:ident)?;)+) => {
        const _: () = {
            $(let _ = Policy::$ctor;)+
        };
    };
}

crate::roster::rate_limiters!(policies_cover_the_roster! {});

impl Policy {
    fn builtin(kind: Result<PartitionKind, OptionsError>) -> Result<Self, OptionsError> {
        Ok(Self::from_source(Source::Builtin(kind?)))
    }

    fn from_source(source: Source) -> Self {
        Self {
            source,
            key: KeyBy::Global,
            missing: MissingKey::Auto,
            partitions: PartitionConfig::default(),
            queue: None,
            status: http::StatusCode::TOO_MANY_REQUESTS,
            unavailable_status: None,
            pause_on_429: false,
            shadow: false,
            charging: Charging::default(),
        }
    }

    builtin_constructors! {
        /// A concurrency limit: the permit is held until the response body ends.
        ///
        /// ```
        /// # use std::convert::Infallible;
        /// use http::{Request, Response, StatusCode};
        /// use tollgate::http::{Policy, RateLimiting};
        /// use tollgate::ConcurrencyOptions;
        /// use tower::{service_fn, Layer, ServiceExt};
        ///
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() {
        /// let limits = RateLimiting::builder().global(Policy::concurrency(ConcurrencyOptions::new(1)).unwrap()).build().unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// let streaming = app.clone().oneshot(Request::get("/export").body(()).unwrap()).await.unwrap();
        /// assert!(streaming.body().holds_permits()); // the export is still streaming
        /// assert_eq!(app.clone().oneshot(Request::get("/export").body(()).unwrap()).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
        /// drop(streaming); // it ended
        /// assert_eq!(app.clone().oneshot(Request::get("/export").body(()).unwrap()).await.unwrap().status(), 200);
        /// # }
        /// ```
        concurrency(ConcurrencyOptions);

        /// A token bucket.
        ///
        /// ```
        /// # use std::{convert::Infallible, sync::Arc, time::Duration};
        /// use http::{Request, Response, StatusCode};
        /// use tollgate::http::{Policy, RateLimiting};
        /// use tollgate::{ManualClock, TokenBucketOptions};
        /// use tower::{service_fn, Layer, ServiceExt};
        ///
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() {
        /// let clock = Arc::new(ManualClock::new());
        /// let burst = Policy::token_bucket(TokenBucketOptions::new(2, 1, Duration::from_secs(1))).unwrap();
        /// let limits = RateLimiting::builder().global(burst).clock(clock.clone()).build().unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// for _ in 0..2 { let _ = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap(); } // a burst of 2
        /// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
        /// clock.advance(Duration::from_secs(1)); // then one a second
        /// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), 200);
        /// # }
        /// ```
        token_bucket(TokenBucketOptions);

        /// A fixed window.
        ///
        /// ```
        /// # use std::{convert::Infallible, time::Duration};
        /// use http::{Request, Response};
        /// use tollgate::http::{Policy, RateLimiting};
        /// use tollgate::FixedWindowOptions;
        /// use tower::{service_fn, Layer, ServiceExt};
        ///
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() {
        /// let hourly = Policy::fixed_window(FixedWindowOptions::new(1, Duration::from_secs(3600))).unwrap();
        /// let limits = RateLimiting::builder().global(hourly).build().unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), 200);
        /// let refused = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap();
        /// assert_eq!(refused.headers()["retry-after"], "3600");
        /// assert!(Policy::fixed_window(FixedWindowOptions::new(0, Duration::from_secs(1))).is_err());
        /// # }
        /// ```
        fixed_window(FixedWindowOptions);

        /// A sliding window (up to 16 segments).
        ///
        /// ```
        /// # use std::{convert::Infallible, time::Duration};
        /// use http::{Request, Response, StatusCode};
        /// use tollgate::http::{Policy, RateLimiting};
        /// use tower::{service_fn, Layer, ServiceExt};
        ///
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() {
        /// use tollgate::SlidingWindowOptions;
        /// let smooth = Policy::sliding_window(SlidingWindowOptions::new(2, Duration::from_secs(60), 6)).unwrap();
        /// let limits = RateLimiting::builder().global(smooth).build().unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// for _ in 0..2 { let _ = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap(); }
        /// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
        /// assert!(Policy::sliding_window(SlidingWindowOptions::new(2, Duration::from_secs(60), 17)).is_err());
        /// # }
        /// ```
        sliding_window(SlidingWindowOptions);

        /// A sliding-window counter: the previous window's count weighted by how much of it the
        /// rolling window still overlaps, plus the current one's. Partitioned and not queued, it
        /// keeps 16 bytes a key (the compact keyed form, for limits up to its cap: 32,767 per
        /// second, 262,143 per minute; larger ones take a limiter per key).
        ///
        /// ```
        /// # use std::{convert::Infallible, sync::Arc, time::Duration};
        /// use http::{Request, Response, StatusCode};
        /// use tollgate::http::{Policy, RateLimiting};
        /// use tollgate::ManualClock;
        /// use tower::{service_fn, Layer, ServiceExt};
        ///
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() {
        /// use tollgate::SlidingCounterOptions;
        /// let clock = Arc::new(ManualClock::new());
        /// let counter = Policy::sliding_counter(SlidingCounterOptions::new(4, Duration::from_secs(60))).unwrap();
        /// let limits = RateLimiting::builder().global(counter).clock(clock.clone()).build().unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// for _ in 0..4 { assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), 200); }
        /// let refused = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap();
        /// assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        /// // The 4 weigh fully at the next window's start, then less: one fits once they weigh 3.
        /// assert_eq!(refused.headers()["retry-after"], "75");
        /// clock.advance(Duration::from_secs(75));
        /// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), 200);
        /// # }
        /// ```
        sliding_counter(SlidingCounterOptions);

        /// A sliding-window log: exact counts over a rolling window, one entry per admitted request
        /// (a limit of at most 16: the partition kind's ring).
        ///
        /// ```
        /// # use std::{convert::Infallible, sync::Arc, time::Duration};
        /// use http::{Request, Response};
        /// use tollgate::http::{Policy, RateLimiting};
        /// use tollgate::ManualClock;
        /// use tower::{service_fn, Layer, ServiceExt};
        ///
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() {
        /// use tollgate::SlidingLogOptions;
        /// let clock = Arc::new(ManualClock::new());
        /// let logins = Policy::sliding_log(SlidingLogOptions::per_minute(2)).unwrap();
        /// let limits = RateLimiting::builder().global(logins).clock(clock.clone()).build().unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// assert_eq!(app.clone().oneshot(Request::get("/login").body(()).unwrap()).await.unwrap().status(), 200);
        /// clock.advance(Duration::from_secs(20));
        /// assert_eq!(app.clone().oneshot(Request::get("/login").body(()).unwrap()).await.unwrap().status(), 200);
        /// let refused = app.clone().oneshot(Request::get("/login").body(()).unwrap()).await.unwrap();
        /// assert_eq!(refused.headers()["retry-after"], "40"); // the first leaves at 60 s
        /// assert!(Policy::sliding_log(SlidingLogOptions::per_minute(17)).is_err());
        /// # }
        /// ```
        sliding_log(SlidingLogOptions);

        /// GCRA (governor's algorithm): one permit back every `interval`, up to `burst` at once.
        /// Partitioned and not queued, it keeps 16 bytes a key (the compact keyed form).
        ///
        /// ```
        /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
        /// use http::{Request, Response, StatusCode};
        /// use tollgate::http::{KeyBy, Policy, RateLimiting};
        /// use tollgate::ManualClock;
        /// use tower::{service_fn, Layer, ServiceExt};
        ///
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() {
        /// // A request from `ip`, as a server started with
        /// // `into_make_service_with_connect_info::<SocketAddr>()` sees it.
        /// let from = |ip: &str| {
        ///     let mut req = Request::new(());
        ///     req.extensions_mut().insert(SocketAddr::new(ip.parse().unwrap(), 443));
        ///     req
        /// };
        /// use tollgate::GcraOptions;
        /// let clock = Arc::new(ManualClock::new());
        /// let per_ip = Policy::gcra(GcraOptions::per_second(2)).unwrap().partition_by(KeyBy::CLIENT_IP);
        /// let limits = RateLimiting::builder().global(per_ip).clock(clock.clone()).build().unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// for _ in 0..2 { assert_eq!(app.clone().oneshot(from("203.0.113.7")).await.unwrap().status(), 200); }
        /// let refused = app.clone().oneshot(from("203.0.113.7")).await.unwrap();
        /// assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        /// assert_eq!(refused.headers()["retry-after"], "1"); // 500 ms, rounded up
        /// assert_eq!(app.clone().oneshot(from("203.0.113.8")).await.unwrap().status(), 200); // another client
        /// clock.advance(Duration::from_millis(500));
        /// assert_eq!(app.clone().oneshot(from("203.0.113.7")).await.unwrap().status(), 200);
        /// # }
        /// ```
        gcra(GcraOptions);

        /// A leaky bucket as a meter: a level that drains `leak` units every `leak_interval`, under
        /// `capacity`. Partitioned and not queued, it keeps 16 bytes a key.
        ///
        /// ```
        /// # use std::{convert::Infallible, time::Duration};
        /// use http::{Request, Response};
        /// use tollgate::http::{Policy, RateLimiting};
        /// use tower::{service_fn, Layer, ServiceExt};
        ///
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() {
        /// use tollgate::LeakyBucketOptions;
        /// let meter = Policy::leaky_meter(LeakyBucketOptions::new(3, 1, Duration::from_secs(10))).unwrap();
        /// let limits = RateLimiting::builder().global(meter).build().unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// for _ in 0..3 { assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), 200); }
        /// let refused = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap();
        /// assert_eq!(refused.headers()["retry-after"], "10");
        /// # }
        /// ```
        leaky_meter(LeakyBucketOptions);

        /// A leaky bucket as a shaper: one request departs every `interval`; with
        /// [`queue`](Self::queue), the rest wait for their departure slot (the smoothing it is for),
        /// without it, they are refused until their slot.
        ///
        /// ```
        /// # use std::{convert::Infallible, time::Duration};
        /// use http::{Request, Response};
        /// use tollgate::http::{Policy, RateLimiting};
        /// use tower::{service_fn, Layer, ServiceExt};
        ///
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() {
        /// use tollgate::ShaperOptions;
        /// let paced = Policy::leaky_shaper(ShaperOptions::per_second(20)).unwrap().queue(Some(Duration::from_secs(1)));
        /// let limits = RateLimiting::builder().global(paced).build().unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), 200);
        /// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), 200); // waited 50 ms for its slot
        /// # }
        /// ```
        leaky_shaper(ShaperOptions);
    }

    /// Your own limiter (see [`PolicyLimiter`]); it does its own partitioning by the [`Key`]
    /// the policy's [`KeyBy`] extracts.
    ///
    /// ```
    /// # use std::{convert::Infallible, sync::Arc, time::Duration};
    /// use http::{Request, Response, StatusCode};
    /// use tollgate::http::{AcquireFuture, Decision, Denial, Grant, Key, Permit, Policy, PolicyLimiter, PolicyQuota, RateLimiting};
    /// use tollgate::Reason;
    /// use tower::{service_fn, Layer, ServiceExt};
    /// use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    /// use tollgate::Rejection;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
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
    /// let limits = RateLimiting::builder().global(Policy::custom(Arc::new(Budget(AtomicU64::new(1))))).build().unwrap();
    /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
    /// let app = limits.layer().layer(service_fn(hello));
    /// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), 200);
    /// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS); // budget spent
    /// # }
    /// ```
    pub fn custom(limiter: Arc<dyn PolicyLimiter>) -> Self {
        Self::from_source(Source::Custom(limiter))
    }

    /// An adaptive concurrency limit ([`AdaptiveLimiter`](crate::adaptive::AdaptiveLimiter),
    /// on the layer's clock): one limit for every request the policy covers, moved by its
    /// algorithm — or, [partitioned](Self::partition_by), one per key (an upstream, a tenant),
    /// each learning from its own requests (at most [`partitions`](Self::partitions)'
    /// capacity of them, idle ones evicted). Each admitted request holds its lease until its response body ends; its
    /// latency (from admission to the body's end) and outcome are sampled then: a 5xx, a 429
    /// from upstream or a failed inner service (a timeout layer's error) is a drop, another 4xx
    /// says nothing about capacity. A refusal is a 503 by default (the client did nothing
    /// wrong; [`rejection_status`](Self::rejection_status) changes it). Requests wait in the
    /// limiter's queue if its options have one.
    ///
    /// ```
    /// # use std::convert::Infallible;
    /// use http::{Request, Response, StatusCode};
    /// use tollgate::adaptive::AdaptiveOptions;
    /// use tollgate::http::{Policy, RateLimiting};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let limits = RateLimiting::builder()
    ///     .global(Policy::adaptive(AdaptiveOptions::new(1)).unwrap())
    ///     .build()
    ///     .unwrap();
    /// let slow = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("report")) };
    /// let app = limits.layer().layer(service_fn(slow));
    /// let streaming = app.clone().oneshot(Request::get("/report").body(()).unwrap()).await.unwrap();
    /// let refused = app.clone().oneshot(Request::get("/report").body(()).unwrap()).await.unwrap();
    /// assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE); // the limit of 1 is in use
    /// drop(streaming); // its body ended: released, its latency sampled
    /// # }
    /// ```
    pub fn adaptive(options: crate::adaptive::AdaptiveOptions) -> Result<Self, OptionsError> {
        options.validate()?;
        Ok(Self::from_source(Source::Adaptive(options))
            .rejection_status(http::StatusCode::SERVICE_UNAVAILABLE))
    }

    /// [`adaptive`](Self::adaptive) with a limiter of your own (another clock; or one you keep
    /// a handle to, to read its limit).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::adaptive::{AdaptiveLimiter, AdaptiveOptions};
    /// use tollgate::http::Policy;
    ///
    /// let limiter = Arc::new(AdaptiveLimiter::new(AdaptiveOptions::new(20)).unwrap());
    /// let policy = Policy::adaptive_limiter(limiter.clone());
    /// # let _ = policy;
    /// assert_eq!(limiter.limit(), 20);
    /// ```
    pub fn adaptive_limiter<C: Clock + Send + Sync + 'static>(
        limiter: Arc<crate::adaptive::AdaptiveLimiter<C>>,
    ) -> Self {
        let queued = limiter.options().queue_limit > 0;
        let policy = adaptive::AdaptivePolicy { limiter, queued };
        Self::from_source(Source::Custom(Arc::new(policy)))
            .rejection_status(http::StatusCode::SERVICE_UNAVAILABLE)
    }

    /// Partition requests by `key` (default [`KeyBy::Global`]: one limiter).
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, time::Duration};
    /// use http::{Request, Response, StatusCode};
    /// use tollgate::http::{KeyBy, Policy, RateLimiting, GLOBAL};
    /// use tollgate::FixedWindowOptions;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // A request from `ip`, as a server started with
    /// // `into_make_service_with_connect_info::<SocketAddr>()` sees it.
    /// let from = |ip: &str| {
    ///     let mut req = Request::new(());
    ///     req.extensions_mut().insert(SocketAddr::new(ip.parse().unwrap(), 443));
    ///     req
    /// };
    /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let limits = RateLimiting::builder().global(two_a_minute().partition_by(KeyBy::CLIENT_IP)).build().unwrap();
    /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
    /// let app = limits.layer().layer(service_fn(hello));
    /// for _ in 0..2 { let _ = app.clone().oneshot(from("192.0.2.1")).await.unwrap(); }
    /// assert_eq!(app.clone().oneshot(from("192.0.2.1")).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
    /// assert_eq!(app.clone().oneshot(from("192.0.2.2")).await.unwrap().status(), 200); // its own partition
    /// assert_eq!(limits.partitions(GLOBAL), Some(2));
    /// # }
    /// ```
    pub fn partition_by(self, key: KeyBy) -> Self {
        Self { key, ..self }
    }

    /// What a request without a key gets (default [`MissingKey::Auto`]).
    ///
    /// ```
    /// # use std::{convert::Infallible, time::Duration};
    /// use http::{Request, Response};
    /// use tollgate::http::{KeyBy, MissingKey, Policy, RateLimiting};
    /// use tollgate::FixedWindowOptions;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let hello = service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let per_key = two_a_minute().partition_by(KeyBy::header("x-api-key".parse().unwrap()));
    /// let limits = RateLimiting::builder().global(per_key.when_missing_key(MissingKey::Allow)).build().unwrap();
    /// let app = limits.layer().layer(hello);
    /// for _ in 0..5 { // anonymous requests are not limited here (another layer may)
    ///     assert_eq!(app.clone().oneshot(Request::new(())).await.unwrap().status(), 200);
    /// }
    /// # }
    /// ```
    pub fn when_missing_key(self, missing: MissingKey) -> Self {
        Self { missing, ..self }
    }

    /// The bounds of the per-key store (default [`PartitionConfig::default`]: 100,000 keys,
    /// idle keys evicted after 10 s, a full store evicts its longest idle key).
    ///
    /// Memory: a token bucket, fixed window, GCRA, leaky meter or sliding counter that does
    /// not queue keeps its keys in a [`KeyedLimiter`] — about 21 bytes per key of capacity,
    /// allocated when the layer is built (2.1 MB at the default capacity). Any other
    /// partitioned policy (queued, sliding window or log, shaper, concurrency) keeps a full
    /// limiter per key, of the policy's own type, in a [`Partitioned`](crate::Partitioned) map:
    /// about 290 bytes per stored key for a queued token bucket, fixed window or GCRA, about
    /// 590 for the sliding window or log (their rings), measured (`tests/http.rs`, `memory_*`:
    /// 200,000 new /64s filling the default table of 100,000 grew the resident set by 27.6 MiB
    /// for a queued token bucket or GCRA).
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, time::Duration};
    /// use http::{Request, Response, StatusCode};
    /// use tollgate::http::{KeyBy, Policy, RateLimiting, GLOBAL};
    /// use tollgate::FixedWindowOptions;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // A request from `ip`, as a server started with
    /// // `into_make_service_with_connect_info::<SocketAddr>()` sees it.
    /// let from = |ip: &str| {
    ///     let mut req = Request::new(());
    ///     req.extensions_mut().insert(SocketAddr::new(ip.parse().unwrap(), 443));
    ///     req
    /// };
    /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// use tollgate::{PartitionConfig, WhenFull};
    /// let bounded = two_a_minute()
    ///     .partition_by(KeyBy::CLIENT_IP)
    ///     .partitions(PartitionConfig::new(1).with_when_full(WhenFull::Reject));
    /// let limits = RateLimiting::builder().global(bounded).build().unwrap();
    /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
    /// let app = limits.layer().layer(service_fn(hello));
    /// assert_eq!(app.clone().oneshot(from("192.0.2.1")).await.unwrap().status(), 200);
    /// assert_eq!(app.clone().oneshot(from("192.0.2.2")).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS); // full
    /// assert_eq!(limits.partitions(GLOBAL), Some(1));
    /// # }
    /// ```
    pub fn partitions(self, partitions: PartitionConfig) -> Self {
        Self { partitions, ..self }
    }

    /// Requests wait in the limiter's queue (its options' `queue_limit`, in permits) instead of
    /// being rejected at once, for at most `max_delay` if given. A client that disconnects
    /// leaves the queue at once.
    ///
    /// A rate policy (token bucket, fixed or sliding window) knows when a queued request would
    /// be served — its limiter's RetryAfter counts the requests queued ahead — so a request
    /// that would be served only after `max_delay` is refused at once, with that
    /// `Retry-After`, rather than held for the whole delay. A request that waits and still
    /// reaches the deadline gets one more try then; refused, it is
    /// [`Reason::TimedOut`], with the limiter's `Retry-After` if it has one (a rate limiter
    /// does; a concurrency limiter cannot know when a permit comes back, and a custom
    /// [`PolicyLimiter`] gives one if its [`try_acquire`](PolicyLimiter::try_acquire) denies
    /// with one). A request pushed out of a built-in limiter's queue by a newer one
    /// (`QueueOrder::NewestFirst`, [`Reason::Evicted`]) gets the limiter's `Retry-After` the
    /// same way.
    ///
    /// ```
    /// # use std::{convert::Infallible, time::Duration};
    /// use http::{Request, Response, StatusCode};
    /// use tollgate::http::{Policy, RateLimiting};
    /// use tollgate::{ConcurrencyOptions, TokenBucketOptions};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use tollgate::QueueOrder;
    /// let opts = ConcurrencyOptions::new(1).with_queue(1, QueueOrder::OldestFirst);
    /// let queued = Policy::concurrency(opts).unwrap().queue(Some(Duration::from_millis(10)));
    /// let limits = RateLimiting::builder().global(queued).build().unwrap();
    /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
    /// let app = limits.layer().layer(service_fn(hello));
    /// let first = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap(); // holds the permit while its body lives
    /// // The second waits in the queue, then gives up after 10 ms: 429.
    /// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
    /// drop(first);
    /// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), 200);
    ///
    /// // One token every 3 s: a queued request would wait 3 s, past its 300 ms.
    /// let slow = TokenBucketOptions::new(1, 1, Duration::from_secs(3)).with_queue(1, QueueOrder::OldestFirst);
    /// let queued = Policy::token_bucket(slow).unwrap().queue(Some(Duration::from_millis(300)));
    /// let limits = RateLimiting::builder().global(queued).build().unwrap();
    /// let app = limits.layer().layer(service_fn(hello));
    /// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), 200);
    /// let refused = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap(); // at once, not after 300 ms
    /// assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    /// assert_eq!(refused.headers()["retry-after"], "3");
    /// # }
    /// ```
    pub fn queue(self, max_delay: Option<Duration>) -> Self {
        Self {
            queue: Some(max_delay),
            ..self
        }
    }

    /// The status of a rejection (default 429 Too Many Requests).
    ///
    /// ```
    /// # use std::{convert::Infallible, time::Duration};
    /// use http::{Request, Response, StatusCode};
    /// use tollgate::http::{Policy, RateLimiting};
    /// use tollgate::FixedWindowOptions;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let limits = RateLimiting::builder()
    ///     .global(two_a_minute().rejection_status(StatusCode::SERVICE_UNAVAILABLE))
    ///     .build()
    ///     .unwrap();
    /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
    /// let app = limits.layer().layer(service_fn(hello));
    /// for _ in 0..2 { let _ = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap(); }
    /// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
    /// # }
    /// ```
    pub fn rejection_status(self, status: http::StatusCode) -> Self {
        Self { status, ..self }
    }

    /// The status of a rejection for the server's capacity rather than the client's rate (e.g.
    /// 503 Service Unavailable): the limiter is closed ([`Reason::Closed`]), its queue is full
    /// ([`Reason::QueueFull`]), a queued request was pushed out by a newer one
    /// ([`Reason::Evicted`], `QueueOrder::NewestFirst`), or the partition table is full and
    /// the request's key is new ([`Reason::PartitionsFull`]). Default: the rejection status.
    ///
    /// ```
    /// # use std::convert::Infallible;
    /// use http::{Request, Response, StatusCode};
    /// use tollgate::http::{Policy, RateLimiting};
    /// use tollgate::ConcurrencyOptions;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use tollgate::QueueOrder;
    /// let opts = ConcurrencyOptions::new(1).with_queue(0, QueueOrder::OldestFirst);
    /// let pool = Policy::concurrency(opts).unwrap().queue(None).unavailable_status(StatusCode::SERVICE_UNAVAILABLE);
    /// let limits = RateLimiting::builder().global(pool).build().unwrap();
    /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
    /// let app = limits.layer().layer(service_fn(hello));
    /// let _busy = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap();
    /// // No room in the queue: the server is busy, not the client too fast.
    /// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), StatusCode::SERVICE_UNAVAILABLE);
    /// # }
    /// ```
    pub fn unavailable_status(self, status: http::StatusCode) -> Self {
        Self {
            unavailable_status: Some(status),
            ..self
        }
    }

    /// Client side: when the upstream answers 429 with a `Retry-After` (delay seconds), reject
    /// this request's partition locally until then.
    ///
    /// ```
    /// # use std::{convert::Infallible, sync::Arc, time::Duration};
    /// use http::{Request, Response};
    /// use tollgate::http::{Policy, RateLimiting};
    /// use tollgate::{FixedWindowOptions, ManualClock};
    ///
    /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// use tower::{Layer, ServiceExt};
    /// let clock = Arc::new(ManualClock::new());
    /// let limits = RateLimiting::builder().global(two_a_minute().pause_on_upstream_429()).clock(clock.clone()).build().unwrap();
    /// let upstream = tower::service_fn(|_: Request<()>| async {
    ///     Ok::<_, Infallible>(Response::builder().status(429).header("retry-after", "5").body("").unwrap())
    /// });
    /// let client = limits.layer().layer(upstream);
    /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let _ = rt.block_on(client.clone().oneshot(Request::get("/").body(()).unwrap())); // the upstream says: 5 s
    /// let local = rt.block_on(client.clone().oneshot(Request::get("/").body(()).unwrap())).unwrap(); // not sent
    /// assert_eq!(local.headers()["retry-after"], "5");
    /// ```
    pub fn pause_on_upstream_429(self) -> Self {
        Self {
            pause_on_429: true,
            ..self
        }
    }

    /// Shadow mode (a dry run, how a new limit is rolled out): the policy decides, counts and
    /// reports as it would — its limiter is charged, the quota headers say what it decided,
    /// the [`on_rejected`](crate::http::RateLimitingBuilder::on_rejected) hook sees each
    /// refusal (with [`Rejected::shadow`](crate::http::Rejected::shadow) set; the response it
    /// builds is dropped), the metrics count it as `shadow_rejected` — and refuses nothing: a
    /// request it would refuse goes on to the next policy and the inner service, with no
    /// `Retry-After`. [`RateLimiting::shadow_rejections`](crate::http::RateLimiting::shadow_rejections)
    /// says how many it would have refused.
    ///
    /// A request it would refuse takes nothing from it (a concurrency policy holds no permit
    /// for it, so none can leak); one it admits holds its permit until the response body ends,
    /// as usual. A shadow policy that [queues](Self::queue) still has requests wait (the wait
    /// is its decision); a wait that ends in a refusal is let through the same way. For the
    /// whole layer at once, see
    /// [`RateLimitingBuilder::shadow`](crate::http::RateLimitingBuilder::shadow).
    ///
    /// ```
    /// # use std::{convert::Infallible, time::Duration};
    /// use http::{Request, Response};
    /// use tollgate::http::{Policy, RateLimiting};
    /// use tollgate::FixedWindowOptions;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let trial = Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap().shadow();
    /// let limits = RateLimiting::builder().policy("search", trial).rate_limit_headers(true).build().unwrap();
    /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
    /// let app = limits.policy_layer("search").unwrap().layer(service_fn(hello));
    /// for _ in 0..5 {
    ///     let resp = app.clone().oneshot(Request::get("/search").body(()).unwrap()).await.unwrap();
    ///     assert_eq!(resp.status(), 200); // never refused
    /// }
    /// // The last response still says what the policy decided: nothing left.
    /// let resp = app.clone().oneshot(Request::get("/search").body(()).unwrap()).await.unwrap();
    /// assert_eq!(resp.headers()["ratelimit"], r#""search";r=0;t=60"#);
    /// assert_eq!(limits.shadow_rejections("search"), Some(4)); // would have refused 4 of 6
    /// # }
    /// ```
    pub fn shadow(self) -> Self {
        Self {
            shadow: true,
            ..self
        }
    }

    /// Charges each request `f(request)` permits instead of one: a weight computed from the
    /// request (a header, the route, the body's declared length). A cost of 0 passes without
    /// a charge; a cost the limit can never give is refused as usual (with no RetryAfter). A
    /// [`Settle`] rule ([`settle_by`](Self::settle_by)) corrects the charge from the response.
    ///
    /// Works on every rate algorithm, global or per key, and on concurrency (the request
    /// holds `f(request)` permits until its response body ends). A built-in policy only: on
    /// [`custom`](Self::custom) or [`adaptive`](Self::adaptive) policies, or with
    /// [`queue`](Self::queue), [`build`](crate::http::RateLimitingBuilder::build) answers
    /// [`BuildError::Charging`](crate::http::BuildError::Charging).
    ///
    /// ```
    /// # use std::{convert::Infallible, sync::Arc, time::Duration};
    /// use http::{Request, Response, StatusCode};
    /// use tollgate::http::{Policy, RateLimiting};
    /// use tollgate::{ManualClock, TokenBucketOptions};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // 100 units a minute; a request costs its `x-units` header (1 without one).
    /// let units = |req: &tollgate::http::RequestView<'_>| {
    ///     req.headers.get("x-units").and_then(|v| v.to_str().ok()?.parse().ok()).unwrap_or(1)
    /// };
    /// let policy = Policy::token_bucket(TokenBucketOptions::new(100, 100, Duration::from_secs(60))).unwrap().cost(units);
    /// let limits = RateLimiting::builder().global(policy).clock(ManualClock::new()).build().unwrap();
    /// let app = limits.layer().layer(service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("ok")) }));
    /// let req = |n: &str| Request::get("/").header("x-units", n).body(()).unwrap();
    /// assert_eq!(app.clone().oneshot(req("70")).await.unwrap().status(), 200);
    /// assert_eq!(app.clone().oneshot(req("40")).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
    /// assert_eq!(app.clone().oneshot(req("30")).await.unwrap().status(), 200); // exactly the rest
    /// assert_eq!(app.clone().oneshot(req("0")).await.unwrap().status(), 200); // free
    /// # }
    /// ```
    pub fn cost(self, f: impl Fn(&RequestView<'_>) -> u32 + Send + Sync + 'static) -> Self {
        let mut p = self;
        p.charging.cost = Some(Arc::new(f));
        p
    }

    /// Settles each request's charge from its response (see [`Settle`]): down, and the
    /// difference is given back at once (for every rate algorithm, as if never taken, while
    /// the window that counted it still counts); or up, taking the extra into debt — a
    /// client's next requests wait for it to be paid off. Past the limiter's debt bound
    /// (one limit by default) the settle is refused and the request keeps what it was
    /// charged: nothing panics, nothing leaks, and
    /// [`RateLimiting::unsettled`](crate::http::RateLimiting::unsettled) counts it (with
    /// `tracing`, a warning).
    ///
    /// A head settle ([`Settle::header`], [`Settle::response`]) is applied before the quota
    /// headers are written: they report the quota after it. A body settle
    /// ([`Settle::body_len`]) is applied when the body ends: the headers report the
    /// estimate. A request whose response never comes (the inner service failed) keeps its
    /// estimate. Not on concurrency policies.
    ///
    /// ```
    /// # use std::{convert::Infallible, sync::Arc, time::Duration};
    /// use http::{Request, Response};
    /// use tollgate::http::{Policy, RateLimiting, Settle};
    /// use tollgate::{ManualClock, TokenBucketOptions};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // 1,000 tokens a minute: each call is charged 100 up front, then what it used.
    /// let tokens = Policy::token_bucket(TokenBucketOptions::new(1_000, 1_000, Duration::from_secs(60))).unwrap()
    ///     .cost(|_| 100)
    ///     .settle_by(Settle::header("x-tokens-used"));
    /// let limits = RateLimiting::builder().global(tokens).clock(ManualClock::new()).rate_limit_headers(true).build().unwrap();
    /// let model = service_fn(|_: Request<()>| async {
    ///     Ok::<_, Infallible>(Response::builder().header("x-tokens-used", "30").body("...").unwrap())
    /// });
    /// let resp = limits.layer().layer(model).oneshot(Request::new(())).await.unwrap();
    /// assert_eq!(resp.headers()["ratelimit"], r#""global";r=970;t=60"#); // 100 charged, 70 back
    /// # }
    /// ```
    pub fn settle_by(self, settle: Settle) -> Self {
        let mut p = self;
        p.charging.settle = Some(settle.0);
        p
    }

    /// Bounds the debt a settle ([`settle_by`](Self::settle_by), or
    /// [`Permit::settle`](crate::http::Permit::settle) on this policy's permit) may leave
    /// the policy's limiter (each key's, for a partitioned policy) owing, in permits: a
    /// response that would take it deeper keeps its estimate instead, counted by
    /// [`RateLimiting::unsettled`](crate::http::RateLimiting::unsettled) (see
    /// [`Lease::settle_within`](crate::Lease::settle_within)). Without it, the limiter's own
    /// bound: one limit (one burst for GCRA and the leaky meter). 0 allows no debt at all: a
    /// settle up takes only what is there.
    ///
    /// ```
    /// # use std::{convert::Infallible, time::Duration};
    /// use http::{Request, Response};
    /// use tollgate::http::{Policy, RateLimiting, Settle};
    /// use tollgate::{ManualClock, TokenBucketOptions};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // 1,000 tokens a minute, charged 500 up front; a call may owe at most 100.
    /// let tokens = Policy::token_bucket(TokenBucketOptions::new(1_000, 1_000, Duration::from_secs(60))).unwrap()
    ///     .cost(|_| 500)
    ///     .settle_by(Settle::header("x-tokens-used"))
    ///     .max_debt(100);
    /// let limits = RateLimiting::builder().global(tokens).clock(ManualClock::new()).build().unwrap();
    /// let model = service_fn(|_: Request<()>| async {
    ///     Ok::<_, Infallible>(Response::builder().header("x-tokens-used", "1200").body("...").unwrap())
    /// });
    /// limits.layer().layer(model).oneshot(Request::new(())).await.unwrap();
    /// // 1,200 would owe 200: refused, the charge of 500 stays.
    /// assert_eq!(limits.unsettled("global"), Some(1));
    /// # }
    /// ```
    pub fn max_debt(self, permits: u32) -> Self {
        let mut p = self;
        p.charging.max_debt = Some(permits);
        p
    }

    /// Charges only the requests whose response matches `charged` (the fail2ban pattern:
    /// failed logins count, successful ones do not). Before the handler runs, the request is
    /// charged its cost (1 unless [`cost`](Self::cost) says otherwise): a client without
    /// that much budget left is refused before its handler runs. When the response head
    /// comes, a response `charged` rejects is refunded in full, exactly, on every rate
    /// algorithm; a matching one keeps the charge (settled by [`settle_by`](Self::settle_by),
    /// if set). The quota headers report the quota after the refund. A request in flight
    /// holds its charge until its response: concurrent attempts count against the budget
    /// while they run. A request whose response never comes (the inner service failed)
    /// stays charged. Not on concurrency policies (outcome says nothing about concurrency):
    /// [`BuildError::Charging`](crate::http::BuildError::Charging).
    ///
    /// ```
    /// # use std::{convert::Infallible, sync::Arc, time::Duration};
    /// use http::{Request, Response, StatusCode};
    /// use tollgate::http::{Policy, RateLimiting};
    /// use tollgate::{FixedWindowOptions, ManualClock};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // Three failed logins per 15 minutes.
    /// let failures = Policy::fixed_window(FixedWindowOptions::new(3, Duration::from_secs(900))).unwrap()
    ///     .charge_when(|r| r.status == 401 || r.status == 403);
    /// let limits = RateLimiting::builder().global(failures).clock(ManualClock::new()).build().unwrap();
    /// let login = service_fn(|req: Request<()>| async move {
    ///     let ok = req.headers().get("password").is_some_and(|p| p == "right");
    ///     Ok::<_, Infallible>(Response::builder().status(if ok { 200 } else { 401 }).body("").unwrap())
    /// });
    /// let app = limits.layer().layer(login);
    /// let try_login = |pw: &str| Request::post("/login").header("password", pw).body(()).unwrap();
    /// for _ in 0..5 { assert_eq!(app.clone().oneshot(try_login("right")).await.unwrap().status(), 200); } // not counted
    /// for _ in 0..3 { assert_eq!(app.clone().oneshot(try_login("wrong")).await.unwrap().status(), 401); }
    /// assert_eq!(app.clone().oneshot(try_login("right")).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
    /// # }
    /// ```
    pub fn charge_when(
        self,
        charged: impl Fn(&http::response::Parts) -> bool + Send + Sync + 'static,
    ) -> Self {
        let mut p = self;
        p.charging.when = Some(Arc::new(charged));
        p
    }

    /// Why this policy cannot charge by cost or outcome, if it has asked to.
    pub(crate) fn charging_unsupported(&self) -> Option<&'static str> {
        let c = &self.charging;
        if !c.charges() {
            // Only a charged permit settles through the policy's rules.
            return c
                .max_debt
                .map(|_| "max_debt bounds a settle: it needs cost, settle_by or charge_when");
        }
        match &self.source {
            Source::Custom(_) | Source::Adaptive(_) => {
                Some("cost and outcome need a built-in rate or concurrency policy")
            }
            Source::Builtin(_) if self.queue.is_some() => {
                Some("cost and outcome policies do not queue")
            }
            Source::Builtin(pk) if matches!(pk.kind(), Kind::Concurrency(_)) && c.settles() => {
                Some("a concurrency policy has no outcome or settle to charge by")
            }
            Source::Builtin(_) => None,
        }
    }

    pub(crate) fn status_for(&self, reason: Reason) -> http::StatusCode {
        if reason == NO_PEER_ADDRESS {
            // The server's misconfiguration, not the client's rate (`MissingKey::Auto`).
            return http::StatusCode::INTERNAL_SERVER_ERROR;
        }
        match (reason, self.unavailable_status) {
            (
                Reason::Closed | Reason::QueueFull | Reason::Evicted | Reason::PartitionsFull,
                Some(s),
            ) => s,
            _ => self.status,
        }
    }

    /// Whether the policy's limiter is a built-in one, which bounds its own queueing delay
    /// (and answers a timed-out wait with its RetryAfter).
    pub(crate) fn bounds_its_delay(&self) -> bool {
        matches!(self.source, Source::Builtin(..))
    }

    /// Makes the policy's limiter on `clock` (`std_clock`: the default, a `StdClock`), and the
    /// direct handle to it when it is a built-in rate limiter that never queues (the layer's
    /// fast path).
    pub(crate) fn build(
        &self,
        clock: &SharedClock,
        std_clock: bool,
    ) -> Result<Built, OptionsError> {
        let pk = match &self.source {
            Source::Custom(l) => return Ok((l.clone(), None, None)),
            Source::Adaptive(options) => {
                return Ok((
                    self.adaptive_limiter_on(*options, clock, std_clock),
                    None,
                    None,
                ))
            }
            Source::Builtin(pk) => *pk,
        };
        let built = self.build_builtin(pk, clock, std_clock)?;
        if !self.charging.charges() {
            return Ok(built);
        }
        // Charged by cost or outcome: no fast path (it charges one permit, settles nothing).
        let (limiter, _, charge) = built;
        Ok((limiter, None, charge))
    }

    /// The adaptive policy's limiter on the layer's clock: one for every request, or one per
    /// key when partitioned.
    fn adaptive_limiter_on(
        &self,
        options: crate::adaptive::AdaptiveOptions,
        clock: &SharedClock,
        std_clock: bool,
    ) -> Arc<dyn PolicyLimiter> {
        let queued = options.queue_limit > 0;
        if !matches!(self.key, KeyBy::Global) {
            let queue = self
                .queue
                .map(|max_delay| Queue { max_delay })
                .or(queued.then_some(Queue { max_delay: None }));
            return builtin::Many::adaptive(options, self.partitions, clock.clone(), queue);
        }
        // Valid: `Policy::adaptive` checked the options.
        const VALID: &str = "options checked";
        if std_clock {
            let limiter = crate::adaptive::AdaptiveLimiter::with_clock(options, crate::StdClock);
            Arc::new(adaptive::AdaptivePolicy {
                limiter: Arc::new(limiter.expect(VALID)),
                queued,
            })
        } else {
            let limiter = crate::adaptive::AdaptiveLimiter::with_clock(options, clock.clone());
            Arc::new(adaptive::AdaptivePolicy {
                limiter: Arc::new(limiter.expect(VALID)),
                queued,
            })
        }
    }

    fn build_builtin(
        &self,
        pk: PartitionKind,
        clock: &SharedClock,
        std_clock: bool,
    ) -> Result<Built, OptionsError> {
        let kind = pk.kind();
        let describe = describe(kind);
        let queue = self.queue.map(|max_delay| Queue { max_delay });
        if matches!(self.key, KeyBy::Global) {
            // A rate limiter's lease holds nothing: the fast path may drop it at once.
            let fast = queue.is_none() && !matches!(kind, Kind::Concurrency(_));
            if std_clock {
                let limiter = Arc::new(pk.limiter(crate::StdClock));
                let rate = fast.then(|| Rate::SingleStd(limiter.clone()));
                let single = Arc::new(Single::new(limiter, describe, queue));
                return Ok((single.clone(), rate, Some(single)));
            }
            let limiter = Arc::new(pk.limiter(clock.clone()));
            let rate = fast.then(|| Rate::Single(limiter.clone()));
            let single = Arc::new(Single::new(limiter, describe, queue));
            return Ok((single.clone(), rate, Some(single)));
        }
        if queue.is_none() {
            // On the default clock, the keyed limiter reads `StdClock` itself: no `dyn Clock`
            // call, and the read inlined into the decision (the same epoch as the shared
            // `Arc<StdClock>`: `StdClock` has one per process).
            if std_clock {
                if let Some(k) = Keyed::new(kind, self.partitions, crate::StdClock, describe)? {
                    let k = Arc::new(k);
                    return Ok((k.clone(), Some(Rate::KeyedStd(k.clone())), Some(k)));
                }
            } else if let Some(k) = Keyed::new(kind, self.partitions, clock.clone(), describe)? {
                let k = Arc::new(k);
                return Ok((k.clone(), Some(Rate::Keyed(k.clone())), Some(k)));
            }
        }
        let many = builtin::ManyOf {
            partitions: self.partitions,
            clock: clock.clone(),
            describe,
            queue,
        };
        let (limiter, charge) = pk.visit(many);
        Ok((limiter, None, Some(charge)))
    }
}

/// A built policy: its limiter, the direct handle of the fast path, the charging handle of
/// a built-in one.
pub(crate) type Built = (
    Arc<dyn PolicyLimiter>,
    Option<Rate>,
    Option<Arc<dyn Charge>>,
);

impl core::fmt::Debug for Policy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Policy")
            .field("key", &self.key)
            .field("missing", &self.missing)
            .field("queue", &self.queue)
            .field("status", &self.status)
            .field("shadow", &self.shadow)
            .finish_non_exhaustive()
    }
}

fn describe(kind: Kind) -> PolicyQuota {
    // A rate's quota, and the time to come back to the full quota from empty.
    let rate = |quota: u32, window: Duration| PolicyQuota {
        quota: u64::from(quota),
        window: Some(window),
        concurrent: false,
    };
    match kind {
        Kind::NoLimit => PolicyQuota {
            quota: u64::MAX,
            window: None,
            concurrent: false,
        },
        Kind::Concurrency(o) => PolicyQuota {
            quota: u64::from(o.permit_limit),
            window: None,
            concurrent: true,
        },
        // The time to refill an empty bucket.
        Kind::TokenBucket(o) => rate(
            o.token_limit,
            o.replenishment_period
                .saturating_mul(o.token_limit.div_ceil(o.tokens_per_period.max(1))),
        ),
        Kind::FixedWindow(o) => rate(o.permit_limit, o.window),
        Kind::SlidingWindow(o) => rate(o.permit_limit, o.window),
        // `burst` intervals.
        Kind::Gcra(o) => rate(o.burst, o.interval.saturating_mul(o.burst)),
        Kind::LeakyMeter(o) => rate(
            o.capacity,
            o.leak_interval
                .saturating_mul(o.capacity.div_ceil(o.leak.max(1))),
        ),
        Kind::LeakyShaper(o) => rate(o.max_permits, o.interval.saturating_mul(o.max_permits)),
        Kind::SlidingCounter(o) => rate(o.permit_limit, o.window),
        Kind::SlidingLog(o) => rate(o.permit_limit, o.window),
    }
}
