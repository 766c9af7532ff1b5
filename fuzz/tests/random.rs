//! Pseudo-random waiting scenarios on the stable toolchain (no libFuzzer): a fixed-seed
//! generator feeds the same decoders as the fuzz targets, so `cargo test` exercises the
//! waiter operations beyond the checked-in seeds. `TOLLGATE_FUZZ_RANDOM=N` runs N inputs per
//! target (default 3000).

use arbitrary::Unstructured;
use tollgate_fuzz::input::{WaitKind, WaitScenario};

fn count() -> u64 {
    std::env::var("TOLLGATE_FUZZ_RANDOM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3000)
}

/// xorshift64*: deterministic bytes.
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

fn run(which: WaitKind) {
    for seed in 0..count() {
        let mut b = bytes(seed, 16 + (seed % 200) as usize);
        // Keep the options small and ordinary in most inputs, so that the queue does work.
        if seed % 4 != 0 {
            let i = if which == WaitKind::Any { 1 } else { 0 };
            if b.len() > i + 2 {
                b[i] = 3 + (b[i] % 4) * 16; // Count::Small / edge selectors vary
            }
        }
        let s = WaitScenario::decode(which, &mut Unstructured::new(&b));
        let r = std::panic::catch_unwind(|| tollgate_fuzz::harness::run_waiting(&s));
        if let Err(e) = r {
            eprintln!("seed {seed}: {s:?}");
            std::panic::resume_unwind(e);
        }
    }
}

#[test]
fn waiting() {
    run(WaitKind::Any);
}

#[test]
fn sliding_window_moving() {
    run(WaitKind::MovingSliding);
}
