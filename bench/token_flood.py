"""A flood of made-up opaque tokens at an MCP endpoint, from one loopback address (bench/hostile_tokens.py).

    python -m bench.token_flood PORT ADDRESS CONNECTIONS SECONDS

Opens CONNECTIONS keep-alive connections to 127.0.0.1:PORT from ADDRESS and sends, on each, one
initialize after another, each with a fresh random bearer token, for SECONDS; prints how they were
answered as JSON ({status: count}). The standard library only, so that starting it costs the
machine little beside what is measured.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import sys
import time
from collections import Counter

BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "1"}}}).encode()


def request(port: int) -> bytes:
    head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nAuthorization: Bearer {secrets.token_urlsafe(32)}\r\n"
            f"Content-Length: {len(BODY)}\r\n\r\n")
    return head.encode() + BODY


async def one_connection(port: int, address: str, ends: float, statuses: Counter) -> None:
    while time.monotonic() < ends:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0))
        except OSError:
            statuses["refused connection"] += 1
            await asyncio.sleep(0.05)
            continue
        try:
            while time.monotonic() < ends:
                writer.write(request(port))
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                statuses[head.split(b" ", 2)[1].decode()] += 1
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            statuses["closed"] += 1
        finally:
            writer.close()


async def flood(port: int, address: str, connections: int, seconds: float) -> Counter:
    statuses: Counter = Counter()
    ends = time.monotonic() + seconds
    await asyncio.gather(*(one_connection(port, address, ends, statuses) for _ in range(connections)))
    return statuses


if __name__ == "__main__":
    port, address, connections, seconds = sys.argv[1:5]
    print(json.dumps(asyncio.run(flood(int(port), address, int(connections), float(seconds)))))
