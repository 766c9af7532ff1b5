//! The [`on_granted`](crate::http::RateLimitingBuilder::on_granted) hook: what it sees of a
//! request every policy let through, and how the layer gathers it on the way.

use core::time::Duration;

use super::policy::{Key, RequestView};
use crate::quota::QuotaState;

/// A request that every policy of its way let through, as the
/// [`on_granted`](crate::http::RateLimitingBuilder::on_granted) hook sees it, before the inner
/// service runs. Borrowed: building it allocates nothing.
///
/// ```
/// # use std::{convert::Infallible, sync::{Arc, Mutex}, time::Duration};
/// use http::{Request, Response};
/// use tollgate::http::{Endpoint, Granted, Policy, RateLimiting};
/// use tollgate::FixedWindowOptions;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let per_minute = |n| Policy::fixed_window(FixedWindowOptions::new(n, Duration::from_secs(60))).unwrap();
/// let log = Arc::new(Mutex::new(Vec::new()));
/// let limits = RateLimiting::builder()
///     .global(per_minute(100))
///     .policy("search", per_minute(10))
///     .select(|req| if req.uri.path() == "/search" { Endpoint::Policy("search") } else { Endpoint::Default })
///     .rate_limit_headers(true) // the quota left is computed: the hook sees it too
///     .on_granted({
///         let log = log.clone();
///         move |g: &Granted<'_>| {
///             let by: Vec<String> = g.policies.iter().map(|p| {
///                 format!("{} ({} left)", p.policy, p.quota.map_or(0, |q| q.remaining))
///             }).collect();
///             log.lock().unwrap().push(format!("{} granted by {}", g.request.uri.path(), by.join(", ")));
///         }
///     })
///     .build()
///     .unwrap();
/// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
/// let app = limits.layer().layer(service_fn(hello));
/// for path in ["/", "/search"] {
///     app.clone().oneshot(Request::get(path).body(()).unwrap()).await.unwrap();
/// }
/// assert_eq!(*log.lock().unwrap(), [
///     "/ granted by global (99 left)",
///     "/search granted by global (98 left), search (9 left)",
/// ]);
/// # }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Granted<'a> {
    /// Each policy the request went through, in order: the global policy first, then its
    /// endpoint's (one or two).
    pub policies: &'a [PolicyGrant<'a>],
    /// The request.
    pub request: RequestView<'a>,
}

impl Granted<'_> {
    /// How long the request waited in queues, in all (`None`: it waited in none).
    ///
    /// ```
    /// # use std::{convert::Infallible, time::Duration};
    /// use http::{Request, Response};
    /// use tollgate::http::{Policy, RateLimiting};
    /// use tollgate::FixedWindowOptions;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let limits = RateLimiting::builder()
    ///     .global(Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap())
    ///     .on_granted(|g| assert_eq!(g.waited(), None)) // a policy that does not queue
    ///     .build()
    ///     .unwrap();
    /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
    /// let app = limits.layer().layer(service_fn(hello));
    /// app.oneshot(Request::new(())).await.unwrap();
    /// # }
    /// ```
    pub fn waited(&self) -> Option<Duration> {
        self.policies
            .iter()
            .filter_map(|p| p.waited)
            .reduce(|a, b| a.saturating_add(b))
    }
}

/// What one policy did for a [`Granted`] request.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct PolicyGrant<'a> {
    /// The policy's name (`"global"` for the global policy).
    pub policy: &'a str,
    /// The partition it charged (`None`: the request had no key and the policy let it
    /// through uncharged, [`MissingKey::Allow`](crate::http::MissingKey::Allow)). An
    /// unpartitioned policy's key is [`Key::GLOBAL`]; requests without a key sharing one
    /// partition have [`Key::MISSING`].
    pub key: Option<Key>,
    /// The permits it charged: 1, or the request's [cost](crate::http::Policy::cost); 0 for a
    /// cost of 0, a request let through without a key, or one it would have refused in
    /// shadow mode (`shadow_refused`).
    pub permits: u32,
    /// How long the request waited in its queue (`None`: it did not queue).
    pub waited: Option<Duration>,
    /// The partition's quota after the grant, when the layer computed it (quota headers on).
    pub quota: Option<QuotaState>,
    /// The policy is in shadow mode ([`Policy::shadow`](crate::http::Policy::shadow)) and
    /// would have refused the request: it charged nothing and let it through. (The
    /// [`on_rejected`](crate::http::RateLimitingBuilder::on_rejected) hook saw it too, with
    /// [`Rejected::shadow`](crate::http::Rejected::shadow) set.)
    pub shadow_refused: bool,
}

