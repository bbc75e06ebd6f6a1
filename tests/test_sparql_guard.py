"""The sparql tool runs what it checked, and its query workers can reach nothing (issue 21, item 1).

A loopback canary (an HTTP server that answers SPARQL JSON with a CANARY row and counts every
request) stands for any address a query could try to fetch. Queries that hide a SERVICE, FROM,
LOAD or update in the gaps between parsers (comments ended by \\r, \\u2028..., codepoint escapes,
long strings, nesting, case) are sent through the tool to a local store, to a real `kg-mcp serve`
and to an `oxigraph serve` endpoint: the canary must never be reached, and no answer may hold its
row. The worker's own isolation, its memory limit and the check's cost cap are tested as well, and
the engine's own time limit on a real Virtuoso.
"""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

import httpx2
import pyoxigraph as ox
import pytest
from fault_proxy import kg_mcp_server
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from kg_mcp.backends import open_endpoint, open_store
from kg_mcp.backends.http_transport import engine_timeout
from kg_mcp.backends.query_pool import QueryPool, StoreSource
from kg_mcp.errors import EndpointError, InvalidInput, KGError, QueryRefused
from kg_mcp.settings import Settings
from kg_mcp.tools import sparql
from kg_mcp.tools._sparql_text import canonical_query
from kg_mcp.tools.sparql import MAX_QUERY_TOKENS, check_read_only

SETTINGS = Settings(sparql_tool=True)
LINE_ENDS = ["\r", "\n", "\r\n", "\u2028", "\u0085", "\x0b", "\x0c"]
CANARY_ROW = "CANARY"


