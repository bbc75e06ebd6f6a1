"""bench/hostile.py's attacks through tool calls: smuggled SERVICE, long kgr_search questions, heavy
verify calls, a query that takes the workers' memory."""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time
from contextlib import AsyncExitStack
from pathlib import Path

import httpx2

from bench.common import Row
from bench.hostile_rig import (
    HEADERS,
    Canary,
    LightClient,
    RawSession,
    Sampler,
    Served,
    initialize,
    latency_rows,
    load,
    ms,
    result_text,
)

WORKER_SAFETY_MB = 4096  # the memory query's workers are killed past this: other people use the machine
LINE_ENDS = {
    "\\r": "\r",
    "\\u2028": "\u2028",
    "\\u2029": "\u2029",
    "\\x0c": "\x0c",
    "\\x0b": "\x0b",
    "\\u0085": "\u0085",
}
MEMORY_QUERY = "SELECT ?a ?b ?c ?d WHERE { ?a ?b ?c . ?d ?e ?f } ORDER BY ?f ?c"


async def smuggle(store: Path, work: Path, size: dict) -> list[Row]:
    """SERVICE behind a `#` comment ended by a line end the guard does not know: the canary must stay silent."""
    with Canary() as canary, Served(store, work) as server:
        service = f"SERVICE <http://127.0.0.1:{canary.port}/sparql> {{ ?x ?y ?s }}"
        forms = {
            f"comment{name}": f"SELECT ?s WHERE {{ # c{end} {service} \n}}" for name, end in LINE_ENDS.items()
        }
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
            f"unsmuggled SERVICE answered: {plain[:80]!r}; {load()}; server {server.package()}"
        )
        return [
            Row(
                "smuggle: canary hits of smuggled SERVICE", len(canary.hits), len(forms), "hits", "<= 0", note
            )
        ]


async def _kgr_wave(
    server: Served, sessions: list[RawSession], question: str, deadline: float
) -> tuple[int, list[str]]:
    async def one(i: int, session: RawSession) -> str:
        arguments = {"entity": "kg:Drama", "question": question, "session": f"hostile-{i}"}
        message = await asyncio.wait_for(
            session.call("kgr_search", arguments), max(1.0, deadline - time.monotonic())
        )
        return result_text(message)

    outcomes = await asyncio.gather(*(one(i, s) for i, s in enumerate(sessions)), return_exceptions=True)
    texts = [o for o in outcomes if isinstance(o, str)]
    return len(texts), texts


async def kgr(store: Path, work: Path, size: dict) -> list[Row]:
    """40 kgr_search calls at once with a 10,000-word question on kg:Drama, cut off after attack_s."""
    words = random.Random(21)
    question = " ".join(
        "".join(words.choices("abcdefghijklmnopqrstuvwxyz", k=words.randint(3, 9))) for _ in range(10_000)
    )
    with Served(store, work) as server:
        async with AsyncExitStack() as stack, LightClient(server.url, size["attack_s"] + 60) as light:
            base, _ = await light.run(size["light"])
            http = await stack.enter_async_context(
                httpx2.AsyncClient(timeout=size["attack_s"] + 60, limits=httpx2.Limits(max_connections=200))
            )
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
        f"short question; log +{log_growth:,} B; {load()}"
    )
    return latency_rows("kgr x40 long question", base, during, failures) + [
        Row("kgr x40 long question: calls answered", finished, size["kgr_calls"], "calls", ">= 1", note),
        Row("kgr x40 long question: server CPU", cpu_attack, max(cpu_short, 0.01), "s", "<= 3"),
        Row(
            "kgr: server CPU in 10 s after clients left",
            cpu_after,
            10.0,
            "s",
            "<= 0.1",
            "baseline: the 10 s of wall time",
        ),
        Row("kgr: light call p99 after the attack", ms(after, 0.99), ms(base, 0.99), "ms", "<= 3"),
    ]


