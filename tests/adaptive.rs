//! Adaptive concurrency against a simulated server on a manual clock: a server that serves
//! `CAPACITY` requests at once in `BASE_MS` each and queues the rest (each request then takes
//! longer in proportion), behind clients that always want more than it can take (an open
//! loop). The limit must find the capacity, follow it when it halves and doubles, keep the p99
//! latency within twice the unloaded one, and never be exceeded. `--nocapture` prints each
//! algorithm's figures.

use core::time::Duration;

use tollgate::adaptive::{
    AdaptiveLease, AdaptiveLimiter, AdaptiveOptions, Aimd, Gradient, Gradient2, Vegas,
};
use tollgate::ManualClock;

const CAPACITY: u64 = 50;
const BASE_MS: u64 = 10;
/// Windows of 50 ms (and at least 10 samples).
const WINDOW_MS: u64 = 50;

/// The latency of a request started with `in_flight` requests in a server of `capacity`
/// workers: the base while within capacity, then in proportion (a queue in front of them).
fn latency_ms(in_flight: u64, capacity: u64) -> u64 {
    BASE_MS * in_flight.max(capacity) / capacity
}

/// What a run measured: the limit at the end of every window, and each request's latency.
struct Run {
    limits: Vec<u32>,
    latencies: Vec<u64>,
}

impl Run {
    /// The limits of windows `from..until` outside measurement windows (a limit a quarter or
    /// less of the window before's: Vegas's and the gradient's unloaded measurements).
    fn phase(&self, from: usize, until: usize) -> Vec<u32> {
        (from..until)
            .filter(|&w| w == 0 || self.limits[w] * 4 > self.limits[w - 1])
            .map(|w| self.limits[w])
            .collect()
    }

    /// Windows from `from` until the limit first lies within `pct` % of `capacity`.
    fn reaches(&self, from: usize, until: usize, capacity: u64, pct: u64) -> Option<usize> {
        self.limits[from..until]
            .iter()
            .position(|&l| (u64::from(l) * 100).abs_diff(capacity * 100) <= capacity * pct)
    }

    /// The 99th percentile of the latencies of the requests started in the last `share`
    /// percent of the run.
    fn p99_ms(&self, share: usize) -> u64 {
        let start = self.latencies.len() * (100 - share) / 100;
        let mut tail = self.latencies[start..].to_vec();
        tail.sort_unstable();
        tail[tail.len() * 99 / 100]
    }
}

