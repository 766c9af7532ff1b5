//! Options in configuration files (feature `serde`): every limiter's options and [`QueueOrder`]
//! serialize and deserialize, so limits can live in a TOML, YAML or JSON file.
//!
//! Durations are written for people in human-readable formats: `"20ms"`, `"1s"`, `"1m30s"`,
//! `"1.5h"` (units `ns`, `us` or `µs`, `ms`, `s`, `m` or `min`, `h`, `d`; parts may be chained),
//! and read back from the same text. Non-human-readable formats (bincode, postcard) carry a
//! duration as serde's own `Duration` (seconds and nanoseconds). The queue fields may be left out
//! (no queue, oldest first). Deserializing does not validate: the limiter's constructor does, once,
//! and returns an [`OptionsError`](crate::OptionsError) for a bad value.
//!
//! ```
//! use core::time::Duration;
//! use tollgate::{QueueOrder, TokenBucketOptions};
//!
//! let text = r#"{ "token_limit": 100, "tokens_per_period": 10, "replenishment_period": "250ms",
//!                 "queue_limit": 20, "queue_order": "newest_first" }"#;
//! let opts: TokenBucketOptions = serde_json::from_str(text).unwrap();
//! assert_eq!(
//!     opts,
//!     TokenBucketOptions::new(100, 10, Duration::from_millis(250))
//!         .with_queue(20, QueueOrder::NewestFirst)
//! );
//! assert_eq!(
//!     serde_json::to_string(&opts).unwrap(),
//!     r#"{"token_limit":100,"tokens_per_period":10,"replenishment_period":"250ms","queue_limit":20,"queue_order":"newest_first"}"#
//! );
//! ```
//!
//! The algorithms of article 001/002 the same way (GCRA, leaky bucket meter and shaper, sliding
//! counter, sliding log):
//!
//! ```
//! use core::time::Duration;
//! use tollgate::{GcraOptions, QueueOrder, SlidingLogOptions};
//!
//! // Queue fields left out are no queue, as the file says (not the waiting default of the
//! // quota-style constructors).
//! let no_queue = (0, QueueOrder::OldestFirst);
//! let gcra: GcraOptions = serde_json::from_str(r#"{ "interval": "20ms", "burst": 50 }"#).unwrap();
//! assert_eq!(gcra, GcraOptions::per_second(50).with_queue(no_queue.0, no_queue.1));
//! let logins: SlidingLogOptions =
//!     serde_json::from_str(r#"{ "permit_limit": 5, "window": "1min" }"#).unwrap();
//! assert_eq!(logins, SlidingLogOptions::per_minute(5).with_queue(no_queue.0, no_queue.1));
//! ```

use core::fmt;
use core::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use crate::concurrency::ConcurrencyOptions;
use crate::fixed_window::FixedWindowOptions;
use crate::gcra::GcraOptions;
use crate::leaky_bucket::{LeakyBucketOptions, ShaperOptions};
use crate::options::QueueOrder;
use crate::sliding_counter::SlidingCounterOptions;
use crate::sliding_log::SlidingLogOptions;
use crate::sliding_window::SlidingWindowOptions;
use crate::token_bucket::TokenBucketOptions;

#[derive(Serialize, Deserialize)]
#[serde(remote = "QueueOrder", rename_all = "snake_case")]
enum QueueOrderDef {
    OldestFirst,
    NewestFirst,
}

