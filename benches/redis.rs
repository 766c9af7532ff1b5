//! Decisions per second, latency and Redis CPU of the Redis limiter on loopback, against two
//! references in the same run: a plain `INCR` + `EXPIRE` pipeline (the floor: the least a shared
//! counter costs, one round trip, no script) and a hand-written fixed-window Lua script (`INCR`,
//! then `PEXPIRE` if the count is 1: what a typical service writes by hand).
//!
//! ```text
//! bash .ci/redis.sh cargo bench --features redis --bench redis
//! ```
//!
//! One multiplexed connection (a `ConnectionManager`) per run, shared by `C` tasks on a
//! two-worker tokio runtime; each variant runs for `SECS` seconds at concurrency 1 (latency of a
//! lone caller) and 32 (throughput of a pipelined connection), each algorithm with the
//! builder's **defaults** (what a user gets: batching on, `BATCH_SIZE` with the default flush
//! delay, so concurrent decisions share a script run; the token bucket's one-number state) and
//! **per call** (`batch_size(1)`, the opt-out and the default before issue 37: a script run per
//! decision), the variants interleaved over two rounds so that a noisy neighbour hurts all of
//! them alike (decisions/s: the mean of the rounds; p50/p99: the worse round). `CPU x Lua`,
//! `p50 x` and `p99 x` are the variant's Redis µs per decision, p50 and p99 over the
//! hand-written script's in the same run and concurrency. Keys: 1,000 partitions in turn;
//! limits high enough that nearly every decision is a grant (the path that writes).
//!
//! Five rows acquire 2 permits and settle the lease to 1 or 3 in turn (issue 38,
//! `RedisLimiter::settle`), per call: an operation is two script runs, and its Redis µs less
//! the same algorithm's per-call row is the settle's.
//!
//! The last two rows decide one hot key: with the defaults, and from leases of `LEASE` permits
//! (`RedisLimiterBuilder::lease`), where one round trip in `LEASE` decisions goes to Redis.
//!
//! **Redis CPU per decision** is the steadiest figure on a shared machine: `CONFIG RESETSTAT`
//! before each variant, then `INFO commandstats` after it; the `usec` of the commands that run
//! scripts (`evalsha`, `eval`, `fcall`; for the floor, `incr` + `expire`) divided by the
//! decisions made. `dec/run` is the decisions per script run (the batch size reached; `-` for
//! the references, which do not batch). Wall-clock figures are noisy: read the ratios, within
//! a run.
//!
//! Environment, to run a part (the two references always run):
//! - `TOLLGATE_BENCH_ONLY`: `|`-separated substrings of the variants to run (e.g.
//!   `fixed window, defaults|GCRA` or `defaults`);
//! - `TOLLGATE_BENCH_CONCURRENCY`: comma-separated caller counts (default `1,32`);
//! - `TOLLGATE_BENCH_DELAY_US`: the limiters' `batch_delay` in µs (default `BATCH_DELAY`, the
//!   builder's default);
//! - `TOLLGATE_BENCH_ROUNDS`: rounds (default 2).

use std::time::{Duration, Instant};

use ::redis::aio::ConnectionManager;
use ::redis::Script;
use tollgate::redis::{Algorithm, DecidedBy, FailurePolicy, RedisLimiter, BATCH_DELAY};
use tollgate::{
    FixedWindowOptions, GcraOptions, LeakyBucketOptions, SlidingCounterOptions,
    SlidingWindowOptions, TokenBucketOptions,
};

const SECS: f64 = 1.0;
const KEYS: usize = 1_000;

/// `name`'s value parsed, or `default`.
fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
/// Permits per lease in the leased variant.
const LEASE: u32 = 1_000;

/// The hand-written fixed window most services start from.
const HAND_LUA: &str = r#"
local c = redis.call('INCR', KEYS[1])
if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return c
"#;

#[derive(Clone)]
enum Variant {
    Floor(ConnectionManager),
    Lua(ConnectionManager, std::sync::Arc<Script>),
    Limiter(RedisLimiter),
    /// One key for every decision.
    Hot(RedisLimiter),
    /// A lease of 2 settled to 1 or 3 in turn (issue 38): two script runs per operation, the
    /// decision's and the settle's.
    Settle(RedisLimiter),
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
            Variant::Lua(conn, script) => {
                let mut conn = conn.clone();
                let key = format!("bench:lua:{{{}}}", i % KEYS);
                let _n: u64 = script
                    .key(key)
                    .arg(60_000)
                    .invoke_async(&mut conn)
                    .await
                    .expect("hand-written Lua");
            }
            Variant::Limiter(l) => {
                let d = l.decide(&(i % KEYS).to_string(), 1).await;
                assert_eq!(d.decided_by, DecidedBy::Redis, "{d:?}");
            }
            Variant::Hot(l) => {
                let d = l.decide("hot", 1).await;
                assert!(d.allowed(), "{d:?}");
            }
            Variant::Settle(l) => {
                let key = (i % KEYS).to_string();
                let mut lease = l.acquire(&key, 2).await.expect("granted");
                let actual = if i % 2 == 0 { 1 } else { 3 };
                l.settle(&key, &mut lease, actual).await.expect("settled");
            }
        }
    }
}

