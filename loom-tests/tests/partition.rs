//! loom models of the partitioned and chained limiters: creating a new key from two threads at
//! once, evicting a key while a request acquires on it, and a chain's rollback racing a release.
//!
//! The partitioned limiters run with one shard (`with_shards(1)`), so that every lock the models
//! take is the one the race is about.
#![cfg(loom)]

use std::sync::Arc;
use std::time::Duration;

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use tollgate::{
    Chain, Clock, ConcurrencyLimiter, ConcurrencyOptions, Factory, FixedPartitioned, KeyedLimiter,
    Limiter, ManualClock, Partition, PartitionConfig, PartitionKind, PartitionLimiter, Partitioned,
    TokenBucketOptions,
};
use tollgate_loom_tests::{check, ThreadClock};

type Clk = Arc<ManualClock>;

/// A factory of `kind` that counts its calls.
#[derive(Clone)]
struct Counting {
    kind: PartitionKind,
    created: Arc<AtomicUsize>,
}

impl<K, C: Clock + Clone> Factory<K, C> for Counting {
    type Limiter = PartitionLimiter<C>;
    fn create(self, _key: &K, clock: &C) -> PartitionLimiter<C> {
        self.created.fetch_add(1, Ordering::SeqCst);
        self.kind.limiter(clock.clone())
    }
}

fn config() -> PartitionConfig {
    PartitionConfig::new(8).with_shards(1)
}

fn concurrency_kind(permits: u32) -> PartitionKind {
    PartitionKind::concurrency(ConcurrencyOptions::new(permits)).unwrap()
}

/// Two threads acquire on a key nobody has used: the factory runs once, both requests go to
/// the one limiter it made, and one partition is stored.
#[test]
fn two_threads_create_the_same_new_key_once() {
    check(|| {
        let clock: Clk = Arc::new(ManualClock::new());
        let created = Arc::new(AtomicUsize::new(0));
        let factory = Counting {
            kind: concurrency_kind(2),
            created: created.clone(),
        };
        let limiter = Arc::new(Partitioned::with_clock(
            move |k: &u32| Partition::new(*k, factory.clone()),
            config(),
            clock,
        ));
        let spawn = |l: &Arc<Partitioned<_, _, _, Clk>>| {
            let l = l.clone();
            thread::spawn(move || l.try_acquire(&7, 1).map(|lease| lease.permits()))
        };
        let (a, b) = (spawn(&limiter), spawn(&limiter));
        let (ra, rb) = (a.join().unwrap(), b.join().unwrap());
        assert_eq!((ra, rb), (Ok(1), Ok(1)));
        assert_eq!(created.load(Ordering::SeqCst), 1);
        assert_eq!(limiter.len(), 1);
        // Both leases were dropped in their threads: both permits came back to the one limiter.
        assert_eq!(limiter.statistics(&7).available_permits, 2);
        assert_eq!(limiter.statistics(&7).total_successful, 2);
    });
}

