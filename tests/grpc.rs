//! gRPC through the layer (issue 40, part 2): a real tonic server and client over TCP. The
//! service is written without code generation (messages derived with `prost`, the handlers
//! through `tonic::server::Grpc`, the client through `tonic::client::Grpc`), so no `protoc`.
//! A refused call gets gRPC's trailers-only answer, which the client reads as
//! `RESOURCE_EXHAUSTED` (or `UNAVAILABLE`) with the wait as `grpc-retry-pushback-ms`; a
//! concurrency permit lives as long as a streaming response; a non-gRPC request through the
//! same layer still gets its HTTP 429.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::uri::PathAndQuery;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tollgate::adaptive::{AdaptiveLimiter, AdaptiveOptions};
use tollgate::http::{Policy, RateLimiting};
use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock};
use tonic::client::Grpc;
use tonic::server::NamedService;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::{Code, Status, Streaming};
use tonic_prost::ProstCodec;
use tower::{service_fn, Layer, Service, ServiceExt};

/// The request message.
#[derive(Clone, PartialEq, prost::Message)]
struct Hello {
    #[prost(string, tag = "1")]
    name: String,
}

/// The response message.
#[derive(Clone, PartialEq, prost::Message)]
struct Reply {
    #[prost(string, tag = "1")]
    text: String,
}

type Items = mpsc::Receiver<Result<Reply, Status>>;

/// `test.Echo`: `Say` (unary) answers `hello <name>`; `Watch` (server streaming) streams what
/// the test feeds it, and ends (status OK) when the test drops its sender.
#[derive(Clone, Default)]
struct Echo {
    feeds: Arc<Mutex<Vec<Items>>>,
}

impl Echo {
    /// The items of the next `Watch` call, sent through the returned sender.
    fn feed(&self) -> mpsc::Sender<Result<Reply, Status>> {
        let (tx, rx) = mpsc::channel(8);
        self.feeds.lock().unwrap().push(rx);
        tx
    }
}

impl NamedService for Echo {
    const NAME: &'static str = "test.Echo";
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl Service<http::Request<tonic::body::Body>> for Echo {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let feeds = self.feeds.clone();
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(ProstCodec::<Reply, Hello>::default());
            Ok(match req.uri().path() {
                "/test.Echo/Say" => {
                    let say = service_fn(|r: tonic::Request<Hello>| async move {
                        let text = format!("hello {}", r.into_inner().name);
                        Ok::<_, Status>(tonic::Response::new(Reply { text }))
                    });
                    grpc.unary(say, req).await
                }
                "/test.Echo/Watch" => {
                    let mut items = feeds.lock().unwrap().pop();
                    let watch = service_fn(move |_: tonic::Request<Hello>| {
                        let items = items.take().map(ReceiverStream::new);
                        async move {
                            items
                                .map(tonic::Response::new)
                                .ok_or_else(|| Status::failed_precondition("nothing to stream"))
                        }
                    });
                    grpc.server_streaming(watch, req).await
                }
                _ => Status::unimplemented("no such method").into_http(),
            })
        })
    }
}

/// Serves `Echo` behind `limits`' layer, as `Server::builder().add_service(layer(server))`,
/// on a port of its own; returns the server's address.
async fn serve(limits: &RateLimiting, echo: Echo) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let router = Server::builder().add_service(limits.layer().layer(echo));
    tokio::spawn(router.serve_with_incoming(incoming));
    addr
}

