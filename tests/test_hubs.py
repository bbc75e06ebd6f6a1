"""Hub statistics: recorded at load time for high-degree nodes, used by the tools, kept current."""

from __future__ import annotations

import pyoxigraph as ox

from kg_mcp.backends import open_store
from kg_mcp.backends.base import Direction, Values
from kg_mcp.backends.sparql_backend import SparqlBackend
from kg_mcp.hubs import IN_ANONYMOUS, STATS_GRAPH, hub_anonymous, hub_stats
from kg_mcp.loading import load_sources
from kg_mcp.settings import Settings
from kg_mcp.tools import explore_kg, get_relations, search

E = "http://bench.test/e/"
P = "http://bench.test/p/"
HUB = ox.NamedNode(E + "hub")


def write_hub(path, start: int, count: int, predicates=("country", "based_in")) -> None:
    with open(path, "w") as f:
        for i in range(start, start + count):
            f.write(f"<{E}n{i}> <{P}{predicates[i % len(predicates)]}> <{HUB.value}> .\n")
            f.write(f'<{E}n{i}> <http://www.w3.org/2000/01/rdf-schema#label> "node {i}" .\n')
        f.write(f'<{HUB.value}> <http://www.w3.org/2000/01/rdf-schema#label> "The Hub" .\n')


def truth(store_dir, node: ox.NamedNode) -> dict[str, int]:
    backend = open_store(store_dir)
    query = f"SELECT ?p (COUNT(*) AS ?n) WHERE {{ ?s ?p {node} }} GROUP BY ?p"
    return {s["p"].value: int(s["n"].value) for s in backend.store.query(query)}


def test_hub_recorded_at_load_and_used_by_the_tools(tmp_path):
    source = tmp_path / "hub.nt"
    write_hub(source, 0, 3000)
    store = tmp_path / "store"
    report = load_sources([source], store, progress=False, hub_threshold=1000)
    assert report.hubs == 1
    backend = open_store(store)
    assert hub_stats(backend.store, HUB, outgoing=False) == truth(store, HUB)
    assert hub_stats(backend.store, ox.NamedNode(E + "n1"), outgoing=True) is None  # not a hub

    out = search(backend, Settings(), f"<{HUB.value}>", "incoming")
    assert out.data.view == "properties" and out.data.total == 3000 and out.data.total_exact
    assert {p.property.strip("<>"): p.rows for p in out.data.properties} == truth(store, HUB)
    relations = get_relations(backend, Settings(), f"<{HUB.value}>").data.relations
    assert {r.relation: r.triples for r in relations} == {f"~<{P}country>": 1500, f"~<{P}based_in>": 1500}
    walked = explore_kg(backend, Settings(explore_limit=10), f"<{HUB.value}>", [f"~<{P}country>"]).data.relations[0]
    assert (walked.shown, walked.total) == (10, 1500)


def test_a_hubs_anonymous_neighbours_are_counted_at_load_and_listings_read_them_there(tmp_path):
    """A hub's record keeps how many of its edges reach blank nodes, so a listing counts named and
    anonymous neighbours apart without reading every edge; a store without that count (loaded by an
    older kg-mcp) gets the same numbers from the engine."""
    source = tmp_path / "hub.nt"
    write_hub(source, 0, 3000)
    with open(source, "a") as f:
        for i in range(700):
            f.write(f"_:b{i} <{P}country> <{HUB.value}> .\n")
    store = tmp_path / "store"
    load_sources([source], store, progress=False, hub_threshold=1000)
    backend = open_store(store)
    assert hub_anonymous(backend.store, HUB, outgoing=False) == {P + "country": 700}
    country = [ox.NamedNode(P + "country")]
    for predicates in (country, None):
        asked = SparqlBackend.count_kinds(backend, HUB, Direction.INCOMING, predicates)  # the engine's count
        assert backend.count_kinds(HUB, Direction.INCOMING, predicates) == asked
        assert backend.count_neighbours(HUB, Direction.INCOMING, predicates, values=Values.ANONYMOUS) == 700
    assert asked == (3000, 700)
    walked = explore_kg(backend, Settings(explore_limit=10), f"<{HUB.value}>", [f"~<{P}country>"])
    assert (walked.data.relations[0].total, walked.data.relations[0].anonymous) == (2200, 700)
    assert "1,500 named, 700 anonymous" in walked.text

    backend.close()
    writable = ox.Store(str(store))
    for quad in list(writable.quads_for_pattern(None, IN_ANONYMOUS, None, STATS_GRAPH)):
        writable.remove(quad)  # as a store loaded before the counts were kept
    del writable
    older = open_store(store)
    assert hub_anonymous(older.store, HUB, outgoing=False) is None
    assert older.count_kinds(HUB, Direction.INCOMING, None) == (3000, 700)
    assert explore_kg(older, Settings(explore_limit=10), f"<{HUB.value}>", [f"~<{P}country>"]).text == walked.text


