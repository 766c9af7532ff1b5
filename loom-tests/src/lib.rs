//! loom model checks of tollgate's state transitions live in `tests/`; see the crate's README.
//!
//! This library holds what the models share: the model runner with a default preemption bound,
//! a per-thread clock for models that need two threads to see different instants, and a few
//! small helpers. Everything here exists only under `cfg(loom)`.

#[cfg(loom)]
pub use model::*;

#[cfg(loom)]
mod model {
    use std::cell::{Cell, RefCell};
    use std::sync::Arc;
    use std::time::Duration;

    use tollgate::{Clock, Instant, ManualClock, Reason, Rejection};

    /// The preemption bound used when `LOOM_MAX_PREEMPTIONS` is not set, so that a plain
    /// `cargo test` under `--cfg loom` stays bounded.
    pub const DEFAULT_PREEMPTIONS: usize = 2;

    /// Runs `f` under loom, exploring every interleaving up to the preemption bound
    /// (`LOOM_MAX_PREEMPTIONS`, or [`DEFAULT_PREEMPTIONS`] when it is unset).
    pub fn check<F>(f: F)
    where
        F: Fn() + Sync + Send + 'static,
    {
        if std::env::var_os("LOOM_MAX_PREEMPTIONS").is_some() {
            // `loom::model` also installs the `LOOM_LOG` tracing subscriber.
            loom::model(f);
        } else {
            let mut builder = loom::model::Builder::new();
            builder.preemption_bound = Some(DEFAULT_PREEMPTIONS);
            builder.check(f);
        }
    }

    /// `n` nanoseconds.
    pub const fn ns(n: u64) -> Duration {
        Duration::from_nanos(n)
    }

    /// `n` nanoseconds after the epoch.
    pub const fn at(n: u64) -> Instant {
        Instant::from_nanos(n)
    }

    /// Asserts that `r` is an `Exhausted` rejection with exactly `retry_after`, and returns it.
    #[track_caller]
    pub fn assert_exhausted(r: &Rejection, retry_after: Duration) {
        assert_eq!(r.reason(), Reason::Exhausted, "{r:?}");
        assert_eq!(r.retry_after(), Some(retry_after), "{r:?}");
    }

    /// Asserts that `r` is a `Closed` rejection (which never carries a RetryAfter).
    #[track_caller]
    pub fn assert_closed(r: &Rejection) {
        assert_eq!(r.reason(), Reason::Closed, "{r:?}");
        assert_eq!(r.retry_after(), None, "{r:?}");
    }

    loom::thread_local! {
        static THREAD_NOW: Cell<u64> = Cell::new(0);
    }

    /// A clock private to each loom thread: every thread reads the instant it last set with
    /// [`ThreadClock::set`] (zero until then). It models threads that read a shared monotonic
    /// clock at different moments and are then preempted, so that a thread holding an older
    /// reading acts after one holding a newer reading; with it a model can pin which segment or
    /// period each thread sees, and reading it is not a scheduling point.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct ThreadClock;

    impl ThreadClock {
        /// Sets the calling thread's instant to `nanos`.
        pub fn set(nanos: u64) {
            THREAD_NOW.with(|c| c.set(nanos));
        }
    }

    impl Clock for ThreadClock {
        fn now(&self) -> Instant {
            THREAD_NOW.with(|c| Instant::from_nanos(c.get()))
        }
    }

    loom::thread_local! {
        static READINGS: RefCell<Vec<u64>> = RefCell::new(Vec::new());
    }

    /// A shared [`ManualClock`] that also records, per loom thread, every instant it handed out,
    /// so that a model whose clock is moved by another thread can tell which instant a decision
    /// was made on (a limiter reads the clock first, before deciding; a rejection may read it
    /// again to compute its RetryAfter).
    #[derive(Clone, Debug)]
    pub struct RecordingClock(pub Arc<ManualClock>);

    impl RecordingClock {
        /// A recording clock over a new `ManualClock` standing at zero.
        pub fn new() -> Self {
            Self(Arc::new(ManualClock::new()))
        }

        /// The instants (ns) handed out to the calling thread since its last call, oldest first.
        pub fn readings() -> Vec<u64> {
            READINGS.with(|r| std::mem::take(&mut *r.borrow_mut()))
        }
    }

    impl Default for RecordingClock {
        fn default() -> Self {
            Self::new()
        }
    }

    impl Clock for RecordingClock {
        fn now(&self) -> Instant {
            let t = self.0.now();
            READINGS.with(|r| r.borrow_mut().push(t.as_nanos()));
            t
        }
    }
}
