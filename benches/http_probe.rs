//! Per-request instruction probe for `tollgate::http` (issue 13): one axum `Router` with one
//! route answering a small static body, driven in-process by `tower::ServiceExt::oneshot` on a
//! current-thread tokio runtime, each request carrying axum's `ConnectInfo` (as
//! `into_make_service_with_connect_info` inserts it) so peer-IP keys work.
//!
//! ```text
//! http_probe <mode> <requests>
//!   mode: plain | governor-allow | governor-reject
//!         | tollgate-allow | tollgate-allow-global | tollgate-reject          (RateLimitLayer)
//!         | tollgate-axum-allow | tollgate-axum-allow-global | tollgate-axum-reject
//!                                             (RateLimitLayer::for_axum, axum's own Body)
//!         | tollgate-axum-allow-coarse          (the same on a CoarseClock)
//!         | tollgate-axum-select-allow | tollgate-axum-select-reject
//!                                             (a selector: the general path, not the fast one)
//! ```
//! The limited modes copy `benches/http_load/server.rs`: keyed by peer IP, `allow` limits no
//! run reaches, `reject` one request an hour. `tollgate-allow-global` is one unkeyed bucket.
//! After 100 warm-up requests (first-use costs such as governor's clock calibration), `n` more
//! run inside `measured`. Run it under callgrind collecting only there, at N and 2N requests,
//! and difference the totals:
//!
//! ```text
//! cargo bench --features axum --bench http_probe --no-run
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*measured*' \
//!     target/release/deps/http_probe-<hash> tollgate-allow 1000
//! ```
//! (`cargo bench --features axum --bench http_probe -- <mode> <n>` also runs it, natively.)

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::Request;
use axum::routing::get;
use axum::Router;
use tollgate::http::{Endpoint, KeyBy, Policy, RateLimiting, RateLimitingBuilder};
use tollgate::TokenBucketOptions;
use tower::ServiceExt;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::PeerIpKeyExtractor;
use tower_governor::GovernorLayer;

fn tollgate(limit: u32, per: Duration, key: KeyBy) -> RateLimiting {
    builder(limit, per, key).build().expect("valid policy")
}

fn builder(limit: u32, per: Duration, key: KeyBy) -> RateLimitingBuilder {
    RateLimiting::builder().global(
        Policy::token_bucket(TokenBucketOptions::new(limit, limit, per))
            .expect("valid options")
            .partition_by(key),
    )
}

/// The same per-IP policy behind a selector (which sends every request to the global policy
/// alone): decided on the general path.
fn selected(limit: u32, per: Duration) -> RateLimiting {
    builder(limit, per, KeyBy::CLIENT_IP)
        .select(|_| Endpoint::Default)
        .build()
        .expect("valid policy")
}

fn app(mode: &str) -> Router {
    let base = Router::new().route("/", get(|| async { "hello" }));
    let allow = |key| tollgate(1_000_000_000, Duration::from_secs(10), key);
    let reject = || tollgate(1, Duration::from_secs(3600), KeyBy::CLIENT_IP);
    match mode {
        "plain" => base,
        "tollgate-allow" => base.layer(allow(KeyBy::CLIENT_IP).layer()),
        "tollgate-allow-global" => base.layer(allow(KeyBy::Global).layer()),
        "tollgate-reject" => base.layer(reject().layer()),
        "tollgate-axum-allow" => base.layer(allow(KeyBy::CLIENT_IP).layer().for_axum()),
        "tollgate-axum-allow-global" => base.layer(allow(KeyBy::Global).layer().for_axum()),
        "tollgate-axum-reject" => base.layer(reject().layer().for_axum()),
        // The layer's clock a CoarseClock (here refreshed by hand, never: the probe runs in
        // well under one period): what reading the time costs.
        "tollgate-axum-allow-coarse" => base.layer(
            RateLimiting::builder()
                .global(
                    Policy::token_bucket(TokenBucketOptions::new(
                        1_000_000_000,
                        1_000_000_000,
                        Duration::from_secs(10),
                    ))
                    .expect("valid options")
                    .partition_by(KeyBy::CLIENT_IP),
                )
                .clock(tollgate::CoarseClock::manual())
                .build()
                .expect("valid policy")
                .layer()
                .for_axum(),
        ),
        "tollgate-axum-select-allow" => base.layer(
            selected(1_000_000_000, Duration::from_secs(10))
                .layer()
                .for_axum(),
        ),
        "tollgate-axum-select-reject" => {
            base.layer(selected(1, Duration::from_secs(3600)).layer().for_axum())
        }
        "governor-allow" => {
            let config = GovernorConfigBuilder::default()
                .per_nanosecond(1)
                .burst_size(u32::MAX / 2)
                .key_extractor(PeerIpKeyExtractor)
                .finish()
                .expect("valid governor config");
            base.layer(GovernorLayer::new(Arc::new(config)))
        }
        "governor-reject" => {
            let config = GovernorConfigBuilder::default()
                .per_second(3600)
                .burst_size(1)
                .key_extractor(PeerIpKeyExtractor)
                .finish()
                .expect("valid governor config");
            base.layer(GovernorLayer::new(Arc::new(config)))
        }
        other => {
            eprintln!("unknown mode {other:?}");
            std::process::exit(2);
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; skip flags.
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let mode = args.next().unwrap_or_else(|| "plain".into());
    let n: u64 = args.next().map_or(1000, |s| s.parse().expect("a count"));
    // As `axum::serve` does (`into_make_service*` call `with_state(())`): handlers become
    // routes, layered, once, rather than per request.
    let app: Router = app(&mode).with_state(());
    let peer = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)), 51_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let want = if mode.ends_with("reject") { 429 } else { 200 };
    // Warm up (first-use costs: governor's clock calibration, table growth), then measure.
    let warm = run(&rt, &app, peer, 100, want);
    let ok = warm + measured(&rt, &app, peer, n, want);
    let n = n + 100;
    // The first request of a reject mode is admitted.
    let expected = if want == 429 { n.saturating_sub(1) } else { n };
    assert!(ok >= expected, "{mode}: {ok} of {n} answered {want}");
    eprintln!("{mode}: {n} requests, {ok} answered {want}");
}

/// `n` requests; returns how many answered `want`.
fn run(rt: &tokio::runtime::Runtime, app: &Router, peer: SocketAddr, n: u64, want: u16) -> u64 {
    let mut ok = 0u64;
    rt.block_on(async {
        for _ in 0..n {
            let mut req = Request::get("/").body(Body::empty()).expect("a request");
            req.extensions_mut().insert(ConnectInfo(peer));
            let resp = app.clone().oneshot(req).await.expect("infallible");
            ok += u64::from(resp.status().as_u16() == want);
            black_box(resp);
        }
    });
    ok
}

/// The measured requests: under callgrind, collect only inside this function
/// (`--collect-atstart=no --toggle-collect=http_probe::measured`).
#[inline(never)]
fn measured(
    rt: &tokio::runtime::Runtime,
    app: &Router,
    peer: SocketAddr,
    n: u64,
    want: u16,
) -> u64 {
    run(rt, app, peer, n, want)
}
