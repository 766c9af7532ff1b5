//! Tiered rules (article 002's rule store): a client's tier and request class pick a rule, and
//! each rule is a [`Partitioned`] limiter keyed by the client.
//!
//! A [`TierRules`] table maps `(tier, class)` — say `(Pro, Api)` — to a [`PartitionKind`] and
//! a [`PartitionConfig`], and keeps one [`Partitioned`] limiter per rule, so every client gets
//! its own limiter of its rule's kind. Each rule has its own bounded partition table: a flood of
//! new free-tier keys can evict only idle free-tier partitions, never a paying client's state.
//! A request for a pair with no rule is refused with [`TierError::NoRule`]: a missing rule is a
//! configuration mistake, reported as such rather than silently unlimited or silently refused.
//!
//! The table is built once (rules are few: tiers × classes) and looked up by a linear scan.

use core::fmt;
use core::hash::Hash;

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::clock::{Clock, StdClock};
use crate::lease::Rejection;
use crate::partition::{
    Partition, PartitionConfig, PartitionKind, PartitionLease, PartitionLimiter, Partitioned,
};

/// The partition function of a rule: the client's key, with the rule's kind.
type KeyFn<K> = Box<dyn Fn(&K) -> Partition<K> + Send + Sync>;

/// The limiter of one rule: a partition per client key.
///
/// ```
/// use tollgate::*;
///
/// let mut rules: TierRules<&str, &str, u64> = TierRules::new();
/// let two = PartitionKind::concurrency(ConcurrencyOptions::new(2)).unwrap();
/// rules.add("free", "api", two, PartitionConfig::default()).unwrap();
/// // A rule's limiter, named: e.g. kept for a dashboard's per-client statistics.
/// let free_api: &RuleLimiter<u64, StdClock> = rules.rule(&"free", &"api").unwrap();
/// let _lease = rules.try_acquire(&"free", &"api", &7, 1).unwrap();
/// assert_eq!(free_api.statistics(&7).available_permits, 1);
/// ```
pub type RuleLimiter<K, C> = Partitioned<K, PartitionLimiter<C>, KeyFn<K>, C>;

/// The lease a [`TierRules`] grants: its client's partition's lease.
///
/// ```
/// use tollgate::*;
///
/// let mut rules: TierRules<u8, u8, u64> = TierRules::new();
/// let one = PartitionKind::concurrency(ConcurrencyOptions::new(1)).unwrap();
/// rules.add(0, 0, one, PartitionConfig::default()).unwrap();
/// /// A request in flight keeps its lease (owned: no borrow of the table).
/// struct InFlight { _lease: TierLease<u64, StdClock> }
/// let request = InFlight { _lease: rules.try_acquire(&0, &0, &9, 1).unwrap() };
/// assert!(rules.try_acquire(&0, &0, &9, 1).is_err());
/// drop(request); // the permit goes back
/// assert!(rules.try_acquire(&0, &0, &9, 1).is_ok());
/// ```
pub type TierLease<K, C> = PartitionLease<K, PartitionLimiter<C>>;

/// Why a [`TierRules`] request or rule was refused.
///
/// ```
/// use tollgate::{Reason, TierError};
///
/// let e: TierError<&str, &str> = TierError::NoRule { tier: "gold", class: "api" };
/// assert_eq!(e.to_string(), "no rule for tier \"gold\", class \"api\"");
/// assert_eq!(e.rejection(), None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TierError<T, S> {
    /// The table has no rule for this tier and class.
    NoRule {
        /// The tier asked for.
        tier: T,
        /// The class asked for.
        class: S,
    },
    /// A rule for this tier and class is already in the table (when adding one).
    DuplicateRule {
        /// The tier of the rule.
        tier: T,
        /// The class of the rule.
        class: S,
    },
    /// The rule's limiter refused the request (its reason and RetryAfter).
    Rejected(Rejection),
}

impl<T, S> TierError<T, S> {
    /// The limiter's rejection, if that is what this is.
    ///
    /// ```
    /// use tollgate::{Reason, Rejection, TierError};
    ///
    /// let e: TierError<u8, u8> = TierError::Rejected(Rejection::new(&Reason::Exhausted));
    /// assert_eq!(e.rejection().map(|r| r.reason()), Some(Reason::Exhausted));
    /// ```
    pub fn rejection(&self) -> Option<&Rejection> {
        match self {
            Self::Rejected(r) => Some(r),
            _ => None,
        }
    }
}

