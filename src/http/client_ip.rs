//! The client's IP address: the peer's, or — behind trusted proxies — the rightmost untrusted
//! address of `X-Forwarded-For` / `Forwarded`.

use core::fmt;
use core::str::FromStr;
use std::net::{IpAddr, SocketAddr};

use http::header::{HeaderMap, HeaderName};
use http::Extensions;

/// A network: an address and a prefix length (`10.0.0.0/8`, `2001:db8::/32`, or a bare address
/// for a single host).
///
/// ```
/// use tollgate::http::Cidr;
///
/// let net: Cidr = "10.0.0.0/8".parse().unwrap();
/// assert!(net.contains("10.1.2.3".parse().unwrap()));
/// assert!(!net.contains("11.0.0.1".parse().unwrap()));
/// assert!("10.0.0.0/33".parse::<Cidr>().is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

/// Why a [`Cidr`] did not parse.
///
/// ```
/// use tollgate::http::{Cidr, CidrError};
///
/// assert_eq!("10.0.0.0/33".parse::<Cidr>(), Err(CidrError::Prefix));
/// assert_eq!("10.0.0/8".parse::<Cidr>(), Err(CidrError::Address));
/// assert_eq!(CidrError::Prefix.to_string(), "invalid prefix length in CIDR");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CidrError {
    /// The address part is not an IPv4 or IPv6 address.
    Address,
    /// The prefix is not a number, or longer than the address (32 / 128 bits).
    Prefix,
}

impl fmt::Display for CidrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CidrError::Address => "invalid IP address in CIDR",
            CidrError::Prefix => "invalid prefix length in CIDR",
        })
    }
}

impl std::error::Error for CidrError {}

impl Cidr {
    /// The network of `addr` with a `prefix`-bit mask; `None` if the prefix is longer than the
    /// address.
    ///
    /// ```
    /// use tollgate::http::Cidr;
    /// # use std::net::IpAddr;
    ///
    /// let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
    /// let proxies = Cidr::new(ip("172.16.5.4"), 12).unwrap(); // host bits are cleared
    /// assert_eq!(Some(proxies), "172.16.0.0/12".parse().ok());
    /// assert!(proxies.contains(ip("172.31.255.1")));
    /// assert_eq!(Cidr::new(ip("172.16.0.0"), 33), None);
    /// ```
    pub fn new(addr: IpAddr, prefix: u8) -> Option<Self> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        (prefix <= max).then(|| Self {
            addr: mask(addr, prefix),
            prefix,
        })
    }

    /// Whether `ip` is in this network (an IPv4-mapped IPv6 address counts as its IPv4 address).
    ///
    /// ```
    /// use tollgate::http::Cidr;
    /// # use std::net::IpAddr;
    ///
    /// let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
    /// let lan: Cidr = "192.168.0.0/16".parse().unwrap();
    /// assert!(lan.contains(ip("192.168.10.20")));
    /// assert!(lan.contains(ip("::ffff:192.168.10.20"))); // mapped: the same host
    /// assert!(!lan.contains(ip("192.169.0.1")));
    /// let v6: Cidr = "2001:db8::/32".parse().unwrap();
    /// assert!(v6.contains(ip("2001:db8:ffff::1")) && !v6.contains(ip("2001:db9::1")));
    /// ```
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        ip.is_ipv4() == self.addr.is_ipv4() && mask(ip, self.prefix) == self.addr
    }
}

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Self, CidrError> {
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = a.trim().parse().map_err(|_| CidrError::Address)?;
        let addr = addr.to_canonical();
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            Some(p) => p.trim().parse::<u8>().map_err(|_| CidrError::Prefix)?,
            None => max,
        };
        Cidr::new(addr, prefix).ok_or(CidrError::Prefix)
    }
}

/// `ip` with all but its first `prefix` bits cleared.
pub(crate) fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        // The first 32 bits of the 128-bit mask, shifted down to a `u32`'s place.
        IpAddr::V4(v4) => {
            IpAddr::V4((u32::from(v4) & (first_bits(prefix.min(32)) >> 96) as u32).into())
        }
        IpAddr::V6(v6) => IpAddr::V6((u128::from(v6) & first_bits(prefix.min(128))).into()),
    }
}

