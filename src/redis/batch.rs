//! Group commit: concurrent decisions coalesced into script runs.
//!
//! A decision that finds no run in flight and nothing queued goes at once, alone — a lone
//! caller never waits for anyone. Otherwise it queues, and the queue (up to the batch size)
//! goes as one run, led by its first caller still waiting:
//! - at once when it holds a full batch;
//! - when the queue has **settled** (the adaptive flush delay): the first decision to queue
//!   while fewer than [`MAX_IN_FLIGHT`] runs are in flight becomes the queue's *settler*. It
//!   yields to the runtime (lets every task that is ready run, typically the callers a run
//!   that just returned has woken) and looks again, as long as the queue grew since its last
//!   look, and sends the queue as soon as a look finds no newcomer, [`QUIET`] looks in a row —
//!   or when it has settled for the flush delay ([`Batcher::new`]'s `delay`, the most a queued
//!   decision waits for others), whichever is first. So it waits only while callers keep
//!   coming: a second caller alone is sent after a look or two (microseconds, no timer), and a
//!   burst of callers woken together goes as one run;
//! - when a run in flight returns and no settler is at work: the run's leader, its answers
//!   sent, settles the queue (which built up while [`MAX_IN_FLIGHT`] runs were out) before it
//!   returns its own answer, so that the callers it has just answered, about to queue again,
//!   join the next run rather than wait for the one after. Without this, under saturation
//!   the queue went as soon as a run returned, and runs carried a third of the callers instead
//!   of half (bench, 32 callers: 10 decisions a run instead of 16).
//!
//! At most [`MAX_IN_FLIGHT`] runs are in flight (pipelined on the connection): beyond, the
//! queue waits for a run to return. Few runs in flight rather than more: when the client and
//! Redis run short of CPU, more and smaller runs would cost both sides more CPU per decision
//! than fewer large ones.
//!
//! Each entry keeps its own answer: its decision, or the key's own error. A failure of the whole
//! run (timeout, I/O, server error) is every entry's, each decided by the failure policy. If the
//! caller leading a run is cancelled (its future dropped) mid-call, the entries it carried learn
//! nothing: they are decided by the policy (their permits may or may not have been counted, as
//! after a timeout), and the queue passes on. A settler (queued or leader) cancelled mid-settle
//! ends the settle as if the queue had settled (it sends the queue if it may), and a caller cancelled after it was
//! handed a run to lead hands the run back: no state is left waiting on a caller that is gone.
//!
//! On a cluster, a run takes only the queued entries of the hash slot of its first (a script's
//! keys must share a slot); the others stay queued, in order, for the next run.
//!
//! Invariant (what keeps a queue from being stranded): while the queue is not empty, a settler
//! is at work or a run is in flight, and every run in flight hands the queue on when it ends.

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
const IN_FLIGHT: usize = 1;

/// The most runs in flight that the batcher may add to: beyond, the queue waits for a run to
/// return.
const MAX_IN_FLIGHT: usize = 2;

/// Looks in a row that find no newcomer for the queue to have settled: one, and a caller
/// that another worker thread is about to run, or that its run's leader has not woken yet,
/// would miss its batch.
const QUIET: u32 = 2;

/// A queued decision.
struct Pending {
    key: String,
    permits: u32,
    /// The key's hash slot, on a cluster.
    slot: Option<u16>,
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
    /// Decisions queued so far (ids; the settler's measure of arrivals).
    next_id: u64,
    queue: VecDeque<Pending>,
    /// The queued decision settling the queue, if any (see the module docs).
    settler: Option<u64>,
}

impl core::fmt::Debug for State {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("State")
            .field("in_flight", &self.in_flight)
            .field("queued", &self.queue.len())
            .field("settler", &self.settler)
            .finish()
    }
}

fn lock(b: &Batcher) -> std::sync::MutexGuard<'_, State> {
    b.state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Hands the queue on when the run it guards is over (or its leader is cancelled).
struct HandOff<'a>(&'a Batcher);

impl HandOff<'_> {
    /// The run is over: if decisions queued meanwhile and no settler is at work, this leader
    /// settles the queue (its own callers, just answered, are likely about to queue again)
    /// before it hands it on; else as on drop.
    async fn settle_then_hand_on(self) {
        let b = self.0;
        let settler = {
            let mut s = lock(b);
            if s.settler.is_none() && !s.queue.is_empty() && !b.delay.is_zero() {
                s.in_flight = s.in_flight.saturating_sub(1);
                let id = s.next_id;
                s.next_id += 1;
                s.settler = Some(id);
                Some(Settler { batcher: b, id })
            } else {
                None
            }
        };
        match settler {
            Some(settler) => {
                core::mem::forget(self);
                settler.settle().await;
            }
            None => drop(self),
        }
    }
}

impl Drop for HandOff<'_> {
    fn drop(&mut self) {
        let mut s = lock(self.0);
        s.in_flight = s.in_flight.saturating_sub(1);
        self.0.hand_on(&mut s);
    }
}

/// The settler's role: dropped — the queue settled, the flush delay passed, or the settler was
/// cancelled — it sends the queue (as far as [`MAX_IN_FLIGHT`] allows), unless a run took the
/// settler's own entry meanwhile (then it is no longer the settler).
struct Settler<'a> {
    batcher: &'a Batcher,
    id: u64,
}

