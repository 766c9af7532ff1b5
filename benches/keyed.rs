//! Keyed (partitioned) limiting: tollgate's compact [`KeyedLimiter`] against governor's keyed
//! limiter (`RateLimiter::keyed`, a `DashMap` of GCRA cells), in one run.
//!
//! Before the timings it prints a memory report, measured with a counting global allocator:
//! bytes allocated per stored key at several key counts (tollgate's `KeyedLimiter`, its general
//! `Partitioned` limiter of token buckets for scale, and governor's keyed limiter), and the bytes
//! held under a flood of unique keys against a capacity.
//!
//! Timed (criterion, group `keyed`), each one decision (`try_acquire(&key, 1)` / `check_key`):
//! - `hot/…`: one key, again and again (single thread), and `hot-mt2/…`: two threads on one key.
//! - `1M/…`: 1,000,000 distinct keys, all stored, visited in a shuffled order (each decision a
//!   cache miss into a large table).
//! - `new/…`: keys never seen before (the insertion path), in a fresh limiter per batch.
//!
//! Clocks: `manual` is tollgate's `ManualClock` for both (governor through a wrapper), so the
//! comparison is of the data structures alone; `std` is tollgate's default `StdClock`
//! (`clock_gettime`), `quanta` governor's default (TSC); `coarse` is tollgate's `CoarseClock`.
//!
//! Every decision is granted: tollgate, `u32::MAX` tokens refilled every hour; governor, one
//! cell per nanosecond with a burst of 2^32 - 1.
//!
//! Run: `cargo bench --bench keyed` (add `-- --quick` for a short run).

// The counting allocator below is the one `unsafe` here: a `GlobalAlloc` cannot be written
// without it. It only forwards to `System` and counts; it is no part of the library.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant as StdInstant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};
use governor::clock::{Clock as GovClock, QuantaClock};
use governor::nanos::Nanos;
use governor::{Quota, RateLimiter};
use tollgate::{
    Clock, CoarseClock, KeyedLimiter, ManualClock, Partition, PartitionConfig, PartitionKind,
    Partitioned, StdClock, TokenBucketOptions, WhenFull,
};

// ---------------------------------------------------------------------------------------------
// Counting allocator

/// The system allocator, counting the bytes live.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; the counter is only arithmetic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded: `ptr` was allocated by `System` with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

// ---------------------------------------------------------------------------------------------
// Limiters and keys

const HOUR: Duration = Duration::from_secs(3600);
const MILLION: usize = 1_000_000;

static MANUAL: ManualClock = ManualClock::new();

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

fn opts() -> TokenBucketOptions {
    TokenBucketOptions::new(u32::MAX, u32::MAX, HOUR)
}

fn ours<C: Clock>(clock: C, capacity: usize) -> KeyedLimiter<u64, C> {
    KeyedLimiter::token_bucket_with_clock(
        opts(),
        PartitionConfig::new(capacity).with_shards(
            std::env::var("SHARDS")
                .map(|s| s.parse().unwrap())
                .unwrap_or(0),
        ),
        clock,
    )
    .unwrap()
}

fn quota() -> Quota {
    Quota::with_period(Duration::from_nanos(1))
        .unwrap()
        .allow_burst(NonZeroU32::MAX)
}

type GovKeyed<C> = RateLimiter<
    u64,
    governor::state::keyed::DashMapStateStore<u64>,
    C,
    governor::middleware::NoOpMiddleware<<C as GovClock>::Instant>,
>;

fn gov<C: GovClock>(clock: C) -> GovKeyed<C> {
    RateLimiter::dashmap_with_clock(quota(), clock)
}

