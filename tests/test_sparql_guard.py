"""The sparql tool runs only the text kg-mcp wrote from the checked parse (issues 21 and 31, item 1).

A loopback canary (an HTTP server that answers SPARQL JSON with a CANARY row and counts every
request) stands for any address a query could try to fetch. Queries that hide a SERVICE, FROM,
LOAD or update in the gaps between parsers (comments ended by \\r, \\u2028..., codepoint escapes,
long strings, nesting, case), the second round's red-team forms (`SERVICE:x`, `FROM:g`,
`:bif\\#http_get`, BASE and a relative IRI) and generated forms (every keyword glued to a prefixed
name, every spelling of an IRI) are checked here, and sent through the tool to a local store, an
`oxigraph serve` endpoint, a real `kg-mcp serve` and a real Virtuoso: the canary is never reached,
no answer holds its row, and with --graph no answer holds a row of another graph. What kg-mcp
writes is checked on its own: one line of space-separated tokens, absolute IRIs, no PREFIX, BASE,
FROM or SERVICE but its own. The query workers' isolation, memory limit and the check's cost cap
are tested as well, and the engine's own time limit on a real Virtuoso.
"""

from __future__ import annotations

import gc
import http.server
import re
import signal
import threading
import time
from pathlib import Path

import httpx2
import pyoxigraph as ox
import pytest
from conftest import _oxigraph_serve
from fault_proxy import kg_mcp_server
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from kg_mcp.backends import open_endpoint, open_store
from kg_mcp.backends.http_transport import engine_timeout
from kg_mcp.backends.query_pool import QueryPool, StoreSource
from kg_mcp.errors import EndpointError, InvalidInput, KGError, QueryRefused
from kg_mcp.settings import Settings
from kg_mcp.sparql import MAX_QUERY_TOKENS, QueryPolicy, checked_query
from kg_mcp.sparql.lexing import lex
from kg_mcp.tools import sparql
from kg_mcp.tools.sparql import check_read_only

