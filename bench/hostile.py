"""Hostile clients against one shared `kg-mcp serve --transport http` (issue 21), each attack on a
fresh server over the MetaQA store: what it costs the other clients, measured against the same
server's figures before the attack (light calls' latency, RSS, log size).

    python -m bench --only hostile [--quick]
    python -m bench.hostile --quick --attacks smuggle,sessions --server-python-path /tmp/before

Attacks: smuggle (SERVICE hidden behind comment line ends, to a loopback canary), kgr (40 long
kgr_search questions at once), verify (8 clients calling a heavy verify), halfopen (connections
that never finish their headers), sessions (one client opening sessions and never closing them),
memory (a cross-product SPARQL query), small (X-Forwarded-For, Origin, object ids, long names).
Bounded in time and count, loopback only; every server, worker and socket is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import time
from contextlib import AsyncExitStack
from pathlib import Path

import httpx2

from bench.common import Row, percentile, print_table
from bench.hostile_rig import (
    AUTH,
    HEADERS,
    LIGHT,
    SERVER_PATH_ENV,
    Canary,
    LightClient,
    RawSession,
    Sampler,
    Served,
    descendants,
    initialize,
    kill,
    result_text,
)
from bench.store_measures import metaqa_store

SIZES = {
    "quick": dict(light=20, attack_s=20.0, kgr_calls=40, verify_clients=8, sockets=300, sessions=500, window_s=30.0),
    "full": dict(light=60, attack_s=60.0, kgr_calls=40, verify_clients=8, sockets=1_500, sessions=10_000, window_s=30.0),
}
WORKER_SAFETY_MB = 4096  # the memory query's workers are killed past this: other people use the machine
LINE_ENDS = {"\\r": "\r", "\\u2028": "\u2028", "\\u2029": "\u2029", "\\x0c": "\x0c", "\\x0b": "\x0b", "\\u0085": "\u0085"}
MEMORY_QUERY = "SELECT ?a ?b ?c ?d WHERE { ?a ?b ?c . ?d ?e ?f } ORDER BY ?f ?c"
HOSTILE_ORIGINS = ["http://127.0.0.1:1@evil.com", "http://localhost@evil.com", "http://127.0.0.1:80@evil.com:80"]


def _ms(values: list[float], q: float) -> float:
    return percentile(values, q) * 1e3


def _latency_rows(name: str, base: list[float], during: list[float], failures: int, goal: str = "<= 10") -> list[Row]:
    note = f"p50 {_ms(during, 0.5):.0f} ms vs {_ms(base, 0.5):.0f} ms; {len(during)} light calls, {failures} failed or timed out"
    return [Row(f"{name}: light call p99", _ms(during, 0.99), _ms(base, 0.99), "ms", goal, note)]


def _load() -> str:
    return "load avg " + " ".join(f"{x:.2f}" for x in os.getloadavg())


async def smuggle(store: Path, work: Path, size: dict) -> list[Row]:
    """SERVICE behind a `#` comment ended by a line end the guard does not know: the canary must stay silent."""
    with Canary() as canary, Served(store, work) as server:
        service = f"SERVICE <http://127.0.0.1:{canary.port}/sparql> {{ ?x ?y ?s }}"
        forms = {f"comment{name}": f"SELECT ?s WHERE {{ # c{end} {service} \n}}" for name, end in LINE_ENDS.items()}
        forms["nested\\r"] = f"SELECT ?s WHERE {{ {{ # c\r {{ {service} }} \n}} }}"
        forms["crlf-in-prefix\\r"] = f"PREFIX x: <http://x/> # c\r SELECT ?s WHERE {{ {service} }} #\n"
        async with httpx2.AsyncClient(timeout=90) as http:
            session = RawSession(http, server.url)
            await session.open()
            answered = []
            for name, query in forms.items():
                before = len(canary.hits)
                text = result_text(await session.call("sparql", {"query": query}))
                if len(canary.hits) > before or "canary-reached" in text:
                    answered.append(name)
            plain = result_text(await session.call("sparql", {"query": f"SELECT ?s WHERE {{ {service} }}"}))
        note = (
            f"{len(forms)} forms; reached by: {', '.join(answered) or 'none'}; hits {canary.hits[:1]}; "
            f"unsmuggled SERVICE answered: {plain[:80]!r}; {_load()}; server {server.package()}"
        )
        return [Row("smuggle: canary hits of smuggled SERVICE", len(canary.hits), len(forms), "hits", "<= 0", note)]


async def _kgr_wave(server: Served, sessions: list[RawSession], question: str, deadline: float) -> tuple[int, list[str]]:
    async def one(i: int, session: RawSession) -> str:
        arguments = {"entity": "kg:Drama", "question": question, "session": f"hostile-{i}"}
        message = await asyncio.wait_for(session.call("kgr_search", arguments), max(1.0, deadline - time.monotonic()))
        return result_text(message)

    outcomes = await asyncio.gather(*(one(i, s) for i, s in enumerate(sessions)), return_exceptions=True)
    texts = [o for o in outcomes if isinstance(o, str)]
    return len(texts), texts


async def kgr(store: Path, work: Path, size: dict) -> list[Row]:
    """40 kgr_search calls at once with a 10,000-word question on kg:Drama, cut off after attack_s."""
    words = random.Random(21)
    question = " ".join("".join(words.choices("abcdefghijklmnopqrstuvwxyz", k=words.randint(3, 9))) for _ in range(10_000))
    with Served(store, work) as server:
        async with AsyncExitStack() as stack, LightClient(server.url, size["attack_s"] + 60) as light:
            base, _ = await light.run(size["light"])
            http = await stack.enter_async_context(httpx2.AsyncClient(timeout=size["attack_s"] + 60, limits=httpx2.Limits(max_connections=200)))
            sessions = [RawSession(http, server.url) for _ in range(size["kgr_calls"])]
            await asyncio.gather(*(s.open() for s in sessions))
            cpu = server.cpu_s()
            await _kgr_wave(server, sessions, "which films share this genre", time.monotonic() + 120)
            cpu_short = server.cpu_s() - cpu
            log, cpu, started = server.log_bytes(), server.cpu_s(), time.monotonic()
            done = asyncio.Event()
            probe = asyncio.ensure_future(light.run(until=done, timeout=size["attack_s"] + 10))
            finished, texts = await _kgr_wave(server, sessions, question, started + size["attack_s"])
            seconds = time.monotonic() - started
            cpu_attack = server.cpu_s() - cpu
            done.set()
            during, failures = await probe
        cpu = server.cpu_s()
        await asyncio.sleep(10)  # the attackers have gone: does the server stop working for them?
        cpu_after = server.cpu_s() - cpu
        async with LightClient(server.url, 30) as light:  # few calls: each may wait out its timeout
            after, _ = await light.run(3)
        log_growth = server.log_bytes() - log
    note = (
        f"{finished}/{size['kgr_calls']} long calls answered in {seconds:.0f} s (cut at {size['attack_s']:.0f} s; question "
        f"{len(question):,} chars); first answer {texts[0][:80] if texts else None!r}; baseline: the same calls with a "
        f"short question; log +{log_growth:,} B; {_load()}"
    )
    return _latency_rows("kgr x40 long question", base, during, failures) + [
        Row("kgr x40 long question: calls answered", finished, size["kgr_calls"], "calls", ">= 1", note),
        Row("kgr x40 long question: server CPU", cpu_attack, max(cpu_short, 0.01), "s", "<= 3"),
        Row("kgr: server CPU in 10 s after clients left", cpu_after, 10.0, "s", "<= 0.1", "baseline: the 10 s of wall time"),
        Row("kgr: light call p99 after the attack", _ms(after, 0.99), _ms(base, 0.99), "ms", "<= 3"),
    ]


def _verify_claims() -> dict:
    hops = lambda i: [{"subject": "kg:Drama", "relation": "~has_genre", "object": f"no such film {i}.{j}"} for j in range(10)]  # noqa: E731
    return {"claims": [{"path": hops(i)} for i in range(50)]}


async def _time_401(url: str) -> float:
    async with httpx2.AsyncClient(timeout=60) as http:
        started = time.perf_counter()
        await http.post(url, json=initialize(), headers=HEADERS)
        return time.perf_counter() - started


async def verify(store: Path, work: Path, size: dict) -> list[Row]:
    """8 clients calling verify with 50 path claims of 10 hops around kg:Drama, for attack_s."""
    claims = _verify_claims()
    with Served(store, work) as server:
        async with httpx2.AsyncClient(timeout=size["attack_s"] + 120) as http, LightClient(server.url, size["attack_s"] + 60) as light:
            base, _ = await light.run(size["light"])
            base_401 = [await _time_401(server.url) for _ in range(5)]
            rss = server.rss_mb()
            one = RawSession(http, server.url)
            await one.open()
            started = time.perf_counter()
            single = (await one.call("verify", claims)).get("result", {})
            single_s = time.perf_counter() - started
            structured = len(json.dumps(single.get("structuredContent")))
            text = len(result_text({"result": single}))
            deadline, done, calls = time.monotonic() + size["attack_s"], asyncio.Event(), []

            async def attacker() -> None:
                session = RawSession(http, server.url)
                await session.open()
                while time.monotonic() < deadline:
                    await session.call("verify", claims)
                    calls.append(1)

            async def unauthenticated() -> list[float]:
                times = []
                while not done.is_set():
                    times.append(await _time_401(server.url))
                    await asyncio.sleep(1)
                return times

            with Sampler(server.rss_mb, 0.5) as rss_during:
                probes = asyncio.gather(light.run(until=done, timeout=size["attack_s"] + 10), unauthenticated())
                try:  # calls still running at the deadline are abandoned
                    await asyncio.wait_for(asyncio.gather(*(attacker() for _ in range(size["verify_clients"]))), size["attack_s"])
                except TimeoutError:
                    pass
                done.set()
                (during, failures), times_401 = await probes
        await asyncio.sleep(5)
        rss_after = server.rss_mb()
    note = f"{len(calls)} verify calls by {size['verify_clients']} clients in {size['attack_s']:.0f} s; one call alone {single_s:.1f} s; {_load()}"
    return _latency_rows(f"verify x{size['verify_clients']}", base, during, failures) + [
        Row("verify: no-token 401 time during (max)", max(times_401) * 1e3, statistics.median(base_401) * 1e3, "ms", "<= 10", note),
        Row("verify: server RSS peak during", rss_during.peak, rss, "MB", "<= 1.5"),
        Row("verify: server RSS after", rss_after, rss, "MB", "<= 1.2"),
        Row("verify: structured content vs text", structured, max(text, 1), "chars", "<= 2", "one answer's structuredContent JSON vs its text"),
    ]


def _new_client_s(url: str, timeout: float) -> float:
    async def go() -> float:
        async with httpx2.AsyncClient(timeout=timeout) as http:
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
    """`sockets` connections that send half a request and stay, without a token."""
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
            time.sleep(max(0.0, window - during))
            log_growth = server.log_bytes() - log
            still_open = sum(_still_open(s) for s in sockets)
        finally:
            for s in sockets:
                s.close()
        time.sleep(2)
        after = _new_client_s(server.url, 60)
        tail = server.log_tail(160).replace("\n", " | ")
    note = f"{len(sockets)} opened ({refused} failed to connect); new client after closing them {after:.2f} s; log tail {tail!r}; {_load()}"
    return [
        Row(f"halfopen x{n}: new client's initialize+call", during * 1e3, base * 1e3, "ms", "<= 5", note),
        Row(f"halfopen: log growth in {window:.0f} s", log_growth, max(base_log, 1), "B", "<= 10", "baseline: the log of start-up and baseline calls"),
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
                    codes.append((await other.post(server.url, json=initialize(), headers=HEADERS | AUTH)).status_code)
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
        f"other client's codes before {base_codes}, after {after_codes}; log +{log_growth:,} B; {_load()}"
    )
    return [
        Row(f"sessions x{m}: other client refused", refused, len(after_codes), "calls", "<= 0", note),
        Row("sessions: other client's initialize", statistics.median(after_times) * 1e3, statistics.median(base_times) * 1e3, "ms", "<= 3"),
        Row("sessions: server RSS", rss_after, rss, "MB", "<= 1.5", f"{(rss_after - rss) * 1024 / max(m, 1):.0f} KB a session"),
    ]


async def memory(store: Path, work: Path, size: dict) -> list[Row]:
    """A cross-product query sorted on both sides: the query workers' peak memory."""
    with Served(store, work) as server:
        async with httpx2.AsyncClient(timeout=300) as http:
            session = RawSession(http, server.url)
            await session.open()
            with Sampler(server.workers_rss_mb) as base:
                await session.call("sparql", {"query": "SELECT ?s ?p ?o WHERE { ?s ?p ?o } LIMIT 5"})
            started = time.perf_counter()
            on_stop = lambda: kill(descendants(server.pid))  # noqa: E731
            with Sampler(server.workers_rss_mb, 0.1, WORKER_SAFETY_MB, on_stop) as peak:
                text = result_text(await session.call("sparql", {"query": MEMORY_QUERY}))
            seconds = time.perf_counter() - started
            rss_server = server.rss_mb()
    cut = f" (the bench killed the workers at its {WORKER_SAFETY_MB} MB safety cap)" if peak.stopped else ""
    note = f"answer in {seconds:.1f} s{cut}: {text[:160]!r}; server RSS {rss_server:.0f} MB; {_load()}"
    return [Row("memory query: workers' peak RSS", peak.peak, max(base.peak, 1), "MB", "<= 3", note + "; baseline: a LIMIT 5 query")]


