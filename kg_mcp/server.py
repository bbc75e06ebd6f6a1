"""The MCP server: the KG tools over one backend, with instructions, resources and prompts.

`build_server` makes the server object (used in-process by tests and agents); `serve` runs it
over stdio, streamable HTTP or SSE. Logs go to stderr: stdout belongs to the stdio protocol.
"""

from __future__ import annotations

import json
import logging
import math
import time
from typing import Literal

import anyio
from mcp.server import MCPServer
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.server.transport_security import TransportSecuritySettings

from kg_mcp import __version__
from kg_mcp.auth import StaticTokenVerifier
from kg_mcp.backends import Backend
from kg_mcp.prompt_files import PromptFile, mcp_prompts, read_prompt
from kg_mcp.settings import Settings
from kg_mcp.tools import OUTPUT_MODELS, register_tools

log = logging.getLogger(__name__)

Transport = Literal["stdio", "http", "sse"]
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def build_server(
    backend: Backend,
    settings: Settings | None = None,
    *,
    auth_token: str | None = None,
    public_url: str = "http://127.0.0.1:8000",
) -> MCPServer:
    """An MCP server exposing the KG tools over `backend` (bearer auth on HTTP if a token is given)."""
    settings = settings or Settings()
    auth = {}
    if auth_token:
        auth = {
            "token_verifier": StaticTokenVerifier(auth_token),
            "auth": AuthSettings(issuer_url=public_url, resource_server_url=None, validate_token_resource=False),
        }
    server = MCPServer(
        "kg-mcp",
        title="Knowledge-graph tools",
        version=__version__,
        instructions=read_prompt("server_instructions.md").template,
        log_level="INFO",
        **auth,
    )
    register_tools(server, backend, settings)
    _add_resources(server, backend)
    for prompt in mcp_prompts():
        server.add_prompt(_as_mcp_prompt(prompt))
    return server


def _add_resources(server: MCPServer, backend: Backend) -> None:
    @server.resource("kg://profile", name="profile", description="The KG's schema profile and prefixes (cheap).", mime_type="application/json")
    def profile() -> str:
        return json.dumps({"profile": backend.profile.name, "prefixes": backend.vocab.prefixes})

    @server.resource("kg://schema", name="schema", description="Prefixes and the most used relations of the KG.", mime_type="application/json")
    def schema() -> str:
        stats = backend.stats()
        return json.dumps(
            {
                "profile": backend.profile.name,
                "prefixes": backend.vocab.prefixes,
                "bare_namespaces": backend.vocab.bare_namespaces,
                "top_relations": [
                    {"relation": backend.vocab.compact(p), "label": backend.labels([p]).get(p), "triples": n}
                    for p, n in stats.top_relations
                ],
            },
            indent=1,
        )

    @server.resource(
        "kg://output-schemas",
        name="output-schemas",
        description="JSON Schemas of each tool's structured content.",
        mime_type="application/json",
    )
    def output_schemas() -> str:
        return json.dumps({name: model.model_json_schema() for name, model in OUTPUT_MODELS.items()})

    @server.resource("kg://stats", name="stats", description="Size of the KG: triples, entities, relations.", mime_type="application/json")
    def stats() -> str:
        s = backend.stats()
        return json.dumps(
            {"kind": s.kind, "profile": s.profile, "triples": s.triples, "entities": s.entities, "relations": s.relations, **s.details},
            indent=1,
        )


def _as_mcp_prompt(prompt: PromptFile) -> Prompt:
    arguments = prompt.arguments

    def render(**values: str) -> str:
        return prompt.render(**values)

    # The SDK reads a prompt's arguments from its function signature: give it one per field.
    render.__signature__ = _signature(arguments)  # type: ignore[attr-defined]
    render.__annotations__ = {name: str for name in arguments} | {"return": str}
    return Prompt.from_function(render, name=prompt.name, description=prompt.description)


def _signature(names: list[str]):
    import inspect

    return inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=str) for n in names], return_annotation=str
    )


