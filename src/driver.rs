//! The background driver (feature `std`): one thread that serves the wait queues of any number of
//! rate limiters at the instants time alone makes room for their next waiter.
//!
//! It does not poll: it asks every registered limiter how long until its next waiter could be
//! served ([`Replenishing::next_service`]), sleeps until the earliest of those instants, and calls
//! [`Replenishing::replenish`] on the limiters whose instant has come. A limiter tells the driver
//! when a waiter becomes the next to be served (through the [`DriverHandle`] it was given at
//! registration), so a new, earlier deadline wakes it at once.

use std::sync::{Arc, Condvar, Mutex, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::limiter::Replenishing;
use crate::wait::{DriverHandle, Notify};

type Registered = Weak<dyn Replenishing + Send + Sync>;

#[derive(Default)]
struct State {
    limiters: Vec<Registered>,
    /// Something changed since the driver computed its sleep.
    dirty: bool,
    stop: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn notify(&self) {
        self.lock().dirty = true;
        self.wake.notify_one();
    }
}

impl Notify for Shared {
    fn notify(&self) {
        Shared::notify(self);
    }
}

/// One background thread serving the wait queues of registered rate limiters.
///
/// You rarely need one: a waiter on a rate limiter whose clock moves by itself
/// ([`StdClock`](crate::StdClock), a running [`CoarseClock`](crate::CoarseClock)) is woken by the
/// process-wide timer when its permits arrive. A driver is for limiters on other clocks that
/// still follow real time (your own [`Clock`](crate::Clock) whose
/// [`advances_by_itself`](crate::Clock::advances_by_itself) is `false`), or for a dedicated
/// thread of your own.
///
/// Limiters are held weakly: dropping the last `Arc` of a limiter unregisters it. A limiter may
/// be registered with several drivers, at once or one after another: each live one is told when
/// the limiter's next waiter changes.
///
/// **Dropping the driver** stops its thread and hands its limiters back: before stopping, it
/// serves every registered limiter once more, and from then on their waiters are served as if it
/// had never been registered — by the process timer on a clock that advances by itself, else by
/// later acquisitions, [`replenish`](crate::Replenishing::replenish) or another driver registered
/// for them. No waiter is failed or dropped.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tollgate::{Driver, Limiter, QueueOrder, TokenBucketLimiter, TokenBucketOptions};
///
/// let driver = Driver::new().unwrap();
/// let opts = TokenBucketOptions::new(1, 1, Duration::from_millis(5))
///     .with_queue(4, QueueOrder::OldestFirst);
/// let bucket = Arc::new(TokenBucketLimiter::new(opts).unwrap());
/// driver.register(&bucket);
/// let _first = bucket.try_acquire(1).unwrap();
/// // Nobody else acquires or replenishes: the driver serves this waiter when the token comes.
/// let lease = futures_lite_block_on(bucket.acquire(1));
/// assert!(lease.is_ok());
/// # fn futures_lite_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     use std::task::{Context, Poll, Wake, Waker};
/// #     struct T(std::thread::Thread);
/// #     impl Wake for T { fn wake(self: Arc<Self>) { self.0.unpark() } }
/// #     let waker = Waker::from(Arc::new(T(std::thread::current())));
/// #     let mut cx = Context::from_waker(&waker);
/// #     let mut f = std::pin::pin!(f);
/// #     loop { if let Poll::Ready(v) = f.as_mut().poll(&mut cx) { return v; } std::thread::park(); }
/// # }
/// ```
pub struct Driver {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Driver {
    /// Starts the driver thread.
    ///
    /// ```
    /// use tollgate::Driver;
    ///
    /// let driver = Driver::new().expect("spawn the driver thread");
    /// assert_eq!(format!("{driver:?}"), "Driver { limiters: 0 }");
    /// ```
    pub fn new() -> std::io::Result<Self> {
        let shared = Arc::new(Shared::default());
        let for_thread = shared.clone();
        let thread = std::thread::Builder::new()
            .name("tollgate-driver".into())
            .spawn(move || run(&for_thread))?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Registers a limiter: its waiters will be served when time makes room for them.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::*;
    ///
    /// let driver = Driver::new().unwrap();
    /// let opts = GcraOptions::per_second(10).with_queue(10, QueueOrder::OldestFirst);
    /// let api = Arc::new(GcraLimiter::with_clock(opts, Arc::new(ManualClock::new())).unwrap());
    /// driver.register(&api);
    /// assert_eq!(format!("{driver:?}"), "Driver { limiters: 1 }");
    /// drop(api); // held weakly: dropping the limiter unregisters it
    /// ```
    pub fn register<L: Replenishing + Send + Sync + 'static>(&self, limiter: &Arc<L>) {
        limiter.attach_driver(self.handle());
        let weak: Registered = Arc::downgrade(limiter) as Registered;
        self.shared.lock().limiters.push(weak);
        self.shared.notify();
    }

    /// A handle that wakes this driver.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::*;
    ///
    /// let driver = Driver::new().unwrap();
    /// // Given to a limiter of your own (see `Replenishing::attach_driver`), or kept to nudge the
    /// // driver after moving a clock it cannot see move.
    /// let handle = driver.handle();
    /// let for_thread = handle.clone();
    /// std::thread::spawn(move || for_thread.notify()).join().unwrap();
    /// assert_eq!(format!("{handle:?}"), "DriverHandle");
    /// ```
    pub fn handle(&self) -> DriverHandle {
        let shared: Weak<dyn Notify> = Arc::downgrade(&self.shared) as Weak<dyn Notify>;
        DriverHandle::new(shared)
    }
}

impl core::fmt::Debug for Driver {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Driver")
            .field("limiters", &self.shared.lock().limiters.len())
            .finish()
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // Hand the limiters back: serve each once more (waking whoever time has made room for;
        // the queue nudges its next waiter, which arms the process timer on a clock that
        // advances by itself).
        let live: Vec<_> = self
            .shared
            .lock()
            .limiters
            .drain(..)
            .filter_map(|w| w.upgrade())
            .collect();
        for l in live {
            l.replenish();
        }
    }
}

/// Serves `l` if its next waiter can be served now; returns how long until it next can.
fn serve(l: &(dyn Replenishing + Send + Sync)) -> Option<Duration> {
    // Each replenish serves every waiter that fits; a few rounds cover waiters that a give-back
    // or a racing release made servable in between.
    for _ in 0..4 {
        match l.next_service() {
            Some(d) if d.is_zero() => {
                l.replenish();
            }
            other => return other,
        }
    }
    Some(Duration::from_micros(1))
}

fn run(shared: &Shared) {
    let mut state = shared.lock();
    loop {
        if state.stop {
            return;
        }
        state.dirty = false;
        state.limiters.retain(|w| w.strong_count() > 0);
        let live: Vec<_> = state.limiters.iter().filter_map(Weak::upgrade).collect();
        drop(state);
        let sleep = live.iter().filter_map(|l| serve(&**l)).min();
        drop(live);
        state = shared.lock();
        if state.dirty || state.stop {
            continue;
        }
        state = match sleep {
            Some(d) => {
                shared
                    .wake
                    .wait_timeout(state, d)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None => shared
                .wake
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner),
        };
    }
}
