//! The server side of `benches/http_load.sh`: one axum app, bare or behind a rate-limiting
//! layer, on one tokio worker thread.
//!
//! ```text
//! http_load <mode> <addr>
//!   mode: plain | tollgate-allow | tollgate-reject | governor-allow | governor-reject
//!         | tollgate-axum-allow | tollgate-axum-reject   (`RateLimitLayer::for_axum`)
//!         | shadow-allow | shadow-refuse              (`Policy::shadow`: refuses nothing)
//!         | cost-allow | cost-reject                  (`Policy::cost`)
//!         | outcome-allow | outcome-reject            (`Policy::charge_when`)
//!         | metrics-allow | metrics-reject            (feature `metrics`: `metrics(true)`,
//!                                                      a Prometheus recorder installed)
//!         | hook-allow                                (`on_granted`, counting grants)
//! ```
//! Every limited mode keys by the peer IP, as a public server would: `allow` modes have limits
//! no load test reaches, `reject` modes admit one request an hour (so nearly every request of
//! a run is refused). The modes after `tollgate-axum-*` are `for_axum` layers of the same
//! token bucket with one thing switched on: `shadow-refuse` is the shadow policy's "would
//! refuse" path (served, 200); `outcome-allow` charges client errors only (every 200 is
//! charged, then refunded at its response head), `outcome-reject` successes (the first one
//! spends the hour's permit).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use tollgate::http::{AxumLayer, Granted, KeyBy, Policy, RateLimiting, RateLimitingBuilder};
use tollgate::TokenBucketOptions;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::PeerIpKeyExtractor;
use tower_governor::GovernorLayer;

fn tollgate(limit: u32, per: Duration) -> RateLimiting {
    tollgate_with(limit, per, |p| p, |b| b)
}

/// The per-IP token bucket of `limit` per `per`, the policy and the builder changed by
/// `policy` and `builder`.
fn tollgate_with(
    limit: u32,
    per: Duration,
    policy: impl FnOnce(Policy) -> Policy,
    builder: impl FnOnce(RateLimitingBuilder) -> RateLimitingBuilder,
) -> RateLimiting {
    let p = Policy::token_bucket(TokenBucketOptions::new(limit, limit, per))
        .expect("valid options")
        .partition_by(KeyBy::CLIENT_IP);
    builder(RateLimiting::builder().global(policy(p)))
        .build()
        .expect("valid policy")
}

/// A `for_axum` layer of `tollgate_with`: `allow` (a limit never reached) or not (one request
/// an hour).
fn variant(
    allow: bool,
    policy: impl FnOnce(Policy) -> Policy,
    builder: impl FnOnce(RateLimitingBuilder) -> RateLimitingBuilder,
) -> AxumLayer {
    let (limit, per) = if allow {
        (1_000_000_000, Duration::from_secs(10))
    } else {
        (1, Duration::from_secs(3600))
    };
    tollgate_with(limit, per, policy, builder)
        .layer()
        .for_axum()
}

fn app(mode: &str) -> Router {
    let base = Router::new().route("/", get(|| async { "hello" }));
    match mode {
        "plain" => base,
        "tollgate-allow" => base.layer(tollgate(1_000_000_000, Duration::from_secs(10)).layer()),
        "tollgate-reject" => base.layer(tollgate(1, Duration::from_secs(3600)).layer()),
        "tollgate-axum-allow" => base.layer(
            tollgate(1_000_000_000, Duration::from_secs(10))
                .layer()
                .for_axum(),
        ),
        "tollgate-axum-reject" => {
            base.layer(tollgate(1, Duration::from_secs(3600)).layer().for_axum())
        }
        "shadow-allow" => base.layer(variant(true, Policy::shadow, |b| b)),
        "shadow-refuse" => base.layer(variant(false, Policy::shadow, |b| b)),
        "cost-allow" => base.layer(variant(true, |p| p.cost(|_| 2), |b| b)),
        "cost-reject" => base.layer(variant(false, |p| p.cost(|_| 1), |b| b)),
        "outcome-allow" => base.layer(variant(
            true,
            |p| p.charge_when(|r| r.status.is_client_error()),
            |b| b,
        )),
        "outcome-reject" => base.layer(variant(
            false,
            |p| p.charge_when(|r| r.status.is_success()),
            |b| b,
        )),
        "hook-allow" => {
            let grants = AtomicU64::new(0);
            let hook = move |_: &Granted<'_>| {
                grants.fetch_add(1, Ordering::Relaxed);
            };
            base.layer(variant(true, |p| p, |b| b.on_granted(hook)))
        }
        #[cfg(feature = "metrics")]
        "metrics-allow" => base.layer(variant(true, |p| p, metered)),
        #[cfg(feature = "metrics")]
        "metrics-reject" => base.layer(variant(false, |p| p, metered)),
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

/// Metrics on, with a Prometheus recorder installed (its histograms in buckets, as
/// `examples/http_metrics.rs` has them), before the layer registers its instruments.
#[cfg(feature = "metrics")]
fn metered(b: RateLimitingBuilder) -> RateLimitingBuilder {
    use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
    const BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0];
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Prefix("tollgate.http.rate_limiting.".into()),
            BUCKETS,
        )
        .expect("valid buckets")
        .build_recorder();
    // Kept alive (and its histograms drained) as an exporter's scrapes would: rendered by a
    // thread every second.
    let handle = recorder.handle();
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(1));
        std::hint::black_box(handle.render());
    });
    metrics::set_global_recorder(recorder).expect("one recorder");
    b.metrics(true)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "plain".into());
    let addr: SocketAddr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:3900".into())
        .parse()
        .expect("an address");
    let app = app(&mode);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr).await.expect("bind");
        eprintln!("{mode} on {}", listener.local_addr().expect("addr"));
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .expect("serve");
    });
}
