"""`kg-mcp load`: formats, compression, name minting, bad lines and all-or-nothing loads.

Real pyoxigraph stores in tmp_path; the benchmark KBs are read in place from ../shared/data.
"""

from __future__ import annotations

import bz2
import gzip
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pyoxigraph as ox
import pytest

from kg_mcp.loading import LoadError, load_sources, mint_local_name, recover_interrupted_swap
from kg_mcp.namespaces import DEFAULT_BASE_IRI, ENTITY_PATH, META_GRAPH, RDFS_LABEL, RELATION_PATH
from kg_mcp.store_meta import read_meta

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
KG = DEFAULT_BASE_IRI + ENTITY_PATH
REL = DEFAULT_BASE_IRI + RELATION_PATH
LABEL = ox.NamedNode(RDFS_LABEL)
META = ox.NamedNode(META_GRAPH)


def data_file(relative: str) -> Path:
    path = DATA / relative
    if not path.is_file():
        pytest.skip(f"benchmark data not available: {path}")
    return path


def quads(store_dir: Path) -> set[ox.Quad]:
    """Everything in the store but kg-mcp's metadata (opened read-only, closed on return)."""
    store = ox.Store.read_only(str(store_dir))
    try:
        return {q for q in store if q.graph_name != META}
    finally:
        del store


def meta(store_dir: Path) -> dict:
    store = ox.Store.read_only(str(store_dir))
    try:
        return read_meta(store)
    finally:
        del store


def leftovers(store_dir: Path) -> list[str]:
    return sorted(
        p.name for p in store_dir.parent.iterdir() if p.name.startswith(f".{store_dir.name}.") and p.is_dir()
    )


def nt(s: str, p: str, o: str) -> str:
    return f"<http://ex.org/{s}> <http://ex.org/{p}> <http://ex.org/{o}> .\n"


@pytest.fixture
def small_store(tmp_path) -> Path:
    """A store holding three triples, loaded the normal way."""
    src = tmp_path / "base.nt"
    src.write_text(
        nt("a", "p", "b") + nt("b", "p", "c") + '<http://ex.org/c> <http://ex.org/name> "C"@en .\n'
    )
    store_dir = tmp_path / "kb.store"
    load_sources([src], store_dir, progress=False)
    return store_dir


# --- plain-text KBs --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def metaqa(tmp_path_factory):
    kb = data_file("metaqa/kb.txt")
    store_dir = tmp_path_factory.mktemp("metaqa") / "metaqa.store"
    report = load_sources([kb], store_dir, progress=False)
    return kb, store_dir, report


def test_metaqa_kb_loads_with_minted_names(metaqa):
    kb, store_dir, report = metaqa
    lines = kb.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 129_413
    names = {f for line in lines for f in (line.split("|")[0], line.split("|")[2])}
    relations = {line.split("|")[1] for line in lines}
    assert report.sources[0].format == "text"
    assert report.bad_lines == 0
    assert report.triples == len(set(lines)) + len(names) + len(relations)
    assert report.store_triples == report.triples

    store = ox.Store.read_only(str(store_dir))
    movie = ox.NamedNode(KG + "Catch_Me_If_You_Can")
    directors = [q.object for q in store.quads_for_pattern(movie, ox.NamedNode(REL + "directed_by"), None)]
    assert [next(store.quads_for_pattern(d, LABEL, None)).object.value for d in directors] == [
        "Steven Spielberg"
    ]
    assert directors == [ox.NamedNode(KG + "Steven_Spielberg")]
    # Literal-looking tails stay nodes: questions ask for them as answers.
    years = list(store.quads_for_pattern(movie, ox.NamedNode(REL + "release_year"), None))
    assert years and all(isinstance(q.object, ox.NamedNode) for q in years)
    # Every name has exactly one node whose single label is the original text, and vice versa.
    labels = {}
    for q in store.quads_for_pattern(None, LABEL, None):
        assert q.subject not in labels
        labels[q.subject] = q.object.value
    del store
    entity_labels = [v for s, v in labels.items() if s.value.startswith(KG)]
    assert sorted(entity_labels) == sorted(names)
    assert sorted(v for s, v in labels.items() if s.value.startswith(REL)) == sorted(relations)
    assert labels[ox.NamedNode(KG + "%2E45")] == ".45"


