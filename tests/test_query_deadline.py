"""Local sparql queries run in worker processes: a runaway query is stopped at the deadline."""

from __future__ import annotations

import os

import pyoxigraph as ox
from mcp import Client

from kg_mcp.backends import open_demo, open_store
from kg_mcp.backends._rows import capped_rows
from kg_mcp.server import build_server
from kg_mcp.settings import Settings

# Four copies of the store joined with each other: about 10^12 rows to count, hours of work.
RUNAWAY = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l }"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_runaway_query_is_stopped_and_the_next_call_answers():
    backend = open_demo(settings=Settings(timeout_s=1, sparql_tool=True))
    try:
        async with Client(build_server(backend, backend.settings)) as client:
            first = await client.call_tool("sparql", {"query": "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"})
            assert not first.is_error, first.content
            workers = backend.query_pool().pids()

            result = await client.call_tool("sparql", {"query": RUNAWAY})
            assert result.is_error
            assert "did not finish within the 1 s limit" in result.content[0].text

            # The worker that ran it was killed (no CPU goes on), and another took its place.
            stopped = workers - backend.query_pool().pids()
            assert len(stopped) == 1
            assert not _alive(stopped.pop())

            after = await client.call_tool("sparql", {"query": "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"})
            assert not after.is_error, after.content
            assert after.structured_content["rows"][0][0]["id"] == str(len(backend.store))
    finally:
        backend.close()
    assert not any(_alive(pid) for pid in workers)


def test_worker_results_equal_the_stores_own(metaqa_store_dir):
    """Terms cross the process boundary as plain data and come back equal: IRIs, literals with a
    language or a datatype, blank nodes, quoted triples, unbound values; the total past the cap."""
    backend = open_store(metaqa_store_dir)
    query = """
        SELECT ?s ?p ?o ?tagged ?typed ?blank ?quoted ?unbound WHERE {
          ?s ?p ?o
          BIND(STRLANG(STR(?o), "en") AS ?tagged)
          BIND(STRLEN(STR(?s)) AS ?typed)
          BIND(BNODE() AS ?blank)
          BIND(<<( ?s ?p ?o )>> AS ?quoted)
          OPTIONAL { ?s <http://example.org/none> ?unbound }
        } LIMIT 40
    """
    try:
        got = backend.run_query(query, 25)
        want = capped_rows(backend.store.query(query), 25)
        assert got.variables == want.variables and got.total == want.total == 40
        blanks = got.variables.index("blank")
        for mine, theirs in zip(got.rows, want.rows, strict=True):
            assert isinstance(mine[blanks], ox.BlankNode)  # fresh per query: equal kinds, not ids
            assert [v for i, v in enumerate(mine) if i != blanks] == [v for i, v in enumerate(theirs) if i != blanks]
        assert backend.run_query("ASK { ?s ?p ?o }", 5).boolean is True
    finally:
        backend.close()
