//! Replays the checked-in corpora of the targets of issue 15 through the harness on stable.

use arbitrary::Unstructured;
use tollgate_fuzz::input::{Kind, Scenario};

fn replay(target: &str, kind: Kind) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no seeds for {target}");
    for p in files {
        let bytes = std::fs::read(&p).unwrap();
        let s = Scenario::decode(kind, &mut Unstructured::new(&bytes));
        println!("{}: {s:?}", p.display());
        tollgate_fuzz::harness::run(&s);
    }
}

#[test]
fn gcra() {
    replay("gcra", Kind::Gcra);
}

#[test]
fn leaky_meter() {
    replay("leaky_meter", Kind::LeakyMeter);
}

#[test]
fn leaky_shaper() {
    replay("leaky_shaper", Kind::LeakyShaper);
}

#[test]
fn sliding_counter() {
    replay("sliding_counter", Kind::SlidingCounter);
}

#[test]
fn sliding_log() {
    replay("sliding_log", Kind::SlidingLog);
}
