"""Each named entity's degree, for the name index to record: counted in batches by SPARQL on an
endpoint, read from the indexes of a local store.

With degrees in the index a lookup ranks its candidates without counting their edges, which on an
endpoint is a query per candidate and on a large store a read per candidate that mostly waits for
the disk. Counts are the same as `_queries.degree`: visible edges, each direction up to a cap.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pyoxigraph as ox
from tqdm import tqdm

from kg_mcp.backends import _queries as q
from kg_mcp.backends import store_patterns
from kg_mcp.errors import EndpointError
from kg_mcp.names.build import set_degrees
from kg_mcp.profiles import Profile

log = logging.getLogger(__name__)

Solutions = Callable[[str], Sequence]


def count_degrees(
    run: Solutions, profile: Profile, entities: list[str], cap: int, batch: int, progress: bool = True
) -> Iterator[tuple[str, int]]:
    """(entity, visible edges in both directions, each direction at most `cap`) for each of `entities`."""
    with tqdm(desc="degrees", total=len(entities), unit=" entities", unit_scale=True, file=sys.stderr,
              disable=None if progress else True) as bar:
        for i in range(0, len(entities), batch):
            nodes = [ox.NamedNode(e) for e in entities[i : i + batch]]
            yield from _batch_degrees(run, profile, nodes, cap)
            bar.update(len(nodes))


def whole_degrees(run: Solutions, profile: Profile, cap: int) -> dict[str, int] | None:
    """Every node's degree as `count_degrees` counts it, by one aggregate query per direction over the
    whole KG: quicker on a small one than a query per batch of entities. None when the engine
    refuses it (too big, a time limit): then count in batches."""
    visible = q.visible(profile, "p", ox.NamedNode("urn:kg-mcp:any"))
    counts: dict[str, int] = {}
    try:
        for pattern in ("?x ?p ?o", "?o ?p ?x FILTER(isIRI(?x))"):
            for s in run(f"SELECT ?x (COUNT(*) AS ?n) WHERE {{ {pattern} {visible} }} GROUP BY ?x"):
                x, n = s["x"], s["n"]
                if isinstance(x, ox.NamedNode) and n is not None:
                    counts[x.value] = counts.get(x.value, 0) + min(int(n.value), cap)
    except EndpointError:
        log.info("the endpoint refused to count every degree at once: counting them in batches")
        return None
    return counts


def _batch_degrees(run: Solutions, profile: Profile, nodes: list[ox.NamedNode], cap: int) -> list[tuple[str, int]]:
    if len(nodes) == 1:  # alone, a hub is counted up to the cap only
        return [(nodes[0].value, _count(run, q.degree(profile, nodes[0], cap)))]
    visible = q.visible(profile, "p", ox.NamedNode("urn:kg-mcp:any"))
    values = " ".join(str(n) for n in nodes)
    query = (
        f"SELECT ?x ?d (COUNT(*) AS ?n) WHERE {{ VALUES ?x {{ {values} }} "
        f'{{ {{ ?x ?p ?o BIND("out" AS ?d) }} UNION {{ ?o ?p ?x BIND("in" AS ?d) }} {visible} }} }} GROUP BY ?x ?d'
    )
    counts: dict[str, int] = {}
    try:
        for s in run(query):
            if s["x"] is not None and s["n"] is not None:
                counts[s["x"].value] = counts.get(s["x"].value, 0) + min(int(s["n"].value), cap)
    except EndpointError:  # hubs in the batch made it too slow: halves, down to one entity
        half = len(nodes) // 2
        return _batch_degrees(run, profile, nodes[:half], cap) + _batch_degrees(run, profile, nodes[half:], cap)
    return [(n.value, counts.get(n.value, 0)) for n in nodes]


def _count(run: Solutions, query: str) -> int:
    for solution in run(query):
        return int(solution["n"].value) if solution["n"] is not None else 0
    return 0


def store_degrees(store: ox.Store, profile: Profile, entities: list[str], cap: int, progress: bool = True) -> Iterator[tuple[str, int]]:
    """(entity, degree) as `count_degrees` counts them, read from a local store's indexes: no query
    to parse and plan per batch, and a hub's edges are read only up to the cap."""
    with tqdm(desc="degrees", total=len(entities), unit=" entities", unit_scale=True, file=sys.stderr,
              disable=None if progress else True) as bar:
        for i, entity in enumerate(entities):
            yield entity, store_patterns.degree(store, ox.NamedNode(entity), profile.hidden_around(entity), cap)
            if i % 10_000 == 9_999:
                bar.update(10_000)
        bar.update(len(entities) % 10_000)


def add_store_degrees(index_file: Path, store: ox.Store, profile: Profile, cap: int, progress: bool = True) -> float:
    """Record degrees in a store's name index file (a copy is filled, then renamed over it); returns seconds."""
    started = time.perf_counter()
    partial = index_file.with_name(f".{index_file.name}.{os.getpid()}.degrees")
    shutil.copyfile(index_file, partial)
    try:
        connection = sqlite3.connect(partial)
        try:
            connection.executescript("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF;")
            entities = [e for (e,) in connection.execute("SELECT DISTINCT entity FROM names ORDER BY entity")]
            set_degrees(connection, store_degrees(store, profile, entities, cap, progress))
            connection.execute("INSERT OR REPLACE INTO meta VALUES ('degree_cap', ?)", (str(cap),))
            connection.commit()
        finally:
            connection.close()
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, index_file)
    seconds = time.perf_counter() - started
    log.info("degrees of %d entities recorded in %s in %.1f s", len(entities), index_file, seconds)
    return seconds
