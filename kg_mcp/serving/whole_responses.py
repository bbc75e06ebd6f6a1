"""Responses of known length leave in one go, so a replica that dies mid-answer has sent nothing.

A load balancer can send a request to another replica only while no byte of the answer has
reached the client (nginx's `proxy_next_upstream`). uvicorn writes a response's head as soon as the
application starts it, and the body when it comes: a replica killed in between leaves the client a
head that promises a body it never gets, and the call fails. Holding the head of a response with a
Content-Length (a JSON answer, an error) until its body is ready writes both in the same turn of
the event loop, and `OneWritePerTurn` hands what a turn wrote to the socket in one write: uvicorn
writes the head and the body apart, two send() calls, and a replica killed between them (seen in
the deploy test, once in a few hundred kills) left nginx a head with no body. Event streams (no
Content-Length) are not held: their head goes out at the end of its turn.
"""

from __future__ import annotations

import asyncio
import logging

log = logging.getLogger(__name__)


class WholeResponses:
    """ASGI middleware: the head of a response with a Content-Length waits for its first body part."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        held: dict | None = None

        async def together(message):
            nonlocal held
            if message["type"] == "http.response.start" and _has_length(message):
                held = message
                return
            if held is not None:
                head, held = held, None
                await send(head)
            await send(message)

        await self.app(scope, receive, together)
        if held is not None:  # a head without any body part: still answered
            await send(held)


def _has_length(start: dict) -> bool:
    return any(name.lower() == b"content-length" for name, _ in start.get("headers", ()))


class OneWritePerTurn:
    """A transport whose writes in one turn of the event loop go to the socket as one write, at the
    end of that turn: a response's head and body are one send(), so a process killed at any moment
    has sent all of it or none, as long as it fits the socket's buffer and the transport's high-water
    mark (a JSON answer within the output budget does). Past that mark what is held goes at once,
    so the transport's flow control (pause_writing) works as without this wrapper. Everything else
    is the transport's own."""

    def __init__(self, transport: asyncio.Transport):
        self._transport = transport
        self._pending: list[bytes] = []
        self._held = 0  # bytes in _pending

    def write(self, data: bytes) -> None:
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._pending.append(bytes(data))
        self._held += len(data)
        if self._held > self._transport.get_write_buffer_limits()[1]:
            self._flush()

    def writelines(self, lines) -> None:
        for data in lines:
            self.write(data)

    def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            self._held = 0
            if not self._transport.is_closing():
                self._transport.write(data)
            else:  # closed in the same turn (the peer's EOF, a fatal error): nobody reads them now
                log.debug("%d bytes not sent: the connection closed first", len(data))

    def close(self) -> None:
        self._flush()  # what was written before the close is sent before it, as by the transport itself
        self._transport.close()

    def write_eof(self) -> None:
        self._flush()  # the data written first, then the end
        self._transport.write_eof()

    def abort(self) -> None:
        self._pending.clear()
        self._held = 0
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + self._held

    def __getattr__(self, name):
        return getattr(self._transport, name)
