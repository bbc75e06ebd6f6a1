"""Measures over the MCP transports: a tool call over stdio, and throughput over streamable HTTP."""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import sys
import time
from pathlib import Path

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from bench.common import REPO, Row, free_port, kg_mcp, percentile, start, stop, wait_http
from bench.store_measures import metaqa_store
from kg_mcp.loading import mint_local_name

TRIVIAL = str(REPO / "bench" / "trivial_server.py")


def _film_ids(n: int) -> list[str]:
    from bench.common import DATA

    films = sorted({line.split("|")[0] for line in (DATA / "metaqa" / "kb.txt").open() if "|directed_by|" in line})
    return ["kg:" + mint_local_name(f) for f in random.Random(11).sample(films, n)]


def stdio_roundtrip(work: Path, calls: int) -> list[Row]:
    """Target 2b: `search` over stdio against the SDK's trivial tool over stdio (paired, alternating)."""
    store = metaqa_store(work)
    ids = _film_ids(calls)
    ours = StdioServerParameters(command=sys.executable, args=["-m", "kg_mcp", "serve", "--store", str(store)], env=dict(os.environ))
    trivial = StdioServerParameters(command=sys.executable, args=[TRIVIAL, "stdio"], env=dict(os.environ))

    async def run() -> tuple[float, float]:
        async with Client(ours) as kg, Client(trivial) as base:
            for entity in ids[:10]:
                await kg.call_tool("search", {"entity": entity})
                await base.call_tool("ping", {})
            xs, ys = [], []
            for entity in ids:
                started = time.perf_counter()
                await base.call_tool("ping", {})
                middle = time.perf_counter()
                result = await kg.call_tool("search", {"entity": entity})
                ended = time.perf_counter()
                assert not result.is_error, result.content
                xs.append(middle - started)
                ys.append(ended - middle)
            return statistics.median(xs), statistics.median(ys)

    base, ours_s = asyncio.run(run())
    return [Row("stdio: search call vs SDK trivial tool", ours_s * 1e3, base * 1e3, "ms", "<= 1.3", "round trip through the SDK client")]


async def _hammer(url: str, tool: str, arguments, clients: int, seconds: float) -> tuple[int, int, list[float]]:
    latencies: list[float] = []
    errors = 0
    deadline = time.monotonic() + seconds

    async def one_client(k: int) -> None:
        nonlocal errors
        async with Client(streamable_http_client(url, http_client=httpx2.AsyncClient(timeout=60))) as client:
            i = k
            while time.monotonic() < deadline:
                started = time.perf_counter()
                try:
                    result = await client.call_tool(tool, arguments(i))
                    if result.is_error:
                        errors += 1
                except Exception:  # any failure counts; the run goes on
                    errors += 1
                latencies.append(time.perf_counter() - started)
                i += clients

    await asyncio.gather(*(one_client(k) for k in range(clients)))
    return len(latencies), errors, latencies


def http_throughput(work: Path, clients: int, seconds: float) -> list[Row]:
    """Target 6: `clients` concurrent clients calling `search` over streamable HTTP for `seconds`,
    against the SDK's trivial tool under the same load."""
    store = metaqa_store(work)
    ids = _film_ids(500)
    results = {}
    for name, command, tool, arguments in (
        ("trivial", [sys.executable, TRIVIAL, "http", "{port}"], "ping", lambda i: {}),
        ("ours", kg_mcp("serve", "--store", str(store), "--transport", "http", "--port", "{port}"), "search", lambda i: {"entity": ids[i % len(ids)]}),
    ):
        port = free_port()
        server = start([part.format(port=port) for part in command])
        try:
            wait_http(f"http://127.0.0.1:{port}/")
            results[name] = asyncio.run(_hammer(f"http://127.0.0.1:{port}/mcp", tool, arguments, clients, seconds))
        finally:
            stop(server)
    (n_ours, err_ours, lat_ours), (n_base, err_base, lat_base) = results["ours"], results["trivial"]
    note = (
        f"{clients} clients, {seconds:g} s each; errors ours {err_ours}, trivial {err_base}; latency p50/p99 ours "
        f"{percentile(lat_ours, 0.5) * 1e3:.1f}/{percentile(lat_ours, 0.99) * 1e3:.1f} ms, trivial "
        f"{percentile(lat_base, 0.5) * 1e3:.1f}/{percentile(lat_base, 0.99) * 1e3:.1f} ms"
    )
    row = Row("HTTP: search calls/s vs trivial tool", n_ours / seconds, n_base / seconds, "c/s", ">= 0.8", note)
    if err_ours:
        row.note += "  ERRORS: the goal needs zero"
        row.goal = ">= inf"
    return [row]
