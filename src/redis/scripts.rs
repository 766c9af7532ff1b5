//! The Lua scripts: one per algorithm, one round trip per decision.
//!
//! Every script:
//! - takes the time from `redis.call('TIME')` as integer microseconds since the Unix epoch
//!   (about 1.8e15, exact in a Lua double, which is exact below 2^53);
//! - counts periods, windows and segments from the Unix epoch, so every client agrees on them;
//! - reads and writes only `KEYS[1]` (the cluster routes the call by it);
//! - writes only when it grants, and every write sets a TTL after which the key's absence means
//!   the same as its content would (a full bucket, an empty window): with the write itself
//!   (`SET ... PX`) where the state is a string, right after it (`PEXPIRE`) for the sliding
//!   window's hash;
//! - formats every number it stores or passes to a command with `%.0f` (never exponent
//!   notation, which Redis refuses as a TTL);
//! - returns integers only: `{allowed (0/1), remaining, retry_after_us (0 if allowed), reset_us,
//!   now_us}`. `reset_us` is the time until the limiter is back to its idle state (bucket full,
//!   window empty); `now_us` is the server time the decision was made at;
//! - answers state it cannot read (not written by the same script) with an error reply of code
//!   `TOLLGATE` (and a key of another type fails with `WRONGTYPE`): the key's error, not the
//!   server's.
//!
//! `ARGV[1]` is always the permit count (0 is a probe: granted if one permit is free, writes
//! nothing). Lua numbers are doubles: every quantity here is an integer below 2^53 — the builder
//! bounds every span (time to refill an empty bucket, window, burst × interval) by
//! [`MAX_SPAN`](super::MAX_SPAN), 2^50 µs, and each script clamps what it reads to what its
//! options can mean (a deficit to the limit, a tick or segment to now, a GCRA debt to the burst),
//! so that every instant it computes is below `now + 2 × 2^50 µs`, exact until the year 2183. The
//! products that may exceed 2^53 (gained tokens after a long idle gap) are only compared, never
//! stored, where rounding cannot flip the comparison.
//!
//! The same key is used by every limit of the same time shape (the key names the algorithm and
//! its period, window, segments or interval, not its limit), so each script reads state written
//! under another limit: the bucket keeps its deficit (capped at the limit), the sliding window its
//! counts, GCRA its debt (capped at the burst).

/// Token bucket and fixed window (a fixed window of `L` per `W` is a bucket of `L` that gains
/// `L` every `W`): the state machine of the local `bucket::state::Bucket`, over a string
/// `"<owed> <tick>"`: the tokens missing from a full bucket as of tick `tick` (periods since the
/// epoch). A deficit rather than the tokens, so that an absent key (a full bucket) and a key
/// written under another limit mean the same under every limit: a fixed window keeps its count
/// of permits taken in the window.
///
/// `ARGV`: permits, limit, tokens per period, period (µs).
pub(crate) const BUCKET: &str = r#"
local n = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local per = tonumber(ARGV[3])
local period = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local k = math.floor(now / period)
local owed = 0
local tick = k
local v = redis.call('GET', KEYS[1])
if v then
  local a, b = string.match(v, '^(%d+) (%d+)$')
  if not a then return redis.error_reply('TOLLGATE unreadable bucket state') end
  owed = tonumber(a)
  tick = tonumber(b)
  if owed > limit then owed = limit end
  if tick > k then tick = k end
end
if k > tick and owed > 0 then
  if (k - tick) * per >= owed then
    tick = tick + math.floor((owed + per - 1) / per)
    owed = 0
  else
    owed = owed - (k - tick) * per
    tick = k
  end
end
local tokens = limit - owed
local function full_in(ow, tk)
  if ow <= 0 then return 0 end
  local at = (tk + math.floor((ow + per - 1) / per)) * period
  if at > now then return at - now end
  return 0
end
if n == 0 then
  if tokens > 0 then
    return {1, tokens, 0, full_in(owed, tick), now}
  end
  return {0, 0, (k + 1) * period - now, full_in(owed, tick), now}