async fn connect(addr: SocketAddr) -> Channel {
    Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

async fn say(channel: &Channel, name: &str) -> Result<tonic::Response<Reply>, Status> {
    let mut client = Grpc::new(channel.clone());
    client
        .ready()
        .await
        .map_err(|e| Status::unknown(e.to_string()))?;
    let hello = Hello { name: name.into() };
    let path = PathAndQuery::from_static("/test.Echo/Say");
    let codec = ProstCodec::<Hello, Reply>::default();
    client.unary(tonic::Request::new(hello), path, codec).await
}

async fn watch(channel: &Channel) -> Result<tonic::Response<Streaming<Reply>>, Status> {
    let mut client = Grpc::new(channel.clone());
    client
        .ready()
        .await
        .map_err(|e| Status::unknown(e.to_string()))?;
    let hello = Hello { name: "w".into() };
    let path = PathAndQuery::from_static("/test.Echo/Watch");
    let codec = ProstCodec::<Hello, Reply>::default();
    client
        .server_streaming(tonic::Request::new(hello), path, codec)
        .await
}

fn reply(text: &str) -> Result<Reply, Status> {
    Ok(Reply { text: text.into() })
}

/// A server whose global policy is `policy`, a channel to it, and a server stream opened on
/// it and past its first item (so it holds what the policy granted): the stream's feed and
/// the stream. The layer is kept alive by the server.
async fn streaming_behind(
    policy: Policy,
) -> (
    Channel,
    mpsc::Sender<Result<Reply, Status>>,
    Streaming<Reply>,
) {
    let limits = RateLimiting::builder().global(policy).build().unwrap();
    let echo = Echo::default();
    let channel = connect(serve(&limits, echo.clone()).await).await;
    let items = echo.feed();
    let mut stream = watch(&channel).await.unwrap().into_inner();
    items.send(reply("one")).await.unwrap();
    assert_eq!(stream.message().await.unwrap().unwrap().text, "one");
    (channel, items, stream)
}

/// Within two seconds, `say` gets through (a cancelled stream's permit comes back when the
/// server sees the stream reset, a moment after the client drops it).
async fn allowed_soon(channel: &Channel) -> tonic::Response<Reply> {
    for _ in 0..200 {
        match say(channel, "again").await {
            Ok(r) => return r,
            Err(s) => assert_eq!(s.code(), Code::ResourceExhausted, "{s:?}"),
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the permit never came back");
}

/// One call a minute, 15 s into the window: the second call is refused with
/// `RESOURCE_EXHAUSTED` and the 45 s left as `grpc-retry-pushback-ms`, both on the fast path
/// (no headers) and with the quota headers on (which come along as metadata).
#[tokio::test]
async fn a_refused_unary_call_is_resource_exhausted_with_the_pushback() {
    for headers in [false, true] {
        let clock = Arc::new(ManualClock::new());
        let once = FixedWindowOptions::new(1, Duration::from_secs(60));
        let limits = RateLimiting::builder()
            .global(Policy::fixed_window(once).unwrap())
            .rate_limit_headers(headers)
            .clock(clock.clone())
            .build()
            .unwrap();
        let channel = connect(serve(&limits, Echo::default()).await).await;

        let ok = say(&channel, "ada").await.unwrap();
        assert_eq!(ok.get_ref().text, "hello ada");
        assert_eq!(ok.metadata().get("ratelimit").is_some(), headers);

        clock.advance(Duration::from_secs(15));
        let refused = say(&channel, "ada").await.unwrap_err();
        assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
        assert_eq!(refused.message(), "policy \"global\": permits exhausted");
        let meta = refused.metadata();
        assert_eq!(meta.get("grpc-retry-pushback-ms").unwrap(), "45000");
        assert!(meta.get("retry-after").is_none(), "gRPC's own header only");
        match headers {
            true => assert_eq!(meta.get("ratelimit").unwrap(), "\"global\";r=0;t=45"),
            false => assert!(meta.get("ratelimit").is_none()),
        }

        // The next window: allowed again.
        clock.advance(Duration::from_secs(45));
        assert_eq!(
            say(&channel, "bo").await.unwrap().get_ref().text,
            "hello bo"
        );
    }
}

/// Under a concurrency limit of 1, a server-streaming call holds its permit while it
/// streams — another call is refused (no pushback: a concurrency limit cannot know when) —
/// and gives it back when the stream ends with its trailers.
#[tokio::test]
async fn a_server_stream_holds_its_permit_until_it_ends() {
    let (channel, items, mut stream) =
        streaming_behind(Policy::concurrency(ConcurrencyOptions::new(1)).unwrap()).await;

    let refused = say(&channel, "while streaming").await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(refused.metadata().get("grpc-retry-pushback-ms").is_none());

    items.send(reply("two")).await.unwrap();
    assert_eq!(stream.message().await.unwrap().unwrap().text, "two");
    assert!(say(&channel, "still streaming").await.is_err());

    drop(items); // the stream ends: status OK in the trailers
    assert!(stream.message().await.unwrap().is_none());
    assert!(stream.trailers().await.unwrap().is_some());
    let after = say(&channel, "after").await.unwrap();
    assert_eq!(after.get_ref().text, "hello after");
}

/// A client that drops a stream it no longer wants releases the permit: the server's side
/// of the stream is reset, its body dropped.
#[tokio::test]
async fn a_cancelled_stream_releases_its_permit() {
    let (channel, items, stream) =
        streaming_behind(Policy::concurrency(ConcurrencyOptions::new(1)).unwrap()).await;
    let refused = say(&channel, "while streaming").await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);

    drop(stream); // cancelled; the server would still stream (`items` is alive)
    let after = allowed_soon(&channel).await;
    assert_eq!(after.get_ref().text, "hello again");
    drop(items);
}

/// A policy whose refusals are 503s (the adaptive policy's) refuses a gRPC call with
/// `UNAVAILABLE`.
#[tokio::test]
async fn a_503_policy_refuses_with_unavailable() {
    let one = AdaptiveOptions::new(1).with_bounds(1, 1);
    let limiter = Arc::new(AdaptiveLimiter::new(one).unwrap());
    let (channel, items, mut stream) = streaming_behind(Policy::adaptive_limiter(limiter)).await;
    let refused = say(&channel, "busy").await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    drop(items);
    assert!(stream.message().await.unwrap().is_none());
}

/// A request that is not gRPC's (no `application/grpc` content type), through the same
/// layer on the same server, is refused as over HTTP: a 429 with `Retry-After`.
#[tokio::test]
async fn a_non_grpc_request_still_gets_the_http_429() {
    let clock = Arc::new(ManualClock::new());
    let once = FixedWindowOptions::new(1, Duration::from_secs(60));
    let limits = RateLimiting::builder()
        .global(Policy::fixed_window(once).unwrap())
        .clock(clock.clone())
        .build()
        .unwrap();
    let channel = connect(serve(&limits, Echo::default()).await).await;
    assert!(say(&channel, "ada").await.is_ok());

    let plain = http::Request::post("/test.Echo/Say")
        .header("content-type", "application/json")
        .body(tonic::body::Body::empty())
        .unwrap();
    let resp = channel.clone().oneshot(plain).await.unwrap();
    assert_eq!(resp.status(), http::StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(resp.headers()["retry-after"], "60");
    assert!(resp.headers().get("grpc-status").is_none());
    assert!(resp.headers().get("grpc-retry-pushback-ms").is_none());
}
