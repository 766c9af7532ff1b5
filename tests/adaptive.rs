//! Adaptive concurrency against a simulated server on a manual clock: a server that serves
//! `CAPACITY` requests at once in `BASE` each and queues the rest (each request then takes
//! longer in proportion), behind clients that always want more than it can take. The limit
//! must find the capacity and stay near it, and never be exceeded.

use core::time::Duration;

use tollgate::adaptive::{AdaptiveLease, AdaptiveLimiter, AdaptiveOptions, Aimd, Gradient, Vegas};
use tollgate::ManualClock;

const CAPACITY: u64 = 50;
const BASE_MS: u64 = 10;

/// The latency of a request started with `in_flight` requests in the server: the base while
/// within capacity, then in proportion (a queue in front of `CAPACITY` workers).
fn latency_ms(in_flight: u64) -> u64 {
    BASE_MS * in_flight.max(CAPACITY) / CAPACITY
}

/// Runs `ms` milliseconds of overload and answers the limit at the end of every second; no
/// grant may take the leases held past the limit of its instant.
fn simulate(
    limiter: &AdaptiveLimiter<&ManualClock>,
    clock: &ManualClock,
    ms: u64,
    timeout_ms: u64,
) -> Vec<u32> {
    let mut running: Vec<(u64, AdaptiveLease<'_, &ManualClock>)> = Vec::new();
    let mut limits = Vec::new();
    for now in 0..ms {
        // Calls that are due end: those past the clients' timeout report a drop.
        let mut i = 0;
        while i < running.len() {
            if running[i].0 <= now {
                drop(running.swap_remove(i));
            } else {
                i += 1;
            }
        }
        // Clients want 4 × capacity a millisecond: as many as the limiter lets in.
        for _ in 0..4 * CAPACITY {
            let Ok(mut lease) = limiter.try_acquire(1) else {
                break;
            };
            let in_flight = running.len() as u64 + 1;
            // Granted only within the limit of its instant (a cut with leases out admits
            // nobody until enough of them end).
            assert!(
                in_flight <= u64::from(limiter.limit()),
                "over the limit at {now} ms"
            );
            let took = latency_ms(in_flight);
            if took > timeout_ms {
                lease.dropped();
            }
            running.push((now + took.min(timeout_ms), lease));
        }
        clock.advance(Duration::from_millis(1));
        if now % 1_000 == 999 {
            limits.push(limiter.limit());
        }
    }
    limits
}

fn options() -> AdaptiveOptions {
    AdaptiveOptions::new(10)
        .with_bounds(1, 1_000)
        .with_window(Duration::from_millis(50), 10)
}

#[test]
fn aimd_finds_the_capacity_and_oscillates_below_its_drop_point() {
    let clock = ManualClock::new();
    let limiter =
        AdaptiveLimiter::with_clock(options().with_algorithm(Aimd::new()), &clock).unwrap();
    // Clients time out at 1.5 × the base latency: drops begin past 1.5 × capacity.
    let limits = simulate(&limiter, &clock, 60_000, BASE_MS * 3 / 2);
    let settled = &limits[20..];
    let (lo, hi) = (
        *settled.iter().min().unwrap(),
        *settled.iter().max().unwrap(),
    );
    println!("AIMD limits by second: {limits:?}");
    assert!(
        lo as u64 >= CAPACITY * 9 / 10 && hi as u64 <= CAPACITY * 2,
        "{lo}..{hi}"
    );
}

#[test]
fn vegas_finds_the_capacity_from_latency_alone() {
    let clock = ManualClock::new();
    let limiter =
        AdaptiveLimiter::with_clock(options().with_algorithm(Vegas::new()), &clock).unwrap();
    // No timeouts: only the latency tells.
    let limits = simulate(&limiter, &clock, 60_000, u64::MAX);
    let settled = &limits[20..];
    let (lo, hi) = (
        *settled.iter().min().unwrap(),
        *settled.iter().max().unwrap(),
    );
    println!("Vegas limits by second: {limits:?}");
    assert!(
        lo as u64 >= CAPACITY * 8 / 10 && hi as u64 <= CAPACITY * 13 / 10,
        "{lo}..{hi}"
    );
}

#[test]
fn envoys_gradient_finds_the_capacity_and_measures_it_unloaded() {
    let clock = ManualClock::new();
    // A measurement every 100 windows (5 s here), at a limit of 3.
    let gradient = Gradient::new().with_probes(100, 150, 3);
    let limiter = AdaptiveLimiter::with_clock(options().with_algorithm(gradient), &clock).unwrap();
    let limits = simulate(&limiter, &clock, 60_000, u64::MAX);
    println!("Gradient limits by second: {limits:?}");
    // The fixed point: a 12.5 ms target over 10 ms × L / 50 gives L × g = 62.5, plus √62 of
    // headroom: about 70 (74 with latencies in whole milliseconds). Between measurements (a
    // window in a hundred runs at 3) the limit stays near it.
    let mut settled: Vec<u32> = limits[20..].iter().copied().filter(|&l| l > 3).collect();
    assert!(settled.len() >= 30, "{limits:?}");
    settled.sort_unstable();
    let (lo, median, hi) = (
        settled[0],
        settled[settled.len() / 2],
        settled[settled.len() - 1],
    );
    assert!(
        lo as u64 >= CAPACITY && hi as u64 <= CAPACITY * 17 / 10,
        "{lo}..{hi}"
    );
    assert!(median as u64 <= CAPACITY * 3 / 2, "{median}");
}

/// A lowered limit admits nobody until enough leases end; ignored calls and probes are not
/// sampled; an empty window moves nothing.
#[test]
fn a_cut_waits_for_leases_to_end_and_only_counted_calls_are_sampled() {
    let clock = ManualClock::new();
    let opts = AdaptiveOptions::new(4)
        .with_bounds(1, 10)
        .with_window(Duration::from_millis(10), 2)
        .with_algorithm(Aimd::new());
    let limiter = AdaptiveLimiter::with_clock(opts, &clock).unwrap();
    let mut held: Vec<_> = (0..4).map(|_| limiter.try_acquire(1).unwrap()).collect();
    // Two dropped calls end a window: 4 × 0.9 → 3, with 2 still held.
    held[0].dropped();
    held[1].dropped();
    clock.advance(Duration::from_millis(10));
    held.drain(..2);
    assert_eq!(limiter.limit(), 3);
    let third = limiter.try_acquire(1).unwrap(); // 2 held, 3 allowed
    assert!(limiter.try_acquire(1).is_err()); // 3 held: at the limit
    drop(third);
    // Ignored calls and probes say nothing: no window closes however long it runs.
    clock.advance(Duration::from_millis(50));
    for mut lease in held.drain(..) {
        lease.ignore();
    }
    drop(limiter.try_acquire(0).unwrap());
    let before = limiter.limit();
    clock.advance(Duration::from_millis(50));
    let mut one = limiter.try_acquire(1).unwrap();
    one.ignore();
    drop(one);
    assert_eq!(limiter.limit(), before);
    assert_eq!(limiter.available_permits(), u64::from(before));
}

#[test]
fn waiting_acquisitions_are_leases_too() {
    let clock = ManualClock::new();
    let opts = AdaptiveOptions::new(1).with_queue(4, tollgate::QueueOrder::OldestFirst);
    let limiter = AdaptiveLimiter::with_clock(opts, &clock).unwrap();
    embassy_futures::block_on(async {
        let first = limiter.acquire(1).await.unwrap();
        assert_eq!(first.permits(), 1);
        drop(first);
        let second = limiter.acquire(1).await.unwrap();
        assert_eq!(limiter.statistics().total_successful, 2);
        drop(second);
    });
    limiter.close();
    assert!(limiter.try_acquire(1).is_err());
}

#[test]
fn bad_options_are_typed_errors() {
    use tollgate::OptionsError;
    let clock = ManualClock::new();
    for (opts, err) in [
        (AdaptiveOptions::new(0), OptionsError::LimitBounds),
        (
            AdaptiveOptions::new(5).with_bounds(6, 10),
            OptionsError::LimitBounds,
        ),
        (
            AdaptiveOptions::new(5).with_bounds(1, 4),
            OptionsError::LimitBounds,
        ),
        (
            AdaptiveOptions::new(5).with_window(Duration::ZERO, 1),
            OptionsError::ZeroPeriod,
        ),
    ] {
        assert_eq!(
            AdaptiveLimiter::with_clock(opts, &clock).unwrap_err(),
            err,
            "{opts:?}"
        );
    }
}
