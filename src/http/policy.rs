//! Policies: a limiter, how requests are partitioned, and what a request without a key gets;
//! and [`PolicyLimiter`], the decision trait every policy goes through (the extension point for
//! an async, e.g. Redis-backed, limiter).

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::time::Duration;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::header::HeaderName;
use http::{Extensions, HeaderMap, Method, Uri};

use super::client_ip::{mask, ClientIp};
use crate::clock::Clock;
use crate::lease::{OwnedLease, Reason, Rejection};
use crate::limiter::{AcquireOwned, Replenishing};
use crate::partition::{
    Partition, PartitionConfig, PartitionKind, PartitionLease, PartitionLimiter, Partitioned,
};
use crate::quota::{Quota, QuotaState};
use crate::{
    ConcurrencyOptions, FixedWindowOptions, KeyedLimiter, OptionsError, SlidingWindowOptions,
    TokenBucketOptions,
};

/// The clock every built-in policy reads: shared, swappable (a `ManualClock` in tests).
///
/// ```
/// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
/// # use http::{Request, Response, StatusCode};
/// # use tollgate::http::*;
/// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
/// let clock = Arc::new(ManualClock::new());
/// let shared: SharedClock = clock.clone();
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(shared.now(), clock.now()); // one clock, seen through the alias
/// # use tollgate::Clock;
/// ```
pub type SharedClock = Arc<dyn Clock + Send + Sync>;

/// A request's partition key: an IP address (after prefix grouping) kept exactly, or any other
/// value kept as a 128-bit hash (SipHash-2-4 under fixed keys, so the same value names the same
/// partition in every process; the partition tables hash keys again under their own random
/// seeds). `Copy`, 17 bytes: storing one never allocates.
///
/// ```
/// use tollgate::http::Key;
///
/// assert_eq!(Key::from_bytes(b"alice"), Key::from_bytes(b"alice"));
/// assert_ne!(Key::from_bytes(b"alice"), Key::from_bytes(b"bob"));
/// assert_ne!(Key::ip("10.0.0.1".parse().unwrap()), Key::from_u64(1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    tag: u8,
    bytes: [u8; 16],
}

/// Two words and the tag: three writes of fixed width (the partition tables' hasher mixes one
/// word per write; a derived `Hash` would write a length and a byte slice).
impl core::hash::Hash for Key {
    #[inline]
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        let (lo, hi) = self.bytes.split_at(8);
        let word = |b: &[u8]| {
            let mut w = [0u8; 8];
            w.copy_from_slice(b);
            u64::from_le_bytes(w)
        };
        state.write_u64(word(lo));
        state.write_u64(word(hi));
        state.write_u8(self.tag);
    }
}

/// SipHash-2-4 of `bytes` under a fixed key: the same on every machine and Rust release, so a
/// [`Key::from_bytes`] names the same partition in every process (what a limit shared through
/// Redis needs). Two fixed keys give 128 bits; the partition tables hash a `Key` again with
/// their own random seed, so a fixed key here does not expose them to crafted collisions.
#[allow(deprecated)] // `SipHasher` is deprecated only in favour of the unspecified `DefaultHasher`.
fn stable_hash(bytes: &[u8], k0: u64, k1: u64) -> u64 {
    use core::hash::Hasher;
    let mut h = core::hash::SipHasher::new_with_keys(k0, k1);
    h.write(bytes);
    h.finish()
}

impl Key {
    /// The shared key of requests without one, under [`MissingKey::Shared`].
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// assert_eq!(Key::MISSING.to_string(), "00-00000000000000000000000000000000");
    /// assert_ne!(Key::MISSING, Key::GLOBAL);
    /// // A header policy: keyless requests share the MISSING partition.
    /// let by_header = KeyBy::with(|req| req.headers.get("x-api-key").map(|v| Key::from_bytes(v.as_bytes())));
    /// # let _ = by_header;
    /// ```
    pub const MISSING: Key = Key {
        tag: 0,
        bytes: [0; 16],
    };
    /// The key of unpartitioned policies.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// assert_eq!(Key::GLOBAL.to_string(), "01-00000000000000000000000000000000");
    /// // A custom PolicyLimiter behind an unpartitioned policy sees this key for every request.
    /// assert_ne!(Key::GLOBAL, Key::from_u64(0));
    /// ```
    pub const GLOBAL: Key = Key {
        tag: 1,
        bytes: [0; 16],
    };

    /// The key of an IP address (IPv4-mapped IPv6 addresses as their IPv4 address).
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// let v4 = Key::ip("192.0.2.1".parse().unwrap());
    /// let mapped = Key::ip("::ffff:192.0.2.1".parse().unwrap());
    /// assert_eq!(v4, mapped); // one client, one partition
    /// assert_eq!(v4.to_string(), "04-c0000201000000000000000000000000");
    /// ```
    pub fn ip(ip: IpAddr) -> Key {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Key::v4(v4),
            IpAddr::V6(v6) => Key {
                tag: 6,
                bytes: v6.octets(),
            },
        }
    }

    /// [`Key::ip`] of an IPv4 address.
    #[inline]
    pub(crate) fn v4(v4: std::net::Ipv4Addr) -> Key {
        let mut bytes = [0; 16];
        bytes[..4].copy_from_slice(&v4.octets());
        Key { tag: 4, bytes }
    }

    /// The key of any bytes: a header value, a user id, an API key. A 128-bit hash of them,
    /// stable across processes, machines and Rust releases (SipHash-2-4 under two fixed keys),
    /// so that servers sharing a limit through Redis agree on every key.
    ///
    /// ```
    /// use tollgate::http::Key;
    ///
    /// assert_eq!(Key::from_bytes(b"api-key-1"), Key::from_bytes(b"api-key-1"));
    /// assert_ne!(Key::from_bytes(b"api-key-1"), Key::from_bytes(b"api-key-2"));
    /// // The same text in every process:
    /// assert_eq!(Key::from_bytes(b"").to_string(), "02-7cfa464881a05aaaed2f770595ebe793");
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Key {
        let hi = stable_hash(bytes, 0x7461_6c6c_6761_7465, 0x6b65_7973_2d68_6921);
        let lo = stable_hash(bytes, 0x2d31_3238_2d62_6974, 0x7374_6162_6c65_2121);
        Key {
            tag: 2,
            bytes: ((u128::from(hi) << 64) | u128::from(lo)).to_be_bytes(),
        }
    }

    /// The key of a number (a tenant id, a shard).
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// #[derive(Clone)]
    /// struct Tenant(u64); // set by your authentication layer
    /// let by_tenant = KeyBy::with(|req| req.extensions.get::<Tenant>().map(|t| Key::from_u64(t.0)));
    /// assert_eq!(Key::from_u64(7), Key::from_u64(7));
    /// assert_ne!(Key::from_u64(7), Key::from_bytes(&7u64.to_be_bytes())); // kinds never collide
    /// # let _ = by_tenant;
    /// ```
    pub fn from_u64(n: u64) -> Key {
        let mut bytes = [0; 16];
        bytes[..8].copy_from_slice(&n.to_be_bytes());
        Key { tag: 3, bytes }
    }
}

/// The key's stable text: its kind and its 16 bytes in hex, e.g.
/// `04-0a000001000000000000000000000000` for 10.0.0.1 (what a Redis-backed policy uses as the
/// partition's name).
///
/// ```
/// use tollgate::http::Key;
///
/// let k = Key::ip("10.0.0.1".parse().unwrap());
/// assert_eq!(k.to_string(), "04-0a000001000000000000000000000000");
/// ```
impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02x}-", self.tag)?;
        for b in self.bytes {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// What a key extractor sees of a request: borrowed, nothing copied.
///
/// ```
/// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
/// # use http::{Request, Response, StatusCode};
/// # use tollgate::http::*;
/// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
/// # fn from(ip: &str) -> Request<()> {
/// #     let mut req = Request::new(());
/// #     req.extensions_mut().insert(SocketAddr::new(ip.parse().unwrap(), 443));
/// #     req
/// # }
/// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
/// let by_path_tenant = |req: &RequestView<'_>| {
///     // /t/{tenant}/...: the tenant from the path
///     let tenant = req.uri.path().strip_prefix("/t/")?.split('/').next()?;
///     Some(Key::from_bytes(tenant.as_bytes()))
/// };
/// let req = path("/t/acme/orders");
/// assert_eq!(by_path_tenant(&RequestView::of(&req)), Some(Key::from_bytes(b"acme")));
/// assert_eq!(by_path_tenant(&RequestView::of(&path("/health"))), None);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct RequestView<'a> {
    /// The method.
    pub method: &'a Method,
    /// The URI.
    pub uri: &'a Uri,
    /// The headers.
    pub headers: &'a HeaderMap,
    /// The extensions (axum's `ConnectInfo`, `MatchedPath`, your authentication's user).
    pub extensions: &'a Extensions,
}