/// Runs `ms` milliseconds of open-loop overload (clients want 4 × the capacity every
/// millisecond) against a server whose capacity is `capacity(now)`; clients give up at
/// `timeout_ms` (a drop). No grant may take the leases held past the limit of its instant.
fn simulate(
    limiter: &AdaptiveLimiter<&ManualClock>,
    clock: &ManualClock,
    ms: u64,
    timeout_ms: u64,
    capacity: impl Fn(u64) -> u64,
) -> Run {
    let mut running: Vec<(u64, AdaptiveLease<'_>)> = Vec::new();
    let mut run = Run {
        limits: Vec::new(),
        latencies: Vec::new(),
    };
    for now in 0..ms {
        let mut i = 0;
        while i < running.len() {
            if running[i].0 <= now {
                drop(running.swap_remove(i));
            } else {
                i += 1;
            }
        }
        let c = capacity(now);
        for _ in 0..4 * c {
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
            let took = latency_ms(in_flight, c);
            if took > timeout_ms {
                lease.dropped();
            }
            run.latencies.push(took.min(timeout_ms));
            running.push((now + took.min(timeout_ms), lease));
        }
        clock.advance(Duration::from_millis(1));
        if now % WINDOW_MS == WINDOW_MS - 1 {
            run.limits.push(limiter.limit());
        }
    }
    run
}

fn options() -> AdaptiveOptions {
    AdaptiveOptions::new(10)
        .with_bounds(1, 1_000)
        .with_window(Duration::from_millis(WINDOW_MS), 10)
}

/// 60 s at capacity 50, then 30 s at 25, then 30 s at 100 (windows 0–1,199, 1,200–1,799,
/// 1,800–2,399).
fn changing(now: u64) -> u64 {
    match now {
        0..60_000 => CAPACITY,
        60_000..90_000 => CAPACITY / 2,
        _ => CAPACITY * 2,
    }
}

/// Prints a run's figures (for the closing note): per phase (capacity 50, 25, 100) the
/// median limit and its range at steady state (the phase's second half, measurement windows
/// left out), the windows it took to come within ±20 % and ±50 % of the capacity, and the p99
/// latency at the end. Checks what the algorithms meet in this model: each phase's median
/// within −20 % / +`over_pct` % of its capacity (50 %; Envoy's default buffer 60 %,
/// Gradient2's default tolerance 75 %), within ±50 % of it (or `over_pct`, if larger) at most
/// 100 windows (5 s) after each change, and a p99 latency within 2× the unloaded one.
fn report(name: &str, run: &Run, over_pct: u64) {
    let mut line = format!("{name}:");
    for (from, until, c) in [
        (0, 1_200, CAPACITY),
        (1_200, 1_800, CAPACITY / 2),
        (1_800, 2_400, CAPACITY * 2),
    ] {
        let mut steady = run.phase((from + until) / 2, until);
        steady.sort_unstable();
        let median = steady[steady.len() / 2];
        let (near, roughly) = (
            run.reaches(from, until, c, 20),
            run.reaches(from, until, c, 50),
        );
        line += &format!(
            " capacity {c}: median {median} ({}..{}), ±20 % after {near:?} windows, ±50 % after {roughly:?};",
            steady[0],
            steady[steady.len() - 1],
        );
        assert!(
            u64::from(median) * 10 >= c * 8 && u64::from(median) * 100 <= c * (100 + over_pct),
            "{line}"
        );
        let band = run.reaches(from, until, c, over_pct.max(50));
        assert!(band.is_some_and(|w| w <= 100), "{line}");
    }
    println!(
        "{line} p99 latency {} ms (unloaded {BASE_MS} ms)",
        run.p99_ms(5)
    );
    assert!(
        run.p99_ms(5) <= 2 * BASE_MS,
        "{name}: p99 {}",
        run.p99_ms(5)
    );
}

#[test]
fn aimd_finds_the_capacity_and_oscillates_below_its_drop_point() {
    let clock = ManualClock::new();
    let limiter =
        AdaptiveLimiter::with_clock(options().with_algorithm(Aimd::new()), &clock).unwrap();
    // Clients time out at 1.2 × the base latency: drops begin past 1.2 × capacity.
    let run = simulate(&limiter, &clock, 120_000, BASE_MS * 6 / 5, changing);
    report("AIMD", &run, 50);
}

#[test]
fn vegas_finds_the_capacity_from_latency_alone() {
    let clock = ManualClock::new();
    let limiter =
        AdaptiveLimiter::with_clock(options().with_algorithm(Vegas::new()), &clock).unwrap();
    // No timeouts: only the latency tells.
    let run = simulate(&limiter, &clock, 120_000, u64::MAX, changing);
    report("Vegas", &run, 50);
}

#[test]
fn envoys_gradient_finds_the_capacity_and_measures_it_unloaded() {
    let clock = ManualClock::new();
    // A measurement every 100 windows (5 s here), at a limit of 3; a 5 % buffer, then
    // Envoy's default 25 % (which settles further above capacity: its √limit headroom comes
    // on top of the buffer).
    let gradient = Gradient::new()
        .with_probes(100, 150, 3)
        .with_buffer_permille(50);
    let limiter = AdaptiveLimiter::with_clock(options().with_algorithm(gradient), &clock).unwrap();
    let run = simulate(&limiter, &clock, 120_000, u64::MAX, changing);
    report("Gradient (5 % buffer)", &run, 50);

    let clock = ManualClock::new();
    let defaults = Gradient::new().with_probes(100, 150, 3);
    let limiter = AdaptiveLimiter::with_clock(options().with_algorithm(defaults), &clock).unwrap();
    let run = simulate(&limiter, &clock, 120_000, u64::MAX, changing);
    report("Gradient (Envoy's 25 % buffer)", &run, 60);
}

#[test]
fn gradient2_finds_the_capacity_and_does_not_creep_above_it() {
    // Netflix's defaults (tolerance 1.5: it settles where latency is up to 1.5× its long-term
    // average), then a tolerance of 1.2; an unloaded measurement every 100 windows (5 s here).
    for (name, tolerance, over_pct) in [
        ("Gradient2 (Netflix's tolerance 1.5)", 1_500, 75),
        ("Gradient2 (tolerance 1.2)", 1_200, 50),
        ("Gradient2 (tolerance 1.1)", 1_100, 50),
    ] {
        let clock = ManualClock::new();
        let g = Gradient2::new()
            .with_tolerance_permille(tolerance)
            .with_probe_every(100);
        let limiter = AdaptiveLimiter::with_clock(options().with_algorithm(g), &clock).unwrap();
        let run = simulate(&limiter, &clock, 120_000, u64::MAX, changing);
        report(name, &run, over_pct);
    }
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

/// Through the `Limiter` trait (what chains and partitions take), an adaptive limiter's leases
/// are plain `Lease`s that keep their grant's time in their stamp: their drop releases and
/// samples, `dropped()` backs off, `ignore()` samples nothing, and a chain's lease reports to
/// every link. Latencies are exact to 4.096 µs: a call 10 µs over AIMD's timeout is a drop,
/// one 10 µs under it is not.
#[test]
fn chained_and_plain_leases_report_their_latency_and_outcome() {
    use tollgate::{Chain, Limiter, TokenBucketLimiter, TokenBucketOptions};

    let clock = ManualClock::new();
    let aimd = Aimd {
        timeout_ns: 50_000_000,
        ..Aimd::new()
    };
    let opts = AdaptiveOptions::new(10)
        .with_bounds(1, 100)
        .with_window(Duration::from_millis(1), 1)
        .with_algorithm(aimd);
    let adaptive = AdaptiveLimiter::with_clock(opts, &clock).unwrap();
    let rate =
        TokenBucketLimiter::with_clock(TokenBucketOptions::per_second(1_000), &clock).unwrap();
    let chain = Chain::new((&rate, &adaptive));

    // `limit` calls held at once (the limit is used), of which only the first is sampled: the
    // others are ignored, so that each window holds one call of a known latency.
    let calls = |limit: usize| -> Vec<_> {
        let mut held: Vec<_> = (0..limit).map(|_| chain.try_acquire(1).unwrap()).collect();
        held.iter_mut().skip(1).for_each(|c| c.ignore());
        held
    };
    // A call of 50 ms less 10 µs: + 1.
    let held = calls(10);
    assert_eq!(adaptive.available_permits(), 0);
    clock.advance(Duration::from_micros(49_990));
    drop(held);
    assert_eq!(adaptive.limit(), 11);
    assert_eq!(adaptive.available_permits(), 11);

    // 10 µs over the timeout: a drop, × 0.9.
    let held = calls(11);
    clock.advance(Duration::from_micros(50_010));
    drop(held);
    assert_eq!(adaptive.limit(), 9);

    // `dropped()` on the chain's lease reaches the adaptive link: × 0.9 at once.
    clock.advance(Duration::from_millis(2));
    let mut call = chain.try_acquire(1).unwrap();
    call.dropped();
    drop(call);
    assert_eq!(adaptive.limit(), 8);

    // `ignore()`: no sample, so no window closes however long it lasts.
    clock.advance(Duration::from_millis(2));
    let mut call = Limiter::try_acquire(&adaptive, 1).unwrap();
    call.ignore();
    clock.advance(Duration::from_secs(1));
    drop(call);
    assert_eq!((adaptive.limit(), adaptive.available_permits()), (8, 8));

    // A probe's lease holds nothing, samples nothing and cannot settle.
    let mut probe = Limiter::try_acquire(&adaptive, 0).unwrap();
    assert_eq!(probe.settle(1), Err(tollgate::SettleError::Unsupported));
    drop(probe);
    assert_eq!(adaptive.limit(), 8);
    // A plain lease settles as the concurrency limiter inside does.
    let mut lease = Limiter::try_acquire(&adaptive, 4).unwrap();
    lease.settle(1).unwrap();
    assert_eq!(adaptive.available_permits(), 7);
    lease.ignore();
    drop(lease);
    assert_eq!(adaptive.available_permits(), 8);
}

/// The waiting form (`AcquireAsync`, a chain's `acquire`), owned leases (`AcquireOwned`) and
/// partitions made by a factory of adaptive limiters: each lease is stamped when granted,
/// released and sampled when dropped.
#[test]
fn waiting_owned_and_partitioned_adaptive_leases_are_sampled() {
    use core::future::Future;
    use std::sync::Arc;
    use tollgate::{
        AcquireAsync, AcquireOwned, Limiter, Partition, PartitionConfig, Partitioned, QueueOrder,
    };

    // A clock the owned lease's thread and the partitions share.
    let clock = Arc::new(ManualClock::new());
    let opts = AdaptiveOptions::new(2)
        .with_bounds(1, 10)
        .with_window(Duration::from_millis(1), 1)
        .with_queue(4, QueueOrder::OldestFirst)
        .with_algorithm(Aimd::new());
    let adaptive = Arc::new(AdaptiveLimiter::with_clock(opts, clock.clone()).unwrap());

    // Waiting: granted when a permit comes back, then sampled as a drop.
    let held = Limiter::try_acquire(&*adaptive, 2).unwrap();
    let mut waiter = Box::pin(AcquireAsync::acquire(&*adaptive, 1));
    let cx = &mut core::task::Context::from_waker(core::task::Waker::noop());
    assert!(waiter.as_mut().poll(cx).is_pending());
    clock.advance(Duration::from_millis(2));
    drop(held); // a success of 2 ms: 2 held of 2, + 1
    assert_eq!(adaptive.limit(), 3);
    let core::task::Poll::Ready(Ok(mut lease)) = waiter.as_mut().poll(cx) else {
        panic!("the waiter was not granted");
    };
    clock.advance(Duration::from_millis(2));
    lease.dropped();
    drop(lease);
    assert_eq!(adaptive.limit(), 2); // 3 × 0.9, down at least one

    // Owned: the lease keeps the limiter alive and reports the same way.
    let mut owned = AcquireOwned::try_acquire_owned(&adaptive, 1).unwrap();
    clock.advance(Duration::from_millis(2));
    owned.dropped();
    std::thread::spawn(move || drop(owned)).join().unwrap();
    assert_eq!((adaptive.limit(), adaptive.available_permits()), (1, 1));

    // Partitions: an adaptive limit per upstream, each learning from its own calls.
    let per_upstream = Partitioned::with_clock(
        move |upstream: &str| {
            Partition::new(
                upstream.to_owned(),
                move |_: &String, clock: &Arc<ManualClock>| {
                    AdaptiveLimiter::with_clock(opts, clock.clone()).unwrap()
                },
            )
        },
        PartitionConfig::default(),
        clock.clone(),
    );
    let mut slow = per_upstream.try_acquire("slow", 1).unwrap();
    let fast = per_upstream.try_acquire("fast", 1).unwrap();
    clock.advance(Duration::from_millis(2));
    slow.dropped();
    drop((slow, fast));
    assert_eq!(per_upstream.statistics("slow").available_permits, 1); // 2 × 0.9 → 1
    assert_eq!(per_upstream.statistics("fast").available_permits, 3); // 1 of 2 held: used, + 1
}
