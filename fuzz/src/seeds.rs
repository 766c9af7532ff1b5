//! The hand-made seed inputs checked in under `fuzz/corpus/<target>/`, written by
//! `cargo run --example make_seeds` (from `fuzz/`). Each is a short scenario aimed at one edge.

use crate::input::Codec;
use crate::input::{
    Count, Dur, Num, Op, OptionsInput, Period, Permits, Point, Scenario, Segments, Shape, Span,
    Start, WaitKind, WaitScenario, WindowLen, Writer,
};

use Op::*;

/// `PERIODS` index of 1 s and of 60 s.
const SECOND: Period = Period::Listed(7);
const MINUTE: Period = Period::Listed(8);

fn scenario(shape: Shape, start: Start, ops: Vec<Op>) -> Vec<u8> {
    Scenario { shape, start, ops }.encode()
}

/// A waiting scenario (queue limit, order) for the `waiting` target.
fn waiting(shape: Shape, queue_limit: Count, newest_first: bool, ops: Vec<Op>) -> Vec<u8> {
    WaitScenario {
        shape,
        queue_limit,
        newest_first,
        start: Start::Zero,
        seg: 0,
        ops,
        steps: Vec::new(),
    }
    .encode(WaitKind::Any)
}

/// A moving-clock sliding-window scenario: segments of `seg` ns, the clock advancing
/// `steps[i] % 4` ns after operation `i`.
fn moving(shape: Shape, newest_first: bool, seg: u8, ops: Vec<Op>, steps: Vec<u8>) -> Vec<u8> {
    WaitScenario {
        shape,
        queue_limit: Count::Same,
        newest_first,
        start: Start::Zero,
        seg,
        ops,
        steps,
    }
    .encode(WaitKind::MovingSliding)
}