impl<'a> RequestView<'a> {
    /// A view of `req`.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
    /// let mut req = path("/orders");
    /// req.headers_mut().insert("x-api-key", "k-123".parse().unwrap());
    /// let view = RequestView::of(&req);
    /// assert_eq!(view.uri.path(), "/orders");
    /// assert_eq!(view.method, http::Method::GET);
    /// assert_eq!(view.headers["x-api-key"], "k-123");
    /// ```
    pub fn of<B>(req: &'a http::Request<B>) -> Self {
        Self {
            method: req.method(),
            uri: req.uri(),
            headers: req.headers(),
            extensions: req.extensions(),
        }
    }
}

type ExtractFn = dyn Fn(&RequestView<'_>) -> Option<Key> + Send + Sync;

/// How a policy partitions requests: each key gets its own limiter.
///
/// ```
/// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
/// # use http::{Request, Response, StatusCode};
/// # use tollgate::http::*;
/// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
/// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
/// #     use tower::{Layer, ServiceExt};
/// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
/// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
/// # }
/// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
/// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// let limits = RateLimiting::builder()
///     .policy("per-key", two_a_minute().partition_by(KeyBy::header("x-api-key".parse().unwrap())))
///     .build()
///     .unwrap();
/// let layer = limits.policy_layer("per-key").unwrap();
/// let with_key = |k: &str| { let mut r = path("/"); r.headers_mut().insert("x-api-key", k.parse().unwrap()); r };
/// for _ in 0..2 { let _ = call(&layer, with_key("a")); }
/// assert_eq!(call(&layer, with_key("a")).status(), StatusCode::TOO_MANY_REQUESTS);
/// assert_eq!(call(&layer, with_key("b")).status(), 200);
/// ```
#[derive(Clone)]
pub enum KeyBy {
    /// One limiter for every request.
    Global,
    /// The client's IP address (see the layer's [`ClientIp`] setting), IPv6 addresses grouped
    /// by their first `v6_prefix` bits (a client owns a whole /64, so /64 is the default:
    /// rotating addresses inside it gains nothing).
    ClientIp {
        /// The IPv6 prefix length that forms one key (1..=128).
        v6_prefix: u8,
    },
    /// A header's value (e.g. an API key). No header: no key.
    Header(HeaderName),
    /// Your function of the request: an authenticated identity from the extensions, a tenant
    /// from the path, anything. `None`: no key.
    With(Arc<ExtractFn>),
}

impl KeyBy {
    /// The client IP, IPv6 grouped by /64.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
    /// #     use tower::{Layer, ServiceExt};
    /// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
    /// # }
    /// # fn from(ip: &str) -> Request<()> {
    /// #     let mut req = Request::new(());
    /// #     req.extensions_mut().insert(SocketAddr::new(ip.parse().unwrap(), 443));
    /// #     req
    /// # }
    /// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let limits = RateLimiting::builder().global(two_a_minute().partition_by(KeyBy::CLIENT_IP)).build().unwrap();
    /// let _ = call(&limits.layer(), from("2001:db8:1:2::1"));
    /// let _ = call(&limits.layer(), from("2001:db8:1:2::ffff")); // same /64: same client
    /// assert_eq!(call(&limits.layer(), from("2001:db8:1:2::7")).status(), StatusCode::TOO_MANY_REQUESTS);
    /// assert_eq!(call(&limits.layer(), from("2001:db8:1:3::1")).status(), 200); // another /64
    /// ```
    pub const CLIENT_IP: KeyBy = KeyBy::ClientIp { v6_prefix: 64 };

    /// Partition by `f(request)`.
    ///
    /// ```
    /// use tollgate::http::{Key, KeyBy};
    ///
    /// #[derive(Clone)]
    /// struct User { id: u64 }
    /// // Set by your authentication layer, which runs before the rate limiter.
    /// let by_user = KeyBy::with(|req| req.extensions.get::<User>().map(|u| Key::from_u64(u.id)));
    /// # let _ = by_user;
    /// ```
    pub fn with(f: impl Fn(&RequestView<'_>) -> Option<Key> + Send + Sync + 'static) -> KeyBy {
        KeyBy::With(Arc::new(f))
    }

    /// Partition by header `name`.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
    /// #     use tower::{Layer, ServiceExt};
    /// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
    /// # }
    /// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
    /// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let limits = RateLimiting::builder()
    ///     .global(two_a_minute().partition_by(KeyBy::header("x-api-key".parse().unwrap())).when_missing_key(MissingKey::Reject))
    ///     .build()
    ///     .unwrap();
    /// let mut req = path("/");
    /// req.headers_mut().insert("x-api-key", "k-1".parse().unwrap());
    /// assert_eq!(call(&limits.layer(), req).status(), 200);
    /// assert_eq!(call(&limits.layer(), path("/")).status(), StatusCode::TOO_MANY_REQUESTS); // no key
    /// ```
    pub fn header(name: HeaderName) -> KeyBy {
        KeyBy::Header(name)
    }

    pub(crate) fn extract(&self, req: &RequestView<'_>, ip: &ClientIp) -> Option<Key> {
        match self {
            KeyBy::Global => Some(Key::GLOBAL),
            KeyBy::ClientIp { v6_prefix } => {
                let peer = ClientIp::peer_socket(req.extensions)?;
                // The commonest case, direct: an IPv4 peer, no proxy trusted.
                if let (SocketAddr::V4(a), true) = (peer, ip.trusts_nobody()) {
                    return Some(Key::v4(*a.ip()));
                }
                match ip.resolve(Some(peer.ip()), req.headers)? {
                    // Already canonical: no mask, no second `to_canonical`.
                    IpAddr::V4(v4) => Some(Key::v4(v4)),
                    v6 => Some(Key::ip(mask(v6, *v6_prefix))),
                }
            }
            KeyBy::Header(name) => req.headers.get(name).map(|v| Key::from_bytes(v.as_bytes())),
            KeyBy::With(f) => f(req),
        }
    }
}

impl core::fmt::Debug for KeyBy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            KeyBy::Global => f.write_str("Global"),
            KeyBy::ClientIp { v6_prefix } => write!(f, "ClientIp {{ v6_prefix: {v6_prefix} }}"),
            KeyBy::Header(h) => write!(f, "Header({h})"),
            KeyBy::With(_) => f.write_str("With(..)"),
        }
    }
}

/// What a request gets when its policy's key cannot be extracted (no peer address, no header,
/// an untrusted proxy chain). Never a 500.
///
/// ```
/// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
/// # use http::{Request, Response, StatusCode};
/// # use tollgate::http::*;
/// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
/// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
/// #     use tower::{Layer, ServiceExt};
/// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
/// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
/// # }
/// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
/// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// let policy = |missing| {
///     let limits = RateLimiting::builder()
///         .global(two_a_minute().partition_by(KeyBy::CLIENT_IP).when_missing_key(missing))
///         .build()
///         .unwrap();
///     (0..3).map(|_| call(&limits.layer(), path("/")).status().as_u16()).collect::<Vec<_>>()
/// };
/// // `path("/")` has no peer address: no client IP.
/// assert_eq!(policy(MissingKey::Reject), [429, 429, 429]);
/// assert_eq!(policy(MissingKey::Allow), [200, 200, 200]);
/// assert_eq!(policy(MissingKey::Shared), [200, 200, 429]); // one partition for all of them
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MissingKey {
    /// Rejected with the policy's status, [`Reason::Custom`]`("no partition key")`.
    Reject,
    /// Admitted without limit.
    Allow,
    /// Limited by one partition shared by every keyless request (the default).
    #[default]
    Shared,
}

/// The [`Reason`] of a request rejected for having no key under [`MissingKey::Reject`].
///
/// ```
/// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
/// # use http::{Request, Response, StatusCode};
/// # use tollgate::http::*;
/// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
/// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
/// #     use tower::{Layer, ServiceExt};
/// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
/// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
/// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
/// # }
/// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
/// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// let limits = RateLimiting::builder()
///     .global(two_a_minute().partition_by(KeyBy::CLIENT_IP).when_missing_key(MissingKey::Reject))
///     .on_rejected(|r| {
///         let status = if r.rejection.reason() == NO_KEY { StatusCode::BAD_REQUEST } else { r.status };
///         Response::builder().status(status).body("".into()).unwrap()
///     })
///     .build()
///     .unwrap();
/// assert_eq!(call(&limits.layer(), path("/")).status(), StatusCode::BAD_REQUEST);
/// ```
pub const NO_KEY: Reason = Reason::Custom("no partition key");

