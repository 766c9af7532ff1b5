//! Drives one limiter and its reference model through the same operations on a
//! [`ManualClock`], comparing every observable at every step (see [`crate::harness`] for what is
//! compared), and the options check every constructor shares ([`accepted`]).

use core::fmt::Write as _;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;

use tollgate::{
    Clock, Instant, Lease, ManualClock, Peek, Rejection, Release, Replenishing, Statistics,
};

use crate::input::{Op, Permits, Point, Span, HUGE};
use crate::model::queue::Polled;
use crate::model::time::BACKWARDS_FROM;
use crate::model::{Expect, Model};

/// Nominal period used to resolve spans for the concurrency limiter (which has none).
pub(crate) const NOMINAL_PERIOD: u64 = 1_000_000_000;

/// Compares a constructor's result with the options model; `Some` when both accept.
pub(crate) fn accepted<L, T: PartialEq + core::fmt::Debug>(
    what: &str,
    lib: Result<L, tollgate::OptionsError>,
    model: Result<T, tollgate::OptionsError>,
) -> Option<(L, T)> {
    match (lib, model) {
        (Ok(l), Ok(t)) => Some((l, t)),
        (Err(a), Err(b)) if a == b => None,
        (Err(a), Err(b)) => panic!("{what}: library refused with {a:?}, the model with {b:?}"),
        (Ok(_), Err(b)) => panic!("{what}: library accepted options the model refuses ({b:?})"),
        (Err(a), Ok(_)) => panic!("{what}: library refused ({a:?}) options the model accepts"),
    }
}

/// One line of the trace printed on a difference.
#[derive(Debug)]
struct Line {
    clock: u64,
    op: Op,
    what: String,
}

