// The models of `sliding_window.rs` (128-bit header: 10 ns segments) and
// `sliding_window_narrow.rs` (64-bit header: 1 ms segments), included by both with their own
// `SEGMENT_NS`. Every time below is a multiple of it.

use std::sync::Arc;
use std::time::Duration;

use loom::thread;
use tollgate::{
    Clock, Instant, Limiter, ManualClock, Rejection, Replenishing, SlidingWindowLimiter,
    SlidingWindowOptions,
};
use tollgate_loom_tests::{
    assert_closed, assert_exhausted, check, ns, RecordingClock, ThreadClock,
};

const LIMIT: u32 = 3;
const SEGMENTS: u64 = 3;

type Window<C> = SlidingWindowLimiter<C, 3>;

fn window<C: Clock>(clock: C) -> Arc<Window<C>> {
    let opts = SlidingWindowOptions::new(LIMIT, ns(SEGMENTS * SEGMENT_NS), SEGMENTS as u32);
    Arc::new(SlidingWindowLimiter::with_capacity(opts, clock).unwrap())
}

fn take<C: Clock>(l: &Window<C>, n: u32) -> Result<u32, Rejection> {
    l.try_acquire(n).map(|lease| {
        assert_eq!(lease.permits(), n);
        assert!(
            !lease.returns_permits(),
            "a sliding window lease returns nothing"
        );
        n
    })
}

// ---------------------------------------------------------------------------------------------
// The sequential model.

/// One operation of a model thread, at the start of segment `seg` of its own clock.
#[derive(Clone, Copy, Debug)]
enum Op {
    Take { seg: u64, n: u32 },
    Replenish { seg: u64 },
}

/// What an operation returned: a grant, a refusal with its RetryAfter, or replenish's count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Granted,
    Refused(Duration),
    Available(u64),
}

/// The sliding window as plainly as it can be said: permits per segment, and the segment the
/// limiter has reached (a clock reading behind it counts as no time passing).
#[derive(Clone, Debug)]
struct Plain {
    counts: [u32; 16],
    tick: u64,
}

impl Plain {
    fn new() -> Self {
        Self {
            counts: [0; 16],
            tick: 0,
        }
    }

    fn used_at(&self, tick: u64) -> u32 {
        (tick.saturating_sub(SEGMENTS - 1)..=tick)
            .map(|j| self.counts[j as usize])
            .sum()
    }

    fn available_at(&self, seg: u64) -> u64 {
        u64::from(LIMIT - self.used_at(seg.max(self.tick)))
    }

    /// Grants `n` permits at segment `seg` if the window has room.
    fn take(&mut self, seg: u64, n: u32) -> bool {
        let cur = self.tick.max(seg);
        if self.used_at(cur) + n > LIMIT {
            return false;
        }
        self.counts[cur as usize] += n;
        self.tick = cur;
        true
    }

    /// The RetryAfter of a request for `n` seen at the start of segment `seg`: the wait until
    /// enough of the oldest segments have left the window (at least 1 ns).
    fn wait(&self, seg: u64, n: u32) -> Duration {
        let cur = self.tick.max(seg);
        let free = LIMIT - self.used_at(cur);
        let Some(missing) = n.checked_sub(free).filter(|m| *m > 0) else {
            return ns(1);
        };
        let mut freed = 0;
        let mut slides = SEGMENTS;
        for m in 1..=SEGMENTS {
            if let Some(j) = (cur + m).checked_sub(SEGMENTS) {
                freed += self.counts[j as usize];
            }
            if freed >= missing {
                slides = m;
                break;
            }
        }
        // Counted from the start of `cur`: a reading behind it is stale, real time is past it.
        ns(slides * SEGMENT_NS)
    }
}

/// Where a thread's operation stands in the plain model. A take decides in one step (its header
/// CAS) and, if refused, computes its RetryAfter in a second (from a fresh reading of the
/// header); a replenish slides in one step and reads what is available in a second.
#[derive(Clone, Copy, Debug)]
enum Pc {
    Start,
    Refused,
    Slid,
    Done(Outcome),
}

