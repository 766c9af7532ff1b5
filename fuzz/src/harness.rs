//! Runs a [`Scenario`] against the real limiter on a [`ManualClock`] and against its reference
//! model, step by step, and panics at the first difference.
//!
//! Compared at every step:
//! - each `try_acquire`: Ok/Err, the [`Reason`], the RetryAfter (exact nanoseconds), the lease's
//!   permit count and whether it returns permits;
//! - each `replenish()`: the permits it reports;
//! - after every operation: `available_permits()`, the whole `statistics()` snapshot,
//!   `is_closed()` and `idle_duration()`;
//! - once: `replenishment_period()`.
//!
//! The model also checks itself: after each denial with a RetryAfter `d` (when the clock can
//! reach it), a copy of the model at `now + d` grants the same request and one at `now + d − 1 ns`
//! does not — RetryAfter means "the exact wait", not just "a wait".

use core::time::Duration;

use tollgate::{
    ConcurrencyLimiter, ConcurrencyOptions, FixedWindowLimiter, FixedWindowOptions, Instant,
    ManualClock, QueueOrder, SlidingWindowLimiter, SlidingWindowOptions, TokenBucketLimiter,
    TokenBucketOptions,
};

use crate::driver::{accepted, Driver, Waiting, NOMINAL_PERIOD};
use crate::input::{Count, Op, Scenario, Segments, Shape, Start, WaitScenario, WindowLen, CAPS};
use crate::model::concurrency::ConcurrencyModel;
use crate::model::fixed_window::FixedWindowModel;
use crate::model::options;
use crate::model::queue::QueueModel;
use crate::model::sliding_window::SlidingWindowModel;
use crate::model::token_bucket::TokenBucketModel;

/// Runs one scenario; panics with a trace at the first difference.
pub fn run(s: &Scenario) {
    match s.shape {
        Shape::Concurrency { limit } => run_concurrency(limit, s.start, &s.ops),
        Shape::TokenBucket {
            limit,
            per_period,
            period,
        } => {
            let limit = limit.resolve(1);
            let per = per_period.resolve(limit);
            run_token_bucket(limit, per, period.ns(), s.start, &s.ops)
        }
        Shape::FixedWindow { limit, window } => {
            run_fixed_window(limit.resolve(1), window.ns(), s.start, &s.ops)
        }
        Shape::SlidingWindow {
            cap,
            limit,
            segments,
            window,
        } => {
            let cap = CAPS[usize::from(cap) % CAPS.len()];
            let args = (limit, segments, window, s.start, &s.ops[..]);
            match cap {
                1 => run_sliding::<1>(args),
                2 => run_sliding::<2>(args),
                3 => run_sliding::<3>(args),
                4 => run_sliding::<4>(args),
                8 => run_sliding::<8>(args),
                16 => run_sliding::<16>(args),
                64 => run_sliding::<64>(args),
                _ => unreachable!("CAPS lists the instantiated capacities"),
            }
        }
        Shape::Gcra { .. }
        | Shape::LeakyMeter { .. }
        | Shape::LeakyShaper { .. }
        | Shape::SlidingCounter { .. }
        | Shape::SlidingLog { .. } => crate::harness_algos::run(s),
    }
}

