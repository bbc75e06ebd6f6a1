"""State in Redis (`serve --redis URL`), shared by every replica.

Keys, all under `kgmcp:` (traversal and caller keys hashed, so a client's session id cannot make a
key long or collide with another kind):
- `kgmcp:tree:H` a traversal tree as compressed JSON, with the last request that moved it and its
  answer when the request had an id (a proxy's retry of that request gets the same answer rather
  than a second step); expires TREE_TTL_S after its last use. `kgmcp:tree-index` and `kgmcp:tree-index:CALLER`
  (sorted sets by last use), `kgmcp:tree-bytes`, `kgmcp:tree-owner`, `kgmcp:caller-bytes` and
  `kgmcp:trees-bytes` count them, in number and in bytes, per caller and in all: the bounds, taken
  from Redis's own maxmemory, and what goes first past them are kg_mcp.state.redis_trees'. One tree
  is at most MAX_NODES entities of MAX_CANDIDATES neighbours (kg_mcp.kg_reasoner.traversal): about 1 MB of JSON
  at worst.
- `kgmcp:lock:NAME` a lock (a traversal's, an endpoint's name-index build): a random token with a
  LEASE_S expiry that a thread renews while it is held, so a replica that dies frees it within
  LEASE_S; released only by its holder (compare and delete, in Lua).
- `kgmcp:rate:H` a caller's token bucket (tokens, time), refilled on Redis's own clock (replicas'
  clocks do not matter); expires once it would be full again.
- `kgmcp:places:SCOPE:H` a caller's places (e.g. long calls in flight) as a sorted set of tokens by
  lease end; expired ones are dropped before counting, so a dead replica's places come back. A
  place taken `renewed` is renewed like a lock while its call runs: it outlives a long call, yet a
  killed replica's comes back within its lease.
- `kgmcp:secret:NAME` a secret the replicas share (`cursor-key`: the key listings' cursors are signed
  with, unless KG_MCP_CURSOR_KEY gives one): made by the first replica to ask, kept without expiry
  (a cursor must read on at any replica for as long as it is served); 43 bytes.

Every command has a short socket timeout (TIMEOUT_S): a Redis that hangs cannot hold a call, and the
event loop's rate-limit calls use the asyncio client.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import redis
import redis.asyncio

from kg_mcp.calls import deadline
from kg_mcp.quoting import quoted, shown_url
from kg_mcp.state import Checkout, Lease, SharedState, SharedStateError
from kg_mcp.state.redis_trees import MAKE_ROOM, SAVE, BudgetReader, index_keys, pack, room_needed, unpack
from kg_mcp.state.trees import decode, encode
from kg_mcp.kg_reasoner.traversal import TREES_PER_CALLER, Tree

log = logging.getLogger(__name__)

TIMEOUT_S = 1.0
RETRY_AFTER_S = 1.0  # after a failure, calls fail at once this long before Redis is tried again
LEASE_S = 5.0  # a lock's life without renewal; renewed every LEASE_S / 3
TREE_TTL_S = 3600.0
MAX_TREES = 10_000
PREFIX = "kgmcp:"
_LOCK_POLL_S = 0.02

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0
"""
_TAKE_TOKEN = """
local rate = tonumber(ARGV[1]) / 60.0
local cap = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local b = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(b[1]) or cap
local at = tonumber(b[2]) or now
tokens = math.min(cap, tokens + (now - at) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = (1 - tokens) / rate end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((cap - tokens) / rate * 1000) + 1000)
return tostring(wait)
"""
_TAKE_PLACE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) * 1000))
return 1
"""

_RENEW_PLACE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local ends = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not ends or tonumber(ends) <= now then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
local ms = math.ceil(tonumber(ARGV[2]) * 1000)
if redis.call('PTTL', KEYS[1]) < ms then redis.call('PEXPIRE', KEYS[1], ms) end
return 1
"""


