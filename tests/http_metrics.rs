//! The layer's standard metrics end to end (issue 40): a real axum server on 127.0.0.1 serving
//! the limited routes and, outside the limits, `/metrics` rendered by
//! `metrics-exporter-prometheus`; a real hyper client over TCP; time from a `ManualClock`, so
//! that every duration is exact.
//!
//! Each test has its own Prometheus recorder, made current (`metrics::with_local_recorder`)
//! while the layer is built: the layer registers its instruments then, so the tests share no
//! global recorder.
#![cfg(all(feature = "axum", feature = "metrics"))]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::BodyExt;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tollgate::http::{Endpoint, Policy, RateLimiting, RateLimitingBuilder, Settle};
use tollgate::{ConcurrencyOptions, ManualClock, QueueOrder};

mod http_support;
use http_support::{client, fetch, fixed, serve, stream, streaming_route, HttpClient};

/// Buckets of the two histograms, in seconds.
const BUCKETS: &[f64] = &[0.5, 1.5, 2.5, 3.5];

/// `builder` built under a fresh Prometheus recorder: the limits, and the recorder's handle.
fn build_metered(builder: RateLimitingBuilder) -> (RateLimiting, PrometheusHandle) {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Prefix("tollgate.http".into()), BUCKETS)
        .unwrap()
        .build_recorder();
    let handle = recorder.handle();
    let limits = metrics::with_local_recorder(&recorder, || builder.metrics(true).build()).unwrap();
    (limits, handle)
}

/// The app: `limited` behind the layer, `/metrics` outside it.
fn with_metrics(limited: Router, prometheus: PrometheusHandle) -> Router {
    Router::new()
        .route("/metrics", get(move || async move { prometheus.render() }))
        .merge(limited)
}

/// A scrape of `/metrics`: each sample by its name and labels.
struct Scrape(BTreeMap<(String, BTreeMap<String, String>), f64>);

impl Scrape {
    async fn of(c: &HttpClient, addr: SocketAddr) -> Self {
        let got = fetch(c, addr, "/metrics").await;
        let (status, body) = (got.status, got.body);
        assert_eq!(status, StatusCode::OK);
        Self::parse(std::str::from_utf8(&body).unwrap())
    }

    fn parse(text: &str) -> Self {
        let mut samples = BTreeMap::new();
        for line in text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let (series, value) = line.rsplit_once(' ').unwrap();
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.trim_end_matches('}')),
                None => (series, ""),
            };
            let labels = labels
                .split(',')
                .filter(|l| !l.is_empty())
                .map(|l| {
                    let (k, v) = l.split_once('=').unwrap();
                    (k.to_string(), v.trim_matches('"').to_string())
                })
                .collect();
            samples.insert((name.to_string(), labels), value.parse().unwrap());
        }
        Self(samples)
    }

    /// The sample `name{labels}`, if the scrape has it.
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.0.get(&(name.to_string(), labels)).copied()
    }

    /// The sample `name{labels}`, which the scrape must have.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels)
            .unwrap_or_else(|| panic!("no sample {name}{labels:?} in {:#?}", self.0.keys()))
    }

    /// `tollgate_http_rate_limiting_requests{policy, result}` (0 when not yet counted).
    fn requests(&self, policy: &str, result: &str) -> f64 {
        let labels = [("policy", policy), ("result", result)];
        self.get("tollgate_http_rate_limiting_requests", &labels)
            .unwrap_or(0.0)
    }

    fn gauge(&self, name: &str, policy: &str) -> f64 {
        self.value(
            &format!("tollgate_http_rate_limiting_{name}"),
            &[("policy", policy)],
        )
    }

    /// A histogram's count, sum and cumulative bucket counts (by `BUCKETS`, then `+Inf`).
    fn histogram(&self, name: &str, labels: &[(&str, &str)]) -> (f64, f64, Vec<f64>) {
        let name = format!("tollgate_http_rate_limiting_{name}");
        let count = self.value(&format!("{name}_count"), labels);
        let sum = self.value(&format!("{name}_sum"), labels);
        let les: Vec<String> = BUCKETS
            .iter()
            .map(f64::to_string)
            .chain(["+Inf".to_string()])
            .collect();
        let buckets = les
            .iter()
            .map(|le| {
                let mut with_le = labels.to_vec();
                with_le.push(("le", le));
                self.value(&format!("{name}_bucket"), &with_le)
            })
            .collect();
        (count, sum, buckets)
    }
}

