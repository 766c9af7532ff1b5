//! [`RateLimiting`], the handle of one configuration's shared state, and its builder.

use core::fmt;
use std::sync::Arc;

use bytes::Bytes;
use http::Response;

use super::client_ip::ClientIp;
use super::compiled::{Compiled, Setup};
use super::endpoint::{Endpoint, Mode, Selector};
use super::error::BuildError;
use super::granted::{GrantHook, Granted};
use super::headers::Headers;
use super::layer::RateLimitLayer;
use super::policy::{Policy, PolicyQuota, RequestView, SharedClock};
use super::reject::{Refusals, RejectHook, Rejected};
use super::shared::Shared;
#[cfg(doc)]
use super::{policy::KeyBy, reject::UNKNOWN_POLICY};
use crate::clock::Clock;
use crate::jitter::Jitter;

/// The rate-limiting state and configuration: every policy's limiter, in one `Arc`, shared by
/// every layer and service made from it. Cheap to clone.
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
/// let hello = service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
/// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// let limits = RateLimiting::builder().global(two_a_minute()).build().unwrap();
/// // Layers made from clones share one state: two servers, one limit.
/// let a = limits.layer().layer(hello);
/// let b = limits.clone().layer().layer(hello);
/// assert_eq!(a.clone().oneshot(Request::new(())).await.unwrap().status(), 200);
/// assert_eq!(b.oneshot(Request::new(())).await.unwrap().status(), 200);
/// assert_eq!(a.oneshot(Request::new(())).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
/// # }
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

impl RateLimiting {
    /// Starts a configuration with no policy, headers off, 429 rejections.
    ///
    /// ```
    /// # use std::convert::Infallible;
    /// use http::{Request, Response};
    /// use tollgate::http::RateLimiting;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let limits = RateLimiting::builder().build().unwrap();
    /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
    /// let app = limits.layer().layer(service_fn(hello));
    /// let resp = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap(); // no policy: everything passes
    /// assert_eq!(resp.status(), 200);
    /// assert!(resp.headers().get("ratelimit").is_none());
    /// # }
    /// ```
    pub fn builder() -> RateLimitingBuilder {
        RateLimitingBuilder {
            global: None,
            policies: Vec::new(),
            selector: None,
            client_ip: ClientIp::peer(),
            on_rejected: None,
            on_granted: None,
            ietf: false,
            legacy: false,
            clock: None,
            body: Bytes::new(),
            retry_after_jitter: None,
            shadow: false,
            #[cfg(feature = "metrics")]
            metrics: false,
        }
    }

    /// The layer for a whole router or server: the global policy, then the endpoint policy the
    /// selector picks.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, time::Duration};
    /// use http::{Request, Response, StatusCode};
    /// use tollgate::http::{KeyBy, Policy, RateLimiting};
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
    /// let layer = limits.layer(); // e.g. `Router::new()…​.layer(limits.layer())`
    /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
    /// let app = layer.layer(service_fn(hello));
    /// for _ in 0..2 { let _ = app.clone().oneshot(from("192.0.2.1")).await.unwrap(); }
    /// assert_eq!(app.clone().oneshot(from("192.0.2.1")).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
    /// # }
    /// ```
    pub fn layer(&self) -> RateLimitLayer {
        RateLimitLayer::new(self.shared.clone(), Mode::Router)
    }

    /// A layer applying the named policy only (ASP.NET's `RequireRateLimiting(name)`), for one
    /// route: `get(handler).layer(limits.policy_layer("login")?)`.
    ///
    /// ```
    /// # use std::{convert::Infallible, time::Duration};
    /// use http::{Request, Response, StatusCode};
    /// use tollgate::http::{BuildError, Policy, RateLimiting};
    /// use tollgate::FixedWindowOptions;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let limits = RateLimiting::builder().policy("login", two_a_minute()).build().unwrap();
    /// let login = limits.policy_layer("login").unwrap();
    /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
    /// let app = login.layer(service_fn(hello));
    /// for _ in 0..2 { let _ = app.clone().oneshot(Request::get("/login").body(()).unwrap()).await.unwrap(); }
    /// assert_eq!(app.clone().oneshot(Request::get("/login").body(()).unwrap()).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
    /// assert_eq!(limits.policy_layer("logout").unwrap_err(), BuildError::UnknownPolicy("logout".into()));
    /// # }
    /// ```
    pub fn policy_layer(&self, name: &str) -> Result<RateLimitLayer, BuildError> {
        let i = self
            .shared
            .index(name)
            .ok_or_else(|| BuildError::UnknownPolicy(name.to_string()))?;
        Ok(RateLimitLayer::new(self.shared.clone(), Mode::Policy(i)))
    }

