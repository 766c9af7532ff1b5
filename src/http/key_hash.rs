//! The partition tables' hasher for [`Key`](super::Key)s: a folded multiply under two random
//! per-table seeds.
//!
//! A `Key` is already a spread-out value (an IP address, or a 128-bit SipHash of any other
//! key), so the tables need only a cheap keyed mix of its 17 bytes, not SipHash over them again
//! (which cost 335 instructions a request, a fifth of the layer's work). The seeds are drawn
//! from the standard library's per-process randomness, so a client that does not know them
//! cannot aim its keys at another client's fingerprint; and a collision only makes two keys
//! share one limit, which limits more, never less.

use core::hash::{BuildHasher, Hasher};
use std::hash::RandomState;

/// Builds [`KeyHasher`]s with one table's seeds.
#[derive(Clone, Debug)]
pub(crate) struct KeyHashBuilder {
    k0: u64,
    k1: u64,
}

impl KeyHashBuilder {
    /// Fresh random seeds.
    pub(crate) fn new() -> Self {
        let s = RandomState::new();
        Self {
            k0: s.hash_one(0x243F_6A88_85A3_08D3u64),
            k1: s.hash_one(0x1319_8A2E_0370_7344u64) | 1,
        }
    }
}

impl BuildHasher for KeyHashBuilder {
    type Hasher = KeyHasher;

    #[inline]
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher {
            acc: self.k0,
            k1: self.k1,
        }
    }
}

/// The low and high halves of the 128-bit product, folded together.
#[inline(always)]
const fn fold(a: u64, b: u64) -> u64 {
    let p = (a as u128) * (b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Mixes each word written into the accumulator with one folded multiply.
#[derive(Debug)]
pub(crate) struct KeyHasher {
    acc: u64,
    k1: u64,
}

impl Hasher for KeyHasher {
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.acc = fold(self.acc ^ x, self.k1);
    }

    #[inline]
    fn write_u8(&mut self, x: u8) {
        self.write_u64(u64::from(x) | 0x100);
    }

    /// Anything else (not used by `Key`'s `Hash`): eight bytes at a time, the length last.
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        self.write_u64(u64::from_le_bytes(w));
        self.write_u64(bytes.len() as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        fold(self.acc, self.k1 ^ 0x9E37_79B9_7F4A_7C15)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Key;

    /// Keys that differ in one bit anywhere (address bytes or tag) get different hashes, the
    /// same key the same hash, and two tables (two seeds) disagree.
    #[test]
    fn one_bit_apart_keys_hash_apart_and_seeds_differ() {
        let a = KeyHashBuilder::new();
        let b = KeyHashBuilder::new();
        let base = Key::ip("2001:db8::1".parse().unwrap());
        assert_eq!(a.hash_one(base), a.hash_one(base));
        assert_ne!(a.hash_one(base), b.hash_one(base));
        let mut seen = std::collections::HashSet::new();
        for i in 0..=255u8 {
            let ip = std::net::Ipv4Addr::new(10, 0, 0, i);
            assert!(seen.insert(a.hash_one(Key::ip(ip.into()))));
            assert!(seen.insert(a.hash_one(Key::from_u64(u64::from(i)))));
        }
        assert!(seen.insert(a.hash_one(Key::MISSING)));
        assert!(seen.insert(a.hash_one(Key::GLOBAL)));
        let mut h = a.build_hasher();
        h.write(b"any other bytes");
        assert_ne!(h.finish(), a.hash_one(base));
    }
}
