"""kgr_search's traversal trees in Redis, bounded in bytes per caller and in all, within the memory
the Redis itself is given.

A tree is kept as one record (the tree, and the last request that moved it with its answer when a
proxy may send that request again), JSON compressed with zlib: on MetaQA a record of 9 KB after
one step takes 1.1 KB, one of 63 KB after 50 steps 15 KB. Each record's size is
counted, per caller and in all, in the same Lua script that stores it, so replicas storing at once
cannot together pass a bound:

- all trees together: TREE_SHARE of the `maxmemory` Redis reports (`CONFIG GET maxmemory`, else
  `INFO memory` where CONFIG is refused, as on managed Redis) less what an empty Redis takes, or
  NO_MAXMEMORY_BYTES when it has none; read again every BUDGET_RECHECK_S, so a `CONFIG SET
  maxmemory` is followed. Redis holds a record in somewhat more than its bytes (its allocator's size
  classes, the indexes: 1.2 to 1.5 times, measured), so the rest of maxmemory is room for that and
  for the rate limits, places and locks;
- one caller: CALLER_SHARE of that (but always its tree in use), and TREES_PER_CALLER trees;
- MAX_TREES trees in all.

Past a caller's bound its own least recently used trees go; past the bound of all, the least recently
used tree of the caller holding the most bytes goes, never the tree being stored. So a caller that
fills its share pushes out its own trees, many callers that fill the whole push out the heaviest
ones', and a light caller's traversal is kept. A Redis that fills anyway (other data in it, or a
`maxmemory` lowered under the trees) refuses writes with OutOfMemoryError: the store then makes room
(`MAKE_ROOM`) by dropping the heaviest callers' oldest trees, and tries once more.
"""

from __future__ import annotations

import json
import logging
import time
import zlib
from dataclasses import dataclass

import redis

log = logging.getLogger(__name__)

TREE_SHARE = 0.5  # of Redis's maxmemory: the rest is for rate limits, places, locks and Redis's own overhead
NO_MAXMEMORY_BYTES = 64 * 1024 * 1024  # the trees' bound when Redis has no maxmemory, or will not tell it
CALLER_SHARE = 1 / 16  # of the trees' bound, for one caller
BUDGET_RECHECK_S = 60.0
ROOM_MARGIN = 0.02  # making room frees this share of maxmemory more than the write at hand needs

# Named apart from the sets of replicas before trees were counted in bytes (`trees`, `trees:CALLER`),
# which have no owner records: a team part-way through an upgrade keeps two sets of trees, not one mixed.
_INDEX_KEYS = ("tree-index", "tree-bytes", "tree-owner", "caller-bytes", "trees-bytes")

# Shared by both scripts: forget(key) drops a tree and what it counts for; its first write is a DEL, so
# a script that starts by forgetting may go on writing in a Redis at its maxmemory (it freed first).
_FORGET = """
local all, sizes, owners, callers, total = KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
-- `from`: the caller's set the key was taken from, left without it even where the owner record is
-- gone (a Redis that evicts, or a record written before owners were kept): no loop takes it again.
local function forget(key, from)
  local size = tonumber(redis.call('HGET', sizes, key) or '0')
  local owner = redis.call('HGET', owners, key)
  redis.call('DEL', key)
  redis.call('HDEL', sizes, key)
  redis.call('HDEL', owners, key)
  redis.call('ZREM', all, key)
  if from then redis.call('ZREM', from, key) end
  if owner then
    redis.call('ZREM', owner, key)
    if tonumber(redis.call('ZINCRBY', callers, -size, owner)) <= 0 then redis.call('ZREM', callers, owner) end
  end
  if size > 0 then redis.call('DECRBY', total, size) end
  return size
end
-- The least recently used tree of the caller holding the most bytes, but `keep`, and its caller's set;
-- nil when none. A caller counted with no tree left is no longer counted.
local function heaviest_oldest(keep)
  for _, owner in ipairs(redis.call('ZREVRANGE', callers, 0, 2)) do
    local oldest = redis.call('ZRANGE', owner, 0, 1)
    if #oldest == 0 then redis.call('ZREM', callers, owner) end
    for _, key in ipairs(oldest) do
      if key ~= keep then return key, owner end
    end
  end
  return nil
end
local MOST = 1000  -- trees one script drops at most: a bound on its time, whatever the indexes hold
"""

