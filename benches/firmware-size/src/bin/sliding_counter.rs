//! A `SlidingCounterLimiter` without a wait queue built at run time (its options validated), asked for a count
//! read at run time, the lease dropped.
#![no_std]
#![no_main]
use core::time::Duration;
use tollgate_firmware_size::tollgate::*;
use tollgate_firmware_size::{run, Tick};

#[cortex_m_rt::entry]
fn main() -> ! {
    let l = SlidingCounterLimiter::without_queue(SlidingCounterOptions::new(10, Duration::from_secs(1)), Tick).unwrap();
    run(|n| l.try_acquire(n).is_ok())
}
