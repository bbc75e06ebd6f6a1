"""The server's wiring: an MCP server run over stdio, streamable HTTP or SSE, with every guard of
this package in front of it, in one place.

Outermost first, an HTTP request meets: the connection bounds (uvicorn's protocol, before any
request exists: kg_mcp.serving.connections), the count of its response's status
(kg_mcp.serving.instrument), the Host and Origin check (kg_mcp.serving.guards), the operator's
routes /healthz, /readyz and /metrics (kg_mcp.serving.health), the rate limit
(kg_mcp.serving.rate_limit), the count of tokens an OAuth issuer would be asked about (by address,
before the SDK reads them: kg_mcp.serving.rate_limit.TokenChecks), the SDK's bearer auth, then on
the MCP endpoint the rate limit (once the token is read), the body cap and JSON-RPC checks
(kg_mcp.serving.guards) and the session caps (kg_mcp.serving.sessions) before the SDK's transport. Every per-client bound is keyed by the
client's address as kg_mcp.calls.caller counts it (IPv6 per /64), except that on the MCP endpoint the
rate limit and the session caps count a signed-in caller (its subject) apart from its address.
With `stateless` the SDK keeps no MCP session and answers in one JSON body: every request stands
alone, so any replica behind a load balancer can take it, and another can take it again if the
first dies (docs/team/deploy.md).
"""

from __future__ import annotations

import logging
import sys
from typing import Literal

import anyio
from mcp.server import MCPServer
from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware
from mcp.server.transport_security import TransportSecuritySettings

from kg_mcp.observability import metrics
from kg_mcp.serving.auth_gate import install as install_auth
from kg_mcp.serving.connections import ConnectionCounter, guarded_protocol
from kg_mcp.serving.guards import HostOriginGuard, JsonRpcCheck
from kg_mcp.serving.health import MetricsAccess, OpsRoutes, Readiness
from kg_mcp.serving.instrument import HttpStatusMetrics, ToolCallMetrics
from kg_mcp.serving.limits import HttpLimits, connection_cap
from kg_mcp.serving.log_repeats import install as install_log_filter
from kg_mcp.serving.rate_limit import RateLimit, TokenChecks
from kg_mcp.serving.sessions import SessionCap
from kg_mcp.serving.stdio import serve_stdio
from kg_mcp.serving.whole_responses import WholeResponses
from kg_mcp.state import SharedState

log = logging.getLogger(__name__)

Transport = Literal["stdio", "http", "sse"]
LOOPBACK = ("127.0.0.1", "localhost", "::1")
GIL_SWITCH_S = 0.0005  # see serve()


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
    stateless: bool = False,
    readiness: Readiness | None = None,
    shared: SharedState | None = None,
    metrics_access: MetricsAccess | None = None,
) -> None:
    """Run until interrupted. HTTP binds to loopback unless told otherwise; Host/Origin are allow-listed.

    `rate_limit`: at most this many HTTP requests a minute from one client (off when None/0): a signed-in
    caller, else an address.
    `limits`: the HTTP layer's timeouts, connection and session caps and trusted proxies (kg_mcp.serving.limits).
    `stateless`: streamable HTTP without MCP sessions (the SDK's stateless mode).
    `readiness`: what /readyz checks (kg_mcp.serving.health).
    `shared`: where the rate limit keeps its buckets (kg_mcp.state; Redis shares them between replicas).
    `metrics_access`: who may read which series of /metrics (kg_mcp.serving.health.MetricsAccess).
    """
    if transport == "stdio":
        anyio.run(serve_stdio, server)
        return
    import uvicorn

    limits = limits or HttpLimits()
    hosts, origins = _allowed_hosts_origins(host, port, allowed_hosts, allowed_origins)
    server.middleware.append(ToolCallMetrics(server))
    limiter = RateLimit(None, rate_limit, shared=shared) if rate_limit else None
    app = _http_app(server, transport, host, limits, stateless, limiter, shared)
    app = HttpStatusMetrics(HostOriginGuard(OpsRoutes(app, readiness or Readiness({}), metrics_access), hosts, origins))
    app = WholeResponses(app)  # a replica killed mid-answer leaves nothing half sent (nginx retries it)
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
    metrics.OPEN_CONNECTIONS.set_function(lambda: counter.total)
    if transport == "http" and not stateless:
        metrics.OPEN_SESSIONS.set_function(lambda: len(server.session_manager._server_instances))
    install_log_filter([*logging.getLogger().handlers, *logging.getLogger("uvicorn").handlers])
    # Long calls run on worker threads (kg_mcp.tools); every time the event loop wants the GIL back
    # from them it waits up to the switch interval (5 ms by default), many times per request.
    sys.setswitchinterval(GIL_SWITCH_S)
    log.info("HTTP limits: %d connections (%d per client), %d sessions (%d per client), bodies of %d bytes", counter.total_cap,
             limits.max_connections_per_client, limits.max_sessions, limits.max_sessions_per_client, limits.max_body_bytes)
    uvicorn.Server(config).run()


