//! HTTP middleware (feature `http`): a [`tower`](https://docs.rs/tower) layer for servers and
//! clients — axum, hyper, tonic, reqwest-over-tower — with the model of ASP.NET Core's
//! rate-limiting middleware, done for proxies.
//!
//! - **One shared state.** [`RateLimiting`] holds every policy's limiter in one `Arc`; every
//!   service built by its layers shares it (axum calls `layer()` once per route and method).
//!   Services are `Clone` and decide in `call`, not `poll_ready`.
//! - **Policies like ASP.NET Core.** A global [`Policy`] that every request goes through first,
//!   named policies for endpoints (chosen by a selector of the request, or applied to a route
//!   with [`RateLimiting::policy_layer`]), and [`Endpoint::Disabled`] to exempt a route.
//! - **Keys.** A policy partitions requests by [`KeyBy`]: the client IP (IPv6 grouped by /64),
//!   a header, an identity from the request's extensions, any function. Behind proxies the
//!   client IP is the rightmost untrusted address of `X-Forwarded-For` / `Forwarded`
//!   ([`ClientIp`]). A request without a key gets its policy's [`MissingKey`] outcome — never a
//!   500. Per-key state lives in the crate's bounded partitioned limiters: a million IPv6
//!   clients cannot grow memory past the configured capacity.
//! - **Rejections.** 429 by default (per policy; 503 if you want for a closed limiter, a full
//!   queue, a waiter pushed out of the queue or a full partition table), `Retry-After` in whole
//!   seconds rounded up (never 0; [`PARTITIONS_FULL_RETRY_AFTER`] for a full partition table;
//!   none for a concurrency limit, which cannot know), an [`on_rejected`] hook that sees the
//!   [`Rejection`] and the request and builds the response, and opt-in IETF `RateLimit-Policy` /
//!   `RateLimit` headers (draft-ietf-httpapi-ratelimit-headers) and legacy `X-RateLimit-*`.
//! - **Concurrency** permits are held by the response body until it ends or is dropped
//!   ([`LimitedBody`]), so a streaming response counts for as long as it streams.
//! - **Queueing.** A policy may wait in its limiter's queue ([`Policy::queue`]), bounded by the
//!   queue limit and an optional maximum delay; a rate policy refuses at once, with its
//!   limiter's `Retry-After`, a request it cannot serve within the delay; a client that
//!   disconnects leaves the queue.
//! - **Selector mistakes are loud.** An [`Endpoint::Policy`] naming no policy is refused with a
//!   500 ([`UNKNOWN_POLICY`]), never let through under the global policy alone.
//! - **Clients.** The same layer limits an outgoing tower client, and
//!   [`Policy::pause_on_upstream_429`] pauses a partition until the upstream's `Retry-After`.
//! - **Cost.** With headers off, the admitted path of a rate policy allocates nothing: one
//!   lock-free decision. The rejected path allocates the response's header map and nothing else
//!   (the body is a static `Bytes`, `Retry-After` values are cached). Under axum, add
//!   [`.for_axum()`](RateLimitLayer::for_axum) to each layer: axum boxes every response body
//!   that is not its own `Body`, which a [`LimitedBody`] is not; `for_axum` hands axum the
//!   inner body itself (wrapped only while it holds a concurrency permit).
//! - **Extension point.** Every decision goes through [`PolicyLimiter`], whose waiting half is
//!   async: a Redis-backed limiter plugs in with [`Policy::custom`].
//!
//! [`on_rejected`]: RateLimitingBuilder::on_rejected
//!
//! ```
//! use std::time::Duration;
//! use axum::{routing::get, Router};
//! use tollgate::http::{Endpoint, KeyBy, Policy, RateLimiting};
//! use tollgate::{ConcurrencyOptions, FixedWindowOptions, TokenBucketOptions};
//!
//! let limits = RateLimiting::builder()
//!     // Every request: 100 per second per client IP.
//!     .global(
//!         Policy::token_bucket(TokenBucketOptions::new(100, 100, Duration::from_secs(1)))
//!             .unwrap()
//!             .partition_by(KeyBy::CLIENT_IP),
//!     )
//!     // Logins: 5 a minute per client IP.
//!     .policy(
//!         "login",
//!         Policy::fixed_window(FixedWindowOptions::new(5, Duration::from_secs(60)))
//!             .unwrap()
//!             .partition_by(KeyBy::CLIENT_IP),
//!     )
//!     // Reports: 4 at once, whoever asks.
//!     .policy("reports", Policy::concurrency(ConcurrencyOptions::new(4)).unwrap())
//!     .select(|req| match req.uri.path() {
//!         "/health" => Endpoint::Disabled,
//!         _ => Endpoint::Default,
//!     })
//!     .rate_limit_headers(true)
//!     .build()
//!     .unwrap();
//!
//! let app: Router = Router::new()
//!     .route("/login", get(|| async { "welcome" }).layer(limits.policy_layer("login").unwrap().for_axum()))
//!     .route("/reports", get(|| async { "report" }).layer(limits.policy_layer("reports").unwrap().for_axum()))
//!     .route("/health", get(|| async { "ok" }))
//!     .layer(limits.layer().for_axum());
//! # let _ = app;
//! ```

