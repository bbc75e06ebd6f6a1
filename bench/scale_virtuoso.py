"""Target 7 on an engine: the Freebase-shaped KG in a private Virtuoso, served with `--profile freebase`.

One size per run (1M for a quick look, 10M for docs/stores/scale.md). The file is bulk-loaded into a
Virtuoso started on loopback (bench/virtuoso.py, the tests' own setup) with buffers for millions
of triples; its load rate is compared with pyoxigraph's `Store.bulk_load` of the same file. Then
the scale step's tool calls (bench/scale_measures.latencies) are timed through the endpoint, each
p50 against the same call on the local store of the same file, opened read-only in this run.
Before the timings, a two-hop question through a mediator node is walked on the endpoint (the
walk is printed, and the step fails if it goes wrong).
"""

from __future__ import annotations

import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import Row, bulk_load_code, free_port, load_code, percentile, timed_child
from bench.freebase_shape import Layout, entity_name, mid, write_freebase
from bench.scale_measures import size_label
from bench.tool_vs_bare import latencies
from bench.virtuoso import Virtuoso, installed
from kg_mcp.backends import Backend, open_endpoint, open_store
from kg_mcp.settings import Settings
from kg_mcp.tools import find_entities, search
from kg_mcp.tools.follow import follow

GRAPH = "urn:kg-mcp:bench:freebase"
# 8 KB pages: 2.7 GB of buffers, Virtuoso's own advice for a machine with 4 GB to spare (its
# packaged ini's table); the default 20,000 (160 MB) would make a 10M load write pages out constantly.
BUFFERS, DIRTY_BUFFERS = 340_000, 250_000
# The local store answers find_entities from its name index, which the scale stores of earlier runs
# lack and opening them would build (minutes, written into the store); Virtuoso answers it from its
# text index. Not the same work: find_entities is timed on Virtuoso only and printed, not a row.
NOT_COMPARED = frozenset({"find_entities"})
SPOUSES, SPOUSE = "people.person.spouse_s", "people.marriage.spouse"


def scale_virtuoso(work: Path, triples: int, calls: int, engine_dir: Path) -> list[Row]:
    """Rows: Virtuoso's load rate, then each tool's p50 through Virtuoso against the local store's."""
    problem = installed()
    if problem:
        raise SystemExit(problem)
    label = size_label(triples)
    source = write_freebase(work / f"freebase-{label}.nt", triples)
    store_dir = work / f"freebase-{label}.store"
    if not store_dir.exists():
        timed_child(load_code(source, store_dir))
    settings = Settings(name_index=False)
    local = {
        name: (p50, p99)
        for name, p50, p99 in latencies(
            open_store(store_dir, settings=settings), settings, triples, calls, NOT_COMPARED
        )
    }
    engine_dir = engine_dir.resolve()  # Virtuoso runs in its database folder: paths in its ini are absolute
    engine_dir.mkdir(parents=True, exist_ok=True)
    db = Path(tempfile.mkdtemp(prefix=f"virtuoso-{label}-", dir=engine_dir))
    server = Virtuoso(
        db,
        sql_port=free_port(),
        http_port=free_port(),
        buffers=BUFFERS,
        dirty_buffers=DIRTY_BUFFERS,
        niceness=10,
    )
    try:
        server.start()
        load_s, index_s = server.load(source, GRAPH, timeout=None)
        _say(f"Virtuoso loaded {label} in {load_s:.0f} s, text index {index_s:.0f} s")
        remote = open_endpoint(server.url(GRAPH), profile="freebase", settings=settings)
        walk_through_a_mediator(remote, settings, triples)
        floor = [_seconds(lambda: remote._boolean("ASK { }")) for _ in range(calls)]
        _say(
            f"a bare ASK through the endpoint (each tool sends one or more queries): p50 {percentile(floor, 0.5) * 1e3:.1f} ms"
        )
        remote_times = latencies(remote, settings, triples, calls)
    finally:
        server.stop()
        shutil.rmtree(db, ignore_errors=True)
    bulk_s = _bulk_load_seconds(source, engine_dir)
    rows = [
        Row(
            f"scale virtuoso {label}: load (triples/s)",
            triples / (load_s + index_s),
            triples / bulk_s,
            "t/s",
            ">= 0.5",
            f"Virtuoso {load_s:.0f} s + text index {index_s:.0f} s (NumberOfBuffers {BUFFERS:,}, MaxDirtyBuffers "
            f"{DIRTY_BUFFERS:,}, nice 10); baseline: pyoxigraph Store.bulk_load {bulk_s:.0f} s",
        )
    ]
    for name, p50, p99 in remote_times:
        if name in local:
            base, base_p99 = local[name]
            rows.append(
                Row(
                    f"scale virtuoso {label}: {name} p50",
                    p50 * 1e3,
                    base * 1e3,
                    "ms",
                    "<= 30",
                    f"p99 {p99 * 1e3:.1f} ms; baseline: local store p50 (p99 {base_p99 * 1e3:.1f} ms)",
                )
            )
        else:  # no baseline measured in this run: not a row of the table
            _say(
                f"{label} {name} through Virtuoso (not compared): p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms"
            )
            continue
        _say(f"{rows[-1].measure}: {rows[-1].ours:.4g} ms vs {rows[-1].baseline:.4g} ms; {rows[-1].note}")
    return rows


