"""Names as typed on an endpoint without text search (`oxigraph serve`): the name index built from its
labels (kg_mcp.backends.endpoint_names), its cache and rebuild rules, and `kg-mcp index --sparql`."""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys

import anyio
import pytest
import pyoxigraph as ox
from conftest import _oxigraph_serve
from mcp import Client
from test_cli import failed, kg_mcp, ok

from kg_mcp.backends import open_endpoint, open_store
from kg_mcp.backends.endpoint_names import build_endpoint_index, endpoint_index_path
from kg_mcp.backends.name_degrees import store_degrees
from kg_mcp.errors import EndpointError
from kg_mcp.loading import load_sources
from kg_mcp.names import NameIndex, index_path, read_index_meta
from kg_mcp.server import build_server
from kg_mcp.settings import Settings
from kg_mcp.tools import find_entities

EX = "http://football.example/"
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
ALT = "http://www.w3.org/2004/02/skos/core#altLabel"
# A football KG as one was served: labels spelled like ids, one alias.
PLAYERS = {
    "Lucas_BIGLIA": [],
    "Lionel_MESSI": ["La Pulga"],
    "Angel_DI_MARIA": [],
    "Sergio_AGUERO": ["Kun Aguero"],
    "Gonzalo_HIGUAIN": [],
}


FOOTBALL, CYCLING = "http://example.org/graph/football", "http://example.org/graph/cycling"


def football_lines() -> list[str]:
    lines = []
    for i, (label, aliases) in enumerate(PLAYERS.items()):
        player = f"<{EX}{label}>"
        lines.append(f'{player} <{LABEL}> "{label}" .')
        lines += [f'{player} <{ALT}> "{alias}"@en .' for alias in aliases]
        lines.append(f"{player} <{EX}plays_for> <{EX}Argentina> .")
        lines += [f"{player} <{EX}teammate> <{EX}{other}> ." for other in list(PLAYERS)[:i]]
    lines.append(f'<{EX}Argentina> <{LABEL}> "Argentina" .')
    return lines


@pytest.fixture(scope="module")
def two_graphs(tmp_path_factory):
    """The football KG in one named graph of `oxigraph serve`, a namesake cyclist in another."""
    folder = tmp_path_factory.mktemp("two-graphs")
    (folder / "football.nt").write_text("\n".join(football_lines()) + "\n", encoding="utf-8")
    (folder / "cycling.nt").write_text(f'<http://cycling.example/Biglia> <{LABEL}> "Lucas Biglia (cyclist)" .\n')
    serving = _oxigraph_serve(folder / "store", None, {FOOTBALL: folder / "football.nt", CYCLING: folder / "cycling.nt"})
    yield next(serving)
    serving.close()


@pytest.fixture(scope="module")
def football(tmp_path_factory):
    folder = tmp_path_factory.mktemp("football")
    source = folder / "football.nt"
    source.write_text("\n".join(football_lines()) + "\n", encoding="utf-8")
    serving = _oxigraph_serve(folder / "store", source)
    yield next(serving)
    serving.close()


def built(url, settings):
    """An endpoint backend whose first lookup started the index build in the background, once that is
    done; the build is treated as a big one (no lookup waits for it), so label queries answer meanwhile."""
    backend = open_endpoint(url, settings=settings.model_copy(update={"endpoint_index_wait_labels": 0}))
    out = find_entities(backend, Settings(), "Argentina", 5)
    assert out.data.method.startswith("label queries (exact, case-insensitive, prefix)"), out.data.method
    backend.names.wait(60)
    return backend, out


@pytest.fixture(scope="module")
def indexed(football):
    backend, first_lookup = built(football, Settings())
    # Until the index is there, label queries answer, and say so.
    assert "the name index from the endpoint's labels is being built" in first_lookup.data.method
    assert backend.names.current is not None
    yield backend
    backend.close()


def first(backend, typed):
    out = find_entities(backend, Settings(), typed, 5)
    return out, [(e.id, e.match) for e in out.data.entities]


