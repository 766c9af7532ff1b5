//! A tour of tollgate: every limiter on a manual clock, step by step.
//!
//! ```text
//! cargo run --release -p tollgate-tour
//! ```
//!
//! Each section replays a worked example from the .NET documentation (the announcement of
//! `System.Threading.RateLimiting` and its design document) and prints what happens: the time,
//! the request, the answer, the permits left, the RetryAfter of every rejection and the
//! statistics. Every printed number is also asserted, so the tour cannot drift from the
//! documented behaviour (`tests/worked_examples.rs` checks the same sequences).
//!
//! The last section sends a few minutes of bursty traffic to every limiter and draws what each
//! one admitted and rejected, second by second, in an SVG under `target/tour/`.
//!
//! Time never passes by itself here: a [`ManualClock`] moves only when the tour advances it, so
//! the output is the same on every run and on every machine.

mod adaptive_chart;
mod chart;
mod traffic_chart;

use std::collections::VecDeque;
use std::error::Error;
use std::path::PathBuf;
use std::time::Duration;

use tollgate::{
    Chain, Clock, ConcurrencyLimiter, ConcurrencyOptions, FixedWindowLimiter, FixedWindowOptions,
    GcraLimiter, GcraOptions, Instant, LeakyBucketMeter, LeakyBucketOptions, LeakyBucketShaper,
    Lease, Limiter, ManualClock, QueueOrder, Reason, Rejection, Replenishing, SettleError,
    ShaperOptions, SlidingCounterLimiter, SlidingCounterOptions, SlidingLogLimiter,
    SlidingLogOptions, SlidingWindowLimiter, SlidingWindowOptions, Statistics, TokenBucketLimiter,
    TokenBucketOptions,
};

use traffic_chart::Panel;

const SEC: Duration = Duration::from_secs(1);
const MIN: Duration = Duration::from_secs(60);

