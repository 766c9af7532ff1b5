//! Differential target: waiters (`acquire(n)` futures polled by hand, cancelled at every stage)
//! on any of the four limiters, against the reference queue model (see `tollgate_fuzz::harness`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate_fuzz::input::WaitingInput;

fuzz_target!(|input: WaitingInput| {
    tollgate_fuzz::harness::run_waiting(&input.0);
});
