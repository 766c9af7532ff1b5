//! Differential target: `concurrency` against its reference model (see `turnstile_fuzz::harness`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use turnstile_fuzz::input::ConcurrencyInput;

fuzz_target!(|input: ConcurrencyInput| {
    turnstile_fuzz::harness::run(&input.0);
});
