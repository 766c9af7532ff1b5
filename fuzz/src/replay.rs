//! The stable-toolchain harness of the property tests (`cargo test` from `fuzz/`): a target's
//! checked-in seeds, then pseudo-random inputs, each decoded and checked.

use std::path::Path;

/// Decodes every seed of `corpus/<target>` with `decode` and hands it to `check` with its
/// path; there must be at least `min` seeds.
pub fn seeds<I>(
    target: &str,
    min: usize,
    decode: impl Fn(&[u8]) -> I,
    mut check: impl FnMut(&Path, &I),
) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        let input = decode(&std::fs::read(&path).unwrap());
        check(&path, &input);
        n += 1;
    }
    assert!(n >= min, "the seeds are missing");
}

/// Decodes `count` pseudo-random inputs of `len` bytes each (xorshift64 from a fixed seed,
/// the same sequence every run) with `decode`, and hands each to `check`.
pub fn random<I>(count: usize, len: usize, decode: impl Fn(&[u8]) -> I, check: impl Fn(&I)) {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..count {
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        check(&decode(&bytes));
    }
}
