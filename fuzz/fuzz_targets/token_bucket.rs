//! Differential target: `token_bucket` against its reference model (see `turnstile_fuzz::harness`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use turnstile_fuzz::input::TokenBucketInput;

fuzz_target!(|input: TokenBucketInput| {
    turnstile_fuzz::harness::run(&input.0);
});
