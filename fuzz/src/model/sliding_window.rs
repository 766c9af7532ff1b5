//! The sliding window: the window is `segments` segments of `window / segments` ns (whole
//! nanoseconds) each, counted from creation; permits taken in segment `j` count against the limit
//! until segment `j + segments` begins, then come back.
//!
//! - `try_acquire(n)`: `n > limit` → ExceedsLimit; closed → Closed; a probe succeeds iff a permit
//!   is free and takes none; otherwise granted iff `n` permits are free.
//! - a denial carries RetryAfter = the time until enough of the oldest segments have left the
//!   window for the request to fit.
//! - a settle's debit (`debit`) is counted in the current segment even past the limit, into
//!   debt, up to twice the limit in the window; requests then wait until the oldest segments
//!   have taken the debt and the request's room out of the window.
//! - idle: while no permit is counted in the window, the time since the last segment in which
//!   permits were taken left it (since creation if none ever were).
//!
//! State: a plain `Vec` of the counts of the window's segments, oldest first, as of segment
//! `current`. A clock reading in an earlier segment acts at `current` (see `model`).
//!
//! Documented limit of the library (sliding_window/state.rs): the segment number is 62 bits and
//! saturates at [`TICK_MAX`]; only 1 ns segments get there (after 146 years). From there the
//! window stops sliding. The model stops too; RetryAfter and idle duration are left unspecified
//! there (the window never frees anything, so no wait is right).

use super::time::elapsed;
use super::{Counts, Denial, Expect, Model, Reason};

/// The last segment number the library represents.
pub const TICK_MAX: u128 = (1 << 62) - 1;

/// The model.
#[derive(Clone, Debug)]
pub struct SlidingWindowModel {
    origin: u64,
    limit: u128,
    segments: usize,
    segment_ns: u128,
    /// The newest segment of the window `counts` describes.
    current: u128,
    /// `counts[i]`: permits taken in segment `current - (segments - 1) + i`.
    counts: Vec<u128>,
    /// The last segment in which permits were taken.
    last_used: Option<u128>,
    /// A give-back emptied the segment `last_used` named and no other counted segment is left
    /// in the window: the library then dates idleness by whatever older segment its ring still
    /// remembers, which this model does not keep. Idle duration is not compared until the next
    /// take.
    idle_unknown: bool,
    closed: bool,
    stats: Counts,
}

impl SlidingWindowModel {
    /// An empty window created at the raw reading `origin`.
    pub fn new(origin: u64, limit: u32, segments: u32, segment_ns: u64) -> Self {
        SlidingWindowModel {
            origin,
            limit: u128::from(limit),
            segments: segments as usize,
            segment_ns: u128::from(segment_ns),
            current: 0,
            counts: vec![0; segments as usize],
            last_used: None,
            idle_unknown: false,
            closed: false,
            stats: Counts::default(),
        }
    }

    /// The clock's segment (unsaturated).
    fn clock_segment(&self, now: u64) -> u128 {
        elapsed(self.origin, now) / self.segment_ns
    }

    /// Past [`TICK_MAX`]: the library's window no longer slides.
    fn stuck(&self, now: u64) -> bool {
        self.clock_segment(now) > TICK_MAX
    }

    /// The segment the limiter acts in for `now`: the clock's (saturated at [`TICK_MAX`]), or
    /// `current` if the clock is behind it.
    fn segment(&self, now: u64) -> u128 {
        self.clock_segment(now).min(TICK_MAX).max(self.current)
    }

    /// The window's counts as of segment `s >= current`: each slide, the oldest segment leaves
    /// and an empty one enters.
    fn at(&self, s: u128) -> Vec<u128> {
        assert!(s >= self.current);
        let slides = s - self.current;
        if slides >= self.segments as u128 {
            return vec![0; self.segments];
        }
        let mut counts = self.counts[slides as usize..].to_vec(); // the oldest `slides` left
        counts.resize(self.segments, 0); // as many empty ones entered
        counts
    }

