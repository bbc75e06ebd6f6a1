"""A local store answers some backend questions from its indexes, without SPARQL (kg_mcp.backends.
store_patterns): the answers must be those of the queries an endpoint is asked."""

from __future__ import annotations

import itertools
from collections import Counter

import pyoxigraph as ox

from kg_mcp.backends import Direction
from kg_mcp.backends.sparql_backend import SparqlBackend
from kg_mcp.hubs import recorded_directions


def _nodes(backend, many: int = 150) -> list[ox.NamedNode]:
    """Subjects and objects of the store, its best connected among them (those past the index
    read's bound too), and hubs with one direction recorded."""
    quads = list(itertools.islice(backend.store.quads_for_pattern(None, None, None, ox.DefaultGraph()), 20_000))
    seen = {t for q in quads for t in (q.subject, q.object) if isinstance(t, ox.NamedNode)}
    connected = [n for n, _ in Counter(q.object for q in quads if isinstance(q.object, ox.NamedNode)).most_common(5)]
    hubs = {node for node, _ in recorded_directions(backend.store)}
    return sorted(seen, key=lambda n: n.value)[:many] + connected + sorted(hubs, key=lambda n: n.value)


def test_relation_counts_read_from_the_index_are_those_the_query_counts(wikidata_local):
    nodes = _nodes(wikidata_local)
    # The Wikidata profile hides statement and label predicates around items and not around
    # statement nodes: the index read must leave out what the query's filter leaves out.
    compared = 0
    for node in nodes:
        for direction in Direction:
            read = wikidata_local.relation_counts(node, direction)
            asked = SparqlBackend.relation_counts(wikidata_local, node, direction)
            if wikidata_local.known_degree(node, direction) is None:  # not from a hub's record
                assert read == asked, (node, direction)
                compared += bool(read)
    assert compared > 40


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
