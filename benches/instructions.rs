//! Instruction counts (iai-callgrind, under valgrind's callgrind): one call of each limiter's
//! `try_acquire`, allowed and denied, on a `ManualClock`, beside governor's `check()` on its
//! `FakeRelativeClock` (the same cost: one atomic load), tokio's semaphore, and the floor — one
//! load + one compare-exchange on an `AtomicU64` and on a 128-bit word. The `keyed` group: one
//! decision of a `KeyedLimiter` for a stored key (hash, probe, compare-and-swap), per rule. Counts do not drift with
//! the machine's load, so they can be compared across runs and in CI.
//!
//! Needs the runner of the same version as the library:
//! `cargo install iai-callgrind-runner --version 0.16.1`, then `cargo bench --bench instructions`.
//!
//! Every setup (not counted) builds the limiter and makes one call of the measured operation, so
//! that what is counted is a steady-state call: portable-atomic picks its 128-bit instructions on
//! first use (a CPU feature check), and that one-time cost is not what a server pays per call.
//! Allowed: a limit of `u32::MAX` on a clock that never moves (governor: one cell per nanosecond,
//! burst 2^32 - 1). Denied: a limit of 1 per 100 years, already taken (governor: one cell per 100
//! years, already checked; tokio: a semaphore with no permits; concurrency: its one permit held).

// The benchmark macros generate public items without docs.
#![allow(missing_docs)]

use std::collections::hash_map::DefaultHasher;
use std::hash::BuildHasherDefault;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use governor::clock::FakeRelativeClock;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use iai_callgrind::{library_benchmark, library_benchmark_group, main};
use portable_atomic::AtomicU128;
use tollgate::adaptive::{AdaptiveLimiter, AdaptiveOptions};
use tollgate::{
    Clock, ConcurrencyLimiter, ConcurrencyOptions, FixedWindowLimiter, FixedWindowOptions,
    GcraLimiter, GcraOptions, KeyedLimiter, Limiter, ManualClock, NoQueue, PartitionConfig,
    Replenishing, SlidingCounterLimiter, SlidingCounterOptions, SlidingWindowLimiter,
    SlidingWindowOptions, TokenBucketLimiter, TokenBucketOptions,
};

const CENTURY: Duration = Duration::from_secs(100 * 365 * 24 * 3600);
const HOUR: Duration = Duration::from_secs(3600);

/// A keyed limiter of `u64` keys with a fixed (unkeyed) hasher: the same count in every run.
type Keyed = KeyedLimiter<u64, &'static ManualClock, BuildHasherDefault<DefaultHasher>>;

type Governor = RateLimiter<NotKeyed, InMemoryState, FakeRelativeClock, NoOpMiddleware<Nanos>>;

// ---------------------------------------------------------------------------------------------
// Setups (not counted)

/// Leaked, so that the measured function receives a reference and no move of the limiter is
/// counted.
fn leak<T>(t: T) -> &'static T {
    Box::leak(Box::new(t))
}

/// A manual clock of its own for each limiter (leaked, so the limiter holds a reference).
fn clock() -> &'static ManualClock {
    leak(ManualClock::new())
}

/// Moves `clock` past 2^32 ns (less than an hour): the limiters then divide a realistic 64-bit
/// elapsed time into ticks, as they do on a real clock.
fn age(clock: &ManualClock) {
    clock.advance(Duration::from_nanos(1_234_567_890_123));
}

fn warm<L: Limiter>(l: L, clock: &ManualClock, allowed: bool) -> &'static L {
    let l = leak(l);
    age(clock);
    // The warm-up call is granted (in the denied case it takes the one permit).
    l.try_acquire(1).unwrap().forget();
    if !allowed {
        assert!(l.try_acquire(1).is_err());
    }
    l
}

fn token_bucket_setup(allowed: bool) -> &'static TokenBucketLimiter<&'static ManualClock> {
    let opts = if allowed {
        TokenBucketOptions::new(u32::MAX, u32::MAX, HOUR)
    } else {
        TokenBucketOptions::new(1, 1, CENTURY)
    };
    let c = clock();
    warm(TokenBucketLimiter::with_clock(opts, c).unwrap(), c, allowed)
}

