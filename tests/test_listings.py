"""Listings a model can afford (issue 42): named rows listed and anonymous ones summed up by kind,
a character budget per page, and every listing read to its end through next_cursor.

On published ontologies as PyPI ships them (tests/ontologies.py: Brick 1.4, the LinkML 1.12
metamodel's OWL and SHACL files loaded together) and on MetaQA; every count is asked of rdflib on
the released files or of the store itself in SPARQL, never written here.
"""

from __future__ import annotations

import json
import re
from functools import cache

import pyoxigraph as ox
import pytest
import rdflib
from mcp import Client
from rdflib.namespace import RDFS

from kg_mcp.backends import open_store
from kg_mcp.errors import InvalidInput
from kg_mcp.loading import load_sources
from kg_mcp.server import build_server
from kg_mcp.settings import Settings
from kg_mcp.tools import explore_kg, follow, get_relations, search, verify
from kg_mcp.tools.verify import TripleClaim
from tests.ontologies import ontology_files

LINKML = "https://w3id.org/linkml/"
BRICK = "https://brickschema.org/schema/Brick#"
SETTINGS = Settings()


@cache
def linkml_graph() -> rdflib.Graph:
    graph = rdflib.Graph()
    for path in ontology_files("linkml"):
        graph.parse(path, format="turtle")
    return graph


def store_count(backend, query: str) -> int:
    """A count the store itself gives, in SPARQL."""
    return int(next(iter(backend.store.query(query)))["n"].value)


def named_superclasses(name: str) -> set[str]:
    closure = linkml_graph().transitive_objects(rdflib.URIRef(LINKML + name), RDFS.subClassOf)
    return {str(c) for c in closure if isinstance(c, rdflib.URIRef) and str(c) != LINKML + name}


def table_rows(text: str) -> list[list[str]]:
    """The cells of each row of the text's markdown table (past the header and the rule)."""
    lines = [line for line in text.splitlines() if line.startswith("| ")][1:]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]


# --- named first, anonymous summed up ----------------------------------------------------------------


def test_follow_lists_every_named_superclass_and_sums_up_the_restrictions(ontology_store):
    linkml = ontology_store("linkml")
    out = follow(linkml, SETTINGS, "linkml:SlotDefinition", ["rdfs:subClassOf+"])
    want = named_superclasses("SlotDefinition")
    assert len(want) == 7 and len(out.text) <= 6_000, len(out.text)  # 55,980 characters before
    assert {linkml.vocab.parse(e.entity.id).value for e in out.data.entities} == want
    assert [row[0] for row in table_rows(out.text)] == [e.entity.id for e in out.data.entities]
    anonymous = store_count(linkml, f"SELECT (COUNT(DISTINCT ?a) AS ?n) WHERE {{ <{LINKML}SlotDefinition> "
                                    f"<{RDFS.subClassOf}>+ ?a FILTER(isBlank(?a)) }}")
    restrictions = store_count(linkml, f"SELECT (COUNT(DISTINCT ?a) AS ?n) WHERE {{ <{LINKML}SlotDefinition> "
                                       f"<{RDFS.subClassOf}>+ ?a . ?a a <http://www.w3.org/2002/07/owl#Restriction> }}")
    summed = out.data.anonymous
    assert summed.total == anonymous > 100 and out.data.total == anonymous + 7
    kinds = {k.kind: k for k in summed.kinds}
    assert kinds["owl:Restriction"].count == restrictions and kinds["owl:Restriction"].properties > 1
    assert f"{anonymous:,} anonymous end entities (blank nodes), not listed: owl:Restriction {restrictions:,} (on " in out.text
    # The call the line gives lists them, named ones first, with their content inline.
    assert summed.call == 'follow(entity="linkml:SlotDefinition", path=["rdfs:subClassOf+"], anonymous="list")'
    listed = follow(linkml, SETTINGS, "linkml:SlotDefinition", ["rdfs:subClassOf+"], anonymous="list")
    assert listed.data.anonymous is None and listed.data.total == anonymous + 7
    assert [e.entity.kind for e in listed.data.entities[:7]] == ["iri"] * 7
    assert all(e.entity.kind == "blank" and e.entity.label.startswith(("[ ", "( ")) for e in listed.data.entities[7:])


