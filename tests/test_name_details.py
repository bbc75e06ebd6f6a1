"""What the name index of a store loaded from N-Triples keeps for hits besides names (kg_mcp.names.details):
each name's degree, counted from the text as the store counts it, and its entity's best label, the one
the store shows; lookups then read nothing else, and answer as they do when they read the store."""

from __future__ import annotations

import random
import sqlite3

import pyoxigraph as ox
import pytest

from kg_mcp.backends import open_store, store_patterns
from kg_mcp.loading import load_sources
from kg_mcp.names import index_path, read_index_meta
from kg_mcp.names.store_index import build_store_index, store_profile
from kg_mcp.settings import Settings
from kg_mcp.tools import find_entities

FB = "http://rdf.freebase.com/ns/"
EX = "http://example.org/"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
SKOS = "http://www.w3.org/2004/02/skos/core#"


def generic_lines() -> list[str]:
    """A generic KG whose entities have labels in several languages and predicates, aliases, and
    edges both ways (a hub among them); no line twice."""
    rng = random.Random(4)
    lines = []
    for i in range(300):
        e = f"<{EX}e{i}>"
        lines.append(f'{e} <{RDFS_LABEL}> "Entity {i}"@en .')
        if i % 3 == 0:
            lines.append(f'{e} <{RDFS_LABEL}> "Entité {i}"@fr .')  # another language: not shown
        if i % 4 == 0:
            lines.append(f'{e} <{SKOS}prefLabel> "Preferred {i}"@en .')  # a later label predicate
        if i % 5 == 0:
            lines.append(f'{e} <{RDFS_LABEL}> "untagged {i}" .')  # untagged: after the preferred languages
        if i % 7 == 0:
            lines.append(f'{e} <{SKOS}altLabel> "Alias {i}"@en .')
        if i % 11 == 0:
            lines.append(f'{e} <http://schema.org/description> "thing number {i}"@en .')
        for j in rng.sample(range(300), 3):
            lines.append(f"{e} <{EX}linked> <{EX}e{j}> .")
        lines.append(f"{e} <{EX}in> <{EX}hub> .")
        lines.append(f'{e} <{EX}size> "{i}"^^<http://www.w3.org/2001/XMLSchema#integer> .')
    lines.append(f'<{EX}hub> <{RDFS_LABEL}> "The Hub"@en .')
    lines.append(f'<{EX}only_alias> <{SKOS}altLabel> "Nameless"@en .')  # no label at all
    return list(dict.fromkeys(lines))


@pytest.fixture(scope="module")
def generic_store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("details")
    source = folder / "kg.nt"
    source.write_text("\n".join(generic_lines()) + "\n", encoding="utf-8")
    load_sources([source], folder / "store", progress=False)
    return folder / "store", source


def name_rows(store_dir):
    with sqlite3.connect(index_path(store_dir)) as connection:
        return connection.execute("SELECT id, entity, label, degree, label_id FROM names").fetchall()


def test_each_name_has_its_entitys_degree_and_best_label_as_the_store_gives_them(generic_store):
    store_dir, _ = generic_store
    backend = open_store(store_dir)
    rows = name_rows(store_dir)
    labels = {row_id: label for row_id, _, label, _, _ in rows}
    assert read_index_meta(index_path(store_dir))["details"] == {
        "degrees": "text", "degree_cap": Settings().degree_cap, "labels": "text", "descriptions": "store"
    }
    for _, entity, _, degree, label_id in rows:
        node = ox.NamedNode(entity)
        counted = store_patterns.degree(backend.store, node, backend.profile.hidden_around(entity), Settings().degree_cap)
        assert degree == counted, entity
        assert labels.get(label_id) == backend.labels([node]).get(node), entity
    assert {e for _, e, _, _, label_id in rows if label_id is None} == {f"{EX}only_alias"}
    hub = next(d for _, e, _, d, _ in rows if e == f"{EX}hub")
    assert hub == 300  # incoming only; its label is hidden


