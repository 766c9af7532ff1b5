//! Writes the seed corpora: `cargo run --example make_seeds` from `fuzz/`.

fn main() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for (target, name, bytes) in tollgate_fuzz::seeds::all()
        .into_iter()
        .chain(tollgate_fuzz::seeds_algos::all())
    {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), &bytes).unwrap();
        println!("{target}/{name}: {} bytes", bytes.len());
    }
}
