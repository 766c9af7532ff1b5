//! The concurrency limiter's packed word and its pure transitions.
//!
//! Layout of the 64-bit word:
//!
//! | bits   | field       | meaning                                               |
//! |--------|-------------|-------------------------------------------------------|
//! | 0..32  | `available` | permits not held by any lease                          |
//! | 32     | `closed`    | `close()` was called                                   |
//! | 33     | `waiters`   | the wait queue is not empty (reserved for waiting)     |
//! | 34..64 | —           | zero                                                   |

/// The unpacked state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct State {
    /// Permits not held by any lease.
    pub available: u32,
    /// `close()` was called.
    pub closed: bool,
    /// The wait queue is not empty.
    pub waiters: bool,
}

const AVAILABLE: u64 = 0xFFFF_FFFF;
const CLOSED: u64 = 1 << 32;
const WAITERS: u64 = 1 << 33;

/// Why a take was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// The limiter is closed.
    Closed,
    /// Fewer permits available than asked for (or none, for a probe).
    Exhausted,
}

impl State {
    /// A fresh limiter: all `limit` permits available.
    pub const fn full(limit: u32) -> Self {
        Self {
            available: limit,
            closed: false,
            waiters: false,
        }
    }

    /// Reads a packed word.
    #[inline]
    pub const fn unpack(w: u64) -> Self {
        Self {
            available: (w & AVAILABLE) as u32,
            closed: w & CLOSED != 0,
            waiters: w & WAITERS != 0,
        }
    }

    /// Packs into a word.
    #[inline]
    pub const fn pack(self) -> u64 {
        self.available as u64
            | if self.closed { CLOSED } else { 0 }
            | if self.waiters { WAITERS } else { 0 }
    }

    /// Takes `n` permits (`n <= limit` is checked by the caller). A probe (`n == 0`) succeeds
    /// when any permit is available and returns the state unchanged. While anyone waits in the
    /// queue, a newcomer takes nothing unless it may `barge` (newest-first order, or a queue
    /// server taking for the waiter it serves).
    #[inline]
    pub const fn try_take(self, n: u32, barge: bool) -> Result<State, Denied> {
        if self.closed {
            return Err(Denied::Closed);
        }
        if n == 0 {
            return if self.available > 0 {
                Ok(self)
            } else {
                Err(Denied::Exhausted)
            };
        }
        if (self.waiters && !barge) || self.available < n {
            return Err(Denied::Exhausted);
        }
        Ok(State {
            available: self.available - n,
            ..self
        })
    }

    /// The same state with the waiters flag set or cleared.
    #[inline]
    pub const fn with_waiters(self, waiters: bool) -> State {
        State { waiters, ..self }
    }

    /// Gives `n` permits back, never above `limit`.
    #[inline]
    pub const fn give_back(self, n: u32, limit: u32) -> State {
        let sum = self.available as u64 + n as u64;
        let available = if sum > limit as u64 {
            limit
        } else {
            sum as u32
        };
        State { available, ..self }
    }

    /// The closed state.
    pub const fn close(self) -> State {
        State {
            closed: true,
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trips() {
        for s in [
            State::full(0),
            State::full(u32::MAX),
            State {
                available: 7,
                closed: true,
                waiters: false,
            },
            State {
                available: u32::MAX,
                closed: true,
                waiters: true,
            },
        ] {
            assert_eq!(State::unpack(s.pack()), s);
        }
    }

    #[test]
    fn take_and_give_back() {
        let s = State::full(3);
        let s = s.try_take(2, false).unwrap();
        assert_eq!(s.available, 1);
        assert_eq!(s.try_take(2, false), Err(Denied::Exhausted));
        assert_eq!(s.give_back(2, 3).available, 3);
        // Never above the limit, even for a bogus release.
        assert_eq!(s.give_back(u32::MAX, 3).available, 3);
    }

    #[test]
    fn probes_change_nothing() {
        let s = State::full(1);
        assert_eq!(s.try_take(0, false), Ok(s));
        let empty = s.try_take(1, false).unwrap();
        assert_eq!(empty.try_take(0, false), Err(Denied::Exhausted));
    }

    #[test]
    fn closed_and_waiters_refuse() {
        assert_eq!(
            State::full(5).close().try_take(1, false),
            Err(Denied::Closed)
        );
        let queued = State::full(5).with_waiters(true);
        assert_eq!(queued.try_take(1, false), Err(Denied::Exhausted));
        // Newest-first newcomers and queue servers may take ahead of the queue.
        assert_eq!(queued.try_take(1, true).unwrap().available, 4);
    }
}
