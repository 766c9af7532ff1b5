use core::fmt;
use core::time::Duration;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::header::HeaderValue;
use http::Response;

use super::endpoint::Selector;
use super::headers::HeaderBuf;
use super::layer::Shared;
use super::policy::Rate;
use super::reject::RejectHook;
use super::{
    ceil_secs, ClientIp, Endpoint, Key, Policy, PolicyLimiter, PolicyQuota, RateLimiting, Rejected,
    RequestView, SharedClock,
};
#[cfg(doc)]
use super::{KeyBy, UNKNOWN_POLICY};
use crate::clock::Clock;
use crate::options::OptionsError;

/// Why [`RateLimitingBuilder::build`] failed.
///
/// ```
/// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
/// # use http::{Request, Response, StatusCode};
/// # use tollgate::http::*;
/// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
/// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// let dup = RateLimiting::builder().policy("api", two_a_minute()).policy("api", two_a_minute()).build();
/// assert_eq!(dup.unwrap_err(), BuildError::DuplicatePolicy("api".into()));
/// let limits = RateLimiting::builder().policy("api", two_a_minute()).build().unwrap();
/// let err = limits.policy_layer("apj").unwrap_err();
/// assert_eq!(err.to_string(), r#"no policy named "apj""#);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// A policy's limiter options are invalid.
    Options(OptionsError),
    /// Two policies have the same name.
    DuplicatePolicy(String),
    /// A policy name is empty or has characters a structured-field string cannot carry
    /// (only printable ASCII, without `"` and `\`).
    InvalidName(String),
    /// [`RateLimiting::policy_layer`] named a policy that does not exist.
    UnknownPolicy(String),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Options(e) => write!(f, "invalid limiter options: {e:?}"),
            BuildError::DuplicatePolicy(n) => write!(f, "duplicate policy name {n:?}"),
            BuildError::InvalidName(n) => write!(f, "invalid policy name {n:?}"),
            BuildError::UnknownPolicy(n) => write!(f, "no policy named {n:?}"),
        }
    }
}

impl std::error::Error for BuildError {}

impl From<OptionsError> for BuildError {
    fn from(e: OptionsError) -> Self {
        BuildError::Options(e)
    }
}

/// The name of the global policy in headers and [`Rejected::policy`].
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
/// let limits = RateLimiting::builder().global(two_a_minute()).rate_limit_headers(true).build().unwrap();
/// assert_eq!(limits.describe(GLOBAL).map(|q| q.quota), Some(2));
/// let resp = call(&limits.layer(), path("/"));
/// assert_eq!(resp.headers()["ratelimit"], r#""global";r=1;t=60"#);
/// ```
pub const GLOBAL: &str = "global";

/// Builds a [`RateLimiting`] (ASP.NET's `AddRateLimiter(options => …)`).
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
/// let builder: RateLimitingBuilder = RateLimiting::builder()
///     .global(two_a_minute().partition_by(KeyBy::CLIENT_IP))
///     .legacy_headers(true);
/// let limits = builder.build().unwrap();
/// let resp = call(&limits.layer(), from("198.51.100.7"));
/// assert_eq!(resp.headers()["x-ratelimit-remaining"], "1");
/// // Another client has its own partition.
/// assert_eq!(call(&limits.layer(), from("198.51.100.8")).headers()["x-ratelimit-remaining"], "1");
/// ```
pub struct RateLimitingBuilder {
    pub(super) global: Option<Policy>,
    pub(super) policies: Vec<(String, Policy)>,
    pub(super) selector: Option<Arc<Selector>>,
    pub(super) client_ip: ClientIp,
    pub(super) on_rejected: Option<Arc<RejectHook>>,
    pub(super) ietf: bool,
    pub(super) legacy: bool,
    pub(super) clock: Option<SharedClock>,
    pub(super) body: Bytes,
}

impl fmt::Debug for RateLimitingBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitingBuilder")
            .field("global", &self.global)
            .field("policies", &self.policies)
            .finish_non_exhaustive()
    }
}

