//! loom models of `SlidingWindowLimiter`: take, slide (freeze the segment being left into the ring,
//! then move the header with one CAS), replenish and close.
//!
//! Every limiter here admits 3 permits per window of 3 segments of 10 ns (ring capacity 3), so
//! permits taken in segment `j` (from `10 j` ns) come back at segment `j + 3`. A slide from a
//! header at segment 1 or 2 reads the frozen count of the earlier segments from the ring: the
//! models are built so that a frozen count that is missing or late shows up as over-admission.
//!
//! Most models pin the instant each thread reads with [`ThreadClock`] and check the outcome
//! against a plain sequential model of the window: every run must be explained by some
//! interleaving of the racing operations' atomic steps (a take's decision is one step, the
//! RetryAfter a refusal computes afterwards another; a replenish's slide is one, the count it
//! returns another), with the same decisions, the same RetryAfter for every refusal, and the same
//! permits coming back at every later instant.
//!
//! These run on the 128-bit header (10 ns segments leave the 64-bit layout no room for the
//! counts); `sliding_window_narrow.rs` runs the same models on the 64-bit header.
#![cfg(loom)]

/// 10 ns segments: the 128-bit header.
const SEGMENT_NS: u64 = 10;

include!("sliding_window/models.rs");

/// The layout under test holds any `u32` limit.
#[test]
fn the_header_is_the_128_bit_one() {
    check(|| {
        let l = window(ManualClock::new());
        let opts = SlidingWindowOptions::new(u32::MAX, ns(SEGMENTS * SEGMENT_NS), SEGMENTS as u32);
        l.reconfigure(opts).unwrap();
    });
}