/// A 128-bit word with its first `n` (at most 128) bits set.
fn first_bits(n: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(n)).unwrap_or(0)
}

/// Which header a trusted proxy appends the client's address to.
///
/// ```
/// use tollgate::http::{ClientIp, ForwardedHeader};
/// use http::HeaderMap;
/// # use std::net::IpAddr;
///
/// let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
/// let nginx = ClientIp::hops(1, ForwardedHeader::XForwardedFor);
/// let envoy = ClientIp::hops(1, ForwardedHeader::Forwarded);
/// let mut headers = HeaderMap::new();
/// headers.insert("x-forwarded-for", "203.0.113.7".parse().unwrap());
/// headers.insert("forwarded", r#"for="[2001:db8::7]:4711";proto=https"#.parse().unwrap());
/// let peer = Some(ip("10.0.0.1"));
/// assert_eq!(nginx.resolve(peer, &headers), Some(ip("203.0.113.7")));
/// assert_eq!(envoy.resolve(peer, &headers), Some(ip("2001:db8::7")));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` (the de-facto standard).
    #[default]
    XForwardedFor,
    /// `Forwarded: for=client, for="[2001:db8::1]:4711"` (RFC 7239).
    Forwarded,
}

impl ForwardedHeader {
    fn name(self) -> HeaderName {
        match self {
            ForwardedHeader::XForwardedFor => HeaderName::from_static("x-forwarded-for"),
            ForwardedHeader::Forwarded => http::header::FORWARDED,
        }
    }
}

#[derive(Clone, Debug)]
enum Trust {
    Nobody,
    Networks(Vec<Cidr>),
    Hops(usize),
}

/// How to find the client's address of a request.
///
/// - [`ClientIp::peer`] (the default): the TCP peer. Forwarding headers are ignored: anyone can
///   write them.
/// - [`ClientIp::trusted_proxies`]: if the peer is one of the trusted networks, walk the
///   forwarding header from the right (the entry the nearest proxy wrote) past every trusted
///   address; the first untrusted one is the client. Entries to its left were written by the
///   client itself and are never read. A peer outside the trusted networks is the client, whatever
///   its headers say.
/// - [`ClientIp::hops`]: exactly `n` proxies stand in front of the server; the client is the
///   `n`-th entry from the right.
///
/// An unparseable entry where the client should be (`unknown`, an obfuscated `Forwarded` node, a
/// too short list) gives no address: the policy's [`MissingKey`](super::MissingKey) decides.
///
/// The peer is read from the request's extensions: axum's `ConnectInfo<SocketAddr>` (serve with
/// `into_make_service_with_connect_info::<SocketAddr>()`), or a plain `SocketAddr` (insert it
/// yourself on a bare hyper server).
///
/// ```
/// use http::HeaderMap;
/// use tollgate::http::{ClientIp, ForwardedHeader};
///
/// let ip = ClientIp::trusted_proxies(["10.0.0.0/8".parse().unwrap()], ForwardedHeader::XForwardedFor);
/// let mut headers = HeaderMap::new();
/// headers.insert("x-forwarded-for", "6.6.6.6, 203.0.113.7, 10.0.0.2".parse().unwrap());
/// // From the trusted proxy 10.0.0.1: the rightmost untrusted entry (6.6.6.6 is a forgery).
/// assert_eq!(ip.resolve(Some("10.0.0.1".parse().unwrap()), &headers), Some("203.0.113.7".parse().unwrap()));
/// // From an untrusted peer the header changes nothing.
/// assert_eq!(ip.resolve(Some("198.51.100.9".parse().unwrap()), &headers), Some("198.51.100.9".parse().unwrap()));
/// ```
#[derive(Clone, Debug)]
pub struct ClientIp {
    trust: Trust,
    header: HeaderName,
    forwarded: bool,
}

impl Default for ClientIp {
    fn default() -> Self {
        Self::peer()
    }
}

