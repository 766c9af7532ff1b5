//! Settling leases (`Lease::settle`): the property of issue 38 on every rate limiter, on a
//! manual clock: acquiring an estimate and settling it down to `actual` in the same tick leaves
//! the limiter exactly as acquiring `actual` would have (the same available permits, the same
//! answers and RetryAfter later); a debit goes into debt that later requests wait out; the
//! concurrency limiter, owned, partition and chain leases settle too.

use core::time::Duration;
use std::sync::Arc;

use tollgate::*;

const SEC: Duration = Duration::from_secs(1);

/// A small xorshift generator: deterministic runs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The twins show the same permits available, and answer a request of `n` the same (the
/// permits granted, or the reason and RetryAfter), each taking it if granted.
fn same_answers<L: Limiter>(settled: &L, direct: &L, n: u32, at: &str) {
    assert_eq!(
        settled.available_permits(),
        direct.available_permits(),
        "{at}: available"
    );
    let answer = |l: &L| {
        l.try_acquire(n)
            .map(|l| l.permits())
            .map_err(|r| (r.reason(), r.retry_after()))
    };
    assert_eq!(answer(settled), answer(direct), "{at}: a request of {n}");
}

/// Runs the property on twins built by `make`: one takes `estimate` and settles to `actual`,
/// the other takes `actual`, at the same instants; their states must never differ.
fn refund_is_as_if_taken<L: Limiter>(name: &str, make: impl Fn(Arc<ManualClock>) -> L, limit: u32) {
    for seed in 1..=20u64 {
        let clock = Arc::new(ManualClock::new());
        let (settled, direct) = (make(clock.clone()), make(clock.clone()));
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed);
        for step in 0..400 {
            let actual = rng.below(u64::from(limit) + 1) as u32;
            let estimate = (actual + rng.below(u64::from(limit) + 1) as u32).min(limit);
            if let Ok(mut lease) = settled.try_acquire(estimate) {
                lease.settle(actual).unwrap();
                assert_eq!(lease.permits(), actual);
                let other = direct.try_acquire(actual);
                assert!(
                    other.is_ok(),
                    "{name} seed {seed} step {step}: twin refused {actual}"
                );
            }
            // A probe of each size answers the same, with the same RetryAfter.
            let n = rng.below(u64::from(limit)) as u32 + 1;
            same_answers(
                &settled,
                &direct,
                n,
                &format!("{name} seed {seed} step {step}"),
            );
            clock.advance(Duration::from_millis(rng.below(400)));
        }
    }
}

/// A constructor of one of the seven rate limiters, on the clock it is given.
type MakeRate = fn(Arc<ManualClock>) -> Box<dyn Limiter>;

