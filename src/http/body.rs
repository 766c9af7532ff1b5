//! The response body: the inner body holding the request's permits until it ends or is
//! dropped, or the body of a rejection.

use core::pin::Pin;
use core::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use super::policy::Permit;
use crate::quota::QuotaState;

/// The permits one request holds: the global policy's and the endpoint policy's. (No more:
/// its size is part of every response future's.)
#[derive(Debug, Default)]
pub(crate) struct Permits(pub(crate) [Permit; 2]);

impl Permits {
    /// Whether any of them gives permits back when dropped.
    pub(crate) fn holds(&self) -> bool {
        self.0.iter().any(Permit::holds)
    }

    /// Whether the response body must keep them until it ends (they give permits back, or
    /// the metrics time them).
    pub(crate) fn kept(&self) -> bool {
        self.0.iter().any(Permit::kept)
    }

    /// The response's status, for the adaptive leases among them.
    pub(crate) fn observe(&mut self, status: http::StatusCode) {
        self.0.iter_mut().for_each(|p| p.observe(status));
    }

    /// Whether a charged permit among them settles from the response.
    pub(crate) fn charged(&self) -> bool {
        self.0.iter().any(Permit::is_charged)
    }

    /// The response head, for the charged permits among them: each one's quota after its
    /// settle, if it settled.
    pub(crate) fn respond(&mut self, head: &http::response::Parts) -> [Option<QuotaState>; 2] {
        [self.0[0].respond(head), self.0[1].respond(head)]
    }

    /// The response body yielded `frame`: counted, for a body-length settle.
    #[inline]
    fn sent(&mut self, frame: &Frame<Bytes>) {
        if let Some(data) = frame.data_ref() {
            self.0.iter_mut().for_each(|p| p.sent(data.len()));
        }
    }

    /// The inner service failed, for the adaptive leases among them.
    pub(crate) fn fail(&mut self) {
        self.0.iter_mut().for_each(Permit::fail);
    }
}

pin_project! {
    /// The body of a response that went through [`RateLimitLayer`](super::RateLimitLayer).
    ///
    /// For an admitted request it is the inner service's body, holding the request's
    /// concurrency permits until the body has sent its last frame, failed, or been dropped (a
    /// client that hangs up) — so that a streaming response counts against a concurrency
    /// policy for as long as it streams. For a rejection it is the rejection's bytes.
    ///
    /// ```
    /// # use std::convert::Infallible;
    /// use http::{Request, Response, StatusCode};
    /// use tollgate::http::{LimitedBody, Policy, RateLimiting};
    /// use tollgate::ConcurrencyOptions;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let limits = RateLimiting::builder().global(Policy::concurrency(ConcurrencyOptions::new(1)).unwrap()).build().unwrap();
    /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
    /// let app = limits.layer().layer(service_fn(hello));
    /// let download: Response<LimitedBody<_>> = app.clone().oneshot(Request::get("/download").body(()).unwrap()).await.unwrap();
    /// assert!(download.body().holds_permits()); // streaming: the permit is held
    /// let refused = app.clone().oneshot(Request::get("/download").body(()).unwrap()).await.unwrap();
    /// assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    /// assert!(!refused.body().holds_permits());
    /// drop(download); // the client got it all (or hung up)
    /// assert_eq!(app.clone().oneshot(Request::get("/download").body(()).unwrap()).await.unwrap().status(), 200);
    /// # }
    /// ```
    pub struct LimitedBody<B> {
        #[pin]
        inner: Inner<B>,
    }
}

