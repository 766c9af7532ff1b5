use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;

use bytes::Bytes;
use http::header::RETRY_AFTER;
use http::{Request, Response, StatusCode};
use pin_project_lite::pin_project;
use tower_service::Service;

use super::body::Permits;
use super::endpoint::Mode;
use super::layer::Shared;
use super::policy;
use super::{
    retry_after, Decision, Denial, Grant, Key, LimitedBody, MissingKey, Permit, RequestView,
    NO_KEY, NO_PEER_ADDRESS, UPSTREAM_PAUSE,
};
use crate::lease::{Reason, Rejection};
use crate::quota::QuotaState;

pub(super) enum Step {
    Granted(Grant),
    Denied(Denial),
    Wait(Key),
}

impl Shared {
    /// One policy's decision for a request.
    #[inline]
    pub(super) fn decide(&self, i: usize, view: &RequestView<'_>) -> Step {
        let p = &self.policies[i];
        let key = match p.policy.key.extract(view, &self.client_ip) {
            Some(k) => k,
            None => match p.policy.missing {
                MissingKey::Allow => {
                    return Step::Granted(Grant {
                        permit: Permit::none(),
                        quota: None,
                    })
                }
                MissingKey::Reject => {
                    return Step::Denied(Denial {
                        rejection: Rejection::new(&NO_KEY),
                        quota: None,
                    })
                }
                MissingKey::Shared => Key::MISSING,
                MissingKey::Auto if p.policy.key.lacks_peer(view) => {
                    log_missing_peer_once(&p.name);
                    return Step::Denied(Denial {
                        rejection: Rejection::new(&NO_PEER_ADDRESS),
                        quota: None,
                    });
                }
                MissingKey::Auto => Key::MISSING,
            },
        };
        if p.policy.pause_on_429 {
            if let Some(d) = p.pauses.remaining(&key, self.clock.now().as_nanos()) {
                return Step::Denied(Denial {
                    rejection: Rejection::with_retry_after(&UPSTREAM_PAUSE, d),
                    quota: None,
                });
            }
        }
        match p.limiter.try_acquire(key, self.want_quota()) {
            Decision::Granted(g) => Step::Granted(g),
            Decision::Denied(d) => Step::Denied(d),
            Decision::Wait => Step::Wait(key),
        }
    }

    /// Waits for policy `i`'s decision for `key`, bounded by its maximum delay (the built-in
    /// limiters bound their own; a custom one's wait is dropped at the deadline, and a fresh
    /// [`PolicyLimiter::try_acquire`] then decides: a grant by then is taken, a refusal is
    /// [`Reason::TimedOut`] with the limiter's RetryAfter, if it gives one).
    pub(super) async fn wait(self: &Arc<Self>, i: usize, key: Key) -> Result<Grant, Denial> {
        let p = &self.policies[i];
        let fut = p.limiter.clone().acquire(key, self.want_quota());
        match p.policy.queue.flatten() {
            Some(max) if !p.policy.bounds_its_delay() => {
                match tokio::time::timeout(max, fut).await {
                    Ok(r) => r,
                    Err(_) => match p.limiter.try_acquire(key, self.want_quota()) {
                        Decision::Granted(g) => Ok(g),
                        Decision::Denied(d) => Err(Denial {
                            rejection: policy::after_wait(&Reason::TimedOut, d.rejection),
                            quota: d.quota,
                        }),
                        Decision::Wait => Err(Denial {
                            rejection: Rejection::new(&Reason::TimedOut),
                            quota: None,
                        }),
                    },
                }
            }
            _ => fut.await,
        }
    }
}

/// The rate-limiting [`Service`]: decides in `call`, answers a refused request itself, and
/// passes an admitted one to the inner service.
///
/// ```
/// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
/// # use http::{Request, Response, StatusCode};
/// # use tollgate::http::*;
/// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
/// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
/// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// use tower::{Layer, Service, ServiceExt};
/// let limits = RateLimiting::builder().global(two_a_minute()).build().unwrap();
/// let inner = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hi")) });
/// let mut svc: RateLimit<_> = limits.layer().layer(inner);
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// let statuses = rt.block_on(async {
///     let mut out = Vec::new();
///     for _ in 0..3 {
///         out.push(svc.ready().await.unwrap().call(path("/")).await.unwrap().status().as_u16());
///     }
///     out
/// });
/// assert_eq!(statuses, [200, 200, 429]);
/// ```
#[derive(Clone)]
pub struct RateLimit<S> {
    pub(super) inner: S,
    pub(super) shared: Arc<Shared>,
    pub(super) mode: Mode,
    /// The policy of every request, when it is one built-in rate policy with nothing to
    /// report or pause on (found once, here, rather than per request).
    pub(super) fast: Option<usize>,
}

