//! Wall-time benchmarks (criterion): every limiter against the physical floor and against the
//! peers users would pick instead, in one run. `benches/RESULTS.md` has the table, the command
//! that reproduces it, and how to read it.
//!
//! Groups (the first path segment of every benchmark id):
//! - `floor`: what no limiter can beat — each clock's read on its own, one load + one
//!   compare-exchange on an `AtomicU64` and on a 128-bit word (the rate limiters' state word), and
//!   the two together ("same clock read + one CAS") for each clock; and, to price the parts of a
//!   limiter's fast path, the same plus a statistics counter's `fetch_add` or a tick division.
//! - `st` (single thread): each limiter's `try_acquire(1)`, allowed and denied, on each clock;
//!   concurrency acquire + release; governor's `check()` on its default clock and on clocks of
//!   equal cost to ours; tokio's `Semaphore::try_acquire` + drop.
//! - `mt2` (two threads on one shared limiter): the same operations, both threads started together
//!   by a barrier; the time reported is the wall time for each thread to do one operation, so
//!   throughput is two operations per reported time (criterion prints it as elements/s).
//!
//! How "allowed" stays allowed and "denied" stays denied, for millions of iterations:
//! - Every measured batch (`iter_custom`) builds a fresh limiter, outside the timing.
//! - Allowed: a limit of `u32::MAX` permits that refills completely every hour (the manual clock
//!   moves 1,234 s once, after the limiter is built, and then stands still); a batch takes far
//!   fewer than 2^32 permits (criterion's batches here are at most ~10^8 calls, and stay under
//!   2^32 for warm-up times up to ~10 s), so every call is granted, on the hot path of a limiter
//!   in use (same tick, no refill due). The sliding window: 2^29 - 1 permits per 100 years (a
//!   limit that keeps its header one 64-bit word, as realistic limits do; `u32::MAX` would need
//!   the 128-bit header, measured in instructions by `benches/instructions.rs`).
//!   Governor: one cell per nanosecond with a burst of 2^32 - 1 cells, so it admits 2^32 - 1
//!   checks at once on a stopped clock and one check per nanosecond forever on a running one.
//! - Denied: a limit of 1 per 100 years, taken once before the batch (the concurrency limiter: its
//!   one permit held through the batch; tokio: a semaphore with no permits); governor: one cell
//!   per 100 years, checked once before the batch. No clock here gets near 100 years.
//!
//! Clocks: `ManualClock` (one atomic load; governor's `FakeRelativeClock` and a governor clock
//! wrapping our `ManualClock` cost the same), `StdClock` (`clock_gettime`; governor gets the same
//! through a wrapper), `CoarseClock` (one relaxed load of a cache refreshed every millisecond;
//! governor gets the same through a wrapper), and governor's own default, `QuantaClock` (TSC).

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant as StdInstant};

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use crossbeam_utils::CachePadded;
use governor::clock::{Clock as GovClock, FakeRelativeClock, QuantaClock};
use governor::nanos::Nanos;
use governor::{Quota, RateLimiter};
use portable_atomic::AtomicU128;
use tollgate::adaptive::{AdaptiveLimiter, AdaptiveOptions};
use tollgate::{
    Clock, CoarseClock, ConcurrencyLimiter, ConcurrencyOptions, FixedWindowLimiter,
    FixedWindowOptions, Limiter, ManualClock, SlidingWindowLimiter, SlidingWindowOptions, StdClock,
    TokenBucketLimiter, TokenBucketOptions,
};

/// Longer than any benchmark run, shorter than the 584 years a 64-bit nanosecond count holds.
const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
const HOUR: Duration = Duration::from_secs(3600);

// ---------------------------------------------------------------------------------------------
// Clocks

/// The clocks our limiters run on in these benchmarks. `&'static` so that a limiter's clock costs
/// what the clock's read costs, and the same clock can be shared with governor.
#[derive(Clone, Copy)]
enum Which {
    Manual,
    Std,
    Coarse,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Which::Manual => "manual",
            Which::Std => "std",
            Which::Coarse => "coarse",
        }
    }
}

static MANUAL: ManualClock = ManualClock::new();

/// How far the manual clock moves after each limiter is built: past 2^32 ns, so that the
/// limiters' tick computation divides a realistic 64-bit elapsed time (a limiter whose clock
/// stands at its creation instant would divide zero, which is cheaper), and less than an hour,
/// so that no allowed limiter's period boundary is crossed.
const AGE: Duration = Duration::from_nanos(1_234_567_890_123);