fn step(m: &mut Plain, op: Op, pc: Pc) -> Pc {
    match (op, pc) {
        (Op::Take { seg, n }, Pc::Start) => {
            if m.take(seg, n) {
                Pc::Done(Outcome::Granted)
            } else {
                Pc::Refused
            }
        }
        (Op::Take { seg, n }, Pc::Refused) => Pc::Done(Outcome::Refused(m.wait(seg, n))),
        (Op::Replenish { seg }, Pc::Start) => {
            m.tick = m.tick.max(seg);
            Pc::Slid
        }
        (Op::Replenish { seg }, Pc::Slid) => Pc::Done(Outcome::Available(m.available_at(seg))),
        (op, pc) => unreachable!("{op:?} at {pc:?}"),
    }
}

/// Every interleaving of the racing threads' steps, run on the plain model after `setup`: the
/// outcomes, and what is available at each of `probes` (segments).
fn explanations(setup: &[Op], racing: &[Op], probes: &[u64]) -> Vec<(Vec<Outcome>, Vec<u64>)> {
    fn explore(
        m: &Plain,
        racing: &[Op],
        pcs: &[Pc],
        probes: &[u64],
        found: &mut Vec<(Vec<Outcome>, Vec<u64>)>,
    ) {
        let mut finished = true;
        for (i, pc) in pcs.iter().enumerate() {
            if matches!(pc, Pc::Done(_)) {
                continue;
            }
            finished = false;
            let (mut m, mut pcs) = (m.clone(), pcs.to_vec());
            pcs[i] = step(&mut m, racing[i], *pc);
            explore(&m, racing, &pcs, probes, found);
        }
        if finished {
            let outcomes = pcs
                .iter()
                .map(|pc| match pc {
                    Pc::Done(o) => *o,
                    _ => unreachable!(),
                })
                .collect();
            let found_now = (
                outcomes,
                probes.iter().map(|&p| m.available_at(p)).collect(),
            );
            if !found.contains(&found_now) {
                found.push(found_now);
            }
        }
    }
    let mut base = Plain::new();
    for op in setup {
        let Op::Take { seg, n } = *op else {
            unreachable!("setup only takes")
        };
        assert!(base.take(seg, n), "setup must succeed");
    }
    let mut found = Vec::new();
    explore(
        &base,
        racing,
        &vec![Pc::Start; racing.len()],
        probes,
        &mut found,
    );
    found
}

/// Runs `setup` on the model thread, then each racing operation on its own thread with its own
/// clock, joins, probes what is available at each of `probes` (segments, read at their start and
/// at their last nanosecond), and asserts that some interleaving of the racing operations'
/// steps explains it all. Returns the outcomes.
fn linearizable(setup: &[Op], racing: &[Op], probes: &[u64]) -> Vec<Outcome> {
    let l = window(ThreadClock);
    for op in setup {
        let Op::Take { seg, n } = *op else {
            unreachable!()
        };
        ThreadClock::set(seg * SEGMENT_NS);
        take(&l, n).unwrap();
    }
    let handles: Vec<_> = racing
        .iter()
        .map(|&op| {
            let l = l.clone();
            thread::spawn(move || match op {
                Op::Take { seg, n } => {
                    ThreadClock::set(seg * SEGMENT_NS);
                    match take(&l, n) {
                        Ok(_) => Outcome::Granted,
                        Err(e) => {
                            let waited = e.retry_after().expect("a refusal carries a RetryAfter");
                            assert_exhausted(&e, waited);
                            Outcome::Refused(waited)
                        }
                    }
                }
                Op::Replenish { seg } => {
                    ThreadClock::set(seg * SEGMENT_NS);
                    Outcome::Available(l.replenish())
                }
            })
        })
        .collect();
    let outcomes: Vec<Outcome> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let mut avail = Vec::new();
    for &p in probes {
        // Permits come back at the start of a segment, never inside one.
        ThreadClock::set(p * SEGMENT_NS);
        let first = l.available_permits();
        ThreadClock::set(p * SEGMENT_NS + SEGMENT_NS - 1);
        assert_eq!(
            l.available_permits(),
            first,
            "permits came back inside segment {p}"
        );
        avail.push(first);
    }
    let explained = explanations(setup, racing, probes);
    assert!(
        explained.contains(&(outcomes.clone(), avail.clone())),
        "no interleaving of {racing:?} explains outcomes {outcomes:?} with permits {avail:?} at \
         segments {probes:?}; the interleavings give {explained:?}"
    );
    let granted = outcomes.iter().filter(|o| **o == Outcome::Granted).count() as u64;
    let refused = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Refused(_)))
        .count() as u64;
    let s = l.statistics();
    assert_eq!(
        (s.total_successful, s.total_failed),
        (setup.len() as u64 + granted, refused)
    );
    outcomes
}

