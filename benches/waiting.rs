//! Waiting throughput (issue 4): `acquire().await` + release on the concurrency limiter against
//! `tokio::sync::Semaphore::acquire().await` + drop, with tasks on a 2-worker tokio runtime.
//!
//! - `uncontended`: 2 tasks, 2 permits — every acquisition takes the fast path.
//! - `queued`: 4 tasks, 1 permit — most acquisitions wait in the queue and are handed the permit
//!   by a release: the slow path (lock, enqueue, hand-off, wake).
//! - `queued_16x4`: 16 tasks, 4 permits — a deeper queue with several permits in flight.
//!
//! Run: `cargo bench --bench waiting`. Compare ratios within one run, not absolute times.
//!
//! Instruction counts without a runner: `WAITING_LOOP=<impl>:<case>:<rounds>` (`impl`:
//! `tollgate` or `tokio`; `case`: `uncontended`, `queued` or `queued_16x4`) runs that case for
//! `rounds` acquire+release rounds in all on a current-thread runtime and exits, so that
//! `valgrind --tool=callgrind` at two round counts gives the instructions per round as the
//! difference over the difference:
//!
//! ```text
//! cargo bench --bench waiting --no-run
//! WAITING_LOOP=tollgate:queued:20000 valgrind --tool=callgrind target/release/deps/waiting-*
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, BenchmarkId, Criterion};
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

/// The three cases: (name, permits, tasks).
const CASES: [(&str, u32, u64); 3] = [
    ("uncontended", 2, 2),
    ("queued", 1, 4),
    ("queued_16x4", 4, 16),
];

async fn tollgate_round(l: Arc<ConcurrencyLimiter<StdClock>>) {
    let lease = l.acquire(1).await.unwrap();
    tokio::task::yield_now().await;
    drop(lease);
}

async fn tokio_round(s: Arc<Semaphore>) {
    let permit = s.acquire().await.unwrap();
    tokio::task::yield_now().await;
    drop(permit);
}

/// `WAITING_LOOP=<impl>:<case>:<rounds>`: one case on a current-thread runtime, for callgrind.
fn instruction_loop(spec: &str) {
    let mut parts = spec.split(':');
    let (Some(which), Some(case), Some(rounds), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        panic!("WAITING_LOOP=<tollgate|tokio>:<case>:<rounds>");
    };
    let rounds: u64 = rounds.parse().expect("rounds");
    let &(_, permits, tasks) = CASES
        .iter()
        .find(|(name, _, _)| *name == case)
        .unwrap_or_else(|| panic!("unknown case {case}"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    match which {
        "tollgate" => {
            let l = tollgate_limiter(permits);
            run(&rt, tasks, rounds, move || tollgate_round(l.clone()));
        }
        "tokio" => {
            let s = Arc::new(Semaphore::new(permits as usize));
            run(&rt, tasks, rounds, move || tokio_round(s.clone()));
        }
        other => panic!("unknown implementation {other}"),
    }
}

fn waiting(c: &mut Criterion) {
    let rt = runtime();
    let mut g = c.benchmark_group("acquire_await_release");
    g.warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for (name, permits, tasks) in CASES {
        g.bench_function(BenchmarkId::new("tollgate", name), |b| {
            let l = tollgate_limiter(permits);
            b.iter_custom(|iters| {
                let l = l.clone();
                run(&rt, tasks, iters, move || tollgate_round(l.clone()))
            })
        });
        g.bench_function(BenchmarkId::new("tokio_semaphore", name), |b| {
            let s = Arc::new(Semaphore::new(permits as usize));
            b.iter_custom(|iters| {
                let s = s.clone();
                run(&rt, tasks, iters, move || tokio_round(s.clone()))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, waiting);

fn main() {
    if let Ok(spec) = std::env::var("WAITING_LOOP") {
        instruction_loop(&spec);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
