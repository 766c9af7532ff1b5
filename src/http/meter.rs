//! The standard instruments of the layer (feature `metrics`, turned on by
//! [`RateLimitingBuilder::metrics`](crate::http::RateLimitingBuilder::metrics)): ASP.NET Core 8's
//! rate-limiting instruments, per policy, through the `metrics` facade.
//!
//! | instrument | kind | unit | labels |
//! |---|---|---|---|
//! | `tollgate.http.rate_limiting.requests` | counter | requests | `policy`, `result` |
//! | `tollgate.http.rate_limiting.active_request_leases` | up-down (gauge) | leases | `policy` |
//! | `tollgate.http.rate_limiting.queued_requests` | up-down (gauge) | requests | `policy` |
//! | `tollgate.http.rate_limiting.request_lease.duration` | histogram | seconds | `policy` |
//! | `tollgate.http.rate_limiting.request.time_in_queue` | histogram | seconds | `policy`, `result` |
//! | `tollgate.http.rate_limiting.settles_refused` | counter | settles | `policy` |
//!
//! Every handle is registered once, when the layer is built, with the recorder installed then
//! (the global one, or a local one around `build`): a request touches atomics, never the
//! registry. Durations are read from the layer's clock.
//!
//! Without the feature, [`Meter`] has no value: every `Option<Arc<Meter>>` is `None`, and the
//! calls on it compile to nothing.

use std::sync::Arc;

/// What one policy's decision on one request came to: the `result` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Granted (`acquired`).
    Acquired,
    /// Refused (`global_limiter` for the global policy, else `endpoint_limiter`).
    Refused,
    /// The client went away while the request waited in the policy's queue
    /// (`request_canceled`).
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    Canceled,
    /// Would have been refused, but the policy is in shadow mode (`shadow_rejected`).
    Shadow,
}

#[cfg(feature = "metrics")]
pub(super) use on::{LeaseTimer, Meter, QueueTimer};

#[cfg(not(feature = "metrics"))]
pub(super) use off::{Meter, QueueTimer};

#[cfg(feature = "metrics")]
mod on {
    use std::sync::Arc;

    use metrics::{Counter, Gauge, Histogram, SharedString, Unit};

    use super::Outcome;
    use crate::clock::Clock;

    /// The layer's clock (what [`SharedClock`](crate::http::SharedClock) names).
    type SharedClock = Arc<dyn Clock + Send + Sync>;

    const REQUESTS: &str = "tollgate.http.rate_limiting.requests";
    const ACTIVE: &str = "tollgate.http.rate_limiting.active_request_leases";
    const QUEUED: &str = "tollgate.http.rate_limiting.queued_requests";
    const LEASE_DURATION: &str = "tollgate.http.rate_limiting.request_lease.duration";
    const TIME_IN_QUEUE: &str = "tollgate.http.rate_limiting.request.time_in_queue";
    const SETTLES_REFUSED: &str = "tollgate.http.rate_limiting.settles_refused";

    /// One policy's instruments, registered once.
    pub(in crate::http) struct Meter {
        /// By [`Outcome`], in its order.
        requests: [Counter; 4],
        time_in_queue: [Histogram; 4],
        lease_duration: Histogram,
        active: Gauge,
        queued: Gauge,
        settles_refused: Counter,
        clock: SharedClock,
    }

    impl Meter {
        /// The instruments of the policy `name` (`global`: the layer's global policy, whose
        /// refusals are `global_limiter`), timed on `clock`.
        pub(in crate::http) fn new(name: &str, global: bool, clock: &SharedClock) -> Self {
            describe();
            let refused = if global {
                "global_limiter"
            } else {
                "endpoint_limiter"
            };
            let results = ["acquired", refused, "request_canceled", "shadow_rejected"];
            let policy = SharedString::from(String::from(name));
            let labelled = |result: &'static str| {
                [
                    ("policy", policy.clone()),
                    ("result", SharedString::const_str(result)),
                ]
            };
            Self {
                requests: results.map(|r| metrics::counter!(REQUESTS, &labelled(r))),
                time_in_queue: results.map(|r| metrics::histogram!(TIME_IN_QUEUE, &labelled(r))),
                lease_duration: metrics::histogram!(LEASE_DURATION, "policy" => policy.clone()),
                active: metrics::gauge!(ACTIVE, "policy" => policy.clone()),
                queued: metrics::gauge!(QUEUED, "policy" => policy.clone()),
                settles_refused: metrics::counter!(SETTLES_REFUSED, "policy" => policy),
                clock: clock.clone(),
            }
        }

        /// Counts one decision.
        pub(in crate::http) fn count(&self, outcome: Outcome) {
            self.requests[outcome as usize].increment(1);
        }

