//! Names the platform condition the crate's code is written against, so that the source says it
//! once (see `src/sync.rs`):
//!
//! - `tollgate_cs_cells`: the limiters' 64- and 128-bit state words are critical-section cells
//!   (`sync::CsAtomic`), not atomics. Set when not under `--cfg loom` and either the target has
//!   no native 64-bit atomics (32-bit MCUs) or `--cfg tollgate_cs_words` asks for the cells on a
//!   host (the lib tests over them).

use std::env;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-check-cfg=cfg(tollgate_cs_cells)");

    // Cargo describes the target (with the `--cfg`s of RUSTFLAGS) in `CARGO_CFG_*`.
    let loom = env::var_os("CARGO_CFG_LOOM").is_some();
    let cs_words = env::var_os("CARGO_CFG_TOLLGATE_CS_WORDS").is_some();
    // A comma-separated list such as "8,16,32,64,ptr"; unset on targets with no atomics at all.
    let atomic_64 = env::var("CARGO_CFG_TARGET_HAS_ATOMIC")
        .map(|widths| widths.split(',').any(|w| w == "64"))
        .unwrap_or(false);
    if !loom && (!atomic_64 || cs_words) {
        println!("cargo:rustc-cfg=tollgate_cs_cells");
    }
}
