"""Engine behaviour seen on a real Virtuoso (and `oxigraph serve` beside it), each handled and tested.

- Virtuoso's blank nodes (`nodeID://b10000`) are read, by the sparql tool and the other tools.
- Its silent row cap (`ResultSetMaxRows`, 5,000 in the test ini) is reported as "possibly cut".
- Its own time limits: an "anytime" partial answer (HTTP 200 flagged by X-SQL-State) is marked
  PARTIAL by the sparql tool and is an error for the other tools, never a complete empty result;
  a query it refuses for its estimated cost is a clear error, not retried.
- No pyoxigraph result iterator is dropped on a thread other than the one that made it.
- `info` and kg://stats give numbers on an endpoint, saying whether they are exact or lower bounds.
"""

from __future__ import annotations

import gc
import json
import sys

import pytest
from click.testing import CliRunner
from conftest import ENGINES, VIRTUOSO_MAX_ROWS, WIKIDATA_SAMPLE
from mcp import Client

from kg_mcp.backends import open_endpoint
from kg_mcp.errors import EndpointError
from kg_mcp.server import build_server
from kg_mcp.settings import Settings
from kg_mcp.tools import explore_kg, get_relations, search, sparql

X = "http://x.test/"
HUB_EDGES = 3000


@pytest.fixture(scope="module")
def quirks_nt(tmp_path_factory):
    """Blank nodes, and a hub whose pairs of neighbours take seconds to count."""
    path = tmp_path_factory.mktemp("quirks") / "quirks.nt"
    lines = [
        f"<{X}film> <{X}award> _:nomination .",
        f'_:nomination <{X}category> "best score" .',
        f"_:nomination <{X}year> <{X}y1975> .",
        f'<{X}film> <http://www.w3.org/2000/01/rdf-schema#label> "The Film" .',
    ]
    lines += [f"<{X}n{i}> <{X}in> <{X}hub> ." for i in range(HUB_EDGES)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module", params=ENGINES)
def engine_url(request, engine_endpoints, quirks_nt):
    return request.param, engine_endpoints(request.param, "quirks", quirks_nt)


def _with_params(url: str, params: str) -> str:
    return url + ("&" if "?" in url else "?") + params


def test_blank_nodes_are_read_by_the_sparql_tool(engine_url):
    _, url = engine_url
    backend = open_endpoint(url, settings=Settings(sparql_tool=True))
    out = sparql(backend, backend.settings, f"SELECT ?n ?c WHERE {{ <{X}film> <{X}award> ?n . ?n <{X}category> ?c }}")
    assert out.data.total == 1
    node, category = out.data.rows[0]
    assert node.kind == "blank" and node.id.startswith("_:") and "nodeID" not in node.id
    assert category.id == "best score"


def test_blank_nodes_are_read_by_the_other_tools(engine_url):
    _, url = engine_url
    backend = open_endpoint(url)
    out = search(backend, Settings(), f"<{X}film>", "outgoing", [f"<{X}award>"])
    (row,) = out.data.rows
    assert row.value.kind == "blank" and row.value.id.startswith("_:")
    assert "nodeID" not in out.text


def test_no_result_iterator_is_dropped_on_another_thread(engine_url):
    """Tools run in the SDK's worker threads; dropping a pyoxigraph iterator elsewhere is an error."""
    _, url = engine_url
    backend = open_endpoint(url, settings=Settings(sparql_tool=True))
    problems: list[str] = []
    previous = sys.unraisablehook
    sys.unraisablehook = lambda u: problems.append(repr(u.exc_value))
    try:

        async def calls():
            async with Client(build_server(backend, backend.settings)) as client:
                ok = await client.call_tool("sparql", {"query": f"SELECT * WHERE {{ ?s <{X}award> ?o }}"})
                bad = await client.call_tool("sparql", {"query": "SELECT * WHERE { ?s ?p }"})
                walked = await client.call_tool("search", {"entity": f"<{X}film>"})
                return ok, bad, walked

        import anyio

        ok, bad, walked = anyio.run(calls)
        gc.collect()
    finally:
        sys.unraisablehook = previous
    assert not ok.is_error and "_:" in ok.content[0].text
    assert bad.is_error and not walked.is_error
    assert problems == []


def test_virtuoso_row_cap_is_reported_as_possibly_cut(engine_endpoints):
    backend = open_endpoint(engine_endpoints("virtuoso", "wikidata", WIKIDATA_SAMPLE), settings=Settings(sparql_tool=True))
    out = sparql(backend, backend.settings, "SELECT ?s ?p ?o WHERE { ?s ?p ?o }")
    assert out.data.endpoint_row_limit == VIRTUOSO_MAX_ROWS
    assert out.data.total is None and out.data.truncated
    assert f"at least {VIRTUOSO_MAX_ROWS:,} rows, possibly cut" in out.text
    # Below the cap the same engine's answers are complete and counted.
    small = sparql(backend, backend.settings, "SELECT ?s WHERE { ?s ?p ?o } LIMIT 300")
    assert small.data.total == 300 and small.data.endpoint_row_limit is None
    assert "possibly cut" not in small.text


def test_oxigraph_serve_has_no_row_cap(engine_endpoints):
    backend = open_endpoint(engine_endpoints("oxigraph", "wikidata", WIKIDATA_SAMPLE), settings=Settings(sparql_tool=True))
    out = sparql(backend, backend.settings, "SELECT ?s WHERE { ?s ?p ?o } LIMIT 7000")
    assert out.data.total == 7000 and out.data.endpoint_row_limit is None


# Millions of pairs, with the hub named: a cost Virtuoso accepts, a run longer than the test's 300 ms.
PAIRS = f"SELECT (COUNT(*) AS ?n) WHERE {{ ?a <{X}in> <{X}hub> . ?b <{X}in> <{X}hub> FILTER(STR(?a) < STR(?b)) }}"


def test_virtuoso_partial_anytime_answer_is_never_complete(engine_endpoints, quirks_nt):
    # `timeout` (ms) asks Virtuoso for an anytime answer: HTTP 200 with what it had, flagged in X-SQL-State.
    url = _with_params(engine_endpoints("virtuoso", "quirks", quirks_nt), "timeout=300")
    backend = open_endpoint(url, profile="generic", settings=Settings(sparql_tool=True))
    out = sparql(backend, backend.settings, PAIRS)
    assert out.data.partial and "incomplete" in out.data.partial
    assert out.text.startswith("sparql: PARTIAL answer")
    with pytest.raises(EndpointError, match="stopped the query at its own time limit and sent a partial answer"):
        backend._count(PAIRS)


def test_virtuoso_refuses_a_query_too_costly_to_start(engine_endpoints, quirks_nt, virtuoso):
    settings = Settings(sparql_tool=True, retries=3, timeout_s=10)
    engine_endpoints("virtuoso", "quirks", quirks_nt)
    # Over all graphs (no default-graph-uri): there Virtuoso's estimate refuses the query at once,
    # whereas within one graph it may estimate low and run it until its time limit.
    backend = open_endpoint(virtuoso.endpoint, profile="generic", settings=settings)
    # Four unrelated patterns: Virtuoso estimates the cross product at far more than its 400 s limit.
    heavy = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?p ?o . ?b ?q ?o2 . ?c ?r ?o3 . ?d ?t ?o4 FILTER(STR(?a) < STR(?d)) }"
    with pytest.raises(EndpointError, match="estimated run time exceeds the endpoint's limit") as error:
        sparql(backend, backend.settings, heavy)
    assert "Narrow the call" in error.value.hint