@pytest.mark.parametrize(
    ("typed", "match"),
    [("Lucas Biglia", "folded"), ("Biglia", "words"), ("lucas bilgia", "fuzzy"), ("Biglia Lucas", "words")],
)
def test_names_as_typed_find_the_player_through_the_index(indexed, typed, match):
    out, hits = first(indexed, typed)
    assert hits[0][0].endswith("Lucas_BIGLIA") and hits[0][1] == match, hits
    assert out.data.method.startswith("name index (built ") and "from the endpoint's labels" in out.data.method
    assert "looked up by name index (built" in out.text


def test_aliases_are_indexed_too(indexed):
    _, hits = first(indexed, "Kun Aguero")
    assert hits[0][0].endswith("Sergio_AGUERO") and hits[0][1] == "alias", hits


def test_without_the_index_label_queries_find_nothing_for_a_surname(football):
    # The baseline: exact, case-insensitive and prefix labels only.
    backend = open_endpoint(football, settings=Settings(name_index=False))
    try:
        out, hits = first(backend, "Biglia")
        assert hits == [] and out.data.method == "label queries (exact, case-insensitive, prefix)"
    finally:
        backend.close()


def test_degrees_come_from_the_index_and_match_the_endpoints_own_count(indexed, football):
    out, _ = first(indexed, "Lionel Messi")
    plain = open_endpoint(football, settings=Settings(name_index=False))
    try:
        counted = find_entities(plain, Settings(), "Lionel_MESSI", 5).data.entities[0]
    finally:
        plain.close()
    hit = out.data.entities[0]
    # team, 4 teammates and his alias (labels, shown beside ids, are left out; aliases are listed)
    assert hit.id == counted.id and hit.degree == counted.degree == 6


def test_the_index_is_cached_per_endpoint_and_reused(indexed, football):
    path = endpoint_index_path(football, [])
    assert path.is_file() and str(path).startswith(os.environ["KG_MCP_CACHE"])
    meta = read_index_meta(path)
    assert meta["endpoint"] == football and meta["graphs"] == [] and meta["counted"] == meta["labels"] == 8  # 6 labels, 2 aliases
    again = open_endpoint(football, settings=Settings())
    try:
        assert again.names.current is not None  # at open, from the cache: no build, no request
        assert find_entities(again, Settings(), "Biglia", 5).data.method.startswith("name index (built ")
        assert read_index_meta(path)["built_at"] == meta["built_at"]
    finally:
        again.close()


def test_an_old_index_is_rebuilt_and_a_large_endpoint_gets_none(indexed, football, caplog, monkeypatch, tmp_path):
    path = endpoint_index_path(football, [])
    built_at = read_index_meta(path)["built_at"]
    rebuilt, _ = built(football, Settings(name_index_max_age_days=1e-9))
    rebuilt.close()
    assert read_index_meta(path)["built_at"] > built_at
    monkeypatch.setenv("KG_MCP_CACHE", str(tmp_path))  # no index cached: the size rule decides
    large, _ = built(football, Settings(endpoint_index_max_labels=5))
    try:
        assert large.names.current is None
        assert "has more than 5 labels and aliases" in caplog.text and "kg-mcp index --sparql" in caplog.text
        method = first(large, "Lucas_BIGLIA")[0].data.method
        assert method == ("label queries (exact, case-insensitive, prefix); the endpoint has more than 5 labels: "
                          "its name index is built by kg-mcp index --sparql URL"), method
    finally:
        large.close()


def test_a_failed_build_leaves_the_previous_index(indexed, football, tmp_path):
    path = tmp_path / "names.sqlite"
    solutions = indexed._solutions
    build_endpoint_index(solutions, path, url=football, graphs=[], profile=indexed.profile, languages=["en"],
                         degree_cap=100, progress=False)
    before = read_index_meta(path)
    asked = []

    def failing(query):  # the endpoint goes away after a few queries
        asked.append(query)
        if len(asked) > 2:
            raise EndpointError("The endpoint did not answer.")
        return solutions(query)

    with pytest.raises(EndpointError):
        build_endpoint_index(failing, path, url=football, graphs=[], profile=indexed.profile, languages=["en"],
                             degree_cap=100, progress=False)
    assert read_index_meta(path) == before
    assert [p.name for p in tmp_path.iterdir()] == ["names.sqlite"]  # no partial file left
    assert sqlite3.connect(path).execute("SELECT count(*) FROM names").fetchone()[0] == before["names"]


