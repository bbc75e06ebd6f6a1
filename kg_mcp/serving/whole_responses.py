"""Responses of known length leave in one go, so a replica that dies mid-answer has sent nothing.

A load balancer can send a request to another replica only while no byte of the answer has
reached the client (nginx's `proxy_next_upstream`). uvicorn writes a response's head as soon as the
application starts it, and the body when it comes: a replica killed in between leaves the client a
head that promises a body it never gets, and the call fails. Holding the head of a response with a
Content-Length (a JSON answer, an error) until its body is ready writes both in the same turn of
the event loop. Event streams (no Content-Length) are not held: their head must go out at once.
"""

from __future__ import annotations


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
