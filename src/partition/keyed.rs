//! [`KeyedLimiter`]: the compact keyed token bucket / fixed window / GCRA / leaky meter /
//! sliding counter (feature `std`). Its constructors are in `keyed/constructors.rs`.

use core::cell::Cell;
use core::fmt;
use core::hash::{BuildHasher, Hash};
use core::marker::PhantomData;
use core::time::Duration;
use std::hash::RandomState;

use crossbeam_utils::CachePadded;

use super::evict::{self, Idle, Marks, Policy};
use super::keyed_state::{KeyedRule, Rule};
use super::table::{self, fingerprint, Table};
use super::PartitionedLimiter;
use crate::clock::{Clock, Instant, StdClock};
use crate::lease::{Lease, Reason, Rejection, Release, SettleError, Settlement, Statistics};
use crate::stats::Counters as Tally;
use crate::sync::{AtomicBool, AtomicU64, Ordering};
use crate::wait::Lock;

mod constructors;

/// One shard: a fixed table, its share of the capacity, and the lock its writers take.
struct Shard {
    table: Table,
    cap: usize,
    meta: Lock<Meta>,
    /// A copy of `meta.marks.next_sweep`, read without the lock.
    next_sweep: AtomicU64,
    rejected_full: AtomicU64,
}

/// What the shard's writers keep under its lock.
struct Meta {
    len: usize,
    marks: Marks,
}

/// The table as eviction sees it, under the lock.
struct View<'a> {
    table: &'a Table,
    len: &'a mut usize,
}

impl evict::Table for View<'_> {
    type Value = u128;
    fn len(&self) -> usize {
        *self.len
    }
    fn retain(&mut self, mut keep: impl FnMut(&u128) -> bool) {
        let mut gone = Vec::new();
        self.table.for_each(|w| {
            if !keep(&w) {
                gone.push(w);
            }
        });
        for w in gone {
            // Only if the word is still the one judged: a request that changed it meanwhile
            // made the key busy again, and it stays.
            if self.table.remove(w) {
                *self.len -= 1;
            }
        }
    }
    fn for_each(&self, mut f: impl FnMut(&u128)) {
        self.table.for_each(|w| f(&w));
    }
}

