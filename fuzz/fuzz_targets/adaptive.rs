//! Property target: the adaptive limiter's algorithms against their reference formulas, and
//! the limiter's invariants (see `tollgate_fuzz::adaptive`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tollgate_fuzz::adaptive::check(&tollgate_fuzz::adaptive::Input::decode(data));
});