def test_kg_mcp_index_builds_an_endpoints_index_once(football, tmp_path):
    env = {**os.environ, "KG_MCP_CACHE": str(tmp_path)}
    built = kg_mcp("index", "--sparql", football, env=env)
    assert "8 labels and aliases of 6 entities" in ok(built) + built.stderr
    path = tmp_path / "names" / endpoint_index_path(football, []).name
    assert read_index_meta(path)["built_by"] == "kg-mcp index"
    again = kg_mcp("index", "--sparql", football, env=env)
    assert "is current" in ok(again) + again.stderr
    forced = kg_mcp("index", "--sparql", football, "--rebuild", env=env)
    assert "8 labels and aliases of 6 entities" in ok(forced) + forced.stderr
    assert "Give one of --store DIR or --sparql URL" in failed(kg_mcp("index", env=env))


def test_each_graph_gets_its_own_index(two_graphs):
    found = {}
    for graph in (FOOTBALL, CYCLING):
        backend, _ = built(two_graphs, Settings(graphs=[graph]))
        try:
            out = find_entities(backend, Settings(), "Biglia", 5)
            assert out.data.method.startswith("name index (built "), out.data.method
            found[graph] = [e.label for e in out.data.entities]
            assert read_index_meta(endpoint_index_path(two_graphs, [graph]))["graphs"] == [graph]
        finally:
            backend.close()
    assert found == {FOOTBALL: ["Lucas_BIGLIA"], CYCLING: ["Lucas Biglia (cyclist)"]}
    assert endpoint_index_path(two_graphs, [FOOTBALL]) != endpoint_index_path(two_graphs, [CYCLING])


def test_kg_mcp_index_reads_the_graph_given(two_graphs, tmp_path):
    env = {**os.environ, "KG_MCP_CACHE": str(tmp_path)}
    built_one = kg_mcp("index", "--sparql", two_graphs, "--graph", CYCLING, env=env)
    assert "1 labels and aliases of 1 entities" in ok(built_one) + built_one.stderr
    assert read_index_meta(tmp_path / "names" / endpoint_index_path(two_graphs, [CYCLING]).name)["graphs"] == [CYCLING]
    assert "--graph" in failed(kg_mcp("index", "--sparql", two_graphs, "--graph", "not an iri", env=env))


def test_an_index_without_degrees_is_still_read(indexed, football, tmp_path):
    # Indexes written before degrees were recorded have no such column: lookups count degrees as before.
    old = tmp_path / "old.sqlite"
    shutil.copyfile(endpoint_index_path(football, []), old)
    with sqlite3.connect(old) as connection:
        connection.execute("ALTER TABLE names DROP COLUMN degree")
    index = NameIndex.open(old)
    try:
        matches = index.lookup("Biglia", 10)
        assert [(m.name, m.kind, m.degree) for m in matches] == [("Lucas_BIGLIA", "words", None)]
    finally:
        index.close()


def test_kg_mcp_index_records_a_stores_degrees(tmp_path):
    source = tmp_path / "football.nt"
    source.write_text("\n".join(football_lines()) + "\n", encoding="utf-8")
    store = tmp_path / "store"
    load_sources([source], store, progress=False)
    done = kg_mcp("index", "--store", str(store), "--degrees")
    assert "degrees recorded in" in ok(done) + done.stderr
    with sqlite3.connect(index_path(store)) as connection:
        degrees = dict(connection.execute("SELECT label, degree FROM names"))
    assert degrees["Lionel_MESSI"] == 6 and degrees["Argentina"] == 5 and degrees["Lucas_BIGLIA"] == 5  # Messi's alias
    backend = open_store(store)
    try:
        hit = find_entities(backend, Settings(), "Messi", 5).data.entities[0]
        assert (hit.label, hit.degree) == ("Lionel_MESSI", 6)
    finally:
        backend.close()