def test_search_of_a_class_with_restrictions_lists_its_named_superclasses(ontology_store):
    linkml = ontology_store("linkml")
    out = search(linkml, SETTINGS, "linkml:SlotDefinition", "outgoing", ["rdfs:subClassOf"])
    direct = {str(o) for o in linkml_graph().objects(rdflib.URIRef(LINKML + "SlotDefinition"), RDFS.subClassOf)
              if isinstance(o, rdflib.URIRef)}
    assert len(direct) == 2 and len(out.text) <= 8_000, len(out.text)  # 36,338 characters before
    assert {linkml.vocab.parse(r.value.id).value for r in out.data.rows} == direct
    blank = store_count(linkml, f"SELECT (COUNT(?o) AS ?n) WHERE {{ <{LINKML}SlotDefinition> <{RDFS.subClassOf}> ?o "
                                "FILTER(isBlank(?o)) }")
    assert out.data.anonymous.total == blank and out.data.total == 2 and not out.data.next_cursor
    assert 'search(entity="linkml:SlotDefinition", properties_to_filter_for=["rdfs:subClassOf"], anonymous="list")' in out.text


def test_a_call_about_blank_nodes_lists_them(ontology_store):
    """Rows that are all anonymous are listed (the question is about them), and so are those of a blank start."""
    brick = ontology_store("brick")
    shapes = search(brick, SETTINGS, "brick:Temperature_Sensor", properties_to_filter_for=["sh:property"])
    assert shapes.data.rows and all(r.value.kind == "blank" for r in shapes.data.rows) and shapes.data.anonymous is None
    handle = shapes.data.rows[0].value.id
    inside = explore_kg(brick, SETTINGS, handle, ["sh:path", "sh:class"])
    assert inside.data.anonymous is None and {r.relation for r in inside.data.relations} == {"sh:path", "sh:class"}


def test_batched_tables_name_the_entity_on_every_row(metaqa):
    out = search(metaqa, SETTINGS, entities=["kg:Carrie", "kg:Blow_Out"], properties_to_filter_for=["has_genre", "directed_by"])
    rows = table_rows(out.text)
    assert len(rows) == out.data.shown > 2 and all(row[0] in ("kg:Carrie", "kg:Blow_Out") for row in rows)
    assert [row[0] for row in rows] == [r.entity for r in out.data.rows]


def test_follow_says_how_many_entities_had_no_such_edge(metaqa):
    out = follow(metaqa, SETTINGS, "kg:Carrie", ["directed_by", "~directed_by", "has_genre"])
    films = ("SELECT (COUNT(DISTINCT ?f) AS ?n) WHERE { kg:Carrie rel:directed_by ?d . ?f rel:directed_by ?d "
             "FILTER(?f != kg:Carrie) %s }")
    prefixes = "PREFIX kg: <http://kg-mcp.local/entity/> PREFIX rel: <http://kg-mcp.local/relation/> "
    walked = store_count(metaqa, prefixes + films % "")
    without = store_count(metaqa, prefixes + films % "FILTER NOT EXISTS { ?f rel:has_genre ?g }")
    assert 0 < without < walked
    assert f"at hop 3, {without:,} of the {walked:,} entities had no has_genre edge" in out.text
    assert out.data.branches[0].without == [0, 0, without]


# --- pages ------------------------------------------------------------------------------------------------