def serve(
    server: MCPServer,
    transport: Transport = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    allowed_hosts: list[str] | None = None,
    allowed_origins: list[str] | None = None,
    rate_limit: int | None = None,
) -> None:
    """Run until interrupted. HTTP binds to loopback unless told otherwise; Host/Origin are allow-listed.

    `rate_limit`: at most this many HTTP requests a minute from one client address (off when None/0).
    """
    if transport == "stdio":
        anyio.run(_serve_stdio, server)
        return
    security = _transport_security(host, port, allowed_hosts, allowed_origins)
    if transport == "http":
        app = server.streamable_http_app(transport_security=security, host=host)
    else:
        app = server.sse_app(transport_security=security, host=host)
    if rate_limit:
        app = RateLimit(app, rate_limit)
    import uvicorn

    # uvicorn's default config sends access logs to stdout; keep every log line on stderr.
    uvicorn.run(app, host=host, port=port, log_config=_UVICORN_LOGGING)


async def _serve_stdio(server: MCPServer) -> None:
    """The SDK's stdio transport, with stdin read by the event loop where it can be.

    The SDK reads stdin in a worker thread that cancellation cannot stop, so after Ctrl-C the
    server waited for one more input line (or EOF) before it exited. Read by the event loop, a
    pipe or terminal lets Ctrl-C end the server at once. Elsewhere (stdin is a regular file,
    /dev/null, a socket; no /proc) the SDK reads stdin itself.
    """
    from mcp.server.stdio import stdio_server

    lowlevel = getattr(server, "_lowlevel_server", None)
    stdin = await _EventLoopStdin.open() if lowlevel is not None else None
    if stdin is None:
        await server.run_stdio_async()
        return
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_end_input_on_ctrl_c, stdin, group.cancel_scope)
            async with stdio_server(stdin=stdin) as (read_stream, write_stream):  # type: ignore[arg-type]
                await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())
            group.cancel_scope.cancel()  # input ended: stop watching for Ctrl-C
    finally:
        stdin.close()


async def _end_input_on_ctrl_c(stdin: _EventLoopStdin, scope: anyio.CancelScope) -> None:
    """Ctrl-C (SIGINT) ends the input, so the server stops as it does at EOF; a second one cancels all."""
    import signal

    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        async for _ in signals:
            if stdin.ended:
                scope.cancel()
                return
            log.info("interrupted: stopping as at the end of input")
            stdin.end()


class _EventLoopStdin:
    """stdin's lines, read by the event loop (cancellable), for the SDK's stdio_server."""

    MAX_LINE = 1 << 28  # longer lines are dropped (the SDK then answers nothing for them)

    def __init__(self, reader, transport, saved_fd: int):
        self.reader, self.transport, self.saved_fd = reader, transport, saved_fd
        self.ended = False

    def end(self) -> None:
        """No more lines: the reader sees the end of input."""
        self.ended = True
        self.reader.feed_eof()

    @classmethod
    async def open(cls) -> _EventLoopStdin | None:
        import asyncio
        import os

        import stat

        try:
            mode = os.fstat(0).st_mode
            if not (stat.S_ISFIFO(mode) or (stat.S_ISCHR(mode) and os.isatty(0))):
                return None  # a file, /dev/null, a socket: the SDK's reader (they end, or are rare)
            # A file description of our own: the non-blocking flag set on it does not reach the
            # terminal or pipe end that fd 0 shares with the parent process.
            fd = os.open("/proc/self/fd/0", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        pipe = os.fdopen(fd, "rb", buffering=0)
        try:
            reader = asyncio.StreamReader(limit=cls.MAX_LINE)
            transport, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), pipe
            )
        except (OSError, ValueError):  # not a pipe or terminal the event loop can watch
            pipe.close()
            return None
        # As the SDK does: while serving, fd 0 reads the null device, so nothing else eats the protocol.
        saved_fd = os.dup(0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        return cls(reader, transport, saved_fd)

    def __aiter__(self):
        return self

    async def __anext__(self) -> str:
        if self.ended:
            raise StopAsyncIteration
        try:
            line = await self.reader.readline()
        except ValueError:  # a line past MAX_LINE: dropped
            return "\n"
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")

    def close(self) -> None:
        import os

        self.transport.close()
        os.dup2(self.saved_fd, 0)
        os.close(self.saved_fd)


_UVICORN_LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(levelname)s %(name)s: %(message)s"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr", "formatter": "plain"}},
    "loggers": {
        "uvicorn": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
        "uvicorn.access": {"handlers": ["stderr"], "level": "WARNING", "propagate": False},
    },
}


