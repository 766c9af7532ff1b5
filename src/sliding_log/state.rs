//! The sliding-window log's ring and its pure transitions.
//!
//! The log keeps one entry per admitted request — its time and its permits — in a fixed ring of
//! `N` entries, oldest first. Every entry holds at least one permit, so a log whose permits never
//! exceed `limit ≤ N` never needs more than `N` entries: the ring cannot overflow. An entry counts
//! while its age is below the window (`now - t < window`).

/// The limiter's constants (shared with the other window limiter).
pub use crate::core_common::WindowShape as Shape;

/// One admitted request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Entry {
    /// When it was admitted, ns since the limiter's creation.
    pub at: u64,
    /// Its permits (at least 1).
    pub permits: u32,
}

/// The log: a ring of entries, oldest first, and the sum of their permits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Log<const N: usize> {
    ring: [Entry; N],
    head: usize,
    len: usize,
    used: u64,
    /// The time of the newest entry ever admitted (kept after it expires, to date idleness).
    pub last: Option<u64>,
    /// The wait queue holds waiters: newcomers do not take past them.
    pub waiters: bool,
}

/// Why a take was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// The permits do not fit; the nanoseconds until they would (at least 1).
    Exhausted {
        /// Exact wait until enough entries have expired (up to 2^64 ns: an entry taken just
        /// before the horizon with a window past it leaves after `u64::MAX` ns).
        wait: u128,
    },
}

impl<const N: usize> Default for Log<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Log<N> {
    /// An empty log.
    pub const fn new() -> Self {
        Self {
            ring: [Entry { at: 0, permits: 0 }; N],
            head: 0,
            len: 0,
            used: 0,
            last: None,
            waiters: false,
        }
    }

    /// Entries held.
    #[cfg(test)]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether no entry is held.
    #[cfg(test)]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Permits held by the entries in the ring (some may have left the window since the last
    /// admission: see [`used_at`](Self::used_at)).
    #[cfg(test)]
    pub const fn used(&self) -> u64 {
        self.used
    }

    fn nth(&self, i: usize) -> Entry {
        self.ring[(self.head + i) % N]
    }

    /// The time the log acts at: `now`, or the newest entry's time if the clock reads earlier (a
    /// clock that steps backwards is no time passing). Entries are therefore recorded in order,
    /// and expire from the front.
    pub fn effective(&self, now: u64) -> u64 {
        match self.last {
            Some(t) if t > now => t,
            _ => now,
        }
    }

    /// The entries that have left the window at `now`, as a prefix of the ring (entries are in
    /// time order): how many, and their permits. Writes nothing.
    fn expired_prefix(&self, now: u64, s: Shape) -> (usize, u64) {
        let now = self.effective(now);
        let mut count = 0;
        let mut permits = 0;
        while count < self.len {
            let e = self.nth(count);
            if now - e.at < s.window {
                break;
            }
            permits += u64::from(e.permits);
            count += 1;
        }
        (count, permits)
    }

    /// Drops the entries that can never count again: those that left the window by the newest
    /// entry's time. A log acts at that time or later whatever the clock reads, so this forgets
    /// nothing a later operation could see (unlike expiring at a reading, which a clock stepped
    /// back — or a reading past the 2^63 ns horizon — would then contradict).
    pub fn expire(&mut self, s: Shape) {
        let Some(last) = self.last else { return };
        let (count, permits) = self.expired_prefix(last, s);
        self.drop_front(count, permits);
    }

    fn drop_front(&mut self, count: usize, permits: u64) {
        self.head = (self.head + count) % N;
        self.len -= count;
        self.used -= permits;
    }

    /// Permits in the window at `now` (writes nothing).
    pub fn used_at(&self, now: u64, s: Shape) -> u64 {
        self.used - self.expired_prefix(now, s).1
    }

    /// Takes `n` permits at `now` (`n <= limit` is checked by the caller). A probe (`n == 0`)
    /// succeeds if one permit fits and records nothing. Unless `barge`, a request (not a probe)
    /// is refused while waiters are queued.
    ///
    /// Only an admission writes: it drops the entries expired at `now` and records the new one at
    /// `now`, which becomes the time every later operation acts at (at the least). A probe or a
    /// denial changes nothing, so a later reading earlier than this one (a clock stepped back, or
    /// a reading past the horizon that counts as one) sees the log exactly as the last admission
    /// left it: it can only limit more, never less.
    pub fn try_take(&mut self, reading: u64, n: u32, s: Shape, barge: bool) -> Result<(), Denied> {
        let now = self.effective(reading);
        let (count, permits) = self.expired_prefix(now, s);
        let used = self.used - permits;
        let want = u64::from(n.max(1));
        if used + want > u64::from(s.limit) || (self.waiters && !barge && n > 0) {
            return Err(Denied::Exhausted {
                wait: self.wait(reading, want, s).max(1),
            });
        }
        if n == 0 {
            return Ok(());
        }
        self.drop_front(count, permits);
        // used + n ≤ limit ≤ N, and every entry holds ≥ 1 permit: there is a free slot.
        if self.len < N {
            self.push(now, n);
            self.used += u64::from(n);
            self.last = Some(now);
        }
        Ok(())
    }