async def test_every_descendant_of_brick_class_is_read_once_through_next_cursor(ontology_store):
    brick = ontology_store("brick")
    graph = rdflib.Graph().parse(ontology_files("brick")[0], format="turtle")
    want = {str(c) for c in graph.transitive_subjects(RDFS.subClassOf, rdflib.URIRef(BRICK + "Class"))} - {BRICK + "Class"}
    assert len(want) == 1_453
    arguments = {"entity": "brick:Class", "path": ["~rdfs:subClassOf+"]}
    seen, pages, offset = [], 0, 0
    async with Client(build_server(brick, SETTINGS)) as client:
        cursor = None
        while True:
            result = await client.call_tool("follow", {**arguments, **({"cursor": cursor} if cursor else {})})
            data, text = result.structured_content, result.content[0].text
            assert not result.is_error and data["offset"] == offset and "structured_cut" not in data
            structured = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
            assert len(text) <= SETTINGS.max_output_chars and len(structured) <= SETTINGS.max_output_chars
            assert [row[0] for row in table_rows(text)] == [e["entity"]["id"] for e in data["entities"]]
            seen += [e["entity"]["id"] for e in data["entities"]]
            pages, offset, cursor = pages + 1, offset + data["shown"], data["next_cursor"]
            if cursor is None:
                break
            assert text.endswith(f'cursor="{cursor}".') and "of 1,453 shown" in text
        # A cursor is for its own call: another path, another tool, or one edited, is refused in our words.
        first = (await client.call_tool("follow", arguments)).structured_content["next_cursor"]
        for tool, asked in [("follow", {"entity": "brick:Point", "path": ["~rdfs:subClassOf+"], "cursor": first}),
                            ("search", {"entity": "brick:Class", "cursor": first}),
                            ("follow", {**arguments, "cursor": first[:-4] + "AAAA"})]:
            refused = await client.call_tool(tool, asked)
            assert refused.is_error and "cursor" in refused.content[0].text and "Traceback" not in refused.content[0].text
    assert pages > 2 and len(seen) == len(set(seen)) == 1_453
    assert {brick.vocab.parse(s).value for s in seen} == want


def test_a_hubs_rows_are_read_once_through_pages(metaqa):
    """kg:Drama's incoming has_genre edges, thousands, page by page: their union is the store's count."""
    small = Settings(max_output_chars=6_000)
    total = store_count(metaqa, "SELECT (COUNT(*) AS ?n) WHERE { ?f <http://kg-mcp.local/relation/has_genre> "
                                "<http://kg-mcp.local/entity/Drama> }")
    seen, cursor, pages = [], "", 0
    while True:
        out = search(metaqa, small, "kg:Drama", "incoming", ["has_genre"], cursor=cursor)
        assert len(out.text) <= small.max_output_chars and out.data.total == total
        assert len(out.data.rows) == out.data.shown == len(table_rows(out.text))
        seen += [r.value.id for r in out.data.rows]
        pages, cursor = pages + 1, out.data.next_cursor
        if not cursor:
            break
    assert total > 1_000 and pages > total // 1_000 and len(seen) == len(set(seen)) == total


def test_get_relations_and_explore_kg_page_on_too(ontology_store):
    brick = ontology_store("brick")
    small = Settings(max_output_chars=1_000)
    relations, cursor = [], ""
    while True:
        out = get_relations(brick, small, "brick:Point", cursor=cursor)
        relations += [r.relation for r in out.data.relations]
        cursor = out.data.next_cursor
        if not cursor:
            break
    assert relations == [r.relation for r in get_relations(brick, SETTINGS, "brick:Point").data.relations]
    assert len(relations) == out.data.total and out.data.offset > 0
    explored, cursor = {}, ""
    while True:
        out = explore_kg(brick, small, "brick:Point", ["~rdfs:subClassOf", "~rdf:type"], cursor=cursor)
        for r in out.data.relations:
            explored.setdefault(r.relation, []).extend(n.id for n in r.neighbours)
        cursor = out.data.next_cursor
        if not cursor:
            break
    direct = store_count(brick, f"SELECT (COUNT(?c) AS ?n) WHERE {{ ?c <{RDFS.subClassOf}> <{BRICK}Point> FILTER(isIRI(?c)) }}")
    assert len(explored["~rdfs:subClassOf"]) == len(set(explored["~rdfs:subClassOf"])) == direct > 5


def test_a_cursor_from_before_a_reload_is_stale(tmp_path):
    source, more = tmp_path / "a.nt", tmp_path / "b.nt"
    source.write_text("".join(f"<http://example.org/a> <http://example.org/p> <http://example.org/b{i}> .\n" for i in range(300)))
    more.write_text('<http://example.org/a> <http://example.org/p> "new" .\n')
    small = Settings(max_output_chars=1_000)
    asked = {"entity": "<http://example.org/a>", "properties_to_filter_for": ["<http://example.org/p>"]}
    load_sources([source], tmp_path / "store", progress=False)
    kg = open_store(tmp_path / "store", settings=small)
    first = search(kg, small, **asked)
    assert first.data.next_cursor and search(kg, small, **asked, cursor=first.data.next_cursor).data.offset > 0
    kg.close()
    load_sources([more], tmp_path / "store", progress=False)  # another load: the data the cursor read is gone
    kg = open_store(tmp_path / "store", settings=small)
    try:
        with pytest.raises(InvalidInput, match="reloaded"):
            search(kg, small, **asked, cursor=first.data.next_cursor)
    finally:
        kg.close()