fn main() -> Result<(), Box<dyn Error>> {
    concurrency_limiter();
    token_bucket();
    sliding_window_announcement();
    sliding_window_design_doc();
    boundary_burst();
    llm_gateway();
    let adaptive = adaptive_concurrency()?;
    let chart = traffic_over_four_minutes()?;
    println!(
        "\nCharts written to {} and {}",
        adaptive.display(),
        chart.display()
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The sections
// ---------------------------------------------------------------------------------------------

/// A concurrency limiter counts permits held at once; a lease gives them back when dropped.
fn concurrency_limiter() {
    heading("1. Concurrency limiter: at most 2 permits held at once");
    let clock = ManualClock::new();
    let limiter = ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(2), &clock).unwrap();
    let say = Narrator::new(&clock);

    let a = say.acquire(&limiter, 1).unwrap();
    let b = say.acquire(&limiter, 1).unwrap();
    assert_eq!(limiter.available_permits(), 0);
    let full = say.acquire(&limiter, 1).unwrap_err();
    // A concurrency limiter cannot know when a lease will end: no RetryAfter.
    assert_eq!(
        (full.reason(), full.retry_after()),
        (Reason::Exhausted, None)
    );
    // A 0-permit request is a probe: granted only if a permit is free, and it takes nothing.
    assert!(say.acquire(&limiter, 0).is_err());
    assert_eq!(say.idle(&limiter), None);

    say.wait(5 * SEC);
    say.drop_lease(&limiter, a);
    assert_eq!(limiter.available_permits(), 1);
    assert!(say.acquire(&limiter, 0).is_ok());
    assert_eq!(limiter.available_permits(), 1);
    let too_big = say.acquire(&limiter, 3).unwrap_err();
    assert_eq!(too_big.reason(), Reason::ExceedsLimit);

    say.wait(5 * SEC);
    say.drop_lease(&limiter, b);
    assert_eq!(limiter.available_permits(), 2);
    say.wait(30 * SEC);
    assert_eq!(say.idle(&limiter), Some(30 * SEC));

    let c = say.acquire(&limiter, 2).unwrap();
    say.close(&limiter);
    let closed = say.acquire(&limiter, 1).unwrap_err();
    assert_eq!(closed.reason(), Reason::Closed);
    say.note("leases granted before close() stay valid and still give their permits back:");
    say.drop_lease(&limiter, c);
    assert_eq!(limiter.available_permits(), 2);
    assert!(say.acquire(&limiter, 0).is_err());

    assert_eq!(
        say.statistics(&limiter),
        Statistics {
            available_permits: 2,
            queued_permits: 0,
            total_successful: 4,
            total_failed: 5,
        }
    );
}

/// The announcement's token bucket: "the bucket can hold 10 tokens and every minute 2 tokens
/// are added".
fn token_bucket() {
    heading("2. Token bucket: 10 tokens, 2 added every minute");
    let clock = ManualClock::new();
    let bucket =
        TokenBucketLimiter::with_clock(TokenBucketOptions::new(10, 2, MIN), &clock).unwrap();
    let say = Narrator::new(&clock);

    assert_eq!(say.available(&bucket), 10);
    assert_eq!(say.requests(&bucket, 1), 1);
    assert_eq!(bucket.available_permits(), 9);
    assert_eq!(say.requests(&bucket, 3), 3);
    assert_eq!(bucket.available_permits(), 6);
    say.wait(MIN);
    assert_eq!(say.available(&bucket), 8);
    assert_eq!(say.requests(&bucket, 8), 8);
    assert_eq!(bucket.available_permits(), 0);

    // "not allowed to access the resource until we gain more tokens, which happens every minute"
    let denied = say.acquire(&bucket, 1).unwrap_err();
    assert_eq!(
        (denied.reason(), denied.retry_after()),
        (Reason::Exhausted, Some(MIN))
    );
    // Three tokens take two refills; more than the bucket holds can never be granted.
    assert_eq!(
        say.acquire(&bucket, 3).unwrap_err().retry_after(),
        Some(2 * MIN)
    );
    assert_eq!(
        say.acquire(&bucket, 11).unwrap_err().reason(),
        Reason::ExceedsLimit
    );

    say.note("five idle minutes fill the bucket again...");
    for expected in [2, 4, 6, 8, 10] {
        say.wait(MIN);
        assert_eq!(say.available(&bucket), expected);
    }
    say.note("...and it won't add any more:");
    say.wait(10 * MIN);
    assert_eq!(say.available(&bucket), 10);
    assert_eq!(say.idle(&bucket), Some(10 * MIN)); // full since 6:00

    assert_eq!(
        say.statistics(&bucket),
        Statistics {
            available_permits: 10,
            queued_permits: 0,
            total_successful: 12,
            total_failed: 3,
        }
    );
}

/// The announcement's sliding window: "3 10 minute segments and a 100 request limit".
fn sliding_window_announcement() {
    heading("3. Sliding window: 100 per 30 minutes, in 3 segments of 10 minutes");
    let clock = ManualClock::new();
    let opts = SlidingWindowOptions::new(100, 30 * MIN, 3);
    let window = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
    let say = Narrator::new(&clock);

    assert_eq!(say.requests(&window, 50), 50);
    assert_eq!(window.available_permits(), 50);
    say.wait(10 * MIN);
    say.note("the window slides past an empty segment: nothing comes back");
    assert_eq!(say.available(&window), 50);
    assert_eq!(say.requests(&window, 20), 20);
    assert_eq!(window.available_permits(), 30);
    say.wait(10 * MIN);
    assert_eq!(say.available(&window), 30);
    // 31 permits need the 50 of 0:00-10:00 to leave the window, at 30:00.
    assert_eq!(
        say.acquire(&window, 31).unwrap_err().retry_after(),
        Some(10 * MIN)
    );

    say.wait(10 * MIN);
    say.note("the segment holding the 50 leaves the window: they come back");
    assert_eq!(say.available(&window), 80);
    assert_eq!(say.idle(&window), None); // the 20 of 10:00-20:00 are still counted
    say.wait(10 * MIN);
    assert_eq!(say.available(&window), 100);
    say.wait(5 * MIN);
    assert_eq!(say.idle(&window), Some(5 * MIN)); // empty since 40:00

    assert_eq!(
        say.statistics(&window),
        Statistics {
            available_permits: 100,
            queued_permits: 0,
            total_successful: 70,
            total_failed: 1,
        }
    );
}

/// The design document's sliding window: counts [3] [4] [3] [1] in a 3 s window of 3 segments.
fn sliding_window_design_doc() {
    heading("4. Sliding window from the design doc: 10 per 3 s, in 3 segments of 1 s");
    println!("       Time:   |1s |2s |3s |4s |");
    println!("       Count:  [3] [4] [3] [1]");
    println!("               | Window 1  |");
    println!("                   | Window 2  |");
    let clock = ManualClock::new();
    let opts = SlidingWindowOptions::new(10, 3 * SEC, 3);
    let window = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
    let say = Narrator::new(&clock);

    assert_eq!(say.requests(&window, 3), 3);
    say.wait(SEC);
    assert_eq!(say.requests(&window, 4), 4);
    say.wait(SEC);
    say.note("Window 1 reaches 10 in the 3rd second: the 11th request is denied");
    assert_eq!(say.requests(&window, 4), 3);
    assert_eq!(window.available_permits(), 0);
    let denied = say.acquire(&window, 1).unwrap_err();
    assert_eq!(denied.retry_after(), Some(SEC)); // the [3] leaves at 0:03

    say.wait(SEC);
    assert_eq!(say.available(&window), 3);
    assert_eq!(say.requests(&window, 1), 1);
    let in_window = 10 - window.available_permits();
    say.note(&format!(
        "Window 2 counts 4 + 3 + 1 = {in_window} and accepts more"
    ));
    assert_eq!(in_window, 8);

    assert_eq!(
        say.statistics(&window),
        Statistics {
            available_permits: 2,
            queued_permits: 0,
            total_successful: 11,
            total_failed: 2,
        }
    );
}

/// The weakness of a fixed window, and what segments buy: a burst on either side of a window
/// boundary.
fn boundary_burst() {
    heading("5. Fixed vs sliding window: 100 per minute, bursts at 0:59 and 1:00");
    let clock = ManualClock::new();
    let fixed = FixedWindowLimiter::with_clock(FixedWindowOptions::new(100, MIN), &clock).unwrap();
    let opts = SlidingWindowOptions::new(100, MIN, 6);
    let sliding = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
    let say = Narrator::new(&clock);
    let (fixed, sliding): (&dyn Limiter, &dyn Limiter) = (&fixed, &sliding);

    println!(
        "  {:>6}  {:<21} {:<36} sliding window (6 segments of 10 s)",
        "time", "requests", "fixed window (resets each minute)"
    );
    clock.advance(59 * SEC);
    let first = [burst(fixed, 100), burst(sliding, 100)];
    say.row("100 × try_acquire(1)", &first);
    assert_eq!(first.map(|b| (b.granted, b.denied)), [(100, 0), (100, 0)]);

    clock.advance(SEC);
    let second = [burst(fixed, 100), burst(sliding, 100)];
    say.row("100 × try_acquire(1)", &second);
    assert_eq!(second.map(|b| (b.granted, b.denied)), [(100, 0), (0, 100)]);
    // The sliding window still counts 0:59 in its 0:50-1:00 segment, which leaves at 1:50.
    assert_eq!(second[1].retry_after, Some(50 * SEC));
    say.note("in two seconds the fixed window let 200 through, the sliding window 100");

    clock.advance(50 * SEC);
    let later = [fixed.available_permits(), sliding.available_permits()];
    println!(
        "  {:>6}  {:<21} {:<36} {}",
        say.now(),
        "available_permits()",
        later[0],
        later[1]
    );
    assert_eq!(later, [0, 100]);

    for (name, limiter) in [("fixed", fixed), ("sliding", sliding)] {
        let s = limiter.statistics();
        println!(
            "  statistics ({name}): {} granted, {} rejected, {} available",
            s.total_successful, s.total_failed, s.available_permits
        );
    }
    assert_eq!(fixed.statistics().total_successful, 200);
    assert_eq!(sliding.statistics().total_successful, 100);
    assert_eq!(sliding.statistics().total_failed, 100);
}

/// Four minutes of bursty traffic against all four limiters at once, drawn as a chart.
fn traffic_over_four_minutes() -> Result<PathBuf, Box<dyn Error>> {
    heading("8. Four minutes of bursty traffic against every limiter (the chart)");
    let clock = ManualClock::new();
    let bucket =
        TokenBucketLimiter::with_clock(TokenBucketOptions::new(20, 1, SEC), &clock).unwrap();
    let fixed = FixedWindowLimiter::with_clock(FixedWindowOptions::new(60, MIN), &clock).unwrap();
    let opts = SlidingWindowOptions::new(60, MIN, 6);
    let sliding = SlidingWindowLimiter::with_clock(opts, &clock).unwrap();
    let concurrency = ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(5), &clock).unwrap();
    let gcra = GcraLimiter::with_clock(GcraOptions::per_minute(60).with_burst(10), &clock).unwrap();
    let meter = LeakyBucketMeter::with_clock(LeakyBucketOptions::new(20, 1, SEC), &clock).unwrap();
    let counter =
        SlidingCounterLimiter::with_clock(SlidingCounterOptions::per_minute(60), &clock).unwrap();
    let log: SlidingLogLimiter<_, 60> =
        SlidingLogLimiter::with_capacity(SlidingLogOptions::per_minute(60), &clock).unwrap();
    let shaper = LeakyBucketShaper::with_clock(
        ShaperOptions::per_second(1).with_queue(10, QueueOrder::OldestFirst),
        &clock,
    )
    .unwrap();
    let contenders = [
        Contender::new("Token bucket: 20 tokens, 1 added every second", &bucket, 20),
        Contender::new("Fixed window: 60 per minute", &fixed, 60),
        Contender::new(
            "Sliding window: 60 per minute in 6 segments of 10 s",
            &sliding,
            60,
        ),
        Contender::new(
            "Concurrency: 5 at once, each request holding 4 s",
            &concurrency,
            5,
        ),
        Contender::new("GCRA: 60 per minute (one per second), burst 10", &gcra, 10),
        Contender::new(
            "Leaky bucket meter: capacity 20, draining 1 per second",
            &meter,
            20,
        ),
        Contender::new(
            "Sliding-window counter: 60 per minute, estimated (one word)",
            &counter,
            60,
        ),
        Contender::new(
            "Sliding-window log: 60 per rolling minute, exact (a ring of 60 entries, 960 bytes)",
            &log,
            60,
        ),
    ];
    println!("  traffic: {TRAFFIC}");
    println!(
        "  every admitted request keeps its lease {HOLD:?} (only the concurrency limiter cares)"
    );

    let mut traffic = simulate(&clock, &contenders);
    let shaped = simulate_shaper(&clock, &shaper);

    println!("  {:<84} {:>8} {:>9}", "limiter", "admitted", "rejected");
    for (c, t) in contenders.iter().zip(&traffic) {
        println!("  {:<84} {:>8} {:>9}", c.name, t.admitted(), t.rejected());
        assert_eq!(t.admitted() + t.rejected(), offered_total());
    }
    println!(
        "  {:<84} {:>8} {:>9}",
        SHAPER,
        shaped.admitted(),
        shaped.rejected()
    );
    assert_eq!(
        shaped.admitted() + shaped.rejected() + shaped.queued_at_end,
        offered_total()
    );
    println!(
        "  (the shaper still has {} queued at the end)",
        shaped.queued_at_end
    );
    // Worked out by hand in the documentation of `offered`.
    let admitted: Vec<u32> = traffic.iter().take(4).map(Traffic::admitted).collect();
    assert_eq!(admitted, [228, 230, 190, 196]);
    check_limits(&traffic);
    check_new_limits(&traffic[4..], &shaped);

    let mut panels: Vec<(&str, u64, &str)> = contenders
        .iter()
        .map(|c| (c.name, c.limit, "available permits"))
        .collect();
    panels.push((SHAPER, 10, "queued requests"));
    traffic.push(shaped);
    draw_chart(&panels, &traffic)
}