class Canary:
    """A loopback HTTP server that must never be reached: counts requests, answers one SPARQL row."""

    def __init__(self):
        self.hits = 0
        canary = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                canary.hits += 1
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = (
                    '{"head":{"vars":["s"]},"results":{"bindings":[{"s":{"type":"literal","value":"%s"}}]}}' % CANARY_ROW
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/sparql-results+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/sparql"
        threading.Thread(target=self.server.serve_forever, name="canary", daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def canary():
    server = Canary()
    yield server
    server.close()


def smuggling_queries(url: str) -> list[str]:
    """The issue's form and a generated family around it; each one names `url` somewhere."""
    service = f"SERVICE <{url}> {{ ?x ?y ?s }}"
    hidden = []
    for end in LINE_ENDS:  # a comment that one parser ends here and another does not
        hidden += [
            f"SELECT ?s WHERE {{ # c{end} {service} \n}}",
            f"SELECT ?s WHERE {{ ?s ?p ?o # c{end} OPTIONAL {{ {service} }} \n}} LIMIT 1",
            f"SELECT ?s WHERE {{ {{ ?s ?p ?o }} # c{end} UNION {{ {service} }} \n}} LIMIT 1",
            f"SELECT ?s WHERE {{ ?s ?p ?o # c{end} MINUS {{ {service} }} \n}} LIMIT 1",
            f"SELECT ?s WHERE {{ {{ {{ # c{end} {service} \n}} }} }}",
            f"SELECT ?s # c{end} FROM <{url}> \nWHERE {{ ?s ?p ?o }} LIMIT 1",
            f"SELECT ?s WHERE {{ ?s ?p ?o }} LIMIT 1 # c{end} ; LOAD <{url}> \n",
            f"ASK {{ # c{end} FILTER EXISTS {{ {service} }} \n}}",
            f"SELECT ?s WHERE {{ ?s ?p '''a # {end}''' . {service} }}",
            f'SELECT ?s WHERE {{ ?s ?p """{end}#""" # c{end} {service} \n}}',
        ]
    escapes = [
        f"SELECT ?s WHERE {{ \\u0053ERVICE <{url}> {{ ?x ?y ?s }} }}",
        f"SELECT ?s WHERE {{ SERV\\u0049CE <{url}> {{ ?x ?y ?s }} }}",
        f"SELECT ?s WHERE {{ \\U00000053ERVICE <{url}> {{ ?x ?y ?s }} }}",
        f"SELECT ?s WHERE {{ SERVICE \\u003C{url}> {{ ?x ?y ?s }} }}",
        f"SELECT ?s WHERE {{ SERVICE <{url.replace('sparql', 'spar' + chr(92) + 'u0071l')}> {{ ?x ?y ?s }} }}",
        f"SELECT ?s WHERE {{ # c\\u000A {service} }}",
        f'SELECT ?s WHERE {{ ?s ?p "\\u005C" {service} "" }}',
        f'SELECT ?s WHERE {{ ?s ?p "\\u0022 . {service} # \\u0022" }}',
        f"SELECT * \\u0046ROM <{url}> WHERE {{ ?s ?p ?o }}",
        f"\\u004COAD <{url}>",
    ]
    cases = [
        f"select ?s where {{ service <{url}> {{ ?x ?y ?s }} }}",
        f"SELECT ?s WHERE {{ Service Silent <{url}> {{ ?x ?y ?s }} }}",
        f"PREFIX c: <{url.rsplit('/', 1)[0]}/> SELECT ?s WHERE {{ SERVICE c:sparql {{ ?x ?y ?s }} }}",
        f"SELECT ?s WHERE {{ VALUES ?e {{ <{url}> }} SERVICE ?e {{ ?x ?y ?s }} }}",
        f"SELECT ?s WHERE {{ {{ SELECT ?s WHERE {{ {service} }} }} }}",
        f"SELECT ?s WHERE {{ ?s ?p ?o FILTER NOT EXISTS {{ {service} }} }} LIMIT 1",
        f"SELECT * FROM NAMED <{url}> WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}",
    ]
    return hidden + escapes + cases


def _assert_never_reached(run, queries: list[str], canary: Canary) -> dict[str, int]:
    outcomes = {"refused": 0, "ran": 0}
    for query in queries:
        try:
            text = run(query)
        except KGError:
            outcomes["refused"] += 1
        else:
            outcomes["ran"] += 1
            assert CANARY_ROW not in text, query
        assert canary.hits == 0, f"the canary was reached by {query!r}"
    return outcomes


# --- the canonical text -------------------------------------------------------------------------


def test_the_issues_query_is_refused_and_a_comment_ended_by_cr_is_dropped():
    query = "SELECT ?s WHERE { # c\r SERVICE <http://127.0.0.1:9/sparql> { ?x ?y ?s } \n}"
    assert canonical_query(query, max_tokens=100).text == "SELECT ?s WHERE { SERVICE <http://127.0.0.1:9/sparql> { ?x ?y ?s } }"
    with pytest.raises(QueryRefused, match="SERVICE http://127.0.0.1:9/sparql is not allowed"):
        check_read_only(query, "generic")
    # Only \r and \n end a comment (the spec, pyoxigraph): after \u2028 the SERVICE is comment text.
    hidden = "SELECT ?s WHERE { # c\u2028 SERVICE <http://127.0.0.1:9/sparql> { ?x ?y ?s } \n}"
    assert canonical_query(hidden, max_tokens=100).text == "SELECT ?s WHERE { }"


def test_strings_come_out_short_with_their_line_ends_escaped():
    query = "SELECT * WHERE { ?s ?p '''two\r\nlines # not a comment''' ; ?q \"\"\"say \"hi\" \"\"\" }"
    text = canonical_query(query, max_tokens=100).text
    assert text == 'SELECT * WHERE { ?s ?p "two\\r\\nlines # not a comment" ; ?q "say \\"hi\\" " }'
    assert "\r" not in text and "\n" not in text


def test_codepoint_escapes_are_decoded_once_and_never_sent():
    assert canonical_query("SELECT ?s WHERE { ?s ?p \"caf\\u00E9\" }", max_tokens=100).text == 'SELECT ?s WHERE { ?s ?p "café" }'
    with pytest.raises(QueryRefused):  # \u0053ERVICE is SERVICE, as the spec decodes it
        check_read_only("SELECT ?s WHERE { \\u0053ERVICE <http://127.0.0.1:9/> { ?x ?y ?s } }", "generic")
    with pytest.raises(InvalidInput, match="a second time"):  # an escape spelled by an escape
        canonical_query("SELECT ?s WHERE { ?s ?p \"\\u005C\\u005Cu0041\" }", max_tokens=100)


def test_dotted_local_names_become_full_iris_and_run(memory_backend):
    backend = memory_backend("<http://rdf.freebase.com/ns/m.1> <http://rdf.freebase.com/ns/film.film.genre> <http://rdf.freebase.com/ns/m.2> .")
    query = "PREFIX ns: <http://rdf.freebase.com/ns/> SELECT ?g WHERE { ns:m.1 ns:film.film.genre ?g }"
    text = canonical_query(query, max_tokens=100).text
    assert "<http://rdf.freebase.com/ns/film.film.genre>" in text and "<http://rdf.freebase.com/ns/m.1>" in text
    out = sparql(backend, SETTINGS, query)
    assert out.data.total == 1 and "m.2" in out.data.rows[0][0].id


def test_labels_service_and_prefixed_names_still_pass():
    query = (
        "PREFIX wikibase: <http://wikiba.se/ontology#>\nPREFIX bd: <http://www.bigdata.com/rdf#>\n"
        "# labels\nSELECT ?x ?xLabel WHERE { ?x ?p ?o . SERVICE wikibase:label { bd:serviceParam wikibase:language \"en\". } }"
    )
    assert check_read_only(query, "wikidata") == "SelectQuery"
    with pytest.raises(QueryRefused):
        check_read_only(query, "wikidata", remote=False)


def test_a_long_chain_of_operators_is_refused_before_the_parser_runs():
    query = "SELECT * WHERE { FILTER(" + "+".join(["1"] * 10_000) + ") }"  # 20 KB: 8.6 s of rdflib's CPU before
    with pytest.raises(InvalidInput, match=f"more than {MAX_QUERY_TOKENS:,} terms"):
        check_read_only(query, "generic")
    fitting = "SELECT * WHERE { FILTER(" + "+".join(["1"] * (MAX_QUERY_TOKENS // 2 - 10)) + ") }"
    assert check_read_only(fitting, "generic") == "SelectQuery"


# --- the canary, through the tool -----------------------------------------------------------------


@pytest.mark.parametrize("where", ["local store", "endpoint"])
def test_smuggling_never_reaches_the_canary(where, request, canary):
    if where == "local store":
        backend = open_store(request.getfixturevalue("metaqa_store_dir"), settings=SETTINGS)
    else:
        backend = open_endpoint(request.getfixturevalue("oxigraph_endpoint"), settings=SETTINGS)
    try:
        outcomes = _assert_never_reached(
            lambda q: sparql(backend, SETTINGS, q).text, smuggling_queries(canary.url), canary
        )
    finally:
        backend.close()
    assert outcomes["refused"] > 0 and outcomes["ran"] > 0  # both paths were exercised
    assert canary.hits == 0


async def test_smuggling_through_a_real_server_never_reaches_the_canary(metaqa_store_dir, canary):
    queries = [q for q in smuggling_queries(canary.url) if "# c" in q][:20]
    with kg_mcp_server("--store", str(metaqa_store_dir), "--enable-sparql") as server:
        http = httpx2.AsyncClient(timeout=60)
        async with Client(streamable_http_client(server.url, http_client=http)) as client:
            errors = 0
            for query in queries:
                result = await client.call_tool("sparql", {"query": query})
                text = result.content[0].text
                errors += result.is_error
                assert CANARY_ROW not in text and "Traceback" not in text, query
                assert canary.hits == 0, f"the canary was reached by {query!r}"
            assert not (await client.call_tool("sparql", {"query": "ASK { ?s ?p ?o }"})).is_error
    assert errors > 0
    assert canary.hits == 0


# --- the query worker itself --------------------------------------------------------------------


def test_a_query_worker_has_no_network_even_past_the_checks(canary):
    store = ox.Store()
    store.add(ox.Quad(ox.NamedNode("http://a/x"), ox.NamedNode("http://a/p"), ox.NamedNode("http://a/y")))
    query = f"SELECT ?s WHERE {{ SERVICE <{canary.url}> {{ ?x ?y ?s }} }}"
    pool = QueryPool(StoreSource(nquads=store.dump(format=ox.RdfFormat.N_QUADS)), size=1)
    try:
        try:
            rows = pool.run(query, 10, 20)  # straight to the worker: no check on the way
        except KGError:
            rows = None
        assert canary.hits == 0
        assert rows is None or all(CANARY_ROW not in str(row) for row in rows.rows)
        # The worker still answers over its socket.
        assert pool.run("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }", 10, 20).rows[0][0].value == "1"
    finally:
        pool.close()
    # The same query in this (networked) process does reach the canary: the canary works.
    list(store.query(query))
    assert canary.hits == 1
    canary.hits = 0


def test_a_query_past_the_memory_limit_is_stopped_and_the_next_one_runs(metaqa_store_dir):
    settings = Settings(sparql_tool=True, query_memory_mb=300, timeout_s=120, query_workers=1)
    backend = open_store(metaqa_store_dir, settings=settings)
    try:
        pool = backend.query_pool()
        with pytest.raises(EndpointError, match="needed more than 300 MB of memory") as refused:
            sparql(backend, settings, "SELECT ?a ?b ?c ?d WHERE { ?a ?b ?c . ?d ?e ?f } ORDER BY ?f ?c")
        assert "Bind more variables" in refused.value.hint
        after = sparql(backend, settings, "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
        assert int(after.data.rows[0][0].id) > 100_000
        assert len(pool.pids()) == 1  # the killed worker was replaced
    finally:
        backend.close()


# --- the engine's own time limit ----------------------------------------------------------------


def test_engine_timeout_parameters():
    assert engine_timeout("virtuoso", 20) == ({"timeout": "10000"}, {"X-BIGDATA-MAX-QUERY-MILLIS": "20000"})
    assert engine_timeout("qlever", 20)[0] == {"timeout": "20.0s"}
    assert engine_timeout("fuseki", 20)[0] == {"timeout": "20"}
    assert engine_timeout(None, 20)[0] == {}  # an engine not recognised gets no form field


def test_virtuoso_stops_a_long_query_itself(virtuoso, tmp_path):
    source = Path(tmp_path / "grid.nt")
    source.write_text(
        "".join(f"<http://e/{i}> <http://p/{i % 7}> <http://e/{(i * 7) % 3000}> .\n" for i in range(3000)), encoding="utf-8"
    )
    url = virtuoso.serve("guard-grid", source)
    settings = Settings(sparql_tool=True, timeout_s=4, retries=0)
    backend = open_endpoint(url, settings=settings)
    try:
        # Uncut, this runs for about 8 s on Virtuoso, past this call's 4 s.
        query = "SELECT (COUNT(*) AS ?n) WHERE { ?a ?b ?c . ?d ?e ?f FILTER(STRLEN(CONCAT(STR(?a), STR(?f))) > 5) }"
        out = sparql(backend, settings, query)
        assert backend.http.engine == "virtuoso"
        assert out.data.partial and "timeout" in out.data.partial.lower()  # cut by the engine, flagged
        assert "PARTIAL answer" in out.text
    finally:
        backend.close()


def test_virtuoso_built_in_functions_never_reach_the_canary(virtuoso, canary, tmp_path):
    # On a stock Virtuoso, SELECT (bif:http_get('http://...') AS ?x) {} fetches the URL: refused in
    # every spelling, while bif:contains (its text search, local to the engine) still passes.
    source = tmp_path / "one.nt"
    source.write_text('<http://e/a> <http://www.w3.org/2000/01/rdf-schema#label> "Alpha" .\n', encoding="utf-8")
    backend = open_endpoint(virtuoso.serve("guard-bif", source), settings=SETTINGS)
    url = canary.url
    queries = [
        f"SELECT (bif:http_get('{url}') AS ?x) {{}}",
        f"SELECT ?x WHERE {{ BIND(<bif:http_get>('{url}') AS ?x) }}",
        f"SELECT ?x WHERE {{ BIND(BIF:http_get('{url}') AS ?x) }}",
        f"PREFIX b: <bif:> SELECT ?x WHERE {{ BIND(b:http_get('{url}') AS ?x) }}",
        f"SELECT ?x WHERE {{ BIND(b\\u0069f:http_get('{url}') AS ?x) }}",
        f"SELECT ?x WHERE {{ # c\r BIND(bif:http_get('{url}') AS ?x) \n}}",
        f"SELECT ?x WHERE {{ BIND(sql:http_get('{url}') AS ?x) }}",
        f"PREFIX o: <http://www.openlinksw.com/schemas/bif#> SELECT ?x WHERE {{ BIND(o:http_get('{url}') AS ?x) }}",
    ]
    try:
        for query in queries:
            with pytest.raises(QueryRefused, match="built-in functions"):
                sparql(backend, SETTINGS, query)
        assert canary.hits == 0
        assert check_read_only('SELECT ?s WHERE { ?s ?p ?o . ?o bif:contains "Alpha" }', "generic") == "SelectQuery"
    finally:
        backend.close()