async def small(store: Path, work: Path, size: dict) -> list[Row]:
    """X-Forwarded-For against --rate-limit 5, Origin with userinfo, an object id, a 3 MB tool name."""
    rows = []
    with Served(store, work, "--rate-limit", "5") as server:
        async def passes(address: str, spoof: bool) -> int:
            transport = httpx2.AsyncHTTPTransport(local_address=address)
            async with httpx2.AsyncClient(timeout=30, transport=transport) as http:
                codes = [
                    (await http.post(server.url, json=initialize(), headers=HEADERS | ({"X-Forwarded-For": f"10.9.{i}.1"} if spoof else {}))).status_code
                    for i in range(30)
                ]
            return sum(code != 429 for code in codes)

        honest, spoofed = await passes("127.0.0.2", False), await passes("127.0.0.1", True)
        rows.append(Row("small: 30 requests past --rate-limit 5 (XFF)", spoofed, honest, "reqs", "<= 1", "baseline: 30 without X-Forwarded-For from another address"))
    with Served(store, work) as server:
        async with httpx2.AsyncClient(timeout=60) as http:
            origin = {o: (await http.post(server.url, json=initialize(), headers=HEADERS | AUTH | {"Origin": o})).status_code for o in HOSTILE_ORIGINS}
            evil = (await http.post(server.url, json=initialize(), headers=HEADERS | AUTH | {"Origin": "http://evil.com"})).status_code
            accepted = sum(code < 400 for code in origin.values())
            rows.append(Row("small: userinfo Origins accepted", accepted, len(origin), "origins", "<= 0", f"{origin}; plain http://evil.com: {evil}"))
            session = RawSession(http, server.url)
            await session.open()
            status, body = await session.post({"jsonrpc": "2.0", "id": {"x": 1}, "method": "tools/list"})
            rows.append(Row("small: object id answered 202 (silently dropped)", status == 202, 1, "", "<= 0", f"status {status}, body {body[:120]!r}"))
            short = len(result_text(await session.call("no_such_tool", {})))
            long = result_text(await session.call("x" * 3_000_000, {}))
            rows.append(Row("small: error text for a 3 MB tool name", len(long), short, "chars", "<= 4", f"baseline: a short unknown name; {long[:100]!r}"))
    return rows


