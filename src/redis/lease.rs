//! Leased quotas: a fixed window's permits taken from Redis in blocks and handed out locally.
//!
//! A decision that finds no usable lease for its key asks Redis for up to `L` permits of the
//! current window in one call (at least its own); what it does not use stays in a local slot
//! until the window ends, and later decisions on the key take from it with an atomic
//! decrement, without a round trip. A window Redis says is spent is remembered the same way:
//! later decisions are refused locally until it ends.
//!
//! **No overshoot.** Redis counts leased permits when it leases them, so every machine
//! together never grants more than the limit per window; a slot expires at the window's end
//! as measured from *before* the call was sent (the server read its clock after that), so a
//! leased permit is never used in the next window — up to the drift between this machine's
//! monotonic clock and the server's over one window (parts per million). **Undershoot:** a
//! window may end with permits leased but unused, at most `L - 1` per machine per key (they
//! are refused to the other machines meanwhile).

use core::time::Duration;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use crate::clock::Instant;

/// A key's lease: permits left until `until`, or a spent window (`spent`) until then.
#[derive(Debug)]
struct Slot {
    until: Instant,
    left: AtomicU64,
    /// Redis refused: the window is spent until `until` (the RetryAfter is `until - now`).
    spent: bool,
}

/// The leases of one limiter.
#[derive(Debug)]
pub(super) struct Leases {
    /// Permits asked per lease.
    pub(super) size: u32,
    slots: RwLock<HashMap<String, Arc<Slot>>>,
}

/// What the local slot says.
pub(super) enum Local {
    /// Granted from the lease.
    Granted {
        /// Permits left in the lease.
        left: u64,
    },
    /// The window is spent (Redis said so): refused until it ends.
    Spent(Duration),
    /// No usable lease: ask Redis.
    Ask,
}

/// The most keys kept before expired slots are dropped.
const PRUNE_AT: usize = 4_096;

impl Leases {
    pub(super) fn new(size: u32) -> Self {
        Self {
            size,
            slots: RwLock::new(HashMap::new()),
        }
    }

    /// Takes `permits` from `key`'s lease at `now`, if it has them.
    pub(super) fn take(&self, key: &str, permits: u32, now: Instant) -> Local {
        let slots = self.slots.read().unwrap_or_else(PoisonError::into_inner);
        let Some(slot) = slots.get(key) else {
            return Local::Ask;
        };
        let Some(left) = slot
            .until
            .checked_duration_since(now)
            .filter(|d| !d.is_zero())
        else {
            return Local::Ask;
        };
        if slot.spent {
            return Local::Spent(left);
        }
        if permits == 0 {
            // A probe: granted if one permit is there, taking nothing.
            let left = slot.left.load(Ordering::Acquire);
            return if left > 0 {
                Local::Granted { left }
            } else {
                Local::Ask
            };
        }
        let n = u64::from(permits);
        match slot
            .left
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |l| l.checked_sub(n))
        {
            Ok(l) => Local::Granted { left: l - n },
            Err(_) => Local::Ask,
        }
    }

    /// Records a lease of `extra` permits (beyond the request's own) until `until`, or a spent
    /// window. Permits still left in an unexpired lease of the key are kept.
    pub(super) fn put(&self, key: &str, extra: u64, spent: bool, until: Instant, now: Instant) {
        let mut slots = self.slots.write().unwrap_or_else(PoisonError::into_inner);
        if slots.len() >= PRUNE_AT {
            slots.retain(|_, s| s.until > now);
        }
        let kept = match slots.get(key) {
            Some(old) if old.until > now && !old.spent && !spent => {
                old.left.swap(0, Ordering::AcqRel)
            }
            _ => 0,
        };
        slots.insert(
            key.to_owned(),
            Arc::new(Slot {
                until,
                left: AtomicU64::new(extra + kept),
                spent,
            }),
        );
    }
}
