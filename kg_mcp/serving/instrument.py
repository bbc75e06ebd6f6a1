"""What the serving side counts for /metrics: tool calls (an MCP server middleware) and HTTP
responses (an ASGI middleware, outermost). The metrics themselves are kg_mcp.observability.metrics.
"""

from __future__ import annotations

import time

from mcp.types import CallToolResult

from kg_mcp.calls.caller import caller_of
from kg_mcp.observability import metrics


class ToolCallMetrics:
    """Server middleware: each tools/call counted by tool and outcome, and timed. A name that is no
    registered tool counts as "unknown" (labels stay bounded whatever a client sends)."""

    def __init__(self, server):
        self.server = server

    async def __call__(self, ctx, call_next):
        if ctx.method != "tools/call":
            return await call_next(ctx)
        name = ctx.params.get("name") if ctx.params else None
        tool = name if isinstance(name, str) and self.server._tool_manager.get_tool(name) is not None else "unknown"
        started = time.perf_counter()
        outcome = "error"
        try:
            result = await call_next(ctx)
            failed = isinstance(result, CallToolResult) and result.is_error or (
                isinstance(result, dict) and result.get("isError") is True)
            outcome = "tool_error" if failed else "ok"
            return result
        finally:
            metrics.record_call(tool, outcome, time.perf_counter() - started, caller_of(ctx.request).key)


class HttpStatusMetrics:
    """ASGI middleware: every HTTP response counted by status code."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def counted(message):
            if message["type"] == "http.response.start":
                metrics.HTTP_RESPONSES.labels(str(message["status"])).inc()
            await send(message)

        return await self.app(scope, receive, counted)