def test_metaqa_meta_records_namespaces_and_load(metaqa):
    kb, store_dir, report = metaqa
    m = meta(store_dir)
    assert m["prefixes"]["kg"] == KG
    assert m["relation_namespace"] == REL
    assert "profile" not in m
    [entry] = m["loads"]
    assert entry["sources"] == [str(kb)] and entry["triples"] == report.triples
    assert entry["seconds"] >= 0 and entry["at"].startswith("20")


def test_pathquestion_tab_separated(tmp_path):
    kb = data_file("pathquestion/2H-kb.txt")
    store_dir = tmp_path / "pq.store"
    report = load_sources([kb], store_dir, progress=False)
    assert report.bad_lines == 0
    got = quads(store_dir)
    triple = ox.Quad(
        ox.NamedNode(KG + "ludwig_ii_of_bavaria"),
        ox.NamedNode(REL + "parents"),
        ox.NamedNode(KG + "maximilian_ii_of_bavaria"),
    )
    assert triple in got
    assert ox.Quad(ox.NamedNode(REL + "parents"), LABEL, ox.Literal("parents")) in got


def test_minted_names_are_injective_and_labelled(tmp_path):
    src = tmp_path / "names.txt"
    src.write_text("a b|r|x\na_b|r|y\nThe End.|r|100%\nÉmile Zola|r|a b\n", encoding="utf-8")
    store_dir = tmp_path / "names.store"
    load_sources([src], store_dir, base_iri="http://example.org/kb/", progress=False)
    got = quads(store_dir)
    kg = "http://example.org/kb/" + ENTITY_PATH
    labels = {q.subject.value.removeprefix(kg): q.object.value for q in got if q.predicate == LABEL}
    assert labels.pop("http://example.org/kb/" + RELATION_PATH + "r") == "r"
    assert labels == {
        "a_b": "a b",
        "a%5Fb": "a_b",  # second name minting to a_b gets its fully encoded form
        "x": "x",
        "y": "y",
        "The_End%2E": "The End.",
        "100%25": "100%",
        "Émile_Zola": "Émile Zola",
    }
    assert sum(1 for q in got if q.predicate == LABEL) == len(labels) + 1  # each label once


def test_mint_local_name():
    assert mint_local_name("Catch Me If You Can") == "Catch_Me_If_You_Can"
    assert mint_local_name("AC/DC: <live> #1") == "AC%2FDC%3A_%3Clive%3E_%231"
    assert mint_local_name("Ça va") == "Ça_va"
    assert mint_local_name("x²") == "x%C2%B2"  # not a letter Turtle allows in a prefixed name
    assert mint_local_name("-1.5.") == "%2D1.5%2E"


# --- RDF formats and compression --------------------------------------------------------------


@pytest.mark.parametrize("compression", ["", ".gz", ".bz2"])
def test_wikidata_sample_nt(tmp_path, compression):
    sample = data_file("wikidata-sample/wikidata-sample.nt")
    src = tmp_path / f"sample.nt{compression}"
    opener = {"": open, ".gz": gzip.open, ".bz2": bz2.open}[compression]
    with open(sample, "rb") as fin, opener(src, "wb") as fout:
        while chunk := fin.read(1 << 20):
            fout.write(chunk)
    store_dir = tmp_path / "wd.store"
    report = load_sources([src], store_dir, progress=False)
    assert report.sources[0].format == "nt"
    assert report.triples == report.store_triples == 53_429
    store = ox.Store.read_only(str(store_dir))
    q42 = ox.NamedNode("http://www.wikidata.org/entity/Q42")
    assert any(q.object.value == "Douglas Adams" for q in store.quads_for_pattern(q42, LABEL, None))
    del store


