"""An optional per-client rate limit for the HTTP transports (`serve --rate-limit N`), and the
count of tokens that would be asked of an OAuth issuer, which holds with it or without it."""

from __future__ import annotations

import copy
import json
import logging
import math
import random
import time

import anyio

from kg_mcp.calls.caller import request_key
from kg_mcp.state import SharedStateError
from kg_mcp.state.memory import take_token

log = logging.getLogger(__name__)

NEW_TOKENS_PER_MINUTE = 120  # without --rate-limit: tokens asked of the issuer, per address, a minute
# Past FREE_REFUSALS refusals of one client in a second, each more 429 leaves about HOLD_S after its
# request came (its Retry-After counted from then): a client that floods waits for each refusal, so
# its connections (256 at most from one address) bring about that many requests a second and cost
# the event loop little. Each hold is drawn between half and one and a half of HOLD_S, so that a
# flood's connections do not come back in step. A client that waits as told is never held.
FREE_REFUSALS = 8
HOLD_S = 1.0
# Set in an ASGI scope once the request has been counted against its address, so that a request
# with a token that is no one's is not counted twice (kg_mcp.serving.app orders these guards).
COUNTED = "kg_mcp.address_counted"


class RateLimit:
    """ASGI middleware: at most `per_minute` HTTP requests a minute from one client, then 429.

    A client is its address as uvicorn reports it (the peer address, or X-Forwarded-For when the
    peer is a --trusted-proxy; none by default), IPv6 addresses counted per /64 (kg_mcp.calls.caller;
    the connection caps use the same identity). It runs before auth: refused requests cost nothing
    downstream. The MCP endpoint is counted by its twin behind the SDK's auth middleware instead
    (`behind_sign_in`): there a signed-in caller (a named token, an OAuth subject) is its own client,
    whatever its address, and any other request counts against its address, as here. Each client has
    a token bucket of `per_minute` requests that refills continuously, so short bursts pass and a
    steady stream is held to the rate. Every HTTP request counts (an MCP session's start takes two
    or three, then one per call). A client refused again and again is answered later (HOLD_S).
    """

    MAX_CLIENTS = 10_000  # buckets kept; idle (full) ones are dropped first

    def __init__(self, app, per_minute: int, clock=time.monotonic, shared=None):
        if per_minute < 1:
            raise ValueError("per_minute must be at least 1")
        self.app = app
        self.per_minute = per_minute
        self.clock = clock
        self.shared = shared  # kg_mcp.state: with Redis, one bucket per client across replicas
        self.buckets: dict[str, tuple[float, float]] = {}  # client -> (tokens, at)
        self.passing: frozenset[str] = frozenset()  # paths counted behind sign-in instead (behind_sign_in)
        self.hold_s, self.sleep = HOLD_S, anyio.sleep
        self._refusals: dict[str, tuple[float, int]] = {}  # client -> (its second's start, refusals in it)
        self._refused, self._warned_at = 0, float("-inf")

    def behind_sign_in(self, app, path: str) -> RateLimit:
        """The same limit (the same buckets) around `app`, the endpoint at `path` behind the SDK's auth
        middleware, which counts that path from now on, keyed by caller (kg_mcp.calls.caller.request_key)."""
        self.passing = self.passing | {path}
        twin = copy.copy(self)
        twin.app, twin.passing = app, frozenset()
        return twin

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("path") in self.passing:
            return await self.app(scope, receive, send)
        client = request_key(scope)
        if client.startswith("sub:"):
            pass  # a signed-in caller's own bucket (behind sign-in): never counted before it
        elif scope.get(COUNTED):
            return await self.app(scope, receive, send)  # its token cost its address a request already
        else:
            scope[COUNTED] = True
        wait = await self._wait(client)
        if wait is None:
            return await self.app(scope, receive, send)
        await self.refuse(send, client, wait)

    async def refuse(self, send, client: str, wait: float, what: str = "requests") -> None:
        """Answer 429 (held first when `client` floods: HOLD_S): it has spent its `per_minute` `what`
        and gets one more `wait` s from now."""
        now = self.clock()
        held = self.hold_s * random.uniform(0.5, 1.5) if self._flooding(client, now) else 0.0
        if held:
            await self.sleep(held)
        retry_after = max(1, math.ceil(wait - held))
        self._refused += 1
        now = self.clock()
        if now - self._warned_at >= 10:  # a flood of refusals must not flood the log too
            log.warning("rate limit: %d request(s) answered 429 (latest from %s)", self._refused, client)
            self._warned_at, self._refused = now, 0
        body = json.dumps(
            {
                "error": "rate_limited",
                "message": f"Too many {what}: this server allows {self.per_minute} {what} a minute per client. "
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

    def _flooding(self, client: str, now: float) -> bool:
        """Count a refusal of `client`: whether it has had FREE_REFUSALS already in this second."""
        start, count = self._refusals.get(client, (now, 0))
        if now - start >= 1.0:
            start, count = now, 0
        self._refusals[client] = (start, count + 1)
        if len(self._refusals) > self.MAX_CLIENTS:  # in place: the twin behind sign-in holds the same dict
            for past in [k for k, (began, _) in self._refusals.items() if now - began >= 1.0]:
                del self._refusals[past]
        return count >= FREE_REFUSALS

    async def _wait(self, client: str) -> float | None:
        if self.shared is not None:
            try:
                return await self.shared.rate_take(client, self.per_minute)
            except SharedStateError:
                pass  # counted in kg_mcp_shared_state_errors; this replica's own bucket meanwhile
        return self._take(client)

    def _take(self, client: str) -> float | None:
        """Spend one request of `client`'s bucket: None if allowed, else the seconds until one is."""
        return take_token(self.buckets, client, self.per_minute, self.clock(), self.MAX_CLIENTS)


class TokenChecks:
    """ASGI middleware in front of the SDK's auth: a request whose bearer token the OAuth issuer would
    be asked about (an opaque token with no answer remembered: kg_mcp.serving.oauth's `needs_issuer`)
    is counted against its address before the token is read, in the rate limit's bucket (`limiter`),
    or without one in a bucket of NEW_TOKENS_PER_MINUTE; past it the request is answered 429 and the
    issuer is not asked. A token already answered for passes uncounted here (a signed-in caller is
    counted by its subject behind sign-in), so a flood of forged tokens from one address spends that
    address's requests and no one else's."""

    def __init__(self, app, verifier, limiter: RateLimit | None = None, shared=None):
        self.app = app
        self.verifier = verifier
        self.own = limiter is None
        self.limiter = limiter or RateLimit(None, NEW_TOKENS_PER_MINUTE, shared=shared)

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and not scope.get(COUNTED):
            token = bearer_token(scope)
            if token and self.verifier.needs_issuer(token):
                scope[COUNTED] = True
                client = request_key(scope)
                wait = await self.limiter._wait(f"new-tokens:{client}" if self.own else client)
                if wait is not None:
                    return await self.limiter.refuse(send, client, wait, "new tokens" if self.own else "requests")
        return await self.app(scope, receive, send)


def bearer_token(scope) -> str | None:
    """The token of a request's `Authorization: Bearer` header, read as the SDK reads it."""
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            text = value.decode("latin-1")
            return text[7:] if text[:7].lower() == "bearer " else None
    return None
