//! Lazy eviction, shared by every partition store: sweeping partitions past the idle timeout, and
//! making room in a full table by the [`WhenFull`] policy. No timer: the callers run these on the
//! calls they serve, when the instants recorded in [`Marks`] say something can have changed.

use super::{PartitionConfig, WhenFull};

/// How idle a stored partition is, as of the instant the caller passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Idle {
    /// Idle for this many nanoseconds.
    For(u64),
    /// In use; idle from the given instant (nanoseconds) if nothing else happens, when known.
    Busy(Option<u64>),
}

/// A table of partitions, as eviction sees it.
pub(crate) trait Table {
    type Value;
    fn len(&self) -> usize;
    fn retain(&mut self, keep: impl FnMut(&Self::Value) -> bool);
    fn for_each(&self, f: impl FnMut(&Self::Value));
}

/// The instants before which eviction would find nothing: no partition can pass the idle
/// timeout before `next_sweep`; a full table has no idle partition before `next_idle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Marks {
    pub(crate) next_sweep: u64,
    pub(crate) next_idle: u64,
}

impl Marks {
    /// Nothing stored at `now`: nothing can pass the timeout before `now + timeout`.
    pub(crate) fn new(now: u64, policy: &Policy) -> Self {
        Self {
            next_sweep: now.saturating_add(policy.timeout).saturating_add(1),
            next_idle: 0,
        }
    }
}

/// The eviction rules of one store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Policy {
    /// Idle timeout, ns: a partition idle for strictly longer is evicted.
    pub(crate) timeout: u64,
    pub(crate) when_full: WhenFull,
    /// How many of the idlest partitions one scan of a full table may evict, so that a flood of
    /// new keys pays one scan per `batch` keys rather than one per key.
    pub(crate) batch: usize,
}

impl Policy {
    pub(crate) fn new(config: &PartitionConfig, batch: usize) -> Self {
        Self {
            timeout: config.timeout_ns(),
            when_full: config.when_full,
            batch: batch.max(1),
        }
    }

    /// After a scan of a full table finds nothing idle and some partition's idle instant is
    /// unknown, the next scan waits this long (1/32 of the timeout): a flood of new keys on a
    /// table of busy partitions is refused at the cost of one load, not one scan, per key.
    fn backoff(&self) -> u64 {
        self.timeout / 32
    }

    /// Evicts every partition idle for longer than the timeout, and records when the next one
    /// can be.
    pub(crate) fn sweep<T: Table>(
        &self,
        table: &mut T,
        now: u64,
        marks: &mut Marks,
        idle: impl Fn(&T::Value) -> Idle,
    ) {
        let timeout = self.timeout;
        let mut next = now.saturating_add(timeout).saturating_add(1);
        table.retain(|v| match idle(v) {
            Idle::For(d) if d > timeout => false,
            Idle::For(d) => {
                next = next.min(now.saturating_add(timeout - d).saturating_add(1));
                true
            }
            Idle::Busy(_) => true,
        });
        marks.next_sweep = next;
    }

    /// Whether `table` (holding at most `cap`) has room for one more partition at `now`, after
    /// evicting by the rules: first whatever is past the idle timeout (if anything can be), then,
    /// with [`WhenFull::EvictIdle`], the idlest partitions (if any is idle).
    pub(crate) fn make_room<T: Table>(
        &self,
        table: &mut T,
        cap: usize,
        now: u64,
        marks: &mut Marks,
        idle: impl Fn(&T::Value) -> Idle,
    ) -> bool {
        if table.len() < cap {
            return true;
        }
        if now >= marks.next_sweep {
            self.sweep(table, now, marks, &idle);
            if table.len() < cap {
                return true;
            }
        }
        if self.when_full == WhenFull::Reject || now < marks.next_idle {
            return false;
        }
        // Scan: how many are idle, the idlest, and when the busy ones become idle.
        let (mut count, mut max) = (0usize, 0u64);
        let mut soonest = u64::MAX;
        table.for_each(|v| match idle(v) {
            Idle::For(d) => {
                count += 1;
                max = max.max(d);
            }
            Idle::Busy(Some(at)) => soonest = soonest.min(at),
            Idle::Busy(None) => soonest = soonest.min(now.saturating_add(self.backoff())),
        });
        if count == 0 {
            marks.next_idle = soonest.max(now.saturating_add(1));
            return false;
        }
        let batch = self.batch.min(count);
        let cutoff = if batch == 1 {
            max
        } else {
            self.cutoff(table, batch, &idle)
        };
        let mut evicted = 0;
        table.retain(|v| match idle(v) {
            Idle::For(d) if d >= cutoff && evicted < batch => {
                evicted += 1;
                false
            }
            _ => true,
        });
        table.len() < cap
    }

