"""Connection bounds under uvicorn: read and write timeouts and connection caps, applied to sockets
before any HTTP request exists (so before auth, rate limits or the app can see them).

uvicorn closes idle keep-alive connections but has no timeout for a request still being received:
a client that sends half its headers holds a socket, a file descriptor, forever. Here each
connection must send its request head within `header_timeout_s` (from its opening, or from the end
of its previous response) and its body within `body_timeout_s` more, or it is closed.

Nor does uvicorn time out a client that does not read: once the socket's buffers are full, the
response waits in the transport for ever, and a close waits for it to be sent. Here, while a
connection has response bytes that the client does not take, it must take some within
`write_timeout_s` (of a pause, or of a close), or it is aborted, its unsent bytes dropped.

Connections are counted, in all and per client (its address, IPv6 per /64: kg_mcp.calls.caller). One past
the per-client cap is closed at once. At the total cap a newcomer is not refused while another
client holds more connections than it: an idle, half-open or stalled one of theirs (a request head
not sent, a response not read, a close not finished) is closed instead, the oldest such of the
client holding the most; when none is idle, the oldest connection of the client holding the most
(two more than the newcomer at least). So no set of clients can fill the server with connections
and lock a new one out; only when no client holds more than the newcomer is a connection past the
total cap closed at once (so accept() never runs out of file descriptors).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from kg_mcp.calls.caller import address_key
from kg_mcp.serving.limits import HttpLimits
from kg_mcp.serving.whole_responses import OneWritePerTurn

log = logging.getLogger(__name__)


class ConnectionCounter:
    """Open connections, in all and per client, against their caps (0: no cap per client)."""

    def __init__(self, limits: HttpLimits, total_cap: int):
        self.limits = limits
        self.total_cap = total_cap
        self.total = 0
        self.per_client: dict[str, dict] = {}  # client key -> its connections, oldest first
        self.proxies: set[str] = set()  # client keys of trusted proxies: they carry many clients, none is closed for room

    def admit(self, connection, address: str) -> bool:
        """Count a new connection from `address`, or refuse it (False) when a cap is reached.

        At the total cap, an idle connection of a client holding more is closed to make room."""
        client = address_key(address)
        mine = self.per_client.get(client, {})
        per_client = self.limits.max_connections_per_client
        # A trusted proxy carries many clients: the cap per address would cap them all together.
        if per_client and len(mine) >= per_client and not self.limits.is_trusted_proxy(address):
            log.warning("connection refused: %s already holds %d connections (--max-connections-per-client)", client, per_client)
            return False
        if self.total >= self.total_cap and not self._make_room(len(mine)):
            log.warning("connection refused: %d connections open and all busy, the most this server holds (--max-connections)",
                        self.total)
            return False
        self.total += 1
        self.per_client.setdefault(client, {})[connection] = None
        if self.limits.networks and self.limits.is_trusted_proxy(address):
            self.proxies.add(client)
        return True

    def release(self, connection, address: str) -> None:
        client = address_key(address)
        mine = self.per_client.get(client)
        if mine is None or connection not in mine:
            return
        del mine[connection]
        self.total -= 1
        if not mine:
            del self.per_client[client]

    def _make_room(self, newcomer_holds: int) -> bool:
        """Close a connection of a client holding more than the newcomer: an idle one of the client
        holding the most that has one; else, when none is idle, the oldest of the client holding
        the most (at least two more than the newcomer: a request of its is cut, not the newcomer's)."""
        ranked = sorted(((c, conns) for c, conns in self.per_client.items() if c not in self.proxies), key=lambda item: -len(item[1]))
        for client, connections in ranked:
            if len(connections) <= newcomer_holds:
                break
            idle = next((c for c in connections if c.idle()), None)
            if idle is not None:
                log.warning("closed an idle connection of %s (it holds %d) to make room for another client "
                            "(--max-connections %d reached)", client, len(connections), self.total_cap)
                idle.evict()
                return True
        if ranked and len(ranked[0][1]) > newcomer_holds + 1:
            client, connections = ranked[0]
            log.warning("closed the oldest connection of %s (it holds %d, all busy) to make room for another client "
                        "(--max-connections %d reached)", client, len(connections), self.total_cap)
            next(iter(connections)).evict()
            return True
        return False


def guarded_protocol(limits: HttpLimits, counter: ConnectionCounter) -> type[H11Protocol]:
    """uvicorn's h11 protocol with read and write timeouts and connection caps (Config(http=...))."""

    class GuardedH11Protocol(H11Protocol):
        _timer: asyncio.TimerHandle | None = None
        _phase: str | None = None  # what the running timer waits for: "head", "body" or None
        _write_timer: asyncio.TimerHandle | None = None
        _write_mark = 0  # unsent bytes when the write timer was armed
        _stalled = False  # the transport's buffer is past its high-water mark: the client is not reading
        _drained = False  # the client took enough to resume writing since the write timer was armed
        _admitted = False
        _address = "unknown"

        def connection_made(self, transport):  # type: ignore[override]
            super().connection_made(OneWritePerTurn(transport))
            self._address = self.client[0] if self.client else "unknown"
            if not counter.admit(self, self._address):
                transport.abort()  # at once: no response, no request read
                return
            self._admitted = True
            self._follow()

        def connection_lost(self, exc):
            self._disarm()
            if self._write_timer is not None:
                self._write_timer.cancel()
                self._write_timer = None
            self._release()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._follow()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._follow()
            # Once the turn's writes have left for the socket (OneWritePerTurn flushes first: the
            # loop runs its callbacks in order), what waits is what the client has not taken.
            self.loop.call_soon(self._watch_writes)

        def timeout_keep_alive_handler(self) -> None:
            super().timeout_keep_alive_handler()
            self._watch_writes()  # a close waits for the unsent response: it too must be taken in time

        def pause_writing(self) -> None:
            super().pause_writing()
            self._stalled = True
            self._watch_writes()

        def resume_writing(self) -> None:
            super().resume_writing()
            self._stalled, self._drained = False, True

        # --- for ConnectionCounter ---------------------------------------------------------------
        def idle(self) -> bool:
            """Doing nothing for anyone: waiting for a request head, stalled on its client, or closing."""
            if self.transport is None or self.transport.is_closing() or self._stalled:
                return True
            return self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)

        def evict(self) -> None:
            self._release()
            self._reset()

        def _reset(self) -> None:
            """Abort with a reset: the unsent response is dropped by the kernel too, not kept sending."""
            sock = self.transport.get_extra_info("socket")
            if sock is not None:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                except OSError:
                    pass
            self.transport.abort()

        def _release(self) -> None:
            if self._admitted:
                self._admitted = False
                counter.release(self, self._address)

        # --- read timeouts -----------------------------------------------------------------------
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
            self._watch_writes()

        # --- write timeout -----------------------------------------------------------------------
        def _watch_writes(self) -> None:
            """While response bytes wait in the transport, check every write_timeout_s that the client takes some."""
            if self._write_timer is not None or self.transport is None:
                return
            unsent = self.transport.get_write_buffer_size()
            if unsent:
                self._write_mark, self._drained = unsent, False
                self._write_timer = self.loop.call_later(limits.write_timeout_s, self._write_check)

        def _write_check(self) -> None:
            self._write_timer = None
            unsent = self.transport.get_write_buffer_size()
            if not unsent:
                return
            if self._drained or unsent < self._write_mark:  # it read some: another period
                return self._watch_writes()
            log.warning("closed a connection from %s: it took none of its response for %g s (--write-timeout)",
                        self._address, limits.write_timeout_s)
            self._release()
            self._reset()

    return GuardedH11Protocol