/// What an admitted request holds until its response body ends: a concurrency permit, or
/// nothing for rate policies.
///
/// ```
/// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
/// # use http::{Request, Response, StatusCode};
/// # use tollgate::http::*;
/// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
/// use tollgate::{AcquireOwned, ConcurrencyLimiter};
/// let pool = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(1)).unwrap());
/// let permit = Permit::lease(pool.try_acquire_owned(1).unwrap());
/// assert!(permit.holds());
/// assert!(pool.try_acquire_owned(1).is_err());
/// drop(permit); // the response ended
/// assert!(pool.try_acquire_owned(1).is_ok());
/// ```
#[derive(Debug, Default)]
pub struct Permit(PermitInner);

#[derive(Debug, Default)]
enum PermitInner {
    #[default]
    None,
    Owned(OwnedLease),
    Partition(PartitionLease<Key, PartitionLimiter<SharedClock>>),
}

impl Permit {
    /// Nothing held (a rate policy's grant, or an unlimited request).
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// let grant = Grant { permit: Permit::none(), quota: None };
    /// assert!(!grant.permit.holds());
    /// ```
    pub const fn none() -> Self {
        Permit(PermitInner::None)
    }

    /// A lease held until the response ends (a custom [`PolicyLimiter`]'s permit).
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// use tollgate::{AcquireOwned, ConcurrencyLimiter, TokenBucketLimiter};
    /// let pool = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(8)).unwrap());
    /// assert!(Permit::lease(pool.try_acquire_owned(1).unwrap()).holds());
    /// // A rate limiter's lease has nothing to give back: no permit is kept.
    /// let rate = Arc::new(TokenBucketLimiter::new(TokenBucketOptions::new(8, 8, Duration::from_secs(1))).unwrap());
    /// assert!(!Permit::lease(rate.try_acquire_owned(1).unwrap()).holds());
    /// ```
    pub fn lease(lease: OwnedLease) -> Self {
        if lease.returns_permits() {
            Permit(PermitInner::Owned(lease))
        } else {
            Permit::none()
        }
    }

    /// Whether dropping this gives permits back.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// use tollgate::{AcquireOwned, ConcurrencyLimiter};
    /// let pool = Arc::new(ConcurrencyLimiter::new(ConcurrencyOptions::new(2)).unwrap());
    /// assert!(Permit::lease(pool.try_acquire_owned(1).unwrap()).holds());
    /// assert!(!Permit::none().holds());
    /// ```
    pub fn holds(&self) -> bool {
        match &self.0 {
            PermitInner::None => false,
            PermitInner::Owned(l) => l.returns_permits(),
            PermitInner::Partition(l) => l.returns_permits(),
        }
    }
}

/// A granted request: what it holds, and the quota left (when asked for).
///
/// ```
/// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
/// # use http::{Request, Response, StatusCode};
/// # use tollgate::http::*;
/// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
/// use tollgate::QuotaState;
/// let grant = Grant { permit: Permit::none(), quota: Some(QuotaState { limit: 10, remaining: 9, reset_after: None }) };
/// let decision = Decision::Granted(grant);
/// assert!(matches!(decision, Decision::Granted(Grant { quota: Some(q), .. }) if q.remaining == 9));
/// ```
#[derive(Debug)]
pub struct Grant {
    /// Held until the response body ends.
    pub permit: Permit,
    /// The partition's quota after this grant, if the caller asked for it.
    pub quota: Option<QuotaState>,
}

/// A refused request: why, and the partition's quota (when asked for).
///
/// ```
/// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
/// # use http::{Request, Response, StatusCode};
/// # use tollgate::http::*;
/// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
/// use tollgate::{QuotaState, Rejection};
/// let retry = Duration::from_secs(30);
/// let denial = Denial {
///     rejection: Rejection::with_retry_after(Reason::Exhausted, retry),
///     quota: Some(QuotaState::exhausted(100, Some(retry))),
/// };
/// assert_eq!(denial.rejection.retry_after(), Some(retry)); // becomes `Retry-After: 30`
/// assert_eq!(denial.quota.unwrap().remaining, 0);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Denial {
    /// Why, and for rate policies when to retry.
    pub rejection: Rejection,
    /// The partition's quota, if the caller asked for it.
    pub quota: Option<QuotaState>,
}

/// The outcome of [`PolicyLimiter::try_acquire`].
///
/// ```
/// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
/// # use http::{Request, Response, StatusCode};
/// # use tollgate::http::*;
/// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
/// # use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
/// # use tollgate::Rejection;
/// # /// A request budget kept by a quota service (here: a counter).
/// # struct Budget(AtomicU64);
/// # impl PolicyLimiter for Budget {
/// #     fn try_acquire(&self, _key: Key, _want_quota: bool) -> Decision {
/// #         match self.0.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)) {
/// #             Ok(_) => Decision::Granted(Grant { permit: Permit::none(), quota: None }),
/// #             Err(_) => Decision::Denied(Denial { rejection: Rejection::new(Reason::Exhausted), quota: None }),
/// #         }
/// #     }
/// #     fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture {
/// #         Box::pin(async move {
/// #             match self.try_acquire(key, want_quota) {
/// #                 Decision::Granted(g) => Ok(g),
/// #                 Decision::Denied(d) => Err(d),
/// #                 Decision::Wait => unreachable!(),
/// #             }
/// #         })
/// #     }
/// #     fn describe(&self) -> PolicyQuota {
/// #         PolicyQuota { quota: 1_000, window: Some(Duration::from_secs(86_400)), concurrent: false }
/// #     }
/// # }
/// let budget = Arc::new(Budget(AtomicU64::new(1)));
/// assert!(matches!(budget.try_acquire(Key::GLOBAL, false), Decision::Granted(_)));
/// match budget.try_acquire(Key::GLOBAL, false) {
///     Decision::Denied(d) => assert_eq!(d.rejection.reason(), Reason::Exhausted),
///     other => panic!("expected a denial, got {other:?}"),
/// }
/// ```
#[derive(Debug)]
pub enum Decision {
    /// Admitted.
    Granted(Grant),
    /// Refused.
    Denied(Denial),
    /// Cannot be decided without waiting: the layer awaits [`PolicyLimiter::acquire`].
    Wait,
}

/// A boxed future of a waited decision.
///
/// ```
/// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
/// # use http::{Request, Response, StatusCode};
/// # use tollgate::http::*;
/// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
/// # use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
/// # use tollgate::Rejection;
/// # /// A request budget kept by a quota service (here: a counter).
/// # struct Budget(AtomicU64);
/// # impl PolicyLimiter for Budget {
/// #     fn try_acquire(&self, _key: Key, _want_quota: bool) -> Decision {
/// #         match self.0.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)) {
/// #             Ok(_) => Decision::Granted(Grant { permit: Permit::none(), quota: None }),
/// #             Err(_) => Decision::Denied(Denial { rejection: Rejection::new(Reason::Exhausted), quota: None }),
/// #         }
/// #     }
/// #     fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture {
/// #         Box::pin(async move {
/// #             match self.try_acquire(key, want_quota) {
/// #                 Decision::Granted(g) => Ok(g),
/// #                 Decision::Denied(d) => Err(d),
/// #                 Decision::Wait => unreachable!(),
/// #             }
/// #         })
/// #     }
/// #     fn describe(&self) -> PolicyQuota {
/// #         PolicyQuota { quota: 1_000, window: Some(Duration::from_secs(86_400)), concurrent: false }
/// #     }
/// # }
/// let budget = Arc::new(Budget(AtomicU64::new(1)));
/// let fut: AcquireFuture = budget.clone().acquire(Key::GLOBAL, false);
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// assert!(rt.block_on(fut).is_ok());
/// assert!(rt.block_on(budget.acquire(Key::GLOBAL, false)).is_err());
/// ```
pub type AcquireFuture = Pin<Box<dyn Future<Output = Result<Grant, Denial>> + Send>>;

/// What `RateLimit-Policy` says about a policy: its quota, window and unit.
///
/// ```
/// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
/// # use http::{Request, Response, StatusCode};
/// # use tollgate::http::*;
/// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
/// # fn from(ip: &str) -> Request<()> {
/// #     let mut req = Request::new(());
/// #     req.extensions_mut().insert(SocketAddr::new(ip.parse().unwrap(), 443));
/// #     req
/// # }
/// let limits = RateLimiting::builder()
///     .policy("pool", Policy::concurrency(ConcurrencyOptions::new(10)).unwrap())
///     .policy("rate", Policy::token_bucket(TokenBucketOptions::new(20, 10, Duration::from_secs(1))).unwrap())
///     .build()
///     .unwrap();
/// assert_eq!(limits.describe("pool"), Some(PolicyQuota { quota: 10, window: None, concurrent: true }));
/// // A token bucket's window: the time to refill it from empty.
/// assert_eq!(limits.describe("rate").unwrap().window, Some(Duration::from_secs(2)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PolicyQuota {
    /// `q`: the quota (permits per window, or concurrent requests).
    pub quota: u64,
    /// `w`: the window, for rate policies.
    pub window: Option<Duration>,
    /// `qu="concurrent-requests"` instead of requests per window.
    pub concurrent: bool,
}

