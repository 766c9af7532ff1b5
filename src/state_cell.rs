//! The atomic cell that holds a rate limiter's packed state, written once for every core whose
//! state is one word: the two-layout word of the token bucket and the sliding window
//! ([`Packed`]), the one-layout word of GCRA and the sliding counter ([`Single`]), and what every
//! such core does with it besides deciding: close it, read and clear its queue flag, and take for
//! a waiter under the queue lock ([`StateCell`], [`CellCore`]).
//!
//! The states themselves (`Bucket`, `Header`, `Gcra`, `Counter`) stay pure: they know their
//! layouts ([`TwoLayouts`], [`OneLayout`]) and their two flags ([`Flagged`]), nothing of atomics.

use core::convert::Infallible;
use core::marker::PhantomData;

use crate::cas;
use crate::lease::Reason;
#[cfg(not(tollgate_cs_cells))]
use crate::sync::AtomicU128;
use crate::sync::AtomicU64;
use crate::wait::LockedTake;

/// The two flags every rate limiter's state carries.
pub(crate) trait Flagged: Copy {
    /// Closed: every decision refuses.
    fn closed(self) -> bool;
    /// Someone waits in the queue.
    fn waiters(self) -> bool;
    /// The same state with the queue flag set or cleared.
    fn with_waiters(self, waiters: bool) -> Self;
    /// The same state, closed.
    fn close(self) -> Self;
}

/// [`Flagged`] for states with `closed` and `waiters` fields and `const` `with_waiters` and
/// `close` methods of their own.
macro_rules! flagged {
    ($($state:ty),*) => {$(
        impl $crate::state_cell::Flagged for $state {
            #[inline(always)]
            fn closed(self) -> bool {
                self.closed
            }
            #[inline(always)]
            fn waiters(self) -> bool {
                self.waiters
            }
            #[inline(always)]
            fn with_waiters(self, waiters: bool) -> Self {
                <$state>::with_waiters(self, waiters)
            }
            #[inline(always)]
            fn close(self) -> Self {
                <$state>::close(self)
            }
        }
    )*};
}
pub(crate) use flagged;

/// A decision's refusal: whether it was because the limiter is closed (else the permits were
/// short).
pub(crate) trait Refusal {
    fn is_closed(&self) -> bool;
}

/// [`Refusal`] for `Denied` enums with a `Closed` variant.
macro_rules! refusal {
    ($($denied:ty),*) => {$(
        impl $crate::state_cell::Refusal for $denied {
            #[inline(always)]
            fn is_closed(&self) -> bool {
                matches!(self, Self::Closed)
            }
        }
    )*};
}
pub(crate) use refusal;

/// An atomic cell of a [`Flagged`] state: loads it whole and runs a [`cas::transition`] over
/// it, unpacked. The rest is provided, once for every core.
pub(crate) trait StateCell {
    type State: Flagged;

    fn load(&self) -> Self::State;

    /// [`cas::transition`] over the unpacked state: `decide` returns the new state (nothing is
    /// written when it equals the current one) or an error (nothing is written). Returns the
    /// state the decision was made on.
    fn transition<T, E>(
        &self,
        decide: impl FnMut(Self::State) -> Result<(Self::State, T), E>,
    ) -> Result<(Self::State, T), E>;

    /// Writes `f` of the state, whatever it is; returns the state before.
    #[inline]
    fn update(&self, mut f: impl FnMut(Self::State) -> Self::State) -> Self::State {
        let Ok((before, ())) = self.transition(|s| Ok::<_, Infallible>((f(s), ())));
        before
    }

    /// Under the queue lock: runs `take` (a transition that ignores the queue flag and, on a
    /// grant, returns the new state and the grant's stamp). Short of permits, sets the queue
    /// flag in the same write when `flag_if_short`. `Ok(None)` short, `Err` closed.
    #[inline]
    fn take_queued<D: Refusal>(
        &self,
        flag_if_short: bool,
        mut take: impl FnMut(Self::State) -> Result<(Self::State, u64), D>,
    ) -> LockedTake {
        self.transition(|s| match take(s) {
            Ok((next, stamp)) => Ok((next, Some(stamp))),
            Err(d) if d.is_closed() => Err(&Reason::Closed),
            Err(_) if flag_if_short => Ok((s.with_waiters(true), None)),
            Err(_) => Ok((s, None)),
        })
        .map(|(_, taken)| taken)
    }
}

/// A core whose whole decision state is one [`StateCell`]: closing it and its queue flag,
/// provided once. (The sliding log, whose state is a ring behind a lock, has methods of its own
/// with these names.)
pub(crate) trait CellCore {
    type Cell: StateCell;

    fn cell(&self) -> &Self::Cell;

    /// Marks the state closed (the caller then drains the queue).
    fn close(&self) {
        self.cell().update(Flagged::close);
    }