/// A byte-rate bucket whose state takes the 128-bit word (a limit and a tick too wide for 64
/// bits): a 1 GiB burst, 1 MiB a millisecond, and the request: 1 KiB allowed; denied, the
/// bucket emptied and 1 MiB asked.
fn token_bucket_wide_setup(
    allowed: bool,
) -> (&'static TokenBucketLimiter<&'static ManualClock>, u32) {
    let opts = TokenBucketOptions::new(1 << 30, 1 << 20, Duration::from_millis(1));
    let c = clock();
    let l = leak(TokenBucketLimiter::with_clock(opts, c).unwrap());
    age(c);
    l.try_acquire(1).unwrap().forget();
    if allowed {
        return (l, 1 << 10);
    }
    l.try_acquire((1 << 30) - 1).unwrap().forget();
    assert!(l.try_acquire(1 << 20).is_err());
    (l, 1 << 20)
}

/// A bucket of 100 tokens, 10 a millisecond, half taken, then a millisecond later (setup of
/// the `replenish` rows; one call made so the count is a steady-state call's).
fn replenish_setup() -> &'static TokenBucketLimiter<&'static ManualClock> {
    let c = clock();
    let opts = TokenBucketOptions::new(100, 10, Duration::from_millis(1));
    let l = leak(TokenBucketLimiter::with_clock(opts, c).unwrap());
    replenish_warm(l, c)
}

fn replenish_no_queue_setup() -> &'static TokenBucketLimiter<&'static ManualClock, NoQueue> {
    let c = clock();
    let opts = TokenBucketOptions::new(100, 10, Duration::from_millis(1));
    let l = leak(TokenBucketLimiter::without_queue(opts, c).unwrap());
    replenish_warm(l, c)
}

fn replenish_warm<L: Limiter + Replenishing>(l: &'static L, c: &ManualClock) -> &'static L {
    age(c);
    l.try_acquire(50).unwrap().forget();
    l.replenish();
    c.advance(Duration::from_millis(1));
    l
}

fn fixed_window_setup(allowed: bool) -> &'static FixedWindowLimiter<&'static ManualClock> {
    let opts = if allowed {
        FixedWindowOptions::new(u32::MAX, HOUR)
    } else {
        FixedWindowOptions::new(1, CENTURY)
    };
    let c = clock();
    warm(FixedWindowLimiter::with_clock(opts, c).unwrap(), c, allowed)
}

/// GCRA: allowed with a burst too large to ever run out in a run (one permit a nanosecond),
/// denied with its one permit per century taken.
fn gcra_setup(allowed: bool) -> &'static GcraLimiter<&'static ManualClock> {
    let opts = if allowed {
        GcraOptions::per(HOUR, 1 << 20)
    } else {
        GcraOptions::per(CENTURY / 4, 1)
    };
    let c = clock();
    warm(GcraLimiter::with_clock(opts, c).unwrap(), c, allowed)
}

/// The sliding counter: allowed under `u32::MAX` per hour, denied with its one permit taken.
fn sliding_counter_setup(allowed: bool) -> &'static SlidingCounterLimiter<&'static ManualClock> {
    let opts = if allowed {
        SlidingCounterOptions::new(u32::MAX, HOUR)
    } else {
        SlidingCounterOptions::new(1, CENTURY)
    };
    let c = clock();
    warm(
        SlidingCounterLimiter::with_clock(opts, c).unwrap(),
        c,
        allowed,
    )
}

/// `"allowed"`: a header of one 64-bit word (2^29 - 1 permits per century in 4 segments);
/// `"allowed_wide"`: the 128-bit header (`u32::MAX` permits per hour); `"denied"`: the window's
/// one permit taken in the current segment (the quick denial); `"denied_behind"`: 2 permits per
/// window, one taken in the previous segment and one in this one (the denial reads the ring).
fn sliding_window_setup(kind: &str) -> &'static SlidingWindowLimiter<&'static ManualClock> {
    let opts = match kind {
        "allowed" => SlidingWindowOptions::new((1 << 29) - 1, CENTURY, 4),
        "allowed_wide" => SlidingWindowOptions::new(u32::MAX, HOUR, 4),
        "denied_behind" => SlidingWindowOptions::new(2, CENTURY, 4),
        _ => SlidingWindowOptions::new(1, CENTURY, 4),
    };
    let c = clock();
    let l = warm(
        SlidingWindowLimiter::with_clock(opts, c).unwrap(),
        c,
        kind.starts_with("allowed") || kind == "denied_behind",
    );
    if kind == "denied_behind" {
        c.advance(CENTURY / 4);
        l.try_acquire(1).unwrap().forget();
        assert!(l.try_acquire(1).is_err());
    }
    l
}

/// `"full"`: nothing else held, so the release makes the limiter fully available (and dates its
/// idleness); `"held"`: one other lease out; `"denied"`: its single permit held.
fn concurrency_setup(kind: &str) -> &'static ConcurrencyLimiter<&'static ManualClock> {
    let limit = if kind == "denied" { 1 } else { 1 << 20 };
    let c = clock();
    let l = leak(ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(limit), c).unwrap());
    age(c);
    drop(l.try_acquire(1).unwrap()); // warm up acquire and release
    if kind != "full" {
        l.try_acquire(1).unwrap().forget();
    }
    l
}

