"""Blank nodes scoped to their document: one file's `_:b0` is one node, and no other file's or load's.

Every format is loaded twice in one load (two files writing the same label) and once more in a
second load: three nodes, each holding its own file's two edges. The metamodel of LinkML (two
Turtle files that both label their nodes `_:c14n0` ...) must hold rdflib's count of blank nodes.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyoxigraph as ox
import pytest
import rdflib

from kg_mcp.loading import load_sources
from kg_mcp.loading.rdf_files import _BATCH_BYTES
from tests.ontologies import ontology_file

REPO = Path(__file__).resolve().parents[1]
EX = "http://ex.org/"

# One document per format: the blank node `b0` with two edges, `p` from a named node and `q` to a literal.
DOCUMENTS = {
    "nt": f'<{EX}s> <{EX}p> _:b0 .\n_:b0 <{EX}q> "v" .\n',
    "nq": f'<{EX}s> <{EX}p> _:b0 <{EX}g> .\n_:b0 <{EX}q> "v" <{EX}g> .\n',
    "ttl": f'@prefix ex: <{EX}> .\nex:s ex:p _:b0 .\n_:b0 ex:q "v" .\n',
    "trig": f'@prefix ex: <{EX}> .\nex:g {{ ex:s ex:p _:b0 . _:b0 ex:q "v" . }}\n',
    "n3": f'@prefix ex: <{EX}> .\nex:s ex:p _:b0 .\n_:b0 ex:q "v" .\n',
    "rdf": (
        '<?xml version="1.0"?>\n<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" '
        f'xmlns:ex="{EX}">\n<rdf:Description rdf:about="{EX}s"><ex:p rdf:nodeID="b0"/></rdf:Description>\n'
        '<rdf:Description rdf:nodeID="b0"><ex:q>v</ex:q></rdf:Description>\n</rdf:RDF>\n'
    ),
    "jsonld": json.dumps({"@id": f"{EX}s", f"{EX}p": {"@id": "_:b0"}, "@included": [{"@id": "_:b0", f"{EX}q": "v"}]}),
    "ofn": (
        f"Prefix(ex:=<{EX}>)\nOntology(<{EX}o>\nDeclaration(ObjectProperty(ex:p))\nDeclaration(DataProperty(ex:q))\n"
        'ObjectPropertyAssertion(ex:p ex:s _:b0)\nDataPropertyAssertion(ex:q _:b0 "v")\n)\n'
    ),
    "owx": (
        f'<?xml version="1.0"?>\n<Ontology xmlns="http://www.w3.org/2002/07/owl#" ontologyIRI="{EX}o">\n'
        f'<Declaration><ObjectProperty IRI="{EX}p"/></Declaration>\n<Declaration><DataProperty IRI="{EX}q"/></Declaration>\n'
        f'<ObjectPropertyAssertion><ObjectProperty IRI="{EX}p"/><NamedIndividual IRI="{EX}s"/>'
        '<AnonymousIndividual nodeID="b0"/></ObjectPropertyAssertion>\n'
        f'<DataPropertyAssertion><DataProperty IRI="{EX}q"/><AnonymousIndividual nodeID="b0"/>'
        "<Literal>v</Literal></DataPropertyAssertion>\n</Ontology>\n"
    ),
}
# name -> (file suffix, its text, load options); .nt.gz goes through the bulk loader as a stream,
# .nt with skip_bad through the batches of kg_mcp.loading.rdf_files; compressed files as any other
CASES = {
    "nt": (".nt", DOCUMENTS["nt"], {}),
    "nt.gz": (".nt.gz", DOCUMENTS["nt"], {}),
    "nt --skip-bad": (".nt", DOCUMENTS["nt"] + "not a triple\n", {"skip_bad": True}),
    "nq": (".nq", DOCUMENTS["nq"], {}),
    "ttl": (".ttl", DOCUMENTS["ttl"], {}),
    "trig": (".trig", DOCUMENTS["trig"], {}),
    "rdfxml": (".rdf", DOCUMENTS["rdf"], {}),
    "n3": (".n3", DOCUMENTS["n3"], {}),
    "jsonld": (".jsonld", DOCUMENTS["jsonld"], {}),
    "jsonld.gz": (".jsonld.gz", DOCUMENTS["jsonld"], {}),
    "ofn": (".ofn", DOCUMENTS["ofn"], {}),
    "owx": (".owx", DOCUMENTS["owx"], {}),
    "owx.gz": (".owx.gz", DOCUMENTS["owx"], {}),
}


def write(path: Path, text: str) -> Path:
    path.write_bytes(gzip.compress(text.encode()) if path.suffix == ".gz" else text.encode())
    return path


def blank_nodes(store_dir: Path) -> dict[ox.BlankNode, set[str]]:
    """Each blank node of the store with the predicates of its edges, either direction."""
    store = ox.Store.read_only(str(store_dir))
    try:
        found: dict[ox.BlankNode, set[str]] = {}
        for quad in store:
            for end in (quad.subject, quad.object):
                if isinstance(end, ox.BlankNode):
                    found.setdefault(end, set()).add(quad.predicate.value.removeprefix(EX))
        return found
    finally:
        del store


@pytest.mark.parametrize("case", CASES)
def test_each_file_has_its_own_blank_nodes_in_one_load_and_across_loads(tmp_path, case):
    suffix, text, options = CASES[case]
    first, second, third = (write(tmp_path / f"{name}{suffix}", text) for name in ("one", "two", "three"))
    store_dir = tmp_path / "kb.store"
    load_sources([first, second], store_dir, progress=False, name_index=False, optimize=False, **options)
    nodes = blank_nodes(store_dir)
    assert len(nodes) == 2 and all({"p", "q"} <= edges for edges in nodes.values()), nodes
    load_sources([third], store_dir, progress=False, name_index=False, optimize=False, **options)
    again = blank_nodes(store_dir)
    assert len(again) == 3 and set(nodes) < set(again), again  # the earlier nodes keep their ids


@pytest.mark.parametrize("options", [{}, {"skip_bad": True}], ids=["bulk loader", "batches"])
def test_a_label_is_one_node_throughout_a_long_n_triples_file(tmp_path, options):
    # Past one batch of kg_mcp.loading.rdf_files, and long enough for pyoxigraph to parse in
    # parallel slices where there are cores for it: `_:b0` opens and closes the file.
    line = f'<{EX}s{{}}> <{EX}r> "{"x" * 60}" .\n'
    filler = "".join(line.format(i) for i in range(2 * _BATCH_BYTES // len(line)))
    source = write(tmp_path / "long.nt", f"<{EX}s> <{EX}p> _:b0 .\n{filler}_:b0 <{EX}q> \"v\" .\n")
    load_sources([source], tmp_path / "kb.store", progress=False, name_index=False, optimize=False, **options)
    nodes = blank_nodes(tmp_path / "kb.store")
    assert list(nodes.values()) == [{"p", "q"}]


def rdflib_blank_subjects(path: Path) -> int:
    graph = rdflib.Graph().parse(path, format="turtle")
    return len({s for s in graph.subjects() if isinstance(s, rdflib.BNode)})


def stored_blank_subjects(store_dir: Path) -> int:
    store = ox.Store.read_only(str(store_dir))
    try:
        query = "SELECT (COUNT(DISTINCT ?b) AS ?n) WHERE { ?b ?p ?o FILTER(isBlank(?b)) }"
        return int(next(iter(store.query(query)))["n"].value)
    finally:
        del store


def test_linkml_metamodel_keeps_rdflibs_blank_nodes_in_one_load_and_in_two(tmp_path):
    owl, shacl = ontology_file("linkml-owl"), ontology_file("linkml-shacl")
    expected = rdflib_blank_subjects(owl) + rdflib_blank_subjects(shacl)  # 2,504 in linkml-model 1.12.0
    load_sources([owl, shacl], tmp_path / "one.store", progress=False, name_index=False, optimize=False)
    assert stored_blank_subjects(tmp_path / "one.store") == expected
    load_sources([owl], tmp_path / "two.store", progress=False, name_index=False, optimize=False)
    load_sources([shacl], tmp_path / "two.store", progress=False, name_index=False, optimize=False)
    assert stored_blank_subjects(tmp_path / "two.store") == expected


def test_wikidata_json_blank_nodes_stay_idempotent(tmp_path):
    # Q22002395 has two unknown authors (somevalue): blank nodes named from what they stand for.
    dump = REPO.parent / "shared" / "data" / "wikidata-sample" / "wikidata-extra-entities.json"
    if not dump.is_file():
        pytest.skip(f"benchmark data not available: {dump}")
    line = next(line for line in dump.read_text(encoding="utf-8").splitlines() if '"id":"Q22002395"' in line.replace(" ", ""))
    source = write(tmp_path / "entity.ndjson", line.strip().rstrip(",") + "\n")
    store_dir = tmp_path / "kb.store"
    load_sources([source], store_dir, progress=False, name_index=False)
    once = blank_nodes(store_dir)
    load_sources([source], store_dir, progress=False, name_index=False)
    assert len(once) >= 2 and blank_nodes(store_dir) == once


def test_the_scan_for_blank_nodes_finds_them_across_its_chunks(tmp_path, monkeypatch):
    """N-Triples without `_:` are handed to pyoxigraph's parallel parser; the scan that decides it
    reads the file in chunks, and a `_:` cut by a chunk's end is still found."""
    from kg_mcp.loading import blank_labels

    monkeypatch.setattr(blank_labels, "_SCAN_CHUNK", 8)
    plain, cut, empty = tmp_path / "plain.nt", tmp_path / "cut.nt", tmp_path / "empty.nt"
    plain.write_bytes(b"<http://e/a> <http://e/p> <http://e/b> .\n" * 3)
    cut.write_bytes(b"<http://e/a> <http://e/p> _:b0 .\n")
    empty.write_bytes(b"")
    assert [blank_labels.may_hold_blank_nodes(p) for p in (plain, cut, empty)] == [False, True, False]
    for start in range(0, 9):  # a `_:` at every place against the chunks' ends
        shifted = tmp_path / f"shifted{start}.nt"
        shifted.write_bytes(b" " * start + b"<http://e/a> <http://e/p> _:b0 .\n")
        assert blank_labels.may_hold_blank_nodes(shifted)
