"""Output bounds on a big hub, and read-only serving checked byte for byte.

A store with a hub of 20,000 incoming edges, 2,000 outgoing ones and 1,000 distinct relations is
built with `kg-mcp load`'s loader; every tool is called on it with small caps, and every answer
must stay within max_output_chars (plus the cut notice) and say what was cut, the total, and how
to narrow the call. Then a store is served over stdio for a whole session (every tool, hostile
arguments, every kind of refused sparql) and its directory must be unchanged, byte for byte.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import sys
import threading
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from kg_mcp.backends import open_store
from kg_mcp.loading import load_sources
from kg_mcp.settings import Settings
from kg_mcp.tools import explore_kg, find_entities, get_relations, search, sparql, verify
from kg_mcp.tools.verify import TripleClaim

HUB_IN, HUB_OUT, HUB_RELATIONS = 20_000, 2_000, 1_000
LIMITS = Settings(
    search_k=50, search_p=300, explore_limit=200, max_output_chars=4_000, max_cell_chars=60, sparql_row_cap=500, sparql_tool=True
)
NOTICE = 400  # the cut notice after max_output_chars
REL = "http://kg-mcp.local/relation/"
ENT = "http://kg-mcp.local/entity/"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    src = tmp_path_factory.mktemp("hub") / "hub.txt"
    lines = [f"e{i}|links_to|Hub" for i in range(HUB_IN)]
    lines += [f"Hub|has_part|part number {i}" for i in range(HUB_OUT)]
    lines += [f"Hub|relation_{i}|x{i % 7}" for i in range(HUB_RELATIONS)]
    lines += ["Hub|described_as|" + "a very long name " * 300, "Hub|population|1234"]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = src.parent / "hub.store"
    load_sources([src], store, progress=False)
    backend = open_store(store, settings=LIMITS)
    yield backend
    backend.close()


def _bounded(text: str) -> str:
    assert len(text) <= LIMITS.max_output_chars + NOTICE, len(text)
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            assert all(len(c) <= LIMITS.max_cell_chars + 2 for c in cells), line  # + escapes
    return text


def _char_cut(text: str, narrow: str) -> None:
    match = re.search(r"\[Output cut at 4000 characters: (\d+) of (\d+) lines shown\. (.+)\]$", text)
    assert match, text[-400:]
    shown, total = int(match.group(1)), int(match.group(2))
    assert shown < total and narrow in match.group(3)


def _table_column(text: str, column: int = 0) -> list[str]:
    """The cells of one column (the first by default) of each row of the markdown table."""
    lines = [line for line in text.splitlines() if line.startswith("| ")][1:]  # past the header row
    return [line[2:].split(" | ")[column].strip() for line in lines]


def test_search_unfiltered_hub_lists_properties_with_the_total(hub):
    out = search(hub, LIMITS, "kg:Hub", "incoming")
    text, data = _bounded(out.text), out.data
    assert data.view == "properties" and data.total == HUB_IN and data.truncated and data.shown == 0
    assert f"{HUB_IN} rows, more than {LIMITS.search_k}; showing its 1 property instead" in text
    assert "properties_to_filter_for" in text  # how to narrow


def _paged(out, total: int) -> str:
    """A listing's page: within the budget with no cut notice, as many structured rows as the text
    has, and a last line with the rows shown of `total` and the cursor that reads on."""
    text = _bounded(out.text)
    assert len(text) <= LIMITS.max_output_chars and "[Output cut" not in text
    assert out.data.offset == 0 and out.data.next_cursor
    assert text.endswith(f'Next page: call again with the same arguments and cursor="{out.data.next_cursor}".')
    assert re.search(rf"Rows 1-\d+ (of each relation )?(of )?.*{total:,}", text.splitlines()[-1])
    return text


def test_search_outgoing_property_view_is_paged_by_characters(hub):
    out = search(hub, LIMITS, "kg:Hub", "outgoing")
    assert out.data.view == "properties" and out.data.total == HUB_OUT + HUB_RELATIONS + 2
    text = _paged(out, HUB_RELATIONS + 3)
    data = out.data
    assert (data.properties_total, data.properties_shown) == (HUB_RELATIONS + 3, len(data.properties))
    assert 0 < data.properties_shown < data.properties_total
    assert [p.property for p in data.properties] == _table_column(text)
    assert f"Rows 1-{data.properties_shown} of {HUB_RELATIONS + 3:,} shown" in text


def test_search_filtered_is_paged_at_p_rows_and_by_characters(hub):
    out = search(hub, LIMITS, "kg:Hub", "incoming", ["links_to"])
    text, data = _paged(out, HUB_IN), out.data
    assert data.total == HUB_IN and 0 < data.shown == len(data.rows) <= LIMITS.search_p and data.truncated
    assert [r.value.id for r in data.rows] == _table_column(text, 2)  # the value column, row for row
    assert f"Rows 1-{data.shown} of {HUB_IN:,} shown" in text
    again = search(hub, LIMITS, "kg:Hub", "incoming", ["links_to"], cursor=data.next_cursor)
    assert again.data.offset == data.shown and not {r.value.id for r in again.data.rows} & {r.value.id for r in data.rows}


def test_get_relations_is_paged_by_characters(hub):
    out = get_relations(hub, LIMITS, "kg:Hub")
    text = _paged(out, HUB_RELATIONS + 4)
    assert f"{HUB_RELATIONS + 3} outgoing, 1 incoming" in text  # the totals come first
    # The structured rows are those the markdown shows.
    data = out.data
    assert (data.total, data.shown) == (HUB_RELATIONS + 4, len(data.relations))
    assert 0 < data.shown < data.total
    assert [r.relation for r in data.relations] == _table_column(text)


def test_explore_kg_says_each_relations_count_and_pages(hub):
    out = explore_kg(hub, LIMITS, "kg:Hub", ["~links_to", "has_part", "described_as"])
    text = _paged(out, HUB_IN)
    by_name = {r.relation: r for r in out.data.relations}
    assert by_name["~links_to"].total == HUB_IN and by_name["has_part"].total == HUB_OUT
    assert by_name["~links_to"].shown == by_name["has_part"].shown >= 1  # the same rows of each relation
    assert f"~links_to: {HUB_IN:,}; has_part: {HUB_OUT:,}; described_as: 1" in text
    assert f"Rows 1-{by_name['has_part'].shown} of each relation shown" in text


def test_verify_many_conflicts_is_bounded(hub):
    claims = [TripleClaim(subject="kg:Hub", relation="has_part", object=f"nothing {i}") for i in range(50)]
    out = verify(hub, LIMITS, claims)
    text = _bounded(out.text)
    assert [c.status for c in out.data.claims] == ["conflicting"] * 50
    assert all(len(c.hops[0].evidence) <= 20 for c in out.data.claims)  # evidence listed per claim is capped
    assert f"and {LIMITS.search_p - 20} more" in out.data.claims[0].hops[0].reason  # the rest is counted
    _char_cut(text, "Verify fewer claims at once.")


def test_find_entities_at_most_limit(hub):
    out = find_entities(hub, LIMITS, "e1", 50)
    _bounded(out.text)
    assert len(out.data.entities) == 50


def test_sparql_rows_capped_with_total(hub):
    out = sparql(hub, LIMITS, f"SELECT ?s ?l WHERE {{ ?s <{REL}links_to> <{ENT}Hub> . ?s ?p ?l }}")
    text, data = _bounded(out.text), out.data
    assert len(data.rows) < LIMITS.sparql_row_cap and data.truncated and data.total == 2 * HUB_IN
    # the rows that fit max_output_chars, and how to read on
    assert text.startswith(f"sparql: {2 * HUB_IN:,} rows\n") and len(text) <= LIMITS.max_output_chars
    assert text.endswith(f'Rows 1-{len(data.rows)} of {2 * HUB_IN:,} shown. Next page: call again with the same '
                         f'arguments and cursor="{data.next_cursor}".')


def test_long_labels_are_cut_in_cells(hub):
    out = search(hub, LIMITS, "kg:Hub", "outgoing", ["described_as"])
    text = _bounded(out.text)
    assert "a very long name a very" in text and "…" in text


# --- read-only by construction -------------------------------------------------------------------


def _tree(path: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under `path`: size, modification time and content digest."""
    found = {}
    for file in sorted(p for p in path.rglob("*") if p.is_file()):
        stat = file.stat()
        found[file.relative_to(path).as_posix()] = (stat.st_size, stat.st_mtime_ns, hashlib.sha256(file.read_bytes()).hexdigest())
    return found