impl<S> fmt::Debug for RateLimit<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

pub(super) type Quotas = [Option<(usize, QuotaState)>; 2];

/// What an admitted request carries to its response.
pub(super) struct Admitted {
    permits: Permits,
    quotas: Quotas,
    /// Client side: the policy and key to pause on an upstream 429.
    pause: Option<(usize, Key)>,
}

impl Admitted {
    #[inline(always)]
    fn new() -> Self {
        Self {
            permits: Permits::default(),
            quotas: [None, None],
            pause: None,
        }
    }

    fn needs_shared(&self) -> bool {
        self.quotas.iter().any(Option::is_some) || self.pause.is_some()
    }

    fn finish<B>(self, shared: Option<&Shared>, resp: Response<B>) -> Response<LimitedBody<B>> {
        let Self {
            permits,
            quotas,
            pause,
        } = self;
        let (mut parts, body) = resp.into_parts();
        if let Some(shared) = shared {
            shared.after(&mut parts, &quotas, pause);
        }
        Response::from_parts(parts, LimitedBody::new(body, permits))
    }

    /// What the response future keeps: the permits, if any are held, and the rest only when
    /// a header or a pause needs it (boxed, with the layer's state, so that the common
    /// future — a rate policy, headers off — carries two words beside the inner future).
    #[inline(always)]
    fn split(&mut self, shared: &Arc<Shared>) -> (Option<Permits>, Option<Box<Extra>>) {
        let extra = self.needs_shared().then(|| {
            Box::new(Extra {
                quotas: core::mem::take(&mut self.quotas),
                pause: self.pause.take(),
                shared: shared.clone(),
            })
        });
        let permits = self
            .permits
            .holds()
            .then(|| core::mem::take(&mut self.permits));
        (permits, extra)
    }
}

/// The part of [`Admitted`] a response needs the layer's state for.
pub(super) struct Extra {
    quotas: Quotas,
    pause: Option<(usize, Key)>,
    shared: Arc<Shared>,
}

impl Shared {
    /// On the inner service's response: the quota headers, and the pause on an upstream 429.
    pub(super) fn after(
        &self,
        parts: &mut http::response::Parts,
        quotas: &Quotas,
        pause: Option<(usize, Key)>,
    ) {
        self.quota_headers(&mut parts.headers, quotas);
        if let Some((i, key)) = pause {
            if parts.status == StatusCode::TOO_MANY_REQUESTS {
                // Delay-seconds or an HTTP-date (against the wall clock, which is what a
                // date is in); the pause itself runs on the layer's clock.
                if let Some(wait) = parts
                    .headers
                    .get(RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|s| retry_after::delay(s, std::time::SystemTime::now()))
                {
                    let now = self.clock.now().as_nanos();
                    self.policies[i].pauses.pause(key, now, wait);
                }
            }
        }
    }
}

/// The services [`RateLimit`] wraps: an HTTP service answering a `Request<ReqB>` with a
/// `Response<Self::Body>`, cloned into each admitted request's future and sent across threads
/// with it. Implemented for every service that is; it only names these bounds once (for
/// [`RateLimit`] and, with the `axum` feature, `AxumRateLimit`).
///
/// ```
/// use tollgate::http::WrappedService;
///
/// fn wraps<S: WrappedService<String, Body = String>>(_: &S) {}
/// let echo = tower::service_fn(|req: http::Request<String>| async move {
///     Ok::<_, std::convert::Infallible>(http::Response::new(req.into_body()))
/// });
/// wraps(&echo);
/// ```
pub trait WrappedService<ReqB>:
    Service<Request<ReqB>, Response = Response<Self::Body>, Future: Send + 'static, Error: 'static>
    + Clone
    + Send
    + 'static
{
    /// The body of the service's responses.
    type Body;
}