/// The decision every policy goes through: **the extension point** for your own limiter — an
/// async one backed by Redis, a remote quota service, anything.
///
/// The layer calls [`try_acquire`](Self::try_acquire) synchronously in `Service::call`: the
/// built-in limiters decide there, lock-free, without allocating. A limiter that must wait —
/// a queueing policy whose permits are taken, or an async backend that needs a network round
/// trip — returns [`Decision::Wait`], and the layer then awaits
/// [`acquire`](Self::acquire) (one boxed future per waiting request). An async backend should
/// return `Wait` from `try_acquire` at once and do its I/O in `acquire`: never block in
/// `try_acquire` (a blocking sync path exhausts executor threads).
///
/// Under [`Policy::queue`] with a maximum delay, the layer drops a waiting `acquire` at the
/// deadline and calls `try_acquire` once more: a grant is taken; a denial is answered as
/// [`Reason::TimedOut`], with the denial's RetryAfter (so give one if you know it); `Wait`, as
/// a plain [`Reason::TimedOut`].
///
/// ```
/// use std::sync::Arc;
/// use tollgate::http::{AcquireFuture, Decision, Denial, Grant, Key, Permit, PolicyLimiter, PolicyQuota};
/// use tollgate::{Reason, Rejection};
///
/// /// Admits even keys, denies odd ones — after an "I/O" await.
/// struct Remote;
/// impl PolicyLimiter for Remote {
///     fn try_acquire(&self, _key: Key, _quota: bool) -> Decision {
///         Decision::Wait // always ask the remote store
///     }
///     fn acquire(self: Arc<Self>, key: Key, _quota: bool) -> AcquireFuture {
///         Box::pin(async move {
///             // ... a Redis EVALSHA would go here ...
///             if key == Key::from_u64(1) {
///                 Err(Denial { rejection: Rejection::new(Reason::Exhausted), quota: None })
///             } else {
///                 Ok(Grant { permit: Permit::none(), quota: None })
///             }
///         })
///     }
///     fn describe(&self) -> PolicyQuota {
///         PolicyQuota { quota: 100, window: Some(std::time::Duration::from_secs(60)), concurrent: false }
///     }
/// }
/// let policy = tollgate::http::Policy::custom(Arc::new(Remote));
/// # let _ = policy;
/// ```
pub trait PolicyLimiter: Send + Sync + 'static {
    /// Decides for `key` now, without waiting; fills in the quota if `want_quota`.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    /// # use tollgate::Rejection;
    /// # /// A request budget kept by a quota service (here: a counter).
    /// # struct Budget(AtomicU64);
    /// # impl PolicyLimiter for Budget {
    /// #     fn try_acquire(&self, _key: Key, _want_quota: bool) -> Decision {
    /// #         match self.0.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)) {
    /// #             Ok(_) => Decision::Granted(Grant { permit: Permit::none(), quota: None }),
    /// #             Err(_) => Decision::Denied(Denial { rejection: Rejection::new(Reason::Exhausted), quota: None }),
    /// #         }
    /// #     }
    /// #     fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture {
    /// #         Box::pin(async move {
    /// #             match self.try_acquire(key, want_quota) {
    /// #                 Decision::Granted(g) => Ok(g),
    /// #                 Decision::Denied(d) => Err(d),
    /// #                 Decision::Wait => unreachable!(),
    /// #             }
    /// #         })
    /// #     }
    /// #     fn describe(&self) -> PolicyQuota {
    /// #         PolicyQuota { quota: 1_000, window: Some(Duration::from_secs(86_400)), concurrent: false }
    /// #     }
    /// # }
    /// let budget = Budget(AtomicU64::new(2));
    /// let key = Key::from_bytes(b"tenant-1");
    /// assert!(matches!(budget.try_acquire(key, false), Decision::Granted(_)));
    /// assert!(matches!(budget.try_acquire(key, false), Decision::Granted(_)));
    /// assert!(matches!(budget.try_acquire(key, false), Decision::Denied(_)));
    /// ```
    fn try_acquire(&self, key: Key, want_quota: bool) -> Decision;

    /// Waits for a decision for `key` (called after [`Decision::Wait`]). Dropping the future
    /// must cancel the wait and give back anything it was granted.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    /// # use tollgate::Rejection;
    /// # /// A request budget kept by a quota service (here: a counter).
    /// # struct Budget(AtomicU64);
    /// # impl PolicyLimiter for Budget {
    /// #     fn try_acquire(&self, _key: Key, _want_quota: bool) -> Decision {
    /// #         match self.0.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)) {
    /// #             Ok(_) => Decision::Granted(Grant { permit: Permit::none(), quota: None }),
    /// #             Err(_) => Decision::Denied(Denial { rejection: Rejection::new(Reason::Exhausted), quota: None }),
    /// #         }
    /// #     }
    /// #     fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture {
    /// #         Box::pin(async move {
    /// #             match self.try_acquire(key, want_quota) {
    /// #                 Decision::Granted(g) => Ok(g),
    /// #                 Decision::Denied(d) => Err(d),
    /// #                 Decision::Wait => unreachable!(),
    /// #             }
    /// #         })
    /// #     }
    /// #     fn describe(&self) -> PolicyQuota {
    /// #         PolicyQuota { quota: 1_000, window: Some(Duration::from_secs(86_400)), concurrent: false }
    /// #     }
    /// # }
    /// let budget = Arc::new(Budget(AtomicU64::new(1)));
    /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let grant = rt.block_on(budget.clone().acquire(Key::GLOBAL, false)).unwrap();
    /// assert!(!grant.permit.holds());
    /// let denial = rt.block_on(budget.acquire(Key::GLOBAL, false)).unwrap_err();
    /// assert_eq!(denial.rejection.reason(), Reason::Exhausted);
    /// ```
    fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture;

    /// The policy's quota, for `RateLimit-Policy`.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    /// # use tollgate::Rejection;
    /// # /// A request budget kept by a quota service (here: a counter).
    /// # struct Budget(AtomicU64);
    /// # impl PolicyLimiter for Budget {
    /// #     fn try_acquire(&self, _key: Key, _want_quota: bool) -> Decision {
    /// #         match self.0.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)) {
    /// #             Ok(_) => Decision::Granted(Grant { permit: Permit::none(), quota: None }),
    /// #             Err(_) => Decision::Denied(Denial { rejection: Rejection::new(Reason::Exhausted), quota: None }),
    /// #         }
    /// #     }
    /// #     fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture {
    /// #         Box::pin(async move {
    /// #             match self.try_acquire(key, want_quota) {
    /// #                 Decision::Granted(g) => Ok(g),
    /// #                 Decision::Denied(d) => Err(d),
    /// #                 Decision::Wait => unreachable!(),
    /// #             }
    /// #         })
    /// #     }
    /// #     fn describe(&self) -> PolicyQuota {
    /// #         PolicyQuota { quota: 1_000, window: Some(Duration::from_secs(86_400)), concurrent: false }
    /// #     }
    /// # }
    /// let budget = Arc::new(Budget(AtomicU64::new(1_000)));
    /// assert_eq!(budget.describe().window, Some(Duration::from_secs(86_400)));
    /// let limits = RateLimiting::builder().policy("daily", Policy::custom(budget)).build().unwrap();
    /// // The layer's `RateLimit-Policy` header says `"daily";q=1000;w=86400`.
    /// assert_eq!(limits.describe("daily").unwrap().quota, 1_000);
    /// ```
    fn describe(&self) -> PolicyQuota;

    /// How many partitions are stored now, if the limiter keeps any (for metrics and tests).
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    /// # use tollgate::Rejection;
    /// # /// A request budget kept by a quota service (here: a counter).
    /// # struct Budget(AtomicU64);
    /// # impl PolicyLimiter for Budget {
    /// #     fn try_acquire(&self, _key: Key, _want_quota: bool) -> Decision {
    /// #         match self.0.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)) {
    /// #             Ok(_) => Decision::Granted(Grant { permit: Permit::none(), quota: None }),
    /// #             Err(_) => Decision::Denied(Denial { rejection: Rejection::new(Reason::Exhausted), quota: None }),
    /// #         }
    /// #     }
    /// #     fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture {
    /// #         Box::pin(async move {
    /// #             match self.try_acquire(key, want_quota) {
    /// #                 Decision::Granted(g) => Ok(g),
    /// #                 Decision::Denied(d) => Err(d),
    /// #                 Decision::Wait => unreachable!(),
    /// #             }
    /// #         })
    /// #     }
    /// #     fn describe(&self) -> PolicyQuota {
    /// #         PolicyQuota { quota: 1_000, window: Some(Duration::from_secs(86_400)), concurrent: false }
    /// #     }
    /// # }
    /// let budget = Budget(AtomicU64::new(10));
    /// assert_eq!(budget.partitions(), None); // the default: one shared budget
    /// let limits = RateLimiting::builder().policy("daily", Policy::custom(Arc::new(budget))).build().unwrap();
    /// assert_eq!(limits.partitions("daily"), None);
    /// ```
    fn partitions(&self) -> Option<usize> {
        None
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Concurrency(ConcurrencyOptions),
    TokenBucket(TokenBucketOptions),
    FixedWindow(FixedWindowOptions),
    SlidingWindow(SlidingWindowOptions),
}

