"""Soak: 16 concurrent MCP clients calling tools on one `kg-mcp serve --transport http`.

    python -m bench.soak                   10 minutes, 16 clients, the demo KG
    python -m bench.soak --minutes 1 --clients 32 --store mystore --json soak.json

Each client is the SDK's own streamable-HTTP client with a session of its own, calling a mix of
tools (some calls are meant to be tool errors: an unknown id) and starting a new session every
200 calls, as real clients come and go. Reported: calls, errors, p50/p99 latency, and the
server's resident memory and open file descriptors (from /proc/PID/status and /proc/PID/fd) at
the start (after warm-up), the middle and the end. Checks: zero errors (a call that raised, or
whose outcome was not the expected one), memory within 10% of the post-warm-up level, and file
descriptors flat (within a small slack for connections being opened and closed). Exit status 1
when a check fails. Loopback only; the run stops by itself after --minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from fault_proxy import kg_mcp_server, open_fds, rss_kib  # noqa: E402

# (tool, arguments, expect an error) on the demo KG.
CALLS = [
    ("find_entities", {"name": "Vincent van Gogh"}, False),
    ("search", {"entity": "wd:Q5582", "properties_to_filter_for": ["place of birth"]}, False),
    ("search", {"entity": "wd:Q5582"}, False),
    ("search", {"entity": "wd:Q1028181", "direction": "incoming"}, False),  # the hub: property view
    ("get_relations", {"entity": "wd:Q9883"}, False),
    ("explore_kg", {"entity": "wd:Q9883", "relations": ["wdt:P17", "~wdt:P19"]}, False),
    (
        "verify",
        {
            "claims": [
                {"path": [
                    {"subject": "Vincent van Gogh", "relation": "place of birth", "object": "Zundert"},
                    {"subject": "wd:Q9883", "relation": "country", "object": "Netherlands"},
                ]},
                {"subject": "wd:Q55", "relation": "capital", "object": "Rotterdam"},
            ]
        },
        False,
    ),
    ("find_entities", {"name": "Amst", "limit": 5}, False),
    ("search", {"entity": "wd:Q999999999"}, True),  # unknown: a tool error, as meant
    ("explore_kg", {"entity": "wd:Q5582", "relations": ["no such relation"]}, True),
]
SESSION_CALLS = 200  # a new session after this many calls
CALL_TIMEOUT_S = 60  # one call hanging longer counts as an error (and the run goes on)


@dataclass
class Sample:
    at: float
    label: str
    rss_kib: int
    fds: int


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    tool_errors: int = 0
    sessions: int = 0


async def _client(url: str, index: int, deadline: float, tally: Tally) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    i = index  # clients start at different places in the mix
    while time.monotonic() < deadline:
        try:
            async with httpx2.AsyncClient(timeout=CALL_TIMEOUT_S) as http, Client(
                streamable_http_client(url, http_client=http)
            ) as client:
                tally.sessions += 1
                for _ in range(SESSION_CALLS):
                    if time.monotonic() >= deadline:
                        break
                    tool, args, expect_error = CALLS[i % len(CALLS)]
                    i += 1
                    started = time.perf_counter()
                    try:
                        result = await asyncio.wait_for(client.call_tool(tool, args), CALL_TIMEOUT_S)
                    except Exception as e:  # noqa: BLE001 - every failure is counted and reported
                        tally.errors.append(f"{tool}: {type(e).__name__}: {e}"[:300])
                        continue
                    tally.latencies.append(time.perf_counter() - started)
                    if result.is_error != expect_error:
                        tally.errors.append(f"{tool} {args}: is_error={result.is_error}: {result.content[0].text[:200]}")
                    tally.tool_errors += result.is_error
        except Exception as e:  # noqa: BLE001 - a session that failed to open or close
            tally.errors.append(f"session: {type(e).__name__}: {e}"[:300])
            await asyncio.sleep(0.5)


async def soak(url: str, pid: int, *, seconds: float, clients: int, warmup_s: float, sample_every_s: float = 5.0) -> dict:
    tally = Tally()
    started = time.monotonic()
    deadline = started + seconds
    samples: list[Sample] = [Sample(0.0, "boot", rss_kib(pid), open_fds(pid))]

    async def sampler():
        warm_at, middle_at = started + warmup_s, started + warmup_s + (seconds - warmup_s) / 2
        marks = {"start": warm_at, "middle": middle_at}
        while time.monotonic() < deadline:
            await asyncio.sleep(min(sample_every_s, max(0.05, deadline - time.monotonic())))
            now = time.monotonic()
            label = ""
            for name, at in list(marks.items()):
                if now >= at:
                    label = name
                    del marks[name]
            samples.append(Sample(round(now - started, 1), label, rss_kib(pid), open_fds(pid)))

    await asyncio.gather(sampler(), *(_client(url, i, deadline, tally) for i in range(clients)))
    await asyncio.sleep(2.0)  # let the server close the connections the clients closed
    samples.append(Sample(round(time.monotonic() - started, 1), "end", rss_kib(pid), open_fds(pid)))
    return _report(tally, samples, seconds, clients, warmup_s)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _report(tally: Tally, samples: list[Sample], seconds: float, clients: int, warmup_s: float) -> dict:
    by_label = {s.label: s for s in samples if s.label}
    after_warmup = [s for s in samples if s.at >= warmup_s]
    start = by_label.get("start") or after_warmup[0]
    middle = by_label.get("middle") or after_warmup[len(after_warmup) // 2]
    end = by_label["end"]
    peak_rss = max(s.rss_kib for s in after_warmup)
    fds = [s.fds for s in after_warmup if s.label != "end"]
    report = {
        "seconds": seconds,
        "clients": clients,
        "calls": len(tally.latencies),
        "calls_per_s": round(len(tally.latencies) / seconds, 1),
        "sessions": tally.sessions,
        "errors": len(tally.errors),
        "error_examples": tally.errors[:5],
        "expected_tool_errors": tally.tool_errors,
        "p50_ms": round(1000 * statistics.median(tally.latencies), 1) if tally.latencies else None,
        "p99_ms": round(1000 * _percentile(tally.latencies, 0.99), 1),
        "rss_kib": {"boot": samples[0].rss_kib, "start": start.rss_kib, "middle": middle.rss_kib, "end": end.rss_kib, "peak": peak_rss},
        "fds": {"boot": samples[0].fds, "start": start.fds, "middle": middle.fds, "end": end.fds, "max": max(fds), "min": min(fds)},
        "samples": [vars(s) for s in samples],
    }
    growth = (end.rss_kib - start.rss_kib) / start.rss_kib
    report["rss_growth_after_warmup"] = round(growth, 4)
    report["checks"] = {
        "zero errors": not tally.errors,
        "memory within 10% after warm-up": abs(growth) <= 0.10 and (middle.rss_kib - start.rss_kib) / start.rss_kib <= 0.10,
        # Connections open and close all the time: flat means no drift while serving (within one per
        # client), and back to the boot level once every client has gone.
        "file descriptors flat": max(fds) <= start.fds + clients + 8 and end.fds <= samples[0].fds + 4,
        "calls made": len(tally.latencies) >= clients,
    }
    return report


def format_report(report: dict) -> str:
    r = report
    lines = [
        f"soak: {r['clients']} clients for {r['seconds']:.0f} s: {r['calls']:,} calls ({r['calls_per_s']}/s) in "
        f"{r['sessions']} sessions, {r['errors']} errors ({r['expected_tool_errors']:,} tool errors, as meant)",
        f"latency: p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms",
        "server RSS (KiB): " + ", ".join(f"{k} {v:,}" for k, v in r["rss_kib"].items()) + f" (growth after warm-up {r['rss_growth_after_warmup']:+.1%})",
        "server open fds: " + ", ".join(f"{k} {v}" for k, v in r["fds"].items()),
    ]
    lines += [f"  {'ok  ' if ok else 'FAIL'} {name}" for name, ok in r["checks"].items()]
    lines += [f"  error: {e}" for e in r["error_examples"]]
    return "\n".join(lines)


def run(minutes: float, clients: int = 16, store: str | None = None, warmup_s: float | None = None) -> dict:
    seconds = minutes * 60
    warmup = warmup_s if warmup_s is not None else min(60.0, max(3.0, seconds * 0.2))
    args = ["--store", store] if store else []
    with kg_mcp_server(*args) as server:
        report = asyncio.run(soak(server.url, server.pid, seconds=seconds, clients=clients, warmup_s=warmup))
        out, err = server.output()
    report["server_stdout_bytes"] = len(out)  # stdout is for stdio's protocol: nothing here
    report["checks"]["nothing on the server's stdout"] = out == ""
    report["server_tracebacks"] = err.count("Traceback")
    report["checks"]["no tracebacks in the server's log"] = "Traceback" not in err
    return report


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--store", help="serve this store instead of the demo KG (the call mix expects the demo)")
    parser.add_argument("--warmup", type=float, help="seconds before the memory baseline (default 20%%, 3-60 s)")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args()
    report = run(args.minutes, args.clients, args.store, args.warmup)
    print(format_report(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0 if all(report["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
