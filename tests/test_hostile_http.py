"""Hostile clients at the HTTP layer of `kg-mcp serve` (issue 21, items 3 and 4): half-open and
surplus connections, session hoarding, spoofed X-Forwarded-For, odd Origin and Host forms, and
JSON-RPC requests whose id is not a string or an integer.

Each test runs a real `kg-mcp serve --transport http` subprocess (the demo KG) on loopback, with its
caps lowered through the options so a few dozen sockets stand for thousands. Clients bind distinct
loopback addresses (127.0.0.2, .3 ...) to be distinct clients. Waits are bounded polls; what is
asserted is order (a client was served while the hostile sockets were still held), counts, statuses
and the log's size, never elapsed time.
"""

from __future__ import annotations

import asyncio
import select
import socket
import time

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import INITIALIZE
from fault_proxy import kg_mcp_server

TOKEN = "kgmcp-hostile-http-token-0123456789abcdef"
ENV = {"KGTOK": TOKEN}
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def _serve(*args: str):
    return kg_mcp_server("--auth-token-env", "KGTOK", *args, env=ENV)


def _from(address: str, **kwargs) -> httpx2.AsyncClient:
    """An HTTP client whose connections come from `address` (a loopback address)."""
    return httpx2.AsyncClient(transport=httpx2.AsyncHTTPTransport(local_address=address), timeout=30, **kwargs)


async def _served(url: str, address: str) -> str:
    """A whole MCP session from `address`: initialize, then a tool call; returns the call's text."""
    async with Client(streamable_http_client(url, http_client=_from(address, headers=AUTH))) as client:
        result = await client.call_tool("find_entities", {"name": "Zundert"})
        assert not result.is_error, result.content
        return result.content[0].text


def _open_partial(port: int, address: str, count: int, data: bytes) -> list[socket.socket]:
    sockets = []
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(address, 0))
        try:
            s.sendall(data)
        except OSError:  # closed by the server already (over a cap)
            pass
        sockets.append(s)
    return sockets


