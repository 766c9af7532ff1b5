//! Differential fuzzing of tollgate's limiters against plain reference models.
//!
//! - [`input`]: what the fuzzer's bytes mean (options, start instant, operations), and the
//!   inverse encoding used to write the seed corpora;
//! - [`model`]: the reference models, one per limiter, and the option rules;
//! - [`harness`]: runs a scenario against a limiter on a `ManualClock` and its model, comparing
//!   every observable at every step;
//! - [`options_check`]: the options target;
//! - [`late_service`]: a queue served late against the same queue served at every tick;
//! - [`settle`]: a lease settled to its actual cost against a twin asked for that cost;
//! - [`adaptive`]: the adaptive limiter's algorithms against their reference formulas, and
//!   its invariants;
//! - [`replay`]: the seeds-then-random-inputs harness of their stable-toolchain tests.
//!
//! See `fuzz/README.md` for the targets and how to run them.

pub mod adaptive;
pub mod driver;
pub mod harness;
pub mod harness_algos;
pub mod input;
pub mod keyed;
pub mod known;
pub mod late_service;
pub mod model;
pub mod options_check;
pub mod replay;
pub mod seeds;
pub mod seeds_algos;
pub mod settle;