@pytest.mark.parametrize("cap", [2, 100])
def test_a_stores_degrees_read_from_its_indexes_are_the_ones_the_query_counts(tmp_path, cap):
    source = tmp_path / "football.nt"
    source.write_text("\n".join(football_lines()) + "\n", encoding="utf-8")
    load_sources([source], tmp_path / "store", progress=False)
    backend = open_store(tmp_path / "store", settings=Settings(degree_cap=cap))
    try:
        with sqlite3.connect(index_path(tmp_path / "store")) as connection:
            entities = sorted({e for (e,) in connection.execute("SELECT entity FROM names")})
        read = dict(store_degrees(backend.store, backend.profile, entities, cap, progress=False))
        assert read == {e: backend._degree(ox.NamedNode(e)) for e in entities}
        assert max(read.values()) == (2 * cap if cap == 2 else 6)  # the cap bounds each direction (Messi: 5 and an alias)
    finally:
        backend.close()


def test_labels_read_page_by_page_make_the_same_index(indexed, football, tmp_path):
    # Pages of 1 row, then 2, 4 (answered quickly): every label read once, the last page empty.
    paged = build_endpoint_index(indexed._solutions, tmp_path / "paged.sqlite", url=football, graphs=[],
                                 profile=indexed.profile, languages=["en"], degree_cap=100, progress=False, page=1)
    whole = read_index_meta(endpoint_index_path(football, []))
    assert paged.labels == whole["labels"] == 8 and paged.entities == 6
    with sqlite3.connect(tmp_path / "paged.sqlite") as a, sqlite3.connect(endpoint_index_path(football, [])) as b:
        rows = "SELECT entity, label, alias, degree FROM names ORDER BY 1, 2"
        assert a.execute(rows).fetchall() == b.execute(rows).fetchall()
    # A small KG's degrees by one aggregate query per direction (while its labels are read): the same.
    build_endpoint_index(indexed._solutions, tmp_path / "whole.sqlite", url=football, graphs=[], profile=indexed.profile,
                         languages=["en"], degree_cap=100, progress=False, whole_degrees=True)
    with sqlite3.connect(tmp_path / "whole.sqlite") as a, sqlite3.connect(endpoint_index_path(football, [])) as b:
        assert a.execute(rows).fetchall() == b.execute(rows).fetchall()


def test_through_the_mcp_server_the_first_call_waits_for_a_small_index(football, monkeypatch, tmp_path):
    """A small endpoint's index is seconds away: the first lookup waits for it, and says so."""
    monkeypatch.setenv("KG_MCP_CACHE", str(tmp_path))
    backend = open_endpoint(football, settings=Settings())

    async def lookups():
        async with Client(build_server(backend, backend.settings)) as client:
            first = await client.call_tool("find_entities", {"name": "Biglia"})
            again = await client.call_tool("find_entities", {"name": "Biglia"})
            return first.structured_content, again.structured_content

    try:
        first, again = anyio.run(lookups)
    finally:
        backend.close()
    assert first["entities"][0]["label"] == again["entities"][0]["label"] == "Lucas_BIGLIA"
    # The first waited for the build it started (said when it took 50 ms or more: an 8-label build may not).
    assert first["method"].startswith("name index (built just now from the endpoint's labels")
    assert again["method"] == "name index (built just now from the endpoint's labels)"


def test_a_lookup_waits_no_longer_than_its_bound(football, monkeypatch, tmp_path):
    monkeypatch.setenv("KG_MCP_CACHE", str(tmp_path))
    backend = open_endpoint(football, settings=Settings(name_index_wait_s=0))
    try:
        out = find_entities(backend, backend.settings, "Biglia", 5)
        assert out.data.method.startswith("label queries (exact, case-insensitive, prefix); the name index from "
                                          "the endpoint's labels is being built"), out.data.method
        assert backend.names.wait(60) is not None
    finally:
        backend.close()


