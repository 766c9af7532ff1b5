//! Chained and no-op limiters: every rule of .NET's chained limiters and its no-op limiter, on
//! manual clocks and hand-polled futures.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Wake;

use tollgate::*;

const SEC: Duration = Duration::from_secs(1);

// ---------------------------------------------------------------------------------------------
// Helpers

/// A user-defined limiter that records every call in a shared log: `+a1` (asked for 1), `=a1`
/// (granted 1), `-a1` (1 given back), `!a1` (refused).
struct Rec {
    name: &'static str,
    log: Arc<Mutex<Vec<String>>>,
    available: AtomicU32,
    limit: u32,
    retry_after: Duration,
    idle: Mutex<Option<Duration>>,
    granted: AtomicU32,
    refused: AtomicU32,
}

impl Rec {
    fn new(name: &'static str, limit: u32, log: &Arc<Mutex<Vec<String>>>) -> Self {
        Self {
            name,
            log: log.clone(),
            available: AtomicU32::new(limit),
            limit,
            retry_after: SEC * (name.as_bytes()[0] - b'a' + 1) as u32,
            idle: Mutex::new(Some(SEC)),
            granted: AtomicU32::new(0),
            refused: AtomicU32::new(0),
        }
    }
    fn note(&self, what: &str, n: u32) {
        self.log
            .lock()
            .unwrap()
            .push(format!("{what}{}{n}", self.name));
    }
}

impl Limiter for Rec {
    fn try_acquire(&self, permits: u32) -> Result<Lease<'_>, Rejection> {
        self.note("+", permits);
        let ok = self
            .available
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |a| {
                a.checked_sub(permits)
            })
            .is_ok();
        if ok {
            self.note("=", permits);
            self.granted.fetch_add(1, Ordering::SeqCst);
            Ok(Lease::releasing(permits, self))
        } else {
            self.note("!", permits);
            self.refused.fetch_add(1, Ordering::SeqCst);
            Err(Rejection::with_retry_after(
                &Reason::Exhausted,
                self.retry_after,
            ))
        }
    }
    fn available_permits(&self) -> u64 {
        u64::from(self.available.load(Ordering::SeqCst))
    }
    fn statistics(&self) -> Statistics {
        Statistics {
            available_permits: self.available_permits(),
            queued_permits: u64::from(self.limit),
            total_successful: u64::from(self.granted.load(Ordering::SeqCst)),
            total_failed: u64::from(self.refused.load(Ordering::SeqCst)),
        }
    }
    fn idle_duration(&self) -> Option<Duration> {
        *self.idle.lock().unwrap()
    }
    fn close(&self) {
        self.note("close", 0);
    }
    fn is_closed(&self) -> bool {
        false
    }
}

impl Release for Rec {
    fn release(&self, permits: u32) {
        self.note("-", permits);
        self.available.fetch_add(permits, Ordering::SeqCst);
    }
}

fn log() -> Arc<Mutex<Vec<String>>> {
    Arc::new(Mutex::new(Vec::new()))
}

fn take_log(log: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

/// A hand-polled future that counts its wake-ups (as in tests/queueing.rs).
struct Task<'a, T> {
    fut: Pin<Box<dyn Future<Output = T> + 'a>>,
    wakes: Arc<Wakes>,
}

struct Wakes(AtomicUsize);
impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl<'a, T> Task<'a, T> {
    fn new(f: impl Future<Output = T> + 'a) -> Self {
        Self {
            fut: Box::pin(f),
            wakes: Arc::new(Wakes(AtomicUsize::new(0))),
        }
    }
    fn poll(&mut self) -> Poll<T> {
        let waker = Waker::from(self.wakes.clone());
        self.fut.as_mut().poll(&mut Context::from_waker(&waker))
    }
    #[track_caller]
    fn pending(&mut self) {
        assert!(self.poll().is_pending(), "expected the task to wait");
    }
    #[track_caller]
    fn ready(&mut self) -> T {
        match self.poll() {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("expected the task to be done"),
        }
    }
}

fn concurrency(clock: &ManualClock, permits: u32, queue: u32) -> ConcurrencyLimiter<&ManualClock> {
    let opts = ConcurrencyOptions::new(permits).with_queue(queue, QueueOrder::OldestFirst);
    ConcurrencyLimiter::with_clock(opts, clock).unwrap()
}