impl ClientIp {
    /// The TCP peer's address; headers ignored.
    ///
    /// ```
    /// use tollgate::http::ClientIp;
    /// use http::HeaderMap;
    /// # use std::net::IpAddr;
    ///
    /// let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
    /// let direct = ClientIp::peer();
    /// let mut headers = HeaderMap::new();
    /// headers.insert("x-forwarded-for", "1.2.3.4".parse().unwrap()); // written by the client: ignored
    /// assert_eq!(direct.resolve(Some(ip("198.51.100.9")), &headers), Some(ip("198.51.100.9")));
    /// assert_eq!(direct.resolve(None, &headers), None); // no peer: no address
    /// ```
    pub fn peer() -> Self {
        Self {
            trust: Trust::Nobody,
            header: ForwardedHeader::XForwardedFor.name(),
            forwarded: false,
        }
    }

    /// The rightmost address of `header` that is not in `networks`, when the peer is in them.
    ///
    /// ```
    /// use tollgate::http::{ClientIp, ForwardedHeader};
    /// use http::HeaderMap;
    /// # use std::net::IpAddr;
    ///
    /// let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
    /// let nets = ["10.0.0.0/8".parse().unwrap(), "fd00::/8".parse().unwrap()];
    /// let behind_proxies = ClientIp::trusted_proxies(nets, ForwardedHeader::XForwardedFor);
    /// let mut headers = HeaderMap::new();
    /// headers.insert("x-forwarded-for", "203.0.113.7, 10.1.1.1".parse().unwrap()); // two proxies
    /// assert_eq!(behind_proxies.resolve(Some(ip("10.0.0.2")), &headers), Some(ip("203.0.113.7")));
    /// ```
    pub fn trusted_proxies(
        networks: impl IntoIterator<Item = Cidr>,
        header: ForwardedHeader,
    ) -> Self {
        Self {
            trust: Trust::Networks(networks.into_iter().collect()),
            header: header.name(),
            forwarded: header == ForwardedHeader::Forwarded,
        }
    }

    /// The `n`-th address of `header` from the right: `n` proxies (at least 1) stand in front.
    ///
    /// ```
    /// use tollgate::http::{ClientIp, ForwardedHeader};
    /// use http::HeaderMap;
    /// # use std::net::IpAddr;
    ///
    /// let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
    /// // A CDN, then a load balancer: two hops, each appending the address it saw.
    /// let two_hops = ClientIp::hops(2, ForwardedHeader::XForwardedFor);
    /// let mut headers = HeaderMap::new();
    /// headers.insert("x-forwarded-for", "6.6.6.6, 203.0.113.7, 198.51.100.1".parse().unwrap());
    /// assert_eq!(two_hops.resolve(Some(ip("10.0.0.1")), &headers), Some(ip("203.0.113.7")));
    /// headers.insert("x-forwarded-for", "198.51.100.1".parse().unwrap()); // too short
    /// assert_eq!(two_hops.resolve(Some(ip("10.0.0.1")), &headers), None);
    /// ```
    pub fn hops(n: usize, header: ForwardedHeader) -> Self {
        Self {
            trust: Trust::Hops(n.max(1)),
            header: header.name(),
            forwarded: header == ForwardedHeader::Forwarded,
        }
    }

    /// The peer address in `extensions`: axum's `ConnectInfo<SocketAddr>`, else a `SocketAddr`.
    ///
    /// ```
    /// # use std::net::SocketAddr;
    /// use tollgate::http::ClientIp;
    /// # use std::net::IpAddr;
    ///
    /// let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
    /// let mut req = http::Request::new(());
    /// assert_eq!(ClientIp::peer_of(req.extensions()), None);
    /// // What a bare hyper server inserts for each connection (axum: `ConnectInfo`).
    /// req.extensions_mut().insert(SocketAddr::new(ip("192.0.2.44"), 51_000));
    /// assert_eq!(ClientIp::peer_of(req.extensions()), Some(ip("192.0.2.44")));
    /// ```
    pub fn peer_of(extensions: &Extensions) -> Option<IpAddr> {
        Self::peer_socket(extensions).map(|a| a.ip())
    }