/// The seven rate limiters the settle tests run on, each with a limit of 10, by name.
fn every_rate_limiter() -> [(&'static str, MakeRate); 7] {
    const W: Duration = SEC;
    [
        ("token bucket", |c| {
            Box::new(
                TokenBucketLimiter::with_clock(TokenBucketOptions::new(10, 3, W / 4), c).unwrap(),
            )
        }),
        ("fixed window", |c| {
            Box::new(FixedWindowLimiter::with_clock(FixedWindowOptions::new(10, W), c).unwrap())
        }),
        ("sliding window", |c| {
            Box::new(
                SlidingWindowLimiter::with_clock(SlidingWindowOptions::new(10, W, 4), c).unwrap(),
            )
        }),
        ("sliding counter", |c| {
            Box::new(
                SlidingCounterLimiter::with_clock(SlidingCounterOptions::new(10, W), c).unwrap(),
            )
        }),
        ("sliding log", |c| {
            Box::new(SlidingLogLimiter::with_clock(SlidingLogOptions::new(10, W), c).unwrap())
        }),
        ("gcra", |c| {
            Box::new(GcraLimiter::with_clock(GcraOptions::per_second(10), c).unwrap())
        }),
        ("leaky meter", |c| {
            Box::new(
                LeakyBucketMeter::with_clock(LeakyBucketOptions::new(10, 1, W / 10), c).unwrap(),
            )
        }),
    ]
}

#[test]
fn a_refund_leaves_every_rate_limiter_as_if_only_the_actual_was_taken() {
    for (name, make) in every_rate_limiter() {
        refund_is_as_if_taken(name, make, 10);
    }
}

/// The token bucket of the LLM gateway: a call settled above its estimate puts the bucket into
/// debt, which later calls wait out, their RetryAfter counting it; the debt is bounded by one
/// limit, and a settle past it takes nothing.
#[test]
fn a_debit_puts_the_bucket_into_debt_that_later_requests_wait_out() {
    let clock = ManualClock::new();
    // 1,000 tokens, 100 back every 100 ms.
    let opts = TokenBucketOptions::new(1_000, 100, Duration::from_millis(100));
    let budget = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    let mut lease = budget.try_acquire(800).unwrap();
    lease.settle(1_300).unwrap(); // 300 tokens of debt
    assert_eq!(budget.available_permits(), 0);
    let r = budget.try_acquire(100).unwrap_err();
    // 300 of debt and 100 for the request: four refills.
    assert_eq!(r.retry_after(), Some(Duration::from_millis(400)));
    clock.advance(Duration::from_millis(300));
    assert_eq!(budget.available_permits(), 0);
    assert!(budget.try_acquire(1).is_err());
    clock.advance(Duration::from_millis(100));
    assert_eq!(budget.available_permits(), 100);
    // Past the bound (one limit of debt): refused, nothing taken.
    let mut big = budget.try_acquire(100).unwrap();
    assert_eq!(big.settle(1_101), Err(SettleError::DebtLimit));
    assert_eq!(big.permits(), 100);
    big.settle(1_100).unwrap(); // exactly one limit owed
    assert!(budget.try_acquire(1).is_err());
}

#[test]
fn a_debit_pushes_gcra_and_the_leaky_meter_back() {
    let clock = ManualClock::new();
    let gcra = GcraLimiter::with_clock(GcraOptions::per_second(10), &clock).unwrap();
    let mut lease = gcra.try_acquire(5).unwrap();
    lease.settle(15).unwrap(); // 10 permits: the burst; 5 more of debt
    let r = gcra.try_acquire(1).unwrap_err();
    assert_eq!(r.retry_after(), Some(Duration::from_millis(600)));
    // The bound: one burst of debt beyond the burst (20 in all).
    assert_eq!(lease.settle(21), Err(SettleError::DebtLimit));
    lease.settle(20).unwrap();
    lease.settle(5).unwrap(); // and back: only the estimate stays taken
    assert_eq!(gcra.available_permits(), 5);
}

#[test]
fn a_refund_serves_a_waiter_as_a_release_would() {
    use core::future::Future;
    use core::task::{Context, Poll, Waker};
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(10, 1, SEC).with_queue(10, QueueOrder::OldestFirst);
    let bucket = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    let mut lease = bucket.try_acquire(10).unwrap();
    let mut cx = Context::from_waker(Waker::noop());
    let mut waiter = core::pin::pin!(bucket.acquire(4));
    assert!(waiter.as_mut().poll(&mut cx).is_pending());
    lease.settle(6).unwrap();
    assert!(matches!(waiter.as_mut().poll(&mut cx), Poll::Ready(Ok(l)) if l.permits() == 4));
    assert_eq!(bucket.available_permits(), 0);
}

#[test]
fn a_concurrency_lease_gives_back_at_once_and_owes_a_debit() {
    let pool = ConcurrencyLimiter::new(ConcurrencyOptions::new(4)).unwrap();
    let mut lease = pool.try_acquire(3).unwrap();
    lease.settle(1).unwrap();
    assert_eq!(pool.available_permits(), 3);
    let other = pool.try_acquire(3).unwrap();
    lease.settle(4).unwrap(); // 3 more than it had, none available: 3 owed
    assert_eq!(pool.available_permits(), 0);
    drop(other); // repays the debt first
    assert_eq!(pool.available_permits(), 0);
    assert_eq!(lease.settle(9), Err(SettleError::DebtLimit)); // 5 more would owe 8 > 4
    drop(lease);
    assert_eq!(pool.available_permits(), 4);
}

#[test]
fn owned_partition_and_chain_leases_settle() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(100, 100, Duration::from_secs(60));
    let shared = Arc::new(TokenBucketLimiter::with_clock(opts, ManualClock::new()).unwrap());
    let mut owned = shared.try_acquire_owned(50).unwrap();
    owned.settle(20).unwrap();
    assert_eq!(shared.available_permits(), 80);

    let kind = PartitionKind::fixed_window(FixedWindowOptions::new(10, SEC)).unwrap();
    let parts = Partitioned::new(
        move |id: &u32| Partition::new(*id, kind),
        PartitionConfig::default(),
    );
    let mut lease = parts.try_acquire(&1, 10).unwrap();
    lease.settle(3).unwrap();
    assert!(parts.try_acquire(&1, 7).is_ok());
    assert!(parts.try_acquire(&1, 1).is_err());
    // Into owned form, it still settles with its partition.
    let mut owned = parts.try_acquire(&2, 5).unwrap().into_owned();
    owned.settle(1).unwrap();
    assert!(parts.try_acquire(&2, 9).is_ok());

    let a = TokenBucketLimiter::with_clock(opts, &clock).unwrap();
    let b = GcraLimiter::with_clock(GcraOptions::per_second(100), &clock).unwrap();
    let chain = Chain::new((&a, &b));
    let mut lease = chain.try_acquire(40).unwrap();
    lease.settle(10).unwrap();
    assert_eq!((a.available_permits(), b.available_permits()), (90, 90));
    // A debit one member cannot take is undone in the others.
    assert_eq!(lease.settle(500), Err(SettleError::DebtLimit));
    assert_eq!((a.available_permits(), b.available_permits()), (90, 90));
    assert_eq!(lease.permits(), 10);
}

