use core::fmt;
use std::sync::Arc;

use tower_layer::Layer;

use super::endpoint::Mode;
use super::service::RateLimit;
use super::shared::Shared;

/// The [`Layer`] of a [`RateLimiting`]: [`RateLimiting::layer`] or
/// [`RateLimiting::policy_layer`].
///
/// [`RateLimiting`]: crate::http::RateLimiting
/// [`RateLimiting::layer`]: crate::http::RateLimiting::layer
/// [`RateLimiting::policy_layer`]: crate::http::RateLimiting::policy_layer
///
/// ```
/// # use std::{convert::Infallible, time::Duration};
/// use http::{Request, Response};
/// use tollgate::http::{Policy, RateLimitLayer, RateLimiting};
/// use tollgate::FixedWindowOptions;
///
/// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// let limits = RateLimiting::builder().global(two_a_minute()).build().unwrap();
/// let layer: RateLimitLayer = limits.layer();
/// // A `tower::Layer`: wrap any service (or give it to axum's `Router::layer`).
/// use tower::{Layer, ServiceExt};
/// let svc = layer.layer(tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hi")) }));
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// assert_eq!(rt.block_on(svc.oneshot(Request::get("/").body(()).unwrap())).unwrap().status(), 200);
/// ```
#[derive(Clone)]
pub struct RateLimitLayer {
    shared: Arc<Shared>,
    mode: Mode,
}

impl RateLimitLayer {
    pub(super) fn new(shared: Arc<Shared>, mode: Mode) -> Self {
        Self { shared, mode }
    }
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