class Trap:
    """A loopback port that counts connections: refused LOAD/SERVICE targets point here."""

    def __init__(self):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            try:
                self.sock.accept()[0].close()
                self.connections += 1
            except OSError:
                pass

    def close(self):
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


def refused_queries(trap: str) -> list[str]:
    return [
        'INSERT DATA { <http://kg-mcp.local/entity/a> <http://kg-mcp.local/relation/r> "x" }',
        "DELETE WHERE { ?s ?p ?o }",
        "DELETE { ?s ?p ?o } INSERT { ?s ?p 1 } WHERE { ?s ?p ?o }",
        f"LOAD <{trap}data.ttl>",
        f"LOAD SILENT <{trap}data.ttl> INTO GRAPH <urn:g>",
        "CLEAR ALL",
        "CLEAR DEFAULT",
        "DROP ALL",
        "DROP GRAPH <urn:kg-mcp:meta>",
        "CREATE GRAPH <urn:new>",
        "ADD DEFAULT TO <urn:copy>",
        "COPY DEFAULT TO <urn:copy>",
        "MOVE DEFAULT TO <urn:copy>",
        f"SELECT * WHERE {{ SERVICE <{trap}sparql> {{ ?s ?p ?o }} }}",
        f"SELECT * WHERE {{ ?s ?p ?o . FILTER EXISTS {{ SERVICE SILENT <{trap}> {{ ?s ?p ?o }} }} }}",
        f"PREFIX t: <{trap}> SELECT * WHERE {{ SERVICE t:x {{ ?s ?p ?o }} }}",
        f"SELECT * WHERE {{ VALUES ?e {{ <{trap}> }} SERVICE ?e {{ ?s ?p ?o }} }}",
        f"SELECT * FROM <{trap}g.ttl> WHERE {{ ?s ?p ?o }}",
        "CONSTRUCT { ?s ?p ?o } WHERE { ?s ?p ?o }",
        "SELECT * WHERE { ?s ?p ?o } ; DROP ALL",
    ]


