"""The MCP server: the KG tools over one backend, with instructions, resources and prompts.

`build_server` makes the server object (used in-process by tests and agents); `serve` runs it
over stdio (kg_mcp.stdio), streamable HTTP or SSE (optionally rate-limited: kg_mcp.rate_limit).
Logs go to stderr: stdout belongs to the stdio protocol.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Literal

import anyio
from mcp.server import MCPServer
from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.prompts.base import Prompt
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, TransportSecuritySettings
from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map
from pydantic import ValidationError

from kg_mcp import __version__
from kg_mcp.arguments import ArgumentError, ToolArguments, usage
from kg_mcp.auth import StaticTokenVerifier
from kg_mcp.backends import Backend
from kg_mcp.http_connections import ConnectionCounter, guarded_protocol
from kg_mcp.http_guards import HostOriginGuard, JsonRpcIdCheck
from kg_mcp.http_limits import HttpLimits, connection_cap
from kg_mcp.http_sessions import SessionCap
from kg_mcp.log_repeats import install as install_log_filter
from kg_mcp.prompt_files import PromptFile, mcp_prompts
from kg_mcp.quoting import quoted
from kg_mcp.rate_limit import RateLimit
from kg_mcp.schema_summary import schema_document, server_instructions
from kg_mcp.settings import Settings
from kg_mcp.stdio import serve_stdio
from kg_mcp.tools import OUTPUT_MODELS, register_tools

log = logging.getLogger(__name__)

Transport = Literal["stdio", "http", "sse"]
LOOPBACK = ("127.0.0.1", "localhost", "::1")
GIL_SWITCH_S = 0.0005  # see serve()


class KGServer(MCPServer):
    """MCPServer whose tools publish portable input schemas (kg_mcp.arguments) and answer a bad
    call with an error in our words, for every registered tool, before the SDK validates it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._arguments: dict[str, tuple[object, ToolArguments]] = {}
        self._header_schemas: dict[str, tuple[object, dict | None]] = {}

    async def list_tools(self):
        tools = await super().list_tools()
        for tool in tools:
            tool.input_schema = self.arguments(tool.name).schema
        return tools

    async def call_tool(self, name, arguments, context=None):
        checks = self.arguments(name)
        try:
            arguments = checks.prepare(arguments)
            try:
                return await super().call_tool(name, arguments, context)
            except ToolError as error:
                if not isinstance(error.__cause__, ValidationError) or isinstance(error, UnexpectedToolError):
                    raise
            # The SDK refused the arguments (pydantic's words): say what is wrong in ours.
            checks.explain(arguments)
            raise ToolError(f"{name}: the arguments do not fit. {usage(checks.schema)}")
        except ArgumentError as error:
            raise ToolError(str(error)) from None

    def _tool_input_schema(self, name: str) -> dict | None:
        """The schema the SDK checks a call's Mcp-Param-* headers against over HTTP, or None when it
        declares no such header (nothing to check, the SDK's own reading of None). The SDK would
        otherwise walk the whole schema twice on every call to find none; this looks once per tool."""
        tool = self._tool_manager.get_tool(name)
        if tool is None:
            return None
        known = self._header_schemas.get(name)
        if known is None or known[0] is not tool:
            schema = tool.parameters
            declared = find_invalid_x_mcp_header(schema) is None and bool(x_mcp_header_map(schema))
            known = self._header_schemas[name] = (tool, schema if declared else None)
        return known[1]

    def arguments(self, name: str) -> ToolArguments:
        """The tool's published schema and checker, made once per registration."""
        # The tool manager is the SDK's registry of record (its own _tool_input_schema reads it too).
        tool = self._tool_manager.get_tool(name)
        if tool is None:
            known = ", ".join(t.name for t in self._tool_manager.list_tools())
            raise ToolError(f"Unknown tool: {quoted(name)}. The tools are: {known}.")
        if name not in self._arguments or self._arguments[name][0] is not tool:
            self._arguments[name] = (tool, ToolArguments(name, tool.parameters))
        return self._arguments[name][1]


def build_server(
    backend: Backend,
    settings: Settings | None = None,
    *,
    auth_token: str | None = None,
    public_url: str = "http://127.0.0.1:8000",
) -> KGServer:
    """An MCP server exposing the KG tools over `backend` (bearer auth on HTTP if a token is given)."""
    settings = settings or Settings()
    auth = {}
    if auth_token:
        auth = {
            "token_verifier": StaticTokenVerifier(auth_token),
            "auth": AuthSettings(issuer_url=public_url, resource_server_url=None, validate_token_resource=False),
        }
    server = KGServer(
        "kg-mcp",
        title="Knowledge-graph tools",
        version=__version__,
        # The general guide, then this KG's size, ids, relations and hubs (kg_mcp.schema_summary).
        instructions=server_instructions(backend, settings),
        log_level="INFO",
        **auth,
    )
    register_tools(server, backend, settings)
    _add_resources(server, backend, settings)
    for prompt in mcp_prompts():
        server.add_prompt(_as_mcp_prompt(prompt))
    return server


