//! Rate-limited I/O: streams, readers and writers charged to a shared limiter (features
//! `stream`, `tokio-io`, `futures-io`).
//!
//! - [`ThrottledStream`] (feature `stream`, `no_std` with `alloc`): a `futures_core::Stream`
//!   whose items are charged one permit each, or their weight (`Fn(&Item) -> u32`);
//! - [`ThrottledReader`] and [`ThrottledWriter`] (features `tokio-io` and `futures-io`):
//!   tokio's and `futures-io`'s `AsyncRead` / `AsyncWrite`, charged one permit a byte.
//!
//! The limiter is any waiting limiter ([`Chargeable`]) behind an `Arc`: one budget can cover
//! many streams, readers and writers, which then share it as its queue orders them. A duplex
//! stream is charged both ways by nesting, `ThrottledReader::new(ThrottledWriter::new(tcp,
//! up), down)`: each adapter passes the other direction through uncharged.
//!
//! **Chunks.** A transfer asks at most the limiter's largest request at once (its
//! [`Quota`](crate::Quota) limit: a token bucket's `token_limit`, GCRA's burst, a window's
//! `permit_limit`), so a read, write or item larger than the burst is split, never refused.
//! The `with_max_chunk` constructors set the size (a limiter of yours without a quota, or
//! parts smaller than the limit); a size the limiter refuses with
//! [`Reason::ExceedsLimit`](crate::Reason::ExceedsLimit) is halved until it fits.
//!
//! **Reserve, then settle.** A read or write reserves permits for the bytes it may move, then
//! settles the lease (as [`Lease::settle`](crate::Lease::settle) does) to the bytes it moved:
//! a slow reader is not charged for bytes it did not get, an end of file takes nothing. The
//! reservation is kept while the inner reader or writer is pending (the next poll uses it, it
//! is not taken again).
//!
//! **Cancellation.** Dropping a read or write future between polls loses nothing: the adapter
//! keeps its reservation for the next call. Dropping the adapter cancels a wait under way
//! (which takes nothing) and settles a reservation still held to 0 (a rate limiter gets its
//! permits back where its algorithm can express it, see
//! [`Lease::settle`](crate::Lease::settle)).
//!
//! **Errors.** A refusal other than waiting — the limiter closed, its queue full, the waiter
//! evicted — is an `std::io::Error` of kind [`Other`](std::io::ErrorKind::Other) whose
//! source is the [`Rejection`](crate::Rejection) ([`rejection`] finds it); a stream yields it
//! as an `Err` item and ends.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use tollgate::io::{ThrottledReader, ThrottledWriter};
//! use tollgate::{GcraLimiter, GcraOptions};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! // One budget for two copies: 4 MiB/s together, 64 KiB at once.
//! let budget = Arc::new(
//!     GcraLimiter::new(GcraOptions::per_second(4 << 20).with_burst(64 << 10)).unwrap(),
//! );
//! let (a, b) = (vec![1u8; 32 << 10], vec![2u8; 32 << 10]);
//! let mut ra = ThrottledReader::new(&a[..], budget.clone());
//! let mut wb = ThrottledWriter::new(Vec::new(), budget.clone());
//! tokio::io::copy(&mut ra, &mut tokio::io::sink()).await.unwrap();
//! tokio::io::copy(&mut &b[..], &mut wb).await.unwrap();
//! assert_eq!(wb.get_ref().len(), 32 << 10);
//! # });
//! ```

mod gate;
#[cfg(any(feature = "tokio-io", feature = "futures-io"))]
mod read;
#[cfg(feature = "stream")]
mod stream;
#[cfg(any(feature = "tokio-io", feature = "futures-io"))]
mod write;

pub use gate::Chargeable;
#[cfg(any(feature = "tokio-io", feature = "futures-io"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "tokio-io", feature = "futures-io"))))]
pub use read::ThrottledReader;
#[cfg(feature = "stream")]
#[cfg_attr(docsrs, doc(cfg(feature = "stream")))]
pub use stream::{One, ThrottledStream};
#[cfg(any(feature = "tokio-io", feature = "futures-io"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "tokio-io", feature = "futures-io"))))]
pub use write::ThrottledWriter;

/// The I/O error for a limiter's refusal: kind `Other`, the rejection as its source.
#[cfg(any(feature = "tokio-io", feature = "futures-io"))]
fn io_error(rejection: crate::lease::Rejection) -> std::io::Error {
    std::io::Error::other(rejection)
}

/// The limiter's [`Rejection`](crate::Rejection) an I/O error of a [`ThrottledReader`] or
/// [`ThrottledWriter`] carries, if it is one (an error of the inner reader or writer is not).
///
/// ```
/// use std::sync::Arc;
/// use tokio::io::AsyncReadExt;
/// use tollgate::io::{rejection, ThrottledReader};
/// use tollgate::{Limiter, Reason, TokenBucketLimiter, TokenBucketOptions};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let budget = Arc::new(TokenBucketLimiter::new(TokenBucketOptions::per_second(1000)).unwrap());
/// budget.close();
/// let mut reader = ThrottledReader::new(&b"data"[..], budget);
/// let err = reader.read(&mut [0; 4]).await.unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::Other);
/// assert_eq!(rejection(&err).map(|r| r.reason()), Some(Reason::Closed));
/// # });
/// ```
#[cfg(any(feature = "tokio-io", feature = "futures-io"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "tokio-io", feature = "futures-io"))))]
pub fn rejection(error: &std::io::Error) -> Option<crate::lease::Rejection> {
    error
        .get_ref()
        .and_then(|e| e.downcast_ref::<crate::lease::Rejection>())
        .copied()
}

/// The examples of `docs/io.md`, run as doc tests as the README's are.
#[cfg(all(doctest, feature = "tokio-io"))]
#[doc = include_str!("../../docs/io.md")]
pub struct IoDoc;