    /// The peer's socket address, as [`ClientIp::peer_of`] finds it.
    #[inline]
    pub(crate) fn peer_socket(extensions: &Extensions) -> Option<SocketAddr> {
        #[cfg(feature = "axum")]
        if let Some(c) = extensions.get::<axum::extract::ConnectInfo<SocketAddr>>() {
            return Some(c.0);
        }
        extensions.get::<SocketAddr>().copied()
    }

    /// Whether this is [`ClientIp::peer`]: no proxy trusted, headers ignored.
    #[inline]
    pub(crate) fn trusts_nobody(&self) -> bool {
        matches!(self.trust, Trust::Nobody)
    }

    /// The client's address, from the peer's and the headers. Allocates nothing.
    ///
    /// ```
    /// use tollgate::http::{ClientIp, ForwardedHeader};
    /// # use std::net::IpAddr;
    ///
    /// let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
    /// let lb = ClientIp::trusted_proxies(["10.0.0.0/8".parse().unwrap()], ForwardedHeader::XForwardedFor);
    /// let mut req = http::Request::new(());
    /// req.headers_mut().insert("x-forwarded-for", "203.0.113.7".parse().unwrap());
    /// req.extensions_mut().insert(std::net::SocketAddr::new(ip("10.0.0.1"), 8080));
    /// let client = lb.resolve(ClientIp::peer_of(req.extensions()), req.headers());
    /// assert_eq!(client, Some(ip("203.0.113.7")));
    /// ```
    #[inline]
    pub fn resolve(&self, peer: Option<IpAddr>, headers: &HeaderMap) -> Option<IpAddr> {
        let peer = peer?.to_canonical();
        match &self.trust {
            // The default, inline; proxies out of line.
            Trust::Nobody => Some(peer),
            _ => self.behind_proxies(peer, headers),
        }
    }

    /// [`ClientIp::resolve`] when some proxy is trusted.
    #[inline(never)]
    fn behind_proxies(&self, peer: IpAddr, headers: &HeaderMap) -> Option<IpAddr> {
        match &self.trust {
            Trust::Nobody => Some(peer),
            Trust::Networks(nets) => {
                let trusted = |ip: IpAddr| nets.iter().any(|n| n.contains(ip));
                if !trusted(peer) {
                    return Some(peer);
                }
                let mut last = None;
                for entry in self.entries(headers) {
                    let ip = entry?;
                    if !trusted(ip) {
                        return Some(ip);
                    }
                    last = Some(ip);
                }
                // Every entry is a trusted proxy (or there are none): the leftmost proxy, or
                // the peer itself, is as far as we can see.
                Some(last.unwrap_or(peer))
            }
            Trust::Hops(n) => self.entries(headers).nth(n - 1).flatten(),
        }
    }

    /// The header's entries from the right, each parsed (`None`: unparseable).
    fn entries<'h>(&self, headers: &'h HeaderMap) -> impl Iterator<Item = Option<IpAddr>> + 'h {
        let forwarded = self.forwarded;
        headers
            .get_all(&self.header)
            .iter()
            .rev()
            .flat_map(|v| v.as_bytes().rsplit(|b| *b == b','))
            .filter(|e| !e.iter().all(u8::is_ascii_whitespace))
            .map(move |e| {
                let s = core::str::from_utf8(e).ok()?.trim();
                if forwarded {
                    parse_node(forwarded_for(s)?)
                } else {
                    parse_node(s)
                }
            })
    }
}

/// The `for=` parameter of one `Forwarded` element.
fn forwarded_for(element: &str) -> Option<&str> {
    element.split(';').find_map(|pair| {
        let (k, v) = pair.trim().split_once('=')?;
        k.trim().eq_ignore_ascii_case("for").then(|| v.trim())
    })
}