/// `n` distinct keys in a shuffled order (splitmix64 of a counter: no two alike).
fn keys(n: usize, seed: u64) -> Vec<u64> {
    (0..n as u64)
        .map(|i| {
            let mut z = (i + seed).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Memory

/// Bytes allocated while `fill` stores `n` keys into what `make` builds, per key.
fn per_key<T>(n: usize, make: impl FnOnce() -> T, fill: impl FnOnce(&T)) -> (f64, T) {
    let before = live();
    let target = make();
    fill(&target);
    let bytes = live() - before;
    (bytes as f64 / n as f64, target)
}

fn memory_report() {
    println!("\n== memory per stored key (u64 keys; bytes allocated / keys stored) ==");
    println!("tollgate's KeyedLimiter allocates its table for the capacity at construction;");
    println!("here the capacity is 1.1 x the keys stored (room for uneven shards).");
    println!(
        "{:>10}  {:>22}  {:>22}  {:>22}",
        "keys", "tollgate KeyedLimiter", "governor keyed", "tollgate Partitioned"
    );
    for n in [10_000, 100_000, 250_000, 500_000, MILLION, 2 * MILLION] {
        let ks = keys(n, 1);
        let (ours_b, l) = per_key(
            n,
            || ours(&MANUAL, n + n / 10),
            |l| {
                for k in &ks {
                    let _ = l.try_acquire(k, 1).unwrap();
                }
            },
        );
        assert_eq!(l.len(), n);
        drop(l);
        let (gov_b, g) = per_key(
            n,
            || gov(Same(&MANUAL)),
            |g| {
                for k in &ks {
                    g.check_key(k).unwrap();
                }
            },
        );
        assert_eq!(g.len(), n);
        drop(g);
        let full = if n <= 250_000 {
            let kind = PartitionKind::token_bucket(opts()).unwrap();
            let (b, p) = per_key(
                n,
                || {
                    Partitioned::with_clock(
                        move |k: &u64| Partition::new(*k, kind),
                        PartitionConfig::new(4 * MILLION),
                        &MANUAL,
                    )
                },
                |p| {
                    for k in &ks {
                        let _ = p.try_acquire(k, 1).unwrap();
                    }
                },
            );
            assert_eq!(p.len(), n);
            format!("{b:.1}")
        } else {
            "-".to_string()
        };
        println!("{n:>10}  {ours_b:>22.1}  {gov_b:>22.1}  {full:>22}");
    }

    println!("\n== a flood of 1,000,000 unique keys against a capacity of 100,000 ==");
    let flood = keys(MILLION, 7);
    for (when_full, idle) in [
        (WhenFull::EvictIdle, false),
        (WhenFull::EvictIdle, true),
        (WhenFull::Reject, false),
    ] {
        let start = MANUAL.now();
        let before = live();
        let config = PartitionConfig::new(100_000).with_when_full(when_full);
        // One token per second: a key's bucket is full (idle) a second after its request.
        let opts = TokenBucketOptions::new(1, 1, Duration::from_secs(1));
        let l = KeyedLimiter::token_bucket_with_clock(opts, config, &MANUAL).unwrap();
        let (mut peak, mut refused) = (0isize, 0usize);
        for (i, k) in flood.iter().enumerate() {
            if idle && i % 10_000 == 0 {
                MANUAL.advance(Duration::from_millis(100)); // 100,000 keys a second
            }
            if l.try_acquire(k, 1).is_err() {
                refused += 1;
            }
            peak = peak.max(live() - before);
        }
        println!(
            "tollgate {when_full:?}, {}: stored {} (capacity {}), refused {refused}, peak {:.1} MB, at the end {:.1} MB",
            if idle { "keys go idle after 1 s" } else { "clock stopped (no key ever idle)" },
            l.len(),
            l.capacity(),
            peak as f64 / 1e6,
            (live() - before) as f64 / 1e6,
        );
        drop(l);
        MANUAL.set(start);
    }
    let before = live();
    let g = gov(Same(&MANUAL));
    for k in &flood {
        let _ = g.check_key(k);
    }
    println!(
        "governor keyed: stored {} (no capacity), {:.1} MB",
        g.len(),
        (live() - before) as f64 / 1e6
    );
    println!();
}

// ---------------------------------------------------------------------------------------------
// Paired timings

/// Nanoseconds per call of `a` and of `b`, measured in alternating rounds (a round of `a`, then
/// one of `b`, and again) so that a busy machine slows both alike; the median round of each.
fn paired(
    name: &str,
    rounds: usize,
    per_round: usize,
    mut a: impl FnMut(usize),
    mut b: impl FnMut(usize),
) {
    let (mut ta, mut tb) = (Vec::new(), Vec::new());
    let mut i = 0;
    for _ in 0..rounds {
        let start = StdInstant::now();
        for j in i..i + per_round {
            a(j);
        }
        ta.push(start.elapsed().as_nanos() as f64 / per_round as f64);
        let start = StdInstant::now();
        for j in i..i + per_round {
            b(j);
        }
        tb.push(start.elapsed().as_nanos() as f64 / per_round as f64);
        i += per_round;
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(|x, y| x.total_cmp(y));
        v[v.len() / 2]
    };
    let (ma, mb) = (median(&mut ta), median(&mut tb));
    println!("{name:<34} {ma:>9.1} {mb:>9.1} {:>8.2}", mb / ma);
}

fn paired_report() {
    println!("== ns per decision, paired rounds (median of 100 rounds each, alternating) ==");
    println!(
        "{:<34} {:>9} {:>9} {:>8}",
        "", "tollgate", "governor", "gov/ours"
    );
    const HOT: u64 = 0x5EED;
    let (l, g) = (ours(&MANUAL, MILLION), gov(Same(&MANUAL)));
    paired(
        "hot key, manual clock",
        100,
        20_000,
        |_| take(&l, &HOT),
        |_| check(&g, &HOT),
    );
    let (l, g) = (ours(StdClock, MILLION), gov(QuantaClock::default()));
    paired(
        "hot key, default clocks (std/quanta)",
        100,
        20_000,
        |_| take(&l, &HOT),
        |_| check(&g, &HOT),
    );
    let coarse = CoarseClock::start(Duration::from_millis(1)).expect("refresher");
    let l = ours(coarse, MILLION);
    paired(
        "hot key, coarse / quanta",
        100,
        20_000,
        |_| take(&l, &HOT),
        |_| check(&g, &HOT),
    );

    let ks = keys(MILLION, 3);
    let (l, g) = (ours(&MANUAL, MILLION + MILLION / 10), gov(Same(&MANUAL)));
    for k in &ks {
        let _ = l.try_acquire(k, 1).unwrap();
        g.check_key(k).unwrap();
    }
    let at = |j: usize| &ks[j % MILLION];
    paired(
        "1M keys, manual clock",
        100,
        20_000,
        |j| take(&l, at(j)),
        |j| check(&g, at(j)),
    );
    drop((l, g));
    let (l, g) = (
        ours(StdClock, MILLION + MILLION / 10),
        gov(QuantaClock::default()),
    );
    for k in &ks {
        let _ = l.try_acquire(k, 1).unwrap();
        g.check_key(k).unwrap();
    }
    paired(
        "1M keys, default clocks",
        100,
        20_000,
        |j| take(&l, at(j)),
        |j| check(&g, at(j)),
    );
    drop((l, g));

    let fresh = keys(MILLION, 11);
    let (l, g) = (ours(&MANUAL, 2 * MILLION), gov(Same(&MANUAL)));
    paired(
        "new keys (insert), manual clock",
        100,
        10_000,
        |j| take(&l, &fresh[j]),
        |j| check(&g, &fresh[j]),
    );
    println!();
}

// ---------------------------------------------------------------------------------------------
// Timings

fn st<T>(g: &mut BenchmarkGroup<'_, WallTime>, id: &str, target: &T, op: impl Fn(&T, usize)) {
    g.bench_function(id, |b| {
        let mut i = 0usize;
        b.iter_custom(|iters| {
            let start = StdInstant::now();
            for _ in 0..iters {
                op(target, i);
                i = i.wrapping_add(1);
            }
            start.elapsed()
        })
    });
}

/// Two threads on one shared target, started together; the time from the first start to the
/// last end, for `iters` operations on each thread.
fn mt2<T: Sync>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    id: &str,
    target: &T,
    op: impl Fn(&T) + Sync,
) {
    g.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let barrier = Barrier::new(2);
            let (target, barrier, op) = (target, &barrier, &op);
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

#[inline(always)]
fn take<C: Clock>(l: &KeyedLimiter<u64, C>, key: &u64) {
    let _ = black_box(l.try_acquire(black_box(key), 1));
}

#[inline(always)]
fn check<C: GovClock>(g: &GovKeyed<C>, key: &u64) {
    let _ = black_box(g.check_key(black_box(key)));
}

fn timings(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed");
    g.sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    let coarse = CoarseClock::start(Duration::from_millis(1)).expect("refresher");
    const HOT: u64 = 0x5EED;

    // One hot key.
    st(
        &mut g,
        "hot/tollgate-manual",
        &ours(&MANUAL, MILLION),
        |l, _| take(l, &HOT),
    );
    st(
        &mut g,
        "hot/governor-manual",
        &gov(Same(&MANUAL)),
        |l, _| check(l, &HOT),
    );
    st(
        &mut g,
        "hot/tollgate-std",
        &ours(StdClock, MILLION),
        |l, _| take(l, &HOT),
    );
    st(
        &mut g,
        "hot/tollgate-coarse",
        &ours(coarse, MILLION),
        |l, _| take(l, &HOT),
    );
    st(
        &mut g,
        "hot/governor-quanta",
        &gov(QuantaClock::default()),
        |l, _| check(l, &HOT),
    );
    mt2(
        &mut g,
        "hot-mt2/tollgate-manual",
        &ours(&MANUAL, MILLION),
        |l| take(l, &HOT),
    );
    mt2(
        &mut g,
        "hot-mt2/governor-manual",
        &gov(Same(&MANUAL)),
        |l| check(l, &HOT),
    );

    // 1,000,000 distinct keys, all stored.
    let ks = keys(MILLION, 3);
    let fill_ours = |l: KeyedLimiter<u64, _>| {
        for k in &ks {
            let _ = l.try_acquire(k, 1).unwrap();
        }
        l
    };
    let fill_gov = |g: GovKeyed<_>| {
        for k in &ks {
            g.check_key(k).unwrap();
        }
        g
    };
    {
        let l = fill_ours(ours(&MANUAL, MILLION + MILLION / 10));
        st(&mut g, "1M/tollgate-manual", &l, |l, i| {
            take(l, &ks[i % MILLION])
        });
    }
    {
        let gv = fill_gov(gov(Same(&MANUAL)));
        st(&mut g, "1M/governor-manual", &gv, |l, i| {
            check(l, &ks[i % MILLION])
        });
    }
    {
        let l = KeyedLimiter::token_bucket_with_clock(
            opts(),
            PartitionConfig::new(2 * MILLION),
            StdClock,
        )
        .unwrap();
        for k in &ks {
            let _ = l.try_acquire(k, 1).unwrap();
        }
        st(&mut g, "1M/tollgate-std", &l, |l, i| {
            take(l, &ks[i % MILLION])
        });
    }
    {
        let l = KeyedLimiter::token_bucket_with_clock(
            opts(),
            PartitionConfig::new(2 * MILLION),
            coarse,
        )
        .unwrap();
        for k in &ks {
            let _ = l.try_acquire(k, 1).unwrap();
        }
        st(&mut g, "1M/tollgate-coarse", &l, |l, i| {
            take(l, &ks[i % MILLION])
        });
    }
    {
        let gv: GovKeyed<QuantaClock> =
            RateLimiter::dashmap_with_clock(quota(), QuantaClock::default());
        for k in &ks {
            gv.check_key(k).unwrap();
        }
        st(&mut g, "1M/governor-quanta", &gv, |l, i| {
            check(l, &ks[i % MILLION])
        });
    }

    // Keys never seen before: the insertion path, fresh limiter per batch (up to 1M keys).
    let fresh = keys(4 * MILLION, 11);
    g.bench_function("new/tollgate-manual", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters as usize;
            while left > 0 {
                let n = left.min(MILLION);
                let l = ours(&MANUAL, n + n / 10);
                let start = StdInstant::now();
                for k in &fresh[..n] {
                    take(&l, k);
                }
                total += start.elapsed();
                left -= n;
            }
            total
        })
    });
    g.bench_function("new/governor-manual", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters as usize;
            while left > 0 {
                let n = left.min(MILLION);
                let gv = gov(Same(&MANUAL));
                let start = StdInstant::now();
                for k in &fresh[..n] {
                    check(&gv, k);
                }
                total += start.elapsed();
                left -= n;
            }
            total
        })
    });
    g.finish();
}

fn main() {
    let quick_test =
        std::env::args().any(|a| a == "--test" || a == "--list" || a == "--profile-time");
    if !quick_test {
        memory_report();
        paired_report();
    }
    let mut c = Criterion::default().configure_from_args();
    timings(&mut c);
    c.final_summary();
}
