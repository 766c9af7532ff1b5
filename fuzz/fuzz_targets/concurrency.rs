//! Differential target: `concurrency` against its reference model (see `tollgate_fuzz::harness`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate_fuzz::input::ConcurrencyInput;

fuzz_target!(|input: ConcurrencyInput| {
    tollgate_fuzz::harness::run(&input.0);
});
