//! Exporting the statistics of every limiter at once.
//!
//! A [`Registry`] holds named limiters — plain ones, chains, and partitioned limiters, whose
//! partitions are reported one by one — and reads them all in one pass:
//! [`for_each`](Registry::for_each) for your own exporter, [`snapshot`](Registry::snapshot) for
//! owned values, and, with the `metrics` feature, `Registry::export_metrics`
//! into the [`metrics`](https://docs.rs/metrics) facade (Prometheus, StatsD, ... through its
//! exporters). Call one of them from your scrape handler or a periodic task.
//!
//! It costs nothing on the hot path: a registry only *reads* the statistics every limiter keeps
//! anyway, when you ask. It holds each limiter weakly, so registering never keeps a limiter
//! alive; a dropped limiter leaves the registry at the next read.
//!
//! ```
//! use std::sync::Arc;
//! use tollgate::observe::Registry;
//! use tollgate::{ConcurrencyLimiter, ConcurrencyOptions, Limiter};
//!
//! let registry = Registry::new();
//! let db = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(4)).unwrap());
//! registry.register("db", &db);
//!
//! let _lease = db.try_acquire(1).unwrap();
//! let all = registry.snapshot();
//! assert_eq!(all.len(), 1);
//! assert_eq!(all[0].limiter, "db");
//! assert_eq!(all[0].statistics.available_permits, 3);
//! assert_eq!(all[0].statistics.total_successful, 1);
//! ```

use std::borrow::Cow;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::string::String;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::vec::Vec;

use crate::clock::Clock;
use crate::lease::Statistics;
use crate::limiter::Limiter;
use crate::partition::Partitioned;

/// Something whose statistics a [`Registry`] reads: every [`Limiter`] (one observation) and
/// every [`Partitioned`] limiter (one observation per stored partition, keyed). For anything
/// else — a [`KeyedLimiter`](crate::KeyedLimiter), which stores fingerprints rather than keys,
/// or your own type — wrap a closure in [`FromFn`].
///
/// ```
/// use tollgate::observe::Observe;
/// use tollgate::{Limiter, NoopLimiter};
///
/// let mut seen = 0;
/// NoopLimiter::new().observe(&mut |o| {
///     assert!(o.partition.is_none());
///     seen += 1;
/// });
/// assert_eq!(seen, 1);
/// ```
pub trait Observe: Send + Sync {
    /// Calls `f` once per observation: once for a limiter, once per partition for a
    /// partitioned limiter.
    ///
    /// ```
    /// use tollgate::observe::Observe;
    /// use tollgate::*;
    ///
    /// let kind = PartitionKind::concurrency(ConcurrencyOptions::new(4)).unwrap();
    /// let per_user = Partitioned::new(move |u: &str| Partition::new(u.to_string(), kind), PartitionConfig::default());
    /// let _a = per_user.try_acquire("alice", 1).unwrap();
    /// let _b = per_user.try_acquire("bob", 3).unwrap();
    /// let mut in_use = 0;
    /// per_user.observe(&mut |o| {
    ///     assert!(o.partition.is_some()); // one observation per stored partition
    ///     in_use += 4 - o.statistics.available_permits;
    /// });
    /// assert_eq!(in_use, 4);
    /// ```
    fn observe(&self, f: &mut dyn FnMut(Observation<'_>));
}

/// One limiter's (or one partition's) statistics, as read by [`Observe::observe`].
///
/// ```
/// use tollgate::observe::Observation;
/// use tollgate::Statistics;
///
/// let o = Observation { partition: Some(&"alice"), statistics: Statistics::default() };
/// assert_eq!(format!("{:?}", o.partition.unwrap()), "\"alice\"");
/// ```
#[derive(Clone, Copy)]
pub struct Observation<'a> {
    /// The partition's key, for a partition of a partitioned limiter; `None` for a limiter.
    pub partition: Option<&'a dyn fmt::Debug>,
    /// Its statistics at the time of reading.
    pub statistics: Statistics,
}

impl fmt::Debug for Observation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observation")
            .field("partition", &self.partition)
            .field("statistics", &self.statistics)
            .finish()
    }
}

