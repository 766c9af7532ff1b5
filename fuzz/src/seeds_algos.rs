//! Seed inputs for the targets of issue 15 (`gcra`, `leaky_meter`, `leaky_shaper`,
//! `sliding_counter`, `sliding_log`), written with the others by `cargo run --example
//! make_seeds`. Each is a short scenario aimed at one edge.

use crate::input::{Count, Op, Period, Permits, Point, Scenario, Shape, Span, Start};

use Op::*;

const SECOND: Period = Period::Listed(7);
const MINUTE: Period = Period::Listed(8);

fn scenario(shape: Shape, start: Start, ops: Vec<Op>) -> Vec<u8> {
    Scenario { shape, start, ops }.encode()
}

/// A burst, denials and their RetryAfter, partial refills, a probe, a backwards step, an
/// oversize request, a huge gap, close.
fn common() -> Vec<Op> {
    vec![
        Acquire(Permits::Limit),
        Acquire(Permits::One),
        Advance(Span::RetryLess1),
        Acquire(Permits::Last),
        Advance(Span::Nano),
        Acquire(Permits::Last),
        Acquire(Permits::Zero),
        Advance(Span::PeriodMore1),
        Acquire(Permits::Available),
        Acquire(Permits::AboveAvailable),
        Back(Span::Period),
        Acquire(Permits::One),
        Replenish,
        Acquire(Permits::AboveLimit),
        Advance(Span::Huge(3)),
        Acquire(Permits::Limit),
        Set(Point::LastForward),
        Acquire(Permits::One),
        Close,
        Acquire(Permits::One),
    ]
}

/// (target, file name, bytes) for every seed.
#[allow(clippy::vec_init_then_push)] // one seed per statement reads best
pub fn all() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let mut v = Vec::new();
    v.push((
        "gcra",
        "burst-3-per-second",
        scenario(
            Shape::Gcra {
                burst: Count::Three,
                interval: SECOND,
            },
            Start::Zero,
            common(),
        ),
    ));
    v.push((
        "gcra",
        "one-ns-max-burst-near-clock-wrap",
        scenario(
            Shape::Gcra {
                burst: Count::Max,
                interval: Period::Small(1),
            },
            Start::NearMax(3),
            common(),
        ),
    ));
    v.push((
        "gcra",
        "span-too-long",
        scenario(
            Shape::Gcra {
                burst: Count::Two,
                interval: Period::Listed(13),
            },
            Start::Zero,
            common(),
        ),
    ));
    v.push((
        "leaky_meter",
        "capacity-5-leak-2-per-second",
        scenario(
            Shape::LeakyMeter {
                capacity: Count::Small(5),
                leak: Count::Two,
                interval: SECOND,
            },
            Start::One,
            common(),
        ),
    ));
    v.push((
        "leaky_meter",
        "leak-rounds-up",
        scenario(
            Shape::LeakyMeter {
                capacity: Count::Three,
                leak: Count::Three,
                interval: Period::Small(10),
            },
            Start::Half,
            common(),
        ),
    ));
    v.push((
        "leaky_meter",
        "zero-leak",
        scenario(
            Shape::LeakyMeter {
                capacity: Count::Three,
                leak: Count::Small(0),
                interval: SECOND,
            },
            Start::Zero,
            common(),
        ),
    ));
    v.push((
        "leaky_shaper",
        "one-per-second",
        scenario(
            Shape::LeakyShaper {
                max: Count::One,
                interval: SECOND,
            },
            Start::Zero,
            common(),
        ),
    ));
    v.push((
        "leaky_shaper",
        "requests-of-three",
        scenario(
            Shape::LeakyShaper {
                max: Count::Three,
                interval: Period::Small(7),
            },
            Start::Max,
            common(),
        ),
    ));
    v.push((
        "sliding_counter",
        "ten-per-minute",
        scenario(
            Shape::SlidingCounter {
                limit: Count::Small(10),
                window: MINUTE,
            },
            Start::Zero,
            common(),
        ),
    ));
    v.push((
        "sliding_counter",
        "max-limit-max-window",
        scenario(
            Shape::SlidingCounter {
                limit: Count::Max,
                window: Period::Listed(18),
            },
            Start::PeriodBeforeMax,
            common(),
        ),
    ));
    v.push((
        "sliding_counter",
        "one-per-ns",
        scenario(
            Shape::SlidingCounter {
                limit: Count::One,
                window: Period::Small(1),
            },
            Start::One,
            common(),
        ),
    ));
    v.push((
        "sliding_log",
        "five-per-minute-ring-8",
        scenario(
            Shape::SlidingLog {
                cap: 4,
                limit: Count::Small(5),
                window: MINUTE,
            },
            Start::Zero,
            common(),
        ),
    ));
    v.push((
        "sliding_log",
        "limit-equals-ring",
        scenario(
            Shape::SlidingLog {
                cap: 2,
                limit: Count::Three,
                window: Period::Small(3),
            },
            Start::NearMax(1),
            common(),
        ),
    ));
    v.push((
        "sliding_log",
        "limit-above-ring",
        scenario(
            Shape::SlidingLog {
                cap: 0,
                limit: Count::Two,
                window: SECOND,
            },
            Start::Zero,
            common(),
        ),
    ));
    v
}
