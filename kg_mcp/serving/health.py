"""The operator's routes on every HTTP replica: /healthz, /readyz and /metrics.

- /healthz: the process is alive and its event loop answers (200, always, while it can answer).
- /readyz: it can serve calls: the store is open or the endpoint answers, and the shared store
  (Redis) answers when one is configured; 503 with what failed otherwise. A load balancer or an
  orchestrator takes a replica out while it is not ready. What serves, but worse than it should
  (a set of graphs granted without its name index), is told under "warnings" without failing.
- /metrics: Prometheus text format (kg_mcp.observability.metrics). The series by signed-in caller
  name people: they are left out unless the operator asks for them (KG_MCP_METRICS_CALLERS), or
  the scraper brings /metrics' own token (KG_MCP_METRICS_TOKEN: then /metrics answers nothing
  without it, 401, and everything with it).

They are answered before the rate limit and the bearer token of MCP calls (a probe has no token;
they hold no KG data and no caller's arguments), after the Host/Origin check. The shipped nginx
config does not pass them from outside: scrape each replica on its own port.
"""

from __future__ import annotations

import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
from prometheus_client import CONTENT_TYPE_LATEST

from kg_mcp.observability.metrics import exposition
from kg_mcp.serving.rate_limit import bearer_token

CHECK_TIMEOUT_S = 2.0  # a check that takes longer counts as failed (its thread finishes on its own)
CHECK_CACHE_S = 1.0  # probes from many load balancers share one check a second
METRICS_REFUSED = json.dumps({"error": "unauthorized",
                              "error_description": "/metrics needs its own token (KG_MCP_METRICS_TOKEN)."}).encode() + b"\n"


@dataclass
class Readiness:
    """Named checks, each a blocking callable that raises when the part it checks is not usable."""

    checks: dict[str, Callable[[], object]]
    # Named notes, each a quick callable that says what is amiss (None: nothing); they fail nothing.
    warnings: dict[str, Callable[[], str | None]] = field(default_factory=dict)
    _last: tuple[float, dict[str, str]] | None = field(default=None, repr=False)
    _running: bool = field(default=False, repr=False)

    async def report(self) -> dict[str, str]:
        """Check name -> "ok" or what failed, at most CHECK_CACHE_S old."""
        now = time.monotonic()
        if self._last is not None and (now - self._last[0] < CHECK_CACHE_S or self._running):
            return self._last[1]
        self._running = True
        try:
            results = {name: await _run_check(check) for name, check in self.checks.items()}
        finally:
            self._running = False
        self._last = (time.monotonic(), results)
        return results


async def _run_check(check: Callable[[], object]) -> str:
    outcome = "timed out after %g s" % CHECK_TIMEOUT_S
    with anyio.move_on_after(CHECK_TIMEOUT_S):
        try:
            await anyio.to_thread.run_sync(check, abandon_on_cancel=True)
            outcome = "ok"
        except Exception as error:  # noqa: BLE001 - whatever went wrong is the answer
            outcome = f"{type(error).__name__}: {str(error)[:200]}"
    return outcome


def backend_check(backend) -> Callable[[], object]:
    """The store answers a query (a local store is open; an endpoint answers over the network)."""
    if backend.kind == "oxigraph":
        return lambda: backend.store.query("ASK { ?s ?p ?o }")
    return lambda: backend._boolean("ASK {}")


@dataclass(frozen=True)
class MetricsAccess:
    """Who reads what of /metrics: the series by signed-in caller for anyone (`callers`), or /metrics
    whole for the bearer of `token` only (and nothing for anyone else)."""

    callers: bool = False
    token: str = ""

    @classmethod
    def from_settings(cls, settings) -> MetricsAccess:
        return cls(settings.metrics_callers, settings.metrics_token.get_secret_value())

    def shown(self, scope) -> bool | None:
        """Whether the request may read the series by caller; None: it may read nothing (401)."""
        if not self.token:
            return self.callers
        given = bearer_token(scope) or ""
        return True if hmac.compare_digest(given.encode(), self.token.encode()) else None


class OpsRoutes:
    """ASGI middleware answering the three routes and passing every other request on."""

    def __init__(self, app, readiness: Readiness, metrics: MetricsAccess | None = None):
        self.app = app
        self.readiness = readiness
        self.metrics = metrics or MetricsAccess()

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD"):
            path = scope["path"]
            if path == "/healthz":
                return await _respond(send, 200, b'{"status": "alive"}\n', b"application/json")
            if path == "/readyz":
                checks = await self.readiness.report()
                ready = all(v == "ok" for v in checks.values())
                answer = {"ready": ready, "checks": checks}
                warnings = {name: note for name, say in self.readiness.warnings.items() if (note := say())}
                if warnings:
                    answer["warnings"] = warnings
                body = json.dumps(answer, indent=1).encode() + b"\n"
                return await _respond(send, 200 if ready else 503, body, b"application/json")
            if path == "/metrics":
                callers = self.metrics.shown(scope)
                if callers is None:
                    return await _respond(send, 401, METRICS_REFUSED, b"application/json",
                                          [(b"www-authenticate", b'Bearer realm="metrics"')])
                return await _respond(send, 200, exposition(callers=callers), CONTENT_TYPE_LATEST.encode())
        return await self.app(scope, receive, send)


async def _respond(send, status: int, body: bytes, content_type: bytes, more: list | None = None) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()),
               (b"cache-control", b"no-store"), *(more or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
