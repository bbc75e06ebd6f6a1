"""The sparql tool's own costs (issue 31): checking a query, and reading an endpoint's answer.

- check: parse + check + write (kg_mcp.sparql) per query on real queries (the papers' gold queries
  and a Wikidata query with the label service), against the path it replaced, measured in the same
  run: the same lexer, a scan of its tokens for forbidden words, one rdflib parse (that path then
  sent the lexer's text). Once in this process, once through a parse worker (the server's way).
- answer memory: the peak RSS that reading an `oxigraph serve` answer of rows with 15 KB literals
  adds to a process, as the sparql tool reads it now (streamed, cut at settings.sparql_answer_mb)
  against the old way (the whole answer read, then parsed), each in a fresh process importing the
  same modules, less what a process that only imports them holds.
- bystander: a light caller's check time (p99) while 16 callers keep the checkers busy with
  1,000-token queries that take rdflib about a second each; ours (shortest query first, a worker
  kept for short queries) against the same pool serving calls in arrival order.
- pages: every page of a 5,000-row answer read through `next_cursor`, against the same pages asked of
  the store bare (ORDER BY, LIMIT, OFFSET), as a client paging by hand would.
- server under attack: peak RSS of `kg-mcp serve --sparql URL --enable-sparql` while 8 clients
  each run `SELECT ?s ?o WHERE { ?s ?p ?o }` over those rows three times, against its RSS at rest.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from bench.common import DATA, Row, free_port, kg_mcp, paired_medians, percentile, start, stop, wait_http

GOLD = {"cwq.json": ("sparql", 60), "grailqa.json": ("sparql_query", 25), "qald_10-en.json": ("sparql", 15)}
WIKIDATA_LABELS = (
    "PREFIX wd: <http://www.wikidata.org/entity/> PREFIX wdt: <http://www.wikidata.org/prop/direct/> "
    "PREFIX wikibase: <http://wikiba.se/ontology#> PREFIX bd: <http://www.bigdata.com/rdf#> "
    "SELECT ?film ?filmLabel ?date WHERE { ?film wdt:P57 wd:Q8877 ; wdt:P577 ?date . "
    "FILTER(YEAR(?date) >= 1990) SERVICE wikibase:label { bd:serviceParam wikibase:language \"en\" . } } "
    "ORDER BY DESC(?date) LIMIT 20"
)
LITERAL_KB = 15
QUERY_ALL = "SELECT ?s ?o WHERE { ?s ?p ?o }"
_OLD_WORDS = {"INSERT", "DELETE", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "WITH", "USING", "FROM", "SERVICE"}


def _queries() -> list[tuple[str, str]]:
    """(query, profile) pairs: a seeded sample of the gold queries, and the Wikidata query."""
    rng = random.Random(7)
    picked = [(WIKIDATA_LABELS, "wikidata")]
    for file, (field, n) in GOLD.items():
        entries = json.loads((DATA / "tog" / file).read_text(encoding="utf-8"))
        profile = "wikidata" if file.startswith("qald") else "freebase"
        picked += [(e[field], profile) for e in rng.sample(entries, n)]
    return picked


def check_cost(samples: int) -> list[Row]:
    from rdflib.plugins.sparql.parser import parseQuery

    from kg_mcp.sparql import MAX_QUERY_TOKENS, checked_query, policy_for
    from kg_mcp.sparql.lexing import lex
    from kg_mcp.sparql.parse_pool import ParsePool

    queries = _queries()
    policies = [policy_for(profile, remote=True) for _, profile in queries]

    def old_path(i: int) -> None:
        lexed = lex(queries[i % len(queries)][0], max_tokens=MAX_QUERY_TOKENS)
        if any(t.kind == "word" and t.text.upper() in _OLD_WORDS for t in lexed.tokens):
            return  # refused on its tokens (no gold query is)
        parseQuery(lexed.lines())

    def in_process(i: int) -> None:
        checked_query(queries[i % len(queries)][0], policies[i % len(queries)])

    pool = ParsePool(size=1)
    try:

        def in_worker(i: int) -> None:
            pool.check(queries[i % len(queries)][0], policies[i % len(queries)])

        base, ours = paired_medians(old_path, in_process, samples, warmup=5)
        base_w, ours_w = paired_medians(old_path, in_worker, samples, warmup=5)
    finally:
        pool.close()
    note = f"{len(queries)} real queries (gold CWQ/GrailQA/QALD-10 sample, a Wikidata label query); old: lex + word scan + parse"
    return [
        Row("sparql check: parse + check + write", ours * 1e3, base * 1e3, "ms", "<= 1.3", note),
        Row("sparql check in a parse worker", ours_w * 1e3, base_w * 1e3, "ms", "<= 1.5", "the same, as a server runs it"),
    ]


class _ArrivalOrder:
    """The baseline of the bystander measure: the parse pool serving waiting calls as they came,
    every worker open to any query."""

    @staticmethod
    def make():
        from kg_mcp.sparql.parse_pool import ParsePool

        class Pool(ParsePool):
            def _take(self, cost: int, long: bool = False):
                return super()._take(0, False)

        return Pool()


def bystander(seconds: float, attackers: int = 16) -> Row:
    from kg_mcp.errors import KGError
    from kg_mcp.sparql import QueryPolicy
    from kg_mcp.sparql.parse_pool import ParsePool

    heavy = "SELECT * WHERE { " + "{ } " * 495 + "}"
    light = "SELECT ?film WHERE { ?film <http://www.wikidata.org/prop/direct/P57> <http://www.wikidata.org/entity/Q8877> }"

    def measure(pool) -> float:
        pool.check(light, QueryPolicy())  # the workers started (in the background) before the attack
        while len(pool.pids()) < pool.size:
            time.sleep(0.05)
        stopping = threading.Event()

        def attack() -> None:
            while not stopping.is_set():
                try:
                    pool.check(heavy, QueryPolicy())
                except KGError:
                    pass

        threads = [threading.Thread(target=attack, daemon=True) for _ in range(attackers)]
        for thread in threads:
            thread.start()
        times: list[float] = []
        end = time.monotonic() + seconds
        try:
            while time.monotonic() < end:
                started = time.perf_counter()
                try:
                    pool.check(light, QueryPolicy())
                except KGError:  # no checker came free in time: counted at what it waited
                    pass
                times.append(time.perf_counter() - started)
                time.sleep(0.05)
        finally:
            stopping.set()
            for thread in threads:
                thread.join()
            pool.close()
        return percentile(times, 99)

    base = measure(_ArrivalOrder.make())
    ours = measure(ParsePool())
    return Row(
        f"bystander sparql check p99, {attackers} callers sending 1,000-token queries",
        ours * 1e3,
        base * 1e3,
        "ms",
        "<= 0.5",
        "3 parse workers; shortest query first, one kept for short queries vs arrival order",
    )


def _big_literals_endpoint(work: Path, rows: int) -> tuple[subprocess.Popen, str]:
    store = work / f"sparql-big-literals-{rows}"
    cli = shutil.which("oxigraph") or str(Path(sys.executable).parent / "oxigraph")
    if not store.exists():
        source = work / f"big-literals-{rows}.nt"
        text = "x" * (LITERAL_KB * 1024)
        with source.open("w", encoding="utf-8") as f:
            for i in range(rows):
                f.write(f'<http://big.test/n{i % 50}> <http://big.test/note> "{i} {text}" .\n')
        subprocess.run([cli, "load", "--location", str(store), "--file", str(source)], check=True, capture_output=True)
        source.unlink()
    port = free_port()
    server = start([cli, "serve-read-only", "--location", str(store), "--bind", f"127.0.0.1:{port}"])
    wait_http(f"http://127.0.0.1:{port}/")
    return server, f"http://127.0.0.1:{port}/query"


# VmHWM, not ru_maxrss: the latter keeps the peak of the forked parent from before the exec.
_CHILD = """
import sys
import httpx2, pyoxigraph as ox
from kg_mcp.backends.remote import RemoteBackend
from kg_mcp.ids import Vocabulary
from kg_mcp.profiles import GENERIC
from kg_mcp.settings import Settings
url, query, how = sys.argv[1], sys.argv[2], sys.argv[3]
if how == "none":  # the imports alone: what both others start from
    shown = 0