/// An address with an optional port, quoted or bracketed: `1.2.3.4`, `1.2.3.4:80`, `2001:db8::1`,
/// `[2001:db8::1]:443`, `"[2001:db8::1]"`.
fn parse_node(s: &str) -> Option<IpAddr> {
    let s = s.trim_matches('"');
    if let Some(rest) = s.strip_prefix('[') {
        let (addr, _) = rest.split_once(']')?;
        return addr.parse::<IpAddr>().ok().map(|ip| ip.to_canonical());
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(ip.to_canonical());
    }
    // IPv4 with a port.
    let (addr, port) = s.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    addr.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(name: &'static str, values: &[&str]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for v in values {
            m.append(name, v.parse().unwrap());
        }
        m
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// Clients behind the proxies of `cidr`, which name them in `header`.
    fn behind(cidr: &str, header: ForwardedHeader) -> ClientIp {
        ClientIp::trusted_proxies([cidr.parse().unwrap()], header)
    }

    #[test]
    fn rightmost_untrusted_across_several_header_lines() {
        let c = behind("10.0.0.0/8", ForwardedHeader::XForwardedFor);
        let hs = h(
            "x-forwarded-for",
            &["1.1.1.1, 2.2.2.2", "10.0.0.5 , 10.0.0.6"],
        );
        assert_eq!(c.resolve(Some(ip("10.0.0.7")), &hs), Some(ip("2.2.2.2")));
        // No header: the trusted peer is as far as we can see.
        assert_eq!(
            c.resolve(Some(ip("10.0.0.7")), &HeaderMap::new()),
            Some(ip("10.0.0.7"))
        );
        // Garbage where the client should be: no address.
        let hs = h("x-forwarded-for", &["1.1.1.1, unknown, 10.0.0.5"]);
        assert_eq!(c.resolve(Some(ip("10.0.0.7")), &hs), None);
        assert_eq!(c.resolve(None, &hs), None);
    }

    #[test]
    fn hops_count_from_the_right() {
        let c = ClientIp::hops(2, ForwardedHeader::XForwardedFor);
        let hs = h("x-forwarded-for", &["6.6.6.6, 3.3.3.3:1234, 10.0.0.1"]);
        assert_eq!(c.resolve(Some(ip("10.0.0.9")), &hs), Some(ip("3.3.3.3")));
        let short = h("x-forwarded-for", &["3.3.3.3"]);
        assert_eq!(c.resolve(Some(ip("10.0.0.9")), &short), None);
    }

    #[test]
    fn forwarded_header_nodes() {
        let c = behind("192.0.2.0/24", ForwardedHeader::Forwarded);
        let hs = h(
            "forwarded",
            &[
                r#"for=6.6.6.6, for="[2001:db8:cafe::17]:4711";proto=https, For=192.0.2.60;by=192.0.2.1"#,
            ],
        );
        assert_eq!(
            c.resolve(Some(ip("192.0.2.1")), &hs),
            Some(ip("2001:db8:cafe::17"))
        );
        let hs = h("forwarded", &["for=_hidden, for=192.0.2.60"]);
        assert_eq!(c.resolve(Some(ip("192.0.2.1")), &hs), None);
    }

    #[test]
    fn cidr_parse_and_mapped_addresses() {
        assert_eq!("zz/8".parse::<Cidr>(), Err(CidrError::Address));
        assert_eq!("::/129".parse::<Cidr>(), Err(CidrError::Prefix));
        let n: Cidr = "10.0.0.0/8".parse().unwrap();
        assert!(n.contains(ip("::ffff:10.9.9.9")));
        let v6: Cidr = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains(ip("2001:db8:1::1")) && !v6.contains(ip("2001:db9::1")));
        assert_eq!(mask(ip("2001:db8:1:2:3:4:5:6"), 64), ip("2001:db8:1:2::"));
        assert_eq!(mask(ip("2001:db8::1"), 0), ip("::"));
        assert_eq!(mask(ip("2001:db8::1"), 128), ip("2001:db8::1"));
        assert_eq!(mask(ip("203.0.113.77"), 24), ip("203.0.113.0"));
        assert_eq!(mask(ip("203.0.113.77"), 0), ip("0.0.0.0"));
        assert_eq!(mask(ip("203.0.113.77"), 32), ip("203.0.113.77"));
        assert_eq!(mask(ip("203.0.113.77"), 33), ip("203.0.113.77"));
    }
}
