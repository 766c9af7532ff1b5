//! Group commit: concurrent decisions coalesced into script runs.
//!
//! A decision that finds fewer than [`IN_FLIGHT`] runs in flight on the connection goes at
//! once, alone — a lone caller never waits for anyone. Otherwise it queues, and the queue (up
//! to the batch size) goes as one run, led by its first caller still waiting, as soon as one of
//! these happens:
//! - the queue holds a full batch;
//! - a run in flight returns (group commit: under load, batches form by themselves);
//! - the oldest queued decision has waited the flush delay: checked by every decision that
//!   queues, and by a timer of the oldest's own (which the runtime may round up to its tick,
//!   1 ms on tokio) for when no other decision comes.
//!
//! The first and the last send a run alongside the one in flight (pipelined on the
//! connection), up to [`MAX_IN_FLIGHT`] runs: so a queued decision waits about the delay at
//! most before its run is sent, unless two runs are already in flight, when it waits for one of
//! them to return. Few runs in flight rather than more: when the client and Redis run short of
//! CPU, runs slow down, the delay would fire on every queue and cut it into small runs, each
//! costing both sides more CPU per decision than one large run — on the bench's 2-core machine,
//! two runs in flight at most made batches of 8-16 where unbounded runs made 2-11.
//!
//! Each entry keeps its own answer: its decision, or the key's own error. A failure of the whole
//! run (timeout, I/O, server error) is every entry's, each decided by the failure policy. If the
//! caller leading a run is cancelled (its future dropped) mid-call, the entries it carried learn
//! nothing: they are decided by the policy (their permits may or may not have been counted, as
//! after a timeout), and the queue passes to the next caller.
//!
//! On a cluster, a run takes only the queued entries of the hash slot of its first (a script's
//! keys must share a slot); the others stay queued, in order, for the next run.

use core::time::Duration;
use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use ::redis::aio::ConnectionLike;
use tokio::sync::oneshot;

use super::decision::CallError;
use super::stats::bump;
use super::{RedisDecision, RedisLimiter};

/// A decision's answer from a call.
pub(super) type Answer = Result<RedisDecision, CallError>;

/// The runs in flight on one limiter's connection from which decisions queue.
pub(super) const IN_FLIGHT: usize = 1;

/// The most runs in flight that a full batch or the flush delay may add to: beyond, the queue
/// waits for a run to return.
pub(super) const MAX_IN_FLIGHT: usize = 2;

/// A queued decision.
struct Pending {
    key: String,
    permits: u32,
    /// The key's hash slot, on a cluster.
    slot: Option<u16>,
    since: Instant,
    id: u64,
    tx: oneshot::Sender<Msg>,
}

/// What a queued caller hears.
enum Msg {
    /// Its answer, from a run another caller led.
    Done(Answer),
    /// Lead the next run: its own entry first, then these.
    Lead(Vec<Pending>),
}

/// The queue of one limiter (one connection).
#[derive(Debug)]
pub(super) struct Batcher {
    max: usize,
    delay: Duration,
    /// Group runs by hash slot (a cluster connection).
    by_slot: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    in_flight: usize,
    next_id: u64,
    queue: VecDeque<Pending>,
}

impl core::fmt::Debug for State {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("State")
            .field("in_flight", &self.in_flight)
            .field("queued", &self.queue.len())
            .finish()
    }
}

/// Hands the queue on when the run it guards is over (or its leader is cancelled).
struct HandOff<'a>(&'a Batcher);

impl Drop for HandOff<'_> {
    fn drop(&mut self) {
        let mut s = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.in_flight = s.in_flight.saturating_sub(1);
        if !s.queue.is_empty() {
            self.0.flush(&mut s);
        }
    }
}

/// A queued caller's end of its channel. Dropped before its message came (the caller was
/// cancelled), it closes the channel, and if a run was handed to it meanwhile, hands that run's
/// entries back to the queue (no run goes unled, and the count in flight stays right).
struct Waiting<'a> {
    rx: Option<oneshot::Receiver<Msg>>,
    batcher: &'a Batcher,
}

impl Waiting<'_> {
    /// The message; the oldest queued (`head`) also sends the queue when the delay has passed
    /// and it is still first. `None` if the sender was dropped.
    async fn recv(&mut self, head: bool, id: u64) -> Option<Msg> {
        let rx = self.rx.as_mut()?;
        let msg = if head {
            tokio::select! {
                msg = &mut *rx => msg.ok(),
                () = tokio::time::sleep(self.batcher.delay) => {
                    {
                        let b = self.batcher;
                        let mut s = b.state.lock().unwrap_or_else(PoisonError::into_inner);
                        if s.in_flight < MAX_IN_FLIGHT && s.queue.front().is_some_and(|p| p.id == id) {
                            b.flush(&mut s);
                        }
                    }
                    rx.await.ok()
                }
            }
        } else {
            rx.await.ok()
        };
        self.rx = None;
        msg
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let Some(mut rx) = self.rx.take() else {
            return;
        };
        rx.close();
        if let Ok(Msg::Lead(rest)) = rx.try_recv() {
            let b = self.batcher;
            let mut s = b.state.lock().unwrap_or_else(PoisonError::into_inner);
            s.in_flight = s.in_flight.saturating_sub(1);
            for p in rest.into_iter().rev() {
                s.queue.push_front(p);
            }
            if !s.queue.is_empty() {
                b.flush(&mut s);
            }
        }
    }
}

