//! The algorithms of issue 15 beside governor (criterion, wall time), on equal clocks.
//!
//! `cargo bench --bench algorithms` measures, single-threaded, `try_acquire(1)` allowed and
//! denied for GCRA, the leaky bucket meter and shaper, the sliding-window counter and log, and
//! governor's `check()` — governor on a clock that reads exactly the same source as ours (our
//! `ManualClock`, our `StdClock`), so the comparison is of the algorithms, not of the clocks.
//! On a loaded machine compare ratios within one run, not absolute times.
//!
//! Allowed stays allowed: GCRA and governor get one cell per nanosecond with a burst of 2^32 - 1
//! (2^32 - 1 admissions on a stopped clock, one per ns on a running one); the meter the same; the
//! counter and the log a limit of `u32::MAX` / `N` per hour (the log's batch takes fewer permits
//! than its ring holds only on a running clock, so it is measured denied and on a probe).
//! Denied: one permit per century (GCRA and the leaky buckets: per 50 years, their word's range
//! being 73 years), taken once before the batch.
//!
//! Instruction counts without a runner: `ALGOS_LOOP=<name>:<iterations>` makes this binary run
//! one operation in a plain loop and exit, so that
//! `valgrind --tool=callgrind` at two iteration counts gives the instructions per call as the
//! difference over the difference (see `benches/RESULTS.md`).

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::{Duration, Instant as StdInstant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};
use governor::clock::Clock as GovClock;
use governor::nanos::Nanos;
use governor::{Quota, RateLimiter};
use tollgate::{
    Clock, GcraLimiter, GcraOptions, LeakyBucketMeter, LeakyBucketOptions, LeakyBucketShaper,
    Limiter, ManualClock, ShaperOptions, SlidingCounterLimiter, SlidingCounterOptions,
    SlidingLogLimiter, SlidingLogOptions, StdClock,
};

const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
/// GCRA's word spans at most 2^61 ns (73 years): its "never again" is 50 years.
const FIFTY_YEARS: Duration = Duration::from_secs(50 * 365 * 24 * 3600);
const HOUR: Duration = Duration::from_secs(3600);
const NS: Duration = Duration::from_nanos(1);

static MANUAL: ManualClock = ManualClock::new();

/// Moves the manual clock well past creation so that elapsed-time arithmetic is realistic.
fn aged<T>(t: T) -> T {
    MANUAL.advance(Duration::from_nanos(1_234_567_890_123));
    t
}

/// Governor's `Clock` over one of ours: governor pays exactly our clock's read.
#[derive(Clone, Copy, Debug)]
struct Same<C>(C);

impl<C: Clock> GovClock for Same<C> {
    type Instant = Nanos;
    #[inline]
    fn now(&self) -> Nanos {
        Nanos::from(self.0.now().as_nanos())
    }
}

type Governor<C> = RateLimiter<
    governor::state::NotKeyed,
    governor::state::InMemoryState,
    C,
    governor::middleware::NoOpMiddleware<<C as GovClock>::Instant>,
>;

fn governor<C: GovClock>(clock: C, allowed: bool) -> Governor<C> {
    let quota = if allowed {
        Quota::with_period(NS).unwrap().allow_burst(NonZeroU32::MAX)
    } else {
        Quota::with_period(CENTURY).unwrap()
    };
    let l = aged(RateLimiter::direct_with_clock(quota, clock));
    if !allowed {
        l.check().unwrap();
        assert!(l.check().is_err());
    }
    l
}

fn deny_next<L: Limiter>(l: L, allowed: bool) -> L {
    if !allowed {
        let _ = l.try_acquire(1).unwrap();
        assert!(l.try_acquire(1).is_err());
    }
    l
}

fn gcra<C: Clock>(clock: C, allowed: bool) -> GcraLimiter<C> {
    let opts = if allowed {
        GcraOptions::with_period(NS).with_burst(u32::MAX)
    } else {
        GcraOptions::with_period(FIFTY_YEARS)
    };
    deny_next(aged(GcraLimiter::with_clock(opts, clock).unwrap()), allowed)
}

fn meter<C: Clock>(clock: C, allowed: bool) -> LeakyBucketMeter<C> {
    let opts = if allowed {
        LeakyBucketOptions::new(u32::MAX, 1, NS)
    } else {
        LeakyBucketOptions::new(1, 1, FIFTY_YEARS)
    };
    deny_next(
        aged(LeakyBucketMeter::with_clock(opts, clock).unwrap()),
        allowed,
    )
}