/// A chain of limits in different units (the issue's example): one request of "requests per
/// minute" and 800 of "tokens per minute" in one acquire, settled to 1 and 1,312; a per-link
/// debit one member cannot take is undone in the others, each back to its own count.
#[test]
fn a_chain_settles_each_link_to_its_own_count() {
    let clock = ManualClock::new();
    let minute = Duration::from_secs(60);
    let requests =
        SlidingWindowLimiter::with_clock(SlidingWindowOptions::new(500, minute, 6), &clock)
            .unwrap();
    let tokens =
        TokenBucketLimiter::with_clock(TokenBucketOptions::new(100_000, 100_000, minute), &clock)
            .unwrap();
    let gcra = GcraLimiter::with_clock(GcraOptions::per_second(2_000), &clock).unwrap();
    let chain = Chain::new((&requests, &tokens, &gcra));
    let mut call = chain.try_acquire_links([1, 800, 800]).unwrap();
    assert_eq!(call.permits_of_links(), [1, 800, 800]);
    call.settle_links([1, 1_312, 1_312]).unwrap();
    assert_eq!(
        (
            requests.available_permits(),
            tokens.available_permits(),
            gcra.available_permits()
        ),
        (499, 98_688, 688)
    );
    // The bucket can owe one limit (100,000 below zero); GCRA only one burst (2,000) past its
    // tolerance: 3,000 more is refused there, and the bucket's debit is undone.
    assert_eq!(
        call.settle_links([1, 4_312, 4_312]),
        Err(SettleError::DebtLimit)
    );
    assert_eq!(call.permits_of_links(), [1, 1_312, 1_312]);
    assert_eq!(
        (tokens.available_permits(), gcra.available_permits()),
        (98_688, 688)
    );
    // A refund of every link, to different counts.
    call.settle_links([1, 100, 1_000]).unwrap();
    assert_eq!(
        (tokens.available_permits(), gcra.available_permits()),
        (99_900, 1_000)
    );
    // The same count for every link.
    call.settle(1).unwrap();
    assert_eq!(call.permits_of_links(), [1, 1, 1]);
    assert_eq!(
        (tokens.available_permits(), gcra.available_permits()),
        (99_999, 1_999)
    );
}

#[test]
fn a_lease_made_by_hand_cannot_settle() {
    let mut lease = Lease::unreleased(3);
    assert_eq!(lease.settle(1), Err(SettleError::Unsupported));
    let noop = NoopLimiter::new();
    let mut free = noop.try_acquire(3).unwrap();
    assert_eq!(free.settle(10), Ok(()));
}

/// The keyed limiter's twin property: per key, a lease of an estimate settled through the
/// limiter (`keyed.settle(key, &mut lease, actual)`) leaves the key as acquiring `actual`
/// would have, for the token bucket, GCRA and the sliding counter; a debit past what is there
/// goes into debt (bucket, GCRA) or is refused (sliding counter) on both twins alike.
#[test]
fn a_keyed_limiter_settles_per_key_as_if_only_the_actual_was_taken() {
    type Make = fn(&Arc<ManualClock>) -> KeyedLimiter<u32, Arc<ManualClock>>;
    let kinds: [(&str, Make); 3] = [
        ("token bucket", |c| {
            let o = TokenBucketOptions::new(10, 3, SEC / 4);
            KeyedLimiter::token_bucket_with_clock(o, PartitionConfig::new(64), c.clone()).unwrap()
        }),
        ("gcra", |c| {
            KeyedLimiter::gcra_with_clock(
                GcraOptions::per_second(10),
                PartitionConfig::new(64),
                c.clone(),
            )
            .unwrap()
        }),
        ("sliding counter", |c| {
            let o = SlidingCounterOptions::new(10, SEC);
            KeyedLimiter::sliding_counter_with_clock(o, PartitionConfig::new(64), c.clone())
                .unwrap()
        }),
    ];
    for (name, make) in kinds {
        for seed in 1..=10u64 {
            let clock = Arc::new(ManualClock::new());
            let (settled, direct) = (make(&clock), make(&clock));
            let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ seed);
            for step in 0..400 {
                let key = rng.below(3) as u32;
                let actual = rng.below(14) as u32;
                let estimate = rng.below(11) as u32;
                let before = settled.statistics(&key).available_permits;
                let at = format!("{name} seed {seed} step {step}");
                if let Ok(mut lease) = settled.try_acquire(&key, estimate) {
                    let result = settled.settle(&key, &mut lease, actual);
                    if actual <= estimate || u64::from(actual) <= before {
                        assert_eq!(result, Ok(()), "{at}");
                        assert!(direct.try_acquire(&key, actual).is_ok(), "{at}");
                    } else {
                        let mut twin = direct.try_acquire(&key, estimate).unwrap();
                        assert_eq!(direct.settle(&key, &mut twin, actual), result, "{at}");
                    }
                } else {
                    assert!(direct.try_acquire(&key, estimate).is_err(), "{at}");
                }
                for k in 0..3 {
                    assert_eq!(
                        settled.statistics(&k).available_permits,
                        direct.statistics(&k).available_permits,
                        "{at} key {k}"
                    );
                }
                let n = rng.below(10) as u32 + 1;
                let answer = |l: &KeyedLimiter<u32, Arc<ManualClock>>| {
                    l.try_acquire(&key, n)
                        .map(|l| l.permits())
                        .map_err(|r| (r.reason(), r.retry_after()))
                };
                assert_eq!(answer(&settled), answer(&direct), "{at}");
                clock.advance(Duration::from_millis(rng.below(300)));
            }
        }
    }
}