const SHAPER: &str =
    "Leaky bucket shaper: one departure per second, a queue of 10 (acquire().await)";

/// The shaper is driven through its queue: every request calls `acquire(1)`; it departs at its
/// slot (the clock is moved to each slot the shaper names through `next_service`), or is
/// rejected at once when 10 are already waiting. The level line is the queue.
fn simulate_shaper(clock: &ManualClock, shaper: &LeakyBucketShaper<&ManualClock>) -> Traffic {
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll, Waker};

    type Waiting<'s> = Pin<Box<tollgate::Acquire<'s, LeakyBucketShaper<&'s ManualClock>>>>;
    let mut t = Traffic::new();
    let mut waiting: Vec<Waiting<'_>> = Vec::new();
    let mut cx = Context::from_waker(Waker::noop());
    // Polls every waiter once, counting the departures and refusals of second `s`.
    let mut poll_all = |waiting: &mut Vec<Waiting<'_>>, t: &mut Traffic, s: usize| {
        waiting.retain_mut(|w| match w.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(_)) => {
                t.admitted[s] += 1;
                false
            }
            Poll::Ready(Err(_)) => {
                t.rejected[s] += 1;
                false
            }
            Poll::Pending => true,
        });
    };
    // Serves every departure slot up to `until` at its own instant.
    let serve_until =
        |until: Instant,
         waiting: &mut Vec<Waiting<'_>>,
         t: &mut Traffic,
         s: usize,
         poll_all: &mut dyn FnMut(&mut Vec<Waiting<'_>>, &mut Traffic, usize)| {
            while let Some(d) = shaper.next_service() {
                let slot = clock.now() + d;
                if slot > until {
                    break;
                }
                clock.set(slot);
                shaper.replenish();
                poll_all(waiting, t, s);
            }
        };
    for s in 0..SECONDS as usize {
        for arrival in arrivals(s as u32) {
            serve_until(arrival, &mut waiting, &mut t, s, &mut poll_all);
            clock.set(arrival);
            waiting.push(Box::pin(shaper.acquire(1)));
            poll_all(&mut waiting, &mut t, s);
        }
        let last_instant = Instant::ZERO + ((s as u32 + 1) * SEC - Duration::from_nanos(1));
        serve_until(last_instant, &mut waiting, &mut t, s, &mut poll_all);
        clock.set(last_instant);
        t.available[s] = shaper.statistics().queued_permits;
    }
    // What is still queued at the end departs after the chart: counted as neither.
    t.queued_at_end = waiting.len() as u32;
    t
}