# --- the smaller things -------------------------------------------------------------------------------


def test_verify_entails_that_a_class_on_a_subclass_cycle_is_its_own_subclass(ontology_store):
    linkml = ontology_store("linkml")
    graph = linkml_graph()
    rule, level = rdflib.URIRef(LINKML + "ClassRule"), rdflib.URIRef(LINKML + "ClassLevelRule")
    assert (rule, RDFS.subClassOf, level) in graph and (level, RDFS.subClassOf, rule) in graph
    (verdict,) = verify(linkml, SETTINGS, [TripleClaim(subject="linkml:ClassRule", relation="rdfs:subClassOf",
                                                         object="linkml:ClassRule")]).data.claims
    assert verdict.status == "supported"
    assert verdict.hops[0].reason == ("entailed (rdfs:subClassOf chain): linkml:ClassRule → linkml:ClassLevelRule → "
                                      "linkml:ClassRule (rdfs:subClassOf)")


def test_verify_evidence_gives_a_long_values_start_and_how_to_read_it(ontology_store):
    brick = ontology_store("brick")
    graph = rdflib.Graph().parse(ontology_files("brick")[0], format="turtle")
    definition = rdflib.URIRef("http://www.w3.org/2004/02/skos/core#definition")
    subject, longest = max(graph.subject_objects(definition), key=lambda so: len(so[1]))
    entity = brick.vocab.compact(ox.NamedNode(str(subject)))
    out = verify(brick, SETTINGS, [TripleClaim(subject=entity, relation="skos:definition", object="not its definition")])
    reason = out.data.claims[0].hops[0].reason
    assert str(longest)[:100] in reason and f"({len(longest):,} characters)" in reason
    assert f'search(entity="{entity}", properties_to_filter_for=["skos:definition"]) reads them whole' in reason
    assert reason in out.text  # the cell cut it: the whole evidence follows the table


def test_the_instructions_say_how_many_lie_directly_below_a_root(ontology_store):
    from kg_mcp.schema.summary import server_instructions

    linkml = ontology_store("linkml")
    text = server_instructions(linkml, SETTINGS)
    roots = re.findall(r"- `(linkml:\w+)`[^\n]*?: [\d,]+ below by rdfs:subClassOf; directly ([\d,]+)", text)
    assert roots
    for root, count in roots:
        direct = store_count(linkml, f"SELECT (COUNT(DISTINCT ?c) AS ?n) WHERE {{ ?c <{RDFS.subClassOf}> "
                                     f"<{linkml.vocab.parse(root).value}> FILTER(isIRI(?c)) }}")
        assert int(count.replace(",", "")) == direct, root


def test_kgr_search_sums_up_the_triples_to_blank_nodes_and_pages_on(ontology_store):
    from kg_mcp.kg_reasoner.ranking import LexicalRanker
    from kg_mcp.tools.traverse import kgr_search
    from kg_mcp.kg_reasoner.traversal import Tree

    linkml = ontology_store("linkml")
    tree = Tree("what is a slot definition a kind of")
    first = kgr_search(linkml, SETTINGS, tree, LexicalRanker(), "linkml:SlotDefinition", k=5)
    blank = store_count(linkml, f"SELECT (COUNT(*) AS ?n) WHERE {{ {{ <{LINKML}SlotDefinition> ?p ?o FILTER(isBlank(?o)) }} "
                                f"UNION {{ ?o ?p <{LINKML}SlotDefinition> FILTER(isBlank(?o)) }} }}")
    assert first.data.anonymous.total == blank > 100 and first.data.shown == 5
    assert all("blank" not in (t.subject.kind, t.object.kind) for t in first.data.triples)
    assert 'kgr_search(entity="linkml:SlotDefinition", anonymous="list")' in first.text
    again = kgr_search(linkml, SETTINGS, tree, LexicalRanker(), "linkml:SlotDefinition", k=5, cursor=first.data.next_cursor)
    assert again.data.offset == 5 and not {(t.relation, t.object.id) for t in again.data.triples} & {
        (t.relation, t.object.id) for t in first.data.triples}
    # Their kinds are read and said on the first page only, as the other listings do.
    assert first.data.anonymous.kinds and "owl:Restriction" in first.text
    assert again.data.anonymous.total == blank and not again.data.anonymous.kinds and "owl:Restriction" not in again.text
    # The order of the triples is the question's: a cursor issued under another one is refused.
    with pytest.raises(InvalidInput, match="another question"):
        kgr_search(linkml, SETTINGS, Tree("which slots have a range"), LexicalRanker(), "linkml:SlotDefinition", k=5,
                   cursor=first.data.next_cursor)


