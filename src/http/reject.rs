use core::time::Duration;
use std::sync::Arc;

use bytes::Bytes;
use http::header::RETRY_AFTER;
use http::{Response, StatusCode};

use super::body::LimitedBody;
use super::grpc;
use super::headers::{ceil_secs, Headers, Reported, RATELIMIT, X_RATELIMIT_LIMIT};
use super::policy::{Denial, Policy, RequestView, NO_PEER_ADDRESS};
use crate::jitter::Jitter;
use crate::lease::{Reason, Rejection};
use crate::quota::QuotaState;

/// A rejected request, as the
/// [`on_rejected`](crate::http::RateLimitingBuilder::on_rejected) hook sees it.
///
/// ```
/// # use std::{convert::Infallible, time::Duration};
/// use http::{Request, Response, StatusCode};
/// use tollgate::http::{Policy, RateLimiting, Rejected};
/// use tollgate::FixedWindowOptions;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
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
/// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
/// let app = login.layer(service_fn(hello));
/// for _ in 0..2 { let _ = app.clone().oneshot(Request::get("/login").body(()).unwrap()).await.unwrap(); }
/// assert_eq!(app.clone().oneshot(Request::get("/login").body(()).unwrap()).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
/// # }
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
    /// The policy is in shadow mode ([`Policy::shadow`]): the request is not refused, it goes
    /// on to the inner service, and the response the hook returns is dropped. A hook that
    /// logs or counts sees shadow refusals here; one that only builds a response can ignore
    /// them.
    ///
    /// ```
    /// # use std::{convert::Infallible, sync::{Arc, Mutex}, time::Duration};
    /// use http::{Request, Response};
    /// use tollgate::http::{Policy, RateLimiting};
    /// use tollgate::FixedWindowOptions;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let trial = Policy::fixed_window(FixedWindowOptions::new(1, Duration::from_secs(60))).unwrap().shadow();
    /// let limits = RateLimiting::builder()
    ///     .global(trial)
    ///     .on_rejected({
    ///         let log = log.clone();
    ///         move |r| {
    ///             log.lock().unwrap().push(format!("{} would refuse {} (shadow: {})", r.policy, r.request.uri, r.shadow));
    ///             Response::builder().status(r.status).body("".into()).unwrap()
    ///         }
    ///     })
    ///     .build()
    ///     .unwrap();
    /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
    /// let app = limits.layer().layer(service_fn(hello));
    /// for _ in 0..2 {
    ///     assert_eq!(app.clone().oneshot(Request::get("/a").body(()).unwrap()).await.unwrap().status(), 200);
    /// }
    /// assert_eq!(*log.lock().unwrap(), ["global would refuse /a (shadow: true)"]);
    /// # }
    /// ```
    pub shadow: bool,
}

