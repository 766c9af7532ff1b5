//! The adaptive HTTP policy (issue 39): an admitted request holds its lease until its response
//! body ends; a 5xx, a 429 from upstream or a failed inner service is a drop and backs the
//! limit off; other 4xx say nothing; refusals are 503s. Over a real axum server, then
//! through tower on a manual clock.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use tollgate::adaptive::{AdaptiveLimiter, AdaptiveOptions, Aimd};
use tollgate::http::{Policy, RateLimiting};
use tollgate::ManualClock;
use tower::{service_fn, Layer, ServiceExt};

/// The layer's limits: `limiter` as the global policy.
fn limits<C: tollgate::Clock + Send + Sync + 'static>(
    limiter: &Arc<AdaptiveLimiter<C>>,
) -> RateLimiting {
    RateLimiting::builder()
        .global(Policy::adaptive_limiter(limiter.clone()))
        .build()
        .unwrap()
}

/// A limiter of 4 (bounds 1..=8) whose windows close every 2 samples after 10 ms.
fn limiter(clock: Arc<ManualClock>) -> Arc<AdaptiveLimiter<Arc<ManualClock>>> {
    let opts = AdaptiveOptions::new(4)
        .with_bounds(1, 8)
        .with_window(Duration::from_millis(10), 2)
        .with_algorithm(Aimd::new());
    Arc::new(AdaptiveLimiter::with_clock(opts, clock).unwrap())
}