pin_project! {
    #[project = InnerProj]
    enum Inner<B> {
        Body { #[pin] body: B, permits: Option<Permits> },
        Full { data: Option<Bytes> },
    }
}

impl<B> LimitedBody<B> {
    /// `body` holding `permits` (`Some` only if they hold something).
    #[inline]
    pub(crate) fn held(body: B, permits: Option<Permits>) -> Self {
        Self {
            inner: Inner::Body { body, permits },
        }
    }

    /// A body of `data` (empty data: no frame at all).
    ///
    /// ```
    /// use tollgate::http::LimitedBody;
    ///
    /// use http_body::Body;
    /// let body: LimitedBody<http_body_util::Empty<bytes::Bytes>> = LimitedBody::full("slow down".into());
    /// assert_eq!(body.size_hint().exact(), Some(9));
    /// assert!(!body.holds_permits());
    /// assert!(LimitedBody::<http_body_util::Empty<bytes::Bytes>>::full(bytes::Bytes::new()).is_end_stream());
    /// ```
    pub fn full(data: Bytes) -> Self {
        Self {
            inner: Inner::Full {
                data: (!data.is_empty()).then_some(data),
            },
        }
    }

    /// Whether this body still holds permits (for tests and metrics).
    ///
    /// ```
    /// # use std::{convert::Infallible, time::Duration};
    /// use http::{Request, Response};
    /// use tollgate::http::{Policy, RateLimiting};
    /// use tollgate::{ConcurrencyOptions, FixedWindowOptions};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let hello = service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let limits = RateLimiting::builder().global(Policy::concurrency(ConcurrencyOptions::new(4)).unwrap()).build().unwrap();
    /// let resp = limits.layer().layer(hello).oneshot(Request::new(())).await.unwrap();
    /// assert!(resp.body().holds_permits());
    /// // A rate policy's request holds nothing.
    /// let rate = RateLimiting::builder().global(two_a_minute()).build().unwrap();
    /// let resp = rate.layer().layer(hello).oneshot(Request::new(())).await.unwrap();
    /// assert!(!resp.body().holds_permits());
    /// # }
    /// ```
    pub fn holds_permits(&self) -> bool {
        matches!(
            &self.inner,
            Inner::Body {
                permits: Some(p),
                ..
            } if p.holds()
        )
    }
}

#[cfg(feature = "axum")]
impl<B> LimitedBody<B>
where
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    /// As axum's body: the inner body itself when it holds no permit (no allocation when it
    /// already is axum's `Body`), this body boxed while it holds one.
    /// `body` holding `permits`, as axum's body: `body` itself if there are none.
    #[inline]
    pub(crate) fn axum_held(body: B, permits: Option<Permits>) -> axum::body::Body {
        match permits {
            None => axum::body::Body::new(body),
            permits => axum::body::Body::new(Self::held(body, permits)),
        }
    }

    /// The same as [`into_axum`](Self::into_axum) on [`held`](Self::held)`(body, permits)`.
    pub(crate) fn into_axum(self) -> axum::body::Body {
        match self.inner {
            Inner::Body {
                body,
                permits: None,
            } => axum::body::Body::new(body),
            Inner::Full { data: None } => axum::body::Body::empty(),
            Inner::Full { data: Some(data) } => axum::body::Body::from(data),
            inner => axum::body::Body::new(Self { inner }),
        }
    }
}

impl<B> Body for LimitedBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().inner.project() {
            InnerProj::Body { body, permits } => {
                let r = body.poll_frame(cx);
                // A body that holds nothing looks no further.
                if let Some(p) = permits {
                    if let Poll::Ready(Some(Ok(frame))) = &r {
                        p.sent(frame);
                    }
                    // The body is done: release (and settle) now, not when it is dropped.
                    if ends(&r) {
                        *permits = None;
                    }
                }
                r
            }
            InnerProj::Full { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Body { body, .. } => body.is_end_stream(),
            Inner::Full { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Body { body, .. } => body.size_hint(),
            Inner::Full { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
        }
    }
}

/// Whether a body's poll ended it: its end, an error, or its trailers (the last frame a body
/// sends: a gRPC response's status).
#[inline(always)]
fn ends<E>(r: &Poll<Option<Result<Frame<Bytes>, E>>>) -> bool {
    match r {
        Poll::Ready(None | Some(Err(_))) => true,
        Poll::Ready(Some(Ok(frame))) => frame.is_trailers(),
        Poll::Pending => false,
    }
}

impl<B> core::fmt::Debug for LimitedBody<B> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("LimitedBody")
            .field("holds_permits", &self.holds_permits())
            .finish_non_exhaustive()
    }
}