/// What the limiters of issue 15 promise, checked on the simulated traffic.
fn check_new_limits(traffic: &[Traffic], shaped: &Traffic) {
    let [gcra, meter, counter, log] = traffic else {
        unreachable!("four limiters")
    };
    for from in 0..SECONDS {
        for to in from + 1..=SECONDS {
            // GCRA: its burst of 10 plus one per second; the meter: 20 plus one per second.
            assert!(gcra.admitted_between(from, to) <= 10 + (to - from));
            assert!(meter.admitted_between(from, to) <= 20 + (to - from));
            // The shaper: never more than one departure per second.
            assert!(shaped.admitted_between(from, to) <= to - from);
        }
        // The log: at most 60 in any 60 s, exactly; the counter: below twice that.
        assert!(log.admitted_between(from, from + 60) <= 60, "log, {from} s");
        assert!(
            counter.admitted_between(from, from + 60) < 120,
            "counter, {from} s"
        );
    }
}

/// A concurrency limit that finds the server's capacity: a server that serves its capacity of
/// requests at once in 10 ms and queues the rest (each then takes longer), behind clients that
/// always want four times more. Its capacity is 50 for 30 s, then 25, then 100. Each algorithm
/// of `tollgate::adaptive` moves the limit from what its leases report; the chart shows the
/// limit, the requests in flight and their latency.
fn adaptive_concurrency() -> Result<PathBuf, Box<dyn Error>> {
    use tollgate::adaptive::{
        AdaptiveLease, AdaptiveLimiter, AdaptiveOptions, Aimd, Algorithm, Gradient, Gradient2,
        Vegas,
    };
    heading("7. Adaptive concurrency: a limit that finds the server's capacity");
    const BASE_MS: u64 = 10;
    const WINDOW_MS: u64 = 50;
    let capacity = |ms: u64| match ms / 30_000 {
        0 => 50u64,
        1 => 25,
        _ => 100,
    };
    struct Samples {
        at: Vec<f64>,
        limit: Vec<u32>,
        in_flight: Vec<u32>,
        capacity: Vec<u32>,
        latency_ms: Vec<f64>,
    }
    let algorithms: [(&str, Algorithm, u64); 4] = [
        (
            "AIMD (clients time out at 12 ms)",
            Aimd::new().into(),
            BASE_MS * 6 / 5,
        ),
        ("Vegas", Vegas::new().into(), u64::MAX),
        (
            "Envoy's gradient (10 % buffer)",
            Gradient::new()
                .with_probes(100, 150, 3)
                .with_buffer_permille(100)
                .into(),
            u64::MAX,
        ),
        (
            "Gradient2 (tolerance 1.2)",
            Gradient2::new()
                .with_tolerance_permille(1_200)
                .with_probe_every(100)
                .into(),
            u64::MAX,
        ),
    ];
    let mut runs = Vec::new();
    println!(
        "{:<34} {:>24} {:>24} {:>24}",
        "algorithm", "capacity 50: limit", "capacity 25: limit", "capacity 100: limit"
    );
    for (name, algorithm, timeout_ms) in algorithms {
        let clock = ManualClock::new();
        let opts = AdaptiveOptions::new(10)
            .with_bounds(1, 1_000)
            .with_window(Duration::from_millis(WINDOW_MS), 10)
            .with_algorithm(algorithm);
        let limiter = AdaptiveLimiter::with_clock(opts, &clock).unwrap();
        let mut running: Vec<(u64, u64, AdaptiveLease<'_>)> = Vec::new();
        let mut s = Samples {
            at: vec![],
            limit: vec![],
            in_flight: vec![],
            capacity: vec![],
            latency_ms: vec![],
        };
        let (mut ended, mut ended_ms) = (0u64, 0u64);
        for now in 0..90_000u64 {
            let c = capacity(now);
            running.retain(|(due, took, _)| {
                let done = *due <= now;
                if done {
                    ended += 1;
                    ended_ms += took;
                }
                !done
            });
            for _ in 0..4 * c {
                let Ok(mut lease) = limiter.try_acquire(1) else {
                    break;
                };
                let in_flight = running.len() as u64 + 1;
                assert!(in_flight <= u64::from(limiter.limit()));
                let took = (BASE_MS * in_flight.max(c) / c).min(timeout_ms);
                if took >= timeout_ms {
                    lease.dropped();
                }
                running.push((now + took, took, lease));
            }
            clock.advance(Duration::from_millis(1));
            if now % WINDOW_MS == WINDOW_MS - 1 {
                s.at.push(now as f64 / 1_000.0);
                s.limit.push(limiter.limit());
                s.in_flight.push(running.len() as u32);
                s.capacity.push(c as u32);
                s.latency_ms.push(if ended == 0 {
                    f64::NAN
                } else {
                    ended_ms as f64 / ended as f64
                });
                (ended, ended_ms) = (0, 0);
            }
        }
        // Each phase's median limit over its second half, measurement windows left out.
        let mut cells = Vec::new();
        for (phase, c) in [(0usize, 50u64), (1, 25), (2, 100)] {
            let (from, to) = (phase * 600 + 300, phase * 600 + 600);
            // Measurement windows (Vegas's at a quarter of the limit, the gradient's at 3) left
            // out: a limit a quarter or less of the window before's.
            let mut steady: Vec<u32> = (from..to)
                .filter(|&w| s.limit[w] * 4 > s.limit[w - 1])
                .map(|w| s.limit[w])
                .collect();
            steady.sort_unstable();
            let median = steady[steady.len() / 2];
            assert!(
                u64::from(median) * 10 >= c * 8 && u64::from(median) * 10 <= c * 15,
                "{name}: {median} for {c}"
            );
            cells.push(format!(
                "median {median} ({}..{})",
                steady[0],
                steady[steady.len() - 1]
            ));
        }
        println!(
            "{name:<34} {:>24} {:>24} {:>24}",
            cells[0], cells[1], cells[2]
        );
        runs.push((name, s));
    }
    println!("  (each in its phase's last 15 s; the windows where Vegas or a gradient measures the unloaded latency, at a reduced limit, left out)");
    let latency: Vec<Vec<f64>> = runs
        .iter()
        .map(|(_, s)| {
            s.latency_ms
                .iter()
                .map(|l| if l.is_nan() { 0.0 } else { *l })
                .collect()
        })
        .collect();
    let panels: Vec<adaptive_chart::Run> = runs
        .iter()
        .zip(&latency)
        .map(|((name, s), latency)| adaptive_chart::Run {
            title: name.to_string(),
            at: &s.at,
            limit: &s.limit,
            in_flight: &s.in_flight,
            capacity: &s.capacity,
            latency_ms: latency,
            unloaded_ms: BASE_MS as f64,
        })
        .collect();
    let dir = chart_dir();
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("adaptive.svg");
    adaptive_chart::draw(
        &path,
        "tollgate::adaptive: the limit finds the server's capacity",
        "a server of capacity 50, then 25, then 100 (10 ms each, queueing past it), under four times the load it can take",
        &panels,
    )?;
    Ok(path)
}

/// Writes `target/tour/traffic.svg` and returns its path. `panels`: each limiter's name, the top
/// of its level scale, and what the level is.
fn draw_chart(
    panels: &[(&str, u64, &str)],
    traffic: &[Traffic],
) -> Result<PathBuf, Box<dyn Error>> {
    let panels: Vec<Panel> = panels
        .iter()
        .zip(traffic)
        .map(|(&(name, limit, level_name), t)| Panel {
            title: format!(
                "{}: {} admitted, {} rejected",
                name,
                t.admitted(),
                t.rejected()
            ),
            admitted: &t.admitted,
            rejected: &t.rejected,
            level: &t.available,
            level_max: limit,
            level_name,
        })
        .collect();
    let dir = chart_dir();
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("traffic.svg");
    let title = "tollgate: the same traffic against each limiter, second by second";
    traffic_chart::draw(&path, title, &format!("traffic: {TRAFFIC}"), &panels)?;
    Ok(path)
}

// ---------------------------------------------------------------------------------------------
// The traffic simulation behind the chart
// ---------------------------------------------------------------------------------------------

/// How long every admitted request keeps its lease.
const HOLD: Duration = Duration::from_secs(4);
/// The length of the simulation, in seconds.
const SECONDS: u32 = 240;
/// The arrival pattern of [`offered`], in words.
const TRAFFIC: &str =
    "1 request/s, a surge of 5/s from 0:50 to 1:10, quiet until 2:00, 1/s again, a spike of 30 at 3:00";

/// A limiter in the simulation, with its name and its limit (the top of its chart's axis).
struct Contender<'l> {
    name: &'static str,
    limiter: &'l dyn Limiter,
    limit: u64,
}

