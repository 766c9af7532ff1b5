//! Options target: arbitrary options never panic and are accepted or refused as the rules say
//! (see `turnstile_fuzz::options_check`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use turnstile_fuzz::input::OptionsInput;

fuzz_target!(|input: OptionsInput| {
    turnstile_fuzz::options_check::run(&input);
});
