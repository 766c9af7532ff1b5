//! The loom models of `sliding_window.rs` on the 64-bit header: the same races, decisions,
//! RetryAfters and permits coming back, with 1 ms segments (whose ticks leave the counts 9 bits
//! each in 64 bits). The header's two layouts share every transition; only the packing differs,
//! and `sliding_window::tests::both_header_layouts_follow_the_same_transitions` checks that.
#![cfg(loom)]

/// 2^20 ns segments: the 64-bit header.
const SEGMENT_NS: u64 = 1 << 20;

include!("sliding_window/models.rs");

/// The layout under test is the 64-bit one: it holds limits up to 2^9 - 1.
#[test]
fn the_header_is_the_64_bit_one() {
    check(|| {
        let l = window(ManualClock::new());
        let opts =
            |limit| SlidingWindowOptions::new(limit, ns(SEGMENTS * SEGMENT_NS), SEGMENTS as u32);
        l.reconfigure(opts(511)).unwrap();
        assert_eq!(
            l.reconfigure(opts(512)),
            Err(tollgate::OptionsError::LimitTooLarge { max: 511 })
        );
    });
}
