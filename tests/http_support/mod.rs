//! What the HTTP integration tests share: a real axum server on 127.0.0.1 (with the peer
//! address, as a per-IP policy needs), a real hyper client over TCP, a response read to its
//! end.
#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::mpsc;
use tollgate::http::{ClientIp, ForwardedHeader, Policy, RateLimiting};
use tollgate::{
    FixedWindowOptions, GcraOptions, LeakyBucketOptions, ShaperOptions, SlidingCounterOptions,
    SlidingLogOptions, SlidingWindowOptions, TokenBucketOptions,
};

pub type HttpClient = Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>;

/// Serves `app` on a free port of 127.0.0.1, with `ConnectInfo<SocketAddr>`.
pub async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    addr
}

pub fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// A response, read to its end.
pub struct Got {
    pub status: StatusCode,
    pub headers: http::HeaderMap,
    pub body: Bytes,
}

impl Got {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect()
    }
}

/// `GET path` with `headers`, read to its end.
pub async fn get_with(
    c: &HttpClient,
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Got {
    request_with(c, addr, http::Method::GET, path, headers).await
}

/// `method path` with `headers` (no body), read to its end.
pub async fn request_with(
    c: &HttpClient,
    addr: SocketAddr,
    method: http::Method,
    path: &str,
    headers: &[(&str, &str)],
) -> Got {
    let mut req = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = c.request(req.body(Empty::new()).unwrap()).await.unwrap();
    let (parts, body) = resp.into_parts();
    Got {
        status: parts.status,
        headers: parts.headers,
        body: body.collect().await.unwrap().to_bytes(),
    }
}

/// `GET path`, read to its end.
pub async fn fetch(c: &HttpClient, addr: SocketAddr, path: &str) -> Got {
    get_with(c, addr, path, &[]).await
}

/// A fixed-window policy of `limit` requests per `secs` seconds.
pub fn fixed(limit: u32, secs: u64) -> Policy {
    Policy::fixed_window(FixedWindowOptions::new(limit, Duration::from_secs(secs))).unwrap()
}

/// A response body fed by a channel: it ends when the sender is dropped.
pub struct ChannelBody(pub mpsc::Receiver<Bytes>);

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|o| o.map(|b| Ok(http_body::Frame::data(b))))
    }
}

/// GET /stream: the response as soon as its headers arrive (its body may still stream).
pub async fn stream(c: &HttpClient, addr: SocketAddr) -> Response<hyper::body::Incoming> {
    stream_with(c, addr, &[]).await
}

/// GET /stream with `headers`: the response as soon as its headers arrive.
pub async fn stream_with(
    c: &HttpClient,
    addr: SocketAddr,
    headers: &[(&str, &str)],
) -> Response<hyper::body::Incoming> {
    let mut req = Request::get(format!("http://{addr}/stream"));
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    c.request(req.body(Empty::new()).unwrap()).await.unwrap()
}

/// Serves `router` behind `limits`' layer (axum's body, `ConnectInfo` set), and a client.
pub async fn serve_limited(limits: &RateLimiting, router: Router) -> (SocketAddr, HttpClient) {
    let addr = serve(router.layer(limits.layer().for_axum())).await;
    (addr, client())
}

/// Loopback trusted as a proxy: `X-Forwarded-For` names the client, so one test plays many
/// clients (each its own per-IP key) from 127.0.0.1.
pub fn forwarded_client_ip() -> ClientIp {
    ClientIp::trusted_proxies(
        ["127.0.0.0/8".parse().unwrap()],
        ForwardedHeader::XForwardedFor,
    )
}

/// A handler's call counter.
#[derive(Clone, Default)]
pub struct Calls(pub Arc<AtomicUsize>);

impl Calls {
    pub fn hit(&self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    pub fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Every rate algorithm's policy, named, with room for about `n` permits per minute.
pub fn every_rate_algorithm(n: u32) -> Vec<(&'static str, Policy)> {
    let minute = Duration::from_secs(60);
    vec![
        (
            "token_bucket",
            Policy::token_bucket(TokenBucketOptions::new(n, n, minute)).unwrap(),
        ),
        (
            "fixed_window",
            Policy::fixed_window(FixedWindowOptions::new(n, minute)).unwrap(),
        ),
        (
            "sliding_window",
            Policy::sliding_window(SlidingWindowOptions::new(n, minute, 6)).unwrap(),
        ),
        (
            "sliding_counter",
            Policy::sliding_counter(SlidingCounterOptions::new(n, minute)).unwrap(),
        ),
        (
            "sliding_log",
            Policy::sliding_log(SlidingLogOptions::per_minute(n)).unwrap(),
        ),
        ("gcra", Policy::gcra(GcraOptions::per(minute, n)).unwrap()),
        (
            "leaky_meter",
            Policy::leaky_meter(LeakyBucketOptions::new(n, n, minute)).unwrap(),
        ),
        (
            "leaky_shaper",
            Policy::leaky_shaper(ShaperOptions::per(minute, n).with_max_permits(n)).unwrap(),
        ),
    ]
}

/// A route answering a streamed body: each call sends `first`, then hands the body's sender
/// to the receiver returned here (the test feeds the rest, and ends the body by dropping it).
pub fn streaming_route(
    first: &'static [u8],
) -> (
    axum::routing::MethodRouter,
    mpsc::UnboundedReceiver<mpsc::Sender<Bytes>>,
) {
    let (feed_tx, feeds) = mpsc::unbounded_channel();
    let handler = move || {
        let feeds = feed_tx.clone();
        async move {
            let (tx, rx) = mpsc::channel(4);
            tx.send(Bytes::from_static(first)).await.unwrap();
            feeds.send(tx).unwrap();
            axum::body::Body::new(ChannelBody(rx))
        }
    };
    (axum::routing::get(handler), feeds)
}
