//! Helpers shared by the integration tests: a hand-polled future that counts its wake-ups, so
//! queued waiting is tested deterministically, without a runtime and without sleeping.
#![allow(dead_code)]

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Wake;

/// A hand-polled future that counts its wake-ups.
pub struct Task<'a, T> {
    fut: Pin<Box<dyn Future<Output = T> + 'a>>,
    wakes: Arc<Wakes>,
}

pub struct Wakes(AtomicUsize);
impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl<'a, T> Task<'a, T> {
    pub fn new(f: impl Future<Output = T> + 'a) -> Self {
        Self {
            fut: Box::pin(f),
            wakes: Arc::new(Wakes(AtomicUsize::new(0))),
        }
    }
    pub fn poll(&mut self) -> Poll<T> {
        let waker = Waker::from(self.wakes.clone());
        self.fut.as_mut().poll(&mut Context::from_waker(&waker))
    }
    pub fn woken(&self) -> usize {
        self.wakes.0.load(Ordering::SeqCst)
    }
    #[track_caller]
    pub fn pending(&mut self) {
        assert!(self.poll().is_pending(), "expected the task to wait");
    }
    #[track_caller]
    pub fn ready(&mut self) -> T {
        match self.poll() {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("expected the task to be done"),
        }
    }
}

/// Runs `f` on this thread, polling it only when its waker was called (as an executor does:
/// a poll serves the queue itself, so a loop that polls on its own would hide a waiter nobody
/// wakes). `None` if it is not done within `limit`.
pub fn run_when_woken<F: Future>(f: F, limit: std::time::Duration) -> Option<F::Output> {
    use std::sync::atomic::AtomicBool;
    struct Unpark {
        thread: std::thread::Thread,
        woken: AtomicBool,
    }
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.woken.store(true, Ordering::SeqCst);
            self.thread.unpark();
        }
    }
    let unpark = Arc::new(Unpark {
        thread: std::thread::current(),
        woken: AtomicBool::new(false),
    });
    let waker = Waker::from(unpark.clone());
    let mut cx = Context::from_waker(&waker);
    let mut f = core::pin::pin!(f);
    let deadline = std::time::Instant::now() + limit;
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return Some(v);
        }
        loop {
            if unpark.woken.swap(false, Ordering::SeqCst) {
                break;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return None;
            }
            std::thread::park_timeout(deadline - now);
        }
    }
}
