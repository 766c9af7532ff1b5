use core::fmt;

use crate::options::OptionsError;

/// Why [`RateLimitingBuilder::build`](crate::http::RateLimitingBuilder::build) failed.
///
/// ```
/// # use std::time::Duration;
/// use tollgate::http::{BuildError, Policy, RateLimiting};
/// use tollgate::FixedWindowOptions;
///
/// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// let dup = RateLimiting::builder().policy("api", two_a_minute()).policy("api", two_a_minute()).build();
/// assert_eq!(dup.unwrap_err(), BuildError::DuplicatePolicy("api".into()));
/// let limits = RateLimiting::builder().policy("api", two_a_minute()).build().unwrap();
/// let err = limits.policy_layer("apj").unwrap_err();
/// assert_eq!(err.to_string(), r#"no policy named "apj""#);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// A policy's limiter options are invalid.
    Options(OptionsError),
    /// Two policies have the same name.
    DuplicatePolicy(String),
    /// A policy name is empty or has characters a structured-field string cannot carry
    /// (only printable ASCII, without `"` and `\`).
    InvalidName(String),
    /// [`RateLimiting::policy_layer`](crate::http::RateLimiting::policy_layer) named a policy
    /// that does not exist.
    UnknownPolicy(String),
    /// A policy asked to charge by [cost](crate::http::Policy::cost), [settle](crate::http::Policy::settle_by)
    /// or [outcome](crate::http::Policy::charge_when) where it cannot: a custom or adaptive
    /// policy, a queueing one, or a settle or outcome on a concurrency policy.
    ///
    /// ```
    /// use tollgate::http::{BuildError, Policy, RateLimiting};
    /// use tollgate::ConcurrencyOptions;
    ///
    /// let pool = Policy::concurrency(ConcurrencyOptions::new(4)).unwrap().charge_when(|r| r.status == 401);
    /// let err = RateLimiting::builder().policy("pool", pool).build().unwrap_err();
    /// assert!(matches!(err, BuildError::Charging { ref policy, .. } if policy == "pool"));
    /// ```
    Charging {
        /// The policy's name.
        policy: String,
        /// Why it cannot.
        reason: &'static str,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Options(e) => write!(f, "invalid limiter options: {e:?}"),
            BuildError::DuplicatePolicy(n) => write!(f, "duplicate policy name {n:?}"),
            BuildError::InvalidName(n) => write!(f, "invalid policy name {n:?}"),
            BuildError::UnknownPolicy(n) => write!(f, "no policy named {n:?}"),
            BuildError::Charging { policy, reason } => write!(f, "policy {policy:?}: {reason}"),
        }
    }
}

impl std::error::Error for BuildError {}

impl From<OptionsError> for BuildError {
    fn from(e: OptionsError) -> Self {
        BuildError::Options(e)
    }
}
