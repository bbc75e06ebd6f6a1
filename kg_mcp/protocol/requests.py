"""Each request served in a scope of its own: its progress reporter (kg_mcp.progress) and the log
records its client is to get (client_log), set in context variables that the handlers, and the
worker threads they start, inherit. A middleware of the server, so that no tool registration
needs to know about either."""

from __future__ import annotations

import logging
from contextvars import ContextVar

from mcp.server.context import CallNext, ServerRequestContext

from kg_mcp import progress
from kg_mcp.protocol.client_log import RequestLog, ToClient, request_log

_log: ContextVar[RequestLog | None] = ContextVar("kg_mcp_request_log", default=None)
_handler = ToClient(_log.get)


def install() -> None:
    """Route the `kg_mcp` loggers' records to the request they arise in (once per process)."""
    logger = logging.getLogger("kg_mcp")
    if _handler not in logger.handlers:
        logger.addHandler(_handler)


async def request_scope(ctx: ServerRequestContext, call_next: CallNext):
    """Middleware: the request's progress and log channels around its handler."""
    log = request_log(ctx)

    async def flush() -> None:
        if log is not None and log.pending:
            await log.send(ctx)

    # report_progress does nothing for a request that asked for no progress (in-process calls
    # carry their callback rather than a progressToken, so the params cannot tell).
    reporter = progress.Reporter(ctx.session.report_progress, flush if log else None)
    log_token, progress_token = _log.set(log), progress.use(reporter)
    try:
        result = await call_next(ctx)
    finally:
        progress.reset(progress_token)
        _log.reset(log_token)
    await flush()  # before the result, on the request's stream (a failed request sends none)
    return result

