//! loom model checks live in tests/; see the README of the crate.
