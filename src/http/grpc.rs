//! gRPC's answer to a refused gRPC request: a trailers-only response (HTTP 200, the status in
//! `grpc-status`, no body), which a gRPC client reads as a status — an HTTP 429 it would see
//! as a transport error. And, with feature `tonic`, tonic's `NamedService` kept through the
//! layer.

use core::fmt::Write as _;
use core::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Response, StatusCode};

/// `grpc-status`.
pub(super) const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
/// `grpc-message`.
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
/// `grpc-retry-pushback-ms` (gRFC A6): how long the client should wait before it retries.
pub(super) const GRPC_RETRY_PUSHBACK_MS: HeaderName =
    HeaderName::from_static("grpc-retry-pushback-ms");

/// Whether `headers` are a gRPC request's: a `content-type` of `application/grpc`, alone or
/// with a subtype (`application/grpc+proto`, `application/grpc-web`...).
#[inline]
pub(super) fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"))
}

/// The gRPC status of a refusal the layer would answer over HTTP with `status`: `UNAVAILABLE`
/// (14) for a 503 (a closed limiter, a full queue... under
/// [`unavailable_status`](super::Policy::unavailable_status), the adaptive policy's refusals),
/// `INTERNAL` (13) for a 500 (the server's misconfiguration: a selector naming no policy, no
/// peer address to key on), `RESOURCE_EXHAUSTED` (8) for any other (429).
fn code_for(status: StatusCode) -> &'static str {
    match status {
        StatusCode::SERVICE_UNAVAILABLE => "14",
        StatusCode::INTERNAL_SERVER_ERROR => "13",
        _ => "8",
    }
}

/// The trailers-only response to a gRPC request refused with the HTTP `status` by the policy
/// `policy` for `reason`: HTTP 200, `content-type: application/grpc`, `grpc-status`, and
/// `grpc-message` (`policy "name": reason`, percent-encoded).
pub(super) fn trailers_only(status: StatusCode, policy: &str, reason: &str) -> Response<Bytes> {
    let mut resp = Response::new(Bytes::new());
    let map = resp.headers_mut();
    map.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    map.insert(GRPC_STATUS, HeaderValue::from_static(code_for(status)));
    let mut message = String::with_capacity(policy.len() + reason.len() + 12);
    let _ = write!(message, "policy \"{policy}\": {reason}");
    if let Ok(v) = HeaderValue::from_str(&percent_encode(&message)) {
        map.insert(GRPC_MESSAGE, v);
    }
    resp
}

/// `grpc-retry-pushback-ms` of a wait: whole milliseconds, rounded up (never earlier than the
/// wait), at least 1 (gRFC A6 reads 0 as "retry at once").
pub(super) fn pushback(wait: Duration) -> HeaderValue {
    let ms = wait.as_nanos().div_ceil(1_000_000).max(1);
    HeaderValue::from(u64::try_from(ms).unwrap_or(u64::MAX))
}

