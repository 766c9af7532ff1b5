//! The intrusive doubly linked list of waiters.
//!
//! A [`Waiter`] node lives inside its pinned `Acquire` future: queueing allocates nothing. The
//! list links nodes by raw pointer. Soundness rests on four rules, each kept by this module and
//! `super::future`:
//!
//! 1. **Only the lock holder touches a node's mutable part.** Every field a list operation
//!    writes (`prev`, `next`, `status`, `waker`) sits in an `UnsafeCell` reached only through
//!    `&mut List`, which exists only while the queue lock is held.
//! 2. **A linked node is alive and does not move.** A node is linked only through
//!    `Pin<&Waiter>`, and `Waiter` is `!Unpin`, so it stays put until dropped; the owning future's
//!    `Drop` takes the lock and unlinks the node before its memory goes away.
//! 3. **Status says whether a node is linked.** `Queued` ⇔ linked. Completing a node (granting or
//!    rejecting it) unlinks it in the same locked step.
//! 4. **A completed node belongs to its owner alone.** Completing a node ends with a release
//!    store of its `done` flag, after the last write any server makes to it; unlinked, no server
//!    reaches it again. So the owner, having seen `done` with an acquire load, reads its status
//!    without the lock ([`Waiter::completed`]): a granted future finishes without locking.

#![allow(unsafe_code)]

use core::cell::UnsafeCell;
use core::marker::PhantomPinned;
use core::pin::Pin;
use core::ptr::NonNull;
use core::task::Waker;

use crate::lease::Reason;
use crate::sync::{AtomicBool, Ordering};

/// Where a waiter stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// Not in any list yet (or removed by its owner).
    Idle,
    /// Linked, waiting.
    Queued,
    /// Unlinked and granted its permits; the stamp says when (for giving them back).
    Granted(u64),
    /// Unlinked and refused.
    Rejected(&'static Reason),
}

struct Links {
    prev: Option<NonNull<Waiter>>,
    next: Option<NonNull<Waiter>>,
    status: Status,
    waker: Option<Waker>,
}

/// A queue node: the permits a waiter asks for, and its links.
pub(crate) struct Waiter {
    permits: u32,
    /// Set (release) once the node is completed, after its last write by a server (rule 4).
    done: AtomicBool,
    links: UnsafeCell<Links>,
    _pinned: PhantomPinned,
}

// SAFETY: `links` is only read or written through `&mut List` (rule 1), i.e. by the thread holding
// the queue lock, or read by the owner once `done` says no server touches it any more (rule 4);
// `permits` is immutable and `done` atomic. So sharing or sending a `Waiter` between threads
// cannot race. `Waker` is `Send + Sync`.
unsafe impl Send for Waiter {}
// SAFETY: as above.
unsafe impl Sync for Waiter {}

impl Waiter {
    pub(crate) fn new(permits: u32) -> Self {
        Self {
            permits,
            done: AtomicBool::new(false),
            links: UnsafeCell::new(Links {
                prev: None,
                next: None,
                status: Status::Idle,
                waker: None,
            }),
            _pinned: PhantomPinned,
        }
    }

    pub(crate) const fn permits(&self) -> u32 {
        self.permits
    }

    /// The outcome of a completed waiter (granted or rejected), read by its owner without the
    /// lock; `None` while it has not been completed (it may be being completed right now: the
    /// owner then looks under the lock).
    #[inline]
    pub(crate) fn completed(self: Pin<&Self>) -> Option<Status> {
        if !self.done.load(Ordering::Acquire) {
            return None;
        }
        // SAFETY: `done` was set by `List::complete` with a release store after its last write
        // to this node, which it had just unlinked, and this acquire load saw it: every server
        // write happened before this read, and no server reaches the node again (rule 4). The
        // only other code touching `links` is the owner's own, on this thread (the caller holds
        // the pinned future), so nothing writes it concurrently. A plain copy through the raw
        // pointer: no reference to the links is created.
        Some(unsafe { (*self.links.get()).status })
    }
}

/// The list: head is the oldest waiter, tail the newest.
pub(crate) struct List {
    head: Option<NonNull<Waiter>>,
    tail: Option<NonNull<Waiter>>,
    /// Permits requested by the linked waiters.
    queued: u64,
}

