"""State kept in this process: one server process, no replicas (the default)."""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

from kg_mcp.state import Checkout, Lease, SharedState
from kg_mcp.state.trees import adopt
from kg_mcp.kg_reasoner.traversal import TraversalStore

MAX_BUCKETS = 10_000  # rate-limit buckets kept; full (idle) ones are dropped first
MAX_ANSWERS = 1_024  # last answers kept for replayed kgr_search requests


class InProcessState(SharedState):
    where = "in-process"

    def __init__(self) -> None:
        self.traversals = TraversalStore()
        self._answers: OrderedDict[str, tuple[str, dict]] = OrderedDict()  # tree key -> (request id, answer)
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)
        self._places: dict[tuple[str, str], dict[str, float]] = {}  # (scope, key) -> token -> lease end
        self._locks: set[str] = set()
        self._mutex = threading.Lock()

    def ping(self) -> None:
        pass

    @contextmanager
    def checkout(self, key: str | None, question: str | None, request_id: str | None,
                 caller: str = "local") -> Iterator[Checkout]:
        tree = self.traversals.tree(key, question, caller)
        known = self._answers.get(key) if key is not None and request_id else None
        out = Checkout(tree, known[1] if known and known[0] == request_id else None)
        yield out
        if out.tree is not tree:
            with tree.lock:
                adopt(tree, out.tree)
        if key is not None and request_id and out.answer is not None and out.replayed is None:
            with self._mutex:
                self._answers[key] = (request_id, out.answer)
                self._answers.move_to_end(key)
                while len(self._answers) > MAX_ANSWERS:
                    self._answers.popitem(last=False)

    async def rate_take(self, key: str, per_minute: int) -> float | None:
        return take_token(self._buckets, key, per_minute, time.monotonic())

    def take_place(self, scope: str, key: str, cap: int, lease_s: float, renewed: bool = False) -> str | None:
        if renewed:
            lease_s = float("inf")  # this process is the only holder; it gives every place back
        now = time.monotonic()
        with self._mutex:
            held = self._places.setdefault((scope, key), {})
            for token in [t for t, end in held.items() if end <= now]:
                del held[token]
            if len(held) >= cap:
                return None
            token = uuid.uuid4().hex
            held[token] = now + lease_s
            return token

    def give_back_place(self, scope: str, key: str, token: str) -> None:
        with self._mutex:
            held = self._places.get((scope, key))
            if held is not None:
                held.pop(token, None)
                if not held:
                    del self._places[(scope, key)]

    def try_lock(self, name: str) -> Lease | None:
        with self._mutex:
            if name in self._locks:
                return None
            self._locks.add(name)
        return _HeldName(self, name)


class _HeldName(Lease):
    def __init__(self, state: InProcessState, name: str):
        self.state, self.name = state, name

    def release(self) -> None:
        with self.state._mutex:
            self.state._locks.discard(self.name)


def take_token(buckets: dict[str, tuple[float, float]], key: str, per_minute: int, now: float,
               max_keys: int = MAX_BUCKETS) -> float | None:
    """A token bucket of `per_minute` requests refilling continuously: None if one is spent, else the
    seconds until one is there. Past `max_keys` buckets, idle (full) ones are dropped, then the oldest.

    >>> b = {}; [take_token(b, "a", 2, 0.0), take_token(b, "a", 2, 0.0), take_token(b, "a", 2, 0.0)]
    [None, None, 30.0]
    """
    rate = per_minute / 60.0
    tokens, at = buckets.get(key, (float(per_minute), now))
    tokens = min(float(per_minute), tokens + (now - at) * rate)
    if tokens >= 1.0:
        buckets[key] = (tokens - 1.0, now)
        if len(buckets) > max_keys:
            for full in [k for k, (t, a) in buckets.items() if t + (now - a) * rate >= per_minute]:
                del buckets[full]
            while len(buckets) > max_keys:
                del buckets[min(buckets, key=lambda k: buckets[k][1])]
        return None
    buckets[key] = (tokens, now)
    return (1.0 - tokens) / rate


__all__ = ["InProcessState", "take_token"]