/// Runs one waiting scenario (any limiter with a queue, waiters polled by hand); panics with a
/// trace at the first difference.
pub fn run_waiting(s: &WaitScenario) {
    let order = if s.newest_first {
        QueueOrder::NewestFirst
    } else {
        QueueOrder::OldestFirst
    };
    match s.shape {
        Shape::Concurrency { limit } => {
            let limit = limit.resolve(1);
            let ql = s.queue_limit.resolve(limit);
            let origin = s.start.resolve(NOMINAL_PERIOD);
            let clock = ManualClock::starting_at(Instant::from_nanos(origin));
            let opts = ConcurrencyOptions::new(limit).with_queue(ql, order);
            let lib = ConcurrencyLimiter::with_clock(opts, &clock);
            let Some((lib, ())) = accepted("concurrency", lib, options::concurrency(limit)) else {
                return;
            };
            let model = QueueModel::new(
                ConcurrencyModel::new(limit, origin),
                origin,
                ql,
                s.newest_first,
            );
            let enqueue = |n: u32| -> Waiting<'_> { Box::pin(lib.acquire(n)) };
            Driver::new(&clock, origin, &lib, None, Some(&lib), model)
                .waiting(&enqueue, &s.steps)
                .run(&s.ops);
        }
        Shape::TokenBucket {
            limit,
            per_period,
            period,
        } => {
            let limit = limit.resolve(1);
            let per = per_period.resolve(limit);
            let ql = s.queue_limit.resolve(limit);
            let period = period.ns();
            let duration = Duration::from_nanos(period);
            let opts = TokenBucketOptions::new(limit, per, duration).with_queue(ql, order);
            let origin = s.start.resolve(period);
            let clock = ManualClock::starting_at(Instant::from_nanos(origin));
            let lib = TokenBucketLimiter::with_clock(opts, &clock);
            let expected = options::token_bucket(limit, per, duration);
            let Some((lib, period)) = accepted("token bucket", lib, expected) else {
                return;
            };
            let model = TokenBucketModel::new(origin, limit, per, period);
            let model = QueueModel::new(model, origin, ql, s.newest_first);
            let enqueue = |n: u32| -> Waiting<'_> { Box::pin(lib.acquire(n)) };
            Driver::new(&clock, origin, &lib, Some(&lib), None, model)
                .waiting(&enqueue, &s.steps)
                .run(&s.ops);
        }
        Shape::FixedWindow { limit, window } => {
            let limit = limit.resolve(1);
            let ql = s.queue_limit.resolve(limit);
            let window = window.ns();
            let duration = Duration::from_nanos(window);
            let origin = s.start.resolve(window);
            let clock = ManualClock::starting_at(Instant::from_nanos(origin));
            let opts = FixedWindowOptions::new(limit, duration).with_queue(ql, order);
            let lib = FixedWindowLimiter::with_clock(opts, &clock);
            let expected = options::fixed_window(limit, duration);
            let Some((lib, window)) = accepted("fixed window", lib, expected) else {
                return;
            };
            let model = FixedWindowModel::new(origin, limit, window);
            let model = QueueModel::new(model, origin, ql, s.newest_first);
            let enqueue = |n: u32| -> Waiting<'_> { Box::pin(lib.acquire(n)) };
            Driver::new(&clock, origin, &lib, Some(&lib), None, model)
                .waiting(&enqueue, &s.steps)
                .run(&s.ops);
        }
        Shape::SlidingWindow {
            cap,
            limit,
            segments,
            window,
        } => {
            let cap = CAPS[usize::from(cap) % CAPS.len()];
            let args = (limit, segments, window, s);
            match cap {
                1 => wait_sliding::<1>(args, order),
                2 => wait_sliding::<2>(args, order),
                3 => wait_sliding::<3>(args, order),
                4 => wait_sliding::<4>(args, order),
                8 => wait_sliding::<8>(args, order),
                16 => wait_sliding::<16>(args, order),
                64 => wait_sliding::<64>(args, order),
                _ => unreachable!("CAPS lists the instantiated capacities"),
            }
        }
        // Waiting scenarios decode only the four shapes above (see `WaitScenario::decode`).
        Shape::Gcra { .. }
        | Shape::LeakyMeter { .. }
        | Shape::LeakyShaper { .. }
        | Shape::SlidingCounter { .. }
        | Shape::SlidingLog { .. } => {}
    }
}

