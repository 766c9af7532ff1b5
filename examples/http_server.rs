//! A small axum server behind `tollgate::http`: a global per-client-IP token bucket and two
//! named policies ("login": 3 a minute per client IP; "reports": 2 at once, waiting up to 2 s
//! in a queue of 4), with the IETF `RateLimit` headers on.
//!
//! ```text
//! cargo run --example http_server --features axum            # listens on 127.0.0.1:3000
//! curl -i http://127.0.0.1:3000/login
//! ```
//! Set `ADDR` to listen elsewhere.

use std::net::SocketAddr;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use tollgate::http::{Endpoint, KeyBy, Policy, RateLimiting};
use tollgate::{ConcurrencyOptions, FixedWindowOptions, QueueOrder, TokenBucketOptions};

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
