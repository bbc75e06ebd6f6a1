"""The name index built two ways: from the N-Triples text while `kg-mcp load` reads it (a new store),
and from the store's triples (other formats, later loads, `kg-mcp index`); both must give the same index."""

from __future__ import annotations

import sqlite3
import threading

import pyoxigraph as ox
import pytest

from kg_mcp.loading import LoadError, load_sources
from kg_mcp.names import index_path, read_index_meta
from kg_mcp.names.scan import NameScan
from kg_mcp.names.store_index import build_store_index, store_profile
from kg_mcp.profiles import get_profile

FB = "http://rdf.freebase.com/ns/"
NAME, ALIAS = f"<{FB}type.object.name>", f"<{FB}common.topic.alias>"

FREEBASE_LINES = [
    f'<{FB}m.01> {NAME} "Steven Spielberg"@en .',
    f'<{FB}m.01> {ALIAS} "Spielberg, Steven"@en .',
    f'<{FB}m.01> {NAME} "Стивен Спилберг"@ru .',  # another language: left out
    f'<{FB}m.01> {NAME} "Steven Allan Spielberg"@en-GB .',  # so is a regional one
    f'<{FB}m.02> {NAME} "Modena F.C."@en .',  # punctuation inside words: two rows
    f'<{FB}m.03>\t{NAME}\t"Caf\\u00E9 \\"Zo\\u00EB\\"\\tbar" .',  # escapes, tabs, no language
    f'<{FB}m.04> {NAME} "Ocean\'s Eleven"^^<http://www.w3.org/2001/XMLSchema#string> .',
    f'_:b1 {NAME} "a blank node" .',  # not an entity
    f'<{FB}m.05> <{FB}film.film.directed_by> <{FB}m.01> .',
    f'<{FB}m.05> {NAME} "Jaws"@en .',
    f'<{FB}m.06> <{FB}common.topic.description> "Steven is a name"@en .',
    f'<{FB}m.07> {NAME} "Émile Zola"@EN .',
]


def rows(path):
    connection = sqlite3.connect(path)
    try:
        names = sorted(connection.execute("SELECT entity, label, folded, alias FROM names"))
        terms = sorted(connection.execute("SELECT term, backwards, docs FROM terms"))
        grams = connection.execute("SELECT count(*) FROM term_grams").fetchone()[0]
        return names, terms, grams
    finally:
        connection.close()


def index_from_store(store_dir, elsewhere):
    """The index file that the store-query path writes into directory `elsewhere`."""
    elsewhere.mkdir()
    store = ox.Store.read_only(str(store_dir))
    build_store_index(store, elsewhere, profile=store_profile(store), languages=["en", "mul"], progress=False)
    return index_path(elsewhere)


@pytest.mark.parametrize("last_line_break", ["\n", ""])
def test_names_read_from_the_text_make_the_index_the_store_would(tmp_path, last_line_break):
    source = tmp_path / "fb.nt"
    source.write_text("\n".join(FREEBASE_LINES) + last_line_break, encoding="utf-8")
    store_dir = tmp_path / "store"
    report = load_sources([source], store_dir, progress=False)
    scanned = rows(index_path(store_dir))
    from_store = rows(index_from_store(store_dir, tmp_path / "again"))
    assert scanned == from_store
    names = scanned[0]
    assert report.names == len(names) == 8 and report.names_read_from == "text"
    assert (f"{FB}m.03", 'Café "Zoë"\tbar', 'cafe zoe bar', 0) in names
    assert (f"{FB}m.01", "Spielberg, Steven", "spielberg steven", 1) in names
    assert {folded for e, _, folded, _ in names if e == f"{FB}m.02"} == {"modena f c", "modena fc"}
    assert (f"{FB}m.07", "Émile Zola", "emile zola", 0) in names
    # The text gives more (tests/test_name_details.py): each name's degree and its entity's label row.
    meta = read_index_meta(index_path(store_dir))
    assert meta.pop("details") == {"degrees": "text", "degree_cap": 10_000, "labels": "text", "descriptions": "store"}
    assert meta == read_index_meta(index_path(tmp_path / "again"))


