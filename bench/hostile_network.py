"""bench/hostile.py's attacks on connections and the protocol: half-open connections, a flood of
sessions, and small ones (X-Forwarded-For, Origin with userinfo, an object id, a 3 MB tool name)."""

from __future__ import annotations

import asyncio
import socket
import statistics
import time
from pathlib import Path

import httpx2

from bench.common import Row
from bench.hostile_rig import AUTH, HEADERS, LIGHT, RawSession, Served, initialize, load, result_text

HOSTILE_ORIGINS = [
    "http://127.0.0.1:1@evil.com",
    "http://localhost@evil.com",
    "http://127.0.0.1:80@evil.com:80",
]


def _new_client_s(url: str, timeout: float, address: str = "127.0.0.2") -> float:
    """Seconds for a client at `address` to initialize and make a light call (the timeout if it cannot)."""

    async def go() -> float:
        transport = httpx2.AsyncHTTPTransport(local_address=address)
        async with httpx2.AsyncClient(timeout=timeout, transport=transport) as http:
            started = time.perf_counter()
            session = RawSession(http, url)
            await session.open()
            await session.call(*LIGHT[0])
            return time.perf_counter() - started

    try:
        return asyncio.run(asyncio.wait_for(go(), timeout))
    except Exception:  # noqa: BLE001 - locked out: counts as the whole timeout
        return timeout


def halfopen(store: Path, work: Path, size: dict) -> list[Row]:
    """`sockets` connections from 127.0.0.1 that send half a request and stay, without a token; the
    new client comes from 127.0.0.2 (another user), and from 127.0.0.1 too (the note)."""
    n, window = size["sockets"], size["window_s"]
    with Served(store, work) as server:
        base = statistics.median(_new_client_s(server.url, 60) for _ in range(3))
        base_log = server.log_bytes()
        log, sockets, refused = server.log_bytes(), [], 0
        partial = f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: appl".encode()
        try:
            for _ in range(n):
                try:
                    s = socket.create_connection(("127.0.0.1", server.port), timeout=3)
                    s.sendall(partial)
                    sockets.append(s)
                except OSError:
                    refused += 1
            during = _new_client_s(server.url, 60)
            same_address = _new_client_s(server.url, 15, "127.0.0.1")
            time.sleep(max(0.0, window - during - same_address))
            log_growth = server.log_bytes() - log
            still_open = sum(_still_open(s) for s in sockets)
        finally:
            for s in sockets:
                s.close()
        time.sleep(2)
        after = _new_client_s(server.url, 60)
        tail = server.log_tail(160).replace("\n", " | ")
    note = (
        f"{len(sockets)} opened ({refused} failed to connect); a new client on their address {same_address:.2f} s "
        f"(15 s: timed out); after closing them {after:.2f} s; log tail {tail!r}; {load()}"
    )
    return [
        Row(f"halfopen x{n}: new client's initialize+call", during * 1e3, base * 1e3, "ms", "<= 20", note),
        Row(
            f"halfopen: log growth in {window:.0f} s",
            log_growth,
            max(base_log, 1),
            "B",
            "<= 10",
            "baseline: the log of start-up and baseline calls",
        ),
        Row(f"halfopen: connections still open after {window:.0f} s", still_open, n, "conns", "<= 0.05"),
    ]


def _still_open(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1) is None  # data: the server answered (and closes); b"": closed
    except BlockingIOError:
        return True
    except OSError:
        return False


