"""Request checks of the HTTP transports that the SDK makes too loosely or too late: Host and
Origin (DNS rebinding), request bodies (their size, batches) and JSON-RPC ids.

The SDK matches an allowed `http://127.0.0.1:*` as a text prefix, so `http://127.0.0.1:1@evil.com`
passed; here both headers are parsed (scheme, host, port, nothing else) and compared as values.
The SDK reads a request whose id is neither a string nor an integer as a notification: answered 202
and never run. Here it is answered 400 with a JSON-RPC error saying what to send instead.
"""

from __future__ import annotations

import json
import logging
import re

import pydantic_core

log = logging.getLogger(__name__)

INVALID_REQUEST = -32600
# Messages in one JSON-RPC batch. The MCP SDK runs none (batches left the protocol in 2025-06-18)
# but validates and words every message of one before it says so: 80,000 pings cost a second.
MAX_BATCH = 16
METHODS_KEY = "kg_mcp.methods"  # scope key: the JSON-RPC methods of a checked POST body
# A body over the cap is read and dropped up to this many times the cap before the 413 (see _too_large).
DRAIN_FACTOR = 32
DEFAULT_PORTS = {"http": 80, "https": 443}
# A host is a DNS name, an IPv4 address or a bracketed IPv6 address; a port is 1-5 digits. Nothing
# else (userinfo, paths, queries, spaces, "null") is an origin or a Host we serve.
_HOST = r"(?P<host>\[[0-9a-fA-F:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)"
_PORT = r"(?::(?P<port>\d{1,5}|\*))?"
_HOST_RE = re.compile(_HOST + _PORT)
_ORIGIN_RE = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://" + _HOST + _PORT)

Endpoint = tuple[str, str, int | None]  # (scheme, host, port); port None: any port (a "*" pattern)


def parse_host(value: str, scheme: str = "http", *, pattern: bool = False) -> Endpoint | None:
    """A Host header (or an allow-list pattern) as (scheme, host, port), or None when it is odd."""
    match = _HOST_RE.fullmatch(value.strip() if pattern else value)
    return _endpoint(scheme, match, pattern)


def parse_origin(value: str, *, pattern: bool = False) -> Endpoint | None:
    """An Origin header (or an allow-list pattern) as (scheme, host, port), or None when it is odd."""
    match = _ORIGIN_RE.fullmatch(value.strip() if pattern else value)
    return _endpoint(match["scheme"].lower() if match else "", match, pattern)


def _endpoint(scheme: str, match: re.Match | None, pattern: bool) -> Endpoint | None:
    if match is None or scheme not in DEFAULT_PORTS:
        return None
    port = match["port"]
    if port == "*":
        if not pattern:
            return None
        return scheme, match["host"].lower(), None
    number = int(port) if port else DEFAULT_PORTS[scheme]
    if not 0 < number < 65536 or (port and port.startswith("0")):
        return None
    return scheme, match["host"].lower(), number


def _allowed(candidate: Endpoint | None, patterns: list[Endpoint], *, scheme_matters: bool) -> bool:
    if candidate is None:
        return False
    scheme, host, port = candidate
    return any(
        host == p_host and (p_port is None or port == p_port) and (not scheme_matters or scheme == p_scheme)
        for p_scheme, p_host, p_port in patterns
    )


class HostOriginGuard:
    """ASGI middleware: serve only requests whose Host is allowed (else 421) and whose Origin, when
    sent, is allowed (else 403). Patterns: `host:port`, `host:*`, `scheme://host:port`, `scheme://host:*`.
    """

    def __init__(self, app, allowed_hosts: list[str], allowed_origins: list[str]):
        self.app = app
        self.hosts = [self._pattern(parse_host(h, pattern=True), h, "--allow-host") for h in allowed_hosts]
        self.origins = [self._pattern(parse_origin(o, pattern=True), o, "--allow-origin") for o in allowed_origins]

    @staticmethod
    def _pattern(parsed: Endpoint | None, text: str, flag: str) -> Endpoint:
        if parsed is None:
            from kg_mcp.errors import ConfigError

            raise ConfigError(f"{flag} {text[:80]!r} is not of the form host:port, host:* or http(s)://host:port.")
        return parsed

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        host = origin = None
        for name, value in scope["headers"]:
            if name == b"host":
                host = value.decode("latin-1")
            elif name == b"origin":
                origin = value.decode("latin-1")
        if host is None or not _allowed(parse_host(host), self.hosts, scheme_matters=False):
            log.warning("refused a request with Host %r (not an allowed host; see --allow-host)", (host or "")[:60])
            return await _send_json(send, 421, {"error": "misdirected_request", "message": _HOST_MESSAGE})
        if origin is not None and not _allowed(parse_origin(origin), self.origins, scheme_matters=True):
            log.warning("refused a request with Origin %r (not an allowed origin; see --allow-origin)", origin[:60])
            return await _send_json(send, 403, {"error": "forbidden_origin", "message": _ORIGIN_MESSAGE})
        return await self.app(scope, receive, send)


