//! The settle property on the stable toolchain: the checked-in seeds, then pseudo-random
//! scenarios (`cargo test` from `fuzz/`).

use tollgate_fuzz::replay;
use tollgate_fuzz::settle::{check, Input};

#[test]
fn seeds() {
    replay::seeds("settle", 7, Input::decode, |_, input| {
        assert_eq!(Input::decode(&input.encode()).ops, input.ops);
        check(input);
    });
}

#[test]
fn random() {
    replay::random(3_000, 200, Input::decode, check);
}
