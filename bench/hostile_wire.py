"""bench/hostile.py's attacks of issue 31 on the HTTP layer: connections that never read their
response, idle sessions from many addresses, huge bodies (unknown argument keys, a batch of pings,
empty claims). Each on a fresh server over the MetaQA store, with a bystander from another address.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import time
from pathlib import Path

import httpx2

from bench.common import Row
from bench.hostile_rig import (
    AUTH,
    HEADERS,
    TOKEN,
    LightClient,
    RawSession,
    Served,
    bystander_rows,
    during_attack,
    initialize,
    load,
    looped,
    open_sessions,
)
from bench.hostile_network import _new_client_s

BYSTANDER = "127.0.0.2"


# A read of the 21 KB resource kg://output-schemas in the stateless protocol (2026-07-28): no session.
_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
         "io.modelcontextprotocol/clientInfo": {"name": "hostile-bench", "version": "1"}}


def stalled_readers(port: int, address: str, count: int, requests: int = 150) -> tuple[list[socket.socket], int]:
    """`count` connections from `address` that pipeline `requests` reads of a 21 KB resource (more
    than the kernel's buffers take) and never read a byte of the answers; (the sockets, how many
    failed to connect)."""

    def request(number: int) -> bytes:
        body = json.dumps({"jsonrpc": "2.0", "id": number, "method": "resources/read",
                           "params": {"uri": "kg://output-schemas", "_meta": _META}})
        return (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"mcp-protocol-version: 2026-07-28\r\nmcp-method: resources/read\r\nmcp-name: kg://output-schemas\r\n"
            f"Content-Length: {len(body)}\r\n\r\n{body}"
        ).encode()

    pipelined = b"".join(request(i) for i in range(requests))
    sockets, failed = [], 0
    for _ in range(count):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            s.bind((address, 0))
            s.connect(("127.0.0.1", port))
            s.setblocking(False)
            s.send(pipelined)  # as much as the server takes before it stops reading
        except BlockingIOError:
            pass
        except OSError:
            failed += 1
            s.close()
            continue
        sockets.append(s)
    return sockets, failed


def nonreading(store: Path, work: Path, size: dict) -> list[Row]:
    """Repro 7: 3 addresses x `per_client` connections that never read their response, against
    --max-connections 3 x per_client less a few; then a new client from a 4th address, and later."""
    per = size["nonreading_per_client"]
    cap = 3 * per - 10
    with Served(store, work, "--max-connections", str(cap), "--max-connections-per-client", str(per)) as server:
        base = statistics.median(_new_client_s(server.url, 30, "127.0.0.9") for _ in range(3))
        fds = _fds(server.pid)
        sockets, failed = [], 0
        try:
            for address in ("127.0.0.3", "127.0.0.4", "127.0.0.5"):
                opened, lost = stalled_readers(server.port, address, per)
                sockets += opened
                failed += lost
            time.sleep(1)
            during = [_new_client_s(server.url, 30, "127.0.0.9") for _ in range(3)]
            refused = sum(t >= 30 for t in during)
            held = _fds(server.pid) - fds
            time.sleep(size["window_s"] + 15)  # the write timeout (30 s) and its check
            later = _new_client_s(server.url, 30, "127.0.0.3")  # an attacker's own address, after the write timeout
            still = _fds(server.pid) - fds  # the server's side: what it still holds of them
        finally:
            for s in sockets:
                s.close()
    note = (f"{len(sockets)} stalled connections ({failed} refused at connect, {held} held by the server) against "
            f"--max-connections {cap}; "
            f"a new client {', '.join(f'{t:.2f}' for t in during)} s (30: refused or timed out); from an attacker's "
            f"address {size['window_s'] + 15:.0f} s later {later:.2f} s; the server holds {still} more descriptors than "
            f"before the attack then; {load()}")
    return [
        Row(f"nonreading 3x{per}: new client's initialize+call", statistics.median(during) * 1e3, base * 1e3, "ms", "<= 20", note),
        Row("nonreading: new client refused", refused, len(during), "clients", "<= 0"),
        Row(f"nonreading: stalled still held after {size['window_s'] + 15:.0f} s", still, max(held, 1), "fds", "<= 0.05"),
    ]


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def addresses(store: Path, work: Path, size: dict) -> list[Row]:
    """Repro 8: 16 addresses x 64 sessions, opened and never closed (1,024: over the 1,000 in all);
    then a client from a 17th address initializes."""
    with Served(store, work) as server:
        async def initializes(address: str, count: int) -> tuple[list[int], list[float]]:
            codes, times = [], []
            async with httpx2.AsyncClient(timeout=60, transport=httpx2.AsyncHTTPTransport(local_address=address)) as http:
                for _ in range(count):
                    started = time.perf_counter()
                    codes.append((await http.post(server.url, json=initialize(), headers=HEADERS | AUTH)).status_code)
                    times.append(time.perf_counter() - started)
            return codes, times

        _, base_times = await initializes("127.0.0.30", 3)
        rss, started = server.rss_mb(), time.monotonic()
        flood = await asyncio.gather(*(initializes(f"127.0.0.{10 + i}", 64) for i in range(16)))
        seconds = time.monotonic() - started
        codes, times = await initializes("127.0.0.31", 5)
        rss_after = server.rss_mb()
    opened = sum(c == 200 for f, _ in flood for c in f)
    note = (f"flood: {opened}/1024 sessions opened in {seconds:.0f} s; the new client's codes {codes}; RSS {rss:.0f} -> "
            f"{rss_after:.0f} MB; {load()}")
    return [
        Row("addresses 16x64 sessions: new client refused", sum(c != 200 for c in codes), len(codes), "calls", "<= 0", note),
        Row("addresses: new client's initialize", statistics.median(times) * 1e3, statistics.median(base_times) * 1e3, "ms", "<= 3"),
    ]


def _compact(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _unknown_keys_call(count: int) -> bytes:
    """A tools/call under the SDK's 4 MiB cap with `count` unknown argument keys."""
    arguments = {"entity": "kg:Catch_Me_If_You_Can"} | {f"{i:x}": 0 for i in range(count)}
    return _compact({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "get_relations", "arguments": arguments}})