def test_a_batched_listing_past_the_count_cap_skips_and_repeats_no_row(tmp_path):
    """Without a hub record, an entity's neighbours are counted up to count_cap ("at least"); the
    pages of a batched search must then stop that entity's rows where its count does, or the next
    entity's rows would be shifted past the cursor (skipped) or read twice."""
    source = tmp_path / "a.nt"
    with open(source, "w") as f:
        for i in range(250):
            f.write(f"<http://example.org/a> <http://example.org/p> <http://example.org/x{i}> .\n")
        for i in range(5):
            f.write(f"<http://example.org/b> <http://example.org/p> <http://example.org/y{i}> .\n")
    load_sources([source], tmp_path / "store", progress=False)
    # The first read (search_p rows) does not hold them all, so the counts decide the pages.
    small = Settings(count_cap=100, search_p=40, max_output_chars=2_500)
    kg = open_store(tmp_path / "store", settings=small)
    asked = {"entities": ["<http://example.org/a>", "<http://example.org/b>"],
             "properties_to_filter_for": ["<http://example.org/p>"]}
    seen, cursor, pages = [], "", 0
    try:
        while True:
            out = search(kg, small, **asked, cursor=cursor)
            assert ": at least 105 rows." in out.text.splitlines()[0]
            assert not out.data.next_cursor or " of at least 105 shown." in out.text
            seen += [(row.entity, row.value.id) for row in out.data.rows]
            pages, cursor = pages + 1, out.data.next_cursor
            if not cursor:
                break
    finally:
        kg.close()
    assert pages > 2 and len(seen) == len(set(seen))
    assert {v for e, v in seen if e.endswith("b>")} == {f"<http://example.org/y{i}>" for i in range(5)}
    assert len([e for e, _ in seen if e.endswith("a>")]) == 100  # as far as its count goes


def test_later_pages_of_a_batch_do_not_sample_anonymous_neighbours_again(tmp_path):
    """The kinds of the anonymous neighbours summed up are read for the first page only; a later page
    (whose offset falls before an entity's rows, so the entity is read from its start) only says
    how many."""
    from kg_mcp.backends.base import Values
    from kg_mcp.tools.pages import CLASSIFIED

    rdf_type = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
    source = tmp_path / "a.nt"
    with open(source, "w") as f:
        for i in range(120):
            f.write(f"<http://example.org/a> <http://example.org/p> <http://example.org/x{i}> .\n")
        f.write("<http://example.org/b> <http://example.org/p> <http://example.org/y> .\n")  # named ones: listed
        for i in range(300):
            f.write(f"<http://example.org/b> <http://example.org/p> _:n{i} .\n_:n{i} <{rdf_type}> <http://example.org/Kind> .\n")
    load_sources([source], tmp_path / "store", progress=False)
    small = Settings(search_p=50, max_output_chars=2_500)  # b's first read does not hold its rows
    kg = open_store(tmp_path / "store", settings=small)
    samples = []
    read = kg.neighbours

    def counted(node, way, predicates, limit, **kw):  # a spy on the reads, which still happen
        if kw.get("values") is Values.ANONYMOUS and limit == CLASSIFIED:
            samples.append(node)
        return read(node, way, predicates, limit, **kw)

    kg.neighbours = counted
    asked = {"entities": ["<http://example.org/a>", "<http://example.org/b>"],
             "properties_to_filter_for": ["<http://example.org/p>"]}
    try:
        first = search(kg, small, **asked)
        assert len(samples) == 1 and "300 anonymous" in first.text
        later = search(kg, small, **asked, cursor=first.data.next_cursor)
        assert later.data.offset > 0 and len(samples) == 1 and "300 anonymous" in later.text
    finally:
        kg.close()
