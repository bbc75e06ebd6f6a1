"""A local store answers some backend questions from its indexes, without SPARQL (kg_mcp.backends.
store_patterns): the answers must be those of the queries an endpoint is asked."""

from __future__ import annotations

import itertools
from collections import Counter

import pyoxigraph as ox

from kg_mcp.backends import Direction, open_store
from kg_mcp.backends.sparql_backend import SparqlBackend
from kg_mcp.hubs import recorded_directions
from kg_mcp.loading import load_sources

E = "http://reads.test/"
LABEL = "<http://www.w3.org/2000/01/rdf-schema#label>"


def _nodes(backend, many: int = 150) -> list[ox.NamedNode]:
    """Subjects and objects of the store, its best connected among them (those past the index
    read's bound too), and hubs with one direction recorded."""
    quads = list(itertools.islice(backend.store.quads_for_pattern(None, None, None, ox.DefaultGraph()), 20_000))
    seen = {t for q in quads for t in (q.subject, q.object) if isinstance(t, ox.NamedNode)}
    connected = [n for n, _ in Counter(q.object for q in quads if isinstance(q.object, ox.NamedNode)).most_common(5)]
    hubs = {node for node, _ in recorded_directions(backend.store)}
    return sorted(seen, key=lambda n: n.value)[:many] + connected + sorted(hubs, key=lambda n: n.value)


def _by_direction(counts) -> dict:
    return {(c.predicate.value, c.direction): (c.count, c.exact) for c in counts}


def _asked(backend, node) -> dict:
    """The relation counts both ways as the queries count them (an endpoint's answer)."""
    return _by_direction(SparqlBackend.relation_counts(backend, node, Direction.OUTGOING)
                         + SparqlBackend.relation_counts(backend, node, Direction.INCOMING))


def test_relations_counted_from_the_index_are_those_the_queries_count(wikidata_local):
    # The Wikidata profile hides statement and label predicates around items and not around
    # statement nodes: the index read must leave out what the queries' filter leaves out.
    compared = 0
    for node in _nodes(wikidata_local):
        read = _by_direction(wikidata_local.relations_around(node))
        assert read == _asked(wikidata_local, node), node
        compared += bool(read)
    assert compared > 40


def test_a_hub_s_way_without_a_record_is_counted_as_the_queries_count(tmp_path):
    # The hub has a record of its many in-edges; its few out-edges have none.
    lines = [f"<{E}n{i}> <{E}p{i % 3}> <{E}hub> ." for i in range(60)]
    lines += [f"<{E}hub> <{E}q{i % 2}> <{E}x{i}> ." for i in range(5)] + [f'<{E}hub> {LABEL} "The Hub" .']
    source = tmp_path / "hub.nt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    load_sources([source], tmp_path / "store", progress=False, hub_threshold=20)
    backend = open_store(tmp_path / "store")
    hub = ox.NamedNode(f"{E}hub")
    assert backend.known_degree(hub, Direction.INCOMING) == 60 and backend.known_degree(hub, Direction.OUTGOING) is None
    read = _by_direction(backend.relations_around(hub))
    assert read == _asked(backend, hub)
    assert read[(f"{E}q0", Direction.OUTGOING)] == (3, True) and read[(f"{E}p0", Direction.INCOMING)] == (20, True)


def test_a_node_exists_where_the_ask_query_finds_it(wikidata_local):
    nodes = _nodes(wikidata_local, 60)
    missing = [ox.NamedNode(f"{n.value}-missing") for n in nodes[:20]]
    objects_only = [q.object for q in itertools.islice(wikidata_local.store.quads_for_pattern(None, None, None), 5000)
                    if isinstance(q.object, ox.NamedNode)
                    and next(wikidata_local.store.quads_for_pattern(q.object, None, None), None) is None][:10]
    assert objects_only, "an object that is never a subject"
    for node in nodes + missing + objects_only:
        assert wikidata_local.exists(node) is SparqlBackend.exists(wikidata_local, node), node
    assert not any(wikidata_local.exists(n) for n in missing)
    assert all(wikidata_local.exists(n) for n in objects_only)