/// The same race on the fixed-capacity (heapless) store.
#[test]
fn two_threads_create_the_same_new_key_once_in_a_fixed_table() {
    check(|| {
        let clock: Clk = Arc::new(ManualClock::new());
        let created = Arc::new(AtomicUsize::new(0));
        let factory = Counting {
            kind: concurrency_kind(2),
            created: created.clone(),
        };
        let limiter: Arc<FixedPartitioned<u32, _, _, Clk, 4>> = Arc::new(FixedPartitioned::new(
            move |k: &u32| Partition::new(*k, factory.clone()),
            config(),
            clock,
        ));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let l = limiter.clone();
                thread::spawn(move || {
                    let lease = l.try_acquire(&7, 1).unwrap();
                    lease.forget_for_test()
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(created.load(Ordering::SeqCst), 1);
        assert_eq!(limiter.len(), 1);
        assert_eq!(limiter.statistics(&7).available_permits, 0);
    });
}

/// Ends a fixed-table lease without giving its permits back, so the model can count them.
trait ForgetForTest {
    fn forget_for_test(self);
}
impl<T> ForgetForTest for T {
    fn forget_for_test(self) {
        std::mem::forget(self);
    }
}

const SEC: u64 = 1_000_000_000;

/// A key is evicted for idleness by one thread while another acquires on it. The acquiring
/// thread read the clock a little earlier (9 s: the key is not yet past the 10 s timeout, so its
/// own call sweeps nothing), the evicting one later (11 s). The acquisition is never lost on an
/// evicted limiter: either it comes first (the partition is in use and stays) or the eviction
/// does (the request creates a fresh partition). While the lease is held, the stored partition
/// is the one that granted it.
#[test]
fn eviction_racing_acquire_on_the_key() {
    check(|| {
        ThreadClock::set(0);
        let kind = concurrency_kind(1);
        let limiter = Arc::new(Partitioned::with_clock(
            move |k: &u32| Partition::new(*k, kind),
            config(),
            ThreadClock,
        ));
        drop(limiter.try_acquire(&7, 1).unwrap()); // idle from 0 s
        let acquirer = {
            let l = limiter.clone();
            thread::spawn(move || {
                ThreadClock::set(9 * SEC);
                l.try_acquire(&7, 1).ok()
            })
        };
        let evictor = {
            let l = limiter.clone();
            thread::spawn(move || {
                ThreadClock::set(11 * SEC);
                l.evict_idle();
            })
        };
        evictor.join().unwrap();
        let lease = acquirer
            .join()
            .unwrap()
            .expect("a stored or fresh partition grants");
        ThreadClock::set(11 * SEC);
        assert_eq!(limiter.len(), 1);
        assert_eq!(limiter.statistics(&7).available_permits, 0);
        drop(lease);
        assert_eq!(limiter.statistics(&7).available_permits, 1);
    });
}

/// A full limiter evicts the idle partition of key 7 to make room for key 8, while another
/// thread acquires on key 7. Whatever the order, the two agree: if key 7's request was granted,
/// key 7's stored partition holds the permit (and key 8 was refused); if key 8 got the room,
/// key 7's request was refused for capacity.
#[test]
fn capacity_eviction_racing_acquire_on_the_key() {
    check(|| {
        ThreadClock::set(0);
        let kind = concurrency_kind(1);
        let limiter = Arc::new(Partitioned::with_clock(
            move |k: &u32| Partition::new(*k, kind),
            PartitionConfig::new(1).with_shards(1),
            ThreadClock,
        ));
        drop(limiter.try_acquire(&7, 1).unwrap()); // idle from 0 s
        let spawn = |key: u32| {
            let l = limiter.clone();
            thread::spawn(move || {
                ThreadClock::set(SEC);
                l.try_acquire(&key, 1).ok()
            })
        };
        let (t7, t8) = (spawn(7), spawn(8));
        let (l7, l8) = (t7.join().unwrap(), t8.join().unwrap());
        ThreadClock::set(SEC);
        assert_eq!(limiter.len(), 1);
        assert!(l7.is_some() != l8.is_some(), "exactly one key has the room");
        let holder = if l7.is_some() { 7 } else { 8 };
        assert_eq!(limiter.statistics(&holder).available_permits, 0);
        assert_eq!(
            limiter.statistics(&holder).total_successful,
            if holder == 7 { 2 } else { 1 }
        );
    });
}

/// The compact keyed form: a key's word evicted while a request takes from it (the taker read
/// the clock at 9 s, the evictor at 13 s; the key has been full since 1 s). The take is never
/// lost: afterwards the stored word shows it.
#[test]
fn keyed_eviction_racing_acquire_on_the_key() {
    check(|| {
        ThreadClock::set(0);
        let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
        let limiter = Arc::new(
            KeyedLimiter::<u32, _>::token_bucket_with_clock(opts, config(), ThreadClock).unwrap(),
        );
        let _ = limiter.try_acquire(&7, 1).unwrap(); // full again at 1 s
        let acquirer = {
            let l = limiter.clone();
            thread::spawn(move || {
                ThreadClock::set(9 * SEC);
                l.try_acquire(&7, 2).is_ok()
            })
        };
        let evictor = {
            let l = limiter.clone();
            thread::spawn(move || {
                ThreadClock::set(13 * SEC);
                l.evict_idle();
            })
        };
        evictor.join().unwrap();
        assert!(acquirer.join().unwrap());
        ThreadClock::set(9 * SEC);
        assert_eq!(limiter.len(), 1);
        assert_eq!(limiter.statistics(&7).available_permits, 0);
    });
}

/// A hasher that hands the key (a `u64`) through as its hash, so that a model can choose where
/// keys land in the keyed limiter's table.
#[derive(Clone, Copy, Default)]
struct Identity;

impl std::hash::BuildHasher for Identity {
    type Hasher = IdentityHasher;
    fn build_hasher(&self) -> IdentityHasher {
        IdentityHasher(0)
    }
}

struct IdentityHasher(u64);

impl std::hash::Hasher for IdentityHasher {
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys")
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The keyed table's backward shift racing a reader: keys A and B share a home slot, so B sits
/// one past it. Evicting A moves B back into A's slot (freezing B's old copy first) while another
/// thread takes a token from B. The take is never lost on the old copy: afterwards B shows it.
/// (The taker read the clock at 9 s, before anything could pass the idle timeout, so it sweeps
/// nothing itself; the evictor, at 12 s, finds A idle for 11 s.)
#[test]
fn keyed_backward_shift_racing_a_take() {
    const A: u64 = 0x4000_0000_0000_0000;
    const B: u64 = A + (1 << 20); // another fingerprint, the same home
    check(|| {
        ThreadClock::set(0);
        let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
        let config = PartitionConfig::new(3).with_shards(1);
        let limiter = Arc::new(
            KeyedLimiter::<u64, _, _>::with_hasher_token_bucket(
                opts,
                config,
                ThreadClock,
                Identity,
            )
            .unwrap(),
        );
        let _ = limiter.try_acquire(&A, 1).unwrap(); // full again at 1 s
        ThreadClock::set(5 * SEC);
        limiter.evict_idle(); // A idle 4 s: kept; nothing can pass the timeout before 11 s
        let _ = limiter.try_acquire(&B, 1).unwrap(); // B lands after A
        let taker = {
            let l = limiter.clone();
            thread::spawn(move || {
                ThreadClock::set(9 * SEC);
                l.try_acquire(&B, 1).is_ok()
            })
        };
        let evictor = {
            let l = limiter.clone();
            thread::spawn(move || {
                ThreadClock::set(12 * SEC);
                l.evict_idle();
            })
        };
        evictor.join().unwrap();
        assert!(taker.join().unwrap());
        ThreadClock::set(9 * SEC);
        assert_eq!(limiter.len(), 1, "A evicted, B kept");
        assert_eq!(
            limiter.statistics(&B).available_permits,
            1,
            "B's take was kept"
        );
    });
}

/// A chain's rollback racing a release: the chain takes from `a`, finds `b` held, and gives
/// `a`'s permit back — while another thread releases `b`. Whatever the order, no permit is lost
/// or duplicated: the chain either got both or neither, and in the end both limiters are full.
#[test]
fn chain_rollback_racing_release() {
    check(|| {
        let opts = ConcurrencyOptions::new(1);
        let a = Arc::new(ConcurrencyLimiter::with_clock(opts, ManualClock::new()).unwrap());
        let b = Arc::new(ConcurrencyLimiter::with_clock(opts, ManualClock::new()).unwrap());
        let held_b = b.try_acquire(1).unwrap().forget();
        let chainer = {
            let (a, b) = (a.clone(), b.clone());
            thread::spawn(move || {
                let chain = Chain::new((&*a, &*b));
                let granted = match chain.try_acquire(1) {
                    Ok(lease) => {
                        // Both taken, nothing else can have them.
                        assert_eq!((a.available_permits(), b.available_permits()), (0, 0));
                        drop(lease);
                        true
                    }
                    Err(_) => false,
                };
                granted
            })
        };
        let releaser = {
            let b = b.clone();
            thread::spawn(move || tollgate::Release::release(&*b, held_b))
        };
        releaser.join().unwrap();
        let _granted = chainer.join().unwrap();
        assert_eq!((a.available_permits(), b.available_permits()), (1, 1));
    });
}

/// Two chains over the same two limiters, in opposite orders, each with one permit per limiter:
/// their rollbacks race each other. At most one gets both; no permit leaks.
#[test]
fn opposite_chains_roll_back_without_leaking() {
    check(|| {
        let opts = ConcurrencyOptions::new(1);
        let a = Arc::new(ConcurrencyLimiter::with_clock(opts, ManualClock::new()).unwrap());
        let b = Arc::new(ConcurrencyLimiter::with_clock(opts, ManualClock::new()).unwrap());
        let run = |first: &Arc<ConcurrencyLimiter<ManualClock>>,
                   second: &Arc<ConcurrencyLimiter<ManualClock>>| {
            let (x, y) = (first.clone(), second.clone());
            thread::spawn(move || {
                let chain = Chain::new((&*x, &*y));
                let granted = chain.try_acquire(1).map(|l| l.forget_for_test()).is_ok();
                granted
            })
        };
        let (t1, t2) = (run(&a, &b), run(&b, &a));
        let (g1, g2) = (t1.join().unwrap(), t2.join().unwrap());
        assert!(!(g1 && g2), "both chains cannot hold both permits");
        let held = u64::from(g1 || g2);
        assert_eq!(a.available_permits(), 1 - held);
        assert_eq!(b.available_permits(), 1 - held);
    });
}

/// `close()` racing the insertion of a new key (issue 9, item 14): whatever the order, once both
/// are done no key is stored. (Before the fix the closed flag was read before the insertion
/// path, not under the shard lock, so a request that read "open" could store its key after
/// `close()` had emptied the table.)
#[test]
fn keyed_close_racing_a_new_key_leaves_nothing_stored() {
    check(|| {
        let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
        let limiter = Arc::new(
            KeyedLimiter::<u32, _>::token_bucket_with_clock(opts, config(), ManualClock::new())
                .unwrap(),
        );
        let taker = {
            let l = limiter.clone();
            thread::spawn(move || l.try_acquire(&7, 1).is_ok())
        };
        limiter.close();
        let _granted = taker.join().unwrap();
        assert!(limiter.is_closed());
        assert_eq!(limiter.len(), 0, "a key stored after close");
        assert!(limiter.try_acquire(&7, 1).is_err());
    });
}

/// The same race on the growable store: a new partition is never left stored (and open) after
/// `close()`.
#[test]
fn partitioned_close_racing_a_new_key_leaves_nothing_stored() {
    check(|| {
        let clock: Clk = Arc::new(ManualClock::new());
        let kind = concurrency_kind(1);
        let limiter = Arc::new(Partitioned::with_clock(
            move |k: &u32| Partition::new(*k, kind),
            config(),
            clock,
        ));
        let taker = {
            let l = limiter.clone();
            thread::spawn(move || l.try_acquire(&7, 1).map(|lease| lease.permits()).ok())
        };
        limiter.close();
        let _granted = taker.join().unwrap();
        assert_eq!(limiter.len(), 0, "a partition stored after close");
    });
}

/// The same race on the fixed-capacity store.
#[test]
fn fixed_close_racing_a_new_key_leaves_nothing_stored() {
    check(|| {
        let clock: Clk = Arc::new(ManualClock::new());
        let kind = concurrency_kind(1);
        let limiter: Arc<FixedPartitioned<u32, _, _, Clk, 4>> = Arc::new(FixedPartitioned::new(
            move |k: &u32| Partition::new(*k, kind),
            config(),
            clock,
        ));
        let taker = {
            let l = limiter.clone();
            thread::spawn(move || l.try_acquire(&7, 1).map(|l| l.forget_for_test()).is_ok())
        };
        limiter.close();
        let _granted = taker.join().unwrap();
        assert_eq!(limiter.len(), 0, "a partition stored after close");
    });
}

/// A factory runs under no lock (issue 9, item 15): key 1's factory cannot finish until key 2 —
/// in the same, only shard — has been served by another thread. Before the fix the factory ran
/// under the shard's write lock, key 2's request waited for that lock, and the model never
/// finished (loom's branch limit). Key 1's limiter is still made once, and both keys are stored.
#[test]
fn a_waiting_factory_does_not_block_other_keys_of_its_shard() {
    use loom::sync::atomic::AtomicBool;
    check(|| {
        let clock: Clk = Arc::new(ManualClock::new());
        let kind = concurrency_kind(1);
        let key2_done = Arc::new(AtomicBool::new(false));
        let created = Arc::new(AtomicUsize::new(0));
        let limiter = {
            let (key2_done, created) = (key2_done.clone(), created.clone());
            Arc::new(Partitioned::with_clock(
                move |k: &u32| {
                    let (key2_done, created) = (key2_done.clone(), created.clone());
                    Partition::new(*k, move |key: &u32, clock: &Clk| {
                        created.fetch_add(1, Ordering::SeqCst);
                        if *key == 1 {
                            while !key2_done.load(Ordering::Acquire) {
                                thread::yield_now();
                            }
                        }
                        kind.limiter(clock.clone())
                    })
                },
                config(),
                clock,
            ))
        };
        let maker = {
            let l = limiter.clone();
            thread::spawn(move || l.try_acquire(&1, 1).map(|lease| lease.permits()))
        };
        assert_eq!(limiter.try_acquire(&2, 1).map(|l| l.permits()), Ok(1));
        key2_done.store(true, Ordering::Release);
        assert_eq!(maker.join().unwrap(), Ok(1));
        assert_eq!(created.load(Ordering::SeqCst), 2);
        assert_eq!(limiter.len(), 2);
    });
}