/// A token bucket, fixed window, GCRA, leaky meter or sliding-window counter per key, for
/// millions of keys: the hot-path form of a partitioned limiter (feature `std`).
///
/// Each key behaves exactly as its own [`TokenBucketLimiter`](crate::TokenBucketLimiter) (or
/// [`FixedWindowLimiter`](crate::FixedWindowLimiter), [`GcraLimiter`](crate::GcraLimiter),
/// [`LeakyBucketMeter`](crate::LeakyBucketMeter),
/// [`SlidingCounterLimiter`](crate::SlidingCounterLimiter)) would, had it been created with this
/// limiter and left idle until the key's first request. Options, the time scale (periods and
/// windows count from this limiter's creation, for every key), the clock and the counters are
/// shared; per key there is only a 64-bit state — the token-time at which its bucket is full,
/// an exact folding of the bucket's tokens and tick (GCRA: the theoretical arrival time; the
/// sliding counter: both counts and the window index) — and the key's fingerprint.
///
/// - **Memory**: 16 bytes per slot (fingerprint and state in one atomic word, whatever the key
///   type), `4/3 × capacity` slots, allocated once at construction: about 21 bytes per key of
///   capacity, never more, under any flood of keys.
/// - **Time**: one hash, a lock-free probe (usually one cache line) and one compare-and-swap
///   per decision; storing a new key takes its shard's lock.
/// - **Keys are fingerprints**: a key is stored as a 62-bit keyed hash of it (SipHash with
///   random keys by default), so keys need only `Hash` — no `Clone`, no `Eq`, `str` works as
///   it is. Two keys with the same fingerprint share one bucket (for a million keys, odds of
///   about 1 in 10^7 that any two do; sharing only limits more). Keep a keyed hasher if clients
///   choose their keys.
/// - A new key's bucket is full, so the first request of a key is granted (up to the limit); a
///   probe (`try_acquire(key, 0)`) of an unknown key is granted without storing it.
/// - Idle keys (full buckets; for the sliding counter, both counts expired) are evicted after
///   the idle timeout, lazily; since an idle state is what a new key gets, evicting one never
///   changes a decision.
/// - Rates up to one token per 2 ns per key (5e8 a second): the state's token-time must not
///   overflow in the 584 years a nanosecond clock spans. Faster rates are refused with
///   [`OptionsError::RateTooHigh`](crate::OptionsError::RateTooHigh). The sliding counter's
///   two counts and window index share the 64 bits exactly, so its limit is bounded by its
///   window (about `√(2 × window in ns)`: 32,767 a second, 262,143 a minute); a larger one is
///   refused with [`OptionsError::LimitTooLarge`](crate::OptionsError::LimitTooLarge).
/// - Not here: waiting (no queue: the options' queue settings are ignored) and per-key counters
///   ([`statistics`](Self::statistics) gives the key's tokens and the limiter's totals). Use
///   [`Partitioned`](crate::Partitioned) for those.
///
/// ```
/// use core::time::Duration;
/// use tollgate::*;
///
/// let clock = ManualClock::new();
/// let opts = TokenBucketOptions::new(5, 1, Duration::from_secs(1));
/// let per_ip = KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::new(1_000_000), &clock).unwrap();
///
/// let ip: std::net::IpAddr = "192.0.2.7".parse().unwrap();
/// let _ = per_ip.try_acquire(&ip, 5).unwrap();
/// let r = per_ip.try_acquire(&ip, 2).unwrap_err();
/// assert_eq!(r.retry_after(), Some(Duration::from_secs(2)));
/// assert!(per_ip.try_acquire(&"192.0.2.8".parse().unwrap(), 1).is_ok());
/// assert_eq!(per_ip.len(), 2);
/// clock.advance(Duration::from_secs(1));
/// assert_eq!(per_ip.statistics(&ip).available_permits, 1);
///
/// // Unsized keys work as they are.
/// let per_user: KeyedLimiter<str, _> =
///     KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::default(), &clock).unwrap();
/// assert!(per_user.try_acquire("alice", 1).is_ok());
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub struct KeyedLimiter<K: ?Sized, C = StdClock, S = RandomState> {
    shards: Box<[CachePadded<Shard>]>,
    bucket: KeyedRule,
    clock: C,
    hasher: S,
    policy: Policy,
    /// The latest tick any decision has seen: no decision reads time before it.
    max_tick: CachePadded<AtomicU64>,
    tally: Tally,
    closed: AtomicBool,
    _key: PhantomData<fn(&K)>,
}

/// Bytes of one table slot.
const SLOT_BYTES: usize = 16;

impl<K: ?Sized, C: Clock, S> KeyedLimiter<K, C, S> {
    /// The most permits one request can take (the token limit, or permits per window).
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
    /// let per_user: KeyedLimiter<str, _> =
    ///     KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::new(1_000), &clock).unwrap();
    /// assert_eq!(per_user.limit(), 2);
    /// // More than the limit is never granted: no retry helps.
    /// assert_eq!(per_user.try_acquire("alice", 3).unwrap_err().retry_after(), None);
    /// ```
    pub fn limit(&self) -> u32 {
        self.bucket.limit()
    }

    /// The replenishment period, or the window.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
    /// let per_user: KeyedLimiter<str, _> =
    ///     KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::new(1_000), &clock).unwrap();
    /// assert_eq!(per_user.period(), Duration::from_secs(1));
    /// ```
    pub fn period(&self) -> Duration {
        self.bucket.period()
    }

