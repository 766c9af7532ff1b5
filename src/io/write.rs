//! [`ThrottledWriter`]: bytes written, charged to a limiter.

use alloc::sync::Arc;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::gate::{Chargeable, Gate};
use crate::quota::Quota;

pin_project_lite::pin_project! {
    /// A writer whose bytes are charged to a limiter, one permit a byte (features `tokio-io`
    /// and `futures-io`: it implements tokio's and `futures-io`'s `AsyncWrite`).
    ///
    /// Each write reserves permits for `min(buffer length, largest request)` bytes, waiting for
    /// them as the limiter's `acquire` waits, then writes at most that many bytes and settles
    /// the lease to the bytes actually written (a short write or an error gives the rest back;
    /// see [`Lease::settle`](crate::Lease::settle)). While the inner writer is pending, the
    /// reservation is kept for the next poll. A write larger than the limiter's largest
    /// request is cut to it: `write_all` sends it in several parts, never refused. Flush and
    /// shutdown (close) are not charged.
    ///
    /// A refusal other than waiting (the limiter closed, its queue full) is an `std::io::Error`
    /// of kind `Other` whose source is the [`Rejection`](crate::Rejection) (see
    /// [`rejection`](super::rejection)).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tokio::io::AsyncWriteExt;
    /// use tollgate::io::ThrottledWriter;
    /// use tollgate::{Limiter, ManualClock, TokenBucketLimiter, TokenBucketOptions};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let clock = Arc::new(ManualClock::new());
    /// let opts = TokenBucketOptions::new(1000, 1000, Duration::from_secs(1));
    /// let budget = Arc::new(TokenBucketLimiter::with_clock(opts, clock).unwrap());
    /// let mut writer = ThrottledWriter::new(Vec::new(), budget.clone());
    /// writer.write_all(&[1; 600]).await.unwrap();
    /// assert_eq!(budget.available_permits(), 400);
    /// assert_eq!(writer.get_ref().len(), 600);
    /// # });
    /// ```
    #[derive(Debug)]
    pub struct ThrottledWriter<W, L: Chargeable> {
        #[pin]
        inner: W,
        gate: Gate<L>,
    }
}

impl<W, L: Chargeable> ThrottledWriter<W, L> {
    /// `inner`, charged to `limiter`, asking at most the limiter's limit
    /// ([`Quota::quota`]`().limit`, its largest request) at once.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::io::ThrottledWriter;
    /// use tollgate::{FixedWindowLimiter, FixedWindowOptions};
    ///
    /// let window = Arc::new(FixedWindowLimiter::new(FixedWindowOptions::per_second(8192)).unwrap());
    /// assert_eq!(ThrottledWriter::new(Vec::<u8>::new(), window).max_chunk(), 8192);
    /// ```
    pub fn new(inner: W, limiter: Arc<L>) -> Self
    where
        L: Quota,
    {
        let limit = limiter.quota().limit;
        Self::with_max_chunk(inner, limiter, limit)
    }

    /// `inner`, charged to `limiter`, asking at most `max_chunk` permits at once (0 counts as
    /// 1), for a limiter of yours that does not report its [`Quota`] or for parts smaller than
    /// the limit; halved whenever the limiter answers
    /// [`Reason::ExceedsLimit`](crate::Reason::ExceedsLimit).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::io::ThrottledWriter;
    /// use tollgate::NoopLimiter;
    ///
    /// let writer = ThrottledWriter::with_max_chunk(Vec::<u8>::new(), Arc::new(NoopLimiter::new()), 0);
    /// assert_eq!(writer.max_chunk(), 1);
    /// ```
    pub fn with_max_chunk(inner: W, limiter: Arc<L>, max_chunk: u64) -> Self {
        Self {
            inner,
            gate: Gate::new(limiter, max_chunk),
        }
    }

    /// The largest number of bytes charged (and written) at once.
    pub fn max_chunk(&self) -> u32 {
        self.gate.max_chunk()
    }

