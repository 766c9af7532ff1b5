use super::policy::RequestView;

/// The endpoint policy a request gets, chosen by the [selector](crate::http::RateLimitingBuilder::select).
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
    /// error: the request is refused with 500 Internal Server Error ([`UNKNOWN_POLICY`](crate::http::UNKNOWN_POLICY)).
    Policy(&'static str),
    /// No limit at all, not even the global one (ASP.NET's `[DisableRateLimiting]`).
    Disabled,
}

pub(super) type Selector = dyn Fn(&RequestView<'_>) -> Endpoint + Send + Sync;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// The global policy, then the selector's endpoint policy.
    Router,
    /// One named policy.
    Policy(usize),
}