/// `t`, with the manual clock moved [`AGE`] past its creation.
fn aged<T>(t: T) -> T {
    MANUAL.advance(AGE);
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

// ---------------------------------------------------------------------------------------------
// Limiter configurations

fn bucket<C: Clock>(clock: C, allowed: bool) -> TokenBucketLimiter<C> {
    let opts = if allowed {
        TokenBucketOptions::new(u32::MAX, u32::MAX, HOUR)
    } else {
        TokenBucketOptions::new(1, 1, CENTURY)
    };
    let l = aged(TokenBucketLimiter::with_clock(opts, clock).unwrap());
    if !allowed {
        let _ = l.try_acquire(1).unwrap();
    }
    l
}

fn fixed<C: Clock>(clock: C, allowed: bool) -> FixedWindowLimiter<C> {
    let opts = if allowed {
        FixedWindowOptions::new(u32::MAX, HOUR)
    } else {
        FixedWindowOptions::new(1, CENTURY)
    };
    let l = aged(FixedWindowLimiter::with_clock(opts, clock).unwrap());
    if !allowed {
        let _ = l.try_acquire(1).unwrap();
    }
    l
}

/// Allowed: 2^29 - 1 permits per 100 years in 4 segments, the largest limit whose header is one
/// 64-bit word with 25-year segments (a batch takes at most ~10^8); denied: 1 per 100 years.
fn sliding<C: Clock>(clock: C, allowed: bool) -> SlidingWindowLimiter<C> {
    let opts = if allowed {
        SlidingWindowOptions::new((1 << 29) - 1, CENTURY, 4)
    } else {
        SlidingWindowOptions::new(1, CENTURY, 4)
    };
    let l = aged(SlidingWindowLimiter::with_clock(opts, clock).unwrap());
    if !allowed {
        let _ = l.try_acquire(1).unwrap();
    }
    l
}

/// Plenty of permits (acquire + release) or exactly one, to be held (denied).
fn concurrency<C: Clock>(clock: C, allowed: bool) -> ConcurrencyLimiter<C> {
    let limit = if allowed { 1 << 20 } else { 1 };
    aged(ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(limit), clock).unwrap())
}

/// An adaptive limiter (AIMD, 1 s windows of at least 10 samples) far from its limit: every
/// lease is sampled, a window closes once a second.
fn adaptive<C: Clock + Sync>(clock: C) -> AdaptiveLimiter<C> {
    let opts = AdaptiveOptions::new(1 << 20).with_bounds(1, 1 << 20);
    AdaptiveLimiter::with_clock(opts, clock).unwrap()
}

#[inline(never)]
fn adaptive_acquire<C: Clock + Sync>(l: &AdaptiveLimiter<C>) {
    let _ = black_box(l.try_acquire(black_box(1)));
}

type Governor<C> = RateLimiter<
    governor::state::NotKeyed,
    governor::state::InMemoryState,
    C,
    governor::middleware::NoOpMiddleware<<C as GovClock>::Instant>,
>;

fn governor<C: GovClock>(clock: C, allowed: bool) -> Governor<C> {
    let quota = if allowed {
        Quota::with_period(Duration::from_nanos(1))
            .unwrap()
            .allow_burst(NonZeroU32::MAX)
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

fn semaphore(allowed: bool) -> tokio::sync::Semaphore {
    tokio::sync::Semaphore::new(if allowed { 1 << 20 } else { 0 })
}

// ---------------------------------------------------------------------------------------------
// Measurement drivers

/// Single thread: a fresh `make()` per batch (untimed), then `iters` calls of `op` (timed).
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

/// Two threads on one shared `make()` (fresh per batch), started together by a barrier, each
/// doing `iters` calls of `op`. The time is from the first thread's start to the last one's end.
fn mt2<T: Sync>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    id: &str,
    make: impl Fn() -> T,
    op: impl Fn(&T) + Sync,
) {
    g.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let target = make();
            let barrier = Barrier::new(2);
            let (target, barrier, op) = (&target, &barrier, &op);
            let spans: Vec<(StdInstant, StdInstant)> = std::thread::scope(|s| {
                let workers: Vec<_> = (0..2)
                    .map(|_| {
                        s.spawn(move || {
                            barrier.wait();
                            let start = StdInstant::now();
                            for _ in 0..iters {
                                op(target);
                            }
                            (start, StdInstant::now())
                        })
                    })
                    .collect();
                workers.into_iter().map(|w| w.join().unwrap()).collect()
            });
            let start = spans.iter().map(|s| s.0).min().unwrap();
            let end = spans.iter().map(|s| s.1).max().unwrap();
            end - start
        })
    });
}