def _verify_claims(paths: int = 50) -> dict:
    """Paths of 10 hops, each hop kg:Drama's ~4,000 films compared with a name that is none of them."""
    hop = {"subject": "kg:Drama", "relation": "~has_genre"}
    return {
        "claims": [
            {"path": [hop | {"object": f"no such film {i}.{j}"} for j in range(10)]} for i in range(paths)
        ]
    }


async def _time_401(url: str) -> float:
    async with httpx2.AsyncClient(timeout=60) as http:
        started = time.perf_counter()
        await http.post(url, json=initialize(), headers=HEADERS)
        return time.perf_counter() - started


async def verify(store: Path, work: Path, size: dict) -> list[Row]:
    """8 clients calling verify with 50 path claims of 10 hops around kg:Drama (10 if 50 are refused), for attack_s."""
    with Served(store, work) as server:
        async with (
            httpx2.AsyncClient(timeout=size["attack_s"] + 120) as http,
            LightClient(server.url, size["attack_s"] + 60) as light,
        ):
            base, _ = await light.run(size["light"])
            base_401 = [await _time_401(server.url) for _ in range(5)]
            rss = server.rss_mb()
            one = RawSession(http, server.url)
            await one.open()
            for paths in (50, 10):  # refused: the heaviest call still allowed (100 hops), if that is
                claims = _verify_claims(paths)
                started = time.perf_counter()
                single = (await one.call("verify", claims)).get("result", {})
                single_s = time.perf_counter() - started
                if not single.get("isError"):
                    break
            structured = len(json.dumps(single.get("structuredContent")))
            text = result_text({"result": single})
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
                probes = asyncio.gather(
                    light.run(until=done, timeout=size["attack_s"] + 10), unauthenticated()
                )
                try:  # calls still running at the deadline are abandoned
                    await asyncio.wait_for(
                        asyncio.gather(*(attacker() for _ in range(size["verify_clients"]))), size["attack_s"]
                    )
                except TimeoutError:
                    pass
                done.set()
                (during, failures), times_401 = await probes
        await asyncio.sleep(5)
        rss_after = server.rss_mb()
    note = (
        f"{len(calls)} verify calls of {paths} paths by {size['verify_clients']} clients in {size['attack_s']:.0f} s; "
        f"one call alone {single_s:.1f} s: {text[:70]!r}; {load()}"
    )
    return latency_rows(f"verify x{size['verify_clients']}", base, during, failures) + [
        Row(
            "verify: no-token 401 time during (max)",
            max(times_401) * 1e3,
            statistics.median(base_401) * 1e3,
            "ms",
            "<= 50",
            note,
        ),
        Row("verify: server RSS peak during", rss_during.peak, rss, "MB", "<= 1.5"),
        Row("verify: server RSS after", rss_after, rss, "MB", "<= 1.2"),
        Row(
            "verify: structured content vs text",
            structured,
            max(len(text), 1),
            "chars",
            "<= 2",
            "one answer's structuredContent JSON vs its text",
        ),
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
            with Sampler(server.workers_rss_mb, 0.1, WORKER_SAFETY_MB, server.kill_workers) as peak:
                text = result_text(await session.call("sparql", {"query": MEMORY_QUERY}))
            seconds = time.perf_counter() - started
            rss_server = server.rss_mb()
    cut = f" (the bench killed the workers at its {WORKER_SAFETY_MB} MB safety cap)" if peak.stopped else ""
    note = f"answer in {seconds:.1f} s{cut}: {text[:160]!r}; server RSS {rss_server:.0f} MB; {load()}"
    return [
        Row(
            "memory query: workers' peak RSS",
            peak.peak,
            max(base.peak, 1),
            "MB",
            "<= 12",  # idle workers (~100 MB) against one worker at a limit of about 1 GB
            note + "; baseline: a LIMIT 5 query",
        )
    ]
