//! Group commit: concurrent decisions coalesced into one script run.
//!
//! While a call is in flight, new decisions queue; when it returns, the queue (up to the batch
//! size) goes as the next call, led by the first caller still waiting. A lone caller never
//! waits for anyone, and under load batches form by themselves: one round trip and one script
//! run decide many `(key, permits)` pairs, in order.
//!
//! Each entry keeps its own answer: its decision, or the key's own error. A failure of the whole
//! call (timeout, I/O, server error) is every entry's, each decided by the failure policy. If the
//! caller leading a call is cancelled (its future dropped) mid-call, the entries it carried learn
//! nothing: they are decided by the policy (their permits may or may not have been counted, as
//! after a timeout), and the queue passes to the next caller.

use std::sync::{Mutex, PoisonError};

use ::redis::aio::ConnectionLike;
use tokio::sync::oneshot;

use super::decision::CallError;
use super::stats::bump;
use super::{RedisDecision, RedisLimiter};

/// A decision's answer from a call.
pub(super) type Answer = Result<RedisDecision, CallError>;

/// A queued decision.
struct Pending {
    key: String,
    permits: u32,
    tx: oneshot::Sender<Msg>,
}

/// What a queued caller hears.
enum Msg {
    /// Its answer, from a call another caller led.
    Done(Answer),
    /// Lead the next call: its own entry first, then these.
    Lead(Vec<Pending>),
}

/// The queue of one limiter (one connection).
#[derive(Debug)]
pub(super) struct Batcher {
    max: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    busy: bool,
    queue: Vec<Pending>,
}

impl core::fmt::Debug for State {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("State")
            .field("busy", &self.busy)
            .field("queued", &self.queue.len())
            .finish()
    }
}

/// Hands the queue on when the call it guards is over (or its leader is cancelled).
struct HandOff<'a>(&'a Batcher);

impl Drop for HandOff<'_> {
    fn drop(&mut self) {
        self.0.hand_off();
    }
}

impl Batcher {
    /// At most `max` decisions per script run (at least 2; 1 means no batching, no batcher).
    pub(super) fn new(max: usize) -> Self {
        Self {
            max: max.max(2),
            state: Mutex::new(State::default()),
        }
    }

    /// The call in flight is over: the queue (up to `max`) goes to its first caller still
    /// waiting, who leads the next call; with nobody waiting, the next caller leads at once.
    fn hand_off(&self) {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while !s.queue.is_empty() {
            let take = s.queue.len().min(self.max);
            let mut batch: Vec<Pending> = s.queue.drain(..take).collect();
            let first = batch.remove(0);
            match first.tx.send(Msg::Lead(batch)) {
                Ok(()) => return,
                // That caller gave up: the rest go back to the front, in order.
                Err(Msg::Lead(rest)) => {
                    s.queue.splice(0..0, rest);
                }
                Err(Msg::Done(_)) => {}
            }
        }
        s.busy = false;
    }
}

impl<C: ConnectionLike + Clone + Send + Sync + 'static> RedisLimiter<C> {
    /// Decides `key` in a script run shared with the decisions queued meanwhile.
    pub(super) async fn call_batched(&self, batcher: &Batcher, key: &str, permits: u32) -> Answer {
        let rx = {
            let mut s = batcher.state.lock().unwrap_or_else(PoisonError::into_inner);
            if s.busy {
                let (tx, rx) = oneshot::channel();
                s.queue.push(Pending {
                    key: key.to_owned(),
                    permits,
                    tx,
                });
                Some(rx)
            } else {
                s.busy = true;
                None
            }
        };
        let others = match rx {
            None => Vec::new(),
            Some(rx) => match rx.await {
                Ok(Msg::Done(answer)) => return answer,
                Ok(Msg::Lead(others)) => others,
                // The caller leading our call was cancelled: nothing is known.
                Err(_) => return Err(CallError::Cancelled),
            },
        };
        let _next = HandOff(batcher);
        self.lead(key, permits, others).await
    }

    /// One call for this caller's entry and `others`; their answers go to them.
    async fn lead(&self, key: &str, permits: u32, others: Vec<Pending>) -> Answer {
        if others.is_empty() {
            bump(&self.inner.counts.runs);
            return self.call(key, permits).await;
        }
        let mut entries = Vec::with_capacity(others.len() + 1);
        entries.push((key.to_owned(), permits));
        entries.extend(others.iter().map(|p| (p.key.clone(), p.permits)));
        bump(&self.inner.counts.runs);
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
