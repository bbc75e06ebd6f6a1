"""A team deployment under load (bench/team_rig.py: nginx from deploy/, replicas, Redis).

    python -m bench.team --store S                 the issue's done-when: 3 replicas, 6 clients of mixed
                                                   calls for 40 s, one replica SIGKILLed at 15 s
    python -m bench.team --store S --replicas 1,2,4 --seconds 20   calls/s with 1, 2 and 4 replicas

Each client loops over light calls (find_entities, search, get_relations), long ones (follow,
verify) and kgr_search traversals of four steps (a topic entity, a neighbour, two backtracks),
each traversal under its own session id, its steps spread over the replicas by nginx. Every
traversal's answers are compared with the same traversal run on one in-process server: equal
answers mean the tree travelled whole from replica to replica. A call fails when it raises or its
result is an error.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import ssl
import statistics
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench.common import percentile
from bench.team_rig import Team, tool_counts

LIGHT = [
    ("find_entities", {"name": "Catch Me If You Can"}),
    ("search", {"entity": "kg:Catch_Me_If_You_Can"}),
    ("get_relations", {"entity": "kg:Tom_Hanks"}),
]
LONG = [
    ("follow", {"entity": "kg:Catch_Me_If_You_Can", "path": ["directed_by", "~directed_by", "has_genre"]}),
    ("verify", {"claims": [{"subject": "kg:Catch_Me_If_You_Can", "relation": "directed_by", "object": "kg:Steven_Spielberg"},
                           {"subject": "kg:Forrest_Gump", "relation": "starred_actors", "object": "kg:Tom_Hanks"}]}),
]
# The clients are one caller (one token, one address): the environment file's rate limit would hold them.
UNLIMITED = {"KG_MCP_RATE_LIMIT": "0"}
TRAVERSALS = [
    ("kg:Catch_Me_If_You_Can", "who directed the films that starred the lead of Catch Me If You Can"),
    ("kg:Forrest_Gump", "what genre are the films written by the writer of Forrest Gump"),
    ("kg:Steven_Spielberg", "which actors starred in films directed by Steven Spielberg"),
]


@dataclass
class Tally:
    calls: int = 0
    failures: list[str] = field(default_factory=list)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    traversals: list[tuple[int, list[dict]]] = field(default_factory=list)  # (which, the steps' answers)

    def add(self, tool: str, seconds: float) -> None:
        self.calls += 1
        self.latencies.setdefault(tool, []).append(seconds)


async def call(client: Client, tool: str, arguments: dict, tally: Tally | None = None) -> dict:
    started = time.perf_counter()
    try:
        result = await client.call_tool(tool, arguments)
    except Exception as error:  # noqa: BLE001 - a failed call is what is counted
        if tally is not None:
            tally.calls += 1
            tally.failures.append(f"{tool}: {type(error).__name__}: {error}"[:300])
        return {}
    if tally is not None:
        tally.add(tool, time.perf_counter() - started)
        if result.is_error:
            tally.failures.append(f"{tool}: {result.content[0].text[:300]}")
    return result.structured_content or {}


async def traverse(client: Client, which: int, tally: Tally | None = None) -> list[dict]:
    """Four steps of one traversal: the topic, its best neighbour, then two backtracks."""
    topic, question = TRAVERSALS[which]
    session = uuid.uuid4().hex
    first = await call(client, "kgr_search", {"entity": topic, "question": question, "session": session, "top_k": 5}, tally)
    neighbour = next((t["object"]["id"] if t["subject"]["id"] == first["entity"]["id"] else t["subject"]["id"]
                      for t in first.get("triples", [])), None) if first else None
    steps = [first]
    if neighbour is not None:
        steps.append(await call(client, "kgr_search", {"entity": neighbour, "session": session, "top_k": 5}, tally))
    for _ in range(2):
        steps.append(await call(client, "kgr_search", {"backtrack": True, "session": session, "top_k": 5}, tally))
    return steps


def comparable(step: dict) -> dict:
    """What a step's answer says about the tree: where it is, how it got there, what it shows."""
    return {k: step.get(k) for k in ("entity", "parent", "via", "backtracked_from", "climbed", "exhausted", "path", "triples")}


async def reference_traversals(store: Path) -> list[list[dict]]:
    """Each traversal on one in-process server over the same store: the answers to expect."""
    from kg_mcp.backends import open_store
    from kg_mcp.server import build_server

    backend = open_store(store)
    try:
        async with Client(build_server(backend)) as client:
            return [[comparable(s) for s in await traverse(client, i)] for i in range(len(TRAVERSALS))]
    finally:
        backend.close()


def client_for(url: str, ca_file: Path | None, mode: str = "auto", token: str | None = None) -> tuple[Client, httpx2.AsyncClient]:
    verify = ssl.create_default_context(cafile=str(ca_file)) if ca_file else True
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(verify=verify, timeout=120, headers=headers)
    return Client(streamable_http_client(url, http_client=http), mode=mode), http


