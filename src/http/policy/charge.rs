//! Policies that count by cost and by outcome: what a request is charged ([`Policy::cost`]),
//! what its response settles the charge to ([`Settle`], [`Policy::settle_by`]) and which
//! responses keep it ([`Policy::charge_when`]); and the charged permit that carries the
//! request's settle-capable lease from the decision to the response.

use core::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[cfg(doc)]
use super::Policy;
use super::{Denial, Key, RequestView};
use crate::http::meter::Meter;
use crate::lease::{Lease, OwnedLease, SettleError, Settlement};
use crate::quota::QuotaState;

type CostFn = dyn Fn(&RequestView<'_>) -> u32 + Send + Sync;
type HeadFn = dyn Fn(&http::response::Parts) -> Option<u32> + Send + Sync;
type WhenFn = dyn Fn(&http::response::Parts) -> bool + Send + Sync;

/// What a response settles its request's charge to (see [`Policy::settle_by`]): a number
/// read from the response head (a header such as `x-tokens-used`), or the response body's
/// length once it has ended.
///
/// ```
/// use tollgate::http::Settle;
///
/// let tokens = Settle::header("x-tokens-used"); // the model's usage, from the upstream
/// let bytes = Settle::body_len(); // one permit per byte sent
/// let custom = Settle::response(|r| (r.status == 204).then_some(0)); // no content, no charge
/// # let _ = (tokens, bytes, custom);
/// ```
#[derive(Clone)]
pub struct Settle(pub(super) Rule);

#[derive(Clone)]
pub(super) enum Rule {
    /// At the response head; `None` keeps the estimate.
    Head(Arc<HeadFn>),
    /// At the body's end (or drop): one permit per byte the body yielded.
    BodyLen,
}

impl Settle {
    /// The permits `f` reads from the response head; `None` keeps the charge as it is.
    ///
    /// ```
    /// use tollgate::http::Settle;
    ///
    /// // Charged by the upstream's own count, when it gives one.
    /// let usage = Settle::response(|r| r.headers.get("x-usage")?.to_str().ok()?.parse().ok());
    /// # let _ = usage;
    /// ```
    pub fn response(
        f: impl Fn(&http::response::Parts) -> Option<u32> + Send + Sync + 'static,
    ) -> Self {
        Settle(Rule::Head(Arc::new(f)))
    }

    /// The decimal number in the response header `name` (a missing or unreadable one keeps
    /// the charge as it is). The header is left on the response.
    ///
    /// ```
    /// use tollgate::http::Settle;
    ///
    /// let tokens = Settle::header("x-tokens-used");
    /// # let _ = tokens;
    /// ```
    pub fn header(name: &'static str) -> Self {
        Settle::response(move |r| r.headers.get(name)?.to_str().ok()?.trim().parse().ok())
    }

    /// The response body's length: one permit per byte the body yielded, settled when it
    /// ends — or when it is dropped before its end (a client that hangs up is charged what
    /// was sent, not the estimate). The quota headers, written before the body, report the
    /// estimate.
    ///
    /// ```
    /// use tollgate::http::Settle;
    ///
    /// let bytes = Settle::body_len();
    /// # let _ = bytes;
    /// ```
    pub fn body_len() -> Self {
        Settle(Rule::BodyLen)
    }
}

impl fmt::Debug for Settle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.0 {
            Rule::Head(_) => "Settle::response",
            Rule::BodyLen => "Settle::body_len",
        })
    }
}

/// A policy's charging rules: the cost, the settle, the outcome that keeps the charge, and
/// the settles its limiter refused.
#[derive(Default)]
pub(crate) struct Charging {
    pub(super) cost: Option<Arc<CostFn>>,
    pub(super) settle: Option<Rule>,
    pub(super) when: Option<Arc<WhenFn>>,
    /// The most a settle may leave the policy's limiter owing ([`Policy::max_debt`]); none:
    /// the limiter's own bound.
    ///
    /// [`Policy::max_debt`]: crate::http::Policy::max_debt
    pub(super) max_debt: Option<u32>,
    /// Settles refused for the debt limit (the estimate kept).
    unsettled: AtomicU64,
    /// The policy's instruments, when the layer reports metrics.
    meter: Option<Arc<Meter>>,
}

impl Clone for Charging {
    fn clone(&self) -> Self {
        Self {
            cost: self.cost.clone(),
            settle: self.settle.clone(),
            when: self.when.clone(),
            max_debt: self.max_debt,
            unsettled: AtomicU64::new(0),
            meter: self.meter.clone(),
        }
    }
}

impl Charging {
    /// These rules, for a built policy whose instruments are `meter`: its own count of
    /// refused settles.
    pub(in crate::http) fn built(&self, meter: Option<Arc<Meter>>) -> Self {
        Self {
            meter,
            ..self.clone()
        }
    }

    /// The permits `view` is charged.
    #[inline]
    pub(crate) fn cost(&self, view: &RequestView<'_>) -> u32 {
        self.cost.as_ref().map_or(1, |f| f(view))
    }

    /// Whether the policy charges by cost or outcome at all.
    pub(crate) fn charges(&self) -> bool {
        self.cost.is_some() || self.settles()
    }

