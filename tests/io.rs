//! Rate-limited I/O (issue 38, part 3): `ThrottledReader`, `ThrottledWriter` (tokio's and
//! futures-io's traits) and `ThrottledStream`, on a `ManualClock` driven by hand: each test
//! polls with a no-op waker, and when a transfer waits, moves the clock to the limiter's next
//! service instant and serves its queue (`replenish`), as the process timer would. One test
//! runs on the real clock, within a loose tolerance.

use core::future::Future;
use core::pin::{pin, Pin};
use core::task::{Context, Poll, Waker};
use std::io;
use std::sync::Arc;
use std::time::Duration;

use futures_core::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tollgate::io::{rejection, ThrottledReader, ThrottledStream, ThrottledWriter};
use tollgate::*;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// A token bucket of 64 KiB refilled at exactly 1 MiB/s (16 KiB every 15.625 ms), waiting in
/// an unbounded oldest-first queue, on `clock`.
fn mib_per_second(clock: &Arc<ManualClock>) -> Arc<TokenBucketLimiter<Arc<ManualClock>>> {
    let opts = TokenBucketOptions::new(64 * KIB as u32, 16 * KIB as u32, PERIOD)
        .with_queue(UNBOUNDED_QUEUE, QueueOrder::OldestFirst);
    Arc::new(TokenBucketLimiter::with_clock(opts, clock.clone()).unwrap())
}
const PERIOD: Duration = Duration::from_nanos(15_625_000);
const RATE: f64 = MIB as f64; // bytes a second
const BURST: usize = 64 * KIB;

/// A bucket that refills only after an hour: what is taken shows in `available_permits`.
fn no_refill(clock: &Arc<ManualClock>, limit: u32) -> Arc<TokenBucketLimiter<Arc<ManualClock>>> {
    let opts = TokenBucketOptions::new(limit, limit, Duration::from_secs(3600))
        .with_queue(UNBOUNDED_QUEUE, QueueOrder::OldestFirst);
    Arc::new(TokenBucketLimiter::with_clock(opts, clock.clone()).unwrap())
}

fn cx() -> Context<'static> {
    Context::from_waker(Waker::noop())
}

/// Moves the clock to the instant the limiter can serve its next waiter, and serves it.
fn serve(clock: &ManualClock, limiter: &impl Replenishing) {
    let wait = limiter
        .next_service()
        .expect("a transfer waits, so someone is queued");
    clock.advance(wait);
    limiter.replenish();
}

/// Polls `poll` until it is ready, serving the limiter between polls.
fn drive<T>(
    clock: &ManualClock,
    limiter: &impl Replenishing,
    mut poll: impl FnMut(&mut Context<'_>) -> Poll<T>,
) -> T {
    for _ in 0..100_000 {
        if let Poll::Ready(v) = poll(&mut cx()) {
            return v;
        }
        serve(clock, limiter);
    }
    panic!("never completed");
}

/// One `poll_read` of the tokio trait into `buf`: the bytes read.
fn poll_read_tokio<R: AsyncRead + Unpin>(
    r: &mut R,
    cx: &mut Context<'_>,
    buf: &mut [u8],
) -> Poll<io::Result<usize>> {
    let mut rb = ReadBuf::new(buf);
    Pin::new(r)
        .poll_read(cx, &mut rb)
        .map_ok(|()| rb.filled().len())
}

/// Every window between two grants holds no more than the burst plus the rate over its length.
fn assert_within_budget(grants: &[(Duration, usize)]) {
    for i in 0..grants.len() {
        let mut bytes = 0;
        for g in &grants[i..] {
            bytes += g.1;
            let span = (g.0 - grants[i].0).as_secs_f64();
            let allowed = BURST as f64 + RATE * span;
            assert!(
                bytes as f64 <= allowed + 0.5,
                "{bytes} bytes between {:?} and {:?}: more than {allowed}",
                grants[i].0,
                g.0
            );
        }
    }
}

/// A reader of `data` that gives at most `most` bytes a read, and answers `Pending` (waking
/// itself) every other time if `stalls`. It implements both tokio's and futures-io's trait.
struct Slow {
    data: Vec<u8>,
    most: usize,
    stalls: bool,
    stalled: bool,
}

impl Slow {
    fn new(data: Vec<u8>, most: usize) -> Self {
        Self {
            data,
            most,
            stalls: false,
            stalled: false,
        }
    }
    fn give(&mut self, cx: &mut Context<'_>, room: usize) -> Poll<Vec<u8>> {
        if self.stalls && !self.stalled {
            self.stalled = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.stalled = false;
        let n = room.min(self.most).min(self.data.len());
        Poll::Ready(self.data.drain(..n).collect())
    }
}

impl AsyncRead for Slow {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let room = buf.remaining();
        self.get_mut().give(cx, room).map(|v| {
            buf.put_slice(&v);
            Ok(())
        })
    }
}

impl futures_io::AsyncRead for Slow {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let room = buf.len();
        self.get_mut().give(cx, room).map(|v| {
            buf[..v.len()].copy_from_slice(&v);
            Ok(v.len())
        })
    }
}