        /// Counts a settle the policy's limiter refused (past its debt bound).
        pub(in crate::http) fn settle_refused(&self) {
            self.settles_refused.increment(1);
        }

        /// A lease starts: timed from now until the timer is dropped (with its permit, at the
        /// end of the response body).
        pub(in crate::http) fn lease(self: &Arc<Self>) -> LeaseTimer {
            self.active.increment(1.0);
            LeaseTimer {
                meter: self.clone(),
                since: self.now(),
            }
        }

        /// A request starts waiting in the policy's queue.
        pub(in crate::http) fn queued(self: &Arc<Self>) -> QueueTimer {
            self.queued.increment(1.0);
            QueueTimer {
                meter: Some(self.clone()),
                since: self.now(),
            }
        }

        fn now(&self) -> u64 {
            self.clock.now().as_nanos()
        }

        fn seconds_since(&self, since: u64) -> f64 {
            // Nanoseconds to seconds: exact below 2^53 ns (104 days).
            self.now().saturating_sub(since) as f64 / 1e9
        }
    }

    /// The descriptions and units of the instruments, for the exporters that show them.
    fn describe() {
        metrics::describe_counter!(
            REQUESTS,
            Unit::Count,
            "Requests decided by a rate-limiting policy, by result"
        );
        metrics::describe_gauge!(
            ACTIVE,
            Unit::Count,
            "Requests holding a rate-limiting lease (from the grant to the end of the response body)"
        );
        metrics::describe_gauge!(
            QUEUED,
            Unit::Count,
            "Requests waiting in a rate-limiting policy's queue"
        );
        metrics::describe_histogram!(
            LEASE_DURATION,
            Unit::Seconds,
            "How long requests held a rate-limiting lease (from the grant to the end of the response body)"
        );
        metrics::describe_histogram!(
            TIME_IN_QUEUE,
            Unit::Seconds,
            "How long requests waited in a rate-limiting policy's queue, by result"
        );
        metrics::describe_counter!(
            SETTLES_REFUSED,
            Unit::Count,
            "Settles of a request's charge from its response refused past the debt bound (the charge kept)"
        );
    }

    /// A granted request's lease, timed: when it was granted; its duration recorded when this
    /// is dropped.
    #[derive(Debug)]
    pub(in crate::http) struct LeaseTimer {
        meter: Arc<Meter>,
        since: u64,
    }

    impl Drop for LeaseTimer {
        fn drop(&mut self) {
            let m = &self.meter;
            m.lease_duration.record(m.seconds_since(self.since));
            m.active.decrement(1.0);
        }
    }

    impl core::fmt::Debug for Meter {
        fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
            f.debug_struct("Meter").finish_non_exhaustive()
        }
    }

    /// A request waiting in a policy's queue, timed: [`done`](Self::done) when its wait ends;
    /// dropped before that, the client went away ([`Outcome::Canceled`]).
    pub(in crate::http) struct QueueTimer {
        meter: Option<Arc<Meter>>,
        since: u64,
    }

    impl QueueTimer {
        /// The wait ended in `outcome` (which the caller counts with the decision).
        pub(in crate::http) fn done(mut self, outcome: Outcome) {
            if let Some(m) = self.meter.take() {
                m.queued.decrement(1.0);
                m.time_in_queue[outcome as usize].record(m.seconds_since(self.since));
            }
        }
    }

    impl Drop for QueueTimer {
        fn drop(&mut self) {
            if let Some(m) = self.meter.take() {
                m.queued.decrement(1.0);
                m.time_in_queue[Outcome::Canceled as usize].record(m.seconds_since(self.since));
                m.count(Outcome::Canceled);
            }
        }
    }
}

#[cfg(not(feature = "metrics"))]
mod off {
    use std::sync::Arc;

    use super::Outcome;

    /// No instruments without the `metrics` feature: never made.
    #[derive(Debug)]
    pub(in crate::http) enum Meter {}

    /// Never made either.
    pub(in crate::http) enum QueueTimer {}

    impl Meter {
        pub(in crate::http) fn count(&self, _: Outcome) {
            match *self {}
        }

        pub(in crate::http) fn queued(self: &Arc<Self>) -> QueueTimer {
            match **self {}
        }

        pub(in crate::http) fn settle_refused(&self) {
            match *self {}
        }
    }

    impl QueueTimer {
        pub(in crate::http) fn done(self, _: Outcome) {
            match self {}
        }
    }
}

/// Counts `outcome` on `meter`, if there is one.
#[inline(always)]
pub(super) fn count(meter: &Option<Arc<Meter>>, outcome: Outcome) {
    if let Some(m) = meter {
        m.count(outcome);
    }
}