#[derive(Clone)]
enum Source {
    Builtin(Kind, PartitionKind),
    Custom(Arc<dyn PolicyLimiter>),
}

/// A rate-limiting policy: a limiter kind (or your [`PolicyLimiter`]), how it partitions
/// requests ([`KeyBy`]), what keyless requests get ([`MissingKey`]), whether requests wait in
/// the limiter's queue, and its rejection status.
///
/// ```
/// use std::time::Duration;
/// use tollgate::http::{KeyBy, MissingKey, Policy};
/// use tollgate::{PartitionConfig, TokenBucketOptions};
///
/// let per_ip = Policy::token_bucket(TokenBucketOptions::new(20, 10, Duration::from_secs(1)))
///     .unwrap()
///     .partition_by(KeyBy::CLIENT_IP)
///     .when_missing_key(MissingKey::Reject)
///     .partitions(PartitionConfig::new(1_000_000));
/// # let _ = per_ip;
/// ```
#[derive(Clone)]
pub struct Policy {
    source: Source,
    pub(crate) key: KeyBy,
    pub(crate) missing: MissingKey,
    partitions: PartitionConfig,
    pub(crate) queue: Option<Option<Duration>>,
    pub(crate) status: http::StatusCode,
    pub(crate) unavailable_status: Option<http::StatusCode>,
    pub(crate) pause_on_429: bool,
}

impl Policy {
    fn builtin(kind: Kind, pk: Result<PartitionKind, OptionsError>) -> Result<Self, OptionsError> {
        Ok(Self::from_source(Source::Builtin(kind, pk?)))
    }

    fn from_source(source: Source) -> Self {
        Self {
            source,
            key: KeyBy::Global,
            missing: MissingKey::Shared,
            partitions: PartitionConfig::default(),
            queue: None,
            status: http::StatusCode::TOO_MANY_REQUESTS,
            unavailable_status: None,
            pause_on_429: false,
        }
    }

    /// A concurrency limit: the permit is held until the response body ends.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
    /// #     use tower::{Layer, ServiceExt};
    /// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
    /// # }
    /// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
    /// let limits = RateLimiting::builder().global(Policy::concurrency(ConcurrencyOptions::new(1)).unwrap()).build().unwrap();
    /// let streaming = call(&limits.layer(), path("/export"));
    /// assert!(streaming.body().holds_permits()); // the export is still streaming
    /// assert_eq!(call(&limits.layer(), path("/export")).status(), StatusCode::TOO_MANY_REQUESTS);
    /// drop(streaming); // it ended
    /// assert_eq!(call(&limits.layer(), path("/export")).status(), 200);
    /// ```
    pub fn concurrency(options: ConcurrencyOptions) -> Result<Self, OptionsError> {
        Self::builtin(
            Kind::Concurrency(options),
            PartitionKind::concurrency(options),
        )
    }

    /// A token bucket.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
    /// #     use tower::{Layer, ServiceExt};
    /// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
    /// # }
    /// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
    /// let clock = Arc::new(ManualClock::new());
    /// let burst = Policy::token_bucket(TokenBucketOptions::new(2, 1, Duration::from_secs(1))).unwrap();
    /// let limits = RateLimiting::builder().global(burst).clock(clock.clone()).build().unwrap();
    /// for _ in 0..2 { let _ = call(&limits.layer(), path("/")); } // a burst of 2
    /// assert_eq!(call(&limits.layer(), path("/")).status(), StatusCode::TOO_MANY_REQUESTS);
    /// clock.advance(Duration::from_secs(1)); // then one a second
    /// assert_eq!(call(&limits.layer(), path("/")).status(), 200);
    /// ```
    pub fn token_bucket(options: TokenBucketOptions) -> Result<Self, OptionsError> {
        Self::builtin(
            Kind::TokenBucket(options),
            PartitionKind::token_bucket(options),
        )
    }

    /// A fixed window.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
    /// #     use tower::{Layer, ServiceExt};
    /// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
    /// # }
    /// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
    /// let hourly = Policy::fixed_window(FixedWindowOptions::new(1, Duration::from_secs(3600))).unwrap();
    /// let limits = RateLimiting::builder().global(hourly).build().unwrap();
    /// assert_eq!(call(&limits.layer(), path("/")).status(), 200);
    /// let refused = call(&limits.layer(), path("/"));
    /// assert_eq!(refused.headers()["retry-after"], "3600");
    /// assert!(Policy::fixed_window(FixedWindowOptions::new(0, Duration::from_secs(1))).is_err());
    /// ```
    pub fn fixed_window(options: FixedWindowOptions) -> Result<Self, OptionsError> {
        Self::builtin(
            Kind::FixedWindow(options),
            PartitionKind::fixed_window(options),
        )
    }

    /// A sliding window (up to 16 segments).
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
    /// #     use tower::{Layer, ServiceExt};
    /// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
    /// # }
    /// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
    /// use tollgate::SlidingWindowOptions;
    /// let smooth = Policy::sliding_window(SlidingWindowOptions::new(2, Duration::from_secs(60), 6)).unwrap();
    /// let limits = RateLimiting::builder().global(smooth).build().unwrap();
    /// for _ in 0..2 { let _ = call(&limits.layer(), path("/")); }
    /// assert_eq!(call(&limits.layer(), path("/")).status(), StatusCode::TOO_MANY_REQUESTS);
    /// assert!(Policy::sliding_window(SlidingWindowOptions::new(2, Duration::from_secs(60), 17)).is_err());
    /// ```
    pub fn sliding_window(options: SlidingWindowOptions) -> Result<Self, OptionsError> {
        Self::builtin(
            Kind::SlidingWindow(options),
            PartitionKind::sliding_window(options),
        )
    }

    /// Your own limiter (see [`PolicyLimiter`]); it does its own partitioning by the [`Key`]
    /// the policy's [`KeyBy`] extracts.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
    /// #     use tower::{Layer, ServiceExt};
    /// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
    /// # }
    /// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
    /// # use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
    /// # use tollgate::Rejection;
    /// # /// A request budget kept by a quota service (here: a counter).
    /// # struct Budget(AtomicU64);
    /// # impl PolicyLimiter for Budget {
    /// #     fn try_acquire(&self, _key: Key, _want_quota: bool) -> Decision {
    /// #         match self.0.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)) {
    /// #             Ok(_) => Decision::Granted(Grant { permit: Permit::none(), quota: None }),
    /// #             Err(_) => Decision::Denied(Denial { rejection: Rejection::new(Reason::Exhausted), quota: None }),
    /// #         }
    /// #     }
    /// #     fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture {
    /// #         Box::pin(async move {
    /// #             match self.try_acquire(key, want_quota) {
    /// #                 Decision::Granted(g) => Ok(g),
    /// #                 Decision::Denied(d) => Err(d),
    /// #                 Decision::Wait => unreachable!(),
    /// #             }
    /// #         })
    /// #     }
    /// #     fn describe(&self) -> PolicyQuota {
    /// #         PolicyQuota { quota: 1_000, window: Some(Duration::from_secs(86_400)), concurrent: false }
    /// #     }
    /// # }
    /// let limits = RateLimiting::builder().global(Policy::custom(Arc::new(Budget(AtomicU64::new(1))))).build().unwrap();
    /// assert_eq!(call(&limits.layer(), path("/")).status(), 200);
    /// assert_eq!(call(&limits.layer(), path("/")).status(), StatusCode::TOO_MANY_REQUESTS); // budget spent
    /// ```
    pub fn custom(limiter: Arc<dyn PolicyLimiter>) -> Self {
        Self::from_source(Source::Custom(limiter))
    }

    /// Partition requests by `key` (default [`KeyBy::Global`]: one limiter).
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
    /// #     use tower::{Layer, ServiceExt};
    /// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
    /// # }
    /// # fn from(ip: &str) -> Request<()> {
    /// #     let mut req = Request::new(());
    /// #     req.extensions_mut().insert(SocketAddr::new(ip.parse().unwrap(), 443));
    /// #     req
    /// # }
    /// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let limits = RateLimiting::builder().global(two_a_minute().partition_by(KeyBy::CLIENT_IP)).build().unwrap();
    /// for _ in 0..2 { let _ = call(&limits.layer(), from("192.0.2.1")); }
    /// assert_eq!(call(&limits.layer(), from("192.0.2.1")).status(), StatusCode::TOO_MANY_REQUESTS);
    /// assert_eq!(call(&limits.layer(), from("192.0.2.2")).status(), 200); // its own partition
    /// assert_eq!(limits.partitions(GLOBAL), Some(2));
    /// ```
    pub fn partition_by(self, key: KeyBy) -> Self {
        Self { key, ..self }
    }