async def test_served_store_is_unchanged_byte_for_byte(tmp_path):
    src = tmp_path / "kb.txt"
    src.write_text("Alice|knows|Bob\nBob|knows|Carol\nCarol|lives_in|Paris\nAlice|lives_in|Paris\n", encoding="utf-8")
    store = tmp_path / "kb.store"
    load_sources([src], store, progress=False)
    before = _tree(store)
    siblings = sorted(p.name for p in tmp_path.iterdir())
    trap = Trap()
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "kg_mcp", "serve", "--store", str(store), "--enable-sparql"], env=dict(os.environ)
    )
    try:
        async with Client(params) as client:
            calls = [
                ("find_entities", {"name": "Alice"}),
                ("search", {"entity": "kg:Alice"}),
                ("search", {"entity": "kg:Paris", "direction": "incoming", "properties_to_filter_for": ["lives_in"]}),
                ("get_relations", {"entity": "kg:Bob"}),
                ("explore_kg", {"entity": "kg:Bob", "relations": ["knows", "~knows"]}),
                ("verify", {"claims": [{"subject": "Alice", "relation": "knows", "object": "Bob"}]}),
                ("sparql", {"query": "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"}),
                ("search", {"entity": '"} ; DROP ALL ; #'}),
                ("find_entities", {"name": "x' } INSERT DATA { <a> <b> <c> } #"}),
            ]
            for tool, args in calls:
                result = await client.call_tool(tool, args)
                assert "Traceback" not in result.content[0].text
            assert not (await client.call_tool("sparql", {"query": "ASK { ?s ?p ?o }"})).is_error
            for query in refused_queries(f"http://127.0.0.1:{trap.port}/"):
                result = await client.call_tool("sparql", {"query": query})
                assert result.is_error, query
                assert "not allowed" in result.content[0].text or "read-only" in result.content[0].text or (
                    "not supported" in result.content[0].text
                ) or "does not parse" in result.content[0].text or "cannot be run" in result.content[0].text, result.content[0].text
    finally:
        trap.close()
    assert trap.connections == 0  # no refused query reached out
    assert _tree(store) == before  # every file: same size, same mtime, same bytes
    assert sorted(p.name for p in tmp_path.iterdir()) == siblings  # nothing made beside it either


