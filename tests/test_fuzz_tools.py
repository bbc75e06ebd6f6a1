"""Hostile input, generated: 10,000 cases per tool, each a result or a clear KGError.

Each tool's arguments are built from hostile fragments (quotes, angle brackets, braces,
newlines, NUL and other control characters, SPARQL fragments, escapes, unicode confusables,
random code points, very long strings) mixed with valid ids and labels of the demo KG, so that
some calls succeed and take the tools' deeper paths. The tool functions run directly over the
real demo store (pyoxigraph, in memory); the backend is the real OxigraphBackend, subclassed only
to record the SPARQL it runs.

Every hostile string carries MARK, a word that no query template and no store contains. After
each call, MARK must sit only inside a string literal or an IRI of every query the backend
actually ran: input that escaped its term would show up outside them. (A query with broken
quoting would not run at all: the store raises SyntaxError, which is no KGError, and fails the
case.)

The `sparql` tool gets its own generator: SELECT/ASK/CONSTRUCT/DESCRIBE and every update form,
SERVICE/FROM/LOAD pointing at a loopback trap socket, nested in FILTER EXISTS, subqueries,
OPTIONAL..., then mutated by random insertions. Whatever passes the read-only check must run as
SELECT or ASK, and the trap must never be connected to: no outbound request, ever.

Hypothesis runs the cases: it draws one 64-bit seed per case (each case distinct, printed on
failure through note()) and the arguments are built from the seed with Python's random, from
weighted pools. Structured strategies cost 1-5 ms a case to draw here, more than the tool calls
themselves; a seed keeps 10,000 cases per tool within the time budget. KG_FUZZ_CASES=N runs more
(or fewer): `make test` runs 3,000 per tool to keep the whole suite within CI's ten minutes, and
`make fuzz` the full 10,000. atheris was not used: libFuzzer takes over the process and its exit, which does not
sit inside a pytest run, and these targets are Python code whose escaping bugs random structured
input finds as well as coverage guidance would.

Lone surrogates (U+D800-U+DFFF) are left out of the generated text: no transport can deliver
them (the SDK's JSON parser refuses them, see test_faults.py); an in-process caller can, and gets
a tool error (a regression test at the end).
"""

from __future__ import annotations

import os
import random
import re
import socket
import threading
from collections import Counter

import pyoxigraph as ox
import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from kg_mcp.backends import open_demo
from kg_mcp.backends.oxigraph_store import OxigraphBackend
from kg_mcp.errors import KGError, QueryRefused
from kg_mcp.settings import Settings
from kg_mcp.tools import ToolOutput, explore_kg, find_entities, follow, get_relations, search, sparql, verify
from kg_mcp.tools.sparql import check_read_only, declared_prefixes
from kg_mcp.tools.verify import PathClaim, TripleClaim