// ---------------------------------------------------------------------------------------------
// The operations, each one call
//
// Each is its own function (`#[inline(never)]`), ours and the peers' alike: what is timed is one
// call of exactly that code, compiled the same way whatever the benchmark loop around it looks
// like. Inlined into the loop, each side's code depended on the optimizer's choices for that one
// loop (whether the closure call was inlined, whether governor's state update was), which moved
// single rows by up to 4x between builds of unrelated code.

#[inline(never)]
fn acquire<L: Limiter>(l: &L) {
    let _ = black_box(l.try_acquire(black_box(1)));
}

#[inline(never)]
fn check<C: GovClock>(l: &Governor<C>) {
    let _ = black_box(l.check());
}

#[inline(never)]
fn sem_acquire(s: &tokio::sync::Semaphore) {
    let _ = black_box(s.try_acquire());
}

/// One load plus one compare-exchange: the floor of any lock-free decision on one word.
#[inline(never)]
fn load_cas_u64(a: &AtomicU64) {
    let cur = a.load(Ordering::Acquire);
    let _ = black_box(a.compare_exchange_weak(
        cur,
        cur.wrapping_add(1),
        Ordering::AcqRel,
        Ordering::Acquire,
    ));
}

/// The same on a 128-bit word, as the rate limiters' state needs (portable-atomic, as they use).
#[inline(never)]
fn load_cas_u128(a: &AtomicU128) {
    let cur = a.load(Ordering::Acquire);
    let _ = black_box(a.compare_exchange_weak(
        cur,
        cur.wrapping_add(1),
        Ordering::AcqRel,
        Ordering::Acquire,
    ));
}

/// A clock read feeding a load + CAS: "the same clock read + one CAS".
#[inline(never)]
fn clock_cas_u64<C: Clock>(clock: &C, a: &AtomicU64) {
    let now = black_box(clock.now().as_nanos());
    let cur = a.load(Ordering::Acquire);
    let _ = black_box(a.compare_exchange_weak(
        cur,
        cur.max(now).wrapping_add(1),
        Ordering::AcqRel,
        Ordering::Acquire,
    ));
}

#[inline(never)]
fn clock_cas_u128<C: Clock>(clock: &C, a: &AtomicU128) {
    let now = black_box(clock.now().as_nanos());
    let cur = a.load(Ordering::Acquire);
    let _ = black_box(a.compare_exchange_weak(
        cur,
        cur.max(u128::from(now)).wrapping_add(1),
        Ordering::AcqRel,
        Ordering::Acquire,
    ));
}

/// What a statistics counter adds: the floor plus one relaxed `fetch_add` on another word (in
/// the same cache line, as the limiters keep their counters beside their state word).
#[repr(align(64))]
struct Counted<A> {
    word: A,
    counter: AtomicU64,
}

/// The same with the counter on a cache line of its own: what keeping statistics off the state
/// word's line would save under contention (the other thread's counter increments then stop
/// invalidating the word that a denial only reads).
struct Apart<A> {
    word: CachePadded<A>,
    counter: CachePadded<AtomicU64>,
}

/// What the tick computation adds: a clock read divided by a period known only at run time
/// (the limiters divide elapsed nanoseconds by their period on every call), feeding the CAS.
struct Divided {
    word: AtomicU128,
    period: u64,
}

// ---------------------------------------------------------------------------------------------
// Rows

