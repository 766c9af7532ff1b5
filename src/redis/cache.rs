//! The optional denial cache: a denial of `n` permits from Redis stands, for requests of at least
//! `n` permits on the same key, until its RetryAfter has passed. Never an allow.
//!
//! Why that is sound: until RetryAfter, time alone cannot free `n` permits (that is what
//! RetryAfter means), and other clients only take more. A request for fewer permits may succeed
//! and is asked of Redis.

use core::time::Duration;
use std::collections::HashMap;
use std::sync::Mutex;

use crate::clock::Instant;

#[derive(Debug)]
pub(crate) struct DenialCache {
    capacity: usize,
    map: Mutex<HashMap<String, (Instant, u32)>>,
}

impl DenialCache {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            map: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, u32)>> {
        // Plain map operations: a poisoned map is still a consistent map.
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The time left on a cached denial that covers `permits` on `key` at `now`.
    pub(crate) fn get(&self, key: &str, permits: u32, now: Instant) -> Option<Duration> {
        let mut map = self.lock();
        let &(until, min) = map.get(key)?;
        match until.checked_duration_since(now) {
            Some(left) if !left.is_zero() => (permits >= min).then_some(left),
            _ => {
                map.remove(key);
                None
            }
        }
    }

    /// Drops `key`'s denial: a settled lease gave permits back to it.
    pub(crate) fn forget(&self, key: &str) {
        self.lock().remove(key);
    }

    /// Records a denial of `permits` on `key` at `now`, standing for `retry_after`.
    pub(crate) fn put(&self, key: &str, permits: u32, now: Instant, retry_after: Duration) {
        let until = now.saturating_add(retry_after);
        let mut map = self.lock();
        if let Some(e) = map.get_mut(key) {
            // Keep the broader denial: the smaller permit count, and for it the later instant.
            if permits < e.1 || (permits == e.1 && until > e.0) || e.0 <= now {
                *e = (until, permits);
            }
            return;
        }
        if map.len() >= self.capacity {
            map.retain(|_, (u, _)| *u > now);
            if map.len() >= self.capacity {
                return; // full of live denials: this one is simply asked of Redis again
            }
        }
        map.insert(key.to_owned(), (until, permits));
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::tests::at;

    #[test]
    fn covers_larger_requests_until_retry_after() {
        let c = DenialCache::new(2);
        c.put("a", 3, at(0), Duration::from_millis(100));
        assert_eq!(c.get("a", 3, at(40)), Some(Duration::from_millis(60)));
        assert_eq!(c.get("a", 5, at(40)), Some(Duration::from_millis(60)));
        assert_eq!(c.get("a", 2, at(40)), None, "fewer permits may succeed");
        assert_eq!(c.get("b", 3, at(40)), None);
        assert_eq!(c.get("a", 3, at(100)), None, "expired at RetryAfter");
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn bounded_and_makes_room_from_expired_entries() {
        let c = DenialCache::new(2);
        c.put("a", 1, at(0), Duration::from_millis(10));
        c.put("b", 1, at(0), Duration::from_millis(100));
        c.put("c", 1, at(5), Duration::from_millis(100));
        assert_eq!(
            c.get("c", 1, at(6)),
            None,
            "full of live denials: not cached"
        );
        c.put("c", 1, at(20), Duration::from_millis(100)); // "a" has expired: room
        assert_eq!(c.get("c", 1, at(21)), Some(Duration::from_millis(99)));
        assert_eq!(c.len(), 2);
    }
}
