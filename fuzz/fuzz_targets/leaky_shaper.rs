//! Differential target: `leaky_shaper` against its reference model (see `tollgate_fuzz::harness_algos`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate_fuzz::input::LeakyShaperInput;

fuzz_target!(|input: LeakyShaperInput| {
    tollgate_fuzz::harness::run(&input.0);
});
