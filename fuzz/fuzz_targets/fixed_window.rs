//! Differential target: `fixed_window` against its reference model (see `tollgate_fuzz::harness`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate_fuzz::input::FixedWindowInput;

fuzz_target!(|input: FixedWindowInput| {
    tollgate_fuzz::harness::run(&input.0);
});
