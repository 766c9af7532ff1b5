//! A `static` `ConcurrencyLimiter` without a wait queue built by a `const fn`, asked for a count read
//! at run time, the lease dropped.
#![no_std]
#![no_main]
use tollgate_firmware_size::tollgate::*;
use tollgate_firmware_size::{run, Tick};

static L: ConcurrencyLimiter<Tick, NoQueue> = ConcurrencyLimiter::at_epoch_without_queue(ConcurrencyOptions::new(10), Tick);

#[cortex_m_rt::entry]
fn main() -> ! {
    run(|n| L.try_acquire(n).is_ok())
}