impl<S, ReqB, ResB> WrappedService<ReqB> for S
where
    S: Service<Request<ReqB>, Response = Response<ResB>, Future: Send + 'static, Error: 'static>
        + Clone
        + Send
        + 'static,
{
    type Body = ResB;
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for RateLimit<S>
where
    S: WrappedService<ReqB, Body = ResB>,
    ReqB: Send + 'static,
    ResB: Send + 'static,
{
    type Response = Response<LimitedBody<ResB>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResB, S::Error>;

    #[inline]
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        let shared = &*self.shared;
        let view = RequestView::of(&req);
        // The commonest case first: one built-in rate policy, nothing to report or pause on;
        // the limiter directly, nothing held.
        if let Some(i) = self.fast {
            let p = &shared.policies[i];
            if let Some(rate) = &p.rate {
                if let Some(r) = rate.try_acquire(&p.policy.key, &view, &shared.client_ip) {
                    return match r {
                        Ok(()) => ResponseFuture {
                            state: State::Plain {
                                fut: self.inner.call(req),
                            },
                        },
                        Err(rejection) => {
                            let d = Denial {
                                rejection,
                                quota: None,
                            };
                            ResponseFuture::rejected(shared.reject(i, d, &view))
                        }
                    };
                }
            }
        }
        let plan = match shared.plan(self.mode, &view) {
            Ok(plan) => plan,
            Err(name) => return ResponseFuture::rejected(shared.unknown_policy(name, &view)),
        };
        // Then: one policy, granted at once, nothing to report or pause on.
        if let [Some(i), None] = plan {
            let p = &shared.policies[i];
            if !shared.want_quota() && !p.policy.pause_on_429 {
                match shared.decide(i, &view) {
                    Step::Granted(g) => {
                        let permits = g
                            .permit
                            .holds()
                            .then(|| Permits([g.permit, Permit::none()]));
                        return ResponseFuture::admitted(self.inner.call(req), permits, None);
                    }
                    Step::Denied(d) => return ResponseFuture::rejected(shared.reject(i, d, &view)),
                    Step::Wait(key) => {
                        return self.wait(req, plan, 0, key, Admitted::new());
                    }
                }
            }
        }
        let mut admitted = Admitted::new();
        for (slot, i) in plan.into_iter().enumerate() {
            let Some(i) = i else { continue };
            match shared.decide(i, &view) {
                Step::Granted(g) => admitted.grant(slot, i, g, shared, &view),
                Step::Denied(d) => return ResponseFuture::rejected(shared.reject(i, d, &view)),
                Step::Wait(key) => return self.wait(req, plan, slot, key, admitted),
            }
        }
        let (permits, extra) = admitted.split(&self.shared);
        drop(admitted); // holds nothing now
        ResponseFuture::admitted(self.inner.call(req), permits, extra)
    }
}

impl Admitted {
    #[inline(always)]
    fn grant(&mut self, slot: usize, i: usize, g: Grant, shared: &Shared, view: &RequestView<'_>) {
        self.permits.0[slot] = g.permit;
        self.quotas[slot] = g.quota.map(|q| (i, q));
        let p = &shared.policies[i];
        if p.policy.pause_on_429 {
            if let Some(key) = p.policy.key.extract(view, &shared.client_ip) {
                self.pause = Some((i, key));
            }
        }
    }
}

impl<S> RateLimit<S> {
    /// The slow path: policy `plan[slot]` must wait for `key`. Everything from there on runs in
    /// one boxed future, with the (ready) inner service moved into it.
    fn wait<ReqB, ResB>(
        &mut self,
        req: Request<ReqB>,
        plan: [Option<usize>; 2],
        slot: usize,
        key: Key,
        mut admitted: Admitted,
    ) -> ResponseFuture<S::Future, ResB, S::Error>
    where
        S: WrappedService<ReqB, Body = ResB>,
        ReqB: Send + 'static,
        ResB: Send + 'static,
    {
        let clone = self.inner.clone();
        let mut inner = core::mem::replace(&mut self.inner, clone);
        let shared = self.shared.clone();
        let fut = async move {
            let mut pending = Some(key);
            for (s, i) in plan.into_iter().enumerate().skip(slot) {
                let Some(i) = i else { continue };
                let step = match pending.take() {
                    Some(key) => Step::Wait(key),
                    None => shared.decide(i, &RequestView::of(&req)),
                };
                let outcome = match step {
                    Step::Granted(g) => Ok(g),
                    Step::Denied(d) => Err(d),
                    Step::Wait(key) => shared.wait(i, key).await,
                };
                match outcome {
                    Ok(g) => admitted.grant(s, i, g, &shared, &RequestView::of(&req)),
                    Err(d) => return Ok(shared.reject(i, d, &RequestView::of(&req))),
                }
            }
            let resp = inner.call(req).await?;
            let shared = admitted.needs_shared().then_some(&*shared);
            Ok(admitted.finish(shared, resp))
        };
        ResponseFuture::waiting(Box::pin(fut))
    }
}

type BoxResponse<B, E> = Pin<Box<dyn Future<Output = Result<Response<LimitedBody<B>>, E>> + Send>>;

