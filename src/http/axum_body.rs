//! The layer for axum: responses with axum's own [`Body`](axum::body::Body), so that axum does
//! not box the layer's body again.
//!
//! axum turns every layered service's `Response<B>` into `Response<axum::body::Body>` with
//! `Body::new`, which allocates unless `B` already is axum's `Body`. Behind
//! [`RateLimitLayer`], `B` is a [`LimitedBody`]: one allocation and free per request, on the
//! allowed path too (about 220 of the layer's instructions a request). [`AxumLayer`] hands
//! axum the inner body itself whenever the request holds no permit (every rate policy), and
//! wraps it only while a concurrency permit must live as long as the body.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use axum::body::Body as AxumBody;
use bytes::Bytes;
use http::{Request, Response};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::body::LimitedBody;
use super::layer::RateLimitLayer;
use super::service::{RateLimit, ResponseFuture, WrappedService};

/// A [`RateLimitLayer`] whose responses carry axum's [`Body`](axum::body::Body):
/// [`RateLimitLayer::for_axum`]. Same decisions, headers and permits; for an axum `Router`
/// it saves the allocation axum would make to box a [`LimitedBody`].
///
/// ```
/// # use std::{net::SocketAddr, time::Duration};
/// use axum::{body::Body, extract::ConnectInfo, http::Request, routing::get, Router};
/// use tollgate::http::{KeyBy, Policy, RateLimiting};
/// use tollgate::TokenBucketOptions;
/// use tower::ServiceExt;
///
/// let limits = RateLimiting::builder()
///     .global(Policy::token_bucket(TokenBucketOptions::new(2, 2, Duration::from_secs(60))).unwrap()
///         .partition_by(KeyBy::CLIENT_IP))
///     .build()
///     .unwrap();
/// let app: Router = Router::new()
///     .route("/", get(|| async { "hello" }))
///     .layer(limits.layer().for_axum());
/// let req = || {
///     let mut r = Request::get("/").body(Body::empty()).unwrap();
///     r.extensions_mut().insert(ConnectInfo(SocketAddr::from(([192, 0, 2, 1], 4000))));
///     r
/// };
/// let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// let statuses: Vec<u16> = (0..3)
///     .map(|_| rt.block_on(app.clone().oneshot(req())).unwrap().status().as_u16())
///     .collect();
/// assert_eq!(statuses, [200, 200, 429]);
/// ```
#[derive(Clone)]
pub struct AxumLayer(RateLimitLayer);

impl fmt::Debug for AxumLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AxumLayer").field(&self.0).finish()
    }
}

impl RateLimitLayer {
    /// This layer for axum: responses with axum's [`Body`](axum::body::Body) rather than a
    /// [`LimitedBody`], which axum would box again on every response. The inner body is passed
    /// through untouched unless the request holds a concurrency permit (then it is wrapped, and
    /// the permit is held until the body ends, as with [`RateLimitLayer`]).
    ///
    /// ```
    /// # use std::convert::Infallible;
    /// use axum::{body::Body, http::{Request, Response}};
    /// use tollgate::http::{Policy, RateLimiting};
    /// use tollgate::ConcurrencyOptions;
    /// use tower::{Layer, ServiceExt};
    ///
    /// let limits = RateLimiting::builder()
    ///     .global(Policy::concurrency(ConcurrencyOptions::new(1)).unwrap())
    ///     .build()
    ///     .unwrap();
    /// let svc = limits.layer().for_axum().layer(tower::service_fn(|_: Request<Body>| async {
    ///     Ok::<_, Infallible>(Response::new(Body::from("a long download")))
    /// }));
    /// let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// let get = || rt.block_on(svc.clone().oneshot(Request::get("/").body(Body::empty()).unwrap())).unwrap();
    /// let download: Response<Body> = get();
    /// assert_eq!(get().status(), 429); // the first body still holds the permit
    /// drop(download);
    /// assert_eq!(get().status(), 200);
    /// ```
    pub fn for_axum(self) -> AxumLayer {
        AxumLayer(self)
    }
}