/// A partitioned chain settles every link for its resource, all or nothing: a link that
/// cannot take a debit (the sliding counter takes one only where it fits) leaves the links
/// settled before it as they were; links of `Partitioned` settle with their partitions.
#[test]
fn a_partitioned_chain_settles_every_link_for_its_resource() {
    let clock = Arc::new(ManualClock::new());
    let minute = Duration::from_secs(60);
    let tokens: KeyedLimiter<str, Arc<ManualClock>> = KeyedLimiter::token_bucket_with_clock(
        TokenBucketOptions::new(1_000, 1_000, minute),
        PartitionConfig::new(16),
        clock.clone(),
    )
    .unwrap();
    let kind = PartitionKind::gcra(GcraOptions::per_minute(1_000)).unwrap();
    let per_route = Partitioned::with_clock(
        move |route: &str| Partition::new(route.len(), kind),
        PartitionConfig::default(),
        clock.clone(),
    );
    let window: KeyedLimiter<str, Arc<ManualClock>> = KeyedLimiter::sliding_counter_with_clock(
        SlidingCounterOptions::new(1_000, minute),
        PartitionConfig::new(16),
        clock.clone(),
    )
    .unwrap();
    let chain = PartitionedChain::new((&tokens, &per_route, &window));
    let mut call = chain.try_acquire("acme", 600).unwrap();
    chain.settle("acme", &mut call, 100).unwrap();
    let left = || {
        (
            tokens.statistics("acme").available_permits,
            per_route.statistics("acme").available_permits,
            window.statistics("acme").available_permits,
        )
    };
    assert_eq!(left(), (900, 900, 900));
    assert_eq!(call.permits(), 100);
    // 950 fits in the bucket (debt) and GCRA (debt), not in the window: all undone.
    assert_eq!(
        chain.settle("acme", &mut call, 1_050),
        Err(SettleError::DebtLimit)
    );
    assert_eq!(left(), (900, 900, 900));
    assert_eq!(call.permits(), 100);
    // 900 fits everywhere.
    chain.settle("acme", &mut call, 1_000).unwrap();
    assert_eq!(left(), (0, 0, 0));
    // Through the trait, as generic code calls it.
    PartitionedLimiter::settle(&chain, "acme", &mut call, 0).unwrap();
    assert_eq!(left(), (1_000, 1_000, 1_000));
}

/// The twin property for a partitioned limiter settled through the trait (`settle(resource,
/// ..)`): one twin takes `estimate` for a key and settles to `actual`, the other takes
/// `actual`; their partitions must answer alike after every step (a debit past what is
/// there: both settle it, with the same result).
fn partitioned_settles_as_if_only_the_actual_was_taken<P: PartitionedLimiter<u32>>(
    name: &str,
    make: impl Fn(&Arc<ManualClock>) -> P,
    limit: u32,
) {
    for seed in 1..=10u64 {
        let clock = Arc::new(ManualClock::new());
        let (settled, direct) = (make(&clock), make(&clock));
        let mut rng = Rng(0x5851_F42D_4C95_7F2D ^ seed);
        for step in 0..300 {
            let key = rng.below(3) as u32;
            let actual = rng.below(u64::from(limit) + 4) as u32;
            let estimate = rng.below(u64::from(limit) + 1) as u32;
            let before = settled.statistics(&key).available_permits;
            let at = format!("{name} seed {seed} step {step}");
            match settled.try_acquire(&key, estimate) {
                Ok(mut lease) => {
                    let result = settled.settle(&key, &mut lease, actual);
                    let fits = actual <= estimate || u64::from(actual) <= before;
                    if fits && result.is_ok() {
                        let twin = direct.try_acquire(&key, actual);
                        assert!(twin.is_ok(), "{at}");
                    } else {
                        let mut twin = direct.try_acquire(&key, estimate).unwrap();
                        assert_eq!(direct.settle(&key, &mut twin, actual), result, "{at}");
                        // What fits is refused only for a concurrency probe's lease.
                        if fits {
                            assert_eq!((result, estimate), (Err(SettleError::Unsupported), 0));
                        }
                    }
                }
                Err(_) => assert!(direct.try_acquire(&key, estimate).is_err(), "{at}"),
            }
            for k in 0..3 {
                assert_eq!(
                    settled.statistics(&k).available_permits,
                    direct.statistics(&k).available_permits,
                    "{at} key {k}"
                );
            }
            let n = rng.below(u64::from(limit)) as u32 + 1;
            let answer = |l: &P| {
                l.try_acquire(&key, n)
                    .map(|_| ())
                    .map_err(|r| (r.reason(), r.retry_after()))
            };
            assert_eq!(answer(&settled), answer(&direct), "{at}");
            clock.advance(Duration::from_millis(rng.below(300)));
        }
    }
}