// ---------------------------------------------------------------------------------------------
// NoopLimiter (.NET behaviour reference, section 10)

#[test]
fn noop_grants_everything_even_after_close_and_counts_successes() {
    let noop = NoopLimiter::new();
    for n in [0, 1, u32::MAX] {
        let lease = noop.try_acquire(n).unwrap();
        assert_eq!(lease.permits(), n);
        assert!(!lease.returns_permits(), "a no-op lease carries nothing");
    }
    noop.close();
    assert!(!noop.is_closed());
    assert!(noop.try_acquire(5).is_ok());
    assert_eq!(
        noop.statistics(),
        Statistics {
            available_permits: u64::MAX,
            queued_permits: 0,
            total_successful: 4,
            total_failed: 0,
        }
    );
    assert_eq!(noop.available_permits(), u64::MAX);
    assert_eq!(noop.idle_duration(), None);
}

#[test]
fn noop_waiting_completes_at_the_first_poll() {
    let noop = NoopLimiter::new();
    let mut t = Task::new(noop.acquire(7));
    assert_eq!(t.ready().unwrap().permits(), 7);
    assert_eq!(noop.statistics().total_successful, 1);
}

// ---------------------------------------------------------------------------------------------
// Chain: order, all or nothing, rollback

#[test]
fn each_limiter_is_asked_in_order_and_released_in_reverse() {
    let l = log();
    let (a, b, c) = (
        Rec::new("a", 5, &l),
        Rec::new("b", 5, &l),
        Rec::new("c", 5, &l),
    );
    let chain = Chain::new((&a, &b, &c));
    let lease = chain.try_acquire(2).unwrap();
    assert_eq!(lease.permits(), 2);
    assert_eq!(take_log(&l), ["+a2", "=a2", "+b2", "=b2", "+c2", "=c2"]);
    drop(lease);
    assert_eq!(take_log(&l), ["-c2", "-b2", "-a2"]);
}

#[test]
fn a_rejection_rolls_back_in_reverse_and_returns_that_rejection() {
    let l = log();
    let (a, b, c, d) = (
        Rec::new("a", 5, &l),
        Rec::new("b", 5, &l),
        Rec::new("c", 1, &l),
        Rec::new("d", 5, &l),
    );
    let chain = Chain::new((&a, &b, &c, &d));
    let r = chain.try_acquire(2).unwrap_err();
    // c's rejection, its RetryAfter intact; d never asked; b then a given back.
    assert_eq!(
        (r.reason(), r.retry_after()),
        (Reason::Exhausted, Some(3 * SEC))
    );
    assert_eq!(
        take_log(&l),
        ["+a2", "=a2", "+b2", "=b2", "+c2", "!c2", "-b2", "-a2"]
    );
    assert_eq!(
        (
            a.available_permits(),
            b.available_permits(),
            c.available_permits()
        ),
        (5, 5, 1)
    );
    // The first limiter rejecting: nothing to roll back.
    let r = Chain::new((&c, &a)).try_acquire(3).unwrap_err();
    assert_eq!(r.retry_after(), Some(3 * SEC));
    assert_eq!(take_log(&l), ["+c3", "!c3"]);
}

/// Issue 9, item 16: a rollback gives a rate limiter nothing back. Its lease releases nothing
/// (as in .NET), so the window permit the first link granted stays spent when the second link
/// rejects — the documented behaviour, which the `Chain` example asserts too.
#[test]
fn rollback_gives_nothing_back_to_a_rate_limiter() {
    let clock = ManualClock::new();
    let window =
        FixedWindowLimiter::with_clock(FixedWindowOptions::new(2, Duration::from_secs(10)), &clock)
            .unwrap();
    let bucket = TokenBucketLimiter::with_clock(
        TokenBucketOptions::new(2, 1, Duration::from_secs(10)),
        &clock,
    )
    .unwrap();
    let gate = concurrency(&clock, 1, 0);
    let held = gate.try_acquire(1).unwrap();
    let chain = Chain::new((&window, &bucket, &gate));
    let r = chain.try_acquire(1).unwrap_err();
    assert_eq!(r.reason(), Reason::Exhausted);
    assert_eq!(
        window.available_permits(),
        1,
        "the window's permit stays spent"
    );
    assert_eq!(
        bucket.available_permits(),
        1,
        "the bucket's token stays spent"
    );
    drop(held);
    assert!(chain.try_acquire(1).is_ok());
    assert_eq!(
        (window.available_permits(), bucket.available_permits()),
        (0, 0)
    );
}

