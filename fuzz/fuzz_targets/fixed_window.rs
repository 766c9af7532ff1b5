//! Differential target: `fixed_window` against its reference model (see `turnstile_fuzz::harness`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use turnstile_fuzz::input::FixedWindowInput;

fuzz_target!(|input: FixedWindowInput| {
    turnstile_fuzz::harness::run(&input.0);
});
