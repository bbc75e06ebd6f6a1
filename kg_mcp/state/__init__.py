"""State that outlives one call: kgr_search traversal trees, per-caller rate limits and long-call
places, and the lock on an endpoint's name-index build.

`SharedState` is where it lives: in this process (`InProcessState`, the default: one server
process, today's behaviour) or in Redis (`RedisState`, `serve --redis URL`), where every replica
behind a load balancer sees the same trees, limits and locks. Keys are per caller
(kg_mcp.calls.caller) or per traversal; everything kept has a time to live and a bound on its size.

When Redis does not answer, the calls that cannot do without it (kgr_search's traversals) get an
error in our words that says to try again; rate limits fall back to this process's own (per
replica) and name-index builds go ahead here; /readyz reports the outage. Places raise
SharedStateError: their user (the long lane, kg_mcp.tools) goes on with the replica's own share.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass

from kg_mcp.errors import KGError
from kg_mcp.kg_reasoner.traversal import Tree


class SharedStateError(KGError):
    """The shared store (Redis) did not answer; the hint says what the caller can do."""


@dataclass
class Checkout:
    """A traversal tree taken for one kgr_search call. `replayed` is the answer already given to
    this very request (a proxy's retry of a call whose answer was lost): the caller returns it
    instead of moving the tree again. The caller sets `answer` (JSON data) to be remembered, and
    may replace `tree` (a worker process sends back a new one)."""

    tree: Tree
    replayed: dict | None = None
    answer: dict | None = None


class Lease(ABC):
    """A lock held for a while (renewed while held, so a dead holder frees it within its lease)."""

    @abstractmethod
    def release(self) -> None: ...


class SharedState(ABC):
    where: str  # for logs and errors: "in-process" or the Redis URL without its password
    between_processes = False  # True: other replicas see the same state

    @abstractmethod
    def ping(self) -> None:
        """Raise SharedStateError when the store cannot be used."""

    @abstractmethod
    def checkout(self, key: str | None, question: str | None, request_id: str | None,
                 caller: str = "local") -> AbstractContextManager[Checkout]:
        """The tree kept under `key` (None: a fresh one, never kept) for the length of a call; a new
        tree when none is kept or `question` differs from the tree's. `caller` owns the key
        (kg_mcp.tools.traverse.traversal_key) and keeps at most TREES_PER_CALLER trees. Calls on
        one key wait for each other. Saved when the block ends without error."""

    @abstractmethod
    async def rate_take(self, key: str, per_minute: int) -> float | None:
        """Spend one request of `key`'s bucket of `per_minute`: None if allowed, else seconds to wait."""

    @abstractmethod
    def take_place(self, scope: str, key: str, cap: int, lease_s: float, renewed: bool = False) -> str | None:
        """One of `cap` places of `key` under `scope` (e.g. a caller's long calls), held at most
        `lease_s` (`renewed`: at most `lease_s` after this process stops renewing it, so a call may
        run longer and a dead replica's place still comes back): a token to give back, or None when
        all are taken."""

    @abstractmethod
    def give_back_place(self, scope: str, key: str, token: str) -> None: ...

    @abstractmethod
    def try_lock(self, name: str) -> Lease | None:
        """Hold the lock `name` (renewed while held), or None when another holder has it."""

    def shared_secret(self, name: str) -> str:
        """A random secret every replica sharing this state reads alike, made by the first to ask
        (e.g. the key that signs listing cursors); "" for this process's state, which shares nothing."""
        return ""

    def close(self) -> None:
        pass


def open_shared_state(redis_url: str | None, *, tool_timeout_s: float = 30.0) -> SharedState:
    """Redis when a URL is given, else this process. A malformed URL fails at once; a Redis that does
    not answer yet is logged, and the server starts anyway (the calls that need it say so)."""
    if not redis_url:
        from kg_mcp.state.memory import InProcessState

        return InProcessState()
    from kg_mcp.state.redis_store import RedisState

    state = RedisState(redis_url, tool_timeout_s=tool_timeout_s)
    try:
        state.ping()
    except SharedStateError as error:
        logging.getLogger(__name__).warning("%s", error)
    return state


__all__ = ["Checkout", "Lease", "SharedState", "SharedStateError", "open_shared_state"]