/// A writer that keeps what it is given, records each write's size, and answers `Pending`
/// first when `stalls` (once per write).
#[derive(Default)]
struct Sink {
    data: Vec<u8>,
    writes: Vec<usize>,
    stalls: bool,
    stalled: bool,
}

impl Sink {
    fn take(&mut self, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.stalls && !self.stalled {
            self.stalled = true;
            return Poll::Pending;
        }
        self.stalled = false;
        self.data.extend_from_slice(buf);
        self.writes.push(buf.len());
        Poll::Ready(Ok(buf.len()))
    }
}

impl AsyncWrite for Sink {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().take(b)
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl futures_io::AsyncWrite for Sink {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        self.get_mut().take(b)
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A stream of the items of an iterator.
struct Iter<I>(I);

impl<I: Iterator + Unpin> Stream for Iter<I> {
    type Item = I::Item;
    fn poll_next(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<I::Item>> {
        Poll::Ready(self.0.next())
    }
}

fn elapsed(clock: &ManualClock) -> Duration {
    Duration::from_nanos(clock.now().as_nanos())
}

/// Reads `reader` to its end in reads of up to `buffer` bytes, serving `limiter` on `clock`
/// whenever a read waits: the bytes, and each read's instant and size.
fn read_all<R: AsyncRead + Unpin>(
    clock: &ManualClock,
    limiter: &impl Replenishing,
    reader: &mut R,
    buffer: usize,
) -> (Vec<u8>, Vec<(Duration, usize)>) {
    let mut buf = vec![0u8; buffer];
    let (mut out, mut reads) = (Vec::new(), Vec::new());
    loop {
        let n = drive(clock, limiter, |cx| poll_read_tokio(reader, cx, &mut buf)).unwrap();
        if n == 0 {
            return (out, reads);
        }
        reads.push((elapsed(clock), n));
        out.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn ten_mib_at_one_mib_per_second_takes_the_computed_time_and_never_exceeds_the_budget() {
    let clock = Arc::new(ManualClock::new());
    let limiter = mib_per_second(&clock);
    let data: Vec<u8> = (0..10 * MIB).map(|i| (i % 251) as u8).collect();
    let mut reader = ThrottledReader::new(&data[..], limiter.clone());
    assert_eq!(reader.max_chunk(), BURST as u32);
    // A buffer larger than the burst: each read is cut to 64 KiB.
    let (out, grants) = read_all(&clock, &*limiter, &mut reader, 100 * KIB);
    assert!(grants.iter().all(|&(_, n)| n <= BURST));
    assert_eq!(out, data);
    // The burst at once, the rest at exactly 1 MiB/s: (10 MiB - 64 KiB) / 1 MiB/s.
    assert_eq!(grants.last().unwrap().0, Duration::from_micros(9_937_500));
    assert_eq!(grants.len(), 160);
    assert_within_budget(&grants);
    // The read that found the end of the file waited for its reservation like any other
    // (62.5 ms) and gave it all back.
    assert_eq!(elapsed(&clock), Duration::from_secs(10));
    assert_eq!(limiter.available_permits(), BURST as u64);
}

#[test]
fn a_slow_reader_is_charged_only_for_the_bytes_it_read() {
    let clock = Arc::new(ManualClock::new());
    let limiter = no_refill(&clock, 10_000);
    let mut reader = ThrottledReader::new(Slow::new(vec![1; 250], 100), limiter.clone());
    let mut buf = [0u8; 4096];
    // It asked for 4096 and got 100: the other 3996 went back.
    assert!(matches!(
        poll_read_tokio(&mut reader, &mut cx(), &mut buf),
        Poll::Ready(Ok(100))
    ));
    assert_eq!(limiter.available_permits(), 10_000 - 100);
    // The same through futures-io's trait.
    let mut fbuf = [0u8; 4096];
    let read = futures_io::AsyncRead::poll_read(Pin::new(&mut reader), &mut cx(), &mut fbuf);
    assert!(matches!(read, Poll::Ready(Ok(100))));
    assert_eq!(limiter.available_permits(), 10_000 - 200);
    // A stalled inner reader keeps its reservation across polls (taken once), then settles.
    reader.get_mut().stalls = true;
    assert!(poll_read_tokio(&mut reader, &mut cx(), &mut buf).is_pending());
    assert_eq!(limiter.available_permits(), 10_000 - 200 - 4096);
    let granted = limiter.statistics().total_successful;
    assert!(matches!(
        poll_read_tokio(&mut reader, &mut cx(), &mut buf),
        Poll::Ready(Ok(50))
    ));
    assert_eq!(limiter.statistics().total_successful, granted);
    assert_eq!(limiter.available_permits(), 10_000 - 250);
    // The end of file (0 bytes) gives everything back.
    reader.get_mut().stalls = false;
    assert!(matches!(
        poll_read_tokio(&mut reader, &mut cx(), &mut buf),
        Poll::Ready(Ok(0))
    ));
    assert_eq!(limiter.available_permits(), 10_000 - 250);
}

#[test]
fn two_readers_sharing_one_limiter_split_it() {
    let clock = Arc::new(ManualClock::new());
    let limiter = mib_per_second(&clock);
    let data = vec![9u8; MIB];
    let mut readers = [
        ThrottledReader::new(&data[..], limiter.clone()),
        ThrottledReader::new(&data[..], limiter.clone()),
    ];
    let mut bufs = [vec![0u8; 64 * KIB], vec![0u8; 64 * KIB]];
    let (mut read, mut done, mut grants) = ([0usize; 2], [false; 2], Vec::new());
    let mut at_one_second = None;
    while done != [true, true] {
        let mut any = false;
        for i in 0..2 {
            if done[i] {
                continue;
            }
            if let Poll::Ready(n) = poll_read_tokio(&mut readers[i], &mut cx(), &mut bufs[i]) {
                let n = n.unwrap();
                any = true;
                done[i] = n == 0;
                read[i] += n;
                if n > 0 {
                    grants.push((elapsed(&clock), n));
                }
            }
        }
        if elapsed(&clock) >= Duration::from_secs(1) && at_one_second.is_none() {
            at_one_second = Some(read);
        }
        if !any {
            serve(&clock, &*limiter);
        }
    }
    assert_eq!(read, [MIB, MIB]);
    // Together at the budget's pace: (2 MiB - 64 KiB) / 1 MiB/s.
    assert_eq!(grants.last().unwrap().0, Duration::from_micros(1_937_500));
    assert_within_budget(&grants);
    // Both progressed all along: after one second each had read close to half.
    let [a, b] = at_one_second.unwrap();
    assert!(a >= 448 * KIB && b >= 448 * KIB, "{a} and {b} after 1 s");
}

#[test]
fn a_write_larger_than_the_burst_is_split_not_refused() {
    let clock = Arc::new(ManualClock::new());
    let limiter = mib_per_second(&clock);
    let mut writer = ThrottledWriter::new(Sink::default(), limiter.clone());
    let data: Vec<u8> = (0..MIB).map(|i| (i % 13) as u8).collect();
    let mut sent = 0;
    while sent < data.len() {
        sent += drive(&clock, &*limiter, |cx| {
            Pin::new(&mut writer).poll_write(cx, &data[sent..])
        })
        .unwrap();
    }
    assert_eq!(writer.get_ref().data, data);
    assert_eq!(writer.get_ref().writes, vec![BURST; 16]);
    assert_eq!(elapsed(&clock), Duration::from_micros(937_500));
    // futures-io's trait, on a limiter that refuses the reported size: halved until it fits.
    let small = no_refill(&clock, 1000);
    let mut writer = ThrottledWriter::with_max_chunk(Sink::default(), small.clone(), 5000);
    let wrote = futures_io::AsyncWrite::poll_write(Pin::new(&mut writer), &mut cx(), &data[..3000]);
    assert!(matches!(wrote, Poll::Ready(Ok(750)))); // 3000, 1500, then 750 fits
    assert_eq!(writer.max_chunk(), 750);
    assert_eq!(small.available_permits(), 250);
    // A short write gives the rest back.
    let mut reader = ThrottledReader::with_max_chunk(Slow::new(vec![3; 10], 4), small.clone(), 0);
    assert_eq!(reader.max_chunk(), 1);
    let mut one = [0u8; 8];
    assert!(matches!(
        poll_read_tokio(&mut reader, &mut cx(), &mut one),
        Poll::Ready(Ok(1))
    ));
    assert_eq!(small.available_permits(), 249);
}

#[test]
fn a_stream_item_heavier_than_the_burst_is_charged_in_parts() {
    let clock = Arc::new(ManualClock::new());
    let limiter = mib_per_second(&clock);
    let frames = Iter([3 * BURST, 10, 0].into_iter());
    let mut s = pin!(ThrottledStream::weighted(
        frames,
        limiter.clone(),
        |n: &usize| *n as u32
    ));
    let first = drive(&clock, &*limiter, |cx| s.as_mut().poll_next(cx));
    assert_eq!(first, Some(Ok(3 * BURST)));
    // The burst at once, two more in two bursts' time.
    assert_eq!(elapsed(&clock), Duration::from_millis(125));
    assert_eq!(s.as_mut().poll_next(&mut cx()), Poll::Pending);
    serve(&clock, &*limiter);
    assert_eq!(s.as_mut().poll_next(&mut cx()), Poll::Ready(Some(Ok(10))));
    // Weight 0 is free.
    let left = limiter.available_permits();
    assert_eq!(s.as_mut().poll_next(&mut cx()), Poll::Ready(Some(Ok(0))));
    assert_eq!(limiter.available_permits(), left);
    assert_eq!(s.as_mut().poll_next(&mut cx()), Poll::Ready(None));
}

#[test]
fn the_weighted_stream_charges_each_items_weight() {
    let clock = Arc::new(ManualClock::new());
    let limiter = no_refill(&clock, 100);
    let words = Iter(["a", "bcd", "efghij"].into_iter());
    let weighted = ThrottledStream::weighted(words, limiter.clone(), |w: &&str| w.len() as u32);
    let mut s = pin!(weighted);
    let mut taken = vec![];
    while let Poll::Ready(Some(item)) = s.as_mut().poll_next(&mut cx()) {
        taken.push((item.unwrap(), limiter.available_permits()));
    }
    assert_eq!(taken, [("a", 99), ("bcd", 96), ("efghij", 90)]);
    // Unweighted: one permit an item.
    let plain = ThrottledStream::new(Iter(0..5), limiter.clone());
    let mut plain = pin!(plain);
    while let Poll::Ready(Some(item)) = plain.as_mut().poll_next(&mut cx()) {
        item.unwrap();
    }
    assert_eq!(limiter.available_permits(), 85);
}

#[test]
fn a_cancelled_read_or_write_takes_nothing() {
    let clock = Arc::new(ManualClock::new());
    let limiter = mib_per_second(&clock);
    limiter.try_acquire(BURST as u32).unwrap().forget(); // empty
                                                         // A read waiting for permits, its future and then the reader dropped.
    let data = vec![0u8; MIB];
    let mut reader = ThrottledReader::new(&data[..], limiter.clone());
    {
        let mut buf = [0u8; 4096];
        let read = pin!(tokio::io::AsyncReadExt::read(&mut reader, &mut buf));
        assert!(read.poll(&mut cx()).is_pending());
    }
    assert_eq!(limiter.statistics().queued_permits, 4096);
    drop(reader);
    assert_eq!(limiter.statistics().queued_permits, 0);
    clock.advance(Duration::from_secs(1)); // time fills the bucket: nobody took any of it
    limiter.replenish();
    assert_eq!(limiter.available_permits(), BURST as u64);
    // A read granted whose inner reader is pending, then dropped: the reservation goes back.
    let mut stalled = Slow::new(vec![1; 100], 100);
    stalled.stalls = true;
    let mut reader = ThrottledReader::new(stalled, limiter.clone());
    let mut buf = [0u8; 1000];
    assert!(poll_read_tokio(&mut reader, &mut cx(), &mut buf).is_pending());
    assert_eq!(limiter.available_permits(), BURST as u64 - 1000);
    drop(reader);
    assert_eq!(limiter.available_permits(), BURST as u64);
    // The same for a write, through each trait.
    let sink = Sink {
        stalls: true,
        ..Sink::default()
    };
    let mut writer = ThrottledWriter::new(sink, limiter.clone());
    let wrote = Pin::new(&mut writer).poll_write(&mut cx(), &[5; 2000]);
    assert!(wrote.is_pending());
    assert_eq!(limiter.available_permits(), BURST as u64 - 2000);
    let inner = writer.into_inner();
    assert!(inner.data.is_empty());
    assert_eq!(limiter.available_permits(), BURST as u64);
    let sink = Sink {
        stalls: true,
        ..Sink::default()
    };
    let mut writer = ThrottledWriter::new(sink, limiter.clone());
    let wrote = futures_io::AsyncWrite::poll_write(Pin::new(&mut writer), &mut cx(), &[5; 300]);
    assert!(wrote.is_pending());
    assert_eq!(limiter.available_permits(), BURST as u64 - 300);
    drop(writer);
    assert_eq!(limiter.available_permits(), BURST as u64);
    // A stream item waiting for its permits, dropped.
    limiter.try_acquire(BURST as u32).unwrap().forget();
    let mut s = Box::pin(ThrottledStream::weighted(
        Iter([500usize].into_iter()),
        limiter.clone(),
        |n: &usize| *n as u32,
    ));
    assert_eq!(s.as_mut().poll_next(&mut cx()), Poll::Pending);
    assert_eq!(limiter.statistics().queued_permits, 500);
    drop(s);
    assert_eq!(limiter.statistics().queued_permits, 0);
    clock.advance(Duration::from_secs(1));
    limiter.replenish();
    assert_eq!(limiter.available_permits(), BURST as u64);
}

#[test]
fn refusals_come_out_typed() {
    let clock = Arc::new(ManualClock::new());
    // Closed before the read.
    let limiter = mib_per_second(&clock);
    limiter.close();
    let mut reader = ThrottledReader::new(&b"abc"[..], limiter.clone());
    let mut buf = [0u8; 3];
    let Poll::Ready(Err(e)) = poll_read_tokio(&mut reader, &mut cx(), &mut buf) else {
        panic!("a closed limiter must refuse the read")
    };
    assert_eq!(e.kind(), io::ErrorKind::Other);
    assert_eq!(rejection(&e).unwrap().reason(), Reason::Closed);
    let mut writer = ThrottledWriter::new(Sink::default(), limiter.clone());
    let Poll::Ready(Err(e)) = Pin::new(&mut writer).poll_write(&mut cx(), b"abc") else {
        panic!("a closed limiter must refuse the write")
    };
    assert_eq!(rejection(&e).unwrap().reason(), Reason::Closed);
    let mut s = pin!(ThrottledStream::new(Iter(0..3), limiter.clone()));
    let Poll::Ready(Some(Err(r))) = s.as_mut().poll_next(&mut cx()) else {
        panic!("a closed limiter must refuse the item")
    };
    assert_eq!(r.reason(), Reason::Closed);
    assert_eq!(s.as_mut().poll_next(&mut cx()), Poll::Ready(None)); // and the stream ends
                                                                    // Closed while a read waits.
    let limiter = mib_per_second(&clock);
    limiter.try_acquire(BURST as u32).unwrap().forget();
    let mut reader = ThrottledReader::new(&b"abc"[..], limiter.clone());
    assert!(poll_read_tokio(&mut reader, &mut cx(), &mut buf).is_pending());
    limiter.close();
    let Poll::Ready(Err(e)) = poll_read_tokio(&mut reader, &mut cx(), &mut buf) else {
        panic!("closing must fail the waiting read")
    };
    assert_eq!(rejection(&e).unwrap().reason(), Reason::Closed);
    // A limiter without a queue (.NET's queue limit of 0): the wait is refused, queue full.
    let opts = TokenBucketOptions::new(10, 10, Duration::from_secs(1));
    let no_queue = Arc::new(TokenBucketLimiter::with_clock(opts, clock.clone()).unwrap());
    no_queue.try_acquire(10).unwrap().forget();
    let mut reader = ThrottledReader::new(&b"abc"[..], no_queue);
    let read = futures_io::AsyncRead::poll_read(Pin::new(&mut reader), &mut cx(), &mut buf);
    let Poll::Ready(Err(e)) = read else {
        panic!("a full queue must refuse the read")
    };
    assert_eq!(rejection(&e).unwrap().reason(), Reason::QueueFull);
    // The inner reader's own errors are not rejections.
    assert!(rejection(&io::Error::other("disk")).is_none());
}

#[test]
fn a_duplex_stream_is_charged_each_way_by_its_own_limiter() {
    let clock = Arc::new(ManualClock::new());
    let (down, up) = (no_refill(&clock, 10_000), no_refill(&clock, 10_000));
    let (near, mut far) = tokio::io::duplex(64 * KIB);
    let mut both = ThrottledReader::new(ThrottledWriter::new(near, up.clone()), down.clone());
    let wrote = Pin::new(&mut both).poll_write(&mut cx(), &[1; 300]);
    assert!(matches!(wrote, Poll::Ready(Ok(300))));
    assert!(matches!(
        Pin::new(&mut far).poll_write(&mut cx(), &[2; 700]),
        Poll::Ready(Ok(700))
    ));
    let mut buf = [0u8; 4096];
    assert!(matches!(
        poll_read_tokio(&mut both, &mut cx(), &mut buf),
        Poll::Ready(Ok(700))
    ));
    assert_eq!(
        (up.available_permits(), down.available_permits()),
        (9_700, 9_300)
    );
}

#[test]
fn on_the_real_clock_a_copy_takes_about_the_computed_time() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // 200 KiB at 1 MiB/s, 16 KiB at once: (200 - 16) KiB / 1 MiB/s = 179.7 ms.
        let gcra =
            GcraLimiter::new(GcraOptions::per_second(MIB as u32).with_burst(16 * KIB as u32));
        let limiter = Arc::new(gcra.unwrap());
        let data = vec![4u8; 200 * KIB];
        let mut reader = ThrottledReader::new(&data[..], limiter);
        let start = std::time::Instant::now();
        let copied = tokio::io::copy(&mut reader, &mut tokio::io::sink())
            .await
            .unwrap();
        let took = start.elapsed();
        assert_eq!(copied, data.len() as u64);
        let expected = Duration::from_secs_f64((184 * KIB) as f64 / RATE);
        assert!(
            took + Duration::from_millis(20) >= expected && took < expected * 3,
            "took {took:?}, expected about {expected:?}"
        );
    });
}

/// The capability line of issue 38's part 3: every waiting limiter (the nine, and a partition's
/// limiter) can meter a stream, a reader or a writer (`io::Chargeable`, given to every limiter
/// that waits, releases and is shared between threads).
#[test]
fn every_waiting_limiter_can_meter_io() {
    fn chargeable<L: tollgate::io::Chargeable>() {}
    type C = Arc<ManualClock>;
    chargeable::<ConcurrencyLimiter<C>>();
    chargeable::<TokenBucketLimiter<C>>();
    chargeable::<FixedWindowLimiter<C>>();
    chargeable::<SlidingWindowLimiter<C, 4>>();
    chargeable::<GcraLimiter<C>>();
    chargeable::<LeakyBucketMeter<C>>();
    chargeable::<LeakyBucketShaper<C>>();
    chargeable::<SlidingCounterLimiter<C>>();
    chargeable::<SlidingLogLimiter<C, 4>>();
    chargeable::<PartitionLimiter<C>>();
}

/// A reservation: one grant covers the small reads that follow, the bytes are charged before
/// they move (one reservation ahead at most), and what no read used goes back at the end of
/// the stream.
#[test]
fn a_reservation_covers_many_small_reads_and_gives_back_what_they_left() {
    let clock = Arc::new(ManualClock::new());
    let limiter = no_refill(&clock, 100_000);
    let data = vec![3u8; 10_000];
    let mut reader = ThrottledReader::new(&data[..], limiter.clone()).with_reservation(4096);
    assert_eq!(reader.reservation(), 4096);
    let mut buf = [0u8; 1024];
    let mut read = 0;
    for i in 1..=10 {
        let n = drive(&clock, &*limiter, |cx| {
            poll_read_tokio(&mut reader, cx, &mut buf)
        })
        .unwrap();
        read += n;
        // Charged: every grant so far (4096 each), never more than one reservation ahead.
        let grants = read.div_ceil(4096) as u64;
        assert_eq!(limiter.statistics().total_successful, grants, "read {i}");
        assert_eq!(limiter.available_permits(), 100_000 - 4096 * grants);
        assert!(4096 * grants as usize - read < 4096);
    }
    assert_eq!(read, 10_000);
    // The end of the stream: the third grant's unused 2,288 go back.
    let n = drive(&clock, &*limiter, |cx| {
        poll_read_tokio(&mut reader, cx, &mut buf)
    });
    assert_eq!(n.unwrap(), 0);
    assert_eq!(limiter.available_permits(), 100_000 - 10_000);
    assert_eq!(limiter.statistics().total_successful, 3);
}

/// Under a binding rate a reservation changes when bytes are charged, not how many: 10 MiB
/// in 8 KiB reads under a 64 KiB reservation take the same computed time as 64 KiB reads,
/// with one limiter call in eight.
#[test]
fn a_reserved_copy_at_one_mib_per_second_takes_the_computed_time() {
    let clock = Arc::new(ManualClock::new());
    let limiter = mib_per_second(&clock);
    let data: Vec<u8> = (0..10 * MIB).map(|i| (i % 251) as u8).collect();
    let mut reader =
        ThrottledReader::new(&data[..], limiter.clone()).with_reservation(BURST as u32);
    let (out, reads) = read_all(&clock, &*limiter, &mut reader, 8 * KIB);
    assert_eq!(out, data);
    assert_eq!(reads.len(), 10 * MIB / (8 * KIB));
    // 160 grants of 64 KiB, and the one the end of the file took and gave back.
    assert_eq!(limiter.statistics().total_successful, 161);
    assert_eq!(elapsed(&clock), Duration::from_secs(10));
    assert_eq!(limiter.available_permits(), BURST as u64);
}

/// A writer's reservation: its writes draw on one grant; shutting down (or closing) gives back
/// what they left; a reservation above the largest request is cut to it.
#[test]
fn a_writers_reservation_goes_back_at_shutdown() {
    let clock = Arc::new(ManualClock::new());
    let limiter = no_refill(&clock, 50_000);
    let mut writer = ThrottledWriter::new(Vec::new(), limiter.clone()).with_reservation(20_000);
    for _ in 0..3 {
        let n = drive(&clock, &*limiter, |cx| {
            Pin::new(&mut writer).poll_write(cx, &[9; 1500])
        });
        assert_eq!(n.unwrap(), 1500);
    }
    assert_eq!(limiter.statistics().total_successful, 1);
    assert_eq!(limiter.available_permits(), 30_000);
    assert!(Pin::new(&mut writer).poll_shutdown(&mut cx()).is_ready());
    assert_eq!(limiter.available_permits(), 50_000 - 4_500);
    // The same through futures-io's `close`.
    let n = futures_io::AsyncWrite::poll_write(Pin::new(&mut writer), &mut cx(), &[9; 500]);
    assert!(matches!(n, Poll::Ready(Ok(500))));
    assert_eq!(limiter.available_permits(), 50_000 - 4_500 - 20_000);
    assert!(futures_io::AsyncWrite::poll_close(Pin::new(&mut writer), &mut cx()).is_ready());
    assert_eq!(limiter.available_permits(), 50_000 - 5_000);
    // Cut to the largest request.
    let mut small = ThrottledWriter::with_max_chunk(Vec::new(), limiter.clone(), 1000)
        .with_reservation(1 << 20);
    let n = Pin::new(&mut small).poll_write(&mut cx(), &[1; 10]);
    assert!(matches!(n, Poll::Ready(Ok(10))));
    assert_eq!(limiter.available_permits(), 50_000 - 5_000 - 1000);
    drop(small);
    assert_eq!(limiter.available_permits(), 50_000 - 5_010);
}
