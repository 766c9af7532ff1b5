//! The program without a limiter: what every other image here is measured against.
#![no_std]
#![no_main]
use tollgate_firmware_size::{run, TICKS};

#[cortex_m_rt::entry]
fn main() -> ! {
    // An answer the compiler cannot fold, as a limiter's is.
    run(|n| n <= TICKS.load(core::sync::atomic::Ordering::Relaxed))
}
