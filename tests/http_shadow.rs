//! Shadow mode end to end (issue 40, dry runs): a real axum server on 127.0.0.1, a real hyper
//! client over TCP, time from a `ManualClock`. A policy in shadow mode decides and reports as
//! it would, refuses nothing, and counts what it would have refused.
#![cfg(feature = "axum")]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::BodyExt;
use tollgate::http::{Endpoint, KeyBy, Policy, RateLimiting, GLOBAL};
use tollgate::{ConcurrencyOptions, ManualClock};

mod http_support;
use http_support::{client, fetch, fixed, serve, serve_limited, stream, streaming_route};

/// A rate policy in shadow mode: every request is served, the quota headers say what the
/// policy decided (nothing left), no `Retry-After` is sent, and the would-be refusals are
/// counted exactly.
#[tokio::test]
async fn a_shadow_rate_policy_serves_everything_and_counts_what_it_would_refuse() {
    let clock = Arc::new(ManualClock::new());
    let limits = RateLimiting::builder()
        .global(fixed(2, 60).partition_by(KeyBy::CLIENT_IP).shadow())
        .rate_limit_headers(true)
        .clock(clock.clone())
        .build()
        .unwrap();
    let app = Router::new().route("/", get(|| async { "home" }));
    let (addr, c) = serve_limited(&limits, app).await;

    let mut remaining = Vec::new();
    for _ in 0..5 {
        let got = fetch(&c, addr, "/").await;
        assert_eq!(got.status, StatusCode::OK);
        assert_eq!(got.body, "home");
        assert!(got.headers.get("retry-after").is_none());
        assert_eq!(got.all("ratelimit-policy"), [r#""global";q=2;w=60"#]);
        remaining.push(got.all("ratelimit").concat());
    }
    assert_eq!(
        remaining,
        [
            r#""global";r=1;t=60"#,
            r#""global";r=0;t=60"#,
            r#""global";r=0;t=60"#,
            r#""global";r=0;t=60"#,
            r#""global";r=0;t=60"#,
        ]
    );
    assert_eq!(limits.shadow_rejections(GLOBAL), Some(3));
    assert_eq!(limits.shadow_rejections("nope"), None);

    // The next window: the policy grants again, and the count stays.
    clock.advance(Duration::from_secs(60));
    let got = fetch(&c, addr, "/").await;
    assert_eq!(got.all("ratelimit").concat(), r#""global";r=1;t=60"#);
    assert_eq!(limits.shadow_rejections(GLOBAL), Some(3));
}

/// Without quota headers (the layer's fast path for an enforced policy), a shadow policy is
/// still decided, counted and never enforced; an enforced policy beside it still refuses.
#[tokio::test]
async fn shadow_and_enforced_policies_side_by_side() {
    let clock = Arc::new(ManualClock::new());
    let limits = RateLimiting::builder()
        .global(fixed(3, 60).shadow())
        .policy("api", fixed(1, 60))
        .select(|req| match req.uri.path() {
            "/api" => Endpoint::Policy("api"),
            _ => Endpoint::Default,
        })
        .clock(clock)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "home" }))
        .route("/api", get(|| async { "api" }))
        .layer(limits.layer());
    let addr = serve(app).await;
    let c = client();

    let mut statuses = Vec::new();
    for path in ["/", "/", "/api", "/api", "/", "/api"] {
        statuses.push(fetch(&c, addr, path).await.status.as_u16());
    }
    // The global policy (3 a minute) is in shadow mode: the 4th to 6th requests pass it;
    // "api" (1 a minute) is enforced: its 2nd and 3rd requests are refused.
    assert_eq!(statuses, [200, 200, 200, 429, 200, 429]);
    assert_eq!(limits.shadow_rejections(GLOBAL), Some(3));
    assert_eq!(limits.shadow_rejections("api"), Some(0));

    // A policy-only layer of a shadow policy, alone (the layer's fast path otherwise).
    let only = Router::new()
        .route("/", get(|| async { "home" }))
        .layer(limits.policy_layer(GLOBAL).unwrap());
    let addr = serve(only).await;
    for _ in 0..4 {
        assert_eq!(fetch(&c, addr, "/").await.status, StatusCode::OK);
    }
    assert_eq!(limits.shadow_rejections(GLOBAL), Some(7));
}

/// The whole layer in shadow mode: every policy, enforced or not in its own configuration,
/// only counts; the `on_rejected` hook still sees each would-be refusal, marked as shadow,
/// and its response is not sent.
#[tokio::test]
async fn the_whole_layer_in_shadow_mode_calls_the_hook_and_refuses_nothing() {
    let clock = Arc::new(ManualClock::new());
    let hooked = Arc::new(AtomicUsize::new(0));
    let limits = RateLimiting::builder()
        .global(fixed(4, 60))
        .policy("login", fixed(1, 60))
        .select(|req| match req.uri.path() {
            "/login" => Endpoint::Policy("login"),
            _ => Endpoint::Default,
        })
        .on_rejected({
            let hooked = hooked.clone();
            move |r| {
                assert!(r.shadow, "only shadow refusals here");
                hooked.fetch_add(1, Ordering::Relaxed);
                Response::builder()
                    .status(r.status)
                    .body(Bytes::from_static(b"never sent"))
                    .unwrap()
            }
        })
        .shadow(true)
        .clock(clock)
        .build()
        .unwrap();
    let app = Router::new()
        .route("/login", get(|| async { "welcome" }))
        .route("/", get(|| async { "home" }));
    let (addr, c) = serve_limited(&limits, app).await;
    for path in ["/login", "/login", "/login", "/", "/", "/"] {
        let got = fetch(&c, addr, path).await;
        assert_eq!(got.status, StatusCode::OK, "{path}");
        assert_ne!(got.body, "never sent");
    }
    // "login": 1 of 3 allowed; global: 4 of 6.
    assert_eq!(limits.shadow_rejections("login"), Some(2));
    assert_eq!(limits.shadow_rejections(GLOBAL), Some(2));
    assert_eq!(hooked.load(Ordering::Relaxed), 4);
}

