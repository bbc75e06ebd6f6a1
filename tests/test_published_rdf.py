"""Blank nodes, lists, transitive steps and whole values on published ontologies as users get them.

Each ontology is a released file from a PyPI package (tests/ontologies.py), loaded with
`kg-mcp load`'s loader; every expected answer is computed by rdflib's SPARQL on the same file.
"""

from __future__ import annotations

import re
from functools import cache

import pyoxigraph as ox
import pytest
import rdflib
from mcp import Client
from rdflib.collection import Collection

from kg_mcp.errors import InvalidInput
from kg_mcp.server import build_server
from kg_mcp.settings import Settings
from kg_mcp.tools import explore_kg, follow, get_relations, search, verify
from kg_mcp.tools.traverse import kgr_search
from kg_mcp.kg_reasoner.ranking import LexicalRanker
from kg_mcp.tools.verify import TripleClaim
from kg_mcp.kg_reasoner.traversal import Tree
from tests.ontologies import ontology_file

SH = rdflib.Namespace("http://www.w3.org/ns/shacl#")
BRICK = "https://brickschema.org/schema/Brick#"
SETTINGS = Settings()


@cache
def graph(name: str) -> rdflib.Graph:
    g = rdflib.Graph()
    path = ontology_file(name)
    g.parse(path, format="nt" if path.suffix == ".nt" else "turtle")
    return g


def compact(backend, term) -> str:
    return backend.vocab.compact(ox.NamedNode(str(term)))


def ends(out) -> list:
    return [e.entity for e in out.data.entities]


def named_ends(backend, out) -> set[str]:
    return {e.id for e in ends(out) if e.kind == "iri"}


# --- blank nodes: shown, and walked through ----------------------------------------------------------
def test_shape_properties_are_reached_through_follow(ontology_store):
    """sh:property then sh:class through the shapes' blank nodes equals rdflib's sh:property/sh:class."""
    brick, g = ontology_store("brick"), graph("brick")
    rows = g.query("SELECT ?c (COUNT(?x) AS ?n) WHERE { ?c sh:property ?s . FILTER(isIRI(?c) && isBlank(?s)) ?s sh:class ?x } "
                   "GROUP BY ?c ORDER BY DESC(?n) ?c LIMIT 25", initNs={"sh": SH})
    classes = [r.c for r in rows]
    assert len(classes) == 25
    for c in classes:
        found = [x for s in g.objects(c, SH.property) for x in g.objects(s, SH["class"])]
        want = {compact(brick, x) for x in found if isinstance(x, rdflib.URIRef)}
        out = follow(brick, SETTINGS, entity=compact(brick, c), path=["sh:property", "sh:class"], exclude_through="none")
        assert named_ends(brick, out) == want, c
        assert sum(e.kind == "blank" for e in ends(out)) == len({x for x in found if isinstance(x, rdflib.BNode)})
        assert out.data.complete


def test_blank_nodes_show_their_content_inline(ontology_store):
    brick = ontology_store("brick")
    out = search(brick, SETTINGS, entity="brick:Temperature_Sensor", anonymous="list")
    shape = next(r for r in out.data.rows if r.property == "sh:property")
    assert shape.value.kind == "blank" and shape.value.id.startswith("_:")
    assert shape.value.label.startswith("[ ") and "sh:path brick:lastKnownValue" in shape.value.label
    assert "sh:class rec:TemperatureObservation" in shape.value.label and "sh:maxCount 1" in shape.value.label
    row = next(line for line in out.text.splitlines() if shape.value.id in line)
    assert "sh:path brick:lastKnownValue" in row


@pytest.mark.parametrize("name", ["shacl-shacl", "brick"])
def test_lists_are_shown_as_their_items_in_order(ontology_store, name):
    """Every list of IRIs (sh:in, sh:or, owl:unionOf, ...) reads `( a b c )` in rdflib's Collection
    order: its head cell is among the blank nodes whose rdf:first is the first item."""
    backend, g = ontology_store(name), graph(name)
    heads = [h for h in g.subjects(rdflib.RDF.first, None) if (None, rdflib.RDF.rest, h) not in g]
    lists = [items for h in heads if (items := list(Collection(g, h))) and all(isinstance(i, rdflib.URIRef) for i in items)]
    assert lists
    for items in sorted(lists, key=str)[:40]:
        first = compact(backend, items[0])
        out = search(backend, SETTINGS, entity=first, direction="incoming", properties_to_filter_for=["rdf:first"])
        shown = [r.value.label for r in out.data.rows if r.value.kind == "blank"]
        written = " ".join(compact(backend, i) for i in items[:25])
        more = f" … {len(items) - 25} more items" if len(items) > 25 else ""
        assert f"( {written}{more} )" in shown, (items, shown)


