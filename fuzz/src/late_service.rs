//! The late-service property (issue 24): a queued rate limiter whose queue is served at every
//! tick and the same limiter served only now and then (by `replenish()` every `every` ticks,
//! and by whatever the requests themselves serve) give every request the same answer and end
//! in the same state. Each waiter is granted as of the instant its permits came, whenever the
//! queue is served, so a delayed timer, a descheduled thread or a clock stepped by its owner
//! changes nothing.
//!
//! Eight limiters (token bucket, fixed window, sliding window, GCRA, leaky meter, leaky shaper,
//! and — on a clock of 1 ns ticks, since their permits come back at any nanosecond — the
//! sliding counter and the sliding log), both queue orders, small limits so that waits overlap, requests that wait (`acquire`) or do
//! not (`try_acquire`). Futures are polled only when woken, as an executor polls them (a poll
//! serves the queue itself).

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Wake;

use tollgate::*;

/// One tick of the clock: every event happens on a tick boundary.
const TICK: Duration = Duration::from_millis(250);
/// The tick of the sliding counter's and log's runs.
const NS: Duration = Duration::from_nanos(1);
/// Ticks after the last arrival before the runs are compared: more than any wait here.
const TAIL: u64 = 600;

/// A scenario.
#[derive(Clone, Debug)]
pub struct Input {
    /// Which limiter (0..8).
    pub kind: u8,
    /// The limit (burst, capacity): 1..=8.
    pub limit: u32,
    /// Tokens per period (bucket), leak per interval (meter): 1..=limit + 2.
    pub per: u32,
    /// The period in ticks: 1..=4.
    pub period_ticks: u32,
    /// The sliding window's segments: 1..=4.
    pub segments: u32,
    /// The queue limit in permits: 1..=3 times the limit.
    pub queue: u32,
    /// Newest-first order.
    pub newest_first: bool,
    /// The rare run serves every this many ticks: 2..=17.
    pub every: u64,
    /// Requests: (tick it arrives, permits, waits?).
    pub requests: Vec<(u64, u32, bool)>,
}

impl Input {
    /// Reads a scenario from the fuzzer's bytes (never fails: missing bytes read as zeros).
    pub fn decode(data: &[u8]) -> Input {
        let mut header = data.iter().copied().chain(core::iter::repeat(0)).take(8);
        let mut byte = || header.next().unwrap_or(0);
        let kind = byte() % 8;
        let limit = 1 + u32::from(byte() % 8);
        let per = 1 + u32::from(byte()) % (limit + 2);
        let period_ticks = 1 + u32::from(byte() % 4);
        let segments = 1 + u32::from(byte() % 4);
        let queue = limit * (1 + u32::from(byte() % 3));
        let newest_first = byte() % 2 == 1;
        let every = 2 + u64::from(byte() % 16);
        let mut requests = Vec::new();
        let mut t = 0u64;
        let rest = data.get(8..).unwrap_or(&[]);
        for triple in rest.chunks(3).take(64) {
            let at = |i: usize| triple.get(i).copied().unwrap_or(0);
            let (gap, n, waits) = (at(0), at(1), at(2));
            t += u64::from(gap % 12);
            requests.push((t, 1 + u32::from(n) % limit, waits % 3 != 0));
        }
        Input {
            kind,
            limit,
            per,
            period_ticks,
            segments,
            queue,
            newest_first,
            every,
            requests,
        }
    }

    /// The bytes [`decode`](Self::decode) reads back as this scenario (for the seeds).
    pub fn encode(&self) -> Vec<u8> {
        let mut v = vec![
            self.kind,
            (self.limit - 1) as u8,
            (self.per - 1) as u8,
            (self.period_ticks - 1) as u8,
            (self.segments - 1) as u8,
            (self.queue / self.limit - 1) as u8,
            u8::from(self.newest_first),
            (self.every - 2) as u8,
        ];
        let mut t = 0;
        for &(at, n, waits) in &self.requests {
            v.extend([(at - t) as u8, (n - 1) as u8, if waits { 1 } else { 0 }]);
            t = at;
        }
        v
    }
}

struct Wakes(AtomicUsize);
impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A waiting request: its future, its wake-ups, and how many it had at its last poll.
struct Waiting<'a> {
    id: usize,
    fut: Pin<Box<dyn Future<Output = Result<Lease<'a>, Rejection>> + 'a>>,
    wakes: Arc<Wakes>,
    seen: usize,
}

impl Waiting<'_> {
    fn poll(&mut self) -> Poll<bool> {
        self.seen = self.wakes.0.load(Ordering::SeqCst);
        let waker = Waker::from(self.wakes.clone());
        self.fut
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .map(|r| r.is_ok())
    }
    fn woken(&self) -> bool {
        self.wakes.0.load(Ordering::SeqCst) != self.seen
    }
}

type Outcome = (Vec<Option<bool>>, Statistics);