/// The builder's setters that set one field: `fn name(arg: T) => field = value;` takes `arg`
/// and sets `field` to `value`. The doc comments given are each setter's own.
macro_rules! setters {
    ($($(#[$doc:meta])* fn $name:ident($arg:ident: $ty:ty) => $field:ident = $value:expr;)*) => {$(
        $(#[$doc])*
        pub fn $name(mut self, $arg: $ty) -> Self {
            self.$field = $value;
            self
        }
    )*};
}

impl RateLimitingBuilder {
    setters! {
        /// The policy every request goes through first (ASP.NET's `GlobalLimiter`).
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
        /// let limits = RateLimiting::builder().global(two_a_minute()).build().unwrap();
        /// let layer = limits.layer();
        /// assert_eq!(call(&layer, path("/a")).status(), 200);
        /// assert_eq!(call(&layer, path("/b")).status(), 200);
        /// assert_eq!(call(&layer, path("/c")).status(), StatusCode::TOO_MANY_REQUESTS); // every route counts
        /// ```
        fn global(policy: Policy) => global = Some(policy);
    }

    /// A named endpoint policy (ASP.NET's `AddPolicy(name, …)`).
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
    /// let limits = RateLimiting::builder()
    ///     .policy("uploads", Policy::concurrency(ConcurrencyOptions::new(4)).unwrap())
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(limits.describe("uploads").map(|q| (q.quota, q.concurrent)), Some((4, true)));
    /// let uploads = limits.policy_layer("uploads").unwrap(); // for the upload route
    /// assert_eq!(call(&uploads, path("/upload")).status(), 200);
    /// ```
    pub fn policy(mut self, name: impl Into<String>, policy: Policy) -> Self {
        self.policies.push((name.into(), policy));
        self
    }

    setters! {
        /// Chooses each request's endpoint policy (for [`RateLimiting::layer`]). Runs after
        /// routing in axum (`Router::layer` wraps each route), so `MatchedPath` is in the
        /// request's extensions. The names it returns are checked when it runs, not at
        /// [`build`](Self::build): an [`Endpoint::Policy`] naming no policy answers 500
        /// ([`UNKNOWN_POLICY`]).
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
        /// // Only the API is limited; static files are not.
        /// let limits = RateLimiting::builder()
        ///     .policy("api", two_a_minute())
        ///     .select(|req| if req.uri.path().starts_with("/api/") { Endpoint::Policy("api") } else { Endpoint::Disabled })
        ///     .build()
        ///     .unwrap();
        /// for _ in 0..2 { let _ = call(&limits.layer(), path("/api/items")); }
        /// assert_eq!(call(&limits.layer(), path("/api/items")).status(), StatusCode::TOO_MANY_REQUESTS);
        /// assert_eq!(call(&limits.layer(), path("/static/app.js")).status(), 200);
        /// ```
        fn select(f: impl Fn(&RequestView<'_>) -> Endpoint + Send + Sync + 'static)
            => selector = Some(Arc::new(f));
        /// How [`KeyBy::CLIENT_IP`] finds the client (default: the TCP peer, headers ignored).
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
        /// // Behind a load balancer in 10.0.0.0/8 that appends to X-Forwarded-For.
        /// let lb = ClientIp::trusted_proxies(["10.0.0.0/8".parse().unwrap()], ForwardedHeader::XForwardedFor);
        /// let limits = RateLimiting::builder()
        ///     .global(two_a_minute().partition_by(KeyBy::CLIENT_IP))
        ///     .client_ip(lb)
        ///     .build()
        ///     .unwrap();
        /// let via_lb = |client: &str| {
        ///     let mut req = from("10.0.0.1");
        ///     req.headers_mut().insert("x-forwarded-for", client.parse().unwrap());
        ///     req
        /// };
        /// for _ in 0..2 { let _ = call(&limits.layer(), via_lb("203.0.113.7")); }
        /// assert_eq!(call(&limits.layer(), via_lb("203.0.113.7")).status(), StatusCode::TOO_MANY_REQUESTS);
        /// assert_eq!(call(&limits.layer(), via_lb("203.0.113.8")).status(), 200); // not the balancer's quota
        /// ```
        fn client_ip(client_ip: ClientIp) => client_ip = client_ip;
        /// Builds the response of a rejected request (ASP.NET's `OnRejected`). The layer then adds
        /// `Retry-After` and the quota headers, unless the hook set them.
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
        /// let limits = RateLimiting::builder()
        ///     .global(two_a_minute())
        ///     .on_rejected(|r| {
        ///         let mut resp = Response::new(format!("slow down ({})", r.policy).into());
        ///         *resp.status_mut() = r.status;
        ///         resp
        ///     })
        ///     .build()
        ///     .unwrap();
        /// for _ in 0..2 { let _ = call(&limits.layer(), path("/")); }
        /// let resp = call(&limits.layer(), path("/"));
        /// assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        /// assert_eq!(resp.headers()["retry-after"], "60"); // added by the layer
        /// ```
        fn on_rejected(f: impl Fn(&Rejected<'_>) -> Response<Bytes> + Send + Sync + 'static)
            => on_rejected = Some(Arc::new(f));
        /// The body of a default rejection (default: empty).
        ///
        /// ```
        /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
        /// # use http::{Request, Response, StatusCode};
        /// # use tollgate::http::*;
        /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
        /// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
        /// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
        /// use http_body_util::{BodyExt, Full};
        /// use tower::{Layer, ServiceExt};
        /// let limits = RateLimiting::builder().global(two_a_minute()).rejection_body("rate limited\n").build().unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new(Full::new(bytes::Bytes::from("hi")))) };
        /// let app = limits.layer().layer(tower::service_fn(hello));
        /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        /// let body = rt.block_on(async {
        ///     for _ in 0..2 { app.clone().oneshot(path("/")).await.unwrap(); }
        ///     app.oneshot(path("/")).await.unwrap().into_body().collect().await.unwrap().to_bytes()
        /// });
        /// assert_eq!(body, "rate limited\n");
        /// ```
        fn rejection_body(body: impl Into<Bytes>) => body = body.into();
        /// Sends the IETF `RateLimit-Policy` and `RateLimit` headers on admitted and rejected
        /// responses (default off).
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
        /// let limits = RateLimiting::builder().global(two_a_minute()).rate_limit_headers(true).build().unwrap();
        /// let resp = call(&limits.layer(), path("/"));
        /// assert_eq!(resp.headers()["ratelimit-policy"], r#""global";q=2;w=60"#);
        /// assert_eq!(resp.headers()["ratelimit"], r#""global";r=1;t=60"#);
        /// ```
        fn rate_limit_headers(on: bool) => ietf = on;
        /// Sends the legacy `X-RateLimit-Limit`, `-Remaining` and `-Reset` headers (default off).
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
        /// let limits = RateLimiting::builder().global(two_a_minute()).legacy_headers(true).build().unwrap();
        /// let resp = call(&limits.layer(), path("/"));
        /// assert_eq!(resp.headers()["x-ratelimit-limit"], "2");
        /// assert_eq!(resp.headers()["x-ratelimit-remaining"], "1");
        /// assert_eq!(resp.headers()["x-ratelimit-reset"], "60");
        /// ```
        fn legacy_headers(on: bool) => legacy = on;
        /// The clock of the built-in policies (default `StdClock`; a `ManualClock` in tests).
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
        /// let clock = Arc::new(ManualClock::new());
        /// let limits = RateLimiting::builder().global(two_a_minute()).clock(clock.clone()).build().unwrap();
        /// for _ in 0..2 { let _ = call(&limits.layer(), path("/")); }
        /// assert_eq!(call(&limits.layer(), path("/")).status(), StatusCode::TOO_MANY_REQUESTS);
        /// clock.advance(Duration::from_secs(60)); // the next window, without waiting a minute
        /// assert_eq!(call(&limits.layer(), path("/")).status(), 200);
        /// ```
        fn clock(clock: impl Clock + Send + Sync + 'static) => clock = Some(Arc::new(clock));
    }

    /// Builds every policy's limiter.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let limits = RateLimiting::builder().policy("api", two_a_minute()).build();
    /// assert!(limits.is_ok());
    /// let bad = RateLimiting::builder().policy("bad\"name", two_a_minute()).build();
    /// assert_eq!(bad.unwrap_err(), BuildError::InvalidName("bad\"name".into()));
    /// ```
    pub fn build(self) -> Result<RateLimiting, BuildError> {
        let std_clock = self.clock.is_none();
        let clock: SharedClock = self.clock.unwrap_or_else(|| Arc::new(crate::StdClock));
        let mut policies = Vec::new();
        let mut global = None;
        if let Some(p) = self.global {
            global = Some(policies.len());
            policies.push(Compiled::new(GLOBAL.to_string(), p, &clock, std_clock)?);
        }
        for (name, p) in self.policies {
            if name == GLOBAL || policies.iter().any(|c: &Compiled| *c.name == *name) {
                return Err(BuildError::DuplicatePolicy(name));
            }
            policies.push(Compiled::new(name, p, &clock, std_clock)?);
        }
        let retry_after = (0..=RETRY_AFTER_CACHE).map(HeaderValue::from).collect();
        Ok(RateLimiting {
            shared: Arc::new(Shared {
                policies,
                global,
                selector: self.selector,
                client_ip: self.client_ip,
                on_rejected: self.on_rejected,
                ietf: self.ietf,
                legacy: self.legacy,
                clock,
                retry_after,
                body: self.body,
            }),
        })
    }
}

const RETRY_AFTER_CACHE: u64 = 3600;

/// Valid as a structured-field string without escapes.
pub(super) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
}

pub(super) struct Compiled {
    pub(super) name: Box<str>,
    pub(super) policy: Policy,
    pub(super) limiter: Arc<dyn PolicyLimiter>,
    /// The same limiter, direct, when it is a keyed rate policy (the fast path).
    pub(super) rate: Option<Rate>,
    pub(super) describe: PolicyQuota,
    pub(super) policy_header: HeaderValue,
    pub(super) pauses: Pauses,
}

impl Compiled {
    fn new(
        name: String,
        policy: Policy,
        clock: &SharedClock,
        std_clock: bool,
    ) -> Result<Self, BuildError> {
        if !valid_name(&name) {
            return Err(BuildError::InvalidName(name));
        }
        let (limiter, rate) = policy.build(clock, std_clock)?;
        let describe = limiter.describe();
        let mut w = HeaderBuf::new();
        let _ = fmt::Write::write_fmt(&mut w, format_args!("\"{name}\";q={}", describe.quota));
        if describe.concurrent {
            let _ = fmt::Write::write_str(&mut w, ";qu=\"concurrent-requests\"");
        }
        if let Some(window) = describe.window {
            let _ = fmt::Write::write_fmt(&mut w, format_args!(";w={}", ceil_secs(window).max(1)));
        }
        let policy_header = w
            .value()
            .ok_or_else(|| BuildError::InvalidName(name.clone()))?;
        Ok(Self {
            name: name.into_boxed_str(),
            policy,
            limiter,
            rate,
            describe,
            policy_header,
            pauses: Pauses::default(),
        })
    }
}

/// Partitions paused by an upstream 429 (client side), bounded.
#[derive(Default)]
pub(super) struct Pauses {
    any: AtomicBool,
    until: Mutex<HashMap<Key, u64>>,
}

const MAX_PAUSES: usize = 4096;

impl Pauses {
    /// How long `key` stays paused at `now`.
    pub(super) fn remaining(&self, key: &Key, now: u64) -> Option<Duration> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let map = self.until.lock().unwrap_or_else(|e| e.into_inner());
        let until = *map.get(key)?;
        (until > now).then(|| Duration::from_nanos(until - now))
    }

    pub(super) fn pause(&self, key: Key, now: u64, d: Duration) {
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
