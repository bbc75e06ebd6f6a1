"""The name index's word pairs: names with several common words found by reading pair lists (as short
as the answer) rather than whole word lists, with the same names as the single-word query; the
index upgraded in place when it predates them; and a hit's label and description read from the
store's indexes with the same choice as the SPARQL queries."""

from __future__ import annotations

import shutil
import sqlite3

import pyoxigraph as ox
import pytest

from kg_mcp.backends import open_store
from kg_mcp.backends.sparql_backend import SparqlBackend
from kg_mcp.loading import load_sources
from kg_mcp.names import NameIndex, index_path
from kg_mcp.names.pairs import WINDOW, has_word_pairs
from kg_mcp.names.store_index import open_store_index, store_profile
from kg_mcp.settings import Settings

FB = "http://rdf.freebase.com/ns/"
NAME = f"<{FB}type.object.name>"
DESCRIPTION = f"<{FB}common.topic.description>"
# Two words of hundreds of names each (past the lists read whole), rarely together.
COMMON = [f"Alpha Filler{i}" for i in range(300)] + [f"Filler{i} Beta" for i in range(300)]
TOGETHER = {
    "m.ab": "Alpha Beta",
    "m.bga": "Beta Gamma Alpha",
    "m.abc": "Alpha Beta Club",
    "m.far": "Alpha " + " ".join(f"w{i}" for i in range(WINDOW)) + " Beta",  # Beta is WINDOW + 1 words on
    "m.rare": "Alpha " + " ".join(f"w{i}" for i in range(WINDOW)) + " Zeta",  # Zeta: one name only
}


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pairs")
    lines = [f'<{FB}m.c{i}> {NAME} "{text}"@en .' for i, text in enumerate(COMMON)]
    lines += [f'<{FB}{node}> {NAME} "{text}"@en .' for node, text in TOGETHER.items()]
    (tmp / "names.nt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    load_sources([tmp / "names.nt"], tmp / "store", progress=False)
    return tmp / "store"


def traced(path) -> tuple[NameIndex, list[str]]:
    """The index at `path` and the SQL statements it runs from now on."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
    statements: list[str] = []
    connection.set_trace_callback(statements.append)
    return NameIndex(connection, str(path)), statements


def single_word_answer(path, query: str) -> set[str]:
    """The entities FTS5's single-word index gives for `query`: what the pairs must give too."""
    connection = sqlite3.connect(path)
    try:
        sql = "SELECT entity FROM names WHERE id IN (SELECT rowid & 4294967295 FROM words WHERE words MATCH ?)"
        return {entity for (entity,) in connection.execute(sql, (query,))}
    finally:
        connection.close()


def test_common_words_are_asked_as_pairs_and_give_the_names_with_both(store_dir):
    path = index_path(store_dir)
    index, statements = traced(path)
    try:
        for typed in ("Alpha Beta", "beta alpha", "Beta Alp"):  # typed, reordered, the last word unfinished
            statements.clear()
            # (Three asked: with fewer names than asked, near spellings would be looked for too.)
            found = {m.entity for m in index.lookup(typed, 3) if m.kind in ("exact", "folded", "words")}
            assert any("word_pairs MATCH" in s for s in statements), typed
            assert not any("FROM words WHERE words MATCH" in s for s in statements), typed
            expected = single_word_answer(path, '"alpha" AND "beta"') - {f"{FB}m.far"}
            assert found == expected == {f"{FB}m.ab", f"{FB}m.bga", f"{FB}m.abc"}, typed
    finally:
        index.close()


def test_a_typo_in_common_words_is_looked_up_as_pairs_of_spellings(store_dir):
    index, statements = traced(index_path(store_dir))
    try:
        found = index.lookup("Alpah Beta", 10)
        assert found[0].entity == f"{FB}m.ab" and found[0].kind == "fuzzy"
        assert any("word_pairs MATCH" in s for s in statements)
    finally:
        index.close()


def test_words_further_apart_than_the_window_are_found_when_one_of_them_is_rare(store_dir):
    index = NameIndex.open(index_path(store_dir))
    try:
        # Zeta is in one name: the single-word query reads its list whole and finds the name.
        assert [m.entity for m in index.lookup("Alpha Zeta", 10) if m.kind == "words"] == [f"{FB}m.rare"]
        # Two common words that far apart in a long name are not a pair: the documented limit.
        assert f"{FB}m.far" not in {m.entity for m in index.lookup("Alpha Beta", 50) if m.kind == "words"}
    finally:
        index.close()


def test_an_index_from_before_the_pairs_gets_them_on_open_and_answers_the_same(store_dir, tmp_path):
    copy = tmp_path / "store"
    shutil.copytree(store_dir, copy)
    connection = sqlite3.connect(index_path(copy))
    connection.execute("DROP TABLE word_pairs")
    connection.commit()
    connection.close()
    older = NameIndex.open(index_path(copy))  # still answers, with single words
    before = [(m.entity, m.kind) for m in older.lookup("Alpha Beta", 10)]
    older.close()
    store = ox.Store.read_only(str(copy))
    profile = store_profile(store)
    upgraded = open_store_index(store, copy, profile, Settings().languages, progress=False)
    try:
        connection = sqlite3.connect(index_path(copy))
        assert has_word_pairs(connection)
        connection.close()
        after = [(m.entity, m.kind) for m in upgraded.lookup("Alpha Beta", 10)]
        # The same names, but for the long one whose two words are further apart than the window.
        assert after == [hit for hit in before if hit[0] != f"{FB}m.far"]
        assert {e for e, _ in after} == {f"{FB}m.ab", f"{FB}m.bga", f"{FB}m.abc"}
    finally:
        upgraded.close()
        del store


def test_labels_and_descriptions_read_from_the_store_are_the_ones_the_queries_choose(tmp_path):
    lines = [
        f'<{FB}m.de> {NAME} "Berlin"@de .',
        f'<{FB}m.de> {DESCRIPTION} "Hauptstadt"@de .',  # no description in English: any language
        f'<{FB}m.both> {NAME} "Paris"@en .',
        f'<{FB}m.both> {NAME} "Paname"@fr .',
        f'<{FB}m.both> {DESCRIPTION} "capitale"@fr .',
        f'<{FB}m.both> {DESCRIPTION} "capital of France"@en .',
        f'<{FB}m.plain> {NAME} "Rome" .',  # untagged before another language
        f'<{FB}m.plain> {NAME} "Roma"@it .',
        f'<{FB}m.plain> {DESCRIPTION} "city" .',
        f'<{FB}m.none> <{FB}location.location.containedby> <{FB}m.both> .',
    ]
    (tmp_path / "kb.nt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    load_sources([tmp_path / "kb.nt"], tmp_path / "store", progress=False)
    backend = open_store(tmp_path / "store")
    try:
        nodes = [ox.NamedNode(f"{FB}m.{n}") for n in ("de", "both", "plain", "none")]
        for predicates in (backend.label_predicates, backend.profile.description_predicates):
            read = backend._best_literals(nodes, predicates)
            assert read == SparqlBackend._best_literals(backend, nodes, predicates)
        assert [backend.descriptions(nodes).get(n) for n in nodes] == ["Hauptstadt", "capital of France", "city", None]
        assert [backend.labels(nodes).get(n) for n in nodes[:3]] == ["Berlin", "Paris", "Rome"]
    finally:
        backend.close()
