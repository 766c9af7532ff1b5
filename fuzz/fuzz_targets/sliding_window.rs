//! Differential target: `sliding_window` against its reference model (see `turnstile_fuzz::harness`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use turnstile_fuzz::input::SlidingWindowInput;

fuzz_target!(|input: SlidingWindowInput| {
    turnstile_fuzz::harness::run(&input.0);
});