def _add_resources(server: MCPServer, backend: Backend, settings: Settings) -> None:
    @server.resource("kg://profile", name="profile", description="The KG's schema profile and prefixes (cheap).", mime_type="application/json")
    def profile() -> str:
        vocab = backend.vocab
        return json.dumps(
            {
                "profile": backend.profile.name,
                "prefixes": vocab.prefixes,
                "bare_namespaces": vocab.bare_namespaces,
                # "profile" unless the store, a --prefix setting or the endpoint (VoID, a sample) gave it
                "prefix_sources": {ns: vocab.sources.get(ns, "profile") for ns in [*vocab.prefixes.values(), *vocab.bare_namespaces]},
            }
        )

    @server.resource(
        "kg://schema",
        name="schema",
        description="Prefixes, the most used relations of the KG with their triples, and its hubs.",
        mime_type="application/json",
    )
    def schema() -> str:
        return json.dumps(schema_document(backend, settings), indent=1)

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
            {
                "kind": s.kind,
                "profile": s.profile,
                "triples": s.triples,
                "entities": s.entities,
                "relations": s.relations,
                "lower_bounds": s.bounded,  # true: each count is "at least" that many
                **s.details,
            },
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
    limits: HttpLimits | None = None,
) -> None:
    """Run until interrupted. HTTP binds to loopback unless told otherwise; Host/Origin are allow-listed.

    `rate_limit`: at most this many HTTP requests a minute from one client address (off when None/0).
    `limits`: the HTTP layer's timeouts, connection and session caps and trusted proxies (kg_mcp.http_limits).
    """
    if transport == "stdio":
        anyio.run(serve_stdio, server)
        return
    import uvicorn

    limits = limits or HttpLimits()
    hosts, origins = _allowed_hosts_origins(host, port, allowed_hosts, allowed_origins)
    app = HostOriginGuard(_http_app(server, transport, host, limits), hosts, origins)
    if rate_limit:
        app = RateLimit(app, rate_limit)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=_UVICORN_LOGGING,  # uvicorn's default sends access logs to stdout: keep every line on stderr
        ws="none",  # no route takes websockets: refuse upgrades instead of running a websocket protocol
        # X-Forwarded-For is read only from --trusted-proxy peers (uvicorn trusts 127.0.0.1 by default).
        proxy_headers=bool(limits.networks),
        forwarded_allow_ips=limits.forwarded_allow_ips or "",
    )
    counter = ConnectionCounter(limits, connection_cap(limits))
    config.http = guarded_protocol(limits, counter)
    install_log_filter([*logging.getLogger().handlers, *logging.getLogger("uvicorn").handlers])
    # Long calls run on worker threads (kg_mcp.tools); every time the event loop wants the GIL back
    # from them it waits up to the switch interval (5 ms by default), many times per request.
    sys.setswitchinterval(GIL_SWITCH_S)
    log.info("HTTP limits: %d connections (%d per client), %d sessions (%d per client)", counter.total_cap,
             limits.max_connections_per_client, limits.max_sessions, limits.max_sessions_per_client)
    uvicorn.Server(config).run()


def _http_app(server: MCPServer, transport: Transport, host: str, limits: HttpLimits):
    """The SDK's Starlette app, its MCP endpoint wrapped (behind auth) in our id check and session caps.

    Host/Origin are checked by HostOriginGuard in front of it: the SDK's own check is turned off.
    """
    loose = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    if transport == "http":
        app = server.streamable_http_app(
            transport_security=loose,
            host=host,
            max_sessions=limits.max_sessions + limits.max_sessions_per_client,  # ours refuses first (SessionCap)
            session_idle_timeout=limits.session_idle_timeout_s,
        )
        endpoint = "/mcp"

        def wrap(inner):
            manager = server.session_manager
            sessions = SessionCap(inner, manager, limits.max_sessions_per_client, limits.max_sessions)
            return JsonRpcIdCheck(sessions, manager.max_request_body_size)
    else:
        app = server.sse_app(transport_security=loose, host=host)
        endpoint = "/messages"

        def wrap(inner):
            return JsonRpcIdCheck(inner, DEFAULT_MAX_REQUEST_BODY_SIZE)

    for route in app.routes:
        if getattr(route, "path", None) == endpoint:
            # Behind RequireAuthMiddleware when there is a token: unauthenticated bodies are never read.
            if isinstance(route.app, RequireAuthMiddleware):
                route.app.app = wrap(route.app.app)
            else:
                route.app = wrap(route.app)
            return app
    raise RuntimeError(f"the SDK's app has no {endpoint} route to guard")


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


def _allowed_hosts_origins(
    host: str, port: int, allowed_hosts: list[str] | None, allowed_origins: list[str] | None
) -> tuple[list[str], list[str]]:
    """DNS-rebinding protection: the Host and Origin headers served (patterns for HostOriginGuard)."""
    hosts = list(allowed_hosts or [])
    origins = list(allowed_origins or [])
    if host in LOOPBACK or host in ("0.0.0.0", "::"):
        hosts += ["127.0.0.1:*", "localhost:*", "[::1]:*"]
        origins += ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    else:
        display = f"[{host}]" if ":" in host else host
        hosts.append(f"{display}:{port}")
        origins += [f"http://{display}:{port}", f"https://{display}:{port}"]
    return hosts, origins
