//! The `on_granted` hook over a real axum server and client: each granted request seen once,
//! with its policies, keys, permits, wait and quota; refused requests never; a shadow policy's
//! "would refuse" seen as a grant, flagged.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::BodyExt;
use tollgate::http::{Endpoint, Granted, Key, KeyBy, Policy, RateLimiting, RateLimitingBuilder};
use tollgate::{ConcurrencyOptions, ManualClock, QueueOrder, TokenBucketOptions};

mod http_support;
use http_support::{fetch, fixed, get_with, serve_limited, stream, streaming_route};

/// One policy's part of a grant, owned: (policy, key, permits, waited, quota left, shadow).
type Seen = (
    String,
    Option<Key>,
    u32,
    Option<Duration>,
    Option<u64>,
    bool,
);

/// Each grant the hook saw: its path and its policies.
type Grants = Arc<Mutex<Vec<(String, Vec<Seen>)>>>;

/// `builder` with an `on_granted` hook that notes each grant (its path and its policies), and
/// an `on_rejected` hook that counts refusals (shadow ones apart).
fn noted(builder: RateLimitingBuilder) -> (RateLimiting, Grants, Arc<Mutex<Vec<bool>>>) {
    let granted = Arc::new(Mutex::new(Vec::new()));
    let rejected = Arc::new(Mutex::new(Vec::new()));
    let limits = builder
        .on_granted({
            let granted = granted.clone();
            move |g: &Granted<'_>| {
                let seen = g
                    .policies
                    .iter()
                    .map(|p| {
                        let left = p.quota.map(|q| q.remaining);
                        let name = p.policy.to_string();
                        (name, p.key, p.permits, p.waited, left, p.shadow_refused)
                    })
                    .collect();
                granted
                    .lock()
                    .unwrap()
                    .push((g.request.uri.path().to_string(), seen));
            }
        })
        .on_rejected({
            let rejected = rejected.clone();
            move |r| {
                rejected.lock().unwrap().push(r.shadow);
                Response::builder()
                    .status(r.status)
                    .body(Bytes::new())
                    .unwrap()
            }
        })
        .build()
        .unwrap();
    (limits, granted, rejected)
}

fn client_key() -> Key {
    // What `KeyBy::CLIENT_IP` makes of 127.0.0.1 (the test client's address).
    Key::ip(IpAddr::from([127, 0, 0, 1]))
}

#[tokio::test]
async fn each_granted_request_is_seen_once_with_its_policies_keys_and_permits() {
    let search = Policy::token_bucket(TokenBucketOptions::new(10, 10, Duration::from_secs(60)))
        .unwrap()
        .partition_by(KeyBy::CLIENT_IP)
        .cost(|req| {
            if req.uri.query() == Some("deep") {
                4
            } else {
                2
            }
        });
    let builder = RateLimiting::builder()
        .global(fixed(4, 60))
        .policy("search", search)
        .select(|req| match req.uri.path() {
            "/search" => Endpoint::Policy("search"),
            "/static" => Endpoint::Disabled,
            "/typo" => Endpoint::Policy("serach"),
            _ => Endpoint::Default,
        })
        .rate_limit_headers(true)
        .clock(ManualClock::new());
    let (limits, granted, rejected) = noted(builder);
    let app = Router::new()
        .route("/", get(|| async { "home" }))
        .route("/search", get(|| async { "results" }))
        .route("/static", get(|| async { "file" }))
        .route("/typo", get(|| async { "never" }));
    let (addr, c) = serve_limited(&limits, app).await;

    let statuses = [
        fetch(&c, addr, "/").await.status,
        fetch(&c, addr, "/search").await.status,
        fetch(&c, addr, "/search?deep").await.status,
        fetch(&c, addr, "/static").await.status, // no policy: not a grant
        fetch(&c, addr, "/typo").await.status,   // 500: refused, not a grant
        fetch(&c, addr, "/search?deep").await.status, // search has 4 left, the global 1
        fetch(&c, addr, "/").await.status,       // the global's 4 are spent: refused
    ];
    assert_eq!(
        statuses.map(|s| s.as_u16()),
        [200, 200, 200, 200, 500, 200, 429]
    );

    let g = |left| {
        (
            "global".to_string(),
            Some(Key::GLOBAL),
            1,
            None,
            Some(left),
            false,
        )
    };
    let s = |permits, left| {
        let key = Some(client_key());
        ("search".to_string(), key, permits, None, Some(left), false)
    };
    let seen = granted.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            ("/".to_string(), vec![g(3)]),
            ("/search".to_string(), vec![g(2), s(2, 8)]),
            ("/search".to_string(), vec![g(1), s(4, 4)]),
            ("/search".to_string(), vec![g(0), s(4, 0)]),
        ]
    );
    // The two refusals went to `on_rejected` alone.
    assert_eq!(*rejected.lock().unwrap(), [false, false]);
}