impl Variant {
    /// Script runs (round trips) so far; a decision per run for the references.
    fn runs(&self) -> u64 {
        match self {
            Variant::Limiter(l) | Variant::Hot(l) | Variant::Settle(l) => {
                l.redis_statistics().script_runs
            }
            _ => 0,
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

/// The µs Redis spent in the commands that decide, since the last `CONFIG RESETSTAT`: the
/// script-running commands if any ran (their time includes the commands they call), else every
/// command but `INFO` and `CONFIG` (the floor's `INCR` + `EXPIRE`).
async fn decide_usec(conn: &mut ConnectionManager) -> u64 {
    let info: String = ::redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    let (mut scripts, mut others) = (0u64, 0u64);
    for line in info.lines() {
        let Some((name, stats)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let usec = stats
            .split(',')
            .find_map(|f| f.strip_prefix("usec="))
            .and_then(|u| u.parse::<u64>().ok())
            .unwrap_or(0);
        match name {
            "evalsha" | "eval" | "evalsha_ro" | "eval_ro" | "fcall" | "fcall_ro" => scripts += usec,
            "info" | "config" => {}
            _ => others += usec,
        }
    }
    if scripts > 0 {
        scripts
    } else {
        others
    }
}

async fn reset_stats(conn: &mut ConnectionManager) {
    let () = ::redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(conn)
        .await
        .unwrap();
}

#[derive(Default, Clone)]
struct Sum {
    decisions: u64,
    per_sec: f64,
    usec: u64,
    runs: u64,
    p50: Vec<Duration>,
    p99: Vec<Duration>,
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
        let client = ::redis::Client::open(url.as_str()).unwrap();
        let conn = client.get_connection_manager().await.unwrap();
        let mut admin = client.get_connection_manager().await.unwrap();
        let pid = std::process::id();
        let rounds: usize = env_or("TOLLGATE_BENCH_ROUNDS", 2);
        let delay = Duration::from_micros(env_or(
            "TOLLGATE_BENCH_DELAY_US",
            BATCH_DELAY.as_micros() as u64,
        ));
        let only: Vec<String> = std::env::var("TOLLGATE_BENCH_ONLY")
            .map(|v| v.split('|').map(str::to_owned).collect())
            .unwrap_or_default();
        let concurrencies: Vec<usize> = std::env::var("TOLLGATE_BENCH_CONCURRENCY")
            .map(|v| v.split(',').filter_map(|c| c.trim().parse().ok()).collect())
            .unwrap_or_else(|_| vec![1, 32]);
        let big = 1_000_000_000;
        let minute = Duration::from_secs(60);
        // `None`: the builder's defaults (batching on, `BATCH_SIZE`, `BATCH_DELAY` unless
        // `TOLLGATE_BENCH_DELAY_US` says otherwise); `Some(1)`: the opt-out, a run per call.
        let make = |name: &str, a: Algorithm, batch: Option<usize>| {
            let b = RedisLimiter::builder(
                conn.clone(),
                format!("bench:{pid}:{name}:{batch:?}"),
                a,
                FailurePolicy::FailClosed,
            )
            .timeout(Duration::from_secs(5));
            let b = match batch {
                Some(n) => b.batch_size(n),
                None => b,
            };
            let b = if delay == BATCH_DELAY {
                b
            } else {
                b.batch_delay(delay)
            };
            b.build().unwrap()
        };
        let algorithms: Vec<(&str, &str, Algorithm)> = vec![
            (
                "fixed window",
                "fw",
                Algorithm::FixedWindow(FixedWindowOptions::new(big, minute)),
            ),
            (
                // 100M a minute (1.7M a second): within the one-number bound.
                "token bucket",
                "tb",
                Algorithm::TokenBucket(TokenBucketOptions::new(big, 100_000_000, minute)),
            ),
            (
                "sliding window (6 segments)",
                "sw",
                Algorithm::SlidingWindow(SlidingWindowOptions::new(big, minute, 6)),
            ),
            (
                "GCRA",
                "gcra",
                Algorithm::Gcra(GcraOptions::with_period(Duration::from_micros(1)).with_burst(big)),
            ),
            (
                "leaky meter",
                "lm",
                Algorithm::LeakyMeter(LeakyBucketOptions::new(big, 1, Duration::from_micros(1))),
            ),
            (
                // limit × window (µs) at most 2^52.
                "sliding counter",
                "sc",
                Algorithm::SlidingCounter(SlidingCounterOptions::new(50_000_000, minute)),
            ),
        ];
        let mut variants: Vec<(String, Variant)> = vec![
            ("INCR+EXPIRE pipeline (floor)".into(), Variant::Floor(conn.clone())),
            (
                "hand-written fixed-window Lua".into(),
                Variant::Lua(conn.clone(), std::sync::Arc::new(Script::new(HAND_LUA))),
            ),
        ];
        for (name, tag, a) in &algorithms {
            variants.push((format!("{name}, defaults"), Variant::Limiter(make(tag, *a, None))));
            variants.push((
                format!("{name}, per call (batch_size(1))"),
                Variant::Limiter(make(tag, *a, Some(1))),
            ));
        }
        // A bucket past the one-number bound (1e9 a minute, 16.7M a second): two numbers.
        variants.push((
            "token bucket, two numbers (16.7M/s), defaults".into(),
            Variant::Limiter(make(
                "tb2",
                Algorithm::TokenBucket(TokenBucketOptions::new(big, big, minute)),
                None,
            )),
        ));
        // Issue 38: an acquisition and its settle, a run each (per call): the settle's Redis
        // CPU is this row's less the same algorithm's per-call row.
        for (name, tag) in [
            ("fixed window", "fw"),
            ("GCRA", "gcra"),
            ("token bucket", "tb"),
            ("sliding window (6 segments)", "sw"),
            ("sliding counter", "sc"),
        ] {
            let a = algorithms.iter().find(|x| x.1 == tag).unwrap().2;
            variants.push((
                format!("{name}, acquire + settle (per call)"),
                Variant::Settle(make(&format!("{tag}-settle"), a, Some(1))),
            ));
        }
        let fw = Algorithm::FixedWindow(FixedWindowOptions::new(big, minute));
        variants.push((
            "fixed window, hot key, defaults".into(),
            Variant::Hot(make("hot", fw, None)),
        ));
        let leased = RedisLimiter::builder(
            conn.clone(),
            format!("bench:{pid}:hot-lease"),
            fw,
            FailurePolicy::FailClosed,
        )
        .timeout(Duration::from_secs(5))
        .lease(LEASE)
        .build()
        .unwrap();
        variants.push((
            format!("fixed window, hot key, leased ({LEASE})"),
            Variant::Hot(leased),
        ));
        let mut i = 0;
        variants.retain(|(name, _)| {
            i += 1;
            i <= 2 || only.is_empty() || only.iter().any(|o| name.contains(o.as_str()))
        });
        for concurrency in concurrencies {
            let mut sums = vec![Sum::default(); variants.len()];
            for _round in 0..rounds {
                for (i, (_, v)) in variants.iter().enumerate() {
                    reset_stats(&mut admin).await;
                    let before = v.runs();
                    let r = measure(v, concurrency).await;
                    let s = &mut sums[i];
                    s.runs += v.runs() - before;
                    s.usec += decide_usec(&mut admin).await;
                    s.decisions += r.decisions;
                    s.per_sec += r.per_sec / rounds as f64;
                    s.p50.push(r.p50);
                    s.p99.push(r.p99);
                }
            }
            println!(
                "\nconcurrency {concurrency} (one multiplexed connection, {rounds} rounds of {SECS} s, batch delay {delay:?})"
            );
            println!(
                "{:<52} {:>12} {:>9} {:>9} {:>13} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8}",
                "variant",
                "decisions/s",
                "vs floor",
                "vs Lua",
                "Redis µs/dec",
                "CPU x Lua",
                "p50 µs",
                "p50 x",
                "p99 µs",
                "p99 x",
                "dec/run"
            );
            let (floor, lua) = (sums[0].per_sec, sums[1].per_sec);
            let worst = |v: &Vec<Duration>| v.iter().map(|d| d.as_micros()).max().unwrap();
            let cpu = |s: &Sum| s.usec as f64 / s.decisions.max(1) as f64;
            let (lua_cpu, lua_p50, lua_p99) = (
                cpu(&sums[1]),
                worst(&sums[1].p50).max(1) as f64,
                worst(&sums[1].p99).max(1) as f64,
            );
            for (i, (name, _)) in variants.iter().enumerate() {
                let s = &sums[i];
                println!(
                    "{:<52} {:>12.0} {:>8.2}x {:>8.2}x {:>13.2} {:>8.2}x {:>8} {:>7.2}x {:>8} {:>7.2}x {:>8}",
                    name,
                    s.per_sec,
                    s.per_sec / floor,
                    s.per_sec / lua,
                    cpu(s),
                    cpu(s) / lua_cpu,
                    worst(&s.p50),
                    worst(&s.p50) as f64 / lua_p50,
                    worst(&s.p99),
                    worst(&s.p99) as f64 / lua_p99,
                    if s.runs == 0 {
                        "-".to_string()
                    } else {
                        format!("{:.1}", s.decisions as f64 / s.runs as f64)
                    }
                );
            }
        }
    });
}