    /// What a request without a key gets (default [`MissingKey::Shared`]).
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
    /// #     use tower::{Layer, ServiceExt};
    /// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
    /// # }
    /// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
    /// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let per_key = two_a_minute().partition_by(KeyBy::header("x-api-key".parse().unwrap()));
    /// let limits = RateLimiting::builder().global(per_key.when_missing_key(MissingKey::Allow)).build().unwrap();
    /// for _ in 0..5 { // anonymous requests are not limited here (another layer may)
    ///     assert_eq!(call(&limits.layer(), path("/")).status(), 200);
    /// }
    /// ```
    pub fn when_missing_key(self, missing: MissingKey) -> Self {
        Self { missing, ..self }
    }

    /// The bounds of the per-key store (default [`PartitionConfig::default`]: 100,000 keys,
    /// idle keys evicted after 10 s, a full store evicts its longest idle key).
    ///
    /// Memory: a token bucket or fixed window that does not queue keeps its keys in a
    /// [`KeyedLimiter`] — about 21 bytes per key of capacity, allocated when the layer is built
    /// (2.1 MB at the default capacity). Any other partitioned policy (queued, sliding window,
    /// concurrency) keeps a full limiter per key in a [`Partitioned`] map: about 1.1 KB per
    /// stored key, measured (`tests/http.rs`, `memory_*`: 200,000 new /64s filling the default
    /// table of 100,000 grew the resident set by 106 MiB, token bucket and sliding window alike).
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
    /// #     use tower::{Layer, ServiceExt};
    /// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
    /// # }
    /// # fn from(ip: &str) -> Request<()> {
    /// #     let mut req = Request::new(());
    /// #     req.extensions_mut().insert(SocketAddr::new(ip.parse().unwrap(), 443));
    /// #     req
    /// # }
    /// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// use tollgate::{PartitionConfig, WhenFull};
    /// let bounded = two_a_minute()
    ///     .partition_by(KeyBy::CLIENT_IP)
    ///     .partitions(PartitionConfig::new(1).with_when_full(WhenFull::Reject));
    /// let limits = RateLimiting::builder().global(bounded).build().unwrap();
    /// assert_eq!(call(&limits.layer(), from("192.0.2.1")).status(), 200);
    /// assert_eq!(call(&limits.layer(), from("192.0.2.2")).status(), StatusCode::TOO_MANY_REQUESTS); // full
    /// assert_eq!(limits.partitions(GLOBAL), Some(1));
    /// ```
    pub fn partitions(self, partitions: PartitionConfig) -> Self {
        Self { partitions, ..self }
    }

    /// Requests wait in the limiter's queue (its options' `queue_limit`, in permits) instead of
    /// being rejected at once, for at most `max_delay` if given. A client that disconnects
    /// leaves the queue at once.
    ///
    /// A rate policy (token bucket, fixed or sliding window) knows when a queued request would
    /// be served — its limiter's RetryAfter counts the requests queued ahead — so a request
    /// that would be served only after `max_delay` is refused at once, with that
    /// `Retry-After`, rather than held for the whole delay. A request that waits and still
    /// reaches the deadline gets one more try then; refused, it is
    /// [`Reason::TimedOut`], with the limiter's `Retry-After` if it has one (a rate limiter
    /// does; a concurrency limiter cannot know when a permit comes back, and a custom
    /// [`PolicyLimiter`] gives one if its [`try_acquire`](PolicyLimiter::try_acquire) denies
    /// with one). A request pushed out of a built-in limiter's queue by a newer one
    /// (`QueueOrder::NewestFirst`, [`Reason::Evicted`]) gets the limiter's `Retry-After` the
    /// same way.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
    /// #     use tower::{Layer, ServiceExt};
    /// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
    /// # }
    /// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
    /// use tollgate::QueueOrder;
    /// let opts = ConcurrencyOptions::new(1).with_queue(1, QueueOrder::OldestFirst);
    /// let queued = Policy::concurrency(opts).unwrap().queue(Some(Duration::from_millis(10)));
    /// let limits = RateLimiting::builder().global(queued).build().unwrap();
    /// let first = call(&limits.layer(), path("/")); // holds the permit while its body lives
    /// // The second waits in the queue, then gives up after 10 ms: 429.
    /// assert_eq!(call(&limits.layer(), path("/")).status(), StatusCode::TOO_MANY_REQUESTS);
    /// drop(first);
    /// assert_eq!(call(&limits.layer(), path("/")).status(), 200);
    ///
    /// // One token every 3 s: a queued request would wait 3 s, past its 300 ms.
    /// let slow = TokenBucketOptions::new(1, 1, Duration::from_secs(3)).with_queue(1, QueueOrder::OldestFirst);
    /// let queued = Policy::token_bucket(slow).unwrap().queue(Some(Duration::from_millis(300)));
    /// let limits = RateLimiting::builder().global(queued).build().unwrap();
    /// assert_eq!(call(&limits.layer(), path("/")).status(), 200);
    /// let refused = call(&limits.layer(), path("/")); // at once, not after 300 ms
    /// assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    /// assert_eq!(refused.headers()["retry-after"], "3");
    /// ```
    pub fn queue(self, max_delay: Option<Duration>) -> Self {
        Self {
            queue: Some(max_delay),
            ..self
        }
    }

    /// The status of a rejection (default 429 Too Many Requests).
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
    /// #     use tower::{Layer, ServiceExt};
    /// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
    /// # }
    /// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
    /// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let limits = RateLimiting::builder()
    ///     .global(two_a_minute().rejection_status(StatusCode::SERVICE_UNAVAILABLE))
    ///     .build()
    ///     .unwrap();
    /// for _ in 0..2 { let _ = call(&limits.layer(), path("/")); }
    /// assert_eq!(call(&limits.layer(), path("/")).status(), StatusCode::SERVICE_UNAVAILABLE);
    /// ```
    pub fn rejection_status(self, status: http::StatusCode) -> Self {
        Self { status, ..self }
    }

    /// The status of a rejection for the server's capacity rather than the client's rate (e.g.
    /// 503 Service Unavailable): the limiter is closed ([`Reason::Closed`]), its queue is full
    /// ([`Reason::QueueFull`]), a queued request was pushed out by a newer one
    /// ([`Reason::Evicted`], `QueueOrder::NewestFirst`), or the partition table is full and
    /// the request's key is new ([`Reason::PartitionsFull`]). Default: the rejection status.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn call(layer: &RateLimitLayer, req: Request<()>) -> Response<LimitedBody<&'static str>> {
    /// #     use tower::{Layer, ServiceExt};
    /// #     let app = tower::service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) });
    /// #     let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// #     rt.block_on(layer.layer(app).oneshot(req)).unwrap()
    /// # }
    /// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
    /// use tollgate::QueueOrder;
    /// let opts = ConcurrencyOptions::new(1).with_queue(0, QueueOrder::OldestFirst);
    /// let pool = Policy::concurrency(opts).unwrap().queue(None).unavailable_status(StatusCode::SERVICE_UNAVAILABLE);
    /// let limits = RateLimiting::builder().global(pool).build().unwrap();
    /// let _busy = call(&limits.layer(), path("/"));
    /// // No room in the queue: the server is busy, not the client too fast.
    /// assert_eq!(call(&limits.layer(), path("/")).status(), StatusCode::SERVICE_UNAVAILABLE);
    /// ```
    pub fn unavailable_status(self, status: http::StatusCode) -> Self {
        Self {
            unavailable_status: Some(status),
            ..self
        }
    }

    /// Client side: when the upstream answers 429 with a `Retry-After` (delay seconds), reject
    /// this request's partition locally until then.
    ///
    /// ```
    /// # use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};
    /// # use http::{Request, Response, StatusCode};
    /// # use tollgate::http::*;
    /// # use tollgate::{ConcurrencyOptions, FixedWindowOptions, ManualClock, Reason, TokenBucketOptions};
    /// # fn path(p: &str) -> Request<()> { Request::get(p).body(()).unwrap() }
    /// # let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// use tower::{Layer, ServiceExt};
    /// let clock = Arc::new(ManualClock::new());
    /// let limits = RateLimiting::builder().global(two_a_minute().pause_on_upstream_429()).clock(clock.clone()).build().unwrap();
    /// let upstream = tower::service_fn(|_: Request<()>| async {
    ///     Ok::<_, Infallible>(Response::builder().status(429).header("retry-after", "5").body("").unwrap())
    /// });
    /// let client = limits.layer().layer(upstream);
    /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// let _ = rt.block_on(client.clone().oneshot(path("/"))); // the upstream says: 5 s
    /// let local = rt.block_on(client.clone().oneshot(path("/"))).unwrap(); // not sent
    /// assert_eq!(local.headers()["retry-after"], "5");
    /// ```
    pub fn pause_on_upstream_429(self) -> Self {
        Self {
            pause_on_429: true,
            ..self
        }
    }

