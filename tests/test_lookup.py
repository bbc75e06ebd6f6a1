"""find_entities through the name index: what people type (typos, lower case, partial names, any word
order, aliases), the index's life with the store (built by load, swapped atomically, built on first
open, rebuilt by `kg-mcp index`), the semantic fallback, and `kg-mcp eval --lookup`."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
from test_cli import failed, kg_mcp, ok

from kg_mcp.backends import open_demo, open_store
from kg_mcp.loading import LoadError, load_sources
from kg_mcp.names import INDEX_FILE, NameIndex, fold, index_path, read_index_meta
from kg_mcp.settings import Settings
from kg_mcp.tools import find_entities


def hits(backend, name, limit=5):
    return [(e.id, e.match) for e in find_entities(backend, Settings(), name, limit).data.entities]


def first_rank(backend, name, entity, limit=5):
    ids = [i for i, _ in hits(backend, name, limit)]
    return ids.index(entity) + 1 if entity in ids else None


# --- what people type, on the real MetaQA KB and Wikidata sample ------------------------------------


@pytest.mark.parametrize(
    ("typed", "entity", "match"),
    [
        ("Catch Me If You Can", "kg:Catch_Me_If_You_Can", "exact"),
        ("catch me if you can", "kg:Catch_Me_If_You_Can", "folded"),
        ("oceans eleven", "kg:Ocean%27s_Eleven", "folded"),
        ("Steven Spielburg", "kg:Steven_Spielberg", "fuzzy"),
        ("Spielberg Steven", "kg:Steven_Spielberg", "words"),
        ("Steven Spielb", "kg:Steven_Spielberg", "words"),  # the last word unfinished
        ("Tom Hank", "kg:Tom_Hanks", "words"),  # "hank" is a word of other names, and also begins "hanks"
    ],
)
def test_typed_names_find_the_entity_first(metaqa, typed, entity, match):
    found = hits(metaqa, typed)
    assert found[0] == (entity, match), found


def test_a_surname_finds_the_person_after_the_node_of_that_very_name(metaqa):
    # MetaQA also has a tag node "spielberg": a whole-name match ranks before a words match.
    assert hits(metaqa, "Spielberg")[:2] == [("kg:spielberg", "folded"), ("kg:Steven_Spielberg", "words")]


@pytest.mark.parametrize(
    ("typed", "entity"),
    [
        ("Gabrielle", "kg:Brie_Gabrielle"),  # a surname: before Gabrielle Union, better connected
        ("Lost", "kg:Land_of_the_Lost"),  # a title's last word: before Lost Horizon
        ("Go", "kg:Everything_Must_Go"),  # "The Go-Getter" does not end with "go"
    ],
)
def test_a_word_typed_alone_finds_first_the_names_it_ends(metaqa, typed, entity):
    found = find_entities(metaqa, Settings(), typed, 5).data.entities
    assert entity in [e.id for e in found], found
    words = [fold(e.label).split() for e in found if e.match == "words"]
    ending = [w[-1] == fold(typed) for w in words]
    assert ending == sorted(ending, reverse=True), words  # every name it ends before any it does not


def test_exact_label_keeps_rank_one_over_better_connected_word_matches(metaqa):
    # "Up" is a word of many better-connected titles; the film called exactly that stays first.
    found = hits(metaqa, "Up", 10)
    assert found[0] == ("kg:Up", "exact")
    assert {m for _, m in found[1:]} <= {"folded", "words", "fuzzy"}


def test_aliases_are_found_on_wikidata(wikidata_local):
    assert hits(wikidata_local, "Douglas Noel Adams")[0] == ("wd:Q42", "alias")
    assert hits(wikidata_local, "Mt. Everest")[0] == ("wd:Q513", "alias")
    assert hits(wikidata_local, "sagarmatha")[0] == ("wd:Q513", "alias")  # accent folded: Sagarmāthā


def test_van_gogh_finds_the_painter_on_the_demo_kg():
    demo = open_demo()
    assert hits(demo, "Van Gogh")[0] == ("wd:Q5582", "alias")
    assert hits(demo, "Vincent van Gog")[0][0] == "wd:Q5582"


def test_nothing_close_is_said_with_the_method(metaqa):
    out = find_entities(metaqa, Settings(), "Qqqzzx Wwwvvk")
    assert out.data.entities == [] and out.data.method == "name index"
    assert "no entity has this name or one close to it (looked up by name index)" in out.text


def test_index_off_is_todays_label_queries(metaqa_store_dir):
    plain = open_store(metaqa_store_dir, settings=Settings(name_index=False))
    out = find_entities(plain, Settings(), "Steven Spielburg")
    assert out.data.method == "label queries (exact, case-insensitive, prefix)" and out.data.entities == []


def test_near_words_forgive_one_typo_in_short_words_and_two_in_long_ones(metaqa):
    index = metaqa._name_index()
    assert index.near_words("spielburg")["spielberg"] == 1
    assert index.near_words("speilberg")["spielberg"] == 1  # a swap of neighbours is one edit
    assert index.near_words("spielbrg")["spielberg"] == 1  # a dropped letter
    assert index.near_words("spialbirg")["spielberg"] == 2  # nine letters: two typos forgiven
    assert "hanks" in index.near_words("hanke")
    assert index.near_words("tom") == {}  # three letters: only within a name of several words


# --- the index's life with the store ------------------------------------------------------------------


@pytest.fixture
def small_kb(tmp_path):
    kb = tmp_path / "kb.txt"
    kb.write_text("Amélie|directed_by|Jean-Pierre Jeunet\nDelicatessen|directed_by|Jean-Pierre Jeunet\n", encoding="utf-8")
    return kb


def test_load_builds_the_index_with_the_store_and_a_failed_load_keeps_both(tmp_path, small_kb):
    store = tmp_path / "store"
    report = load_sources([small_kb], store, progress=False)
    assert report.names >= 3 and (store / INDEX_FILE).is_file()
    meta_before = read_index_meta(index_path(store))
    bad = tmp_path / "bad.nt"
    bad.write_text("<http://x/a> <http://x/b> .\n", encoding="utf-8")
    with pytest.raises(LoadError):
        load_sources([bad], store, progress=False)
    assert read_index_meta(index_path(store)) == meta_before
    more = tmp_path / "more.txt"
    more.write_text("Micmacs|directed_by|Jean-Pierre Jeunet\n", encoding="utf-8")
    load_sources([more], store, progress=False)
    backend = open_store(store)
    assert hits(backend, "amelie")[0] == ("kg:Amélie", "folded")
    assert hits(backend, "Micmac")[0] == ("kg:Micmacs", "words")
    assert read_index_meta(index_path(store))["stamp"] != meta_before["stamp"]  # rebuilt by the second load
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".store.loading", ".store.old"))]  # no copy left


def test_a_store_without_index_gets_one_on_first_open(tmp_path, small_kb, caplog):
    store = tmp_path / "store"
    load_sources([small_kb], store, progress=False)
    (store / INDEX_FILE).unlink()  # as a store loaded before the index existed
    backend = open_store(store)
    assert (store / INDEX_FILE).is_file()
    assert hits(backend, "Jeunet Jean Pierre")[0] == ("kg:Jean-Pierre_Jeunet", "words")
    assert "building the name index" in caplog.text


def test_kg_mcp_index_rebuilds_for_other_languages(tmp_path, wikidata_store_dir):
    store = tmp_path / "wd"
    shutil.copytree(wikidata_store_dir, store)
    assert "Дуглас Адамс" not in {m.name for m in NameIndex.open(index_path(store)).lookup("Дуглас Адамс", 5)}
    out = kg_mcp("index", "--store", str(store), "--language", "cv")  # Chuvash
    assert "names (wikidata profile)" in ok(out) + out.stderr
    assert read_index_meta(index_path(store))["languages"] == ["cv"]
    found = NameIndex.open(index_path(store)).lookup("дуглас адамс", 5)
    assert [(m.entity, m.name, m.kind) for m in found][0] == ("http://www.wikidata.org/entity/Q42", "Дуглас Адамс", "folded")
    assert "does not exist" in failed(kg_mcp("index", "--store", str(tmp_path / "missing")))


def test_a_word_thousands_of_names_share_finds_the_shortest_ranked_by_degree(tmp_path):
    # 6,000 long names with "Smith" come first in the file, three short ones last: a lookup that
    # read the matches in file order (and stopped after some thousands) would never see them.
    fb, name = "http://rdf.freebase.com/ns/", "<http://rdf.freebase.com/ns/type.object.name>"
    lines = [f'<{fb}m.long{i}> {name} "Smith Family Reunion Number {i}"@en .' for i in range(6000)]
    edges = {"m.al": 1, "m.bo": 5, "m.cy": 3}
    for node, short in zip(edges, ("Al Smith", "Bo Smith", "Cy Smith"), strict=True):
        lines.append(f'<{fb}{node}> {name} "{short}"@en .')
        lines += [f"<{fb}{node}> <{fb}people.person.sibling> <{fb}m.long{k}> ." for k in range(edges[node])]
    (tmp_path / "smiths.nt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    load_sources([tmp_path / "smiths.nt"], tmp_path / "store", progress=False)
    backend = open_store(tmp_path / "store")
    try:
        found = find_entities(backend, Settings(), "Smith", 3).data.entities
        # Most edges first; each degree read side by side (a store on disk) is the one read alone.
        assert [e.id for e in found] == ["m.bo", "m.cy", "m.al"]
        assert [e.degree for e in found] == [backend._degree(backend.vocab.parse(e.id)) for e in found]
        assert found[0].degree > found[1].degree > found[2].degree
    finally:
        backend.close()


def test_index_file_is_plain_sqlite_with_fts5(metaqa_store_dir):
    connection = sqlite3.connect(index_path(metaqa_store_dir))
    count = connection.execute("SELECT count(*) FROM words WHERE words MATCH 'spielberg'").fetchone()[0]
    assert count >= 1
    assert fold("Steven Spielberg") in {r[0] for r in connection.execute("SELECT folded FROM names WHERE folded LIKE 'steven spiel%'")}


# --- the semantic fallback ----------------------------------------------------------------------------

TURTLE = """
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> . @prefix ex: <http://example.org/> .
ex:a rdfs:label "physician" ; ex:p ex:b . ex:b rdfs:label "banana split" . ex:c rdfs:label "Mount Everest" ; ex:p ex:b .
"""


def test_semantic_fallback_only_when_asked_and_nothing_matches_by_words(memory_backend):
    plain = memory_backend(TURTLE)
    assert hits(plain, "doctor") == []
    semantic = memory_backend(TURTLE, settings=Settings(semantic_lookup=True))
    out = find_entities(semantic, Settings(), "doctor")
    assert [(e.id, e.match) for e in out.data.entities][0] == ("<http://example.org/a>", "semantic")
    assert out.data.method == "name index, then nearest names by embedding"
    assert hits(semantic, "highest mountain")[0][0] == "<http://example.org/c>"
    assert hits(semantic, "banana")[0] == ("<http://example.org/b>", "words")  # words match first: no embedding


# --- the drivers' topic resolution and `kg-mcp eval --lookup` -----------------------------------------


async def test_drivers_resolve_mistyped_topics_through_the_same_lookup(metaqa):
    from kg_mcp.agents.kg_client import KGClient
    from kg_mcp.agents.run import Run, resolve_topics

    async with KGClient.connect(server=metaqa) as kg:
        run = Run("sog", "what did [Steven Spielburg] direct", kg)
        resolved = await resolve_topics(run, {"Steven Spielburg": None, "spielberg steven": None, "Qqqzzx": None})
    assert resolved == {"Steven Spielburg": "kg:Steven_Spielberg", "spielberg steven": "kg:Steven_Spielberg"}


def test_eval_lookup_prints_recall_per_kind(wikidata_store_dir, metaqa_store_dir):
    out = ok(kg_mcp("eval", "--lookup", "--benchmark", "kg-labels", "--store", str(wikidata_store_dir), "--sample", "12"))
    assert "looked up by name index" in out
    rows = {line.split("|")[1].strip(): line.split("|")[2:5] for line in out.splitlines() if line.startswith("| ")}
    assert rows["exact"] == [" 12 ", " 100.0% ", " 100.0% "]  # exact names keep rank 1
    assert {"typo", "lower", "reordered", "all"} <= set(rows)
    out = ok(kg_mcp("eval", "--lookup", "--benchmark", "metaqa-1hop", "--store", str(metaqa_store_dir), "--sample", "6"))
    assert "lookup metaqa-1hop: 6 topic names (0 not in the KG), looked up by name index" in out
    assert "p50" in out
    assert "give --store" in failed(kg_mcp("eval", "--lookup", "--benchmark", "kg-labels"))



def test_a_word_fts5_cuts_in_two_is_looked_up_not_refused():
    # The fuzz found it: a mark inside a word (U+19BF) made FTS5 read one typed word as a phrase,
    # which an index without positions refuses with an SQLite error.
    backend = open_demo()
    for name in ("Zun\u19bfdert", "Vincent van\u19bfGogh", "q727\u19bfzq9mark"):
        assert isinstance(hits(backend, name), list)  # answered, not an SQLite error
    assert hits(backend, "van gogh vincent")[0] == ("wd:Q5582", "words")


def test_an_unfinished_last_word_finds_the_names_fts5s_prefix_query_finds(tmp_path):
    # "spiel" begins three words (looked up as those words OR-ed); "ab" begins 40 (past the cap of
    # words OR-ed: FTS5's own prefix query). Either way the names are those of the prefix query.
    fb, name = "http://rdf.freebase.com/ns/", "<http://rdf.freebase.com/ns/type.object.name>"
    names = ["Steven Spielberg", "Steven Spielmann", "Ann Spieler", "Steven Spiel", "Steven Spalding"]
    names += [f"Steven Ab{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(40)]
    lines = [f'<{fb}m.n{i}> {name} "{text}"@en .' for i, text in enumerate(names)]
    (tmp_path / "names.nt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    load_sources([tmp_path / "names.nt"], tmp_path / "store", progress=False)
    index = NameIndex.open(index_path(tmp_path / "store"))
    fts = sqlite3.connect(index_path(tmp_path / "store"))
    try:
        for typed, query in (("Steven Spie", '"steven" AND "spie"*'), ("Steven Ab", '"steven" AND "ab"*')):
            sql = "SELECT entity FROM names WHERE id IN (SELECT rowid & 4294967295 FROM words WHERE words MATCH ?)"
            expected = {entity for (entity,) in fts.execute(sql, (query,))}
            found = {m.entity for m in index.lookup(typed, 50) if m.kind == "words"}
            assert found == expected and len(found) == (3 if typed == "Steven Spie" else 40)
        # A word besides the last that no name has: no name has every word.
        assert [m for m in index.lookup("Stephen Spielberg", 10) if m.kind == "words"] == []
        assert {m.name for m in index.lookup("Ann Spiel", 10)} >= {"Ann Spieler"}
    finally:
        fts.close()
        index.close()


def test_mistyped_word_with_many_neighbours_takes_the_same_twenty_every_run(tmp_path):
    # 25 indexed words one edit from "bbbbx": the fuzzy query takes 20, the closest, then in
    # alphabetical order (not the order of a Python set, which changes from one process to the next).
    fb, name = "http://rdf.freebase.com/ns/", "<http://rdf.freebase.com/ns/type.object.name>"
    near = [f"bbbb{c}" for c in "abcdefghijklmnopqrstuvwyz"]
    lines = [f'<{fb}m.{word}> {name} "{word}"@en .' for word in near]
    (tmp_path / "near.nt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    load_sources([tmp_path / "near.nt"], tmp_path / "store", progress=False)
    index = NameIndex.open(index_path(tmp_path / "store"))
    try:
        found = index.lookup("bbbbx", 50)
        assert {m.kind for m in found} == {"fuzzy"}
        assert sorted(m.name for m in found) == near[:20]
    finally:
        index.close()
