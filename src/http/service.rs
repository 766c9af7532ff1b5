use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use pin_project_lite::pin_project;
use tower_service::Service;

use super::body::{LimitedBody, Permits};
use super::compiled::Step;
use super::endpoint::Mode;
use super::granted::{Record, Report};
use super::meter::Outcome;
use super::policy::{Denial, Grant, Key, RequestView};
use super::shared::{Plan, Quotas, Shared};

/// The rate-limiting [`Service`]: decides in `call`, answers a refused request itself, and
/// passes an admitted one to the inner service.
///
/// ```
/// # use std::{convert::Infallible, time::Duration};
/// use http::{Request, Response};
/// use tollgate::http::{Policy, RateLimit, RateLimiting};
/// use tollgate::FixedWindowOptions;
///
/// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// use tower::{Layer, Service, ServiceExt};
/// let limits = RateLimiting::builder().global(two_a_minute()).build().unwrap();
/// let inner = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hi")) });
/// let mut svc: RateLimit<_> = limits.layer().layer(inner);
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// let statuses = rt.block_on(async {
///     let mut out = Vec::new();
///     for _ in 0..3 {
///         out.push(svc.ready().await.unwrap().call(Request::get("/").body(()).unwrap()).await.unwrap().status().as_u16());
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

/// What the layer decided for a request, from its policies in order.
enum Verdict {
    /// Pass it to the inner service, holding nothing and reporting nothing.
    Pass,
    /// Pass it to the inner service, with the permits it holds, if any, and what its
    /// response needs the layer's state for, if anything.
    Forward(Option<Permits>, Option<Box<Extra>>),
    /// Refuse it.
    Refuse(Refusal),
    /// A policy has it wait (boxed: the way on is a boxed future anyway).
    Wait(Box<Waiting>),
}

/// Who refused a request, and why.
enum Refusal {
    /// Policy `i`.
    Policy(usize, Denial),
    /// The selector chose this name, which names no policy.
    Unknown(&'static str),
}

impl Refusal {
    /// The response to the refused request.
    #[inline(always)]
    fn respond<B>(self, shared: &Shared, view: &RequestView<'_>) -> Response<LimitedBody<B>> {
        match self {
            Refusal::Policy(i, denial) => shared.refuse(i, denial, view),
            Refusal::Unknown(name) => shared.unknown_policy(name, view),
        }
    }
}

/// A request that policy `i`, `plan[slot]`, has wait for `key`, after the policies before it
/// granted `admitted` (noted in `report`, for the `on_granted` hook).
struct Waiting {
    plan: Plan,
    slot: usize,
    i: usize,
    key: Key,
    admitted: Admitted,
    report: Option<Box<Report>>,
}

/// What an admitted request carries to its response: the permits it holds, and what its
/// response needs the layer's state for, when anything (boxed: the common request — a rate
/// policy, headers off — carries two words and an empty pair of permits).
#[derive(Default)]
struct Admitted {
    permits: Permits,
    extra: Option<Box<Extra>>,
}

/// The part of [`Admitted`] a response needs the layer's state for: the quotas to report,
/// and the partition to pause on an upstream 429 (client side).
pub(super) struct Extra {
    quotas: Quotas,
    pause: Option<(usize, Key)>,
    shared: Arc<Shared>,
}

impl Admitted {
    /// Goes on through `plan` from `slot` on: each policy grants (and what it grants is
    /// added, and noted in `report`), refuses, or has the request wait. A request every
    /// policy let through is shown to the `on_granted` hook (`report`'s `done`).
    #[inline(always)]
    fn through<R: Record>(
        mut self,
        shared: &Arc<Shared>,
        plan: Plan,
        from: usize,
        view: &RequestView<'_>,
        mut report: R,
    ) -> Verdict {
        for (slot, i) in plan.into_iter().enumerate().skip(from) {
            let Some(i) = i else { continue };
            match shared.decide(i, view, &mut report) {
                Step::Granted(g) => {
                    report.granted(slot, i, g.quota);
                    self.grant(slot, i, g, shared, view);
                }
                Step::Denied(denial) => {
                    let quota = denial.quota;
                    if let Some(refusal) = self.deny(slot, i, denial, shared, view) {
                        return Verdict::Refuse(refusal);
                    }
                    report.shadow_refused(slot, i, quota);
                }
                Step::Wait(key) => {
                    let admitted = self;
                    return Verdict::Wait(Box::new(Waiting {
                        plan,
                        slot,
                        i,
                        key,
                        admitted,
                        report: report.into_report(),
                    }));
                }
            }
        }
        report.done(&**shared, view);
        match self.split() {
            (None, None) => Verdict::Pass,
            (permits, extra) => Verdict::Forward(permits, extra),
        }
    }