const PROBES: [u64; 5] = [2, 3, 4, 5, 6];

fn take_at(seg: u64, n: u32) -> Op {
    Op::Take { seg, n }
}

// ---------------------------------------------------------------------------------------------
// Racing for the last permits.

/// One permit left (2 taken in segment 0), two `try_acquire(1)` in segment 0: exactly one wins;
/// the loser waits until segment 0 leaves the window (30 ns).
#[test]
fn one_permit_left_exactly_one_wins() {
    check(|| {
        let out = linearizable(&[take_at(0, 2)], &[take_at(0, 1), take_at(0, 1)], &PROBES);
        let wins = out.iter().filter(|o| **o == Outcome::Granted).count();
        assert_eq!(wins, 1, "{out:?}");
        assert!(out.contains(&Outcome::Refused(ns(3 * SEGMENT_NS))), "{out:?}");
    });
}

/// Two permits left, two `try_acquire(1)`: both win.
#[test]
fn two_permits_left_both_win() {
    check(|| {
        let out = linearizable(&[take_at(0, 1)], &[take_at(0, 1), take_at(0, 1)], &PROBES);
        assert_eq!(out, [Outcome::Granted, Outcome::Granted]);
    });
}

// ---------------------------------------------------------------------------------------------
// Slides.

/// A slide racing a slide from the same header: 2 permits taken in segment 0; thread A (clock in
/// segment 1) and thread B (clock in segment 2) each ask for 1. Segment 0 is still in the window
/// in both, so exactly one wins. If A slides first, B's slide from segment 1 must read A's frozen
/// count of segment 0 from the ring; if B slides first, A's older reading is decided in B's
/// segment. Segment 0's permits come back at 30 ns exactly; the winner's at 40 or 50 ns.
#[test]
fn slide_races_slide() {
    check(|| {
        let out = linearizable(&[take_at(0, 2)], &[take_at(1, 1), take_at(2, 1)], &PROBES);
        let wins = out.iter().filter(|o| **o == Outcome::Granted).count();
        assert_eq!(wins, 1, "{out:?}");
    });
}

/// The ring hand-off between two slides: 1 permit taken in segment 0 and 1 in segment 1 (the
/// header at segment 1, segment 0 frozen). Thread A (segment 2) asks for 1 and thread B
/// (segment 3) for 2. Whichever order: exactly one wins. If A goes first its slide freezes
/// segment 1 into the ring, and B's slide from segment 2 must read that count (window 1..=3 holds
/// 1 + 1, no room for 2); a frozen count written after the header moved would let B in.
#[test]
fn slide_races_slide_through_the_ring() {
    check(|| {
        let out = linearizable(
            &[take_at(0, 1), take_at(1, 1)],
            &[take_at(2, 1), take_at(3, 2)],
            &PROBES,
        );
        let wins = out.iter().filter(|o| **o == Outcome::Granted).count();
        assert_eq!(wins, 1, "{out:?}");
    });
}