fn ratelimit(resp: &Response<hyper::body::Incoming>) -> &str {
    resp.headers()["ratelimit"].to_str().unwrap()
}

/// A concurrency policy in shadow mode: a request it would refuse is served without taking a
/// permit (it holds none it could leak), and the permits of the requests it admitted come back
/// when their bodies end.
#[tokio::test]
async fn a_shadow_concurrency_policy_takes_no_permit_it_does_not_hold() {
    let limits = RateLimiting::builder()
        .global(
            Policy::concurrency(ConcurrencyOptions::new(2))
                .unwrap()
                .shadow(),
        )
        .rate_limit_headers(true)
        .build()
        .unwrap();
    let (streaming, mut feeds) = streaming_route(b"first;");
    let app = Router::new().route("/stream", streaming);
    let (addr, c) = serve_limited(&limits, app).await;

    // A and B hold the two permits while their bodies stream.
    let a = stream(&c, addr).await;
    let feed_a = feeds.recv().await.unwrap();
    assert_eq!(ratelimit(&a), r#""global";r=1"#);
    let b = stream(&c, addr).await;
    let feed_b = feeds.recv().await.unwrap();
    assert_eq!(ratelimit(&b), r#""global";r=0"#);
    // C would be refused: it is served, holding nothing.
    let cc = stream(&c, addr).await;
    let feed_c = feeds.recv().await.unwrap();
    assert_eq!(cc.status(), StatusCode::OK);
    assert_eq!(ratelimit(&cc), r#""global";r=0"#);
    assert_eq!(limits.shadow_rejections(GLOBAL), Some(1));

    // All three end; C's end gives nothing back, A's and B's give their permits back.
    for (resp, feed) in [(a, feed_a), (b, feed_b), (cc, feed_c)] {
        feed.send(Bytes::from_static(b"last")).await.unwrap();
        drop(feed);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "first;last");
    }
    // The server releases a permit once it has polled the body's end, an instant after the
    // client saw it: wait for both to be back (a grant that leaves 1 of 2), one request at a
    // time, each given time to release its own permit before the next.
    let mut seen = String::new();
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let d = stream(&c, addr).await;
        let feed_d = feeds.recv().await.unwrap();
        seen = ratelimit(&d).to_string();
        drop(feed_d);
        let _ = d.into_body().collect().await.unwrap();
        if seen == r#""global";r=1"# {
            break;
        }
    }
    assert_eq!(
        seen, r#""global";r=1"#,
        "both permits came back, none leaked"
    );
    // D was granted each time: no more would-be refusals, whatever the retries.
    assert_eq!(limits.shadow_rejections(GLOBAL), Some(1));
}

/// A shadow policy that queues: the wait is its decision, so a request still waits; a wait
/// that ends in a refusal (here the maximum delay) lets the request through, counted, and it
/// holds no permit of that policy.
#[tokio::test]
async fn a_shadow_queue_that_times_out_lets_the_request_through() {
    let opts = ConcurrencyOptions::new(1).with_queue(1, tollgate::QueueOrder::OldestFirst);
    let limits = RateLimiting::builder()
        .global(
            Policy::concurrency(opts)
                .unwrap()
                .queue(Some(Duration::from_millis(20)))
                .shadow(),
        )
        .build()
        .unwrap();
    let (streaming, mut feeds) = streaming_route(b"first;");
    let app = Router::new().route("/stream", streaming);
    let (addr, c) = serve_limited(&limits, app).await;

    // A holds the permit; B waits in the queue for 20 ms, then is let through.
    let a = stream(&c, addr).await;
    let feed_a = feeds.recv().await.unwrap();
    let b = stream(&c, addr).await;
    let feed_b = feeds.recv().await.unwrap();
    assert_eq!(b.status(), StatusCode::OK);
    assert_eq!(limits.shadow_rejections(GLOBAL), Some(1));
    // B holds nothing: once A's body ends, the permit is free although B still streams.
    drop(feed_a);
    let _ = a.into_body().collect().await.unwrap();
    let mut granted = false;
    let mut waited_out = 0;
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(5)).await;
        let before = limits.shadow_rejections(GLOBAL).unwrap();
        let d = stream(&c, addr).await;
        let feed_d = feeds.recv().await.unwrap();
        assert_eq!(d.status(), StatusCode::OK);
        drop(feed_d);
        let _ = d.into_body().collect().await.unwrap();
        if limits.shadow_rejections(GLOBAL).unwrap() == before {
            granted = true; // granted, not let through
            break;
        }
        waited_out += 1;
    }
    assert!(
        granted,
        "the permit came back while B, let through, still streams"
    );
    assert_eq!(
        limits.shadow_rejections(GLOBAL),
        Some(1 + waited_out),
        "every extra count is a request that waited out its delay"
    );
    drop(feed_b);
    let _ = b.into_body().collect().await.unwrap();
}