mod axum_body;
mod body;
mod client_ip;
mod key_hash;
mod policy;
mod retry_after;

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, RETRY_AFTER};
use http::{HeaderMap, Request, Response, StatusCode};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use crate::clock::Clock;
use crate::lease::{Reason, Rejection};
use crate::options::OptionsError;
use crate::quota::QuotaState;

pub use axum_body::{AxumLayer, AxumRateLimit, AxumResponseFuture};
pub use body::LimitedBody;
use body::Permits;
pub use client_ip::{Cidr, CidrError, ClientIp, ForwardedHeader};
use policy::Rate;
pub use policy::{
    AcquireFuture, Decision, Denial, Grant, Key, KeyBy, MissingKey, Permit, Policy, PolicyLimiter,
    PolicyQuota, RequestView, SharedClock, NO_KEY,
};

/// The endpoint policy a request gets, chosen by the [selector](RateLimitingBuilder::select).
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
///     .policy("search", two_a_minute())
///     .select(|req| match req.uri.path() {
///         "/search" => Endpoint::Policy("search"),
///         "/health" => Endpoint::Disabled,
///         _ => Endpoint::Default,
///     })
///     .build()
///     .unwrap();
/// for _ in 0..2 { assert_eq!(call(&limits.layer(), path("/search")).status(), 200); }
/// assert_eq!(call(&limits.layer(), path("/search")).status(), StatusCode::TOO_MANY_REQUESTS);
/// assert_eq!(call(&limits.layer(), path("/health")).status(), 200);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// The global policy only.
    Default,
    /// The global policy, then the named one. A name that no policy has is a configuration
    /// error: the request is refused with 500 Internal Server Error ([`UNKNOWN_POLICY`]).
    Policy(&'static str),
    /// No limit at all, not even the global one (ASP.NET's `[DisableRateLimiting]`).
    Disabled,
}

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

/// A rejected request, as the [`on_rejected`](RateLimitingBuilder::on_rejected) hook sees it.
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
///     .policy("login", two_a_minute())
///     .on_rejected(|r: &Rejected<'_>| {
///         let text = format!("{} refused {} ({:?})", r.policy, r.request.uri.path(), r.rejection.reason());
///         let mut resp = Response::new(text.into());
///         *resp.status_mut() = r.status;
///         resp
///     })
///     .build()
///     .unwrap();
/// let login = limits.policy_layer("login").unwrap();
/// for _ in 0..2 { let _ = call(&login, path("/login")); }
/// assert_eq!(call(&login, path("/login")).status(), StatusCode::TOO_MANY_REQUESTS);
/// ```
#[derive(Debug)]
pub struct Rejected<'a> {
    /// The name of the policy that refused (`"global"` for the global policy; the selector's
    /// name for [`UNKNOWN_POLICY`]).
    pub policy: &'a str,
    /// Why, and when to retry.
    pub rejection: Rejection,
    /// The partition's quota, when headers are on.
    pub quota: Option<QuotaState>,
    /// The status the policy would answer with.
    pub status: StatusCode,
    /// The request.
    pub request: RequestView<'a>,
}

type Selector = dyn Fn(&RequestView<'_>) -> Endpoint + Send + Sync;
type RejectHook = dyn Fn(&Rejected<'_>) -> Response<Bytes> + Send + Sync;

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
    global: Option<Policy>,
    policies: Vec<(String, Policy)>,
    selector: Option<Arc<Selector>>,
    client_ip: ClientIp,
    on_rejected: Option<Arc<RejectHook>>,
    ietf: bool,
    legacy: bool,
    clock: Option<SharedClock>,
    body: Bytes,
}

impl fmt::Debug for RateLimitingBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimitingBuilder")
            .field("global", &self.global)
            .field("policies", &self.policies)
            .finish_non_exhaustive()
    }
}

