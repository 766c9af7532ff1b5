//! What the HTTP integration tests share: a real axum server on 127.0.0.1 (with the peer
//! address, as a per-IP policy needs), a real hyper client over TCP, a response read to its
//! end.
#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::sync::mpsc;
use tollgate::http::Policy;
use tollgate::FixedWindowOptions;

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
    let mut req = Request::get(format!("http://{addr}{path}"));
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
    let req = Request::get(format!("http://{addr}/stream"))
        .body(Empty::new())
        .unwrap();
    c.request(req).await.unwrap()
}