    /// Keys stored now.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
    /// let per_user: KeyedLimiter<str, _> =
    ///     KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::new(1_000), &clock).unwrap();
    /// let _ = per_user.try_acquire("alice", 1).unwrap();
    /// let _ = per_user.try_acquire("bob", 1).unwrap();
    /// let _ = per_user.try_acquire("carol", 0).unwrap(); // a probe stores nothing
    /// assert_eq!(per_user.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.meta.with(|m| m.len)).sum()
    }

    /// Whether no key is stored.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
    /// let per_user: KeyedLimiter<str, _> =
    ///     KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::new(1_000), &clock).unwrap();
    /// assert!(per_user.is_empty());
    /// let _ = per_user.try_acquire("alice", 1).unwrap();
    /// assert!(!per_user.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most keys stored at once (the configured capacity, rounded up per shard).
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
    /// let per_user: KeyedLimiter<str, _> =
    ///     KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::new(1_000), &clock).unwrap();
    /// assert_eq!(per_user.capacity(), 1_000);
    /// ```
    pub fn capacity(&self) -> usize {
        self.shards.iter().map(|s| s.cap).sum()
    }

    /// Bytes the limiter allocated for its tables: fixed at construction.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
    /// let per_user: KeyedLimiter<str, _> =
    ///     KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::new(1_000), &clock).unwrap();
    /// let bytes = per_user.table_bytes();
    /// assert!(bytes >= 16 * 1_000); // 16 bytes a slot, more slots than keys
    /// let _ = per_user.try_acquire("alice", 1).unwrap();
    /// assert_eq!(per_user.table_bytes(), bytes); // no growth
    /// ```
    pub fn table_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.table.len() * SLOT_BYTES).sum()
    }

    /// Requests refused with [`Reason::PartitionsFull`] so far.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
    /// let config = PartitionConfig::new(1).with_when_full(WhenFull::Reject);
    /// let per_user: KeyedLimiter<str, _> = KeyedLimiter::token_bucket_with_clock(opts, config, &clock).unwrap();
    /// let _ = per_user.try_acquire("alice", 1).unwrap();
    /// assert_eq!(per_user.try_acquire("bob", 1).unwrap_err().reason(), Reason::PartitionsFull);
    /// assert_eq!(per_user.rejected_for_capacity(), 1);
    /// ```
    pub fn rejected_for_capacity(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.rejected_full.load(Ordering::Relaxed))
            .sum()
    }

    /// Closes the limiter: later requests are rejected with [`Reason::Closed`]; the stored keys
    /// are dropped.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
    /// let per_user: KeyedLimiter<str, _> =
    ///     KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::new(1_000), &clock).unwrap();
    /// let _ = per_user.try_acquire("alice", 1).unwrap();
    /// per_user.close();
    /// assert!(per_user.is_empty());
    /// assert_eq!(per_user.try_acquire("alice", 1).unwrap_err().reason(), Reason::Closed);
    /// ```
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        for s in self.shards.iter() {
            s.meta.with(|m| {
                s.table.clear();
                m.len = 0;
            });
        }
    }

    /// Whether [`close`](Self::close) has been called.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
    /// let per_user: KeyedLimiter<str, _> =
    ///     KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::new(1_000), &clock).unwrap();
    /// assert!(!per_user.is_closed());
    /// per_user.close();
    /// assert!(per_user.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Evicts every key idle for longer than the idle timeout, now (calls do it lazily).
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
    /// let per_user: KeyedLimiter<str, _> =
    ///     KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::new(1_000), &clock).unwrap();
    /// let _ = per_user.try_acquire("alice", 2).unwrap();
    /// clock.advance(Duration::from_secs(30)); // full again, and idle past the 10 s timeout
    /// per_user.evict_idle();
    /// assert!(per_user.is_empty());
    /// ```
    pub fn evict_idle(&self) {
        let now = self.clock.now();
        for s in self.shards.iter() {
            self.sweep(s, now);
        }
    }

    /// The tick of a reading and the nanoseconds into it, published for later decisions (no
    /// decision reads time before the latest tick any decision has seen).
    #[inline]
    fn publish(&self, (k, into): (u64, u64)) -> (u64, u64) {
        if k > self.max_tick.load(Ordering::Relaxed) {
            self.max_tick.fetch_max(k, Ordering::AcqRel);
        }
        (k, into)
    }

    /// `(k, into)`, moved up to the latest tick any decision has seen: a reading behind it
    /// counts as no time passing (the tick just started).
    #[inline]
    fn at_least_latest(&self, (k, into): (u64, u64)) -> (u64, u64) {
        let floor = self.max_tick.load(Ordering::Relaxed);
        if k >= floor {
            (k, into)
        } else {
            (floor, 0)
        }
    }

    fn idle_fn(&self, now: Instant) -> impl Fn(&u128) -> Idle + '_ {
        let k = self
            .bucket
            .tick(now)
            .max(self.max_tick.load(Ordering::Acquire));
        move |w: &u128| self.bucket.v_idle(table::state(*w), k, now)
    }

    fn sweep(&self, s: &Shard, now: Instant) {
        s.meta.with(|m| {
            let mut view = View {
                table: &s.table,
                len: &mut m.len,
            };
            self.policy
                .sweep(&mut view, now.as_nanos(), &mut m.marks, self.idle_fn(now));
            s.next_sweep.store(m.marks.next_sweep, Ordering::Relaxed);
        });
    }

    #[inline]
    fn shard(&self, fp: u64) -> &Shard {
        let i = (u128::from(fp.rotate_left(31)) * self.shards.len() as u128) >> 64;
        &self.shards[i as usize]
    }

    /// One decision for the key of fingerprint `fp`: one match on the rule, then that rule's
    /// own copy of the decision (no further match on the way). Always inlined: with `#[inline]`
    /// the keyed benchmarks counted 1 or 2 instructions more since `decide_by` shares
    /// [`key_at`](Self::key_at) and [`update_or_insert`](Self::update_or_insert) with
    /// `settle_by`; always inlined, no more than before.
    #[inline(always)]
    fn decide(&self, fp: u64, permits: u32) -> Result<u64, Rejection> {
        match &self.bucket {
            KeyedRule::Bucket(r) => self.decide_by(r, fp, permits),
            KeyedRule::Gcra(r) => self.decide_by(r, fp, permits),
            KeyedRule::Sliding(r) => self.decide_by(r, fp, permits),
        }
    }

    /// One decision by `rule` (the limiter's) for the key of fingerprint `fp`; granted, the
    /// rule's time of the decision (the lease's stamp, for a settle).
    #[inline(always)]
    fn decide_by(&self, rule: &impl Rule, fp: u64, permits: u32) -> Result<u64, Rejection> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(Rejection::new(&Reason::Closed));
        }
        if permits > rule.most() {
            return Err(Rejection::new(&Reason::ExceedsLimit));
        }
        let (now, at, shard) = self.key_at(rule, fp, true);
        let seen = Cell::new((0, 0, 0));
        let take = |v: u64| {
            // Read after the state: never before the tick of the decision that wrote it.
            let (k, into) = self.at_least_latest(at);
            seen.set((v, k, into));
            rule.take_from(v, k, into, permits)
        };
        let done = match self.update_or_insert(shard, fp, now, permits != 0, &take)? {
            Some(done) => done,
            None => return Ok(rule.stamp(at.0)), // a fresh bucket is full: nothing to store
        };
        done.map(|()| rule.stamp(seen.get().1)).map_err(|()| {
            let (v, k, into) = seen.get();
            rule.refusal(v, k, into, permits)
        })
    }

    /// Settles, for the key of fingerprint `fp`, a lease as `s` says, by `rule`. A key no
    /// longer stored was full (an idle key is evicted only when full, and a key in debt is
    /// not idle): a refund has nothing to give back, a debit stores the key again, if there
    /// is room.
    fn settle_by(&self, rule: &impl Rule, fp: u64, s: Settlement) -> Result<(), SettleError> {
        let (now, at, shard) = self.key_at(rule, fp, false);
        let why = Cell::new(SettleError::DebtLimit);
        let settle = |v: u64| {
            let (k, into) = self.at_least_latest(at);
            rule.settle_from(v, k, into, s).map_err(|e| why.set(e))
        };
        let stepped = self.update_or_insert(shard, fp, now, s.actual > s.held, &settle);
        let done = match stepped.map_err(|_| SettleError::DebtLimit)? {
            Some(done) => done,
            None => return Ok(()),
        };
        done.map_err(|()| why.get())
    }

    /// Where a decision or a settle starts: the clock read, its tick by `rule` published, and
    /// the shard of the key of fingerprint `fp`, swept first if `sweep` and a sweep is due.
    #[inline(always)]
    fn key_at(&self, rule: &impl Rule, fp: u64, sweep: bool) -> (Instant, (u64, u64), &Shard) {
        let now = self.clock.now();
        let at = self.publish(rule.time_of(now));
        let shard = self.shard(fp);
        if sweep && now.as_nanos() >= shard.next_sweep.load(Ordering::Relaxed) {
            self.sweep(shard, now);
        }
        (now, at, shard)
    }

    /// `step` applied to the state of the key of fingerprint `fp` (see [`Table::update`]). A
    /// key not stored is stored first, if `store` (and there is room: else the rejection),
    /// then stepped; else `None`, and nothing is stored.
    #[inline(always)]
    fn update_or_insert(
        &self,
        shard: &Shard,
        fp: u64,
        now: Instant,
        store: bool,
        step: &impl Fn(u64) -> Result<u64, ()>,
    ) -> Result<Option<Result<(), ()>>, Rejection> {
        // A closure calling `step`, not `step` itself: through the reference the decision
        // stayed behind an outlined `FnMut for &F` shim (40 instructions a call more).
        #[allow(clippy::redundant_closure)]
        match shard.table.update(fp, |v| step(v)) {
            Some(done) => Ok(Some(done)),
            None if !store => Ok(None),
            None => self.insert(shard, fp, now, step).map(Some),
        }
    }

    /// The slow path: stores `fp` (under its shard's lock, if there is room), then `take`s.
    #[cold]
    fn insert(
        &self,
        shard: &Shard,
        fp: u64,
        now: Instant,
        take: &impl Fn(u64) -> Result<u64, ()>,
    ) -> Result<Result<(), ()>, Rejection> {
        shard.meta.with(|m| {
            // Under the lock: `close` sets the flag before it empties each shard under this
            // lock, so either it empties the table after this insertion or this sees the flag.
            if self.closed.load(Ordering::Acquire) {
                return Err(Rejection::new(&Reason::Closed));
            }
            if shard.table.position(fp).is_none() {
                let mut view = View {
                    table: &shard.table,
                    len: &mut m.len,
                };
                let room = self.policy.make_room(
                    &mut view,
                    shard.cap,
                    now.as_nanos(),
                    &mut m.marks,
                    self.idle_fn(now),
                );
                shard
                    .next_sweep
                    .store(m.marks.next_sweep, Ordering::Relaxed);
                if !room {
                    shard.rejected_full.fetch_add(1, Ordering::Relaxed);
                    return Err(Rejection::new(&Reason::PartitionsFull));
                }
                shard.table.insert(fp, 0); // a full bucket
                m.len += 1;
            }
            // Readers may race this update, but nothing can remove the key: we hold the lock.
            Ok(shard.table.update(fp, take).unwrap_or(Err(())))
        })
    }
}