end
if tokens < n then
  local waits = math.floor((n - tokens + per - 1) / per)
  return {0, tokens, (k + waits) * period - now, full_in(owed, tick), now}
end
tokens = tokens - n
owed = owed + n
if k > tick then tick = k end
local reset = full_in(owed, tick)
redis.call('SET', KEYS[1], string.format('%.0f %.0f', owed, tick), 'PX',
  string.format('%.0f', math.max(1, math.floor((reset + 999) / 1000))))
return {1, tokens, 0, reset, now}
"#;

/// Sliding window: a hash from segment index (segments since the epoch) to the permits taken in
/// it. A segment's permits count until segment `index + segments` begins — the local
/// `sliding_window::state::Header` rule.
///
/// `ARGV`: permits, limit, segments per window, segment length (µs).
pub(crate) const SLIDING: &str = r#"
local n = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local segs = tonumber(ARGV[3])
local seg = tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local k = math.floor(now / seg)
local h = redis.call('HGETALL', KEYS[1])
local counts = {}
local used = 0
local last = nil
local stale = {}
for i = 1, #h, 2 do
  local j = tonumber(h[i])
  local c = tonumber(h[i + 1])
  if j == nil or c == nil then return redis.error_reply('TOLLGATE unreadable window state') end
  if j <= k - segs then
    stale[#stale + 1] = h[i]
  else
    -- A segment ahead of now (the server's clock stepped back) counts as the current one.
    if j > k then j = k end
    counts[j] = (counts[j] or 0) + c
    used = used + c
    if last == nil or j > last then last = j end
  end
end
if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end
local free = limit - used
if free < 0 then free = 0 end
local function empty_in(lst)
  if lst == nil then return 0 end
  local at = (lst + segs) * seg
  if at > now then return at - now end
  return 0
end
local function retry(missing)
  local freed = 0
  for m = 1, segs do
    freed = freed + (counts[k + m - segs] or 0)
    if freed >= missing then return (k + m) * seg - now end
  end
  return empty_in(last)
end
-- Counts taken under a higher limit may exceed this one: they all have to leave.
if n == 0 then
  if free > 0 then return {1, free, 0, empty_in(last), now} end
  return {0, 0, retry(used + 1 - limit), empty_in(last), now}
end
if free < n then
  return {0, free, retry(used + n - limit), empty_in(last), now}
end
redis.call('HINCRBY', KEYS[1], string.format('%.0f', k), n)
if last == nil or k > last then last = k end
local reset = empty_in(last)
redis.call('PEXPIRE', KEYS[1], string.format('%.0f', math.max(1, math.floor((reset + 999) / 1000))))
return {1, free - n, 0, reset, now}
"#;

/// GCRA (the generic cell rate algorithm of redis-cell and redis_rate) in integer microseconds:
/// the key holds the theoretical arrival time `tat`; a request of `n` is granted if
/// `max(tat, now) + n * T - burst * T <= now`, and moves `tat` there. A `tat` beyond
/// `now + burst * T` (written under a larger burst) counts as `now + burst * T`: the burst is
/// spent, no more.
///
/// `ARGV`: permits, burst, emission interval `T` (µs).
pub(crate) const GCRA: &str = r#"
local n = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local em = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cap = burst * em
local v = redis.call('GET', KEYS[1])
local tat = now
if v then
  tat = tonumber(v)
  if tat == nil then return redis.error_reply('TOLLGATE unreadable GCRA state') end
  if tat < now then tat = now end
  if tat > now + cap then tat = now + cap end
end
local need = n
if need == 0 then need = 1 end
local allow_at = tat + need * em - cap
if allow_at > now then
  return {0, math.floor((cap - (tat - now)) / em), allow_at - now, tat - now, now}
end
if n == 0 then
  return {1, math.floor((cap - (tat - now)) / em), 0, tat - now, now}
end
local new_tat = tat + n * em
redis.call('SET', KEYS[1], string.format('%.0f', new_tat), 'PX',
  string.format('%.0f', math.max(1, math.floor((new_tat - now + 999) / 1000))))
return {1, math.floor((cap - (new_tat - now)) / em), 0, new_tat - now, now}
"#;
