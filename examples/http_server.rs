//! A small axum server behind `tollgate::http`: a global per-client-IP token bucket and three
//! named policies ("login": 3 a minute per client IP; "reports": 2 at once, waiting up to 2 s
//! in a queue of 4; "search": a slow handler behind an adaptive concurrency limit that finds
//! how many it can take at once), with the IETF `RateLimit` headers on.
//!
//! ```text
//! cargo run --example http_server --features axum            # listens on 127.0.0.1:3000
//! curl -i http://127.0.0.1:3000/login
//! ```
//! Set `ADDR` to listen elsewhere.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use tollgate::adaptive::{AdaptiveOptions, Gradient};
use tollgate::http::{Endpoint, KeyBy, Policy, RateLimiting};
use tollgate::{ConcurrencyOptions, FixedWindowOptions, QueueOrder, TokenBucketOptions};

/// Searches running now.
static SEARCHING: AtomicUsize = AtomicUsize::new(0);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let limits = RateLimiting::builder()
        // Every request: bursts of 20, 10 a second, per client IP (IPv6 per /64).
        .global(
            Policy::token_bucket(TokenBucketOptions::new(20, 10, Duration::from_secs(1)))?
                .partition_by(KeyBy::CLIENT_IP),
        )
        // Logins: 3 a minute per client IP.
        .policy(
            "login",
            Policy::fixed_window(FixedWindowOptions::new(3, Duration::from_secs(60)))?
                .partition_by(KeyBy::CLIENT_IP),
        )
        // Reports are expensive: 2 at once for everybody, 4 more may wait up to 2 s.
        .policy(
            "reports",
            Policy::concurrency(ConcurrencyOptions::new(2).with_queue(4, QueueOrder::OldestFirst))?
                .queue(Some(Duration::from_secs(2)))
                .unavailable_status(http::StatusCode::SERVICE_UNAVAILABLE),
        )
        // Search is slow, and slower the more run at once: the limit follows its latency
        // (Envoy's gradient: within 10 % of the fastest it has measured), from 10 at first,
        // between 2 and 200; a refusal is a 503.
        .policy(
            "search",
            Policy::adaptive(
                AdaptiveOptions::new(10)
                    .with_bounds(2, 200)
                    .with_window(Duration::from_millis(500), 10)
                    .with_algorithm(Gradient::new().with_buffer_permille(100)),
            )?,
        )
        .select(|req| match req.uri.path() {
            "/health" => Endpoint::Disabled,
            _ => Endpoint::Default,
        })
        .rate_limit_headers(true)
        .rejection_body("Too many requests, slow down.\n")
        .build()?;

    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .route(
            "/login",
            get(|| async { "welcome\n" }).layer(limits.policy_layer("login")?),
        )
        .route(
            "/reports",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                "report\n"
            })
            .layer(limits.policy_layer("reports")?),
        )
        .route(
            "/search",
            get(|| async {
                // A backend that serves 8 at once in 50 ms and queues the rest: its latency
                // grows with the load on it.
                let running = SEARCHING.fetch_add(1, Ordering::SeqCst) + 1;
                let ms = 50 * (running as u64).div_ceil(8);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                SEARCHING.fetch_sub(1, Ordering::SeqCst);
                "results\n"
            })
            .layer(limits.policy_layer("search")?),
        )
        .route("/health", get(|| async { "ok\n" }))
        .layer(limits.layer());

    let addr: SocketAddr = std::env::var("ADDR")
        .unwrap_or_else(|_| "127.0.0.1:3000".into())
        .parse()?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("listening on http://{}", listener.local_addr()?);
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
