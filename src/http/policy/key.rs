use core::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::header::HeaderName;
use http::{Extensions, HeaderMap, Method, Uri};

use crate::http::client_ip::{mask, ClientIp};
use crate::lease::Reason;

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
    /// use tollgate::http::{Key, KeyBy};
    ///
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
    /// use tollgate::http::{Key, PolicyLimiter};
    ///
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
    /// use tollgate::http::Key;
    ///
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
    /// use tollgate::http::{Key, KeyBy};
    ///
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
/// use http::Request;
/// use tollgate::http::{Key, RequestView};
///
/// let by_path_tenant = |req: &RequestView<'_>| {
///     // /t/{tenant}/...: the tenant from the path
///     let tenant = req.uri.path().strip_prefix("/t/")?.split('/').next()?;
///     Some(Key::from_bytes(tenant.as_bytes()))
/// };
/// let req = Request::get("/t/acme/orders").body(()).unwrap();
/// assert_eq!(by_path_tenant(&RequestView::of(&req)), Some(Key::from_bytes(b"acme")));
/// assert_eq!(by_path_tenant(&RequestView::of(&Request::get("/health").body(()).unwrap())), None);
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
    /// use http::Request;
    /// use tollgate::http::RequestView;
    ///
    /// let mut req = Request::get("/orders").body(()).unwrap();
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
/// # use std::{convert::Infallible, time::Duration};
/// use http::{Request, Response, StatusCode};
/// use tollgate::http::{KeyBy, Policy, RateLimiting};
/// use tollgate::FixedWindowOptions;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// let limits = RateLimiting::builder()
///     .policy("per-key", two_a_minute().partition_by(KeyBy::header("x-api-key".parse().unwrap())))
///     .build()
///     .unwrap();
/// let layer = limits.policy_layer("per-key").unwrap();
/// let with_key = |k: &str| { let mut r = Request::get("/").body(()).unwrap(); r.headers_mut().insert("x-api-key", k.parse().unwrap()); r };
/// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
/// let app = layer.layer(service_fn(hello));
/// for _ in 0..2 { let _ = app.clone().oneshot(with_key("a")).await.unwrap(); }
/// assert_eq!(app.clone().oneshot(with_key("a")).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
/// assert_eq!(app.clone().oneshot(with_key("b")).await.unwrap().status(), 200);
/// # }
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
    /// # use std::{convert::Infallible, net::SocketAddr, time::Duration};
    /// use http::{Request, Response, StatusCode};
    /// use tollgate::http::{KeyBy, Policy, RateLimiting};
    /// use tollgate::FixedWindowOptions;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// // A request from `ip`, as a server started with
    /// // `into_make_service_with_connect_info::<SocketAddr>()` sees it.
    /// let from = |ip: &str| {
    ///     let mut req = Request::new(());
    ///     req.extensions_mut().insert(SocketAddr::new(ip.parse().unwrap(), 443));
    ///     req
    /// };
    /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let limits = RateLimiting::builder().global(two_a_minute().partition_by(KeyBy::CLIENT_IP)).build().unwrap();
    /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
    /// let app = limits.layer().layer(service_fn(hello));
    /// let _ = app.clone().oneshot(from("2001:db8:1:2::1")).await.unwrap();
    /// let _ = app.clone().oneshot(from("2001:db8:1:2::ffff")).await.unwrap(); // same /64: same client
    /// assert_eq!(app.clone().oneshot(from("2001:db8:1:2::7")).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
    /// assert_eq!(app.clone().oneshot(from("2001:db8:1:3::1")).await.unwrap().status(), 200); // another /64
    /// # }
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
    /// # use std::{convert::Infallible, time::Duration};
    /// use http::{Request, Response, StatusCode};
    /// use tollgate::http::{KeyBy, MissingKey, Policy, RateLimiting};
    /// use tollgate::FixedWindowOptions;
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
    /// let limits = RateLimiting::builder()
    ///     .global(two_a_minute().partition_by(KeyBy::header("x-api-key".parse().unwrap())).when_missing_key(MissingKey::Reject))
    ///     .build()
    ///     .unwrap();
    /// let mut req = Request::get("/").body(()).unwrap();
    /// req.headers_mut().insert("x-api-key", "k-1".parse().unwrap());
    /// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
    /// let app = limits.layer().layer(service_fn(hello));
    /// assert_eq!(app.clone().oneshot(req).await.unwrap().status(), 200);
    /// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), StatusCode::TOO_MANY_REQUESTS); // no key
    /// # }
    /// ```
    pub fn header(name: HeaderName) -> KeyBy {
        KeyBy::Header(name)
    }

    /// Whether this key comes from the connection (the peer address) and `req` has none: the
    /// server was started without its connections' addresses ([`MissingKey::Auto`]).
    pub(crate) fn lacks_peer(&self, req: &RequestView<'_>) -> bool {
        matches!(self, KeyBy::ClientIp { .. }) && ClientIp::peer_socket(req.extensions).is_none()
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
/// # use std::{convert::Infallible, time::Duration};
/// use http::{Request, Response};
/// use tollgate::http::{KeyBy, MissingKey, Policy, RateLimiting};
/// use tollgate::FixedWindowOptions;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// // Three requests without a peer address (no client IP) under a per-IP policy of two a minute.
/// let statuses = |missing| async move {
///     let per_ip = Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60)))
///         .unwrap()
///         .partition_by(KeyBy::CLIENT_IP)
///         .when_missing_key(missing);
///     let limits = RateLimiting::builder().global(per_ip).build().unwrap();
///     let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
///     let app = limits.layer().layer(service_fn(hello));
///     let mut out = Vec::new();
///     for _ in 0..3 {
///         out.push(app.clone().oneshot(Request::new(())).await.unwrap().status().as_u16());
///     }
///     out
/// };
/// assert_eq!(statuses(MissingKey::Reject).await, [429, 429, 429]);
/// assert_eq!(statuses(MissingKey::Allow).await, [200, 200, 200]);
/// assert_eq!(statuses(MissingKey::Shared).await, [200, 200, 429]); // one partition for all of them
/// // The default: no peer address is the server's mistake (no `ConnectInfo`), said at once.
/// assert_eq!(statuses(MissingKey::Auto).await, [500, 500, 500]);
/// # }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MissingKey {
    /// Rejected with the policy's status, [`Reason::Custom`]`("no partition key")`.
    Reject,
    /// Admitted without limit.
    Allow,
    /// Limited by one partition shared by every keyless request.
    Shared,
    /// The default: a key that the request itself lacks (a header, your function's `None`) is
    /// [`Shared`](Self::Shared); a [`KeyBy::ClientIp`] key on a request with **no peer address
    /// at all** is the server's misconfiguration — axum started with `axum::serve(listener,
    /// app)` instead of `app.into_make_service_with_connect_info::<SocketAddr>()` — and would
    /// silently put every client in one bucket: such a request gets `500 Internal Server
    /// Error` with [`NO_PEER_ADDRESS`] (its phrase as the body, unless a rejection hook writes
    /// its own), and the first one is logged (with feature `tracing`, an error event; else one
    /// line on standard error), so the mistake shows on the first request, not under load.
    #[default]
    Auto,
}

