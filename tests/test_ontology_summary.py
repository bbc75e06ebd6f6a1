"""The server instructions on an ontology as users get it (Brick 1.4 from its PyPI package): its kinds
of subjects, hierarchy roots and own relations first, the OWL/SHACL/RDFS machinery in one line, ids
of its own, no vocabulary term as a hub, and one count of entities and relations in the
instructions, kg://stats and `kg-mcp info`; every figure expected here is read from the file by rdflib."""

from __future__ import annotations

import json
import re
from functools import cache

import rdflib
from click.testing import CliRunner
from mcp import Client

from kg_mcp.agents.evaluation.tokens import count_tokens
from kg_mcp.cli import main
from kg_mcp.schema.census import Census, RelationUse
from kg_mcp.schema.summary import summary_text
from kg_mcp.server import build_server
from kg_mcp.settings import Settings
from tests.ontologies import ontology_file

RDFS = rdflib.RDFS
BRICK = "https://brickschema.org/schema/Brick#"


@cache
def brick_graph() -> rdflib.Graph:
    g = rdflib.Graph()
    g.parse(ontology_file("brick"), format="turtle")
    return g


async def test_an_ontology_is_summed_up_as_one(ontology_store, tmp_path):
    brick, g = ontology_store("brick"), brick_graph()
    async with Client(build_server(brick, brick.settings)) as client:
        instructions = client.instructions or ""
        stats = json.loads((await client.read_resource("kg://stats")).contents[0].text)
    summary = instructions[instructions.index("## This knowledge graph"):]
    named = {s for s in g.subjects() if isinstance(s, rdflib.URIRef)}
    predicates = set(g.predicates())
    # one count everywhere, and it is the file's
    assert stats["entities"] == len(named) and stats["relations"] == len(predicates)
    assert f"about {len(named):,} entities (named subjects)" in summary and f"in {len(predicates):,} relations" in summary
    info = CliRunner().invoke(main, ["info", "--store", brick.path])
    assert f"entities: {len(named):,}" in info.output and f"relations: {len(predicates):,}" in info.output
    # an ontology: its kinds, its roots with what lies below them (rdflib's closure), its own relations
    assert "It is an ontology" in summary and "`owl:Class`" in summary
    below = {s for s in g.transitive_subjects(RDFS.subClassOf, rdflib.URIRef(BRICK + "Entity"))} - {rdflib.URIRef(BRICK + "Entity")}
    direct = {s for s in g.subjects(RDFS.subClassOf, rdflib.URIRef(BRICK + "Entity")) if isinstance(s, rdflib.URIRef)}
    assert f"- `brick:Entity` (Entity): {len(below):,} below by rdfs:subClassOf; directly {len(direct):,}" in summary
    machinery = re.search(r"OWL, SHACL and RDFS machinery: (\d+) relations", summary)
    assert machinery and "`rdf:type`" in summary.split("OWL, SHACL and RDFS machinery")[1].split("\n")[0]
    relations = summary.split("Relations (its own relations and hierarchies")[1]
    assert "- `brick:hasAssociatedTag`" in relations and "- `rdf:type`" not in relations and "- `sh:rule`" not in relations
    assert "`skos:definition`" in summary and "`rdfs:label`" in summary  # where names and definitions are
    # ids and hubs of its own: no SHACL keyword, no id of a KG that is not there
    hubs = summary.split("Hubs (")[1]
    assert "sh:this" not in hubs and "sh:NodeShape" not in hubs and "- `tag:Point` (Point)" in hubs
    assert re.search(r"Ids look like `brick:\w+`", summary)
    assert "wd:Q42" not in instructions and "m.0v1xv" not in instructions
    assert count_tokens(instructions) <= 2000


def test_a_few_relations_past_the_budget_are_listed_rather_than_counted():
    relations = [RelationUse(f"http://x/r{i}", f"ex:relation_number_{i}", None, 1000 - i) for i in range(92)]
    census = Census(profile="generic", triples=50_000, entities=1000, relation_total=92, relations=relations)
    text = summary_text(census, Settings(), tokens=1455)  # room for all but a few of them
    assert "Relations (all 92)" in text and "most used of" not in text and "- `ex:relation_number_91`: 909" in text
    tight = summary_text(census, Settings(), tokens=1400)  # about ten left out: said, and the rest listed
    listed = int(re.search(r"Relations \(the (\d+) most used of 92\)", tight).group(1))
    assert 75 <= listed < 92 and tight.count("- `ex:relation_number_") == listed
    assert f"- `ex:relation_number_{listed - 1}`" in tight and f"- `ex:relation_number_{listed}`" not in tight
