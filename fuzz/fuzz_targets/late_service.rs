//! Property target: a queue served late grants what the same queue served at every tick grants
//! (see `tollgate_fuzz::late_service`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    tollgate_fuzz::late_service::check(&tollgate_fuzz::late_service::Input::decode(data));
});
