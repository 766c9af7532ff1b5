//! The options target: arbitrary options never panic, and every constructor accepts or refuses
//! exactly as the rules in `model::options` say. An accepted limiter starts as documented: all
//! permits available, idle since creation, nothing counted, open, with the options it was given.

use core::time::Duration;

use tollgate::{
    ConcurrencyLimiter, ConcurrencyOptions, FixedWindowLimiter, FixedWindowOptions, Instant,
    Limiter, ManualClock, OptionsError, QueueOrder, Replenishing, SlidingWindowLimiter,
    SlidingWindowOptions, Statistics, TokenBucketLimiter, TokenBucketOptions,
};

use crate::input::OptionsInput;
use crate::model::options as rules;

fn same<T: PartialEq + core::fmt::Debug>(what: &str, got: T, want: T) {
    assert_eq!(got, want, "{what}");
}

/// A fresh limiter: everything available, idle for zero time, nothing counted, open.
fn fresh(what: &str, l: &dyn Limiter, limit: u32) {
    same(what, l.available_permits(), u64::from(limit));
    same(what, l.idle_duration(), Some(Duration::ZERO));
    same(what, l.is_closed(), false);
    let want = Statistics {
        available_permits: u64::from(limit),
        queued_permits: 0,
        total_successful: 0,
        total_failed: 0,
    };
    same(what, l.statistics(), want);
}

fn error_is_printable(e: OptionsError) {
    let text = e.to_string();
    assert!(!text.is_empty());
    let _ = format!("{e:?}");
    let _: &dyn std::error::Error = &e;
}

fn check_sliding<const N: usize>(o: SlidingWindowOptions, clock: &ManualClock) {
    let want = rules::sliding_window(o.permit_limit, o.window, o.segments_per_window, N);
    same("SlidingWindowOptions::validate", o.validate(N), want);
    match (SlidingWindowLimiter::<_, N>::with_capacity(o, clock), want) {
        (Ok(l), Ok(segment)) => {
            same("sliding options()", l.options(), o);
            same(
                "sliding replenishment_period",
                l.replenishment_period(),
                Duration::from_nanos(segment),
            );
            fresh("fresh sliding window", &l, o.permit_limit);
        }
        (Err(e), Err(w)) => {
            same("sliding with_clock error", e, w);
            error_is_printable(e);
        }
        (got, want) => panic!(
            "sliding window N={N} {o:?}: library {:?}, model {want:?}",
            got.map(|_| ())
        ),
    }
}

/// Checks one set of options against every constructor.
pub fn run(i: &OptionsInput) {
    let limit = i.limit.resolve();
    let per = i.per_period.resolve();
    let segments = i.segments.resolve();
    let period = i.period.resolve();
    let queue = i.queue_limit.resolve();
    let order = if i.newest_first {
        QueueOrder::NewestFirst
    } else {
        QueueOrder::OldestFirst
    };
    let clock = ManualClock::starting_at(Instant::from_nanos(i.start));

    let c = ConcurrencyOptions::new(limit).with_queue(queue, order);
    let want = rules::concurrency(limit);
    same("ConcurrencyOptions::validate", c.validate(), want);
    match (ConcurrencyLimiter::with_clock(c, &clock), want) {
        (Ok(l), Ok(())) => {
            same("concurrency options()", l.options(), c);
            fresh("fresh concurrency limiter", &l, limit);
        }
        (Err(e), Err(w)) => {
            same("concurrency error", e, w);
            error_is_printable(e);
        }
        (got, want) => panic!(
            "concurrency {c:?}: library {:?}, model {want:?}",
            got.map(|_| ())
        ),
    }

    let t = TokenBucketOptions::new(limit, per, period).with_queue(queue, order);
    let want = rules::token_bucket(limit, per, period);
    same("TokenBucketOptions::validate", t.validate(), want);
    match (TokenBucketLimiter::with_clock(t, &clock), want) {
        (Ok(l), Ok(ns)) => {
            same("token bucket options()", l.options(), t);
            same(
                "token bucket replenishment_period",
                l.replenishment_period(),
                Duration::from_nanos(ns),
            );
            fresh("fresh token bucket", &l, limit);
        }
        (Err(e), Err(w)) => {
            same("token bucket error", e, w);
            error_is_printable(e);
        }
        (got, want) => panic!(
            "token bucket {t:?}: library {:?}, model {want:?}",
            got.map(|_| ())
        ),
    }

    let f = FixedWindowOptions::new(limit, period).with_queue(queue, order);
    let want = rules::fixed_window(limit, period);
    same("FixedWindowOptions::validate", f.validate(), want);
    match (FixedWindowLimiter::with_clock(f, &clock), want) {
        (Ok(l), Ok(ns)) => {
            same("fixed window options()", l.options(), f);
            same(
                "fixed window replenishment_period",
                l.replenishment_period(),
                Duration::from_nanos(ns),
            );
            fresh("fresh fixed window", &l, limit);
        }
        (Err(e), Err(w)) => {
            same("fixed window error", e, w);
            error_is_printable(e);
        }
        (got, want) => panic!(
            "fixed window {f:?}: library {:?}, model {want:?}",
            got.map(|_| ())
        ),
    }

    let s = SlidingWindowOptions::new(limit, period, segments).with_queue(queue, order);
    check_sliding::<1>(s, &clock);
    check_sliding::<2>(s, &clock);
    check_sliding::<3>(s, &clock);
    check_sliding::<16>(s, &clock);
    check_sliding::<64>(s, &clock);
    check_sliding::<1000>(s, &clock);
}