pub(super) type RejectHook = dyn Fn(&Rejected<'_>) -> Response<Bytes> + Send + Sync;

/// How the layer answers a refused request: the
/// [`on_rejected`](crate::http::RateLimitingBuilder::on_rejected) hook, or a response of the
/// default body.
pub(super) struct Refusals {
    hook: Option<Arc<RejectHook>>,
    body: Bytes,
    /// Added to the `Retry-After` the layer writes
    /// ([`retry_after_jitter`](crate::http::RateLimitingBuilder::retry_after_jitter)).
    jitter: Option<Jitter>,
}

impl Refusals {
    pub(super) fn new(hook: Option<Arc<RejectHook>>, body: Bytes, jitter: Option<Jitter>) -> Self {
        Self { hook, body, jitter }
    }

    /// The response to a request that the policy `name` (`policy`) refused; `report` is its
    /// quota, for the headers.
    pub(super) fn refuse<B>(
        &self,
        headers: &Headers,
        (name, policy): (&str, &Policy),
        mut d: Denial,
        report: Option<Reported<'_>>,
        view: &RequestView<'_>,
    ) -> Response<LimitedBody<B>> {
        let reason = d.rejection.reason();
        if reason == Reason::PartitionsFull && d.rejection.retry_after().is_none() {
            d.rejection =
                Rejection::with_retry_after(&Reason::PartitionsFull, PARTITIONS_FULL_RETRY_AFTER);
        }
        self.respond(headers, name, policy.status_for(reason), d, report, view)
    }

    /// A request that the policy `name` (`policy`), in shadow mode, would have refused: the
    /// hook sees it (marked [`Rejected::shadow`]), and its response is dropped.
    pub(super) fn shadow(
        &self,
        (name, policy): (&str, &Policy),
        d: &Denial,
        view: &RequestView<'_>,
    ) {
        if let Some(hook) = &self.hook {
            let _ = hook(&Rejected {
                policy: name,
                rejection: d.rejection,
                quota: d.quota,
                status: policy.status_for(d.rejection.reason()),
                request: *view,
                shadow: true,
            });
        }
    }

    /// The response to a request whose selector chose `name`, which names no policy: a 500
    /// with [`UNKNOWN_POLICY`] (through the hook, if there is one).
    #[cold]
    pub(super) fn unknown_policy<B>(
        &self,
        headers: &Headers,
        name: &str,
        view: &RequestView<'_>,
    ) -> Response<LimitedBody<B>> {
        let d = Denial {
            rejection: Rejection::new(&UNKNOWN_POLICY),
            quota: None,
        };
        self.respond(
            headers,
            name,
            StatusCode::INTERNAL_SERVER_ERROR,
            d,
            None,
            view,
        )
    }

    /// A refusal's response: the hook's or the default one, with `Retry-After` and the quota
    /// headers of `report` (unless the hook wrote its own).
    fn respond<B>(
        &self,
        headers: &Headers,
        name: &str,
        status: StatusCode,
        d: Denial,
        report: Option<Reported<'_>>,
        view: &RequestView<'_>,
    ) -> Response<LimitedBody<B>> {
        // A gRPC client reads a status, not an HTTP error: the one header check of a refusal.
        let grpc = grpc::is_grpc(view.headers);
        let mut resp = match &self.hook {
            Some(hook) => hook(&Rejected {
                policy: name,
                rejection: d.rejection,
                quota: d.quota,
                status,
                request: *view,
                shadow: false,
            }),
            None if grpc => grpc::trailers_only(status, name, d.rejection.reason().phrase()),
            None => {
                // A misconfiguration says what to fix (`MissingKey::Auto`).
                let body = match d.rejection.reason() {
                    Reason::Custom(phrase) if d.rejection.reason() == NO_PEER_ADDRESS => {
                        Bytes::from_static(phrase.as_bytes())
                    }
                    _ => self.body.clone(),
                };
                let mut r = Response::new(body);
                *r.status_mut() = status;
                r
            }
        };
        if grpc && !resp.headers().contains_key(grpc::GRPC_STATUS) {
            // The hook's response does not speak gRPC: the layer's trailers-only one.
            resp = grpc::trailers_only(status, name, d.rejection.reason().phrase());
        }
        let map = resp.headers_mut();
        // The wait: `grpc-retry-pushback-ms` for gRPC, `Retry-After` else (unless the hook
        // wrote it).
        let wait_header = if grpc {
            grpc::GRPC_RETRY_PUSHBACK_MS
        } else {
            RETRY_AFTER
        };
        if let Some(ra) = d.rejection.retry_after() {
            if !map.contains_key(&wait_header) {
                let ra = match &self.jitter {
                    None => ra,
                    Some(j) => j.apply(ra),
                };
                let value = if grpc {
                    grpc::pushback(ra)
                } else {
                    headers.seconds(ceil_secs(ra).max(1))
                };
                map.insert(wait_header, value);
            }
        }
        // Unless the hook wrote its own.
        let report =
            report.filter(|_| !map.contains_key(RATELIMIT) && !map.contains_key(X_RATELIMIT_LIMIT));
        if report.is_some() {
            headers.report(map, &[report]);
        }
        resp.map(LimitedBody::full)
    }
}

/// The reason of a local rejection while an upstream's `Retry-After` lasts.
///
/// ```
/// # use std::{convert::Infallible, time::Duration};
/// use http::{Request, Response};
/// use tollgate::http::{Policy, RateLimiting, UPSTREAM_PAUSE};
/// use tollgate::FixedWindowOptions;
///
/// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
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
/// assert!(rt.block_on(client.clone().oneshot(Request::get("/").body(()).unwrap())).unwrap().headers().get("x-paused").is_none());
/// let local = rt.block_on(client.oneshot(Request::get("/").body(()).unwrap())).unwrap(); // not sent upstream
/// assert_eq!(local.headers()["x-paused"], "true");
/// ```
pub const UPSTREAM_PAUSE: Reason = Reason::Custom("paused by upstream 429");

/// The [`Reason`] of a request whose [selector] chose [`Endpoint::Policy`] with a name that
/// no policy has (a typo, a policy left out of the builder). Such a request is refused, not
/// let through under the global policy alone: it gets **500 Internal Server Error** (the
/// server's configuration is wrong, not the client), without `Retry-After`, before any policy
/// is charged; the [`on_rejected`] hook sees this reason and the unknown name as
/// [`Rejected::policy`]. (The names a selector returns are known only when it runs, so
/// [`build`] cannot check them; [`RateLimiting::policy_layer`] checks its name when it is
/// called.)
///
/// [selector]: crate::http::RateLimitingBuilder::select
/// [`Endpoint::Policy`]: crate::http::Endpoint::Policy
/// [`on_rejected`]: crate::http::RateLimitingBuilder::on_rejected
/// [`build`]: crate::http::RateLimitingBuilder::build
/// [`RateLimiting::policy_layer`]: crate::http::RateLimiting::policy_layer
///
/// ```
/// # use std::{convert::Infallible, time::Duration};
/// use http::{Request, Response, StatusCode};
/// use tollgate::http::{Endpoint, Policy, RateLimiting, UNKNOWN_POLICY};
/// use tollgate::FixedWindowOptions;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
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
/// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
/// let app = limits.layer().layer(service_fn(hello));
/// assert_eq!(app.clone().oneshot(Request::get("/search").body(()).unwrap()).await.unwrap().status(), StatusCode::INTERNAL_SERVER_ERROR);
/// # }
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
/// # use std::{convert::Infallible, net::SocketAddr, time::Duration};
/// use http::{Request, Response, StatusCode};
/// use tollgate::http::{KeyBy, Policy, RateLimiting, PARTITIONS_FULL_RETRY_AFTER};
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
/// use tollgate::PartitionConfig;
/// let one_client = two_a_minute().partition_by(KeyBy::CLIENT_IP).partitions(PartitionConfig::new(1));
/// let limits = RateLimiting::builder()
///     .global(one_client.unavailable_status(StatusCode::SERVICE_UNAVAILABLE))
///     .build()
///     .unwrap();
/// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
/// let app = limits.layer().layer(service_fn(hello));
/// assert_eq!(app.clone().oneshot(from("192.0.2.1")).await.unwrap().status(), 200);
/// let full = app.clone().oneshot(from("192.0.2.2")).await.unwrap(); // 192.0.2.1's window is in use
/// assert_eq!(full.status(), StatusCode::SERVICE_UNAVAILABLE);
/// assert_eq!(full.headers()["retry-after"], "1");
/// assert_eq!(PARTITIONS_FULL_RETRY_AFTER, Duration::from_secs(1));
/// # }
/// ```
pub const PARTITIONS_FULL_RETRY_AFTER: Duration = Duration::from_secs(1);
