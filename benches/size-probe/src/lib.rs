//! Entry points for the code-size probe: each `probe_*` function does one thing a firmware
//! program does with a limiter, through a clock the compiler cannot see into, so that
//! `benches/size.sh` can add up the code each one reaches.
#![no_std]

use core::time::Duration;

use tollgate::{
    Clock, ConcurrencyLimiter, FixedWindowLimiter, Instant, Limiter, NoQueue,
    SlidingWindowLimiter, TokenBucketLimiter,
};

extern "C" {
    /// The firmware's time source (provided by the program that links the probe).
    fn probe_now_ns() -> u64;
}

/// A clock over an external time source: nothing about it can be inlined away.
#[derive(Clone, Copy)]
pub struct ProbeClock;

impl Clock for ProbeClock {
    #[inline]
    fn now(&self) -> Instant {
        // SAFETY: an extern function with no preconditions, provided by the linking program.
        Instant::from_nanos(unsafe { probe_now_ns() })
    }
}

/// `try_acquire(n)` on a token bucket, keeping the tokens.
#[no_mangle]
pub extern "C" fn probe_token_bucket_try_acquire(
    l: &TokenBucketLimiter<ProbeClock>,
    n: u32,
) -> bool {
    l.try_acquire(n).map(|lease| lease.forget()).is_ok()
}

/// `try_acquire(n)` on a token bucket without a wait queue ([`NoQueue`]), keeping the tokens.
#[no_mangle]
pub extern "C" fn probe_token_bucket_no_queue_try_acquire(
    l: &TokenBucketLimiter<ProbeClock, NoQueue>,
    n: u32,
) -> bool {
    l.try_acquire(n).map(|lease| lease.forget()).is_ok()
}

/// `try_acquire(n)` on a fixed window, keeping the permits.
#[no_mangle]
pub extern "C" fn probe_fixed_window_try_acquire(
    l: &FixedWindowLimiter<ProbeClock>,
    n: u32,
) -> bool {
    l.try_acquire(n).map(|lease| lease.forget()).is_ok()
}

/// `try_acquire(n)` on a sliding window, keeping the permits.
#[no_mangle]
pub extern "C" fn probe_sliding_window_try_acquire(
    l: &SlidingWindowLimiter<ProbeClock>,
    n: u32,
) -> bool {
    l.try_acquire(n).map(|lease| lease.forget()).is_ok()
}

/// `try_acquire(n)` on a concurrency limiter and the release when the lease drops.
#[no_mangle]
pub extern "C" fn probe_concurrency_acquire_release(
    l: &ConcurrencyLimiter<ProbeClock>,
    n: u32,
) -> bool {
    match l.try_acquire(n) {
        Ok(lease) => {
            drop(lease);
            true
        }
        Err(_) => false,
    }
}

/// `try_acquire(n)` on a concurrency limiter without a wait queue ([`NoQueue`]) and the release
/// when the lease drops.
#[no_mangle]
pub extern "C" fn probe_concurrency_no_queue_acquire_release(
    l: &ConcurrencyLimiter<ProbeClock, NoQueue>,
    n: u32,
) -> bool {
    match l.try_acquire(n) {
        Ok(lease) => {
            drop(lease);
            true
        }
        Err(_) => false,
    }
}

/// The RetryAfter of a denial, in nanoseconds (0 when admitted): what a firmware program reads
/// to know when to come back.
#[no_mangle]
pub extern "C" fn probe_token_bucket_retry_after(
    l: &TokenBucketLimiter<ProbeClock>,
    n: u32,
) -> u64 {
    match l.try_acquire(n) {
        Ok(lease) => {
            lease.forget();
            0
        }
        Err(r) => r.retry_after().unwrap_or(Duration::ZERO).as_nanos() as u64,
    }
}

/// Sizes in bytes of each limiter object (state word, options, wait queue, statistics).
#[no_mangle]
pub static PROBE_SIZES: [u32; 6] = [
    core::mem::size_of::<TokenBucketLimiter<ProbeClock>>() as u32,
    core::mem::size_of::<TokenBucketLimiter<ProbeClock, NoQueue>>() as u32,
    core::mem::size_of::<FixedWindowLimiter<ProbeClock>>() as u32,
    core::mem::size_of::<SlidingWindowLimiter<ProbeClock>>() as u32,
    core::mem::size_of::<ConcurrencyLimiter<ProbeClock>>() as u32,
    core::mem::size_of::<ConcurrencyLimiter<ProbeClock, NoQueue>>() as u32,
];

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {}
}
