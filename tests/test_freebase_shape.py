"""The scale bench's Freebase-shaped generator: valid, seeded, and served as Freebase by kg-mcp."""

from __future__ import annotations

from collections import Counter

import pyoxigraph as ox

from bench.freebase_shape import COUNTRIES, NAME, NS, Layout, country_id, entity_name, mid, write_freebase
from kg_mcp.backends import open_store
from kg_mcp.loading import load_sources
from kg_mcp.settings import Settings
from kg_mcp.tools import explore_kg, find_entities, search

TRIPLES = 30_000


def test_file_has_the_size_asked_for_parses_and_is_the_same_for_a_seed(tmp_path):
    first = write_freebase(tmp_path / "a.nt", TRIPLES)
    again = write_freebase(tmp_path / "b.nt", TRIPLES)
    other = write_freebase(tmp_path / "c.nt", TRIPLES, seed=12)
    assert first.read_bytes() == again.read_bytes()
    assert first.read_bytes() != other.read_bytes()
    triples = list(ox.parse(path=str(first), format=ox.RdfFormat.N_TRIPLES))
    assert len(triples) == TRIPLES
    assert len(set(triples)) > 0.99 * TRIPLES
    predicates = Counter(t.predicate.value.removeprefix(NS) for t in triples)
    assert {
        NAME,
        "type.object.type",
        "film.film.starring",
        "film.performance.actor",
        "people.marriage.from",
    } <= set(predicates)
    assert not (tmp_path / "a.partial").exists()


def test_degrees_follow_a_power_law_with_hubs(tmp_path):
    path = write_freebase(tmp_path / "kg.nt", TRIPLES)
    indegree = Counter(
        t.object
        for t in ox.parse(path=str(path), format=ox.RdfFormat.N_TRIPLES)
        if isinstance(t.object, ox.NamedNode)
    )
    degrees = sorted(indegree.values(), reverse=True)
    usa = ox.NamedNode(NS + mid(country_id(0)))
    assert indegree[usa] > 100 * sorted(degrees)[len(degrees) // 2]  # a hub far above the median
    assert sum(1 for d in degrees if d == 1) > len(degrees) / 3  # and a long tail of single edges


def test_kg_mcp_serves_it_as_freebase_with_unnamed_mediators(tmp_path):
    store_dir = tmp_path / "store"
    load_sources([write_freebase(tmp_path / "kg.nt", TRIPLES)], store_dir, progress=False)
    backend, settings = open_store(store_dir), Settings()
    assert backend.profile.name == "freebase"
    start, _ = Layout(TRIPLES).kind_range(1)  # the first film
    film = mid(start)
    shown = search(backend, settings, film, "outgoing").text
    assert "<http" not in shown and "film.film.starring" in shown, shown
    performances = explore_kg(backend, settings, film, ["film.film.starring"]).data.relations[0].neighbours
    assert len(performances) == 3
    mediator = performances[0].id
    assert mediator.startswith("m.0")
    assert not backend.store.query(f"ASK {{ <{NS}{mediator}> <{NS}{NAME}> ?name }}")  # mediators have no name
    actor = (
        explore_kg(backend, settings, mediator, ["film.performance.actor"]).data.relations[0].neighbours[0]
    )
    assert actor.id.startswith("m.0") and actor.label
    found = find_entities(backend, settings, COUNTRIES[0]).data.entities
    assert found[0].id == mid(country_id(0)) and found[0].label == COUNTRIES[0]
    named = find_entities(backend, settings, entity_name(start + 1)).data.entities
    assert mid(start + 1) in [e.id for e in named]