#[test]
fn rollback_with_real_limiters_leaves_every_limiter_as_it_was() {
    let clock = ManualClock::new();
    let first = concurrency(&clock, 3, 0);
    let window =
        FixedWindowLimiter::with_clock(FixedWindowOptions::new(2, Duration::from_secs(10)), &clock)
            .unwrap();
    let chain = Chain::new((&first, &window));
    let held = chain.try_acquire(2).unwrap();
    clock.advance(4 * SEC);
    let r = chain.try_acquire(1).unwrap_err();
    // The window's rejection: 6 s to the next window. The concurrency permit went back.
    assert_eq!(r.retry_after(), Some(6 * SEC));
    assert_eq!(first.available_permits(), 1);
    drop(held);
    assert_eq!(first.available_permits(), 3);
    // Owned links work the same.
    let owned = Chain::new((concurrency(&clock, 1, 0), NoopLimiter::new()));
    let lease = owned.try_acquire(1).unwrap();
    assert_eq!(
        owned.try_acquire(1).unwrap_err().reason(),
        Reason::Exhausted
    );
    drop(lease);
    assert!(owned.try_acquire(1).is_ok());
}

#[test]
fn oversized_and_zero_permit_requests_follow_the_first_limiter_that_decides() {
    let clock = ManualClock::new();
    let small = concurrency(&clock, 2, 0);
    let chain = Chain::new((NoopLimiter::new(), &small));
    assert_eq!(
        chain.try_acquire(3).unwrap_err().reason(),
        Reason::ExceedsLimit
    );
    let probe = chain.try_acquire(0).unwrap();
    assert_eq!(probe.permits(), 0);
    assert_eq!(small.available_permits(), 2);
}

// ---------------------------------------------------------------------------------------------
// statistics, idle duration, close

#[test]
fn statistics_are_min_sum_sum_and_the_last_limiters_successes() {
    let l = log();
    let (a, b, c) = (
        Rec::new("a", 5, &l),
        Rec::new("b", 2, &l),
        Rec::new("c", 9, &l),
    );
    let chain = Chain::new((&a, &b, &c));
    let _x = chain.try_acquire(1).unwrap();
    let _ = chain.try_acquire(2).unwrap_err(); // b refuses
    let _ = a.try_acquire(1).unwrap(); // a alone
    let s = chain.statistics();
    assert_eq!(s.available_permits, 1); // min(3, 1, 8)
    assert_eq!(s.queued_permits, 5 + 2 + 9); // Rec reports its limit as "queued": a sum
    assert_eq!(s.total_failed, 1); // sum: b's one refusal
    assert_eq!(s.total_successful, 1); // c's count only, not a's 3
    assert_eq!(chain.available_permits(), 1);
}

#[test]
fn idle_duration_is_none_if_any_is_in_use_else_the_minimum() {
    let l = log();
    let (a, b) = (Rec::new("a", 1, &l), Rec::new("b", 1, &l));
    *a.idle.lock().unwrap() = Some(5 * SEC);
    *b.idle.lock().unwrap() = Some(2 * SEC);
    let chain = Chain::new((&a, &b));
    assert_eq!(chain.idle_duration(), Some(2 * SEC));
    *a.idle.lock().unwrap() = None;
    // .NET 11's rule (.NET ≤ 10 would say 2 s).
    assert_eq!(chain.idle_duration(), None);
}

#[test]
fn closing_a_chain_does_not_close_its_limiters() {
    let l = log();
    let a = Rec::new("a", 3, &l);
    let clock = ManualClock::new();
    let b = concurrency(&clock, 3, 0);
    let chain = Chain::new((&a, &b));
    assert!(!chain.is_closed());
    chain.close();
    assert!(chain.is_closed());
    let r = chain.try_acquire(1).unwrap_err();
    assert_eq!((r.reason(), r.retry_after()), (Reason::Closed, None));
    // No limiter was asked, none was closed; both still work, and the chain still reports.
    assert!(take_log(&l).is_empty());
    assert!(!b.is_closed());
    let (la, lb) = (a.try_acquire(1).unwrap(), b.try_acquire(1).unwrap());
    assert_eq!(chain.statistics().available_permits, 2);
    drop((la, lb));
    let waitable = Chain::new((&b, NoopLimiter::new()));
    waitable.close();
    let mut waiting = Task::new(waitable.acquire(1));
    assert_eq!(waiting.ready().unwrap_err().reason(), Reason::Closed);
    assert_eq!(b.statistics().queued_permits, 0);
}