    /// How many partitions the named policy stores now (`None` for an unknown name or an
    /// unpartitioned policy): bounded by its [`PartitionConfig`](crate::PartitionConfig).
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, time::Duration};
    /// use http::{Request, Response};
    /// use tollgate::http::{KeyBy, Policy, RateLimiting};
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
    /// let limits = RateLimiting::builder()
    ///     .policy("per-ip", two_a_minute().partition_by(KeyBy::CLIENT_IP))
    ///     .policy("shared", two_a_minute())
    ///     .build()
    ///     .unwrap();
    /// let per_ip = limits.policy_layer("per-ip").unwrap();
    /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
    /// let app = per_ip.layer(service_fn(hello));
    /// for ip in ["192.0.2.1", "192.0.2.2", "192.0.2.1"] { let _ = app.clone().oneshot(from(ip)).await.unwrap(); }
    /// assert_eq!(limits.partitions("per-ip"), Some(2));
    /// assert_eq!(limits.partitions("shared"), None);
    /// # }
    /// ```
    pub fn partitions(&self, name: &str) -> Option<usize> {
        self.shared
            .index(name)
            .and_then(|i| self.shared.policies[i].limiter.partitions())
    }

    /// How many requests the named policy would have refused in shadow mode
    /// ([`Policy::shadow`], [`RateLimitingBuilder::shadow`]) and let through, since the layer
    /// was built (`None` for an unknown name; always 0 for a policy that enforces).
    ///
    /// ```
    /// # use std::{convert::Infallible, time::Duration};
    /// use http::{Request, Response};
    /// use tollgate::http::{Endpoint, Policy, RateLimiting};
    /// use tollgate::FixedWindowOptions;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let one_a_minute = || Policy::fixed_window(FixedWindowOptions::new(1, Duration::from_secs(60))).unwrap();
    /// let limits = RateLimiting::builder()
    ///     .policy("new-limit", one_a_minute().shadow())
    ///     .policy("old-limit", one_a_minute())
    ///     .select(|req| Endpoint::Policy(if req.uri.path() == "/new" { "new-limit" } else { "old-limit" }))
    ///     .build()
    ///     .unwrap();
    /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
    /// let app = limits.layer().layer(service_fn(hello));
    /// for path in ["/new", "/new", "/new", "/old", "/old"] {
    ///     let _ = app.clone().oneshot(Request::get(path).body(()).unwrap()).await.unwrap();
    /// }
    /// assert_eq!(limits.shadow_rejections("new-limit"), Some(2)); // let through
    /// assert_eq!(limits.shadow_rejections("old-limit"), Some(0)); // it refused its second
    /// assert_eq!(limits.shadow_rejections("unknown"), None);
    /// # }
    /// ```
    pub fn shadow_rejections(&self, name: &str) -> Option<u64> {
        self.shared
            .index(name)
            .map(|i| self.shared.policies[i].shadow_rejections())
    }

    /// How many times the named policy's limiter refused to settle a request's charge from
    /// its response ([`Policy::settle_by`](crate::http::Policy::settle_by): more than the
    /// debt limit allows), since the layer was built; each such request kept what it was
    /// charged. `None` for an unknown name; always 0 for a policy that does not settle.
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
    /// let tokens = Policy::token_bucket(TokenBucketOptions::new(100, 100, Duration::from_secs(60))).unwrap()
    ///     .cost(|_| 10)
    ///     .settle_by(Settle::header("x-tokens-used"));
    /// let limits = RateLimiting::builder().policy("tokens", tokens).clock(ManualClock::new()).build().unwrap();
    /// let greedy = service_fn(|_: Request<()>| async {
    ///     Ok::<_, Infallible>(Response::builder().header("x-tokens-used", "1000").body("").unwrap())
    /// });
    /// let app = limits.policy_layer("tokens").unwrap().layer(greedy);
    /// assert_eq!(app.oneshot(Request::new(())).await.unwrap().status(), 200);
    /// assert_eq!(limits.unsettled("tokens"), Some(1)); // past the debt limit: it kept its 10
    /// # }
    /// ```
    pub fn unsettled(&self, name: &str) -> Option<u64> {
        self.shared
            .index(name)
            .map(|i| self.shared.policies[i].unsettled())
    }

    /// What `RateLimit-Policy` says of the named policy (`None` for an unknown name).
    ///
    /// ```
    /// # use std::time::Duration;
    /// use tollgate::http::{Policy, RateLimiting};
    /// use tollgate::FixedWindowOptions;
    ///
    /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
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

