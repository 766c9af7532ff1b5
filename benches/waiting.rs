//! Waiting throughput (issue 4): `acquire().await` + release on the concurrency limiter against
//! `tokio::sync::Semaphore::acquire().await` + drop, with tasks on a 2-worker tokio runtime.
//!
//! - `uncontended`: 2 tasks, 2 permits — every acquisition takes the fast path.
//! - `queued`: 4 tasks, 1 permit — most acquisitions wait in the queue and are handed the permit
//!   by a release: the slow path (lock, enqueue, hand-off, wake).
//! - `queued_16x4`: 16 tasks, 4 permits — a deeper queue with several permits in flight.
//!
//! Run: `cargo bench --bench waiting`. Compare ratios within one run, not absolute times.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use tokio::runtime::Runtime;
use tokio::sync::Semaphore;
use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, QueueOrder, StdClock};

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap()
}

/// Runs `tasks` tasks doing `iters / tasks` acquire+release rounds each; total wall time.
fn run<F, Fut>(rt: &Runtime, tasks: u64, iters: u64, round: F) -> Duration
where
    F: Fn() -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let per_task = (iters / tasks).max(1);
    rt.block_on(async move {
        let start = Instant::now();
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let round = round.clone();
                tokio::spawn(async move {
                    for _ in 0..per_task {
                        round().await;
                    }
                })
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
        start.elapsed()
    })
}

fn tollgate_limiter(permits: u32) -> Arc<ConcurrencyLimiter<StdClock>> {
    let opts = ConcurrencyOptions::new(permits).with_queue(1024, QueueOrder::OldestFirst);
    Arc::new(ConcurrencyLimiter::new(opts).unwrap())
}

fn waiting(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("acquire_await_release");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for (name, permits, tasks) in [
        ("uncontended", 2u32, 2u64),
        ("queued", 1, 4),
        ("queued_16x4", 4, 16),
    ] {
        g.bench_function(BenchmarkId::new("tollgate", name), |b| {
            let l = tollgate_limiter(permits);
            b.iter_custom(|iters| {
                let l = l.clone();
                run(&rt, tasks, iters, move || {
                    let l = l.clone();
                    async move {
                        let lease = l.acquire(1).await.unwrap();
                        tokio::task::yield_now().await;
                        drop(lease);
                    }
                })
            })
        });
        g.bench_function(BenchmarkId::new("tokio_semaphore", name), |b| {
            let s = Arc::new(Semaphore::new(permits as usize));
            b.iter_custom(|iters| {
                let s = s.clone();
                run(&rt, tasks, iters, move || {
                    let s = s.clone();
                    async move {
                        let permit = s.acquire().await.unwrap();
                        tokio::task::yield_now().await;
                        drop(permit);
                    }
                })
            })
        });
    }
    g.finish();
}

criterion_group!(benches, waiting);
criterion_main!(benches);