def _ping_batch(count: int) -> bytes:
    return _compact([{"jsonrpc": "2.0", "id": i, "method": "ping"} for i in range(count)])


def _empty_claims(count: int) -> bytes:
    return b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"verify","arguments":{"claims":[' + b",".join(
        [b"{}"] * count) + b"]}}}"


async def _flood_bodies(store: Path, work: Path, size: dict, name: str, body: bytes, clients: int) -> list[Row]:
    with Served(store, work) as server:
        async with httpx2.AsyncClient(timeout=120) as http, LightClient(server.url, 90, BYSTANDER) as light:
            base, _ = await light.run(size["light"])
            sessions = await open_sessions(http, server.url, clients)
            statuses: list[int] = []

            async def post(session: RawSession) -> None:
                response = await http.post(server.url, content=body, headers=session.headers())
                statuses.append(response.status_code)

            rss, cpu = server.rss_mb(), server.cpu_s()
            during, failures, posted = await during_attack(
                light, size["share_s"], *(looped(lambda s=s: post(s)) for s in sessions)
            )
            posts = sum(posted)
            cpu, rss_after = server.cpu_s() - cpu, server.rss_mb()
    note = (f"{posts} bodies of {len(body) / 1e6:.1f} MB by {clients} clients in {size['share_s']:.0f} s, answered "
            f"{sorted(set(statuses))}; server CPU {cpu:.1f} s ({cpu / max(posts, 1) * 1e3:.0f} ms a body); RSS {rss:.0f} -> "
            f"{rss_after:.0f} MB; {load()}")
    return bystander_rows(name, during, failures, base) + [
        Row(f"{name}: server RSS after", rss_after, rss, "MB", "<= 1.5", note)
    ]


async def bodies(store: Path, work: Path, size: dict) -> list[Row]:
    """Repro 9: 4 clients posting a 4 MB tools/call with 340k unknown argument keys in a loop; an
    80,000-ping batch; 1.3M empty claims. A bystander through each."""
    rows = await _flood_bodies(store, work, size, "4 MB call of 340k unknown keys x4", _unknown_keys_call(340_000), 4)
    rows += await _flood_bodies(store, work, size, "80k-ping batch x1", _ping_batch(80_000), 1)
    rows += await _flood_bodies(store, work, size, "1.3M empty claims x1", _empty_claims(1_300_000), 1)
    return rows
