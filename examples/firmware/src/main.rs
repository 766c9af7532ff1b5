//! A SysTick interrupt handler and the main loop share a `static` token bucket, a `static`
//! concurrency limiter, and a `static` fixed window and concurrency limiter without a wait queue
//! (`NoQueue`), built in constants with `at_epoch` / `at_epoch_without_queue`.
//!
//! Run in QEMU (LM3S6965, Cortex-M3): `cargo run --release` from this directory. The SysTick
//! handler advances the clock and takes permits from the same limiters that the main loop
//! hammers; at the end the program checks that the bucket and the window never admitted more than
//! their limits plus what time brought, that the concurrency limiters never had more than their
//! limits out (the one without a queue is lowered and raised under held leases, so that its
//! releases pay a debt on the slow path while the handler races them), and that every permit
//! came back. It exits through semihosting with status 0 on success, 1 on failure.
#![no_std]
#![no_main]

use core::sync::atomic::{AtomicU32, Ordering};
use core::time::Duration;

use cortex_m::peripheral::syst::SystClkSource;
use cortex_m_rt::{entry, exception};
use cortex_m_semihosting::{debug, hprintln};
use panic_semihosting as _;
use tollgate::{
    Clock, ConcurrencyLimiter, ConcurrencyOptions, FixedWindowLimiter, FixedWindowOptions, Instant,
    Limiter, NoQueue, TokenBucketLimiter, TokenBucketOptions,
};

/// SysTick reload value: an interrupt every `PERIOD` core cycles (`FIRMWARE_SYSTICK_PERIOD` at
/// build time).
const PERIOD: u32 = parse(option_env!("FIRMWARE_SYSTICK_PERIOD"), 400);
/// Main-loop iterations (`FIRMWARE_ITERATIONS` at build time).
const ITERATIONS: u32 = parse(option_env!("FIRMWARE_ITERATIONS"), 200_000);

/// A decimal number from a build-time variable, or `default`.
const fn parse(text: Option<&str>, default: u32) -> u32 {
    let Some(text) = text else { return default };
    let bytes = text.as_bytes();
    let mut value = 0u32;
    let mut i = 0;
    while i < bytes.len() {
        assert!(bytes[i].is_ascii_digit(), "not a decimal number");
        value = value * 10 + (bytes[i] - b'0') as u32;
        i += 1;
    }
    value
}
/// One SysTick tick is one millisecond of limiter time.
const TICK_NS: u64 = 1_000_000;
const BUCKET_LIMIT: u32 = 50;
const BUCKET_REFILL: u32 = 5;
const BUCKET_PERIOD_TICKS: u64 = 10;
const PERMITS: u32 = 3;
const WINDOW_LIMIT: u32 = 7;
const GATE_LIMIT: u32 = 2;
const WINDOW_TICKS: u64 = 4;

/// Ticks counted by the SysTick handler.
static TICKS: AtomicU32 = AtomicU32::new(0);

/// The clock: SysTick ticks, in nanoseconds.
#[derive(Clone, Copy)]
struct TickClock;

impl Clock for TickClock {
    fn now(&self) -> Instant {
        Instant::from_nanos(u64::from(TICKS.load(Ordering::Acquire)) * TICK_NS)
    }
}

/// The two limiters, `static`s shared by the main loop and the SysTick handler.
static BUCKET: TokenBucketLimiter<TickClock> = TokenBucketLimiter::at_epoch(
    TokenBucketOptions::new(
        BUCKET_LIMIT,
        BUCKET_REFILL,
        Duration::from_nanos(BUCKET_PERIOD_TICKS * TICK_NS),
    ),
    TickClock,
);
static PERMITS_LIMITER: ConcurrencyLimiter<TickClock> =
    ConcurrencyLimiter::at_epoch(ConcurrencyOptions::new(PERMITS), TickClock);
/// A window with no wait queue: `try_acquire` only, and none of the queue's code.
static WINDOW: FixedWindowLimiter<TickClock, NoQueue> = FixedWindowLimiter::at_epoch_without_queue(
    FixedWindowOptions::new(WINDOW_LIMIT, Duration::from_nanos(WINDOW_TICKS * TICK_NS)),
    TickClock,
);
/// A concurrency limiter with no wait queue: `try_acquire` and the release on drop, and none of
/// the queue's code.
static GATE: ConcurrencyLimiter<TickClock, NoQueue> =
    ConcurrencyLimiter::at_epoch_without_queue(ConcurrencyOptions::new(GATE_LIMIT), TickClock);
/// Permits of `GATE` held right now (never more than are), and the most ever held.
static GATE_HELD: AtomicU32 = AtomicU32::new(0);
static GATE_MAX_HELD: AtomicU32 = AtomicU32::new(0);

/// Takes one permit of `GATE` and gives it back.
fn gate() {
    if let Ok(lease) = GATE.try_acquire(1) {
        let now = GATE_HELD.fetch_add(1, Ordering::AcqRel) + 1;
        GATE_MAX_HELD.fetch_max(now, Ordering::AcqRel);
        GATE_HELD.fetch_sub(1, Ordering::AcqRel);
        drop(lease);
    }
}

