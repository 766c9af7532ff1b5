//! Property target: a lease settled to `actual` leaves its limiter as if `actual` had been
//! asked for (see `tollgate_fuzz::settle`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tollgate_fuzz::settle::check(&tollgate_fuzz::settle::Input::decode(data));
});