impl RateLimitingBuilder {
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
    pub fn global(mut self, policy: Policy) -> Self {
        self.global = Some(policy);
        self
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
    pub fn select(
        mut self,
        f: impl Fn(&RequestView<'_>) -> Endpoint + Send + Sync + 'static,
    ) -> Self {
        self.selector = Some(Arc::new(f));
        self
    }

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
    pub fn client_ip(mut self, client_ip: ClientIp) -> Self {
        self.client_ip = client_ip;
        self
    }

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
    pub fn on_rejected(
        mut self,
        f: impl Fn(&Rejected<'_>) -> Response<Bytes> + Send + Sync + 'static,
    ) -> Self {
        self.on_rejected = Some(Arc::new(f));
        self
    }

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
    pub fn rejection_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

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
    pub fn rate_limit_headers(mut self, on: bool) -> Self {
        self.ietf = on;
        self
    }

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
    pub fn legacy_headers(mut self, on: bool) -> Self {
        self.legacy = on;
        self
    }

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
    pub fn clock(mut self, clock: impl Clock + Send + Sync + 'static) -> Self {
        self.clock = Some(Arc::new(clock));
        self
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
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\')
}

struct Compiled {
    name: Box<str>,
    policy: Policy,
    limiter: Arc<dyn PolicyLimiter>,
    /// The same limiter, direct, when it is a keyed rate policy (the fast path).
    rate: Option<Rate>,
    describe: PolicyQuota,
    policy_header: HeaderValue,
    pauses: Pauses,
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
    shared: Arc<Shared>,
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

struct Shared {
    policies: Vec<Compiled>,
    global: Option<usize>,
    selector: Option<Arc<Selector>>,
    client_ip: ClientIp,
    on_rejected: Option<Arc<RejectHook>>,
    ietf: bool,
    legacy: bool,
    clock: SharedClock,
    retry_after: Vec<HeaderValue>,
    body: Bytes,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// The global policy, then the selector's endpoint policy.
    Router,
    /// One named policy.
    Policy(usize),
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
    fn index(&self, name: &str) -> Option<usize> {
        self.policies.iter().position(|p| &*p.name == name)
    }

    /// The policies a request goes through, in order; or the name the selector chose that
    /// names no policy.
    #[inline]
    fn plan(&self, mode: Mode, view: &RequestView<'_>) -> Result<[Option<usize>; 2], &'static str> {
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
    fn fast(&self, mode: Mode) -> Option<usize> {
        let i = match mode {
            Mode::Policy(i) => i,
            Mode::Router if self.selector.is_none() => self.global?,
            Mode::Router => return None,
        };
        let p = &self.policies[i];
        (p.rate.is_some() && !self.want_quota() && !p.policy.pause_on_429).then_some(i)
    }

    fn want_quota(&self) -> bool {
        self.ietf || self.legacy
    }

    /// One policy's decision for a request.
    #[inline]
    fn decide(&self, i: usize, view: &RequestView<'_>) -> Step {
        let p = &self.policies[i];
        let key = match p.policy.key.extract(view, &self.client_ip) {
            Some(k) => k,
            None => match p.policy.missing {
                MissingKey::Allow => {
                    return Step::Granted(Grant {
                        permit: Permit::none(),
                        quota: None,
                    })
                }
                MissingKey::Reject => {
                    return Step::Denied(Denial {
                        rejection: Rejection::new(NO_KEY),
                        quota: None,
                    })
                }
                MissingKey::Shared => Key::MISSING,
            },
        };
        if p.policy.pause_on_429 {
            if let Some(d) = p.pauses.remaining(&key, self.clock.now().as_nanos()) {
                return Step::Denied(Denial {
                    rejection: Rejection::with_retry_after(UPSTREAM_PAUSE, d),
                    quota: None,
                });
            }
        }
        match p.limiter.try_acquire(key, self.want_quota()) {
            Decision::Granted(g) => Step::Granted(g),
            Decision::Denied(d) => Step::Denied(d),
            Decision::Wait => Step::Wait(key),
        }
    }

    /// Waits for policy `i`'s decision for `key`, bounded by its maximum delay (the built-in
    /// limiters bound their own; a custom one's wait is dropped at the deadline, and a fresh
    /// [`PolicyLimiter::try_acquire`] then decides: a grant by then is taken, a refusal is
    /// [`Reason::TimedOut`] with the limiter's RetryAfter, if it gives one).
    async fn wait(self: &Arc<Self>, i: usize, key: Key) -> Result<Grant, Denial> {
        let p = &self.policies[i];
        let fut = p.limiter.clone().acquire(key, self.want_quota());
        match p.policy.queue.flatten() {
            Some(max) if !p.policy.bounds_its_delay() => {
                match tokio::time::timeout(max, fut).await {
                    Ok(r) => r,
                    Err(_) => match p.limiter.try_acquire(key, self.want_quota()) {
                        Decision::Granted(g) => Ok(g),
                        Decision::Denied(d) => Err(Denial {
                            rejection: policy::after_wait(Reason::TimedOut, d.rejection),
                            quota: d.quota,
                        }),
                        Decision::Wait => Err(Denial {
                            rejection: Rejection::new(Reason::TimedOut),
                            quota: None,
                        }),
                    },
                }
            }
            _ => fut.await,
        }
    }

    fn retry_after_value(&self, secs: u64) -> HeaderValue {
        match usize::try_from(secs)
            .ok()
            .and_then(|s| self.retry_after.get(s))
        {
            Some(v) => v.clone(),
            None => HeaderValue::from(secs),
        }
    }

    /// The response to a request policy `i` refused.
    fn reject<B>(
        &self,
        i: usize,
        mut d: Denial,
        view: &RequestView<'_>,
    ) -> Response<LimitedBody<B>> {
        let p = &self.policies[i];
        let reason = d.rejection.reason();
        if reason == Reason::PartitionsFull && d.rejection.retry_after().is_none() {
            d.rejection = Rejection::with_retry_after(reason, PARTITIONS_FULL_RETRY_AFTER);
        }
        let status = p.policy.status_for(reason);
        self.respond(&p.name, Some(i), status, d, view)
    }

    /// The response to a request whose selector chose `name`, which names no policy: a 500
    /// with [`UNKNOWN_POLICY`] (through the hook, if there is one).
    #[cold]
    fn unknown_policy<B>(&self, name: &str, view: &RequestView<'_>) -> Response<LimitedBody<B>> {
        let d = Denial {
            rejection: Rejection::new(UNKNOWN_POLICY),
            quota: None,
        };
        self.respond(name, None, StatusCode::INTERNAL_SERVER_ERROR, d, view)
    }

    /// A refusal's response: the hook's or the default one, with `Retry-After` and, for policy
    /// `i`, the quota headers (unless the hook wrote its own).
    fn respond<B>(
        &self,
        name: &str,
        i: Option<usize>,
        status: StatusCode,
        d: Denial,
        view: &RequestView<'_>,
    ) -> Response<LimitedBody<B>> {
        let mut resp = match &self.on_rejected {
            Some(hook) => hook(&Rejected {
                policy: name,
                rejection: d.rejection,
                quota: d.quota,
                status,
                request: *view,
            }),
            None => {
                let mut r = Response::new(self.body.clone());
                *r.status_mut() = status;
                r
            }
        };
        let headers = resp.headers_mut();
        if let Some(ra) = d.rejection.retry_after() {
            if !headers.contains_key(RETRY_AFTER) {
                headers.insert(RETRY_AFTER, self.retry_after_value(ceil_secs(ra).max(1)));
            }
        }
        // Unless the hook wrote its own.
        if let (Some(i), Some(q)) = (
            i,
            d.quota.filter(|_| {
                !headers.contains_key(RATELIMIT) && !headers.contains_key(X_RATELIMIT_LIMIT)
            }),
        ) {
            self.quota_headers(headers, &[Some((i, q)), None]);
        }
        resp.map(LimitedBody::full)
    }

    /// Adds the quota headers for the policies in `quotas`.
    fn quota_headers(&self, headers: &mut HeaderMap, quotas: &[Option<(usize, QuotaState)>; 2]) {
        // Appended: an inner layer (a route's policy) may have added its own already.
        if self.ietf {
            for (i, q) in quotas.iter().flatten() {
                let p = &self.policies[*i];
                headers.append(RATELIMIT_POLICY, p.policy_header.clone());
                let mut w = HeaderBuf::new();
                let _ =
                    fmt::Write::write_fmt(&mut w, format_args!("\"{}\";r={}", p.name, q.remaining));
                if let Some(t) = q.reset_after {
                    let _ = fmt::Write::write_fmt(&mut w, format_args!(";t={}", ceil_secs(t)));
                }
                if let Some(v) = w.value() {
                    headers.append(RATELIMIT, v);
                }
            }
        }
        if self.legacy {
            // The most constraining policy: the fewest permits left (counting what an inner
            // layer already reported).
            let reported = headers
                .get(X_RATELIMIT_REMAINING)
                .and_then(|v| v.to_str().ok())
                .and_then(|s| s.parse::<u64>().ok());
            let lowest = quotas.iter().flatten().min_by_key(|(_, q)| q.remaining);
            if let Some((_, q)) = lowest.filter(|(_, q)| reported.is_none_or(|r| q.remaining < r)) {
                headers.insert(X_RATELIMIT_LIMIT, HeaderValue::from(q.limit));
                headers.insert(X_RATELIMIT_REMAINING, HeaderValue::from(q.remaining));
                let reset = q.reset_after.map_or(0, ceil_secs);
                headers.insert(X_RATELIMIT_RESET, self.retry_after_value(reset));
            }
        }
    }
}

/// The reason of a local rejection while an upstream's `Retry-After` lasts.
///
/// ```
/// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
/// # use http::{Request, Response, StatusCode};
/// # use tollgate::http::*;
/// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
/// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
/// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// use tower::{Layer, ServiceExt};
/// let limits = RateLimiting::builder()
///     .global(two_a_minute().pause_on_upstream_429())
///     .on_rejected(|r| {
///         let paused = r.rejection.reason() == UPSTREAM_PAUSE; // not our own limit
///         Response::builder().status(r.status).header("x-paused", paused.to_string()).body("".into()).unwrap()
///     })
///     .build()
///     .unwrap();
/// let upstream = tower::service_fn(|_: Request<()>| async {
///     Ok::<_, Infallible>(Response::builder().status(429).header("retry-after", "30").body("busy").unwrap())
/// });
/// let client = limits.layer().layer(upstream);
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// assert!(rt.block_on(client.clone().oneshot(path("/"))).unwrap().headers().get("x-paused").is_none());
/// let local = rt.block_on(client.oneshot(path("/"))).unwrap(); // not sent upstream
/// assert_eq!(local.headers()["x-paused"], "true");
/// ```
pub const UPSTREAM_PAUSE: Reason = Reason::Custom("paused by upstream 429");

/// The [`Reason`] of a request whose [selector](RateLimitingBuilder::select) chose
/// [`Endpoint::Policy`] with a name that no policy has (a typo, a policy left out of the
/// builder). Such a request is refused, not let through under the global policy alone: it gets
/// **500 Internal Server Error** (the server's configuration is wrong, not the client), without
/// `Retry-After`, before any policy is charged; the [`on_rejected`](RateLimitingBuilder::on_rejected)
/// hook sees this reason and the unknown name as [`Rejected::policy`]. (The names a selector
/// returns are known only when it runs, so [`build`](RateLimitingBuilder::build) cannot check
/// them; [`RateLimiting::policy_layer`] checks its name when it is called.)
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
///     .policy("search", two_a_minute())
///     .select(|_| Endpoint::Policy("serach")) // a typo
///     .on_rejected(|r| {
///         assert_eq!((r.policy, r.rejection.reason()), ("serach", UNKNOWN_POLICY));
///         Response::builder().status(r.status).body("misconfigured".into()).unwrap()
///     })
///     .build()
///     .unwrap();
/// assert_eq!(call(&limits.layer(), path("/search")).status(), StatusCode::INTERNAL_SERVER_ERROR);
/// ```
pub const UNKNOWN_POLICY: Reason = Reason::Custom("no policy of the selected name");

/// The `Retry-After` of a request refused because its policy's partition table is full
/// ([`Reason::PartitionsFull`]: a new key, and no room for its partition): one second. The
/// partitioned limiters do not say when room comes back — it comes when a stored partition goes
/// idle (with [`WhenFull::EvictIdle`](crate::WhenFull::EvictIdle), the default) or stays idle
/// past the idle timeout (with [`WhenFull::Reject`](crate::WhenFull::Reject)), which depends on
/// the other clients — so the layer sends this short, fixed value, and the client retries soon.
/// The status is the policy's [`unavailable_status`](Policy::unavailable_status) if set (a full
/// table is the server's capacity, not the client's rate), else its rejection status.
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
/// use tollgate::PartitionConfig;
/// let one_client = two_a_minute().partition_by(KeyBy::CLIENT_IP).partitions(PartitionConfig::new(1));
/// let limits = RateLimiting::builder()
///     .global(one_client.unavailable_status(StatusCode::SERVICE_UNAVAILABLE))
///     .build()
///     .unwrap();
/// assert_eq!(call(&limits.layer(), from("192.0.2.1")).status(), 200);
/// let full = call(&limits.layer(), from("192.0.2.2")); // 192.0.2.1's window is in use
/// assert_eq!(full.status(), StatusCode::SERVICE_UNAVAILABLE);
/// assert_eq!(full.headers()["retry-after"], "1");
/// assert_eq!(PARTITIONS_FULL_RETRY_AFTER, Duration::from_secs(1));
/// ```
pub const PARTITIONS_FULL_RETRY_AFTER: Duration = Duration::from_secs(1);

/// `RateLimit-Policy`.
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
/// let limits = RateLimiting::builder().policy("api", two_a_minute()).rate_limit_headers(true).build().unwrap();
/// let resp = call(&limits.policy_layer("api").unwrap(), path("/"));
/// assert_eq!(resp.headers()[RATELIMIT_POLICY], r#""api";q=2;w=60"#);
/// ```
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`.
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
/// let limits = RateLimiting::builder().policy("api", two_a_minute()).rate_limit_headers(true).build().unwrap();
/// let resp = call(&limits.policy_layer("api").unwrap(), path("/"));
/// assert_eq!(resp.headers()[RATELIMIT], r#""api";r=1;t=60"#);
/// ```
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// `X-RateLimit-Limit`.
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
/// assert_eq!(call(&limits.layer(), path("/")).headers()[X_RATELIMIT_LIMIT], "2");
/// ```
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `X-RateLimit-Remaining`.
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
/// assert_eq!(call(&limits.layer(), path("/")).headers()[X_RATELIMIT_REMAINING], "1");
/// assert_eq!(call(&limits.layer(), path("/")).headers()[X_RATELIMIT_REMAINING], "0");
/// ```
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// `X-RateLimit-Reset` (seconds until the next permit).
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
/// assert_eq!(call(&limits.layer(), path("/")).headers()[X_RATELIMIT_RESET], "60");
/// ```
pub const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// Whole seconds, rounded up.
///
/// ```
/// use std::time::Duration;
/// use tollgate::http::ceil_secs;
///
/// // A `Retry-After` of 1.2 s must say 2: retrying after 1 s would be refused again.
/// assert_eq!(ceil_secs(Duration::from_millis(1_200)), 2);
/// assert_eq!(ceil_secs(Duration::from_secs(60)), 60);
/// assert_eq!(ceil_secs(Duration::ZERO), 0);
/// ```
pub fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// A header value formatted on the stack.
struct HeaderBuf {
    buf: [u8; 192],
    len: usize,
    overflow: bool,
}

impl HeaderBuf {
    fn new() -> Self {
        Self {
            buf: [0; 192],
            len: 0,
            overflow: false,
        }
    }

    fn value(&self) -> Option<HeaderValue> {
        if self.overflow {
            return None;
        }
        HeaderValue::from_bytes(&self.buf[..self.len]).ok()
    }
}

impl fmt::Write for HeaderBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            self.overflow = true;
            return Err(fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

enum Step {
    Granted(Grant),
    Denied(Denial),
    Wait(Key),
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

/// The rate-limiting [`Service`]: decides in `call`, answers a refused request itself, and
/// passes an admitted one to the inner service.
///
/// ```
/// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
/// # use http::{Request, Response, StatusCode};
/// # use tollgate::http::*;
/// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
/// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
/// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// use tower::{Layer, Service, ServiceExt};
/// let limits = RateLimiting::builder().global(two_a_minute()).build().unwrap();
/// let inner = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hi")) });
/// let mut svc: RateLimit<_> = limits.layer().layer(inner);
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// let statuses = rt.block_on(async {
///     let mut out = Vec::new();
///     for _ in 0..3 {
///         out.push(svc.ready().await.unwrap().call(path("/")).await.unwrap().status().as_u16());
///     }
///     out
/// });
/// assert_eq!(statuses, [200, 200, 429]);
/// ```
#[derive(Clone)]
pub struct RateLimit<S> {
    inner: S,
    shared: Arc<Shared>,
    mode: Mode,
    /// The policy of every request, when it is one built-in rate policy with nothing to
    /// report or pause on (found once, here, rather than per request).
    fast: Option<usize>,
}

impl<S> fmt::Debug for RateLimit<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

type Quotas = [Option<(usize, QuotaState)>; 2];

/// What an admitted request carries to its response.
struct Admitted {
    permits: Permits,
    quotas: Quotas,
    /// Client side: the policy and key to pause on an upstream 429.
    pause: Option<(usize, Key)>,
}

impl Admitted {
    #[inline(always)]
    fn new() -> Self {
        Self {
            permits: Permits::default(),
            quotas: [None, None],
            pause: None,
        }
    }

    fn needs_shared(&self) -> bool {
        self.quotas.iter().any(Option::is_some) || self.pause.is_some()
    }

    fn finish<B>(self, shared: Option<&Shared>, resp: Response<B>) -> Response<LimitedBody<B>> {
        let Self {
            permits,
            quotas,
            pause,
        } = self;
        let (mut parts, body) = resp.into_parts();
        if let Some(shared) = shared {
            shared.after(&mut parts, &quotas, pause);
        }
        Response::from_parts(parts, LimitedBody::new(body, permits))
    }

    /// What the response future keeps: the permits, if any are held, and the rest only when
    /// a header or a pause needs it (boxed, with the layer's state, so that the common
    /// future — a rate policy, headers off — carries two words beside the inner future).
    #[inline(always)]
    fn split(&mut self, shared: &Arc<Shared>) -> (Option<Permits>, Option<Box<Extra>>) {
        let extra = self.needs_shared().then(|| {
            Box::new(Extra {
                quotas: core::mem::take(&mut self.quotas),
                pause: self.pause.take(),
                shared: shared.clone(),
            })
        });
        let permits = self
            .permits
            .holds()
            .then(|| core::mem::take(&mut self.permits));
        (permits, extra)
    }
}

/// The part of [`Admitted`] a response needs the layer's state for.
struct Extra {
    quotas: Quotas,
    pause: Option<(usize, Key)>,
    shared: Arc<Shared>,
}

impl Shared {
    /// On the inner service's response: the quota headers, and the pause on an upstream 429.
    fn after(
        &self,
        parts: &mut http::response::Parts,
        quotas: &Quotas,
        pause: Option<(usize, Key)>,
    ) {
        self.quota_headers(&mut parts.headers, quotas);
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
                    let now = self.clock.now().as_nanos();
                    self.policies[i].pauses.pause(key, now, wait);
                }
            }
        }
    }
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for RateLimit<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: 'static,
    ReqB: Send + 'static,
    ResB: Send + 'static,
{
    type Response = Response<LimitedBody<ResB>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResB, S::Error>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        let shared = &*self.shared;
        let view = RequestView::of(&req);
        // The commonest case first: one built-in rate policy, nothing to report or pause on;
        // the limiter directly, nothing held.
        if let Some(i) = self.fast {
            let p = &shared.policies[i];
            if let Some(rate) = &p.rate {
                if let Some(r) = rate.try_acquire(&p.policy.key, &view, &shared.client_ip) {
                    return match r {
                        Ok(()) => ResponseFuture {
                            state: State::Plain {
                                fut: self.inner.call(req),
                            },
                        },
                        Err(rejection) => {
                            let d = Denial {
                                rejection,
                                quota: None,
                            };
                            ResponseFuture::rejected(shared.reject(i, d, &view))
                        }
                    };
                }
            }
        }
        let plan = match shared.plan(self.mode, &view) {
            Ok(plan) => plan,
            Err(name) => return ResponseFuture::rejected(shared.unknown_policy(name, &view)),
        };
        // Then: one policy, granted at once, nothing to report or pause on.
        if let [Some(i), None] = plan {
            let p = &shared.policies[i];
            if !shared.want_quota() && !p.policy.pause_on_429 {
                match shared.decide(i, &view) {
                    Step::Granted(g) => {
                        let permits = g
                            .permit
                            .holds()
                            .then(|| Permits([g.permit, Permit::none()]));
                        return ResponseFuture::admitted(self.inner.call(req), permits, None);
                    }
                    Step::Denied(d) => return ResponseFuture::rejected(shared.reject(i, d, &view)),
                    Step::Wait(key) => {
                        return self.wait(req, plan, 0, key, Admitted::new());
                    }
                }
            }
        }
        let mut admitted = Admitted::new();
        for (slot, i) in plan.into_iter().enumerate() {
            let Some(i) = i else { continue };
            match shared.decide(i, &view) {
                Step::Granted(g) => admitted.grant(slot, i, g, shared, &view),
                Step::Denied(d) => return ResponseFuture::rejected(shared.reject(i, d, &view)),
                Step::Wait(key) => return self.wait(req, plan, slot, key, admitted),
            }
        }
        let (permits, extra) = admitted.split(&self.shared);
        drop(admitted); // holds nothing now
        ResponseFuture::admitted(self.inner.call(req), permits, extra)
    }
}

impl Admitted {
    #[inline(always)]
    fn grant(&mut self, slot: usize, i: usize, g: Grant, shared: &Shared, view: &RequestView<'_>) {
        self.permits.0[slot] = g.permit;
        self.quotas[slot] = g.quota.map(|q| (i, q));
        let p = &shared.policies[i];
        if p.policy.pause_on_429 {
            if let Some(key) = p.policy.key.extract(view, &shared.client_ip) {
                self.pause = Some((i, key));
            }
        }
    }
}

impl<S> RateLimit<S> {
    /// The slow path: policy `plan[slot]` must wait for `key`. Everything from there on runs in
    /// one boxed future, with the (ready) inner service moved into it.
    fn wait<ReqB, ResB>(
        &mut self,
        req: Request<ReqB>,
        plan: [Option<usize>; 2],
        slot: usize,
        key: Key,
        mut admitted: Admitted,
    ) -> ResponseFuture<S::Future, ResB, S::Error>
    where
        S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: 'static,
        ReqB: Send + 'static,
        ResB: Send + 'static,
    {
        let clone = self.inner.clone();
        let mut inner = core::mem::replace(&mut self.inner, clone);
        let shared = self.shared.clone();
        let fut = async move {
            let mut pending = Some(key);
            for (s, i) in plan.into_iter().enumerate().skip(slot) {
                let Some(i) = i else { continue };
                let step = match pending.take() {
                    Some(key) => Step::Wait(key),
                    None => shared.decide(i, &RequestView::of(&req)),
                };
                let outcome = match step {
                    Step::Granted(g) => Ok(g),
                    Step::Denied(d) => Err(d),
                    Step::Wait(key) => shared.wait(i, key).await,
                };
                match outcome {
                    Ok(g) => admitted.grant(s, i, g, &shared, &RequestView::of(&req)),
                    Err(d) => return Ok(shared.reject(i, d, &RequestView::of(&req))),
                }
            }
            let resp = inner.call(req).await?;
            let shared = admitted.needs_shared().then_some(&*shared);
            Ok(admitted.finish(shared, resp))
        };
        ResponseFuture::waiting(Box::pin(fut))
    }
}

type BoxResponse<B, E> = Pin<Box<dyn Future<Output = Result<Response<LimitedBody<B>>, E>> + Send>>;

pin_project! {
    /// The future of [`RateLimit`]'s response.
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
    /// use tower::{Layer, Service};
    /// let limits = RateLimiting::builder().global(two_a_minute()).build().unwrap();
    /// let inner = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hi")) });
    /// let mut svc = limits.layer().layer(inner);
    /// // The decision is made in `call`: the third future is a ready rejection.
    /// let futures: Vec<ResponseFuture<_, _, _>> = (0..3).map(|_| svc.call(path("/"))).collect();
    /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let statuses: Vec<u16> = futures.into_iter().map(|f| rt.block_on(f).unwrap().status().as_u16()).collect();
    /// assert_eq!(statuses, [200, 200, 429]);
    /// ```
    pub struct ResponseFuture<F, B, E> {
        #[pin]
        state: State<F, B, E>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, B, E> {
        // Admitted, holding nothing and reporting nothing (the fast path): the inner
        // service's response, its body to hand over as it is.
        Plain {
            #[pin]
            fut: F,
        },
        // Admitted: the inner service's response, to wrap.
        Admitted {
            #[pin]
            fut: F,
            permits: Option<Permits>,
            extra: Option<Box<Extra>>,
        },
        // Refused: the rejection, ready.
        Rejected { resp: Option<Response<LimitedBody<B>>> },
        // Waiting in a queue or for an async limiter.
        Waiting { fut: BoxResponse<B, E> },
    }
}

impl<F, B, E> ResponseFuture<F, B, E> {
    #[inline(always)]
    fn admitted(fut: F, permits: Option<Permits>, extra: Option<Box<Extra>>) -> Self {
        Self {
            state: State::Admitted {
                fut,
                permits,
                extra,
            },
        }
    }

    fn rejected(resp: Response<LimitedBody<B>>) -> Self {
        Self {
            state: State::Rejected { resp: Some(resp) },
        }
    }

    fn waiting(fut: BoxResponse<B, E>) -> Self {
        Self {
            state: State::Waiting { fut },
        }
    }
}

impl<F, B, E> ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    /// Polls, making the response's body with `admitted` from an admitted request's inner
    /// body and its held permits, or with `other` from a [`LimitedBody`] (a rejection, or the
    /// slow path's response): so that a body type other than `LimitedBody` (axum's) is built
    /// in one step.
    #[inline(always)]
    pub(crate) fn poll_map<R>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        admitted: impl FnOnce(B, Option<Permits>) -> R,
        other: impl FnOnce(LimitedBody<B>) -> R,
    ) -> Poll<Result<Response<R>, E>> {
        match self.project().state.project() {
            StateProj::Plain { fut } => {
                let resp = core::task::ready!(fut.poll(cx))?;
                Poll::Ready(Ok(resp.map(|body| admitted(body, None))))
            }
            StateProj::Admitted {
                fut,
                permits,
                extra,
            } => {
                let resp = core::task::ready!(fut.poll(cx))?;
                let permits = permits.take();
                Poll::Ready(Ok(match extra.take() {
                    None => resp.map(|body| admitted(body, permits)),
                    Some(extra) => {
                        let Extra {
                            quotas,
                            pause,
                            shared,
                        } = *extra;
                        let (mut parts, body) = resp.into_parts();
                        shared.after(&mut parts, &quotas, pause);
                        Response::from_parts(parts, admitted(body, permits))
                    }
                }))
            }
            StateProj::Rejected { resp } => Poll::Ready(Ok(resp
                .take()
                .unwrap_or_else(|| {
                    // Polled again after completion: an empty 500 rather than a panic.
                    let mut r = Response::new(LimitedBody::full(Bytes::new()));
                    *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                    r
                })
                .map(other))),
            StateProj::Waiting { fut } => {
                fut.as_mut().poll(cx).map(|r| r.map(|resp| resp.map(other)))
            }
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<LimitedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.poll_map(cx, LimitedBody::held, core::convert::identity)
    }
}

impl<F, B, E> fmt::Debug for ResponseFuture<F, B, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match &self.state {
            State::Plain { .. } | State::Admitted { .. } => "ResponseFuture::Admitted",
            State::Rejected { .. } => "ResponseFuture::Rejected",
            State::Waiting { .. } => "ResponseFuture::Waiting",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceil_secs_rounds_up() {
        assert_eq!(ceil_secs(Duration::from_millis(1)), 1);
        assert_eq!(ceil_secs(Duration::from_secs(2)), 2);
        assert_eq!(ceil_secs(Duration::from_nanos(2_000_000_001)), 3);
        assert_eq!(ceil_secs(Duration::ZERO), 0);
    }

    #[test]
    fn names_must_be_sf_strings() {
        assert!(valid_name("api-v1 burst"));
        assert!(!valid_name(""));
        assert!(!valid_name("a\"b"));
        assert!(!valid_name("é"));
        let err = RateLimiting::builder()
            .policy(
                "bad\\name",
                Policy::concurrency(crate::ConcurrencyOptions::new(1)).unwrap(),
            )
            .build()
            .unwrap_err();
        assert_eq!(err, BuildError::InvalidName("bad\\name".into()));
        let dup = RateLimiting::builder()
            .global(Policy::concurrency(crate::ConcurrencyOptions::new(1)).unwrap())
            .policy(
                GLOBAL,
                Policy::concurrency(crate::ConcurrencyOptions::new(1)).unwrap(),
            )
            .build()
            .unwrap_err();
        assert_eq!(dup, BuildError::DuplicatePolicy(GLOBAL.into()));
    }

    /// The fast path (a keyed rate policy, headers off) keys an IPv4 peer as the general path
    /// does: one bucket per address, shared with the same address as an IPv4-mapped IPv6
    /// peer; and it is taken only when nothing is reported or paused on.
    #[test]
    fn the_fast_path_keys_ipv4_peers_as_the_general_path() {
        use tower_layer::Layer;
        let options = crate::FixedWindowOptions::new(1, Duration::from_secs(60));
        let build = |headers: bool| {
            RateLimiting::builder()
                .global(
                    Policy::fixed_window(options)
                        .unwrap()
                        .partition_by(KeyBy::CLIENT_IP),
                )
                .rate_limit_headers(headers)
                .build()
                .unwrap()
        };
        let inner =
            |_: Request<()>| async { Ok::<_, core::convert::Infallible>(Response::new(())) };
        let from = |ip: &str| {
            let mut req = Request::new(());
            let ip: std::net::IpAddr = ip.parse().unwrap();
            req.extensions_mut()
                .insert(std::net::SocketAddr::new(ip, 443));
            req
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for headers in [false, true] {
            let limits = build(headers);
            let mut svc = limits.layer().layer(tower::service_fn(inner));
            assert_eq!(svc.fast.is_some(), !headers);
            let mut status = |ip: &str| {
                let fut = Service::call(&mut svc, from(ip));
                rt.block_on(fut).unwrap().status().as_u16()
            };
            assert_eq!(status("192.0.2.1"), 200);
            assert_eq!(status("192.0.2.1"), 429);
            assert_eq!(
                status("::ffff:192.0.2.1"),
                429,
                "the mapped form is the same client"
            );
            assert_eq!(status("::ffff:192.0.2.2"), 200);
            assert_eq!(status("192.0.2.2"), 429);
            assert_eq!(status("2001:db8::1"), 200);
            assert_eq!(status("2001:db8::2"), 429, "one /64");
        }
    }
}