/// [`concurrency_setup`] for the limiter without a wait queue (`NoQueue`).
fn concurrency_no_queue_setup(
    kind: &str,
) -> &'static ConcurrencyLimiter<&'static ManualClock, NoQueue> {
    let limit = if kind == "denied" { 1 } else { 1 << 20 };
    let c = clock();
    let l = leak(ConcurrencyLimiter::without_queue(ConcurrencyOptions::new(limit), c).unwrap());
    age(c);
    drop(l.try_acquire(1).unwrap()); // warm up acquire and release
    if kind != "full" {
        l.try_acquire(1).unwrap().forget();
    }
    l
}

/// A keyed limiter built by `make`, its key 7 stored by one granted call (and, when `denied`,
/// its one permit taken: the next call is refused).
fn keyed_warm(make: impl FnOnce(&'static ManualClock) -> Keyed, allowed: bool) -> &'static Keyed {
    let c = clock();
    let l = leak(make(c));
    age(c);
    l.try_acquire(&7, 1).unwrap().forget();
    if !allowed {
        assert!(l.try_acquire(&7, 1).is_err());
    }
    l
}

fn keyed_config() -> PartitionConfig {
    PartitionConfig::new(1_000)
}

fn keyed_token_bucket_setup(allowed: bool) -> &'static Keyed {
    let opts = if allowed {
        TokenBucketOptions::new(u32::MAX, u32::MAX, HOUR)
    } else {
        TokenBucketOptions::new(1, 1, CENTURY)
    };
    keyed_warm(
        |c| {
            KeyedLimiter::with_hasher_token_bucket(opts, keyed_config(), c, Default::default())
                .unwrap()
        },
        allowed,
    )
}

fn keyed_fixed_window_setup(allowed: bool) -> &'static Keyed {
    let opts = if allowed {
        FixedWindowOptions::new(u32::MAX, HOUR)
    } else {
        FixedWindowOptions::new(1, CENTURY)
    };
    keyed_warm(
        |c| {
            KeyedLimiter::with_hasher_fixed_window(opts, keyed_config(), c, Default::default())
                .unwrap()
        },
        allowed,
    )
}

/// Allowed: a permit every nanosecond, a burst of `u32::MAX`; denied: one per 50 years.
fn keyed_gcra_setup(allowed: bool) -> &'static Keyed {
    let opts = if allowed {
        GcraOptions::with_period(Duration::from_nanos(1)).with_burst(u32::MAX)
    } else {
        GcraOptions::with_period(CENTURY / 2)
    };
    keyed_warm(
        |c| KeyedLimiter::with_hasher_gcra(opts, keyed_config(), c, Default::default()).unwrap(),
        allowed,
    )
}

