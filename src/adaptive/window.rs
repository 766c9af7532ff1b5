//! The samples of an adaptive limiter's leases, gathered into windows without a lock: every
//! finished lease adds its count and latency to the calling thread's own statistics cells
//! (feature `std`: a plain load and store each, beside the counts the decision just made, no
//! locked instruction), or else to one shared word with one read-modify-write; the one lease
//! whose sample completes a window (long enough, with enough samples) closes it, and only that
//! caller goes on to compute a new limit.

use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use super::algorithm::WindowSummary;
use crate::stats::Counters;

/// A sample count and a latency sum in one word, so that a sample is one read-modify-write:
/// the count in the top [`COUNT_BITS`] bits, the sum in microseconds below (each sample's
/// latency capped at [`MAX_SAMPLE_US`], so that the most samples a window takes cannot carry
/// the sum into the count).
const COUNT_BITS: u32 = 20;
const SUM_BITS: u32 = 64 - COUNT_BITS;
const SUM_MASK: u64 = (1 << SUM_BITS) - 1;
/// A window closes at the latest with this many samples (whatever its duration).
const MAX_SAMPLES: u32 = (1 << COUNT_BITS) - 1;
/// A sample's latency counts at most 2^24 µs (16.8 s) in the mean.
const MAX_SAMPLE_US: u64 = 1 << (SUM_BITS - COUNT_BITS);

/// One window's running sums.
#[derive(Debug)]
pub(crate) struct Sampler {
    /// When the open window began (the limiter's clock, in nanoseconds).
    start_ns: AtomicU64,
    /// Samples (top bits) and their latencies' sum in µs (see [`COUNT_BITS`]), of the callers
    /// without a statistics cell of their own.
    counted: AtomicU64,
    /// The statistics cells' sample totals when the open window began (written only by the
    /// caller closing a window).
    seen_samples: AtomicU64,
    seen_sum_us: AtomicU64,
    drops: AtomicU32,
    /// `u64::MAX` while the window holds no sample.
    min_ns: AtomicU64,
    max_in_flight: AtomicU32,
    /// Set by the one caller closing the window.
    closing: AtomicBool,
    /// A window closes once it lasted this long...
    min_duration_ns: u64,
    /// ...and holds this many samples.
    min_samples: u32,
}

impl Sampler {
    pub(crate) fn new(start_ns: u64, min_duration_ns: u64, min_samples: u32) -> Self {
        Self {
            start_ns: AtomicU64::new(start_ns),
            counted: AtomicU64::new(0),
            seen_samples: AtomicU64::new(0),
            seen_sum_us: AtomicU64::new(0),
            drops: AtomicU32::new(0),
            min_ns: AtomicU64::new(u64::MAX),
            max_in_flight: AtomicU32::new(0),
            closing: AtomicBool::new(false),
            min_duration_ns,
            min_samples: if min_samples == 0 {
                1
            } else if min_samples > MAX_SAMPLES {
                MAX_SAMPLES
            } else {
                min_samples
            },
        }
    }

    /// Notes that `in_flight` leases are held at once (a grant's count): a load, and a write
    /// only for a new maximum.
    #[inline]
    pub(crate) fn note_in_flight(&self, in_flight: u32) {
        if in_flight > self.max_in_flight.load(Ordering::Relaxed) {
            self.max_in_flight.fetch_max(in_flight, Ordering::Relaxed);
        }
    }

    /// Adds a finished lease's latency `rtt_ns`, dropped or not, at `now_ns`, to `cells` (the
    /// limiter's statistics: the calling thread's own cells) or to the shared word; if that
    /// sample completes the window, closes it and answers its summary (to this caller alone),
    /// the next window starting at `now_ns` with the leases held then (`in_flight()`).
    #[inline]
    pub(crate) fn record(
        &self,
        cells: &Counters,
        now_ns: u64,
        rtt_ns: u64,
        dropped: bool,
        in_flight: impl FnOnce() -> u32,
    ) -> Option<WindowSummary> {
        if dropped {
            self.drops.fetch_add(1, Ordering::Relaxed);
        }
        if rtt_ns < self.min_ns.load(Ordering::Relaxed) {
            self.min_ns.fetch_min(rtt_ns, Ordering::Relaxed);
        }
        let us = (rtt_ns / 1_000).min(MAX_SAMPLE_US);
        // A shared word about to carry its count into its sum closes the window whatever its
        // duration.
        let full = !cells.add_sample(us) && {
            let before = self.counted.fetch_add(1 << SUM_BITS | us, Ordering::AcqRel);
            (before >> SUM_BITS) as u32 + 1 >= MAX_SAMPLES
        };
        let start = self.start_ns.load(Ordering::Acquire);
        if now_ns.saturating_sub(start) < self.min_duration_ns && !full {
            return None;
        }
        self.close(cells, now_ns, full, in_flight)
    }