/// The name of the global policy in headers and [`Rejected::policy`].
///
/// ```
/// # use std::{convert::Infallible, time::Duration};
/// use http::{Request, Response};
/// use tollgate::http::{Policy, RateLimiting, GLOBAL};
/// use tollgate::FixedWindowOptions;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// let limits = RateLimiting::builder().global(two_a_minute()).rate_limit_headers(true).build().unwrap();
/// assert_eq!(limits.describe(GLOBAL).map(|q| q.quota), Some(2));
/// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
/// let app = limits.layer().layer(service_fn(hello));
/// let resp = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap();
/// assert_eq!(resp.headers()["ratelimit"], r#""global";r=1;t=60"#);
/// # }
/// ```
pub const GLOBAL: &str = "global";

/// Builds a [`RateLimiting`] (ASP.NET's `AddRateLimiter(options => …)`).
///
/// ```
/// # use std::{convert::Infallible, net::SocketAddr, time::Duration};
/// use http::{Request, Response};
/// use tollgate::http::{KeyBy, Policy, RateLimiting, RateLimitingBuilder};
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
/// let builder: RateLimitingBuilder = RateLimiting::builder()
///     .global(two_a_minute().partition_by(KeyBy::CLIENT_IP))
///     .legacy_headers(true);
/// let limits = builder.build().unwrap();
/// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
/// let app = limits.layer().layer(service_fn(hello));
/// let resp = app.clone().oneshot(from("198.51.100.7")).await.unwrap();
/// assert_eq!(resp.headers()["x-ratelimit-remaining"], "1");
/// // Another client has its own partition.
/// assert_eq!(app.clone().oneshot(from("198.51.100.8")).await.unwrap().headers()["x-ratelimit-remaining"], "1");
/// # }
/// ```
pub struct RateLimitingBuilder {
    pub(super) global: Option<Policy>,
    pub(super) policies: Vec<(String, Policy)>,
    pub(super) selector: Option<Arc<Selector>>,
    pub(super) client_ip: ClientIp,
    pub(super) on_rejected: Option<Arc<RejectHook>>,
    pub(super) on_granted: Option<Arc<GrantHook>>,
    pub(super) ietf: bool,
    pub(super) legacy: bool,
    pub(super) clock: Option<SharedClock>,
    pub(super) body: Bytes,
    pub(super) retry_after_jitter: Option<Jitter>,
    pub(super) shadow: bool,
    #[cfg(feature = "metrics")]
    pub(super) metrics: bool,
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
        /// # use std::{convert::Infallible, time::Duration};
        /// use http::{Request, Response, StatusCode};
        /// use tollgate::http::{Policy, RateLimiting};
        /// use tollgate::FixedWindowOptions;
        /// use tower::{service_fn, Layer, ServiceExt};
        ///
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() {
        /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
        /// let limits = RateLimiting::builder().global(two_a_minute()).build().unwrap();
        /// let layer = limits.layer();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = layer.layer(service_fn(hello));
        /// assert_eq!(app.clone().oneshot(Request::get("/a").body(()).unwrap()).await.unwrap().status(), 200);
        /// assert_eq!(app.clone().oneshot(Request::get("/b").body(()).unwrap()).await.unwrap().status(), 200);
        /// assert_eq!(app.clone().oneshot(Request::get("/c").body(()).unwrap()).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS); // every route counts
        /// # }
        /// ```
        fn global(policy: Policy) => global = Some(policy);
    }