// ---------------------------------------------------------------------------------------------
// waiting

#[test]
fn waiting_awaits_each_limiter_before_asking_the_next() {
    let clock = ManualClock::new();
    let a = concurrency(&clock, 1, 4);
    let b = concurrency(&clock, 1, 4);
    let chain = Chain::new((&a, &b));
    let held_a = a.try_acquire(1).unwrap();
    let held_b = b.try_acquire(1).unwrap();
    let mut t = Task::new(chain.acquire(1));
    t.pending();
    // Waiting on a; b not asked yet.
    assert_eq!(a.statistics().queued_permits, 1);
    assert_eq!(b.statistics().queued_permits, 0);
    drop(held_a);
    t.pending();
    // a granted; now waiting on b.
    assert_eq!(
        (a.available_permits(), b.statistics().queued_permits),
        (0, 1)
    );
    drop(held_b);
    let lease = t.ready().unwrap();
    assert_eq!((a.available_permits(), b.available_permits()), (0, 0));
    drop(lease);
    assert_eq!((a.available_permits(), b.available_permits()), (1, 1));
}

#[test]
fn waiting_rolls_back_on_a_rejection_and_on_cancellation() {
    let clock = ManualClock::new();
    let a = concurrency(&clock, 2, 0);
    let b = concurrency(&clock, 1, 0); // no queue: refuses at once
    let held_b = b.try_acquire(1).unwrap();
    let chain = Chain::new((&a, &b));
    let mut t = Task::new(chain.acquire(1));
    assert_eq!(t.ready().unwrap_err().reason(), Reason::QueueFull);
    assert_eq!(a.available_permits(), 2, "a's permit was given back");
    drop(held_b);

    // Cancelled while waiting on the second limiter: the first's lease goes back.
    let c = concurrency(&clock, 1, 4);
    let held_c = c.try_acquire(1).unwrap();
    let chain = Chain::new((&a, &c));
    let mut t = Task::new(chain.acquire(1));
    t.pending();
    assert_eq!(a.available_permits(), 1);
    assert_eq!(c.statistics().queued_permits, 1);
    drop(t);
    assert_eq!(a.available_permits(), 2);
    assert_eq!(c.statistics().queued_permits, 0);
    drop(held_c);
}

#[test]
fn waiting_chain_futures_are_send_for_static_limiters() {
    fn is_send<T: Send>(_: &T) {}
    let a = ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap();
    let b = TokenBucketLimiter::new(TokenBucketOptions::new(1, 1, SEC)).unwrap();
    let chain = Arc::new(Chain::new((a, b, NoopLimiter::new())));
    let f = chain.acquire(1);
    is_send(&f);
    static SHARED: std::sync::OnceLock<ConcurrencyLimiter<StdClock>> = std::sync::OnceLock::new();
    let shared =
        SHARED.get_or_init(|| ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap());
    let by_ref = Chain::new((shared, NoopLimiter::new()));
    let g = by_ref.acquire(1);
    is_send(&g);
}

// ---------------------------------------------------------------------------------------------
// Waiting on chains of partitioned limiters

/// A partitioned concurrency limiter on `clock`: `permits` per user, a queue of `queue`.
fn per_user(
    clock: &ManualClock,
    permits: u32,
    queue: u32,
) -> Partitioned<
    String,
    PartitionLimiter<&ManualClock>,
    impl Fn(&str) -> Partition<String>,
    &ManualClock,
> {
    let kind = PartitionKind::concurrency(
        ConcurrencyOptions::new(permits).with_queue(queue, QueueOrder::OldestFirst),
    )
    .unwrap();
    Partitioned::with_clock(
        move |user: &str| Partition::new(user.to_string(), kind),
        PartitionConfig::default(),
        clock,
    )
}