SETTINGS = Settings(sparql_tool=True)
LINE_ENDS = ["\r", "\n", "\r\n", "\u2028", "\u0085", "\x0b", "\x0c"]
CANARY_ROW = "CANARY"
PUBLIC, SECRET = "urn:g:public", "urn:g:secret"
SECRET_ROW = "SECRET-ROW"
OPENLINK = "http://www.openlinksw.com/schemas/"
# Every SPARQL 1.1 keyword and built-in name: each is glued to a prefixed name below.
KEYWORDS = ["BASE", "PREFIX", "SELECT", "DISTINCT", "REDUCED", "AS", "FROM", "NAMED", "WHERE", "GROUP", "BY", "HAVING", "ORDER", "ASC", "DESC", "LIMIT", "OFFSET", "VALUES", "OPTIONAL", "GRAPH", "SERVICE", "SILENT", "BIND", "UNDEF", "MINUS", "UNION", "FILTER", "EXISTS", "NOT", "IN", "CONSTRUCT", "DESCRIBE", "ASK", "a", "true", "false", "STR", "LANG", "LANGMATCHES", "DATATYPE", "BOUND", "IRI", "URI", "BNODE", "RAND", "ABS", "CEIL", "FLOOR", "ROUND", "CONCAT", "STRLEN", "UCASE", "LCASE", "ENCODE_FOR_URI", "CONTAINS", "STRSTARTS", "STRENDS", "STRBEFORE", "STRAFTER", "YEAR", "MONTH", "DAY", "HOURS", "MINUTES", "SECONDS", "TIMEZONE", "TZ", "NOW", "UUID", "STRUUID", "MD5", "SHA1", "SHA256", "SHA384", "SHA512", "COALESCE", "IF", "STRLANG", "STRDT", "sameTerm", "isIRI", "isURI", "isBLANK", "isLITERAL", "isNUMERIC", "REGEX", "SUBSTR", "REPLACE", "COUNT", "SUM", "MIN", "MAX", "AVG", "SAMPLE", "GROUP_CONCAT", "SEPARATOR", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "INSERT", "DELETE", "DATA", "WITH", "USING", "INTO", "TO", "DEFAULT", "ALL"]


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
        self.port = self.server.server_address[1]
        self.root = f"http://127.0.0.1:{self.port}/"
        self.url = self.root + "sparql"
        threading.Thread(target=self.server.serve_forever, name="canary", daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def canary():
    server = Canary()
    yield server
    server.close()


@pytest.fixture(scope="module")
def two_graphs(tmp_path_factory) -> str:
    """`oxigraph serve` with a public and a secret named graph (and nothing in its default graph)."""
    folder = tmp_path_factory.mktemp("guard-graphs")
    public, secret = folder / "public.nt", folder / "secret.nt"
    public.write_text("".join(f'<http://e/p{i}> <http://p/name> "public {i}" .\n' for i in range(5)), encoding="utf-8")
    secret.write_text(f'<http://e/s> <http://p/name> "{SECRET_ROW}" .\n', encoding="utf-8")
    yield from _oxigraph_serve(folder / "store", None, {PUBLIC: public, SECRET: secret})


# --- the queries --------------------------------------------------------------------------------


def smuggling_queries(url: str) -> list[str]:
    """Issue 21's form and a generated family around it; each one names `url` somewhere."""
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


def red_team_queries(root: str) -> list[str]:
    """Issue 31's forms: a keyword read as part of a prefixed name by one parser and not by another,
    and Virtuoso's procedures through an empty prefix with an escaped '#' or through BASE."""
    return [
        f"PREFIX : <{root}> SELECT * WHERE {{ SERVICE:x {{ ?s ?p ?o }} }}",
        f"PREFIX : <{root}> SELECT * WHERE {{ SERVICE:sparql {{ GRAPH <{SECRET}> {{ ?s ?p ?o }} }} }}",
        f"PREFIX : <{root}> SELECT * FROM:g WHERE {{ ?s ?p ?o }}",
        f"PREFIX : <{root}> SELECT * FROM NAMED:g WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}",
        f"PREFIX : <{OPENLINK}> SELECT (:bif\\#http_get('{root}') AS ?x) {{}}",
        f"BASE <{OPENLINK}> SELECT (<bif#http_get>('{root}') AS ?x) {{}}",
    ]


def iri_spellings(root: str, path: str) -> list[tuple[str, str]]:
    """(prologue, name) pairs that each name `root + path` (an absolute http IRI): in full, through a
    prefix, the empty prefix, BASE and a relative IRI (also with ../), a \\-escaped local name,
    codepoint escapes, percent-encoding and an upper-case scheme."""
    scheme_less = root.removeprefix("http://")
    escaped = re.sub(r"([-.])", r"\\\1", path)  # local-name escapes of '-' and '.'
    return [
        ("", f"<{root}{path}>"),
        (f"PREFIX c: <{root}>", f"c:{path}"),
        (f"PREFIX : <{root}>", f":{path}"),
        (f"PREFIX c: <{root}>", f"c:{escaped}"),
        (f"BASE <{root}>", f"<{path}>"),
        (f"BASE <{root}deeper/>", f"<../{path}>"),
        (f"BASE <{root}> PREFIX c: <>", f"c:{path}"),
        ("", f"<\\u0068ttp://{scheme_less}{path}>"),
        ("", f"\\u003C{root}{path}>"),
        (f"PREFIX c\\u003A <{root}>", f"c:{path}"),
        ("", f"<{root}%{ord(path[0]):02X}{path[1:]}>"),
        ("", f"<HTTP://{scheme_less}{path}>"),
    ]


def glued_keyword_queries(root: str) -> list[str]:
    """Every keyword glued to a prefixed name (`SERVICE:x`, `FROM:g`, `GRAPH:g`, ...), where a
    keyword or a name may stand; with the keyword also declared as a prefix, and not."""
    queries = []
    for word in KEYWORDS:
        for prologue in (f"PREFIX : <{root}>", f"PREFIX : <{root}> PREFIX {word}: <{root}{word}/>"):
            queries += [
                f"{prologue} SELECT * WHERE {{ {word}:x {{ ?s ?p ?o }} }}",
                f"{prologue} SELECT * WHERE {{ ?s ?p ?o . {word}:x ?p ?o }}",
                f"{prologue} SELECT * {word}:g WHERE {{ ?s ?p ?o }}",
                f"{prologue} SELECT * WHERE {{ ?s {word}:p ?o FILTER({word}:f(?o)) }}",
                f"{prologue} SELECT * WHERE {{ ?s ?p ?o }} {word}:x",
            ]
    return queries


def service_spellings(root: str) -> list[str]:
    return [
        f"{prologue} SELECT * WHERE {{ SERVICE {name} {{ ?s ?p ?o }} }}" for prologue, name in iri_spellings(root, "spar-ql")
    ]


def engine_function_spellings(url: str) -> list[str]:
    """Virtuoso's bif:http_get (and its sql: procedures, Jena's java: functions) in every spelling."""
    forms = [("", "bif:http_get"), ("", "<bif:http_get>"), ("", "BIF:http_get"), ("", "<BIF:http_get>"),
             ("", "b\\u0069f:http_get"), ("", "<bif:http%5Fget>"), ("PREFIX b: <bif:>", "b:http_get"),
             ("PREFIX : <bif:>", ":http_get"), ("", "sql:http_get"), ("", "<sql:http_get>"),
             ("", "<java:java.lang.Runtime>"), ("", f"<{OPENLINK}bif%23http_get>")]  # fmt: skip
    forms += iri_spellings(OPENLINK, "bif#http_get")[:1]
    forms += [(f"PREFIX o: <{OPENLINK}>", "o:bif\\#http_get"), (f"PREFIX : <{OPENLINK}>", ":bif\\#http_get"),
              (f"BASE <{OPENLINK}>", "<bif#http_get>"), (f"BASE <{OPENLINK}x/>", "<../bif#http_get>"),
              (f"PREFIX o: <{OPENLINK}bif%23>", "o:http_get"), (f"PREFIX o: <{OPENLINK}bif#>", "o:http\\_get")]  # fmt: skip
    queries = []
    for prologue, name in forms:
        queries += [
            f"{prologue} SELECT ?x WHERE {{ BIND({name}('{url}') AS ?x) }}",
            f"{prologue} SELECT ({name}('{url}') AS ?x) {{}}",
            f"{prologue} SELECT ?s WHERE {{ ?s {name} '{url}' }}",
            f"{prologue} ASK {{ FILTER({name}('{url}')) }}",
        ]
    return queries


# --- what kg-mcp writes ---------------------------------------------------------------------------

_TOKEN = re.compile(r'<[^<>"{}|^`\\\x00-\x20]*>|"(?:[^"\\\n\r]|\\.)*"(?:@[A-Za-z0-9-]+|\^\^<[^>]*>)?|\S+')


def assert_written_safely(text: str, policy: QueryPolicy) -> None:
    """What kg-mcp wrote: one line of tokens apart, absolute IRIs, no PREFIX or BASE, no FROM but
    the policy's graphs, no SERVICE but its services, no word glued to a name."""
    assert "\n" not in text and "\r" not in text and "#" not in re.sub(r'<[^>]*>|"(?:[^"\\]|\\.)*"', "", text)
    tokens = _TOKEN.findall(text)
    assert " ".join(tokens) == text, text  # nothing but these tokens, one space apart
    for i, token in enumerate(tokens):
        upper = token.upper()
        assert upper not in ("PREFIX", "BASE"), text
        if token.startswith("<"):
            assert re.match(r"<[A-Za-z][A-Za-z0-9+.\-]*:", token), text  # absolute
        if upper == "SERVICE":
            target = tokens[i + 2] if tokens[i + 1].upper() == "SILENT" else tokens[i + 1]
            assert target[1:-1] in policy.services, text
        if upper == "FROM":
            graph = tokens[i + 2] if tokens[i + 1].upper() == "NAMED" else tokens[i + 1]
            assert graph[1:-1] in policy.graphs, text
        if re.fullmatch(r"[A-Za-z_]+:\S*", token) and not token.startswith("_:"):
            pytest.fail(f"a prefixed name {token!r} was written: {text}")


def check_all(queries: list[str], policy: QueryPolicy) -> dict[str, int]:
    outcomes = {"refused": 0, "written": 0}
    for query in queries:
        try:
            checked = checked_query(query, policy)
        except KGError:
            outcomes["refused"] += 1
            continue
        outcomes["written"] += 1
        assert_written_safely(checked.text, policy)
    return outcomes


def _assert_never_reached(run, queries: list[str], canary: Canary, *also: str) -> dict[str, int]:
    outcomes = {"refused": 0, "ran": 0}
    for query in queries:
        try:
            text = run(query)
        except KGError:
            outcomes["refused"] += 1
        else:
            outcomes["ran"] += 1
            for mark in (CANARY_ROW, *also):
                assert mark not in text, query
        assert canary.hits == 0, f"the canary was reached by {query!r}"
    return outcomes


def test_the_issues_query_is_refused_and_a_comment_ended_by_cr_is_dropped():
    query = "SELECT ?s WHERE { # c\r SERVICE <http://127.0.0.1:9/sparql> { ?x ?y ?s } \n}"
    with pytest.raises(QueryRefused, match="SERVICE is not allowed"):
        check_read_only(query, "generic")
    # Only \r and \n end a comment (the spec, pyoxigraph): after \u2028 the SERVICE is comment text.
    hidden = "SELECT ?s WHERE { # c\u2028 SERVICE <http://127.0.0.1:9/sparql> { ?x ?y ?s } \n}"
    assert check_read_only(hidden, "generic").text == "SELECT ?s WHERE { }"


def test_strings_are_written_short_with_their_line_ends_escaped():
    query = "SELECT * WHERE { ?s ?p '''two\r\nlines # not a comment''' ; ?q \"\"\"say \"hi\" \"\"\" }"
    text = check_read_only(query, "generic").text
    assert text == 'SELECT * WHERE { ?s ?p "two\\r\\nlines # not a comment" . ?s ?q "say \\"hi\\" " . }'


def test_codepoint_escapes_are_decoded_once_and_never_sent():
    assert check_read_only('SELECT ?s WHERE { ?s ?p "caf\\u00E9" }', "generic").text == 'SELECT ?s WHERE { ?s ?p "café" . }'
    with pytest.raises(QueryRefused):  # \u0053ERVICE is SERVICE, as the spec decodes it
        check_read_only("SELECT ?s WHERE { \\u0053ERVICE <http://127.0.0.1:9/> { ?x ?y ?s } }", "generic")
    with pytest.raises(InvalidInput, match="a second time"):  # an escape spelled by an escape
        lex('SELECT ?s WHERE { ?s ?p "\\u005C\\u005Cu0041" }', max_tokens=100)


def test_every_iri_is_written_absolute_and_the_query_runs(memory_backend):
    backend = memory_backend("<http://rdf.freebase.com/ns/m.1> <http://rdf.freebase.com/ns/film.film.genre> <http://rdf.freebase.com/ns/m.2> .")
    query = "PREFIX ns: <http://rdf.freebase.com/ns/> SELECT ?g WHERE { ns:m.1 ns:film.film\\.genre ?g }"
    text = check_read_only(query, "generic").text
    assert text == "SELECT ?g WHERE { <http://rdf.freebase.com/ns/m.1> <http://rdf.freebase.com/ns/film.film.genre> ?g . }"
    base = "BASE <http://rdf.freebase.com/> PREFIX ns: <ns/> SELECT ?g WHERE { ns:m.1 <ns/film.film.genre> ?g }"
    assert check_read_only(base, "generic").text == text
    out = sparql(backend, SETTINGS, query)
    assert out.data.total == 1 and "m.2" in out.data.rows[0][0].id
    with pytest.raises(InvalidInput, match="relative IRI"):
        check_read_only("SELECT ?s WHERE { ?s <p> ?o }", "generic")
    with pytest.raises(InvalidInput, match="prefix nope: is not declared"):
        check_read_only("SELECT ?s WHERE { ?s nope:p ?o }", "generic")


def test_expressions_keep_their_grouping_in_brackets():
    text = check_read_only("ASK { ?s ?p ?o FILTER((?o = 1 || ?o > 2) && !BOUND(?z) && ?o NOT IN (3, -4)) }", "generic").text
    assert text == (
        "ASK WHERE { ?s ?p ?o . FILTER ( ( ( ( ?o = 1 ) || ( ?o > 2 ) ) && ! BOUND( ?z ) && ( ?o NOT IN ( 3 , - 4 ) ) ) ) }"
    )


def test_labels_service_and_prefixed_names_still_pass():
    query = (
        "PREFIX wikibase: <http://wikiba.se/ontology#>\nPREFIX bd: <http://www.bigdata.com/rdf#>\n"
        "# labels\nSELECT ?x ?xLabel WHERE { ?x ?p ?o . SERVICE wikibase:label { bd:serviceParam wikibase:language \"en\". } }"
    )
    checked = check_read_only(query, "wikidata")
    assert checked.form == "SelectQuery"
    assert "SERVICE <http://wikiba.se/ontology#label> { <http://www.bigdata.com/rdf#serviceParam>" in checked.text
    with pytest.raises(QueryRefused):
        check_read_only(query, "wikidata", remote=False)


def test_constructs_the_writer_does_not_know_are_refused_in_our_words():
    with pytest.raises(QueryRefused, match="CONSTRUCT queries are not allowed") as refused:
        check_read_only("CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }", "generic")
    assert "Rewrite it as a SELECT" in refused.value.hint
    with pytest.raises(QueryRefused, match=r"!\(\^p\)"):  # rdflib's parse drops the IRI of such a step
        check_read_only("SELECT * WHERE { ?s !(^<http://a>) ?o }", "generic")
    with pytest.raises(QueryRefused, match="The function <http://example.org/f> is not one kg-mcp runs"):
        check_read_only("SELECT * WHERE { ?s ?p ?o FILTER(<http://example.org/f>(?o)) }", "generic")
    assert "<http://www.w3.org/2001/XMLSchema#dateTime>( ?o )" in check_read_only(
        "SELECT * WHERE { ?s ?p ?o } ORDER BY xsd:datetime(?o)", "freebase"
    ).text


def test_a_long_chain_of_operators_is_refused_before_the_parser_runs():
    query = "SELECT * WHERE { FILTER(" + "+".join(["1"] * 10_000) + ") }"  # 20 KB: 8.6 s of rdflib's CPU before
    with pytest.raises(InvalidInput, match=f"more than {MAX_QUERY_TOKENS:,} terms"):
        check_read_only(query, "generic")
    fitting = "SELECT * WHERE { FILTER(" + "+".join(["1"] * (MAX_QUERY_TOKENS // 2 - 10)) + ") }"
    assert check_read_only(fitting, "generic").form == "SelectQuery"


def test_red_team_forms_are_refused():
    policy = QueryPolicy(graphs=(PUBLIC,))
    for query in red_team_queries("http://127.0.0.1:9/"):
        with pytest.raises(QueryRefused):
            checked_query(query, policy)


def test_every_keyword_glued_to_a_name_is_written_apart_or_refused():
    policy = QueryPolicy(graphs=(PUBLIC,))
    outcomes = check_all(glued_keyword_queries("http://127.0.0.1:9/"), policy)
    assert outcomes["refused"] > 0 and outcomes["written"] > 0  # both paths were exercised


def test_every_spelling_of_a_service_or_an_engine_function_is_refused():
    # With an internal service allowed, SERVICE is not refused by name: the parse tree decides.
    policy = QueryPolicy(services=frozenset({"http://wikiba.se/ontology#label"}))
    queries = service_spellings("http://127.0.0.1:9/") + engine_function_spellings("http://127.0.0.1:9/")
    assert check_all(queries, policy) == {"refused": len(queries), "written": 0}
    # the same spellings of an ordinary predicate are all written as the one absolute IRI
    for prologue, name in iri_spellings("http://127.0.0.1:9/", "spar-ql"):
        text = checked_query(f"{prologue} SELECT * WHERE {{ ?s {name} ?o }}", policy).text
        assert text.replace("HTTP://", "http://").replace("%73", "s") == "SELECT * WHERE { ?s <http://127.0.0.1:9/spar-ql> ?o . }"


def test_the_dataset_is_written_in_and_graphs_outside_it_are_refused():
    policy = QueryPolicy(graphs=(PUBLIC,))
    text = checked_query("SELECT * WHERE { GRAPH ?g { ?s ?p ?o } }", policy).text
    assert text == (
        f"SELECT * FROM <{PUBLIC}> FROM NAMED <{PUBLIC}> WHERE {{ {{ VALUES ?g {{ <{PUBLIC}> }} GRAPH ?g {{ ?s ?p ?o . }} }} }}"
    )
    with pytest.raises(QueryRefused, match=f"GRAPH <{SECRET}> is not one of the graphs"):
        checked_query(f"SELECT * WHERE {{ GRAPH <{SECRET}> {{ ?s ?p ?o }} }}", policy)


def test_declared_prefixes_and_pages_are_written_as_safely(canary):
    """The server's prefixes are resolved by the writer like the query's own: with prefixes that name
    the canary, Virtuoso's procedures and the engine prefixes themselves declared, every form is still
    refused or written safely, and so is every page of what is written (CheckedQuery.page)."""
    declared = (("c", canary.root), ("", canary.root), ("b", "bif:"), ("o", OPENLINK + "bif#"), ("bif", OPENLINK))
    policy = QueryPolicy(graphs=(PUBLIC,), prefixes=declared)
    queries = _all_forms(canary) + engine_function_spellings(canary.root) + [
        "SELECT * WHERE { SERVICE c:sparql { ?s ?p ?o } }", "SELECT * WHERE { SERVICE :sparql { ?s ?p ?o } }",
        "SELECT ?x WHERE { BIND(b:http_get('x') AS ?x) }", "SELECT ?x WHERE { BIND(o:http_get('x') AS ?x) }",
        "SELECT ?x WHERE { BIND(bif:http_get('x') AS ?x) }", "SELECT ?s WHERE { ?s c:p ?o } ORDER BY ?o LIMIT 5",
    ]
    outcomes = {"refused": 0, "written": 0}
    for query in queries:
        try:
            checked = checked_query(query, policy)
        except KGError:
            outcomes["refused"] += 1
            continue
        outcomes["written"] += 1
        assert_written_safely(checked.text, policy)
        if checked.form == "SelectQuery":
            for start, size in ((0, None), (0, 201), (400, 201)):
                assert_written_safely(checked.page(start, size), policy)
    assert outcomes["refused"] > 0 and outcomes["written"] > 0
    assert checked_query("SELECT ?s WHERE { ?s c:p :o }", policy).text == (
        f"SELECT ?s FROM <{PUBLIC}> FROM NAMED <{PUBLIC}> WHERE {{ ?s <{canary.root}p> <{canary.root}o> . }}")


# --- the canary, through the tool -----------------------------------------------------------------


def _all_forms(canary: Canary) -> list[str]:
    return (
        smuggling_queries(canary.url)
        + red_team_queries(canary.root)
        + service_spellings(canary.root)
        + [q for q in glued_keyword_queries(canary.root) if ("SERVICE" in q or "GRAPH" in q or "FROM" in q)]
    )


@pytest.mark.parametrize("where", ["local store", "endpoint"])
def test_smuggling_never_reaches_the_canary(where, request, canary):
    if where == "local store":
        backend = open_store(request.getfixturevalue("metaqa_store_dir"), settings=SETTINGS)
    else:
        backend = open_endpoint(request.getfixturevalue("oxigraph_endpoint"), settings=SETTINGS)
    try:
        outcomes = _assert_never_reached(lambda q: sparql(backend, SETTINGS, q).text, _all_forms(canary), canary)
    finally:
        backend.close()
    assert outcomes["refused"] > 0 and outcomes["ran"] > 0  # both paths were exercised
    assert canary.hits == 0


def test_no_row_of_another_graph_on_an_endpoint_with_graph(two_graphs, canary):
    """--graph urn:g:public on `oxigraph serve`: no query reads the secret graph, not even one that
    calls the endpoint itself as a SERVICE (issue 31's `SERVICE:query { GRAPH <secret> ... }`)."""
    settings = Settings(sparql_tool=True, graphs=[PUBLIC])
    backend = open_endpoint(two_graphs, settings=settings)
    endpoint_root = two_graphs.rsplit("/", 1)[0] + "/"
    queries = [
        "SELECT ?o WHERE { ?s ?p ?o }",
        f"SELECT ?o WHERE {{ GRAPH <{SECRET}> {{ ?s ?p ?o }} }}",
        "SELECT ?g ?o WHERE { GRAPH ?g { ?s ?p ?o } }",
        "SELECT ?o WHERE { GRAPH ?g { ?s ?p ?o } FILTER(?g != <urn:nothing>) }",
        f"SELECT ?o WHERE {{ VALUES ?g {{ <{SECRET}> }} GRAPH ?g {{ ?s ?p ?o }} }}",
        "SELECT ?o WHERE { { SELECT ?o WHERE { GRAPH ?h { ?s ?p ?o } } } }",
        f"PREFIX : <{endpoint_root}> SELECT ?o WHERE {{ SERVICE:query {{ GRAPH <{SECRET}> {{ ?s ?p ?o }} }} }}",
        f"SELECT ?o WHERE {{ SERVICE <{two_graphs}> {{ GRAPH ?g {{ ?s ?p ?o }} }} }}",
        "PREFIX : <urn:g:> SELECT ?o FROM:secret WHERE { ?s ?p ?o }",
        f"SELECT ?o FROM <{SECRET}> WHERE {{ ?s ?p ?o }}",
        f"SELECT ?o FROM NAMED <{SECRET}> WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }}",
    ]
    try:
        outcomes = _assert_never_reached(lambda q: sparql(backend, settings, q).text, queries, canary, SECRET_ROW)
        public = sparql(backend, settings, "SELECT ?g ?o WHERE { GRAPH ?g { ?s ?p ?o } }")
        assert public.data.total == 5 and {row[0].id for row in public.data.rows} == {f"<{PUBLIC}>"}
    finally:
        backend.close()
    assert outcomes["ran"] >= 5 and outcomes["refused"] >= 4
    # The same endpoint without --graph does hold the secret row: the test can see a leak.
    unrestricted = open_endpoint(two_graphs, settings=SETTINGS)
    try:
        assert SECRET_ROW in sparql(unrestricted, SETTINGS, "SELECT ?o WHERE { GRAPH ?g { ?s ?p ?o } }").text
    finally:
        unrestricted.close()


async def test_smuggling_through_a_real_server_never_reaches_the_canary(metaqa_store_dir, canary):
    queries = [q for q in smuggling_queries(canary.url) if "# c" in q][:20] + red_team_queries(canary.root)
    with kg_mcp_server("--store", str(metaqa_store_dir), "--enable-sparql") as server:
        async with httpx2.AsyncClient(timeout=60) as http, \
                Client(streamable_http_client(server.url, http_client=http)) as client:
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


async def test_no_row_of_another_graph_through_a_real_server(two_graphs, canary):
    """Issue 31's repro as the red team ran it: `kg-mcp serve --sparql URL --graph urn:g:public`."""
    root = two_graphs.rsplit("/", 1)[0] + "/"
    queries = [
        f"PREFIX : <{root}> SELECT ?o WHERE {{ SERVICE:query {{ GRAPH <{SECRET}> {{ ?s ?p ?o }} }} }}",
        f"SELECT ?o WHERE {{ GRAPH <{SECRET}> {{ ?s ?p ?o }} }}",
        "SELECT ?g ?o WHERE { GRAPH ?g { ?s ?p ?o } }",
        f"PREFIX : <{canary.root}> SELECT * WHERE {{ SERVICE:x {{ ?s ?p ?o }} }}",
    ]
    with kg_mcp_server("--sparql", two_graphs, "--graph", PUBLIC, "--enable-sparql") as server:
        async with httpx2.AsyncClient(timeout=60) as http, \
                Client(streamable_http_client(server.url, http_client=http)) as client:
            results = [await client.call_tool("sparql", {"query": query}) for query in queries]
    texts = [result.content[0].text for result in results]
    assert [result.is_error for result in results] == [True, True, False, True], texts
    assert all(SECRET_ROW not in text and CANARY_ROW not in text for text in texts)
    assert "public 0" in texts[2] and "5 rows" in texts[2]
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


def test_a_backend_dropped_without_close_stops_its_query_workers(wikidata_store_dir):
    """A store nobody closed (a test's, a script's) takes its workers with it when it is collected,
    rather than leaving them running with the store open until the process ends."""
    settings = Settings(sparql_tool=True, query_workers=2)
    backend = open_store(wikidata_store_dir, settings=settings)
    sparql(backend, settings, "SELECT ?s WHERE { ?s ?p ?o } LIMIT 1")
    while any(t.name == "kg-mcp query worker start" for t in threading.enumerate()):  # both started
        time.sleep(0.05)
    processes = [worker.process for worker in backend.query_pool()._workers]
    assert len(processes) == 2 and all(p.poll() is None for p in processes)
    del backend
    gc.collect()
    assert [p.poll() for p in processes] == [-signal.SIGKILL] * 2  # stopped and reaped: no warning either


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
    # On a stock Virtuoso, SELECT (bif:http_get('http://...') AS ?x) {} fetches the URL (and so does
    # <bif:http_get>): refused in every spelling, while bif:contains (its text search, local to the
    # engine) still runs.
    source = tmp_path / "one.nt"
    source.write_text('<http://e/a> <http://www.w3.org/2000/01/rdf-schema#label> "Alpha" .\n', encoding="utf-8")
    backend = open_endpoint(virtuoso.serve("guard-bif", source), settings=SETTINGS)
    queries = engine_function_spellings(canary.root) + red_team_queries(canary.root)[-2:]
    try:
        for query in queries:
            with pytest.raises(KGError):  # refused, or a prefix Virtuoso does not know either (BIF:)
                sparql(backend, SETTINGS, query)
        assert canary.hits == 0
        found = sparql(backend, SETTINGS, 'SELECT ?s WHERE { ?s ?p ?o . ?o bif:contains "Alpha" }')
        assert [row[0].id for row in found.data.rows] == ["<http://e/a>"]
    finally:
        backend.close()
