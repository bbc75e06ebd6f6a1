"""The HTTP side of auth as the MCP authorization spec words it: what a client without a token, with
a bad one or with too few scopes is told, and the Protected Resource Metadata that tells it where
to sign in.

- 401: `WWW-Authenticate: Bearer resource_metadata="<this server's metadata URL>"`, with
  `error="invalid_token"` only when a token was sent (RFC 6750 §3.1: a request without credentials
  gets no error code);
- 403: `error="insufficient_scope"` and `scope="<what the request needs>"`, for a token without
  `kg:read`, and for a `tools/call` of a tool that needs more (`sparql` needs `kg:sparql`). The
  SDK's clients answer that by asking the user for the larger scope (step-up authorization);
- the metadata (RFC 9728) at `/.well-known/oauth-protected-resource<path of the resource>`: the
  resource URL, the issuer, and every scope the server knows (kg:read, kg:sparql and the graph
  scopes of --graph-access), so a client signing in asks for all and gets what its user may have.

`install(app, auth, audit)` puts this gate where the SDK's RequireAuthMiddleware was, on every
protected route of the SDK's Starlette app, and serves the metadata.
"""

from __future__ import annotations

import json

import pydantic_core
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, RequireAuthMiddleware
from mcp.server.auth.routes import create_protected_resource_routes
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from pydantic import AnyHttpUrl, ConfigDict, TypeAdapter
from starlette.routing import Mount, Route

from kg_mcp.calls.caller import address_key
from kg_mcp.serving import scopes
from kg_mcp.serving.auth import ServerAuth

WELL_KNOWN = "/.well-known/oauth-protected-resource"
# URLs kept as written: an issuer is compared as a string (RFC 8414), so no "/" may be added to it.
_URL = TypeAdapter(AnyHttpUrl, config=ConfigDict(url_preserve_empty_path=True))


class AuthGate(RequireAuthMiddleware):
    """RequireAuthMiddleware with the spec's challenges and the per-tool scope check."""

    def __init__(
        self,
        app,
        metadata_url: str | None,
        audit=None,
        scoped_tools: frozenset[str] = frozenset(),
        max_body: int = DEFAULT_MAX_REQUEST_BODY_SIZE,
    ):
        super().__init__(app, [scopes.READ], AnyHttpUrl(metadata_url) if metadata_url else None)
        self.audit = audit
        self.scoped_tools = scoped_tools
        self.max_body = max_body

    async def __call__(self, scope, receive, send) -> None:
        user = scope.get("user")
        if not isinstance(user, AuthenticatedUser):
            sent = any(name.lower() == b"authorization" for name, _ in scope.get("headers", []))
            self._refused(scope, None, 401)
            if sent:
                return await self._challenge(send, 401, "invalid_token", "The access token is not valid here: sign in again.")
            return await self._challenge(send, 401, None, "This server needs an access token.")
        held = set(user.scopes)
        if scopes.READ not in held:
            self._refused(scope, user, 403)
            return await self._challenge(send, 403, "insufficient_scope", f"Required scope: {scopes.READ}", [scopes.READ])
        if scope["type"] == "http" and scope["method"] == "POST" and any(
            scopes.missing_for_tool(tool, held) for tool in self.scoped_tools
        ):
            received, body = await _read_body(receive, self.max_body)
            if received is None:
                return  # the client left before its body was whole
            needed = _scopes_needed(body, held, self.scoped_tools)
            if needed:
                self._refused(scope, user, 403)
                listed = " ".join(needed)
                return await self._challenge(send, 403, "insufficient_scope", f"Required scope: {listed}", needed)

            async def replay():
                return received.pop(0) if received else await receive()

            return await self.app(scope, replay, send)
        return await self.app(scope, receive, send)

    def _refused(self, scope, user, status: int) -> None:
        if self.audit is None:
            return
        client = scope.get("client")
        address = client[0] if client else None
        token = user.access_token if user is not None else None
        self.audit.refused(
            status,
            subject=token.subject if token else None,
            client_id=token.client_id if token else None,
            caller=f"sub:{token.subject}" if token and token.subject else address_key(address),
        )

    async def _challenge(
        self, send, status: int, error: str | None, description: str, needed: list[str] | None = None
    ) -> None:
        parts = []
        if error:
            parts.append(f'error="{error}"')
        if needed:
            parts.append(f'scope="{" ".join(needed)}"')
        if self.resource_metadata_url:
            parts.append(f'resource_metadata="{self.resource_metadata_url}"')
        if error:
            parts.append(f'error_description="{description}"')
        body = json.dumps({"error": error or "unauthorized", "error_description": description}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"www-authenticate", ("Bearer " + ", ".join(parts)).strip().encode()),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


async def _read_body(receive, max_body: int) -> tuple[list | None, bytes]:
    """The request's messages (to replay) and its body when whole and within `max_body` (else b"")."""
    received, size = [], 0
    while size <= max_body:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None, b""
        received.append(message)
        if message["type"] != "http.request":
            break
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
    if size > max_body or (received and received[-1].get("more_body", False)):
        return received, b""  # too long to check: passed on for the SDK to refuse (413)
    return received, b"".join(m.get("body", b"") for m in received)


def _scopes_needed(body: bytes, held: set[str], tools: frozenset[str]) -> list[str]:
    """The scopes that calls of `tools` in a JSON-RPC body need when `held` lacks some, with those
    held that they need too (what a client must ask for), or [] when nothing is missing."""
    if not any(tool.encode() in body for tool in tools):
        return []  # the usual case, seen without parsing
    try:
        parsed = pydantic_core.from_json(body)
    except ValueError:
        return []
    needed: list[str] = []
    for message in parsed if isinstance(parsed, list) else [parsed]:
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            continue
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        if name in tools and scopes.missing_for_tool(name, held):
            needed += [s for s in scopes.needed_for_tool(name) if s not in needed]
    return needed


def install(app, auth: ServerAuth | None, audit=None, max_body: int = DEFAULT_MAX_REQUEST_BODY_SIZE) -> None:
    """Put the gate in place of the SDK's on `app`'s protected routes, and serve the metadata;
    `max_body`: the longest request body it reads for the per-tool scope check."""
    if auth is None:
        return
    metadata_url = auth.metadata_url
    for route in app.routes:
        inner = getattr(route, "app", None)
        if isinstance(route, (Route, Mount)) and isinstance(inner, RequireAuthMiddleware) and not isinstance(inner, AuthGate):
            route.app = AuthGate(inner.app, metadata_url, audit, auth.scoped_tools, max_body)
    app.router.routes[:] = [r for r in app.routes if not getattr(r, "path", "").startswith(WELL_KNOWN)]
    if metadata_url:
        app.router.routes.extend(
            create_protected_resource_routes(
                resource_url=_URL.validate_python(auth.resource_url),
                authorization_servers=[_URL.validate_python(auth.issuer)],
                scopes_supported=auth.scopes_supported,
                resource_name="kg-mcp",
            )
        )
