//! Differential target: `sliding_log` against its reference model (see `tollgate_fuzz::harness_algos`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate_fuzz::input::SlidingLogInput;

fuzz_target!(|input: SlidingLogInput| {
    tollgate_fuzz::harness::run(&input.0);
});