    /// Policy `i`, `plan[slot]`, granted the request: it holds `g`'s permit (timed as a lease
    /// when the layer reports metrics) and reports `g`'s quota.
    #[inline(always)]
    fn grant(
        &mut self,
        slot: usize,
        i: usize,
        mut g: Grant,
        shared: &Arc<Shared>,
        view: &RequestView<'_>,
    ) {
        let p = &shared.policies[i];
        if let Some(m) = &p.meter {
            m.count(Outcome::Acquired);
            g.permit = g.permit.timed(m);
        }
        self.permits.0[slot] = g.permit;
        let pause = p.pause_key(view, &shared.client_ip);
        if g.quota.is_some() || pause.is_some() {
            let extra = self.extra.get_or_insert_with(|| Extra::new(shared));
            extra.quotas[slot] = g.quota.map(|q| (i, q));
            if let Some(key) = pause {
                extra.pause = Some((i, key));
            }
        }
    }

    /// Policy `i`, `plan[slot]`, refused the request: the refusal; or, for a policy in shadow
    /// mode, nothing (counted, shown to the hook, its quota reported, and the request goes on).
    #[inline(always)]
    fn deny(
        &mut self,
        slot: usize,
        i: usize,
        d: Denial,
        shared: &Arc<Shared>,
        view: &RequestView<'_>,
    ) -> Option<Refusal> {
        let p = &shared.policies[i];
        if !p.shadow {
            p.count(Outcome::Refused);
            return Some(Refusal::Policy(i, d));
        }
        shared.shadow_refused(i, &d, view);
        if let Some(q) = d.quota {
            let extra = self.extra.get_or_insert_with(|| Extra::new(shared));
            extra.quotas[slot] = Some((i, q));
        }
        None
    }

    /// What the response future keeps: the permits, if the body must keep any, and the
    /// extra.
    #[inline(always)]
    fn split(self) -> (Option<Permits>, Option<Box<Extra>>) {
        let permits = self.permits.kept().then_some(self.permits);
        (permits, self.extra)
    }
}

impl Extra {
    /// Nothing to report or pause on yet.
    #[inline(always)]
    fn new(shared: &Arc<Shared>) -> Box<Self> {
        Box::new(Extra {
            quotas: [None, None],
            pause: None,
            shared: shared.clone(),
        })
    }

    /// The quotas of the policies whose charge the response settled, as they are now.
    fn settled(&mut self, fresh: [Option<crate::quota::QuotaState>; 2]) {
        for (slot, q) in fresh.into_iter().enumerate() {
            if let (Some(q), Some((_, old))) = (q, self.quotas[slot].as_mut()) {
                *old = q;
            }
        }
    }

    /// On the inner service's response: the quota headers, and the pause on an upstream 429.
    fn after(self, parts: &mut http::response::Parts) {
        self.shared.after(parts, &self.quotas, self.pause);
    }
}

/// The verdict through `plan` when the layer has an `on_granted` hook: the walk noting what
/// the hook sees (out of line, so that a layer without one keeps its code as it was).
#[inline(never)]
fn reported(shared: &Arc<Shared>, plan: Plan, view: &RequestView<'_>) -> Verdict {
    Admitted::default().through(shared, plan, 0, view, Report::default())
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
        let view = RequestView::of(&req);
        match self.verdict(&view) {
            Verdict::Pass => ResponseFuture::plain(self.inner.call(req)),
            Verdict::Forward(permits, extra) => {
                ResponseFuture::admitted(self.inner.call(req), permits, extra)
            }
            Verdict::Refuse(r) => ResponseFuture::rejected(r.respond(&self.shared, &view)),
            Verdict::Wait(waiting) => self.wait(req, waiting),
        }
    }
}

impl<S> RateLimit<S> {
    /// The layer's verdict on a request: through the policies of its plan, in order; or, when
    /// this service has one built-in rate policy with nothing to hold, report or pause on
    /// (`fast`, found once), by that policy's limiter directly.
    #[inline(always)]
    fn verdict(&self, view: &RequestView<'_>) -> Verdict {
        let shared = &self.shared;
        if let Some(i) = self.fast {
            let p = &shared.policies[i];
            let ip = &shared.client_ip;
            // `None`: the request has no key; the plan's way says what it gets.
            if let Some(r) = p
                .rate
                .as_ref()
                .and_then(|r| r.try_acquire(&p.policy.key, view, ip))
            {
                return match r {
                    Ok(()) => Verdict::Pass,
                    Err(rejection) => {
                        let quota = None;
                        let denial = Denial { rejection, quota };
                        Verdict::Refuse(Refusal::Policy(i, denial))
                    }
                };
            }
        }
        match shared.plan(self.mode, view) {
            // The one branch a layer without an `on_granted` hook pays for it.
            Ok(plan) => match &shared.on_granted {
                None => Admitted::default().through(shared, plan, 0, view, ()),
                Some(_) => reported(shared, plan, view),
            },
            Err(name) => Verdict::Refuse(Refusal::Unknown(name)),
        }
    }