def hashed(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class RedisState(SharedState):
    between_processes = True

    def __init__(self, url: str, *, tool_timeout_s: float = 30.0):
        if urlsplit(url).scheme not in ("redis", "rediss", "unix"):
            from kg_mcp.errors import ConfigError

            raise ConfigError(f"--redis wants a redis://, rediss:// or unix:// URL, not {quoted(shown_url(url))}")
        self.url = url
        self.where = shown_url(url)
        self.tool_timeout_s = tool_timeout_s
        options = dict(socket_timeout=TIMEOUT_S, socket_connect_timeout=TIMEOUT_S, health_check_interval=30)
        self.redis = redis.Redis.from_url(url, **options)
        self._async_options = options
        self._async: dict[int, redis.asyncio.Redis] = {}  # one client per event loop
        self._release = self.redis.register_script(_RELEASE)
        self._renew = self.redis.register_script(_RENEW)
        self._take_place = self.redis.register_script(_TAKE_PLACE)
        self._renew_place = self.redis.register_script(_RENEW_PLACE)
        self._save_tree = self.redis.register_script(SAVE)
        self._make_room = self.redis.register_script(MAKE_ROOM)
        self.tree_budget = BudgetReader(self.redis)
        self._down_until, self._down_reason = 0.0, ""
        self._held: dict[str, str] = {}  # lock key -> token, renewed by _renewer
        self._held_places: dict[tuple[str, str], float] = {}  # (places key, token) -> lease, renewed too
        self._held_mutex = threading.Lock()
        self._stop = threading.Event()
        self._renewer = threading.Thread(target=self._renew_loop, name="kg-mcp-redis-leases", daemon=True)
        self._renewer.start()

    # --- errors --------------------------------------------------------------------------------
    @contextmanager
    def _answering(self, use: str, retry_now: bool = False) -> Iterator[None]:
        """Redis errors as SharedStateError. After one, calls fail at once for RETRY_AFTER_S (all but
        `retry_now` ones, the readiness probe's): a Redis that hangs costs one timeout, not one per call."""
        from kg_mcp.observability.metrics import SHARED_STATE_ERRORS

        if not retry_now and time.monotonic() < self._down_until:
            SHARED_STATE_ERRORS.labels(use).inc()
            raise self._error(self._down_reason)
        try:
            yield
        except redis.ResponseError as error:  # it answered, refusing the command: it is up all the same
            SHARED_STATE_ERRORS.labels(use).inc()
            raise self._refused(error) from None
        except redis.RedisError as error:
            SHARED_STATE_ERRORS.labels(use).inc()
            self._down_until, self._down_reason = time.monotonic() + RETRY_AFTER_S, type(error).__name__
            raise self._error(self._down_reason) from None
        self._down_until = 0.0

    def _error(self, reason: str) -> SharedStateError:
        return SharedStateError(
            f"The shared store (Redis at {self.where}) did not answer ({reason}).",
            "Try again in a moment; if it goes on, the server's operator is told by /readyz.",
        )

    def _refused(self, error: redis.ResponseError) -> SharedStateError:
        if isinstance(error, redis.exceptions.OutOfMemoryError):
            return SharedStateError(
                f"The shared store (Redis at {self.where}) is full: it is at its maxmemory even without the "
                "oldest traversals of those who hold the most.",
                "Try again in a moment; if it goes on, the server's operator must give Redis more memory.",
            )
        return SharedStateError(
            f"The shared store (Redis at {self.where}) refused a command ({type(error).__name__}: {str(error)[:120]}).",
            "Try again in a moment; if it goes on, tell the server's operator.",
        )

    def _with_room(self, write, keep: str, size: int):
        """`write()`; when Redis refuses it at its maxmemory, drop the oldest trees of the callers
        holding the most bytes (never `keep`) until it fits, and write once more."""
        try:
            return write()
        except redis.exceptions.OutOfMemoryError:
            need = room_needed(self.redis, size)
            freed = self._make_room(keys=[keep, *index_keys(PREFIX)], args=[need])
            log.warning("Redis is at its maxmemory: dropped %d bytes of traversal trees (the oldest of the "
                        "callers holding the most) to make room for %d", freed, need)
            return write()

    def ping(self) -> None:
        with self._answering("ping", retry_now=True):
            self.redis.ping()

    # --- traversal trees ------------------------------------------------------------------------
    @contextmanager
    def checkout(self, key: str | None, question: str | None, request_id: str | None,
                 caller: str = "local") -> Iterator[Checkout]:
        if key is None:
            yield Checkout(Tree(question=question or ""))
            return
        tree_key = f"{PREFIX}tree:{hashed(key)}"
        lease = self._wait_for_lock(f"tree:{hashed(key)}")
        try:
            with self._answering("traversal"):
                raw = self.redis.get(tree_key)
            record = unpack(raw)
            tree = decode(record["tree"]) if "tree" in record else None
            if tree is None or (question and tree.question and question != tree.question):
                tree = Tree(question=question or "")
            elif question and not tree.question:
                tree.question = question
            replayed = record.get("answer") if request_id and record.get("request") == request_id else None
            out = Checkout(tree, replayed)
            yield out
            if out.replayed is None:
                record = {"tree": encode(out.tree)}
                if request_id:  # only a request with an id can come again, to be answered the same
                    record.update(request=request_id, answer=out.answer)
                self._save(tree_key, record, caller)
        finally:
            lease.release()

    def _save(self, tree_key: str, record: dict, caller: str) -> list[int]:
        """Keep the tree, counted against its caller's bounds and everyone's (kg_mcp.state.redis_trees):
        [its bytes, all trees' bytes, the caller's bytes]."""
        packed, mine = pack(record), f"{PREFIX}tree-index:{hashed(caller)}"
        with self._answering("traversal"):
            budget = self.tree_budget.get()
            return self._with_room(lambda: self._save_tree(
                keys=[tree_key, *index_keys(PREFIX), mine],
                args=[packed, int(TREE_TTL_S), budget.per_caller, budget.total, TREES_PER_CALLER, MAX_TREES],
            ), tree_key, len(packed))

    def _wait_for_lock(self, name: str) -> Lease:
        """The lock, waited for until the call's deadline (another call of the same traversal)."""
        limit = time.monotonic() + (deadline.left() if deadline.left() is not None else self.tool_timeout_s)
        while True:
            lease = self.try_lock(name, fail=True)
            if lease is not None:
                return lease
            if time.monotonic() >= limit:
                raise SharedStateError(
                    "Another call of this traversal is still running and held it for this call's whole time limit.",
                    "Wait for the other call's answer, then call again.",
                )
            time.sleep(_LOCK_POLL_S)

    # --- secrets ---------------------------------------------------------------------------------
    def shared_secret(self, name: str) -> str:
        """The first replica to ask makes it (SET NX), every other reads it; "" when Redis does not
        answer (the caller falls back to a secret of its own process, and says so). Read first: a
        Redis at its memory cap refuses every SET, NX or not, even where the key is there."""
        key = f"{PREFIX}secret:{name}"
        try:
            with self._answering("secret"):
                found = self.redis.get(key)
                if found is None:
                    self.redis.set(key, secrets.token_urlsafe(32), nx=True)
                    found = self.redis.get(key)
        except SharedStateError:
            return ""
        return found.decode() if isinstance(found, bytes) else (found or "")

    # --- locks -----------------------------------------------------------------------------------
    def try_lock(self, name: str, *, fail: bool = False) -> Lease | None:
        """The lock, or None when held elsewhere. A Redis that does not answer: SharedStateError with
        `fail`, else None after logging (the caller goes on without the lock)."""
        key, token = f"{PREFIX}lock:{name}", uuid.uuid4().hex
        try:
            with self._answering("traversal" if name.startswith("tree:") else "lock"):
                # A traversal's lock (tree:H) makes room, if need be, without its own tree (kgmcp:tree:H).
                taken = self._with_room(lambda: self.redis.set(key, token, nx=True, px=int(LEASE_S * 1000)),
                                        PREFIX + name, len(key) + 64)
        except SharedStateError:
            if fail:
                raise
            log.warning("the shared store did not answer: lock %s taken in this process only", name)
            return _Unshared()
        if not taken:
            return None
        with self._held_mutex:
            self._held[key] = token
        return _RedisLease(self, key, token)

    def _unlock(self, key: str, token: str) -> None:
        with self._held_mutex:
            self._held.pop(key, None)
        try:
            self._release(keys=[key], args=[token])
        except redis.RedisError:
            pass  # the lease runs out by itself

    def _renew_loop(self) -> None:
        while not self._stop.wait(LEASE_S / 3):
            with self._held_mutex:
                held = list(self._held.items())
                places = list(self._held_places.items())
            for key, token in held:
                try:
                    self._renew(keys=[key], args=[token, int(LEASE_S * 1000)])
                except redis.RedisError:
                    pass
            for (key, token), lease_s in places:
                try:
                    self._renew_place(keys=[key], args=[token, lease_s])
                except redis.RedisError:
                    pass

    # --- rate limits and places -----------------------------------------------------------------
    async def rate_take(self, key: str, per_minute: int) -> float | None:
        client = self._async_client()
        with self._answering("rate_limit"):
            wait = float(await client.eval(_TAKE_TOKEN, 1, f"{PREFIX}rate:{hashed(key)}", per_minute))
        return None if wait <= 0 else wait

    def _async_client(self) -> redis.asyncio.Redis:
        import asyncio

        loop = id(asyncio.get_running_loop())
        client = self._async.get(loop)
        if client is None:
            client = self._async[loop] = redis.asyncio.Redis.from_url(self.url, **self._async_options)
        return client

    def take_place(self, scope: str, key: str, cap: int, lease_s: float, renewed: bool = False) -> str | None:
        token, places = uuid.uuid4().hex, f"{PREFIX}places:{scope}:{hashed(key)}"
        if renewed:
            lease_s = max(lease_s, LEASE_S)  # renewed every LEASE_S / 3
        with self._answering("places"):
            taken = self._take_place(keys=[places], args=[cap, lease_s, token])
        if taken and renewed:
            with self._held_mutex:
                self._held_places[(places, token)] = lease_s
        return token if taken else None

    def give_back_place(self, scope: str, key: str, token: str) -> None:
        places = f"{PREFIX}places:{scope}:{hashed(key)}"
        with self._held_mutex:
            self._held_places.pop((places, token), None)
        try:
            self.redis.zrem(places, token)
        except redis.RedisError:
            pass  # its lease runs out by itself

    def close(self) -> None:
        self._stop.set()
        self.redis.close()


class _RedisLease(Lease):
    def __init__(self, state: RedisState, key: str, token: str):
        self.state, self.key, self.token = state, key, token

    def release(self) -> None:
        self.state._unlock(self.key, self.token)


class _Unshared(Lease):
    def release(self) -> None:
        pass