    /// Appends an entry of `n` permits at `now` (the caller has checked for a free slot).
    #[inline]
    fn push(&mut self, now: u64, n: u32) {
        let tail = (self.head + self.len) % N;
        self.ring[tail] = Entry {
            at: now,
            permits: n,
        };
        self.len += 1;
    }

    /// Takes `n` more permits at `reading` for a lease settled above its estimate: at once,
    /// past any waiter, recorded at that instant even past the limit — into **debt** — as long
    /// as the window then holds at most `limit + bound` (else `false`, and nothing is taken).
    /// A log in debt refuses requests until enough of its oldest entries have left the window
    /// for them to fit under the limit ([`wait`](Self::wait) counts every entry).
    ///
    /// The debit is recorded exactly as a request of `n` granted now would be: added to the
    /// newest entry if that is of this instant (a lease settled at once: its own entry), else
    /// an entry of its own while the ring has a free slot. A full ring (`N` entries in the
    /// window, so at least `N` permits: never while `N ≥ limit + bound`, e.g. a ring of twice
    /// the limit) has none: the debit is then folded into the newest entry, which is moved to
    /// this instant, so that entry's permits are counted until the debit leaves the window —
    /// later than exact by the time between the two, never sooner (folding never lets a
    /// request through early). The caller keeps `limit + bound` within `u32::MAX` (an entry's
    /// permits are at most the window's).
    pub fn take_debt(&mut self, reading: u64, n: u32, s: Shape, bound: u32) -> bool {
        let now = self.effective(reading);
        let (count, permits) = self.expired_prefix(now, s);
        if self.used - permits + u64::from(n) > u64::from(s.limit) + u64::from(bound) {
            return false;
        }
        self.drop_front(count, permits);
        let newest = (self.head + self.len + N - 1) % N;
        if self.len > 0 && (self.len == N || self.ring[newest].at == now) {
            // The newest entry is at or before `now`: the debit joins it (no slot needed when
            // it is of this very instant, the lease's own entry when settled at once).
            self.ring[newest] = Entry {
                at: now,
                permits: self.ring[newest].permits + n,
            };
        } else {
            self.push(now, n);
        }
        self.used += u64::from(n);
        self.last = Some(now);
        true
    }

    /// Nanoseconds from `now` until `want` permits fit: until enough of the oldest entries have
    /// left the window. Zero if they fit now.
    /// Counted from the clock's reading, even when it is behind the newest entry.
    pub fn wait(&self, reading: u64, want: u64, s: Shape) -> u128 {
        let now = self.effective(reading);
        let limit = u64::from(s.limit);
        let mut used = self.used_at(now, s);
        if used + want <= limit {
            return 0;
        }
        for i in 0..self.len {
            let e = self.nth(i);
            if now - e.at >= s.window {
                continue;
            }
            used -= u64::from(e.permits);
            if used + want <= limit {
                // It leaves the window at `at + window`.
                let leaves = u128::from(e.at) + u128::from(s.window);
                return leaves - u128::from(reading);
            }
        }
        // Only reachable for want > limit, which the caller refuses first.
        u128::from(u64::MAX)
    }

    /// Takes `n` permits for a queued waiter served at `reading`, as of the first instant they
    /// fit — not before the newest entry, which is at least when the waiter queued or the one
    /// ahead of it was granted (it queued because they did not fit then, and nothing but
    /// admissions changes the log). The entry is recorded at that instant, so it leaves the
    /// window when it would have had the waiter been served right then. Returns the instant.
    /// `n <= limit` is the caller's to check; a probe (`n == 0`) needs one permit, takes nothing.
    pub fn take_when_fits(&mut self, reading: u64, n: u32, s: Shape) -> Result<u64, Denied> {
        let now = self.effective(reading);
        let start = self.last.unwrap_or(0).min(now);
        let want = u64::from(n.max(1));
        let fit = u128::from(start) + self.wait(start, want, s);
        if fit > u128::from(now) {
            return Err(Denied::Exhausted {
                wait: self.wait(reading, want, s).max(1),
            });
        }
        let fit = fit as u64;
        self.try_take(fit, n, s, true).map(|()| fit)
    }

