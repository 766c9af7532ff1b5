//! The concurrency limiter's packed word and its pure transitions.
//!
//! The word is a `usize`: 64 bits on 64-bit targets, 32 bits on 32-bit MCUs — a word every
//! target compares-and-swaps natively, never through a lock. With `W` its width:
//!
//! | bits     | field       | meaning                                                       |
//! |----------|-------------|---------------------------------------------------------------|
//! | 0..W-5   | `available` | permits not held by any lease (at most [`MAX_LIMIT`])          |
//! | W-5      | `indebted`  | the limit was lowered below the permits held: releases pay the |
//! |          |             | debt (kept beside the word, under the queue lock) first        |
//! | W-4      | `dating`    | an `idle_duration` call is writing the idle stamp              |
//! | W-3      | `undated`   | the limiter became idle on a release that read no clock        |
//! | W-2      | `waiters`   | the wait queue is not empty                                    |
//! | W-1      | `closed`    | `close()` was called                                           |
//!
//! `undated` and `dating` mean something only while the limiter is idle (every permit
//! available, nobody waiting); taking permits leaves them as they are, and the next release that
//! makes the limiter idle sets `undated` again.

const W: u32 = usize::BITS;
const CLOSED: usize = 1 << (W - 1);
const WAITERS: usize = 1 << (W - 2);
const UNDATED: usize = 1 << (W - 3);
const DATING: usize = 1 << (W - 4);
const INDEBTED: usize = 1 << (W - 5);
const AVAILABLE: usize = INDEBTED - 1;

/// The largest permit limit the word holds: `u32::MAX` on 64-bit targets, 2^27 - 1 on 32-bit
/// ones.
pub const MAX_LIMIT: u32 = if AVAILABLE >= u32::MAX as usize {
    u32::MAX
} else {
    AVAILABLE as u32
};

