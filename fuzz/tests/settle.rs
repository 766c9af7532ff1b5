//! The settle property on the stable toolchain: the checked-in seeds, then pseudo-random
//! scenarios (`cargo test` from `fuzz/`).

use tollgate_fuzz::settle::{check, Input};

#[test]
fn seeds() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/settle");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let input = Input::decode(&std::fs::read(&path).unwrap());
        assert_eq!(Input::decode(&input.encode()).ops, input.ops);
        check(&input);
        n += 1;
    }
    assert!(n >= 7, "the seeds are missing");
}

#[test]
fn random() {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..3_000 {
        let bytes: Vec<u8> = (0..200)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        check(&Input::decode(&bytes));
    }
}