    /// The same writer, asking the limiter for at least `bytes` permits at once (within
    /// [`max_chunk`](Self::max_chunk)) and using them up over the transfers that follow
    /// before it asks again: one limiter call for many small transfers (an 8 KiB copy loop
    /// under a 64 KiB reservation makes one call in eight). The permits are charged before
    /// their bytes move, up to one reservation ahead; what no transfer used goes back when
    /// the stream ends (a read of 0 bytes), fails, or the writer is dropped, as a
    /// [`Lease::settle`](crate::Lease::settle) gives it back (a limiter that cannot settle,
    /// or a window that has moved on, keeps it charged). 0, the default, asks for each
    /// transfer's own size.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tokio::io::AsyncWriteExt;
    /// use tollgate::io::ThrottledWriter;
    /// use tollgate::{Limiter, ManualClock, TokenBucketLimiter, TokenBucketOptions};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let clock = Arc::new(ManualClock::new());
    /// let opts = TokenBucketOptions::new(100_000, 100_000, Duration::from_secs(1));
    /// let budget = Arc::new(TokenBucketLimiter::with_clock(opts, clock).unwrap());
    /// let mut writer = ThrottledWriter::new(Vec::new(), budget.clone()).with_reservation(16_384);
    /// for _ in 0..4 {
    ///     writer.write_all(&[7; 1000]).await.unwrap();
    /// }
    /// assert_eq!(budget.available_permits(), 100_000 - 16_384); // one grant so far
    /// drop(writer); // what no write used goes back
    /// assert_eq!(budget.available_permits(), 100_000 - 4_000);
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

    /// The inner writer.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// The inner writer, mutably (bytes written to it directly are not charged).
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    /// The inner writer, pinned.
    pub fn get_pin_mut(self: Pin<&mut Self>) -> Pin<&mut W> {
        self.project().inner
    }

    /// The inner writer; a reservation still held goes back to the limiter.
    pub fn into_inner(self) -> W {
        self.inner
    }

    /// Writes `buf` through `write`, charged: the part common to both `AsyncWrite`s.
    #[cfg(any(feature = "tokio-io", feature = "futures-io"))]
    fn poll_charged(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
        write: impl FnOnce(Pin<&mut W>, &mut Context<'_>, &[u8]) -> Poll<std::io::Result<usize>>,
    ) -> Poll<std::io::Result<usize>> {
        let this = self.project();
        if buf.is_empty() {
            return write(this.inner, cx, buf);
        }
        this.gate
            .poll_transfer(cx, buf.len(), |cx, len| write(this.inner, cx, &buf[..len]))
    }
}

#[cfg(feature = "tokio-io")]
impl<W: tokio::io::AsyncWrite, L: Chargeable> tokio::io::AsyncWrite for ThrottledWriter<W, L> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.poll_charged(cx, buf, |inner, cx, part| inner.poll_write(cx, part))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }

    /// What a reservation holds that no write used goes back first.
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.project();
        this.gate.settle(0);
        this.inner.poll_shutdown(cx)
    }
}

#[cfg(feature = "futures-io")]
impl<W: futures_io::AsyncWrite, L: Chargeable> futures_io::AsyncWrite for ThrottledWriter<W, L> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.poll_charged(cx, buf, |inner, cx, part| inner.poll_write(cx, part))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.project().inner.poll_flush(cx)
    }

    /// What a reservation holds that no write used goes back first.
    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.project();
        this.gate.settle(0);
        this.inner.poll_close(cx)
    }
}

/// Reads pass through uncharged (a duplex stream: wrap it in a
/// [`ThrottledReader`](super::ThrottledReader) to charge its reads too).
#[cfg(feature = "tokio-io")]
impl<W: tokio::io::AsyncRead, L: Chargeable> tokio::io::AsyncRead for ThrottledWriter<W, L> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        self.project().inner.poll_read(cx, buf)
    }
}

/// Reads pass through uncharged (a duplex stream: wrap it in a
/// [`ThrottledReader`](super::ThrottledReader) to charge its reads too).
#[cfg(feature = "futures-io")]
impl<W: futures_io::AsyncRead, L: Chargeable> futures_io::AsyncRead for ThrottledWriter<W, L> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        self.project().inner.poll_read(cx, buf)
    }
}