/// Allowed: the largest limit an hour's window holds in the keyed form; denied: one per century.
fn keyed_sliding_counter_setup(allowed: bool) -> &'static Keyed {
    let opts = if allowed {
        SlidingCounterOptions::new(2_097_151, HOUR)
    } else {
        SlidingCounterOptions::new(1, CENTURY)
    };
    keyed_warm(
        |c| {
            KeyedLimiter::with_hasher_sliding_counter(opts, keyed_config(), c, Default::default())
                .unwrap()
        },
        allowed,
    )
}

fn governor_setup(allowed: bool) -> &'static Governor {
    let quota = if allowed {
        Quota::with_period(Duration::from_nanos(1))
            .unwrap()
            .allow_burst(NonZeroU32::MAX)
    } else {
        Quota::with_period(CENTURY).unwrap()
    };
    let l = leak(RateLimiter::direct_with_clock(
        quota,
        FakeRelativeClock::default(),
    ));
    l.check().unwrap();
    if !allowed {
        assert!(l.check().is_err());
    }
    l
}

fn semaphore_setup(allowed: bool) -> &'static tokio::sync::Semaphore {
    let s = leak(tokio::sync::Semaphore::new(if allowed {
        1 << 20
    } else {
        0
    }));
    drop(s.try_acquire());
    s
}

fn floor_u64_setup() -> &'static AtomicU64 {
    let a = leak(AtomicU64::new(0));
    load_cas_u64(a);
    a
}

fn floor_clock_setup() -> &'static (ManualClock, AtomicU64) {
    let ca = leak((ManualClock::new(), AtomicU64::new(0)));
    age(&ca.0);
    ca
}

fn floor_u128_setup() -> &'static AtomicU128 {
    let a = leak(AtomicU128::new(0));
    load_cas_u128(a);
    a
}

// ---------------------------------------------------------------------------------------------
// The floor

fn load_cas_u64(a: &AtomicU64) {
    let cur = a.load(Ordering::Acquire);
    let _ = black_box(a.compare_exchange_weak(
        cur,
        cur.wrapping_add(1),
        Ordering::AcqRel,
        Ordering::Acquire,
    ));
}

fn load_cas_u128(a: &AtomicU128) {
    let cur = a.load(Ordering::Acquire);
    let _ = black_box(a.compare_exchange_weak(
        cur,
        cur.wrapping_add(1),
        Ordering::AcqRel,
        Ordering::Acquire,
    ));
}

#[library_benchmark]
#[bench::cas64(setup = floor_u64_setup)]
fn floor_cas64(a: &'static AtomicU64) {
    load_cas_u64(a);
}

#[library_benchmark]
#[bench::cas128(setup = floor_u128_setup)]
fn floor_cas128(a: &'static AtomicU128) {
    load_cas_u128(a);
}

// The same clock read (ManualClock) plus one load + CAS on a 64-bit word.
#[library_benchmark]
#[bench::manual_cas64(setup = floor_clock_setup)]
fn floor_clock_cas64(ca: &'static (ManualClock, AtomicU64)) {
    let (clock, a) = ca;
    let now = black_box(clock.now().as_nanos());
    let cur = a.load(Ordering::Acquire);
    let _ = black_box(a.compare_exchange_weak(
        cur,
        cur.max(now).wrapping_add(1),
        Ordering::AcqRel,
        Ordering::Acquire,
    ));
}

// The floor of a concurrency limiter's acquire + release: one `fetch_sub` and one `fetch_add`
// on one word (what a lease taken and given back must do at the least; no check, no count).
#[library_benchmark]
#[bench::sub_add(setup = floor_u64_setup)]
fn floor_acquire_release(a: &'static AtomicU64) {
    black_box(a.fetch_sub(black_box(1), Ordering::AcqRel));
    black_box(a.fetch_add(1, Ordering::Release));
}