    /// A named endpoint policy (ASP.NET's `AddPolicy(name, …)`).
    ///
    /// ```
    /// # use std::convert::Infallible;
    /// use http::{Request, Response};
    /// use tollgate::http::{Policy, RateLimiting};
    /// use tollgate::ConcurrencyOptions;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let limits = RateLimiting::builder()
    ///     .policy("uploads", Policy::concurrency(ConcurrencyOptions::new(4)).unwrap())
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(limits.describe("uploads").map(|q| (q.quota, q.concurrent)), Some((4, true)));
    /// let uploads = limits.policy_layer("uploads").unwrap(); // for the upload route
    /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
    /// let app = uploads.layer(service_fn(hello));
    /// assert_eq!(app.clone().oneshot(Request::get("/upload").body(()).unwrap()).await.unwrap().status(), 200);
    /// # }
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
        /// # use std::{convert::Infallible, time::Duration};
        /// use http::{Request, Response, StatusCode};
        /// use tollgate::http::{Endpoint, Policy, RateLimiting};
        /// use tollgate::FixedWindowOptions;
        /// use tower::{service_fn, Layer, ServiceExt};
        ///
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() {
        /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
        /// // Only the API is limited; static files are not.
        /// let limits = RateLimiting::builder()
        ///     .policy("api", two_a_minute())
        ///     .select(|req| if req.uri.path().starts_with("/api/") { Endpoint::Policy("api") } else { Endpoint::Disabled })
        ///     .build()
        ///     .unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// for _ in 0..2 { let _ = app.clone().oneshot(Request::get("/api/items").body(()).unwrap()).await.unwrap(); }
        /// assert_eq!(app.clone().oneshot(Request::get("/api/items").body(()).unwrap()).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
        /// assert_eq!(app.clone().oneshot(Request::get("/static/app.js").body(()).unwrap()).await.unwrap().status(), 200);
        /// # }
        /// ```
        fn select(f: impl Fn(&RequestView<'_>) -> Endpoint + Send + Sync + 'static)
            => selector = Some(Arc::new(f));
        /// How [`KeyBy::CLIENT_IP`] finds the client (default: the TCP peer, headers ignored).
        ///
        /// ```
        /// # use std::{convert::Infallible, net::SocketAddr, time::Duration};
        /// use http::{Request, Response, StatusCode};
        /// use tollgate::http::{ClientIp, ForwardedHeader, KeyBy, Policy, RateLimiting};
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
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// for _ in 0..2 { let _ = app.clone().oneshot(via_lb("203.0.113.7")).await.unwrap(); }
        /// assert_eq!(app.clone().oneshot(via_lb("203.0.113.7")).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
        /// assert_eq!(app.clone().oneshot(via_lb("203.0.113.8")).await.unwrap().status(), 200); // not the balancer's quota
        /// # }
        /// ```
        fn client_ip(client_ip: ClientIp) => client_ip = client_ip;
        /// Builds the response of a rejected request (ASP.NET's `OnRejected`). The layer then adds
        /// `Retry-After` and the quota headers, unless the hook set them.
        ///
        /// A refused gRPC request (`content-type: application/grpc*`) keeps the hook's response
        /// only if it speaks gRPC (it has a `grpc-status` header); otherwise the hook has seen
        /// the refusal (to log or count it) and the layer answers gRPC's trailers-only response
        /// instead, as without a hook. Either way the layer then adds `grpc-retry-pushback-ms`
        /// (not `Retry-After`) and the quota headers, unless the hook set them.
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
        ///     .global(two_a_minute())
        ///     .on_rejected(|r| {
        ///         let mut resp = Response::new(format!("slow down ({})", r.policy).into());
        ///         *resp.status_mut() = r.status;
        ///         resp
        ///     })
        ///     .build()
        ///     .unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// for _ in 0..2 { let _ = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap(); }
        /// let resp = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap();
        /// assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        /// assert_eq!(resp.headers()["retry-after"], "60"); // added by the layer
        /// # }
        /// ```
        fn on_rejected(f: impl Fn(&Rejected<'_>) -> Response<Bytes> + Send + Sync + 'static)
            => on_rejected = Some(Arc::new(f));
        /// Calls `f` once for each request that every policy of its way let through, before
        /// the inner service runs: to log or meter grants as [`on_rejected`](Self::on_rejected)
        /// does refusals. [`Granted`] says which policies granted it, in order, each with its
        /// key, the permits charged, how long the request waited in its queue (if it queued)
        /// and the quota left (when the layer computes it: quota headers on).
        ///
        /// - A request that a policy refuses is not shown (`on_rejected` sees it); one that no
        ///   policy covers ([`Endpoint::Disabled`], no global policy) neither: nothing granted it.
        /// - A policy in shadow mode that would refuse lets the request through, so the request
        ///   is shown, with that policy's [`PolicyGrant::shadow_refused`](super::PolicyGrant)
        ///   set and no permit charged (`on_rejected` sees it too, marked
        ///   [`Rejected::shadow`]): the hook sees every request the inner service gets.
        /// - `f` runs on the request's task, inside `call` (or when its wait ends): keep it
        ///   short, and never block in it.
        ///
        /// Without it, the layer decides as it did (one branch on an `Option` on the general
        /// path, none on the fast one; the measured cost is in `docs/http.md`). With it, the
        /// layer leaves its fast path (the hook needs the key), and a queued request reads the
        /// clock twice to time its wait.
        ///
        /// ```
        /// # use std::{convert::Infallible, sync::{Arc, Mutex}, time::Duration};
        /// use http::{Request, Response, StatusCode};
        /// use tollgate::http::{Key, Policy, RateLimiting};
        /// use tollgate::FixedWindowOptions;
        /// use tower::{service_fn, Layer, ServiceExt};
        ///
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() {
        /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
        /// let granted = Arc::new(Mutex::new(Vec::new()));
        /// let limits = RateLimiting::builder()
        ///     .global(two_a_minute())
        ///     .on_granted({
        ///         let granted = granted.clone();
        ///         move |g| {
        ///             let p = &g.policies[0];
        ///             granted.lock().unwrap().push((p.policy.to_string(), p.key, p.permits, g.waited()));
        ///         }
        ///     })
        ///     .build()
        ///     .unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// for _ in 0..3 { let _ = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap(); }
        /// // Two granted (the third was refused: `on_rejected`'s), by the unpartitioned global policy.
        /// let one = ("global".to_string(), Some(Key::GLOBAL), 1, None);
        /// assert_eq!(*granted.lock().unwrap(), [one.clone(), one]);
        /// # }
        /// ```
        fn on_granted(f: impl Fn(&Granted<'_>) + Send + Sync + 'static)
            => on_granted = Some(Arc::new(f));
        /// The body of a default rejection (default: empty). A refused gRPC request has no
        /// body: its status and message are in its `grpc-status` and `grpc-message` headers.
        ///
        /// ```
        /// # use std::{convert::Infallible, time::Duration};
        /// use http::{Request, Response};
        /// use tollgate::http::{Policy, RateLimiting};
        /// use tollgate::FixedWindowOptions;
        ///
        /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
        /// use http_body_util::{BodyExt, Full};
        /// use tower::{Layer, ServiceExt};
        /// let limits = RateLimiting::builder().global(two_a_minute()).rejection_body("rate limited\n").build().unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new(Full::new(bytes::Bytes::from("hi")))) };
        /// let app = limits.layer().layer(tower::service_fn(hello));
        /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        /// let body = rt.block_on(async {
        ///     for _ in 0..2 { app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap(); }
        ///     app.oneshot(Request::get("/").body(()).unwrap()).await.unwrap().into_body().collect().await.unwrap().to_bytes()
        /// });
        /// assert_eq!(body, "rate limited\n");
        /// ```
        fn rejection_body(body: impl Into<Bytes>) => body = body.into();
        /// Sends the IETF `RateLimit-Policy` and `RateLimit` headers on admitted and rejected
        /// responses (default off).
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
        /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
        /// let limits = RateLimiting::builder().global(two_a_minute()).rate_limit_headers(true).build().unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// let resp = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap();
        /// assert_eq!(resp.headers()["ratelimit-policy"], r#""global";q=2;w=60"#);
        /// assert_eq!(resp.headers()["ratelimit"], r#""global";r=1;t=60"#);
        /// # }
        /// ```
        fn rate_limit_headers(on: bool) => ietf = on;
        /// Sends the legacy `X-RateLimit-Limit`, `-Remaining` and `-Reset` headers (default off).
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
        /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
        /// let limits = RateLimiting::builder().global(two_a_minute()).legacy_headers(true).build().unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// let resp = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap();
        /// assert_eq!(resp.headers()["x-ratelimit-limit"], "2");
        /// assert_eq!(resp.headers()["x-ratelimit-remaining"], "1");
        /// assert_eq!(resp.headers()["x-ratelimit-reset"], "60");
        /// # }
        /// ```
        fn legacy_headers(on: bool) => legacy = on;
        /// The clock of the built-in policies (default `StdClock`; a `ManualClock` in tests).
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
        /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
        /// let clock = Arc::new(ManualClock::new());
        /// let limits = RateLimiting::builder().global(two_a_minute()).clock(clock.clone()).build().unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// for _ in 0..2 { let _ = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap(); }
        /// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
        /// clock.advance(Duration::from_secs(60)); // the next window, without waiting a minute
        /// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), 200);
        /// # }
        /// ```
        fn clock(clock: impl Clock + Send + 'static) => clock = Some(Arc::new(clock));
        /// Adds a random extra delay drawn from `jitter` to the `Retry-After` of every refusal
        /// the layer writes (default: none, the exact wait), so that clients refused at one
        /// instant do not all come back at the next. The header is never shorter than the
        /// exact one: the exact wait plus the jitter, in whole seconds rounded up. Whole
        /// seconds means a jitter under a second moves a client by at most one second: give
        /// it a few seconds, or a fraction of the wait ([`Jitter::percent`]).
        ///
        /// Only `Retry-After` is jittered. The quota headers (`RateLimit`'s `t=`,
        /// `X-RateLimit-Reset`) keep saying when the quota resets, exactly: that is the
        /// quota's truth, not advice to one client. An [`on_rejected`](Self::on_rejected)
        /// hook sees the exact wait in [`Rejected::rejection`] (a `Retry-After` it writes
        /// itself is kept as it is; use [`Jitter::retry_after`] there). Without jitter the
        /// refusal path is unchanged.
        ///
        /// ```
        /// # use std::{convert::Infallible, sync::Arc, time::Duration};
        /// use http::{Request, Response, StatusCode};
        /// use tollgate::http::{Policy, RateLimiting};
        /// use tollgate::{FixedWindowOptions, Jitter, ManualClock};
        /// use tower::{service_fn, Layer, ServiceExt};
        ///
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() {
        /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
        /// let limits = RateLimiting::builder()
        ///     .global(two_a_minute())
        ///     .clock(ManualClock::new())
        ///     .retry_after_jitter(Jitter::up_to(Duration::from_secs(30)))
        ///     .build()
        ///     .unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// for _ in 0..2 { let _ = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap(); }
        /// let resp = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap();
        /// assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        /// let secs: u64 = resp.headers()["retry-after"].to_str().unwrap().parse().unwrap();
        /// assert!((60..=90).contains(&secs)); // the exact 60 s, plus up to 30
        /// # }
        /// ```
        fn retry_after_jitter(jitter: Jitter) => retry_after_jitter = Some(jitter);
        /// Puts the whole layer in shadow mode (default off): every policy decides, counts and
        /// reports, and refuses nothing, as one [`Policy::shadow`] does. Rolling out a whole
        /// configuration: watch [`RateLimiting::shadow_rejections`] (and the metrics'
        /// `shadow_rejected`), then build it again without. A selector that names no policy
        /// is still answered 500 ([`UNKNOWN_POLICY`]): that is a configuration error, not a
        /// limit.
        ///
        /// ```
        /// # use std::{convert::Infallible, time::Duration};
        /// use http::{Request, Response};
        /// use tollgate::http::{Policy, RateLimiting, GLOBAL};
        /// use tollgate::FixedWindowOptions;
        /// use tower::{service_fn, Layer, ServiceExt};
        ///
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() {
        /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
        /// let limits = RateLimiting::builder().global(two_a_minute()).shadow(true).build().unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// for _ in 0..3 {
        ///     assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), 200);
        /// }
        /// assert_eq!(limits.shadow_rejections(GLOBAL), Some(1));
        /// # }
        /// ```
        fn shadow(on: bool) => shadow = on;
        /// Reports the layer's standard metrics through the [`metrics`](https://docs.rs/metrics)
        /// facade (default off; feature `metrics`): the instruments of ASP.NET Core 8's
        /// rate-limiting middleware, per policy (label `policy`), under the prefix
        /// `tollgate.http.rate_limiting.`:
        ///
        /// | instrument | kind | labels |
        /// |---|---|---|
        /// | `requests` | counter | `policy`, `result` |
        /// | `active_request_leases` | gauge, up and down | `policy` |
        /// | `queued_requests` | gauge, up and down | `policy` |
        /// | `request_lease.duration` | histogram, seconds | `policy` |
        /// | `request.time_in_queue` | histogram, seconds | `policy`, `result` |
        ///
        /// Each policy a request goes through counts one `result`: `acquired`,
        /// `global_limiter` (refused by the global policy), `endpoint_limiter` (refused by
        /// another), `request_canceled` (the client went away while it waited in the policy's
        /// queue) or `shadow_rejected` (would have been refused, in [shadow
        /// mode](Policy::shadow)). A granted request holds a lease of each policy that granted
        /// it from the grant to the end of its response body (a rate policy's too, for the
        /// metrics); the time in queue runs from the request's arrival in the queue to the
        /// end of its wait. Durations are read from the layer's [`clock`](Self::clock).
        ///
        /// The instruments are registered when [`build`](Self::build) runs, with the recorder
        /// installed then: install your exporter's recorder first (or build inside
        /// `metrics::with_local_recorder`). A request then only updates atomics. Without
        /// this, the layer's decisions cost what they did.
        ///
        /// ```
        /// # use std::{convert::Infallible, time::Duration};
        /// use http::{Request, Response};
        /// use metrics_util::debugging::DebuggingRecorder;
        /// use tollgate::http::{Policy, RateLimiting};
        /// use tollgate::FixedWindowOptions;
        /// use tower::{service_fn, Layer, ServiceExt};
        ///
        /// # #[tokio::main(flavor = "current_thread")]
        /// # async fn main() {
        /// let recorder = DebuggingRecorder::new();
        /// let snapshotter = recorder.snapshotter();
        /// let two_a_minute = Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
        /// let builder = RateLimiting::builder().global(two_a_minute).metrics(true);
        /// let limits = metrics::with_local_recorder(&recorder, || builder.build()).unwrap();
        /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
        /// let app = limits.layer().layer(service_fn(hello));
        /// for _ in 0..3 {
        ///     let _ = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap();
        /// }
        /// let snapshot = snapshotter.snapshot().into_vec(); // (a debugging snapshot resets)
        /// let requests = |result: &str| {
        ///     snapshot.iter().find_map(|(key, _, _, value)| {
        ///         let key = key.key();
        ///         let matches = key.name() == "tollgate.http.rate_limiting.requests"
        ///             && key.labels().any(|l| l.key() == "result" && l.value() == result);
        ///         match value {
        ///             metrics_util::debugging::DebugValue::Counter(n) if matches => Some(*n),
        ///             _ => None,
        ///         }
        ///     })
        /// };
        /// assert_eq!(requests("acquired"), Some(2));
        /// assert_eq!(requests("global_limiter"), Some(1));
        /// # }
        /// ```
        #[cfg(feature = "metrics")]
        #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
        fn metrics(on: bool) => metrics = on;
    }

    /// Builds every policy's limiter.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use tollgate::http::{BuildError, Policy, RateLimiting};
    /// use tollgate::FixedWindowOptions;
    ///
    /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let limits = RateLimiting::builder().policy("api", two_a_minute()).build();
    /// assert!(limits.is_ok());
    /// let bad = RateLimiting::builder().policy("bad\"name", two_a_minute()).build();
    /// assert_eq!(bad.unwrap_err(), BuildError::InvalidName("bad\"name".into()));
    /// ```
    pub fn build(self) -> Result<RateLimiting, BuildError> {
        let std_clock = self.clock.is_none();
        let clock: SharedClock = self.clock.unwrap_or_else(|| Arc::new(crate::StdClock));
        let mut setup = Setup {
            clock: &clock,
            std_clock,
            global: true,
            shadow: self.shadow,
            #[cfg(feature = "metrics")]
            metrics: self.metrics,
        };
        let mut policies = Vec::new();
        let mut global = None;
        if let Some(p) = self.global {
            global = Some(policies.len());
            policies.push(Compiled::new(GLOBAL.to_string(), p, &setup)?);
        }
        setup.global = false;
        for (name, p) in self.policies {
            if name == GLOBAL || policies.iter().any(|c: &Compiled| *c.name == *name) {
                return Err(BuildError::DuplicatePolicy(name));
            }
            policies.push(Compiled::new(name, p, &setup)?);
        }
        Ok(RateLimiting {
            shared: Arc::new(Shared {
                policies,
                global,
                selector: self.selector,
                client_ip: self.client_ip,
                headers: Headers::new(self.ietf, self.legacy),
                refusals: Refusals::new(self.on_rejected, self.body, self.retry_after_jitter),
                clock,
                on_granted: self.on_granted,
            }),
        })
    }
}