impl<L: Limiter + Send + Sync + ?Sized> Observe for L {
    fn observe(&self, f: &mut dyn FnMut(Observation<'_>)) {
        f(Observation {
            partition: None,
            statistics: self.statistics(),
        });
    }
}

impl<K, L, P, C, S> Observe for Partitioned<K, L, P, C, S>
where
    K: Hash + Eq + fmt::Debug + Send + Sync,
    L: Limiter + Send + Sync,
    P: Send + Sync,
    C: Clock + Send + Sync,
    S: BuildHasher + Send + Sync,
{
    fn observe(&self, f: &mut dyn FnMut(Observation<'_>)) {
        self.for_each_partition(|key, limiter| {
            f(Observation {
                partition: Some(key),
                statistics: limiter.statistics(),
            })
        });
    }
}

/// An [`Observe`] made of a closure, for what has no `Observe` of its own.
///
/// ```
/// use std::sync::Arc;
/// use tollgate::observe::{FromFn, Observation, Registry};
/// use tollgate::{KeyedLimiter, PartitionConfig, TokenBucketOptions};
///
/// let per_ip = Arc::new(KeyedLimiter::<str>::token_bucket(TokenBucketOptions::per_second(10), PartitionConfig::default()).unwrap());
/// let registry = Registry::new();
/// let totals = {
///     let per_ip = Arc::clone(&per_ip);
///     // The limiter's totals over all keys (a key's own state is read with its key).
///     Arc::new(FromFn(move |f: &mut dyn FnMut(Observation<'_>)| {
///         f(Observation { partition: None, statistics: per_ip.statistics("") })
///     }))
/// };
/// registry.register("per-ip", &totals);
/// let _ = per_ip.try_acquire("10.0.0.1", 1);
/// assert_eq!(registry.snapshot()[0].statistics.total_successful, 1);
/// ```
pub struct FromFn<F>(pub F);

impl<F: Fn(&mut dyn FnMut(Observation<'_>)) + Send + Sync> Observe for FromFn<F> {
    fn observe(&self, f: &mut dyn FnMut(Observation<'_>)) {
        (self.0)(f)
    }
}

impl<F> fmt::Debug for FromFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FromFn(..)")
    }
}

/// One observation, owned: what [`Registry::snapshot`] returns.
///
/// ```
/// use std::sync::Arc;
/// use tollgate::observe::Registry;
/// use tollgate::*;
///
/// let kind = PartitionKind::concurrency(ConcurrencyOptions::new(2)).unwrap();
/// let per_user = Arc::new(Partitioned::new(
///     move |user: &str| Partition::new(user.to_string(), kind),
///     PartitionConfig::default(),
/// ));
/// let registry = Registry::new();
/// registry.register("per-user", &per_user);
/// let _lease = per_user.try_acquire("alice", 1).unwrap();
///
/// let samples = registry.snapshot();
/// assert_eq!(samples[0].limiter, "per-user");
/// assert_eq!(samples[0].partition.as_deref(), Some("\"alice\""));
/// assert_eq!(samples[0].statistics.available_permits, 1);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sample {
    /// The name the limiter was registered under.
    pub limiter: String,
    /// The partition's key, formatted with `Debug`; `None` for a limiter.
    pub partition: Option<String>,
    /// Its statistics at the time of reading.
    pub statistics: Statistics,
}

type Entry = (Cow<'static, str>, Weak<dyn Observe>);

/// A set of named limiters whose statistics are read together. See the [module](self).
///
/// Registering is cheap and rare (a lock and a push); reading visits every live limiter, with
/// the registry's lock released while the limiters are read, so an observed limiter (or the
/// closure given to [`for_each`](Registry::for_each)) may register others.
///
/// ```
/// use std::sync::Arc;
/// use tollgate::observe::Registry;
/// use tollgate::*;
///
/// let registry = Registry::new();
/// let db = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(8)).unwrap());
/// let api = Arc::new(TokenBucketLimiter::new(TokenBucketOptions::per_second(100)).unwrap());
/// registry.register("db", &db);
/// registry.register("api", &api);
/// let _conn = db.try_acquire(3).unwrap();
/// // A scrape handler: one line per limiter.
/// let mut lines = Vec::new();
/// registry.for_each(|name, o| lines.push(format!("{name} {}", o.statistics.available_permits)));
/// assert_eq!(lines, ["db 5", "api 100"]);
/// ```
pub struct Registry {
    entries: Mutex<Vec<Entry>>,
}

impl Registry {
    /// An empty registry. `const`, so it can be a `static`; see also [`global`].
    ///
    /// ```
    /// use tollgate::observe::Registry;
    ///
    /// static METRICS: Registry = Registry::new();
    /// assert!(METRICS.is_empty());
    /// ```
    pub const fn new() -> Self {
        Self {
            entries: Mutex::new(Vec::new()),
        }
    }

    /// Adds `source` under `name`, held weakly: the registry never keeps it alive, and forgets
    /// it once it is dropped. The same name may be registered more than once (each entry is
    /// reported).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::observe::Registry;
    /// use tollgate::{TokenBucketLimiter, TokenBucketOptions};
    ///
    /// let registry = Registry::new();
    /// let api = Arc::new(TokenBucketLimiter::new(TokenBucketOptions::per_second(100)).unwrap());
    /// registry.register("api", &api);
    /// assert_eq!(registry.len(), 1);
    /// drop(api);
    /// assert!(registry.snapshot().is_empty());
    /// assert_eq!(registry.len(), 0);
    /// ```
    pub fn register<O: Observe + 'static>(
        &self,
        name: impl Into<Cow<'static, str>>,
        source: &Arc<O>,
    ) {
        let weak: Weak<dyn Observe> = Arc::downgrade(source) as Weak<dyn Observe>;
        self.lock().push((name.into(), weak));
    }

    /// How many limiters are registered and still alive.
    ///
    /// ```
    /// use tollgate::observe::Registry;
    /// assert_eq!(Registry::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        let mut entries = self.lock();
        entries.retain(|(_, w)| w.strong_count() > 0);
        entries.len()
    }