/// What `limiter` answers each request, and its statistics at the end, when `replenish()` runs
/// every `every` ticks.
fn run<'a, L: Limiter + Replenishing>(
    limiter: &'a L,
    clock: &ManualClock,
    tick: Duration,
    input: &Input,
    every: u64,
    acquire: impl Fn(&'a L, u32) -> Pin<Box<dyn Future<Output = Result<Lease<'a>, Rejection>> + 'a>>,
) -> Outcome {
    let requests = &input.requests;
    let horizon = requests.last().map_or(0, |r| r.0) + TAIL;
    let mut answers = vec![None; requests.len()];
    let mut waiting: Vec<Waiting<'a>> = Vec::new();
    let settle = |waiting: &mut Vec<Waiting<'a>>, answers: &mut Vec<Option<bool>>| {
        waiting.retain_mut(|w| {
            if !w.woken() {
                return true;
            }
            match w.poll() {
                Poll::Ready(ok) => {
                    answers[w.id] = Some(ok);
                    false
                }
                Poll::Pending => true,
            }
        });
    };
    let mut next = 0;
    for t in 0..=horizon {
        if t > 0 {
            clock.advance(tick);
        }
        if t % every == 0 {
            limiter.replenish();
        }
        settle(&mut waiting, &mut answers);
        while next < requests.len() && requests[next].0 == t {
            let (_, n, waits) = requests[next];
            if waits {
                let mut w = Waiting {
                    id: next,
                    fut: acquire(limiter, n),
                    wakes: Arc::new(Wakes(AtomicUsize::new(0))),
                    seen: 0,
                };
                match w.poll() {
                    Poll::Ready(ok) => answers[next] = Some(ok),
                    Poll::Pending => waiting.push(w),
                }
            } else {
                answers[next] = Some(limiter.try_acquire(n).is_ok());
            }
            next += 1;
        }
    }
    limiter.replenish();
    settle(&mut waiting, &mut answers);
    assert!(
        waiting.is_empty(),
        "a waiter was still queued {TAIL} ticks after the last arrival"
    );
    (answers, limiter.statistics())
}

/// Runs `input` served at every tick and served every `input.every` ticks; panics on any
/// difference, with the scenario.
pub fn check(input: &Input) {
    let outcome = |every: u64| -> Outcome {
        let clock = ManualClock::new();
        let order = if input.newest_first {
            QueueOrder::NewestFirst
        } else {
            QueueOrder::OldestFirst
        };
        let (limit, per, queue) = (input.limit, input.per, input.queue);
        let period = TICK * input.period_ticks;
        match input.kind {
            0 => {
                let opts = TokenBucketOptions::new(limit, per, period).with_queue(queue, order);
                let l = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
                run(&l, &clock, TICK, input, every, |l, n| {
                    Box::pin(l.acquire(n))
                })
            }
            1 => {
                let opts = FixedWindowOptions::new(limit, period).with_queue(queue, order);
                let l = FixedWindowLimiter::with_clock(opts, &clock).unwrap();
                run(&l, &clock, TICK, input, every, |l, n| {
                    Box::pin(l.acquire(n))
                })
            }
            2 => {
                let window = period * input.segments;
                let opts = SlidingWindowOptions::new(limit, window, input.segments)
                    .with_queue(queue, order);
                let l = SlidingWindowLimiter::<_, 4>::with_capacity(opts, &clock).unwrap();
                run(&l, &clock, TICK, input, every, |l, n| {
                    Box::pin(l.acquire(n))
                })
            }
            3 => {
                let opts = GcraOptions::per(period, limit).with_queue(queue, order);
                let l = GcraLimiter::with_clock(opts, &clock).unwrap();
                run(&l, &clock, TICK, input, every, |l, n| {
                    Box::pin(l.acquire(n))
                })
            }
            4 => {
                let opts =
                    LeakyBucketOptions::new(limit, per.min(limit), period).with_queue(queue, order);
                let l = LeakyBucketMeter::with_clock(opts, &clock).unwrap();
                run(&l, &clock, TICK, input, every, |l, n| {
                    Box::pin(l.acquire(n))
                })
            }
            6 => {
                // Windows of a few nanoseconds, served at every nanosecond or every few.
                let window = Duration::from_nanos(u64::from(1 + input.period_ticks + per));
                let opts = SlidingCounterOptions::new(limit, window).with_queue(queue, order);
                let l = SlidingCounterLimiter::with_clock(opts, &clock).unwrap();
                run(&l, &clock, NS, input, every, |l, n| Box::pin(l.acquire(n)))
            }
            7 => {
                let window = Duration::from_nanos(u64::from(input.period_ticks + per));
                let opts = SlidingLogOptions::new(limit, window).with_queue(queue, order);
                let l = SlidingLogLimiter::<_, 8>::with_capacity(opts, &clock).unwrap();
                run(&l, &clock, NS, input, every, |l, n| Box::pin(l.acquire(n)))
            }
            _ => {
                let opts = ShaperOptions::per(period, limit)
                    .with_max_permits(limit)
                    .with_queue(queue, order);
                let l = LeakyBucketShaper::with_clock(opts, &clock).unwrap();
                run(&l, &clock, TICK, input, every, |l, n| {
                    Box::pin(l.acquire(n))
                })
            }
        }
    };
    let on_time = outcome(1);
    let late = outcome(input.every);
    assert_eq!(
        on_time, late,
        "served at every tick (left) and every {} ticks (right) differ: {input:?}",
        input.every
    );
}
