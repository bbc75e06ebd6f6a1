"""A tool call's deadline, checked cooperatively in the loops that can run long.

The server starts one per call (`within`, settings.tool_timeout_s) in the context the call runs
in; the loops of verify, follow, kgr_search, the ranking and the batches call `check()` between
steps. Past the deadline `check` raises `CallTimeout`, a tool error in our words that says how to
narrow the call. Outside a call (a test calling a tool function directly) there is no deadline.
A context variable rather than an argument: the loops sit several layers down, and anyio runs a
worker thread in a copy of the caller's context, so the deadline follows the call there.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from kg_mcp.calls import progress
from kg_mcp.errors import KGError

NARROW = "Narrow the call: fewer entities, claims or hops, a smaller limit, or a shorter question."


@dataclass(frozen=True)
class _Deadline:
    end: float  # time.monotonic() past which the call stops
    seconds: float  # the limit, as the error says it


_current: ContextVar[_Deadline | None] = ContextVar("kg_mcp_deadline", default=None)


class CallTimeout(KGError):
    """The call ran past its deadline; the hint says how to narrow it."""


@contextmanager
def within(seconds: float) -> Iterator[None]:
    """Run the body under a deadline `seconds` from now (a nested one keeps the earlier end)."""
    outer = _current.get()
    mine = _Deadline(time.monotonic() + seconds, seconds)
    token = _current.set(outer if outer is not None and outer.end <= mine.end else mine)
    try:
        yield
    finally:
        _current.reset(token)


def check() -> None:
    """Raise CallTimeout once the current call's deadline has passed (nothing outside a call), and
    stop the call where its client cancelled it (kg_mcp.calls.progress)."""
    progress.stop_if_cancelled()
    deadline = _current.get()
    if deadline is not None and time.monotonic() > deadline.end:
        raise CallTimeout(f"The call ran past its time limit of {deadline.seconds:g} s and was stopped.", NARROW)


def left() -> float | None:
    """Seconds left to the current call (None outside a call); never negative."""
    deadline = _current.get()
    return None if deadline is None else max(0.0, deadline.end - time.monotonic())


def passed() -> bool:
    """Whether the current call's deadline has passed (False outside a call)."""
    deadline = _current.get()
    return deadline is not None and time.monotonic() > deadline.end
