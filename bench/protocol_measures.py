"""Measures over the MCP transports: a tool call over stdio, and throughput over streamable HTTP."""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
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


async def _alternate(
    servers: dict[str, tuple[str, str, Callable[[int], dict]]], clients: int, seconds: float, windows: int
) -> tuple[dict[str, tuple[int, int, list[float]]], list[float]]:
    """`clients` open sessions per server, kept across windows; in each window one server is
    called by all its clients until the window ends, the servers taking turns (ABBA order).
    Returns per server (calls, errors, latencies), and the ours/trivial call ratio per window pair."""
    totals: dict[str, tuple[int, int, list[float]]] = {name: (0, 0, []) for name in servers}
    async with AsyncExitStack() as stack:
        sessions = {
            name: [
                await stack.enter_async_context(Client(streamable_http_client(url, http_client=httpx2.AsyncClient(timeout=60))))
                for _ in range(clients)
            ]
            for name, (url, _, _) in servers.items()
        }

        async def window(name: str, length: float) -> int:
            _, tool, arguments = servers[name]
            calls, errors, latencies = 0, 0, []
            deadline = time.monotonic() + length

            async def one_client(k: int, client: Client) -> None:
                nonlocal calls, errors
                i = k
                while time.monotonic() < deadline:
                    started = time.perf_counter()
                    try:
                        if (await client.call_tool(tool, arguments(i))).is_error:
                            errors += 1
                    except Exception:  # any failure counts; the run goes on
                        errors += 1
                    latencies.append(time.perf_counter() - started)
                    calls += 1
                    i += clients

            await asyncio.gather(*(one_client(k, c) for k, c in enumerate(sessions[name])))
            before = totals[name]
            totals[name] = (before[0] + calls, before[1] + errors, before[2] + latencies)
            return calls

        for name, (_, tool, arguments) in servers.items():  # one call per session first: all warm
            await asyncio.gather(*(c.call_tool(tool, arguments(k)) for k, c in enumerate(sessions[name])))
        ratios = []
        for pair in range(windows // 2):
            order = ("trivial", "ours") if pair % 2 == 0 else ("ours", "trivial")
            counts = {name: await window(name, seconds / windows * 2) for name in order}
            ratios.append(counts["ours"] / max(counts["trivial"], 1))
    return totals, ratios


def http_throughput(work: Path, clients: int, seconds: float, windows: int = 6) -> list[Row]:
    """Target 6: `clients` concurrent clients calling `search` over streamable HTTP, against the SDK's
    trivial tool under the same load: both servers up at once and called in alternating windows
    (`seconds` in all each), so a noisy neighbour on the shared machine weighs on both alike."""
    store = metaqa_store(work)
    ids = _film_ids(500)
    commands = {
        "trivial": ([sys.executable, TRIVIAL, "http", "{port}"], "ping", lambda i: {}),
        "ours": (kg_mcp("serve", "--store", str(store), "--transport", "http", "--port", "{port}"), "search", lambda i: {"entity": ids[i % len(ids)]}),
    }
    servers, processes = {}, []
    try:
        for name, (command, tool, arguments) in commands.items():
            port = free_port()
            processes.append(start([part.format(port=port) for part in command]))
            wait_http(f"http://127.0.0.1:{port}/")
            servers[name] = (f"http://127.0.0.1:{port}/mcp", tool, arguments)
        totals, ratios = asyncio.run(_alternate(servers, clients, seconds, windows))
    finally:
        for process in processes:
            stop(process)
    (n_ours, err_ours, lat_ours), (n_base, err_base, lat_base) = totals["ours"], totals["trivial"]
    note = (
        f"{clients} clients, {seconds:g} s each in {len(ratios)} alternating window pairs (ratio per pair "
        f"{min(ratios):.2f}-{max(ratios):.2f}); errors ours {err_ours}, trivial {err_base}; latency p50/p99 ours "
        f"{percentile(lat_ours, 0.5) * 1e3:.1f}/{percentile(lat_ours, 0.99) * 1e3:.1f} ms, trivial "
        f"{percentile(lat_base, 0.5) * 1e3:.1f}/{percentile(lat_base, 0.99) * 1e3:.1f} ms"
    )
    row = Row("HTTP: search calls/s vs trivial tool", n_ours / seconds, n_base / seconds, "c/s", ">= 0.8", note)
    if err_ours:
        row.note += "  ERRORS: the goal needs zero"
        row.goal = ">= inf"
    return [row]