/// The remote definition of each options type: its own fields, then the queue fields every
/// options type ends with (optional when read: no queue, oldest first). Types with the same
/// fields share a row.
macro_rules! options_defs {
    ($($($def:ident for $remote:tt),+ => $fields:tt)*) => {$($(
        options_defs!(@def $def, $remote, $fields);
    )+)*};
    (@def $def:ident, $remote:tt, { $($(#[$attr:meta])* $field:ident: $ty:ty,)* }) => {
        #[derive(Serialize, Deserialize)]
        #[serde(remote = $remote, deny_unknown_fields)]
        struct $def {
            $($(#[$attr])* $field: $ty,)*
            #[serde(default)]
            queue_limit: u32,
            #[serde(default, with = "QueueOrderDef")]
            queue_order: QueueOrder,
        }
    };
}

options_defs! {
    ConcurrencyOptionsDef for "ConcurrencyOptions" => {
        permit_limit: u32,
    }
    TokenBucketOptionsDef for "TokenBucketOptions" => {
        token_limit: u32,
        tokens_per_period: u32,
        #[serde(with = "human_duration")]
        replenishment_period: Duration,
    }
    FixedWindowOptionsDef for "FixedWindowOptions",
    SlidingCounterOptionsDef for "SlidingCounterOptions",
    SlidingLogOptionsDef for "SlidingLogOptions" => {
        permit_limit: u32,
        #[serde(with = "human_duration")]
        window: Duration,
    }
    SlidingWindowOptionsDef for "SlidingWindowOptions" => {
        permit_limit: u32,
        #[serde(with = "human_duration")]
        window: Duration,
        segments_per_window: u32,
    }
    GcraOptionsDef for "GcraOptions" => {
        #[serde(with = "human_duration")]
        interval: Duration,
        burst: u32,
    }
    LeakyBucketOptionsDef for "LeakyBucketOptions" => {
        capacity: u32,
        leak: u32,
        #[serde(with = "human_duration")]
        leak_interval: Duration,
    }
    ShaperOptionsDef for "ShaperOptions" => {
        #[serde(with = "human_duration")]
        interval: Duration,
        max_permits: u32,
    }
}

/// Implements `Serialize` and `Deserialize` for a public type through its remote definition.
macro_rules! through_remote {
    ($($ty:ty => $def:ty),* $(,)?) => {$(
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                <$def>::serialize(self, serializer)
            }
        }

        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                <$def>::deserialize(deserializer)
            }
        }
    )*};
}

through_remote! {
    QueueOrder => QueueOrderDef,
    ConcurrencyOptions => ConcurrencyOptionsDef,
    TokenBucketOptions => TokenBucketOptionsDef,
    FixedWindowOptions => FixedWindowOptionsDef,
    SlidingWindowOptions => SlidingWindowOptionsDef,
    GcraOptions => GcraOptionsDef,
    LeakyBucketOptions => LeakyBucketOptionsDef,
    ShaperOptions => ShaperOptionsDef,
    SlidingCounterOptions => SlidingCounterOptionsDef,
    SlidingLogOptions => SlidingLogOptionsDef,
}

/// Every rate limiter of the roster ([`rate_limiters!`](crate::roster::rate_limiters)) has its
/// options in `through_remote!`.
macro_rules! config_covers_the_roster {
    (() $($(#[$doc:meta])* $variant:ident($m:ident::$limiter:ident, $opts:ident) $ctor:ident $(, $per:ident)?;)+) => {
        const _: () = {
            const fn serde<T: Serialize + for<'de> Deserialize<'de>>() {}
            $(serde::<crate::$m::$opts>();)+
        };
    };
}

crate::roster::rate_limiters!(config_covers_the_roster! {});

/// Durations as human-readable text (`"1m30s"`) in human-readable formats, as serde's
/// `Duration` otherwise.
mod human_duration {
    use super::*;

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            s.collect_str(&Text(*d))
        } else {
            d.serialize(s)
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        if d.is_human_readable() {
            d.deserialize_str(TextVisitor)
        } else {
            Duration::deserialize(d)
        }
    }

    struct TextVisitor;

    impl Visitor<'_> for TextVisitor {
        type Value = Duration;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(r#"a duration such as "250ms", "1s" or "1m30s""#)
        }

        fn visit_str<E: de::Error>(self, text: &str) -> Result<Duration, E> {
            super::parse_duration(text).map_err(E::custom)
        }
    }
}

/// Writes a duration as its largest whole units: `1h`, `1m30s`, `250ms`, `1s500ms`, `0s`.
struct Text(Duration);

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u128); 7] = [
            ("d", 86_400_000_000_000),
            ("h", 3_600_000_000_000),
            ("m", 60_000_000_000),
            ("s", 1_000_000_000),
            ("ms", 1_000_000),
            ("us", 1_000),
            ("ns", 1),
        ];
        let mut left = self.0.as_nanos();
        if left == 0 {
            return f.write_str("0s");
        }
        for (unit, size) in UNITS {
            if left >= size {
                write!(f, "{}{unit}", left / size)?;
                left %= size;
            }
        }
        Ok(())
    }
}