/// The flag getters: `$name` is whether the word has `$flag` set.
macro_rules! flags {
    ($($(#[$doc:meta])* $name:ident: $flag:ident;)*) => {$(
        $(#[$doc])*
        #[inline]
        pub const fn $name(self) -> bool {
            self.0 & $flag != 0
        }
    )*};
}

/// The state: the packed word itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct State(usize);

/// Why a take was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// The limiter is closed.
    Closed,
    /// Fewer permits available than asked for (or none, for a probe).
    Exhausted,
}

impl State {
    /// A fresh limiter: all `limit` (at most [`MAX_LIMIT`]) permits available.
    pub const fn full(limit: u32) -> Self {
        Self(limit as usize)
    }

    /// Reads a packed word.
    #[inline]
    pub const fn unpack(w: usize) -> Self {
        Self(w)
    }

    /// Packs into a word.
    #[inline]
    pub const fn pack(self) -> usize {
        self.0
    }

    /// Permits not held by any lease.
    #[inline]
    pub const fn available(self) -> u32 {
        (self.0 & AVAILABLE) as u32
    }

    flags! {
        /// `close()` was called.
        closed: CLOSED;
        /// The wait queue is not empty.
        waiters: WAITERS;
        /// Became idle on a release that read no clock, and nobody has dated it yet.
        undated: UNDATED;
        /// The limit was lowered below the permits held, and releases still owe the difference.
        indebted: INDEBTED;
        /// Someone is writing the idle stamp.
        dating: DATING;
    }

    /// The limit lowered by `cut` permits, `debt` already owed (`0` unless `indebted`): the
    /// available permits absorb what they can, and the rest is owed by the leases out (their
    /// releases pay it before anything becomes available). Returns the new state and the debt
    /// now owed.
    #[inline]
    pub const fn lower(self, cut: u32, debt: u64) -> (State, u64) {
        let a = self.available();
        let absorbed = if a < cut { a } else { cut };
        let owed = debt + (cut - absorbed) as u64;
        let flag = if owed > 0 { INDEBTED } else { 0 };
        (
            State((self.0 & !(AVAILABLE | INDEBTED)) | (a - absorbed) as usize | flag),
            owed,
        )
    }

    /// `n` permits coming back (released, or added by a raised limit) while `debt` is owed:
    /// they pay the debt first, the rest becomes available (at most `limit`). Returns the new
    /// state and the debt still owed.
    #[inline]
    pub const fn repay(self, n: u32, debt: u64, limit: u32) -> (State, u64) {
        let paid = if (n as u64) < debt { n as u64 } else { debt };
        let owed = debt - paid;
        let next = self.give_back(n - paid as u32, limit);
        let flag = if owed > 0 { INDEBTED } else { 0 };
        (State((next.0 & !INDEBTED) | flag), owed)
    }

    /// Every permit available and nobody waiting.
    #[inline]
    pub const fn idle(self, limit: u32) -> bool {
        self.0 & (AVAILABLE | WAITERS) == limit as usize
    }

    /// Takes `n` permits (`n <= limit` is checked by the caller). A probe (`n == 0`) succeeds
    /// when any permit is available and returns the state unchanged. While anyone waits in the
    /// queue, a newcomer takes nothing unless it may `barge` (newest-first order, or a queue
    /// server taking for the waiter it serves).
    #[inline]
    pub const fn try_take(self, n: u32, barge: bool) -> Result<State, Denied> {
        let blocking = if barge { CLOSED } else { CLOSED | WAITERS };
        // The common case first: open, nobody queued ahead, enough permits.
        if n != 0 && self.available() >= n && self.0 & blocking == 0 {
            return Ok(State(self.0 - n as usize));
        }
        if self.closed() {
            return Err(Denied::Closed);
        }
        if n == 0 && self.available() > 0 {
            return Ok(self);
        }
        Err(Denied::Exhausted)
    }

    /// The same state with the waiters flag set or cleared.
    #[inline]
    pub const fn with_waiters(self, waiters: bool) -> State {
        State(if waiters {
            self.0 | WAITERS
        } else {
            self.0 & !WAITERS
        })
    }

    /// Gives `n` permits back, never above `limit`.
    #[inline]
    pub const fn give_back(self, n: u32, limit: u32) -> State {
        let sum = self.available() as u64 + n as u64;
        let available = if sum > limit as u64 {
            limit
        } else {
            sum as u32
        };
        State((self.0 & !AVAILABLE) | available as usize)
    }

    /// Marks a state that is idle as idle since an instant nobody read (a release that reads
    /// no clock); any other state is returned as it is. A `dating` flag stays: its holder still
    /// writes the stamp, and nobody else may until it is done (the next look dates this period).
    #[inline]
    pub const fn mark_undated_if_idle(self, limit: u32) -> State {
        if self.idle(limit) {
            State(self.0 | UNDATED)
        } else {
            self
        }
    }

    /// `undated` → `dating`: the caller now writes the idle stamp.
    #[inline]
    pub const fn start_dating(self) -> State {
        State((self.0 & !UNDATED) | DATING)
    }

    /// `dating` → dated: the stamp is written.
    #[inline]
    pub const fn end_dating(self) -> State {
        State(self.0 & !DATING)
    }

    /// The closed state.
    pub const fn close(self) -> State {
        State(self.0 | CLOSED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_independent() {
        for limit in [0, 1, 7, MAX_LIMIT] {
            let s = State::full(limit);
            assert_eq!(s.available(), limit);
            assert!(!s.closed() && !s.waiters() && !s.undated() && !s.dating());
            let t = s.close().with_waiters(true).mark_undated_if_idle(limit);
            assert_eq!(t.available(), limit);
            assert!(t.closed() && t.waiters() && !t.undated());
            let u = s.mark_undated_if_idle(limit);
            assert!(u.undated() && u.idle(limit));
            let d = u.start_dating();
            assert!(!d.undated() && d.dating() && d.idle(limit));
            assert_eq!(d.end_dating(), s);
        }
    }

    /// Lowering the limit takes what is available first and owes the rest; releases (and a
    /// raised limit) pay the debt before anything becomes available again; the flag is set
    /// exactly while something is owed, and no other field changes.
    #[test]
    fn a_lowered_limit_is_owed_by_the_leases_out() {
        // Limit 10, 7 held, 3 available; lowered to 4: 3 absorbed, 3 owed.
        let s = State::full(10).close().with_waiters(true);
        let s = State(s.0 - 7);
        let (l, owed) = s.lower(6, 0);
        assert_eq!((l.available(), owed), (0, 3));
        assert!(l.indebted() && l.closed() && l.waiters());
        // A release of 2 pays 2; one of 5 pays the last 1 and frees 4 (the new limit).
        let (r, owed) = l.repay(2, owed, 4);
        assert_eq!((r.available(), owed, r.indebted()), (0, 1, true));
        let (r, owed) = r.repay(5, owed, 4);
        assert_eq!((r.available(), owed, r.indebted()), (4, 0, false));
        assert!(r.closed() && r.waiters());
        // Lowering within what is available owes nothing.
        let (m, owed) = State::full(10).lower(4, 0);
        assert_eq!((m.available(), owed, m.indebted()), (6, 0, false));
        // A debt grows when lowered again; a zero repay changes nothing.
        let (d, owed) = State(0).lower(2, 5);
        assert_eq!((d.available(), owed, d.indebted()), (0, 7, true));
        assert_eq!(d.repay(0, owed, 3), (d, 7));
        // Never above the limit.
        assert_eq!(State(0).repay(9, 0, 4).0.available(), 4);
    }

    #[test]
    fn max_limit_is_native() {
        if usize::BITS >= 64 {
            assert_eq!(MAX_LIMIT, u32::MAX);
        } else {
            assert_eq!(MAX_LIMIT, (1 << 27) - 1);
        }
    }

    #[test]
    fn take_and_give_back() {
        let s = State::full(3);
        let s = s.try_take(2, false).unwrap();
        assert_eq!(s.available(), 1);
        assert!(!s.idle(3));
        assert_eq!(s.try_take(2, false), Err(Denied::Exhausted));
        assert_eq!(s.give_back(2, 3).available(), 3);
        assert!(s.give_back(2, 3).idle(3));
        // Never above the limit, even for a bogus release.
        assert_eq!(s.give_back(u32::MAX, 3).available(), 3);
        let max = State::full(MAX_LIMIT).try_take(MAX_LIMIT, false).unwrap();
        assert_eq!(max.available(), 0);
        assert_eq!(max.give_back(u32::MAX, MAX_LIMIT), State::full(MAX_LIMIT));
    }

    #[test]
    fn probes_change_nothing() {
        let s = State::full(1);
        assert_eq!(s.try_take(0, false), Ok(s));
        let empty = s.try_take(1, false).unwrap();
        assert_eq!(empty.try_take(0, false), Err(Denied::Exhausted));
        // A probe ignores the queue, as before.
        assert_eq!(
            s.with_waiters(true).try_take(0, false),
            Ok(s.with_waiters(true))
        );
    }

    #[test]
    fn closed_and_waiters_refuse() {
        assert_eq!(
            State::full(5).close().try_take(1, false),
            Err(Denied::Closed)
        );
        assert_eq!(
            State::full(5).close().try_take(0, false),
            Err(Denied::Closed)
        );
        let queued = State::full(5).with_waiters(true);
        assert_eq!(queued.try_take(1, false), Err(Denied::Exhausted));
        // Newest-first newcomers and queue servers may take ahead of the queue.
        assert_eq!(queued.try_take(1, true).unwrap().available(), 4);
        assert!(!queued.idle(5));
    }

    #[test]
    fn taking_keeps_the_date_flags_and_a_busy_state_is_not_marked() {
        let u = State::full(2).mark_undated_if_idle(2);
        let taken = u.try_take(1, false).unwrap();
        assert!(taken.undated() && !taken.idle(2));
        // A release that leaves a permit out marks nothing new (the flag is stale, unread).
        assert_eq!(
            State::full(2)
                .try_take(1, false)
                .unwrap()
                .mark_undated_if_idle(2),
            State::full(2).try_take(1, false).unwrap()
        );
    }

    /// Mutation testing (issue 9): setting a flag that is already set leaves it set (an `|`,
    /// not an `^`): closing twice, marking twice, a second waiter setting the waiters flag,
    /// dating what is already being dated.
    #[test]
    fn setting_a_flag_twice_keeps_it_set() {
        let s = State::full(4);
        assert!(s.close().close().closed());
        assert!(s.with_waiters(true).with_waiters(true).waiters());
        let marked = s.mark_undated_if_idle(4).mark_undated_if_idle(4);
        assert!(marked.undated());
        let dating = marked.start_dating().start_dating();
        assert!(dating.dating() && !dating.undated());
    }

    /// A release keeps every flag: giving permits back rewrites only the count (a waiters flag
    /// lost there would strand the queue).
    #[test]
    fn giving_back_keeps_the_flags() {
        let s = State::full(4).try_take(3, false).unwrap();
        let flagged = s.with_waiters(true).close();
        let back = flagged.give_back(2, 4);
        assert_eq!(back.available(), 3);
        assert!(back.waiters() && back.closed());
        assert_eq!(back.give_back(9, 4).available(), 4);
    }
}
