//! Differential target: `sliding_counter` against its reference model (see `tollgate_fuzz::harness_algos`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate_fuzz::input::SlidingCounterInput;

fuzz_target!(|input: SlidingCounterInput| {
    tollgate_fuzz::harness::run(&input.0);
});
