//! [`ThrottledStream`]: a stream whose items, or their weights, are charged to a limiter.

use alloc::sync::Arc;
use core::pin::Pin;
use core::task::{Context, Poll};

use futures_core::{FusedStream, Stream};

use super::gate::{Chargeable, Gate};
use crate::lease::Rejection;
use crate::quota::Quota;

/// The weight of an unweighted stream's items: one permit each.
pub type One<T> = fn(&T) -> u32;

fn one<T>(_: &T) -> u32 {
    1
}

pin_project_lite::pin_project! {
    /// A stream whose items are charged to a limiter (feature `stream`): each item waits for
    /// its permits — one, or its weight — before it is yielded.
    ///
    /// An item is taken from the inner stream, weighed, charged (waiting as the limiter's
    /// `acquire` waits), then yielded as `Ok(item)`. An item weighing more than the limiter's
    /// largest request is charged in parts, one after another: never refused. Weight 0 is
    /// free. The permits stay taken: on a rate limiter they come back with time; on a
    /// concurrency limiter each part's permits go back as soon as it is granted (a stream
    /// cannot know when its consumer is done with an item).
    ///
    /// A refusal other than waiting (the limiter closed, its queue full) is yielded once as
    /// `Err(rejection)`, the item being charged is dropped, and the stream ends (`None` from
    /// then on: it is a [`FusedStream`]).
    ///
    /// Dropping the stream while an item waits takes nothing more: the wait is cancelled
    /// (parts of a heavy item already charged stay charged).
    ///
    /// ```
    /// use core::future::Future;
    /// use core::pin::pin;
    /// use core::task::{Context, Poll, Waker};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use futures_core::Stream;
    /// use tollgate::io::ThrottledStream;
    /// use tollgate::{Limiter, ManualClock, QueueOrder, Replenishing, TokenBucketLimiter, TokenBucketOptions};
    ///
    /// # struct Iter<I>(I);
    /// # impl<I: Iterator + Unpin> Stream for Iter<I> {
    /// #     type Item = I::Item;
    /// #     fn poll_next(mut self: core::pin::Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<I::Item>> {
    /// #         Poll::Ready(self.0.next())
    /// #     }
    /// # }
    /// let clock = Arc::new(ManualClock::new());
    /// // 10 permits a second, 10 at once.
    /// let opts = TokenBucketOptions::new(10, 10, Duration::from_secs(1))
    ///     .with_queue(100, QueueOrder::OldestFirst);
    /// let budget = Arc::new(TokenBucketLimiter::with_clock(opts, clock.clone()).unwrap());
    /// // Messages charged by their length.
    /// let messages = Iter(["hello", "tollgate", "!"].into_iter());
    /// let mut s = pin!(ThrottledStream::weighted(messages, budget.clone(), |m: &&str| m.len() as u32));
    /// let mut cx = Context::from_waker(Waker::noop());
    /// assert_eq!(s.as_mut().poll_next(&mut cx), Poll::Ready(Some(Ok("hello"))));
    /// assert_eq!(s.as_mut().poll_next(&mut cx), Poll::Pending); // 8 permits, 5 left
    /// clock.advance(Duration::from_secs(1));
    /// budget.replenish(); // what the process timer does with a real clock
    /// assert_eq!(s.as_mut().poll_next(&mut cx), Poll::Ready(Some(Ok("tollgate"))));
    /// assert_eq!(s.as_mut().poll_next(&mut cx), Poll::Ready(Some(Ok("!"))));
    /// assert_eq!(s.as_mut().poll_next(&mut cx), Poll::Ready(None));
    /// assert_eq!(budget.available_permits(), 1);
    /// ```
    #[must_use = "streams do nothing unless polled"]
    pub struct ThrottledStream<S: Stream, L: Chargeable, F> {
        #[pin]
        inner: S,
        gate: Gate<L>,
        weight: F,
        // The item being charged, and the permits it still owes.
        charging: Option<(S::Item, u32)>,
        done: bool,
    }
}

impl<S: Stream, L: Chargeable> ThrottledStream<S, L, One<S::Item>> {
    /// `stream`, each item charged one permit of `limiter`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::io::ThrottledStream;
    /// use tollgate::{GcraLimiter, GcraOptions};
    /// # struct Empty;
    /// # impl futures_core::Stream for Empty {
    /// #     type Item = u8;
    /// #     fn poll_next(self: core::pin::Pin<&mut Self>, _: &mut core::task::Context<'_>)
    /// #         -> core::task::Poll<Option<u8>> { core::task::Poll::Ready(None) }
    /// # }
    ///
    /// let per_second = Arc::new(GcraLimiter::new(GcraOptions::per_second(100)).unwrap());
    /// let _events = ThrottledStream::new(Empty, per_second); // 100 items a second
    /// ```
    pub fn new(stream: S, limiter: Arc<L>) -> Self
    where
        L: Quota,
    {
        Self::weighted(stream, limiter, one::<S::Item>)
    }
}

