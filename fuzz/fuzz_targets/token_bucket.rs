//! Differential target: `token_bucket` against its reference model (see `tollgate_fuzz::harness`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate_fuzz::input::TokenBucketInput;

fuzz_target!(|input: TokenBucketInput| {
    tollgate_fuzz::harness::run(&input.0);
});
