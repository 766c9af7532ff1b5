use core::fmt;
use core::time::Duration;

use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;

use super::layer::Shared;
use crate::quota::QuotaState;

impl Shared {
    pub(super) fn retry_after_value(&self, secs: u64) -> HeaderValue {
        match usize::try_from(secs)
            .ok()
            .and_then(|s| self.retry_after.get(s))
        {
            Some(v) => v.clone(),
            None => HeaderValue::from(secs),
        }
    }

    /// Adds the quota headers for the policies in `quotas`.
    pub(super) fn quota_headers(
        &self,
        headers: &mut HeaderMap,
        quotas: &[Option<(usize, QuotaState)>; 2],
    ) {
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
pub(super) struct HeaderBuf {
    buf: [u8; 192],
    len: usize,
    overflow: bool,
}

impl HeaderBuf {
    pub(super) fn new() -> Self {
        Self {
            buf: [0; 192],
            len: 0,
            overflow: false,
        }
    }

    pub(super) fn value(&self) -> Option<HeaderValue> {
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
