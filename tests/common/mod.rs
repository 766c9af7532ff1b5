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
