//! The samples of an adaptive limiter's leases, gathered into windows without a lock: every
//! finished lease adds itself with a few atomic read-modify-writes; the one lease whose sample
//! completes a window (long enough, with enough samples) closes it, and only that caller goes
//! on to compute a new limit.

use portable_atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use super::algorithm::WindowSummary;

/// One window's running sums.
#[derive(Debug)]
pub(crate) struct Sampler {
    /// When the open window began (the limiter's clock, in nanoseconds).
    start_ns: AtomicU64,
    samples: AtomicU32,
    drops: AtomicU32,
    sum_ns: AtomicU64,
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
    pub(crate) const fn new(start_ns: u64, min_duration_ns: u64, min_samples: u32) -> Self {
        Self {
            start_ns: AtomicU64::new(start_ns),
            samples: AtomicU32::new(0),
            drops: AtomicU32::new(0),
            sum_ns: AtomicU64::new(0),
            min_ns: AtomicU64::new(u64::MAX),
            max_in_flight: AtomicU32::new(0),
            closing: AtomicBool::new(false),
            min_duration_ns,
            min_samples: if min_samples == 0 { 1 } else { min_samples },
        }
    }

    /// Notes that `in_flight` leases are held at once (a grant's count).
    #[inline]
    pub(crate) fn note_in_flight(&self, in_flight: u32) {
        self.max_in_flight.fetch_max(in_flight, Ordering::Relaxed);
    }

    /// Adds a finished lease's latency `rtt_ns`, dropped or not, at `now_ns`; if that sample
    /// completes the window, closes it and answers its summary (to this caller alone), the
    /// next window starting at `now_ns` with the leases held then (`in_flight`).
    pub(crate) fn record(
        &self,
        now_ns: u64,
        rtt_ns: u64,
        dropped: bool,
        in_flight: u32,
    ) -> Option<WindowSummary> {
        let samples = self.samples.fetch_add(1, Ordering::AcqRel) + 1;
        if dropped {
            self.drops.fetch_add(1, Ordering::Relaxed);
        }
        self.sum_ns.fetch_add(rtt_ns, Ordering::Relaxed);
        self.min_ns.fetch_min(rtt_ns, Ordering::Relaxed);
        let start = self.start_ns.load(Ordering::Acquire);
        if samples < self.min_samples || now_ns.saturating_sub(start) < self.min_duration_ns {
            return None;
        }
        if self.closing.swap(true, Ordering::Acquire) {
            return None; // another caller is closing it
        }
        // Each sum is swapped out whole, so no sample is lost or counted twice; one added
        // while this runs may have its count in this window and its latency in the next (an
        // error of one sample in each).
        let samples = self.samples.swap(0, Ordering::AcqRel);
        let drops = self.drops.swap(0, Ordering::Relaxed).min(samples);
        let sum = self.sum_ns.swap(0, Ordering::Relaxed);
        let min = self.min_ns.swap(u64::MAX, Ordering::Relaxed);
        let max_in_flight = self.max_in_flight.swap(in_flight, Ordering::Relaxed);
        self.start_ns.store(now_ns, Ordering::Release);
        self.closing.store(false, Ordering::Release);
        (samples > 0).then(|| WindowSummary {
            samples,
            drops,
            min_rtt_ns: if min == u64::MAX { 0 } else { min },
            avg_rtt_ns: sum / u64::from(samples),
            max_in_flight,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_closes_when_long_enough_and_full_enough() {
        let s = Sampler::new(0, 100, 3);
        s.note_in_flight(4);
        assert_eq!(s.record(50, 10, false, 4), None);
        assert_eq!(s.record(60, 30, true, 4), None);
        assert_eq!(s.record(90, 20, false, 4), None); // three samples, but only 90 ns
        let w = s.record(100, 40, false, 2).unwrap();
        assert_eq!(
            w,
            WindowSummary {
                samples: 4,
                drops: 1,
                min_rtt_ns: 10,
                avg_rtt_ns: 25,
                max_in_flight: 4,
            }
        );
        // The next window starts at 100 with the 2 held then.
        assert_eq!(s.record(150, 5, false, 2), None);
        assert_eq!(s.record(190, 5, false, 2), None);
        let w = s.record(200, 5, false, 1).unwrap();
        assert_eq!((w.samples, w.max_in_flight, w.min_rtt_ns), (3, 2, 5));
    }

    #[test]
    fn threads_lose_no_sample() {
        // Fewer under miri, which runs every lib test (threads are slow there).
        let per_thread: u64 = if cfg!(miri) { 100 } else { 10_000 };
        let s = std::sync::Arc::new(Sampler::new(0, 0, 1_000_000));
        let threads: std::vec::Vec<_> = (0..4)
            .map(|_| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for i in 0..per_thread {
                        assert_eq!(s.record(i, 1, i % 10 == 0, 1), None);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let s = std::sync::Arc::into_inner(s).unwrap();
        let (n, d, sum) = (
            s.samples.load(Ordering::Relaxed),
            s.drops.load(Ordering::Relaxed),
            s.sum_ns.load(Ordering::Relaxed),
        );
        let total = 4 * per_thread;
        assert_eq!(
            (u64::from(n), u64::from(d), sum),
            (total, total / 10, total)
        );
    }
}
