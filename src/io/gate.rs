//! The state every adapter keeps between polls: the lease it holds, or the acquisition it waits
//! on, and the largest request it makes of the limiter.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::future::Future;
use core::pin::{pin, Pin};
use core::task::{Context, Poll, Waker};

use crate::lease::{Lease, Reason, Rejection, Release};
use crate::limiter::AcquireAsync;

/// A waiting acquisition that owns its handle to the limiter; it resolves to the lease's parts.
type Waiting = Pin<Box<dyn Future<Output = Result<Held, Rejection>> + Send>>;

/// A lease of the gate's limiter, taken apart (the limiter is the gate's, so the lease need not
/// hold a handle to it): its permits, the limiter's stamp, and whether it returns its permits
/// when it ends (a concurrency limiter's).
#[derive(Clone, Copy, Debug)]
#[doc(hidden)]
pub struct Held {
    permits: u32,
    stamp: u64,
    returns: bool,
    /// The permits the transfers under it used so far (a reserving gate's lease covers
    /// several).
    used: u32,
}

impl Held {
    fn of(lease: Lease<'_>) -> Self {
        let (permits, stamp, returns) = lease.into_parts();
        Self {
            permits,
            stamp,
            returns,
            used: 0,
        }
    }
}

/// The bounds a limiter meets to be charged by the adapters: a waiting, shareable limiter
/// whose waits can be held across polls and moved between threads.
///
/// Implemented for every such limiter: the built-in ones (on a `Send + Sync` clock),
/// [`NoopLimiter`](crate::NoopLimiter), and any limiter of yours that implements
/// [`AcquireAsync`] and [`Release`] with a `Send` future. As for
/// [`AcquireOwned`](crate::AcquireOwned), the limiter is taken to be what its leases release
/// and settle through: an adapter keeps a lease's count and stamp, not the lease, and settles
/// and releases it through the limiter.
///
/// ```
/// use tollgate::io::Chargeable;
/// use tollgate::{GcraLimiter, NoopLimiter, StdClock, TokenBucketLimiter};
///
/// fn chargeable<L: Chargeable>() {}
/// chargeable::<TokenBucketLimiter<StdClock>>();
/// chargeable::<GcraLimiter<StdClock>>();
/// chargeable::<NoopLimiter>();
/// ```
pub trait Chargeable: AcquireAsync + Release + Send + Sync + 'static {
    /// The limiter's waiting acquisition of `permits`, owning a handle to it (boxed, so that an
    /// adapter can keep it across polls).
    #[doc(hidden)]
    fn wait_owned(self: Arc<Self>, permits: u32) -> Waiting;
}

impl<L> Chargeable for L
where
    L: AcquireAsync + Release + Send + Sync + 'static,
    for<'a> L::Acquire<'a>: Send,
{
    fn wait_owned(self: Arc<Self>, permits: u32) -> Waiting {
        Box::pin(async move { Ok(Held::of(self.acquire(permits).await?)) })
    }
}

/// One direction's charging state: the limiter, the largest request made of it, and the lease
/// held (or the acquisition waited on) for the transfer in progress.
pub(crate) struct Gate<L: Chargeable> {
    limiter: Arc<L>,
    /// The largest request made at once (at least 1): the limiter's limit when known, halved
    /// whenever the limiter answers [`Reason::ExceedsLimit`].
    max_chunk: u32,
    /// The least request made at once (0: none), whose permits serve the transfers that
    /// follow until they are used up ([`set_reservation`](Self::set_reservation)).
    reservation: u32,
    /// Permits granted and not yet settled: kept while the inner transfer is pending.
    lease: Option<Held>,
    /// The acquisition under way, when the permits were not there at once.
    waiting: Option<Waiting>,
}

impl<L: Chargeable> Gate<L> {
    /// A gate on `limiter` asking at most `max_chunk` permits at once (0 counts as 1).
    pub(crate) fn new(limiter: Arc<L>, max_chunk: u64) -> Self {
        Self {
            limiter,
            max_chunk: max_chunk.clamp(1, u64::from(u32::MAX)) as u32,
            reservation: 0,
            lease: None,
            waiting: None,
        }
    }

    /// Asks at least `bytes` permits at once (within its largest request),
    /// and using them up over the transfers that follow before it asks again: one limiter
    /// call for many small transfers, the permits charged before their bytes move (what is
    /// left when the stream ends, fails or is dropped goes back, as a settle gives it). 0
    /// turns it off.
    #[cfg(any(feature = "tokio-io", feature = "futures-io"))]
    pub(crate) fn set_reservation(&mut self, bytes: u32) {
        self.reservation = bytes;
    }

    /// The least request made at once (0: each transfer asks for its own size).
    #[cfg(any(feature = "tokio-io", feature = "futures-io"))]
    pub(crate) fn reservation(&self) -> u32 {
        self.reservation
    }

    pub(crate) fn limiter(&self) -> &Arc<L> {
        &self.limiter
    }

    pub(crate) fn max_chunk(&self) -> u32 {
        self.max_chunk
    }

