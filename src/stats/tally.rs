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
//! The common count is a repeat: a thread counting again on the tally it counted on last. Each
//! thread caches that tally's id and its line there ([`Cached`]), so such a count is two
//! thread-local loads, one load of the tally's id, a compare and an increment — no directory
//! walk. Any other count (the first on a tally, a switch between tallies) walks the directory
//! and refreshes the cache.
//!
//! Memory: a tally's cells are allocated lazily, in buckets of 1, 1, 2, 4, …, 128 cells; a thread
//! of index `i` allocates (once per tally) the bucket holding `i`. A limiter used by threads 0..8
//! holds 8 cells of 128 bytes and a 72-byte directory; one never used holds none (the tally itself
//! is a directory pointer, its id and the shared cell: 32 bytes). A compact tally (a partition's limiter)
//! never allocates: it counts in the shared cell with `fetch_add`. Threads claim the lowest free index, so the buckets in use follow the number
//! of threads alive, not how many have ever lived.
//!
//! Why: a `fetch_add` is a locked instruction, about as costly as the compare-and-swap that makes
//! the decision itself; counting every decision with one made statistics a third of a limiter's
//! time, and on a denial — otherwise read-only — it made every core write the same cache line.
//!
//! Signal handlers: a count is a load and a store, not atomic with respect to a signal handler on
//! the same thread that also counts on the same limiter (one count could be lost). Limiters are
//! not meant to be used from signal handlers.

// The statistics cells are the one place besides the wait queue where `unsafe` is allowed
// (DESIGN.md; issue 26): raw pointers to the lazily allocated cells, each block with its SAFETY.
#![allow(unsafe_code)]

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU64, Ordering};
#[cfg(loom)]
use loom::sync::atomic::AtomicPtr;
#[cfg(not(loom))]
use std::sync::atomic::AtomicPtr;

/// Buckets of cells: bucket 0 holds index 0, bucket `b ≥ 1` holds indices `2^(b-1) .. 2^b`.
const BUCKETS: usize = 9;
/// Cells owned by one thread each; threads beyond them share one more.
pub(crate) const CELLS: usize = 1 << (BUCKETS - 1);

/// The calling thread's cell, as `bucket << 16 | offset`, or one of these.
const UNCLAIMED: u32 = u32::MAX;
const NO_CELL: u32 = u32::MAX - 1;

/// A thread's (granted, refused) pair, and (samples, their latencies' sum in µs) for an
/// adaptive limiter ([`add_sample`](Tally::add_sample)), alone on its cache line (which holds
/// 128 bytes either way).
type Line = CachePadded<[AtomicU64; 4]>;

/// The cells of an adaptive limiter's samples in a [`Line`].
const SAMPLES: usize = 2;
const SAMPLE_SUM: usize = 3;

mod claim {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::{Cached, CELLS, NO_CELL, UNCLAIMED};

    static TAKEN: [AtomicBool; CELLS] = [const { AtomicBool::new(false) }; CELLS];