impl<K: Hash + ?Sized, C: Clock, S: BuildHasher> KeyedLimiter<K, C, S> {
    #[inline]
    fn fingerprint(&self, key: &K) -> u64 {
        fingerprint(self.hasher.hash_one(key))
    }

    /// Takes `permits` from `key`'s bucket now. A new key is stored when it takes permits, if
    /// there is room: else [`Reason::PartitionsFull`], and nothing is stored.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
    /// let per_user: KeyedLimiter<str, _> =
    ///     KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::new(1_000), &clock).unwrap();
    /// assert!(per_user.try_acquire("alice", 2).is_ok());
    /// let r = per_user.try_acquire("alice", 1).unwrap_err();
    /// assert_eq!(r.reason(), Reason::Exhausted);
    /// assert_eq!(r.retry_after(), Some(Duration::from_secs(1)));
    /// assert!(per_user.try_acquire("bob", 2).is_ok()); // bob has his own bucket
    /// ```
    #[inline]
    pub fn try_acquire(&self, key: &K, permits: u32) -> Result<Lease<'static>, Rejection> {
        // The lease is built where the grant is counted (a `map` afterwards moved the result
        // between two layouts).
        match self.decide(self.fingerprint(key), permits) {
            Ok(stamp) => self.tally.count_granted(Lease::detached(permits, stamp)),
            Err(r) => self.tally.count_rejected(r),
        }
    }

    /// Settles `lease`, granted for `key` by this limiter, to `actual` permits (see
    /// [`Lease::settle`]): a refund gives the difference back to `key`'s state as if it had
    /// never been taken (the token bucket's tokens, GCRA's and the leaky meter's arrival time,
    /// the sliding counter's count while its window still counts); a debit takes the extra,
    /// into debt for the token bucket, fixed window (one limit), GCRA and the leaky meter (one
    /// burst past the tolerance), where it fits for the sliding counter (its compact form keeps
    /// no debt, unlike `SlidingCounterLimiter`). Past the bound:
    /// [`SettleError::DebtLimit`], nothing taken. A key's lease refers to no limiter (it is
    /// one word of a table), so it settles through the limiter and its key; with another key
    /// or limiter the permits are accounted to the wrong one.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let minute = Duration::from_secs(60);
    /// let opts = TokenBucketOptions::new(10_000, 10_000, minute);
    /// let tokens: KeyedLimiter<str, _> =
    ///     KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::new(1_000), &clock).unwrap();
    /// let mut call = tokens.try_acquire("tenant-a", 1_000).unwrap();
    /// tokens.settle("tenant-a", &mut call, 312).unwrap(); // used 312: 688 back
    /// assert_eq!(tokens.statistics("tenant-a").available_permits, 9_688);
    /// tokens.settle("tenant-a", &mut call, 12_000).unwrap(); // used 12,000: into debt
    /// assert_eq!(tokens.statistics("tenant-a").available_permits, 0);
    /// let r = tokens.try_acquire("tenant-a", 1).unwrap_err();
    /// assert_eq!(r.retry_after(), Some(minute)); // the debt and the request: one refill
    /// assert_eq!(tokens.settle("tenant-a", &mut call, 30_000), Err(SettleError::DebtLimit));
    /// ```
    pub fn settle(&self, key: &K, lease: &mut Lease<'_>, actual: u32) -> Result<(), SettleError> {
        self.settle_within(key, lease, actual, u32::MAX)
    }

    /// [`settle`](Self::settle), leaving `key` owing at most `max_debt` permits (see
    /// [`Lease::settle_within`]; a debit where the key's own bound is lower takes that one).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(100, 100, Duration::from_secs(60));
    /// let tokens: KeyedLimiter<str, _> =
    ///     KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::new(16), &clock).unwrap();
    /// let mut call = tokens.try_acquire("a", 100).unwrap();
    /// assert_eq!(tokens.settle_within("a", &mut call, 130, 20), Err(SettleError::DebtLimit));
    /// tokens.settle_within("a", &mut call, 120, 20).unwrap();
    /// ```
    pub fn settle_within(
        &self,
        key: &K,
        lease: &mut Lease<'_>,
        actual: u32,
        max_debt: u32,
    ) -> Result<(), SettleError> {
        lease.settle_with_within(
            &KeySettle {
                limiter: self,
                fp: self.fingerprint(key),
            },
            actual,
            max_debt,
        )
    }

    /// `key`'s available tokens (the limit, if the key is not stored), and the limiter's totals:
    /// requests granted and refused over all keys. Nothing is queued: `queued_permits` is 0.
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
    /// let per_user: KeyedLimiter<str, _> =
    ///     KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::new(1_000), &clock).unwrap();
    /// let _ = per_user.try_acquire("alice", 2).unwrap();
    /// let _ = per_user.try_acquire("alice", 1).unwrap_err();
    /// let alice = per_user.statistics("alice");
    /// assert_eq!((alice.available_permits, alice.total_successful, alice.total_failed), (0, 1, 1));
    /// assert_eq!(per_user.statistics("bob").available_permits, 2); // not stored: full
    /// ```
    pub fn statistics(&self, key: &K) -> Statistics {
        let fp = self.fingerprint(key);
        let (k, into) = self.at_least_latest(self.bucket.tick_into(self.clock.now()));
        let available = match self.shard(fp).table.read(fp) {
            Some(v) => self.bucket.v_available(v, k, into),
            None => u64::from(self.bucket.limit()),
        };
        let (ok, ko) = self.tally.totals();
        Statistics {
            available_permits: available,
            queued_permits: 0,
            total_successful: ok,
            total_failed: ko,
        }
    }

    /// Resets `key`: forgets its state, so that its next request finds a full bucket (an
    /// empty window), exactly as a key never seen. Whether it was stored.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let opts = FixedWindowOptions::new(2, Duration::from_secs(60));
    /// let per_user: KeyedLimiter<str, _> =
    ///     KeyedLimiter::fixed_window_with_clock(opts, PartitionConfig::default(), &clock).unwrap();
    /// let _ = per_user.try_acquire("alice", 2).unwrap();
    /// assert!(per_user.try_acquire("alice", 1).is_err());
    /// assert!(per_user.remove("alice")); // say, alice upgraded her plan
    /// assert!(per_user.try_acquire("alice", 2).is_ok());
    /// assert!(!per_user.remove("bob")); // never seen
    /// ```
    pub fn remove(&self, key: &K) -> bool {
        let fp = self.fingerprint(key);
        let shard = self.shard(fp);
        shard.meta.with(|m| loop {
            // Under the lock nothing moves; a reader may change the state between the read and
            // the removal (which then fails and is retried), but never the tag.
            let Some(state) = shard.table.read(fp) else {
                return false;
            };
            if shard.table.remove(table::word(fp, state)) {
                m.len -= 1;
                return true;
            }
        })
    }

    /// `key`'s available tokens and how long until it gains one more (`None` when full), for
    /// [`quota`](Self::quota).
    pub(crate) fn quota_parts(&self, key: &K) -> (u64, Option<Duration>) {
        let fp = self.fingerprint(key);
        let (k, into) = self.at_least_latest(self.bucket.tick_into(self.clock.now()));
        let limit = u64::from(self.bucket.limit());
        match self.shard(fp).table.read(fp) {
            Some(v) => {
                let available = self.bucket.v_available(v, k, into).min(limit);
                if available >= limit {
                    return (available, None);
                }
                let n = u32::try_from(available + 1).unwrap_or(u32::MAX);
                (
                    available,
                    self.bucket.v_rejection(v, k, into, n).retry_after(),
                )
            }
            None => (limit, None),
        }
    }

    /// `key`'s quota: the bucket's limit, its tokens now (the limit for a key not stored), and
    /// how long until it gains one more (`None` when full).
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let l: KeyedLimiter<str, _> = KeyedLimiter::token_bucket_with_clock(
    ///     TokenBucketOptions::new(4, 1, Duration::from_secs(2)),
    ///     PartitionConfig::default(),
    ///     &clock,
    /// )
    /// .unwrap();
    /// let _ = l.try_acquire("alice", 3).unwrap();
    /// let q = l.quota("alice");
    /// assert_eq!((q.limit, q.remaining, q.reset_after), (4, 1, Some(Duration::from_secs(2))));
    /// assert_eq!(l.quota("bob").remaining, 4);
    /// ```
    pub fn quota(&self, key: &K) -> crate::quota::QuotaState {
        let (remaining, reset_after) = self.quota_parts(key);
        crate::quota::QuotaState {
            limit: u64::from(self.limit()),
            remaining,
            reset_after,
        }
    }

    /// How long `key`'s bucket has been full; `None` while it is not full, and for a key not
    /// stored (which has no history: it would get a full bucket).
    ///
    /// ```
    /// # use core::time::Duration;
    /// # use tollgate::*;
    /// # let clock = ManualClock::new();
    /// let opts = TokenBucketOptions::new(2, 1, Duration::from_secs(1));
    /// let per_user: KeyedLimiter<str, _> =
    ///     KeyedLimiter::token_bucket_with_clock(opts, PartitionConfig::new(1_000), &clock).unwrap();
    /// let _ = per_user.try_acquire("alice", 1).unwrap();
    /// assert_eq!(per_user.idle_duration("alice"), None); // refilling
    /// clock.advance(Duration::from_secs(5)); // full again after 1 s
    /// assert_eq!(per_user.idle_duration("alice"), Some(Duration::from_secs(4)));
    /// assert_eq!(per_user.idle_duration("bob"), None);
    /// ```
    pub fn idle_duration(&self, key: &K) -> Option<Duration> {
        let fp = self.fingerprint(key);
        let now = self.clock.now();
        let v = self.shard(fp).table.read(fp)?;
        match self.idle_fn(now)(&table::word(fp, v)) {
            Idle::For(ns) => Some(Duration::from_nanos(ns)),
            Idle::Busy(_) => None,
        }
    }
}