/// Why a duration's text was refused.
#[derive(Debug, PartialEq, Eq)]
enum ParseError {
    Empty,
    Number,
    Unit,
    TooLong,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ParseError::Empty => "an empty duration",
            ParseError::Number => "a duration part without a number (e.g. \"10s\")",
            ParseError::Unit => "a duration unit other than ns, us, µs, ms, s, m, min, h, d",
            ParseError::TooLong => "a duration longer than the largest Duration",
        })
    }
}

/// Parses `"1m30s"`, `"250ms"`, `"1.5h"`, `" 2 s "`: numbers (with an optional fraction), each
/// followed by a unit, added up. Exact to the nanosecond; an overflow is an error, never a wrap.
fn parse_duration(text: &str) -> Result<Duration, ParseError> {
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(ParseError::Empty);
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(digits);
        let after = after.trim_start();
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c.is_whitespace())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_len);
        rest = after.trim_start();
        let size: u128 = match unit {
            "ns" => 1,
            "us" | "µs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" | "min" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "d" => 86_400_000_000_000,
            _ => return Err(ParseError::Unit),
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(ParseError::Number);
        }
        let mut nanos: u128 = 0;
        for digit in whole.bytes() {
            nanos = nanos
                .checked_mul(10)
                .and_then(|n| n.checked_add(u128::from(digit - b'0')))
                .ok_or(ParseError::TooLong)?;
        }
        nanos = nanos.checked_mul(size).ok_or(ParseError::TooLong)?;
        // The fraction: digit by digit, each a tenth of the one before (exact; digits finer than a
        // nanosecond are dropped).
        let mut place = size;
        for digit in fraction.bytes() {
            place /= 10;
            nanos += u128::from(digit - b'0') * place;
        }
        total = total.checked_add(nanos).ok_or(ParseError::TooLong)?;
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| ParseError::TooLong)?;
    Ok(Duration::new(secs, (total % 1_000_000_000) as u32))
}

