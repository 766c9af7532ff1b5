//! Limits that count by cost end to end (issue 40 §2, issue 38's "the HTTP permit settles"):
//! a real axum server on 127.0.0.1, a real hyper client over TCP, time from a `ManualClock`.
//! A policy with `Policy::cost` charges a request a weight from the request; with
//! `Policy::settle_by` the response settles it (a header at the response head, or the body's
//! length when it ends), and the quota headers and RetryAfter of the next request say so.
#![cfg(feature = "axum")]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Path;
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use http_body_util::BodyExt;
use tollgate::http::{KeyBy, Policy, RateLimiting, RequestView, Settle};
use tollgate::{ConcurrencyOptions, ManualClock, TokenBucketOptions};

mod http_support;
use http_support::{
    every_rate_algorithm, fixed, forwarded_client_ip, get_with, serve_limited, stream_with,
    streaming_route, Got, HttpClient,
};

/// The request's `x-estimate` header (1 without one).
fn estimate(req: &RequestView<'_>) -> u32 {
    req.headers
        .get("x-estimate")
        .and_then(|v| v.to_str().ok()?.parse().ok())
        .unwrap_or(1)
}

/// `/tokens` answers `x-tokens-used` with the request's `x-use`; `/bytes/{n}` answers `n`
/// bytes; `/stream` streams.
fn app() -> (
    Router,
    tokio::sync::mpsc::UnboundedReceiver<tokio::sync::mpsc::Sender<Bytes>>,
) {
    let (streaming, feeds) = streaming_route(b"0123456789");
    let router = Router::new()
        .route(
            "/tokens",
            get(|h: HeaderMap| async move {
                let mut out = HeaderMap::new();
                if let Some(v) = h.get("x-use") {
                    out.insert("x-tokens-used", v.clone());
                }
                (out, "done")
            }),
        )
        .route(
            "/bytes/{n}",
            get(|Path(n): Path<usize>| async move { vec![b'x'; n] }),
        )
        .route("/stream", streaming);
    (router, feeds)
}

/// `GET path` from client `ip` with an estimate of `estimate` (and `x-use`, if given).
async fn call(
    c: &HttpClient,
    addr: SocketAddr,
    path: &str,
    ip: &str,
    estimate: u32,
    used: Option<u32>,
) -> Got {
    let estimate = estimate.to_string();
    let used = used.map(|u| u.to_string());
    let mut headers = vec![("x-forwarded-for", ip), ("x-estimate", estimate.as_str())];
    if let Some(u) = &used {
        headers.push(("x-use", u.as_str()));
    }
    get_with(c, addr, path, &headers).await
}

/// The quota left for `ip`, from a free request's headers (a cost of 0 charges nothing).
async fn left(c: &HttpClient, addr: SocketAddr, ip: &str) -> String {
    let got = call(c, addr, "/tokens", ip, 0, None).await;
    assert_eq!(got.status, StatusCode::OK);
    got.header("ratelimit").unwrap().to_owned()
}

/// 100 tokens a minute per client IP, charged the request's estimate and settled from
/// `x-tokens-used`.
fn tokens_per_ip() -> Policy {
    Policy::token_bucket(TokenBucketOptions::new(100, 100, Duration::from_secs(60)))
        .unwrap()
        .partition_by(KeyBy::CLIENT_IP)
        .cost(estimate)
        .settle_by(Settle::header("x-tokens-used"))
}

