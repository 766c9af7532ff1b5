//! Exact counters that cost no locked instruction on the hot path (feature `std`).
//!
//! Each thread claims one of [`CELLS`] cell indices for as long as it lives (process-wide, shared
//! by every [`Tally`]), and counts in its own cell with a plain load and store: no other thread
//! writes that cell, so no count is lost, and no cache line is shared between counting threads
//! (each cell is a `CachePadded` line of its own), so a count — the only write a denial makes —
//! writes nothing another core reads until someone asks for the totals. A thread that finds every
//! index taken (more than [`CELLS`] threads alive at once), or that counts while its thread-local
//! storage is being torn down, counts in a shared cell with `fetch_add`. An index is given back
//! when its thread exits; the next thread to claim it synchronizes with that release, so it
//! continues from the last count.
//!
//! Memory: a tally's cells are allocated lazily, in buckets of 1, 1, 2, 4, …, 128 cells; a thread
//! of index `i` allocates (once per tally) the bucket holding `i`. A limiter used by threads 0..8
//! holds 8 cells of 128 bytes; one never used holds none (the tally itself is 9 `OnceLock`s and
//! the shared cell). Threads claim the lowest free index, so the buckets in use follow the number
//! of threads alive, not how many have ever lived.
//!
//! Why: a `fetch_add` is a locked instruction, about as costly as the compare-and-swap that makes
//! the decision itself; counting every decision with one made statistics a third of a limiter's
//! time, and on a denial — otherwise read-only — it made every core write the same cache line.
//!
//! Signal handlers: a count is a load and a store, not atomic with respect to a signal handler on
//! the same thread that also counts on the same limiter (one count could be lost). Limiters are
//! not meant to be used from signal handlers.

use std::sync::OnceLock;

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU64, Ordering};

/// Buckets of cells: bucket 0 holds index 0, bucket `b ≥ 1` holds indices `2^(b-1) .. 2^b`.
const BUCKETS: usize = 9;
/// Cells owned by one thread each; threads beyond them share one more.
pub(crate) const CELLS: usize = 1 << (BUCKETS - 1);

/// The calling thread's cell, as `bucket << 16 | offset`, or one of these.
const UNCLAIMED: u32 = u32::MAX;
const NO_CELL: u32 = u32::MAX - 1;

/// A thread's (granted, refused) pair, alone on its cache line.
type Line = CachePadded<[AtomicU64; 2]>;

mod claim {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::{CELLS, NO_CELL, UNCLAIMED};

    static TAKEN: [AtomicBool; CELLS] = [const { AtomicBool::new(false) }; CELLS];

    std::thread_local! {
        /// The thread's cell, encoded (see `encode`). No destructor and a constant initializer,
        /// so reading it is a plain thread-local load, even while the thread exits.
        pub(super) static SLOT: Cell<u32> = const { Cell::new(UNCLAIMED) };
        /// Holds the claimed index; gives it back when the thread exits.
        static GUARD: Guard = Guard::new();
    }

    struct Guard(Option<usize>);

    impl Guard {
        fn new() -> Self {
            Guard((0..CELLS).find(|&i| {
                TAKEN[i]
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            }))
        }
    }

    impl Drop for Guard {
        fn drop(&mut self) {
            // Counts from here on (later thread-local destructors) go to the shared cell.
            SLOT.with(|s| s.set(NO_CELL));
            if let Some(i) = self.0 {
                TAKEN[i].store(false, Ordering::Release);
            }
        }
    }

    /// `bucket << 16 | offset` of index `i`.
    pub(super) fn encode(i: usize) -> u32 {
        if i == 0 {
            return 0;
        }
        let bucket = usize::BITS - i.leading_zeros(); // floor(log2 i) + 1
        let offset = i - (1 << (bucket - 1));
        (bucket << 16) | offset as u32
    }

    /// Claims an index for the calling thread (once), and returns its slot.
    #[cold]
    pub(super) fn slot() -> u32 {
        let slot = GUARD
            .try_with(|g| g.0.map_or(NO_CELL, encode))
            .unwrap_or(NO_CELL);
        SLOT.with(|s| s.set(slot));
        slot
    }

    #[inline(always)]
    pub(super) fn current() -> u32 {
        SLOT.with(Cell::get)
    }
}

/// Granted and refused counts, one pair of cells per counting thread.
pub(crate) struct Tally {
    buckets: [OnceLock<Box<[Line]>>; BUCKETS],
    shared: [AtomicU64; 2],
}