/// Formats `d` into a fixed buffer (for tests without an allocator).
#[cfg(test)]
fn format(d: Duration) -> heapless::String<64> {
    use core::fmt::Write as _;
    let mut s = heapless::String::new();
    write!(s, "{}", Text(d)).unwrap();
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        let ms = Duration::from_millis;
        assert_eq!(parse_duration("250ms"), Ok(ms(250)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration(" 1 m 30 s "), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("0.000000001s"), Ok(Duration::from_nanos(1)));
        assert_eq!(parse_duration("2min"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3µs"), Ok(Duration::from_micros(3)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
    }

    #[test]
    fn bad_durations_are_errors_not_panics() {
        assert_eq!(parse_duration(""), Err(ParseError::Empty));
        assert_eq!(parse_duration("10"), Err(ParseError::Unit));
        assert_eq!(parse_duration("ms"), Err(ParseError::Number));
        assert_eq!(parse_duration("1.2.3s"), Err(ParseError::Number));
        assert_eq!(parse_duration("5 parsecs"), Err(ParseError::Unit));
        assert_eq!(
            parse_duration("99999999999999999999999999999999999999999d"),
            Err(ParseError::TooLong)
        );
        assert_eq!(
            parse_duration("18446744073709551616s"),
            Err(ParseError::TooLong)
        );
    }

    #[test]
    fn durations_round_trip_through_text() {
        for d in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_millis(1500),
            Duration::from_secs(90),
            Duration::from_secs(86_400 * 400 + 7),
            Duration::MAX,
        ] {
            assert_eq!(parse_duration(&format(d)), Ok(d), "{}", format(d));
        }
        assert_eq!(format(Duration::from_millis(1500)), "1s500ms");
        assert_eq!(format(Duration::from_secs(90)), "1m30s");
    }

    #[test]
    fn every_options_type_round_trips_through_json() {
        let order = QueueOrder::NewestFirst;
        let concurrency = ConcurrencyOptions::new(4).with_queue(8, order);
        let bucket = TokenBucketOptions::per_second(50).with_queue(3, order);
        let fixed = FixedWindowOptions::new(100, Duration::from_secs(60));
        let sliding = SlidingWindowOptions::new(100, Duration::from_secs(60), 6);
        json_round_trip(concurrency);
        json_round_trip(bucket);
        let json = json_round_trip(fixed);
        assert!(json.contains(r#""window":"1m""#), "{json}");
        json_round_trip(sliding);
    }

    #[test]
    fn queue_fields_default_and_unknown_fields_are_refused() {
        let fixed: FixedWindowOptions =
            serde_json::from_str(r#"{"permit_limit": 5, "window": "10s"}"#).unwrap();
        assert_eq!(fixed, FixedWindowOptions::new(5, Duration::from_secs(10)));
        let err = serde_json::from_str::<FixedWindowOptions>(
            r#"{"permit_limit": 5, "window": "10s", "windw": 3}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
        let err =
            serde_json::from_str::<FixedWindowOptions>(r#"{"permit_limit": 5, "window": "10"}"#)
                .unwrap_err();
        assert!(err.to_string().contains("unit"), "{err}");
    }

    /// Round trip through JSON and back; returns the JSON.
    fn json_round_trip<T>(opts: T) -> String
    where
        T: Serialize + for<'de> Deserialize<'de> + PartialEq + fmt::Debug,
    {
        let json = serde_json::to_string(&opts).unwrap();
        assert_eq!(serde_json::from_str::<T>(&json).unwrap(), opts);
        json
    }

    /// Round trip through `text` (JSON) and back, checking the text too.
    fn round_trip<T>(opts: T, text: &str)
    where
        T: Serialize + for<'de> Deserialize<'de> + PartialEq + fmt::Debug,
    {
        assert_eq!(json_round_trip(opts), text);
    }

    #[test]
    fn the_algorithms_of_issue_15_round_trip_through_json() {
        let order = QueueOrder::NewestFirst;
        round_trip(
            GcraOptions::per_second(50).with_queue(3, order),
            r#"{"interval":"20ms","burst":50,"queue_limit":3,"queue_order":"newest_first"}"#,
        );
        round_trip(
            LeakyBucketOptions::new(10, 2, Duration::from_secs(1)),
            r#"{"capacity":10,"leak":2,"leak_interval":"1s","queue_limit":0,"queue_order":"oldest_first"}"#,
        );
        round_trip(
            ShaperOptions::per_second(20),
            r#"{"interval":"50ms","max_permits":1,"queue_limit":20,"queue_order":"oldest_first"}"#,
        );
        round_trip(
            SlidingCounterOptions::new(100, Duration::from_secs(90)),
            r#"{"permit_limit":100,"window":"1m30s","queue_limit":0,"queue_order":"oldest_first"}"#,
        );
        round_trip(
            SlidingLogOptions::per(Duration::from_secs(3600), 3).with_queue(3, order),
            r#"{"permit_limit":3,"window":"1h","queue_limit":3,"queue_order":"newest_first"}"#,
        );
        // Durations as people write them; queue fields left out; unknown fields refused.
        let gcra: GcraOptions =
            serde_json::from_str(r#"{"interval": "0.5s", "burst": 4}"#).unwrap();
        // (Left out, the queue is none, as written in the file: not the quota-style
        // constructors' waiting default.)
        assert_eq!(
            gcra,
            GcraOptions::with_period(Duration::from_millis(500))
                .with_burst(4)
                .with_queue(0, QueueOrder::OldestFirst)
        );
        let err = serde_json::from_str::<SlidingLogOptions>(
            r#"{"permit_limit": 5, "window": "1m", "capacity": 8}"#,
        )
        .unwrap_err();
        assert!(err.to_string().contains("unknown field"), "{err}");
        // Deserializing does not validate; the constructor does, with a typed error.
        let zero: SlidingCounterOptions =
            serde_json::from_str(r#"{"permit_limit": 0, "window": "1s"}"#).unwrap();
        assert_eq!(
            zero.validate(),
            Err(crate::options::OptionsError::ZeroLimit)
        );
    }
}
