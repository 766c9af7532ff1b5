//! The layer's standard metrics on a Prometheus endpoint: an axum server with a global
//! per-client-IP token bucket, a "reports" concurrency policy that queues, and a stricter
//! "search" limit tried out in shadow mode (it counts what it would refuse and refuses
//! nothing). `GET /metrics` renders the Prometheus text of `metrics-exporter-prometheus`'s
//! recorder (no HTTP listener of the exporter's own: the route is the app's).
//!
//! ```text
//! cargo run --example http_metrics --features axum,metrics   # listens on 127.0.0.1:3000
//! curl -s http://127.0.0.1:3000/search >/dev/null
//! curl -s http://127.0.0.1:3000/metrics | grep tollgate_http
//! ```
//! Set `ADDR` to listen elsewhere.

use std::net::SocketAddr;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use tollgate::http::{Endpoint, KeyBy, Policy, RateLimiting};
use tollgate::{ConcurrencyOptions, FixedWindowOptions, QueueOrder, TokenBucketOptions};

/// Histogram buckets, in seconds, for the lease duration and the time in queue.
const BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The recorder first: the layer registers its instruments when it is built.
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Prefix("tollgate.http.rate_limiting.".into()),
            BUCKETS,
        )?
        .build_recorder();
    let prometheus = recorder.handle();
    metrics::set_global_recorder(recorder)?;

    let limits = RateLimiting::builder()
        // Every request: bursts of 20, 10 a second, per client IP.
        .global(
            Policy::token_bucket(TokenBucketOptions::new(20, 10, Duration::from_secs(1)))?
                .partition_by(KeyBy::CLIENT_IP),
        )
        // Reports: 2 at once, 4 more may wait up to 2 s.
        .policy(
            "reports",
            Policy::concurrency(ConcurrencyOptions::new(2).with_queue(4, QueueOrder::OldestFirst))?
                .queue(Some(Duration::from_secs(2))),
        )
        // A limit under trial: 5 searches a minute per client IP, in shadow mode.
        .policy(
            "search",
            Policy::fixed_window(FixedWindowOptions::new(5, Duration::from_secs(60)))?
                .partition_by(KeyBy::CLIENT_IP)
                .shadow(),
        )
        .select(|req| match req.uri.path() {
            "/reports" => Endpoint::Policy("reports"),
            "/search" => Endpoint::Policy("search"),
            _ => Endpoint::Default,
        })
        .rate_limit_headers(true)
        .metrics(true)
        .build()?;

    let limited = Router::new()
        .route("/", get(|| async { "home" }))
        .route(
            "/reports",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                "report"
            }),
        )
        .route("/search", get(|| async { "results" }))
        .layer(limits.layer().for_axum());
    // The scrape route is outside the limits.
    let app = Router::new()
        .route("/metrics", get(move || async move { prometheus.render() }))
        .merge(limited);

    let addr: SocketAddr = std::env::var("ADDR")
        .unwrap_or_else(|_| "127.0.0.1:3000".into())
        .parse()?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("listening on http://{addr} (metrics on /metrics)");
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