pin_project! {
    /// The future of [`RateLimit`]'s response.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
    /// #     use tower::{Layer, ServiceExt};
    /// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
    /// # }
    /// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
    /// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// use tower::{Layer, Service};
    /// let limits = RateLimiting::builder().global(two_a_minute()).build().unwrap();
    /// let inner = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hi")) });
    /// let mut svc = limits.layer().layer(inner);
    /// // The decision is made in `call`: the third future is a ready rejection.
    /// let futures: Vec<ResponseFuture<_, _, _>> = (0..3).map(|_| svc.call(path("/"))).collect();
    /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let statuses: Vec<u16> = futures.into_iter().map(|f| rt.block_on(f).unwrap().status().as_u16()).collect();
    /// assert_eq!(statuses, [200, 200, 429]);
    /// ```
    pub struct ResponseFuture<F, B, E> {
        #[pin]
        state: State<F, B, E>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, B, E> {
        // Admitted, holding nothing and reporting nothing (the fast path): the inner
        // service's response, its body to hand over as it is.
        Plain {
            #[pin]
            fut: F,
        },
        // Admitted: the inner service's response, to wrap.
        Admitted {
            #[pin]
            fut: F,
            permits: Option<Permits>,
            extra: Option<Box<Extra>>,
        },
        // Refused: the rejection, ready.
        Rejected { resp: Option<Response<LimitedBody<B>>> },
        // Waiting in a queue or for an async limiter.
        Waiting { fut: BoxResponse<B, E> },
    }
}

impl<F, B, E> ResponseFuture<F, B, E> {
    #[inline(always)]
    fn admitted(fut: F, permits: Option<Permits>, extra: Option<Box<Extra>>) -> Self {
        Self {
            state: State::Admitted {
                fut,
                permits,
                extra,
            },
        }
    }

    fn rejected(resp: Response<LimitedBody<B>>) -> Self {
        Self {
            state: State::Rejected { resp: Some(resp) },
        }
    }

    fn waiting(fut: BoxResponse<B, E>) -> Self {
        Self {
            state: State::Waiting { fut },
        }
    }
}

impl<F, B, E> ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    /// Polls, making the response's body with `admitted` from an admitted request's inner
    /// body and its held permits, or with `other` from a [`LimitedBody`] (a rejection, or the
    /// slow path's response): so that a body type other than `LimitedBody` (axum's) is built
    /// in one step.
    #[inline(always)]
    pub(crate) fn poll_map<R>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        admitted: impl FnOnce(B, Option<Permits>) -> R,
        other: impl FnOnce(LimitedBody<B>) -> R,
    ) -> Poll<Result<Response<R>, E>> {
        match self.project().state.project() {
            StateProj::Plain { fut } => {
                let resp = core::task::ready!(fut.poll(cx))?;
                Poll::Ready(Ok(resp.map(|body| admitted(body, None))))
            }
            StateProj::Admitted {
                fut,
                permits,
                extra,
            } => {
                let resp = core::task::ready!(fut.poll(cx))?;
                let permits = permits.take();
                Poll::Ready(Ok(match extra.take() {
                    None => resp.map(|body| admitted(body, permits)),
                    Some(extra) => {
                        let Extra {
                            quotas,
                            pause,
                            shared,
                        } = *extra;
                        let (mut parts, body) = resp.into_parts();
                        shared.after(&mut parts, &quotas, pause);
                        Response::from_parts(parts, admitted(body, permits))
                    }
                }))
            }
            StateProj::Rejected { resp } => Poll::Ready(Ok(resp
                .take()
                .unwrap_or_else(|| {
                    // Polled again after completion: an empty 500 rather than a panic.
                    let mut r = Response::new(LimitedBody::full(Bytes::new()));
                    *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
                    r
                })
                .map(other))),
            StateProj::Waiting { fut } => {
                fut.as_mut().poll(cx).map(|r| r.map(|resp| resp.map(other)))
            }
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<LimitedBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.poll_map(cx, LimitedBody::held, core::convert::identity)
    }
}

impl<F, B, E> fmt::Debug for ResponseFuture<F, B, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match &self.state {
            State::Plain { .. } | State::Admitted { .. } => "ResponseFuture::Admitted",
            State::Rejected { .. } => "ResponseFuture::Rejected",
            State::Waiting { .. } => "ResponseFuture::Waiting",
        })
    }
}

/// Says once per process that a client-IP policy saw a request with no peer address
/// ([`MissingKey::Auto`]): the server was started without `ConnectInfo`.
#[cold]
fn log_missing_peer_once(policy: &str) {
    static LOGGED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if LOGGED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    #[cfg(feature = "tracing")]
    tracing::error!(target: "tollgate", policy, "{}", NO_PEER_ADDRESS.phrase());
    #[cfg(not(feature = "tracing"))]
    std::eprintln!("tollgate: policy {policy:?}: {}", NO_PEER_ADDRESS.phrase());
}
