//! loom models of the statistics cells (issue 26): the tally's lazily made directory and
//! buckets, reached through raw pointers (`src/stats/tally.rs`, the one place besides the wait
//! queue where `unsafe` is allowed). What can race: two threads' first counts making the
//! directory and the same bucket at once (one allocation wins, the other is freed, no count is
//! lost), counts in cells another thread is making, the totals read meanwhile (never more than
//! was counted, never a torn or freed line), a tally made compact while a first count runs, and
//! two first counts giving the tally its id (the key of the per-thread cache) at once.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use tollgate::__loom::LoomTally;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(3);
    }
    b.check(f);
}

/// Indices 2 and 3 share bucket 2: both threads' first counts race to make the directory and
/// that bucket; the main thread reads the totals meanwhile.
#[test]
fn first_counts_race_to_make_the_directory_and_a_bucket() {
    model(|| {
        let t = Arc::new(LoomTally::new());
        let a = {
            let t = t.clone();
            thread::spawn(move || {
                t.count(0, Some(2));
                t.count(1, Some(2));
            })
        };
        let b = {
            let t = t.clone();
            thread::spawn(move || t.count(0, Some(3)))
        };
        let (ok, ko) = t.totals();
        assert!(ok <= 2 && ko <= 1, "read more than was counted: {ok}, {ko}");
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(t.totals(), (2, 1));
    });
}

/// Threads in different buckets (0, 1) and one beyond the cells (the shared pair, counted with
/// `fetch_add`): every count is in the totals.
#[test]
fn cells_of_different_buckets_and_the_shared_pair_add_up() {
    model(|| {
        let t = Arc::new(LoomTally::new());
        let handles: Vec<_> = [Some(0), Some(1), None]
            .into_iter()
            .map(|index| {
                let t = t.clone();
                thread::spawn(move || {
                    t.count(1, index);
                    t.count(0, index);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(t.totals(), (3, 3));
    });
}

/// `make_compact` racing a first count: either the count made the directory first (and counts
/// in its cell) or the tally is compact (and it counts in the shared pair); no count is lost
/// either way, and a compact tally never makes cells.
#[test]
fn making_a_tally_compact_races_a_first_count() {
    model(|| {
        let t = Arc::new(LoomTally::new());
        let counter = {
            let t = t.clone();
            thread::spawn(move || {
                t.count(0, Some(1));
                t.count(0, Some(1));
            })
        };
        t.make_compact();
        t.count(1, Some(0));
        counter.join().unwrap();
        assert_eq!(t.totals(), (2, 1));
    });
}

/// Two threads' first counts race to give the tally its id (the per-thread cache's key): one
/// id wins, both see it, and it is never 0 (a tally without an id reads 0, and 0 is never
/// cached, so an entry can never match a tally that has no cells).
#[test]
fn first_counts_race_to_give_the_id() {
    model(|| {
        let t = Arc::new(LoomTally::new());
        assert_eq!(t.id(), 0);
        let handles: Vec<_> = [0, 1]
            .into_iter()
            .map(|index| {
                let t = t.clone();
                thread::spawn(move || {
                    t.count(0, Some(index));
                    t.id()
                })
            })
            .collect();
        let ids: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        assert!(ids[0] != 0 && ids[0] == ids[1], "{ids:?}");
        assert_eq!(t.id(), ids[0]);
        assert_eq!(t.totals(), (2, 0));
    });
}