    /// The instant of the newest entry whose instant's low
    /// [`STAMP_BITS`](crate::lease::STAMP_BITS) bits are `stamp` (a lease's), or `u64::MAX`
    /// (no entry's) if none. Entries less than 2^31 ns (2.1 s) apart never share their low
    /// bits; two that do (an exact multiple of 2^31 ns apart, in a window longer than that)
    /// are told apart by taking the newer.
    pub fn instant_of_stamp(&self, stamp: u64) -> u64 {
        let mask = (1u64 << crate::lease::STAMP_BITS) - 1;
        (0..self.len)
            .rev()
            .map(|i| self.nth(i).at)
            .find(|at| at & mask == stamp)
            .unwrap_or(u64::MAX)
    }

    /// Takes `n` permits recorded at `at` out of the log (from the newest entry of that time
    /// holding at least `n`), if it still holds them: a waiter granted them went away without
    /// them, or a lease was settled below what it took. An entry left with no permit goes.
    pub fn remove(&mut self, at: u64, n: u32) {
        let Some(i) = (0..self.len).rev().find(|&i| {
            let e = self.nth(i);
            e.at == at && e.permits >= n
        }) else {
            return;
        };
        let e = self.nth(i);
        self.used -= u64::from(n);
        if e.permits > n {
            self.ring[(self.head + i) % N] = Entry {
                at,
                permits: e.permits - n,
            };
            return;
        }
        for j in i..self.len - 1 {
            self.ring[(self.head + j) % N] = self.nth(j + 1);
        }
        self.len -= 1;
    }

    /// Nanoseconds from `reading` until the last of `requests` is admitted, each (in order, at
    /// most `limit`) as soon as it fits.
    pub fn wait_behind(
        &self,
        reading: u64,
        requests: impl IntoIterator<Item = u32>,
        s: Shape,
    ) -> u128 {
        let mut log = self.clone();
        let mut at = u128::from(reading);
        for n in requests {
            let n = n.clamp(1, s.limit);
            let Ok(t) = u64::try_from(at) else {
                break; // past the clock's horizon: nothing later can be told apart
            };
            at = u128::from(t) + log.wait(t, u64::from(n), s);
            let Ok(t) = u64::try_from(at) else { break };
            log.waiters = false;
            let _ = log.try_take(t, n, s, true);
        }
        at - u128::from(reading)
    }

    /// Nanoseconds from `reading` until time alone lets `total` permits be admitted, in
    /// requests of at most the limit. Past one whole-limit request the walk is periodic — a
    /// request of the whole limit fits only in an empty log, one window after the previous
    /// one — so it is bounded for any `total`.
    pub fn wait_for(&self, reading: u64, total: u64, s: Shape) -> u128 {
        let limit = u64::from(s.limit);
        if total <= limit {
            return self.wait(reading, total.max(1), s);
        }
        let whole = (total - 1) / limit;
        let last = (total - whole * limit) as u32;
        let requests = [s.limit, last];
        let extra = u128::from(whole - 1) * u128::from(s.window);
        self.wait_behind(reading, requests, s).saturating_add(extra)
    }