// SAFETY: the list only holds pointers to `Waiter`s, which are `Send + Sync`; it is itself only
// reached through the queue lock.
unsafe impl Send for List {}

impl List {
    pub(crate) const fn new() -> Self {
        Self {
            head: None,
            tail: None,
            queued: 0,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_none()
    }

    /// Permits requested by the linked waiters.
    pub(crate) fn queued_permits(&self) -> u64 {
        self.queued
    }

    /// The oldest waiter.
    pub(crate) fn front(&self) -> Option<NonNull<Waiter>> {
        self.head
    }

    /// The newest waiter.
    pub(crate) fn back(&self) -> Option<NonNull<Waiter>> {
        self.tail
    }

    /// The permits a linked waiter asks for.
    #[inline]
    pub(crate) fn permits_of(&self, w: NonNull<Waiter>) -> u32 {
        // SAFETY: `w` came from this list, so it is linked and alive (rule 2); `permits` is
        // immutable, so reading it through a shared reference cannot race.
        unsafe { w.as_ref() }.permits
    }

    /// The oldest linked waiter asking for more than `limit` permits.
    pub(crate) fn first_over(&mut self, limit: u32) -> Option<NonNull<Waiter>> {
        let mut cur = self.head;
        while let Some(w) = cur {
            if self.permits_of(w) > limit {
                return Some(w);
            }
            cur = self.links(w).next;
        }
        None
    }

    /// The permits each linked waiter asks for, oldest first.
    pub(crate) fn requests(&mut self) -> impl Iterator<Item = u32> + '_ {
        let mut cur = self.head;
        core::iter::from_fn(move || {
            let w = cur?;
            cur = self.links(w).next;
            Some(self.permits_of(w))
        })
    }

    #[inline]
    fn links(&mut self, w: NonNull<Waiter>) -> &mut Links {
        // SAFETY: `w` is alive (rule 2: linked, or the pinned waiter of the caller's future), and
        // `&mut self` proves the lock is held (rule 1), so no other reference to its links exists
        // for the lifetime of the returned borrow, which is tied to `&mut self`.
        unsafe { &mut *w.as_ref().links.get() }
    }

    /// The status of the caller's own waiter.
    pub(crate) fn status(&mut self, w: Pin<&Waiter>) -> Status {
        self.links(NonNull::from(&*w)).status
    }

    /// Sets the waker to wake `w` with, unless the one it holds already wakes the same task.
    /// Returns the waker left over (the old one, or the unused new one): the caller drops it
    /// after unlocking, since dropping a waker runs code that may take this lock.
    #[must_use = "drop the returned waker after unlocking"]
    pub(crate) fn set_waker(&mut self, w: Pin<&Waiter>, waker: Waker) -> Option<Waker> {
        let links = self.links(NonNull::from(&*w));
        match &mut links.waker {
            Some(old) if old.will_wake(&waker) => Some(waker),
            slot => slot.replace(waker),
        }
    }

    /// Moves the waker out of a linked waiter (to wake it after unlocking). The waiter, once
    /// polled, sets a new one.
    pub(crate) fn take_waker(&mut self, w: NonNull<Waiter>) -> Option<Waker> {
        self.links(w).waker.take()
    }

    /// Whether the caller's waiter is `w`.
    pub(crate) fn is(w: Option<NonNull<Waiter>>, mine: Pin<&Waiter>) -> bool {
        w == Some(NonNull::from(&*mine))
    }

    /// Links the caller's idle waiter at the tail.
    #[inline]
    pub(crate) fn push_back(&mut self, w: Pin<&Waiter>, waker: Waker) {
        let ptr = NonNull::from(&*w);
        let tail = self.tail;
        let links = self.links(ptr);
        debug_assert_eq!(links.status, Status::Idle);
        links.prev = tail;
        links.next = None;
        links.status = Status::Queued;
        links.waker = Some(waker);
        match tail {
            Some(t) => self.links(t).next = Some(ptr),
            None => self.head = Some(ptr),
        }
        self.tail = Some(ptr);
        self.queued += u64::from(w.permits);
    }