/// Seeds of the waiting targets.
fn waiting_seeds(v: &mut Vec<(&'static str, &'static str, Vec<u8>)>) {
    let tb = |limit, per| Shape::TokenBucket {
        limit,
        per_period: per,
        period: SECOND,
    };
    let fw = |limit| Shape::FixedWindow {
        limit,
        window: SECOND,
    };
    let sw = |limit, segments| Shape::SlidingWindow {
        cap: 3, // N = 4
        limit,
        segments,
        window: WindowLen::Whole(SECOND),
    };
    let c = |limit| Shape::Concurrency { limit };
    // A 0-permit waiter granted on a bucket that refilled, dropped before it saw the grant:
    // the give-back (of nothing) dates the full bucket by the current period.
    v.push((
        "waiting",
        "give-back-of-nothing-to-a-full-bucket",
        waiting(
            tb(Count::One, Count::One),
            Count::Three,
            false,
            vec![
                Acquire(Permits::One),
                Enqueue(Permits::Zero),
                Poll(0),
                Advance(Span::Periods(3)),
                Replenish,
                Advance(Span::Periods(2)),
                Cancel(0),
                Advance(Span::Small(5)),
                Read,
            ],
        ),
    ));
    // Oldest-first: waiters served in order by refills; a newcomer held back, RetryAfter with
    // the queue ahead (the refill cap matters: limit 4, 2 per second, waiters of 4 and 3).
    v.push((
        "waiting",
        "oldest-first-retry-after-with-queue-ahead",
        waiting(
            tb(Count::Small(4), Count::Two),
            Count::Small(8),
            false,
            vec![
                Acquire(Permits::Limit),
                Enqueue(Permits::Small(4)),
                Poll(0),
                Enqueue(Permits::Small(3)),
                Poll(1),
                Acquire(Permits::One),
                Advance(Span::RetryAfter),
                Acquire(Permits::One),
                Advance(Span::RetryLess1),
                Replenish,
                Poll(0),
                Poll(0),
                Acquire(Permits::One),
                Advance(Span::Periods(2)),
                Poll(0),
                Acquire(Permits::One),
            ],
        ),
    ));
    // Newest-first: eviction of more waiters than one wake batch (issue 9 item 5).
    let mut ops = vec![Acquire(Permits::Limit)];
    for i in 0..20 {
        ops.push(Enqueue(Permits::One));
        ops.push(Poll(i));
    }
    ops.extend([
        Enqueue(Permits::Limit),
        Poll(20),
        DropLease(0),
        Poll(0),
        Poll(0),
    ]);
    v.push((
        "waiting",
        "newest-first-evicts-twenty",
        waiting(c(Count::Small(20)), Count::Same, true, ops),
    ));
    // A cancelled 100-permit head with 40 one-permit waiters behind it (issue 9 item 1).
    let mut ops = vec![Acquire(Permits::Small(40))];
    ops.extend([Enqueue(Permits::Small(100)), Poll(0)]);
    for i in 1..=40 {
        ops.push(Enqueue(Permits::One));
        ops.push(Poll(i));
    }
    ops.extend([Cancel(0), Read, Poll(0), Poll(5), Poll(30)]);
    v.push((
        "waiting",
        "cancelled-head-serves-forty",
        waiting(c(Count::Small(100)), Count::Small(200), false, ops),
    ));
    // Close with waiters queued, granted-unobserved and unpolled.
    v.push((
        "waiting",
        "close-with-waiters-at-every-stage",
        waiting(
            fw(Count::Three),
            Count::Small(6),
            false,
            vec![
                Acquire(Permits::Limit),
                Enqueue(Permits::Two),
                Enqueue(Permits::One),
                Enqueue(Permits::Small(3)),
                Poll(0),
                Poll(1),
                Poll(2),
                Advance(Span::Period),
                Replenish,
                Close,
                Poll(0),
                Poll(0),
                Poll(0),
                Acquire(Permits::One),
            ],
        ),
    ));
    // Sliding window: a waiter granted in the current segment and dropped gives back.
    v.push((
        "waiting",
        "sliding-give-back-same-segment",
        waiting(
            sw(Count::Small(4), Segments::Cap),
            Count::Small(4),
            false,
            vec![
                Acquire(Permits::Small(4)),
                Enqueue(Permits::Two),
                Poll(0),
                Enqueue(Permits::One),
                Poll(1),
                Advance(Span::Window),
                Replenish,
                Cancel(0),
                Acquire(Permits::Two),
                Cancel(0),
                Advance(Span::Period),
                Acquire(Permits::Small(4)),
            ],
        ),
    ));
    // Queue full: RetryAfter with a queue ahead; newest-first exceeding the queue limit.
    v.push((
        "waiting",
        "queue-full-retry-after",
        waiting(
            tb(Count::Small(10), Count::Small(5)),
            Count::Small(10),
            false,
            vec![
                Acquire(Permits::Limit),
                Enqueue(Permits::Small(10)),
                Poll(0),
                Enqueue(Permits::One),
                Poll(1),
                Advance(Span::RetryAfter),
                Enqueue(Permits::One),
                Poll(1),
                Advance(Span::RetryLess1),
                Enqueue(Permits::One),
                Poll(2),
            ],
        ),
    ));
    // Moving clock, 1 ns and 3 ns segments: denials and waiters while segments slide by.
    let ops = vec![
        Acquire(Permits::Limit),
        Acquire(Permits::One),
        Enqueue(Permits::Two),
        Poll(0),
        Acquire(Permits::One),
        Poll(0),
        Enqueue(Permits::One),
        Poll(1),
        Replenish,
        Poll(0),
        Acquire(Permits::Limit),
        Cancel(0),
        Acquire(Permits::One),
        Poll(0),
    ];
    let steps = vec![1, 0, 1, 2, 3, 1, 0, 1, 3, 2, 1, 1, 0, 3];
    for (name, seg, segments) in [
        ("one-ns-segments", 1, Segments::Cap),
        ("three-ns-segments", 3, Segments::Within(2)),
    ] {
        v.push((
            "sliding_window_moving",
            name,
            moving(
                sw(Count::Small(4), segments),
                false,
                seg,
                ops.clone(),
                steps.clone(),
            ),
        ));
    }
    v.push((
        "sliding_window_moving",
        "newest-first-two-ns",
        moving(sw(Count::Three, Segments::Within(1)), true, 2, ops, steps),
    ));
}