    pub(crate) fn status_for(&self, reason: Reason) -> http::StatusCode {
        match (reason, self.unavailable_status) {
            (
                Reason::Closed | Reason::QueueFull | Reason::Evicted | Reason::PartitionsFull,
                Some(s),
            ) => s,
            _ => self.status,
        }
    }

    /// Whether the policy's limiter is a built-in one, which bounds its own queueing delay
    /// (and answers a timed-out wait with its RetryAfter).
    pub(crate) fn bounds_its_delay(&self) -> bool {
        matches!(self.source, Source::Builtin(..))
    }

    /// Makes the policy's limiter on `clock` (`std_clock`: the default, a `StdClock`), and the
    /// direct handle to it when it is a built-in rate limiter that never queues (the layer's
    /// fast path).
    pub(crate) fn build(
        &self,
        clock: &SharedClock,
        std_clock: bool,
    ) -> Result<(Arc<dyn PolicyLimiter>, Option<Rate>), OptionsError> {
        let (kind, pk) = match &self.source {
            Source::Custom(l) => return Ok((l.clone(), None)),
            Source::Builtin(k, pk) => (*k, *pk),
        };
        let describe = describe(kind);
        let queue = self.queue.map(|max_delay| Queue { max_delay });
        if matches!(self.key, KeyBy::Global) {
            // A rate limiter's lease holds nothing: the fast path may drop it at once.
            let fast = queue.is_none() && !matches!(kind, Kind::Concurrency(_));
            if std_clock {
                let limiter = Arc::new(pk.limiter(crate::StdClock));
                let rate = fast.then(|| Rate::SingleStd(limiter.clone()));
                return Ok((Arc::new(Single::new(limiter, describe, queue)), rate));
            }
            let limiter = Arc::new(pk.limiter(clock.clone()));
            let rate = fast.then(|| Rate::Single(limiter.clone()));
            return Ok((Arc::new(Single::new(limiter, describe, queue)), rate));
        }
        if queue.is_none() {
            // On the default clock, the keyed limiter reads `StdClock` itself: no `dyn Clock`
            // call, and the read inlined into the decision (the same epoch as the shared
            // `Arc<StdClock>`: `StdClock` has one per process).
            if std_clock {
                if let Some(k) = Keyed::new(kind, self.partitions, crate::StdClock, describe)? {
                    let k = Arc::new(k);
                    return Ok((k.clone(), Some(Rate::KeyedStd(k))));
                }
            } else if let Some(k) = Keyed::new(kind, self.partitions, clock.clone(), describe)? {
                let k = Arc::new(k);
                return Ok((k.clone(), Some(Rate::Keyed(k))));
            }
        }
        let partitioner: Box<PartitionerFn> = Box::new(move |k: &Key| Partition::new(*k, pk));
        Ok((
            Arc::new(Many {
                limiter: Partitioned::with_clock(partitioner, self.partitions, clock.clone()),
                describe,
                queue,
            }),
            None,
        ))
    }
}

impl core::fmt::Debug for Policy {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Policy")
            .field("key", &self.key)
            .field("missing", &self.missing)
            .field("queue", &self.queue)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

fn describe(kind: Kind) -> PolicyQuota {
    match kind {
        Kind::Concurrency(o) => PolicyQuota {
            quota: u64::from(o.permit_limit),
            window: None,
            concurrent: true,
        },
        Kind::TokenBucket(o) => PolicyQuota {
            quota: u64::from(o.token_limit),
            // The time to refill an empty bucket.
            window: Some(
                o.replenishment_period
                    .saturating_mul(o.token_limit.div_ceil(o.tokens_per_period.max(1))),
            ),
            concurrent: false,
        },
        Kind::FixedWindow(o) => PolicyQuota {
            quota: u64::from(o.permit_limit),
            window: Some(o.window),
            concurrent: false,
        },
        Kind::SlidingWindow(o) => PolicyQuota {
            quota: u64::from(o.permit_limit),
            window: Some(o.window),
            concurrent: false,
        },
    }
}

fn denial(rejection: Rejection, limit: u64, want_quota: bool) -> Denial {
    Denial {
        rejection,
        quota: want_quota.then(|| QuotaState::exhausted(limit, rejection.retry_after())),
    }
}

/// How a built-in policy queues: at most `max_delay` in its limiter's queue, if given.
#[derive(Clone, Copy, Debug)]
struct Queue {
    max_delay: Option<Duration>,
}

impl Queue {
    /// What a queueing policy does with its limiter's refusal `r` now: wait in the queue, unless
    /// the limiter says the permit comes only after the maximum delay (a rate limiter's
    /// RetryAfter counts the queue ahead): then the request is refused at once, with it,
    /// rather than held for the whole delay and refused anyway.
    fn decide(self, r: Rejection, limit: u64, want_quota: bool) -> Decision {
        let too_late = matches!(
            (r.retry_after(), self.max_delay),
            (Some(wait), Some(max)) if wait > max
        );
        if r.reason() == Reason::Exhausted && !too_late {
            Decision::Wait
        } else {
            Decision::Denied(denial(r, limit, want_quota))
        }
    }

    /// Runs `wait` for at most the maximum delay; past it, `retry` (a fresh try, after `wait`
    /// has left the queue) decides: a permit that has come by then is taken, and a refusal is
    /// [`Reason::TimedOut`] with the limiter's own RetryAfter, if it has one. A waiter pushed
    /// out of the queue by a newer one ([`Reason::Evicted`], which carries no RetryAfter) is
    /// answered the same way: a fresh try, and [`Reason::Evicted`] with the limiter's
    /// RetryAfter if it refuses.
    async fn bounded<T>(
        self,
        wait: impl Future<Output = Result<T, Rejection>>,
        retry: impl FnOnce() -> Result<T, Rejection>,
    ) -> Result<T, Rejection> {
        let waited = match self.max_delay {
            None => wait.await,
            Some(max) => match tokio::time::timeout(max, wait).await {
                Ok(r) => r,
                Err(_) => return retry().map_err(|r| after_wait(Reason::TimedOut, r)),
            },
        };
        match waited {
            Err(r) if r.reason() == Reason::Evicted && r.retry_after().is_none() => {
                retry().map_err(|r| after_wait(Reason::Evicted, r))
            }
            other => other,
        }
    }
}

/// The refusal of a fresh try `r` made after a wait ended for `reason` (the deadline, or
/// pushed out of the queue): `reason`, with the limiter's RetryAfter when it has one (a rate
/// limiter's); or `r` itself when the limiter refused for another reason (closed).
pub(crate) fn after_wait(reason: Reason, r: Rejection) -> Rejection {
    match (r.reason(), r.retry_after()) {
        (Reason::Exhausted, Some(d)) => Rejection::with_retry_after(reason, d),
        (Reason::Exhausted, None) => Rejection::new(reason),
        _ => r,
    }
}

/// Keeps serving `limiter`'s queue as time brings permits while `acquire` waits, so a queued
/// request on a rate policy is admitted when its permits arrive even if no other request comes.
async fn wait_serving<L, F, T>(limiter: &L, acquire: F) -> T
where
    L: Replenishing + ?Sized,
    F: Future<Output = T>,
{
    let mut acquire = core::pin::pin!(acquire);
    loop {
        let tick = match limiter.next_service() {
            Some(d) => d.max(Duration::from_millis(1)),
            None => Duration::from_millis(50),
        };
        match race(acquire.as_mut(), tick).await {
            Some(out) => return out,
            None => {
                limiter.replenish();
            }
        }
    }
}

/// Polls `fut` for up to `tick`: its output, or `None` when the tick passed first.
async fn race<F: Future + ?Sized>(mut fut: Pin<&mut F>, tick: Duration) -> Option<F::Output> {
    let mut sleep = core::pin::pin!(tokio::time::sleep(tick));
    core::future::poll_fn(|cx| {
        if let core::task::Poll::Ready(v) = fut.as_mut().poll(cx) {
            return core::task::Poll::Ready(Some(v));
        }
        sleep.as_mut().poll(cx).map(|()| None)
    })
    .await
}

/// An unpartitioned policy: one limiter.
struct Single<C: Clock> {
    limiter: Arc<PartitionLimiter<C>>,
    describe: PolicyQuota,
    queue: Option<Queue>,
}

impl<C: Clock + Send + Sync + 'static> Single<C> {
    fn new(limiter: Arc<PartitionLimiter<C>>, describe: PolicyQuota, queue: Option<Queue>) -> Self {
        Self {
            limiter,
            describe,
            queue,
        }
    }

