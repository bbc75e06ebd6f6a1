"""MCP sessions per client on streamable HTTP: no client, nor set of clients, can take every session.

The SDK's session manager has one global cap (its max_sessions): a single client that opens
sessions and never closes them fills it, and every other client gets 503 until the idle timeout.
`SessionCap` wraps the manager's ASGI app: it learns each session's client (its signed-in
subject, else its address as the rate limit sees it, IPv6 per /64: kg_mcp.calls.caller) from the response
that opens it, counts the requests in flight on each, and when a client opens one more than its cap, ends that client's
oldest idle session first (as its idle timeout would). When the server holds its total, a new
session ends the oldest idle session of the client holding the most sessions (any client: many
addresses each under their cap fill the total too). Only when the sessions it could end are all
busy is a new one refused: 429 for a client at its own cap, 503 for the server.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass

from kg_mcp.calls.caller import request_key
from kg_mcp.serving.guards import METHODS_KEY

log = logging.getLogger(__name__)

SESSION_HEADER = b"mcp-session-id"


@dataclass
class _Session:
    client: str
    in_flight: int = 0
    last_used: float = 0.0


class SessionCap:
    """ASGI middleware around a StreamableHTTPSessionManager's app: sessions capped per client."""

    def __init__(self, app, manager, per_client: int, total: int, clock=time.monotonic):
        # The manager keeps its live sessions in `_server_instances` (id -> transport): the only way
        # to see which have ended by idle timeout and to end one. Checked here, not at the first attack.
        if not isinstance(getattr(manager, "_server_instances", None), dict):
            raise RuntimeError("this version of the mcp SDK does not expose its sessions: session caps cannot work")
        self.app = app
        self.manager = manager
        self.per_client = per_client
        self.total = total
        self.clock = clock
        self.sessions: OrderedDict[str, _Session] = OrderedDict()  # oldest use first
        self.opening: dict[str, int] = {}  # client -> sessions being opened now

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        session_id = next((v.decode("latin-1") for k, v in scope["headers"] if k == SESSION_HEADER), None)
        if session_id is None:
            if "initialize" not in scope.get(METHODS_KEY, ("initialize",)):
                return await self.app(scope, receive, send)  # a stateless request (2026-07-28): no session
            return await self._open(scope, receive, send)
        session = self.sessions.get(session_id)
        if session is None:
            return await self.app(scope, receive, send)
        session.in_flight += 1
        try:
            return await self.app(scope, receive, send)
        finally:
            session.in_flight -= 1
            session.last_used = self.clock()
            if session_id in self.sessions:
                self.sessions.move_to_end(session_id)

    async def _open(self, scope, receive, send):
        """A request without a session id: the opening of a new session, if the SDK accepts it."""
        client = request_key(scope)  # behind the SDK's auth: a signed-in caller's own sessions
        self._forget_ended()
        mine = [sid for sid, s in self.sessions.items() if s.client == client]  # oldest use first
        if len(mine) + self.opening.get(client, 0) >= self.per_client:
            idle = next((sid for sid in mine if self.sessions[sid].in_flight == 0), None)
            if idle is None:
                log.warning("refused a new session: %s already has %d sessions, all busy", client, len(mine))
                return await _refuse(send, 429, f"Too many sessions from this client: {len(mine)} are open and all busy "
                                     "(the most one client may hold). End one (DELETE) or wait for one to finish.")
            log.warning("ended the oldest idle session of %s: it opened more than %d", client, self.per_client)
            self._end(idle)
        if len(self.sessions) + sum(self.opening.values()) >= self.total:
            idle = self._idle_of_the_most()
            if idle is None:
                log.warning("refused a new session: %d sessions are open and all busy, the most this server holds",
                            len(self.sessions))
                return await _refuse(send, 503, "Too many open sessions on this server, all busy. Retry later.")
            log.warning("ended the oldest idle session of %s to open one for %s: the server holds %d sessions",
                        self.sessions[idle].client, client, self.total)
            self._end(idle)

        opened: list[str] = []
        opening = True  # this request counts in self.opening until its session counts in self.sessions

        def opened_now() -> None:
            nonlocal opening
            if opening:
                opening = False
                self.opening[client] -= 1
                if not self.opening[client]:
                    del self.opening[client]

        async def watch(message):
            # Counted from the response that names it, before the client can use it: a request on
            # it that arrived before this one ended would otherwise not be counted in flight.
            if message["type"] == "http.response.start" and message["status"] < 400:
                for key, value in message.get("headers", []):
                    if key == SESSION_HEADER:
                        sid = value.decode("latin-1")
                        self.sessions[sid] = _Session(client, in_flight=1, last_used=self.clock())
                        opened.append(sid)
                        opened_now()
            await send(message)

        self.opening[client] = self.opening.get(client, 0) + 1
        try:
            await self.app(scope, receive, watch)
        finally:
            opened_now()
            for sid in opened:
                session = self.sessions.get(sid)
                if session is None:
                    continue
                if sid not in self.manager._server_instances:  # the SDK did not keep it after all
                    del self.sessions[sid]
                    continue
                session.in_flight -= 1
                session.last_used = self.clock()

    def _idle_of_the_most(self) -> str | None:
        """The oldest idle session of the client that holds the most sessions (with an idle one)."""
        held = Counter(s.client for s in self.sessions.values())
        idle: dict[str, str] = {}  # client -> its oldest idle session
        for sid, session in self.sessions.items():  # oldest use first
            if session.in_flight == 0:
                idle.setdefault(session.client, sid)
        if not idle:
            return None
        return idle[max(idle, key=lambda client: held[client])]

    def _forget_ended(self) -> None:
        """Drop the sessions the manager no longer holds (closed by the client or the idle timeout)."""
        live = self.manager._server_instances
        for sid in [sid for sid in self.sessions if sid not in live]:
            del self.sessions[sid]

    def _end(self, session_id: str) -> None:
        """End a session as its idle timeout would: its server task stops and the manager forgets it."""
        self.sessions.pop(session_id, None)
        transport = self.manager._server_instances.get(session_id)
        # serve() always sets an idle timeout, so every session has its idle scope once opened.
        if transport is not None and transport.idle_scope is not None:
            transport.idle_scope.cancel()


async def _refuse(send, status: int, message: str) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 429:
        headers.append((b"retry-after", b"5"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