def test_a_degree_caps_each_direction(tmp_path, monkeypatch):
    monkeypatch.setenv("KG_MCP_DEGREE_CAP", "100")
    source = tmp_path / "kg.nt"
    source.write_text("".join(f"<{EX}e{i}> <{EX}in> <{EX}hub> .\n" for i in range(250)) + f'<{EX}hub> <{RDFS_LABEL}> "Hub" .\n')
    load_sources([source], tmp_path / "store", progress=False)
    assert [d for _, _, _, d, _ in name_rows(tmp_path / "store")] == [100]


def test_lookups_answer_as_when_they_read_the_store(generic_store, tmp_path):
    """The same hits, labels, descriptions and degrees from the index's details as from the store's own
    reads (the index built from the store keeps none)."""
    store_dir, _ = generic_store
    with_details = open_store(store_dir)
    plain_dir = tmp_path / "plain"
    plain_dir.mkdir()
    store = ox.Store.read_only(str(store_dir))
    build_store_index(store, plain_dir, profile=store_profile(store), languages=Settings().languages, progress=False)
    from kg_mcp.names import NameIndex

    reading = open_store(store_dir)
    reading.use_names(NameIndex.open(index_path(plain_dir)))  # the same names, no details: degrees and texts read
    for name in ["Entity 12", "entity 3", "Preferred 8", "Alias 14", "Entity", "The Hub", "Nameless", "Entiyt 121"]:
        ours, theirs = find_entities(with_details, Settings(), name, 10), find_entities(reading, Settings(), name, 10)
        assert ours.data.entities == theirs.data.entities, name
        assert ours.data.entities, name
    described = find_entities(with_details, Settings(), "Entity 22", 1).data.entities[0]
    assert described.description == "thing number 22"


def test_without_description_lines_a_lookup_knows_there_are_none(tmp_path):
    source = tmp_path / "fb.nt"
    source.write_text(
        f'<{FB}m.01> <{FB}type.object.name> "Steven Spielberg"@en .\n'
        f'<{FB}m.02> <{FB}film.film.directed_by> <{FB}m.01> .\n'
        f'<{FB}m.02> <{FB}type.object.name> "Jaws"@en .\n'
    )
    load_sources([source], tmp_path / "store", progress=False)
    assert read_index_meta(index_path(tmp_path / "store"))["details"]["descriptions"] == "none"
    backend = open_store(tmp_path / "store")
    backend.descriptions = lambda nodes: pytest.fail("read descriptions")  # the index said there are none
    hit = find_entities(backend, Settings(), "Spielberg", 5).data.entities[0]
    assert (hit.id, hit.label, hit.description, hit.degree) == ("m.01", "Steven Spielberg", None, 1)


def test_wikidata_hides_more_than_the_scan_sees_so_its_names_keep_no_degree(tmp_path):
    source = tmp_path / "wd.nt"
    source.write_text(
        '<http://www.wikidata.org/entity/Q42> <http://www.w3.org/2000/01/rdf-schema#label> "Douglas Adams"@en .\n'
        "<http://www.wikidata.org/entity/Q42> <http://www.wikidata.org/prop/direct/P31> "
        "<http://www.wikidata.org/entity/Q5> .\n"
    )
    load_sources([source], tmp_path / "store", progress=False)
    assert [(label, degree, label_id is not None) for _, _, label, degree, label_id in name_rows(tmp_path / "store")] == [
        ("Douglas Adams", None, True)
    ]
    hit = find_entities(open_store(tmp_path / "store"), Settings(), "Douglas Adams", 1).data.entities[0]
    assert (hit.label, hit.degree) == ("Douglas Adams", 1)  # counted by the backend


def test_kg_mcp_index_from_the_files_gives_the_index_the_load_made(generic_store, tmp_path):
    from click.testing import CliRunner

    from kg_mcp.cli import main

    store_dir, source = generic_store
    before = name_rows(store_dir)
    result = CliRunner().invoke(main, ["index", "--store", str(store_dir), "--from", str(source)])
    assert result.exit_code == 0, result.output
    assert "with degrees and labels, from 1 file(s)" in result.output
    assert name_rows(store_dir) == before