CASES = int(os.environ.get("KG_FUZZ_CASES", "10000"))
pytestmark = pytest.mark.timeout(600)  # a bound on hanging; the whole file takes about two minutes
FUZZ = settings(
    max_examples=CASES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
MARK = "Zq9Mark"
_BLANK = re.compile(r"_:N[0-9a-f]{32}")
MARGIN = 400  # room for the cut notice that follows max_output_chars

# A string literal (with its language tag or datatype) or an IRI, as a query writes them.
_TERM = re.compile(r'"(?:[^"\\\n\r]|\\.)*"(?:@[A-Za-z0-9-]+|\^\^<[^<>]*>)?|<[^<>"{}|^`\\\x00-\x20]*>')


class RecordingBackend(OxigraphBackend):
    """The real backend over the demo store; it also keeps every query it runs."""

    def __init__(self, base: OxigraphBackend):
        super().__init__(base.store, base.profile, base.vocab, base.settings, location=base.location)
        self.queries: list[str] = []
        self.user_queries: list[tuple[str, object]] = []

    def _solutions(self, query):
        self.queries.append(query)
        return super()._solutions(query)

    def run_query(self, query, row_cap, *, graphs=None):
        rows = super().run_query(query, row_cap, graphs=graphs)  # in a worker process: the query's form is asked below
        result = self.store.query(query)
        self.user_queries.append((query, bool(result) if isinstance(result, ox.QueryBoolean) else result))
        return rows


class Trap:
    """A loopback socket that counts every connection: SERVICE/LOAD/FROM targets point here."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self):
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


SETTINGS = Settings(sparql_tool=True)
BACKEND = RecordingBackend(open_demo(settings=SETTINGS))
TRAP = Trap()
TRAP_IRI = f"http://127.0.0.1:{TRAP.port}/"


@pytest.fixture(scope="module", autouse=True)
def _close_trap():
    yield
    TRAP.close()


@pytest.fixture(scope="module", autouse=True)
def _pyparsing_as_served():
    """matplotlib (imported by the evaluation report's tests) turns pyparsing's packrat cache on
    for the whole process, which makes rdflib's SPARQL parser two to three times slower. The server
    never imports it: the fuzz runs as served, and the setting is put back afterwards."""
    from pyparsing import ParserElement

    was_on = ParserElement._packratEnabled
    ParserElement.disable_memoization()
    yield
    if was_on:
        ParserElement.enable_packrat()


# --- generation -------------------------------------------------------------------------------

ENTITIES = [
    "wd:Q5582", "Q5582", "Vincent van Gogh", "wd:Q55", "Netherlands", "Zundert", "wd:Q9883",
    "wd:Q1028181", "painter", "<http://www.wikidata.org/entity/Q5582>", "Q727", "Amsterdam",
    "wd:Q999999999", "Theo van Gogh", "wdt:P19", "P19", "vincent van gogh", "Vincent",
]  # fmt: skip
RELATIONS = [
    "wdt:P19", "P19", "place of birth", "~wdt:P19", "~P106", "occupation", "wdt:P17", "country",
    "capital", "P36", "~wdt:P106", "wdt:P31", "<http://www.wikidata.org/prop/direct/P19>", "nonexistent relation",
]  # fmt: skip
OBJECTS = ["wd:Q9883", "Zundert", "Amsterdam", "wd:Q727", "1853-03-30", "Rotterdam", "wd:Q55", "42", "Netherlands"]
NAMES = ENTITIES + ["Vincent", "van", "Gogh", "The", "ams", "NETHERLANDS", "z"]
FRAGMENTS = [
    '"', "'", '"""', "'''", "<", ">", "{", "}", "(", ")", "\\", "\n", "\r", "\t", "\x00", "\x7f", "\x85",
    "#", ";", ".", ",", "?s", "$x", "~", "|", "^^", "@en", " ", "  ", ":", "_:", "_:b0", "*",
    "\u202e", "\u200b", "\u200d", "\ufeff", "\u2028", "\u00a0", "\u0301",
    "Ｓｔｅｖｅｎ", "Vіncent", "ＶＡＬＵＥＳ", "ﬁ", "Ⅸ", "𝐕𝐚𝐧", "\U0001f600", "ß", "İ",
    "%22", "%3E", "%7D", "\\u0022", "\\U0000007D", "\\n", "&quot;", "&#62;",
    '" }', '"@en', '"^^xsd:string', "> ?p ?o }", "} UNION { ?s ?p ?o }", '" . ?s ?p ?o . FILTER("',
    "'} ; DROP ALL ; #", " ; INSERT DATA { <a> <b> <c> }", "DELETE WHERE { ?s ?p ?o }",
    f"SERVICE <{TRAP_IRI}> {{ ?s ?p ?o }}", f"LOAD <{TRAP_IRI}x.ttl>", "CLEAR ALL",
    "FILTER(true)", " LIMIT 1", "# comment\n", "wd:", "wdt:", "wd:Q", "Q", "P", "http://", "<http://",
    "wd:Q5582", "Q5582", "wdt:P19", "Vincent van Gogh", "place of birth",
]  # fmt: skip
PADS = [" ", "\u00a0", "\u2003", "\u2009", "\u3000", "\u205f"]  # whitespace, stripped from ids and names
LONG = [2030, 2040, 2047, 2048, 2049, 5000, 100_000]  # around and far past the 2,048-character limit
SEEDS = st.integers(0, 2**64 - 1)


class Gen:
    """The arguments of one case, from one seed."""

    def __init__(self, seed: int):
        self.r = random.Random(seed)

    def char(self) -> str:
        r = self.r.random()
        if r < 0.4:
            return chr(self.r.randint(0x20, 0x7E))
        if r < 0.55:
            return chr(self.r.choice([*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)]))
        if r < 0.9:
            code = self.r.randint(0xA0, 0xFFFD)
            return "\ufffd" if 0xD800 <= code <= 0xDFFF else chr(code)
        return chr(self.r.randint(0x10000, 0x10FFFF))

    def parts(self) -> str:
        return "".join(
            self.r.choice(FRAGMENTS) if self.r.random() < 0.6 else self.char() for _ in range(self.r.randint(0, 3))
        )

    def hostile(self) -> str:
        """Hostile text around MARK; one in eight is long."""
        if self.r.random() < 1 / 8:
            return self.r.choice('"}x\u00e9< \\') * self.r.choice(LONG) + MARK + self.parts()
        return self.parts() + MARK + self.parts()

    def valid(self, pool: list[str]) -> str:
        def pad() -> str:
            return "".join(self.r.choice(PADS) for _ in range(self.r.randint(0, 2)))

        return pad() + self.r.choice(pool) + pad()

    def arg(self, pool: list[str]) -> str:
        """Half valid (so calls succeed and reach the deep paths), half hostile or valid + hostile."""
        kind = self.r.randint(0, 5)
        if kind < 3:
            return self.valid(pool)
        if kind == 3:
            return self.hostile()
        if kind == 4:
            return self.r.choice(pool) + self.hostile()
        return self.hostile() + self.r.choice(pool)

    def args(self, pool: list[str], most: int, mostly_valid: bool) -> list[str]:
        each = self.valid if mostly_valid else self.arg
        return [each(pool) for _ in range(self.r.randint(0, most))]

    def triple(self) -> TripleClaim:
        return TripleClaim(subject=self.arg(ENTITIES), relation=self.arg(RELATIONS), object=self.arg(OBJECTS + ENTITIES))

    def claim(self) -> TripleClaim | PathClaim:
        if self.r.random() < 0.7:
            return self.triple()
        return PathClaim(path=[self.triple() for _ in range(self.r.randint(1, 3))])