    fn grant(&self, lease: OwnedLease, want_quota: bool) -> Grant {
        Grant {
            permit: Permit::lease(lease),
            quota: want_quota.then(|| self.limiter.quota()),
        }
    }
}

impl<C: Clock + Send + Sync + 'static> PolicyLimiter for Single<C> {
    #[inline]
    fn try_acquire(&self, _key: Key, want_quota: bool) -> Decision {
        match self.limiter.try_acquire_owned(1) {
            Ok(lease) => Decision::Granted(self.grant(lease, want_quota)),
            Err(r) => match self.queue {
                Some(q) => q.decide(r, self.describe.quota, want_quota),
                None => Decision::Denied(denial(r, self.describe.quota, want_quota)),
            },
        }
    }

    fn acquire(self: Arc<Self>, _key: Key, want_quota: bool) -> AcquireFuture {
        Box::pin(async move {
            let limiter = self.limiter.clone();
            let wait = async {
                let lease =
                    wait_serving(&*limiter, crate::AcquireAsync::acquire(&*limiter, 1)).await?;
                let returns = lease.returns_permits();
                let n = lease.forget();
                Ok(if returns {
                    OwnedLease::releasing(n, limiter.clone())
                } else {
                    OwnedLease::unreleased(n)
                })
            };
            let queue = self.queue.unwrap_or(Queue { max_delay: None });
            match queue.bounded(wait, || limiter.try_acquire_owned(1)).await {
                Ok(owned) => Ok(self.grant(owned, want_quota)),
                Err(r) => Err(denial(r, self.describe.quota, want_quota)),
            }
        })
    }

    fn describe(&self) -> PolicyQuota {
        self.describe
    }
}

/// A built-in rate policy that never queues, called directly by the layer's fast path: no
/// `dyn PolicyLimiter` call, no [`Decision`] (a grant holds no permit), no quota.
pub(crate) enum Rate {
    /// A keyed token bucket or fixed window.
    Keyed(Arc<Keyed<SharedClock>>),
    /// The same on the default clock.
    KeyedStd(Arc<Keyed<crate::StdClock>>),
    /// One unpartitioned token bucket, fixed or sliding window (its lease releases nothing).
    Single(Arc<PartitionLimiter<SharedClock>>),
    /// The same on the default clock.
    SingleStd(Arc<PartitionLimiter<crate::StdClock>>),
}

impl Rate {
    /// One permit for the request's key (found by `key`, `ip`) now, or the rejection; `None`
    /// if the request has no key. An unpartitioned limiter looks for no key.
    #[inline]
    pub(crate) fn try_acquire(
        &self,
        key: &KeyBy,
        req: &RequestView<'_>,
        ip: &ClientIp,
    ) -> Option<Result<(), Rejection>> {
        match self {
            Rate::Keyed(k) => {
                let key = key.extract(req, ip)?;
                Some(k.limiter.try_acquire(&key, 1).map(drop))
            }
            Rate::KeyedStd(k) => {
                let key = key.extract(req, ip)?;
                Some(k.limiter.try_acquire(&key, 1).map(drop))
            }
            Rate::Single(l) => Some(crate::Limiter::try_acquire(&**l, 1).map(drop)),
            Rate::SingleStd(l) => Some(crate::Limiter::try_acquire(&**l, 1).map(drop)),
        }
    }
}

/// A token bucket or fixed window per key, in the bounded lock-free table.
pub(crate) struct Keyed<C: Clock> {
    limiter: KeyedLimiter<Key, C, super::key_hash::KeyHashBuilder>,
    describe: PolicyQuota,
}

impl<C: Clock> Keyed<C> {
    /// The keyed limiter of `kind` on `clock`, if `kind` is a token bucket or fixed window.
    fn new(
        kind: Kind,
        partitions: PartitionConfig,
        clock: C,
        describe: PolicyQuota,
    ) -> Result<Option<Self>, OptionsError> {
        let hasher = super::key_hash::KeyHashBuilder::new();
        let limiter = match kind {
            Kind::TokenBucket(o) => {
                KeyedLimiter::with_hasher_token_bucket(o, partitions, clock, hasher)?
            }
            Kind::FixedWindow(o) => {
                KeyedLimiter::with_hasher_fixed_window(o, partitions, clock, hasher)?
            }
            Kind::Concurrency(_) | Kind::SlidingWindow(_) => return Ok(None),
        };
        Ok(Some(Self { limiter, describe }))
    }
}

impl<C: Clock + Send + Sync + 'static> PolicyLimiter for Keyed<C> {
    fn partitions(&self) -> Option<usize> {
        Some(self.limiter.len())
    }

    #[inline]
    fn try_acquire(&self, key: Key, want_quota: bool) -> Decision {
        match self.limiter.try_acquire(&key, 1) {
            Ok(_) => Decision::Granted(Grant {
                permit: Permit::none(),
                quota: want_quota.then(|| self.limiter.quota(&key)),
            }),
            Err(r) => Decision::Denied(denial(r, self.describe.quota, want_quota)),
        }
    }

    fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture {
        let d = self.try_acquire(key, want_quota);
        Box::pin(async move {
            match d {
                Decision::Granted(g) => Ok(g),
                Decision::Denied(d) => Err(d),
                Decision::Wait => unreachable_wait(),
            }
        })
    }

    fn describe(&self) -> PolicyQuota {
        self.describe
    }
}

fn unreachable_wait() -> Result<Grant, Denial> {
    // `Keyed::try_acquire` never answers `Wait`; should it ever, refuse rather than panic.
    Err(Denial {
        rejection: Rejection::new(Reason::Exhausted),
        quota: None,
    })
}

type PartitionerFn = dyn Fn(&Key) -> Partition<Key> + Send + Sync;
type ManyLimiter = Partitioned<Key, PartitionLimiter<SharedClock>, Box<PartitionerFn>, SharedClock>;
type ManyLease = PartitionLease<Key, PartitionLimiter<SharedClock>>;

/// `limiter.acquire(key)`, boxed where its lifetime is concrete (so that it is provably `Send`).
fn wait_partition<'a>(
    limiter: &'a ManyLimiter,
    key: &Key,
) -> Pin<Box<dyn Future<Output = Result<ManyLease, Rejection>> + Send + 'a>> {
    Box::pin(limiter.acquire(key, 1))
}

/// Any kind per key, waitable: the sharded map of full limiters.
struct Many {
    limiter: ManyLimiter,
    describe: PolicyQuota,
    queue: Option<Queue>,
}

impl Many {
    fn quota(&self, key: &Key) -> QuotaState {
        self.limiter
            .with_limiter(key, |l| l.quota())
            .unwrap_or(QuotaState {
                limit: self.describe.quota,
                remaining: self.describe.quota,
                reset_after: None,
            })
    }
}

impl PolicyLimiter for Many {
    fn partitions(&self) -> Option<usize> {
        Some(self.limiter.len())
    }

    #[inline]
    fn try_acquire(&self, key: Key, want_quota: bool) -> Decision {
        match self.limiter.try_acquire(&key, 1) {
            Ok(lease) => Decision::Granted(Grant {
                permit: Permit(PermitInner::Partition(lease)),
                quota: want_quota.then(|| self.quota(&key)),
            }),
            Err(r) => match self.queue {
                Some(q) => q.decide(r, self.describe.quota, want_quota),
                None => Decision::Denied(denial(r, self.describe.quota, want_quota)),
            },
        }
    }

    fn acquire(self: Arc<Self>, key: Key, want_quota: bool) -> AcquireFuture {
        Box::pin(async move {
            // Rate-limited partitions are served by the partition's later requests, or by the
            // periodic replenish below; concurrency partitions by releases.
            let wait = async {
                let mut acquire = wait_partition(&self.limiter, &key);
                loop {
                    let tick = self.describe.window.map_or(Duration::from_millis(50), |w| {
                        (w / 16).clamp(Duration::from_millis(1), Duration::from_millis(250))
                    });
                    if let Some(out) = race(acquire.as_mut(), tick).await {
                        break out;
                    }
                    if self.describe.window.is_some() {
                        self.limiter.with_limiter(&key, |l| l.replenish());
                    }
                }
            };
            let queue = self.queue.unwrap_or(Queue { max_delay: None });
            let r = queue
                .bounded(wait, || self.limiter.try_acquire(&key, 1))
                .await;
            match r {
                Ok(lease) => Ok(Grant {
                    permit: Permit(PermitInner::Partition(lease)),
                    quota: want_quota.then(|| self.quota(&key)),
                }),
                Err(r) => Err(denial(r, self.describe.quota, want_quota)),
            }
        })
    }

    fn describe(&self) -> PolicyQuota {
        self.describe
    }
}