#[test]
fn the_fixed_capacity_keyed_limiter_settles_per_key() {
    partitioned_settles_as_if_only_the_actual_was_taken(
        "fixed keyed token bucket",
        |c| {
            let o = TokenBucketOptions::new(10, 3, SEC / 4);
            FixedKeyedLimiter::<u32, _, 8>::token_bucket(o, PartitionConfig::new(8), c.clone())
                .unwrap()
        },
        10,
    );
    partitioned_settles_as_if_only_the_actual_was_taken(
        "fixed keyed fixed window",
        |c| {
            let o = FixedWindowOptions::new(10, SEC);
            FixedKeyedLimiter::<u32, _, 8>::fixed_window(o, PartitionConfig::new(8), c.clone())
                .unwrap()
        },
        10,
    );
}

#[test]
fn the_fixed_capacity_partitioned_limiter_settles_with_each_partition() {
    let kinds = [
        PartitionKind::token_bucket(TokenBucketOptions::new(10, 3, SEC / 4)).unwrap(),
        PartitionKind::fixed_window(FixedWindowOptions::new(10, SEC)).unwrap(),
        PartitionKind::gcra(GcraOptions::per_second(10)).unwrap(),
        PartitionKind::concurrency(ConcurrencyOptions::new(10)).unwrap(),
    ];
    for kind in kinds {
        let name = format!("fixed partitioned {kind:?}");
        partitioned_settles_as_if_only_the_actual_was_taken(
            &name,
            |c| {
                FixedPartitioned::<u32, _, _, _, 8>::new(
                    move |k: &u32| Partition::new(*k, kind),
                    PartitionConfig::new(8),
                    c.clone(),
                )
            },
            10,
        );
    }
}

/// A fixed-capacity partition evicted while idle takes a debit again (made anew), and a
/// refund to it changes nothing; a full table of busy keys refuses the debit, taking nothing.
#[test]
fn fixed_capacity_forms_settle_after_eviction_and_refuse_when_full() {
    let clock = Arc::new(ManualClock::new());
    let o = TokenBucketOptions::new(10, 10, SEC);
    let keyed: FixedKeyedLimiter<u32, _, 2> =
        FixedKeyedLimiter::token_bucket(o, PartitionConfig::new(2), clock.clone()).unwrap();
    let mut a = keyed.try_acquire(&1, 4).unwrap();
    clock.advance(SEC * 30); // key 1 full, idle long past the timeout
    keyed.evict_idle();
    assert_eq!(keyed.len(), 0);
    keyed.settle(&1, &mut a, 2).unwrap(); // nothing to give back to
    assert_eq!(keyed.len(), 0);
    keyed.settle(&1, &mut a, 14).unwrap(); // 12 more: the key again, 2 into debt
    assert_eq!(keyed.len(), 1);
    assert_eq!(keyed.statistics(&1).available_permits, 0);
    let r = keyed.try_acquire(&1, 1).unwrap_err();
    assert_eq!(r.retry_after(), Some(SEC)); // debt 2 + 1: one refill of 10
                                            // Two busy keys fill the table: a debit for a third, evicted one has no room.
    let mut c = keyed.try_acquire(&2, 10).unwrap();
    let mut gone = Lease::unreleased(0);
    assert_eq!(keyed.settle(&3, &mut gone, 5), Err(SettleError::DebtLimit));
    assert_eq!(gone.permits(), 0);
    keyed.settle(&2, &mut c, 10).unwrap(); // unchanged: nothing to do
    keyed.close();
    keyed.settle(&2, &mut c, 20).unwrap(); // closed: nothing kept, nothing to settle
    assert_eq!(keyed.len(), 0);
}

/// A concurrency probe's lease (`try_acquire(0)`) holds nothing and returns nothing when
/// dropped: it cannot settle, in any form of lease (a settle would take permits that never
/// come back), and nothing is taken.
#[test]
fn a_concurrency_probe_lease_cannot_settle_in_any_form() {
    let opts = ConcurrencyOptions::new(4);
    let plain = ConcurrencyLimiter::new(opts).unwrap();
    let mut probe = plain.try_acquire(0).unwrap();
    assert_eq!(probe.settle(3), Err(SettleError::Unsupported));
    drop(probe);
    assert_eq!(plain.available_permits(), 4);

    let unqueued = ConcurrencyLimiter::without_queue(opts, ManualClock::new()).unwrap();
    let mut probe = unqueued.try_acquire(0).unwrap();
    assert_eq!(probe.settle(3), Err(SettleError::Unsupported));
    drop(probe);
    assert_eq!(unqueued.available_permits(), 4);

    let owned = Arc::new(ConcurrencyLimiter::new(opts).unwrap());
    let mut probe = owned.try_acquire_owned(0).unwrap();
    assert_eq!(probe.settle(3), Err(SettleError::Unsupported));
    drop(probe);
    assert_eq!(owned.available_permits(), 4);

    let kind = PartitionKind::concurrency(opts).unwrap();
    let partitioned = Partitioned::new(
        move |k: &u8| Partition::new(*k, kind),
        PartitionConfig::default(),
    );
    let mut probe = partitioned.try_acquire(&1, 0).unwrap();
    assert_eq!(probe.settle(3), Err(SettleError::Unsupported));
    drop(probe);
    assert_eq!(partitioned.statistics(&1).available_permits, 4);

    let fixed: FixedPartitioned<u8, _, _, _, 4> = FixedPartitioned::new(
        move |k: &u8| Partition::new(*k, kind),
        PartitionConfig::new(4),
        Arc::new(ManualClock::new()),
    );
    let mut probe = fixed.try_acquire(&1, 0).unwrap();
    assert_eq!(
        fixed.settle(&1, &mut probe, 3),
        Err(SettleError::Unsupported)
    );
    drop(probe);
    assert_eq!(fixed.statistics(&1).available_permits, 4);
}

