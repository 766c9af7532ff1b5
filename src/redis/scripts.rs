//! The Lua scripts: one per algorithm, each deciding any number of `(key, permits)` pairs in
//! order, in one run (a lone decision is a batch of one).
//!
//! Every script:
//! - reads the time once, from `redis.call('TIME')`, as integer microseconds since the Unix
//!   epoch (about 1.8e15, exact in a Lua double, which is exact below 2^53);
//! - counts periods, windows and segments from the Unix epoch, so every client agrees on them;
//! - keeps each key's whole state in one short string, read once (`GET`) and written once, with
//!   its TTL (`SET ... PX`), only when it grants: after the TTL the key's absence means the same
//!   as its content would (a full bucket, an empty window);
//! - formats every number it stores or passes to a command with `%d` (Redis's Lua formats it as
//!   a 64-bit integer: exact for every integer here, never exponent notation, which Redis refuses
//!   as a TTL), and parses state with plain `string.find` and `tonumber` (no patterns);
//! - takes its constants from `ARGV` (the client computes them once, at build): `ARGV[1..c]` are
//!   the algorithm's constants, `ARGV[c + i]` the permits asked of `KEYS[i]` (0 is a probe:
//!   granted if one permit is free, writes nothing);
//! - returns one string of space-separated integers (`%d`; a bulk string costs Redis less to
//!   send than an array of integers): `now_us`, then for each key `code remaining
//!   retry_after_us reset_us`, where `code` is 1 (granted), 0 (refused) or -1 (the key holds something the
//!   script did not write, or a value of another type: that key's error, not the others' and not
//!   the server's). `reset_us` is the time until the key is idle again (bucket full, window
//!   empty); `now_us` the server time of the whole batch. The same key twice in a batch is
//!   decided twice, in order: the second sees the first's write.
//!
//! Lua numbers are doubles: every quantity here is an integer below 2^53 — the builder bounds
//! every span (time to refill an empty bucket, window, burst × interval) by
//! [`MAX_SPAN`](super::MAX_SPAN), 2^50 µs, and the sliding counter's `limit × window` by 2^52;
//! each script clamps what it reads to what its options can mean (a deficit to the limit, a tick
//! or segment to now, a GCRA debt to the burst, a count to the limit), so that every instant it
//! computes is below `now + 2 × 2^50 µs`, exact until the year 2183. The products that may exceed
//! 2^53 (gained tokens after a long idle gap) are only compared, never stored, where rounding
//! cannot flip the comparison.
//!
//! The same key is used by every limit of the same time shape (the key names the algorithm and
//! its period, window, segments or interval, not its limit), so each script reads state written
//! under another limit: the bucket keeps its deficit (capped at the limit), the sliding window its
//! counts, GCRA its debt (capped at the burst), the sliding counter its two counts (capped at the
//! limit).

/// Token bucket and fixed window (a fixed window of `L` per `W` is a bucket of `L` that gains
/// `L` every `W`): the state machine of the local `bucket::state::Bucket`, over a string
/// `"<owed> <tick>"`: the tokens missing from a full bucket as of tick `tick` (periods since the
/// epoch). A deficit rather than the tokens, so that an absent key (a full bucket) and a key
/// written under another limit mean the same under every limit: a fixed window keeps its count
/// of permits taken in the window.
///
/// `ARGV`: limit, tokens per period, period (µs), then the permits of each key. A negative
/// count `-m` asks for *up to* `m` (a lease): it takes what is there, from 1 to `m`, and the
/// reply's third integer (RetryAfter, 0 on a grant) is the count taken.
pub(crate) const BUCKET: &str = r#"
local limit = tonumber(ARGV[1])
local per = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local k = math.floor(now / period)
local floor, find, sub, fmt = math.floor, string.find, string.sub, string.format
local function full_in(ow, tk)
  if ow <= 0 then return 0 end
  local at = (tk + floor((ow + per - 1) / per)) * period - now
  if at > 0 then return at end
  return 0
