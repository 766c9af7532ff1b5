//! Differential target: `gcra` against its reference model (see `tollgate_fuzz::harness_algos`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate_fuzz::input::GcraInput;

fuzz_target!(|input: GcraInput| {
    tollgate_fuzz::harness::run(&input.0);
});
