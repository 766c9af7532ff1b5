//! The adaptive limiter's algorithms against their formulas, on the stable toolchain: the
//! checked-in seeds, then pseudo-random scenarios (`cargo test` from `fuzz/`).

use tollgate_fuzz::adaptive::{check, Input};
use tollgate_fuzz::replay;

#[test]
fn seeds() {
    replay::seeds("adaptive", 6, Input::decode, |_, input| {
        assert_eq!(Input::decode(&input.encode()).windows, input.windows);
        check(input);
    });
}

#[test]
fn random() {
    replay::random(3_000, 240, Input::decode, check);
}
