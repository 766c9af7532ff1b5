//! [`ThrottledReader`]: bytes read, charged to a limiter.

use alloc::sync::Arc;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::gate::{Chargeable, Gate};
use crate::quota::Quota;

pin_project_lite::pin_project! {
    /// A reader whose bytes are charged to a limiter, one permit a byte (features `tokio-io`
    /// and `futures-io`: it implements tokio's and `futures-io`'s `AsyncRead`).
    ///
    /// Each read reserves permits for `min(buffer room, largest request)` bytes, waiting for
    /// them as the limiter's `acquire` waits, then reads into at most that many bytes and
    /// settles the lease to the bytes actually read: a short read, an end of file (0 bytes) or
    /// an error gives the rest back (see [`Lease::settle`](crate::Lease::settle); a limiter
    /// that cannot settle keeps the whole reservation charged). While the inner reader is
    /// pending, the reservation is kept for the next poll, not taken again. A read larger than
    /// the limiter's largest request is cut to it: never refused.
    ///
    /// The limiter is shared (`Arc`): one budget can cover many readers and writers. A refusal
    /// other than waiting (the limiter closed, its queue full) is an `std::io::Error` of kind
    /// `Other` whose source is the [`Rejection`](crate::Rejection) (see
    /// [`rejection`](super::rejection)).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use tokio::io::AsyncReadExt;
    /// use tollgate::io::ThrottledReader;
    /// use tollgate::{Limiter, TokenBucketLimiter, TokenBucketOptions};
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// // 64 KiB at once, then 1 MiB/s.
    /// let opts = TokenBucketOptions::per(Duration::from_millis(62_500), 65_536);
    /// let budget = Arc::new(TokenBucketLimiter::new(opts).unwrap());
    /// let data = vec![7u8; 10_000];
    /// let mut reader = ThrottledReader::new(&data[..], budget.clone());
    /// let mut out = Vec::new();
    /// reader.read_to_end(&mut out).await.unwrap();
    /// assert_eq!(out, data);
    /// assert_eq!(budget.available_permits(), 65_536 - 10_000); // the bytes read, no more
    /// # });
    /// ```
    #[derive(Debug)]
    pub struct ThrottledReader<R, L: Chargeable> {
        #[pin]
        inner: R,
        gate: Gate<L>,
    }
}

impl<R, L: Chargeable> ThrottledReader<R, L> {
    /// `inner`, charged to `limiter`, asking at most the limiter's limit
    /// ([`Quota::quota`]`().limit`, its largest request) at once.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::io::ThrottledReader;
    /// use tollgate::{GcraLimiter, GcraOptions};
    ///
    /// let gcra = Arc::new(GcraLimiter::new(GcraOptions::per_second(1_000_000).with_burst(4096)).unwrap());
    /// let reader = ThrottledReader::new(&b"hello"[..], gcra);
    /// assert_eq!(reader.max_chunk(), 4096);
    /// ```
    pub fn new(inner: R, limiter: Arc<L>) -> Self
    where
        L: Quota,
    {
        let limit = limiter.quota().limit;
        Self::with_max_chunk(inner, limiter, limit)
    }

    /// `inner`, charged to `limiter`, asking at most `max_chunk` permits at once (0 counts as
    /// 1): for a limiter of yours that does not report its [`Quota`], or for parts smaller than
    /// the limit (a finer interleaving of readers sharing it). Too large a value is
    /// harmless: when the limiter answers
    /// [`Reason::ExceedsLimit`](crate::Reason::ExceedsLimit), the reader asks half as much,
    /// and keeps the smaller size.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::io::ThrottledReader;
    /// use tollgate::NoopLimiter;
    ///
    /// let reader = ThrottledReader::with_max_chunk(&b"hello"[..], Arc::new(NoopLimiter::new()), 1024);
    /// assert_eq!(reader.max_chunk(), 1024);
    /// ```
    pub fn with_max_chunk(inner: R, limiter: Arc<L>, max_chunk: u64) -> Self {
        Self {
            inner,
            gate: Gate::new(limiter, max_chunk),
        }
    }

    /// The largest number of bytes charged (and read) at once.
    pub fn max_chunk(&self) -> u32 {
        self.gate.max_chunk()
    }