#[test]
fn partitioned_chain_waits_on_each_partition_in_turn() {
    let clock = ManualClock::new();
    let users = per_user(&clock, 1, 4);
    let tenants = per_user(&clock, 1, 4);
    let chain = PartitionedChain::new((&users, &tenants));
    let held_user = users.try_acquire("alice", 1).unwrap();
    let held_tenant = tenants.try_acquire("alice", 1).unwrap();

    let mut t = Task::new(chain.acquire("alice", 1));
    t.pending();
    // Waiting in the first limiter's partition; the second not asked yet.
    assert_eq!(users.statistics("alice").queued_permits, 1);
    assert_eq!(tenants.statistics("alice").queued_permits, 0);
    // Another key is not held up.
    assert!(chain.try_acquire("bob", 1).is_ok());

    drop(held_user);
    t.pending();
    assert_eq!(users.statistics("alice").available_permits, 0);
    assert_eq!(tenants.statistics("alice").queued_permits, 1);
    drop(held_tenant);
    let lease = t.ready().unwrap();
    assert_eq!(users.statistics("alice").available_permits, 0);
    assert_eq!(tenants.statistics("alice").available_permits, 0);
    drop(lease);
    assert_eq!(users.statistics("alice").available_permits, 1);
    assert_eq!(tenants.statistics("alice").available_permits, 1);
}

#[test]
fn partitioned_chain_waiting_is_all_or_nothing_and_cancellable() {
    let clock = ManualClock::new();
    let users = per_user(&clock, 2, 4);
    // A keyed limiter has no queue: it refuses at once.
    let windows: KeyedLimiter<str, &ManualClock> = KeyedLimiter::fixed_window_with_clock(
        FixedWindowOptions::new(1, SEC),
        PartitionConfig::default(),
        &clock,
    )
    .unwrap();
    let chain = PartitionedChain::new((&users, &windows));
    let first = Task::new(chain.acquire("alice", 1)).ready().unwrap();
    let mut t = Task::new(chain.acquire("alice", 1));
    assert_eq!(t.ready().unwrap_err().reason(), Reason::Exhausted);
    assert_eq!(
        users.statistics("alice").available_permits,
        1,
        "the first limiter's permit came back"
    );
    drop(first);

    // Cancelled while waiting in the second limiter: the first one's lease comes back and the
    // second one's queue is left.
    let queued = per_user(&clock, 1, 4);
    let held = queued.try_acquire("alice", 1).unwrap();
    let chain = PartitionedChain::new((&users, &queued));
    let mut t = Task::new(chain.acquire("alice", 1));
    t.pending();
    assert_eq!(users.statistics("alice").available_permits, 1);
    assert_eq!(queued.statistics("alice").queued_permits, 1);
    drop(t);
    assert_eq!(users.statistics("alice").available_permits, 2);
    assert_eq!(queued.statistics("alice").queued_permits, 0);
    drop(held);

    // A closed chain refuses before asking anyone.
    PartitionedLimiter::close(&chain);
    let r = Task::new(chain.acquire("alice", 1)).ready().unwrap_err();
    assert_eq!(r.reason(), Reason::Closed);
    // Granted by the first limiter three times (twice given back by the chain), never since.
    assert_eq!(users.statistics("alice").total_successful, 3);
}

#[test]
fn partitioned_chains_nest_through_the_waiting_trait() {
    async fn one<P: PartitionedAcquireAsync<str>>(p: &P, user: &str) -> bool {
        p.acquire(user, 1).await.is_ok()
    }
    let clock = ManualClock::new();
    let users = per_user(&clock, 1, 0);
    let inner = PartitionedChain::new((&users,));
    let outer = PartitionedChain::new((&inner, &users));
    // The outer chain takes alice's one permit through the inner chain, then finds none left.
    assert!(!Task::new(one(&outer, "alice")).ready());
    assert_eq!(users.statistics("alice").available_permits, 1);
    assert!(Task::new(one(&inner, "alice")).ready());
}

// ---------------------------------------------------------------------------------------------
// Dynamic chains

