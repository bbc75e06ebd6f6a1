"""Lanes: how many calls of one kind run at once, and whose turn it is when more want to run.

A lane has `places`, and one caller holds at most `share` of them (the one local client of stdio
and of in-process use may hold them all: it has nobody to be fair to). A call that finds no place
it may take waits in the lane's queue, and callers take turns: when a place frees, it goes to the
first caller in turn order that is under its share (its oldest waiting call), and that caller
moves to the back. So one caller's burst waits behind the others' calls, never in front of them.

The queue is bounded: a caller may have `queue_per_caller` calls waiting, and all callers together
`queue_total`. Past the first, the call is refused at once with a "busy, retry" error; when the
whole queue is full, the newest waiting call of the caller with the most waiting is refused in
its place (unless that caller has no more waiting than the newcomer), so a flood from many callers
cannot keep a quiet one out of the queue. No wait outlasts the call's deadline.

Each lane runs its calls' threads under a limiter of its own (as many threads as places), so no
lane can take the threads of another, nor anyio's default pool (40 threads) that the SDK uses: a
flood of slow endpoint calls can no longer leave a bystander's light call without a thread.
"""

from __future__ import annotations

import math
from collections import Counter, OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import anyio

from kg_mcp.calls.caller import LOCAL

T = TypeVar("T")

QUEUE_PER_CALLER = 32  # a team behind one address (one caller without sign-in), each member one call
QUEUE_TOTAL = 256


class Busy(Exception):
    """No place for this call now; the message says why and what to do (becomes a tool error)."""


@dataclass(eq=False)
class _Waiter:
    caller: str
    event: anyio.Event = field(default_factory=anyio.Event)
    outcome: str | None = None  # "granted" (it holds a place) or "refused" (pushed out of the queue)


class Lane:
    """`places` calls at once, at most `share` of them one caller's; waiting callers take turns."""

    def __init__(
        self,
        what: str,
        places: int,
        share: int,
        *,
        queue_per_caller: int = QUEUE_PER_CALLER,
        queue_total: int = QUEUE_TOTAL,
    ):
        self.what = what  # the calls, as errors name them: "long calls", "sparql queries"
        self.places = places
        self.share = max(1, min(share, places))
        self.queue_per_caller = queue_per_caller
        self.queue_total = queue_total
        self.free = places
        self.held: Counter[str] = Counter()
        self.waiting: OrderedDict[str, deque[_Waiter]] = OrderedDict()  # callers in turn order
        self.queued = 0
        self.threads = anyio.CapacityLimiter(places)

    def share_of(self, caller: str) -> int:
        return self.places if caller == LOCAL.key else self.share

    async def run_sync(self, caller: str, wait_s: float | None, fn: Callable[..., T], *args) -> T:
        """`fn(*args)` on a thread of this lane, once `caller` has a place (Busy if it gets none)."""
        async with self.place(caller, wait_s):
            return await anyio.to_thread.run_sync(fn, *args, limiter=self.threads)

    @asynccontextmanager
    async def place(self, caller: str, wait_s: float | None) -> AsyncIterator[None]:
        """Hold one of the lane's places for the body, waiting at most `wait_s` (None: no limit) for it."""
        await self._take(caller, math.inf if wait_s is None else wait_s)
        try:
            yield
        finally:
            self._give_back(caller)

    async def _take(self, caller: str, wait_s: float) -> None:
        if self.free and self.held[caller] < self.share_of(caller):
            self._grant(caller)
            return
        waiter = self._enqueue(caller)
        try:
            with anyio.move_on_after(wait_s):
                await waiter.event.wait()
        except BaseException:  # cancelled (the client went away): leave no place or queue entry behind
            self._leave(waiter)
            raise
        if waiter.outcome == "granted":
            return
        self._leave(waiter)
        if waiter.outcome == "refused":
            raise Busy(
                f"The server is busy: other clients are waiting for {self.what} too, and yours had the most "
                "waiting, so this one gave up its turn. Retry in a moment."
            )
        raise Busy(
            f"The server is busy with other {self.what}: this call waited its whole time limit "
            f"({wait_s:g} s) for a turn. Retry in a moment, or narrow the call."
        )

    def _enqueue(self, caller: str) -> _Waiter:
        mine = self.waiting.get(caller)
        count = len(mine) if mine else 0
        if count >= self.queue_per_caller:
            raise Busy(
                f"Busy: you already have {self.held[caller]} of the server's {self.what} running and {count} "
                f"waiting, the most one client may queue. Retry once one of them has finished."
            )
        if self.queued >= self.queue_total:
            heaviest = max(self.waiting, key=lambda c: len(self.waiting[c]))
            if len(self.waiting[heaviest]) <= count + 1:
                raise Busy(f"The server is busy: {self.queued} {self.what} are waiting already. Retry in a moment.")
            self._refuse(self.waiting[heaviest][-1])
        waiter = _Waiter(caller)
        self.waiting.setdefault(caller, deque()).append(waiter)
        self.queued += 1
        return waiter

    def _refuse(self, waiter: _Waiter) -> None:
        self._unqueue(waiter)
        waiter.outcome = "refused"
        waiter.event.set()

    def _unqueue(self, waiter: _Waiter) -> None:
        queue = self.waiting.get(waiter.caller)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            self.queued -= 1
            if not queue:
                del self.waiting[waiter.caller]

    def _leave(self, waiter: _Waiter) -> None:
        """A waiter that stops waiting: out of the queue, and its place given back if it got one."""
        if waiter.outcome == "granted":
            waiter.outcome = None
            self._give_back(waiter.caller)
        elif waiter.outcome is None:
            self._unqueue(waiter)

    def _grant(self, caller: str) -> None:
        self.held[caller] += 1
        self.free -= 1

    def _give_back(self, caller: str) -> None:
        self.held[caller] -= 1
        if self.held[caller] <= 0:
            del self.held[caller]
        self.free += 1
        if caller in self.waiting:  # it just had a turn: the others waiting go first
            self.waiting.move_to_end(caller)
        self._next_turn()

    def _next_turn(self) -> None:
        """Give free places to waiting callers in turn order, each under its share, one call at a time."""
        while self.free:
            turn = next((c for c in self.waiting if self.held[c] < self.share_of(c)), None)
            if turn is None:
                return
            queue = self.waiting[turn]
            waiter = queue.popleft()
            self.queued -= 1
            if queue:
                self.waiting.move_to_end(turn)
            else:
                del self.waiting[turn]
            self._grant(turn)
            waiter.outcome = "granted"
            waiter.event.set()