impl<S> Layer<S> for AxumLayer {
    type Service = AxumRateLimit<S>;

    fn layer(&self, inner: S) -> AxumRateLimit<S> {
        AxumRateLimit(self.0.layer(inner))
    }
}

/// The [`Service`] of an [`AxumLayer`]: a [`RateLimit`] answering with axum's
/// [`Body`](axum::body::Body).
///
/// ```
/// # use std::{convert::Infallible, time::Duration};
/// use axum::{body::Body, http::{Request, Response}};
/// use tollgate::http::{AxumRateLimit, Policy, RateLimiting};
/// use tollgate::FixedWindowOptions;
/// use tower::{Layer, Service, ServiceExt};
///
/// let limits = RateLimiting::builder()
///     .global(Policy::fixed_window(FixedWindowOptions::new(1, Duration::from_secs(60))).unwrap())
///     .build()
///     .unwrap();
/// let inner = tower::service_fn(|_: Request<Body>| async { Ok::<_, Infallible>(Response::new(Body::from("hi"))) });
/// let mut svc: AxumRateLimit<_> = limits.layer().for_axum().layer(inner);
/// let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// let statuses: Vec<u16> = rt.block_on(async {
///     let mut out = Vec::new();
///     for _ in 0..2 {
///         let resp: Response<Body> = svc.ready().await.unwrap().call(Request::get("/").body(Body::empty()).unwrap()).await.unwrap();
///         out.push(resp.status().as_u16());
///     }
///     out
/// });
/// assert_eq!(statuses, [200, 429]);
/// ```
#[derive(Clone)]
pub struct AxumRateLimit<S>(RateLimit<S>);

impl<S> fmt::Debug for AxumRateLimit<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AxumRateLimit").field(&self.0).finish()
    }
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for AxumRateLimit<S>
where
    S: WrappedService<ReqB, Body = ResB>,
    ReqB: Send + 'static,
    ResB: http_body::Body<Data = Bytes> + Send + 'static,
    ResB::Error: Into<axum::BoxError>,
{
    type Response = Response<AxumBody>;
    type Error = S::Error;
    type Future = AxumResponseFuture<S::Future, ResB, S::Error>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    #[inline]
    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        AxumResponseFuture {
            inner: self.0.call(req),
        }
    }
}

pin_project! {
    /// The future of [`AxumRateLimit`]'s response.
    ///
    /// ```
    /// # use std::{convert::Infallible, time::Duration};
    /// use axum::{body::Body, http::{Request, Response}};
    /// use tollgate::http::{AxumResponseFuture, Policy, RateLimiting};
    /// use tollgate::FixedWindowOptions;
    /// use tower::{Layer, Service};
    ///
    /// let limits = RateLimiting::builder()
    ///     .global(Policy::fixed_window(FixedWindowOptions::new(1, Duration::from_secs(60))).unwrap())
    ///     .build()
    ///     .unwrap();
    /// let inner = tower::service_fn(|_: Request<Body>| async { Ok::<_, Infallible>(Response::new(Body::from("hi"))) });
    /// let mut svc = limits.layer().for_axum().layer(inner);
    /// // The decision is made in `call`: the second future is a ready rejection.
    /// let futures: Vec<AxumResponseFuture<_, _, _>> =
    ///     (0..2).map(|_| svc.call(Request::get("/").body(Body::empty()).unwrap())).collect();
    /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let statuses: Vec<u16> = futures.into_iter().map(|f| rt.block_on(f).unwrap().status().as_u16()).collect();
    /// assert_eq!(statuses, [200, 429]);
    /// ```
    pub struct AxumResponseFuture<F, B, E> {
        #[pin]
        inner: ResponseFuture<F, B, E>,
    }
}

impl<F, B, E> Future for AxumResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Output = Result<Response<AxumBody>, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project()
            .inner
            .poll_map(cx, LimitedBody::axum_held, LimitedBody::into_axum)
    }
}

impl<F, B, E> fmt::Debug for AxumResponseFuture<F, B, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AxumResponseFuture")
            .field(&self.inner)
            .finish()
    }
}
