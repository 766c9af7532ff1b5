//! The one list of the built-in rate limiters, from which the crate's per-limiter lists are
//! generated (the partition kinds and the limiter of a partition, `each_rate!`) or checked (a
//! `PartitionKind` and an HTTP `Policy` constructor for each, a serde form of its options, the
//! quota-style constructors of those that have `per`): a limiter missing from any of them does
//! not compile. The concurrency limiter is not a rate limiter (its permits come back by
//! release) and is written beside each list by hand.

/// Calls `$callback! { ($($pre)*) rows }` with one row per built-in rate limiter:
/// its docs, `Variant(module::Limiter, Options) constructor`, and `per` when its options have
/// the quota-style constructors (`per`, `per_second`, `per_minute`, `per_hour`).
macro_rules! rate_limiters {
    ($callback:ident! { $($pre:tt)* }) => {
        $callback! { ($($pre)*)
            /// A token bucket.
            TokenBucket(token_bucket::TokenBucketLimiter, TokenBucketOptions) token_bucket, per;
            /// A fixed window.
            FixedWindow(fixed_window::FixedWindowLimiter, FixedWindowOptions) fixed_window, per;
            /// A sliding window of up to 16 segments.
            SlidingWindow(sliding_window::SlidingWindowLimiter, SlidingWindowOptions) sliding_window, per;
            /// A GCRA limiter.
            Gcra(gcra::GcraLimiter, GcraOptions) gcra, per;
            /// A leaky bucket as a meter.
            LeakyMeter(leaky_bucket::LeakyBucketMeter, LeakyBucketOptions) leaky_meter;
            /// A leaky bucket as a shaper.
            LeakyShaper(leaky_bucket::LeakyBucketShaper, ShaperOptions) leaky_shaper, per;
            /// A sliding-window counter.
            SlidingCounter(sliding_counter::SlidingCounterLimiter, SlidingCounterOptions) sliding_counter, per;
            /// A sliding-window log of up to 16 entries.
            SlidingLog(sliding_log::SlidingLogLimiter, SlidingLogOptions) sliding_log, per;
        }
    };
}
pub(crate) use rate_limiters;
