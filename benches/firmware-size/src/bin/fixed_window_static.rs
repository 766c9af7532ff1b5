//! A `static` `FixedWindowLimiter` without a wait queue built by a `const fn`, asked for a count read
//! at run time, the lease dropped.
#![no_std]
#![no_main]
use core::time::Duration;
use tollgate_firmware_size::tollgate::*;
use tollgate_firmware_size::{run, Tick};

static L: FixedWindowLimiter<Tick, NoQueue> = FixedWindowLimiter::at_epoch_without_queue(FixedWindowOptions::new(10, Duration::from_millis(100)), Tick);

#[cortex_m_rt::entry]
fn main() -> ! {
    run(|n| L.try_acquire(n).is_ok())
}