def test_turtle_trig_rdfxml_and_nquads_in_one_load(tmp_path):
    ttl = tmp_path / "a.ttl"
    ttl.write_text('@prefix ex: <http://ex.org/> .\nex:a ex:p ex:b ; ex:name "A"@en .\n<rel> ex:p ex:a .\n')
    trig = tmp_path / "b.trig"
    trig.write_text("@prefix ex: <http://ex.org/> .\nex:g { ex:b ex:p ex:c . }\n")
    rdf = tmp_path / "c.rdf"
    rdf.write_text(
        '<?xml version="1.0"?>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"'
        ' xmlns:ex="http://ex.org/">\n<rdf:Description rdf:about="http://ex.org/c">'
        '<ex:p rdf:resource="http://ex.org/d"/></rdf:Description>\n</rdf:RDF>\n'
    )
    nq = tmp_path / "d.nq.gz"
    nq.write_bytes(
        gzip.compress(b"<http://ex.org/d> <http://ex.org/p> <http://ex.org/e> <http://ex.org/g2> .\n")
    )
    store_dir = tmp_path / "rdf.store"
    report = load_sources([ttl, trig, rdf, nq], store_dir, progress=False)
    assert [(s.format, s.triples) for s in report.sources] == [
        ("ttl", 3),
        ("trig", 1),
        ("rdfxml", 1),
        ("nq", 1),
    ]
    ex = "http://ex.org/"
    assert quads(store_dir) == {
        ox.Quad(ox.NamedNode(ex + "a"), ox.NamedNode(ex + "p"), ox.NamedNode(ex + "b")),
        ox.Quad(ox.NamedNode(ex + "a"), ox.NamedNode(ex + "name"), ox.Literal("A", language="en")),
        ox.Quad(ox.NamedNode(DEFAULT_BASE_IRI + "rel"), ox.NamedNode(ex + "p"), ox.NamedNode(ex + "a")),
        ox.Quad(
            ox.NamedNode(ex + "b"), ox.NamedNode(ex + "p"), ox.NamedNode(ex + "c"), ox.NamedNode(ex + "g")
        ),
        ox.Quad(ox.NamedNode(ex + "c"), ox.NamedNode(ex + "p"), ox.NamedNode(ex + "d")),
        ox.Quad(
            ox.NamedNode(ex + "d"), ox.NamedNode(ex + "p"), ox.NamedNode(ex + "e"), ox.NamedNode(ex + "g2")
        ),
    }
    m = meta(store_dir)
    assert m["prefixes"] == {"ex": ex}
    assert "relation_namespace" not in m


def test_two_sources_one_load_appends_to_store(small_store, tmp_path, capfd):
    before = quads(small_store)
    kb = tmp_path / "kb.tsv"
    kb.write_text("alice\tknows\tbob\n")
    more = tmp_path / "more.nt"
    more.write_text(nt("x", "p", "y") + nt("a", "p", "b"))  # one already stored
    report = load_sources([kb, more], small_store, progress=True)
    assert capfd.readouterr().out == ""  # stdout is the MCP protocol channel
    assert [s.triples for s in report.sources] == [4, 2]  # triple + 3 labels; 2 triples
    after = quads(small_store)
    assert before < after and len(after) == len(before) + 5 == report.store_triples
    assert len(meta(small_store)["loads"]) == 2


def test_format_override_and_unknown_extension(tmp_path):
    src = tmp_path / "kb.data"
    src.write_text("a|r|b\n")
    with pytest.raises(LoadError) as err:
        load_sources([src], tmp_path / "s.store", progress=False)
    assert err.value.path == src and err.value.line is None
    assert "--format" in str(err.value) and "wikidata-json" in str(err.value) and "rdfxml" in str(err.value)
    assert not (tmp_path / "s.store").exists()
    report = load_sources([src], tmp_path / "s.store", format="text", progress=False)
    assert report.triples == 4
    with pytest.raises(LoadError, match="unknown --format"):
        load_sources([src], tmp_path / "s.store", format="csv", progress=False)


def test_missing_source(tmp_path):
    with pytest.raises(LoadError, match="no such file") as err:
        load_sources([tmp_path / "nope.nt"], tmp_path / "s.store", progress=False)
    assert err.value.path == tmp_path / "nope.nt"


# --- bad input leaves the previous store as it was --------------------------------------------

ENTITY = '{"type": "item", "id": "Q1", "labels": {"en": {"language": "en", "value": "one"}}, "claims": {}}'
BAD_SOURCES = {
    "kb.txt": ("a|r|b\nb|r|c\na|r\nc|r|d\n", 3, "expected 3 fields separated by '|' or TAB, got 2"),
    "kb.nt": (
        nt("a", "q", "b") + "<http://ex.org/b> <http://ex.org/q> oops .\n" + nt("c", "q", "d"),
        2,
        "object",
    ),
    # A missing dot is only noticed on the next line; the line to blame is the one without it.
    "dot.nt": (nt("a", "q", "b") + nt("b", "q", "c")[:-3] + "\n" + nt("c", "q", "d"), 2, "dot"),
    "kb.jsonl": (f'[\n{ENTITY},\n{{"id": \n]\n', 3, "invalid JSON"),
    "entity.ndjson": (f'{ENTITY}\n{{"id": "Q2"}}\n', 2, "cannot convert entity Q2"),
}


