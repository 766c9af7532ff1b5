use core::fmt;
use core::time::Duration;

use http::header::{HeaderName, HeaderValue};
use http::HeaderMap;

use super::policy::PolicyQuota;
use crate::quota::QuotaState;

/// What the layer reports in headers: the IETF and the legacy quota headers, each on or off;
/// and the `Retry-After` values it has ready (whole seconds up to an hour).
pub(super) struct Headers {
    ietf: bool,
    legacy: bool,
    seconds: Vec<HeaderValue>,
}

/// One policy's quota, as a response reports it.
pub(super) struct Reported<'a> {
    /// The policy's name.
    pub(super) name: &'a str,
    /// Its `RateLimit-Policy` value ([`policy_header`]).
    pub(super) policy: &'a HeaderValue,
    /// The partition's quota.
    pub(super) quota: QuotaState,
}

const SECONDS_CACHED: u64 = 3600;

impl Headers {
    pub(super) fn new(ietf: bool, legacy: bool) -> Self {
        Self {
            ietf,
            legacy,
            seconds: (0..=SECONDS_CACHED).map(HeaderValue::from).collect(),
        }
    }

    /// Whether a decision must say what quota is left.
    pub(super) fn want_quota(&self) -> bool {
        self.ietf || self.legacy
    }

    /// A header value of `secs` whole seconds (cached up to an hour).
    pub(super) fn seconds(&self, secs: u64) -> HeaderValue {
        match usize::try_from(secs).ok().and_then(|s| self.seconds.get(s)) {
            Some(v) => v.clone(),
            None => HeaderValue::from(secs),
        }
    }

    /// Adds the quota headers of the policies `reported`, in order.
    pub(super) fn report(&self, headers: &mut HeaderMap, reported: &[Option<Reported<'_>>]) {
        // Appended: an inner layer (a route's policy) may have added its own already.
        if self.ietf {
            for r in reported.iter().flatten() {
                headers.append(RATELIMIT_POLICY, r.policy.clone());
                let mut w = HeaderBuf::new();
                let q = &r.quota;
                let _ =
                    fmt::Write::write_fmt(&mut w, format_args!("\"{}\";r={}", r.name, q.remaining));
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
            let reported_before = headers
                .get(X_RATELIMIT_REMAINING)
                .and_then(|v| v.to_str().ok())
                .and_then(|s| s.parse::<u64>().ok());
            let lowest = reported
                .iter()
                .flatten()
                .map(|r| r.quota)
                .min_by_key(|q| q.remaining);
            if let Some(q) = lowest.filter(|q| reported_before.is_none_or(|r| q.remaining < r)) {
                headers.insert(X_RATELIMIT_LIMIT, HeaderValue::from(q.limit));
                headers.insert(X_RATELIMIT_REMAINING, HeaderValue::from(q.remaining));
                let reset = q.reset_after.map_or(0, ceil_secs);
                headers.insert(X_RATELIMIT_RESET, self.seconds(reset));
            }
        }
    }
}

/// The `RateLimit-Policy` value of the policy `name` of quota `describe`: `"name";q=…`, with
/// `qu="concurrent-requests"` for a concurrency limit and `w=` for a window. `None` if it does
/// not fit a header (a name too long).
pub(super) fn policy_header(name: &str, describe: &PolicyQuota) -> Option<HeaderValue> {
    let mut w = HeaderBuf::new();
    let _ = fmt::Write::write_fmt(&mut w, format_args!("\"{name}\";q={}", describe.quota));
    if describe.concurrent {
        let _ = fmt::Write::write_str(&mut w, ";qu=\"concurrent-requests\"");
    }
    if let Some(window) = describe.window {
        let _ = fmt::Write::write_fmt(&mut w, format_args!(";w={}", ceil_secs(window).max(1)));
    }
    w.value()
}

/// `RateLimit-Policy`.
///
/// ```
/// # use std::{convert::Infallible, time::Duration};
/// use http::{Request, Response};
/// use tollgate::http::{Policy, RateLimiting, RATELIMIT_POLICY};
/// use tollgate::FixedWindowOptions;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// let limits = RateLimiting::builder().policy("api", two_a_minute()).rate_limit_headers(true).build().unwrap();
/// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
/// let app = limits.policy_layer("api").unwrap().layer(service_fn(hello));
/// let resp = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap();
/// assert_eq!(resp.headers()[RATELIMIT_POLICY], r#""api";q=2;w=60"#);
/// # }
/// ```
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`.
///
/// ```
/// # use std::{convert::Infallible, time::Duration};
/// use http::{Request, Response};
/// use tollgate::http::{Policy, RateLimiting, RATELIMIT};
/// use tollgate::FixedWindowOptions;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// let limits = RateLimiting::builder().policy("api", two_a_minute()).rate_limit_headers(true).build().unwrap();
/// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
/// let app = limits.policy_layer("api").unwrap().layer(service_fn(hello));
/// let resp = app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap();
/// assert_eq!(resp.headers()[RATELIMIT], r#""api";r=1;t=60"#);
/// # }
/// ```
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
/// `X-RateLimit-Limit`.
///
/// ```
/// # use std::{convert::Infallible, time::Duration};
/// use http::{Request, Response};
/// use tollgate::http::{Policy, RateLimiting, X_RATELIMIT_LIMIT};
/// use tollgate::FixedWindowOptions;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// let limits = RateLimiting::builder().global(two_a_minute()).legacy_headers(true).build().unwrap();
/// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
/// let app = limits.layer().layer(service_fn(hello));
/// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().headers()[X_RATELIMIT_LIMIT], "2");
/// # }
/// ```
pub const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
/// `X-RateLimit-Remaining`.
///
/// ```
/// # use std::{convert::Infallible, time::Duration};
/// use http::{Request, Response};
/// use tollgate::http::{Policy, RateLimiting, X_RATELIMIT_REMAINING};
/// use tollgate::FixedWindowOptions;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// let limits = RateLimiting::builder().global(two_a_minute()).legacy_headers(true).build().unwrap();
/// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
/// let app = limits.layer().layer(service_fn(hello));
/// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().headers()[X_RATELIMIT_REMAINING], "1");
/// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().headers()[X_RATELIMIT_REMAINING], "0");
/// # }
/// ```
pub const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
/// `X-RateLimit-Reset` (seconds until the next permit).
///
/// ```
/// # use std::{convert::Infallible, time::Duration};
/// use http::{Request, Response};
/// use tollgate::http::{Policy, RateLimiting, X_RATELIMIT_RESET};
/// use tollgate::FixedWindowOptions;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// let limits = RateLimiting::builder().global(two_a_minute()).legacy_headers(true).build().unwrap();
/// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
/// let app = limits.layer().layer(service_fn(hello));
/// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().headers()[X_RATELIMIT_RESET], "60");
/// # }
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
