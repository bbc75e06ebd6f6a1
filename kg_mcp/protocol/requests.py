"""Each request served in a scope of its own: its progress reporter (kg_mcp.calls.progress) and the log
records its client is to get (client_log), set in context variables that the handlers, and the
worker threads they start, inherit. A middleware of the server, so that no tool registration
needs to know about either."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextvars import ContextVar

from mcp.server.context import CallNext, ServerRequestContext

from kg_mcp.calls import progress
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
    if ctx.method == "initialize":  # answered inline, before the session is up: nothing to report
        return await call_next(ctx)
    log = request_log(ctx)

    async def flush() -> None:
        if log is not None and log.pending:
            await log.send(ctx)

    send = ctx.session.report_progress if _wants_progress(ctx) else None
    reporter = progress.Reporter(send, flush if log else None, lambda: bool(log and log.pending))
    log_token, progress_token = _log.set(log), progress.use(reporter)
    try:
        result = await call_next(ctx)
    finally:
        progress.reset(progress_token)
        _log.reset(log_token)
    await flush()  # before the result, on the request's stream (a failed request sends none)
    return result


def _wants_progress(ctx: ServerRequestContext) -> bool:
    """Whether the client asked for progress: a progressToken in the request's `_meta` (JSON-RPC),
    or a callback handed over in-process (the SDK's direct dispatch keeps it on the request's
    outbound channel, without a public accessor)."""
    meta = ctx.params.get("_meta") if isinstance(ctx.params, Mapping) else None
    token = meta.get("progressToken") if isinstance(meta, Mapping) else None
    if isinstance(token, str | int) and not isinstance(token, bool):
        return True
    outbound = getattr(ctx.session, "_request_outbound", None)
    outbound = getattr(outbound, "_inner", outbound)  # the 2026-07-28 path wraps it
    return getattr(outbound, "_on_progress", None) is not None