pub(crate) struct Driver<'a, M: Model> {
    clock: &'a ManualClock,
    origin: u64,
    /// The limiter: every one is also a `Peek`, checked against each `try_acquire`.
    lib: &'a dyn Peek,
    replenishing: Option<&'a dyn Replenishing>,
    releaser: Option<&'a (dyn Release + Sync)>,
    model: M,
    /// Leases held (concurrency limiter), with their permit counts as the model knows them.
    leases: Vec<(Lease<'a>, u32)>,
    last_n: u32,
    last_retry: Option<u128>,
    trace: Vec<Line>,
    /// Waiting scenarios: `acquire(n)` on the limiter.
    enqueue: Option<&'a Enqueue<'a>>,
    /// Futures not resolved yet, with the model's waiter ids.
    pending: Vec<(usize, Waiting<'a>)>,
    /// Moving clock: ns to advance after each operation (`% 4`).
    steps: &'a [u8],
}

/// A hand-polled `acquire(n)` future.
pub(crate) type Waiting<'a> = Pin<Box<dyn Future<Output = Result<Lease<'a>, Rejection>> + 'a>>;
/// Makes one.
type Enqueue<'a> = dyn Fn(u32) -> Waiting<'a> + 'a;

impl<'a, M: Model> Driver<'a, M> {
    pub(crate) fn new(
        clock: &'a ManualClock,
        origin: u64,
        lib: &'a dyn Peek,
        replenishing: Option<&'a dyn Replenishing>,
        releaser: Option<&'a (dyn Release + Sync)>,
        model: M,
    ) -> Self {
        Driver {
            clock,
            origin,
            lib,
            replenishing,
            releaser,
            model,
            leases: Vec::new(),
            last_n: 1,
            last_retry: None,
            trace: Vec::new(),
            enqueue: None,
            pending: Vec::new(),
            steps: &[],
        }
    }

    pub(crate) fn waiting(mut self, enqueue: &'a Enqueue<'a>, steps: &'a [u8]) -> Self {
        self.enqueue = Some(enqueue);
        self.steps = steps;
        self
    }

    fn now(&self) -> u64 {
        self.clock.now().as_nanos()
    }

    #[cold]
    fn fail(&self, msg: &str) -> ! {
        let mut s = String::new();
        let _ = writeln!(s, "DIFFERENCE: {msg}");
        let _ = writeln!(s, "model: {:?}", self.model);
        let _ = writeln!(s, "limiter created at raw instant {}", self.origin);
        for (i, l) in self.trace.iter().enumerate() {
            let _ = writeln!(
                s,
                "  #{i:<3} clock={:<20} (+{:<20}) {:?} {}",
                l.clock,
                self.model.elapsed(l.clock),
                l.op,
                l.what
            );
        }
        panic!("{s}");
    }

    pub(crate) fn run(mut self, ops: &[Op]) {
        if let Some(r) = self.replenishing {
            let got = r.replenishment_period().as_nanos();
            let want = self.model.step_ns().expect("rate limiters have a period");
            if got != want {
                self.fail(&format!("replenishment_period {got} ns, model {want} ns"));
            }
        }
        self.check_state();
        for (i, &op) in ops.iter().enumerate() {
            if self.stop_before(op) {
                return;
            }
            self.step(op);
            self.check_state();
            if let Some(&b) = self.steps.get(i) {
                let d = u64::from(b % 4);
                if d > 0 {
                    self.clock.advance(Duration::from_nanos(d));
                    self.record(Op::Read, format!("(moving clock) advanced {d} ns"));
                    self.check_state();
                }
            }
        }
        // Every future still pending is dropped, one by one, each a cancellation to compare.
        while !self.pending.is_empty() {
            if self.model.beyond_limits(self.now()) && crate::known::sliding_beyond_tick_max() {
                return;
            }
            self.step(Op::Cancel(0));
            self.check_state();
        }
    }

    /// KNOWN ISSUE 4: see `known::sliding_beyond_tick_max`.
    fn stop_before(&self, op: Op) -> bool {
        matches!(op, Op::Acquire(_))
            && self.model.beyond_limits(self.now())
            && crate::known::sliding_beyond_tick_max()
    }

    fn record(&mut self, op: Op, what: String) {
        let clock = self.now();
        self.trace.push(Line { clock, op, what });
    }

    fn step(&mut self, op: Op) {
        let now = self.now();
        match op {
            Op::Acquire(p) => {
                let n = self.permits(p, now);
                self.acquire(op, now, n);
            }
            Op::DropLease(k) => {
                if self.leases.is_empty() {
                    return self.record(op, "no lease held".into());
                }
                let (lease, n) = self.leases.remove(usize::from(k) % self.leases.len());
                drop(lease);
                if n > 0 {
                    self.model.release(now, n);
                }
                self.record(op, format!("dropped a lease of {n}"));
            }
            Op::ForgetLease(k) => {
                if self.leases.is_empty() {
                    return self.record(op, "no lease held".into());
                }
                let (lease, n) = self.leases.remove(usize::from(k) % self.leases.len());
                let forgotten = lease.forget();
                if forgotten != n {
                    self.fail(&format!("forget() returned {forgotten}, lease held {n}"));
                }
                self.record(op, format!("forgot a lease of {n}"));
            }
            Op::Release(p) => {
                let Some(r) = self.releaser else {
                    return self.record(op, "(read)".into());
                };
                let n = self.permits(p, now);
                r.release(n);
                self.model.release(now, n);
                self.record(op, format!("released {n} by hand"));
            }
            Op::Advance(s) => {
                let d = self.span(s, now);
                self.clock.advance(Duration::from_nanos(d));
                self.record(op, format!("advanced {d} ns"));
            }
            Op::Back(s) => {
                let d = self.span(s, now);
                self.clock.set(Instant::from_nanos(now.wrapping_sub(d)));
                self.record(op, format!("set back {d} ns"));
            }
            Op::Set(p) => {
                let t = self.point(p, now);
                self.clock.set(Instant::from_nanos(t));
                self.record(op, format!("set to {t}"));
            }
            Op::Replenish => {
                let Some(r) = self.replenishing else {
                    return self.record(op, "(read)".into());
                };
                let got = r.replenish();
                let want = self.model.replenish(now);
                self.record(op, format!("library {got}, model {want}"));
                if u128::from(got) != want {
                    self.fail("replenish() returned a different count");
                }
            }
            Op::Close => {
                self.lib.close();
                self.model.close();
                if self.releaser.is_some() && crate::known::close_restarts_idle() {
                    self.model.release(now, 0); // KNOWN ISSUE 2: see `known`
                }
                self.record(op, String::new());
            }
            Op::Read => self.record(op, String::new()),
            Op::Enqueue(p) => {
                let Some(enqueue) = self.enqueue else {
                    return self.record(op, "(no queue)".into());
                };
                let n = self.permits(p, now);
                self.last_n = n;
                let id = self.model.waiter_new(n);
                self.pending.push((id, enqueue(n)));
                self.record(op, format!("waiter #{id} for {n}, not polled"));
            }
            Op::Poll(k) => {
                if self.pending.is_empty() {
                    return self.record(op, "no pending waiter".into());
                }
                let i = usize::from(k) % self.pending.len();
                self.poll(op, i, now);
            }
            Op::Cancel(k) => {
                if self.pending.is_empty() {
                    return self.record(op, "no pending waiter".into());
                }
                let (id, fut) = self.pending.remove(usize::from(k) % self.pending.len());
                let stage = self.model_waiter_stage(id);
                drop(fut);
                self.model.waiter_drop(id, now);
                self.record(op, format!("dropped waiter #{id} ({stage})"));
            }
        }
    }

    fn model_waiter_stage(&self, id: usize) -> String {
        format!("{:?}", self.model.waiter(id).state)
    }

    fn poll(&mut self, op: Op, i: usize, now: u64) {
        let mut cx = Context::from_waker(Waker::noop());
        let id = self.pending[i].0;
        let got = self.pending[i].1.as_mut().poll(&mut cx);
        let want = self.model.waiter_poll(id, now);
        let shown = match &got {
            Poll::Pending => "Pending".to_string(),
            Poll::Ready(Ok(l)) => format!("Ok({})", l.permits()),
            Poll::Ready(Err(r)) => format!("Err({:?}, {:?})", r.reason(), r.retry_after()),
        };
        self.record(op, format!("waiter #{id}: library {shown}, model {want:?}"));
        match (got, want) {
            (Poll::Pending, Polled::Pending) => {}
            (Poll::Ready(Ok(lease)), Polled::Granted) => {
                drop(self.pending.remove(i));
                let n = self.model.waiter(id).n;
                if lease.permits() != n {
                    self.fail(&format!("lease holds {} permits", lease.permits()));
                }
                let returns = self.releaser.is_some() && n > 0;
                if lease.returns_permits() != returns {
                    self.fail(&format!("returns_permits() is {}", lease.returns_permits()));
                }
                if self.releaser.is_some() {
                    self.leases.push((lease, n));
                }
            }
            (Poll::Ready(Err(r)), Polled::Refused(d)) => {
                drop(self.pending.remove(i));
                if r.reason() != d.reason {
                    self.fail("different reasons");
                }
                if let Some(ra) = r.retry_after() {
                    self.last_retry = Some(ra.as_nanos());
                }
                if let Expect::Exactly(want) = d.retry_after {
                    if !same_wait(r.retry_after(), want) {
                        self.fail("different RetryAfter");
                    }
                }
            }
            _ => self.fail("the waiter's outcome differs"),
        }
    }

    fn acquire(&mut self, op: Op, now: u64, n: u32) {
        self.last_n = n;
        let before = self.lib.statistics();
        let peeked = self.lib.peek(n);
        if self.lib.statistics() != before {
            self.fail("peek changed the statistics");
        }
        let got = self.lib.try_acquire(n);
        // With nobody queued, `try_acquire` decides exactly what `peek` saw at the same instant
        // (with waiters ahead it may serve them first, which `peek` never does).
        if self.model.queue_empty() {
            let same = match (&peeked, &got) {
                (Ok(()), Ok(_)) => true,
                (Err(a), Err(b)) => a == b,
                _ => false,
            };
            if !same {
                let shown = format!(
                    "peek {peeked:?}, try_acquire {:?}",
                    got.as_ref().map(|l| l.permits())
                );
                self.fail(&format!("peek disagrees: {shown}"));
            }
        }
        let want = self.model.acquire(now, n);
        let shown = match &got {
            Ok(l) => format!("Ok({})", l.permits()),
            Err(r) => format!("Err({:?}, {:?})", r.reason(), r.retry_after()),
        };
        self.record(op, format!("n={n}: library {shown}, model {want:?}"));
        match (got, want) {
            (Ok(lease), Ok(())) => {
                if lease.permits() != n {
                    self.fail(&format!("lease holds {} permits", lease.permits()));
                }
                let returns = self.releaser.is_some() && n > 0;
                if lease.returns_permits() != returns {
                    self.fail(&format!("returns_permits() is {}", lease.returns_permits()));
                }
                if self.releaser.is_some() {
                    self.leases.push((lease, n));
                }
            }
            (Err(r), Err(d)) => {
                if r.reason() != d.reason {
                    self.fail("different reasons");
                }
                if let Some(ra) = r.retry_after() {
                    self.last_retry = Some(ra.as_nanos());
                }
                if let Expect::Exactly(want) = d.retry_after {
                    if !same_wait(r.retry_after(), want) {
                        self.fail("different RetryAfter");
                    }
                    if let (Some(wait), true) = (want, self.model.queue_empty()) {
                        self.check_model_retry(now, n, wait);
                    }
                }
            }
            (Ok(_), Err(_)) => self.fail("library granted, model denied"),
            (Err(_), Ok(())) => self.fail("library denied, model granted"),
        }
    }

    /// The model's RetryAfter is exact: waiting that long succeeds, 1 ns less does not.
    fn check_model_retry(&self, now: u64, n: u32, wait: u128) {
        if wait == 0 {
            self.fail("model: RetryAfter of zero");
        }
        if self.model.elapsed(now) == 0 && now != self.origin {
            // The clock reads before creation, which counts as the creation instant: the wait is
            // measured from there, and the real clock has farther to go.
            return;
        }
        if self.model.clock_behind(now) {
            // A reading behind the state (a clock stepped back) waits from the state's own
            // tick, where real time is at least when the reading is merely stale.
            return;
        }
        if self.model.elapsed(now) + wait >= BACKWARDS_FROM {
            return; // past 2^63 ns since creation: the clock reads that as a backwards step
        }
        let then = now.wrapping_add(wait as u64);
        if self.model.beyond_limits(then) {
            return; // the library's time stops there (documented): nothing is ever freed
        }
        if self.model.clone().acquire(then, n).is_err() {
            self.fail("model self-check: waiting RetryAfter does not succeed");
        }
        if self.model.clone().acquire(then.wrapping_sub(1), n).is_ok() {
            self.fail("model self-check: RetryAfter − 1 ns already succeeds");
        }
    }

    fn check_state(&mut self) {
        let now = self.now();
        let available = self.model.available(now);
        let got = self.lib.available_permits();
        if u128::from(got) != available {
            self.fail(&format!(
                "available_permits(): library {got}, model {available}"
            ));
        }
        let (successful, failed) = self.model.counts();
        let want = Statistics {
            available_permits: available as u64,
            queued_permits: self.model.queued_permits() as u64,
            total_successful: successful,
            total_failed: failed,
        };
        let stats = self.lib.statistics();
        if stats != want {
            self.fail(&format!("statistics(): library {stats:?}, model {want:?}"));
        }
        if self.lib.is_closed() != self.model.is_closed() {
            self.fail("is_closed() differs");
        }
        let skip_idle =
            self.replenishing.is_some() && crate::known::idle_raw_clock(self.origin, now);
        if let (Expect::Exactly(want), false) = (self.model.idle(now), skip_idle) {
            let got = self.lib.idle_duration().map(|d| d.as_nanos());
            // KNOWN ISSUE 3: see `known::idle_none_behind_clock`.
            let allowed = got.is_none()
                && self.model.clock_behind(now)
                && crate::known::idle_none_behind_clock();
            if got != want && !allowed {
                self.fail(&format!(
                    "idle_duration(): library {got:?} ns, model {want:?} ns"
                ));
            }
        }
    }

    fn permits(&self, p: Permits, now: u64) -> u32 {
        let limit = self.model.limit();
        let available = u32::try_from(self.model.available(now)).unwrap_or(u32::MAX);
        match p {
            Permits::Zero => 0,
            Permits::One => 1,
            Permits::Two => 2,
            Permits::Small(v) => u32::from(v),
            Permits::Limit => limit,
            Permits::BelowLimit => limit - 1,
            Permits::AboveLimit => limit.saturating_add(1),
            Permits::Max => u32::MAX,
            Permits::Available => available,
            Permits::AboveAvailable => available.saturating_add(1),
            Permits::Last => self.last_n,
            Permits::Any(v) => v,
        }
    }

    fn span(&self, s: Span, now: u64) -> u64 {
        let step = self.model.step_ns().unwrap_or(u128::from(NOMINAL_PERIOD));
        let window = self.model.window_ns().unwrap_or(step);
        let retry = self.last_retry.unwrap_or(1);
        let ns: u128 = match s {
            Span::Zero => 0,
            Span::Nano => 1,
            Span::Small(v) => u128::from(v),
            Span::PeriodLess1 => step - 1,
            Span::Period => step,
            Span::PeriodMore1 => step + 1,
            Span::Periods(k) => u128::from(k) * step,
            Span::Window => window,
            Span::ToBoundary => step - self.model.elapsed(now) % step,
            Span::RetryAfter => retry,
            Span::RetryLess1 => retry.saturating_sub(1),
            Span::Huge(i) => u128::from(HUGE[usize::from(i) % HUGE.len()]),
            Span::Any(v) => u128::from(v),
        };
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    fn point(&self, p: Point, now: u64) -> u64 {
        let o = self.origin;
        match p {
            Point::Origin => o,
            Point::BeforeOrigin => o.wrapping_sub(1),
            Point::LastForward => o.wrapping_add((1 << 63) - 1),
            Point::FirstBackward => o.wrapping_add(1 << 63),
            Point::OriginPlus(s) => o.wrapping_add(self.span(s, now)),
            Point::Zero => 0,
            Point::Max => u64::MAX,
            Point::Any(v) => v,
        }
    }
}

/// The library's RetryAfter against the model's nanoseconds. A `Duration` holds up to
/// `u64::MAX` seconds; past that the library saturates the seconds.
fn same_wait(lib: Option<Duration>, model: Option<u128>) -> bool {
    match (lib, model) {
        (None, None) => true,
        // A rejection keeps 64 bits of wait: exact below 2^64 - 1 ns, `Duration::MAX` from
        // there on (never shorter than the true wait).
        (Some(d), Some(ns)) => {
            if ns >= u128::from(u64::MAX) {
                d == Duration::MAX
            } else {
                d.as_nanos() == ns
            }
        }
        _ => false,
    }
}