impl<'l> Contender<'l> {
    fn new(name: &'static str, limiter: &'l dyn Limiter, limit: u64) -> Self {
        Self {
            name,
            limiter,
            limit,
        }
    }
}

/// Requests arriving during second `s` (spread evenly across it): 299 in all.
///
/// What each limiter admits, worked out by hand (steady, surge, steady, spike, steady):
/// - token bucket, 20 + 1/s: 50; the surge drains the 20 stored, then 1/s: 39; 60; the spike
///   takes the 20 stored again; 59. **228**
/// - fixed window, 60/min: minute 0 offers 100, admits 60; minute 1 offers 50; minute 2 offers
///   60; minute 3 offers 89, admits 60. **230**
/// - sliding window, 60/min: 50; 10 before 1:00 and 10 after (the 0:00-0:10 segment leaves);
///   60; from 3:00 only the 10 per segment that leave the window: 60. **190**
/// - concurrency, 5 held 4 s each: 50; the surge at 1.25/s: 25; 60; 2 of the spike; 59. **196**
fn offered(s: u32) -> u32 {
    match s {
        50..70 => 5,  // a surge across the 1:00 window boundary
        70..120 => 0, // quiet
        180 => 30,    // a spike
        _ => 1,       // steady
    }
}

fn offered_total() -> u32 {
    (0..SECONDS).map(offered).sum()
}