@pytest.fixture
def entity_to_quads(monkeypatch):
    """The real Wikidata JSON converter when it exists; else a stand-in with its signature."""
    if importlib.util.find_spec("kg_mcp.loading.wikidata_json") is None:

        def stand_in(entity):
            entity["type"]  # the real one refuses entities without a type
            yield ox.Quad(
                ox.NamedNode("http://www.wikidata.org/entity/" + entity["id"]),
                LABEL,
                ox.Literal(entity["id"]),
            )

        monkeypatch.setitem(
            sys.modules, "kg_mcp.loading.wikidata_json", types.SimpleNamespace(entity_to_quads=stand_in)
        )
    from kg_mcp.loading.wikidata_json import entity_to_quads

    return entity_to_quads


@pytest.mark.parametrize("name", BAD_SOURCES)
def test_bad_line_fails_with_file_and_line_and_keeps_store(small_store, tmp_path, name, entity_to_quads):
    text, line, reason = BAD_SOURCES[name]
    src = tmp_path / name
    src.write_text(text)
    before, meta_before = quads(small_store), meta(small_store)
    with pytest.raises(LoadError) as err:
        load_sources([src], small_store, progress=False)
    assert (err.value.path, err.value.line) == (src, line)
    assert reason in err.value.reason
    assert str(err.value).startswith(f"{src}:{line}: ")
    assert quads(small_store) == before and meta(small_store) == meta_before
    assert leftovers(small_store) == []


@pytest.mark.parametrize("name", BAD_SOURCES)
def test_skip_bad_skips_and_counts(small_store, tmp_path, name, entity_to_quads):
    text, line, reason = BAD_SOURCES[name]
    src = tmp_path / name
    src.write_text(text)
    report = load_sources([src], small_store, skip_bad=True, progress=False)
    assert report.bad_lines == report.sources[0].bad_lines == 1
    [example] = report.bad_line_examples
    assert example.startswith(f"{src}:{line}: ") and reason in example
    assert report.triples > 0
    assert meta(small_store)["loads"][-1]["bad_lines"] == 1


def test_skip_bad_many_bad_lines_in_one_batch(tmp_path):
    src = tmp_path / "many.nt"
    src.write_text("".join(nt(f"s{i}", "p", "o") if i % 3 else "bad line\n" for i in range(3000)))
    report = load_sources([src], tmp_path / "s.store", skip_bad=True, progress=False)
    assert report.bad_lines == 1000 and report.triples == report.store_triples == 2000
    assert [e.split(": ")[0] for e in report.bad_line_examples] == [f"{src}:{n}" for n in (1, 4, 7, 10, 13)]


def test_turtle_error_has_line_and_says_skip_bad_is_line_based(small_store, tmp_path):
    src = tmp_path / "bad.ttl"
    src.write_text('@prefix ex: <http://ex.org/> .\nex:a ex:p ex:b .\n\nex:a ex:p "open .\n')
    before = quads(small_store)
    with pytest.raises(LoadError) as err:
        load_sources([src], small_store, skip_bad=True, progress=False)
    assert (err.value.path, err.value.line) == (src, 4)
    assert "--skip-bad applies only to line-based formats" in str(err.value)
    assert quads(small_store) == before