// ---------------------------------------------------------------------------------------------
// Ours

#[library_benchmark]
#[bench::allowed(args = (true), setup = token_bucket_setup)]
#[bench::denied(args = (false), setup = token_bucket_setup)]
fn token_bucket(l: &'static TokenBucketLimiter<&'static ManualClock>) {
    let _ = black_box(l.try_acquire(black_box(1)));
}

// The same on the 128-bit word (a byte rate).
#[library_benchmark]
#[bench::allowed(args = (true), setup = token_bucket_wide_setup)]
#[bench::denied(args = (false), setup = token_bucket_wide_setup)]
fn token_bucket_wide((l, n): (&'static TokenBucketLimiter<&'static ManualClock>, u32)) {
    let _ = black_box(l.try_acquire(black_box(n)));
}

#[library_benchmark]
#[bench::allowed(args = (true), setup = fixed_window_setup)]
#[bench::denied(args = (false), setup = fixed_window_setup)]
fn fixed_window(l: &'static FixedWindowLimiter<&'static ManualClock>) {
    let _ = black_box(l.try_acquire(black_box(1)));
}

#[library_benchmark]
#[bench::allowed(args = (true), setup = gcra_setup)]
#[bench::denied(args = (false), setup = gcra_setup)]
fn gcra(l: &'static GcraLimiter<&'static ManualClock>) {
    let _ = black_box(l.try_acquire(black_box(1)));
}

#[library_benchmark]
#[bench::allowed(args = (true), setup = sliding_counter_setup)]
#[bench::denied(args = (false), setup = sliding_counter_setup)]
fn sliding_counter(l: &'static SlidingCounterLimiter<&'static ManualClock>) {
    let _ = black_box(l.try_acquire(black_box(1)));
}

#[library_benchmark]
#[bench::allowed(args = ("allowed"), setup = sliding_window_setup)]
#[bench::allowed_wide(args = ("allowed_wide"), setup = sliding_window_setup)]
#[bench::denied(args = ("denied"), setup = sliding_window_setup)]
#[bench::denied_behind(args = ("denied_behind"), setup = sliding_window_setup)]
fn sliding_window(l: &'static SlidingWindowLimiter<&'static ManualClock>) {
    let _ = black_box(l.try_acquire(black_box(1)));
}

// `replenish()` with nobody waiting, as a timer interrupt calls it on every tick: a queued
// token bucket (the queue it checks is empty) and a queueless one. The setup leaves the bucket
// part-empty, so the call has tokens to add.
#[library_benchmark]
#[bench::queued(setup = replenish_setup)]
fn token_bucket_replenish(l: &'static TokenBucketLimiter<&'static ManualClock>) {
    black_box(l.replenish());
}

#[library_benchmark]
#[bench::no_queue(setup = replenish_no_queue_setup)]
fn token_bucket_replenish_no_queue(l: &'static TokenBucketLimiter<&'static ManualClock, NoQueue>) {
    black_box(l.replenish());
}

// Acquire, then drop the lease (release); denied: the acquire alone.
#[library_benchmark]
#[bench::acquire_release(args = ("full"), setup = concurrency_setup)]
#[bench::acquire_release_held(args = ("held"), setup = concurrency_setup)]
#[bench::denied(args = ("denied"), setup = concurrency_setup)]
fn concurrency(l: &'static ConcurrencyLimiter<&'static ManualClock>) {
    let _ = black_box(l.try_acquire(black_box(1)));
}

// The same without a wait queue.
#[library_benchmark]
#[bench::acquire_release(args = ("full"), setup = concurrency_no_queue_setup)]
#[bench::acquire_release_held(args = ("held"), setup = concurrency_no_queue_setup)]
#[bench::denied(args = ("denied"), setup = concurrency_no_queue_setup)]
fn concurrency_no_queue(l: &'static ConcurrencyLimiter<&'static ManualClock, NoQueue>) {
    let _ = black_box(l.try_acquire(black_box(1)));
}

