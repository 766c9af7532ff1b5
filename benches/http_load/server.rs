//! The server side of `benches/http_load.sh`: one axum app, bare or behind a rate-limiting
//! layer, on one tokio worker thread.
//!
//! ```text
//! http_load <mode> <addr>
//!   mode: plain | tollgate-allow | tollgate-reject | governor-allow | governor-reject
//!         | tollgate-axum-allow | tollgate-axum-reject   (`RateLimitLayer::for_axum`)
//! ```
//! Every limited mode keys by the peer IP, as a public server would: `allow` modes have limits
//! no load test reaches, `reject` modes admit one request an hour (so nearly every request of
//! a run is refused).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use tollgate::http::{KeyBy, Policy, RateLimiting};
use tollgate::TokenBucketOptions;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::PeerIpKeyExtractor;
use tower_governor::GovernorLayer;

fn tollgate(limit: u32, per: Duration) -> RateLimiting {
    RateLimiting::builder()
        .global(
            Policy::token_bucket(TokenBucketOptions::new(limit, limit, per))
                .expect("valid options")
                .partition_by(KeyBy::CLIENT_IP),
        )
        .build()
        .expect("valid policy")
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
