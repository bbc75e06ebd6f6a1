"""bench/hostile.py's attacks of issue 31 on shared capacity and on the sparql tool: one caller
holding the query workers, slow endpoint queries taking the threads, traversal trees evicted by
fresh session names, a burst of sparql calls, SERVICE glued to a prefixed name, an endpoint's huge
answer, parse-heavy queries, kg://stats read in a loop, and a huge literal built in a worker.

Each runs on a fresh server over the MetaQA KG (a local store, or `oxigraph serve` over the same
store), with a bystander: the SDK's client from another loopback address (another caller),
timing its light calls while the attack runs.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import httpx2

from bench.common import REPO, Row
from bench.hostile_rig import (
    Canary,
    Endpoint,
    LightClient,
    RawSession,
    Sampler,
    Served,
    bystander_rows,
    during_attack,
    load,
    looped,
    ms,
    open_sessions,
    result_text,
)

sys.path.insert(0, str(REPO / "tests"))
from fault_proxy import Fault, FaultProxy  # noqa: E402

BYSTANDER = "127.0.0.2"
FILM = "http://kg-mcp.local/entity/Catch_Me_If_You_Can"
# The bystander's calls on an endpoint: a film's relations and its outgoing rows.
LIGHT_ENDPOINT = [("get_relations", {"entity": f"<{FILM}>"}), ("search", {"entity": f"<{FILM}>"})]
# A count over the cross product of the KG with itself: 1.6e11 rows, stopped only by the time limit.
ENDLESS = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f }"
SERVER_SAFETY_MB = 6144  # the bench stops a server past this: other people use the machine


async def workers(store: Path, work: Path, size: dict) -> list[Row]:
    """Repro 5: one client, 4 sessions, each looping a query that only the 30 s limit stops; another
    client asks `ASK { ?s ?p ?o }` meanwhile."""
    ask = [("sparql", {"query": "ASK { ?s ?p ?o }"})]
    with Served(store, work) as server:
        async with httpx2.AsyncClient(timeout=120) as http, LightClient(server.url, 90, BYSTANDER, ask) as light:
            base, _ = await light.run(3)  # also starts the query workers
            sessions = await open_sessions(http, server.url, 4)
            texts: list[str] = []

            async def attack(session: RawSession) -> None:
                texts.append(result_text(await session.call("sparql", {"query": ENDLESS}))[:90])

            during, failures, _ = await during_attack(light, size["share_s"], *(looped(lambda s=s: attack(s)) for s in sessions))
    refused = sum("busy" in t.lower() for t in texts)
    note = f"attack calls ended: {len(texts)}, {refused} refused as busy; first {texts[:1]}; {load()}"
    return bystander_rows("workers: 4 sessions of endless queries", during, failures, base) + [
        Row("workers: bystander ASKs answered", len(during) - failures, max(len(during), 1), "calls", ">= 0.9", note)
    ]


async def endpoint_threads(store: Path, work: Path, size: dict) -> list[Row]:
    """Repro 4: 45 sparql calls at once, again and again, to an endpoint that takes `slow_s` to
    answer them (a delaying proxy in front of `oxigraph serve`); another client's light calls."""
    slow = 'SELECT ?s WHERE { ?s ?p "held-by-the-slow-endpoint" }'
    with Endpoint(store) as endpoint, FaultProxy(endpoint.url) as proxy:
        proxy.add(Fault("delay", delay_s=size["slow_s"]), match="held-by-the-slow-endpoint")
        with Served(store, work, endpoint=proxy.url, env={"KG_MCP_NAME_INDEX": "false"}) as server:
            threads = Sampler(lambda: _threads(server.pid), 0.2)
            async with (
                httpx2.AsyncClient(timeout=120, limits=httpx2.Limits(max_connections=100)) as http,
                LightClient(server.url, 90, BYSTANDER, LIGHT_ENDPOINT) as light,
            ):
                base, _ = await light.run(size["light"] // 2)
                sessions = await open_sessions(http, server.url, 45)
                texts: list[str] = []

                async def wave() -> None:
                    answers = await asyncio.gather(*(s.call("sparql", {"query": slow}) for s in sessions))
                    texts.extend(result_text(a)[:90] for a in answers)

                with threads:
                    during, failures, waves = await during_attack(light, size["share_s"], looped(wave))
    held = _peak_overlap([s.at for s in proxy.seen if s.fault == "delay"], size["slow_s"])
    refused = sum("busy" in t.lower() for t in texts)
    note = (f"{sum(waves)} waves of 45 ended ({len(texts)} answers, {refused} refused as busy); endpoint delay "
            f"{size['slow_s']:g} s; server threads peak {threads.peak:.0f}; {load()}")
    return bystander_rows("endpoint x45 slow sparql", during, failures, base) + [
        Row("endpoint x45: slow queries at the endpoint at once (peak)", held, 45, "queries", "<= 0.1", note)
    ]


def _threads(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return float(line.split()[1])
    except OSError:
        pass
    return 0.0


def _peak_overlap(starts: list[float], length: float) -> int:
    """Most intervals [start, start + length) open at one time."""
    starts = sorted(starts)
    return max((sum(1 for t in starts if s <= t < s + length) for s in starts), default=0)


FRESH_NAMES = 160  # more than the 128 trees the server keeps in all


async def traversal(store: Path, work: Path, size: dict) -> list[Row]:
    """Repro 6: another client than the one whose traversal is under way backtracks with the same
    session name, then makes 160 kgr_search calls with fresh session names, 8 at a time; then the
    owner backtracks."""
    question = {"question": "who directed Catch Me If You Can", "session": "mine"}
    with Served(store, work) as server:
        async with (
            httpx2.AsyncClient(timeout=120, transport=httpx2.AsyncHTTPTransport(local_address="127.0.0.3"),
                               limits=httpx2.Limits(max_connections=200)) as http,
            LightClient(server.url, 90, BYSTANDER) as light,
        ):
            base, _ = await light.run(size["light"] // 2)
            owner = RawSession(httpx2.AsyncClient(timeout=60, transport=httpx2.AsyncHTTPTransport(local_address=BYSTANDER)), server.url)
            await owner.open()
            first = await owner.call("kgr_search", {"entity": "kg:Catch_Me_If_You_Can", **question})
            await owner.call("kgr_search", {"entity": "kg:Steven_Spielberg", **question})
            flood = await open_sessions(http, server.url, 8)  # 8 MCP sessions, one call at a time each
            # The owner's session name from the other client: does it reach (and move) the owner's tree?
            stranger = result_text(await flood[0].call("kgr_search", {"backtrack": True, "session": "mine"}))
            started = time.monotonic()

            async def fresh(first: int, session: RawSession) -> list[dict]:
                return [await session.call("kgr_search", {"entity": "kg:Catch_Me_If_You_Can", "session": f"fresh-{i}"})
                        for i in range(first, FRESH_NAMES, len(flood))]

            flood_task = asyncio.ensure_future(asyncio.gather(*(fresh(i, s) for i, s in enumerate(flood))))
            during, failures = await light.run(size["light"] // 2)
            answers = [a for some in await flood_task for a in some]
            flood_s = time.monotonic() - started
            back = result_text(await owner.call("kgr_search", {"backtrack": True, "session": "mine"}))
            await owner.http.aclose()
    lost = "Nothing to backtrack from" in back
    reached = "Nothing to backtrack from" not in stranger
    refused = sum("busy" in result_text(a).lower() for a in answers)
    failed = [result_text(a)[:80] for a in answers if "error" in a or a.get("result", {}).get("isError")]
    note = (f"flood of {FRESH_NAMES} ended in {flood_s:.1f} s, {refused} refused as busy, {len(failed)} failed "
            f"{failed[:1]}; owner's first call "
            f"{result_text(first)[:50]!r}; owner's backtrack {back[:70]!r}; other client's backtrack on 'mine' "
            f"{stranger[:70]!r}; {load()}")
    return bystander_rows(f"traversal: {FRESH_NAMES} fresh session names", during, failures, base) + [
        Row("traversal: owner's tree lost", lost, 1, "", "<= 0", note),
        Row("traversal: other client reached the owner's tree", reached, 1, "", "<= 0"),
    ]


async def burst(store: Path, work: Path, size: dict) -> list[Row]:
    """Repro 2: 10 sparql calls at once (from 10 addresses) on a fresh server; then does the tool
    still answer? On `servers` fresh servers."""
    broken, notes = 0, []
    for _ in range(size["servers"]):
        with Served(store, work) as server:

            async def one(i: int) -> str:
                transport = httpx2.AsyncHTTPTransport(local_address=f"127.0.0.{10 + i}")
                async with httpx2.AsyncClient(timeout=90, transport=transport) as http:
                    session = RawSession(http, server.url)
                    await session.open()
                    query = f"SELECT ?p ?o WHERE {{ <{FILM}> ?p ?o }} LIMIT {i + 1}"
                    return result_text(await session.call("sparql", {"query": query}))

            first = await asyncio.gather(*(one(i) for i in range(10)))
            after = await asyncio.gather(*(one(i) for i in range(3)))
        failed = [t for t in after if not t.startswith("sparql:")]
        broken += bool(failed)
        notes.append(f"burst {sum(t.startswith('sparql:') for t in first)}/10 answered, after {3 - len(failed)}/3"
                     + (f" ({failed[0][:60]!r})" if failed else ""))
    return [Row("burst: servers whose sparql broke after 10 at once", broken, size["servers"], "servers", "<= 0",
                "; ".join(notes) + f"; {load()}")]


async def glued(store: Path, work: Path, size: dict) -> list[Row]:
    """Repro 1: SERVICE glued to a prefixed name (`SERVICE:x`), aimed at a loopback canary, on an
    endpoint backend (`oxigraph serve`, which runs SERVICE)."""
    with Canary() as canary, Endpoint(store) as endpoint, Served(store, work, endpoint=endpoint.url) as server:
        forms = {
            "SERVICE:x": f"PREFIX : <http://127.0.0.1:{canary.port}/> SELECT * WHERE {{ SERVICE:x {{ ?s ?p ?o }} }}",
            "SERVICE SILENT:x": f"PREFIX : <http://127.0.0.1:{canary.port}/> SELECT * WHERE {{ SERVICE SILENT:x {{ ?s ?p ?o }} }}",
            "FROM:g": f"PREFIX : <http://127.0.0.1:{canary.port}/> SELECT * FROM:g WHERE {{ ?s ?p ?o }} LIMIT 1",
        }
        async with httpx2.AsyncClient(timeout=90) as http:
            session = RawSession(http, server.url)
            await session.open()
            answered = {}
            for name, query in forms.items():
                before = len(canary.hits)
                text = result_text(await session.call("sparql", {"query": query}))
                answered[name] = (len(canary.hits) > before or "canary-reached" in text, text[:70])
    reached = [name for name, (hit, _) in answered.items() if hit]
    note = f"reached by: {', '.join(reached) or 'none'}; answers {[t for _, t in answered.values()]}; {load()}"
    return [Row("glued: canary hits of SERVICE:x forms", len(canary.hits), len(forms), "hits", "<= 0", note)]


async def endpoint_rss(store: Path, work: Path, size: dict) -> list[Row]:
    """Repro 3: an endpoint answer of `rows` rows with a 15 KB literal each (the literal made by
    the query itself), through `sparql` (which shows 200): the server's memory, and a bystander."""
    query = f'SELECT ?s ?big WHERE {{ ?s ?p ?o BIND("{"x" * 15_000}" AS ?big) }} LIMIT {size["rss_rows"]}'
    with Endpoint(store) as endpoint, Served(store, work, endpoint=endpoint.url, env={"KG_MCP_NAME_INDEX": "false"}) as server:
        async with httpx2.AsyncClient(timeout=300) as http, LightClient(server.url, 90, BYSTANDER, LIGHT_ENDPOINT) as light:
            base, _ = await light.run(size["light"] // 2)
            rss = server.rss_mb()
            session = RawSession(http, server.url)
            await session.open()
            texts: list[str] = []

            async def attack() -> None:
                texts.append(result_text(await session.call("sparql", {"query": query}))[:90])

            with Sampler(server.rss_mb, 0.1, SERVER_SAFETY_MB, server.__exit__) as peak:
                during, failures, _ = await during_attack(light, size["share_s"], looped(attack))
            await asyncio.sleep(5)
            rss_after = server.rss_mb()
    cut = f" (the bench stopped the server at its {SERVER_SAFETY_MB} MB safety cap)" if peak.stopped else ""
    note = (f"{len(texts)} answers of {size['rss_rows']:,} rows x 15 KB{cut}: {texts[:1]}; server RSS "
            f"{rss:.0f} MB before, {rss_after:.0f} MB 5 s after; {load()}")
    return bystander_rows(f"endpoint answer {size['rss_rows']:,} x 15 KB", during, failures, base) + [
        Row("endpoint answer: server RSS peak", peak.peak, rss, "MB", "<= 15", note),
        Row("endpoint answer: server RSS after", rss_after, rss, "MB", "<= 3"),
    ]


# 1,000 tokens of empty groups: rdflib's parser is slowest on these (about 0.5 ms a token).
PARSE_HEAVY = "SELECT * WHERE { " + "{ } " * 496 + "}"


async def parse(store: Path, work: Path, size: dict) -> list[Row]:
    """Repro 10: 16 clients sending a parse-heavy 1,000-token query in a loop; a bystander."""
    with Served(store, work) as server:
        async with httpx2.AsyncClient(timeout=120) as http, LightClient(server.url, 90, BYSTANDER) as light:
            base, _ = await light.run(size["light"])
            sessions = await open_sessions(http, server.url, 16)
            texts: list[str] = []

            async def attack(session: RawSession) -> None:
                texts.append(result_text(await session.call("sparql", {"query": PARSE_HEAVY}))[:90])

            cpu = server.cpu_s()
            during, failures, _ = await during_attack(
                light, size["share_s"], *(looped(lambda s=s: attack(s)) for s in sessions)
            )
            cpu = server.cpu_s() - cpu
    refused = sum("busy" in t.lower() for t in texts)
    note = (f"{len(texts)} parse-heavy calls by 16 clients ended in {size['share_s']:.0f} s, {refused} refused as busy; "
            f"server CPU {cpu:.1f} s; {load()}")
    return bystander_rows("parse-heavy query x16", during, failures, base) + [
        Row("parse-heavy: light p50", ms(during, 0.5), ms(base, 0.5), "ms", "<= 3", note)
    ]


async def stats(store: Path, work: Path, size: dict) -> list[Row]:
    """Repro 10: 4 clients reading kg://stats (and kg://schema) in a loop; the CPU a read costs, a bystander."""
    with Served(store, work) as server:
        async with httpx2.AsyncClient(timeout=120) as http, LightClient(server.url, 90, BYSTANDER) as light:
            base, _ = await light.run(size["light"])
            sessions = await open_sessions(http, server.url, 4)

            async def read(session: RawSession, uri: str) -> None:
                await session.post({"jsonrpc": "2.0", "id": 7, "method": "resources/read", "params": {"uri": uri}})

            cpu = server.cpu_s()
            during, failures, reads = await during_attack(
                light, size["share_s"], *(looped(lambda s=s, u=u: read(s, u)) for s, u in zip(sessions, ["kg://stats", "kg://schema"] * 2))
            )
            cpu = server.cpu_s() - cpu
    total = max(sum(reads), 1)
    note = f"{sum(reads)} reads by 4 clients in {size['share_s']:.0f} s, server CPU {cpu:.1f} s; {load()}"
    return bystander_rows("kg://stats x4 readers", during, failures, base) + [
        Row("kg://stats: server CPU a read", cpu / total * 1e3, 500.0, "ms", "<= 0.01", note + "; baseline: the 0.5 s a read cost")
    ]


def _doubled_literal(doublings: int) -> str:
    """A query whose one value is 10 x 2^doublings characters, doubled by REPLACE ("a" -> "aa"): the
    checked query's writer spells CONCAT as `CONCAT (`, which Oxigraph 0.5.13 does not parse."""
    binds = ['BIND("aaaaaaaaaa" AS ?a0)'] + [f'BIND(REPLACE(?a{i}, "a", "aa") AS ?a{i + 1})' for i in range(doublings)]
    return f"SELECT ?a{doublings} WHERE {{ {' '.join(binds)} }}"


async def literal(store: Path, work: Path, size: dict) -> list[Row]:
    """Repro 10: a query that builds an 84 MB literal in its worker: what the server keeps."""
    with Served(store, work) as server:
        async with httpx2.AsyncClient(timeout=300) as http:
            session = RawSession(http, server.url)
            await session.open()
            await session.call("sparql", {"query": "ASK { ?s ?p ?o }"})  # workers up
            rss = server.rss_mb()
            with Sampler(server.rss_mb, 0.1) as peak:
                text = result_text(await session.call("sparql", {"query": _doubled_literal(23)}))
            await asyncio.sleep(3)
            rss_after = server.rss_mb()
    note = f"answer {text[:60]!r}...; server RSS {rss:.0f} MB before, peak {peak.peak:.0f} MB; {load()}"
    return [Row("literal 84 MB in a worker: server RSS after", rss_after, rss, "MB", "<= 1.5", note)]
