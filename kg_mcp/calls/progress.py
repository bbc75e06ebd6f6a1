"""A long tool call's progress, and its cancellation, seen from the loops that run long.

The loops of follow (per hop), verify (per claim), kgr_search and the batches (per entity) call
`step(done, total, what)` between their units of work. Inside a request whose client asked for
progress (a progressToken), each step sends `notifications/progress`; a step also ends the call
when the client cancelled it (`notifications/cancelled`). Outside a request (a test or a script
calling a tool function) a step does nothing, so the tools stay plain functions of their arguments.

Like kg_mcp.calls.deadline, a context variable rather than an argument: the server (kg_mcp.protocol)
sets it for each request, and anyio runs a worker thread in a copy of the caller's context. The
steps work from a worker thread, where the tools' long calls run; a call on the event loop is
short by construction (kg_mcp.tools, LIGHT_ROWS) and its steps are skipped.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from contextvars import ContextVar

import anyio.from_thread

# A call reports at most this many steps (when its total is known): the first, the last, and one
# per this fraction of the way, so a verify of 500 claims sends about 20 notifications, not 500.
SHARE = 0.05


class Reporter:
    """One request's channel back to its client: `send(progress, total, message)` on the event loop,
    None when the client asked for no progress; `flush` sends what else waits (log messages).
    Each is a trip from the worker thread to the event loop, taken only when there is something
    to send: a step otherwise costs a check of the cancellation.

    The progress sent only grows, as the spec asks, though a call may run several loops (follow
    walks one per path): a loop that starts again from 0 counts on from where the last one ended."""

    def __init__(
        self,
        send: Callable[..., Awaitable[None]] | None,
        flush: Callable[[], Awaitable[None]] | None = None,
        waiting: Callable[[], bool] = lambda: False,
    ):
        self.send = send
        self.flush = flush
        self.waiting = waiting  # whether flush has something to send: a trip to the event loop otherwise saved
        self.loop_thread = threading.get_ident()
        self._offset = 0.0  # the steps of the loops before this one
        self._last_done = -1.0
        self._sent = -1.0  # the last progress sent
        self._sent_share = -1.0

    def position(self, done: float, total: float | None) -> tuple[float, float | None] | None:
        """(progress, total) to send for this step, or None when it is too close to the last one sent."""
        if done <= self._last_done:
            self._offset += self._last_done + 1
        self._last_done = done
        value, whole = self._offset + done, (self._offset + total if total else None)
        if value <= self._sent:
            return None
        if whole:
            share = value / whole
            if value not in (0, whole) and share - self._sent_share < SHARE:
                return None
            self._sent_share = share
        self._sent = value
        return value, whole


_current: ContextVar[Reporter | None] = ContextVar("kg_mcp_progress", default=None)


def use(reporter: Reporter | None):
    """Make `reporter` the current request's (returns the token to reset it with)."""
    return _current.set(reporter)


def reset(token) -> None:
    _current.reset(token)


def stop_if_cancelled() -> None:
    """Raise the cancellation when the client cancelled the call being served on this worker thread.
    kg_mcp.calls.deadline.check calls it too: every place a long call checks its deadline (each triple of
    verify, each level of a closure) is also where it stops once cancelled."""
    reporter = _current.get()
    if reporter is None or threading.get_ident() == reporter.loop_thread:
        return
    try:
        anyio.from_thread.check_cancelled()
    except anyio.NoEventLoopError:
        return  # a thread the call started itself: its own deadline bounds it


def step(done: float, total: float | None = None, what: str | None = None) -> None:
    """Between two units of a long call (`done` of `total` so far): stop if the client cancelled
    the call, else say how far it got.

    >>> step(0, 3, "hop 1 of 3")  # outside a request: nothing happens
    """
    stop_if_cancelled()
    reporter = _current.get()
    if reporter is None or threading.get_ident() == reporter.loop_thread:
        return
    try:
        position = reporter.position(done, total) if reporter.send is not None else None
        if position is not None:
            anyio.from_thread.run(reporter.send, *position, what)
        if reporter.flush is not None and reporter.waiting():
            anyio.from_thread.run(reporter.flush)
    except RuntimeError:
        return  # not a worker thread of the server's event loop (a thread the call started itself)
