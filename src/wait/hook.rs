//! The handle a queue keeps to tell a driver that its next waiter changed (feature `std`).
//!
//! It lives with the queue, not with the driver, so that the waiting layer depends on nothing
//! above it: the driver (`driver.rs`) implements [`Notify`] for its state and hands out handles.

use std::sync::Weak;

/// What a [`DriverHandle`] reaches: something to tell that a queue's next waiter changed.
pub(crate) trait Notify: Send + Sync {
    /// Tells it to look again.
    fn notify(&self);
}

/// A handle a limiter keeps to wake its driver when a waiter becomes the next to be served.
/// Holding it does not keep the driver alive.
///
/// A program that moves its own clock tells the driver when it did:
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tollgate::*;
/// # fn block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     use std::task::{Context, Poll, Wake, Waker};
/// #     struct T(std::thread::Thread);
/// #     impl Wake for T { fn wake(self: Arc<Self>) { self.0.unpark() } }
/// #     let waker = Waker::from(Arc::new(T(std::thread::current())));
/// #     let mut cx = Context::from_waker(&waker);
/// #     let mut f = std::pin::pin!(f);
/// #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } std::thread::park(); }
/// # }
/// let clock = Arc::new(ManualClock::new());
/// let opts = GcraOptions::per_second(10).with_burst(1).with_queue(1, QueueOrder::OldestFirst);
/// let gcra = Arc::new(GcraLimiter::with_clock(opts, clock.clone()).unwrap());
/// let driver = Driver::new().unwrap();
/// driver.register(&gcra);
/// let handle: DriverHandle = driver.handle();
/// let _first = gcra.try_acquire(1).unwrap();
/// let ticker = std::thread::spawn(move || {
///     clock.advance(Duration::from_millis(100)); // the simulation's time moves on
///     handle.notify(); // the driver looks again at once, and serves the waiter
/// });
/// assert_eq!(block_on(gcra.acquire(1)).unwrap().permits(), 1);
/// ticker.join().unwrap();
/// ```
#[derive(Clone)]
pub struct DriverHandle {
    shared: Weak<dyn Notify>,
}

impl DriverHandle {
    /// A handle to whatever `shared` notifies (a driver's state).
    pub(crate) fn new(shared: Weak<dyn Notify>) -> Self {
        Self { shared }
    }

    /// Tells the driver to recompute when to wake.
    ///
    /// ```
    /// use tollgate::Driver;
    ///
    /// let driver = Driver::new().unwrap();
    /// let handle = driver.handle();
    /// handle.notify(); // the driver recomputes its sleep
    /// drop(driver); // the driver stops: a handle does not keep it alive
    /// handle.notify(); // does nothing
    /// assert_eq!(format!("{handle:?}"), "DriverHandle");
    /// ```
    pub fn notify(&self) {
        if let Some(shared) = self.shared.upgrade() {
            shared.notify();
        }
    }

    /// Whether the driver is still running.
    pub(crate) fn is_live(&self) -> bool {
        self.shared.strong_count() > 0
    }
}

impl core::fmt::Debug for DriverHandle {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("DriverHandle")
    }
}