end
local out = {fmt('%d', now)}
local function put(a, b, c, d) out[#out + 1] = fmt('%d %d %d %d', a, b, c, d) end
for i = 1, #KEYS do
  local n = tonumber(ARGV[i + 3])
  local upto = n < 0
  if upto then n = -n end
  local v = redis.pcall('GET', KEYS[i])
  local owed, tick = 0, k
  if v then
    local sp = type(v) == 'string' and find(v, ' ', 1, true)
    if sp then
      owed = tonumber(sub(v, 1, sp - 1))
      tick = tonumber(sub(v, sp + 1))
    end
    if not (sp and owed and tick) or owed < 0 then
      owed = nil
    else
      if owed > limit then owed = limit end
      if tick > k then tick = k end
    end
  end
  if owed == nil then
    put(-1, 0, 0, 0)
  else
    if k > tick and owed > 0 then
      if (k - tick) * per >= owed then
        tick = tick + floor((owed + per - 1) / per)
        owed = 0
      else
        owed = owed - (k - tick) * per
        tick = k
      end
    end
    local tokens = limit - owed
    if upto and tokens < n then
      n = tokens
      if n < 1 then n = 1 end
    end
    local want = n
    if want == 0 then want = 1 end
    if tokens < want then
      put(0, tokens, (k + floor((want - tokens + per - 1) / per)) * period - now, full_in(owed, tick))
    elseif n == 0 then
      put(1, tokens, 0, full_in(owed, tick))
    else
      owed = owed + n
      if k > tick then tick = k end
      local reset = full_in(owed, tick)
      local ms = floor((reset + 999) / 1000)
      if ms < 1 then ms = 1 end
      redis.call('SET', KEYS[i], fmt('%d %d', owed, tick), 'PX', fmt('%d', ms))
      local taken = 0
      if upto then taken = n end
      put(1, tokens - n, taken, reset)
    end
  end
end
return table.concat(out, ' ')
"#;

/// Sliding window: one string `"<last> <c_last> <c_last-1> ..."`: the newest segment written
/// (segments since the epoch) and the permits taken in it and in the segments before it, newest
/// first, down to the oldest that still holds permits. A segment's permits count until segment
/// `index + segments` begins — the local `sliding_window::state::Header` rule.
///
/// `ARGV`: limit, segments per window, segment length (µs), then the permits of each key.
pub(crate) const SLIDING: &str = r#"
local limit = tonumber(ARGV[1])
local segs = tonumber(ARGV[2])
local seg = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local k = math.floor(now / seg)
-- c[j] holds segment lo + j (j = 1..segs); segments at or before lo have left the window.
local lo = k - segs
local floor, find, sub, fmt = math.floor, string.find, string.sub, string.format
local out = {fmt('%d', now)}
local function put(a, b, c, d) out[#out + 1] = fmt('%d %d %d %d', a, b, c, d) end
for i = 1, #KEYS do
  local n = tonumber(ARGV[i + 3])
  local v = redis.pcall('GET', KEYS[i])
  local c = {}
  for j = 1, segs do c[j] = 0 end
  local ok = true
  if v then
    local p = type(v) == 'string' and find(v, ' ', 1, true)
    local s = p and tonumber(sub(v, 1, p - 1))
    if not s then ok = false end
    while ok and p do
      local q = find(v, ' ', p + 1, true)
      local cnt
      if q then cnt = tonumber(sub(v, p + 1, q - 1)) else cnt = tonumber(sub(v, p + 1)) end
      if not cnt or cnt < 0 then ok = false break end
      -- A segment ahead of now (the server's clock stepped back) counts as the current one.
      local j = s - lo
      if j > segs then j = segs end
      if j < 1 then break end
      c[j] = c[j] + cnt
      s = s - 1
      p = q
    end
  end
  if not ok then
    put(-1, 0, 0, 0)
  else
    local used, last = 0, 0
    for j = 1, segs do
      if c[j] > 0 then used = used + c[j]; last = j end
    end
    local empty = 0
    if last > 0 then empty = (lo + last + segs) * seg - now end
    local free = limit - used
    if free < 0 then free = 0 end
    local want = n
    if want == 0 then want = 1 end
    if free < want then
      -- Counts taken under a higher limit may exceed this one: they all have to leave.
      local missing = used + want - limit
      local retry = empty
      local freed = 0
      for m = 1, segs do
        freed = freed + c[m]
        if freed >= missing then retry = (k + m) * seg - now break end
      end
      put(0, free, retry, empty)
    elseif n == 0 then
      put(1, free, 0, empty)
    else
      c[segs] = c[segs] + n
      local parts = {fmt('%d', k)}
      local first = 1
      while c[first] == 0 do first = first + 1 end
      for j = segs, first, -1 do parts[#parts + 1] = fmt('%d', c[j]) end
      local reset = (k + segs) * seg - now
      local ms = floor((reset + 999) / 1000)
      if ms < 1 then ms = 1 end
      redis.call('SET', KEYS[i], table.concat(parts, ' '), 'PX', fmt('%d', ms))
      put(1, free - n, 0, reset)
    end
  end
end
return table.concat(out, ' ')
"#;

/// GCRA (the generic cell rate algorithm of redis-cell and redis_rate) in integer microseconds,
/// also the leaky bucket as a meter (whose level is `(tat - now) / T`): the key holds the
/// theoretical arrival time `tat`; a request of `n` is granted if
/// `max(tat, now) + n * T - burst * T <= now`, and moves `tat` there. A `tat` beyond
/// `now + burst * T` (written under a larger burst) counts as `now + burst * T`: the burst is
/// spent, no more.
///
/// `ARGV`: burst, emission interval `T` (µs), then the permits of each key.
pub(crate) const GCRA: &str = r#"
local burst = tonumber(ARGV[1])
local em = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local cap = burst * em
local floor, fmt = math.floor, string.format
local out = {fmt('%d', now)}
local function put(a, b, c, d) out[#out + 1] = fmt('%d %d %d %d', a, b, c, d) end
for i = 1, #KEYS do
  local n = tonumber(ARGV[i + 2])
  local v = redis.pcall('GET', KEYS[i])
  local tat = now
  if v then
    tat = type(v) == 'string' and tonumber(v)
    if tat then
      if tat < now then tat = now end
      if tat > now + cap then tat = now + cap end
    end
  end
  if not tat then
    put(-1, 0, 0, 0)
  else
    local want = n
    if want == 0 then want = 1 end
    local allow_at = tat + want * em - cap
    if allow_at > now then
      put(0, floor((cap - (tat - now)) / em), allow_at - now, tat - now)
    elseif n == 0 then
      put(1, floor((cap - (tat - now)) / em), 0, tat - now)
    else
      tat = tat + n * em
      local ms = floor((tat - now + 999) / 1000)
      if ms < 1 then ms = 1 end
      redis.call('SET', KEYS[i], fmt('%d', tat), 'PX', fmt('%d', ms))
      put(1, floor((cap - (tat - now)) / em), 0, tat - now)
    end
  end
end
return table.concat(out, ' ')
"#;

/// The sliding-window counter (article 001's estimate, as the local
/// `sliding_counter::state::Counter`): one string `"<cur> <prev> <tick>"`, the permits taken in
/// window `tick` (windows since the epoch) and in the window before it. `into` µs into window
/// `k`, `n` permits are granted if `prev · (W - into) + (cur + n) · W ≤ limit · W`, compared
/// exactly: every product is at most `limit · W ≤ 2^52` (the builder's bound; counts are clamped
/// to the limit), so no double rounds.
///
/// `ARGV`: limit, window `W` (µs), then the permits of each key.
pub(crate) const COUNTER: &str = r#"
local limit = tonumber(ARGV[1])
local w = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local k0 = math.floor(now / w)
local into0 = now - k0 * w
local cap = limit * w
local floor, find, sub, fmt = math.floor, string.find, string.sub, string.format
local function before(room)
  -- The first offset x into a window with (W - x) <= room, for room = floor(R·W / count).
  if room >= w then return 0 end
  return w - room
end
local out = {fmt('%d', now)}
local function put(a, b, c, d) out[#out + 1] = fmt('%d %d %d %d', a, b, c, d) end
for i = 1, #KEYS do
  local n = tonumber(ARGV[i + 2])
  local v = redis.pcall('GET', KEYS[i])
  local cur, prev, tick = 0, 0, k0
  if v then
    local a = type(v) == 'string' and find(v, ' ', 1, true)
    local b = a and find(v, ' ', a + 1, true)
    if b then
      cur = tonumber(sub(v, 1, a - 1))
      prev = tonumber(sub(v, a + 1, b - 1))
      tick = tonumber(sub(v, b + 1))
    end
    if not (b and cur and prev and tick) or cur < 0 or prev < 0 then
      cur = nil
    else
      if cur > limit then cur = limit end
      if prev > limit then prev = limit end
    end
  end
  if cur == nil then
    put(-1, 0, 0, 0)
  else
    -- A clock behind the state's window acts at that window's start (never more lenient).
    local k, into, behind = k0, into0, 0
    if k < tick then
      behind = (tick - k) * w - into0
      k = tick
      into = 0
    end
    if k == tick + 1 then
      prev = cur
      cur = 0
    elseif k > tick + 1 then
      prev = 0
      cur = 0
    end
    local want = n
    if want == 0 then want = 1 end
    local fits = cur + want <= limit and prev * (w - into) <= (limit - cur - want) * w
    if fits and n > 0 then cur = cur + n end
    local used = prev * (w - into) + cur * w
    local remaining = 0
    if used < cap then remaining = floor((cap - used) / w) end
    local reset = 0
    if cur > 0 then
      reset = (k + 2) * w - now
    elseif prev > 0 then
      reset = (k + 1) * w - now
    end
    if not fits then
      local wait
      if cur + want <= limit then
        wait = before(floor((limit - cur - want) * w / prev)) - into
        if wait < 0 then wait = 0 end
      elseif cur == 0 then
        wait = w - into
      else
        wait = w - into + before(floor((limit - want) * w / cur))
      end
      put(0, remaining, behind + wait, reset)
    else
      if n > 0 then
        local ms = floor((reset + 999) / 1000)
        if ms < 1 then ms = 1 end
        redis.call('SET', KEYS[i], fmt('%d %d %d', cur, prev, k), 'PX', fmt('%d', ms))
      end
      put(1, remaining, 0, reset)
    end
  end
end
return table.concat(out, ' ')
"#;