impl<T: fmt::Debug, S: fmt::Debug> fmt::Display for TierError<T, S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoRule { tier, class } => write!(f, "no rule for tier {tier:?}, class {class:?}"),
            Self::DuplicateRule { tier, class } => {
                write!(
                    f,
                    "a rule for tier {tier:?}, class {class:?} exists already"
                )
            }
            Self::Rejected(r) => write!(f, "rejected: {:?}", r.reason()),
        }
    }
}

impl<T: fmt::Debug, S: fmt::Debug> core::error::Error for TierError<T, S> {}

struct Rule<T, S, K, C: Clock> {
    tier: T,
    class: S,
    limiter: RuleLimiter<K, C>,
}

/// A table of rules from a client's tier and request class to a partitioned limiter per rule,
/// keyed by the client (article 002's `RuleStore` and limiter cache; feature `std`).
///
/// - `T`: the tier (`Free`, `Pro`, …); `S`: the request class (`Api`, `Web`, …); `K`: the client
///   key (a user id, an IP address); `C`: the clock.
/// - [`add`](Self::add) a rule per pair, then [`try_acquire`](Self::try_acquire) with the
///   client's tier, class and key. Each call goes to the client's own limiter in its rule.
///
/// ```
/// use core::time::Duration;
/// use tollgate::*;
///
/// #[derive(Debug, PartialEq, Clone, Copy)]
/// enum Tier { Free, Pro }
/// #[derive(Debug, PartialEq, Clone, Copy)]
/// enum Class { Api, Web }
///
/// let clock = ManualClock::new();
/// let mut rules = TierRules::with_clock(&clock);
/// let free_api = PartitionKind::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60)))?;
/// let pro_api = PartitionKind::token_bucket(TokenBucketOptions::new(100, 10, Duration::from_secs(1)))?;
/// rules.add(Tier::Free, Class::Api, free_api, PartitionConfig::new(10_000))?;
/// rules.add(Tier::Pro, Class::Api, pro_api, PartitionConfig::new(1_000))?;
///
/// // Each free client has 2 a minute; a pro client 100 at once.
/// assert!(rules.try_acquire(&Tier::Free, &Class::Api, &"ann", 2).is_ok());
/// let no = rules.try_acquire(&Tier::Free, &Class::Api, &"ann", 1).unwrap_err();
/// assert_eq!(no.rejection().map(|r| r.reason()), Some(Reason::Exhausted));
/// assert!(rules.try_acquire(&Tier::Free, &Class::Api, &"bob", 1).is_ok());
/// assert!(rules.try_acquire(&Tier::Pro, &Class::Api, &"cat", 100).is_ok());
/// // A pair with no rule is a typed error, not a silent decision.
/// assert_eq!(
///     rules.try_acquire(&Tier::Pro, &Class::Web, &"cat", 1).unwrap_err(),
///     TierError::NoRule { tier: Tier::Pro, class: Class::Web }
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg_attr(docsrs, doc(cfg(feature = "std")))]
pub struct TierRules<T, S, K, C: Clock = StdClock> {
    rules: Vec<Rule<T, S, K, C>>,
    clock: C,
}

impl<T, S, K> TierRules<T, S, K> {
    /// An empty table on the system clock.
    ///
    /// ```
    /// use tollgate::TierRules;
    ///
    /// let rules: TierRules<u8, u8, String> = TierRules::new();
    /// assert!(rules.is_empty());
    /// ```
    pub fn new() -> Self {
        Self::with_clock(StdClock)
    }
}

impl<T, S, K> Default for TierRules<T, S, K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T, S, K, C: Clock> TierRules<T, S, K, C> {
    /// An empty table whose limiters read `clock`.
    ///
    /// ```
    /// use tollgate::{ManualClock, TierRules};
    ///
    /// let rules: TierRules<u8, u8, u64, _> = TierRules::with_clock(ManualClock::new());
    /// assert_eq!(rules.len(), 0);
    /// ```
    pub fn with_clock(clock: C) -> Self {
        Self {
            rules: Vec::new(),
            clock,
        }
    }

