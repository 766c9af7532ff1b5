//! Deliberately broken transitions: test-only copies of limiter word updates with the one step
//! that makes them atomic taken out, and the loom models that must catch them. The models are
//! the ones the real limiters pass (`concurrency.rs`, `sliding_window.rs`); each broken copy has a
//! correct twin run by the same model, which passes, so a failure is the broken step's doing.
//!
//! Nothing here touches `tollgate`'s code: the copies reproduce the packed words and the pure
//! transitions of `src/concurrency/state.rs` and `src/sliding_window/state.rs` in small.
#![cfg(loom)]

use std::sync::Arc;

use loom::sync::atomic::{AtomicU64, Ordering};
use loom::thread;
use tollgate_loom_tests::check;

// ---------------------------------------------------------------------------------------------
// The concurrency limiter's word, taken by load-then-store instead of compare-and-swap.

const AVAILABLE: u64 = 0xFFFF_FFFF;
const CLOSED: u64 = 1 << 32;

/// `State::try_take` of the concurrency limiter: the word with `n` fewer permits, or `None`.
fn try_take(w: u64, n: u32) -> Option<u64> {
    let available = (w & AVAILABLE) as u32;
    if w & CLOSED != 0 || available < n {
        return None;
    }
    Some((w & !AVAILABLE) | u64::from(available - n))
}

/// How a copy writes its decision.
#[derive(Clone, Copy)]
enum Update {
    /// load, decide, compare-and-swap, retry on interference (what `src/cas.rs` does).
    CompareAndSwap,
    /// load, decide, store: BROKEN, a racing writer's update is overwritten.
    LoadThenStore,
}

fn take(word: &AtomicU64, n: u32, how: Update) -> bool {
    let mut cur = word.load(Ordering::Acquire);
    loop {
        let Some(new) = try_take(cur, n) else {
            return false;
        };
        match how {
            Update::LoadThenStore => {
                word.store(new, Ordering::Release);
                return true;
            }
            Update::CompareAndSwap => {
                match word.compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => return true,
                    Err(actual) => cur = actual,
                }
            }
        }
    }
}

/// The model of `concurrency.rs::one_permit_left_exactly_one_wins`: one permit left, two
/// acquirers; exactly one wins and none is left.
fn one_permit_two_acquirers(how: Update) {
    check(move || {
        let word = Arc::new(AtomicU64::new(1));
        let spawn = || {
            let word = word.clone();
            thread::spawn(move || take(&word, 1, how))
        };
        let (a, b) = (spawn(), spawn());
        let wins = u32::from(a.join().unwrap()) + u32::from(b.join().unwrap());
        assert_eq!(
            wins, 1,
            "over-admitted: {wins} acquirers won the only permit"
        );
        assert_eq!(word.load(Ordering::Acquire) & AVAILABLE, 0);
    });
}

/// The copy with a compare-and-swap passes.
#[test]
fn concurrency_word_with_cas_passes() {
    one_permit_two_acquirers(Update::CompareAndSwap);
}

/// The copy with load-then-store is caught: both acquirers load "1 available", both store
/// "0 available", both are granted the only permit.
#[test]
#[should_panic(expected = "over-admitted: 2 acquirers won the only permit")]
fn concurrency_word_with_load_then_store_is_caught() {
    one_permit_two_acquirers(Update::LoadThenStore);
}

// ---------------------------------------------------------------------------------------------
// The sliding window's slide, with the frozen count of the segment being left written after the
// header's compare-and-swap instead of before it.

const SEGMENTS: u64 = 3;
const LIMIT: u64 = 3;

/// The header, packed in 64 bits for the copy: `cur` (16 bits), `prev` (16 bits), `tick` (32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    cur: u64,
    prev: u64,
    tick: u64,
}

impl Header {
    fn unpack(w: u64) -> Self {
        Self {
            cur: w & 0xFFFF,
            prev: (w >> 16) & 0xFFFF,
            tick: w >> 32,
        }
    }

    fn pack(self) -> u64 {
        self.cur | self.prev << 16 | self.tick << 32
    }

