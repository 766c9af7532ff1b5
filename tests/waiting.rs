//! Waiting v2 (issue 12): `acquire().await` that completes with nothing else running, owned and
//! shared limiters. These tests run on real clocks and a tokio runtime: each waits for
//! completion with a generous timeout and asserts nothing about elapsed time.

use std::sync::Arc;
use std::time::Duration;

use tollgate::*;

const GENEROUS: Duration = Duration::from_secs(30);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The scenario: a token due in 50 ms, no driver, no other traffic, no `replenish()`.
#[test]
fn token_bucket_waiter_completes_when_its_token_comes() {
    runtime().block_on(async {
        let opts = TokenBucketOptions::new(1, 1, Duration::from_millis(50))
            .with_queue(4, QueueOrder::OldestFirst);
        let bucket = TokenBucketLimiter::new(opts).unwrap();
        let _first = bucket.try_acquire(1).unwrap();
        let lease = tokio::time::timeout(GENEROUS, bucket.acquire(1))
            .await
            .expect("the waiter was never woken")
            .unwrap();
        assert_eq!(lease.permits(), 1);
        let s = bucket.statistics();
        assert_eq!((s.total_successful, s.queued_permits), (2, 0));
    });
}

/// Several waiters on each rate limiter, served one after another as time brings permits: the
/// waiter that becomes next arms the timer in turn.
#[test]
fn every_rate_limiter_serves_a_queue_of_waiters_on_time_alone() {
    runtime().block_on(async {
        let period = Duration::from_millis(20);
        let q = |n| (n, QueueOrder::OldestFirst);
        let bucket = Arc::new(
            TokenBucketLimiter::new(
                TokenBucketOptions::new(1, 1, period).with_queue(q(8).0, q(8).1),
            )
            .unwrap(),
        );
        let fixed = Arc::new(
            FixedWindowLimiter::new(
                FixedWindowOptions::new(1, period).with_queue(8, QueueOrder::NewestFirst),
            )
            .unwrap(),
        );
        let sliding = Arc::new(
            SlidingWindowLimiter::<StdClock>::new(
                SlidingWindowOptions::new(1, period * 2, 2).with_queue(8, QueueOrder::OldestFirst),
            )
            .unwrap(),
        );
        let _a = bucket.try_acquire(1).unwrap();
        let _b = fixed.try_acquire(1).unwrap();
        let _c = sliding.try_acquire(1).unwrap();
        let mut tasks = Vec::new();
        for _ in 0..4 {
            tasks.push(tokio::spawn(bucket.acquire_owned(1)));
            tasks.push(tokio::spawn(fixed.acquire_owned(1)));
            tasks.push(tokio::spawn(sliding.acquire_owned(1)));
        }
        for t in tasks {
            let lease = tokio::time::timeout(GENEROUS, t)
                .await
                .expect("a waiter was never woken")
                .unwrap()
                .unwrap();
            assert_eq!(lease.permits(), 1);
        }
        for s in [
            bucket.statistics(),
            fixed.statistics(),
            sliding.statistics(),
        ] {
            assert_eq!(
                (s.total_successful, s.total_failed, s.queued_permits),
                (5, 0, 0)
            );
        }
    });
}

/// A blocking waiter and an async one on the same bucket, neither helped by anyone.
#[test]
fn a_std_thread_waiter_needs_no_runtime_and_no_driver() {
    let opts = TokenBucketOptions::new(1, 1, Duration::from_millis(30))
        .with_queue(4, QueueOrder::OldestFirst);
    let bucket = TokenBucketLimiter::new(opts).unwrap();
    let _first = bucket.try_acquire(1).unwrap();
    let lease = bucket.acquire_blocking(1, Some(GENEROUS)).unwrap();
    assert_eq!(lease.permits(), 1);
}

/// An owned concurrency lease moves into a spawned task and gives its permit back there.
#[test]
fn an_owned_lease_moves_into_a_spawned_task() {
    runtime().block_on(async {
        let opts = ConcurrencyOptions::new(1).with_queue(4, QueueOrder::OldestFirst);
        let limiter = Arc::new(ConcurrencyLimiter::new(opts).unwrap());
        let lease = limiter.acquire_owned(1).await.unwrap();
        let waiting = tokio::spawn(limiter.acquire_owned(1));
        let holder = tokio::spawn(async move {
            tokio::task::yield_now().await;
            drop(lease); // released in another task: hands the permit to the waiter
        });
        holder.await.unwrap();
        let second = tokio::time::timeout(GENEROUS, waiting)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(second.returns_permits());
        assert_eq!(limiter.available_permits(), 0);
        drop(second);
        assert_eq!(limiter.available_permits(), 1);
    });
}