# --- the checks shared by every case ----------------------------------------------------------

# Bugs this fuzz found are fixed and kept as regression tests at the end of this file; a bug
# found later is listed here (a name and a matcher) so the fuzz counts it until it is fixed.
KNOWN_BUGS: dict = {}


def _check_queries() -> None:
    for query in BACKEND.queries:
        outside = _TERM.sub(" ", query)
        assert MARK not in outside, f"input escaped its literal/IRI in:\n{query}"


def run_case(stats: Counter, tool, *args) -> ToolOutput | None:
    note(f"{tool.__name__}{tuple(args)!r}")
    BACKEND.queries.clear()
    BACKEND.user_queries.clear()
    stats["cases"] += 1
    out = None
    try:
        out = tool(BACKEND, SETTINGS, *args)
    except KGError as error:
        message = str(error)
        assert message.strip() and "Traceback" not in message, repr(error)
        stats["tool error"] += 1
    except Exception as error:  # anything else fails the case, unless it is a known, reported bug
        known = [name for name, match in KNOWN_BUGS.items() if match(tool, error)]
        if not known:
            raise
        stats[f"known bug: {known[0]}"] += 1
    else:
        assert isinstance(out, ToolOutput) and out.text, out
        assert len(out.text) <= SETTINGS.max_output_chars + MARGIN
        out.data.model_dump(mode="json")  # the structured content serialises
        stats["result"] += 1
    stats["queries"] += len(BACKEND.queries)
    _check_queries()
    if tool is not sparql:
        assert not BACKEND.user_queries
    return out


def _report(name: str, stats: Counter) -> None:
    print(f"\nfuzz {name}: {dict(stats)}")
    assert stats["cases"] >= CASES, stats  # hypothesis ran the cases asked for
    # The mix works: both outcomes are common, so the deep paths ran too. A twentieth each: follow's
    # random paths are answered in about one case of ten (2,701 errors to 299 results in one run),
    # so a tenth was a floor its own draws fell under.
    assert stats["result"] >= CASES // 20 and stats["tool error"] >= CASES // 20, stats


# --- one test per tool ------------------------------------------------------------------------


