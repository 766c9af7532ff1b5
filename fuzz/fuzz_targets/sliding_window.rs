//! Differential target: `sliding_window` against its reference model (see `tollgate_fuzz::harness`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate_fuzz::input::SlidingWindowInput;

fuzz_target!(|input: SlidingWindowInput| {
    tollgate_fuzz::harness::run(&input.0);
});