/// The [`Reason`] of a request refused, under [`MissingKey::Auto`], because a client-IP policy
/// found no peer address: the server does not hand the layer its connections' addresses.
pub const NO_PEER_ADDRESS: Reason = Reason::Custom(
    "no peer address for a per-client-IP limit: serve the app with \
     `into_make_service_with_connect_info::<SocketAddr>()` (axum's ConnectInfo)",
);

/// The [`Reason`] of a request rejected for having no key under [`MissingKey::Reject`].
///
/// ```
/// # use std::{convert::Infallible, time::Duration};
/// use http::{Request, Response, StatusCode};
/// use tollgate::http::{KeyBy, MissingKey, Policy, RateLimiting, NO_KEY};
/// use tollgate::FixedWindowOptions;
/// use tower::{service_fn, Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let two_a_minute = || Policy::fixed_window(FixedWindowOptions::new(2, Duration::from_secs(60))).unwrap();
/// let limits = RateLimiting::builder()
///     .global(two_a_minute().partition_by(KeyBy::CLIENT_IP).when_missing_key(MissingKey::Reject))
///     .on_rejected(|r| {
///         let status = if r.rejection.reason() == NO_KEY { StatusCode::BAD_REQUEST } else { r.status };
///         Response::builder().status(status).body("".into()).unwrap()
///     })
///     .build()
///     .unwrap();
/// let hello = |_: Request<()>| async { Ok::<_, Infallible>(Response::new("hello")) };
/// let app = limits.layer().layer(service_fn(hello));
/// assert_eq!(app.clone().oneshot(Request::get("/").body(()).unwrap()).await.unwrap().status(), StatusCode::BAD_REQUEST);
/// # }
/// ```
pub const NO_KEY: Reason = Reason::Custom("no partition key");