# KEYS: tree, all, sizes, owners, callers, total, mine.
# ARGV: record, ttl s, caller bytes, all bytes, caller trees, all trees. Returns {stored, all, caller's}.
# Its first write is the record's SET: a Redis at its maxmemory refuses it before anything changed.
SAVE = _FORGET + """
local tree, mine = KEYS[1], KEYS[7]
local ttl = tonumber(ARGV[2])
local caller_bytes, all_bytes = tonumber(ARGV[3]), tonumber(ARGV[4])
local caller_trees, all_trees = tonumber(ARGV[5]), tonumber(ARGV[6])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local size = string.len(ARGV[1])
local before = tonumber(redis.call('HGET', sizes, tree) or '0')
redis.call('SET', tree, ARGV[1], 'EX', ttl)
redis.call('HSET', sizes, tree, size)
redis.call('HSET', owners, tree, mine)
redis.call('ZADD', all, now, tree)
redis.call('ZADD', mine, now, tree)
redis.call('ZINCRBY', callers, size - before, mine)
redis.call('INCRBY', total, size - before)
for _, key in ipairs(redis.call('ZRANGEBYSCORE', all, '-inf', now - ttl, 'LIMIT', 0, 100)) do forget(key) end
local dropped = 0
while dropped < MOST and redis.call('ZCARD', mine) > 1 and (redis.call('ZCARD', mine) > caller_trees
    or tonumber(redis.call('ZSCORE', callers, mine) or '0') > caller_bytes) do
  local oldest = redis.call('ZRANGE', mine, 0, 0)[1]
  if oldest == tree then break end
  forget(oldest, mine)
  dropped = dropped + 1
end
while dropped < MOST and (redis.call('ZCARD', all) > all_trees or tonumber(redis.call('GET', total) or '0') > all_bytes) do
  local victim, owner = heaviest_oldest(tree)
  if not victim then break end
  forget(victim, owner)
  dropped = dropped + 1
end
for i = 2, 7 do redis.call('EXPIRE', KEYS[i], ttl) end
return {size, tonumber(redis.call('GET', total) or '0'), tonumber(redis.call('ZSCORE', callers, mine) or '0')}
"""

# KEYS: keep, all, sizes, owners, callers, total. ARGV: bytes to free. Returns the bytes freed.
MAKE_ROOM = _FORGET + """
local need, freed, dropped = tonumber(ARGV[1]), 0, 0
while freed < need and dropped < MOST do
  local victim, owner = heaviest_oldest(KEYS[1])
  if not victim then break end
  freed = freed + forget(victim, owner)
  dropped = dropped + 1
end
return freed
"""


@dataclass(frozen=True)
class TreeBudget:
    """Bytes the trees may hold together and one caller's, and the maxmemory they come from (0: none)."""

    total: int
    per_caller: int
    maxmemory: int

    @classmethod
    def of(cls, maxmemory: int, empty: int = 0) -> TreeBudget:
        """The budget within a Redis of `maxmemory` bytes (0: none set) that takes `empty` bytes empty.

        >>> TreeBudget.of(256 * 2**20, 2**20)
        TreeBudget(total=133693440, per_caller=8355840, maxmemory=268435456)
        >>> TreeBudget.of(0).total == NO_MAXMEMORY_BYTES
        True
        """
        total = int(max(0, maxmemory - empty) * TREE_SHARE) if maxmemory > 0 else NO_MAXMEMORY_BYTES
        return cls(total, int(total * CALLER_SHARE), maxmemory)


def read_memory(client: redis.Redis) -> tuple[int | None, int]:
    """(maxmemory, what Redis took at start) in bytes: maxmemory from CONFIG GET, else INFO memory
    (0: none set; None when neither tells), the other from INFO memory (0 when it does not tell)."""
    maxmemory, info = None, {}
    try:
        found = client.config_get("maxmemory").get("maxmemory")
        maxmemory = int(found) if found is not None else None
    except redis.ResponseError:
        pass  # CONFIG refused (renamed or not permitted, as on managed Redis): INFO says it too
    try:
        info = client.info("memory")
    except redis.ResponseError:
        pass
    if maxmemory is None and info.get("maxmemory") is not None:
        maxmemory = int(info["maxmemory"])
    return maxmemory, int(info.get("used_memory_startup", 0))


class BudgetReader:
    """The trees' budget of one Redis, read at first use and again every BUDGET_RECHECK_S."""

    def __init__(self, client: redis.Redis):
        self.client = client
        self._budget: TreeBudget | None = None
        self._read_at = 0.0

    def get(self) -> TreeBudget:
        if self._budget is None or time.monotonic() - self._read_at > BUDGET_RECHECK_S:
            maxmemory, empty = read_memory(self.client)
            budget = TreeBudget.of(maxmemory or 0, empty)
            if budget != self._budget:
                told = f"maxmemory {maxmemory:,} bytes" if maxmemory else "no maxmemory it would tell"
                log.info("Redis has %s: traversal trees keep within %d bytes, %d for one caller",
                         told, budget.total, budget.per_caller)
            self._budget, self._read_at = budget, time.monotonic()
        return self._budget


def room_needed(client: redis.Redis, record_bytes: int) -> int:
    """Bytes of trees to drop so that a write of `record_bytes` fits under maxmemory again."""
    memory = client.info("memory")
    used, maxmemory = int(memory.get("used_memory", 0)), int(memory.get("maxmemory", 0))
    over = max(0, used - maxmemory) if maxmemory else 0
    return over + record_bytes + int(maxmemory * ROOM_MARGIN)


def index_keys(prefix: str) -> list[str]:
    """KEYS[2:7] of both scripts: the indexes every tree is counted in."""
    return [prefix + name for name in _INDEX_KEYS]


def pack(record: dict) -> bytes:
    """A tree's record as stored: compact JSON, compressed."""
    return zlib.compress(json.dumps(record, separators=(",", ":")).encode())


def unpack(raw: bytes | None) -> dict:
    """What `pack` stored ({} for nothing); plain JSON too, as replicas before compression wrote it."""
    if not raw:
        return {}
    return json.loads(raw if raw[:1] == b"{" else zlib.decompress(raw))
