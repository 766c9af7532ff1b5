//! The `tracing` feature: one `DEBUG` event per rejection, `TRACE` events per wait.
#![cfg(feature = "tracing")]

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

use tollgate::{
    ConcurrencyLimiter, ConcurrencyOptions, Limiter, ManualClock, QueueOrder, Reason,
    TokenBucketLimiter, TokenBucketOptions,
};

/// One event as seen: level, target, and every field as text (`message` included).
#[derive(Debug, Clone)]
struct Seen {
    level: Level,
    target: String,
    fields: BTreeMap<String, String>,
}

/// A subscriber that records every event and no span.
#[derive(Default, Clone)]
struct Recorder(Arc<Mutex<Vec<Seen>>>);

impl Recorder {
    fn take(&self) -> Vec<Seen> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.to_string());
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Seen {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            fields,
        });
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn a_denial_emits_one_debug_event_with_its_reason_and_retry_after() {
    let rec = Recorder::default();
    let clock = ManualClock::new();
    let bucket = TokenBucketLimiter::with_clock(
        TokenBucketOptions::new(1, 1, Duration::from_secs(1)),
        &clock,
    )
    .unwrap();
    tracing::subscriber::with_default(rec.clone(), || {
        let lease = bucket.try_acquire(1).unwrap();
        assert!(
            rec.take().is_empty(),
            "a grant by try_acquire emits nothing"
        );
        let no = bucket.try_acquire(1).unwrap_err();
        assert_eq!(no.reason(), Reason::Exhausted);
        drop(lease);
    });
    let seen = rec.take();
    assert_eq!(seen.len(), 1, "{seen:?}");
    let e = &seen[0];
    assert_eq!(e.level, Level::DEBUG);
    assert_eq!(e.target, "tollgate");
    assert_eq!(e.fields["message"], "rejected");
    assert_eq!(e.fields["reason"], Reason::Exhausted.to_string());
    assert_eq!(e.fields["retry_after_ns"], "1000000000");
}

#[test]
fn a_wait_emits_queued_then_granted_and_a_full_queue_a_rejection() {
    let rec = Recorder::default();
    let sem =
        ConcurrencyLimiter::new(ConcurrencyOptions::new(1).with_queue(1, QueueOrder::OldestFirst))
            .unwrap();
    let mut cx = Context::from_waker(Waker::noop());
    tracing::subscriber::with_default(rec.clone(), || {
        let held = sem.try_acquire(1).unwrap();
        let mut waiting = pin!(sem.acquire(1));
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        // The queue (1 permit) is full: refused at once.
        let mut refused = pin!(sem.acquire(1));
        match refused.as_mut().poll(&mut cx) {
            Poll::Ready(Err(r)) => assert_eq!(r.reason(), Reason::QueueFull),
            other => panic!("expected QueueFull, got {other:?}"),
        }
        drop(held);
        match waiting.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(lease)) => drop(lease),
            other => panic!("expected a grant, got {other:?}"),
        }
    });
    let seen: Vec<_> = rec
        .take()
        .into_iter()
        .map(|e| {
            (
                e.level,
                e.fields["message"].clone(),
                e.fields.get("reason").cloned(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (Level::TRACE, "queued".to_owned(), None),
            (
                Level::DEBUG,
                "rejected".to_owned(),
                Some(Reason::QueueFull.to_string())
            ),
            (Level::TRACE, "granted".to_owned(), None),
        ]
    );
}