    fn is_closed(&self) -> bool {
        self.cell().load().closed()
    }

    /// Whether the queue flag is set (anyone waits).
    fn has_waiters(&self) -> bool {
        self.cell().load().waiters()
    }

    fn clear_waiters(&self) {
        self.cell().update(|s| s.with_waiters(false));
    }
}

/// A state with two packed layouts: 64 bits with a field `width` chosen at creation, and 128.
/// (Unused on 32-bit MCUs, where [`Packed`] keeps the state unpacked.)
#[cfg_attr(tollgate_cs_cells, allow(dead_code))]
pub(crate) trait TwoLayouts: Flagged {
    fn pack64(self, width: u32) -> u64;
    fn unpack64(w: u64, width: u32) -> Self;
    fn pack(self) -> u128;
    fn unpack(w: u128) -> Self;
}

/// [`TwoLayouts`] from a state's `const` methods of the same names.
macro_rules! two_layouts {
    ($state:ty) => {
        impl $crate::state_cell::TwoLayouts for $state {
            #[inline(always)]
            fn pack64(self, width: u32) -> u64 {
                <$state>::pack64(self, width)
            }
            #[inline(always)]
            fn unpack64(w: u64, width: u32) -> Self {
                <$state>::unpack64(w, width)
            }
            #[inline(always)]
            fn pack(self) -> u128 {
                <$state>::pack(self)
            }
            #[inline(always)]
            fn unpack(w: u128) -> Self {
                <$state>::unpack(w)
            }
        }
    };
}
pub(crate) use two_layouts;

/// The atomic word of a [`TwoLayouts`] state: the native 64-bit layout when every reachable
/// state fits it (the field width is chosen at creation), else 128 bits. Both hold the same
/// state; every update goes through [`cas::transition`].
///
/// On targets without native 64-bit atomics (32-bit MCUs) the state is kept unpacked behind a
/// critical section: a packed word would be no cheaper there (a 64-bit "atomic" is a critical
/// section too) and its packing, its 128-bit layout and any quick path would only add code.
#[derive(Debug)]
pub(crate) enum Packed<S: Copy> {
    /// The 64-bit layout, with a field of `width` bits, in the low bits of the word under
    /// `mask` (kept beside the width, in what would be the enum's padding: unpacking the field
    /// is then one `and`, not four instructions that build the mask from the width).
    #[cfg(not(tollgate_cs_cells))]
    Narrow {
        word: AtomicU64,
        width: u32,
        mask: u64,
    },
    /// The 128-bit layout.
    #[cfg(not(tollgate_cs_cells))]
    Wide(AtomicU128, PhantomData<fn() -> S>),
    /// The state unpacked, behind a critical section.
    #[cfg(tollgate_cs_cells)]
    Whole(crate::sync::CsAtomic<S>),
}

/// A [`Packed`] word of `$state` (an expression), in the 64-bit layout of the field width
/// `$width: Option<u32>` when given, else 128 bits (`const` where the atomics allow it).
macro_rules! packed {
    ($state:expr, $width:expr) => {{
        #[cfg(not(tollgate_cs_cells))]
        let word = match $width {
            Some(width) => $crate::state_cell::Packed::Narrow {
                word: $crate::sync::AtomicU64::new($state.pack64(width)),
                width,
                mask: (1u64 << width) - 1,
            },
            None => $crate::state_cell::Packed::Wide(
                $crate::sync::AtomicU128::new($state.pack()),
                ::core::marker::PhantomData,
            ),
        };
        #[cfg(tollgate_cs_cells)]
        let word = {
            let _: Option<u32> = $width;
            $crate::state_cell::Packed::Whole($crate::sync::CsAtomic::new($state))
        };
        word
    }};
}
pub(crate) use packed;

impl<S: TwoLayouts> Packed<S> {
    /// The largest value the layout's field holds (a limit may not be raised past it).
    pub(crate) fn max_field(&self) -> u32 {
        match self {
            #[cfg(not(tollgate_cs_cells))]
            Packed::Narrow { mask, .. } => u32::try_from(*mask).unwrap_or(u32::MAX),
            _ => u32::MAX,
        }
    }

    /// The 128-bit word, for a quick path (none on 32-bit MCUs).
    #[inline(always)]
    #[cfg(not(tollgate_cs_cells))]
    pub(crate) fn wide(&self) -> Option<&AtomicU128> {
        match self {
            Packed::Wide(word, _) => Some(word),
            Packed::Narrow { .. } => None,
        }
    }

    /// The 64-bit word and its field width, for a quick path (none on 32-bit MCUs).
    #[inline(always)]
    pub(crate) fn narrow(&self) -> Option<(&AtomicU64, u32)> {
        self.narrow_masked().map(|(word, width, _)| (word, width))
    }

