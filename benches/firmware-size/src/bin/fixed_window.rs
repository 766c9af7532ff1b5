//! A `FixedWindowLimiter` without a wait queue built at run time (its options validated), asked for a count
//! read at run time, the lease dropped.
#![no_std]
#![no_main]
use core::time::Duration;
use tollgate_firmware_size::tollgate::*;
use tollgate_firmware_size::{run, Tick};

#[cortex_m_rt::entry]
fn main() -> ! {
    let l = FixedWindowLimiter::without_queue(FixedWindowOptions::new(10, Duration::from_millis(100)), Tick).unwrap();
    run(|n| l.try_acquire(n).is_ok())
}
