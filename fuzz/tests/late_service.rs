//! The late-service property on the stable toolchain: the checked-in seeds, then pseudo-random
//! scenarios (`cargo test` from `fuzz/`).

use tollgate_fuzz::late_service::{check, Input};
use tollgate_fuzz::replay;

#[test]
fn seeds() {
    replay::seeds("late_service", 6, Input::decode, |path, input| {
        assert_eq!(Input::decode(&input.encode()).requests, input.requests);
        println!("{}: {input:?}", path.display());
        check(input);
    });
}

#[test]
fn random() {
    replay::random(300, 80, Input::decode, check);
}