def walk_through_a_mediator(backend: Backend, settings: Settings, triples: int) -> None:
    """A married person found by name, the marriage (an unnamed mediator) and the spouse, hop by hop
    with `search` and in one `follow`; prints what a model would see, raises if anything is off."""
    start, end = Layout(triples).kind_range(0)
    rng = random.Random(7)
    for _ in range(200):  # a fifth of the people are married
        person = rng.randrange(start, end)
        hop1 = search(backend, settings, mid(person), "outgoing", [SPOUSES])
        if hop1.data.rows:
            break
    else:
        raise RuntimeError("no married person among 200 random people")
    found = find_entities(backend, settings, entity_name(person))
    _check(
        mid(person) in found.text,
        f"find_entities did not find {entity_name(person)!r} ({mid(person)})",
        found.text,
    )
    marriages = [row.value for row in hop1.data.rows]
    for marriage in marriages:
        _check(
            marriage.id.startswith("m.0") and "unnamed mediator node" in marriage.label,
            "mediator label",
            hop1.text,
        )
    spouses = {
        row.value.id
        for m in marriages
        for row in search(backend, settings, m.id, "outgoing", [SPOUSE]).data.rows
    }
    # Keep the path back to the person: the marriages' spouse rows above name them too.
    walked = follow(backend, settings, mid(person), [SPOUSES, SPOUSE], exclude_through="none")
    _check(
        {e.entity.id for e in walked.data.entities} == spouses and spouses, "follow vs search", walked.text
    )
    for text in (found.text, hop1.text, walked.text):
        _check("<http" not in text, "ids are not compact", text)
    _say(
        f"two hops through a mediator from {entity_name(person)!r}:\n{found.text}\n\n{hop1.text}\n\n{walked.text}"
    )


def _check(ok: object, what: str, shown: str) -> None:
    if not ok:
        raise RuntimeError(f"{what}:\n{shown[:1500]}")


def _bulk_load_seconds(source: Path, engine_dir: Path) -> float:
    """pyoxigraph's bare bulk load of the same file into a scratch store, in a fresh process."""
    target = Path(tempfile.mkdtemp(prefix="bulk-", dir=engine_dir))
    try:
        seconds, _ = timed_child(bulk_load_code(source, target))
        return seconds
    finally:
        shutil.rmtree(target, ignore_errors=True)


def _seconds(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _say(line: str) -> None:
    print(f"[scale-virtuoso] {line}", file=sys.stderr, flush=True)