impl<K, C, S> PartitionedLimiter<K> for KeyedLimiter<K, C, S>
where
    K: Hash + ?Sized,
    C: Clock,
    S: BuildHasher,
{
    partitioned_by_inherent!(
        KeyedLimiter, K, type Lease<'a> = Lease<'static>;
        settle: |this, key, lease, actual| this.settle(key, lease, actual)
    );
}

/// No queue: waiting is trying, once (a .NET limiter with a queue limit of 0).
impl<K, C, S> super::PartitionedAcquireAsync<K> for KeyedLimiter<K, C, S>
where
    K: Hash + ?Sized,
    C: Clock,
    S: BuildHasher,
{
    fn acquire<'a>(
        &'a self,
        key: &'a K,
        permits: u32,
    ) -> impl core::future::Future<Output = Result<Lease<'static>, Rejection>> + 'a {
        core::future::ready(KeyedLimiter::try_acquire(self, key, permits))
    }
}

impl<K: ?Sized, C: Clock, S> fmt::Debug for KeyedLimiter<K, C, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedLimiter")
            .field("limit", &self.limit())
            .field("period", &self.period())
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .finish_non_exhaustive()
    }
}

/// A key of a [`KeyedLimiter`] as [`Lease::settle_with`] settles through it.
struct KeySettle<'a, K: ?Sized, C, S> {
    limiter: &'a KeyedLimiter<K, C, S>,
    fp: u64,
}

impl<K: Hash + ?Sized, C: Clock, S: BuildHasher> Release for KeySettle<'_, K, C, S> {
    /// A key's lease returns nothing (rate limiting).
    fn release(&self, _: u32) {}

    fn settle(&self, s: Settlement) -> Result<(), SettleError> {
        let (l, fp) = (self.limiter, self.fp);
        match &l.bucket {
            KeyedRule::Bucket(r) => l.settle_by(r, fp, s),
            KeyedRule::Gcra(r) => l.settle_by(r, fp, s),
            KeyedRule::Sliding(r) => l.settle_by(r, fp, s),
        }
    }
}