#[test]
fn dynamic_chains_follow_the_same_rules() {
    let l = log();
    let (a, b, c) = (
        Rec::new("a", 5, &l),
        Rec::new("b", 5, &l),
        Rec::new("c", 1, &l),
    );
    let mut list: Vec<&dyn Limiter> = vec![&a, &b, &c];
    let chain = DynChain::new(list.clone()).unwrap();
    list.clear(); // the chain owns its copy
    assert_eq!(chain.links().len(), 3);
    let r = chain.try_acquire(2).unwrap_err();
    assert_eq!(r.retry_after(), Some(3 * SEC));
    assert_eq!(
        take_log(&l),
        ["+a2", "=a2", "+b2", "=b2", "+c2", "!c2", "-b2", "-a2"]
    );
    let lease = chain.try_acquire(1).unwrap();
    take_log(&l);
    drop(lease);
    assert_eq!(take_log(&l), ["-c1", "-b1", "-a1"]);
    let s = chain.statistics();
    assert_eq!(
        (s.available_permits, s.total_failed, s.total_successful),
        (1, 1, 1)
    );
    chain.close();
    assert_eq!(chain.try_acquire(1).unwrap_err().reason(), Reason::Closed);
    assert!(take_log(&l).is_empty());
    assert_eq!(
        DynChain::<Box<dyn Limiter>>::new(vec![]).unwrap_err(),
        EmptyChain
    );
}

#[test]
fn dynamic_chains_of_boxed_limiters() {
    let clock = Arc::new(ManualClock::new());
    let links: Vec<Box<dyn Limiter + Send + Sync>> = vec![
        Box::new(
            TokenBucketLimiter::with_clock(TokenBucketOptions::new(2, 1, SEC), clock.clone())
                .unwrap(),
        ),
        Box::new(NoopLimiter::new()),
    ];
    let chain = DynChain::new(links).unwrap();
    let _a = chain.try_acquire(2).unwrap();
    assert_eq!(chain.try_acquire(1).unwrap_err().retry_after(), Some(SEC));
    assert_eq!(chain.idle_duration(), None); // the no-op limiter is never idle
}

// ---------------------------------------------------------------------------------------------
// Chains of partitioned limiters

#[test]
fn partitioned_chains_roll_back_per_resource() {
    let clock = ManualClock::new();
    let one = PartitionKind::concurrency(ConcurrencyOptions::new(1)).unwrap();
    let two = PartitionKind::concurrency(ConcurrencyOptions::new(2)).unwrap();
    let per_user = Partitioned::with_clock(
        move |r: &(u32, &str)| Partition::new(r.0, two),
        PartitionConfig::new(100),
        &clock,
    );
    let per_route = Partitioned::with_clock(
        move |r: &(u32, &str)| Partition::new(r.1.to_string(), one),
        PartitionConfig::new(100),
        &clock,
    );
    let chain = PartitionedChain::new((&per_user, &per_route));
    let held = chain.try_acquire(&(1, "/a"), 1).unwrap();
    // Same route, another user: the route rejects, the user's permit goes back.
    assert_eq!(
        chain.try_acquire(&(2, "/a"), 1).unwrap_err().reason(),
        Reason::Exhausted
    );
    assert_eq!(per_user.statistics(&(2, "")).available_permits, 2);
    // Same user, another route: both grant.
    let other = chain.try_acquire(&(1, "/b"), 1).unwrap();
    assert_eq!(chain.statistics(&(1, "/b")).available_permits, 0); // min(0, 0)
    drop((held, other));
    assert_eq!(chain.statistics(&(1, "/a")).available_permits, 1);
    PartitionedLimiter::close(&chain);
    assert_eq!(
        chain.try_acquire(&(1, "/a"), 1).unwrap_err().reason(),
        Reason::Closed
    );
    assert!(!per_user.is_closed());
}

#[test]
fn chains_of_a_user_limiter_are_all_or_nothing_under_threads() {
    let l = log();
    let a = Rec::new("a", 4, &l);
    let b = Rec::new("b", 2, &l);
    let chain = Chain::new((&a, &b));
    let granted = AtomicU32::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                if let Ok(lease) = chain.try_acquire(1) {
                    granted.fetch_add(1, Ordering::SeqCst);
                    std::mem::forget(lease);
                }
            });
        }
    });
    let g = granted.load(Ordering::SeqCst);
    assert!(g <= 2);
    assert_eq!(a.available_permits(), u64::from(4 - g));
    assert_eq!(b.available_permits(), u64::from(2 - g));
}