    /// A request that must wait: the rest of its way runs in one boxed future, with the
    /// (ready) inner service moved into it.
    fn wait<ReqB, ResB>(
        &mut self,
        req: Request<ReqB>,
        mut waiting: Box<Waiting>,
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
            let (permits, extra) = loop {
                let Waiting {
                    plan,
                    slot,
                    i,
                    key,
                    mut admitted,
                    report,
                } = *waiting;
                let mut report = report.map_or_else(Report::default, |r| *r);
                // Timed for the metrics; dropped with this future, a client gone while queued.
                let timer = shared.queued(i);
                // Timed for the `on_granted` hook.
                let since = shared.on_granted.as_ref().map(|_| shared.clock.now());
                let outcome = shared.wait(i, key).await;
                let view = RequestView::of(&req);
                let verdict = match outcome {
                    Ok(g) => {
                        if let Some(t) = timer {
                            t.done(Outcome::Acquired);
                        }
                        report.charged(Some(key), 1);
                        report.granted(slot, i, g.quota);
                        admitted.grant(slot, i, g, &shared, &view);
                        None
                    }
                    Err(denial) => {
                        if let Some(t) = timer {
                            t.done(shared.policies[i].refused());
                        }
                        let quota = denial.quota;
                        let refusal = admitted.deny(slot, i, denial, &shared, &view);
                        if refusal.is_none() {
                            report.charged(Some(key), 1);
                            report.shadow_refused(slot, i, quota);
                        }
                        refusal
                    }
                };
                if let Some(since) = since {
                    report.waited(slot, shared.clock.now().saturating_duration_since(since));
                }
                let verdict = match verdict {
                    Some(refusal) => Verdict::Refuse(refusal),
                    None => admitted.through(&shared, plan, slot + 1, &view, report),
                };
                match verdict {
                    Verdict::Pass => break (None, None),
                    Verdict::Forward(permits, extra) => break (permits, extra),
                    Verdict::Refuse(r) => return Ok(r.respond(&shared, &view)),
                    Verdict::Wait(next) => waiting = next,
                }
            };
            let mut permits = permits;
            let resp = match inner.call(req).await {
                Ok(resp) => resp,
                Err(e) => {
                    if let Some(p) = permits.as_mut() {
                        p.fail();
                    }
                    return Err(e);
                }
            };
            if let Some(p) = permits.as_mut() {
                p.observe(resp.status());
            }
            let (mut parts, body) = resp.into_parts();
            let mut extra = extra;
            if let Some(p) = permits.as_mut().filter(|p| p.charged()) {
                let fresh = p.respond(&parts);
                if let Some(e) = extra.as_mut() {
                    e.settled(fresh);
                }
            }
            if let Some(extra) = extra {
                extra.after(&mut parts);
            }
            Ok(Response::from_parts(
                parts,
                LimitedBody::held(body, permits),
            ))
        };
        ResponseFuture::waiting(Box::pin(fut))
    }
}

type BoxResponse<B, E> = Pin<Box<dyn Future<Output = Result<Response<LimitedBody<B>>, E>> + Send>>;

pin_project! {
    /// The future of [`RateLimit`]'s response.
    ///
    /// ```
    /// # use std::{convert::Infallible, time::Duration};
    /// use http::{Request, Response};
    /// use tollgate::http::{Policy, RateLimiting, ResponseFuture};
    /// use tollgate::FixedWindowOptions;
    ///
    /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// use tower::{Layer, Service};
    /// let limits = RateLimiting::builder().global(two_a_minute()).build().unwrap();
    /// let inner = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hi")) });
    /// let mut svc = limits.layer().layer(inner);
    /// // The decision is made in `call`: the third future is a ready rejection.
    /// let futures: Vec<ResponseFuture<_, _, _>> = (0..3).map(|_| svc.call(Request::get("/").body(()).unwrap())).collect();
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
        // Admitted, holding nothing and reporting nothing (the commonest case): the inner
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
    fn plain(fut: F) -> Self {
        Self {
            state: State::Plain { fut },
        }
    }

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
                let resp = match core::task::ready!(fut.poll(cx)) {
                    Ok(resp) => resp,
                    Err(e) => {
                        if let Some(p) = permits.as_mut() {
                            p.fail();
                        }
                        return Poll::Ready(Err(e));
                    }
                };
                let mut permits = permits.take();
                if let Some(p) = permits.as_mut() {
                    p.observe(resp.status());
                }
                let charged = permits.as_ref().is_some_and(Permits::charged);
                Poll::Ready(Ok(match extra.take() {
                    None if !charged => resp.map(|body| admitted(body, permits)),
                    mut extra => {
                        let (mut parts, body) = resp.into_parts();
                        if let Some(p) = permits.as_mut().filter(|_| charged) {
                            let fresh = p.respond(&parts);
                            if let Some(e) = extra.as_mut() {
                                e.settled(fresh);
                            }
                        }
                        if let Some(extra) = extra {
                            extra.after(&mut parts);
                        }
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