    /// Since when the log has been empty at `now`, if it is: the newest entry's expiry, or 0.
    pub fn empty_since(&self, now: u64, s: Shape) -> Option<u64> {
        if self.used_at(now, s) > 0 {
            return None;
        }
        Some(self.last.map_or(0, |t| t.saturating_add(s.window)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Shape = Shape {
        limit: 5,
        window: 60,
    };

    /// Article 002's login rule: at most 5 per minute, exactly, over any rolling minute.
    #[test]
    fn exact_over_any_rolling_window() {
        let mut log = Log::<5>::new();
        for t in [0, 10, 20, 30, 40] {
            log.try_take(t, 1, S, false).unwrap();
        }
        assert_eq!(
            log.try_take(59, 1, S, false),
            Err(Denied::Exhausted { wait: 1 })
        );
        // At 60 the entry of 0 leaves: exactly one more.
        log.try_take(60, 1, S, false).unwrap();
        assert_eq!(
            log.try_take(60, 1, S, false),
            Err(Denied::Exhausted { wait: 10 })
        );
        assert_eq!(log.used(), 5);
        assert_eq!(log.len(), 5);
    }

    #[test]
    fn multi_permit_entries_and_waits() {
        let mut log = Log::<5>::new();
        log.try_take(0, 3, S, false).unwrap();
        log.try_take(5, 2, S, false).unwrap();
        assert_eq!(log.len(), 2);
        // 3 more: both entries must go (the 3 at 60 are not enough alone: 2 + 3 = 5, fits).
        assert_eq!(log.wait(6, 3, S), 54);
        assert_eq!(log.wait(6, 4, S), 59);
        assert!(log.try_take(59, 3, S, false).is_err());
        assert!(log.try_take(60, 3, S, false).is_ok());
    }

    #[test]
    fn probe_records_nothing_and_idleness_is_dated() {
        let mut log = Log::<5>::new();
        assert_eq!(log.try_take(0, 0, S, false), Ok(()));
        assert!(log.is_empty());
        assert_eq!(log.empty_since(0, S), Some(0));
        log.try_take(7, 5, S, false).unwrap();
        assert_eq!(
            log.try_take(8, 0, S, false),
            Err(Denied::Exhausted { wait: 59 })
        );
        assert_eq!(log.empty_since(66, S), None);
        assert_eq!(log.empty_since(1_000, S), Some(67));
    }

    #[test]
    fn backwards_clock_keeps_entries() {
        let mut log = Log::<5>::new();
        log.try_take(100, 4, S, false).unwrap();
        log.expire(S);
        assert_eq!(log.used_at(3, S), 4);
        // Taken at 3 on the clock, recorded at 100: no time passed.
        log.try_take(3, 1, S, false).unwrap();
        assert!(log.try_take(3, 1, S, false).is_err());
        assert_eq!(log.wait(3, 1, S), 157); // the entry of 100 leaves at 160 on this clock
        assert_eq!(log.empty_since(160, S), Some(160));
    }

    #[test]
    fn the_ring_wraps_many_times() {
        let mut log = Log::<5>::new();
        for i in 0..1_000u64 {
            log.try_take(i * 13, 1, S, false).unwrap();
            assert!(log.used() <= 5);
            assert!(log.len() <= 5);
        }
        let s = Shape {
            limit: 5,
            window: u64::MAX,
        };
        let mut log = Log::<5>::new();
        log.try_take(u64::MAX, 5, s, false).unwrap();
        assert_eq!(log.wait(u64::MAX, 1, s), u128::from(u64::MAX));
        // fuzz: an entry dated just before the horizon, a window just past it, a clock read as 0
        // (stepped back): the entry leaves 2^64 ns from the reading, not u64::MAX.
        let s = Shape {
            limit: 5,
            window: (1 << 63) + 1,
        };
        let mut log = Log::<5>::new();
        log.try_take((1 << 63) - 1, 5, s, false).unwrap();
        assert_eq!(
            log.try_take(0, 5, s, false),
            Err(Denied::Exhausted { wait: 1 << 64 })
        );
    }

    /// fuzz: `sliding_log-horizon-edge`. 5 taken at 0; the clock reads 2^63 − 1 ns (the entry has
    /// left the window) and a probe runs; then the clock reads a time before creation (`u64::MAX`
    /// after a limiter created at 0, past the horizon: a step back). The probe wrote nothing, so
    /// the log acts at its newest entry's time, 0, where the 5 still count. The library used to
    /// expire the entry at the probe and then admit 5 more at time 0: 10 in one window.
    #[test]
    fn a_probe_does_not_date_the_log() {
        const MIN: Shape = Shape {
            limit: 5,
            window: 60_000_000_000,
        };
        let mut log = Log::<8>::new();
        log.try_take(0, 5, MIN, false).unwrap();
        let last_forward = (1 << 63) - 1;
        assert_eq!(log.used_at(last_forward, MIN), 0);
        assert_eq!(log.try_take(last_forward, 0, MIN, false), Ok(()));
        assert!(log.try_take(last_forward, 6, MIN, false).is_err());
        // Back before creation (the limiter reads it as 0): the 5 taken at 0 still count.
        assert_eq!(log.used_at(0, MIN), 5);
        assert_eq!(
            log.try_take(0, 5, MIN, false),
            Err(Denied::Exhausted {
                wait: 60_000_000_000
            })
        );
        // A denial and a replenish-style trim date nothing either.
        log.expire(MIN);
        assert_eq!(log.used_at(0, MIN), 5);
        // An admission does: after one at 2^63 − 1, a step back acts at 2^63 − 1.
        log.try_take(last_forward, 5, MIN, false).unwrap();
        assert_eq!(log.used_at(0, MIN), 5);
        assert_eq!(log.len(), 1);
    }

    #[test]
    fn the_waiters_flag_holds_back_newcomers_but_not_probes_or_bargers() {
        let mut log = Log::<5>::new();
        log.waiters = true;
        assert!(log.try_take(0, 1, S, false).is_err());
        assert_eq!(log.try_take(0, 0, S, false), Ok(()));
        assert_eq!(log.try_take(0, 1, S, true), Ok(()));
    }

    /// A waiter served late is recorded when it first fit, so it leaves the window as early as
    /// if it had been served right then.
    #[test]
    fn a_waiter_is_recorded_when_it_first_fit() {
        let mut log = Log::<5>::new();
        log.try_take(0, 3, S, false).unwrap();
        log.try_take(10, 2, S, false).unwrap();
        // 3 more fit at 60 (the 3 of 0 leave); served at 59, not yet.
        assert!(log.clone().take_when_fits(59, 3, S).is_err());
        let mut late = log.clone();
        assert_eq!(late.take_when_fits(100, 3, S), Ok(60));
        let mut on_time = log.clone();
        assert_eq!(on_time.take_when_fits(60, 3, S), Ok(60));
        assert_eq!(late, on_time);
        // The next waiter: 2 more once the 2 of 10 leave (at 70), not before the 3 of 60.
        assert_eq!(late.take_when_fits(200, 2, S), Ok(70));
        // Given back: the entry goes (the 2 of 10, expired by 70, went with the grant).
        late.remove(70, 2);
        assert_eq!((late.used(), late.len()), (3, 1));
    }

    #[test]
    fn waits_behind_requests_and_for_many_permits() {
        let mut log = Log::<5>::new();
        log.try_take(0, 5, S, false).unwrap();
        // 5 at 60, then 1 at 120; 5 + 5 + 5 + 1: 60, 120, 180, then 240.
        assert_eq!(log.wait_behind(0, [5, 1], S), 120);
        assert_eq!(log.wait_for(0, 16, S), log.wait_behind(0, [5, 5, 5, 1], S));
        assert_eq!(log.wait_for(0, 16, S), 240);
        assert_eq!(log.wait_for(0, 3, S), 60);
    }

    /// Article 002's five logins at 0, 10, 20, 30 and 40, then a debit of 2 at 45 (7 in the
    /// window of 5): 1 more waits for 3 to leave, the entries of 0, 10 and 20, the last at 80.
    fn five_singles_and_a_debit_of_2_at_45<const N: usize>() -> Log<N> {
        let mut log = Log::<N>::new();
        for t in [0, 10, 20, 30, 40] {
            log.try_take(t, 1, S, false).unwrap();
        }
        assert!(log.take_debt(45, 2, S, 5));
        assert_eq!(log.used(), 7);
        assert_eq!(
            log.try_take(45, 1, S, false),
            Err(Denied::Exhausted { wait: 35 })
        );
        log
    }

    /// A debit past the limit (issue 38): an entry of its own while the ring has room, so it
    /// leaves the window exactly as a request granted then would; RetryAfter counts it.
    #[test]
    fn a_debit_is_an_entry_of_its_own_while_the_ring_has_room() {
        let mut log = five_singles_and_a_debit_of_2_at_45::<8>();
        assert_eq!(log.len(), 6);
        // Past the bound (the window at most 10): nothing taken.
        assert!(!log.take_debt(45, 4, S, 5));
        assert_eq!(log.used(), 7);
        // At 100 the entry of 40 has left, the debit's (45) not: 2 counted.
        assert_eq!(log.used_at(100, S), 2);
        assert_eq!(log.empty_since(100, S), None, "in debt: not idle");
        assert_eq!(log.used_at(105, S), 0);
        assert_eq!(log.empty_since(105, S), Some(105));
    }

    /// A full ring has no slot for the debit: it is folded into the newest entry, moved to the
    /// debit's instant (never leaving sooner than exact).
    #[test]
    fn a_debit_on_a_full_ring_is_folded_into_the_newest_entry() {
        let mut log = five_singles_and_a_debit_of_2_at_45::<5>();
        assert_eq!(log.len(), 5);
        assert!(log.take_debt(46, 3, S, 5));
        assert_eq!(log.used(), 10);
        // The entry of 40 now leaves with the debits, at 106.
        assert_eq!(log.used_at(100, S), 6);
        assert_eq!(log.used_at(106, S), 0);
    }
}