def test_fuzz_search():
    stats = Counter()

    @FUZZ
    @given(seed=SEEDS)
    def case(seed):
        g = Gen(seed)
        direction = g.r.choice(["outgoing", "incoming"]) if g.r.random() < 0.9 else g.arg(["outgoing", "incoming"])
        pick = g.r.random()
        if pick < 0.4:
            filters = None
        elif pick < 0.98:
            filters = g.args(RELATIONS, 3, mostly_valid=pick < 0.7)
        else:
            filters = RELATIONS * 4  # past the 50-filter limit
        limit = g.r.choice([0, 0, 0, 1, 5, -1, 10**9])
        if g.r.random() < 0.3:  # the batched form: several entities, one table
            run_case(stats, search, "", direction, filters, limit, g.args(ENTITIES, 4, mostly_valid=g.r.random() < 0.6))
        else:
            run_case(stats, search, g.arg(ENTITIES), direction, filters, limit)

    case()
    _report("search", stats)


def test_fuzz_follow():
    stats = Counter()

    @FUZZ
    @given(seed=SEEDS)
    def case(seed):
        g = Gen(seed)
        pick = g.r.random()
        limit = g.r.choice([0, 0, 1, 3, -2, 10**6])
        if pick < 0.3:  # intersected paths, each [start, relation...]
            paths = [[g.arg(ENTITIES), *g.args(RELATIONS, 3, mostly_valid=True)] for _ in range(g.r.randint(0, 6))]
            run_case(stats, follow, "", [], [], paths, limit)
        elif pick < 0.98:
            starts = g.args(ENTITIES, 3, mostly_valid=True) if pick < 0.45 else []
            path = g.args(RELATIONS, 4, mostly_valid=pick < 0.7)
            # issue 23's leave-out, rarely wrong: the mix above keeps results at about a tenth
            through = g.r.choice(["start"] * 20 + ["none"] * 19 + ["everything"])
            exclude = g.args(ENTITIES, 2, mostly_valid=True) if g.r.random() < 0.1 else []
            run_case(stats, follow, g.arg(ENTITIES) if not starts else "", path, starts, [], limit, through, exclude)
        else:
            run_case(stats, follow, g.arg(ENTITIES), RELATIONS * 2, [], [], 0)  # past the hop limit

    case()
    _report("follow", stats)


def test_fuzz_get_relations():
    stats = Counter()

    @FUZZ
    @given(seed=SEEDS)
    def case(seed):
        run_case(stats, get_relations, Gen(seed).arg(ENTITIES))

    case()
    _report("get_relations", stats)


def test_fuzz_explore_kg():
    stats = Counter()

    @FUZZ
    @given(seed=SEEDS)
    def case(seed):
        g = Gen(seed)
        pick = g.r.random()
        relations = g.args(RELATIONS, 3, mostly_valid=pick < 0.6) if pick < 0.98 else RELATIONS * 3  # past 30
        if g.r.random() < 0.3:  # the batched form
            run_case(stats, explore_kg, "", relations, g.args(ENTITIES, 4, mostly_valid=True), g.r.choice([0, 2, -1]))
        else:
            run_case(stats, explore_kg, g.arg(ENTITIES), relations)

    case()
    _report("explore_kg", stats)


def test_fuzz_verify():
    stats = Counter()
    too_many = [TripleClaim(subject="wd:Q5582", relation="wdt:P19", object="wd:Q9883")] * 51

    @FUZZ
    @given(seed=SEEDS)
    def case(seed):
        g = Gen(seed)
        claims = [g.claim() for _ in range(g.r.randint(0, 3))] if g.r.random() < 0.99 else too_many
        run_case(stats, verify, claims)

    case()
    _report("verify", stats)


def test_fuzz_find_entities():
    stats = Counter()

    @FUZZ
    @given(seed=SEEDS)
    def case(seed):
        g = Gen(seed)
        run_case(stats, find_entities, g.arg(NAMES), g.r.randint(1, 50))

    case()
    _report("find_entities", stats)


# --- sparql -----------------------------------------------------------------------------------