    /// Whether a response may change the charge (else the lease is dropped at once).
    pub(crate) fn settles(&self) -> bool {
        self.settle.is_some() || self.when.is_some()
    }

    /// Settles refused, since the layer was built.
    pub(crate) fn unsettled(&self) -> u64 {
        self.unsettled.load(Ordering::Relaxed)
    }

    #[cold]
    fn refused(&self, e: SettleError, taken: u32, actual: u32) {
        self.unsettled.fetch_add(1, Ordering::Relaxed);
        if let Some(m) = &self.meter {
            m.settle_refused();
        }
        #[cfg(feature = "tracing")]
        tracing::warn!(target: "tollgate", taken, actual, "HTTP settle refused: {e}; the charge stays");
        #[cfg(not(feature = "tracing"))]
        let _ = (e, taken, actual);
    }
}

/// A settle-capable lease, as a built-in policy's limiter granted it.
pub(crate) enum Held {
    /// An unpartitioned or partitioned limiter's lease (it settles by itself).
    Owned(OwnedLease),
    /// A compact keyed limiter's lease (it settles through the limiter, with its key).
    Keyed(Lease<'static>),
}

impl Held {
    fn permits(&self) -> u32 {
        match self {
            Held::Owned(l) => l.permits(),
            Held::Keyed(l) => l.permits(),
        }
    }
}

/// A built-in policy's limiter, charged a weight and settled later.
pub(crate) trait Charge: Send + Sync + 'static {
    /// `permits` for `key` now: the lease and the quota after it (if `want_quota`), or the
    /// refusal.
    fn charge(
        &self,
        key: Key,
        permits: u32,
        want_quota: bool,
    ) -> Result<(Held, Option<QuotaState>), Denial>;

    /// Settles `held`, granted for `key`, to `s.actual` permits, owing at most `s.max_debt`.
    /// An owned lease settles by itself (the default); a keyed one needs its limiter and key.
    fn settle(&self, key: &Key, held: &mut Held, s: Settlement) -> Result<(), SettleError> {
        let _ = key;
        match held {
            Held::Owned(l) => l.settle_within(s.actual, s.max_debt),
            Held::Keyed(_) => Err(SettleError::Unsupported),
        }
    }

    /// `key`'s quota now.
    fn quota(&self, key: &Key) -> QuotaState;
}

/// The permit of a charged request: its lease, kept until its response says what it costs.
pub(crate) struct Charged {
    held: Held,
    key: Key,
    by: Arc<dyn Charge>,
    rules: Arc<Charging>,
    /// The bytes the response body has yielded, once the head asked to count them.
    sent: Option<u64>,
}

impl fmt::Debug for Charged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Charged")
            .field("permits", &self.held.permits())
            .field("sent", &self.sent)
            .finish_non_exhaustive()
    }
}

impl Charged {
    pub(crate) fn new(held: Held, key: Key, by: Arc<dyn Charge>, rules: Arc<Charging>) -> Self {
        Self {
            held,
            key,
            by,
            rules,
            sent: None,
        }
    }

    /// Whether dropping it gives permits back (a concurrency policy's).
    pub(crate) fn holds(&self) -> bool {
        matches!(&self.held, Held::Owned(l) if l.returns_permits())
    }

    /// Settles to `actual`; a refusal keeps what was taken, counted.
    pub(crate) fn settle(&mut self, actual: u32) -> Result<(), SettleError> {
        let taken = self.held.permits();
        let max_debt = self.rules.max_debt.unwrap_or(u32::MAX);
        // The held lease keeps its own stamp (its settle reads it there): 0 here is unused.
        let s = Settlement::new(taken, actual, 0).within(max_debt);
        let r = self.by.settle(&self.key, &mut self.held, s);
        if let Err(e) = r {
            self.rules.refused(e, taken, actual);
        }
        r
    }

    /// The response head: a response the outcome rule does not charge is refunded; a head
    /// settle is applied; a body-length settle starts counting. The quota after it, when it
    /// changed the charge.
    pub(crate) fn respond(&mut self, head: &http::response::Parts) -> Option<QuotaState> {
        if let Some(when) = &self.rules.when {
            if !when(head) {
                self.sent = None;
                return self.settle(0).ok().map(|()| self.by.quota(&self.key));
            }
        }
        match &self.rules.settle {
            Some(Rule::Head(f)) => {
                let actual = f(head)?;
                self.settle(actual).ok().map(|()| self.by.quota(&self.key))
            }
            Some(Rule::BodyLen) => {
                self.sent = Some(0);
                None
            }
            None => None,
        }
    }

    /// The body yielded `n` bytes.
    #[inline]
    pub(crate) fn sent(&mut self, n: usize) {
        if let Some(s) = &mut self.sent {
            *s = s.saturating_add(n as u64);
        }
    }
}

impl Drop for Charged {
    fn drop(&mut self) {
        // The body ended, failed or was dropped: it cost what it sent.
        if let Some(n) = self.sent.take() {
            let _ = self.settle(u32::try_from(n).unwrap_or(u32::MAX));
        }
    }
}