/// `message` percent-encoded as `grpc-message` requires: every byte outside printable ASCII
/// (0x20 to 0x7E), and `%` itself, as `%XX`.
fn percent_encode(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for b in message.bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(feature = "tonic")]
#[cfg_attr(docsrs, doc(cfg(feature = "tonic")))]
/// A layered tonic service keeps its name, so it goes to tonic's router as it is.
///
/// ```
/// use std::convert::Infallible;
/// use std::task::{Context, Poll};
/// use std::time::Duration;
///
/// use tollgate::http::{Policy, RateLimiting};
/// use tollgate::FixedWindowOptions;
/// use tonic::server::NamedService;
/// use tower::Layer;
///
/// /// A service as tonic's code generation makes one (`GreeterServer`).
/// #[derive(Clone)]
/// struct GreeterServer;
/// impl NamedService for GreeterServer {
///     const NAME: &'static str = "helloworld.Greeter";
/// }
/// # impl tower::Service<http::Request<tonic::body::Body>> for GreeterServer {
/// #     type Response = http::Response<tonic::body::Body>;
/// #     type Error = Infallible;
/// #     type Future = std::future::Ready<Result<Self::Response, Infallible>>;
/// #     fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> { Poll::Ready(Ok(())) }
/// #     fn call(&mut self, _: http::Request<tonic::body::Body>) -> Self::Future {
/// #         std::future::ready(Ok(tonic::Status::unimplemented("").into_http()))
/// #     }
/// # }
///
/// fn name_of<S: NamedService>(_: &S) -> &'static str {
///     S::NAME
/// }
/// let window = FixedWindowOptions::new(100, Duration::from_secs(1));
/// let limits = RateLimiting::builder().global(Policy::fixed_window(window).unwrap()).build().unwrap();
/// let limited = limits.layer().layer(GreeterServer);
/// assert_eq!(name_of(&limited), "helloworld.Greeter");
/// // A name, and tonic's error type: what tonic's router asks of a service.
/// let _router = tonic::transport::Server::builder().add_service(limited);
/// ```
impl<S: tonic::server::NamedService> tonic::server::NamedService for super::RateLimit<S> {
    const NAME: &'static str = S::NAME;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_content_types() {
        let with = |ct: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(CONTENT_TYPE, HeaderValue::from_static(ct));
            is_grpc(&h)
        };
        assert!(with("application/grpc"));
        assert!(with("application/grpc+proto"));
        assert!(with("application/grpc-web+json"));
        assert!(!with("application/json"));
        assert!(!with("text/plain; application/grpc"));
        assert!(!is_grpc(&HeaderMap::new()));
    }

    #[test]
    fn codes_follow_the_http_status() {
        assert_eq!(code_for(StatusCode::TOO_MANY_REQUESTS), "8");
        assert_eq!(code_for(StatusCode::FORBIDDEN), "8");
        assert_eq!(code_for(StatusCode::SERVICE_UNAVAILABLE), "14");
        assert_eq!(code_for(StatusCode::INTERNAL_SERVER_ERROR), "13");
    }

    #[test]
    fn the_response_is_trailers_only() {
        let r = trailers_only(StatusCode::TOO_MANY_REQUESTS, "login", "permits exhausted");
        assert_eq!(r.status(), StatusCode::OK);
        assert!(r.body().is_empty());
        let h = r.headers();
        assert_eq!(h[CONTENT_TYPE], "application/grpc");
        assert_eq!(h[GRPC_STATUS], "8");
        assert_eq!(h[GRPC_MESSAGE], "policy \"login\": permits exhausted");
    }

    #[test]
    fn messages_are_percent_encoded() {
        assert_eq!(percent_encode("plain text"), "plain text");
        assert_eq!(percent_encode("100% done"), "100%25 done");
        assert_eq!(percent_encode("née\n"), "n%C3%A9e%0A");
        let r = trailers_only(StatusCode::SERVICE_UNAVAILABLE, "é", "closed");
        assert_eq!(r.headers()[GRPC_MESSAGE], "policy \"%C3%A9\": closed");
        assert_eq!(r.headers()[GRPC_STATUS], "14");
    }

    /// Through the layer: a gRPC request refused with the hook's plain HTTP response gets the
    /// trailers-only one (the hook still ran), one the hook answers in gRPC keeps the hook's;
    /// a selector naming no policy is `INTERNAL`.
    #[test]
    fn the_hook_keeps_its_response_only_if_it_speaks_grpc() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;

        use http_body::Body as _;
        use tower_layer::Layer;
        use tower_service::Service;

        use crate::http::{Endpoint, Policy, RateLimiting};

        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let hello = |_: http::Request<()>| async {
            let empty = http_body_util::Empty::<Bytes>::new();
            Ok::<_, core::convert::Infallible>(Response::new(empty))
        };
        let grpc = || {
            http::Request::post("/a.B/C")
                .header(CONTENT_TYPE, "application/grpc")
                .body(())
                .unwrap()
        };
        let once = || {
            let window = crate::FixedWindowOptions::new(1, Duration::from_secs(60));
            Policy::fixed_window(window).unwrap()
        };
        let seen = Arc::new(AtomicUsize::new(0));
        for speaks_grpc in [false, true] {
            let count = seen.clone();
            let limits = RateLimiting::builder()
                .global(once())
                .on_rejected(move |r| {
                    count.fetch_add(1, Ordering::Relaxed);
                    let mut resp = Response::builder().status(r.status);
                    if speaks_grpc {
                        // gRPC's own answer: HTTP 200, the status in `grpc-status`.
                        resp = Response::builder()
                            .header(GRPC_STATUS, "4")
                            .header("x-hook", "yes");
                    }
                    resp.body(Bytes::from_static(b"plain")).unwrap()
                })
                .build()
                .unwrap();
            let mut svc = limits.layer().layer(tower::service_fn(hello));
            let first = rt.block_on(Service::call(&mut svc, grpc())).unwrap();
            assert_eq!(first.status(), StatusCode::OK);
            assert!(
                first.headers().get(GRPC_STATUS).is_none(),
                "the handler's own"
            );
            let refused = rt.block_on(Service::call(&mut svc, grpc())).unwrap();
            assert_eq!(refused.status(), StatusCode::OK);
            let h = refused.headers();
            assert_eq!(h[GRPC_RETRY_PUSHBACK_MS].to_str().unwrap().len(), 5); // ~60000
            assert!(h.get(http::header::RETRY_AFTER).is_none());
            if speaks_grpc {
                assert_eq!(h[GRPC_STATUS], "4");
                assert_eq!(h["x-hook"], "yes");
                assert_eq!(refused.body().size_hint().exact(), Some(5));
            } else {
                assert_eq!(h[GRPC_STATUS], "8");
                assert_eq!(h[GRPC_MESSAGE], "policy \"global\": permits exhausted");
                assert!(refused.body().is_end_stream(), "no body");
            }
        }
        assert_eq!(seen.load(Ordering::Relaxed), 2);

        let typo = RateLimiting::builder()
            .policy("search", once())
            .select(|_| Endpoint::Policy("serach"))
            .build()
            .unwrap();
        let mut svc = typo.layer().layer(tower::service_fn(hello));
        let refused = rt.block_on(Service::call(&mut svc, grpc())).unwrap();
        assert_eq!(refused.status(), StatusCode::OK);
        assert_eq!(refused.headers()[GRPC_STATUS], "13");
        let message = &refused.headers()[GRPC_MESSAGE];
        assert_eq!(message, "policy \"serach\": no policy of the selected name");
    }

    /// A concurrency permit comes back with a body's trailers (its last frame: a gRPC
    /// response's status), not only when the body is polled past them or dropped.
    #[test]
    fn trailers_release_the_permit() {
        use http_body::{Body as _, Frame};
        use http_body_util::BodyExt;
        use tokio_stream::StreamExt;
        use tower_layer::Layer;
        use tower_service::Service;

        use crate::http::{Policy, RateLimiting};

        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let limits = RateLimiting::builder()
            .global(Policy::concurrency(crate::ConcurrencyOptions::new(1)).unwrap())
            .build()
            .unwrap();
        let streaming = |_: http::Request<()>| async {
            let mut trailers = HeaderMap::new();
            trailers.insert(GRPC_STATUS, HeaderValue::from_static("0"));
            let frames = [
                Frame::data(Bytes::from_static(b"x")),
                Frame::trailers(trailers),
            ];
            // After its trailers the stream never ends: only the trailers can release.
            let frames = tokio_stream::iter(frames.map(Ok::<_, core::convert::Infallible>))
                .chain(tokio_stream::pending());
            Ok::<_, core::convert::Infallible>(Response::new(http_body_util::StreamBody::new(
                frames,
            )))
        };
        let mut svc = limits.layer().layer(tower::service_fn(streaming));
        let mut resp = rt
            .block_on(Service::call(&mut svc, http::Request::new(())))
            .unwrap();
        let body = resp.body_mut();
        assert!(body.holds_permits());
        let data = rt.block_on(body.frame()).unwrap().unwrap();
        assert!(data.is_data() && body.holds_permits());
        let refused = rt
            .block_on(Service::call(&mut svc, http::Request::new(())))
            .unwrap();
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        let trailers = rt.block_on(body.frame()).unwrap().unwrap();
        assert!(trailers.is_trailers());
        assert!(!body.holds_permits(), "released with the trailers");
        assert!(!body.is_end_stream());
        let next = rt
            .block_on(Service::call(&mut svc, http::Request::new(())))
            .unwrap();
        assert_eq!(next.status(), StatusCode::OK);
    }

    #[test]
    fn pushback_rounds_up_to_whole_milliseconds() {
        assert_eq!(pushback(Duration::from_millis(1500)), "1500");
        assert_eq!(pushback(Duration::from_nanos(1_500_001)), "2");
        assert_eq!(pushback(Duration::ZERO), "1");
        // Saturated: gRPC clients read a value past their integer as "do not retry".
        assert_eq!(pushback(Duration::MAX), u64::MAX.to_string().as_str());
    }
}
