"""Connection bounds under uvicorn: read timeouts and connection caps, applied to sockets before
any HTTP request exists (so before auth, rate limits or the app can see them).

uvicorn closes idle keep-alive connections but has no timeout for a request still being received:
a client that sends half its headers holds a socket, a file descriptor, forever. Here each
connection must send its request head within `header_timeout_s` (from its opening, or from the end
of its previous response) and its body within `body_timeout_s` more, or it is closed. Connections
are counted, in all and per peer address: one past a cap is closed at once, so accept() never runs
out of file descriptors (which made asyncio log an error for every attempt).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from kg_mcp.serving.limits import HttpLimits

log = logging.getLogger(__name__)


class ConnectionCounter:
    """Open connections, in all and per peer address, against their caps (0: no cap per address)."""

    def __init__(self, limits: HttpLimits, total_cap: int):
        self.limits = limits
        self.total_cap = total_cap
        self.total = 0
        self.per_address: Counter[str] = Counter()

    def admit(self, address: str) -> bool:
        """Count a new connection from `address`, or refuse it (False) when a cap is reached."""
        per_client = self.limits.max_connections_per_client
        if self.total >= self.total_cap:
            log.warning("connection refused: %d connections open, the most this server holds (--max-connections)", self.total)
            return False
        # A trusted proxy carries many clients: the cap per address would cap them all together.
        if per_client and self.per_address[address] >= per_client and not self.limits.is_trusted_proxy(address):
            log.warning("connection refused: %s already holds %d connections (--max-connections-per-client)", address, per_client)
            return False
        self.total += 1
        self.per_address[address] += 1
        return True

    def release(self, address: str) -> None:
        self.total -= 1
        self.per_address[address] -= 1
        if self.per_address[address] <= 0:
            del self.per_address[address]


def guarded_protocol(limits: HttpLimits, counter: ConnectionCounter) -> type[H11Protocol]:
    """uvicorn's h11 protocol with read timeouts and connection caps (pass it as Config(http=...))."""

    class GuardedH11Protocol(H11Protocol):
        _timer: asyncio.TimerHandle | None = None
        _phase: str | None = None  # what the running timer waits for: "head", "body" or None
        _admitted = False
        _address = "unknown"

        def connection_made(self, transport):  # type: ignore[override]
            super().connection_made(transport)
            self._address = self.client[0] if self.client else "unknown"
            if not counter.admit(self._address):
                transport.abort()  # at once: no response, no request read
                return
            self._admitted = True
            self._follow()

        def connection_lost(self, exc):
            self._disarm()
            if self._admitted:
                self._admitted = False
                counter.release(self._address)
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._follow()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._follow()

        def _follow(self) -> None:
            """Arm the timer for what the client owes now: a request head, the rest of a body, or nothing."""
            if self.transport is None or self.transport.is_closing():
                return self._disarm()
            state = self.conn.their_state
            phase = "head" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None
            if phase == self._phase:
                return  # partial data does not restart the clock
            self._disarm()
            if phase is not None:
                seconds = limits.header_timeout_s if phase == "head" else limits.body_timeout_s
                self._timer = self.loop.call_later(seconds, self._timed_out)
                self._phase = phase

        def _disarm(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
            self._timer, self._phase = None, None

        def _timed_out(self) -> None:
            phase, self._timer, self._phase = self._phase, None, None
            if self.transport.is_closing():
                return
            if phase == "head" and self.conn.their_state is h11.IDLE and self.cycle is None:
                log.info("closed a connection from %s: no complete request head within %g s", self._address, limits.header_timeout_s)
            elif phase == "body":
                log.warning("closed a connection from %s: its request body did not arrive within %g s", self._address, limits.body_timeout_s)
            self.transport.close()

    return GuardedH11Protocol
