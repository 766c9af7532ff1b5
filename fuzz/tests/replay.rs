//! Replays every checked-in corpus input through the harness on the stable toolchain (no
//! libFuzzer): `cargo test` from `fuzz/`.

use arbitrary::{Arbitrary, Unstructured};
use tollgate_fuzz::input::{Kind, OptionsInput, Scenario};

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no seeds for {target}");
    v
}

fn replay(target: &str, kind: Kind) {
    for (name, bytes) in inputs(target) {
        let s = Scenario::decode(kind, &mut Unstructured::new(&bytes));
        println!("{name}: {s:?}");
        tollgate_fuzz::harness::run(&s);
    }
}

#[test]
fn concurrency() {
    replay("concurrency", Kind::Concurrency);
}

#[test]
fn token_bucket() {
    replay("token_bucket", Kind::TokenBucket);
}

#[test]
fn fixed_window() {
    replay("fixed_window", Kind::FixedWindow);
}

#[test]
fn sliding_window() {
    replay("sliding_window", Kind::SlidingWindow);
}

#[test]
fn options() {
    for (name, bytes) in inputs("options") {
        let o = OptionsInput::arbitrary(&mut Unstructured::new(&bytes)).unwrap();
        println!("{name}: {o:?}");
        tollgate_fuzz::options_check::run(&o);
    }
}

fn replay_waiting(target: &str, which: tollgate_fuzz::input::WaitKind) {
    for (name, bytes) in inputs(target) {
        let s = tollgate_fuzz::input::WaitScenario::decode(which, &mut Unstructured::new(&bytes));
        println!("{name}: {s:?}");
        tollgate_fuzz::harness::run_waiting(&s);
    }
}

#[test]
fn waiting() {
    replay_waiting("waiting", tollgate_fuzz::input::WaitKind::Any);
}

#[test]
fn sliding_window_moving() {
    replay_waiting(
        "sliding_window_moving",
        tollgate_fuzz::input::WaitKind::MovingSliding,
    );
}