    /// The number of rules.
    ///
    /// ```
    /// use tollgate::{PartitionConfig, PartitionKind, TierRules};
    ///
    /// let mut rules: TierRules<u8, u8, u64> = TierRules::new();
    /// rules.add(0, 0, PartitionKind::NO_LIMIT, PartitionConfig::default()).unwrap();
    /// assert_eq!(rules.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether the table has no rule.
    ///
    /// ```
    /// use tollgate::TierRules;
    ///
    /// assert!(TierRules::<u8, u8, u64>::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

impl<T, S, K, C> TierRules<T, S, K, C>
where
    T: PartialEq,
    S: PartialEq,
    K: Hash + Eq + Clone + Send + Sync + 'static,
    C: Clock + Clone + Sync,
{
    /// Adds the rule of `tier` and `class`: a limiter of `kind` per client key, at most
    /// `config.capacity` clients at a time. Refused with [`TierError::DuplicateRule`] (the table
    /// unchanged) if the pair has a rule already.
    ///
    /// ```
    /// use tollgate::{PartitionConfig, PartitionKind, TierError, TierRules};
    ///
    /// let mut rules: TierRules<&str, &str, u64> = TierRules::new();
    /// rules.add("free", "api", PartitionKind::NO_LIMIT, PartitionConfig::default()).unwrap();
    /// assert_eq!(
    ///     rules.add("free", "api", PartitionKind::NO_LIMIT, PartitionConfig::default()).unwrap_err(),
    ///     TierError::DuplicateRule { tier: "free", class: "api" }
    /// );
    /// ```
    pub fn add(
        &mut self,
        tier: T,
        class: S,
        kind: PartitionKind,
        config: PartitionConfig,
    ) -> Result<(), TierError<T, S>> {
        if self.find(&tier, &class).is_some() {
            return Err(TierError::DuplicateRule { tier, class });
        }
        let per_key: KeyFn<K> = Box::new(move |key: &K| Partition::new(key.clone(), kind));
        let limiter = Partitioned::with_clock(per_key, config, self.clock.clone());
        self.rules.push(Rule {
            tier,
            class,
            limiter,
        });
        Ok(())
    }

    fn find(&self, tier: &T, class: &S) -> Option<&RuleLimiter<K, C>> {
        self.rules
            .iter()
            .find(|r| r.tier == *tier && r.class == *class)
            .map(|r| &r.limiter)
    }

    /// The partitioned limiter of `tier` and `class`, if the table has that rule: for its
    /// per-client statistics, `acquire` (waiting), `replenish` or `close`.
    ///
    /// ```
    /// use tollgate::{ConcurrencyOptions, PartitionConfig, PartitionKind, TierRules};
    ///
    /// let mut rules: TierRules<u8, u8, u64> = TierRules::new();
    /// let one = PartitionKind::concurrency(ConcurrencyOptions::new(1)).unwrap();
    /// rules.add(1, 1, one, PartitionConfig::default()).unwrap();
    /// let _lease = rules.try_acquire(&1, &1, &42, 1).unwrap();
    /// assert_eq!(rules.rule(&1, &1).unwrap().statistics(&42).available_permits, 0);
    /// assert!(rules.rule(&2, &1).is_none());
    /// ```
    pub fn rule(&self, tier: &T, class: &S) -> Option<&RuleLimiter<K, C>> {
        self.find(tier, class)
    }

    /// Takes `permits` for the client `key` of `tier` in `class` from its own limiter in that
    /// rule, without waiting. [`TierError::NoRule`] if the table has no rule for the pair;
    /// [`TierError::Rejected`] with the limiter's reason and RetryAfter if it refuses.
    ///
    /// ```
    /// use core::time::Duration;
    /// use tollgate::*;
    ///
    /// let clock = ManualClock::new();
    /// let mut rules = TierRules::with_clock(&clock);
    /// let kind = PartitionKind::token_bucket(TokenBucketOptions::new(1, 1, Duration::from_secs(2))).unwrap();
    /// rules.add("free", "web", kind, PartitionConfig::default()).unwrap();
    /// let _ = rules.try_acquire(&"free", &"web", &7u32, 1).unwrap();
    /// let denied = rules.try_acquire(&"free", &"web", &7u32, 1).unwrap_err();
    /// assert_eq!(denied.rejection().unwrap().retry_after(), Some(Duration::from_secs(2)));
    /// ```
    pub fn try_acquire(
        &self,
        tier: &T,
        class: &S,
        key: &K,
        permits: u32,
    ) -> Result<TierLease<K, C>, TierError<T, S>>
    where
        T: Clone,
        S: Clone,
    {
        let limiter = self.find(tier, class).ok_or_else(|| TierError::NoRule {
            tier: tier.clone(),
            class: class.clone(),
        })?;
        limiter
            .try_acquire(key, permits)
            .map_err(TierError::Rejected)
    }

    /// Closes every rule's limiter: later requests are refused with
    /// [`Reason::Closed`](crate::Reason::Closed).
    ///
    /// ```
    /// use tollgate::*;
    ///
    /// let mut rules: TierRules<u8, u8, u64> = TierRules::new();
    /// rules.add(0, 0, PartitionKind::NO_LIMIT, PartitionConfig::default()).unwrap();
    /// rules.close();
    /// let e = rules.try_acquire(&0, &0, &1, 1).unwrap_err();
    /// assert_eq!(e.rejection().map(|r| r.reason()), Some(Reason::Closed));
    /// ```
    pub fn close(&self) {
        for r in &self.rules {
            r.limiter.close();
        }
    }
}

impl<T: fmt::Debug, S: fmt::Debug, K, C: Clock> fmt::Debug for TierRules<T, S, K, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for r in &self.rules {
            list.entry(&(&r.tier, &r.class, r.limiter.len()));
        }
        list.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    use core::time::Duration;

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Tier {
        Free,
        Pro,
    }