/// A stale slide must not shrink a frozen count: 1 permit taken in segment 0; A asks for 1 in
/// segment 0, B and C for 1 each in segment 1 (4 asked for, room for 3 in any window holding
/// segment 0). B can read the header while segment 0 holds 1, be preempted, and freeze "segment
/// 0: 1" after A has taken a second permit in segment 0 and C has slid to segment 1 freezing
/// "segment 0: 2"; the ring must keep 2 (the largest count of the latest segment), or the slide
/// to segment 2 (the first probe) would count segment 0 as 1 and hand out a permit twice.
#[test]
fn stale_slide_keeps_the_largest_frozen_count() {
    check(|| {
        let out = linearizable(
            &[take_at(0, 1)],
            &[take_at(0, 1), take_at(1, 1), take_at(1, 1)],
            &PROBES,
        );
        let wins = out.iter().filter(|o| **o == Outcome::Granted).count();
        assert_eq!(wins, 2, "{out:?}");
    });
}

/// Three acquirers across three slides: 2 permits taken in segment 0; A asks for 1 in segment
/// 1, B for 1 in segment 2, C for 2 in segment 3 (where segment 0 has left). The outcome must be
/// that of one interleaving of their steps, decisions, RetryAfters and returning permits alike.
#[test]
fn three_acquirers_across_slides() {
    check(|| {
        linearizable(
            &[take_at(0, 2)],
            &[take_at(1, 1), take_at(2, 1), take_at(3, 2)],
            &PROBES,
        );
    });
}

/// `replenish()` (a slide with nothing taken) at segment 2 races `try_acquire(1)` at segment 1,
/// with 2 permits taken in segment 0: replenish never consumes, so the acquire always wins, in
/// segment 1 or (after the replenish moved the header) in segment 2; replenish reports 1 or 0.
#[test]
fn replenish_races_acquire() {
    check(|| {
        let out = linearizable(
            &[take_at(0, 2)],
            &[Op::Replenish { seg: 2 }, take_at(1, 1)],
            &PROBES,
        );
        assert_eq!(out[1], Outcome::Granted);
    });
}

/// Several acquirers across a slide made by another thread moving the shared `ManualClock`:
/// 1 permit taken in segment 0 and 1 in segment 1; the clock stands at 19 ns (segment 1) and a
/// third thread moves it to 20 ns (segment 2) while two threads each ask for 1. Segment 0 is in
/// the window in both segments, so exactly one wins — a slide to segment 2 that lost segment 0's
/// frozen count would admit both. The loser waits exactly until segment 0 leaves (30 ns), from
/// the instant it computed the wait at (read from a [`RecordingClock`]). Then:
/// nothing comes back before 30 ns, segment 0's permit at 30 ns, segment 1's at 40 ns, all at
/// 50 ns.
#[test]
fn acquirers_race_a_clock_driven_slide() {
    check(|| {
        let rec = RecordingClock::new();
        let clock = rec.0.clone();
        let l = window(rec);
        take(&l, 1).unwrap();
        clock.set(Instant::from_nanos(SEGMENT_NS));
        take(&l, 1).unwrap();
        clock.set(Instant::from_nanos(2 * SEGMENT_NS - 1));
        let c = clock.clone();
        let ticker = thread::spawn(move || c.advance(ns(1)));
        let racer = || {
            let l = l.clone();
            thread::spawn(move || {
                RecordingClock::readings();
                (take(&l, 1), RecordingClock::readings())
            })
        };
        let (a, b) = (racer(), racer());
        ticker.join().unwrap();
        let ((ra, a_readings), (rb, b_readings)) = (a.join().unwrap(), b.join().unwrap());
        assert!(
            ra.is_ok() != rb.is_ok(),
            "over- or under-admitted: {ra:?} {rb:?}"
        );
        for (r, readings) in [(&ra, &a_readings), (&rb, &b_readings)] {
            if let Err(e) = r {
                // Segment 0 leaves at 30 ns; the wait is computed at the last reading, or from
                // 20 ns when that reading (19 ns) is stale: the winner already moved the window
                // to segment 2, so real time is past 20 ns and the staleness must not count.
                let last = *readings.last().unwrap();
                let waited = e.retry_after().unwrap();
                assert!(
                    waited == ns(3 * SEGMENT_NS - last)
                        || (last < 2 * SEGMENT_NS && waited == ns(SEGMENT_NS)),
                    "{e:?} after a reading at {last} ns"
                );
                assert_exhausted(e, waited);
            }
        }
        let at = |t: u64| {
            clock.set(Instant::from_nanos(t));
            l.available_permits()
        };
        let s = SEGMENT_NS;
        assert_eq!((at(2 * s), at(3 * s - 1)), (0, 0));
        assert_eq!((at(3 * s), at(4 * s - 1)), (1, 1));
        // Segment 1 held 1 or 2 (the winner's, if it read 19 ns).
        let back = at(4 * s);
        assert!(back == 2 || back == 3, "{back}");
        assert_eq!(at(5 * s - 1), back);
        assert_eq!(at(5 * s), 3);
        let s = l.statistics();
        assert_eq!((s.total_successful, s.total_failed), (3, 1));
    });
}