    /// Closes the window if it holds `min_samples` (or is `full`) and nobody else is closing
    /// it. Every sample is counted once: the cells' totals are monotonic, and what they held
    /// when the window closed is where the next one starts (a sample whose stores the closer
    /// does not see yet is the next window's); the shared word is swapped out whole (one
    /// added meanwhile may have its count in this window and its latency in the next: an
    /// error of one sample in each).
    #[cold]
    fn close(
        &self,
        cells: &Counters,
        now_ns: u64,
        full: bool,
        in_flight: impl FnOnce() -> u32,
    ) -> Option<WindowSummary> {
        if self.closing.swap(true, Ordering::Acquire) {
            return None; // another caller is closing it
        }
        let (cell_samples, cell_sum) = cells.sample_totals();
        let from_cells = cell_samples - self.seen_samples.load(Ordering::Relaxed);
        let shared = self.counted.load(Ordering::Acquire) >> SUM_BITS;
        if from_cells + shared < u64::from(self.min_samples) && !full {
            self.closing.store(false, Ordering::Release);
            return None;
        }
        let counted = self.counted.swap(0, Ordering::AcqRel);
        let samples = from_cells + (counted >> SUM_BITS);
        let sum_us = cell_sum - self.seen_sum_us.load(Ordering::Relaxed) + (counted & SUM_MASK);
        self.seen_samples.store(cell_samples, Ordering::Relaxed);
        self.seen_sum_us.store(cell_sum, Ordering::Relaxed);
        let samples = u32::try_from(samples).unwrap_or(u32::MAX);
        let drops = self.drops.swap(0, Ordering::Relaxed).min(samples);
        let min = self.min_ns.swap(u64::MAX, Ordering::AcqRel);
        let max_in_flight = self.max_in_flight.swap(in_flight(), Ordering::Relaxed);
        self.start_ns.store(now_ns, Ordering::Release);
        self.closing.store(false, Ordering::Release);
        (samples > 0).then(|| WindowSummary {
            samples,
            drops,
            min_rtt_ns: if min == u64::MAX { 0 } else { min },
            avg_rtt_ns: sum_us * 1_000 / u64::from(samples),
            max_in_flight,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_closes_when_long_enough_and_full_enough() {
        let us = 1_000;
        let c = Counters::new();
        let s = Sampler::new(0, 100, 3);
        s.note_in_flight(4);
        assert_eq!(s.record(&c, 50, 10 * us, false, || 4), None);
        assert_eq!(s.record(&c, 60, 30 * us, true, || 4), None);
        assert_eq!(s.record(&c, 90, 20 * us, false, || 4), None); // three samples, but only 90 ns
        let w = s.record(&c, 100, 40 * us + 999, false, || 2).unwrap(); // µs in the mean
        assert_eq!(
            w,
            WindowSummary {
                samples: 4,
                drops: 1,
                min_rtt_ns: 10 * us,
                avg_rtt_ns: 25 * us,
                max_in_flight: 4,
            }
        );
        // The next window starts at 100 with the 2 held then.
        assert_eq!(s.record(&c, 150, 5 * us, false, || 2), None);
        assert_eq!(s.record(&c, 190, 5 * us, false, || 2), None);
        let w = s.record(&c, 200, 5 * us, false, || 1).unwrap();
        assert_eq!((w.samples, w.max_in_flight, w.min_rtt_ns), (3, 2, 5 * us));
        // A latency past 2^24 µs counts as 2^24 µs in the mean; the minimum is exact.
        let (c, s) = (Counters::new(), Sampler::new(0, 0, 1));
        let w = s.record(&c, 0, u64::MAX - 1, false, || 0).unwrap();
        assert_eq!((w.avg_rtt_ns, w.min_rtt_ns), ((1 << 24) * us, u64::MAX - 1));
    }

    #[test]
    fn threads_lose_no_sample() {
        // Fewer under miri, which runs every lib test (threads are slow there).
        let per_thread: u64 = if cfg!(miri) { 100 } else { 10_000 };
        let both = std::sync::Arc::new((Counters::new(), Sampler::new(0, u64::MAX, 1)));
        let threads: std::vec::Vec<_> = (0..4)
            .map(|_| {
                let both = both.clone();
                std::thread::spawn(move || {
                    let (c, s) = &*both;
                    for i in 0..per_thread {
                        assert_eq!(s.record(c, i, 1_000, i % 10 == 0, || 1), None);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let (c, s) = &*both;
        let counted = s.counted.load(Ordering::Relaxed);
        let (cells, cells_us) = c.sample_totals();
        let (n, d, sum_us) = (
            cells + (counted >> SUM_BITS),
            u64::from(s.drops.load(Ordering::Relaxed)),
            cells_us + (counted & SUM_MASK),
        );
        let total = 4 * per_thread;
        assert_eq!((n, d, sum_us), (total, total / 10, total));
        // With `std`, every thread counted in a cell of its own.
        assert_eq!(cells, if cfg!(feature = "std") { total } else { 0 });
    }
}