    std::thread_local! {
        /// The thread's cell, encoded (see `encode`). No destructor and a constant initializer,
        /// so reading it is a plain thread-local load, even while the thread exits.
        pub(super) static SLOT: Cell<u32> = const { Cell::new(UNCLAIMED) };
        /// The tally this thread counted on last and its line there (see `Cached`). Constant
        /// and without a destructor, like `SLOT`.
        pub(super) static LAST: Cell<Cached> = const { Cell::new(Cached::NONE) };
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
            // Counts from here on (later thread-local destructors) go to the shared cell: not
            // to the cached line either, which is the index's, and the index is given back.
            SLOT.with(|s| s.set(NO_CELL));
            LAST.with(|l| l.set(Cached::NONE));
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

/// A thread's cache of its last count: the [`Tally::id`] it counted on and its line there. A
/// count on the same tally is then a compare and an increment (no directory walk).
///
/// The key is the tally's process-unique id, not its address: a tally dropped and another
/// made at the same address has another id, so a stale entry never matches (its dangling
/// `line` is never read). Ids start at 1 and a tally without one reads 0; `NONE`'s id is
/// neither, and an id of 0 is never cached.
#[derive(Clone, Copy)]
struct Cached {
    id: u64,
    line: *const Line,
}

impl Cached {
    const NONE: Cached = Cached {
        id: u64::MAX,
        line: core::ptr::null(),
    };
}

/// The last id given to a tally ([`Tally::id`]); 2^64 of them never run out. (A plain std
/// atomic also under loom, which has no `static` atomics: only its uniqueness matters, which
/// `fetch_add` gives; the race that loom checks is on the tally's own `id`.)
static LAST_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The cells of a tally: bucket `b` points to its `size(b)` lines once a thread of that bucket
/// counted (null before). Allocated on the first count through a cell, so that a tally that
/// never gets one (a compact one, or one never used) costs only its two words.
struct Dir {
    buckets: [AtomicPtr<Line>; BUCKETS],
}

/// Lines in bucket `b`.
const fn size(b: usize) -> usize {
    if b == 0 {
        1
    } else {
        1 << (b - 1)
    }
}

/// The directory pointer of a compact tally: it never gets cells (never dereferenced; an
/// address no allocation has, so `addr() <= COMPACT.addr()` tells null and compact apart from a
/// directory).
const COMPACT: *mut Dir = core::ptr::dangling_mut::<Dir>();

/// Granted and refused counts, one pair of cells per counting thread — or, for a compact tally
/// (a partition's limiter, where memory per key counts more than contention), one shared pair.
///
/// 32 bytes in the limiter; a full tally's cells are on the heap: a 72-byte directory, then a
/// 128-byte line per counting thread. The only `unsafe` of the statistics is here: the
/// directory and the lines are reached through raw pointers, and a thread's last line through
/// its cache, so that the common count is a compare and an increment with no bounds or state
/// check (a `OnceLock` per bucket cost 24 bytes each and a state check per count).
pub(crate) struct Tally {
    dir: AtomicPtr<Dir>,
    /// 0 until the first count through a cell, then a process-unique id: the key of the
    /// per-thread cache ([`Cached`]).
    id: AtomicU64,
    shared: [AtomicU64; 2],
}

/// Publishes the freshly allocated `fresh` in `slot` if the slot is still null. Returns what the
/// slot holds then: `fresh`, or what another thread published first (`fresh` is then given to
/// `free`).
fn publish<T>(slot: &AtomicPtr<T>, fresh: *mut T, free: impl FnOnce(*mut T)) -> *mut T {
    match slot.compare_exchange(
        core::ptr::null_mut(),
        fresh,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => fresh,
        Err(theirs) => {
            free(fresh);
            theirs
        }
    }
}

impl Tally {
    crate::sync::const_unless_loom! {
        pub(crate) fn new() -> Self {
            Self {
                dir: AtomicPtr::new(core::ptr::null_mut()),
                id: AtomicU64::new(0),
                shared: [AtomicU64::new(0), AtomicU64::new(0)],
            }
        }
    }

    /// Makes the tally compact (if no cell was made yet): every count then goes to the shared
    /// pair with `fetch_add`, and nothing is ever allocated.
    pub(crate) fn make_compact(&self) {
        let _ = self.dir.compare_exchange(
            core::ptr::null_mut(),
            COMPACT,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// Counts in the calling thread's cell: a plain load and store, no locked instruction.
    #[inline]
    pub(crate) fn bump(&self, which: usize) {
        if !self.try_bump(which) {
            self.bump_slow(which, claim::current());
        }
    }

    /// [`bump`](Self::bump)'s common case: counts and returns `true` if this tally is the
    /// one the calling thread counted on last (its line is cached); else counts nothing and
    /// returns `false`.
    #[inline(always)]
    pub(crate) fn try_bump(&self, which: usize) -> bool {
        let last = claim::LAST.with(core::cell::Cell::get);
        if last.id != self.id.load(Ordering::Relaxed) {
            return false;
        }
        // SAFETY: `last` was cached by `bump_slow` on this thread for the tally of this id,
        // which is this one (ids are unique and 0 is never cached), so `line` is this thread's
        // line in this tally's cells, alive until `drop`, which cannot run while `&self` is
        // borrowed. The entry is cleared before the thread gives its index back (`Guard`).
        let c = unsafe { &(&*last.line)[which] };
        // Only this thread writes this cell: a plain increment is exact.
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        true
    }

    /// This tally's id, given now if it has none yet (by whichever thread asks first).
    fn id(&self) -> u64 {
        match self.id.load(Ordering::Relaxed) {
            0 => {
                let fresh = LAST_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                match self
                    .id
                    .compare_exchange(0, fresh, Ordering::Relaxed, Ordering::Relaxed)
                {
                    Ok(_) => fresh,
                    Err(theirs) => theirs,
                }
            }
            id => id,
        }
    }

    /// Every count but a repeated one on the same tally ([`try_bump`](Self::try_bump)): the
    /// thread's first count (claims an index), its first on this tally (allocates the
    /// directory, its bucket), a count on another tally than the last (walks the directory),
    /// a count with no cell of its own, or a compact tally's. Caches the line it counted in.
    #[cold]
    #[inline(never)]
    fn bump_slow(&self, which: usize, slot: u32) {
        match self.cache_line(slot) {
            Some(line) => {
                // SAFETY: a line of this tally's cells (`line_of`), alive until `drop`.
                let c = unsafe { &(&*line)[which] };
                // Only this thread writes this cell: a plain increment is exact.
                c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
            }
            None => {
                self.shared[which].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The line of `slot` in this tally's cells ([`line_of`](Self::line_of)), cached as the
    /// calling thread's last.
    fn cache_line(&self, slot: u32) -> Option<*const Line> {
        let line = self.line_of(slot)?;
        #[cfg(not(loom))]
        claim::LAST.with(|l| {
            l.set(Cached {
                id: self.id(),
                line,
            })
        });
        #[cfg(loom)]
        let _ = self.id();
        Some(line)
    }

    /// Counts an adaptive limiter's sample of `us` microseconds in the calling thread's line,
    /// beside its statistics (the line a decision just counted in: no other line is touched,
    /// and no locked instruction): `false`, counting nothing, for a thread with no cell of its
    /// own or a compact tally, whose caller keeps the sample elsewhere.
    #[inline]
    pub(crate) fn add_sample(&self, us: u64) -> bool {
        let last = claim::LAST.with(core::cell::Cell::get);
        let line = if last.id == self.id.load(Ordering::Relaxed) {
            last.line
        } else {
            match self.cache_line(claim::current()) {
                Some(line) => line,
                None => return false,
            }
        };
        // SAFETY: `line` is this thread's line in this tally's cells: cached by `cache_line`
        // for this tally's id (see `try_bump`), or just returned by it; alive until `drop`,
        // which cannot run while `&self` is borrowed.
        let cells = unsafe { &*line };
        // Only this thread writes these cells: plain additions are exact.
        let (n, sum) = (&cells[SAMPLES], &cells[SAMPLE_SUM]);
        n.store(n.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        sum.store(sum.load(Ordering::Relaxed) + us, Ordering::Relaxed);
        true
    }

    /// The line of `slot` (claimed now if `UNCLAIMED`) in this tally's cells, made if need be;
    /// `None` for a thread with no cell or a compact tally.
    fn line_of(&self, slot: u32) -> Option<*const Line> {
        let slot = if slot == UNCLAIMED {
            claim::slot()
        } else {
            slot
        };
        let bucket = (slot >> 16) as usize;
        if slot == NO_CELL || bucket >= BUCKETS {
            return None;
        }
        let lines = Self::lines(self.dir()?, bucket);
        // SAFETY: `lines` holds `size(bucket)` lines and the offset is below that
        // (`claim::encode`); they live until `drop`.
        Some(unsafe { lines.add((slot & 0xFFFF) as usize) })
    }

    /// The directory, made if need be; `None` for a compact tally.
    fn dir(&self) -> Option<&Dir> {
        let mut dir = self.dir.load(Ordering::Acquire);
        if dir.is_null() {
            let fresh = Box::into_raw(Box::new(Dir {
                buckets: core::array::from_fn(|_| AtomicPtr::new(core::ptr::null_mut())),
            }));
            dir = publish(&self.dir, fresh, |fresh| {
                // SAFETY: `fresh` was never shared: only this thread ever saw it.
                drop(unsafe { Box::from_raw(fresh) });
            });
        }
        if dir == COMPACT {
            return None;
        }
        // SAFETY: neither null nor `COMPACT`: a directory from `Box::into_raw`, freed only by
        // `drop`.
        Some(unsafe { &*dir })
    }

    /// Bucket `b`'s lines, allocated if need be.
    fn lines(dir: &Dir, b: usize) -> *mut Line {
        let lines = dir.buckets[b].load(Ordering::Acquire);
        if !lines.is_null() {
            return lines;
        }
        let fresh: Box<[Line]> = (0..size(b))
            .map(|_| CachePadded::new(core::array::from_fn(|_| AtomicU64::new(0))))
            .collect();
        let fresh = Box::into_raw(fresh).cast::<Line>();
        publish(&dir.buckets[b], fresh, |fresh| {
            // SAFETY: `fresh` was never shared, and holds `size(b)` lines from the `Box`.
            drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(fresh, size(b))) });
        })
    }

    /// (granted, refused) so far: every thread's cell plus the shared one.
    pub(crate) fn totals(&self) -> (u64, u64) {
        let (ok, ko) = self.sum_cells(0, 1);
        (
            ok + self.shared[0].load(Ordering::Relaxed),
            ko + self.shared[1].load(Ordering::Relaxed),
        )
    }

    /// (samples, their sum in µs) counted by [`add_sample`](Self::add_sample) so far.
    pub(crate) fn sample_totals(&self) -> (u64, u64) {
        self.sum_cells(SAMPLES, SAMPLE_SUM)
    }

    /// The sums of cells `a` and `b` over every thread's line.
    fn sum_cells(&self, a: usize, b: usize) -> (u64, u64) {
        let (mut x, mut y) = (0, 0);
        let dir = self.dir.load(Ordering::Acquire);
        if dir.addr() > COMPACT.addr() {
            // SAFETY: a directory from `Box::into_raw`, freed only by `drop`.
            let dir = unsafe { &*dir };
            for (bucket, lines) in dir.buckets.iter().enumerate() {
                let lines = lines.load(Ordering::Acquire);
                if lines.is_null() {
                    continue;
                }
                // SAFETY: `size(bucket)` lines from `lines()`, freed only by `drop`.
                for line in unsafe { core::slice::from_raw_parts(lines, size(bucket)) } {
                    x += line[a].load(Ordering::Relaxed);
                    y += line[b].load(Ordering::Relaxed);
                }
            }
        }
        (x, y)
    }
}

/// The pointer in `p`, read with exclusive access.
fn exclusive<T>(p: &mut AtomicPtr<T>) -> *mut T {
    #[cfg(loom)]
    return p.with_mut(|p| *p);
    #[cfg(not(loom))]
    *p.get_mut()
}

impl Drop for Tally {
    fn drop(&mut self) {
        let dir = exclusive(&mut self.dir);
        if dir.addr() <= COMPACT.addr() {
            return;
        }
        // SAFETY: a directory from `Box::into_raw`, not freed before (this is the only free),
        // and `&mut self`: no count runs.
        let mut dir = unsafe { Box::from_raw(dir) };
        for (b, lines) in dir.buckets.iter_mut().enumerate() {
            let lines = exclusive(lines);
            if !lines.is_null() {
                // SAFETY: `size(b)` lines from the `Box<[Line]>` made by `lines()`, freed once.
                drop(unsafe { Box::from_raw(core::ptr::slice_from_raw_parts_mut(lines, size(b))) });
            }
        }
    }
}

/// The tally for the loom models (`loom-tests/tests/tally.rs`): counts in the cell of an
/// index given explicitly (a loom thread is not an OS thread, so the thread-local claim is not
/// modelled), which is the whole of what can race — the directory and the buckets made by the
/// first counts, the counts, the totals read meanwhile.
#[cfg(loom)]
#[doc(hidden)]
pub struct LoomTally(Tally);

#[cfg(loom)]
impl LoomTally {
    /// A tally never counted on.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Self(Tally::new())
    }

    /// Counts `which` (0: granted, 1: refused) in the cell of thread index `index`, or in the
    /// shared pair for `None` (a thread beyond the cells).
    pub fn count(&self, which: usize, index: Option<usize>) {
        assert!(index.is_none_or(|i| i < CELLS));
        let slot = index.map_or(NO_CELL, claim::encode);
        self.0.bump_slow(which, slot);
    }

    /// The tally's id: 0 until a count went through a cell, then the same non-zero value
    /// whichever thread gave it.
    pub fn id(&self) -> u64 {
        self.0.id.load(Ordering::Relaxed)
    }

    /// Makes it compact.
    pub fn make_compact(&self) {
        self.0.make_compact();
    }

    /// (granted, refused).
    pub fn totals(&self) -> (u64, u64) {
        self.0.totals()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Held by the tests that spawn threads by the hundred (which may take every cell for a
    /// while) and by those that need the calling thread to own a cell (a thread that finds none
    /// counts in the shared pair, and gives no tally an id): otherwise they are flaky when the
    /// test harness runs them at once.
    fn cells_to_myself() -> std::sync::MutexGuard<'static, ()> {
        static CELLS: std::sync::Mutex<()> = std::sync::Mutex::new(());
        CELLS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `threads` threads each bump `t` `each` times: thread `i`'s bump `j` counts a failure
    /// when `i + j` is a multiple of `fail_every`, a success otherwise.
    fn bump_from_threads(t: &Tally, threads: usize, each: usize, fail_every: usize) {
        std::thread::scope(|s| {
            for i in 0..threads {
                s.spawn(move || {
                    for j in 0..each {
                        t.bump(usize::from((i + j) % fail_every == 0));
                    }
                });
            }
        });
    }

    #[test]
    fn a_compact_tally_counts_exactly_and_allocates_nothing() {
        let _cells = cells_to_myself();
        let t = Tally::new();
        t.make_compact();
        bump_from_threads(&t, 8, 500, 5);
        assert_eq!(t.totals(), (3_200, 800));
        assert_eq!(t.dir.load(Ordering::Relaxed), COMPACT);
        // Too late once cells exist: a used full tally stays full.
        let full = Tally::new();
        full.bump(0);
        full.make_compact();
        full.bump(0);
        assert_eq!(full.totals(), (2, 0));
        assert!(full.dir.load(Ordering::Relaxed).addr() > COMPACT.addr());
    }

    #[test]
    fn the_tally_is_a_pointer_an_id_and_two_words() {
        assert_eq!(core::mem::size_of::<Tally>(), 32);
    }

    #[test]
    fn switching_between_tallies_counts_each_exactly() {
        let _cells = cells_to_myself();
        // Every count misses the cache (the other tally was last): the walk counts, and
        // re-caches.
        let (a, b) = (Tally::new(), Tally::new());
        for i in 0..1_000 {
            a.bump(i % 2);
            b.bump(0);
            b.bump(1);
        }
        assert_eq!(a.totals(), (500, 500));
        assert_eq!(b.totals(), (1_000, 1_000));
        assert_ne!(a.id.load(Ordering::Relaxed), b.id.load(Ordering::Relaxed));
    }

    #[test]
    fn a_tally_made_where_a_dropped_one_was_never_counts_in_its_cells() {
        // The allocator hands the same address back: a cache keyed by address would write the
        // dropped tally's freed line (miri reports it) and lose the count.
        let mut seen = std::collections::HashSet::new();
        for round in 0..200u64 {
            let t = Box::new(Tally::new());
            seen.insert(core::ptr::from_ref::<Tally>(&t).addr());
            for _ in 0..round % 3 + 1 {
                t.bump(0);
            }
            t.bump(1);
            assert_eq!(t.totals(), (round % 3 + 1, 1), "round {round}");
        }
        assert!(
            seen.len() < 200,
            "no address was reused: the test proves nothing"
        );
    }

    #[test]
    fn a_thread_counting_on_two_tallies_from_many_threads_is_exact() {
        let (a, b) = (Tally::new(), Tally::new());
        std::thread::scope(|s| {
            for i in 0..4 {
                let (a, b) = (&a, &b);
                s.spawn(move || {
                    for j in 0..300 {
                        if (i + j) % 3 == 0 {
                            a.bump(1);
                        } else {
                            b.bump(0);
                            b.bump(0);
                        }
                    }
                });
            }
        });
        let fails: u64 = (0..4u64)
            .map(|i| (0..300u64).filter(|j| (i + j) % 3 == 0).count() as u64)
            .sum();
        assert_eq!(a.totals(), (0, fails));
        assert_eq!(b.totals(), (2 * (1_200 - fails), 0));
    }

    #[test]
    fn counts_from_many_threads_are_exact() {
        let _cells = cells_to_myself();
        let t = Tally::new();
        bump_from_threads(&t, 100, 1_000, 4);
        assert_eq!(t.totals(), (75_000, 25_000));
    }

    #[test]
    fn more_threads_than_cells_share_one_exactly() {
        let _cells = cells_to_myself();
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