/// Both permits of `GATE` out, its limit lowered to 1 under them (1 owed), then the leases given
/// back around a raise to the full limit: the first release pays the debt on the slow path (a
/// critical section), while the handler takes and releases whatever is free.
fn cycle_gate() {
    let (Ok(a), Ok(b)) = (GATE.try_acquire(1), GATE.try_acquire(1)) else {
        return;
    };
    let now = GATE_HELD.fetch_add(2, Ordering::AcqRel) + 2;
    GATE_MAX_HELD.fetch_max(now, Ordering::AcqRel);
    GATE.reconfigure(ConcurrencyOptions::new(1)).unwrap();
    GATE_HELD.fetch_sub(1, Ordering::AcqRel);
    drop(a);
    GATE.reconfigure(ConcurrencyOptions::new(GATE_LIMIT))
        .unwrap();
    GATE_HELD.fetch_sub(1, Ordering::AcqRel);
    drop(b);
}

/// Permits the window granted, to either side.
static WINDOW_TAKEN: AtomicU32 = AtomicU32::new(0);

fn window() {
    if let Ok(lease) = WINDOW.try_acquire(1) {
        WINDOW_TAKEN.fetch_add(1, Ordering::AcqRel);
        lease.forget();
    }
}

/// Tokens taken by either side, permits held right now, the most ever held, and decisions made
/// in the handler.
static TAKEN: AtomicU32 = AtomicU32::new(0);
static HELD: AtomicU32 = AtomicU32::new(0);
static MAX_HELD: AtomicU32 = AtomicU32::new(0);
static IRQ_DECISIONS: AtomicU32 = AtomicU32::new(0);
static IRQ_ADMITTED: AtomicU32 = AtomicU32::new(0);

fn hold() -> bool {
    match PERMITS_LIMITER.try_acquire(1) {
        Ok(lease) => {
            let now = HELD.fetch_add(1, Ordering::AcqRel) + 1;
            MAX_HELD.fetch_max(now, Ordering::AcqRel);
            HELD.fetch_sub(1, Ordering::AcqRel);
            drop(lease);
            true
        }
        Err(_) => false,
    }
}

#[entry]
fn main() -> ! {
    let mut cp = cortex_m::Peripherals::take().unwrap();
    cp.SYST.set_clock_source(SystClkSource::External);
    cp.SYST.set_reload(PERIOD);
    cp.SYST.clear_current();
    cp.SYST.enable_counter();
    cp.SYST.enable_interrupt();

    let mut main_admitted = 0u32;
    let mut main_held = 0u32;
    for i in 0..ITERATIONS {
        if let Ok(lease) = BUCKET.try_acquire(1) {
            TAKEN.fetch_add(1, Ordering::AcqRel);
            main_admitted += 1;
            lease.forget();
        }
        if hold() {
            main_held += 1;
        }
        window();
        gate();
        if i % 16 == 0 {
            cycle_gate();
        }
    }
    cp.SYST.disable_interrupt();
    let ticks = u64::from(TICKS.load(Ordering::Acquire));

    let taken = TAKEN.load(Ordering::Acquire);
    let budget = u64::from(BUCKET_LIMIT) + u64::from(BUCKET_REFILL) * (ticks / BUCKET_PERIOD_TICKS);
    let available = PERMITS_LIMITER.available_permits();
    let window_taken = WINDOW_TAKEN.load(Ordering::Acquire);
    let window_budget = u64::from(WINDOW_LIMIT) * (ticks / WINDOW_TICKS + 1);
    hprintln!(
        "SysTick every {} cycles, {} main-loop iterations",
        PERIOD,
        ITERATIONS
    );
    hprintln!(
        "ticks {}, interrupt decisions {} (admitted {}), main admitted {} tokens and held {} permits",
        ticks,
        IRQ_DECISIONS.load(Ordering::Acquire),
        IRQ_ADMITTED.load(Ordering::Acquire),
        main_admitted,
        main_held
    );
    hprintln!(
        "tokens taken {} of at most {}; permits held at most {} of {}; {} of {} free at the end",
        taken,
        budget,
        MAX_HELD.load(Ordering::Acquire),
        PERMITS,
        available,
        PERMITS
    );
    hprintln!(
        "window (no queue) granted {} of at most {}",
        window_taken,
        window_budget
    );
    let gate_stats = GATE.statistics();
    hprintln!(
        "concurrency (no queue): {} granted, {} refused, held at most {} of {}; {} of {} free at the end",
        gate_stats.total_successful,
        gate_stats.total_failed,
        GATE_MAX_HELD.load(Ordering::Acquire),
        GATE_LIMIT,
        GATE.available_permits(),
        GATE_LIMIT
    );
    let ok = u64::from(taken) <= budget
        && u64::from(window_taken) <= window_budget
        && window_taken > 0
        && MAX_HELD.load(Ordering::Acquire) <= PERMITS
        && available == u64::from(PERMITS)
        && IRQ_DECISIONS.load(Ordering::Acquire) > 0
        && GATE_MAX_HELD.load(Ordering::Acquire) <= GATE_LIMIT
        && GATE.available_permits() == u64::from(GATE_LIMIT)
        && GATE.options().permit_limit == GATE_LIMIT
        && gate_stats.total_successful > 0;
    hprintln!("{}", if ok { "PASS" } else { "FAIL" });
    debug::exit(if ok {
        debug::EXIT_SUCCESS
    } else {
        debug::EXIT_FAILURE
    });
    loop {
        cortex_m::asm::wfi();
    }
}

#[exception]
fn SysTick() {
    TICKS.fetch_add(1, Ordering::AcqRel);
    IRQ_DECISIONS.fetch_add(1, Ordering::AcqRel);
    if let Ok(lease) = BUCKET.try_acquire(1) {
        TAKEN.fetch_add(1, Ordering::AcqRel);
        IRQ_ADMITTED.fetch_add(1, Ordering::AcqRel);
        lease.forget();
    }
    hold();
    window();
    gate();
}
