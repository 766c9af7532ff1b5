//! The harness for the algorithms of issue 15 (GCRA, the leaky buckets, the sliding-window
//! counter and log): each built from its scenario's options, checked against the options rules
//! below, then driven step by step beside its model by [`harness`](crate::harness)'s driver.

use core::time::Duration;

use tollgate::{
    GcraLimiter, GcraOptions, Instant, LeakyBucketMeter, LeakyBucketOptions, LeakyBucketShaper,
    ManualClock, OptionsError, QueueOrder, ShaperOptions, SlidingCounterLimiter,
    SlidingCounterOptions, SlidingLogLimiter, SlidingLogOptions,
};

use crate::driver::{accepted, Driver};
use crate::input::{Count, Op, Period, Scenario, Shape, Start, CAPS};
use crate::model::gcra::GcraModel;
use crate::model::leaky_bucket::{MeterModel, ShaperModel};
use crate::model::sliding_counter::SlidingCounterModel;
use crate::model::sliding_log::SlidingLogModel;
use crate::model::time::div_ceil;

/// The largest `burst · interval` GCRA's word takes (2^61 - 1 ns).
const MAX_SPAN: u128 = (1 << 61) - 1;

/// GCRA's rules: a zero burst, then a zero interval, then a span past 2^61 - 1 ns.
fn gcra_rules(interval: u64, burst: u32) -> Result<(), OptionsError> {
    if burst == 0 {
        return Err(OptionsError::ZeroLimit);
    }
    if interval == 0 {
        return Err(OptionsError::ZeroPeriod);
    }
    if u128::from(interval) * u128::from(burst) > MAX_SPAN {
        return Err(OptionsError::PeriodTooLong);
    }
    Ok(())
}

/// The sliding counter's and the sliding log's rules: a zero limit, then a zero window, then a
/// window of `longest` ns or more (whose RetryAfter could end past the 2^63 ns a limiter reads
/// its clock over: 2^62 for the counter, which may wait two windows, 2^63 for the log).
fn window_rules(limit: u32, window: u64, longest: u64) -> Result<(), OptionsError> {
    if limit == 0 {
        return Err(OptionsError::ZeroLimit);
    }
    if window == 0 {
        return Err(OptionsError::ZeroPeriod);
    }
    if window >= longest {
        return Err(OptionsError::PeriodTooLong);
    }
    Ok(())
}

/// Runs one scenario of the five new limiters.
pub fn run(s: &Scenario) {
    match s.shape {
        Shape::Gcra { burst, interval } => run_gcra(burst, interval, s.start, &s.ops),
        Shape::LeakyMeter {
            capacity,
            leak,
            interval,
        } => run_meter(capacity, leak, interval, s.start, &s.ops),
        Shape::LeakyShaper { max, interval } => run_shaper(max, interval, s.start, &s.ops),
        Shape::SlidingCounter { limit, window } => {
            run_counter(limit.resolve(1), window.ns(), s.start, &s.ops)
        }
        Shape::SlidingLog { cap, limit, window } => {
            let cap = CAPS[usize::from(cap) % CAPS.len()];
            let args = (limit.resolve(1), window.ns(), s.start, &s.ops[..]);
            match cap {
                1 => run_log::<1>(args),
                2 => run_log::<2>(args),
                3 => run_log::<3>(args),
                4 => run_log::<4>(args),
                8 => run_log::<8>(args),
                16 => run_log::<16>(args),
                64 => run_log::<64>(args),
                _ => unreachable!("CAPS lists the instantiated capacities"),
            }
        }
        _ => unreachable!("the other shapes run in `harness`"),
    }
}

fn clock(start: Start, step: u64) -> (ManualClock, u64) {
    let origin = start.resolve(step.max(1));
    (
        ManualClock::starting_at(Instant::from_nanos(origin)),
        origin,
    )
}

