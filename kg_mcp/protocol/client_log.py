"""The server's log records sent to the client whose request they arose in (MCP's logging utility).

The `kg_mcp` loggers (an endpoint retrying, a name index rebuilt, a session refused...) go to
stderr as always; those emitted while a request is served also go to its client as
`notifications/message`, at the levels it asked for: on the handshake protocol versions,
`logging/setLevel` for the connection (warnings and above until it says otherwise); on 2026-07-28,
the level the request itself carries in `_meta` (none unless it does), as the SDK applies it.
They ride the request's own stream, sent between the steps of a long call and before its result.
A request sends at most MAX_PER_REQUEST of them; a note says how many more were left out.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass, field
from typing import get_args

from mcp.server.connection import allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.types import EmptyResult, LoggingLevel, LoggingMessageNotification, LoggingMessageNotificationParams, SetLevelRequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

LEVELS: tuple[str, ...] = get_args(LoggingLevel)  # debug ... emergency, least severe first
DEFAULT_LEVEL = "warning"
MAX_PER_REQUEST = 20
_FROM_PYTHON = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warning", logging.ERROR: "error", logging.CRITICAL: "critical"}

# logging/setLevel per connection (the SDK's Connection object, held weakly).
_connection_levels: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@dataclass
class RequestLog:
    """The records a request's client is to get, waiting to be sent."""

    levels: frozenset[str]
    pending: list[tuple[str, str, str]] = field(default_factory=list)  # (level, logger, message)
    left_out: int = 0

    def add(self, record: logging.LogRecord) -> None:
        level = _FROM_PYTHON.get(record.levelno, "info" if record.levelno < logging.WARNING else "error")
        if level not in self.levels:
            return
        if len(self.pending) + self.left_out >= MAX_PER_REQUEST:
            self.left_out += 1
            return
        self.pending.append((level, record.name, record.getMessage()))

    async def send(self, ctx: ServerRequestContext) -> None:
        waiting, self.pending = self.pending, []
        if self.left_out and len(waiting) < MAX_PER_REQUEST:
            waiting.append(("warning", "kg_mcp", f"{self.left_out} more log messages of this request were left out"))
            self.left_out = 0
        for level, logger, message in waiting:
            notification = LoggingMessageNotification(params=LoggingMessageNotificationParams(level=level, logger=logger, data=message))
            # On this request's stream: the only one a 2026-07-28 server may log on.
            await ctx.session.send_notification(notification, related_request_id=ctx.request_id)


def request_log(ctx: ServerRequestContext) -> RequestLog | None:
    """What this request's client asked to receive (None: nothing)."""
    levels = allowed_log_levels(ctx.protocol_version, ctx.meta)  # on 2026-07-28: the request's own opt-in
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        chosen = _connection_levels.get(_connection(ctx), DEFAULT_LEVEL)
        levels &= frozenset(LEVELS[LEVELS.index(chosen) :])
    return RequestLog(frozenset(levels)) if levels else None


async def set_level(ctx: ServerRequestContext, params: SetLevelRequestParams) -> EmptyResult:
    """`logging/setLevel`: the least severe level this connection's client gets from now on."""
    connection = _connection(ctx)
    if connection is not None:
        _connection_levels[connection] = params.level
    return EmptyResult()


def _connection(ctx: ServerRequestContext):
    # The SDK keeps a request's connection on its session without a public accessor.
    return getattr(ctx.session, "_connection", None)


class ToClient(logging.Handler):
    """Hands the `kg_mcp` records of a request to its RequestLog (see kg_mcp.protocol.requests)."""

    def __init__(self, current):
        super().__init__(logging.DEBUG)
        self._current = current  # () -> RequestLog | None, the request being served here

    def emit(self, record: logging.LogRecord) -> None:
        target = self._current()
        if target is not None:
            target.add(record)