def test_every_tool_takes_a_blank_node_handle_back(ontology_store):
    brick = ontology_store("brick")
    out = search(brick, SETTINGS, entity="brick:Temperature_Sensor", properties_to_filter_for=["sh:property"])
    handle = out.data.rows[0].value.id
    assert handle.startswith("_:")
    assert "sh:path" in {r.property for r in search(brick, SETTINGS, entity=handle).data.rows}
    assert "~sh:property" in {r.relation for r in get_relations(brick, SETTINGS, handle).data.relations}
    explored = explore_kg(brick, SETTINGS, entity=handle, relations=["sh:path"])
    assert [n.id for n in explored.data.relations[0].neighbours] == ["brick:lastKnownValue"]
    assert named_ends(brick, follow(brick, SETTINGS, entity=handle, path=["~sh:property"])) == {"brick:Temperature_Sensor"}
    claims = [TripleClaim(subject=handle, relation="sh:path", object="brick:lastKnownValue"),
              TripleClaim(subject="brick:Temperature_Sensor", relation="sh:property", object=handle)]
    assert [v.status for v in verify(brick, SETTINGS, claims).data.claims] == ["supported", "supported"]
    triples = kgr_search(brick, SETTINGS, Tree(), LexicalRanker(), entity=handle).data.triples
    assert {t.relation for t in triples} >= {"sh:path", "sh:class", "sh:property"}


async def test_handles_printed_by_the_server_are_taken_back_through_it(ontology_store):
    brick = ontology_store("brick")
    async with Client(build_server(brick, SETTINGS)) as client:
        first = await client.call_tool("search", {"entity": "brick:Temperature_Sensor", "anonymous": "list"})
        handles = set(re.findall(r"_:[0-9a-f]{32}", first.content[0].text))
        assert handles
        for handle in sorted(handles):
            for tool, args in [("search", {"entity": handle}), ("get_relations", {"entity": handle}),
                               ("follow", {"entity": handle, "path": ["~sh:rule"]}),
                               ("kgr_search", {"entity": handle, "session": "t"})]:
                result = await client.call_tool(tool, args)
                assert not result.is_error, (tool, handle, result.content[0].text)


def test_blank_rows_never_push_named_rows_out(ontology_store):
    """Temperature_Sensor has 3 sh:rule blank nodes read before its one rdfs:subClassOf: a limit of 1 shows the named one."""
    brick = ontology_store("brick")
    asked = {"entity": "brick:Temperature_Sensor", "properties_to_filter_for": ["sh:rule", "rdfs:subClassOf"], "limit": 1}
    out = search(brick, SETTINGS, **asked)  # the blank nodes summed up: the one named row is the listing
    assert [(r.property, r.value.id) for r in out.data.rows] == [("rdfs:subClassOf", "brick:Sensor")]
    assert out.data.total == 1 and not out.data.truncated and out.data.anonymous.total == 3
    out = search(brick, SETTINGS, **asked, anonymous="list")  # listed, after the named one
    assert [(r.property, r.value.id) for r in out.data.rows] == [("rdfs:subClassOf", "brick:Sensor")]
    assert out.data.total == 4 and out.data.truncated
    named = [r for r in search(brick, SETTINGS, entity="brick:Temperature_Sensor", limit=8).data.rows]
    assert all(r.value.kind != "blank" for r in named)


# --- transitive steps -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "start"),
    [("brick", "brick:Temperature_Sensor"), ("brick", "brick:Air_Temperature_Sensor"), ("brick", "brick:Chiller"),
     ("schema.org", "Hospital"), ("schema.org", "MedicalOrganization"), ("schema.org", "CreativeWork")],
)
def test_subclass_closures_equal_rdflib(ontology_store, name, start):
    backend, g = ontology_store(name), graph(name)
    node = rdflib.URIRef(backend.vocab.parse(start).value if ":" in start else f"https://schema.org/{start}")
    start = compact(backend, node)
    rdfs = {"rdfs": rdflib.RDFS}
    for step, query in [("rdfs:subClassOf+", "SELECT ?x WHERE { ?c rdfs:subClassOf+ ?x }"),
                        ("~rdfs:subClassOf+", "SELECT ?x WHERE { ?x rdfs:subClassOf+ ?c }")]:
        found = [r.x for r in g.query(query, initNs=rdfs, initBindings={"c": node}) if r.x != node]
        out = follow(backend, SETTINGS, entity=start, path=[step], anonymous="list")
        reached, page = ends(out), out
        while page.data.next_cursor:  # a long closure comes in pages
            page = follow(backend, SETTINGS, entity=start, path=[step], anonymous="list", cursor=page.data.next_cursor)
            reached += ends(page)
        want = {compact(backend, x) for x in found if isinstance(x, rdflib.URIRef)}
        assert {e.id for e in reached if e.kind == "iri"} == want, step
        assert sum(1 for e in reached if e.kind == "blank") == sum(1 for x in found if isinstance(x, rdflib.BNode))
        depths = out.data.branches[0].depths[0]
        assert sum(depths) == out.data.total == len(set(found))


