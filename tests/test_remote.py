"""The remote backend over real HTTP: `oxigraph serve` with the Wikidata sample, and a scripted peer.

Part 1 runs the tools against a real SPARQL server (the `sparql_endpoint` fixture) and compares a
few answers with a local store of the same file. Part 2 uses a tiny HTTP server on loopback,
written here, that records what arrives and answers as scripted (429, 5xx, slow, garbage...): a
real HTTP peer, so RemoteBackend's retry, deadline and error paths run unchanged. Part 3 checks
the read-only sparql tool against the real endpoint.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyoxigraph as ox
import pytest
from conftest import WIKIDATA_SAMPLE

from kg_mcp.backends import open_endpoint
from kg_mcp.backends.remote import RemoteBackend
from kg_mcp.errors import EndpointError, InvalidInput, QueryRefused, UnknownEntity
from kg_mcp.settings import Settings
from kg_mcp.tools import explore_kg, find_entities, get_relations, search, sparql, verify
from kg_mcp.tools.verify import PathClaim, TripleClaim

WD = "http://www.wikidata.org/entity/"
Q42 = ox.NamedNode(WD + "Q42")
PREFIXES = "PREFIX wd: <http://www.wikidata.org/entity/> PREFIX wdt: <http://www.wikidata.org/prop/direct/> "
CONTACT = "mailto:kg-mcp-tests@example.org"


# --- part 1: the tools against `oxigraph serve` with the real Wikidata sample ----------------------


@pytest.fixture(scope="module")
def remote(sparql_endpoint) -> RemoteBackend:
    return open_endpoint(sparql_endpoint, settings=Settings())


def test_profile_detected_as_wikidata(remote, sparql_endpoint):
    assert isinstance(remote, RemoteBackend)
    assert remote.kind == "remote"
    assert remote.profile.name == "wikidata"
    assert remote.url == sparql_endpoint
    # Only the public Wikidata endpoint has the mwapi entity search; a mirror is searched by label.
    assert not remote.use_entity_search


@pytest.mark.parametrize("prop", ["wdt:P69", "educated at", "P69"])
def test_search_filtered_with_qualifiers(remote, prop):
    out = search(remote, Settings(), "wd:Q42", "outgoing", [prop])
    data = out.data
    assert (data.view, data.total, data.shown, data.truncated) == ("rows", 2, 2, False)
    by_value = {r.value.id: r for r in data.rows}
    assert set(by_value) == {"wd:Q691283", "wd:Q4961791"}
    assert {r.property for r in data.rows} == {"wdt:P69"}
    assert {r.propertyLabel for r in data.rows} == {"educated at"}
    st_johns, brentwood = by_value["wd:Q691283"], by_value["wd:Q4961791"]
    assert (st_johns.value.label, brentwood.value.label) == ("St John's College", "Brentwood School")
    quals = {(q.property, q.propertyLabel): q.value for q in st_johns.qualifiers}
    # Year-precision dates (wikibase:timePrecision 9 on the value node) as years, start before end.
    assert quals[("pq:P580", "start time")].id == "1971" and quals[("pq:P582", "end time")].id == "1974"
    assert quals[("pq:P580", "start time")].datatype == "xsd:gYear"
    brentwood_quals = [(q.property, q.value.id) for q in brentwood.qualifiers]
    assert brentwood_quals == [("pq:P580", "1959"), ("pq:P582", "1970")]
    # The markdown the model reads carries the qualifiers in the label column, in natural order.
    assert "St John's College [" in out.text and "start time: 1971; end time: 1974" in out.text
    assert "T00:00:00Z" not in out.text
    assert out.text.startswith("search wd:Q42 (Douglas Adams), outgoing: 2 rows")


def test_search_unfiltered_gives_property_view(remote):
    settings = Settings()
    data = search(remote, settings, "wd:Q42").data
    assert data.view == "properties" and data.truncated and data.shown == 0
    assert data.total > settings.search_k
    listed, page = [], data
    while True:  # the properties come in pages; the external identifiers are summed up on each
        listed += page.properties[: page.properties_shown]
        if not page.next_cursor:
            break
        page = search(remote, settings, "wd:Q42", cursor=page.next_cursor).data
    props = {p.property: p for p in listed + data.properties[data.properties_shown :]}
    assert props["wdt:P69"].rows == 2 and props["wdt:P69"].propertyLabel == "educated at"
    assert props["wdt:P106"].propertyLabel == "occupation"
    assert sum(p.rows for p in listed) + data.identifier_rows == data.total
    assert len(listed) + data.identifiers == data.properties_total and not any(p.identifier for p in listed)
    # Bookkeeping (labels, statement links, schema:version...) is not listed as facts.
    assert not [p for p in props if p.startswith(("rdfs:", "schema:", "p:", "ps:", "pq:"))]


def test_labels_fall_back_to_mul(remote):
    # Q42 has a "Douglas Adams"@mul label and no @en one.
    assert remote.labels([Q42]) == {Q42: "Douglas Adams"}
    assert remote.labels([ox.NamedNode(WD + "Q691283")])[ox.NamedNode(WD + "Q691283")] == "St John's College"


def test_labels_prefer_configured_language(sparql_endpoint):
    german = open_endpoint(sparql_endpoint, settings=Settings(languages=["de", "mul"]))
    constantine, st_johns = ox.NamedNode(WD + "Q8413"), ox.NamedNode(WD + "Q691283")
    labels = german.labels([Q42, constantine, st_johns])
    assert labels[constantine] == "Konstantin der Große"  # has @de (and @en "Constantine the Great")
    assert labels[Q42] == "Douglas Adams"  # no @de: the @mul label
    assert labels[st_johns] == "St John's College"  # only @en: any language rather than none
    english = open_endpoint(sparql_endpoint, settings=Settings(languages=["en", "mul"]))
    assert english.labels([constantine])[constantine] == "Constantine the Great"


def test_property_labels(remote):
    wdt_p69 = ox.NamedNode("http://www.wikidata.org/prop/direct/P69")
    pq_p580 = ox.NamedNode("http://www.wikidata.org/prop/qualifier/P580")
    assert remote.labels([wdt_p69, pq_p580]) == {wdt_p69: "educated at", pq_p580: "start time"}


def test_find_entities_exact(remote):
    data = find_entities(remote, Settings(), "Douglas Adams").data
    assert data.entities, "nothing found"
    first = data.entities[0]
    assert (first.id, first.label, first.match) == ("wd:Q42", "Douglas Adams", "exact")
    assert first.degree > 50
    assert "writer" in (first.description or "")
    # The exact matches first; an engine's text search (Virtuoso) or the name index built from the
    # endpoint's labels (oxigraph serve) adds the other names with these words.
    matches = [e.match for e in data.entities]
    assert matches == sorted(matches, key=lambda m: m != "exact") and set(matches) <= {"exact", "search", "words"}


def test_relations_walked_backwards(remote):
    relations = get_relations(remote, Settings(), "wd:Q691283").data
    assert {(r.relation, r.label, r.triples) for r in relations.relations} >= {("~wdt:P69", "educated at", 1)}
    for ref in ("~P69", "~wdt:P69", "~educated at"):
        explored = explore_kg(remote, Settings(), "wd:Q691283", [ref]).data
        (rel,) = explored.relations
        assert (rel.relation, rel.total, rel.shown) == ("~wdt:P69", 1, 1)
        assert [(n.id, n.label) for n in rel.neighbours] == [("wd:Q42", "Douglas Adams")]


def test_verify_statuses(remote):
    claims = [
        TripleClaim(subject="wd:Q42", relation="wdt:P69", object="wd:Q691283"),
        TripleClaim(subject="Douglas Adams", relation="educated at", object="St John's College"),
        TripleClaim(subject="wd:Q42", relation="wdt:P69", object="wd:Q8413"),
        TripleClaim(subject="wd:Q691283", relation="wdt:P69", object="wd:Q42"),
        PathClaim(
            path=[
                TripleClaim(subject="wd:Q691283", relation="~wdt:P69", object="wd:Q42"),
                TripleClaim(subject="wd:Q42", relation="wdt:P69", object="Brentwood School"),
            ]
        ),
        TripleClaim(subject="wd:Q999999999", relation="wdt:P69", object="wd:Q42"),
    ]
    out = verify(remote, Settings(), claims)
    statuses = [c.status for c in out.data.claims]
    assert statuses == ["supported", "supported", "conflicting", "not_found", "supported", "unknown_entity"]
    conflict = out.data.claims[2].hops[0]
    assert {e.object.id for e in conflict.evidence} == {"wd:Q691283", "wd:Q4961791"}
    assert "St John's College" in conflict.reason
    assert out.data.claims[0].hops[0].evidence[0].object.label == "St John's College"


def test_unknown_entity(remote):
    with pytest.raises(UnknownEntity, match="Q999999999"):
        search(remote, Settings(), "wd:Q999999999")
    with pytest.raises(UnknownEntity):
        get_relations(remote, Settings(), "Q999999999")
    with pytest.raises(UnknownEntity):
        remote.resolve_entity("No Such Entity Name Anywhere")


def _sorted_rows(data) -> list:
    rows = data.model_dump(mode="json")["rows"]
    for r in rows:
        r["qualifiers"] = sorted(r["qualifiers"], key=json.dumps)
    return sorted(rows, key=json.dumps)


def test_same_answers_as_local_store(remote, wikidata_local):
    settings = Settings()
    conflicting = TripleClaim(subject="Q42", relation="P69", object="Q8413")
    name = "Douglas Adams"
    for call in (
        lambda b: _sorted_rows(search(b, settings, "wd:Q42", "outgoing", ["wdt:P69", "wdt:P106"]).data),
        lambda b: sorted(
            (p.property, p.propertyLabel, p.rows) for p in search(b, settings, "wd:Q42").data.properties
        ),
        # Exact labels agree; the local store's name index also finds words and typos (the endpoint does not).
        lambda b: [(e.id, e.label, e.match) for e in find_entities(b, settings, name).data.entities if e.match == "exact"],
        lambda b: explore_kg(b, settings, "wd:Q691283", ["~wdt:P69"]).data.model_dump(mode="json"),
        lambda b: [c.status for c in verify(b, settings, [conflicting]).data.claims],
    ):
        assert call(remote) == call(wikidata_local)
    query = PREFIXES + "SELECT ?o WHERE { wd:Q42 wdt:P106 ?o } ORDER BY ?o"
    assert remote.run_query(query, 100).rows == wikidata_local.run_query(query, 100).rows


# --- part 2: User-Agent and faults, with a scripted HTTP peer on loopback --------------------------

ASK_TRUE = {"head": {}, "boolean": True}
ONE_ROW = {"head": {"vars": ["x"]}, "results": {"bindings": [{"x": {"type": "uri", "value": WD + "Q42"}}]}}


@dataclass
class Reply:
    status: int = 200
    body: bytes | dict = field(default_factory=lambda: ASK_TRUE)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # wait before answering (interrupted when the server stops)
    trickle_s: float = 0.0  # send the body one byte at a time, this far apart


@dataclass
class Seen:
    at: float
    headers: dict[str, str]
    body: bytes


class ScriptedEndpoint:
    """An HTTP server that answers requests with `replies` in order (the last one repeats)."""

    def __init__(self, replies: list[Reply]):
        self.replies = replies
        self.requests: list[Seen] = []
        self.stopping = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                index = len(outer.requests)
                outer.requests.append(Seen(time.monotonic(), dict(self.headers), body))
                reply = outer.replies[min(index, len(outer.replies) - 1)]
                if reply.delay_s and outer.stopping.wait(reply.delay_s):
                    return
                payload = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    is_json = isinstance(reply.body, dict)
                    content_type = "application/sparql-results+json" if is_json else "text/html"
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    if reply.trickle_s:
                        for i in range(len(payload)):
                            self.wfile.write(payload[i : i + 1])
                            self.wfile.flush()
                            if outer.stopping.wait(reply.trickle_s):
                                return
                    else:
                        self.wfile.write(payload)
                except OSError:  # the client gave up (timeout): nothing to answer
                    pass

            do_GET = do_POST = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/sparql"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()


def scripted_backend(server: ScriptedEndpoint, **settings) -> RemoteBackend:
    """A backend on the scripted server, profile given and prefixes not sampled (no requests at start)."""
    return open_endpoint(
        server.url, profile="wikidata", settings=Settings(contact=CONTACT, prefix_discovery=False, **settings)
    )


def test_user_agent_names_kg_mcp_and_contact():
    with ScriptedEndpoint([Reply(body={"head": {}, "boolean": False}), Reply(body=ASK_TRUE)]) as server:
        backend = open_endpoint(server.url, settings=Settings(contact=CONTACT))
    # The named graphs were listed (answered with a boolean here, so none), detection asked once,
    # then prefix discovery read VoID and a sample (booleans again, so nothing found): all with our agent.
    assert backend.profile.name == "wikidata"
    assert len(server.requests) == 4
    assert b"void%23uriSpace" in server.requests[2].body and b"LIMIT+2000" in server.requests[3].body
    for seen in server.requests:
        agent = seen.headers["User-Agent"]
        assert agent.startswith("kg-mcp/"), agent
        assert CONTACT in agent, agent
        assert "Python-urllib" not in agent
    # The query travels in the request, and JSON results are asked for.
    assert b"query=" in server.requests[0].body
    assert "json" in server.requests[0].headers["Accept"]


def test_429_retry_after_is_honoured():
    with ScriptedEndpoint([Reply(429, b"slow down", {"Retry-After": "1"}), Reply(body=ONE_ROW)]) as server:
        backend = scripted_backend(server, timeout_s=10)
        rows = backend.run_query("SELECT ?x WHERE { ?x ?p ?o } LIMIT 1", 10)
    assert rows.rows == [[Q42]] and rows.total == 1
    first, second = server.requests
    assert second.at - first.at >= 0.95, "retried before the Retry-After delay"


def test_503_twice_then_ok():
    replies = [Reply(503, b"busy"), Reply(503, b"busy"), Reply(body=ASK_TRUE)]
    with ScriptedEndpoint(replies) as server:
        backend = scripted_backend(server, timeout_s=10)
        assert backend.exists(Q42) is True
    assert len(server.requests) == 3


def test_always_500_gives_endpoint_error_within_deadline():
    with ScriptedEndpoint([Reply(500, b"internal trouble")]) as server:
        backend = scripted_backend(server, timeout_s=3)
        start = time.monotonic()
        with pytest.raises(EndpointError) as caught:
            backend.exists(Q42)
        elapsed = time.monotonic() - start
    assert elapsed < 3.5
    assert len(server.requests) >= 2, "a 500 is retried"
    message = str(caught.value)
    assert server.url in message and "500" in message
    assert caught.value.hint  # tells the model what to do


def test_no_retries_when_configured():
    with ScriptedEndpoint([Reply(503, b"busy"), Reply(body=ASK_TRUE)]) as server:
        backend = scripted_backend(server, timeout_s=10, retries=0)
        with pytest.raises(EndpointError, match="503"):
            backend.exists(Q42)
    assert len(server.requests) == 1


def test_slow_server_times_out():
    with ScriptedEndpoint([Reply(delay_s=30)]) as server:
        backend = scripted_backend(server, timeout_s=2)
        start = time.monotonic()
        with pytest.raises(EndpointError) as caught:
            backend.exists(Q42)
        elapsed = time.monotonic() - start
    assert elapsed < 3 * 2, f"hung for {elapsed:.1f} s past a 2 s limit"
    assert "timed out" in str(caught.value) and "2 s" in str(caught.value)


def test_trickling_body_respects_deadline():
    # Headers at once, then a byte every 0.2 s: every read succeeds, but the whole answer takes minutes.
    with ScriptedEndpoint([Reply(body=ONE_ROW, trickle_s=0.2)]) as server:
        backend = scripted_backend(server, timeout_s=2)
        start = time.monotonic()
        with pytest.raises(EndpointError, match="timed out"):
            backend.run_query("SELECT ?x WHERE { ?x ?p ?o }", 10)
        elapsed = time.monotonic() - start
    assert elapsed < 3 * 2, f"hung for {elapsed:.1f} s past a 2 s limit"


def test_closed_port_is_unreachable():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/sparql"
    backend = open_endpoint(url, profile="wikidata", settings=Settings(timeout_s=3))
    start = time.monotonic()
    with pytest.raises(EndpointError, match="unreachable") as caught:
        backend.exists(Q42)
    assert time.monotonic() - start < 3.5
    assert f"127.0.0.1:{port}" in str(caught.value)


def test_retry_after_beyond_deadline_fails_fast():
    with ScriptedEndpoint([Reply(429, b"slow down", {"Retry-After": "60"}), Reply(body=ASK_TRUE)]) as server:
        backend = scripted_backend(server, timeout_s=3)
        start = time.monotonic()
        with pytest.raises(EndpointError) as caught:
            backend.exists(Q42)
        elapsed = time.monotonic() - start
    assert elapsed < 1.0, "waited although the endpoint asked for more than the time left"
    assert len(server.requests) == 1
    message = str(caught.value)
    assert "asked to wait 60 s" in message and "429" in message


def test_retry_after_http_date():
    when = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 2))
    with ScriptedEndpoint([Reply(503, b"busy", {"Retry-After": when}), Reply(body=ASK_TRUE)]) as server:
        backend = scripted_backend(server, timeout_s=10)
        assert backend.exists(Q42) is True
    first, second = server.requests
    assert second.at - first.at >= 0.9  # the date is second-granular: at least ~1 s later


def test_400_is_invalid_input_without_retry():
    with ScriptedEndpoint([Reply(400, b"Parse error: unexpected token"), Reply(body=ONE_ROW)]) as server:
        backend = scripted_backend(server, timeout_s=10)
        with pytest.raises(InvalidInput) as caught:
            backend.run_query("SELECT ?x WHERE { ?x ?p ?o }", 10)
    assert len(server.requests) == 1
    assert "rejected the query" in str(caught.value) and "unexpected token" in str(caught.value)


@pytest.mark.parametrize(
    "body",
    [
        b"<html><body>Service temporarily down for maintenance</body></html>",
        b"",
        b'{"head": {"vars": ["x"]}}',
        # Valid head, then cut off in the middle of the rows: the parser is lazy, so this fails late.
        json.dumps(ONE_ROW).encode()[:-20],
    ],
    ids=["html", "empty", "no-results", "truncated"],
)
def test_non_json_answer_is_endpoint_error(body):
    with ScriptedEndpoint([Reply(200, body)]) as server:
        backend = scripted_backend(server, timeout_s=5)
        with pytest.raises(EndpointError, match="not SPARQL JSON"):
            backend.run_query("SELECT ?x WHERE { ?x ?p ?o }", 10)
        with pytest.raises(EndpointError, match="not SPARQL JSON"):
            search(backend, Settings(), "wd:Q42")


def test_other_http_errors_are_not_retried():
    for status, text in [(404, "404"), (401, "401"), (403, "403")]:
        with ScriptedEndpoint([Reply(status, b"no"), Reply(body=ASK_TRUE)]) as server:
            backend = scripted_backend(server, timeout_s=10)
            with pytest.raises(EndpointError, match=text):
                backend.exists(Q42)
        assert len(server.requests) == 1, status


# --- part 3: the sparql tool against the real endpoint ---------------------------------------------


def _triple_count(backend) -> int:
    rows = backend.run_query("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }", 1).rows
    return int(rows[0][0].value)


def test_sparql_select_capped_tells_total(remote):
    settings = Settings(sparql_tool=True, sparql_row_cap=3)
    out = sparql(remote, settings, PREFIXES + "SELECT ?o WHERE { wd:Q42 wdt:P106 ?o }")
    data = out.data
    assert data.variables == ["o"]
    assert len(data.rows) == 3 and data.total == 8 and data.truncated
    assert all(row[0].id.startswith("wd:Q") for row in data.rows)
    assert out.text.startswith("sparql: 8 rows\n") and "Rows 1-3 of 8 shown. Next page:" in out.text
    rest = sparql(remote, settings, PREFIXES + "SELECT ?o WHERE { wd:Q42 wdt:P106 ?o }", data.next_cursor)
    more = sparql(remote, settings, PREFIXES + "SELECT ?o WHERE { wd:Q42 wdt:P106 ?o }", rest.data.next_cursor)
    assert rest.data.offset == 3 and more.data.offset == 6 and more.data.next_cursor is None
    read = [row[0].id for page in (data, rest.data, more.data) for row in page.rows]
    assert len(read) == len(set(read)) == 8  # every row once


def test_ids_as_the_tools_print_them_run_without_prefix_lines_on_an_endpoint(remote):
    """On `oxigraph serve` and on Virtuoso: wd:, wdt: and the rest are declared by kg-mcp, which writes
    the IRIs in full (Virtuoso knows none of these prefixes, Oxigraph none at all)."""
    out = sparql(remote, Settings(), "SELECT ?o WHERE { wd:Q42 wdt:P69 ?o }")
    assert {row[0].id for row in out.data.rows} == {"wd:Q691283", "wd:Q4961791"} and not out.data.warnings


def test_a_misspelled_relation_on_an_endpoint_is_named_with_the_nearest(remote):
    out = sparql(remote, Settings(), "SELECT ?o WHERE { wd:Q42 wdt:P699 ?o }")
    assert out.data.total == 0 and out.text.startswith("sparql: 0 rows\nThe query names IRIs this KG does not have")
    (warning,) = out.data.warnings
    assert warning.id == "wdt:P699" and warning.position == "predicate" and "wdt:P69" in [n.id for n in warning.nearest]


def test_sparql_ask(remote):
    settings = Settings(sparql_tool=True)
    assert sparql(remote, settings, PREFIXES + "ASK { wd:Q42 wdt:P69 wd:Q691283 }").data.boolean is True
    no = sparql(remote, settings, PREFIXES + "ASK { wd:Q42 wdt:P69 wd:Q8413 }")
    assert no.data.boolean is False and no.text == "sparql: ASK → false"


def test_sparql_syntax_error_is_invalid_input(remote):
    with pytest.raises(InvalidInput):
        sparql(remote, Settings(sparql_tool=True), "SELECT ?x WHERE { ?x ")


REFUSED = [
    PREFIXES + "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>\n"
    'INSERT DATA { wd:Q42 wdt:P69 wd:Q8413 . wd:Q42 rdfs:label "x"@en }',
    "LOAD <http://example.org/data.ttl>",
    "SELECT * WHERE { SERVICE <http://example.org/sparql> { ?s ?p ?o } }",
    PREFIXES + "DELETE WHERE { wd:Q42 ?p ?o }",
    "CLEAR ALL",
]


def test_sparql_refuses_writes_and_services(remote):
    settings = Settings(sparql_tool=True)
    before = _triple_count(remote)
    assert before == 53429
    for query in REFUSED:
        with pytest.raises(QueryRefused):
            sparql(remote, settings, query)
    assert _triple_count(remote) == before
    educated_at = ox.NamedNode("http://www.wikidata.org/prop/direct/P69")
    assert remote.has_triple(Q42, educated_at, ox.NamedNode(WD + "Q691283"))


def test_refused_queries_never_reach_the_endpoint():
    with ScriptedEndpoint([Reply(body=ASK_TRUE)]) as server:
        backend = scripted_backend(server)
        for query in REFUSED:
            with pytest.raises(QueryRefused):
                sparql(backend, Settings(sparql_tool=True), query)
    assert server.requests == []


# --- part 4: find_entities through the engine's own text search -----------------------------------


class SearchingEndpoint:
    """A loopback SPARQL server that answers Wikidata's mwapi entity search with `found` (SPARQL JSON)
    and every other query with no rows: what a Wikidata query service says for an unknown label."""

    def __init__(self, found: list[str]):
        self.queries: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                query = urllib.parse.parse_qs(body).get("query", [""])[0]
                outer.queries.append(query)
                if query.lstrip().upper().startswith("ASK"):
                    answer = {"head": {}, "boolean": False}
                elif "wikibase:mwapi" in query:
                    rows = [{"x": {"type": "uri", "value": WD + q}} for q in found]
                    answer = {"head": {"vars": ["x"]}, "results": {"bindings": rows}}
                else:
                    answer = {"head": {"vars": []}, "results": {"bindings": []}}
                payload = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/sparql-results+json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/sparql"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_find_entities_uses_wikidata_entity_search_when_configured():
    endpoint = SearchingEndpoint(["Q42", "Q21454969"])
    try:
        settings = Settings(text_search="mwapi", contact=CONTACT)
        backend = open_endpoint(endpoint.url, profile="wikidata", settings=settings)
        out = find_entities(backend, settings, "Douglas Adms")
    finally:
        endpoint.close()
    assert out.data.method == "Wikidata entity search (mwapi)" and "looked up by Wikidata entity search" in out.text
    assert [(e.id, e.match) for e in out.data.entities] == [("wd:Q42", "search"), ("wd:Q21454969", "search")]
    searches = [q for q in endpoint.queries if "wikibase:mwapi" in q]
    assert len(searches) == 1 and 'mwapi:search "Douglas Adms"' in searches[0] and 'mwapi:language "en"' in searches[0]


def test_endpoint_without_text_search_is_probed_once_then_asked_by_label(oxigraph_endpoint):
    # `oxigraph serve` rejects the Virtuoso probe (bif: is not SPARQL): label queries, as before, when
    # no name index is built from its labels (tests/test_endpoint_names.py has the index).
    backend = open_endpoint(oxigraph_endpoint, settings=Settings(name_index=False))
    first = find_entities(backend, Settings(), "Douglas Adams").data
    assert backend.text_search == "labels"
    assert first.method == "exact label query"  # a Wikidata mirror is too large to scan its labels
    assert first.entities[0].id == "wd:Q42" and first.entities[0].match == "exact"
    assert find_entities(backend, Settings(), "Douglas").data.method == first.method


def test_virtuoso_is_probed_once_then_asked_with_its_text_search(virtuoso):
    backend = open_endpoint(virtuoso.serve("wikidata", WIKIDATA_SAMPLE), settings=Settings())
    exact = find_entities(backend, Settings(), "Douglas Adams").data
    assert backend.text_search == "virtuoso" and exact.method == "Virtuoso text search (bif:contains)"
    assert (exact.entities[0].id, exact.entities[0].match) == ("wd:Q42", "exact")
    reordered = find_entities(backend, Settings(), "adams douglas").data
    assert (reordered.entities[0].id, reordered.entities[0].match) == ("wd:Q42", "search")