impl Drop for Settler<'_> {
    fn drop(&mut self) {
        let mut s = lock(self.batcher);
        if s.settler == Some(self.id) {
            s.settler = None;
            self.batcher.drain(&mut s);
        }
    }
}

impl Settler<'_> {
    /// Yields to the runtime while callers keep queueing (see the module docs).
    async fn settle(self) {
        let b = self.batcher;
        let start = Instant::now();
        let mut seen = lock(b).next_id;
        let mut quiet = 0;
        while start.elapsed() < b.delay {
            YieldOnce(false).await;
            let s = lock(b);
            if s.settler != Some(self.id) {
                return;
            }
            if s.next_id == seen {
                quiet += 1;
                if quiet >= QUIET {
                    return;
                }
            } else {
                seen = s.next_id;
                quiet = 0;
            }
        }
    }
}

/// Pending once, waking itself: the task goes to the back of the runtime's queue, behind every
/// task ready to run.
struct YieldOnce(bool);

impl core::future::Future for YieldOnce {
    type Output = ();
    fn poll(
        mut self: core::pin::Pin<&mut Self>,
        cx: &mut core::task::Context<'_>,
    ) -> core::task::Poll<()> {
        if self.0 {
            return core::task::Poll::Ready(());
        }
        self.0 = true;
        cx.waker().wake_by_ref();
        core::task::Poll::Pending
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
    /// The message; `None` if the sender was dropped.
    async fn recv(&mut self) -> Option<Msg> {
        let msg = self.rx.as_mut()?.await.ok();
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
            let mut s = lock(b);
            s.in_flight = s.in_flight.saturating_sub(1);
            for p in rest.into_iter().rev() {
                s.queue.push_front(p);
            }
            b.hand_on(&mut s);
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
    /// a queue settling for at most `delay`; `by_slot` on a cluster.
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
    /// nothing if every queued caller gave up. A settler whose entry goes is a settler no more.
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
            let settler_goes = s
                .settler
                .is_some_and(|id| first.id == id || batch.iter().any(|p| p.id == id));
            match first.tx.send(Msg::Lead(batch)) {
                Ok(()) => {
                    s.in_flight += 1;
                    if settler_goes {
                        s.settler = None;
                    }
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

    /// Sends runs from the queue while it holds any and fewer than [`MAX_IN_FLIGHT`] are out.
    fn drain(&self, s: &mut State) {
        while s.in_flight < MAX_IN_FLIGHT && !s.queue.is_empty() {
            self.flush(s);
        }
    }

    /// A run ended (or went back unled): the queue goes now unless a settler is at work.
    fn hand_on(&self, s: &mut State) {
        if s.settler.is_none() {
            self.drain(s);
        }
    }
}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> RedisLimiter<C> {
    /// Decides `key` in a script run shared with the decisions queued meanwhile.
    pub(super) async fn call_batched(&self, batcher: &Batcher, key: &str, permits: u32) -> Answer {
        let queued = {
            let mut s = lock(batcher);
            if s.in_flight < IN_FLIGHT && s.queue.is_empty() {
                s.in_flight += 1;
                None
            } else {
                let (tx, rx) = oneshot::channel();
                let id = s.next_id;
                s.next_id += 1;
                s.queue.push_back(Pending {
                    key: key.to_owned(),
                    permits,
                    slot: batcher.by_slot.then(|| slot(key)),
                    id,
                    tx,
                });
                let mut settle = false;
                if s.in_flight < MAX_IN_FLIGHT {
                    if s.queue.len() >= batcher.max {
                        batcher.flush(&mut s);
                    } else if s.settler.is_none() {
                        if batcher.delay.is_zero() {
                            batcher.flush(&mut s);
                        } else {
                            s.settler = Some(id);
                            settle = true;
                        }
                    }
                }
                Some((rx, id, settle))
            }
        };
        let others = match queued {
            None => Vec::new(),
            Some((rx, id, settle)) => {
                let mut waiting = Waiting {
                    rx: Some(rx),
                    batcher,
                };
                if settle {
                    Settler { batcher, id }.settle().await;
                }
                match waiting.recv().await {
                    Some(Msg::Done(answer)) => return answer,
                    Some(Msg::Lead(others)) => others,
                    // The caller leading our run was cancelled: nothing is known.
                    None => return Err(CallError::Cancelled),
                }
            }
        };
        let next = HandOff(batcher);
        let answer = self.lead(key, permits, others).await;
        next.settle_then_hand_on().await;
        answer
    }

    /// One run for this caller's entry and `others`; their answers go to them.
    async fn lead(&self, key: &str, permits: u32, mut others: Vec<Pending>) -> Answer {
        bump(&self.inner.counts.runs);
        if others.is_empty() {
            return self.call(key, permits).await;
        }
        let mut entries = Vec::with_capacity(others.len() + 1);
        entries.push((key.to_owned(), permits));
        entries.extend(
            others
                .iter_mut()
                .map(|p| (core::mem::take(&mut p.key), p.permits)),
        );
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