_HOST_MESSAGE = "This server does not answer for that Host header. Use its own address, or ask its operator to add yours with --allow-host."
_ORIGIN_MESSAGE = (
    "Requests from this Origin are refused: only the server's own origins (scheme://host:port, nothing else) "
    "and those given with --allow-origin are served."
)


class JsonRpcCheck:
    """ASGI middleware for the MCP POST endpoint: the body is bounded before it is read, and checked
    before the SDK parses it.

    - a body over `max_body` bytes is answered 413 at once: by its Content-Length before a byte is
      read, or as soon as a body without one passes the cap (the rest is never read);
    - a batch (a JSON array) of more than MAX_BATCH messages is answered 400 with a JSON-RPC
      Invalid Request error (the SDK would validate every message and word every failure);
    - a request (a message with a method) whose id is not a string or an integer is answered 400
      with an Invalid Request error (the SDK reads it as a notification: 202, never run).

    A body that passes is replayed to the app unchanged.
    """

    def __init__(self, app, max_body: int):
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        declared = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            return await self._too_large(receive, send, 0, more=int(declared) <= DRAIN_FACTOR * self.max_body,
                                         declared=int(declared))
        received, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left (or was timed out) before its body was whole: nobody to answer
            received.append(message)
            size += len(message.get("body", b""))
            more = message.get("more_body", False)
            if size > self.max_body:
                return await self._too_large(receive, send, size, more)
            if not more:
                break
        parsed = _parsed(b"".join(m.get("body", b"") for m in received))
        # What the body asks for, for the session caps behind: only an initialize opens a session.
        scope[METHODS_KEY] = tuple(m.get("method") for m in (parsed if isinstance(parsed, list) else [parsed]) if isinstance(m, dict))
        problem = invalid_message(parsed)
        if problem:
            log.info("refused a JSON-RPC request: %s", problem)
            error = {"code": INVALID_REQUEST, "message": f"Invalid Request: {problem}"}
            return await _send_json(send, 400, {"jsonrpc": "2.0", "id": None, "error": error})

        async def replay():
            return received.pop(0) if received else await receive()

        return await self.app(scope, replay, send)

    async def _too_large(self, receive, send, read: int, more: bool, declared: int | None = None) -> None:
        """413. The rest of the body is read and dropped (never kept or parsed) up to DRAIN_FACTOR
        times the cap, so the client, still sending, gets the answer rather than a reset; a longer
        body (or one declared longer) is not read on: the connection is closed after the answer."""
        while more and read <= DRAIN_FACTOR * self.max_body:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            read += len(message.get("body", b""))
            more = message.get("more_body", False)
        if declared is not None and read < declared:
            more = True  # not all of it was read: the connection cannot serve another request
        log.info("refused a request body of %s bytes (--max-body %d)", f"{declared or read:,}", self.max_body)
        message = (
            f"Request body too large: this server reads at most {self.max_body:,} bytes a request. "
            "Send fewer or shorter arguments, or split the work over several calls."
        )
        error = {"code": INVALID_REQUEST, "message": message}
        await _send_json(send, 413, {"jsonrpc": "2.0", "id": None, "error": error}, close=more)


def _parsed(body: bytes):
    """The body as JSON, or None when it is not JSON (the SDK answers that with its parse error)."""
    try:
        return pydantic_core.from_json(body)
    except ValueError:
        return None


def invalid_message(parsed) -> str | None:
    """What is wrong with a parsed JSON-RPC body: a batch past MAX_BATCH messages, or an id that is
    not a string or an integer; None otherwise.

    >>> invalid_message([{"jsonrpc": "2.0", "method": "ping", "id": 1}] * 40)[:40]
    'a batch may hold at most 16 messages, no'
    """
    if isinstance(parsed, list) and len(parsed) > MAX_BATCH:
        return (
            f"a batch may hold at most {MAX_BATCH} messages, not {len(parsed):,}. Send each request in a POST "
            "of its own (the protocol since 2025-06-18 has no batches)."
        )
    return invalid_id(parsed)


def invalid_id(parsed) -> str | None:
    """What is wrong with the ids of the JSON-RPC requests in a parsed body, or None."""
    for message in parsed if isinstance(parsed, list) else [parsed]:
        if isinstance(message, dict) and "method" in message and "id" in message:
            request_id = message["id"]
            if not (type(request_id) is int or type(request_id) is str):
                kind = {dict: "an object", list: "an array", bool: "a boolean", float: "a number with a fraction"}.get(
                    type(request_id), "null"
                )
                return (
                    f"the id of a request must be a string or an integer, not {kind}. Send it again with an id "
                    'such as 1 or "call-1" (or no id at all for a notification, which gets no answer).'
                )
    return None


async def _send_json(send, status: int, payload: dict, close: bool = False) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if close:  # the rest of the request was never read: the connection cannot serve another
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
