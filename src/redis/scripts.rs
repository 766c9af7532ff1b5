//! The Lua scripts: one per algorithm, each deciding any number of `(key, permits)` pairs in
//! order, in one run (a lone decision is a batch of one).
//!
//! Every script:
//! - is a template whose `@NAME@` placeholders the builder replaces with the limiter's constants
//!   as integer literals ([`render`]): each configuration is a script of its own (its own SHA1),
//!   so nothing is parsed from `ARGV` but the permits (Lua parses a literal once, when Redis
//!   compiles the script; `tonumber` on an argument costs a `strtod` on every run);
//! - reads the time once, from `redis.call('TIME')`, as integer microseconds since the Unix
//!   epoch (about 1.8e15, exact in a Lua double, which is exact below 2^53);
//! - counts periods, windows and segments from the Unix epoch, so every client agrees on them;
//! - keeps each key's state in one short string, written with its expiry in the same command,
//!   or for the fixed window and the sliding counter a count per window under the window's own
//!   key, taken with `INCRBY` and expired when the window stops counting: after the expiry the
//!   key's absence means the same as its content would (a full bucket, an empty window). The
//!   expiry is the instant the state stops mattering rounded up to a whole second of Unix time
//!   (`SET ... PXAT`), and a grant whose new state the key's expiry already covers keeps it
//!   (`SETRANGE key 0` for a value as long as the old, else `SET ... KEEPTTL`; inside a script
//!   `SET ... KEEPTTL` is 7.4k instructions, `SET ... PX` 11.6k): the expiry moves about once a
//!   second on a busy key, not with each grant, and an idle key lives less than a second beyond
//!   its state's meaning. Each state tells how far its key's expiry
//!   reaches, as every writer of the key computes it alike: GCRA's `tat`, when the token bucket
//!   is full again, the end of the window of the sliding window's newest segment (the expiry
//!   was set to cover them);
//! - reads every key of the run with one `MGET` (one `redis.call` for
//!   the whole batch instead of a `GET` per key), decides the run's pairs in order on the state
//!   in Lua (a key repeated in the run is read once, the second decision sees the first's
//!   grant), and writes each grant's key with one `SET`; a key `MGET` found absent is written
//!   with `NX` (or, unchanged, checked with `EXISTS`), so that a value of another type there,
//!   which `MGET` reads as absent, is left as it is and that key's decisions are its errors (as
//!   a `GET` would have failed with `WRONGTYPE`) — except the fixed window, which reads nothing
//!   (its `INCRBY` returns the count), and the sliding counter, whose `MGET` reads the previous
//!   windows' counts and whose `INCRBY` (or a probe's `GET`) fails on a value of another type;
//! - formats with `%d` every number that may reach 10^14 (Lua's own number-to-string conversion,
//!   `%.14g`, would switch to exponent notation there), and parses state with plain
//!   `string.find` and `tonumber` (no patterns);
//! - takes `ARGV[i]`, the permits asked of `KEYS[i]` (0 is a probe: granted if one permit is
//!   free, writes nothing; `"1"`, the usual count, is recognised without `tonumber`), and after
//!   them `r` if a key repeats in the run (see `@@SEEN@@`);
//! - returns one bulk string (cheaper for Redis to build than an array, whose conversion from a
//!   Lua table costs more than the script's arithmetic): the seconds and microseconds of `TIME`
//!   as Redis gave them (no formatting; one concatenation for a lone decision, `table.concat`
//!   for a batch), then for each key a fixed number of integers from which the client derives
//!   the decision, remaining, RetryAfter and reset (see [`Kind`]), or `e`
//!   for a key the script cannot read (a value of another type, content it did not write): that
//!   key's error, not the others' and not the server's. The same key twice in a batch is decided
//!   twice, in order: the second sees the first's grant.
//!
//! Lua numbers are doubles: every quantity here is an integer below 2^53 — the builder bounds
//! every span (time to refill an empty bucket, window, burst × interval) by
//! [`MAX_SPAN`](super::MAX_SPAN), 2^50 µs, and the sliding counter's `limit × window` by 2^52;
//! each script clamps what it reads to what its options can mean (a deficit to the limit, or
//! twice the limit for a debt settled under the same limit, a tick
//! or segment to now, a GCRA debt to the burst, a sliding counter's count to twice the limit,
//! the most a settled debt leaves), so that every instant it
//! computes is below `now + 2 × 2^50 µs`, exact until the year 2183. The products that may exceed
//! 2^53 (gained tokens after a long idle gap) are only compared, never stored, where rounding
//! cannot flip the comparison.
//!
//! The same key is used by every limit of the same time shape (the key names the algorithm and
//! its period, window, segments or interval, not its limit), so each script reads state written
//! under another limit: the bucket keeps its deficit (capped at the limit), the fixed window its
//! count, the sliding window its counts, GCRA its debt (capped at the burst), the sliding counter
//! its two windows' counts (capped at twice the limit). The token bucket's key names its tokens per
//! period too (its rate), so that all its writers agree on when it is full again.

/// What a script's reply holds per key (after `sec usec`), and so how the client reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// One integer `x`: `x >= 0` granted, the window's count after the grant (a probe: the
    /// count); `x < 0` refused, the count was `-x - 1`. With *up to* (a lease), a second
    /// integer: the permits taken. The rest follows from the window (the reset and RetryAfter
    /// are the window's end).
    Fixed,
    /// Two integers `x tick`: `x >= 0` granted, the tokens missing from full after the grant
    /// (a probe: as it stands), with the period `tick`: the state written, so the script
    /// formats one string per grant; `x < 0` refused, `-x - 1` tokens were there (`tick` 0);
    /// `-1+D 0` refused in debt (a settled lease's), `D` tokens owed past the limit. The
    /// deficit is as of the current period, whence the reset and RetryAfter.
    Bucket,
    /// One integer `x`: `x >= 0` granted, the bucket's "full at" `f = k × tokens per period +
    /// owed` after the grant (a probe: as it stands, at least `k × tokens per period`), the
    /// state written, so the script formats one number per grant; `x < 0` refused, `-x - 1`
    /// tokens were there. The deficit as of the current period `k` is `f - k × tokens per
    /// period`, whence the tokens, the reset and RetryAfter.
    BucketOne,
    /// One integer `x`: `x >= 0` granted, the theoretical arrival time `tat` (µs since the
    /// epoch) after the grant (a probe: as it stands, at least `now`), which is also the state
    /// written, so the script formats one number per grant; `x < 0` refused, the debt
    /// `tat - now` was `-x - 1`.
    Gcra,
    /// Four integers: `code remaining retry_after_us reset_us` (`code` 1 granted, 0 refused),
    /// or for the sliding window's grant in its newest segment `2 total newest 0`: granted, the
    /// window's total after the grant (remaining is the limit less it) and the newest count (the
    /// words the grant wrote; the reset is the end of the current segment's window).
    Full,
    /// Two integers `prev x` (the sliding counter): `prev` the previous window's count (at most
    /// twice the limit: a settled lease's debt); `x >= 0` granted, the current window's count
    /// after the grant (a probe: as it stands), `x < 0` refused, the count was `-x - 1` (at most
    /// twice the limit). The client derives
    /// remaining, RetryAfter and reset from them and the window's offset, as the local counter.
    Counter,
}