#[tokio::test]
async fn a_queued_grant_says_how_long_it_waited_on_the_layers_clock() {
    let clock = Arc::new(ManualClock::new());
    let one_at_a_time =
        Policy::concurrency(ConcurrencyOptions::new(1).with_queue(1, QueueOrder::OldestFirst))
            .unwrap()
            .queue(Some(Duration::from_secs(60)));
    let builder = RateLimiting::builder()
        .global(one_at_a_time)
        .clock(clock.clone());
    let (limits, granted, _) = noted(builder);
    let (streaming, mut feeds) = streaming_route(b"first;");
    let app = Router::new().route("/stream", streaming);
    let (addr, c) = serve_limited(&limits, app).await;

    // A holds the permit while its body streams; B queues behind it.
    let a = stream(&c, addr).await;
    let feed_a = feeds.recv().await.unwrap();
    let b = tokio::spawn({
        let c = c.clone();
        async move { stream(&c, addr).await }
    });
    // B is in the queue once the hook has seen A alone, and the handler has not run for B.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(granted.lock().unwrap().len(), 1);
    clock.advance(Duration::from_secs(5));
    drop(feed_a); // A's body ends: its permit goes to B
    assert_eq!(a.into_body().collect().await.unwrap().to_bytes(), "first;");
    let b = b.await.unwrap();
    assert_eq!(b.status(), StatusCode::OK);
    drop(feeds.recv().await.unwrap());

    let waits: Vec<_> = granted
        .lock()
        .unwrap()
        .iter()
        .map(|(_, seen)| (seen[0].2, seen[0].3))
        .collect();
    assert_eq!(
        waits,
        [(1, None), (1, Some(Duration::from_secs(5)))],
        "A did not queue; B waited the 5 s the clock moved"
    );
}

#[tokio::test]
async fn a_shadow_refusal_is_a_grant_flagged_and_charging_nothing() {
    let builder = RateLimiting::builder()
        .global(fixed(1, 60).partition_by(KeyBy::CLIENT_IP).shadow())
        .clock(ManualClock::new());
    let (limits, granted, rejected) = noted(builder);
    let app = Router::new().route("/", get(|| async { "home" }));
    let (addr, c) = serve_limited(&limits, app).await;

    for _ in 0..2 {
        assert_eq!(fetch(&c, addr, "/").await.status, StatusCode::OK);
    }
    let key = Some(client_key());
    let global = |permits, shadow| ("global".to_string(), key, permits, None, None, shadow);
    assert_eq!(
        *granted.lock().unwrap(),
        [
            ("/".to_string(), vec![global(1, false)]),
            ("/".to_string(), vec![global(0, true)]), // would have refused: served
        ]
    );
    assert_eq!(*rejected.lock().unwrap(), [true]); // and `on_rejected` saw it as a shadow
}

#[tokio::test]
async fn a_request_without_a_key_let_through_is_granted_with_none() {
    let by_user = fixed(5, 60)
        .partition_by(KeyBy::header(http::HeaderName::from_static("x-user")))
        .when_missing_key(tollgate::http::MissingKey::Allow);
    let builder = RateLimiting::builder().global(by_user);
    let (limits, granted, _) = noted(builder);
    let app = Router::new().route("/", get(|| async { "home" }));
    let (addr, c) = serve_limited(&limits, app).await;

    let _ = get_with(&c, addr, "/", &[("x-user", "ada")]).await;
    let _ = fetch(&c, addr, "/").await;
    let seen: Vec<_> = granted
        .lock()
        .unwrap()
        .iter()
        .map(|(_, s)| (s[0].1, s[0].2))
        .collect();
    assert_eq!(seen, [(Some(Key::from_bytes(b"ada")), 1), (None, 0)]);
}