/// The layer of one policy, "tokens", for every request; clients by `X-Forwarded-For`.
fn layer(policy: Policy, clock: &Arc<ManualClock>) -> RateLimiting {
    RateLimiting::builder()
        .policy("tokens", policy)
        .select(|_| tollgate::http::Endpoint::Policy("tokens"))
        .client_ip(forwarded_client_ip())
        .rate_limit_headers(true)
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// A cost from a header, settled from `x-tokens-used`: a refund shows in the response's own
/// quota headers, a debit takes the key into debt, and the next request's RetryAfter waits
/// for it to be paid off. Another key is untouched.
#[tokio::test]
async fn a_header_cost_settled_from_x_tokens_used_refunds_and_debits() {
    let clock = Arc::new(ManualClock::new());
    let limits = layer(tokens_per_ip(), &clock);
    let (router, _feeds) = app();
    let (addr, c) = serve_limited(&limits, router).await;
    let (a, b) = ("203.0.113.1", "203.0.113.2");

    // Estimated 50, used 20: 30 back, and the response's own headers say 80 left.
    let got = call(&c, addr, "/tokens", a, 50, Some(20)).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.header("ratelimit"), Some(r#""tokens";r=80;t=60"#));

    // No x-tokens-used: the estimate stands.
    call(&c, addr, "/tokens", a, 10, None).await;
    assert_eq!(left(&c, addr, a).await, r#""tokens";r=70;t=60"#);

    // Estimated 50, used 90: 40 more, into debt (20 under empty).
    let got = call(&c, addr, "/tokens", a, 50, Some(90)).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.header("ratelimit"), Some(r#""tokens";r=0;t=60"#));
    assert_eq!(limits.unsettled("tokens"), Some(0));

    // The next request waits for the debt and itself: one refill of 100 a minute.
    let refused = call(&c, addr, "/tokens", a, 1, None).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("retry-after"), Some("60"));

    // Another key: its own bucket.
    assert_eq!(left(&c, addr, b).await, r#""tokens";r=100"#);

    // A minute on: the debt is paid, 80 left.
    clock.advance(Duration::from_secs(60));
    assert_eq!(left(&c, addr, a).await, r#""tokens";r=80;t=60"#);
}

/// A cost above the limit is refused; a cost of 0 passes free; without a settle the estimate
/// is the charge.
#[tokio::test]
async fn a_cost_above_the_limit_is_refused_and_zero_is_free() {
    let clock = Arc::new(ManualClock::new());
    let limits = layer(fixed(10, 60).cost(estimate), &clock);
    let (router, _feeds) = app();
    let (addr, c) = serve_limited(&limits, router).await;
    let ip = "203.0.113.1";
    assert_eq!(
        call(&c, addr, "/tokens", ip, 11, None).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        call(&c, addr, "/tokens", ip, 7, None).await.status,
        StatusCode::OK
    );
    for _ in 0..5 {
        assert_eq!(
            call(&c, addr, "/tokens", ip, 0, None).await.status,
            StatusCode::OK
        );
    }
    assert_eq!(left(&c, addr, ip).await, r#""tokens";r=3;t=60"#);
    let refused = call(&c, addr, "/tokens", ip, 4, None).await;
    assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.header("retry-after"), Some("60"));
}

/// A body-length settle: the charge becomes the bytes the body sent, when it ends — a whole
/// body, a streamed one, and one whose client hangs up mid-body (charged what was sent by
/// then; no permit leaks).
#[tokio::test]
async fn a_body_length_settle_charges_what_the_body_sent() {
    let clock = Arc::new(ManualClock::new());
    let bytes = fixed(1_000, 60)
        .partition_by(KeyBy::CLIENT_IP)
        .cost(estimate)
        .settle_by(Settle::body_len());
    let limits = layer(bytes, &clock);
    let (router, mut feeds) = app();
    let (addr, c) = serve_limited(&limits, router).await;
    let ip = "203.0.113.1";

    // Estimated 500, sent 100: the headers, written first, report the estimate.
    let got = call(&c, addr, "/bytes/100", ip, 500, None).await;
    assert_eq!(got.body.len(), 100);
    assert_eq!(got.header("ratelimit"), Some(r#""tokens";r=500;t=60"#));
    assert_eq!(left(&c, addr, ip).await, r#""tokens";r=900;t=60"#);

    // A streamed body: 10 bytes, then 20 more, then its end.
    let from_ip = [("x-forwarded-for", ip)];
    let resp = stream_with(&c, addr, &from_ip).await; // no x-estimate: 1
    let sender = feeds.recv().await.unwrap();
    sender.send(Bytes::from_static(&[b'y'; 20])).await.unwrap();
    drop(sender);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body.len(), 30);
    wait_for(&c, addr, ip, r#""tokens";r=870;t=60"#).await;

    // A client that hangs up after 10 bytes: charged 10 once the server sees it gone.
    let mut resp = stream_with(&c, addr, &from_ip).await;
    let sender = feeds.recv().await.unwrap();
    let first = resp.body_mut().frame().await.unwrap().unwrap();
    assert_eq!(first.data_ref().unwrap().len(), 10);
    drop(resp);
    // The server notices on a later write: the body may yield what is fed until then.
    let mut fed = 0;
    let charged = loop {
        let _ = sender.send(Bytes::from_static(b"more")).await;
        fed += 4;
        tokio::time::sleep(Duration::from_millis(5)).await;
        let seen = left(&c, addr, ip).await;
        if seen != r#""tokens";r=869;t=60"# {
            break 870 - remaining(&seen);
        }
        assert!(fed < 4_000, "the server never saw the client go");
    };
    // Charged what the body yielded (at least the 10 bytes the client read, at most what was
    // fed), never the estimate's 1 nor the full stream.
    assert!(
        (10..=10 + fed).contains(&charged),
        "charged {charged}, fed {fed}"
    );
    drop(sender);
}

/// The `r` of a `RateLimit` header value.
fn remaining(value: &str) -> u32 {
    let r = value.split(';').find_map(|p| p.strip_prefix("r=")).unwrap();
    r.parse().unwrap()
}

/// Polls the quota left for `ip` until it is `expected` (the body's end is seen by the server
/// a moment after the client).
async fn wait_for(c: &HttpClient, addr: SocketAddr, ip: &str, expected: &str) {
    let mut seen = String::new();
    for _ in 0..200 {
        seen = left(c, addr, ip).await;
        if seen == expected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("quota {seen:?}, expected {expected:?}");
}

/// A settle past the debt limit is refused: the request keeps its estimate, nothing panics,
/// the refusal is counted.
#[tokio::test]
async fn a_settle_past_the_debt_limit_keeps_the_estimate_and_is_counted() {
    let clock = Arc::new(ManualClock::new());
    let limits = layer(tokens_per_ip(), &clock);
    let (router, _feeds) = app();
    let (addr, c) = serve_limited(&limits, router).await;
    let ip = "203.0.113.1";
    let got = call(&c, addr, "/tokens", ip, 10, Some(100_000)).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(limits.unsettled("tokens"), Some(1));
    assert_eq!(left(&c, addr, ip).await, r#""tokens";r=90;t=60"#);
}

/// Every rate algorithm, global and keyed: a charge of 3 settled to 1 leaves what a charge of
/// 1 leaves, and one of 1 settled to 3 what a charge of 3 leaves.
#[tokio::test]
async fn settles_match_the_true_charge_on_every_rate_algorithm_global_and_keyed() {
    for keyed in [false, true] {
        let n = every_rate_algorithm(10).len();
        for i in 0..n {
            let quota_after = |charge: u32, used: Option<u32>| async move {
                let (name, policy) = every_rate_algorithm(10).swap_remove(i);
                let policy = if keyed {
                    policy.partition_by(KeyBy::CLIENT_IP)
                } else {
                    policy
                };
                let policy = policy
                    .cost(estimate)
                    .settle_by(Settle::header("x-tokens-used"));
                let clock = Arc::new(ManualClock::new());
                let limits = layer(policy, &clock);
                let (router, _feeds) = app();
                let (addr, c) = serve_limited(&limits, router).await;
                let got = call(&c, addr, "/tokens", "203.0.113.1", charge, used).await;
                assert_eq!(got.status, StatusCode::OK, "{name}");
                assert_eq!(limits.unsettled("tokens"), Some(0), "{name}");
                (name, left(&c, addr, "203.0.113.1").await)
            };
            let (name, refunded) = quota_after(3, Some(1)).await;
            let (_, one) = quota_after(1, None).await;
            assert_eq!(refunded, one, "{name} (keyed: {keyed}): 3 settled to 1");
            let (_, debited) = quota_after(1, Some(3)).await;
            let (_, three) = quota_after(3, None).await;
            assert_eq!(debited, three, "{name} (keyed: {keyed}): 1 settled to 3");
            assert_ne!(
                one, three,
                "{name} (keyed: {keyed}): the quota says nothing"
            );
        }
    }
}

/// On a concurrency policy a cost is the permits held until the response body ends.
#[tokio::test]
async fn a_concurrency_cost_holds_that_many_permits_until_the_body_ends() {
    let clock = Arc::new(ManualClock::new());
    let pool = Policy::concurrency(ConcurrencyOptions::new(10))
        .unwrap()
        .cost(estimate);
    let limits = layer(pool, &clock);
    let (router, mut feeds) = app();
    let (addr, c) = serve_limited(&limits, router).await;
    let streams = |estimate: &'static str| {
        let c = c.clone();
        async move { stream_with(&c, addr, &[("x-estimate", estimate)]).await }
    };
    let first = streams("4").await;
    let second = streams("4").await;
    let (s1, s2) = (feeds.recv().await.unwrap(), feeds.recv().await.unwrap());
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(second.status(), StatusCode::OK);
    assert_eq!(streams("4").await.status(), StatusCode::TOO_MANY_REQUESTS);
    let third = streams("2").await;
    assert_eq!(third.status(), StatusCode::OK);
    let s3 = feeds.recv().await.unwrap();
    drop((s1, s2, s3));
    for resp in [first, second, third] {
        resp.into_body().collect().await.unwrap();
    }
    // All given back: a cost of 10 passes (the server sees the ends a moment later).
    let mut ok = false;
    for _ in 0..200 {
        let resp = streams("10").await;
        if resp.status() == StatusCode::OK {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(ok, "permits leaked");
}

/// A shadow cost policy charges and records, and refuses nothing.
#[tokio::test]
async fn a_shadow_cost_policy_records_and_never_refuses() {
    let clock = Arc::new(ManualClock::new());
    let limits = layer(fixed(10, 60).cost(estimate).shadow(), &clock);
    let (router, _feeds) = app();
    let (addr, c) = serve_limited(&limits, router).await;
    for _ in 0..3 {
        let got = call(&c, addr, "/tokens", "203.0.113.1", 6, None).await;
        assert_eq!(got.status, StatusCode::OK);
    }
    assert_eq!(limits.shadow_rejections("tokens"), Some(2));
}

/// Cost and settle need a built-in policy that does not queue, and a settle means nothing to
/// a concurrency policy: typed errors at build time.
#[test]
fn cost_where_it_cannot_apply_is_a_build_error() {
    let settle_pool = Policy::concurrency(ConcurrencyOptions::new(4))
        .unwrap()
        .settle_by(Settle::body_len());
    let queued = fixed(3, 60).queue(None).cost(|_| 2);
    for policy in [settle_pool, queued] {
        let err = RateLimiting::builder()
            .policy("p", policy)
            .build()
            .unwrap_err();
        assert!(
            matches!(err, tollgate::http::BuildError::Charging { .. }),
            "{err}"
        );
    }
}

/// `Policy::max_debt` bounds what a settle may leave a key owing, on the per-key and the
/// global policy: past it the request keeps its estimate, counted; within it the debt is
/// taken; a key never owes more than the bound. A bound without a settle is a build error.
#[tokio::test]
async fn max_debt_bounds_each_keys_debt_and_needs_a_settle() {
    for keyed in [true, false] {
        let clock = Arc::new(ManualClock::new());
        let policy =
            Policy::token_bucket(TokenBucketOptions::new(100, 100, Duration::from_secs(60)))
                .unwrap();
        let policy = if keyed {
            policy.partition_by(KeyBy::CLIENT_IP)
        } else {
            policy
        };
        let limits = layer(
            policy
                .cost(estimate)
                .settle_by(Settle::header("x-tokens-used"))
                .max_debt(20),
            &clock,
        );
        let (router, _feeds) = app();
        let (addr, c) = serve_limited(&limits, router).await;
        let ip = "203.0.113.1";
        // 100 reserved, 121 used: would owe 21, past the bound of 20. The estimate stays.
        let got = call(&c, addr, "/tokens", ip, 100, Some(121)).await;
        assert_eq!(got.status, StatusCode::OK);
        assert_eq!(limits.unsettled("tokens"), Some(1), "keyed {keyed}");
        // A minute on, a fresh bucket: 120 used owes exactly 20.
        clock.advance(Duration::from_secs(60));
        let got = call(&c, addr, "/tokens", ip, 100, Some(120)).await;
        assert_eq!(got.status, StatusCode::OK);
        assert_eq!(limits.unsettled("tokens"), Some(1), "keyed {keyed}");
        let refused = call(&c, addr, "/tokens", ip, 1, None).await;
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.header("retry-after"), Some("60"));
    }
    let err = RateLimiting::builder()
        .global(
            Policy::token_bucket(TokenBucketOptions::new(100, 100, Duration::from_secs(60)))
                .unwrap()
                .max_debt(5),
        )
        .build()
        .unwrap_err();
    assert!(
        matches!(err, tollgate::http::BuildError::Charging { .. }),
        "{err}"
    );
}