    /// Whether no live limiter is registered.
    ///
    /// ```
    /// use tollgate::observe::Registry;
    /// assert!(Registry::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads every live limiter, in registration order, and calls `f` with its name and each
    /// of its observations. Dropped limiters are forgotten.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::observe::Registry;
    /// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions};
    ///
    /// let registry = Registry::new();
    /// let a = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap());
    /// let b = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(2)).unwrap());
    /// registry.register("a", &a);
    /// registry.register("b", &b);
    /// let mut free = Vec::new();
    /// registry.for_each(|name, o| free.push((name.to_string(), o.statistics.available_permits)));
    /// assert_eq!(free, [("a".to_string(), 1), ("b".to_string(), 2)]);
    /// ```
    pub fn for_each(&self, mut f: impl FnMut(&str, Observation<'_>)) {
        let live: Vec<(Cow<'static, str>, Arc<dyn Observe>)> = {
            let mut entries = self.lock();
            entries.retain(|(_, w)| w.strong_count() > 0);
            entries
                .iter()
                .filter_map(|(name, w)| w.upgrade().map(|s| (name.clone(), s)))
                .collect()
        };
        for (name, source) in &live {
            source.observe(&mut |o| f(name, o));
        }
    }

    /// Every observation, owned (partition keys formatted with `Debug`).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::observe::Registry;
    /// use tollgate::{FixedWindowLimiter, FixedWindowOptions, Limiter};
    /// use core::time::Duration;
    ///
    /// let registry = Registry::new();
    /// let w = Arc::new(FixedWindowLimiter::new(FixedWindowOptions::new(1, Duration::from_secs(1))).unwrap());
    /// registry.register("login", &w);
    /// let _ = w.try_acquire(1);
    /// let _ = w.try_acquire(1);
    /// let s = &registry.snapshot()[0];
    /// assert_eq!((s.statistics.total_successful, s.statistics.total_failed), (1, 1));
    /// ```
    pub fn snapshot(&self) -> Vec<Sample> {
        let mut out = Vec::new();
        self.for_each(|name, o| {
            out.push(Sample {
                limiter: String::from(name),
                partition: o.partition.map(|k| std::format!("{k:?}")),
                statistics: o.statistics,
            })
        });
        out
    }

    /// Publishes every observation to the [`metrics`](https://docs.rs/metrics) facade's
    /// installed recorder (a no-op without one), labelled `limiter` (the registered name) and,
    /// for a partition, `partition` (its key, `Debug`-formatted — mind the cardinality of
    /// per-client partitions):
    ///
    /// | metric | kind | value |
    /// |---|---|---|
    /// | `tollgate_available_permits` | gauge | [`Statistics::available_permits`] |
    /// | `tollgate_queued_permits` | gauge | [`Statistics::queued_permits`] |
    /// | `tollgate_requests_total{outcome="granted"}` | counter (absolute) | [`Statistics::total_successful`] |
    /// | `tollgate_requests_total{outcome="rejected"}` | counter (absolute) | [`Statistics::total_failed`] |
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::observe::Registry;
    /// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions};
    ///
    /// let registry = Registry::new();
    /// let db = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(4)).unwrap());
    /// registry.register("db", &db);
    /// registry.export_metrics(); // e.g. from a Prometheus scrape handler
    /// ```
    #[cfg(feature = "metrics")]
    #[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
    pub fn export_metrics(&self) {
        self.for_each(|name, o| {
            let mut labels = std::vec![metrics::Label::new("limiter", String::from(name))];
            if let Some(key) = o.partition {
                labels.push(metrics::Label::new("partition", std::format!("{key:?}")));
            }
            let s = o.statistics;
            metrics::gauge!("tollgate_available_permits", labels.clone())
                .set(s.available_permits as f64);
            metrics::gauge!("tollgate_queued_permits", labels.clone()).set(s.queued_permits as f64);
            let mut granted = labels.clone();
            granted.push(metrics::Label::new("outcome", "granted"));
            metrics::counter!("tollgate_requests_total", granted).absolute(s.total_successful);
            labels.push(metrics::Label::new("outcome", "rejected"));
            metrics::counter!("tollgate_requests_total", labels).absolute(s.total_failed);
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        // A panic in a `Debug` impl cannot leave the list half-updated: recover it.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<Cow<'static, str>> = self.lock().iter().map(|(n, _)| n.clone()).collect();
        f.debug_struct("Registry")
            .field("limiters", &names)
            .finish()
    }
}

/// The process's registry, for libraries and applications that want one place to register
/// every limiter. Nothing is registered in it unless you do.
///
/// ```
/// use std::sync::Arc;
/// use tollgate::{ConcurrencyLimiter, ConcurrencyOptions};
///
/// let uploads = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(8)).unwrap());
/// tollgate::observe::global().register("uploads", &uploads);
/// assert!(tollgate::observe::global()
///     .snapshot()
///     .iter()
///     .any(|s| s.limiter == "uploads"));
/// ```
pub fn global() -> &'static Registry {
    static GLOBAL: Registry = Registry::new();
    &GLOBAL
}