    /// [`narrow`](Self::narrow), with the mask of the low field (`2^width - 1`).
    #[inline(always)]
    pub(crate) fn narrow_masked(&self) -> Option<(&AtomicU64, u32, u64)> {
        match self {
            #[cfg(not(tollgate_cs_cells))]
            Packed::Narrow { word, width, mask } => Some((word, *width, *mask)),
            _ => None,
        }
    }
}

impl<S: TwoLayouts> StateCell for Packed<S>
where
    S: Eq,
{
    type State = S;

    #[inline]
    fn load(&self) -> S {
        match self {
            #[cfg(not(tollgate_cs_cells))]
            Packed::Narrow { word, width, .. } => S::unpack64(cas::Word::load(word), *width),
            #[cfg(not(tollgate_cs_cells))]
            Packed::Wide(word, _) => S::unpack(cas::Word::load(word)),
            #[cfg(tollgate_cs_cells)]
            Packed::Whole(cell) => cas::Word::load(cell),
        }
    }

    #[inline(always)]
    #[cfg_attr(tollgate_cs_cells, allow(unused_mut))]
    fn transition<T, E>(
        &self,
        mut decide: impl FnMut(S) -> Result<(S, T), E>,
    ) -> Result<(S, T), E> {
        match self {
            #[cfg(not(tollgate_cs_cells))]
            Packed::Narrow { word, width, .. } => {
                let width = *width;
                cas::transition(word, |w| {
                    decide(S::unpack64(w, width)).map(|(s, t)| (s.pack64(width), t))
                })
                .map(|(w, t)| (S::unpack64(w, width), t))
            }
            #[cfg(not(tollgate_cs_cells))]
            Packed::Wide(word, _) => {
                cas::transition(word, |w| decide(S::unpack(w)).map(|(s, t)| (s.pack(), t)))
                    .map(|(w, t)| (S::unpack(w), t))
            }
            #[cfg(tollgate_cs_cells)]
            Packed::Whole(cell) => cas::transition(cell, decide),
        }
    }
}

/// A state with one packed layout in a word of type `Raw`.
pub(crate) trait OneLayout: Flagged {
    type Raw;
    fn pack(self) -> Self::Raw;
    fn unpack(w: Self::Raw) -> Self;
}

/// [`OneLayout`] from a state's `const` `pack` and `unpack` of the raw type `$raw`.
macro_rules! one_layout {
    ($state:ty, $raw:ty) => {
        impl $crate::state_cell::OneLayout for $state {
            type Raw = $raw;
            #[inline(always)]
            fn pack(self) -> $raw {
                <$state>::pack(self)
            }
            #[inline(always)]
            fn unpack(w: $raw) -> Self {
                <$state>::unpack(w)
            }
        }
    };
}
pub(crate) use one_layout;

/// The atomic word `A` of a [`OneLayout`] state `S`. Quick paths read and swap the raw word
/// ([`raw`](Self::raw)); everything else goes through [`StateCell`].
#[derive(Debug)]
pub(crate) struct Single<A, S> {
    word: A,
    state: PhantomData<fn() -> S>,
}

impl<A, S> Single<A, S> {
    /// The cell of a word already holding a packed state.
    pub(crate) const fn new(word: A) -> Self {
        Self {
            word,
            state: PhantomData,
        }
    }

    /// The raw atomic word.
    #[inline(always)]
    pub(crate) fn raw(&self) -> &A {
        &self.word
    }
}

impl<A: cas::Word, S: OneLayout<Raw = A::Value>> StateCell for Single<A, S> {
    type State = S;

    #[inline]
    fn load(&self) -> S {
        S::unpack(self.word.load())
    }

    #[inline(always)]
    fn transition<T, E>(
        &self,
        mut decide: impl FnMut(S) -> Result<(S, T), E>,
    ) -> Result<(S, T), E> {
        cas::transition(&self.word, |w| {
            decide(S::unpack(w)).map(|(s, t)| (s.pack(), t))
        })
        .map(|(w, t)| (S::unpack(w), t))
    }
}

/// A core's state word, in one line: [`Flagged`] for its state, [`Refusal`] for its `Denied`,
/// and its layouts — `one_layout!` in a word of `$raw` bits, or `two_layouts!` (64 bits when the
/// configuration fits, else 128).
macro_rules! state_word {
    ($state:ty, $denied:ty, $raw:ty) => {
        $crate::state_cell::flagged!($state);
        $crate::state_cell::refusal!($denied);
        $crate::state_cell::one_layout!($state, $raw);
    };
    ($state:ty, $denied:ty) => {
        $crate::state_cell::flagged!($state);
        $crate::state_cell::refusal!($denied);
        $crate::state_cell::two_layouts!($state);
    };
}
pub(crate) use state_word;