    /// `Header::at` of `src/sliding_window/state.rs`.
    fn at(self, k: u64, frozen: impl Fn(u64) -> u64) -> Header {
        if k <= self.tick {
            return self;
        }
        if k - self.tick >= SEGMENTS {
            return Header {
                cur: 0,
                prev: 0,
                tick: k,
            };
        }
        let first = (k + 1).saturating_sub(SEGMENTS);
        let prev = self.cur + (first..self.tick).map(frozen).sum::<u64>();
        Header {
            cur: 0,
            prev,
            tick: k,
        }
    }
}

/// When a slide writes the frozen count of the segment it leaves.
#[derive(Clone, Copy)]
enum Freeze {
    /// Before the header's compare-and-swap (what `src/sliding_window/mod.rs` does).
    BeforeHeaderCas,
    /// After it: BROKEN, a racing slide can read the ring before the count is there.
    AfterHeaderCas,
}

struct Sliding {
    header: AtomicU64,
    /// Slot `j % SEGMENTS`: segment (high 32 bits), count (low 32 bits).
    ring: [AtomicU64; SEGMENTS as usize],
}

impl Sliding {
    fn new() -> Self {
        Self {
            header: AtomicU64::new(0),
            ring: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
        }
    }

    fn frozen(&self, j: u64) -> u64 {
        let v = self.ring[(j % SEGMENTS) as usize].load(Ordering::Acquire);
        if v >> 32 == j {
            v & 0xFFFF_FFFF
        } else {
            0
        }
    }

    /// `SlidingWindowLimiter::freeze`: keep the largest count of the latest segment.
    fn freeze(&self, j: u64, count: u64) {
        if count == 0 {
            return;
        }
        let slot = &self.ring[(j % SEGMENTS) as usize];
        let new = j << 32 | count;
        let mut cur = slot.load(Ordering::Acquire);
        loop {
            let (seg, held) = (cur >> 32, cur & 0xFFFF_FFFF);
            if seg > j || (seg == j && held >= count) {
                return;
            }
            match slot.compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(v) => cur = v,
            }
        }
    }

    /// Takes `n` permits in segment `k`.
    fn take(&self, k: u64, n: u64, when: Freeze) -> bool {
        let mut w = self.header.load(Ordering::Acquire);
        loop {
            let h = Header::unpack(w);
            let now = h.at(k, |j| self.frozen(j));
            if now.cur + now.prev + n > LIMIT {
                return false;
            }
            let next = Header {
                cur: now.cur + n,
                ..now
            };
            let leaving = next.tick != h.tick;
            if leaving && matches!(when, Freeze::BeforeHeaderCas) {
                self.freeze(h.tick, h.cur);
            }
            match self.header.compare_exchange_weak(
                w,
                next.pack(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    if leaving && matches!(when, Freeze::AfterHeaderCas) {
                        self.freeze(h.tick, h.cur);
                    }
                    return true;
                }
                Err(actual) => w = actual,
            }
        }
    }
}

/// The model of `sliding_window.rs::slide_races_slide_through_the_ring`: 1 permit taken in
/// segment 0 and 1 in segment 1; A asks for 1 in segment 2, B for 2 in segment 3. Exactly one
/// can win: if A slides first, B's slide must read A's frozen count of segment 1.
fn ring_hand_off(when: Freeze) {
    check(move || {
        let w = Arc::new(Sliding::new());
        assert!(w.take(0, 1, when));
        assert!(w.take(1, 1, when));
        let spawn = |k, n| {
            let w = w.clone();
            thread::spawn(move || w.take(k, n, when))
        };
        let (a, b) = (spawn(2, 1), spawn(3, 2));
        let wins = u32::from(a.join().unwrap()) + u32::from(b.join().unwrap());
        assert_eq!(wins, 1, "over-admitted: {wins} slides won room for one");
    });
}

/// The copy that freezes before the header CAS passes.
#[test]
fn sliding_slide_freezing_before_the_cas_passes() {
    ring_hand_off(Freeze::BeforeHeaderCas);
}

/// The copy that freezes after the header CAS is caught: A moves the header to segment 2, B
/// slides from it to segment 3 before A has frozen segment 1, reads 0 for it, and is admitted
/// with 4 permits in the window.
#[test]
#[should_panic(expected = "over-admitted: 2 slides won room for one")]
fn sliding_slide_freezing_after_the_cas_is_caught() {
    ring_hand_off(Freeze::AfterHeaderCas);
}