impl Tally {
    pub(crate) const fn new() -> Self {
        Self {
            buckets: [const { OnceLock::new() }; BUCKETS],
            shared: [AtomicU64::new(0), AtomicU64::new(0)],
        }
    }

    /// Counts in the calling thread's cell: a plain load and store, no locked instruction.
    #[inline]
    pub(crate) fn bump(&self, which: usize) {
        if !self.try_bump(which) {
            self.bump_slow(which, claim::current());
        }
    }

    /// [`bump`](Self::bump)'s common case: counts and returns `true` if the calling thread
    /// has its cell on this tally already; else counts nothing and returns `false`.
    #[inline(always)]
    pub(crate) fn try_bump(&self, which: usize) -> bool {
        let slot = claim::current();
        if let Some(lines) = self
            .buckets
            .get((slot >> 16) as usize)
            .and_then(OnceLock::get)
        {
            if let Some(line) = lines.get((slot & 0xFFFF) as usize) {
                // Only this thread writes this cell: a plain increment is exact.
                let c = &line[which];
                c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                return true;
            }
        }
        false
    }

    /// The thread's first count (claims an index), its first on this tally (allocates its
    /// bucket), or a count with no cell of its own.
    #[cold]
    #[inline(never)]
    fn bump_slow(&self, which: usize, slot: u32) {
        let slot = if slot == UNCLAIMED {
            claim::slot()
        } else {
            slot
        };
        let bucket = (slot >> 16) as usize;
        if slot == NO_CELL || bucket >= BUCKETS {
            self.shared[which].fetch_add(1, Ordering::Relaxed);
            return;
        }
        let size = if bucket == 0 { 1 } else { 1 << (bucket - 1) };
        let lines = self.buckets[bucket].get_or_init(|| {
            (0..size)
                .map(|_| CachePadded::new([AtomicU64::new(0), AtomicU64::new(0)]))
                .collect()
        });
        let c = &lines[(slot & 0xFFFF) as usize][which];
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// (granted, refused) so far: every thread's cell plus the shared one.
    pub(crate) fn totals(&self) -> (u64, u64) {
        let start = (
            self.shared[0].load(Ordering::Relaxed),
            self.shared[1].load(Ordering::Relaxed),
        );
        self.buckets
            .iter()
            .filter_map(OnceLock::get)
            .flat_map(|b| b.iter())
            .fold(start, |(ok, ko), c| {
                (
                    ok + c[0].load(Ordering::Relaxed),
                    ko + c[1].load(Ordering::Relaxed),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_many_threads_are_exact() {
        let t = Tally::new();
        std::thread::scope(|s| {
            for i in 0..100 {
                let t = &t;
                s.spawn(move || {
                    for j in 0..1_000 {
                        t.bump(usize::from((i + j) % 4 == 0));
                    }
                });
            }
        });
        assert_eq!(t.totals(), (75_000, 25_000));
    }

    #[test]
    fn more_threads_than_cells_share_one_exactly() {
        // 300 threads alive at once: at least 44 of them count in the shared cell.
        let t = Tally::new();
        let barrier = std::sync::Barrier::new(300);
        std::thread::scope(|s| {
            for _ in 0..300 {
                let (t, barrier) = (&t, &barrier);
                s.spawn(move || {
                    t.bump(0);
                    barrier.wait(); // every thread holds its index (or none) at once
                    for _ in 0..100 {
                        t.bump(0);
                        t.bump(1);
                    }
                });
            }
        });
        assert_eq!(t.totals(), (300 * 101, 300 * 100));
    }

    #[test]
    fn a_thread_reusing_an_index_continues_its_count() {
        let t = Tally::new();
        for _ in 0..50 {
            std::thread::scope(|s| {
                s.spawn(|| t.bump(1));
            });
        }
        t.bump(0);
        assert_eq!(t.totals(), (1, 50));
    }

    #[test]
    fn indices_map_to_buckets_of_doubling_size() {
        assert_eq!(claim::encode(0), 0);
        assert_eq!(claim::encode(1), 1 << 16);
        assert_eq!(claim::encode(2), 2 << 16);
        assert_eq!(claim::encode(3), (2 << 16) | 1);
        assert_eq!(claim::encode(4), 3 << 16);
        assert_eq!(claim::encode(CELLS - 1), (8 << 16) | 127);
        // Every index lands inside its bucket.
        for i in 0..CELLS {
            let (b, o) = ((claim::encode(i) >> 16) as usize, claim::encode(i) & 0xFFFF);
            let size = if b == 0 { 1 } else { 1 << (b - 1) };
            assert!(b < BUCKETS && (o as usize) < size, "{i}");
        }
    }
}