impl<S: Stream, L: Chargeable, F: FnMut(&S::Item) -> u32> ThrottledStream<S, L, F> {
    /// `stream`, each item charged `weight(&item)` permits of `limiter`, in parts of at most
    /// the limiter's limit ([`Quota::quota`]`().limit`, its largest request).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::io::ThrottledStream;
    /// use tollgate::{TokenBucketLimiter, TokenBucketOptions};
    /// # struct Empty;
    /// # impl futures_core::Stream for Empty {
    /// #     type Item = Vec<u8>;
    /// #     fn poll_next(self: core::pin::Pin<&mut Self>, _: &mut core::task::Context<'_>)
    /// #         -> core::task::Poll<Option<Vec<u8>>> { core::task::Poll::Ready(None) }
    /// # }
    ///
    /// let bytes = Arc::new(TokenBucketLimiter::new(TokenBucketOptions::per_second(1 << 20)).unwrap());
    /// let frames = ThrottledStream::weighted(Empty, bytes, |f: &Vec<u8>| f.len() as u32);
    /// assert_eq!(frames.max_chunk(), 1 << 20);
    /// ```
    pub fn weighted(stream: S, limiter: Arc<L>, weight: F) -> Self
    where
        L: Quota,
    {
        let limit = limiter.quota().limit;
        Self::weighted_with_max_chunk(stream, limiter, weight, limit)
    }

    /// As [`weighted`](Self::weighted), in parts of at most `max_chunk` permits (0 counts as
    /// 1), for a limiter of yours that does not report its [`Quota`] or for parts smaller than
    /// the limit; halved whenever the limiter answers
    /// [`Reason::ExceedsLimit`](crate::Reason::ExceedsLimit).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::io::ThrottledStream;
    /// use tollgate::NoopLimiter;
    /// # struct Empty;
    /// # impl futures_core::Stream for Empty {
    /// #     type Item = u32;
    /// #     fn poll_next(self: core::pin::Pin<&mut Self>, _: &mut core::task::Context<'_>)
    /// #         -> core::task::Poll<Option<u32>> { core::task::Poll::Ready(None) }
    /// # }
    ///
    /// let s = ThrottledStream::weighted_with_max_chunk(Empty, Arc::new(NoopLimiter::new()), |n: &u32| *n, 64);
    /// assert_eq!(s.max_chunk(), 64);
    /// ```
    pub fn weighted_with_max_chunk(stream: S, limiter: Arc<L>, weight: F, max_chunk: u64) -> Self {
        Self {
            inner: stream,
            gate: Gate::new(limiter, max_chunk),
            weight,
            charging: None,
            done: false,
        }
    }
}

impl<S: Stream, L: Chargeable, F> ThrottledStream<S, L, F> {
    /// The largest number of permits asked at once.
    pub fn max_chunk(&self) -> u32 {
        self.gate.max_chunk()
    }

    /// The limiter charged.
    pub fn limiter(&self) -> &Arc<L> {
        self.gate.limiter()
    }

    /// The inner stream.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner stream, mutably (items taken from it directly are not charged).
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner stream; an item being charged is dropped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Stream, L: Chargeable, F: FnMut(&S::Item) -> u32> Stream for ThrottledStream<S, L, F> {
    type Item = Result<S::Item, Rejection>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut this = self.project();
        if *this.done {
            return Poll::Ready(None);
        }
        if this.charging.is_none() {
            match this.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(item)) => {
                    let weight = (this.weight)(&item);
                    *this.charging = Some((item, weight));
                }
                Poll::Ready(None) => {
                    *this.done = true;
                    return Poll::Ready(None);
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        if let Some((_, owed)) = this.charging.as_mut() {
            while *owed > 0 {
                match this.gate.poll_grant(cx, *owed) {
                    Poll::Ready(Ok(granted)) => {
                        // The gate grants at most what was asked; the permits stay taken.
                        *owed = owed.saturating_sub(granted);
                        this.gate.settle(granted);
                    }
                    Poll::Ready(Err(rejection)) => {
                        *this.charging = None;
                        *this.done = true;
                        return Poll::Ready(Some(Err(rejection)));
                    }
                    Poll::Pending => return Poll::Pending,
                }
            }
        }
        Poll::Ready(this.charging.take().map(|(item, _)| Ok(item)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            return (0, Some(0));
        }
        let extra = usize::from(self.charging.is_some());
        let (low, high) = self.inner.size_hint();
        (
            low.saturating_add(extra),
            high.and_then(|h| h.checked_add(extra)),
        )
    }
}

impl<S: Stream, L: Chargeable, F: FnMut(&S::Item) -> u32> FusedStream for ThrottledStream<S, L, F> {
    fn is_terminated(&self) -> bool {
        self.done
    }
}

impl<S: Stream, L: Chargeable, F> core::fmt::Debug for ThrottledStream<S, L, F>
where
    S: core::fmt::Debug,
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ThrottledStream")
            .field("inner", &self.inner)
            .field("gate", &self.gate)
            .field("charging", &self.charging.as_ref().map(|(_, owed)| owed))
            .field("done", &self.done)
            .finish()
    }
}