/// Scrapes until `done` holds (the server finishes a response an instant after the client has
/// it all: a lease ends when the server has polled the body's end).
async fn scrape_until(c: &HttpClient, addr: SocketAddr, done: impl Fn(&Scrape) -> bool) -> Scrape {
    for _ in 0..2000 {
        let s = Scrape::of(c, addr).await;
        if done(&s) {
            return s;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("the metrics never reached the expected state");
}

/// Requests by result, per policy, with exact counts; the rate policies' leases (from the
/// grant to the end of the body) on a clock that does not move: all of duration 0.
#[tokio::test]
async fn requests_are_counted_by_policy_and_result() {
    let clock = Arc::new(ManualClock::new());
    let (limits, prometheus) = build_metered(
        RateLimiting::builder()
            .global(fixed(8, 60))
            .policy("api", fixed(2, 60))
            .policy("trial", fixed(1, 60).shadow())
            .select(|req| match req.uri.path() {
                "/api" => Endpoint::Policy("api"),
                "/trial" => Endpoint::Policy("trial"),
                _ => Endpoint::Default,
            })
            .clock(clock.clone()),
    );
    let limited = Router::new()
        .route("/", get(|| async { "home" }))
        .route("/api", get(|| async { "api" }))
        .route("/trial", get(|| async { "trial" }))
        .layer(limits.layer().for_axum());
    let addr = serve(with_metrics(limited, prometheus)).await;
    let c = client();

    let mut statuses = Vec::new();
    for path in [
        "/api", "/api", "/api", "/trial", "/trial", "/trial", "/", "/", "/", "/",
    ] {
        statuses.push(fetch(&c, addr, path).await.status.as_u16());
    }
    // Global: 8 a minute, the 9th and 10th refused. "api": 2 a minute. "trial": 1 a minute,
    // in shadow mode: its 2 over the limit are served.
    assert_eq!(statuses, [200, 200, 429, 200, 200, 200, 200, 200, 429, 429]);
    let s = scrape_until(&c, addr, |s| {
        s.gauge("active_request_leases", "global") == 0.0
    })
    .await;

    assert_eq!(s.requests("global", "acquired"), 8.0);
    assert_eq!(s.requests("global", "global_limiter"), 2.0);
    assert_eq!(s.requests("api", "acquired"), 2.0);
    assert_eq!(s.requests("api", "endpoint_limiter"), 1.0);
    assert_eq!(s.requests("trial", "acquired"), 1.0);
    assert_eq!(s.requests("trial", "shadow_rejected"), 2.0);
    assert_eq!(s.requests("trial", "endpoint_limiter"), 0.0);
    assert_eq!(limits.shadow_rejections("trial"), Some(2));

    // Every granted request held a lease per policy until its body ended; the clock did not
    // move: 8 leases of 0 s on the global policy, 2 on "api", 1 on "trial".
    let global = s.histogram("request_lease_duration", &[("policy", "global")]);
    assert_eq!(global, (8.0, 0.0, vec![8.0; BUCKETS.len() + 1]));
    let api = s.histogram("request_lease_duration", &[("policy", "api")]);
    assert_eq!(api, (2.0, 0.0, vec![2.0; BUCKETS.len() + 1]));
    let trial = s.histogram("request_lease_duration", &[("policy", "trial")]);
    assert_eq!(trial, (1.0, 0.0, vec![1.0; BUCKETS.len() + 1]));
    for policy in ["global", "api", "trial"] {
        assert_eq!(s.gauge("active_request_leases", policy), 0.0);
    }
}

/// Ends a streamed response: its last chunk, then the end of its body.
async fn finish(resp: Response<hyper::body::Incoming>, feed: mpsc::Sender<Bytes>) {
    feed.send(Bytes::from_static(b"last")).await.unwrap();
    drop(feed);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "first;last");
}

/// A concurrency policy that queues: active leases and queued requests go up and down, the
/// lease duration runs from the grant to the end of the body, the time in queue from the
/// arrival in the queue to the grant, and a client that hangs up while queued is
/// `request_canceled`. Every duration is exact (a manual clock, moved only between steps).
#[tokio::test]
async fn leases_and_queue_times_are_histograms_in_seconds() {
    let clock = Arc::new(ManualClock::new());
    let one_at_a_time = ConcurrencyOptions::new(1).with_queue(1, QueueOrder::OldestFirst);
    let (limits, prometheus) = build_metered(
        RateLimiting::builder()
            .global(fixed(100, 3600))
            .policy(
                "reports",
                Policy::concurrency(one_at_a_time).unwrap().queue(None),
            )
            .select(|_| Endpoint::Policy("reports"))
            .clock(clock.clone()),
    );
    let (streaming, mut feeds) = streaming_route(b"first;");
    let limited = Router::new()
        .route("/stream", streaming)
        .layer(limits.layer().for_axum());
    let addr = serve(with_metrics(limited, prometheus)).await;
    let c = client();
    let queued = |n: f64| move |s: &Scrape| s.gauge("queued_requests", "reports") == n;

    // t = 0: A holds the permit while its body streams.
    let a = stream(&c, addr).await;
    let feed_a = feeds.recv().await.unwrap();
    let s = Scrape::of(&c, addr).await;
    assert_eq!(s.gauge("active_request_leases", "reports"), 1.0);
    assert_eq!(s.gauge("active_request_leases", "global"), 1.0);

    // t = 0: B queues (over raw TCP, so that it can hang up); at t = 1 it hangs up.
    let mut b = tokio::net::TcpStream::connect(addr).await.unwrap();
    b.write_all(b"GET /stream HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    scrape_until(&c, addr, queued(1.0)).await;
    clock.advance(Duration::from_secs(1));
    drop(b);
    let s = scrape_until(&c, addr, |s| {
        s.requests("reports", "request_canceled") == 1.0
            && s.gauge("queued_requests", "reports") == 0.0
    })
    .await;
    let canceled = s.histogram(
        "request_time_in_queue",
        &[("policy", "reports"), ("result", "request_canceled")],
    );
    assert_eq!(canceled, (1.0, 1.0, vec![0.0, 1.0, 1.0, 1.0, 1.0]));

    // t = 1: C queues; at t = 3, A's body ends: A's leases last 3 s, C is granted after 2 s.
    let cc = tokio::spawn({
        let c = c.clone();
        async move { stream(&c, addr).await }
    });
    scrape_until(&c, addr, queued(1.0)).await;
    clock.advance(Duration::from_secs(2));
    finish(a, feed_a).await;
    let cc = cc.await.unwrap();
    assert_eq!(cc.status(), StatusCode::OK);
    let feed_c = feeds.recv().await.unwrap();
    // t = 4: C's body ends: its "reports" lease lasts 1 s, its global one 3 s.
    clock.advance(Duration::from_secs(1));
    finish(cc, feed_c).await;
    let s = scrape_until(&c, addr, |s| {
        s.gauge("active_request_leases", "reports") == 0.0
            && s.gauge("active_request_leases", "global") == 0.0
    })
    .await;

    assert_eq!(s.requests("reports", "acquired"), 2.0);
    assert_eq!(s.requests("reports", "request_canceled"), 1.0);
    assert_eq!(s.requests("reports", "endpoint_limiter"), 0.0);
    assert_eq!(s.requests("global", "acquired"), 3.0);
    assert_eq!(s.gauge("queued_requests", "reports"), 0.0);

    let waited = s.histogram(
        "request_time_in_queue",
        &[("policy", "reports"), ("result", "acquired")],
    );
    assert_eq!(waited, (1.0, 2.0, vec![0.0, 0.0, 1.0, 1.0, 1.0]));
    // "reports": A 3 s, C 1 s.
    let reports = s.histogram("request_lease_duration", &[("policy", "reports")]);
    assert_eq!(reports, (2.0, 4.0, vec![0.0, 1.0, 1.0, 2.0, 2.0]));
    // Global: A 3 s (t 0 → 3), B 1 s (t 0 → 1, dropped with its wait), C 3 s (t 1 → 4).
    let global = s.histogram("request_lease_duration", &[("policy", "global")]);
    assert_eq!(global, (3.0, 7.0, vec![0.0, 1.0, 1.0, 3.0, 3.0]));
}

/// The instruments carry their descriptions and units in the exposition.
#[tokio::test]
async fn the_instruments_are_described() {
    let (limits, prometheus) = build_metered(RateLimiting::builder().global(fixed(1, 60)));
    let limited = Router::new()
        .route("/", get(|| async { "home" }))
        .layer(limits.layer());
    let addr = serve(with_metrics(limited, prometheus)).await;
    let c = client();
    assert_eq!(fetch(&c, addr, "/").await.status, StatusCode::OK);
    assert_eq!(
        fetch(&c, addr, "/").await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    let text = fetch(&c, addr, "/metrics").await.body;
    let text = std::str::from_utf8(&text).unwrap();
    for line in [
        "# TYPE tollgate_http_rate_limiting_requests counter",
        "# TYPE tollgate_http_rate_limiting_active_request_leases gauge",
        "# TYPE tollgate_http_rate_limiting_queued_requests gauge",
        "# TYPE tollgate_http_rate_limiting_request_lease_duration histogram",
        "# TYPE tollgate_http_rate_limiting_request_time_in_queue histogram",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    let s = Scrape::parse(text);
    assert_eq!(s.requests("global", "acquired"), 1.0);
    assert_eq!(s.requests("global", "global_limiter"), 1.0);
}

/// A settle past the debt bound is counted as `settles_refused`, per policy; the request kept
/// its charge and was served.
#[tokio::test]
async fn settles_refused_past_the_debt_bound_are_counted() {
    let tokens = fixed(100, 60)
        .cost(|_| 10)
        .settle_by(Settle::header("x-tokens-used"));
    let (limits, prometheus) = build_metered(
        RateLimiting::builder()
            .policy("tokens", tokens)
            .select(|_| Endpoint::Policy("tokens"))
            .clock(ManualClock::new()),
    );
    let greedy = || async { ([("x-tokens-used", "100000")], "used a lot") };
    let limited = Router::new()
        .route("/complete", get(greedy))
        .layer(limits.layer().for_axum());
    let addr = serve(with_metrics(limited, prometheus)).await;
    let c = client();
    for _ in 0..2 {
        assert_eq!(fetch(&c, addr, "/complete").await.status, StatusCode::OK);
    }
    let scrape = Scrape::of(&c, addr).await;
    let refused = scrape.value(
        "tollgate_http_rate_limiting_settles_refused",
        &[("policy", "tokens")],
    );
    assert_eq!(refused, 2.0);
    assert_eq!(limits.unsettled("tokens"), Some(2));
    assert_eq!(scrape.requests("tokens", "acquired"), 2.0);
}
