//! The success and failure counters behind [`Statistics`](crate::Statistics).

use crate::lease::Rejection;
use crate::sync::{AtomicU64, Ordering};

/// Two relaxed counters. They order nothing; they only count.
#[derive(Debug)]
pub struct Counters {
    successful: AtomicU64,
    failed: AtomicU64,
}

impl Counters {
    pub(crate) fn new() -> Self {
        Self {
            successful: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    /// Counts `result` and hands it back.
    #[inline]
    pub(crate) fn count<T>(&self, result: Result<T, Rejection>) -> Result<T, Rejection> {
        match &result {
            Ok(_) => self.successful.fetch_add(1, Ordering::Relaxed),
            Err(_) => self.failed.fetch_add(1, Ordering::Relaxed),
        };
        result
    }

    #[inline]
    pub(crate) fn record_success(&self) {
        self.successful.fetch_add(1, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn record_failure(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn successful(&self) -> u64 {
        self.successful.load(Ordering::Relaxed)
    }

    pub(crate) fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}