class RateLimit:
    """ASGI middleware: at most `per_minute` HTTP requests a minute from one client, then 429.

    A client is its address as uvicorn reports it (the peer address, or X-Forwarded-For when the
    peer is a trusted proxy: uvicorn trusts 127.0.0.1 by default). Each client has a token bucket
    of `per_minute` requests that refills continuously, so short bursts pass and a steady stream
    is held to the rate. It runs before auth: refused requests cost nothing downstream. Every HTTP
    request counts (an MCP session's start takes two or three, then one per call).
    """

    MAX_CLIENTS = 10_000  # buckets kept; idle (full) ones are dropped first

    def __init__(self, app, per_minute: int, clock=time.monotonic):
        if per_minute < 1:
            raise ValueError("per_minute must be at least 1")
        self.app = app
        self.per_minute = per_minute
        self.rate = per_minute / 60.0  # tokens a second
        self.clock = clock
        self.buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens, at)
        self._refused, self._warned_at = 0, float("-inf")

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        client = (scope.get("client") or ("unknown", 0))[0]
        wait = self._take(client)
        if wait is None:
            return await self.app(scope, receive, send)
        retry_after = max(1, math.ceil(wait))
        self._refused += 1
        now = self.clock()
        if now - self._warned_at >= 10:  # a flood of refusals must not flood the log too
            log.warning("rate limit: %d request(s) answered 429 (latest from %s)", self._refused, client)
            self._warned_at, self._refused = now, 0
        body = json.dumps(
            {
                "error": "rate_limited",
                "message": f"Too many requests: this server allows {self.per_minute} requests a minute per client. "
                f"Retry after {retry_after} s.",
                "retry_after": retry_after,
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 429,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"retry-after", str(retry_after).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})

    def _take(self, client: str) -> float | None:
        """Spend one request of `client`'s bucket: None if allowed, else the seconds until one is."""
        now = self.clock()
        tokens, at = self.buckets.get(client, (float(self.per_minute), now))
        tokens = min(float(self.per_minute), tokens + (now - at) * self.rate)
        if tokens >= 1.0:
            self.buckets[client] = (tokens - 1.0, now)
            if len(self.buckets) > self.MAX_CLIENTS:
                self._prune(now)
            return None
        self.buckets[client] = (tokens, now)
        return (1.0 - tokens) / self.rate

    def _prune(self, now: float) -> None:
        full = [c for c, (t, at) in self.buckets.items() if t + (now - at) * self.rate >= self.per_minute]
        for c in full:
            del self.buckets[c]
        while len(self.buckets) > self.MAX_CLIENTS:  # all busy: forget the oldest ones
            del self.buckets[min(self.buckets, key=lambda c: self.buckets[c][1])]


def _transport_security(
    host: str, port: int, allowed_hosts: list[str] | None, allowed_origins: list[str] | None
) -> TransportSecuritySettings:
    """DNS-rebinding protection: only these Host and Origin headers are served."""
    hosts = list(allowed_hosts or [])
    origins = list(allowed_origins or [])
    if host in LOOPBACK or host in ("0.0.0.0", "::"):
        hosts += ["127.0.0.1:*", "localhost:*", "[::1]:*"]
        origins += ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    else:
        hosts.append(f"{host}:{port}")
        origins += [f"http://{host}:{port}", f"https://{host}:{port}"]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)