def _http_app(
    server: MCPServer, transport: Transport, host: str, limits: HttpLimits, stateless: bool = False,
    limiter: RateLimit | None = None, shared: SharedState | None = None,
):
    """The SDK's Starlette app, its MCP endpoint wrapped (behind auth) in our id check and session caps;
    in front of it, the count of tokens the issuer would be asked about (when the server introspects
    opaque tokens), and in front of all, the rate limit (`limiter`), which counts the endpoint's
    requests by caller.

    Host/Origin are checked by HostOriginGuard in front of it: the SDK's own check is turned off.
    """
    loose = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    if transport == "http":
        app = server.streamable_http_app(
            transport_security=loose,
            host=host,
            stateless_http=stateless,
            # Stateless: each answer as one JSON body, sent only once it is whole. A replica that dies
            # mid-call has then sent nothing, and the proxy can send the request to another one; an
            # event stream would have started (its headers at once, or after 15 s of a long call)
            # and could only break. No kg-mcp tool streams progress.
            json_response=stateless,
            max_request_body_size=limits.max_body_bytes,
            max_sessions=limits.max_sessions + limits.max_sessions_per_client,  # ours refuses first (SessionCap)
            session_idle_timeout=limits.session_idle_timeout_s,
        )
        endpoint = "/mcp"

        def wrap(inner):
            manager = server.session_manager
            # Stateless: no session is ever opened, so there is nothing to cap.
            sessions = inner if stateless else SessionCap(inner, manager, limits.max_sessions_per_client, limits.max_sessions)
            return JsonRpcCheck(sessions, limits.max_body_bytes)
    else:
        app = server.sse_app(transport_security=loose, host=host, max_request_body_size=limits.max_body_bytes)
        endpoint = "/messages"

        def wrap(inner):
            return JsonRpcCheck(inner, limits.max_body_bytes)

    auth = getattr(server, "serving_auth", None)
    install_auth(app, auth, getattr(server, "audit", None), limits.max_body_bytes)
    sdk_app = app
    if auth is not None and _introspects(auth.verifier):
        app = TokenChecks(app, auth.verifier, limiter, shared)
    for route in sdk_app.routes:
        if getattr(route, "path", None) == endpoint:
            # Behind RequireAuthMiddleware when there is a token: unauthenticated bodies are never read.
            if isinstance(route.app, RequireAuthMiddleware):
                route.app.app = wrap(route.app.app)
            else:
                route.app = wrap(route.app)
            if limiter is None:
                return app
            # After the SDK's auth middleware has read the token (before it refuses a request without one).
            route.app = limiter.behind_sign_in(route.app, endpoint)
            limiter.app = app
            return limiter
    raise RuntimeError(f"the SDK's app has no {endpoint} route to guard")


def _introspects(verifier) -> bool:
    """Whether `verifier` (or one of those it tries in turn) asks an issuer about opaque tokens."""
    return any(getattr(v, "introspects", False) for v in getattr(verifier, "verifiers", [verifier]))


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