/// What one limiter did with the traffic, second by second.
struct Traffic {
    admitted: Vec<u32>,
    rejected: Vec<u32>,
    /// Permits available at the end of each second.
    available: Vec<u64>,
    /// Requests still waiting when the simulation ends (the shaper's queue).
    queued_at_end: u32,
}

impl Traffic {
    fn new() -> Self {
        let zeros = vec![0; SECONDS as usize];
        Self {
            admitted: zeros.clone(),
            rejected: zeros,
            available: vec![0; SECONDS as usize],
            queued_at_end: 0,
        }
    }

    fn admitted(&self) -> u32 {
        self.admitted.iter().sum()
    }

    fn rejected(&self) -> u32 {
        self.rejected.iter().sum()
    }

    /// Requests admitted from second `from` up to (not including) second `to`.
    fn admitted_between(&self, from: u32, to: u32) -> u32 {
        let to = to.min(SECONDS);
        self.admitted[from as usize..to as usize].iter().sum()
    }
}

/// Sends the same arrivals to every limiter. Admitted leases are held for [`HOLD`]; dropping a
/// rate limiter's lease does nothing, dropping a concurrency lease gives its permit back.
fn simulate(clock: &ManualClock, contenders: &[Contender<'_>]) -> Vec<Traffic> {
    let mut traffic: Vec<Traffic> = contenders.iter().map(|_| Traffic::new()).collect();
    // Leases in the order they end.
    let mut held: VecDeque<(Instant, Lease<'_>)> = VecDeque::new();
    for s in 0..SECONDS as usize {
        for arrival in arrivals(s as u32) {
            clock.set(arrival);
            end_leases(&mut held, arrival);
            for (c, t) in contenders.iter().zip(&mut traffic) {
                match c.limiter.try_acquire(1) {
                    Ok(lease) => {
                        t.admitted[s] += 1;
                        held.push_back((arrival + HOLD, lease));
                    }
                    Err(_) => t.rejected[s] += 1,
                }
            }
        }
        let last_instant = Instant::ZERO + ((s as u32 + 1) * SEC - Duration::from_nanos(1));
        clock.set(last_instant);
        end_leases(&mut held, last_instant);
        for (c, t) in contenders.iter().zip(&mut traffic) {
            t.available[s] = c.limiter.available_permits();
        }
    }
    traffic
}

/// The instants of the requests of second `s`, evenly spaced across it.
fn arrivals(s: u32) -> impl Iterator<Item = Instant> {
    let n = offered(s);
    (0..n).map(move |i| Instant::ZERO + s * SEC + i * SEC / n)
}

/// Drops the leases whose time is up.
fn end_leases(held: &mut VecDeque<(Instant, Lease<'_>)>, now: Instant) {
    while held.front().is_some_and(|(until, _)| *until <= now) {
        held.pop_front();
    }
}

/// What each limiter promises, checked on the simulated traffic.
fn check_limits(traffic: &[Traffic]) {
    let [bucket, fixed, sliding, _, ..] = traffic else {
        unreachable!("the four .NET limiters first")
    };
    // The fixed window: at most 60 in each calendar minute.
    for from in (0..SECONDS).step_by(60) {
        assert!(
            fixed.admitted_between(from, from + 60) <= 60,
            "fixed, {from} s"
        );
    }
    // The sliding window: at most 60 in any 60 s that starts on a segment boundary.
    for from in (0..SECONDS).step_by(10) {
        assert!(
            sliding.admitted_between(from, from + 60) <= 60,
            "sliding, {from} s"
        );
    }
    // The token bucket: at most its 20 tokens plus one per second elapsed, over any span.
    for from in 0..SECONDS {
        for to in from + 1..=SECONDS {
            let limit = 20 + (to - from);
            assert!(
                bucket.admitted_between(from, to) <= limit,
                "bucket, {from}..{to} s"
            );
        }
    }
}

/// `target/tour`, under `CARGO_TARGET_DIR` if set, else the workspace's target directory.
fn chart_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            // This package lives in `examples/tour` of the workspace.
            let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
            manifest
                .ancestors()
                .nth(2)
                .unwrap_or(manifest)
                .join("target")
        });
    target.join("tour")
}