pub(super) type GrantHook = dyn Fn(&Granted<'_>) + Send + Sync;

/// What a [`Report`] needs of the layer to show a grant: its hook and its policies' names.
pub(super) trait Hooked {
    /// The `on_granted` hook, if set.
    fn hook(&self) -> Option<&GrantHook>;
    /// The name of policy `i`.
    fn policy_name(&self, i: usize) -> &str;
}

/// One policy's part of a grant, until the hook sees it.
#[derive(Clone, Copy)]
struct Entry {
    i: usize,
    key: Option<Key>,
    permits: u32,
    waited: Option<Duration>,
    quota: Option<QuotaState>,
    shadow_refused: bool,
}

/// What the walk through a request's policies notes down for the
/// [`on_granted`](crate::http::RateLimitingBuilder::on_granted) hook: nothing at all
/// (`()`, a layer without the hook: its calls compile to nothing), or a [`Report`].
pub(super) trait Record {
    /// The policy deciding now charges `permits` to `key`, if it grants.
    fn charged(&mut self, key: Option<Key>, permits: u32);
    /// Policy `i`, `plan[slot]`, granted what it charged, leaving `quota`.
    fn granted(&mut self, slot: usize, i: usize, quota: Option<QuotaState>);
    /// Policy `i`, `plan[slot]`, in shadow mode, would have refused: it charged nothing.
    fn shadow_refused(&mut self, slot: usize, i: usize, quota: Option<QuotaState>);
    /// What a request that goes on to wait carries (nothing, without the hook).
    fn into_report(self) -> Option<Box<Report>>;
    /// Every policy let the request through: the layer's hook, if set, sees it.
    fn done(&self, layer: &impl Hooked, view: &RequestView<'_>);
}

impl Record for () {
    #[inline(always)]
    fn charged(&mut self, _: Option<Key>, _: u32) {}
    #[inline(always)]
    fn granted(&mut self, _: usize, _: usize, _: Option<QuotaState>) {}
    #[inline(always)]
    fn shadow_refused(&mut self, _: usize, _: usize, _: Option<QuotaState>) {}
    #[inline(always)]
    fn into_report(self) -> Option<Box<Report>> {
        None
    }
    #[inline(always)]
    fn done(&self, _: &impl Hooked, _: &RequestView<'_>) {}
}

/// The grants of a request so far, for the hook (also carried by every waiting request: the
/// slow path).
#[derive(Default)]
pub(super) struct Report {
    entries: [Option<Entry>; 2],
    /// The key and permits of the decision in progress.
    charge: (Option<Key>, u32),
}

impl Report {
    /// The request waited `waited` in the queue of the policy of `slot` (noted after its
    /// grant or refusal).
    pub(super) fn waited(&mut self, slot: usize, waited: Duration) {
        if let Some(e) = self.entries[slot].as_mut() {
            e.waited = Some(waited);
        }
    }
}

impl Record for Report {
    fn charged(&mut self, key: Option<Key>, permits: u32) {
        self.charge = (key, permits);
    }

    fn granted(&mut self, slot: usize, i: usize, quota: Option<QuotaState>) {
        let (key, permits) = self.charge;
        self.entries[slot] = Some(Entry {
            i,
            key,
            permits,
            waited: None,
            quota,
            shadow_refused: false,
        });
    }

    fn shadow_refused(&mut self, slot: usize, i: usize, quota: Option<QuotaState>) {
        self.granted(slot, i, quota);
        if let Some(e) = self.entries[slot].as_mut() {
            e.permits = 0;
            e.shadow_refused = true;
        }
    }

    fn into_report(self) -> Option<Box<Report>> {
        Some(Box::new(self))
    }

    fn done(&self, layer: &impl Hooked, view: &RequestView<'_>) {
        let Some(hook) = layer.hook() else {
            return;
        };
        let seen = |e: &Option<Entry>| {
            e.map(|e| PolicyGrant {
                policy: layer.policy_name(e.i),
                key: e.key,
                permits: e.permits,
                waited: e.waited,
                quota: e.quota,
                shadow_refused: e.shadow_refused,
            })
        };
        let request = *view;
        match (seen(&self.entries[0]), seen(&self.entries[1])) {
            (Some(a), Some(b)) => hook(&Granted {
                policies: &[a, b],
                request,
            }),
            (Some(a), None) | (None, Some(a)) => hook(&Granted {
                policies: &[a],
                request,
            }),
            // No policy covered the request: nothing granted it.
            (None, None) => {}
        }
    }
}