/// Runs the debit property (issue 38) on twins built by `make`: one takes `estimate` and
/// settles to `actual`, often past what is free, into debt; the other takes `actual` if it
/// fits, else another split of it (a lease of what is free, settled to `actual`). A debit
/// counts where and when a request of it would, only past the limit: the twins' settles must
/// answer alike (into debt, or `DebtLimit` past the bound) and their states never differ.
fn debit_is_as_if_taken_into_debt<L: Limiter>(
    name: &str,
    make: impl Fn(Arc<ManualClock>) -> L,
    limit: u32,
) {
    let mut debts = 0;
    for seed in 1..=20u64 {
        let clock = Arc::new(ManualClock::new());
        let (settled, direct) = (make(clock.clone()), make(clock.clone()));
        let mut rng = Rng(0x2545_F491_4F6C_DD1D ^ seed);
        for step in 0..400 {
            let at = format!("{name} seed {seed} step {step}");
            let available = settled.available_permits();
            assert_eq!(available, direct.available_permits(), "{at}");
            let estimate = rng.below(u64::from(limit) + 1) as u32;
            let actual = estimate + rng.below(u64::from(limit) * 3 / 2 + 1) as u32;
            if let Ok(mut lease) = settled.try_acquire(estimate) {
                let result = lease.settle(actual);
                if u64::from(actual) <= available && actual <= limit {
                    assert_eq!(result, Ok(()), "{at}: a debit that fits");
                    assert!(direct.try_acquire(actual).is_ok(), "{at}: twin refused");
                } else {
                    // Another split: what is free (at most the limit), the rest settled.
                    let free = available.min(u64::from(limit));
                    let split = rng.below(free + 1) as u32;
                    let mut twin = direct
                        .try_acquire(split)
                        .unwrap_or_else(|e| panic!("{at}: twin refused {split}: {e:?}"));
                    assert_eq!(twin.settle(actual), result, "{at}: the twin's settle");
                    if result.is_ok() {
                        debts += u32::from(u64::from(actual) > available);
                        assert_eq!(lease.permits(), actual, "{at}");
                    } else {
                        assert_eq!(result, Err(SettleError::DebtLimit), "{at}");
                        assert_eq!(lease.permits(), estimate, "{at}: nothing taken");
                        // The twin holds its split: brought to the estimate (both fit).
                        twin.settle(estimate).unwrap();
                    }
                }
            }
            let n = rng.below(u64::from(limit)) as u32 + 1;
            same_answers(&settled, &direct, n, &at);
            clock.advance(Duration::from_millis(rng.below(400)));
        }
    }
    assert!(debts > 100, "{name}: only {debts} debits went into debt");
}

#[test]
fn a_debit_puts_the_sliding_window_counter_and_log_into_debt_as_if_taken_there() {
    let w = SEC;
    debit_is_as_if_taken_into_debt(
        "sliding window",
        |c| SlidingWindowLimiter::with_clock(SlidingWindowOptions::new(10, w, 4), c).unwrap(),
        10,
    );
    debit_is_as_if_taken_into_debt(
        "sliding counter",
        |c| SlidingCounterLimiter::with_clock(SlidingCounterOptions::new(10, w), c).unwrap(),
        10,
    );
    // A ring of twice the limit: a debit always has a slot (exact).
    debit_is_as_if_taken_into_debt(
        "sliding log",
        |c| SlidingLogLimiter::<_, 20>::with_capacity(SlidingLogOptions::new(10, w), c).unwrap(),
        10,
    );
    // The fixed window and token bucket, for comparison: the same property.
    debit_is_as_if_taken_into_debt(
        "fixed window",
        |c| FixedWindowLimiter::with_clock(FixedWindowOptions::new(10, w), c).unwrap(),
        10,
    );
}