    /// The same reader, asking the limiter for at least `bytes` permits at once (within
    /// [`max_chunk`](Self::max_chunk)) and using them up over the transfers that follow
    /// before it asks again: one limiter call for many small transfers (an 8 KiB copy loop
    /// under a 64 KiB reservation makes one call in eight). The permits are charged before
    /// their bytes move, up to one reservation ahead; what no transfer used goes back when
    /// the stream ends (a read of 0 bytes), fails, or the reader is dropped, as a
    /// [`Lease::settle`](crate::Lease::settle) gives it back (a limiter that cannot settle,
    /// or a window that has moved on, keeps it charged). 0, the default, asks for each
    /// transfer's own size.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tokio::io::AsyncReadExt;
    /// use tollgate::io::ThrottledReader;
    /// use tollgate::{Limiter, ManualClock, TokenBucketLimiter, TokenBucketOptions};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let clock = Arc::new(ManualClock::new());
    /// let opts = TokenBucketOptions::new(100_000, 100_000, Duration::from_secs(1));
    /// let budget = Arc::new(TokenBucketLimiter::with_clock(opts, clock).unwrap());
    /// let data = vec![1u8; 10_000];
    /// let mut reader = ThrottledReader::new(&data[..], budget.clone()).with_reservation(64 * 1024);
    /// let mut buf = [0u8; 1024];
    /// assert_eq!(reader.read(&mut buf).await.unwrap(), 1024);
    /// // One grant of 64 KiB covers this read and the next ones.
    /// assert_eq!(budget.available_permits(), 100_000 - 65_536);
    /// let mut rest = Vec::new();
    /// reader.read_to_end(&mut rest).await.unwrap();
    /// // At the end of the stream what no read used went back: 10,000 bytes charged.
    /// assert_eq!(budget.available_permits(), 100_000 - 10_000);
    /// # });
    /// ```
    pub fn with_reservation(mut self, bytes: u32) -> Self {
        self.gate.set_reservation(bytes);
        self
    }

    /// The least number of permits asked at once (0: each transfer asks for its own size).
    pub fn reservation(&self) -> u32 {
        self.gate.reservation()
    }

    /// The limiter charged.
    pub fn limiter(&self) -> &Arc<L> {
        self.gate.limiter()
    }

    /// The inner reader.
    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    /// The inner reader, mutably (bytes read from it directly are not charged).
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    /// The inner reader, pinned.
    pub fn get_pin_mut(self: Pin<&mut Self>) -> Pin<&mut R> {
        self.project().inner
    }

    /// The inner reader; a reservation still held goes back to the limiter.
    pub fn into_inner(self) -> R {
        self.inner
    }
}

#[cfg(feature = "tokio-io")]
impl<R: tokio::io::AsyncRead, L: Chargeable> tokio::io::AsyncRead for ThrottledReader<R, L> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.project();
        let room = buf.remaining();
        if room == 0 {
            return this.inner.poll_read(cx, buf);
        }
        let read = this.gate.poll_transfer(cx, room, |cx, len| {
            // Initialized once per buffer (tokio tracks it), so that no unsafe is needed here.
            let mut part = tokio::io::ReadBuf::new(buf.initialize_unfilled_to(len));
            this.inner
                .poll_read(cx, &mut part)
                .map_ok(|()| part.filled().len())
        });
        read.map_ok(|n| buf.advance(n))
    }
}

#[cfg(feature = "futures-io")]
impl<R: futures_io::AsyncRead, L: Chargeable> futures_io::AsyncRead for ThrottledReader<R, L> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.project();
        if buf.is_empty() {
            return this.inner.poll_read(cx, buf);
        }
        this.gate.poll_transfer(cx, buf.len(), |cx, len| {
            this.inner.poll_read(cx, &mut buf[..len])
        })
    }
}

/// Writes pass through uncharged (a duplex stream: charge its writes with a
/// [`ThrottledWriter`](super::ThrottledWriter) inside).
#[cfg(feature = "tokio-io")]
impl<R: tokio::io::AsyncWrite, L: Chargeable> tokio::io::AsyncWrite for ThrottledReader<R, L> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.project().inner.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.project().inner.poll_shutdown(cx)
    }
}

/// Writes pass through uncharged (a duplex stream: charge its writes with a
/// [`ThrottledWriter`](super::ThrottledWriter) inside).
#[cfg(feature = "futures-io")]
impl<R: futures_io::AsyncWrite, L: Chargeable> futures_io::AsyncWrite for ThrottledReader<R, L> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.project().inner.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.project().inner.poll_close(cx)
    }
}