/// An adaptive limiter far from its limit (AIMD, windows of 1 s and 10 samples): `"full"` as
/// [`concurrency_setup`]'s; the lease's drop samples its latency (the window stays open).
fn adaptive_setup(kind: &str) -> &'static AdaptiveLimiter<&'static ManualClock> {
    let limit = if kind == "denied" { 1 } else { 1 << 20 };
    let c = clock();
    let opts = AdaptiveOptions::new(limit).with_bounds(1, 1 << 20);
    let l = leak(AdaptiveLimiter::with_clock(opts, c).unwrap());
    drop(l.try_acquire(1).unwrap()); // warm up acquire, release and sampling
    if kind == "denied" {
        core::mem::forget(l.try_acquire(1).unwrap());
    }
    l
}

// Acquire, then drop the lease (release and sample); denied: the acquire alone.
#[library_benchmark]
#[bench::acquire_release(args = ("full"), setup = adaptive_setup)]
#[bench::denied(args = ("denied"), setup = adaptive_setup)]
fn adaptive(l: &'static AdaptiveLimiter<&'static ManualClock>) {
    let _ = black_box(l.try_acquire(black_box(1)));
}

// One decision of a compact keyed limiter for a stored key (hash, probe, CAS).
#[library_benchmark]
#[bench::allowed(args = (true), setup = keyed_token_bucket_setup)]
#[bench::denied(args = (false), setup = keyed_token_bucket_setup)]
fn keyed_token_bucket(l: &'static Keyed) {
    let _ = black_box(l.try_acquire(black_box(&7), black_box(1)));
}

#[library_benchmark]
#[bench::allowed(args = (true), setup = keyed_fixed_window_setup)]
#[bench::denied(args = (false), setup = keyed_fixed_window_setup)]
fn keyed_fixed_window(l: &'static Keyed) {
    let _ = black_box(l.try_acquire(black_box(&7), black_box(1)));
}

#[library_benchmark]
#[bench::allowed(args = (true), setup = keyed_gcra_setup)]
#[bench::denied(args = (false), setup = keyed_gcra_setup)]
fn keyed_gcra(l: &'static Keyed) {
    let _ = black_box(l.try_acquire(black_box(&7), black_box(1)));
}

#[library_benchmark]
#[bench::allowed(args = (true), setup = keyed_sliding_counter_setup)]
#[bench::denied(args = (false), setup = keyed_sliding_counter_setup)]
fn keyed_sliding_counter(l: &'static Keyed) {
    let _ = black_box(l.try_acquire(black_box(&7), black_box(1)));
}

// ---------------------------------------------------------------------------------------------
// Peers

#[library_benchmark]
#[bench::allowed(args = (true), setup = governor_setup)]
#[bench::denied(args = (false), setup = governor_setup)]
fn governor_fake_clock(l: &'static Governor) {
    let _ = black_box(l.check());
}

// `try_acquire` and drop of the permit; denied: no permits.
#[library_benchmark]
#[bench::acquire_release(args = (true), setup = semaphore_setup)]
#[bench::denied(args = (false), setup = semaphore_setup)]
fn tokio_semaphore(s: &'static tokio::sync::Semaphore) {
    let _ = black_box(s.try_acquire());
}

library_benchmark_group!(
    name = floor;
    benchmarks = floor_cas64, floor_cas128, floor_clock_cas64, floor_acquire_release
);

library_benchmark_group!(
    name = limiters;
    benchmarks = token_bucket, token_bucket_wide, fixed_window, gcra, sliding_counter, sliding_window, concurrency,
        concurrency_no_queue, adaptive, token_bucket_replenish, token_bucket_replenish_no_queue
);

library_benchmark_group!(
    name = keyed;
    benchmarks = keyed_token_bucket, keyed_fixed_window, keyed_gcra, keyed_sliding_counter
);

library_benchmark_group!(
    name = peers;
    benchmarks = governor_fake_clock, tokio_semaphore
);

main!(library_benchmark_groups = floor, limiters, keyed, peers);