/// Reserve, then settle: a call's cost is known only when its answer comes. An LLM gateway
/// limits requests and tokens per minute; each call reserves an estimate of 1,000 tokens and
/// settles to what it used: a refund when it used less, a debt when it used more, which the
/// next calls wait out (their RetryAfter counts it).
fn llm_gateway() {
    heading("6. An LLM gateway: 500 calls and 100,000 tokens a minute, reserve then settle");
    let clock = ManualClock::new();
    let calls = FixedWindowLimiter::with_clock(FixedWindowOptions::new(500, MIN), &clock).unwrap();
    // 100,000 tokens a minute, refilled 5,000 every 3 seconds.
    let tokens =
        TokenBucketLimiter::with_clock(TokenBucketOptions::new(100_000, 5_000, 3 * SEC), &clock)
            .unwrap();
    let gateway = Chain::new((&calls, &tokens));
    let say = Narrator::new(&clock);
    let line = |action: &str, result: &str| {
        println!(
            "  {:>6}  {action:<30} {result:<43} calls left {}, tokens left {}",
            say.now(),
            calls.available_permits(),
            tokens.available_permits()
        );
    };

    let mut call = gateway.try_acquire_links([1, 1_000]).unwrap();
    line("reserve 1 call, 1,000 tokens", "granted");
    call.settle_links([1, 312]).unwrap();
    line("answer used 312 tokens", "settled: 688 refunded");
    assert_eq!(tokens.available_permits(), 99_688);

    for _ in 0..40 {
        let mut call = gateway.try_acquire_links([1, 1_000]).unwrap();
        call.settle_links([1, 2_400]).unwrap();
    }
    line(
        "40 calls, each using 2,400",
        "settled: 1,400 more taken each",
    );
    assert_eq!(tokens.available_permits(), 3_688);

    let mut call = gateway.try_acquire_links([1, 1_000]).unwrap();
    call.settle_links([1, 4_000]).unwrap();
    line("a call using 4,000", "settled: 312 tokens in debt");
    assert_eq!(tokens.available_permits(), 0);

    // The debt counts: 312 owed + 1,000 reserved = 1,312 missing, the next refill's 5,000.
    let refused = gateway.try_acquire_links([1, 1_000]).unwrap_err();
    line("reserve 1 call, 1,000 tokens", &denial(&refused));
    say.note("the refused reservation still counted one call: the window gives nothing back");
    assert_eq!(
        (refused.reason(), refused.retry_after()),
        (Reason::Exhausted, Some(3 * SEC))
    );

    say.wait(3 * SEC);
    let mut call = gateway.try_acquire_links([1, 1_000]).unwrap();
    line("reserve 1 call, 1,000 tokens", "granted");
    assert_eq!(tokens.available_permits(), 3_688);
    // A debt is bounded (one limit below zero): a settle past it takes nothing.
    assert_eq!(call.settle_links([1, 250_000]), Err(SettleError::DebtLimit));
    line("a call claiming 250,000", "refused: past the debt bound");
    call.settle_links([1, 0]).unwrap();
    line("the call failed: it used none", "settled: 1,000 refunded");
    assert_eq!(tokens.available_permits(), 4_688);
    // 44 reservations counted: the refused one too (a rate limiter's lease gives nothing back
    // when a later link refuses, as in .NET).
    assert_eq!(calls.available_permits(), 500 - 44);
}