/// `Arc<L>` and `Box<L>` are limiters: chains of them, and a `Box<dyn Limiter>`.
#[test]
fn arc_and_box_limiters_compose() {
    let a = Arc::new(
        ConcurrencyLimiter::with_clock(ConcurrencyOptions::new(2), ManualClock::new()).unwrap(),
    );
    let b: Box<FixedWindowLimiter<ManualClock>> = Box::new(
        FixedWindowLimiter::with_clock(
            FixedWindowOptions::new(1, Duration::from_secs(1)),
            ManualClock::new(),
        )
        .unwrap(),
    );
    let chain = Chain::new((a.clone(), b));
    let lease = chain.try_acquire(1).unwrap();
    assert_eq!(a.available_permits(), 1);
    assert_eq!(
        chain.try_acquire(1).unwrap_err().reason(),
        Reason::Exhausted
    );
    drop(lease);
    assert_eq!(a.available_permits(), 2);
    let dynamic: Box<dyn Limiter> = Box::new(a.clone());
    assert!(dynamic.try_acquire(2).is_ok());
    let shared: Arc<dyn Limiter + Send + Sync> = a;
    assert_eq!(shared.available_permits(), 2);
}

/// Waiting through an `Arc` (the waiting trait is forwarded) completes as on the limiter.
#[test]
fn waiting_through_an_arc() {
    runtime().block_on(async {
        let opts = ConcurrencyOptions::new(1).with_queue(2, QueueOrder::OldestFirst);
        let limiter = Arc::new(ConcurrencyLimiter::new(opts).unwrap());
        async fn one<L: AcquireAsync>(l: &L) -> u32 {
            l.acquire(1).await.unwrap().permits()
        }
        assert_eq!(one(&limiter).await, 1);
    });
}

mod common;

/// `DynChain::acquire`: waits on each link in order; cancelled mid-way it gives back what it
/// holds; a rejection gives back what was granted, last first.
#[test]
fn dyn_chain_waits_all_or_nothing_and_is_cancellation_safe() {
    use common::Task;
    let opts = ConcurrencyOptions::new(1).with_queue(2, QueueOrder::OldestFirst);
    let a = ConcurrencyLimiter::with_clock(opts, ManualClock::new()).unwrap();
    let b = ConcurrencyLimiter::with_clock(opts, ManualClock::new()).unwrap();
    let chain = DynChain::new(vec![&a, &b]).unwrap();
    let held_b = b.try_acquire(1).unwrap();
    // Granted by a, queued at b: cancelled there, a's permit comes back and b's queue empties.
    let mut t = Task::new(chain.acquire(1));
    t.pending();
    assert_eq!(
        (a.available_permits(), b.statistics().queued_permits),
        (0, 1)
    );
    drop(t);
    assert_eq!(
        (a.available_permits(), b.statistics().queued_permits),
        (1, 0)
    );
    // Queued at b again, then b is closed: the rejection comes back, a's permit too.
    let mut t = Task::new(chain.acquire(1));
    t.pending();
    b.close();
    assert_eq!(t.ready().unwrap_err().reason(), Reason::Closed);
    assert_eq!(a.available_permits(), 1);
    drop(held_b);
    // The chain itself closed: rejected before asking anyone.
    chain.close();
    assert_eq!(
        Task::new(chain.acquire(1)).ready().unwrap_err().reason(),
        Reason::Closed
    );
}

/// `DynChain::acquire` served by releases: granted once every link has a permit.
#[test]
fn dyn_chain_of_arcs_waits_for_every_link() {
    use common::Task;
    let opts = ConcurrencyOptions::new(1).with_queue(2, QueueOrder::OldestFirst);
    let a = Arc::new(ConcurrencyLimiter::with_clock(opts, ManualClock::new()).unwrap());
    let b = Arc::new(ConcurrencyLimiter::with_clock(opts, ManualClock::new()).unwrap());
    let chain = DynChain::new(vec![a.clone(), b.clone()]).unwrap();
    let held_a = a.try_acquire(1).unwrap();
    let held_b = b.try_acquire(1).unwrap();
    let mut t = Task::new(chain.acquire(1));
    t.pending();
    drop(held_a);
    t.pending(); // a granted, now waiting at b
    drop(held_b);
    let lease = t.ready().unwrap();
    assert_eq!((a.available_permits(), b.available_permits()), (0, 0));
    drop(lease);
    assert_eq!((a.available_permits(), b.available_permits()), (1, 1));
}
