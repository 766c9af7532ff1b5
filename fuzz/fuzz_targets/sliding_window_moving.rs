//! Differential target: the sliding window with 1–8 ns segments, the clock moving a few ns
//! after every operation, waiters included (see `tollgate_fuzz::harness`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate_fuzz::input::MovingSlidingInput;

fuzz_target!(|input: MovingSlidingInput| {
    tollgate_fuzz::harness::run_waiting(&input.0);
});