def test_names_of_predicates_the_profile_does_not_index_are_left_to_the_store(tmp_path):
    # A Wikidata dump also names items with schema:name, which the Wikidata profile does not index.
    source = tmp_path / "wd.nt"
    source.write_text(
        '<http://www.wikidata.org/entity/Q42> <http://www.w3.org/2000/01/rdf-schema#label> "Douglas Adams"@en .\n'
        '<http://www.wikidata.org/entity/Q42> <http://schema.org/name> "DNA"@en .\n'
        "<http://www.wikidata.org/entity/Q42> <http://www.wikidata.org/prop/direct/P31> "
        "<http://www.wikidata.org/entity/Q5> .\n",
        encoding="utf-8",
    )
    store_dir = tmp_path / "store"
    assert load_sources([source], store_dir, progress=False).names_read_from == "store"
    names = rows(index_path(store_dir))[0]
    assert [label for _, label, _, _ in names] == ["Douglas Adams"]
    assert rows(index_path(store_dir)) == rows(index_from_store(store_dir, tmp_path / "again"))


def test_a_second_load_indexes_the_names_of_both(tmp_path):
    first, second = tmp_path / "a.nt", tmp_path / "b.nt"
    first.write_text("\n".join(FREEBASE_LINES[:2]) + "\n", encoding="utf-8")
    second.write_text("\n".join(FREEBASE_LINES[9:10]) + "\n", encoding="utf-8")
    store_dir = tmp_path / "store"
    load_sources([first], store_dir, progress=False)
    assert load_sources([second], store_dir, progress=False).names_read_from == "store"
    labels = {label for _, label, _, _ in rows(index_path(store_dir))[0]}
    assert labels == {"Steven Spielberg", "Spielberg, Steven", "Jaws"}


def test_a_bad_line_keeps_the_store_and_index_of_the_last_good_load(tmp_path):
    good, bad = tmp_path / "good.nt", tmp_path / "bad.nt"
    good.write_text("\n".join(FREEBASE_LINES) + "\n", encoding="utf-8")
    bad.write_text(FREEBASE_LINES[9] + "\n" + f"<{FB}m.09> {NAME} .\n", encoding="utf-8")
    store_dir = tmp_path / "store"
    load_sources([good], store_dir, progress=False)
    before = rows(index_path(store_dir)), read_index_meta(index_path(store_dir))
    with pytest.raises(LoadError, match="bad.nt:2"):
        load_sources([bad], store_dir, progress=False)
    assert (rows(index_path(store_dir)), read_index_meta(index_path(store_dir))) == before
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".store.loading")]
    # and a new store from a bad file is not made at all
    with pytest.raises(LoadError):
        load_sources([bad], tmp_path / "new", progress=False)
    assert not (tmp_path / "new").exists()


def _scanned(path):
    """A scan of FREEBASE_LINES into a new index database at `path`, and the threads its statements ran in."""
    connection = sqlite3.connect(path, check_same_thread=False)
    ran_in: dict[str, set[str]] = {}
    connection.set_trace_callback(lambda sql: ran_in.setdefault(sql.split("(")[0].strip(), set()).add(threading.current_thread().name))
    scan = NameScan(connection, ["en", "mul"])
    scan.feed(("\n".join(FREEBASE_LINES) + "\n").encode())
    scan.end_of_source()
    return scan, connection, ran_in


def test_the_word_indexes_are_built_in_a_thread_beside_the_rest_of_the_load(tmp_path):
    # The loader compacts the store and counts its hubs meanwhile; finish waits for the thread.
    scan, _, ran_in = _scanned(tmp_path / "names.sqlite")
    scan.finish_guessed()
    assert scan.finish(get_profile("freebase"), "1:now") == 8
    scan.close()
    assert ran_in["CREATE VIRTUAL TABLE words USING fts5"] == {"kg-mcp name index"}
    source = tmp_path / "fb.nt"
    source.write_text("\n".join(FREEBASE_LINES) + "\n", encoding="utf-8")
    load_sources([source], tmp_path / "store", progress=False)
    assert rows(tmp_path / "names.sqlite") == rows(index_path(tmp_path / "store"))


def test_a_word_index_build_that_fails_in_its_thread_fails_the_finish(tmp_path):
    scan, connection, _ = _scanned(tmp_path / "names.sqlite")
    connection.execute("CREATE TABLE words(x)")  # the build's own table cannot be made
    scan.finish_guessed()
    with pytest.raises(sqlite3.OperationalError, match="words already exists"):
        scan.finish(get_profile("freebase"), "1:now")
    scan.close()