fn run_gcra(burst: Count, interval: Period, start: Start, ops: &[Op]) {
    let (burst, interval) = (burst.resolve(1), interval.ns());
    let (clock, origin) = clock(start, interval);
    // No queue, as the model has none (`with_period` waits by default).
    let opts = GcraOptions::with_period(Duration::from_nanos(interval))
        .with_burst(burst)
        .with_queue(0, tollgate::QueueOrder::OldestFirst);
    let lib = GcraLimiter::with_clock(opts, &clock);
    let Some((lib, ())) = accepted("gcra", lib, gcra_rules(interval, burst)) else {
        return;
    };
    let model = GcraModel::new(origin, interval, burst);
    Driver::new(&clock, origin, &lib, Some(&lib), None, model).run(ops);
}

fn run_meter(capacity: Count, leak: Count, interval: Period, start: Start, ops: &[Op]) {
    let capacity = capacity.resolve(1);
    let leak = leak.resolve(capacity);
    let interval = interval.ns();
    let expected = if leak == 0 {
        Err(OptionsError::ZeroTokensPerPeriod)
    } else if interval == 0 {
        Err(OptionsError::ZeroPeriod)
    } else {
        let unit = div_ceil(u128::from(interval), u128::from(leak)) as u64;
        gcra_rules(unit, capacity).map(|()| unit)
    };
    let (clock, origin) = clock(start, *expected.as_ref().unwrap_or(&1));
    let opts = LeakyBucketOptions::new(capacity, leak, Duration::from_nanos(interval));
    let lib = LeakyBucketMeter::with_clock(opts, &clock);
    let Some((lib, _)) = accepted("leaky meter", lib, expected) else {
        return;
    };
    let model = MeterModel::new(origin, capacity, leak, interval);
    Driver::new(&clock, origin, &lib, Some(&lib), None, model).run(ops);
}

fn run_shaper(max: Count, interval: Period, start: Start, ops: &[Op]) {
    let (max, interval) = (max.resolve(1), interval.ns());
    let (clock, origin) = clock(start, interval);
    let opts = ShaperOptions::per(Duration::from_nanos(interval), 1)
        .with_max_permits(max)
        .with_queue(0, QueueOrder::OldestFirst);
    let lib = LeakyBucketShaper::with_clock(opts, &clock);
    let Some((lib, ())) = accepted("leaky shaper", lib, gcra_rules(interval, max)) else {
        return;
    };
    let model = ShaperModel::new(origin, interval, max);
    Driver::new(&clock, origin, &lib, Some(&lib), None, model).run(ops);
}

fn run_counter(limit: u32, window: u64, start: Start, ops: &[Op]) {
    let (clock, origin) = clock(start, window);
    let opts = SlidingCounterOptions::new(limit, Duration::from_nanos(window));
    let lib = SlidingCounterLimiter::with_clock(opts, &clock);
    // Its word counts windows in 62 bits: a window of 1 ns is refused.
    let rules = match window_rules(limit, window, 1 << 62) {
        Ok(()) if window == 1 => Err(OptionsError::WindowTooShort),
        other => other,
    };
    let Some((lib, ())) = accepted("sliding counter", lib, rules) else {
        return;
    };
    let model = SlidingCounterModel::new(origin, limit, window);
    Driver::new(&clock, origin, &lib, Some(&lib), None, model).run(ops);
}

fn run_log<const N: usize>((limit, window, start, ops): (u32, u64, Start, &[Op])) {
    let (clock, origin) = clock(start, window);
    let opts = SlidingLogOptions::new(limit, Duration::from_nanos(window));
    let lib = SlidingLogLimiter::<_, N>::with_capacity(opts, &clock);
    let expected = match window_rules(limit, window, 1 << 63) {
        Err(OptionsError::ZeroLimit) => Err(OptionsError::ZeroLimit),
        _ if limit as usize > N => Err(OptionsError::ExceedsCapacity { max: N }),
        other => other,
    };
    let Some((lib, ())) = accepted("sliding log", lib, expected) else {
        return;
    };
    let model = SlidingLogModel::new(origin, limit, window);
    Driver::new(&clock, origin, &lib, Some(&lib), None, model).run(ops);
}