fn floor(c: &mut Criterion) {
    let coarse = CoarseClock::new().expect("spawn the coarse clock's refresher");
    let mut g = c.benchmark_group("floor");
    st(
        &mut g,
        "clock/manual",
        || &MANUAL,
        |c| {
            black_box(c.now());
        },
    );
    st(
        &mut g,
        "clock/std",
        || StdClock,
        |c| {
            black_box(c.now());
        },
    );
    st(
        &mut g,
        "clock/coarse",
        || coarse,
        |c| {
            black_box(c.now());
        },
    );
    st(
        &mut g,
        "clock/std-instant-now",
        || (),
        |_| {
            black_box(StdInstant::now());
        },
    );
    st(&mut g, "clock/governor-quanta", QuantaClock::default, |c| {
        black_box(c.now());
    });
    st(&mut g, "cas64", || AtomicU64::new(0), load_cas_u64);
    // The floor of a concurrency limiter's acquire + release: one locked read-modify-write
    // to take, one to give back (issue 35's target: at most 1.3x this).
    st(
        &mut g,
        "sub+add",
        || AtomicU64::new(1 << 40),
        |a| {
            black_box(a.fetch_sub(black_box(1), Ordering::AcqRel));
            black_box(a.fetch_add(1, Ordering::Release));
        },
    );
    st(&mut g, "cas128", || AtomicU128::new(0), load_cas_u128);
    let counted64 = || Counted {
        word: AtomicU64::new(0),
        counter: AtomicU64::new(0),
    };
    st(&mut g, "cas64+counter", counted64, |c| {
        load_cas_u64(&c.word);
        c.counter.fetch_add(1, Ordering::Relaxed);
    });
    let counted128 = || Counted {
        word: AtomicU128::new(0),
        counter: AtomicU64::new(0),
    };
    st(&mut g, "manual+cas128+counter", counted128, |c| {
        clock_cas_u128(&&MANUAL, &c.word);
        c.counter.fetch_add(1, Ordering::Relaxed);
    });
    let divided = || Divided {
        word: AtomicU128::new(0),
        period: black_box(HOUR.as_nanos() as u64),
    };
    st(&mut g, "manual+div+cas128", divided, |d| {
        let tick = black_box(MANUAL.now().as_nanos() + AGE.as_nanos() as u64) / d.period;
        let cur = d.word.load(Ordering::Acquire);
        let _ = black_box(d.word.compare_exchange_weak(
            cur,
            cur.max(u128::from(tick)).wrapping_add(1),
            Ordering::AcqRel,
            Ordering::Acquire,
        ));
    });
    for which in [Which::Manual, Which::Std, Which::Coarse] {
        let id64 = format!("{}+cas64", which.name());
        let id128 = format!("{}+cas128", which.name());
        match which {
            Which::Manual => {
                st(
                    &mut g,
                    &id64,
                    || AtomicU64::new(0),
                    |a| clock_cas_u64(&&MANUAL, a),
                );
                st(
                    &mut g,
                    &id128,
                    || AtomicU128::new(0),
                    |a| clock_cas_u128(&&MANUAL, a),
                );
            }
            Which::Std => {
                st(
                    &mut g,
                    &id64,
                    || AtomicU64::new(0),
                    |a| clock_cas_u64(&StdClock, a),
                );
                st(
                    &mut g,
                    &id128,
                    || AtomicU128::new(0),
                    |a| clock_cas_u128(&StdClock, a),
                );
            }
            Which::Coarse => {
                st(
                    &mut g,
                    &id64,
                    || AtomicU64::new(0),
                    |a| clock_cas_u64(&coarse, a),
                );
                st(
                    &mut g,
                    &id128,
                    || AtomicU128::new(0),
                    |a| clock_cas_u128(&coarse, a),
                );
            }
        }
    }
    g.finish();
}

/// Our four limiters on one clock, allowed and denied, in a driver (`st` or `mt2`).
macro_rules! ours {
    ($driver:ident, $g:expr, $clock:expr, $name:expr) => {{
        let clock = $clock;
        let n = $name;
        for allowed in [true, false] {
            let v = if allowed { "allowed" } else { "denied" };
            $driver(
                $g,
                &format!("token_bucket/{v}/{n}"),
                || bucket(clock, allowed),
                acquire,
            );
            $driver(
                $g,
                &format!("fixed_window/{v}/{n}"),
                || fixed(clock, allowed),
                acquire,
            );
            $driver(
                $g,
                &format!("sliding_window/{v}/{n}"),
                || sliding(clock, allowed),
                acquire,
            );
        }
        // Acquire + release. Alone, every release makes the limiter fully available again, which
        // dates its idleness (one clock read and one fetch_max). "held" keeps one other lease
        // out, as a limiter in use has, so releases skip that.
        $driver(
            $g,
            &format!("concurrency/acquire+release/{n}"),
            || concurrency(clock, true),
            acquire,
        );
        $driver(
            $g,
            &format!("concurrency/acquire+release-held/{n}"),
            || {
                let l = concurrency(clock, true);
                l.try_acquire(1).unwrap().forget();
                l
            },
            acquire,
        );
        // The adaptive limiter's acquire + release, its lease sampled (latency and outcome).
        $driver(
            $g,
            &format!("adaptive/acquire+release/{n}"),
            || adaptive(clock),
            adaptive_acquire,
        );
        $driver(
            $g,
            &format!("concurrency/denied/{n}"),
            || {
                let l = concurrency(clock, false);
                l.try_acquire(1).unwrap().forget();
                l
            },
            acquire,
        );
    }};
}

