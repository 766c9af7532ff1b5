//! Differential target: `leaky_meter` against its reference model (see `tollgate_fuzz::harness_algos`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate_fuzz::input::LeakyMeterInput;

fuzz_target!(|input: LeakyMeterInput| {
    tollgate_fuzz::harness::run(&input.0);
});