elif how == "whole":  # the old way: the answer read whole, then parsed, then cut at the row cap
    body = httpx2.post(url, data={"query": query}, headers={"Accept": "application/sparql-results+json"}, timeout=600).content
    rows = list(ox.parse_query_results(body, ox.QueryResultsFormat.JSON))
    shown = len(rows)
else:
    backend = RemoteBackend(url, GENERIC, Vocabulary(GENERIC), Settings(timeout_s=600))
    shown = len(backend.run_query(query, 200).rows)
hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(int(hwm.split()[1]) / 1024, shown)
"""


def _peak_mb(url: str, how: str) -> tuple[float, int]:
    out = subprocess.run([sys.executable, "-c", _CHILD, url, QUERY_ALL, how], check=True, capture_output=True, text=True)
    peak, shown = out.stdout.split()
    return float(peak), int(shown)


def answer_memory(work: Path, rows: int) -> list[Row]:
    server, url = _big_literals_endpoint(work, rows)
    try:
        # What reading the answer adds to a process that has imported the same modules.
        rest, _ = _peak_mb(url, "none")
        whole, whole_rows = _peak_mb(url, "whole")
        streamed, shown = _peak_mb(url, "streamed")
        attack = _server_under_attack(url)
    finally:
        stop(server)
    mb = rows * LITERAL_KB / 1024
    return [
        Row(
            f"sparql answer, {rows:,} rows x 15 KB: peak RSS added",
            max(streamed - rest, 0.1),
            whole - rest,
            "MB",
            "<= 0.5",
            f"{mb:.0f} MB answer; streamed, cut at 4 MB ({shown} rows shown) vs read whole ({whole_rows:,} rows "
            f"parsed); over {rest:.0f} MB of imports",
        ),
        attack,
    ]


def _server_under_attack(url: str, clients: int = 8, calls: int = 3) -> Row:
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    port = free_port()
    server = start(kg_mcp("serve", "--sparql", url, "--enable-sparql", "--transport", "http", "--port", str(port)))
    mcp_url = f"http://127.0.0.1:{port}/mcp"
    peak = {"kib": 0}
    stopping = threading.Event()

    def sample() -> None:
        while not stopping.is_set():
            peak["kib"] = max(peak["kib"], _status_kib(server.pid, "VmRSS"))
            time.sleep(0.05)

    async def one(i: int, cuts: list[bool]) -> None:
        async with (
            httpx2.AsyncClient(timeout=600) as http,
            Client(streamable_http_client(mcp_url, http_client=http)) as client,
        ):
            for _ in range(calls):
                result = await client.call_tool("sparql", {"query": QUERY_ALL})
                cuts.append(bool((result.structured_content or {}).get("cut")))

    async def attack() -> list[bool]:
        cuts: list[bool] = []
        async with anyio.create_task_group() as group:
            for i in range(clients):
                group.start_soon(one, i, cuts)
        return cuts

    try:
        wait_http(f"http://127.0.0.1:{port}/", timeout=120)
        anyio.run(one, -1, [])  # one call first: the parse worker started, the caches warm
        rest = _status_kib(server.pid, "VmRSS") / 1024
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        cuts = anyio.run(attack)
        stopping.set()
        sampler.join()
        hwm = max(peak["kib"], _status_kib(server.pid, "VmHWM")) / 1024
    finally:
        stop(server)
    return Row(
        f"kg-mcp serve, {clients} clients x {calls} sparql SELECT * of 15 KB rows: peak RSS",
        hwm,
        rest,
        "MB",
        "<= 6",
        f"against the server at rest; issue 31's bound 1.5 GB (before: 98 MB -> 5.3 GB); {sum(cuts)}/{len(cuts)} answers cut",
    )


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


# 5,000 of MetaQA's 5,796 comedies, horror and action films, without ORDER BY: the tool orders its pages.
FIVE_THOUSAND = "SELECT ?film ?genre WHERE { VALUES ?genre { kg:Comedy kg:Horror kg:Action } ?film :has_genre ?genre } LIMIT 5000"


def pages(work: Path, repeats: int = 3) -> Row:
    """Every page of a 5,000-row answer read through next_cursor (as many rows a page as fit the
    budget: the query checked and run, each page sorted by the engine, rows named and rendered)
    against the same pages asked of the store bare, as a client paging by hand would write them
    (ORDER BY, LIMIT and OFFSET at the tool's own page boundaries)."""
    from kg_mcp.backends import open_store
    from kg_mcp.loading import load_sources
    from kg_mcp.settings import Settings
    from kg_mcp.tools.sparql import sparql

    store_dir = work / "metaqa-store"
    if not store_dir.exists():
        load_sources([DATA / "metaqa" / "kb.txt"], store_dir, progress=False)
    backend = open_store(store_dir)
    settings = Settings()
    kg, rel = "http://kg-mcp.local/entity/", "http://kg-mcp.local/relation/"
    bare_query = (f"SELECT ?film ?genre WHERE {{ VALUES ?genre {{ <{kg}Comedy> <{kg}Horror> <{kg}Action> }} "
                  f"?film <{rel}has_genre> ?genre }} ORDER BY ?film ?genre")

    def ours(_=None) -> list[tuple[int, int]]:
        cursor, read = "", []
        while True:
            out = sparql(backend, settings, FIVE_THOUSAND, cursor)
            read.append((out.data.offset, len(out.data.rows)))
            cursor = out.data.next_cursor
            if cursor is None:
                return read

    boundaries = ours()  # the pages the tool reads, which the bare queries read too

    def bare(_):
        for offset, size in boundaries:
            list(backend.store.query(f"{bare_query} LIMIT {size} OFFSET {offset}"))

    baseline, mine = paired_medians(bare, ours, repeats, warmup=1)
    backend.close()
    rows = sum(size for _, size in boundaries)
    return Row(f"sparql: a 5,000-row answer read page by page ({len(boundaries)} pages)", mine, baseline, "s", "<= 1.5",
               f"against the same {len(boundaries)} ORDER BY/LIMIT/OFFSET queries run bare; {rows:,} rows read")


def sparql_survey(work: Path, samples: int, literal_rows: int, seconds: float) -> list[Row]:
    return check_cost(samples) + [bystander(seconds)] + answer_memory(work, literal_rows) + [pages(work)]
