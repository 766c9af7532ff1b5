//! Rate-limited I/O throughput (issue 38, part 3): 64 MiB copied from memory to
//! `tokio::io::sink()` through a `ThrottledReader` on a token bucket whose rate never binds
//! (1 GiB at once, refilled every millisecond), against the same copy unthrottled, in the same
//! run. What is measured is the adapter's cost per chunk (an acquisition on the limiter's
//! fast path, the lease made owned, the settle) beside the copy itself.
//!
//! - `copy_8k`: `tokio::io::copy` (its 8 KiB buffer: 8192 chunks);
//! - `copy_64k`: a loop of reads into a 64 KiB buffer (1024 chunks).
//!
//! Each is timed plain, `throttled` (the token bucket on `StdClock`: a `clock_gettime` per
//! chunk) and `throttled_coarse` (on `CoarseClock`: the adapter's own cost with a clock read
//! of one load). After criterion's groups, `ratio` times plain and each throttled copy
//! alternately (21 rounds) and prints the median of throttled over plain for each buffer
//! size: the figure to compare with the goal of 1.05.
//!
//! Run: `cargo bench --bench io_throughput --features tokio-io`. Compare ratios within one run.
//!
//! Instruction counts without a runner: `IO_LOOP=<way>:<buffer>:<copies>` (`way`: `plain`,
//! `forwarded`, `std`, `coarse` or `reserved`; `buffer`: `8k` or `64k`) makes that many copies and exits, so that
//! `valgrind --tool=callgrind` at two copy counts gives the instructions per copy as the
//! difference (divide by the chunks, 8192 or 1024, for the cost per chunk):
//!
//! ```text
//! cargo bench --bench io_throughput --features tokio-io --no-run
//! IO_LOOP=std:8k:2 valgrind --tool=callgrind target/release/deps/io_throughput-*
//! ```

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, Throughput};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::runtime::Runtime;
use tollgate::io::ThrottledReader;
use tollgate::{CoarseClock, StdClock, TokenBucketLimiter, TokenBucketOptions};

const SIZE: usize = 64 << 20;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

/// A token bucket that never binds at these speeds: 1 GiB at once, 1 GiB more every ms.
fn roomy() -> TokenBucketOptions {
    TokenBucketOptions::new(1 << 30, 1 << 30, Duration::from_millis(1))
}

/// What is timed: the copy alone, or through the adapter on one of two clocks.
#[derive(Clone, Copy)]
enum Way {
    Plain,
    Std,
    Coarse,
    /// On `CoarseClock`, under a 64 KiB reservation (one limiter call per 64 KiB).
    Reserved,
    /// Through a wrapper that only forwards each read: the floor of any adapter.
    Forwarded,
}

/// A reader that forwards each read to the one inside: what any adapter costs before it
/// charges anything (the copy loop no longer sees the slice reader's code inline).
struct Forward<R>(R);

impl<R: AsyncRead + Unpin> AsyncRead for Forward<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

async fn copy_8k<R: AsyncRead + Unpin>(mut r: R) -> u64 {
    tokio::io::copy(&mut r, &mut tokio::io::sink())
        .await
        .unwrap()
}

async fn copy_64k<R: AsyncRead + Unpin>(mut r: R) -> u64 {
    let mut buf = vec![0u8; 64 << 10];
    let mut total = 0u64;
    loop {
        let n = r.read(&mut buf).await.unwrap();
        if n == 0 {
            return total;
        }
        black_box(&buf[..n]);
        total += n as u64;
    }
}

/// `data` read through `limiter` under a 64 KiB reservation.
fn reserved<L: tollgate::io::Chargeable>(
    data: &[u8],
    limiter: Arc<L>,
) -> ThrottledReader<&[u8], L> {
    ThrottledReader::with_max_chunk(data, limiter, 1 << 30).with_reservation(64 << 10)
}

