use core::fmt;
use std::sync::Arc;

use bytes::Bytes;
use http::header::HeaderValue;
use tower_layer::Layer;

use super::builder::Compiled;
use super::endpoint::{Mode, Selector};
use super::reject::RejectHook;
use super::service::RateLimit;
use super::{BuildError, ClientIp, PolicyQuota, RateLimitingBuilder, SharedClock};

/// The rate-limiting state and configuration: every policy's limiter, in one `Arc`, shared by
/// every layer and service made from it. Cheap to clone.
///
/// ```
/// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
/// # use http::{Request, Response, StatusCode};
/// # use tollgate::http::*;
/// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
/// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
/// #     use tower::{Layer, ServiceExt};
/// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
/// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
/// # }
/// # fn from(ip: &str) -> Request<()> {
/// #     let mut req = Request::new(());
/// #     req.extensions_mut().insert(SocketAddr::new(ip.parse().unwrap(), 443));
/// #     req
/// # }
/// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
/// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// let limits = RateLimiting::builder().global(two_a_minute()).build().unwrap();
/// // Layers made from clones share one state: two servers, one limit.
/// let (a, b) = (limits.layer(), limits.clone().layer());
/// assert_eq!(call(&a, path("/")).status(), 200);
/// assert_eq!(call(&b, path("/")).status(), 200);
/// assert_eq!(call(&a, path("/")).status(), StatusCode::TOO_MANY_REQUESTS);
/// ```
#[derive(Clone)]
pub struct RateLimiting {
    pub(super) shared: Arc<Shared>,
}