T = TRAP_IRI
PROLOGUES = [
    "", "PREFIX wd: <http://www.wikidata.org/entity/> ", f"PREFIX : <{T}> ", f"BASE <{T}> ",
    f"PREFIX wikibase: <{T}> ", "PREFIX x: <http://a.example/#> ", f"PREFIX e: <{T}>\n",
    f"PREFIX s: <{T}> PREFIX s: <http://www.wikidata.org/entity/> ",
    f"PREFIX s: <http://www.wikidata.org/entity/> PREFIX s: <{T}> ", "# a comment\n", "#", f"BASE <{T}#> ",
]  # fmt: skip
FORMS = [
    "SELECT * WHERE", "SELECT ?s WHERE", "SELECT DISTINCT ?s ?o WHERE", "SELECT (COUNT(*) AS ?n) WHERE",
    "ASK", "ASK WHERE", "CONSTRUCT { ?s ?p ?o } WHERE", "DESCRIBE ?s WHERE", "DESCRIBE <http://www.wikidata.org/entity/Q5582>",
    f"SELECT * FROM <{T}g> WHERE", f"SELECT * FROM NAMED <{T}g> WHERE", f"ASK FROM <{T}g>",
    "INSERT DATA", "INSERT { ?s ?p 1 } WHERE", "DELETE WHERE", "DELETE DATA", "DELETE { ?s ?p ?o } WHERE",
    f"LOAD <{T}x.ttl> ;", f"LOAD SILENT <{T}x.ttl> INTO GRAPH <urn:g> ;", "CLEAR ALL ;", "CLEAR DEFAULT ;",
    "DROP ALL ;", "DROP GRAPH <urn:kg-mcp:meta> ;", "CREATE GRAPH <urn:x> ;", "ADD DEFAULT TO <urn:x> ;",
    "COPY DEFAULT TO <urn:x> ;", "MOVE DEFAULT TO <urn:x> ;", f"WITH <{T}g> DELETE {{ ?s ?p ?o }} WHERE",
]  # fmt: skip
# The patterns share their variables: no cartesian products (a local store has no query time limit).
PATTERNS = [
    "?s ?p ?o", "<http://www.wikidata.org/entity/Q5582> ?p ?o", "?s <http://www.wikidata.org/prop/direct/P19> ?o",
    "wd:Q5582 ?p ?o", ":x ?p ?o", "e:y ?p ?o", "s:Q5582 ?p ?o",
    f"SERVICE <{T}> {{ ?s ?p ?o }}", f"SERVICE SILENT <{T}sparql> {{ }}", "SERVICE ?svc { ?s ?p ?o }",
    "SERVICE :x { ?s ?p ?o }", "SERVICE wikibase:label { ?s ?p ?o }", "SERVICE e:z { }", "SERVICE s:Q1 { }",
    "SERVICE <x> { }", "SERVICE <> { }", f"SERVICE <{T.upper()}> {{ }}", f"SERVICE\t<{T}>{{}}", f"service <{T}> {{}}",
    f"FILTER EXISTS {{ SERVICE <{T}> {{ ?s ?p ?o }} }}", f"FILTER NOT EXISTS {{ SERVICE <{T}> {{ }} }}",
    f"BIND(EXISTS {{ SERVICE <{T}> {{ }} }} AS ?b)", f"{{ SELECT * WHERE {{ SERVICE <{T}> {{ ?s ?p ?o }} }} }}",
    f"OPTIONAL {{ SERVICE <{T}> {{ ?s ?p ?o }} }}", f"MINUS {{ SERVICE <{T}> {{ ?s ?p ?o }} }}",
    f"GRAPH ?g {{ SERVICE <{T}> {{ }} }}", f"{{ ?s ?p ?o }} UNION {{ SERVICE <{T}> {{ ?s ?p ?o }} }}",
    f"VALUES ?svc {{ <{T}> }} SERVICE ?svc {{ }}", "GRAPH ?g { ?s ?p ?o }", 'BIND("x" AS ?b)',
    "OPTIONAL { ?s <http://www.w3.org/2000/01/rdf-schema#label> ?l }", 'FILTER(REGEX(STR(?o), "^Q"))',
    "VALUES ?s { <http://www.wikidata.org/entity/Q5582> }", "FILTER(?o != <http://a.example/#>)",
    "?s ?p '''#'''", '?s ?p "#"', '?s ?p """multi\nline"""',
]  # fmt: skip
MODIFIERS = ["", " LIMIT 5", " LIMIT 0", " ORDER BY ?s", " OFFSET 3", " GROUP BY ?s", " VALUES ?x { 1 }", " # tail", "\n"]
MUTATIONS = [
    "{", "}", "SERVICE", f"<{T}>", "FROM", "INSERT", "LOAD", ";", "#", "\n", "'", '"', "'''", ".", "?s ?p ?o", "(", ")",
    "\\u0053ERVICE", "SERV\\u0049CE", "\x00", MARK, "SELECT", "WHERE", "UNION", "*", "\\U00000053",
]  # fmt: skip