def test_info_and_stats_give_numbers_on_an_endpoint(engine_url):
    from kg_mcp.cli import main

    _, url = engine_url
    exact = CliRunner().invoke(main, ["info", "--sparql", url])
    assert exact.exit_code == 0, exact.output
    assert "unknown" not in exact.output
    assert f"triples: {4 + HUB_EDGES:,}" in exact.output and "counts: exact" in exact.output
    bounded = open_endpoint(url, settings=Settings(count_cap=1000)).stats()
    assert bounded.bounded and bounded.triples == 1000 and bounded.entities >= 1
    assert bounded.details["counts"].startswith("at least")

    async def read_stats():
        async with Client(build_server(open_endpoint(url, settings=Settings(count_cap=1000)))) as client:
            return json.loads((await client.read_resource("kg://stats")).contents[0].text)

    import anyio

    stats = anyio.run(read_stats)
    assert stats["triples"] == 1000 and stats["lower_bounds"] is True


def test_void_statistics_are_used_when_published(engine_endpoints, tmp_path):
    void = tmp_path / "void.nt"
    void.write_text(
        "<http://d.test/kb> <http://rdfs.org/ns/void#triples> \"123456789\"^^<http://www.w3.org/2001/XMLSchema#integer> .\n"
        "<http://d.test/kb> <http://rdfs.org/ns/void#entities> \"4567\"^^<http://www.w3.org/2001/XMLSchema#integer> .\n"
        "<http://d.test/kb> <http://rdfs.org/ns/void#uriSpace> \"http://d.test/id/\" .\n"
        "<http://d.test/kb> <http://rdfs.org/ns/void#vocabulary> <http://d.test/vocab/> .\n"
        "<http://d.test/id/a> <http://d.test/vocab/knows> <http://d.test/id/b> .\n"
    )
    backend = open_endpoint(engine_endpoints("virtuoso", "void", void))
    stats = backend.stats()
    assert (stats.triples, stats.entities) == (123_456_789, 4567) and stats.details["counts"].startswith("VoID")
    assert backend.vocab.prefixes["id"] == "http://d.test/id/"
    assert backend.vocab.sources["http://d.test/id/"] == "void"
    assert backend.vocab.bare_namespaces[0] == "http://d.test/vocab/"
    out = get_relations(backend, Settings(), "id:a")
    assert "| knows |" in out.text and "<http" not in out.text
    assert explore_kg(backend, Settings(), "id:a", ["knows"]).data.relations[0].neighbours[0].id == "id:b"


def test_kg_stats_shows_an_endpoint_without_its_password_and_hides_it_where_callers_sign_in():
    from kg_mcp.server import _shown_details

    details = {"endpoint": "https://reader:s3cret@sparql.internal:8890/sparql?key=k", "counts": "exact"}
    assert _shown_details(details, private=False) == {"endpoint": "https://sparql.internal:8890/sparql", "counts": "exact"}
    assert _shown_details({**details, "location": "/srv/kg/store"}, private=True) == {"counts": "exact"}