def test_zero_or_more_keeps_the_start_when_asked(ontology_store):
    schema = ontology_store("schema.org")
    hospital = compact(schema, "https://schema.org/Hospital")
    plus = named_ends(schema, follow(schema, SETTINGS, entity=hospital, path=["rdfs:subClassOf+"]))
    star = follow(schema, SETTINGS, entity=hospital, path=["rdfs:subClassOf*"], exclude_through="none")
    assert named_ends(schema, star) == plus | {hospital}
    assert "rdfs:subClassOf*" in star.text


def test_list_items_through_a_transitive_step(ontology_store):
    """The members of every sh:in list of SHACL's own shapes: sh:property, sh:in, rdf:rest*, rdf:first."""
    backend, g = ontology_store("shacl-shacl"), graph("shacl-shacl")
    shape = rdflib.URIRef("http://www.w3.org/ns/shacl-shacl#ShapeShape")
    want = {compact(backend, i) if isinstance(i, rdflib.URIRef) else str(i)
            for s in g.objects(shape, SH.property) for head in g.objects(s, SH["in"]) for i in Collection(g, head)}
    out = follow(backend, SETTINGS, entity="shsh:ShapeShape", path=["sh:property", "sh:in", "rdf:rest*", "rdf:first"])
    assert {e.id for e in ends(out)} == want


# --- whole values --------------------------------------------------------------------------------
def test_a_long_definition_is_cut_with_its_length_and_read_whole(ontology_store):
    schema, g = ontology_store("schema.org"), graph("schema.org")
    subject, text = max(((s, str(o)) for s, o in g.subject_objects(rdflib.RDFS.comment) if isinstance(s, rdflib.URIRef)),
                        key=lambda pair: len(pair[1]))
    assert len(text) > 1000
    entity = compact(schema, subject)
    cut = search(schema, SETTINGS, entity=entity)
    assert f"of {len(text):,} chars]" in cut.text and "properties_to_filter_for" in cut.text.splitlines()[-1]
    whole = search(schema, SETTINGS, entity=entity, properties_to_filter_for=["rdfs:comment"])
    assert text in whole.text
    (row,) = whole.data.rows
    assert row.value.id == text and row.value.length is None


def test_line_breaks_survive(ontology_store):
    schema, g = ontology_store("schema.org"), graph("schema.org")
    subject, text = next((s, str(o)) for s, o in sorted(g.subject_objects(rdflib.RDFS.comment))
                         if 0 < str(o).find("\n") < 100 and isinstance(s, rdflib.URIRef))
    out = search(schema, SETTINGS, entity=compact(schema, subject), properties_to_filter_for=["rdfs:comment"])
    first_line = text.split("\n")[0]
    row = next(line for line in out.text.splitlines() if line.startswith("| rdfs:comment"))
    assert first_line[:40].replace("|", "\\|") in row and "\\n" in row  # escaped visibly inside the table
    if len(text) > SETTINGS.max_cell_chars:
        assert text in out.text  # kept as they are in the whole value below it


# --- endpoints ------------------------------------------------------------------------------------
SHSH = "http://www.w3.org/ns/shacl-shacl#"


@pytest.fixture(scope="module")
def shapes_nt(ontology_store, tmp_path_factory):
    """SHACL's shapes and vocabulary as one N-Triples file, for the engines to load."""
    from tests.conftest import store_as_ntriples

    folder = tmp_path_factory.mktemp("shapes-nt")
    parts = [store_as_ntriples(ontology_store(n).path, folder / f"{n}.nt").read_bytes() for n in ("shacl-shacl", "shacl")]
    target = folder / "shapes.nt"
    target.write_bytes(b"".join(parts))
    return target


def iris(out) -> set[str]:
    return {e.id for e in ends(out)}