async def sessions(store: Path, work: Path, size: dict) -> list[Row]:
    """One client opens `sessions` sessions with the token and never closes them; another then initializes."""
    m = size["sessions"]
    with Served(store, work) as server:
        other = httpx2.AsyncClient(timeout=60, transport=httpx2.AsyncHTTPTransport(local_address="127.0.0.2"))
        async with other, httpx2.AsyncClient(timeout=60, limits=httpx2.Limits(max_connections=8)) as flood:

            async def initializes(count: int) -> tuple[list[int], list[float]]:
                codes, times = [], []
                for _ in range(count):
                    started = time.perf_counter()
                    codes.append(
                        (await other.post(server.url, json=initialize(), headers=HEADERS | AUTH)).status_code
                    )
                    times.append(time.perf_counter() - started)
                return codes, times

            base_codes, base_times = await initializes(3)
            rss, log, started = server.rss_mb(), server.log_bytes(), time.monotonic()
            semaphore = asyncio.Semaphore(8)

            async def one() -> int:
                async with semaphore:
                    return await RawSession(flood, server.url).open()

            codes = await asyncio.gather(*(one() for _ in range(m)))
            seconds = time.monotonic() - started
            after_codes, after_times = await initializes(5)
            rss_after, log_growth = server.rss_mb(), server.log_bytes() - log
    refused = sum(code != 200 for code in after_codes)
    note = (
        f"flood: {codes.count(200)}/{m} sessions opened in {seconds:.0f} s (other codes {sorted(set(codes) - {200})}); "
        f"other client's codes before {base_codes}, after {after_codes}; log +{log_growth:,} B; {load()}"
    )
    return [
        Row(f"sessions x{m}: other client refused", refused, len(after_codes), "calls", "<= 0", note),
        Row(
            "sessions: other client's initialize",
            statistics.median(after_times) * 1e3,
            statistics.median(base_times) * 1e3,
            "ms",
            "<= 3",
        ),
        Row(
            "sessions: server RSS",
            rss_after,
            rss,
            "MB",
            "<= 1.5",
            f"{(rss_after - rss) * 1024 / max(m, 1):.0f} KB a session",
        ),
    ]


async def small(store: Path, work: Path, size: dict) -> list[Row]:
    """X-Forwarded-For against --rate-limit 5, Origin with userinfo, an object id, a 3 MB tool name."""
    rows = []
    with Served(store, work, "--rate-limit", "5") as server:

        async def passes(address: str, spoof: bool) -> int:
            transport = httpx2.AsyncHTTPTransport(local_address=address)
            async with httpx2.AsyncClient(timeout=30, transport=transport) as http:
                codes = [
                    (
                        await http.post(
                            server.url,
                            json=initialize(),
                            headers=HEADERS | ({"X-Forwarded-For": f"10.9.{i}.1"} if spoof else {}),
                        )
                    ).status_code
                    for i in range(30)
                ]
            return sum(code != 429 for code in codes)

        honest, spoofed = await passes("127.0.0.2", False), await passes("127.0.0.1", True)
        rows.append(
            Row(
                "small: 30 requests past --rate-limit 5 (XFF)",
                spoofed,
                honest,
                "reqs",
                "<= 1",
                "baseline: 30 without X-Forwarded-For from another address",
            )
        )
    with Served(store, work) as server:
        async with httpx2.AsyncClient(timeout=60) as http:
            origin = {
                o: (
                    await http.post(server.url, json=initialize(), headers=HEADERS | AUTH | {"Origin": o})
                ).status_code
                for o in HOSTILE_ORIGINS
            }
            evil = (
                await http.post(
                    server.url, json=initialize(), headers=HEADERS | AUTH | {"Origin": "http://evil.com"}
                )
            ).status_code
            accepted = sum(code < 400 for code in origin.values())
            rows.append(
                Row(
                    "small: userinfo Origins accepted",
                    accepted,
                    len(origin),
                    "origins",
                    "<= 0",
                    f"{origin}; plain http://evil.com: {evil}",
                )
            )
            session = RawSession(http, server.url)
            await session.open()
            status, body = await session.post({"jsonrpc": "2.0", "id": {"x": 1}, "method": "tools/list"})
            rows.append(
                Row(
                    "small: object id answered 202 (silently dropped)",
                    status == 202,
                    1,
                    "",
                    "<= 0",
                    f"status {status}, body {body[:120]!r}",
                )
            )
            short = len(result_text(await session.call("no_such_tool", {})))
            long = result_text(await session.call("x" * 3_000_000, {}))
            rows.append(
                Row(
                    "small: error text for a 3 MB tool name",
                    len(long),
                    short,
                    "chars",
                    "<= 4",
                    f"baseline: a short unknown name; {long[:100]!r}",
                )
            )
    return rows
