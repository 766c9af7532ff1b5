//! What every program here shares: the run-time inputs and outputs the compiler cannot see
//! through, the clock (a `static` counter, one unit a microsecond), and a panic handler that
//! only loops, so an image holds what the program itself reaches.
#![no_std]

use core::sync::atomic::{AtomicU32, Ordering::Relaxed};
pub use tollgate;
use cortex_m as _; // its single-core critical section (interrupts masked)
use tollgate::{Clock, Instant};

/// The permits each call asks for: a count the compiler cannot see (set by a debugger, say).
/// Exported (`no_mangle`), so that the optimizer cannot assume that nothing else writes it: a
/// static that the program never stores is otherwise folded to its initial value, and every
/// program would measure a constant count of 1.
#[no_mangle]
pub static N: AtomicU32 = AtomicU32::new(1);
/// Where each answer goes: exported, so that its stores (and the answers they store) stay.
#[no_mangle]
pub static OUT: AtomicU32 = AtomicU32::new(0);
/// Microseconds, advanced by the main loop (a timer interrupt, in a real program).
pub static TICKS: AtomicU32 = AtomicU32::new(0);

/// The clock: [`TICKS`] microseconds.
#[derive(Clone, Copy)]
pub struct Tick;

impl Clock for Tick {
    #[inline]
    fn now(&self) -> Instant {
        Instant::from_nanos(u64::from(TICKS.load(Relaxed)) * 1_000)
    }
}

/// RAM of each queueless limiter on this target (thumbv7em), checked at compile time against
/// the sizes measured when these ceilings were set, so that none grows unnoticed. Issue 35's
/// target is 48 bytes for every rate limiter whose state is one 64-bit word and 32 for the
/// concurrency limiter; `benches/core-cost-notes.md` says where the bytes go. The token bucket
/// and the fixed window took 8 bytes more with their debt bound (issue 38: the floor beside the
/// refill, 4 bytes and 4 of padding). The concurrency limiter keeps no copy of its options and
/// no eager-dating flag on a 32-bit MCU (56 → 40 bytes).
const _: () = {
    use core::mem::size_of;
    use tollgate::*;
    assert!(size_of::<TokenBucketLimiter<Tick, NoQueue>>() <= 64);
    assert!(size_of::<FixedWindowLimiter<Tick, NoQueue>>() <= 64);
    assert!(size_of::<GcraLimiter<Tick, NoQueue>>() <= 72);
    assert!(size_of::<LeakyBucketMeter<Tick, NoQueue>>() <= 112);
    assert!(size_of::<SlidingCounterLimiter<Tick, NoQueue>>() <= 72);
    assert!(size_of::<ConcurrencyLimiter<Tick, NoQueue>>() <= 40);
};

/// The loop every program runs around its call: read the count, store the answer, tick.
#[inline(always)]
pub fn run(mut decide: impl FnMut(u32) -> bool) -> ! {
    loop {
        let n = N.load(Relaxed);
        OUT.store(decide(n) as u32, Relaxed);
        TICKS.fetch_add(1, Relaxed);
    }
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {}
}

/// A program that builds a `$ty` without a wait queue at run time from `$opts` (validated, the
/// `Result` unwrapped), asks it for a count read at run time, and drops the lease, in a loop.
#[macro_export]
macro_rules! runtime_program {
    ($ty:ident, $opts:expr) => {
        #[cortex_m_rt::entry]
        fn main() -> ! {
            #[allow(unused_imports)]
            use core::time::Duration;
            use $crate::tollgate::*;
            let l = $ty::without_queue($opts, $crate::Tick).unwrap();
            $crate::run(|n| l.try_acquire(n).is_ok())
        }
    };
}

/// The same program with the limiter a `static` built by a `const fn` (`at_epoch_without_queue`).
#[macro_export]
macro_rules! static_program {
    ($ty:ident, $opts:expr) => {
        #[allow(unused_imports)]
        use core::time::Duration;
        use $crate::tollgate::*;
        static L: $ty<$crate::Tick, NoQueue> = $ty::at_epoch_without_queue($opts, $crate::Tick);

        #[cortex_m_rt::entry]
        fn main() -> ! {
            $crate::run(|n| L.try_acquire(n).is_ok())
        }
    };
}