def test_kg_mcp_serve_starts_the_build_and_its_first_lookup_finds_a_name_as_typed(football, tmp_path):
    """`kg-mcp serve --sparql URL`, spawned as a scripted agent would: the build starts with the server."""
    from kg_mcp.agents.kg_client import KGClient

    env = {"KG_MCP_CACHE": str(tmp_path)}

    async def first_lookup():
        with pytest.MonkeyPatch.context() as patch:
            for key, value in env.items():
                patch.setenv(key, value)
            async with KGClient.connect(command=f"{sys.executable} -m kg_mcp serve --sparql {football}") as kg:
                # Before any lookup, the server has built the index (started with it, not by a lookup).
                with anyio.fail_after(60):
                    while read_index_meta(index) is None:
                        await anyio.sleep(0.1)
                return (await kg.call_tool("find_entities", {"name": "lucas bilgia", "limit": 5})).data

    index = tmp_path / "names" / endpoint_index_path(football, []).name
    found = anyio.run(first_lookup)
    assert found["entities"][0]["label"] == "Lucas_BIGLIA" and found["entities"][0]["match"] == "fuzzy"
    assert found["method"].startswith("name index (built just now from the endpoint's labels")
    assert read_index_meta(index)["built_by"] == "kg-mcp serve"


def test_servers_started_together_build_the_index_once(football, monkeypatch, tmp_path, caplog):
    """A second server on the same endpoint and graphs waits for the first one's build and opens its
    index (one build per machine: a lock file beside the cache); a later one opens it at once."""
    monkeypatch.setenv("KG_MCP_CACHE", str(tmp_path))
    first, second = open_endpoint(football, settings=Settings()), open_endpoint(football, settings=Settings())
    try:
        first.prepare_lookups()
        second.prepare_lookups()
        assert first.names.wait(60) is not None and second.names.wait(60) is not None
        assert caplog.text.count("building the name index of") == 1
        third = open_endpoint(football, settings=Settings())
        try:
            assert third.names.current is not None  # at open, from the cache: no build, no request
            assert find_entities(third, third.settings, "Biglia", 5).data.entities[0].label == "Lucas_BIGLIA"
        finally:
            third.close()
    finally:
        first.close()
        second.close()


def test_one_replica_builds_and_the_others_take_its_index(football, monkeypatch, tmp_path):
    """Replicas sharing Redis and a cache: while one holds the build lock the others answer with label
    queries and build nothing; once its index is there they take it instead of building their own."""
    from bench.common import free_port
    from bench.team_rig import _end, start_redis
    from kg_mcp.backends.endpoint_names import index_key
    from kg_mcp.observability import metrics
    from kg_mcp.state.redis_store import RedisState

    monkeypatch.setenv("KG_MCP_CACHE", str(tmp_path))
    port = free_port()
    redis_process = start_redis(port, tmp_path / "redis")
    url = f"redis://127.0.0.1:{port}/0"
    states = [RedisState(url) for _ in range(3)]
    builder, waiter = open_endpoint(football, settings=Settings()), open_endpoint(football, settings=Settings())
    builder.names.locks, waiter.names.locks = states[0], states[1]
    elsewhere = metrics.NAME_INDEX_BUILDS.labels("endpoint", "elsewhere")
    try:
        held = states[2].try_lock(f"name-index:{index_key(football, [])}")  # a third replica is building
        before = elsewhere._value.get()
        out = find_entities(waiter, Settings(), "Argentina", 5)
        assert "being built by another replica" in out.data.method
        assert waiter.names._thread is None and elsewhere._value.get() == before + 1
        held.release()

        find_entities(builder, Settings(), "Argentina", 5)
        assert builder.names.wait(60) is not None
        find_entities(waiter, Settings(), "Biglia", 5)  # finds the index the builder left in the cache
        assert waiter.names.current is not None and waiter.names._thread is None  # and built none itself
        out, theirs = (find_entities(b, Settings(), "Biglia", 5).data for b in (waiter, builder))
        assert out.method.startswith("name index") and out.entities == theirs.entities
    finally:
        builder.close()
        waiter.close()
        for state in states:
            state.close()
        _end(redis_process)