fn wait_sliding<const N: usize>(
    (limit, segments, window, s): (Count, Segments, WindowLen, &WaitScenario),
    order: QueueOrder,
) {
    let limit = limit.resolve(1);
    let ql = s.queue_limit.resolve(limit);
    let segments = segments.resolve(N);
    let window_ns = if s.moving() {
        // Short segments of 1..=8 ns.
        u64::from(s.seg).saturating_mul(u64::from(segments))
    } else {
        match window {
            WindowLen::Whole(p) => p.ns(),
            WindowLen::PerSegment(p) => p.ns().saturating_mul(u64::from(segments)),
        }
    };
    let duration = Duration::from_nanos(window_ns);
    let opts = SlidingWindowOptions::new(limit, duration, segments).with_queue(ql, order);
    let origin = s.start.resolve(window_ns / u64::from(segments.max(1)));
    let clock = ManualClock::starting_at(Instant::from_nanos(origin));
    let lib = SlidingWindowLimiter::<_, N>::with_capacity(opts, &clock);
    let expected = options::sliding_window(limit, duration, segments, N);
    let Some((lib, segment)) = accepted("sliding window", lib, expected) else {
        return;
    };
    let model = SlidingWindowModel::new(origin, limit, segments, segment);
    let model = QueueModel::new(model, origin, ql, s.newest_first);
    let enqueue = |n: u32| -> Waiting<'_> { Box::pin(lib.acquire(n)) };
    Driver::new(&clock, origin, &lib, Some(&lib), None, model)
        .waiting(&enqueue, &s.steps)
        .run(&s.ops);
}

fn run_concurrency(limit: Count, start: Start, ops: &[Op]) {
    let limit = limit.resolve(1);
    let origin = start.resolve(NOMINAL_PERIOD);
    let clock = ManualClock::starting_at(Instant::from_nanos(origin));
    let lib = ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(limit), &clock);
    let Some((lib, ())) = accepted("concurrency", lib, options::concurrency(limit)) else {
        return;
    };
    let model = ConcurrencyModel::new(limit, origin);
    Driver::new(&clock, origin, &lib, None, Some(&lib), model).run(ops);
}

fn run_token_bucket(limit: u32, per: u32, period: u64, start: Start, ops: &[Op]) {
    let duration = Duration::from_nanos(period);
    let lib = TokenBucketOptions::new(limit, per, duration);
    let origin = start.resolve(period);
    let clock = ManualClock::starting_at(Instant::from_nanos(origin));
    let lib = TokenBucketLimiter::with_clock(lib, &clock);
    let expected = options::token_bucket(limit, per, duration);
    let Some((lib, period)) = accepted("token bucket", lib, expected) else {
        return;
    };
    let model = TokenBucketModel::new(origin, limit, per, period);
    Driver::new(&clock, origin, &lib, Some(&lib), None, model).run(ops);
}

fn run_fixed_window(limit: u32, window: u64, start: Start, ops: &[Op]) {
    let duration = Duration::from_nanos(window);
    let origin = start.resolve(window);
    let clock = ManualClock::starting_at(Instant::from_nanos(origin));
    let lib = FixedWindowLimiter::with_clock(FixedWindowOptions::new(limit, duration), &clock);
    let expected = options::fixed_window(limit, duration);
    let Some((lib, window)) = accepted("fixed window", lib, expected) else {
        return;
    };
    let model = FixedWindowModel::new(origin, limit, window);
    Driver::new(&clock, origin, &lib, Some(&lib), None, model).run(ops);
}

fn run_sliding<const N: usize>(
    (limit, segments, window, start, ops): (Count, Segments, WindowLen, Start, &[Op]),
) {
    let limit = limit.resolve(1);
    let segments = segments.resolve(N);
    let window_ns = match window {
        WindowLen::Whole(p) => p.ns(),
        WindowLen::PerSegment(p) => p.ns().saturating_mul(u64::from(segments)),
    };
    let duration = Duration::from_nanos(window_ns);
    let opts = SlidingWindowOptions::new(limit, duration, segments);
    let origin = start.resolve(window_ns / u64::from(segments.max(1)));
    let clock = ManualClock::starting_at(Instant::from_nanos(origin));
    let lib = SlidingWindowLimiter::<_, N>::with_capacity(opts, &clock);
    let expected = options::sliding_window(limit, duration, segments, N);
    let Some((lib, segment)) = accepted("sliding window", lib, expected) else {
        return;
    };
    let model = SlidingWindowModel::new(origin, limit, segments, segment);
    Driver::new(&clock, origin, &lib, Some(&lib), None, model).run(ops);
}