@pytest.mark.parametrize("engine", ["oxigraph", "virtuoso"])
def test_endpoints_name_their_blank_nodes_and_walk_through_them(engine, engine_endpoints, shapes_nt, ontology_store):
    from kg_mcp.backends import open_endpoint

    local = ontology_store("shacl-shacl")
    backend = open_endpoint(engine_endpoints(engine, "shapes", shapes_nt), settings=SETTINGS)
    try:
        out = search(backend, SETTINGS, entity=f"<{SHSH}ListNodeShape>", anonymous="list")
        (shape,) = [r.value for r in out.data.rows if r.value.kind == "blank"]
        assert shape.id.startswith("_:") and shape.label.startswith("( [ ") and shape.label.endswith("] )")
        assert backend.blank_form  # the engine's way, found by the probe
        rows = search(backend, SETTINGS, entity=shape.id).data.rows
        assert {r.property for r in rows} == {"rdf:first", "rdf:rest"}
        relations = {r.relation for r in get_relations(backend, SETTINGS, shape.id).data.relations}
        assert {"rdf:first", "rdf:rest"} < relations and any(r.startswith("~") and r.endswith("or") for r in relations)
        claim = TripleClaim(subject=f"<{SHSH}ListNodeShape>", relation="<http://www.w3.org/ns/shacl#or>", object=shape.id)
        assert verify(backend, SETTINGS, [claim]).data.claims[0].status == "supported"
        path = ["<http://www.w3.org/ns/shacl#property>", "<http://www.w3.org/ns/shacl#in>",
                "<http://www.w3.org/1999/02/22-rdf-syntax-ns#rest>*", "<http://www.w3.org/1999/02/22-rdf-syntax-ns#first>"]
        there = follow(backend, SETTINGS, entity=f"<{SHSH}ShapeShape>", path=path)
        here = follow(local, SETTINGS, entity="shsh:ShapeShape", path=["sh:property", "sh:in", "rdf:rest*", "rdf:first"])
        named = {backend.vocab.parse(i).value for i in iris(there) if backend.vocab.parse(i) is not None}
        assert named == {local.vocab.parse(i).value for i in iris(here) if local.vocab.parse(i) is not None}
        assert len(named) == 6
    finally:
        backend.close()


@pytest.mark.parametrize("engine", ["oxigraph", "virtuoso"])
def test_transitive_steps_on_endpoints_equal_rdflib(engine, engine_endpoints, shapes_nt):
    from kg_mcp.backends import open_endpoint

    g = graph("shacl")
    backend = open_endpoint(engine_endpoints(engine, "shapes", shapes_nt), settings=SETTINGS)
    try:
        for start in sorted({o for o in g.objects(None, rdflib.RDFS.subClassOf) if isinstance(o, rdflib.URIRef)})[:6]:
            want = {str(x) for x in g.transitive_subjects(rdflib.RDFS.subClassOf, start)} - {str(start)}
            out = follow(backend, SETTINGS, entity=f"<{start}>", path=["~<http://www.w3.org/2000/01/rdf-schema#subClassOf>+"])
            assert {backend.vocab.parse(i).value for i in iris(out)} == want, start
            assert sum(out.data.branches[0].depths[0]) == len(want)
    finally:
        backend.close()


def test_an_endpoint_without_a_way_to_name_blank_nodes_prints_no_handle(engine_endpoints, shapes_nt, monkeypatch):
    """Were no form to work (as on an engine that follows the standard's BNODE), no handle is shown."""
    from kg_mcp.backends import blank_nodes, open_endpoint

    monkeypatch.setattr(blank_nodes, "ENGINE_FORMS", {})
    backend = open_endpoint(engine_endpoints("oxigraph", "shapes", shapes_nt), settings=SETTINGS)
    try:
        out = search(backend, SETTINGS, entity=f"<{SHSH}ListNodeShape>", anonymous="list")
        (shape,) = [r.value for r in out.data.rows if r.value.kind == "blank"]
        assert shape.id == "" and "_:" not in out.text and "no way to read it" in out.text
        with pytest.raises(InvalidInput, match="no way to name a blank node"):
            search(backend, SETTINGS, entity="_:b0")
    finally:
        backend.close()


def test_the_instructions_name_transitive_steps_only_where_there_is_a_hierarchy(ontology_store):
    from kg_mcp.schema.summary import server_instructions

    assert "`rdfs:subClassOf+`" in server_instructions(ontology_store("brick"), SETTINGS)
    assert "+`" not in server_instructions(ontology_store("shacl-shacl"), SETTINGS)


def test_a_stores_blank_node_ids_outlive_the_server(ontology_store):
    """Handles are the store's own ids: a store opened again (a new server on it) takes the old ones."""
    from kg_mcp.backends import open_store

    brick = ontology_store("brick")
    handle = search(brick, SETTINGS, entity="brick:Temperature_Sensor", properties_to_filter_for=["sh:property"]).data.rows[0].value.id
    again = open_store(brick.path)
    try:
        assert {r.value.id for r in search(again, SETTINGS, entity=handle).data.rows} >= {"brick:lastKnownValue"}
    finally:
        again.close()
