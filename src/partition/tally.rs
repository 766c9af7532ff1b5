//! Exact counters that cost no locked instruction on the hot path (feature `std`).
//!
//! Each thread claims one of [`CELLS`] cell indices for as long as it lives (process-wide, shared
//! by every [`Tally`]), and counts in its own cell with a plain load and store: no other thread
//! writes that cell, so no count is lost, and no cache line is shared between counting threads.
//! A thread that finds every index taken counts in a shared cell with `fetch_add`. An index is
//! given back when its thread exits; the next thread to claim it synchronizes with that release,
//! so it continues from the last count.
//!
//! Why: a `fetch_add` is a locked instruction, about as costly as the compare-and-swap that makes
//! the decision itself; counting every decision with one made statistics a third of the keyed
//! limiter's own time.

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU64, Ordering};

/// Cells owned by one thread each; one more, shared, for threads beyond them.
const CELLS: usize = if cfg!(loom) { 0 } else { 64 };

#[cfg(not(loom))]
mod claim {
    use std::sync::atomic::{AtomicBool, Ordering};

    static TAKEN: [AtomicBool; super::CELLS] = [const { AtomicBool::new(false) }; super::CELLS];

    /// A thread's claimed index, given back when the thread exits.
    struct Claim(Option<usize>);

    impl Claim {
        fn new() -> Self {
            Claim((0..super::CELLS).find(|&i| {
                TAKEN[i]
                    .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            }))
        }
    }

    impl Drop for Claim {
        fn drop(&mut self) {
            if let Some(i) = self.0 {
                TAKEN[i].store(false, Ordering::Release);
            }
        }
    }

    std::thread_local! {
        static CLAIM: Claim = Claim::new();
    }

    /// The calling thread's cell index, if it has one.
    #[inline]
    pub(super) fn index() -> Option<usize> {
        CLAIM.try_with(|c| c.0).ok().flatten()
    }
}

#[cfg(loom)]
mod claim {
    pub(super) fn index() -> Option<usize> {
        None
    }
}

/// Granted and refused counts, one pair of cells per counting thread.
pub(crate) struct Tally {
    cells: Box<[CachePadded<[AtomicU64; 2]>]>,
}

impl Tally {
    pub(crate) fn new() -> Self {
        Self {
            cells: (0..=CELLS)
                .map(|_| CachePadded::new([AtomicU64::new(0), AtomicU64::new(0)]))
                .collect(),
        }
    }

    #[inline]
    fn bump(&self, which: usize) {
        match claim::index() {
            Some(i) => {
                // Only this thread writes cell `i`: a plain increment is exact.
                let c = &self.cells[i][which];
                c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            }
            None => {
                self.cells[CELLS][which].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Counts `result` and hands it back.
    #[inline]
    pub(crate) fn count<T, E>(&self, result: Result<T, E>) -> Result<T, E> {
        self.bump(usize::from(result.is_err()));
        result
    }

    /// (granted, refused) so far.
    pub(crate) fn totals(&self) -> (u64, u64) {
        self.cells.iter().fold((0, 0), |(ok, ko), c| {
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
                        let _ = t.count(if (i + j) % 4 == 0 { Err(()) } else { Ok(()) });
                    }
                });
            }
        });
        assert_eq!(t.totals(), (75_000, 25_000));
    }
}