ATTACKS = {"smuggle": smuggle, "kgr": kgr, "verify": verify, "halfopen": halfopen, "sessions": sessions, "memory": memory, "small": small}


def hostile_survey(work: Path, mode: str, attacks: list[str] | None = None) -> list[Row]:
    """Every attack (or those named) on a fresh server each; rows in the bench's table."""
    store, size, rows = metaqa_store(work), SIZES[mode], []
    for name in attacks or list(ATTACKS):
        attack = ATTACKS[name]
        started = time.perf_counter()
        result = attack(store, work, size) if name == "halfopen" else asyncio.run(attack(store, work, size))
        rows += result
        print(f"hostile {name}: {time.perf_counter() - started:.0f} s, {_load()}", flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller attacks (seconds each)")
    parser.add_argument("--attacks", default="", help=f"comma-separated, of: {','.join(ATTACKS)}")
    parser.add_argument("--server-python-path", help=f"serve the kg_mcp package in this folder (sets {SERVER_PATH_ENV})")
    parser.add_argument("--sessions", type=int, help="sessions the flood opens (default 500 quick, 10,000 full: the SDK's cap)")
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("KG_MCP_BENCH_DIR", ".bench")))
    args = parser.parse_args()
    if args.server_python_path:
        os.environ[SERVER_PATH_ENV] = str(Path(args.server_python_path).resolve())
    args.work.mkdir(parents=True, exist_ok=True)
    mode = "quick" if args.quick else "full"
    SIZES[mode]["sessions"] = args.sessions or SIZES[mode]["sessions"]
    started, load = time.perf_counter(), _load()
    rows = hostile_survey(args.work, mode, list(filter(None, args.attacks.split(","))))
    print_table(rows, f"kg-mcp hostile bench, {mode} mode, {time.perf_counter() - started:.0f} s, {os.cpu_count()} cores, {load} at start")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
