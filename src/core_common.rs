//! Code shared by the rate limiters' fronts and cores.

/// The public face of a rate limiter, in one invocation of the four macros every rate limiter
/// uses: its options' [`with_queue`](crate::options::with_queue), its constructors ([`limiter_front!`](crate::rate_limiter::limiter_front), whose doc
/// examples build options with `new`), its queueless constructors
/// ([`unqueued_constructors!`](crate::rate_limiter::unqueued_constructors), with `unqueued` if
/// given, else `new`; `apply` changes a queueless limiter's configuration) and its capabilities
/// ([`rate_limiter!`](crate::rate_limiter::rate_limiter), whose examples wait in a queue of
/// `queued`).
macro_rules! rate_limiter_front {
    (
        $ty:ident $(<const $n:ident = $d:literal>)?, $options:ident, $what:literal,
        apply = $apply:expr, new: $opts:literal, queued: $queued:literal $(,)?
    ) => {
        $crate::core_common::rate_limiter_front! {
            $ty $(<const $n = $d>)?, $options, $what,
            apply = $apply, new: $opts, unqueued: $opts, queued: $queued,
        }
    };
    (
        $ty:ident $(<const $n:ident = $d:literal>)?, $options:ident, $what:literal,
        apply = $apply:expr, new: $opts:literal, unqueued: $unqueued:literal,
        queued: $queued:literal $(,)?
    ) => {
        $crate::options::with_queue!($options, $opts);
        $crate::rate_limiter::limiter_front!($ty $(<const $n = $d>)?, $options, $what, $opts);
        $crate::rate_limiter::unqueued_constructors!(
            $ty $(<const $n = $d>)?,
            $options,
            $unqueued,
            apply = $apply,
        );
        $crate::rate_limiter::rate_limiter!($ty $(<const $n>)?, $queued);
    };
}
pub(crate) use rate_limiter_front;