impl fmt::Debug for RateLimiting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimiting")
            .field(
                "policies",
                &self
                    .shared
                    .policies
                    .iter()
                    .map(|p| &*p.name)
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

pub(super) struct Shared {
    pub(super) policies: Vec<Compiled>,
    pub(super) global: Option<usize>,
    pub(super) selector: Option<Arc<Selector>>,
    pub(super) client_ip: ClientIp,
    pub(super) on_rejected: Option<Arc<RejectHook>>,
    pub(super) ietf: bool,
    pub(super) legacy: bool,
    pub(super) clock: SharedClock,
    pub(super) retry_after: Vec<HeaderValue>,
    pub(super) body: Bytes,
}

impl RateLimiting {
    /// Starts a configuration with no policy, headers off, 429 rejections.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
    /// #     use tower::{Layer, ServiceExt};
    /// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
    /// # }
    /// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
    /// let limits = RateLimiting::builder().build().unwrap();
    /// let resp = call(&limits.layer(), path("/")); // no policy: everything passes
    /// assert_eq!(resp.status(), 200);
    /// assert!(resp.headers().get("ratelimit").is_none());
    /// ```
    pub fn builder() -> RateLimitingBuilder {
        RateLimitingBuilder {
            global: None,
            policies: Vec::new(),
            selector: None,
            client_ip: ClientIp::peer(),
            on_rejected: None,
            ietf: false,
            legacy: false,
            clock: None,
            body: Bytes::new(),
        }
    }

    /// The layer for a whole router or server: the global policy, then the endpoint policy the
    /// selector picks.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
    /// #     use tower::{Layer, ServiceExt};
    /// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
    /// # }
    /// # fn from(ip: &str) -> Request<()> {
    /// #     let mut req = Request::new(());
    /// #     req.extensions_mut().insert(SocketAddr::new(ip.parse().unwrap(), 443));
    /// #     req
    /// # }
    /// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let limits = RateLimiting::builder().global(two_a_minute().partition_by(KeyBy::CLIENT_IP)).build().unwrap();
    /// let layer = limits.layer(); // e.g. `Router::new()…​.layer(limits.layer())`
    /// for _ in 0..2 { let _ = call(&layer, from("192.0.2.1")); }
    /// assert_eq!(call(&layer, from("192.0.2.1")).status(), StatusCode::TOO_MANY_REQUESTS);
    /// ```
    pub fn layer(&self) -> RateLimitLayer {
        RateLimitLayer {
            shared: self.shared.clone(),
            mode: Mode::Router,
        }
    }

    /// A layer applying the named policy only (ASP.NET's `RequireRateLimiting(name)`), for one
    /// route: `get(handler).layer(limits.policy_layer("login")?)`.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
    /// #     use tower::{Layer, ServiceExt};
    /// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
    /// # }
    /// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
    /// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let limits = RateLimiting::builder().policy("login", two_a_minute()).build().unwrap();
    /// let login = limits.policy_layer("login").unwrap();
    /// for _ in 0..2 { let _ = call(&login, path("/login")); }
    /// assert_eq!(call(&login, path("/login")).status(), StatusCode::TOO_MANY_REQUESTS);
    /// assert_eq!(limits.policy_layer("logout").unwrap_err(), BuildError::UnknownPolicy("logout".into()));
    /// ```
    pub fn policy_layer(&self, name: &str) -> Result<RateLimitLayer, BuildError> {
        let i = self
            .shared
            .index(name)
            .ok_or_else(|| BuildError::UnknownPolicy(name.to_string()))?;
        Ok(RateLimitLayer {
            shared: self.shared.clone(),
            mode: Mode::Policy(i),
        })
    }

    /// How many partitions the named policy stores now (`None` for an unknown name or an
    /// unpartitioned policy): bounded by its [`PartitionConfig`](crate::PartitionConfig).
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
    /// #     use tower::{Layer, ServiceExt};
    /// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
    /// # }
    /// # fn from(ip: &str) -> Request<()> {
    /// #     let mut req = Request::new(());
    /// #     req.extensions_mut().insert(SocketAddr::new(ip.parse().unwrap(), 443));
    /// #     req
    /// # }
    /// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let limits = RateLimiting::builder()
    ///     .policy("per-ip", two_a_minute().partition_by(KeyBy::CLIENT_IP))
    ///     .policy("shared", two_a_minute())
    ///     .build()
    ///     .unwrap();
    /// let per_ip = limits.policy_layer("per-ip").unwrap();
    /// for ip in ["192.0.2.1", "192.0.2.2", "192.0.2.1"] { let _ = call(&per_ip, from(ip)); }
    /// assert_eq!(limits.partitions("per-ip"), Some(2));
    /// assert_eq!(limits.partitions("shared"), None);
    /// ```
    pub fn partitions(&self, name: &str) -> Option<usize> {
        self.shared
            .index(name)
            .and_then(|i| self.shared.policies[i].limiter.partitions())
    }

    /// What `RateLimit-Policy` says of the named policy (`None` for an unknown name).
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let limits = RateLimiting::builder().policy("login", two_a_minute()).build().unwrap();
    /// let q = limits.describe("login").unwrap();
    /// assert_eq!((q.quota, q.window, q.concurrent), (2, Some(Duration::from_secs(60)), false));
    /// assert_eq!(limits.describe("nope"), None);
    /// ```
    pub fn describe(&self, name: &str) -> Option<PolicyQuota> {
        self.shared
            .index(name)
            .map(|i| self.shared.policies[i].describe)
    }
}

impl Shared {
    /// The one rate policy every request of `mode` goes through, if it has a direct handle
    /// and nothing to report or pause on: no selector can route a request elsewhere.
    pub(super) fn fast(&self, mode: Mode) -> Option<usize> {
        let i = match mode {
            Mode::Policy(i) => i,
            Mode::Router if self.selector.is_none() => self.global?,
            Mode::Router => return None,
        };
        let p = &self.policies[i];
        (p.rate.is_some() && !self.want_quota() && !p.policy.pause_on_429).then_some(i)
    }

    pub(super) fn want_quota(&self) -> bool {
        self.ietf || self.legacy
    }
}

/// The [`Layer`] of a [`RateLimiting`]: [`RateLimiting::layer`] or
/// [`RateLimiting::policy_layer`].
///
/// ```
/// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
/// # use http::{Request, Response, StatusCode};
/// # use tollgate::http::*;
/// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
/// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
/// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// let limits = RateLimiting::builder().global(two_a_minute()).build().unwrap();
/// let layer: RateLimitLayer = limits.layer();
/// // A `tower::Layer`: wrap any service (or give it to axum's `Router::layer`).
/// use tower::{Layer, ServiceExt};
/// let svc = layer.layer(tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hi")) }));
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// assert_eq!(rt.block_on(svc.oneshot(path("/"))).unwrap().status(), 200);
/// ```
#[derive(Clone)]
pub struct RateLimitLayer {
    shared: Arc<Shared>,
    mode: Mode,
}

impl fmt::Debug for RateLimitLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            fast: self.shared.fast(self.mode),
            shared: self.shared.clone(),
            mode: self.mode,
        }
    }
}