def test_a_later_load_updates_the_hub_record(tmp_path):
    store = tmp_path / "store"
    first, second = tmp_path / "a.nt", tmp_path / "b.nt"
    write_hub(first, 0, 3000)
    write_hub(second, 3000, 800, predicates=("member_of",))  # too few alone to be flagged
    load_sources([first], store, progress=False, hub_threshold=1000)
    load_sources([second], store, progress=False, hub_threshold=1000)
    stats = hub_stats(open_store(store).store, HUB, outgoing=False)
    assert stats == truth(store, HUB) and stats[P + "member_of"] == 800


def test_blank_node_counts_are_skipped_only_where_the_store_can_hold_none(tmp_path):
    """A load of N-Triples without blank nodes into an empty store records zero anonymous edges
    without asking the engine; a later load of the same kind into a store that already has blank
    nodes (from an earlier load) still counts them."""
    store = tmp_path / "store"
    first, blanks, third = tmp_path / "a.nt", tmp_path / "b.ttl", tmp_path / "c.nt"
    write_hub(first, 0, 3000)
    blanks.write_text("".join(f"_:b{i} <{P}country> <{HUB.value}> .\n" for i in range(300)))
    write_hub(third, 3000, 200)
    load_sources([first], store, progress=False, hub_threshold=1000)
    assert hub_anonymous(open_store(store).store, HUB, outgoing=False) == {}
    load_sources([blanks], store, progress=False, hub_threshold=1000)
    load_sources([third], store, progress=False, hub_threshold=1000)
    backend = open_store(store)
    assert hub_anonymous(backend.store, HUB, outgoing=False) == {P + "country": 300}
    assert backend.count_kinds(HUB, Direction.INCOMING, None) == (3200, 300)  # named, anonymous


def test_without_statistics_counts_are_bounded_and_marked(tmp_path):
    source = tmp_path / "hub.nt"
    write_hub(source, 0, 3000)
    store = tmp_path / "store"
    load_sources([source], store, progress=False, hub_threshold=10**9)  # nothing recorded
    backend = open_store(store, settings=Settings(count_cap=1000))
    out = search(backend, backend.settings, f"<{HUB.value}>", "incoming")
    assert not out.data.total_exact and out.data.total == 1000
    assert "at least 1,000 rows" in out.text and "+ |" in out.text
    assert not any(p.exact for p in out.data.properties)
    text = get_relations(backend, backend.settings, f"<{HUB.value}>").text
    assert "N+: a hub" in text



def test_find_entities_degrees_are_capped_and_leave_labels_out(tmp_path):
    """A hub's degree is the same from load-time statistics as from counting, and capped at degree_cap."""
    from kg_mcp.tools import find_entities

    source = tmp_path / "hub.nt"
    write_hub(source, 0, 3000)
    for threshold, cap in ((1000, 10_000), (10**9, 10_000), (10**9, 500)):  # statistics or not; capped
        store = tmp_path / f"store-{threshold}-{cap}"
        load_sources([source], store, progress=False, hub_threshold=threshold)
        backend = open_store(store, settings=Settings(degree_cap=cap))
        hits = find_entities(backend, backend.settings, "The Hub").data.entities
        assert hits[0].id == f"<{HUB.value}>" and hits[0].degree == min(3000, cap)  # labels are not edges