#[tokio::test]
async fn server_errors_back_off_client_errors_say_nothing_and_refusals_are_503() {
    let clock = Arc::new(ManualClock::new());
    let limiter = limiter(clock.clone());
    let limits = limits(&limiter);
    // The handler answers the status it is told to.
    let status = Arc::new(AtomicU16::new(200));
    let s = status.clone();
    let handler = move |_: Request<()>| {
        let code = StatusCode::from_u16(s.load(Ordering::SeqCst)).unwrap();
        async move {
            let mut r = Response::new("");
            *r.status_mut() = code;
            Ok::<_, Infallible>(r)
        }
    };
    let app = limits.layer().layer(service_fn(handler));
    let call = || app.clone().oneshot(Request::get("/").body(()).unwrap());

    // Four responses streaming: the limit is in use; a fifth request is refused with a 503.
    let mut open = Vec::new();
    for _ in 0..4 {
        open.push(call().await.unwrap());
    }
    assert_eq!(
        call().await.unwrap().status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    // They end after 10 ms, all fine and the limit in full use: + 1.
    clock.advance(Duration::from_millis(10));
    open.clear();
    assert_eq!(limiter.limit(), 5);

    // Two 503s from upstream: a window with drops, × 0.9.
    status.store(503, Ordering::SeqCst);
    let failed = [call().await.unwrap(), call().await.unwrap()];
    clock.advance(Duration::from_millis(10));
    drop(failed);
    assert_eq!(limiter.limit(), 4);

    // 404s say nothing about capacity: no window closes on them.
    status.store(404, Ordering::SeqCst);
    clock.advance(Duration::from_millis(10));
    for _ in 0..10 {
        drop(call().await.unwrap());
    }
    assert_eq!(limiter.limit(), 4);
    assert_eq!(limiter.available_permits(), 4);
}

#[tokio::test]
async fn a_failed_inner_service_is_a_drop() {
    let clock = Arc::new(ManualClock::new());
    let limiter = limiter(clock.clone());
    let limits = limits(&limiter);
    let failing = |_: Request<()>| async { Err::<Response<&str>, _>("upstream timed out") };
    let app = limits.layer().layer(service_fn(failing));
    clock.advance(Duration::from_millis(10));
    for _ in 0..2 {
        assert!(app
            .clone()
            .oneshot(Request::get("/").body(()).unwrap())
            .await
            .is_err());
    }
    assert_eq!(limiter.limit(), 3); // 4 × 0.9, at least one less
    assert_eq!(limiter.available_permits(), 3);
}

/// Over TCP: a slow handler behind an adaptive policy of 2. Six clients at once: the two
/// admitted are held in the handler (behind a gate) until the four others have their 503s;
/// then they finish, and every permit is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_server_protects_a_slow_handler() {
    let limiter =
        Arc::new(AdaptiveLimiter::new(AdaptiveOptions::new(2).with_bounds(1, 2)).unwrap());
    let limits = limits(&limiter);
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let g = gate.clone();
    let app = axum::Router::new()
        .route(
            "/slow",
            axum::routing::get(move || {
                let g = g.clone();
                async move {
                    g.acquire().await.unwrap().forget(); // the slow work
                    "done"
                }
            }),
        )
        .layer(limits.layer());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let get = move || async move {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let io = hyper_util::rt::TokioIo::new(stream);
        let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        let req = Request::get("/slow")
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        send.send_request(req).await.unwrap().status()
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..6 {
        let tx = tx.clone();
        tokio::spawn(async move { tx.send(get().await).unwrap() });
    }
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(rx.recv().await.unwrap());
    }
    assert!(
        statuses
            .iter()
            .all(|s| *s == StatusCode::SERVICE_UNAVAILABLE),
        "{statuses:?}"
    );
    gate.add_permits(2); // the slow work ends
    for _ in 0..2 {
        assert_eq!(rx.recv().await.unwrap(), StatusCode::OK);
    }
    // The bodies have ended on the server: every permit is back.
    for _ in 0..100 {
        if limiter.available_permits() == u64::from(limiter.limit()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(limiter.available_permits(), u64::from(limiter.limit()));
}

/// `Policy::adaptive(..).partition_by(..)`: an adaptive limit per key (here per upstream, named
/// by a header), each learning from its own requests, on the layer's clock; the legacy quota
/// headers report the key's limit now.
#[tokio::test]
async fn a_partitioned_adaptive_policy_learns_one_limit_per_key() {
    use tollgate::http::KeyBy;
    let clock = Arc::new(ManualClock::new());
    let opts = AdaptiveOptions::new(4)
        .with_bounds(1, 8)
        .with_window(Duration::from_millis(10), 2)
        .with_algorithm(Aimd::new());
    let upstream = http::HeaderName::from_static("x-upstream");
    let limits = RateLimiting::builder()
        .global(
            Policy::adaptive(opts)
                .unwrap()
                .partition_by(KeyBy::header(upstream.clone())),
        )
        .legacy_headers(true)
        .clock(clock.clone())
        .build()
        .unwrap();
    // "flaky" answers 503 (a drop), "sound" 200.
    let handler = |req: Request<()>| async move {
        let mut r = Response::new("");
        if req.headers()["x-upstream"] == "flaky" {
            *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        }
        Ok::<_, Infallible>(r)
    };
    let app = limits.layer().layer(service_fn(handler));
    let call = |to: &'static str| {
        let req = Request::get("/").header("x-upstream", to).body(()).unwrap();
        app.clone().oneshot(req)
    };
    let limit_of = |r: &Response<_>| {
        r.headers()["x-ratelimit-limit"]
            .to_str()
            .unwrap()
            .to_owned()
    };

    // Four calls in flight on each: each key's limit of 4 is in full use; a fifth is refused.
    let mut open = Vec::new();
    for to in ["flaky", "sound"] {
        for _ in 0..4 {
            open.push(call(to).await.unwrap());
        }
        assert_eq!(
            call(to).await.unwrap().status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
    }
    clock.advance(Duration::from_millis(10));
    open.clear();
    // The flaky upstream's window had drops: 4 × 0.9 → 3; the sound one's was full: + 1.
    let flaky = call("flaky").await.unwrap();
    let sound = call("sound").await.unwrap();
    assert_eq!(
        (limit_of(&flaky), limit_of(&sound)),
        ("3".to_owned(), "5".to_owned())
    );
    assert_eq!(limits.partitions(tollgate::http::GLOBAL), Some(2));
}

/// Partitioned adaptive policies refuse cost and outcome charging at build time, as a global
/// one does.
#[test]
fn an_adaptive_policy_does_not_charge_by_cost() {
    let policy = Policy::adaptive(AdaptiveOptions::new(4))
        .unwrap()
        .cost(|_| 2);
    assert!(RateLimiting::builder().global(policy).build().is_err());
    assert!(Policy::adaptive(AdaptiveOptions::new(0)).is_err());
}