/// The Lua shared by the scripts, spliced into each template where its `@@NAME@@` marker
/// stands, in this order (a snippet may hold the markers of those after it), before the
/// constants are ([`render`]).
const SNIPPETS: [(&str, &str); 10] = [
    // The clock, then every key's value in one `MGET` (a string, or false: absent or not a
    // string), then `seen` (the value this run wrote under a key) if a key repeats in the run,
    // which the client says with one more argument: a repeated key reads the run's own write.
    (
        "@@READ@@",
        r"@@CLOCK@@
local vals = redis.call('MGET', unpack(KEYS))
@@SEEN@@
local find, sub = string.find, string.sub",
    ),
    // The table of the values a run wrote, made only if the client says that a key repeats in
    // the run (an argument after the permits): a run of distinct keys, the usual batch, spares
    // its allocation and an insertion per grant.
    (
        "@@SEEN@@",
        r"local seen
if ARGV[#KEYS + 1] then seen = {} end",
    ),
    // The time, as integer microseconds since the Unix epoch, and the reply's two first words.
    (
        "@@CLOCK@@",
        r"@@TIME@@
local out, fmt = {t[1], t[2]}, string.format",
    ),
    // The loop's head: `key`, `n` (the permits asked), `v` (the key's value); the script
    // decides, writes its reply to `out[i + 2]` (`ERR` for a value it cannot read) and, on a
    // grant, sets `val` (the new value), and `keep` or `exp` (see `@@EXPIRY@@`) for `@@STORE@@`.
    (
        "@@EACH@@",
        r"for i = 1, #KEYS do
  local key, a = KEYS[i], ARGV[i]
  local n = 1
  if a ~= '1' then n = tonumber(a) end
  local v = seen and seen[key] or vals[i]
  local val, keep, exp",
    ),
    // The expiry of a grant's write. The script sets `need` (the instant, µs, until which the
    // new state means more than the key's absence would) and `old` (the instant up to which
    // the key's current expiry is known to reach, rounded up below to a whole second, as
    // every expiry is; `nil` for a key without one). The TTL is kept if it covers `need`
    // (`keep`), else the new expiry `exp` is `need` rounded up to a whole second of Unix time.
    (
        "@@EXPIRY@@",
        r"      if old then
        old = old + 999999
        old = old - old % 1000000
        keep = need <= old
      end
      if not keep then
        exp = need + 999999
        exp = exp - exp % 1000000
      end",
    ),
    // One write per grant. When the key's expiry already covers the new state, it is kept: a
    // new value as long as the old overwrites it in place (`SETRANGE key 0`, which keeps the
    // expiry, cheaper than `SET`: GCRA's `tat` keeps its 16 digits until the year 2286), any
    // other with `SET ... KEEPTTL`. Else `SET ... PXAT` at the new expiry (in ms, formatted with
    // `%d`: Redis would format a Lua number with `%.17g`). A key `MGET` found no
    // string under is written only if absent (`NX`) or, unchanged, checked absent (`EXISTS`):
    // a value of another type there (`MGET` reads it as absent) is left as it is, and the
    // decision is that key's error.
    (
        "@@STORE@@",
        r"  if val then
    if keep then
      if #val == #v then
        redis.call('SETRANGE', key, '0', val)
      else
        redis.call('SET', key, val, 'KEEPTTL')
      end
      if seen then seen[key] = val end
    else
      local m = fmt('%d', exp / 1000)
      if v then
        redis.call('SET', key, val, 'PXAT', m)
        if seen then seen[key] = val end
      elseif redis.call('SET', key, val, 'PXAT', m, 'NX') then
        if seen then seen[key] = val end
      else
        out[i + 2] = ERR
      end
    end
  elseif not v and redis.call('EXISTS', key) == 1 then
    out[i + 2] = ERR
  end
end
@@REPLY@@",
    ),
    // The reply: one concatenation for a lone decision, `table.concat` for a batch.
    (
        "@@REPLY@@",
        r"if #KEYS == 1 then return t[1] .. ' ' .. t[2] .. ' ' .. out[3] end
return table.concat(out, ' ')",
    ),
    // The time, as integer microseconds since the Unix epoch (`t`, `now`): every script's
    // first lines (through `@@CLOCK@@` or the one-decision `@@READ@@` for the decisions).
    (
        "@@TIME@@",
        r"local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]",
    ),
    // A settle's write of `val` under `key` (the bucket's and the sliding window's): the
    // key's expiry kept if it covers `need` (`old`, how far it reaches, rounded up to a whole
    // second; `nil` for a key without one), else set to `need` rounded up to a whole second.
    (
        "@@SETTLE_WRITE@@",
        r"      if old and need <= old then
        redis.call('SET', key, val, 'KEEPTTL')
      else
        local exp = need + 999999
        exp = exp - exp % 1000000
        redis.call('SET', key, val, 'PXAT', fmt('%d', exp / 1000))
      end",
    ),
    // The sliding window's counts (its decision's and its settle's): from `q`, the space
    // before the newest count in `v` (`nil`: no count, or no `v`), each count added to
    // `c[m]`, `m` its segment `s` (the newest first) less `lo`, down to the oldest still in
    // the window; `ok` false on a count that is not one.
    (
        "@@SEGMENTS@@",
        r"    p = q
    while p do
      q = find(v, ' ', p + 1, true)
      local cnt
      if q then cnt = tonumber(sub(v, p + 1, q - 1)) else cnt = tonumber(sub(v, p + 1)) end
      if not cnt or cnt < 0 then ok = false break end
      -- A segment ahead of now (the server's clock stepped back) counts as the current one.
      local m = s - lo
      if m > @SEGS@ then m = @SEGS@ end
      if m < 1 then break end
      c[m] = c[m] + cnt
      s = s - 1
      p = q
    end",
    ),
];

/// The snippets of the one-decision form of a script that reads its state with `@@READ@@`
/// ([`render_one`]), replacing [`SNIPPETS`]' where they differ: the key is read with `GET`
/// (through `pcall`: a value of another type is that key's error, `ERR`), not `MGET` of
/// `unpack(KEYS)` into a table; no `seen` table can be needed; the reply is `r`, one
/// concatenation, with no `out` table (the template's `out[i + 2]` is `r` in this form).
/// A run per decision is the run of a lone caller, whose latency it is: under callgrind (redis
/// 7.0) GCRA's run costs 34.7k instructions in this form against 41.2k in the batch form.
const SNIPPETS_ONE: [(&str, &str); 3] = [
    (
        "@@READ@@",
        r"@@TIME@@
local fmt, seen, r = string.format
local find, sub = string.find, string.sub",
    ),
    (
        "@@EACH@@",
        r"do
  local key, a = KEYS[1], ARGV[1]
  local n = 1
  if a ~= '1' then n = tonumber(a) end
  local v = redis.pcall('GET', key)
  if type(v) == 'table' then return t[1] .. ' ' .. t[2] .. ' ' .. ERR end
  local val, keep, exp",
    ),
    ("@@REPLY@@", r"return t[1] .. ' ' .. t[2] .. ' ' .. r"),
];

/// `template` with its snippets spliced in and each `(name, value)` placeholder `@name@`
/// replaced by the integer.
pub(crate) fn render(template: &str, constants: &[(&str, u64)]) -> String {
    splice(template, &SNIPPETS, constants)
}

/// The one-decision form of `template` (see [`SNIPPETS_ONE`]), for a template that reads its
/// state with `@@READ@@` and decides in `@@EACH@@`; `None` for the others (the fixed window
/// and the sliding counter, whose loop reads nothing per key but what its commands return).
pub(crate) fn render_one(template: &str, constants: &[(&str, u64)]) -> Option<String> {
    if !template.contains("@@READ@@") || !template.contains("@@EACH@@") {
        return None;
    }
    let snippets = SNIPPETS.map(|(marker, snippet)| {
        let one = SNIPPETS_ONE.iter().find(|(m, _)| *m == marker);
        (marker, one.map_or(snippet, |(_, s)| s))
    });
    Some(splice(template, &snippets, constants).replace("out[i + 2]", "r"))
}

fn splice(template: &str, snippets: &[(&str, &str)], constants: &[(&str, u64)]) -> String {
    let mut s = template.to_owned();
    for (marker, snippet) in snippets {
        s = s.replace(marker, snippet);
    }
    for (name, value) in constants {
        s = s.replace(&format!("@{name}@"), &value.to_string());
    }
    s
}

/// The fixed window: the count of window `k` (windows since the epoch) is an integer under the
/// key `KEYS[i]:k`, taken with one `INCRBY` (given back with `DECRBY` if the count passes the
/// limit: a refusal) and expired when the window ends (`PEXPIRE` when the key is new, i.e. the
/// `INCRBY` returned the increment): the hand-written script's two commands, with `TIME`. A
/// window's key is never read in another window, so no state is parsed, and a window that ends
/// takes its count with it, exactly at its end whatever the TTL's millisecond rounding.
///
/// Constants: `L` (the limit), `W` (the window, µs). A negative count `-m` asks for *up to* `m`
/// (a lease): it takes what is there, from 1 to `m`. A refusal that finds the count past the
/// limit (a settled lease's debt, [`FIXED_SETTLE`], or a count of a higher limit) reads the
/// next window's count, and replies `x+o` if the debt carried there is `o > 0` (one `GET`, on
/// those refusals only), so that the RetryAfter counts it.
pub(crate) const FIXED: &str = r#"
@@CLOCK@@
local into = now % @W@
local sfx = ':' .. fmt('%d', (now - into) / @W@)
local ms = @W@ - into + 999
ms = (ms - ms % 1000) / 1000
for i = 1, #KEYS do
  local key, a = KEYS[i] .. sfx, ARGV[i]
  local n = 1
  if a ~= '1' then n = tonumber(a) end
  local r
  if n > 0 then
    local c = redis.pcall('INCRBY', key, a)
    if type(c) ~= 'number' then
      r = 'e'
    elseif c > @L@ then
      redis.call('DECRBY', key, a)
      r = fmt('%d', n - c - 1)
      if c - n > @L@ then
        -- Past the limit: a settled lease's debt, carried into the next window, says so.
        local o = tonumber(redis.pcall('GET', KEYS[i] .. ':' .. fmt('%d', (now - into) / @W@ + 1)))
        if o and o > 0 then r = r .. '+' .. fmt('%d', o) end
      end
    else
      if c == n then redis.call('PEXPIRE', key, ms) end
      r = fmt('%d', c)
    end
  elseif n == 0 then
    local v = redis.pcall('GET', key)
    local c = 0
    if v then c = tonumber(v) end
    if not c then
      r = 'e'
    elseif c < @L@ then
      r = fmt('%d', c)
    else
      r = fmt('%d', -c - 1)
    end
  else
    local m = -n
    local c = redis.pcall('INCRBY', key, m)
    if type(c) ~= 'number' then
      r = 'e 0'
    else
      local before = c - m
      if before >= @L@ then
        redis.call('DECRBY', key, m)
        r = fmt('%d 0', -before - 1)
      else
        local take = @L@ - before
        if take >= m then take = m else redis.call('DECRBY', key, m - take) end
        if before == 0 then redis.call('PEXPIRE', key, ms) end
        r = fmt('%d %d', before + take, take)
      end
    end
  end
  out[i + 2] = r
end
@@REPLY@@
"#;

/// Token bucket: the state machine of the local `bucket::state::Bucket`, over a string
/// `"<owed> <tick>"`: the tokens missing from a full bucket as of tick `tick` (periods since the
/// epoch). A deficit rather than the tokens, so that an absent key (a full bucket) and a key
/// written under another limit mean the same under every limit. The instant the bucket is full
/// again, which the key's expiry covers, depends on the tokens per period too: they are in the
/// key's name with the period, so that every writer of a key computes it alike.
///
/// A lease settled past the limit ([`BUCKET_SETTLE`]) writes `"<owed> <tick> <L>"`: under the
/// same limit the bucket owes up to one limit more (`L2`), and a refusal then replies `-1+D 0`
/// (no tokens, `D` owed past the limit), so that its RetryAfter counts the debt; under another
/// limit the deficit counts up to that limit, as before. A state of two words, the only form
/// earlier versions wrote, reads as it did (a third word is parsed only where the tick word is
/// not a number: a grant in the period the state names compares strings, as before).
///
/// Constants: `L` (the limit), `L2` (twice the limit), `PER` (tokens per period), `P` (the
/// period, µs). After the refill, a bucket that still owes tokens is at the current period, so
/// the client derives the reset and RetryAfter from the tokens (and a refusal's debt) alone.
pub(crate) const BUCKET: &str = r#"
local ERR = 'e 0'
@@READ@@
local k = (now - now % @P@) / @P@
-- A state written this period names it as `ks` does: compared as strings, not parsed.
local ks = fmt('%d', k)
@@EACH@@
  local owed, tick, old, top = 0, k, nil, @L@
  if v then
    local sp = find(v, ' ', 1, true)
    if sp then
      owed = tonumber(sub(v, 1, sp - 1))
      local ts = sub(v, sp + 1)
      if ts ~= ks then
        tick = tonumber(ts)
        if not tick then
          -- A settled debt past the limit: `<owed> <tick> <L it was written under>`.
          local sq = find(ts, ' ', 1, true)
          if sq then
            tick = tonumber(sub(ts, 1, sq - 1))
            if sub(ts, sq + 1) == '@L@' then top = @L2@ end
          end
        end
      end
    end
    if not (sp and owed and tick) or owed < 0 then
      owed = nil
    else
      -- When the bucket the key holds is full again: its expiry covers that.
      old = owed + @PER@ - 1
      old = (tick + (old - old % @PER@) / @PER@) * @P@
      if owed > top then owed = top end
      if tick > k then tick = k end
    end
  end
  if not owed then
    out[i + 2] = ERR
  else
    if k > tick and owed > 0 then
      if (k - tick) * @PER@ >= owed then owed = 0 else owed = owed - (k - tick) * @PER@ end
    end
    local tokens = @L@ - owed
    if tokens < 0 then
      -- In debt: refused, with the debt (`-1+D`: no tokens, D owed past the limit).
      out[i + 2] = fmt('-1+%d 0', -tokens)
    elseif tokens < n or tokens == 0 then
      out[i + 2] = fmt('%d 0', -tokens - 1)
    elseif n == 0 then
      out[i + 2] = fmt('%d %d', owed, k)
    else
      owed = owed + n
      local need = owed + @PER@ - 1
      need = (k + (need - need % @PER@) / @PER@) * @P@
@@EXPIRY@@
      val = fmt('%d %s', owed, ks)
      out[i + 2] = val
    end
  end
@@STORE@@
"#;

/// Token bucket, one number: the state machine of [`BUCKET`] over one integer, the bucket's
/// "full at" in token units, `f = tick × PER + owed` (GCRA's `tat`, counted in tokens instead
/// of µs): at period `k` the bucket owes `f - k × PER` tokens (none if that is negative, at
/// most the limit), and a grant of `n` writes `k × PER + owed + n`. One `tonumber` and one
/// `string.format` per grant, where the two-number state parses and compares two; the bucket is
/// full again at period `ceil(f / PER)`, which the key's expiry covers.
///
/// Exact while `k × PER` plus the limit stays below 2^53: the builder takes this form for a
/// bucket whose `KMAX` (the last period for which it holds) is past
/// [`ONE_NUMBER_HORIZON_US`](super::options::ONE_NUMBER_HORIZON_US) (the year 2112), i.e.
/// below about 2 tokens per µs, and the script refuses a run past `KMAX` (a `TOLLGATE` error:
/// every key's error) rather than round. Faster buckets keep [`BUCKET`]. The key's shape
/// (`tbf...`) is not the two-number form's (`tb...`): the two are never read as each other.
///
/// A lease settled past the limit ([`BUCKET_ONE_SETTLE`]) writes `"<f> <L>"`: under the same
/// limit the bucket owes up to one limit more (`L2`), and a refusal then replies `-1+D` (no
/// tokens, `D` owed past the limit), so that its RetryAfter counts the debt; under another
/// limit the debt counts up to the limit, as before.
///
/// Constants: `L` (the limit), `L2` (twice the limit), `PER` (tokens per period), `P` (the
/// period, µs), `KMAX`.
pub(crate) const BUCKET_ONE: &str = r#"
local ERR = 'e'
@@READ@@
local k = (now - now % @P@) / @P@
if k > @KMAX@ then return redis.error_reply('TOLLGATE one-number bucket past its last period') end
local base = k * @PER@
@@EACH@@
  local f, old, top = base
  if v then
    f = tonumber(v)
    top = base + @L@
    if not f then
      -- A settled debt past the limit: `<f> <L it was written under>` (BUCKET_ONE_SETTLE).
      local sp = find(v, ' ', 1, true)
      if sp then
        f = tonumber(sub(v, 1, sp - 1))
        if sub(v, sp + 1) == '@L@' then top = base + @L2@ end
      end
    end
    if f and f == f then
      -- When the bucket the key holds is full again: its expiry covers that.
      old = f + @PER@ - 1
      old = (old - old % @PER@) / @PER@ * @P@
      if f < base then f = base elseif f > top then f = top end
    else
      -- Not a number (`tonumber` reads "nan" as one): content this script did not write.
      f = nil
    end
  end
  if not f then
    out[i + 2] = ERR
  else
    local tokens = @L@ - (f - base)
    if tokens < 0 then
      -- In debt: refused, with the debt (`-1+D`: no tokens, D owed past the limit).
      out[i + 2] = fmt('-1+%d', -tokens)
    elseif tokens < n or tokens == 0 then
      out[i + 2] = fmt('%d', -tokens - 1)
    elseif n == 0 then
      out[i + 2] = fmt('%d', f)
    else
      f = f + n
      local need = f + @PER@ - 1
      need = (need - need % @PER@) / @PER@ * @P@
@@EXPIRY@@
      val = fmt('%d', f)
      out[i + 2] = val
    end
  end
@@STORE@@
"#;

/// The settle of a one-number token bucket's lease ([`BUCKET_ONE`]): `ARGV[1]` the tokens to
/// take (a debit, > 0) or give back (a refund, < 0). A refund gives tokens back (never above
/// the limit: the deficit never below 0), whatever the period; a debit takes them now, past
/// an empty bucket into debt up to one limit more (`L2`; past it the reply is `d` and nothing
/// is taken): later requests wait until the refill repays the debt, and their RetryAfter
/// counts it. A deficit past the limit is written `"<f> <L>"` (see [`BUCKET_ONE`]). Replies
/// `sec usec x`: `x` the bucket's "full at" after the settle, or `d`, `e` (the key's error).
///
/// Constants: `L`, `L2`, `PER`, `P`, `KMAX` (as [`BUCKET_ONE`]).
pub(crate) const BUCKET_ONE_SETTLE: &str = r#"
@@TIME@@
-- The most the key may owe after the settle (ARGV[3]): see `Plan::settle_most`.
local most = tonumber(ARGV[3])
local fmt = string.format
local k = (now - now % @P@) / @P@
if k > @KMAX@ then return redis.error_reply('TOLLGATE one-number bucket past its last period') end
local base = k * @PER@
local key, d, r = KEYS[1], tonumber(ARGV[1])
local v = redis.pcall('GET', key)
local f, top, old = base, base + @L@
if type(v) == 'string' then
  f = tonumber(v)
  if not f then
    local sp = string.find(v, ' ', 1, true)
    if sp then
      f = tonumber(string.sub(v, 1, sp - 1))
      if string.sub(v, sp + 1) == '@L@' then top = base + @L2@ end
    end
  end
elseif v then
  f = nil
end
if not f or f ~= f then
  r = 'e'
else
  if v then
    -- How far the key's expiry reaches: the state's "full again", rounded up to a second.
    old = f + @PER@ - 1
    old = (old - old % @PER@) / @PER@ * @P@ + 999999
    old = old - old % 1000000
  end
  if f < base then f = base elseif f > top then f = top end
  local owed = f - base
  local no = owed + d
  if no < 0 then no = 0 end
  if no > most then
    r = 'd'
  else
    local nf = base + no
    if no ~= owed then
      local val = fmt('%d', nf)
      if no > @L@ then val = val .. ' @L@' end
      local need = nf + @PER@ - 1
      need = (need - need % @PER@) / @PER@ * @P@
@@SETTLE_WRITE@@
    end
    r = fmt('%d', nf)
  end
end
return t[1] .. ' ' .. t[2] .. ' ' .. r
"#;

/// The settle of a two-number token bucket's lease ([`BUCKET`]): `ARGV[1]` the tokens to take
/// (a debit, > 0) or give back (a refund, < 0). As [`BUCKET_ONE_SETTLE`]: a refund gives
/// tokens back (never above the limit: the deficit never below 0), whatever the period; a
/// debit takes them now, past an empty bucket into debt up to one limit more (`L2`; past it
/// the reply is `d` and nothing is taken): later requests wait until the refill repays the
/// debt, and their RetryAfter counts it. The state is brought to the current period and
/// written `"<owed> <k>"`, or `"<owed> <k> <L>"` for a deficit past the limit (see
/// [`BUCKET`]). Replies `sec usec x`: `x` the tokens missing from full after the settle, or
/// `d`, `e` (the key's error). A refund keeps the key's expiry (the bucket is full again
/// sooner); a debit sets it past the new "full again" if the old one falls short.
///
/// Constants: `L`, `L2`, `PER`, `P` (as [`BUCKET`]).
pub(crate) const BUCKET_SETTLE: &str = r#"
@@TIME@@
-- The most the key may owe after the settle (ARGV[3]): see `Plan::settle_most`.
local most = tonumber(ARGV[3])
local fmt, find, sub = string.format, string.find, string.sub
local k = (now - now % @P@) / @P@
local key, d, r = KEYS[1], tonumber(ARGV[1])
local v = redis.pcall('GET', key)
local owed, tick, top, old = 0, k, @L@
if type(v) == 'string' then
  owed, tick = nil, nil
  local sp = find(v, ' ', 1, true)
  if sp then
    owed = tonumber(sub(v, 1, sp - 1))
    local ts = sub(v, sp + 1)
    tick = tonumber(ts)
    if not tick then
      local sq = find(ts, ' ', 1, true)
      if sq then
        tick = tonumber(sub(ts, 1, sq - 1))
        if sub(ts, sq + 1) == '@L@' then top = @L2@ end
      end
    end
  end
elseif v then
  owed = nil
end
-- `tonumber` reads "nan" as a number: content this script did not write.
if not (owed and tick) or owed ~= owed or tick ~= tick or owed < 0 then
  r = 'e'
else
  if type(v) == 'string' then
    -- How far the key's expiry reaches: the state's "full again", rounded up to a second.
    old = owed + @PER@ - 1
    old = (tick + (old - old % @PER@) / @PER@) * @P@ + 999999
    old = old - old % 1000000
  end
  if owed > top then owed = top end
  if tick > k then tick = k end
  if k > tick and owed > 0 then
    if (k - tick) * @PER@ >= owed then owed = 0 else owed = owed - (k - tick) * @PER@ end
  end
  local no = owed + d
  if no < 0 then no = 0 end
  if no > most then
    r = 'd'
  else
    if no ~= owed then
      local val = fmt('%d %d', no, k)
      if no > @L@ then val = val .. ' @L@' end
      local need = no + @PER@ - 1
      need = (k + (need - need % @PER@) / @PER@) * @P@
@@SETTLE_WRITE@@
    end
    r = fmt('%d', no)
  end
end
return t[1] .. ' ' .. t[2] .. ' ' .. r
"#;

/// Sliding window: one string `"<last> <total> <c_last> <c_last-1> ..."`: the newest segment
/// written (segments since the epoch), the sum of the counts that follow, and the permits taken
/// in that segment and in the segments before it, newest first, down to the oldest that still
/// holds permits. A segment's permits count until segment `index + segments` begins — the local
/// `sliding_window::state::Header` rule.
///
/// A grant in the segment the state was last written in (the common case on a busy key) reads
/// three numbers: every count listed is then in the window, so `total` is what the window
/// holds, and the grant rewrites the total and the newest count, leaving the rest of the string
/// as it was (and the key's expiry: the window's end has not moved). Any other decision (a new
/// segment, a refusal, a probe) reads every count.
///
/// Constants: `L` (the limit), `SEGS` (segments per window), `SEG` (segment length, µs).
pub(crate) const SLIDING: &str = r#"
local ERR = '-1 0 0 0'
@@READ@@
local k = (now - now % @SEG@) / @SEG@
-- c[j] holds segment lo + j (j = 1..segs); segments at or before lo have left the window.
local lo = k - @SEGS@
-- One table of counts and one of the written words for the whole run, made by the first
-- decision that reads every count (a grant in the newest segment needs neither).
local c, parts
local reset = (k + @SEGS@) * @SEG@ - now
-- A state whose newest segment is the current one names it as `ks` does: compared as strings.
local ks = fmt('%d', k)
@@EACH@@
  local ok, old, s, total, p, q = true
  if v then
    p = find(v, ' ', 1, true)
    q = p and find(v, ' ', p + 1, true)
    if q then
      s = sub(v, 1, p - 1)
      if s == ks then s = k else s = tonumber(s) end
      total = tonumber(sub(v, p + 1, q - 1))
    end
    if s and total and total >= 0 then old = (s + @SEGS@) * @SEG@ else ok = false end
  end
  local e, cur
  if ok and v and s == k and n > 0 and total + n <= @L@ then
    e = find(v, ' ', q + 1, true)
    if e then cur = tonumber(sub(v, q + 1, e - 1)) else cur = tonumber(sub(v, q + 1)) end
    if not cur or cur < 0 then ok = false end
  end
  if not ok then
    out[i + 2] = ERR
  elseif cur then
    -- The newest segment is the current one: one count and the total change.
    local need = old
@@EXPIRY@@
    -- The reply reuses the words written: code 2, the total and the newest count.
    local mid = fmt('%d %d', total + n, cur + n)
    val = sub(v, 1, p) .. mid
    if e then val = val .. sub(v, e) end
    out[i + 2] = '2 ' .. mid .. ' 0'
  else
    if not c then c, parts = {}, {} end
    for j = 1, @SEGS@ do c[j] = 0 end
@@SEGMENTS@@
    if not ok then
      out[i + 2] = ERR
    else
      local used, last = 0, 0
      for j = 1, @SEGS@ do
        if c[j] > 0 then used = used + c[j]; last = j end
      end
      local empty = 0
      if last > 0 then empty = (lo + last + @SEGS@) * @SEG@ - now end
      local free = @L@ - used
      if free < 0 then free = 0 end
      local want = n
      if want == 0 then want = 1 end
      if free < want then
        -- Counts past the limit (a settled lease's debt, or counts taken under a higher
        -- limit): the oldest have to leave until what is left and `want` fit, exactly then.
        local missing = used + want - @L@
        local retry = empty
        local freed = 0
        for m = 1, @SEGS@ do
          freed = freed + c[m]
          if freed >= missing then retry = (k + m) * @SEG@ - now break end
        end
        out[i + 2] = fmt('0 %d %d %d', free, retry, empty)
      elseif n == 0 then
        out[i + 2] = fmt('1 %d 0 %d', free, empty)
      else
        c[@SEGS@] = c[@SEGS@] + n
        parts[1] = fmt('%d %d', k, used + n)
        local first, w = 1, 1
        while c[first] == 0 do first = first + 1 end
        for j = @SEGS@, first, -1 do
          w = w + 1
          parts[w] = c[j]
        end
        local need = (k + @SEGS@) * @SEG@
@@EXPIRY@@
        val = table.concat(parts, ' ', 1, w)
        out[i + 2] = fmt('1 %d 0 %d', free - n, reset)
      end
    end
  end
@@STORE@@
"#;

/// The settle of a sliding window's lease ([`SLIDING`]): `ARGV[1]` the permits to take (> 0)
/// or give back (< 0), `ARGV[2]` the lease's segment index (segments since the epoch) modulo
/// 2^29. A refund comes out of the segment the lease was counted in, if that segment is still
/// in the window (the segment `j` with `k - SEGS < j <= k` that is `ARGV[2]` modulo 2^29; else
/// the reply is `w`: nothing back), never below 0; a debit is taken now, in the current
/// segment, past the limit into **debt** as long as the window's total stays within one limit
/// more (`L2`, twice the limit, the local window's bound; past it the reply is `d` and nothing
/// is taken). [`SLIDING`] reads a total past the limit as it reads one written under a higher
/// limit: every request is refused until enough of the oldest segments have left, and its
/// RetryAfter is the instant they do. No marker: the counts are permits taken, which leave
/// with their segments under any limit (a key in debt is never locked). The state is read whole,
/// brought to the current segment and written as a decision's would be (`"<k> <total> <c_k>
/// ..."`, down to the oldest segment that still holds permits; the key deleted when none
/// does), its expiry kept if it covers the end of the current segment's window, else set
/// there. Replies `sec usec x`: `x` the window's total after the settle, or `w`, `d`, `e`
/// (content this script cannot read: the key's error).
///
/// Constants: `L2` (twice the limit), `SEGS` (segments per window), `SEG` (segment length, µs).
pub(crate) const SLIDING_SETTLE: &str = r#"
@@TIME@@
-- The most the key may owe after the settle (ARGV[3]): see `Plan::settle_most`.
local most = tonumber(ARGV[3])
local fmt, find, sub = string.format, string.find, string.sub
local k = (now - now % @SEG@) / @SEG@
-- c[m] holds segment lo + m (m = 1..segs); segments at or before lo have left the window.
local lo = k - @SEGS@
local key, d, r = KEYS[1], tonumber(ARGV[1])
local j
if d < 0 then
  -- The lease's segment: at most SEGS (< 2^29) back, so one candidate only.
  local back = (k - tonumber(ARGV[2])) % 536870912
  if back < @SEGS@ then j = k - back end
end
if d < 0 and not j then
  r = 'w'
else
  local v = redis.pcall('GET', key)
  local c, old, ok = {}, nil, true
  for m = 1, @SEGS@ do c[m] = 0 end
  if type(v) == 'string' then
    local s, total
    local p = find(v, ' ', 1, true)
    local q = p and find(v, ' ', p + 1, true)
    if q then
      s = tonumber(sub(v, 1, p - 1))
      total = tonumber(sub(v, p + 1, q - 1))
    end
    if not (s and total and s == s and total >= 0) then
      ok = false
    else
      -- How far the key's expiry reaches: the end of the newest segment's window.
      old = (s + @SEGS@) * @SEG@ + 999999
      old = old - old % 1000000
@@SEGMENTS@@
    end
  elseif v then
    ok = false
  end
  if not ok then
    r = 'e'
  else
    local used, changed = 0, true
    for m = 1, @SEGS@ do used = used + c[m] end
    if d < 0 then
      local m = j - lo
      local back = -d
      if back > c[m] then back = c[m] end
      c[m] = c[m] - back
      used = used - back
      changed = back > 0
    elseif used + d > most then
      r = 'd'
      changed = false
    else
      c[@SEGS@] = c[@SEGS@] + d
      used = used + d
    end
    if changed then
      if used == 0 then
        redis.call('DEL', key)
      else
        local parts, w, first = {fmt('%d %d', k, used)}, 1, 1
        while c[first] == 0 do first = first + 1 end
        for m = @SEGS@, first, -1 do
          w = w + 1
          parts[w] = fmt('%d', c[m])
        end
        local val = table.concat(parts, ' ', 1, w)
        local need = (k + @SEGS@) * @SEG@
@@SETTLE_WRITE@@
      end
    end
    if not r then r = fmt('%d', used) end
  end
end
return t[1] .. ' ' .. t[2] .. ' ' .. r
"#;

/// GCRA (the generic cell rate algorithm of redis-cell and redis_rate) in integer microseconds,
/// also the leaky bucket as a meter (whose level is `(tat - now) / T`): the key holds the
/// theoretical arrival time `tat`; a request of `n` is granted if
/// `max(tat, now) + n * T - burst * T <= now`, and moves `tat` there. A `tat` beyond
/// `now + burst * T` (written under a larger burst) counts as `now + burst * T`: the burst is
/// spent, no more. A lease settled past the tolerance ([`GCRA_SETTLE`]) writes
/// `"<tat> <CAP>"`: under the same burst, its debt counts up to one burst more (`DEBT`);
/// under another, up to the tolerance (no configuration change locks a key). A plain number
/// parses with one `tonumber`, as before.
///
/// Constants: `CAP` (`burst × T`, µs), `DEBT` (`2 × CAP`: the tolerance and the debt bound),
/// `EM` (the emission interval `T`, µs).
pub(crate) const GCRA: &str = r#"
local ERR = 'e'
@@READ@@
@@EACH@@
  local debt, old, deep = 0
  if v then
    debt = tonumber(v)
    if not debt then
      -- A settled debt past the tolerance: `<tat> <CAP it was written under>` (GCRA_SETTLE).
      local sp = find(v, ' ', 1, true)
      if sp then
        debt = tonumber(sub(v, 1, sp - 1))
        deep = sub(v, sp + 1) == '@CAP@'
      end
    end
    old = debt
    if debt then
      debt = debt - now
      if debt < 0 then
        debt = 0
      elseif deep then
        if debt > @DEBT@ then debt = @DEBT@ end
      elseif debt > @CAP@ then
        debt = @CAP@
      end
    end
  end
  if not debt then
    out[i + 2] = ERR
  else
    local want = n
    if want == 0 then want = 1 end
    if debt + want * @EM@ > @CAP@ then
      out[i + 2] = fmt('%d', -debt - 1)
    elseif n == 0 then
      out[i + 2] = fmt('%d', now + debt)
    else
      debt = debt + n * @EM@
      local need = now + debt
@@EXPIRY@@
      val = fmt('%d', need)
      out[i + 2] = val
    end
  end
@@STORE@@
"#;

/// The settle of a fixed window's lease (`KEYS[1]` the partition's key, without the window):
/// `ARGV[1]` the permits to add (a debit, > 0) or give back (a refund, < 0), `ARGV[2]` the
/// lease's window index modulo 2^29. A refund goes back only into the lease's window, if it is
/// still the current one (else the reply is `w`: nothing back), never below 0. A debit is
/// taken in the current window, past the limit up to one limit more (`L2`, twice the limit:
/// the debt bound; past it the reply is `d` and nothing is taken). The count past the limit is
/// **carried into the next window** (its key made with the count carried, expired when that
/// window ends): as the local window, whose debt the next window's refill repays first, a
/// debt of `D` leaves `limit - D` to the next window. A refund in a window in debt takes its
/// share back from the carried count too. One `INCRBY`, as a decision (`DECRBY` back past the
/// bound; `PEXPIRE` on a key it makes; `DEL` for a refund past the count), and one more on the
/// next window's key while in debt. Replies `sec usec x`: `x` the window's count after the
/// settle, or `w`, `d`, `e` (a value that is not a count: the key's error).
///
/// Constants: `L` (the limit), `L2` (twice the limit), `W` (the window, µs).
pub(crate) const FIXED_SETTLE: &str = r#"
@@TIME@@
-- The most the key may owe after the settle (ARGV[3]): see `Plan::settle_most`.
local most = tonumber(ARGV[3])
local fmt = string.format
local into = now % @W@
local k = (now - into) / @W@
local a = ARGV[1]
local d, r = tonumber(a)
if d < 0 and k % 536870912 ~= tonumber(ARGV[2]) then
  r = 'w'
else
  local base = KEYS[1] .. ':'
  local key = base .. fmt('%d', k)
  local nc = redis.pcall('INCRBY', key, a)
  if type(nc) ~= 'number' then
    r = 'e'
  elseif nc > most then
    redis.call('DECRBY', key, a)
    r = 'd'
  else
    local c = nc - d
    local ms = @W@ - into + 999
    ms = (ms - ms % 1000) / 1000
    if nc < 0 then
      -- More given back than counted (or a key the refund made): an empty window.
      redis.call('DEL', key)
      nc = 0
    elseif nc == d then
      redis.call('PEXPIRE', key, ms)
    end
    -- The debt (the count past the limit) carried into the next window.
    local o, p = nc - @L@, c - @L@
    if o < 0 then o = 0 end
    if p < 0 then p = 0 end
    if o ~= p then
      local nk = base .. fmt('%d', k + 1)
      local x = redis.pcall('INCRBY', nk, fmt('%d', o - p))
      if type(x) == 'number' then
        if x <= 0 then
          redis.call('DEL', nk)
        elseif x == o - p then
          local ms2 = 2 * @W@ - into + 999
          redis.call('PEXPIRE', nk, (ms2 - ms2 % 1000) / 1000)
        end
      end
    end
    r = fmt('%d', nc)
  end
end
return t[1] .. ' ' .. t[2] .. ' ' .. r
"#;

/// The settle of a GCRA lease (also the leaky meter's): `ARGV[1]` the permits to add (> 0)
/// or give back (< 0). A refund moves `tat` back by that many intervals, never before now; a
/// debit moves it forward, up to one burst past the tolerance (`now + DEBT`; past it the
/// reply is `d` and nothing is taken). Later requests are refused until time repays the debt,
/// and their RetryAfter counts it: a `tat` past the tolerance is written `"<tat> <CAP>"`,
/// which [`GCRA`] reads as a debt up to `DEBT` under the same burst. Replies `sec usec x`:
/// `x` the `tat` after the settle (at least now), or `d`, `e` (the key's error). A refund
/// keeps the key's expiry (the new `tat` is earlier); a debit sets it past the new `tat`.
///
/// Constants: `CAP` (`burst × T`, µs), `DEBT` (`2 × CAP`), `EM` (the emission interval `T`,
/// µs).
pub(crate) const GCRA_SETTLE: &str = r#"
@@TIME@@
-- The most the key may owe after the settle (ARGV[3]): see `Plan::settle_most`.
local most = tonumber(ARGV[3])
local fmt = string.format
local key, d, r = KEYS[1], tonumber(ARGV[1])
local v = redis.pcall('GET', key)
local tat, deep = now
if type(v) == 'string' then
  tat = tonumber(v)
  if not tat then
    local sp = string.find(v, ' ', 1, true)
    if sp then
      tat = tonumber(string.sub(v, 1, sp - 1))
      deep = string.sub(v, sp + 1) == '@CAP@'
    end
  end
elseif v then
  tat = nil
end
if not tat or tat ~= tat then
  r = 'e'
else
  local debt = tat - now
  if debt < 0 then
    debt = 0
  elseif deep then
    if debt > @DEBT@ then debt = @DEBT@ end
  elseif debt > @CAP@ then
    debt = @CAP@
  end
  local nd = debt + d * @EM@
  if nd < 0 then nd = 0 end
  if nd > most then
    r = 'd'
  else
    local need = now + nd
    -- Past the tolerance, the state says so (and under which burst): see GCRA.
    local val = fmt('%d', need)
    if nd > @CAP@ then val = val .. ' @CAP@' end
    if nd < debt then
      redis.call('SET', key, val, 'KEEPTTL')
    elseif nd > debt then
      local exp = need + 999999
      exp = exp - exp % 1000000
      redis.call('SET', key, val, 'PXAT', fmt('%d', exp / 1000))
    end
    r = fmt('%d', need)
  end
end
return t[1] .. ' ' .. t[2] .. ' ' .. r
"#;

/// The settle of a sliding counter's lease ([`COUNTER`]): `ARGV[1]` the permits to take (> 0)
/// or give back (< 0), `ARGV[2]` the lease's window index modulo 2^29. A refund comes out of
/// the window the lease was counted in while it still counts — the current window
/// (`KEYS[1]:k`) or the previous one (`KEYS[1]:k-1`, whose weight then drops), never below 0 —
/// else nothing comes back (reply `w`); a debit is counted now in the current window, past the
/// limit into **debt**, as long as the weighted estimate stays within one limit more
/// (`prev · (W - into) + (cur + d) · W ≤ L2 · W`, `L2` twice the limit, the local counter's
/// bound; else the reply is `d` and nothing is taken). [`COUNTER`] reads each count up to
/// `L2`: the estimate of a key in debt decays as the window slides. Replies `sec usec x`: `x`
/// the count of the window settled, or `w`, `d`, `e`.
///
/// Constants: `L2` (twice the limit), `W` (the window, µs).
pub(crate) const COUNTER_SETTLE: &str = r#"
@@TIME@@
-- The most the key may owe after the settle (ARGV[3]): see `Plan::settle_most`.
local most = tonumber(ARGV[3])
local fmt = string.format
local into = now % @W@
local k = (now - into) / @W@
local a = ARGV[1]
local d, r = tonumber(a)
local base = KEYS[1] .. ':'
if d < 0 then
  local w = tonumber(ARGV[2])
  local j
  if k % 536870912 == w then j = k elseif (k - 1) % 536870912 == w then j = k - 1 end
  if not j then
    r = 'w'
  else
    local key = base .. fmt('%d', j)
    local c = redis.pcall('INCRBY', key, a)
    if type(c) ~= 'number' then
      r = 'e'
    else
      -- More given back than counted (or a key the refund made): an empty window.
      if c <= 0 then redis.call('DEL', key) c = 0 end
      r = fmt('%d', c)
    end
  end
else
  local p = redis.pcall('GET', base .. fmt('%d', k - 1))
  local prev = 0
  if type(p) == 'string' then prev = tonumber(p) or 0 end
  if prev < 0 then prev = 0 elseif prev > @L2@ then prev = @L2@ end
  local key = base .. fmt('%d', k)
  local c = redis.pcall('INCRBY', key, a)
  if type(c) ~= 'number' then
    r = 'e'
  else
    if c == d then
      local ms = (k + 2) * @W@ - now + 999
      redis.call('PEXPIRE', key, fmt('%d', (ms - ms % 1000) / 1000))
    end
    local cur = c - d
    if cur >= 0 and cur <= most - d and prev * (@W@ - into) <= (most - cur - d) * @W@ then
      r = fmt('%d', c)
    else
      redis.call('DECRBY', key, a)
      r = 'd'
    end
  end
end
return t[1] .. ' ' .. t[2] .. ' ' .. r
"#;

/// The sliding-window counter (article 001's estimate, as the local
/// `sliding_counter::state::Counter`): the permits taken in window `k` (windows since the
/// epoch) are an integer under the key `KEYS[i]:k`, as the fixed window keeps them, expired
/// when window `k + 1` ends (`PEXPIRE` when the key is new). The previous window's counts
/// (`KEYS[i]:k-1`) are read with one `MGET` for the whole run; the current window's is not
/// read: as the fixed window, a request takes its permits with one `INCRBY`, which returns the
/// count, and gives them back with `DECRBY` if they do not fit (a refusal; a grant, the usual
/// decision, is the `INCRBY` alone, and a key repeated in a run reads its own writes). `into`
/// µs into window `k`, `n` permits fit if `prev · (W - into) + (cur + n) · W ≤ limit · W`,
/// compared exactly: every product is at most `2 · limit · W ≤ 2^53` (the builder's bound;
/// counts are clamped to twice the limit, `L2`: a count settled into debt, [`COUNTER_SETTLE`],
/// is at most that), so no double rounds. A window's key is read only in that window and the
/// next, so a count of another limit (the key names the window, not the limit) is clamped to
/// twice this one, and gone two windows on whatever it was (no debt marker: a window's count
/// expires with its window, so no configuration change locks a key), and one that a server
/// clock stepped back wrote ahead is not read. A
/// value of another type, or one that is not a count, under the current window's key is that
/// key's error (`INCRBY` fails, or a probe's `GET`; a negative count is given back); under the
/// previous window's, `MGET` reads a value of another type as absent (an empty window).
///
/// The reply is the two counts as the script decided on them ([`Kind::Counter`]): the client
/// derives remaining, RetryAfter and reset with the same integer arithmetic.
///
/// Constants: `L` (the limit), `L2` (twice the limit), `W` (the window, µs).
pub(crate) const COUNTER: &str = r#"
local ERR = 'e 0'
@@CLOCK@@
local into = now % @W@
local k = (now - into) / @W@
local sp, sc = ':' .. fmt('%d', k - 1), ':' .. fmt('%d', k)
-- The TTL of a window key the run creates (ms, until window k + 1 ends), formatted once, by
-- the first decision that creates one.
local ms
local vals
if #KEYS == 1 then
  -- A run of one (a lone caller): `GET`, no table of names (a value of another type, an
  -- error here, is an empty window, as `MGET` reads it).
  local g = redis.pcall('GET', KEYS[1] .. sp)
  if type(g) == 'table' then g = false end
  vals = {g}
else
  local names = {}
  for i = 1, #KEYS do names[i] = KEYS[i] .. sp end
  vals = redis.call('MGET', unpack(names))
end
for i = 1, #KEYS do
  local key, a = KEYS[i] .. sc, ARGV[i]
  local n = 1
  if a ~= '1' then n = tonumber(a) end
  local p = vals[i]
  local prev, r = 0
  if p then prev = tonumber(p) end
  if not prev or prev < 0 then
    r = ERR
  else
    if prev > @L2@ then prev = @L2@ end
    -- The previous window's weight: the permits it still counts, times W.
    local old = prev * (@W@ - into)
    if n > 0 then
      local t = redis.pcall('INCRBY', key, a)
      if type(t) ~= 'number' then
        r = ERR
      else
        if t == n then
          if not ms then
            ms = (k + 2) * @W@ - now + 999
            ms = fmt('%d', (ms - ms % 1000) / 1000)
          end
          redis.call('PEXPIRE', key, ms)
        end
        local cur = t - n
        if cur >= 0 and cur <= @L@ - n and old <= (@L@ - cur - n) * @W@ then
          r = fmt('%d %d', prev, t)
        else
          redis.call('DECRBY', key, a)
          if cur < 0 then
            r = ERR
          else
            if cur > @L2@ then cur = @L2@ end
            r = fmt('%d %d', prev, -cur - 1)
          end
        end
      end
    else
      local c = redis.pcall('GET', key)
      local cur = 0
      if c then cur = tonumber(c) end
      if not cur or cur < 0 then
        r = ERR
      else
        if cur > @L2@ then cur = @L2@ end
        if cur < @L@ and old <= (@L@ - cur - 1) * @W@ then
          r = fmt('%d %d', prev, cur)
        else
          r = fmt('%d %d', prev, -cur - 1)
        end
      end
    end
  end
  out[i + 2] = r
end
@@REPLY@@
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_marker_is_spliced_and_every_constant_written_in() {
        let scripts: [(&str, &[&str]); 12] = [
            (FIXED, &["L", "W"]),
            (BUCKET, &["L", "L2", "PER", "P"]),
            (BUCKET_SETTLE, &["L", "L2", "PER", "P"]),
            (BUCKET_ONE, &["L", "L2", "PER", "P", "KMAX"]),
            (BUCKET_ONE_SETTLE, &["L", "L2", "PER", "P", "KMAX"]),
            (SLIDING, &["L", "SEGS", "SEG"]),
            (SLIDING_SETTLE, &["L2", "SEGS", "SEG"]),
            (GCRA, &["CAP", "DEBT", "EM"]),
            (FIXED_SETTLE, &["L", "L2", "W"]),
            (GCRA_SETTLE, &["CAP", "DEBT", "EM"]),
            (COUNTER, &["L", "L2", "W"]),
            (COUNTER_SETTLE, &["L2", "W"]),
        ];
        let mut ones = 0;
        for (template, names) in scripts {
            let constants: Vec<(&str, u64)> = names.iter().map(|&n| (n, 7)).collect();
            let source = render(template, &constants);
            assert!(!source.contains('@'), "{source}");
            assert!(source.contains("redis.call('TIME')"), "{source}");
            if let Some(one) = render_one(template, &constants) {
                ones += 1;
                assert!(!one.contains('@'), "{one}");
                assert!(!one.contains("out") && !one.contains("MGET"), "{one}");
                assert!(one.contains("redis.pcall('GET', key)"), "{one}");
            }
        }
        // Every script that reads a state string has its one-decision form.
        assert_eq!(ones, 4);
    }
}
