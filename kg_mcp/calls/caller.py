"""Who is calling: the key that every per-caller bound and every piece of per-caller state is held
against (query workers, long-call places, traversal trees, rate limits, session caps, audit lines).

A caller is the signed-in subject when the token names one (OAuth, named tokens), else the client's
address as the HTTP layer reports it (X-Forwarded-For only from trusted proxies), IPv6 addresses
counted per /64 (one host usually holds a whole /64), else the one local client of stdio and of
in-process use.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from mcp.server.auth.middleware.auth_context import get_access_token


@dataclass(frozen=True)
class Caller:
    key: str  # "sub:NAME", "addr:ADDRESS" or "local"
    subject: str | None = None
    client_id: str | None = None
    address: str | None = None
    scopes: frozenset[str] = field(default_factory=frozenset)


LOCAL = Caller("local")


def address_key(host: str | None) -> str:
    """The per-caller key of a client address: IPv6 per /64, anything else as given.

    >>> address_key("203.0.113.7"), address_key("2001:db8:1:2:aa::1"), address_key(None)
    ('addr:203.0.113.7', 'addr:2001:db8:1:2::/64', 'local')
    """
    if not host:
        return "local"
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return f"addr:{host}"
    if ip.version == 6:
        if ip.ipv4_mapped is not None:  # ::ffff:a.b.c.d is the IPv4 client a.b.c.d
            return f"addr:{ip.ipv4_mapped}"
        return f"addr:{ipaddress.ip_network((ip, 64), strict=False)}"
    return f"addr:{ip}"


def request_key(scope) -> str:
    """The per-caller key of an HTTP request's ASGI scope: its signed-in subject once the SDK's auth
    middleware has checked the token (scope["user"]), else its client's address. Keys the rate
    limit and the session caps, so that a team behind one address, each signed in, count apart."""
    token = getattr(scope.get("user"), "access_token", None)
    if token is not None and token.subject:
        return f"sub:{token.subject}"
    return address_key((scope.get("client") or ("unknown", 0))[0])


def caller_of(request) -> Caller:
    """The caller of the request being served: `request` is the transport's request (a Starlette
    request over HTTP, None over stdio and in-process); the signed-in token, when there is one, is
    read from the SDK's auth context."""
    client = getattr(request, "client", None)
    address = client.host if client else None
    token = get_access_token()
    if token is not None and token.subject:
        return Caller(f"sub:{token.subject}", token.subject, token.client_id, address, frozenset(token.scopes))
    scopes = frozenset(token.scopes) if token is not None else frozenset()
    return Caller(address_key(address), None, token.client_id if token else None, address, scopes)


# The caller of the tool call being served, set by the server around each call (KGServer.call_tool)
# and read by the lanes and the traversal store several layers down; anyio runs a worker thread in
# a copy of the caller's context, so it follows the call there. Outside a call: the local client.
_current: ContextVar[Caller] = ContextVar("kg_mcp_caller", default=LOCAL)


def current() -> Caller:
    """The caller of the call being served (LOCAL outside a call)."""
    return _current.get()


@contextmanager
def calling_as(caller: Caller) -> Iterator[None]:
    """Serve the body as `caller`'s call."""
    token = _current.set(caller)
    try:
        yield
    finally:
        _current.reset(token)