/// The hash slot of a key (CRC16 of its hash tag, mod 16384), as Redis Cluster computes it.
pub(super) fn slot(key: &str) -> u16 {
    let b = key.as_bytes();
    let tag = b
        .iter()
        .position(|&c| c == b'{')
        .and_then(|open| {
            let rest = &b[open + 1..];
            rest.iter()
                .position(|&c| c == b'}')
                .filter(|&len| len > 0)
                .map(|len| &rest[..len])
        })
        .unwrap_or(b);
    let mut crc: u16 = 0;
    for &byte in tag {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc & 0x3fff
}

impl Batcher {
    /// At most `max` decisions per script run (at least 2; 1 means no batching, no batcher),
    /// queued at most about `delay` while runs are in flight; `by_slot` on a cluster.
    pub(super) fn new(max: usize, delay: Duration, by_slot: bool) -> Self {
        Self {
            max: max.max(2),
            delay,
            by_slot,
            state: Mutex::new(State::default()),
        }
    }

    /// Sends the queue's first batch (up to `max`; on a cluster, the first entry's slot only)
    /// to its first caller still waiting, who leads the run: one more run in flight. Does
    /// nothing if every queued caller gave up.
    fn flush(&self, s: &mut State) {
        while let Some(first) = s.queue.pop_front() {
            let mut batch = Vec::new();
            if self.by_slot {
                let mut i = 0;
                while i < s.queue.len() && batch.len() + 1 < self.max {
                    if s.queue[i].slot == first.slot {
                        if let Some(p) = s.queue.remove(i) {
                            batch.push(p);
                        }
                    } else {
                        i += 1;
                    }
                }
            } else {
                let take = s.queue.len().min(self.max - 1);
                batch.extend(s.queue.drain(..take));
            }
            match first.tx.send(Msg::Lead(batch)) {
                Ok(()) => {
                    s.in_flight += 1;
                    return;
                }
                // That caller gave up: the rest go back to the front, in order.
                Err(Msg::Lead(rest)) => {
                    for p in rest.into_iter().rev() {
                        s.queue.push_front(p);
                    }
                }
                Err(Msg::Done(_)) => {}
            }
        }
    }

    /// Whether the queue should go now: a full batch, or its oldest has waited the delay, and
    /// fewer than [`MAX_IN_FLIGHT`] runs in flight.
    fn due(&self, s: &State) -> bool {
        s.in_flight < MAX_IN_FLIGHT
            && (s.queue.len() >= self.max
                || s.queue
                    .front()
                    .is_some_and(|p| p.since.elapsed() >= self.delay))
    }
}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> RedisLimiter<C> {
    /// Decides `key` in a script run shared with the decisions queued meanwhile.
    pub(super) async fn call_batched(&self, batcher: &Batcher, key: &str, permits: u32) -> Answer {
        let queued = {
            let mut s = batcher.state.lock().unwrap_or_else(PoisonError::into_inner);
            if s.in_flight < IN_FLIGHT && s.queue.is_empty() {
                s.in_flight += 1;
                None
            } else {
                let (tx, rx) = oneshot::channel();
                let id = s.next_id;
                s.next_id += 1;
                let head = s.queue.is_empty();
                s.queue.push_back(Pending {
                    key: key.to_owned(),
                    permits,
                    slot: batcher.by_slot.then(|| slot(key)),
                    since: Instant::now(),
                    id,
                    tx,
                });
                if batcher.due(&s) {
                    batcher.flush(&mut s);
                }
                Some((rx, id, head))
            }
        };
        let others = match queued {
            None => Vec::new(),
            Some((rx, id, head)) => {
                let mut waiting = Waiting {
                    rx: Some(rx),
                    batcher,
                };
                match waiting.recv(head, id).await {
                    Some(Msg::Done(answer)) => return answer,
                    Some(Msg::Lead(others)) => others,
                    // The caller leading our run was cancelled: nothing is known.
                    None => return Err(CallError::Cancelled),
                }
            }
        };
        let _next = HandOff(batcher);
        self.lead(key, permits, others).await
    }

    /// One run for this caller's entry and `others`; their answers go to them.
    async fn lead(&self, key: &str, permits: u32, others: Vec<Pending>) -> Answer {
        bump(&self.inner.counts.runs);
        if others.is_empty() {
            return self.call(key, permits).await;
        }
        let mut entries = Vec::with_capacity(others.len() + 1);
        entries.push((key.to_owned(), permits));
        entries.extend(others.iter().map(|p| (p.key.clone(), p.permits)));
        match self.call_many(&entries, false).await {
            Ok(answers) => {
                let mut answers = answers.into_iter();
                let own = answers.next().unwrap_or(Err(CallError::Server));
                for (p, a) in others.into_iter().zip(answers) {
                    let _ = p.tx.send(Msg::Done(a));
                }
                own
            }
            Err(e) => {
                for p in others {
                    let _ = p.tx.send(Msg::Done(Err(e)));
                }
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::slot;

    #[test]
    fn slots_are_redis_cluster_s() {
        // `CLUSTER KEYSLOT` of these keys.
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("api:{user-7}:fw60000000"), slot("user-7"));
        assert_eq!(slot("{}x"), slot("{}x")); // an empty tag: the whole key
        assert_eq!(slot("123456789"), 0x31c3 & 0x3fff);
    }
}