def _closed_by_server(s: socket.socket, wait: float = 0.0) -> bool:
    """True once the server closed `s` (EOF or reset), reading off any answer it sent first."""
    deadline = time.monotonic() + wait
    while True:
        ready, _, _ = select.select([s], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return False
        try:
            if s.recv(65536) == b"":
                return True
        except OSError:
            return True


def _wait_closed(sockets: list[socket.socket], expected: int, deadline_s: float = 30) -> list[socket.socket]:
    """Poll until `expected` of the sockets are closed by the server (or the deadline); return those still open."""
    deadline = time.monotonic() + deadline_s
    still = list(sockets)
    while len(sockets) - len(still) < expected and time.monotonic() < deadline:
        still = [s for s in still if not _closed_by_server(s, 0.05)]
    return still


def _close_all(sockets: list[socket.socket]) -> None:
    for s in sockets:
        s.close()


def _log_lines(server, needle: str) -> int:
    return sum(needle in line for line in server.output()[1].splitlines())


async def _served_eventually(url: str, address: str) -> str:
    """_served, retried while the server may still be counting connections just closed (bounded)."""
    for _ in range(50):
        try:
            return await _served(url, address)
        except Exception:  # noqa: BLE001 - refused at the cap for a moment
            time.sleep(0.1)
    return await _served(url, address)


async def test_connection_caps_close_surplus_connections_and_a_full_server_still_takes_a_new_client():
    head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl"  # never finished
    # A long header timeout: whatever closes a socket here is a cap, not the timeout.
    with _serve("--header-timeout", "120", "--max-connections", "60", "--max-connections-per-client", "30") as server:
        port = int(server.base.rsplit(":", 1)[1])
        flood, second = _open_partial(port, "127.0.0.2", 70, head), []
        try:
            held = _wait_closed(flood, expected=40)  # one address: 30 held, the 40 past its cap closed
            assert len(held) == 30
            # 40 more from two other addresses fill the server's 60: each newcomer past the total
            # closes an idle connection of the client holding the most, so all three end with 20.
            second = _open_partial(port, "127.0.0.4", 20, head) + _open_partial(port, "127.0.0.5", 20, head)
            held = _wait_closed(held, expected=10)
            assert len(held) == 20 and not any(_closed_by_server(s) for s in second)
            # Full of connections that do nothing: a new client is still served, not refused.
            assert "wd:Q9883" in await _served(server.url, "127.0.0.6")
            assert "wd:Q9883" in await _served(server.url, "127.0.0.3")
        finally:
            _close_all(flood + second)
    out, err = server.output()
    assert out == ""
    refusals = _log_lines(server, "connection refused")
    assert 1 <= refusals <= 6, err[-2000:]  # 40 refusals past the cap per client, a line per kind per 10 s
    assert 1 <= _log_lines(server, "to make room for another client") <= 6, err[-2000:]


async def test_half_open_and_slow_requests_are_closed_after_the_timeouts():
    head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: appl"
    slow_body = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + f"Authorization: Bearer {TOKEN}\r\nAccept: application/json, text/event-stream\r\nContent-Length: 400\r\n\r\n".encode()
        + b'{"jsonrpc": "2.0", '
    )
    with _serve("--header-timeout", "1", "--body-timeout", "1") as server:
        port = int(server.base.rsplit(":", 1)[1])
        log_before = len(server.output()[1].splitlines())
        sockets = _open_partial(port, "127.0.0.2", 150, head) + _open_partial(port, "127.0.0.3", 30, slow_body)
        # A connection that sends nothing at all is a half-open one too.
        silent = [socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.4", 0)) for _ in range(20)]
        try:
            still = _wait_closed(sockets + silent, expected=200)
            assert still == [], f"{len(still)} of 200 slow connections still open"
        finally:
            _close_all(sockets + silent)
        assert "wd:Q9883" in await _served(server.url, "127.0.0.5")
    out, err = server.output()
    assert out == ""
    grown = len(err.splitlines()) - log_before
    assert grown <= 10, err[-3000:]  # 200 closed connections: a few lines, not one each


async def test_sessions_are_capped_per_client_and_in_all_oldest_idle_first():
    with _serve("--max-sessions-per-client", "5", "--max-sessions", "12") as server:
        async with _from("127.0.0.2", headers=AUTH) as hoarder:
            ids = []
            for _ in range(8):  # three more than its cap, none ever closed
                opened = await hoarder.post(server.url, json=INITIALIZE, headers=HEADERS)
                assert opened.status_code == 200, opened.text
                ids.append(opened.headers["mcp-session-id"])

            async def status(session_id: str) -> int:
                ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
                headers = HEADERS | {"mcp-session-id": session_id, "mcp-protocol-version": "2025-06-18"}
                return (await hoarder.post(server.url, json=ping, headers=headers)).status_code

            # Its three oldest sessions were ended for the newest; the newest five still answer.
            assert [await status(s) for s in ids] == [404] * 3 + [200] * 5

            # Another client is not locked out: a whole session with a tool call.
            assert "wd:Q9883" in await _served(server.url, "127.0.0.3")

            # A client whose sessions are all busy (an open GET stream each) gets 429 for one more.
            async with _from("127.0.0.4", headers=AUTH) as busy:
                busy_ids = [(await busy.post(server.url, json=INITIALIZE, headers=HEADERS)).headers["mcp-session-id"] for _ in range(5)]
                streams = []
                try:
                    for sid in busy_ids:
                        headers = AUTH | {"Accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
                        stream = busy.stream("GET", server.url, headers=headers)
                        response = await stream.__aenter__()
                        assert response.status_code == 200
                        streams.append(stream)
                    refused = await busy.post(server.url, json=INITIALIZE, headers=HEADERS)
                    assert refused.status_code == 429, refused.text
                    assert "all busy" in refused.json()["error"]["message"]
                finally:
                    for stream in streams:
                        await stream.__aexit__(None, None, None)

            # All clients together: 12 at most (5 + 5 open, so 2 more). Past that a new session ends
            # the oldest idle one of the client holding the most (the hoarder's oldest), not a refusal.
            async with _from("127.0.0.5", headers=AUTH) as last:
                codes = [(await last.post(server.url, json=INITIALIZE, headers=HEADERS)).status_code for _ in range(3)]
            assert codes == [200, 200, 200], codes
            assert [await status(s) for s in ids[3:]] == [404] + [200] * 4
    out, err = server.output()
    assert out == "" and "Traceback" not in err and TOKEN[:12] not in err


async def test_stateless_requests_are_not_counted_as_sessions_being_opened():
    # The 2026-07-28 protocol has no sessions: a request without a session id is not an opening
    # unless it is an initialize, so 40 at once from one client are no "40 sessions being opened".
    with _serve("--max-sessions-per-client", "4") as server:
        async with Client(streamable_http_client(server.url, http_client=_from("127.0.0.2", headers=AUTH))) as client:
            listed = await asyncio.gather(*(client.list_tools() for _ in range(40)))
    assert all(len(tools.tools) >= 7 for tools in listed)
    assert _log_lines(server, "refused a new session") == 0


async def test_sessions_from_many_addresses_never_lock_a_new_client_out():
    """Repro 8: 16 addresses x 64 idle sessions filled the server's 1,000; every other client got
    503. Here 6 addresses x 4 sessions against 20 in all: each opening past the total ends the
    oldest idle session of the client holding the most, and a new client is served."""
    with _serve("--max-sessions-per-client", "4", "--max-sessions", "20") as server:
        codes = []
        for i in range(6):
            async with _from(f"127.0.0.{10 + i}", headers=AUTH) as hoarder:
                codes += [(await hoarder.post(server.url, json=INITIALIZE, headers=HEADERS)).status_code for _ in range(4)]
        assert codes == [200] * 24
        assert "wd:Q9883" in await _served(server.url, "127.0.0.30")
        # When every session is busy (an open GET stream each), a new one is refused: 503, not a wait.
    with _serve("--max-sessions-per-client", "2", "--max-sessions", "2") as server:
        async with _from("127.0.0.2", headers=AUTH) as a, _from("127.0.0.3", headers=AUTH) as b:
            streams = []
            try:
                for client in (a, b):
                    sid = (await client.post(server.url, json=INITIALIZE, headers=HEADERS)).headers["mcp-session-id"]
                    headers = AUTH | {"Accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": "2025-06-18"}
                    stream = client.stream("GET", server.url, headers=headers)
                    assert (await stream.__aenter__()).status_code == 200
                    streams.append(stream)
                async with _from("127.0.0.4", headers=AUTH) as late:
                    refused = await late.post(server.url, json=INITIALIZE, headers=HEADERS)
                assert refused.status_code == 503 and "all busy" in refused.json()["error"]["message"]
            finally:
                for stream in streams:
                    await stream.__aexit__(None, None, None)
    assert _log_lines(server, "Traceback") == 0


def _stalled_readers(port: int, address: str, count: int, session: str) -> list[socket.socket]:
    """Connections that pipeline requests for a 21 KB resource and never read a byte of the answers."""
    body = b'{"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "kg://output-schemas"}}'
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nAuthorization: Bearer {TOKEN}\r\nmcp-session-id: {session}\r\n"
        f"mcp-protocol-version: 2025-06-18\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    sockets = []
    for _ in range(count):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window: the answers back up at once
        s.bind((address, 0))
        s.connect(("127.0.0.1", port))
        s.setblocking(False)
        try:
            for _ in range(200):
                s.send(head + body)
        except BlockingIOError:  # the server has stopped reading from it: its answers are not taken
            pass
        sockets.append(s)
    return sockets


async def test_connections_that_do_not_read_their_response_are_closed_after_the_write_timeout():
    """Repro 7: connections that never read their answers were held for ever and filled the caps.
    Here they are closed once they take nothing for --write-timeout, and the place is free again."""
    with _serve("--write-timeout", "1", "--max-connections-per-client", "4") as server:
        port = int(server.base.rsplit(":", 1)[1])
        async with httpx2.AsyncClient(timeout=30, headers=AUTH) as http:
            session = (await http.post(server.url, json=INITIALIZE, headers=HEADERS)).headers["mcp-session-id"]
        sockets = _stalled_readers(port, "127.0.0.2", 4, session)
        try:
            # The same address, at its cap of 4 while they are held, is served once they are closed.
            assert "wd:Q9883" in await _served_eventually(server.url, "127.0.0.2")
        finally:
            _close_all(sockets)
    assert _log_lines(server, "it took none of its response for 1 s") >= 1
    assert _log_lines(server, "Traceback") == 0


async def test_request_bodies_are_capped_before_they_are_read_and_batches_are_bounded():
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "search", "arguments": {"entity": "wd:Q5582"}}}
    many = {f"k{i}": 0 for i in range(300_000)}  # repro 9: a call of a few MB, almost all unknown keys
    with _serve() as server:
        async with httpx2.AsyncClient(timeout=60, headers=AUTH) as http:
            opened = await http.post(server.url, json=INITIALIZE, headers=HEADERS)
            session = HEADERS | {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
            call["params"]["arguments"].update(many)
            big = await http.post(server.url, json=call, headers=session)
            assert big.status_code == 413, big.text[:300]
            error = big.json()["error"]
            assert error["code"] == -32600 and "at most 262,144 bytes" in error["message"]

            async def chunks():  # no Content-Length: refused once the bytes read pass the cap
                for _ in range(100):
                    yield b" " * 8192

            chunked = await http.post(server.url, content=chunks(), headers=session)
            assert chunked.status_code == 413
            batch = [{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(1000)]
            batched = await http.post(server.url, json=batch, headers=session)
            assert batched.status_code == 400 and batched.json()["error"]["code"] == -32600
            assert "at most 16 messages, not 1,000" in batched.json()["error"]["message"]
            served = await http.post(server.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=session)
            assert served.status_code == 200 and "find_entities" in served.text
    # The cap is a setting: raised, the same call reaches the argument check, which names a few
    # unknown keys and counts the rest (it stops scanning after the first ones).
    with _serve("--max-body", "8000000") as server:
        async with httpx2.AsyncClient(timeout=60, headers=AUTH) as http:
            opened = await http.post(server.url, json=INITIALIZE, headers=HEADERS)
            session = HEADERS | {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
            answer = await http.post(server.url, json=call, headers=session)
            text = answer.text
    assert answer.status_code == 200 and "unknown arguments 'k0', 'k1'" in text and "and 299,980 more" in text, text[:400]


async def test_x_forwarded_for_is_honoured_only_from_trusted_proxies():
    async def passed(server, forwarded_for) -> list[int]:
        async with _from("127.0.0.1") as http:
            codes = []
            for i in range(10):
                headers = HEADERS | {"X-Forwarded-For": forwarded_for(i)}
                codes.append((await http.post(server.url, json=INITIALIZE, headers=headers)).status_code)
            return codes

    with _serve("--rate-limit", "5") as server:  # no trusted proxy: the peer is the client
        codes = await passed(server, lambda i: f"10.9.{i}.1")
        # At most 5 pass (the start-up probe from 127.0.0.1 may have spent one), whatever the header says.
        assert set(codes[:4]) == {401} and codes[5:] == [429] * 5, codes
    with _serve("--rate-limit", "5", "--trusted-proxy", "127.0.0.1") as server:
        assert await passed(server, lambda i: f"10.9.{i}.1") == [401] * 10  # ten clients behind the proxy
        assert await passed(server, lambda i: "10.9.200.1") == [401] * 5 + [429] * 5  # one client, limited


HOSTILE_ORIGINS = [
    "http://127.0.0.1:1@evil.com",
    "http://127.0.0.1:80@evil.com:80",
    "http://user:secret@127.0.0.1:8000",
    "http://evil.com",
    "https://127.0.0.1.evil.com:8000",
    "http://127.0.0.1:8000.evil.com",
    "http://127.0.0.1:8000/page",
    "http://127.0.0.1:8000?x=1",
    "http://localhost:3000#x",
    "ftp://127.0.0.1:21",
    "null",
    "http://127.0.0.1:99999",
    "http://127.0.0.1:-1",
    "http://127.0.0.1:08000",
    "http://[::1]@evil.com",
    "http://127.0.0.2:8000",
    "https://127.0.0.1:8000",
]
LOOPBACK_ORIGINS = ["http://127.0.0.1:5173", "http://localhost:3000", "http://LOCALHOST:3000", "http://[::1]:8080", "http://127.0.0.1"]
HOSTILE_HOSTS = ["127.0.0.1:1@evil.com", "evil.com", "127.0.0.1.evil.com:80", "127.0.0.1:80/x", "localhost:80 x", "127.0.0.1:*"]


async def test_origin_and_host_are_parsed_not_prefix_matched():
    with _serve() as server:
        async with httpx2.AsyncClient(timeout=30, headers=AUTH) as http:
            for origin in HOSTILE_ORIGINS:
                refused = await http.post(server.url, json=INITIALIZE, headers=HEADERS | {"Origin": origin})
                assert refused.status_code == 403, (origin, refused.text)
                assert refused.json()["error"] == "forbidden_origin"
            for origin in LOOPBACK_ORIGINS:
                served = await http.post(server.url, json=INITIALIZE, headers=HEADERS | {"Origin": origin})
                assert served.status_code == 200, (origin, served.text)
            for host in HOSTILE_HOSTS:
                refused = await http.post(server.url, json=INITIALIZE, headers=HEADERS | {"Host": host})
                assert refused.status_code == 421, (host, refused.text)
            for host in ["localhost:8000", "127.0.0.1", "[::1]:9"]:
                served = await http.post(server.url, json=INITIALIZE, headers=HEADERS | {"Host": host})
                assert served.status_code == 200, (host, served.text)
    out, err = server.output()
    assert out == "" and "Traceback" not in err


async def test_requests_with_invalid_ids_get_a_json_rpc_error():
    with _serve() as server:
        async with httpx2.AsyncClient(timeout=30, headers=AUTH) as http:
            opened = await http.post(server.url, json=INITIALIZE, headers=HEADERS)
            session = HEADERS | {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
            for bad_id, kind in [({"x": 1}, "an object"), ([1], "an array"), (True, "a boolean"), (1.5, "a fraction"), (None, "null")]:
                for headers in (HEADERS, session):  # before a session and within one
                    call = {"jsonrpc": "2.0", "id": bad_id, "method": "tools/list"}
                    answer = await http.post(server.url, json=call, headers=headers)
                    assert answer.status_code == 400, (bad_id, answer.text)
                    body = answer.json()
                    assert body["jsonrpc"] == "2.0" and body["id"] is None and body["error"]["code"] == -32600
                    assert kind in body["error"]["message"] and "string or an integer" in body["error"]["message"]
            # Good ids and notifications are untouched.
            listed = await http.post(server.url, json={"jsonrpc": "2.0", "id": "call-1", "method": "tools/list"}, headers=session)
            assert listed.status_code == 200 and "find_entities" in listed.text
            note = await http.post(server.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            assert note.status_code == 202
        # Without the token, nothing is read: 401 whatever the id.
        async with httpx2.AsyncClient(timeout=30) as anonymous:
            answer = await anonymous.post(server.url, json={"jsonrpc": "2.0", "id": {"x": 1}, "method": "tools/list"}, headers=HEADERS)
            assert answer.status_code == 401


async def test_sse_messages_with_invalid_ids_get_a_json_rpc_error():
    with kg_mcp_server("--auth-token-env", "KGTOK", env=ENV, transport="sse") as server:
        async with httpx2.AsyncClient(timeout=30, headers=AUTH) as http:
            url = server.base + "/messages/?session_id=0123456789abcdef0123456789abcdef"
            answer = await http.post(url, json={"jsonrpc": "2.0", "id": {"x": 1}, "method": "tools/list"})
            assert answer.status_code == 400 and answer.json()["error"]["code"] == -32600
            unknown = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert unknown.status_code == 404  # a good id reaches the SDK (no such session)
            evil = await http.get(server.base + "/sse", headers={"Origin": "http://127.0.0.1:1@evil.com"})
            assert evil.status_code == 403


def test_repeated_log_lines_collapse_to_one_per_kind_per_interval():
    import logging

    from kg_mcp.serving.log_repeats import RepeatedLogFilter

    now = [0.0]
    repeats = RepeatedLogFilter(interval_s=10, clock=lambda: now[0])

    def record(msg, *args, name="asyncio", level=logging.ERROR):
        return logging.LogRecord(name, level, __file__, 1, msg, args, None)

    passed = [repeats.filter(record("socket.accept() out of system resource")) for _ in range(1000)]
    assert passed.count(True) == 1
    # The same shape with other numbers or addresses is the same kind; another logger or text is not.
    assert repeats.filter(record("connection refused: %s holds %d", "127.0.0.2", 256))
    assert not repeats.filter(record("connection refused: %s holds %d", "127.0.0.9", 7))
    assert repeats.filter(record("connection refused: %s holds %d", "127.0.0.9", 7, name="kg_mcp"))
    assert repeats.filter(record("Session 0123456789abcdef crashed"))
    assert not repeats.filter(record("Session fedcba9876543210 crashed"))
    now[0] = 10.5  # the next interval: one line, with the count held back
    later = record("socket.accept() out of system resource")
    assert repeats.filter(later) and "999 more like it" in later.getMessage()


def test_origin_and_host_parsing():
    from kg_mcp.serving.guards import parse_host, parse_origin

    assert parse_origin("http://127.0.0.1:8000") == ("http", "127.0.0.1", 8000)
    assert parse_origin("HTTPS://Example.org") == ("https", "example.org", 443)
    assert parse_origin("http://[::1]:*", pattern=True) == ("http", "[::1]", None)
    for odd in ["http://127.0.0.1:1@evil.com", "http://a@127.0.0.1", "http://127.0.0.1:*", "http://127.0.0.1:8000/", "null", "", " http://x"]:
        assert parse_origin(odd) is None, odd
    assert parse_host("localhost:8000") == ("http", "localhost", 8000)
    for odd in ["127.0.0.1:1@evil.com", "a b", "127.0.0.1:65536", "127.0.0.1:", "-bad.example"]:
        assert parse_host(odd) is None, odd