    /// Permits for a transfer of up to `want` (at least 1): what is left of the lease already
    /// held, whatever its size, or a new one of `max(want, reservation)` within `max_chunk`.
    /// Resolves to the permits left to use; a refusal other than waiting (closed, queue full,
    /// evicted, timed out) is the error.
    pub(crate) fn poll_grant(
        &mut self,
        cx: &mut Context<'_>,
        want: u32,
    ) -> Poll<Result<u32, Rejection>> {
        loop {
            if let Some(lease) = &self.lease {
                return Poll::Ready(Ok(lease.permits - lease.used));
            }
            let n = want.max(self.reservation).clamp(1, self.max_chunk);
            let granted = match &mut self.waiting {
                Some(waiting) => {
                    let polled = waiting.as_mut().poll(cx);
                    if polled.is_ready() {
                        self.waiting = None;
                    }
                    polled
                }
                None => self.acquire_at_once(n),
            };
            match granted {
                Poll::Pending if self.waiting.is_none() => {
                    // Not there at once: wait with a future that owns its handle.
                    self.waiting = Some(self.limiter.clone().wait_owned(n));
                }
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(lease)) => self.lease = Some(lease),
                Poll::Ready(Err(r)) if r.reason() == Reason::ExceedsLimit && n > 1 => {
                    // Larger than the limiter's largest request: ask half as much from now on.
                    self.max_chunk = n / 2;
                }
                Poll::Ready(Err(r)) => return Poll::Ready(Err(r)),
            }
        }
    }

    /// One charged transfer of up to `want` bytes: permits for it
    /// ([`poll_grant`](Self::poll_grant); a refusal is the I/O error), then `transfer` of at
    /// most that many bytes, which answers the bytes moved ([`used`](Self::used) of the
    /// lease). The lease is kept for the next poll while `transfer` is pending: the charging
    /// common to every `AsyncRead` and `AsyncWrite`.
    #[cfg(any(feature = "tokio-io", feature = "futures-io"))]
    pub(crate) fn poll_transfer(
        &mut self,
        cx: &mut Context<'_>,
        want: usize,
        transfer: impl FnOnce(&mut Context<'_>, usize) -> Poll<std::io::Result<usize>>,
    ) -> Poll<std::io::Result<usize>> {
        let granted = match self.poll_grant(cx, u32::try_from(want).unwrap_or(u32::MAX)) {
            Poll::Ready(Ok(n)) => n,
            Poll::Ready(Err(r)) => return Poll::Ready(Err(super::io_error(r))),
            Poll::Pending => return Poll::Pending,
        };
        match transfer(cx, want.min(granted as usize)) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Ok(n)) => {
                self.used(u32::try_from(n).unwrap_or(u32::MAX));
                Poll::Ready(Ok(n))
            }
            Poll::Ready(Err(e)) => {
                self.settle(0);
                Poll::Ready(Err(e))
            }
        }
    }

    /// The fast path: the decision without a future ([`AcquireAsync::acquire_now`]), else
    /// the limiter's own future, polled once in place (no allocation, no handle taken).
    /// Pending means the permits are not there now; the future is dropped, which takes
    /// nothing, and the caller queues a boxed one at once, in the same place: at the tail of
    /// an oldest-first queue, at the head of a newest-first one (where the room the dropped
    /// waiter made means no second eviction). A full oldest-first queue answers `QueueFull`
    /// on this first poll.
    fn acquire_at_once(&self, n: u32) -> Poll<Result<Held, Rejection>> {
        // Decided without a future where the limiter can (a grant: the common case).
        if let Some(decided) = self.limiter.acquire_now(n) {
            return Poll::Ready(decided.map(Held::of));
        }
        let acquire = pin!(self.limiter.acquire(n));
        acquire
            .poll(&mut Context::from_waker(Waker::noop()))
            .map_ok(Held::of)
    }

    /// A transfer under the lease held moved `moved` bytes: without a reservation the lease
    /// ends, settled to them; with one it ends only once used up, or at the end of the stream
    /// (`moved == 0`), settled to all its transfers moved.
    #[cfg(any(feature = "tokio-io", feature = "futures-io"))]
    fn used(&mut self, moved: u32) {
        if let Some(held) = &mut self.lease {
            held.used = held.used.saturating_add(moved).min(held.permits);
            if self.reservation == 0 || moved == 0 || held.used == held.permits {
                self.settle(0);
            }
        }
    }

    /// Ends the lease held: it is settled to what its transfers used plus `used` more
    /// permits (never more than it holds), as [`Lease::settle`] does, and ends (a
    /// concurrency limiter's permits go back). A limiter that cannot settle keeps the whole
    /// lease charged.
    pub(crate) fn settle(&mut self, used: u32) {
        if let Some(held) = self.lease.take() {
            let used = held.used.saturating_add(used).min(held.permits);
            let kept = if used == held.permits
                || self
                    .limiter
                    .settle(crate::lease::Settlement::new(
                        held.permits,
                        used,
                        held.stamp,
                    ))
                    .is_ok()
            {
                used
            } else {
                held.permits
            };
            if held.returns {
                self.limiter.release_stamped(kept, held.stamp);
            }
        }
    }
}

/// A lease still held when the adapter goes away: the permits no transfer used go back.
impl<L: Chargeable> Drop for Gate<L> {
    fn drop(&mut self) {
        self.settle(0);
    }
}

impl<L: Chargeable> core::fmt::Debug for Gate<L> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Gate")
            .field("max_chunk", &self.max_chunk)
            .field("reservation", &self.reservation)
            .field("lease", &self.lease)
            .field("waiting", &self.waiting.is_some())
            .finish()
    }
}