/// A lease served late from the queue (granted as of the segment or window it first fit in,
/// issue 29) and settled above its estimate: the debit is counted at the settle's instant, as
/// a request of it granted then would be (into debt), not back at the lease's grant — exactly
/// what a twin served the same way holds after settling another lease, taken at that instant,
/// to the same debit.
#[test]
fn a_debit_of_a_lease_served_late_is_counted_at_the_settle() {
    use core::future::Future;
    use core::task::{Context, Poll, Waker};
    macro_rules! late {
        ($name:literal, $make:expr, $limit:expr, $step:expr) => {{
            let make = $make;
            let limit: u32 = $limit;
            let mut rng = Rng(0x5851_F42D_4C95_7F2D);
            for round in 0..200 {
                let clock = Arc::new(ManualClock::new());
                let (settled, direct) = (make(clock.clone()), make(clock.clone()));
                let at = format!("{} round {round}", $name);
                settled.try_acquire(limit).unwrap().forget();
                direct.try_acquire(limit).unwrap().forget();
                let estimate = 1 + rng.below(u64::from(limit)) as u32;
                let debit = 1 + rng.below(u64::from(limit)) as u32;
                let mut cx = Context::from_waker(Waker::noop());
                let mut a = core::pin::pin!(settled.acquire(estimate));
                let mut b = core::pin::pin!(direct.acquire(estimate));
                assert!(a.as_mut().poll(&mut cx).is_pending(), "{at}");
                assert!(b.as_mut().poll(&mut cx).is_pending(), "{at}");
                // Served late: well after the estimate first fit.
                clock.advance($step * (8 + rng.below(8) as u32));
                settled.replenish();
                direct.replenish();
                let Poll::Ready(Ok(mut lease)) = a.as_mut().poll(&mut cx) else {
                    panic!("{at}: not served")
                };
                let Poll::Ready(Ok(_twin)) = b.as_mut().poll(&mut cx) else {
                    panic!("{at}: twin not served")
                };
                clock.advance($step * rng.below(2) as u32);
                let available = direct.available_permits();
                let result = lease.settle(estimate + debit);
                let twin = if available == 0 {
                    None
                } else {
                    // A lease of part of the debit, settled to all of it.
                    let split = rng.below(available.min(u64::from(debit)) + 1) as u32;
                    let mut other = direct.try_acquire(split).unwrap();
                    Some(other.settle(debit))
                };
                if let Some(twin) = twin {
                    assert_eq!(result, twin, "{at}");
                }
                assert_eq!(result, Ok(()), "{at}: within one limit of debt");
                for _ in 0..12 {
                    let n = 1 + rng.below(u64::from(limit)) as u32;
                    if twin.is_some() {
                        same_answers(&settled, &direct, n, &at);
                    }
                    clock.advance($step * rng.below(3) as u32);
                }
            }
        }};
    }
    late!(
        "sliding window",
        |c| {
            let o = SlidingWindowOptions::new(10, SEC, 4).with_queue(20, QueueOrder::OldestFirst);
            SlidingWindowLimiter::with_clock(o, c).unwrap()
        },
        10,
        SEC / 4
    );
    late!(
        "sliding counter",
        |c| {
            let o = SlidingCounterOptions::new(10, SEC).with_queue(20, QueueOrder::OldestFirst);
            SlidingCounterLimiter::with_clock(o, c).unwrap()
        },
        10,
        SEC / 4
    );
    late!(
        "sliding log",
        |c| {
            let o = SlidingLogOptions::new(10, SEC).with_queue(20, QueueOrder::OldestFirst);
            SlidingLogLimiter::<_, 20>::with_capacity(o, c).unwrap()
        },
        10,
        SEC / 4
    );
}

/// A sliding limiter in debt is not idle (so a partition owing one is never evicted), and a
/// reconfiguration keeps the debt: requests wait it out under the new limit.
#[test]
fn a_sliding_limiter_in_debt_is_not_idle_and_a_reconfigure_keeps_the_debt() {
    fn check<L: Limiter>(name: &str, l: &L, clock: &ManualClock, reconfigure: impl Fn(&L)) {
        let mut lease = l.try_acquire(10).unwrap();
        lease.settle(20).unwrap();
        assert_eq!(lease.settle(21), Err(SettleError::DebtLimit), "{name}");
        clock.advance(SEC / 2);
        reconfigure(l);
        assert_eq!(l.available_permits(), 0, "{name}");
        assert_eq!(l.idle_duration(), None, "{name}: in debt");
        assert!(l.try_acquire(1).is_err(), "{name}");
        // A whole window and more after the debit (two for the counter): all of it gone.
        clock.advance(SEC * 2);
        assert_eq!(l.available_permits(), 12, "{name}");
        assert!(l.idle_duration().is_some(), "{name}");
    }
    let clock = ManualClock::new();
    let w =
        SlidingWindowLimiter::with_clock(SlidingWindowOptions::new(10, SEC, 4), &clock).unwrap();
    check("sliding window", &w, &clock, |l| {
        l.reconfigure(SlidingWindowOptions::new(12, SEC, 4))
            .unwrap()
    });
    let c = SlidingCounterLimiter::with_clock(SlidingCounterOptions::new(10, SEC), &clock).unwrap();
    check("sliding counter", &c, &clock, |l| {
        l.reconfigure(SlidingCounterOptions::new(12, SEC)).unwrap()
    });
    let g =
        SlidingLogLimiter::<_, 24>::with_capacity(SlidingLogOptions::new(10, SEC), &clock).unwrap();
    check("sliding log", &g, &clock, |l| {
        l.reconfigure(SlidingLogOptions::new(12, SEC)).unwrap()
    });
}