def sparql_query(g: Gen) -> str:
    """A query from the grammar's pieces, then up to two random insertions anywhere; or hostile text."""
    r = g.r
    if r.random() < 0.1:
        return g.hostile()
    patterns = [r.choice(PATTERNS) for _ in range(r.randint(0, 2))]
    form = r.choice(FORMS[:5] if r.random() < 0.4 else FORMS)  # SELECT/ASK often, so that many run
    query = r.choice(PROLOGUES) + form + " { " + " . ".join(patterns) + " }" + r.choice(MODIFIERS)
    for _ in range(r.choice([0, 0, 0, 1, 2])):
        at = r.randint(0, len(query))
        query = query[:at] + (r.choice(MUTATIONS) if r.random() < 0.7 else g.parts()) + query[at:]
    return query


def test_fuzz_sparql():
    stats = Counter()
    triples = len(BACKEND.store)

    @FUZZ
    @given(seed=SEEDS)
    def case(seed):
        query = sparql_query(Gen(seed))
        out = run_case(stats, sparql, query)
        for ran, result in BACKEND.user_queries:
            # exactly what kg-mcp wrote from the checked parse, or its first page (rdflib names the
            # blank nodes of [] and ( ) afresh on each parse)
            checked = check_read_only(query.strip(), BACKEND.profile.name, remote=False, prefixes=declared_prefixes(BACKEND))
            written = {checked.text}
            if checked.form == "SelectQuery":
                written |= {checked.page(0, None), checked.page(0, SETTINGS.sparql_row_cap)}
            assert _BLANK.sub("_:b", ran) in {_BLANK.sub("_:b", text) for text in written}
            assert isinstance(result, (ox.QuerySolutions, bool)), (query, type(result))  # SELECT or ASK only
        if out is not None:
            stats["ran"] += 1
        assert TRAP.connections == 0, f"an outbound connection was made for: {query!r}"

    case()
    assert len(BACKEND.store) == triples
    _report("sparql", stats)


# --- regressions: bugs this fuzz found, now fixed ----------------------------------------------


def test_sparql_invalid_unicode_escape_is_a_tool_error():
    with pytest.raises(KGError):
        sparql(BACKEND, SETTINGS, "SELECT * WHERE { ?s ?p ?o } # \\UFFFFFFFF")


def test_sparql_nested_too_deeply_is_a_tool_error():
    query = "SELECT * WHERE { ?s ?p ?o FILTER(" + "(" * 300 + "1" + ")" * 300 + ") }"
    with pytest.raises(KGError, match="nested too deeply"):
        sparql(BACKEND, SETTINGS, query)


@pytest.mark.parametrize(
    "tool, args",
    [(search, ("Vincent\ud800",)), (find_entities, ("a\ud800",)), (sparql, ('SELECT * WHERE { ?s ?p "\ud800" }',))],
    ids=["search", "find_entities", "sparql"],
)
def test_lone_surrogates_are_tool_errors(tool, args):
    # Only an in-process caller can send these (JSON transports refuse them), hence minor.
    with pytest.raises(KGError):
        tool(BACKEND, SETTINGS, *args)


class _NoNetwork(RecordingBackend):
    """Refuses to run a query that names a host other than loopback (the store would call it)."""

    def _run_any(self, query):
        if "wikiba.se" in query:
            raise RuntimeError("the local store was about to send a SERVICE request to wikiba.se")
        return super()._run_any(query)


def test_label_service_on_a_local_store_is_refused():
    # On Wikidata's endpoint the label service runs inside the endpoint. A local pyoxigraph store
    # with the wikidata profile (the demo KG) would send an HTTP request to wikiba.se instead.
    query = (
        "PREFIX wikibase: <http://wikiba.se/ontology#> PREFIX bd: <http://www.bigdata.com/rdf#> "
        'SELECT ?x WHERE { ?x ?p ?o . SERVICE wikibase:label { bd:serviceParam wikibase:language "en". } } LIMIT 1'
    )
    with pytest.raises(QueryRefused):
        sparql(_NoNetwork(BACKEND), SETTINGS, query)