/// Allowed: a request of one permit departs every nanosecond, so on a stopped clock only the
/// first would; the shaper is measured denied (the common case under load) and, allowed, on the
/// system clock only.
fn shaper<C: Clock>(clock: C, allowed: bool) -> LeakyBucketShaper<C> {
    let opts = if allowed {
        ShaperOptions::per(NS, 1)
    } else {
        ShaperOptions::per(FIFTY_YEARS, 1)
    };
    deny_next(
        aged(LeakyBucketShaper::with_clock(opts, clock).unwrap()),
        allowed,
    )
}

fn counter<C: Clock>(clock: C, allowed: bool) -> SlidingCounterLimiter<C> {
    let opts = if allowed {
        SlidingCounterOptions::new(u32::MAX, HOUR)
    } else {
        SlidingCounterOptions::new(1, CENTURY)
    };
    deny_next(
        aged(SlidingCounterLimiter::with_clock(opts, clock).unwrap()),
        allowed,
    )
}

/// The log: a ring of 64 entries (1 KiB) holding 64 permits, so that every denial walks a full
/// window of entries: its worst case.
fn log<C: Clock>(clock: C) -> SlidingLogLimiter<C, 64> {
    let l =
        aged(SlidingLogLimiter::with_capacity(SlidingLogOptions::new(64, CENTURY), clock).unwrap());
    for _ in 0..64 {
        let _ = l.try_acquire(1).unwrap();
    }
    l
}

fn st<T>(g: &mut BenchmarkGroup<'_, WallTime>, id: &str, make: impl Fn() -> T, op: impl Fn(&T)) {
    g.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let target = make();
            let start = StdInstant::now();
            for _ in 0..iters {
                op(&target);
            }
            start.elapsed()
        })
    });
}

/// Its own function, as in `benches/throughput.rs` (see there).
#[inline(never)]
fn acquire<L: Limiter>(l: &L) {
    let _ = black_box(l.try_acquire(black_box(1)));
}

/// Its own function, as in `benches/throughput.rs` (see there).
#[inline(never)]
fn check<C: GovClock>(l: &Governor<C>) {
    let _ = black_box(l.check());
}

/// Each limiter on `$clock`, allowed and denied, with governor on the same clock beside it.
macro_rules! row {
    ($g:expr, $clock:expr, $gov:expr, $name:expr) => {{
        let n = $name;
        for allowed in [true, false] {
            let v = if allowed { "allowed" } else { "denied" };
            st(
                $g,
                &format!("governor/{v}/{n}"),
                || governor($gov, allowed),
                check,
            );
            st(
                $g,
                &format!("gcra/{v}/{n}"),
                || gcra($clock, allowed),
                acquire,
            );
            st(
                $g,
                &format!("meter/{v}/{n}"),
                || meter($clock, allowed),
                acquire,
            );
            st(
                $g,
                &format!("counter/{v}/{n}"),
                || counter($clock, allowed),
                acquire,
            );
        }
        st(
            $g,
            &format!("shaper/denied/{n}"),
            || shaper($clock, false),
            acquire,
        );
        st($g, &format!("log64/denied/{n}"), || log($clock), acquire);
    }};
}

fn single_thread(c: &mut Criterion) {
    let mut g = c.benchmark_group("algos");
    row!(&mut g, &MANUAL, Same(&MANUAL), "manual");
    row!(&mut g, StdClock, Same(StdClock), "std");
    st(
        &mut g,
        "shaper/allowed/std",
        || shaper(StdClock, true),
        acquire,
    );
    g.finish();
}

/// `ALGOS_LOOP=<name>:<iterations>`: one operation in a loop, for callgrind.
fn instruction_loop(spec: &str) {
    let (name, n) = spec
        .split_once(':')
        .expect("ALGOS_LOOP=<name>:<iterations>");
    let n: u64 = n.parse().expect("iterations");
    macro_rules! run {
        ($make:expr, $op:expr) => {{
            let l = $make;
            for _ in 0..n {
                $op(&l);
            }
        }};
    }
    match name {
        "governor-allowed" => run!(governor(Same(&MANUAL), true), check),
        "governor-denied" => run!(governor(Same(&MANUAL), false), check),
        "gcra-allowed" => run!(gcra(&MANUAL, true), acquire),
        "gcra-denied" => run!(gcra(&MANUAL, false), acquire),
        "meter-allowed" => run!(meter(&MANUAL, true), acquire),
        "counter-allowed" => run!(counter(&MANUAL, true), acquire),
        "counter-denied" => run!(counter(&MANUAL, false), acquire),
        "shaper-denied" => run!(shaper(&MANUAL, false), acquire),
        "log64-denied" => run!(log(&MANUAL), acquire),
        other => panic!("unknown loop {other}"),
    }
}

fn main() {
    if let Ok(spec) = std::env::var("ALGOS_LOOP") {
        instruction_loop(&spec);
        return;
    }
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .configure_from_args();
    single_thread(&mut c);
    c.final_summary();
}