def _doubled_literal(doublings: int) -> str:
    """A query whose one row is a literal of 10 x 2^doublings characters, built inside the engine."""
    binds = ['BIND("abcdefghij" AS ?a0)'] + [f"BIND(CONCAT(?a{i}, ?a{i}) AS ?a{i + 1})" for i in range(doublings)]
    return f"SELECT ?a{doublings} WHERE {{ {' '.join(binds)} }}"


def test_a_huge_value_built_in_a_query_worker_is_cut_before_it_reaches_the_server():
    """Repro 10: a 200 MB literal built in a worker was shipped whole (+600 MB kept by the server).
    The worker cuts any value past 20,000 characters, says so in the value, and ships rows up to
    about 1 MB of text: what the server receives is bounded whatever the query builds."""
    import pyoxigraph as ox

    from kg_mcp.backends.query_pool import QueryPool, StoreSource

    store = ox.Store()
    store.add(ox.Quad(ox.NamedNode(ENT + "a"), ox.NamedNode(REL + "r"), ox.Literal("x")))
    pool = QueryPool(StoreSource(nquads=store.dump(format=ox.RdfFormat.N_QUADS)), size=1)
    try:
        [[value]] = pool.run(_doubled_literal(21), 10, 60).rows  # 20,971,520 characters in the worker
        many = pool.run(f"SELECT ?v WHERE {{ VALUES ?i {{ {' '.join(map(str, range(200)))} }} "
                        f"{_doubled_literal(12).split('{', 1)[1].rsplit('}', 1)[0]} BIND(?a12 AS ?v) }}", 500, 60)
    finally:
        pool.close()
    assert value.value.endswith("… [cut by kg-mcp: 20,971,520 characters in all]") and len(value.value) < 20_100
    # 200 rows of 40,960 characters each: cut to 20,000 and shipped up to about 1 MB, the total still told.
    assert many.total == 200 and 40 <= len(many.rows) <= 60


async def test_resources_are_computed_once_not_per_read(oxigraph_endpoint):
    """Repro 10: kg://stats cost half a second of queries on every read. Read ten times each over an
    endpoint, the resources send the endpoint their queries once."""
    from fault_proxy import FaultProxy, kg_mcp_server
    from mcp.client.streamable_http import streamable_http_client

    env = {"KG_MCP_CONTACT": "mailto:kg-mcp-tests@example.org"}
    with FaultProxy(oxigraph_endpoint) as proxy:
        with kg_mcp_server("--sparql", proxy.url, "--profile", "wikidata", env=env) as server:
            async with Client(streamable_http_client(server.url)) as client:
                uris = ["kg://stats", "kg://schema", "kg://profile", "kg://output-schemas"]
                first = {uri: (await client.read_resource(uri)).contents[0].text for uri in uris}
                sent = proxy.count()
                for _ in range(10):
                    for uri in uris:
                        assert (await client.read_resource(uri)).contents[0].text == first[uri]
                again = proxy.count()
    assert '"triples"' in first["kg://stats"] and sent > 0
    assert again == sent  # ten more reads of each: not one more query