/// `settle_within(actual, max_debt)` on every limiter: with the whole limit taken, a debit
/// that would leave it owing `max_debt + 1` is refused and takes nothing (the next twin
/// answers stay those of the lease as it was), and one owing exactly `max_debt` goes through;
/// a refund is never refused, whatever the bound.
fn settle_within_bounds_the_debt<L: Limiter>(
    name: &str,
    make: impl Fn(Arc<ManualClock>) -> L,
    limit: u32,
) {
    for max_debt in [0, 1, limit / 2] {
        let clock = Arc::new(ManualClock::new());
        let (l, twin) = (make(clock.clone()), make(clock.clone()));
        let mut lease = l.try_acquire(limit).unwrap();
        let _twin_lease = twin.try_acquire(limit).unwrap();
        assert_eq!(
            lease.settle_within(limit + max_debt + 1, max_debt),
            Err(SettleError::DebtLimit),
            "{name}: owing {} with a bound of {max_debt}",
            max_debt + 1
        );
        assert_eq!(lease.permits(), limit, "{name}");
        same_answers(&l, &twin, 1, name);
        lease
            .settle_within(limit + max_debt, max_debt)
            .unwrap_or_else(|e| panic!("{name}: owing {max_debt} with a bound of {max_debt}: {e}"));
        assert_eq!(lease.permits(), limit + max_debt, "{name}");
        lease.settle_within(1, 0).unwrap(); // a refund, even to a bound of 0
        assert_eq!(lease.permits(), 1, "{name}");
    }
}

#[test]
fn settle_within_bounds_every_limiters_debt_by_the_callers_bound() {
    for (name, make) in every_rate_limiter() {
        settle_within_bounds_the_debt(name, make, 10);
    }
    settle_within_bounds_the_debt(
        "concurrency",
        |_| ConcurrencyLimiter::new(ConcurrencyOptions::new(10)).unwrap(),
        10,
    );
    settle_within_bounds_the_debt(
        "adaptive",
        |c| {
            tollgate::adaptive::AdaptiveLimiter::with_clock(
                tollgate::adaptive::AdaptiveOptions::new(10).with_bounds(1, 10),
                c,
            )
            .unwrap()
        },
        10,
    );
}

/// The queueless forms and the keyed limiters take the caller's bound too.
#[test]
fn settle_within_bounds_queueless_and_keyed_debts() {
    let clock = ManualClock::new();
    let opts = TokenBucketOptions::new(10, 10, SEC);
    let bare = TokenBucketLimiter::without_queue(opts, &clock).unwrap();
    let mut lease = bare.try_acquire(10).unwrap();
    assert_eq!(
        bare.settle_within(&mut lease, 13, 2),
        Err(SettleError::DebtLimit)
    );
    bare.settle_within(&mut lease, 12, 2).unwrap();
    assert_eq!(lease.permits(), 12);

    let keyed: KeyedLimiter<str, _> =
        KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::new(16), &clock).unwrap();
    let mut lease = keyed.try_acquire("k", 10).unwrap();
    assert_eq!(
        keyed.settle_within("k", &mut lease, 13, 2),
        Err(SettleError::DebtLimit)
    );
    keyed.settle_within("k", &mut lease, 12, 2).unwrap();
    let r = keyed.try_acquire("k", 1).unwrap_err();
    // Two owed and one asked: three tokens, one refill of 10 a second.
    assert_eq!(r.retry_after(), Some(SEC));

    let gcra: KeyedLimiter<u8, _> = KeyedLimiter::gcra_with_clock(
        GcraOptions::per_second(10),
        PartitionConfig::new(16),
        &clock,
    )
    .unwrap();
    let mut lease = gcra.try_acquire(&1u8, 10).unwrap();
    assert_eq!(
        gcra.settle_within(&1, &mut lease, 14, 3),
        Err(SettleError::DebtLimit)
    );
    gcra.settle_within(&1, &mut lease, 13, 3).unwrap();

    let fixed: FixedKeyedLimiter<u8, _, 8> =
        FixedKeyedLimiter::token_bucket(opts, PartitionConfig::new(4), &clock).unwrap();
    let mut lease = fixed.try_acquire(&1, 10).unwrap();
    assert_eq!(
        fixed.settle_within(&1, &mut lease, 11, 0),
        Err(SettleError::DebtLimit)
    );
    fixed.settle_within(&1, &mut lease, 10, 0).unwrap();

    let pool = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(4)).unwrap());
    let mut owned = pool.try_acquire_owned(4).unwrap();
    assert_eq!(owned.settle_within(6, 1), Err(SettleError::DebtLimit));
    owned.settle_within(5, 1).unwrap();
    drop(owned);
    assert_eq!(pool.available_permits(), 4);
}