    #[test]
    fn rules_are_separate_and_bounded_each() {
        let clock = ManualClock::new();
        let mut rules = TierRules::with_clock(&clock);
        let fw = PartitionKind::fixed_window(FixedWindowOptions::new(1, Duration::from_secs(1)))
            .unwrap();
        let tb = PartitionKind::token_bucket(TokenBucketOptions::new(3, 3, Duration::from_secs(1)))
            .unwrap();
        let one_key = PartitionConfig::new(1).with_when_full(crate::WhenFull::Reject);
        rules.add(Tier::Free, "api", fw, one_key).unwrap();
        rules
            .add(Tier::Pro, "api", tb, PartitionConfig::new(8))
            .unwrap();
        // The free rule holds one client; a second is refused for capacity, pro is untouched.
        let _a = rules.try_acquire(&Tier::Free, &"api", &1u32, 1).unwrap();
        let full = rules.try_acquire(&Tier::Free, &"api", &2, 1).unwrap_err();
        assert_eq!(full.rejection().unwrap().reason(), Reason::PartitionsFull);
        for key in 1..=3 {
            assert!(rules.try_acquire(&Tier::Pro, &"api", &key, 3).is_ok());
        }
        assert_eq!(rules.rule(&Tier::Pro, &"api").unwrap().len(), 3);
        assert_eq!(rules.rule(&Tier::Free, &"api").unwrap().len(), 1);
        // Over the limit of its kind: the limiter's own typed reason.
        let over = rules.try_acquire(&Tier::Pro, &"api", &9, 4).unwrap_err();
        assert_eq!(over.rejection().unwrap().reason(), Reason::ExceedsLimit);
        // A failed add leaves the table as it was.
        assert!(rules
            .add(Tier::Pro, "api", fw, PartitionConfig::new(8))
            .is_err());
        assert_eq!(rules.len(), 2);
        assert_eq!(
            rules.try_acquire(&Tier::Free, &"web", &1, 1).unwrap_err(),
            TierError::NoRule {
                tier: Tier::Free,
                class: "web"
            }
        );
        // Time refills each client's own limiter.
        clock.advance(Duration::from_secs(1));
        assert!(rules.try_acquire(&Tier::Pro, &"api", &1, 3).is_ok());
        let dbg = format!("{rules:?}");
        assert!(dbg.contains("Free"), "{dbg}");
    }
}