/// Governor's `check()` on one clock, allowed and denied.
macro_rules! peer {
    ($driver:ident, $g:expr, $clock:expr, $name:expr) => {{
        let n = $name;
        for allowed in [true, false] {
            let v = if allowed { "allowed" } else { "denied" };
            $driver(
                $g,
                &format!("governor/{v}/{n}"),
                || governor($clock, allowed),
                check,
            );
        }
    }};
}

fn single_thread(c: &mut Criterion) {
    let coarse = CoarseClock::new().expect("spawn the coarse clock's refresher");
    let mut g = c.benchmark_group("st");
    ours!(st, &mut g, &MANUAL, "manual");
    ours!(st, &mut g, StdClock, "std");
    ours!(st, &mut g, coarse, "coarse");
    peer!(st, &mut g, FakeRelativeClock::default(), "fake");
    peer!(st, &mut g, Same(&MANUAL), "manual");
    peer!(st, &mut g, Same(StdClock), "std");
    peer!(st, &mut g, Same(coarse), "coarse");
    peer!(st, &mut g, QuantaClock::default(), "quanta");
    st(
        &mut g,
        "tokio_semaphore/acquire+release",
        || semaphore(true),
        sem_acquire,
    );
    st(
        &mut g,
        "tokio_semaphore/denied",
        || semaphore(false),
        sem_acquire,
    );
    g.finish();
}

fn two_threads(c: &mut Criterion) {
    let coarse = CoarseClock::new().expect("spawn the coarse clock's refresher");
    let mut g = c.benchmark_group("mt2");
    g.throughput(Throughput::Elements(2));
    // The floor under contention: the skeletons of an allowed call (clock, load, CAS; plus a
    // counter) and of a denied one (clock, load, decide; plus a counter, the only write).
    mt2(
        &mut g,
        "floor/manual+cas64",
        || AtomicU64::new(0),
        |a| clock_cas_u64(&&MANUAL, a),
    );
    mt2(
        &mut g,
        "floor/manual+cas128",
        || AtomicU128::new(0),
        |a| clock_cas_u128(&&MANUAL, a),
    );
    let counted128 = || Counted {
        word: AtomicU128::new(0),
        counter: AtomicU64::new(0),
    };
    mt2(&mut g, "floor/manual+cas128+counter", counted128, |c| {
        clock_cas_u128(&&MANUAL, &c.word);
        c.counter.fetch_add(1, Ordering::Relaxed);
    });
    let counted64 = || Counted {
        word: AtomicU64::new(0),
        counter: AtomicU64::new(0),
    };
    mt2(&mut g, "floor/manual+load", counted64, |c| {
        black_box(MANUAL.now().as_nanos() < c.word.load(Ordering::Acquire));
    });
    mt2(&mut g, "floor/manual+load+counter", counted64, |c| {
        black_box(MANUAL.now().as_nanos() < c.word.load(Ordering::Acquire));
        c.counter.fetch_add(1, Ordering::Relaxed);
    });
    let apart64 = || Apart {
        word: CachePadded::new(AtomicU64::new(0)),
        counter: CachePadded::new(AtomicU64::new(0)),
    };
    mt2(&mut g, "floor/manual+load+counter-apart", apart64, |c| {
        black_box(MANUAL.now().as_nanos() < c.word.load(Ordering::Acquire));
        c.counter.fetch_add(1, Ordering::Relaxed);
    });
    let apart128 = || Apart {
        word: CachePadded::new(AtomicU128::new(0)),
        counter: CachePadded::new(AtomicU64::new(0)),
    };
    mt2(&mut g, "floor/manual+cas128+counter-apart", apart128, |c| {
        clock_cas_u128(&&MANUAL, &c.word);
        c.counter.fetch_add(1, Ordering::Relaxed);
    });
    ours!(mt2, &mut g, &MANUAL, "manual");
    ours!(mt2, &mut g, coarse, "coarse");
    peer!(mt2, &mut g, Same(&MANUAL), "manual");
    peer!(mt2, &mut g, Same(coarse), "coarse");
    peer!(mt2, &mut g, QuantaClock::default(), "quanta");
    mt2(
        &mut g,
        "tokio_semaphore/acquire+release",
        || semaphore(true),
        sem_acquire,
    );
    mt2(
        &mut g,
        "tokio_semaphore/denied",
        || semaphore(false),
        sem_acquire,
    );
    g.finish();
}

fn config() -> Criterion {
    // Modest times so that the whole run takes a few minutes; the command line can override them.
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50)
        .configure_from_args()
}

criterion_group! {
    name = benches;
    config = config();
    targets = floor, single_thread, two_threads
}
criterion_main!(benches);