// ---------------------------------------------------------------------------------------------
// Close.

/// `close()` races `try_acquire(1)`: the acquire succeeds or is `Closed`; after `close()`
/// returns every acquire is `Closed`, in this segment and after a slide; the statistics add up.
#[test]
fn close_races_acquire() {
    check(|| {
        let clock = Arc::new(ManualClock::new());
        let l = window(clock.clone());
        let l1 = l.clone();
        let closer = thread::spawn(move || {
            l1.close();
            assert_closed(&take(&l1, 1).unwrap_err());
        });
        let l2 = l.clone();
        let a = thread::spawn(move || take(&l2, 1));
        closer.join().unwrap();
        let ra = a.join().unwrap();
        if let Err(e) = &ra {
            assert_closed(e);
        }
        let got = u64::from(ra.is_ok());
        assert!(l.is_closed());
        assert_closed(&take(&l, 1).unwrap_err());
        assert_eq!(l.available_permits(), 3 - got);
        clock.set(Instant::from_nanos(SEGMENT_NS));
        assert_closed(&take(&l, 1).unwrap_err());
        let s = l.statistics();
        assert_eq!((s.total_successful, s.total_failed), (got, 4 - got));
    });
}

/// `reconfigure` lowering the limit from 3 to 1 races `try_acquire(2)` on an empty window: the
/// acquire either wins (2 counted; then the window, over its new limit, refuses 1 with a wait
/// until the segment slides out) or is refused as exceeding the new limit. Never both granted
/// and followed by a grant beyond the new limit.
#[test]
fn reconfigure_races_acquire() {
    check(|| {
        let l = window(ManualClock::new());
        let l1 = l.clone();
        let changer = thread::spawn(move || {
            let opts = SlidingWindowOptions::new(1, ns(SEGMENTS * SEGMENT_NS), SEGMENTS as u32);
            l1.reconfigure(opts).unwrap();
            assert_eq!(l1.options().permit_limit, 1);
            let e = take(&l1, 2).unwrap_err();
            assert_eq!(e.reason(), tollgate::Reason::ExceedsLimit);
        });
        let l2 = l.clone();
        let a = thread::spawn(move || take(&l2, 2));
        changer.join().unwrap();
        let ra = a.join().unwrap();
        match &ra {
            Ok(n) => {
                assert_eq!(*n, 2);
                assert_eq!(l.available_permits(), 0);
                let e = take(&l, 1).unwrap_err();
                assert_exhausted(&e, ns(SEGMENTS * SEGMENT_NS));
            }
            Err(e) => {
                assert_eq!(e.reason(), tollgate::Reason::ExceedsLimit, "{e:?}");
                assert_eq!(l.available_permits(), 1);
            }
        }
    });
}