    /// The idle duration of the `batch`-th idlest partition.
    #[cfg(feature = "alloc")]
    fn cutoff<T: Table>(&self, table: &T, batch: usize, idle: &impl Fn(&T::Value) -> Idle) -> u64 {
        let mut idles = alloc::vec::Vec::new();
        table.for_each(|v| {
            if let Idle::For(d) = idle(v) {
                idles.push(d);
            }
        });
        if idles.len() < batch {
            return 0;
        }
        let at = idles.len() - batch;
        *idles.select_nth_unstable(at).1
    }

    /// Without a heap, one at a time: the idlest.
    #[cfg(not(feature = "alloc"))]
    fn cutoff<T: Table>(&self, _: &T, _: usize, _: &impl Fn(&T::Value) -> Idle) -> u64 {
        u64::MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of idle states.
    struct V(std::vec::Vec<Idle>);

    impl Table for V {
        type Value = Idle;
        fn len(&self) -> usize {
            self.0.len()
        }
        fn retain(&mut self, keep: impl FnMut(&Idle) -> bool) {
            self.0.retain(keep);
        }
        fn for_each(&self, f: impl FnMut(&Idle)) {
            self.0.iter().for_each(f);
        }
    }

    /// A table of entries idle for `idle_for` ns each, then busy ones (until `busy`, if known).
    fn table(idle_for: &[u64], busy: &[Option<u64>]) -> V {
        let idle = idle_for.iter().map(|&ns| Idle::For(ns));
        V(idle
            .chain(busy.iter().map(|&until| Idle::Busy(until)))
            .collect())
    }

    fn policy(when_full: WhenFull, batch: usize) -> Policy {
        Policy {
            timeout: 100,
            when_full,
            batch,
        }
    }

    #[test]
    fn sweep_evicts_strictly_past_the_timeout_and_dates_the_next() {
        let p = policy(WhenFull::Reject, 1);
        let mut t = table(&[101, 100, 40], &[None]);
        let mut m = Marks::new(0, &p);
        p.sweep(&mut t, 1_000, &mut m, |v| *v);
        assert_eq!(t.0, table(&[100, 40], &[None]).0);
        // The one idle for 100 passes the timeout 1 ns later.
        assert_eq!(m.next_sweep, 1_001);
    }

    #[test]
    fn reject_policy_refuses_a_full_table_of_young_idle_partitions() {
        let p = policy(WhenFull::Reject, 1);
        let mut t = table(&[5, 6], &[]);
        let mut m = Marks::new(0, &p);
        assert!(!p.make_room(&mut t, 2, 50, &mut m, |v| *v));
        assert_eq!(t.len(), 2);
        assert!(p.make_room(&mut t, 3, 50, &mut m, |v| *v));
    }

    #[test]
    fn evict_idle_takes_the_idlest_and_refuses_when_all_are_busy() {
        let p = policy(WhenFull::EvictIdle, 1);
        let mut t = table(&[5, 9], &[None]);
        let mut m = Marks::new(0, &p);
        assert!(p.make_room(&mut t, 3, 50, &mut m, |v| *v));
        assert_eq!(t.0, table(&[5], &[None]).0);

        let mut busy = table(&[], &[Some(70), Some(60)]);
        let mut m = Marks::new(0, &p);
        assert!(!p.make_room(&mut busy, 2, 50, &mut m, |v| *v));
        // Known idle instants: nothing to find before 60.
        assert_eq!(m.next_idle, 60);
        let mut m2 = Marks::new(0, &p);
        let mut unknown = table(&[], &[None]);
        assert!(!p.make_room(&mut unknown, 1, 50, &mut m2, |v| *v));
        assert_eq!(m2.next_idle, 50 + 100 / 32);
    }

    #[test]
    fn a_batch_evicts_the_idlest_few() {
        let p = policy(WhenFull::EvictIdle, 2);
        let mut t = table(&[3, 8, 1, 8, 7], &[]);
        let mut m = Marks::new(0, &p);
        assert!(p.make_room(&mut t, 5, 50, &mut m, |v| *v));
        assert_eq!(t.0, table(&[3, 1, 7], &[]).0);
    }
}