@pytest.mark.parametrize("suffix, compress", [(".gz", gzip.compress), (".bz2", bz2.compress)])
def test_truncated_archive_fails_midway_and_keeps_store(small_store, tmp_path, suffix, compress):
    lines = "".join(nt(f"s{i}", "p", f"o{i}") for i in range(50_000)).encode()
    src = tmp_path / f"big.nt{suffix}"
    data = compress(lines)
    src.write_bytes(data[: len(data) * 4 // 5])  # bz2 yields nothing until a whole block is in
    before = quads(small_store)
    ok = tmp_path / "ok.nt"
    ok.write_text(nt("n", "p", "m"))
    with pytest.raises(LoadError, match="truncated") as err:
        load_sources([ok, src], small_store, progress=False)
    assert err.value.path == src and 1 < err.value.line < 50_000
    assert quads(small_store) == before
    assert leftovers(small_store) == []


def test_new_store_is_not_created_by_a_failed_load(tmp_path):
    src = tmp_path / "bad.nt"
    src.write_text("nonsense\n")
    with pytest.raises(LoadError):
        load_sources([src], tmp_path / "deep" / "new.store", progress=False)
    assert not (tmp_path / "deep" / "new.store").exists()
    assert leftovers(tmp_path / "deep" / "new.store") == []


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "Ctrl-C"])
def test_killed_mid_load_keeps_store_and_next_load_works(small_store, tmp_path, sig):
    big = tmp_path / "big.nt"
    with open(big, "w") as f:
        f.writelines(
            f'<http://ex.org/s{i % 5000}> <http://ex.org/p{i % 37}> "value number {i}" .\n'
            for i in range(400_000)
        )
    before = quads(small_store)
    # SIGINT as a terminal's Ctrl-C delivers it, even where the test runner ignores it.
    code = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from kg_mcp.loading import load_sources; load_sources([sys.argv[1]], sys.argv[2], progress=False)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(big), str(small_store)], env=env, stderr=subprocess.PIPE
    )
    staging = small_store.parent / f".{small_store.name}.loading-{proc.pid}"
    deadline = time.monotonic() + 15
    while (
        not (staging.is_dir() and any(staging.glob("*.sst")))
        and proc.poll() is None
        and time.monotonic() < deadline
    ):
        time.sleep(0.01)
    time.sleep(0.8)  # well into parsing and inserting (the whole load takes a few seconds)
    assert proc.poll() is None, f"load ended before it could be killed: {proc.stderr.read().decode()[-2000:]}"
    proc.send_signal(sig)
    stderr = proc.communicate(timeout=30)[1].decode()
    assert proc.returncode != 0
    if sig == signal.SIGINT:
        assert "KeyboardInterrupt" in stderr
        assert leftovers(small_store) == []  # an interrupted load cleans up after itself
    else:
        assert staging.is_dir()  # a killed one cannot: its half-done copy stays ...
    assert quads(small_store) == before  # ... but the store was never touched

    src = tmp_path / "next.nt"
    src.write_text(nt("after", "p", "kill"))
    report = load_sources([src], small_store, progress=False)
    assert report.store_triples == len(before) + 1
    assert leftovers(small_store) == []  # the next load cleaned up


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_recover_interrupted_swap(small_store):
    before = quads(small_store)
    old = small_store.parent / f".{small_store.name}.old-{_dead_pid()}"
    # Killed between "store -> old" and "new copy -> store": the store is missing.
    os.rename(small_store, old)
    assert recover_interrupted_swap(small_store) is True
    assert quads(small_store) == before and not old.exists()
    # Killed while deleting the old copy: the store is fine, the leftover goes.
    old.mkdir()
    assert recover_interrupted_swap(small_store) is False
    assert not old.exists() and quads(small_store) == before


def test_concurrent_load_is_refused(small_store, tmp_path):
    import fcntl

    src = tmp_path / "x.nt"
    src.write_text(nt("x", "p", "y"))
    with open(small_store.parent / f".{small_store.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with pytest.raises(LoadError, match="another load"):
            load_sources([src], small_store, progress=False)


# --- Wikidata JSON dumps ----------------------------------------------------------------------


def test_wikidata_json_dump(tmp_path, entity_to_quads):
    dump = data_file("wikidata-sample/wikidata-extra-entities.json")
    src = tmp_path / "latest-all.json.bz2"
    src.write_bytes(bz2.compress(dump.read_bytes()))
    store_dir = tmp_path / "wdjson.store"
    report = load_sources([src], store_dir, progress=False)
    assert report.sources[0].format == "wikidata-json" and report.bad_lines == 0
    entities = [
        json.loads(line.rstrip(","))
        for line in dump.read_text(encoding="utf-8").split("\n")
        if line[:1] == "{"
    ]
    expected = ox.Store()  # stores write xsd:decimal "0.920" as "0.92": compare stored forms
    expected.extend(q for entity in entities for q in entity_to_quads(entity))
    expected = set(expected)
    assert quads(store_dir) == expected
    assert len(entities) == 30 and report.store_triples == len(expected) >= 30