/// One copy of `data`, the `way` given, with the given loop; its wall time.
fn once(rt: &Runtime, data: &[u8], way: Way, big: bool) -> Duration {
    let std = Arc::new(TokenBucketLimiter::<StdClock>::new(roomy()).unwrap());
    let coarse = CoarseClock::new().unwrap();
    let coarse = Arc::new(TokenBucketLimiter::with_clock(roomy(), coarse).unwrap());
    let start = Instant::now();
    let copied = rt.block_on(async {
        match (way, big) {
            (Way::Plain, false) => copy_8k(data).await,
            (Way::Plain, true) => copy_64k(data).await,
            (Way::Std, false) => copy_8k(ThrottledReader::new(data, std)).await,
            (Way::Std, true) => copy_64k(ThrottledReader::new(data, std)).await,
            (Way::Coarse, false) => copy_8k(ThrottledReader::new(data, coarse)).await,
            (Way::Coarse, true) => copy_64k(ThrottledReader::new(data, coarse)).await,
            (Way::Forwarded, false) => copy_8k(Forward(data)).await,
            (Way::Forwarded, true) => copy_64k(Forward(data)).await,
            (Way::Reserved, false) => copy_8k(reserved(data, coarse)).await,
            (Way::Reserved, true) => copy_64k(reserved(data, coarse)).await,
        }
    });
    assert_eq!(copied, SIZE as u64);
    start.elapsed()
}

fn groups(c: &mut Criterion) {
    let rt = runtime();
    let data = vec![0x5au8; SIZE];
    for (name, big) in [("copy_8k", false), ("copy_64k", true)] {
        let mut g = c.benchmark_group(name);
        g.throughput(Throughput::Bytes(SIZE as u64));
        for (id, way) in [
            ("plain", Way::Plain),
            ("forwarded", Way::Forwarded),
            ("throttled", Way::Std),
            ("throttled_coarse", Way::Coarse),
            ("throttled_reserved", Way::Reserved),
        ] {
            g.bench_function(id, |b| {
                b.iter_custom(|n| (0..n).map(|_| once(&rt, &data, way, big)).sum())
            });
        }
        g.finish();
    }
}

/// The median ratio throttled / plain, the two timed alternately so that a noisy neighbour
/// weighs on both.
fn ratio() {
    let rt = runtime();
    let data = vec![0x5au8; SIZE];
    for (name, big) in [("copy_8k", false), ("copy_64k", true)] {
        let (mut on_std, mut on_coarse, mut reserved) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..21 {
            let plain = once(&rt, &data, Way::Plain, big).as_secs_f64();
            on_std.push(once(&rt, &data, Way::Std, big).as_secs_f64() / plain);
            on_coarse.push(once(&rt, &data, Way::Coarse, big).as_secs_f64() / plain);
            reserved.push(once(&rt, &data, Way::Reserved, big).as_secs_f64() / plain);
        }
        for (clock, ratios) in [
            ("StdClock", &mut on_std),
            ("CoarseClock", &mut on_coarse),
            ("CoarseClock, 64 KiB reservation", &mut reserved),
        ] {
            ratios.sort_by(f64::total_cmp);
            println!(
                "io_throughput {name} on {clock}: throttled / plain, median of 21 alternating \
                 rounds: {:.3} (min {:.3}, max {:.3})",
                ratios[10], ratios[0], ratios[20]
            );
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20);
    targets = groups
}

/// `IO_LOOP=<way>:<buffer>:<copies>`: that many copies, nothing else (see the module docs).
fn io_loop(spec: &str) {
    let mut parts = spec.split(':');
    let way = match parts.next() {
        Some("plain") => Way::Plain,
        Some("std") => Way::Std,
        Some("coarse") => Way::Coarse,
        Some("reserved") => Way::Reserved,
        Some("forwarded") => Way::Forwarded,
        other => panic!("IO_LOOP: unknown way {other:?}"),
    };
    let big = parts.next() == Some("64k");
    let copies: u32 = parts.next().and_then(|n| n.parse().ok()).unwrap_or(1);
    let (rt, data) = (runtime(), vec![0x5au8; SIZE]);
    for _ in 0..copies {
        once(&rt, &data, way, big);
    }
}

fn main() {
    if let Ok(spec) = std::env::var("IO_LOOP") {
        return io_loop(&spec);
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
    ratio();
}
