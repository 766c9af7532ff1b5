//! Differential target: every compact keyed form against a full limiter per key (see `tollgate_fuzz::keyed`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = tollgate_fuzz::keyed::run(data);
});
