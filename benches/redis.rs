//! Decisions per second and latency of the Redis limiter on loopback, against a plain
//! `INCR` + `EXPIRE` pipeline (the least a shared counter costs: one round trip, no script) in the
//! same run.
//!
//! ```text
//! bash .ci/redis.sh cargo bench --features redis --bench redis
//! ```
//!
//! One multiplexed connection (a `ConnectionManager`) per run, shared by `C` tasks on a
//! two-worker tokio runtime; each variant runs for `SECS` seconds at concurrency 1 (latency of a
//! lone caller) and 32 (throughput of a pipelined connection), the variants interleaved over
//! two rounds so that a noisy neighbour hurts all of them alike (decisions/s: the mean of the
//! rounds; p50/p99: the worse round). Keys: 1,000 partitions in
//! turn; limits high enough that nearly every decision is a grant (the path that writes).
//! Wall-clock figures on a shared machine are noisy: read the ratios to the floor, within a run.

use std::time::{Duration, Instant};

use ::redis::aio::ConnectionManager;
use tollgate::redis::{Algorithm, FailurePolicy, RedisLimiter};
use tollgate::{FixedWindowOptions, GcraOptions, SlidingWindowOptions, TokenBucketOptions};

const SECS: f64 = 1.0;
const KEYS: usize = 1_000;

#[derive(Clone)]
enum Variant {
    Floor(ConnectionManager),
    Limiter(RedisLimiter),
}

impl Variant {
    async fn once(&self, i: usize) {
        match self {
            Variant::Floor(conn) => {
                let mut conn = conn.clone();
                let key = format!("bench:floor:{{{}}}", i % KEYS);
                let (_n,): (u64,) = ::redis::pipe()
                    .cmd("INCR")
                    .arg(&key)
                    .cmd("EXPIRE")
                    .arg(&key)
                    .arg(60)
                    .ignore()
                    .query_async(&mut conn)
                    .await
                    .expect("INCR + EXPIRE");
            }
            Variant::Limiter(l) => {
                let d = l.decide(&(i % KEYS).to_string(), 1).await;
                assert_eq!(d.decided_by, tollgate::redis::DecidedBy::Redis, "{d:?}");
            }
        }
    }
}

struct Run {
    decisions: u64,
    per_sec: f64,
    p50: Duration,
    p99: Duration,
}

async fn measure(v: &Variant, concurrency: usize) -> Run {
    let deadline = Instant::now() + Duration::from_secs_f64(SECS);
    let start = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..concurrency {
        let v = v.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut i = t * 7919;
            while Instant::now() < deadline {
                let s = Instant::now();
                v.once(i).await;
                lat.push(s.elapsed());
                i += 1;
            }
            lat
        }));
    }
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    let elapsed = start.elapsed().as_secs_f64();
    lat.sort_unstable();
    let q = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    Run {
        decisions: lat.len() as u64,
        per_sec: lat.len() as f64 / elapsed,
        p50: q(0.50),
        p99: q(0.99),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` would pass nothing useful either.
    let Ok(url) = std::env::var("TOLLGATE_REDIS_URL") else {
        eprintln!("TOLLGATE_REDIS_URL is not set: run `bash .ci/redis.sh cargo bench --features redis --bench redis`");
        std::process::exit(2);
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let conn = ::redis::Client::open(url.as_str())
            .unwrap()
            .get_connection_manager()
            .await
            .unwrap();
        let pid = std::process::id();
        let big = 1_000_000_000;
        let minute = Duration::from_secs(60);
        let make = |name: &str, a: Algorithm| {
            RedisLimiter::builder(
                conn.clone(),
                format!("bench:{pid}:{name}"),
                a,
                FailurePolicy::FailClosed,
            )
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap()
        };
        let variants: Vec<(&str, Variant)> = vec![
            ("INCR+EXPIRE pipeline (floor)", Variant::Floor(conn.clone())),
            (
                "fixed window",
                Variant::Limiter(make(
                    "fw",
                    Algorithm::FixedWindow(FixedWindowOptions::new(big, minute)),
                )),
            ),
            (
                "token bucket",
                Variant::Limiter(make(
                    "tb",
                    Algorithm::TokenBucket(TokenBucketOptions::new(big, big, minute)),
                )),
            ),
            (
                "sliding window (6 segments)",
                Variant::Limiter(make(
                    "sw",
                    Algorithm::SlidingWindow(SlidingWindowOptions::new(big, minute, 6)),
                )),
            ),
            (
                "GCRA",
                Variant::Limiter(make(
                    "gcra",
                    Algorithm::Gcra(
                        GcraOptions::with_period(Duration::from_micros(1)).with_burst(big),
                    ),
                )),
            ),
        ];
        for concurrency in [1usize, 32] {
            let mut sums = vec![(0u64, 0f64, Vec::new(), Vec::new()); variants.len()];
            for _round in 0..2 {
                for (i, (_, v)) in variants.iter().enumerate() {
                    let r = measure(v, concurrency).await;
                    sums[i].0 += r.decisions;
                    sums[i].1 += r.per_sec / 2.0;
                    sums[i].2.push(r.p50);
                    sums[i].3.push(r.p99);
                }
            }
            println!(
                "\nconcurrency {concurrency} (one multiplexed connection, 2 rounds of {SECS} s)"
            );
            println!(
                "{:<30} {:>12} {:>9} {:>10} {:>10}",
                "variant", "decisions/s", "vs floor", "p50 µs", "p99 µs"
            );
            let floor = sums[0].1;
            for (i, (name, _)) in variants.iter().enumerate() {
                let (_, per_sec, p50, p99) = &sums[i];
                let worst = |v: &Vec<Duration>| v.iter().map(|d| d.as_micros()).max().unwrap();
                println!(
                    "{:<30} {:>12.0} {:>8.2}x {:>10} {:>10}",
                    name,
                    per_sec,
                    per_sec / floor,
                    worst(p50),
                    worst(p99)
                );
            }
        }
    });
}