    fn decide(&mut self, now: u64, n: u32) -> Result<(), Denial> {
        let n = u128::from(n);
        if n > self.limit {
            return Err(Denial::plain(Reason::ExceedsLimit));
        }
        if self.closed {
            return Err(Denial::plain(Reason::Closed));
        }
        let s = self.segment(now);
        let mut counts = self.at(s);
        let used: u128 = counts.iter().sum();
        // Past the limit (a debt): nothing free.
        let free = self.limit.saturating_sub(used);
        let needed = n.max(1);
        if free >= needed {
            if n > 0 {
                *counts.last_mut().unwrap() += n;
                self.counts = counts;
                self.current = s;
                self.last_used = Some(s);
                self.idle_unknown = false;
            }
            return Ok(());
        }
        if self.stuck(now) {
            return Err(Denial {
                reason: Reason::Exhausted,
                retry_after: Expect::Unspecified("window stuck at the 62-bit segment limit"),
            });
        }
        // counts[i] leaves the window when segment s + 1 + i begins. A debt must leave too.
        let missing = used + needed - self.limit;
        let mut freed = 0;
        let mut slides = 0;
        for c in &counts {
            slides += 1;
            freed += c;
            if freed >= missing {
                break;
            }
        }
        assert!(freed >= missing, "used permits cover the deficit");
        // A reading behind the state's segment (stale, or a clock stepped back) waits from the
        // start of that segment: real time is at least there.
        let from = if self.clock_behind(now) {
            s * self.segment_ns
        } else {
            elapsed(self.origin, now)
        };
        let wait = (s + slides) * self.segment_ns - from;
        Err(Denial {
            reason: Reason::Exhausted,
            retry_after: Expect::Exactly(Some(wait)),
        })
    }
}

impl SlidingWindowModel {
    /// A lease settled `n` above its estimate at `now` (issue 38): the `n` are counted in the
    /// current segment, as a request of `n` granted then would be, even past the limit — into
    /// debt — as long as the window then holds at most twice the limit; `false` (nothing
    /// taken) past that. Closed or not.
    pub fn debit(&mut self, now: u64, n: u32) -> bool {
        let n = u128::from(n);
        let s = self.segment(now);
        let mut counts = self.at(s);
        if counts.iter().sum::<u128>() + n > 2 * self.limit {
            return false;
        }
        *counts.last_mut().unwrap() += n;
        self.counts = counts;
        self.current = s;
        self.last_used = Some(s);
        self.idle_unknown = false;
        true
    }
}

impl Model for SlidingWindowModel {
    fn acquire(&mut self, now: u64, n: u32) -> Result<(), Denial> {
        let r = self.decide(now, n);
        self.stats.count(r)
    }

    fn available(&self, now: u64) -> u128 {
        self.limit
            .saturating_sub(self.at(self.segment(now)).iter().sum::<u128>())
    }

    fn idle(&self, now: u64) -> Expect<Option<u128>> {
        if self.stuck(now) {
            return Expect::Unspecified("window stuck at the 62-bit segment limit");
        }
        if self.available(now) < self.limit {
            return Expect::Exactly(None);
        }
        let free_since = match self.last_used {
            Some(j) => j + self.segments as u128, // the segment j left the window
            None => 0,
        };
        Expect::Exactly(Some(
            elapsed(self.origin, now).saturating_sub(free_since * self.segment_ns),
        ))
    }

    fn close(&mut self) {
        self.closed = true;
    }

    fn is_closed(&self) -> bool {
        self.closed
    }

    fn counts(&self) -> (u64, u64) {
        (self.stats.successful, self.stats.failed)
    }

    fn limit(&self) -> u32 {
        self.limit as u32
    }

    fn step_ns(&self) -> Option<u128> {
        Some(self.segment_ns)
    }

    fn window_ns(&self) -> Option<u128> {
        Some(self.segment_ns * self.segments as u128)
    }

    fn elapsed(&self, now: u64) -> u128 {
        elapsed(self.origin, now)
    }

    fn clock_behind(&self, now: u64) -> bool {
        self.clock_segment(now) < self.current
    }

    fn beyond_limits(&self, now: u64) -> bool {
        self.stuck(now)
    }

    fn counts_mut(&mut self) -> &mut Counts {
        &mut self.stats
    }

    /// A grant is stamped with its segment.
    fn stamp(&self, now: u64) -> u128 {
        self.segment(now)
    }

    /// Permits a waiter was granted in segment `stamp` and never received come back only while
    /// the limiter's state is still dated by that segment (nothing slid it since); otherwise
    /// they stay counted until their segment leaves the window, as if used.
    fn give_back(&mut self, _now: u64, n: u32, stamp: u128) {
        let n = u128::from(n);
        let last = self.counts.len() - 1;
        if self.current != stamp || self.counts[last] < n {
            return;
        }
        self.counts[last] -= n;
        if self.counts[last] == 0 && self.last_used == Some(self.current) {
            // The latest segment with permits counted is now an earlier one, if any.
            match self.counts.iter().rposition(|c| *c > 0) {
                Some(i) => self.last_used = Some(self.current - (last - i) as u128),
                None => self.idle_unknown = true,
            }
        }
    }

    fn idle_known(&self) -> bool {
        !self.idle_unknown
    }

    fn replenish(&mut self, now: u64) -> u128 {
        let s = self.segment(now);
        self.counts = self.at(s);
        self.current = s;
        self.limit.saturating_sub(self.counts.iter().sum::<u128>())
    }
}
