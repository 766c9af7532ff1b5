//! Options target: arbitrary options never panic and are accepted or refused as the rules say
//! (see `tollgate_fuzz::options_check`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use tollgate_fuzz::input::OptionsInput;

fuzz_target!(|input: OptionsInput| {
    tollgate_fuzz::options_check::run(&input);
});
