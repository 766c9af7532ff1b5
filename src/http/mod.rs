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
//! - **gRPC.** A refused request whose `content-type` is `application/grpc*` gets gRPC's own
//!   answer, a trailers-only response: HTTP 200, `grpc-status: 8` (`RESOURCE_EXHAUSTED`; `14`,
//!   `UNAVAILABLE`, where the policy refuses with a 503), a `grpc-message`, the wait as
//!   `grpc-retry-pushback-ms` (gRFC A6) and the quota headers when on; no body. Other requests
//!   are refused as before: the content type is read only on a refusal. With feature `tonic`,
//!   the layered service keeps tonic's `NamedService`, so it goes to
//!   `Server::builder().add_service(..)` as it is.
//! - **Concurrency** permits are held by the response body until it ends or is dropped
//!   ([`LimitedBody`]), so a streaming response counts for as long as it streams (a gRPC
//!   stream until its trailers, or until the client cancels it).
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
//!   (the body is a static `Bytes`, `Retry-After` values are cached). Under axum (feature
//!   `axum`), add `.for_axum()` to each layer: axum boxes every response body that is not its
//!   own `Body`, which a [`LimitedBody`] is not; `for_axum` hands axum the inner body itself
//!   (wrapped only while it holds a concurrency permit).
//! - **Features.** `http` is tower and the `http` crate only (hyper, tonic, tower clients);
//!   `tonic` adds tonic's `NamedService` on the layered service;
//!   `axum` adds the axum glue: `for_axum()` and the peer address from axum's `ConnectInfo`
//!   (without it the peer is the `SocketAddr` a hyper server puts in the request's
//!   extensions). The examples below use axum, or tower's `ServiceExt::oneshot` to send one
//!   request to a layered service as a test would; a server serves with
//!   `axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())`.
//! - **Extension point.** Every decision goes through [`PolicyLimiter`], whose waiting half is
//!   async: a Redis-backed limiter plugs in with [`Policy::custom`].
//!
//! [`on_rejected`]: RateLimitingBuilder::on_rejected
//!
//! ```no_run
//! use std::net::SocketAddr;
//! use std::time::Duration;
//!
//! use axum::{routing::get, Router};
//! use tollgate::http::{Endpoint, KeyBy, Policy, RateLimiting};
//! use tollgate::{ConcurrencyOptions, FixedWindowOptions, TokenBucketOptions};
//!
//! #[tokio::main]
//! async fn main() -> std::io::Result<()> {
//!     let limits = RateLimiting::builder()
//!         // Every request: 100 per second per client IP.
//!         .global(
//!             Policy::token_bucket(TokenBucketOptions::new(100, 100, Duration::from_secs(1)))
//!                 .unwrap()
//!                 .partition_by(KeyBy::CLIENT_IP),
//!         )
//!         // Logins: 5 a minute per client IP.
//!         .policy(
//!             "login",
//!             Policy::fixed_window(FixedWindowOptions::new(5, Duration::from_secs(60)))
//!                 .unwrap()
//!                 .partition_by(KeyBy::CLIENT_IP),
//!         )
//!         // Reports: 4 at once, whoever asks.
//!         .policy("reports", Policy::concurrency(ConcurrencyOptions::new(4)).unwrap())
//!         .select(|req| match req.uri.path() {
//!             "/health" => Endpoint::Disabled,
//!             _ => Endpoint::Default,
//!         })
//!         .rate_limit_headers(true)
//!         .build()
//!         .unwrap();
//!
//!     let login = limits.policy_layer("login").unwrap().for_axum();
//!     let reports = limits.policy_layer("reports").unwrap().for_axum();
//!     let app = Router::new()
//!         .route("/login", get(|| async { "welcome" }).layer(login))
//!         .route("/reports", get(|| async { "report" }).layer(reports))
//!         .route("/health", get(|| async { "ok" }))
//!         .layer(limits.layer().for_axum());
//!
//!     let listener = tokio::net::TcpListener::bind("0.0.0.0:3000").await?;
//!     // With `ConnectInfo`: the client IP that `KeyBy::CLIENT_IP` keys on.
//!     axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await
//! }
//! ```

#[cfg(feature = "axum")]
mod axum_body;
mod body;
mod client_ip;
mod compiled;
mod endpoint;
mod error;
mod granted;
mod grpc;
mod headers;
mod key_hash;
mod layer;
mod meter;
mod policy;
mod rate_limiting;
mod reject;
mod retry_after;
mod service;
mod shared;

#[cfg(doc)]
use crate::lease::Rejection;

#[cfg(feature = "axum")]
#[cfg_attr(docsrs, doc(cfg(feature = "axum")))]
pub use axum_body::{AxumLayer, AxumRateLimit, AxumResponseFuture};
pub use body::LimitedBody;
pub use client_ip::{Cidr, CidrError, ClientIp, ForwardedHeader};
pub use endpoint::Endpoint;
pub use error::BuildError;
pub use granted::{Granted, PolicyGrant};
pub use headers::{
    ceil_secs, RATELIMIT, RATELIMIT_POLICY, X_RATELIMIT_LIMIT, X_RATELIMIT_REMAINING,
    X_RATELIMIT_RESET,
};
pub use layer::RateLimitLayer;
pub use policy::{
    AcquireFuture, Decision, Denial, Grant, Key, KeyBy, MissingKey, Permit, Policy, PolicyLimiter,
    PolicyQuota, RequestView, Settle, SharedClock, NO_KEY, NO_PEER_ADDRESS,
};
pub use rate_limiting::{RateLimiting, RateLimitingBuilder, GLOBAL};
pub use reject::{Rejected, PARTITIONS_FULL_RETRY_AFTER, UNKNOWN_POLICY, UPSTREAM_PAUSE};
pub use service::{RateLimit, ResponseFuture, WrappedService};

#[cfg(test)]
mod tests {
    use core::time::Duration;

    use http::{Request, Response};
    use tower_service::Service;

    use super::compiled::valid_name;
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