    #[inline]
    fn unlink(&mut self, w: NonNull<Waiter>) {
        let (prev, next) = {
            let l = self.links(w);
            (l.prev.take(), l.next.take())
        };
        match prev {
            Some(p) => self.links(p).next = next,
            None => self.head = next,
        }
        match next {
            Some(n) => self.links(n).prev = prev,
            None => self.tail = prev,
        }
        self.queued -= u64::from(self.permits_of_unlinked(w));
    }

    #[inline]
    fn permits_of_unlinked(&self, w: NonNull<Waiter>) -> u32 {
        // SAFETY: `w` is alive (it was linked a moment ago, under this lock); `permits` is
        // immutable.
        unsafe { w.as_ref() }.permits
    }

    /// Unlinks a queued waiter of this list and completes it with `status`; returns its waker.
    #[inline]
    pub(crate) fn complete(&mut self, w: NonNull<Waiter>, status: Status) -> Option<Waker> {
        debug_assert_eq!(self.links(w).status, Status::Queued);
        self.unlink(w);
        let links = self.links(w);
        links.status = status;
        let waker = links.waker.take();
        // SAFETY: `w` is alive (it was linked a moment ago, under this lock; rule 2). The store
        // comes after the last write to its links (rule 4); `done` is atomic.
        unsafe { w.as_ref() }.done.store(true, Ordering::Release);
        waker
    }

    /// The caller's waiter leaves: unlinked if still queued. Returns the status it had and its
    /// waker, which the caller drops after unlocking.
    #[must_use = "drop the returned waker after unlocking"]
    pub(crate) fn remove(&mut self, w: Pin<&Waiter>) -> (Status, Option<Waker>) {
        let ptr = NonNull::from(&*w);
        let status = self.links(ptr).status;
        if status == Status::Queued {
            self.unlink(ptr);
        }
        let links = self.links(ptr);
        links.status = Status::Idle;
        (status, links.waker.take())
    }
}

impl core::fmt::Debug for List {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("List")
            .field("queued", &self.queued)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::pin::pin;

    fn noop() -> Waker {
        Waker::noop().clone()
    }

    #[test]
    fn push_complete_remove_in_any_order() {
        let mut list = List::new();
        let a = pin!(Waiter::new(1));
        let b = pin!(Waiter::new(2));
        let c = pin!(Waiter::new(3));
        for w in [a.as_ref(), b.as_ref(), c.as_ref()] {
            list.push_back(w, noop());
        }
        assert_eq!(list.queued_permits(), 6);
        assert_eq!(list.permits_of(list.front().unwrap()), 1);
        assert_eq!(list.permits_of(list.back().unwrap()), 3);
        // Remove the middle one as its owner would on drop.
        assert_eq!(list.remove(b.as_ref()).0, Status::Queued);
        assert_eq!(list.queued_permits(), 4);
        // Complete the head, then the tail.
        let head = list.front().unwrap();
        assert_eq!(b.as_ref().completed(), None);
        assert!(list.complete(head, Status::Granted(7)).is_some());
        assert_eq!(list.status(a.as_ref()), Status::Granted(7));
        assert_eq!(a.as_ref().completed(), Some(Status::Granted(7)));
        let tail = list.back().unwrap();
        list.complete(tail, Status::Rejected(&Reason::Evicted));
        assert!(list.is_empty());
        assert_eq!(list.queued_permits(), 0);
        assert_eq!(list.status(c.as_ref()), Status::Rejected(&Reason::Evicted));
        // Removing a completed waiter leaves the list alone.
        assert_eq!(list.remove(a.as_ref()).0, Status::Granted(7));
        assert!(list.is_empty());
    }

    #[test]
    fn wakers_are_replaced_only_when_they_differ() {
        let mut list = List::new();
        let a = pin!(Waiter::new(0));
        list.push_back(a.as_ref(), noop());
        // The same task: the new clone is handed back unused.
        assert!(list.set_waker(a.as_ref(), noop()).is_some());
        let (status, waker) = list.remove(a.as_ref());
        assert_eq!(status, Status::Queued);
        assert!(waker.is_some());
    }
}
