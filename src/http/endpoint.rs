use super::policy::RequestView;

/// The endpoint policy a request gets, chosen by the
/// [selector](crate::http::RateLimitingBuilder::select).
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
/// let limits = RateLimiting::builder()
///     .policy("search", two_a_minute())
///     .select(|req| match req.uri.path() {
///         "/search" => Endpoint::Policy("search"),
///         "/health" => Endpoint::Disabled,
///         _ => Endpoint::Default,
///     })
///     .build()
///     .unwrap();
/// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
/// let app = limits.layer().layer(service_fn(hello));
/// for _ in 0..2 { assert_eq!(app.clone().oneshot(Request::get("/search").body(()).unwrap()).await.unwrap().status(), 200); }
/// assert_eq!(app.clone().oneshot(Request::get("/search").body(()).unwrap()).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
/// assert_eq!(app.clone().oneshot(Request::get("/health").body(()).unwrap()).await.unwrap().status(), 200);
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// The global policy only.
    Default,
    /// The global policy, then the named one. A name that no policy has is a configuration
    /// error: the request is refused with 500 Internal Server Error
    /// ([`UNKNOWN_POLICY`](crate::http::UNKNOWN_POLICY)).
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