/// (target, file name, bytes) for every seed.
pub fn all() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let mut v = Vec::new();

    // --- concurrency
    let c = |limit| Shape::Concurrency { limit };
    v.push((
        "concurrency",
        "take-drop-retake",
        scenario(
            c(Count::Three),
            Start::Zero,
            vec![
                Acquire(Permits::Two),
                Acquire(Permits::Two),
                Acquire(Permits::Zero),
                DropLease(0),
                Acquire(Permits::Limit),
                Acquire(Permits::AboveLimit),
                Acquire(Permits::Zero),
                Advance(Span::Period),
                DropLease(0),
                Read,
            ],
        ),
    ));
    v.push((
        "concurrency",
        "max-limit-and-bogus-release",
        scenario(
            c(Count::Max),
            Start::One,
            vec![
                Acquire(Permits::Max),
                Acquire(Permits::Zero),
                Release(Permits::Small(7)),
                Acquire(Permits::Small(7)),
                ForgetLease(1),
                Release(Permits::Max),
                Acquire(Permits::Available),
            ],
        ),
    ));
    v.push((
        "concurrency",
        "closed-and-backwards-idle",
        scenario(
            c(Count::One),
            Start::NearMax(3),
            vec![
                Acquire(Permits::One),
                Advance(Span::Huge(3)),
                DropLease(0),
                Back(Span::Small(9)),
                Acquire(Permits::One),
                Close,
                Acquire(Permits::One),
                Acquire(Permits::Two),
                DropLease(0),
                Set(Point::Zero),
                Read,
            ],
        ),
    ));

    // --- token bucket
    let tb = |limit, per_period, period| Shape::TokenBucket {
        limit,
        per_period,
        period,
    };
    v.push((
        "token_bucket",
        "retry-after-exact",
        scenario(
            tb(Count::Small(10), Count::Two, MINUTE),
            Start::Zero,
            vec![
                Acquire(Permits::Small(10)),
                Acquire(Permits::Small(3)),
                Advance(Span::RetryLess1),
                Acquire(Permits::Last),
                Advance(Span::Nano),
                Acquire(Permits::Last),
                Acquire(Permits::Zero),
                Advance(Span::Periods(9)),
                Replenish,
                Acquire(Permits::Limit),
            ],
        ),
    ));
    v.push((
        "token_bucket",
        "huge-period-near-max",
        scenario(
            tb(Count::Max, Count::One, Period::Listed(18)),
            Start::Max,
            vec![
                Acquire(Permits::Max),
                Acquire(Permits::One),
                Acquire(Permits::Zero),
                Advance(Span::Huge(1)),
                Set(Point::LastForward),
                Acquire(Permits::One),
                Set(Point::FirstBackward),
                Acquire(Permits::One),
                Replenish,
            ],
        ),
    ));
    v.push((
        "token_bucket",
        "one-ns-backwards",
        scenario(
            tb(Count::One, Count::Same, Period::Small(1)),
            Start::PeriodBeforeMax,
            vec![
                Acquire(Permits::One),
                Acquire(Permits::One),
                Advance(Span::Nano),
                Replenish,
                Back(Span::Small(3)),
                Acquire(Permits::One),
                Set(Point::BeforeOrigin),
                Acquire(Permits::Zero),
                Set(Point::OriginPlus(Span::Periods(200))),
                Close,
                Acquire(Permits::One),
            ],
        ),
    ));
    v.push((
        "token_bucket",
        "refill-more-than-limit",
        scenario(
            tb(Count::Small(5), Count::SamePlus1, Period::Small(7)),
            Start::Any(12345),
            vec![
                Acquire(Permits::Limit),
                Advance(Span::PeriodLess1),
                Acquire(Permits::One),
                Advance(Span::ToBoundary),
                Acquire(Permits::Available),
                Acquire(Permits::AboveAvailable),
                Advance(Span::RetryAfter),
                Acquire(Permits::Last),
                Read,
            ],
        ),
    ));

    // --- fixed window
    let fw = |limit, window| Shape::FixedWindow { limit, window };
    v.push((
        "fixed_window",
        "window-boundary",
        scenario(
            fw(Count::Small(100), MINUTE),
            Start::Zero,
            vec![
                Acquire(Permits::Small(100)),
                Acquire(Permits::One),
                Advance(Span::RetryLess1),
                Acquire(Permits::Last),
                Advance(Span::Nano),
                Acquire(Permits::Limit),
                Advance(Span::Periods(3)),
                Replenish,
                Read,
            ],
        ),
    ));
    v.push((
        "fixed_window",
        "one-ns-wrapping",
        scenario(
            fw(Count::One, Period::Small(1)),
            Start::PeriodBeforeMax,
            vec![
                Acquire(Permits::One),
                Acquire(Permits::Zero),
                Advance(Span::Nano),
                Acquire(Permits::One),
                Set(Point::OriginPlus(Span::Huge(6))),
                Back(Span::Small(2)),
                Acquire(Permits::One),
                Replenish,
                Acquire(Permits::One),
            ],
        ),
    ));
    v.push((
        "fixed_window",
        "max-limit-long-window",
        scenario(
            fw(Count::Max, Period::Listed(15)),
            Start::Half,
            vec![
                Acquire(Permits::BelowLimit),
                Acquire(Permits::Two),
                Acquire(Permits::One),
                Acquire(Permits::Zero),
                Advance(Span::Period),
                Acquire(Permits::Max),
                Close,
                Acquire(Permits::Zero),
            ],
        ),
    ));

    // --- sliding window (cap index: 0→1, 1→2, 2→3, 3→4, 4→8, 5→16, 6→64)
    let sw = |cap, limit, segments, window| Shape::SlidingWindow {
        cap,
        limit,
        segments,
        window,
    };
    v.push((
        "sliding_window",
        "doc-example-3-segments",
        scenario(
            sw(
                2,
                Count::Small(10),
                Segments::Cap,
                WindowLen::PerSegment(SECOND),
            ),
            Start::Zero,
            vec![
                Acquire(Permits::Small(7)),
                Advance(Span::Period),
                Acquire(Permits::Small(3)),
                Acquire(Permits::One),
                Advance(Span::RetryLess1),
                Acquire(Permits::Last),
                Advance(Span::Nano),
                Acquire(Permits::Last),
                Replenish,
                Advance(Span::Window),
                Read,
            ],
        ),
    ));
    v.push((
        "sliding_window",
        "64-segments-of-1ns",
        scenario(
            sw(
                6,
                Count::Small(50),
                Segments::Cap,
                WindowLen::PerSegment(Period::Small(1)),
            ),
            Start::NearMax(20),
            vec![
                Acquire(Permits::Small(5)),
                Advance(Span::Small(3)),
                Acquire(Permits::Small(40)),
                Advance(Span::Small(30)),
                Acquire(Permits::Small(9)),
                Acquire(Permits::Two),
                Advance(Span::RetryAfter),
                Acquire(Permits::Last),
                Back(Span::Small(10)),
                Acquire(Permits::Available),
                Replenish,
                Advance(Span::Window),
            ],
        ),
    ));
    v.push((
        "sliding_window",
        "single-segment-huge-window",
        scenario(
            sw(
                0,
                Count::Max,
                Segments::One,
                WindowLen::Whole(Period::Listed(18)),
            ),
            Start::Max,
            vec![
                Acquire(Permits::Max),
                Acquire(Permits::Zero),
                Advance(Span::Huge(0)),
                Set(Point::LastForward),
                Acquire(Permits::One),
                Replenish,
                Close,
                Acquire(Permits::One),
            ],
        ),
    ));
    v.push((
        "sliding_window",
        "uneven-segments",
        scenario(
            sw(
                5,
                Count::Small(9),
                Segments::Within(6),
                WindowLen::Whole(Period::Small(100)),
            ),
            Start::Any(1 << 40),
            vec![
                Acquire(Permits::Small(3)),
                Advance(Span::Period),
                Acquire(Permits::Two),
                Advance(Span::PeriodMore1),
                Acquire(Permits::Small(4)),
                Acquire(Permits::One),
                Advance(Span::ToBoundary),
                Acquire(Permits::AboveAvailable),
                Advance(Span::RetryAfter),
                Acquire(Permits::Last),
                Set(Point::BeforeOrigin),
                Acquire(Permits::Zero),
            ],
        ),
    ));

    // --- reproducers of known library issues (see `known`): they pass with the allowances
    // and fail with TOLLGATE_FUZZ_STRICT=1.
    v.push((
        "token_bucket",
        "known-1-idle-before-creation",
        scenario(
            tb(Count::One, Count::One, SECOND),
            Start::One,
            vec![Back(Span::Small(3))],
        ),
    ));
    v.push((
        "token_bucket",
        "known-1-idle-across-clock-wrap",
        scenario(
            tb(Count::One, Count::One, SECOND),
            Start::Max,
            vec![Set(Point::OriginPlus(Span::Period))],
        ),
    ));
    v.push((
        "concurrency",
        "known-2-close-restarts-idle",
        scenario(
            c(Count::One),
            Start::Zero,
            vec![Advance(Span::Period), Close],
        ),
    ));
    v.push((
        "token_bucket",
        "known-3-idle-none-behind-clock",
        scenario(
            tb(Count::Two, Count::One, SECOND),
            Start::Zero,
            vec![
                Acquire(Permits::One),
                Advance(Span::Periods(2)),
                Replenish,
                Set(Point::Origin),
            ],
        ),
    ));
    v.push((
        "fixed_window",
        "known-3-idle-none-behind-clock",
        scenario(
            fw(Count::One, SECOND),
            Start::Zero,
            vec![
                Acquire(Permits::One),
                Advance(Span::Periods(2)),
                Replenish,
                Set(Point::Origin),
            ],
        ),
    ));
    v.push((
        "sliding_window",
        "known-4-overflow-past-tick-max",
        scenario(
            sw(
                0,
                Count::One,
                Segments::One,
                WindowLen::Whole(Period::Small(1)),
            ),
            Start::Zero,
            vec![
                Set(Point::OriginPlus(Span::Huge(0))),
                Acquire(Permits::One),
                Acquire(Permits::One),
            ],
        ),
    ));

    // --- options
    let opt = |o: OptionsInput| {
        let mut w = Writer::default();
        o.encode(&mut w);
        w.bytes
    };
    let base = OptionsInput {
        limit: Num::Small(10),
        per_period: Num::One,
        segments: Num::Small(4),
        queue_limit: Num::Zero,
        newest_first: false,
        period: Dur::Listed(7),
        start: 0,
    };
    v.push(("options", "valid", opt(base)));
    v.push((
        "options",
        "zeros",
        opt(OptionsInput {
            limit: Num::Zero,
            per_period: Num::Zero,
            segments: Num::Zero,
            period: Dur::Zero,
            ..base
        }),
    ));
    v.push((
        "options",
        "period-2-pow-64",
        opt(OptionsInput {
            period: Dur::MaxNanosPlus1,
            newest_first: true,
            queue_limit: Num::Max,
            ..base
        }),
    ));
    v.push((
        "options",
        "segment-too-short",
        opt(OptionsInput {
            segments: Num::Small(200),
            period: Dur::Listed(5),
            start: u64::MAX,
            ..base
        }),
    ));
    v.push((
        "options",
        "max-everything",
        opt(OptionsInput {
            limit: Num::Max,
            per_period: Num::Max,
            segments: Num::Max,
            period: Dur::MaxNanos,
            ..base
        }),
    ));
    waiting_seeds(&mut v);
    v
}