async def mixed_client(url: str, ca_file: Path | None, index: int, until: float, tally: Tally, mode: str = "auto",
                       token: str | None = None) -> None:
    client, http = client_for(url, ca_file, mode, token)
    try:
        async with client:
            turn = 0
            while time.monotonic() < until:
                tool, arguments = LIGHT[(index + turn) % len(LIGHT)]
                await call(client, tool, arguments, tally)
                if turn % 3 == 0:
                    tool, arguments = LONG[(index + turn) % len(LONG)]
                    await call(client, tool, arguments, tally)
                if turn % 4 == index % 4:
                    which = (index + turn) % len(TRAVERSALS)
                    tally.traversals.append((which, [comparable(s) for s in await traverse(client, which, tally)]))
                turn += 1
    finally:
        await http.aclose()


async def run_load(url: str, ca_file: Path | None, clients: int, seconds: float, during=None, legacy: int = 0,
                   token: str | None = None) -> Tally:
    """`clients` mixed clients for `seconds` (the last `legacy` of them with the pre-2026 handshake),
    each sending `token`; `during(elapsed_task)`: a coroutine run alongside (the replica killer)."""
    tally, until = Tally(), time.monotonic() + seconds
    jobs = [mixed_client(url, ca_file, i, until, tally, "legacy" if i >= clients - legacy else "auto", token)
            for i in range(clients)]
    if during is not None:
        jobs.append(during())
    await asyncio.gather(*jobs)
    return tally


def summary(tally: Tally, seconds: float) -> str:
    every = [x for values in tally.latencies.values() for x in values]
    return (f"{tally.calls} calls in {seconds:.0f} s ({tally.calls / seconds:.1f}/s), {len(tally.failures)} failed, "
            f"p50 {statistics.median(every) * 1e3:.0f} ms, p99 {percentile(every, 0.99) * 1e3:.0f} ms, "
            f"{len(tally.traversals)} traversals")


def done_when(store: Path, work: Path, seconds: float, kill_at: float) -> int:
    expected = asyncio.run(reference_traversals(store))
    with Team(store, work, 3, settings=UNLIMITED) as team:
        async def killer():
            await asyncio.sleep(kill_at)
            team.kill(1)
            print(f"replica 1 (port {team.ports[1]}) SIGKILLed at {kill_at:.0f} s", flush=True)

        tally = asyncio.run(run_load(team.url, team.ca_file, 6, seconds, killer, legacy=1, token=team.token))
        print(f"{summary(tally, seconds)}; load average {os.getloadavg()[0]:.2f}")
        wrong = [(which, steps) for which, steps in tally.traversals if steps != expected[which]]
        print(f"traversals answered as on one process: {len(tally.traversals) - len(wrong)} of {len(tally.traversals)}")
        for failure in tally.failures[:10]:
            print("  failed:", failure)
        retried = [line for line in team.access_log() if "," in line[2]]
        print(f"requests nginx sent again to another replica: {len(retried)}")
        for i in (0, 2):
            print(f"replica {i}: /healthz {team.get(i, '/healthz')[0]}, /readyz {team.get(i, '/readyz')[0]}, "
                  f"kgr_search calls {tool_counts(team.get(i, '/metrics')[1], 'kgr_search')}")
    return 1 if tally.failures or wrong else 0


def replicas_rate(store: Path, work: Path, counts: list[int], seconds: float, clients: int) -> None:
    """Calls/s for each replica count, and its ratio to the first count's (the baseline, same run)."""
    baseline = None
    for n in counts:
        with Team(store, work / f"r{n}", n, settings=UNLIMITED) as team:
            asyncio.run(run_load(team.url, team.ca_file, clients, 3, token=team.token))  # warm-up: connections, caches
            cpu = time.process_time()
            tally = asyncio.run(run_load(team.url, team.ca_file, clients, seconds, token=team.token))
            rate = tally.calls / seconds
            baseline = baseline or rate
            print(f"{n} replica(s), {clients} clients: {summary(tally, seconds)}; {rate / baseline:.2f}x "
                  f"{counts[0]} replica(s); the clients' own CPU {time.process_time() - cpu:.1f} s; "
                  f"load average {os.getloadavg()[0]:.2f}", flush=True)


def main() -> int:
    import logging

    logging.getLogger("httpx2").setLevel(logging.WARNING)  # one line per request otherwise
    parser = argparse.ArgumentParser(prog="python -m bench.team", description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True, help="a store made by kg-mcp load (MetaQA's)")
    parser.add_argument("--work", type=Path, default=Path(".bench") / "team")
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--kill-at", type=float, default=15.0)
    parser.add_argument("--replicas", default="", help="e.g. 1,2,4: calls/s for each count instead of the done-when run")
    parser.add_argument("--clients", type=int, default=6)
    args = parser.parse_args()
    if args.replicas:
        replicas_rate(args.store, args.work, [int(n) for n in args.replicas.split(",")], args.seconds, args.clients)
        return 0
    return done_when(args.store, args.work, args.seconds, args.kill_at)


if __name__ == "__main__":
    raise SystemExit(main())
