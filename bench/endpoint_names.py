"""Names as typed over an endpoint without text search (`oxigraph serve`), before and after its name index.

    python -m bench.endpoint_names --work .bench-data/endpoint-names [--sample 200] [--seed 0]
    python -m bench.endpoint_names --work DIR --first-minute-only --seed 7

Loads the MetaQA KB into a local store (kg-mcp load) and into `oxigraph serve`, then runs the
lookup evaluation (kg_mcp.agents.evaluation.lookup: held-out MetaQA topic names typed as people
do) on three backends: the local store with its name index, the endpoint by label queries (the
baseline, name_index=False), the endpoint with the index built from its labels. Also prints the
index build's cost (time, queries, size) and the football example of issue 24.

The first minute: a fresh `oxigraph serve` and an empty cache, then `kg-mcp serve --sparql URL`
spawned over stdio as a scripted agent spawns it, and every case asked through MCP from the first
moment it answers: recall@5 from the first lookup on, how long each lookup took, whether it was
answered by the index. Then a second `kg-mcp serve` on the same endpoint: its first lookup. The
typed names (typos, lower case, partial, reordered, aliases) are made from the questions' topic
names by a seeded generator (`--seed`): a seed other than the one used while developing gives
cases nobody tuned on.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyoxigraph as ox

from bench.common import DATA, free_port, stop, wait_http
from bench.store_measures import metaqa_store


def oxigraph_serve(location: Path, source: Path, port: int) -> subprocess.Popen:
    cli = shutil.which("oxigraph") or str(Path(sys.executable).parent / "oxigraph")
    if not (location / "CURRENT").exists():
        subprocess.run([cli, "load", "--location", str(location), "--file", str(source)], check=True, capture_output=True)
    # Its output is not read: a pipe left full over thousands of queries would stall it.
    process = subprocess.Popen([cli, "serve-read-only", "--location", str(location), "--bind", f"127.0.0.1:{port}"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_http(f"http://127.0.0.1:{port}/", timeout=30)
    return process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--virtuoso", action="store_true", help="also a private Virtuoso: its text search, then the index")
    parser.add_argument("--first-minute-only", action="store_true", help="only the lookups from kg-mcp serve's start")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    os.environ["KG_MCP_CACHE"] = str(args.work / "cache")

    from kg_mcp.agents.evaluation.benchmarks import load_benchmark, select
    from kg_mcp.agents.evaluation.lookup import cases_for, format_lookup, run_lookup, topics_from_names
    from kg_mcp.backends import open_endpoint, open_store
    from kg_mcp.backends.endpoint_names import build_endpoint_index
    from kg_mcp.settings import Settings
    from kg_mcp.tools import find_entities

    store_dir, nt = metaqa_store(args.work), args.work / "metaqa.nt"
    if not nt.exists():
        ox.Store.read_only(str(store_dir)).dump(str(nt), format=ox.RdfFormat.N_TRIPLES, from_graph=ox.DefaultGraph())
    bench = load_benchmark("metaqa-1hop", DATA)
    questions = select(bench.questions, sample=args.sample, seed=args.seed)
    names = [n for q in questions for n in q.topics]
    # The gold of each name (entities with that exact label) from the local store, by SPARQL.
    store = open_store(store_dir, settings=Settings())
    topics, missing = topics_from_names(store, names, Settings())
    store.close()
    cases = cases_for(topics, args.seed)
    # A fresh engine with nothing cached by anyone: `oxigraph serve` on a copy made now.
    shutil.rmtree(args.work / "metaqa.oxigraph", ignore_errors=True)
    port = free_port()
    server = oxigraph_serve(args.work / "metaqa.oxigraph", nt, port)
    url = f"http://127.0.0.1:{port}/query"
    try:
        shutil.rmtree(args.work / "cache", ignore_errors=True)
        print(first_minute(url, cases, args.work / "cache"), "\n", flush=True)
        if args.first_minute_only:
            return

        def evaluate(backend, title: str, settings: Settings) -> None:
            topics, missing = topics_from_names(backend, names, settings)
            summary = run_lookup(backend, settings, cases_for(topics, args.seed))
            summary.skipped = missing
            print(format_lookup(summary, title), "\n", flush=True)

        settings = Settings()
        store = open_store(store_dir, settings=settings)
        evaluate(store, "local store (name index)", settings)
        store.close()

        baseline = Settings(name_index=False)
        endpoint = open_endpoint(url, settings=baseline)
        evaluate(endpoint, "oxigraph serve, before (label queries)", baseline)

        # The build's cost, measured alone (fresh cache), then the same index used through open_endpoint.
        path = Path(tempfile.mkdtemp(dir=args.work)) / "names.sqlite"
        report = build_endpoint_index(endpoint._solutions, path, url=url, graphs=[], profile=endpoint.profile,
                                      languages=settings.languages, degree_cap=settings.degree_cap, progress=False)
        endpoint.close()
        print(f"build on oxigraph serve (MetaQA KB): {report.summary()}; {report.names:,} index rows\n", flush=True)
        shutil.rmtree(args.work / "cache", ignore_errors=True)
        started = time.perf_counter()
        endpoint = open_endpoint(url, settings=settings)
        endpoint.prepare_lookups()  # as kg-mcp serve does at its start
        find_entities(endpoint, settings, "Jaws", 5)
        endpoint.names.wait()
        print(f"index built in the background from the endpoint's opening: {time.perf_counter() - started:.1f} s", flush=True)
        evaluate(endpoint, "oxigraph serve, after (name index from its labels)", settings)
        endpoint.close()
        if args.virtuoso:
            virtuoso_rows(args.work, nt, evaluate)
    finally:
        stop(server)


def first_minute(url: str, cases, cache: Path) -> str:
    """Every case through `kg-mcp serve --sparql URL` (stdio) from the moment it answers, then the first
    lookup of a second server on the same endpoint; a table of recall@5 by when the lookup was made."""
    import asyncio

    from kg_mcp.agents.kg_client import KGClient

    environment = {**os.environ, "KG_MCP_CACHE": str(cache)}
    command = f"{sys.executable} -m kg_mcp serve --sparql {url}"

    async def ask_all(asked):
        spawned = time.perf_counter()
        async with KGClient(_stdio(command, environment)) as kg:
            ready = time.perf_counter() - spawned
            for case in asked:
                result = await kg.call_tool("find_entities", {"name": case.query, "limit": 5})
                ids = [e["id"] for e in (result.data or {}).get("entities", [])]
                method = (result.data or {}).get("method", "")
                yield case, any(i in case.topic.gold for i in ids), time.perf_counter() - spawned, result.seconds, method, ready

    async def run():
        first = [row async for row in ask_all(cases)]
        second = [row async for row in ask_all(cases[:1])]
        return first, second

    first, second = asyncio.run(run())
    ready = first[0][5]
    indexed = [r for r in first if r[4].startswith("name index")]
    waited = [r for r in first if "waited" in r[4]]
    lines = [
        f"from kg-mcp serve's start (fresh oxigraph serve, empty cache): {len(cases)} cases, "
        f"{len({c.topic.name for c in cases})} topic names; the server answered its first request "
        f"{ready:.1f} s after it was spawned",
        "| lookups | cases | recall@5 | by the name index | p50 ms | max ms |",
        "|---|---|---|---|---|---|",
    ]

    def row(title, rows):
        seconds = sorted(r[3] * 1000 for r in rows)
        hits = sum(r[1] for r in rows)
        return (f"| {title} | {len(rows)} | {hits / len(rows):.1%} | {sum(r[4].startswith('name index') for r in rows)} "
                f"| {seconds[len(seconds) // 2]:.1f} | {seconds[-1]:.0f} |")

    lines.append(row("all, from the first", first))
    lines.append(row("the first 10", first[:10]))
    late = [r for r in first if r[2] - ready >= 0]
    lines.append(row("the rest", late[10:]) if len(late) > 10 else "")
    by_kind = {}
    for r in first:
        by_kind.setdefault(r[0].kind, []).append(r)
    lines += [row(kind, rows) for kind, rows in by_kind.items()]
    first_indexed = f"{indexed[0][2]:.1f} s after spawning" if indexed else "never"
    lines.append(f"first lookup answered by the index: {first_indexed}; lookups that waited for it: {len(waited)}"
                 + (f" (the first: {waited[0][4]})" if waited else ""))
    case, hit, _, seconds, method, ready2 = second[0]
    lines.append(f"a second kg-mcp serve on the same endpoint: ready in {ready2:.1f} s, first lookup "
                 f"{seconds * 1000:.1f} ms, {'found' if hit else 'missed'}, by {method}")
    return "\n".join(line for line in lines if line)


def _stdio(command: str, environment: dict[str, str]):
    import shlex

    from mcp import StdioServerParameters

    program, *rest = shlex.split(command)
    return StdioServerParameters(command=program, args=rest, env=environment)


def virtuoso_rows(work: Path, nt: Path, evaluate) -> None:
    """The same on a private Virtuoso (its row limit, 10,000, under the index's page of 20,000): its
    own text search, then the index `kg-mcp index` would build."""
    from bench.virtuoso import Virtuoso
    from kg_mcp.backends import open_endpoint
    from kg_mcp.backends.endpoint_names import BUILT_BY_COMMAND, build_endpoint_index, endpoint_index_path
    from kg_mcp.settings import Settings

    graph = "http://example.org/graph/metaqa"
    shutil.rmtree(work / "virtuoso", ignore_errors=True)
    (work / "virtuoso").mkdir()
    server = Virtuoso((work / "virtuoso").resolve(), sql_port=free_port(), http_port=free_port()).start()
    try:
        server.load(nt, graph)
        settings = Settings(graphs=[graph])
        endpoint = open_endpoint(server.endpoint, settings=settings)
        evaluate(endpoint, "Virtuoso, its text search", settings)
        path = endpoint_index_path(server.endpoint, [graph])
        report = build_endpoint_index(endpoint._solutions, path, url=server.endpoint, graphs=[graph],
                                      profile=endpoint.profile, languages=settings.languages,
                                      degree_cap=settings.degree_cap, by=BUILT_BY_COMMAND, progress=False)
        endpoint.close()
        print(f"build on Virtuoso (MetaQA KB): {report.summary()}; {report.names:,} index rows\n", flush=True)
        endpoint = open_endpoint(server.endpoint, settings=settings)
        evaluate(endpoint, "Virtuoso, name index built by kg-mcp index", settings)
        endpoint.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