// ---------------------------------------------------------------------------------------------
// Printing
// ---------------------------------------------------------------------------------------------

fn heading(title: &str) {
    println!("\n{title}\n{}", "-".repeat(title.len()));
}

/// Prints each step on one line, stamped with the manual clock's time.
struct Narrator<'c> {
    clock: &'c ManualClock,
}

/// The outcome of a burst of single-permit requests.
#[derive(Clone, Copy, Debug)]
struct Burst {
    granted: u32,
    denied: u32,
    /// The RetryAfter of the last rejection, if any.
    retry_after: Option<Duration>,
}

impl<'c> Narrator<'c> {
    fn new(clock: &'c ManualClock) -> Self {
        Self { clock }
    }

    /// The clock as `m:ss` since the limiter was created.
    fn now(&self) -> String {
        let t = Duration::from_nanos(self.clock.now().as_nanos());
        format!("{}:{:02}", t.as_secs() / 60, t.as_secs() % 60)
    }

    fn line(&self, action: &str, result: &str, available: u64) {
        println!(
            "  {:>6}  {action:<21} {result:<46} available {available}",
            self.now()
        );
    }

    fn note(&self, text: &str) {
        println!("  {:>6}  ({text})", self.now());
    }

    /// Moves the clock forward.
    fn wait(&self, d: Duration) {
        self.clock.advance(d);
        println!("  {:>6}  ... {} later", self.now(), human(d));
    }

    /// One request for `permits`.
    fn acquire<'l>(&self, limiter: &'l dyn Limiter, permits: u32) -> Result<Lease<'l>, Rejection> {
        let result = limiter.try_acquire(permits);
        let action = match permits {
            0 => "try_acquire(0) probe".to_string(),
            n => format!("try_acquire({n})"),
        };
        let outcome = match &result {
            Ok(_) => "granted".to_string(),
            Err(rejection) => denial(rejection),
        };
        self.line(&action, &outcome, limiter.available_permits());
        result
    }

    /// `count` requests of one permit each; returns how many were granted.
    fn requests(&self, limiter: &dyn Limiter, count: u32) -> u32 {
        let b = burst(limiter, count);
        let action = match count {
            1 => "try_acquire(1)".to_string(),
            n => format!("{n} × try_acquire(1)"),
        };
        self.line(&action, &b.describe(), limiter.available_permits());
        b.granted
    }

    fn available(&self, limiter: &dyn Limiter) -> u64 {
        let n = limiter.available_permits();
        self.line("available_permits()", "", n);
        n
    }

    fn drop_lease(&self, limiter: &dyn Limiter, lease: Lease<'_>) {
        let action = format!("drop(lease of {})", lease.permits());
        drop(lease);
        self.line(
            &action,
            "its permits come back",
            limiter.available_permits(),
        );
    }

    fn idle(&self, limiter: &dyn Limiter) -> Option<Duration> {
        let idle = limiter.idle_duration();
        let text = match idle {
            Some(d) => format!("idle for {}", human(d)),
            None => "in use (not idle)".to_string(),
        };
        self.line("idle_duration()", &text, limiter.available_permits());
        idle
    }

    fn close(&self, limiter: &dyn Limiter) {
        limiter.close();
        self.line(
            "close()",
            "closed: every later request is denied",
            limiter.available_permits(),
        );
    }

    fn statistics(&self, limiter: &dyn Limiter) -> Statistics {
        let s = limiter.statistics();
        println!(
            "  statistics: {} granted, {} rejected, {} available, {} queued",
            s.total_successful, s.total_failed, s.available_permits, s.queued_permits
        );
        s
    }

    /// One line of the boundary-burst table.
    fn row(&self, action: &str, bursts: &[Burst; 2]) {
        println!(
            "  {:>6}  {action:<21} {:<36} {}",
            self.now(),
            bursts[0].describe(),
            bursts[1].describe()
        );
    }
}

/// Sends `count` single-permit requests at the current instant, printing nothing.
fn burst(limiter: &dyn Limiter, count: u32) -> Burst {
    let mut b = Burst {
        granted: 0,
        denied: 0,
        retry_after: None,
    };
    for _ in 0..count {
        match limiter.try_acquire(1) {
            Ok(_) => b.granted += 1,
            Err(r) => {
                b.denied += 1;
                b.retry_after = r.retry_after();
            }
        }
    }
    b
}

impl Burst {
    fn describe(&self) -> String {
        match (self.denied, self.retry_after) {
            (0, _) => format!("{} granted", self.granted),
            (d, Some(r)) => format!(
                "{} granted, {d} denied, retry after {}",
                self.granted,
                human(r)
            ),
            (d, None) => format!("{} granted, {d} denied", self.granted),
        }
    }
}

fn denial(r: &Rejection) -> String {
    match r.retry_after() {
        Some(d) => format!("denied: {}, retry after {}", r.reason().phrase(), human(d)),
        None => format!("denied: {}", r.reason().phrase()),
    }
}

/// `90s` as "1m30s", `600s` as "10m"; anything finer than a second as Debug.
fn human(d: Duration) -> String {
    if d.subsec_nanos() != 0 {
        return format!("{d:?}");
    }
    match (d.as_secs() / 60, d.as_secs() % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s:02}s"),
    }
}
