"""The ontology oracle on published ontologies as users get them (tests/ontologies.py: released files
from PyPI packages, loaded with `kg-mcp load`'s loader): questions whose truth is rdflib's SPARQL on
the same file, answered by their gold tool calls through the MCP SDK's client, scored on recall and
exact answer sets; and verify on claims that RDFS entails from the same files."""

from __future__ import annotations

import random
from dataclasses import replace
from functools import cache

import pytest
import rdflib
from kg_mcp.agents.evaluation.ontology_oracle import OntologyQuestion, ask_all, format_table, parse_file, questions, run_backend
from kg_mcp.agents.kg_client import KGClient
from kg_mcp.settings import Settings
from kg_mcp.tools import verify
from kg_mcp.tools.verify import TripleClaim

from tests.ontologies import ontology_file

PER_KIND = 6  # questions of each kind per ontology here (the command line draws 12)
ONTOLOGIES = ("shacl", "dash", "schema.org", "brick")
SKOS_DEFINITION = rdflib.URIRef("http://www.w3.org/2004/02/skos/core#definition")


@cache
def graph(name: str) -> rdflib.Graph:
    return parse_file(ontology_file(name))


def compact_with(backend):
    import pyoxigraph as ox

    return lambda iri: backend.vocab.compact(ox.NamedNode(iri))


@pytest.mark.parametrize("name", ONTOLOGIES)
async def test_exact_answer_sets_through_the_tools(name, ontology_store):
    result = await run_backend(ontology_store(name), graph(name), name, per_kind=PER_KIND)
    summary = result.summary()
    print(format_table([result]))
    assert summary["questions"] >= 20 and len(summary["kinds"]) >= 4, summary
    assert summary["exact"] >= 0.95 and summary["recall"] >= summary["exact"], format_table([result])
    if name == "brick":  # the shapes' constraints are read through their blank nodes
        assert {"shape classes", "shape paths", "subclasses", "definitions"} <= set(summary["kinds"])


async def test_the_scoring_sees_a_missing_or_an_extra_answer(ontology_store):
    brick = ontology_store("brick")
    asked = [q for q in questions(graph("brick"), compact_with(brick), per_kind=2) if len(q.answers) >= 2][:4]
    assert asked
    doctored = [replace(q, answers=q.answers + ("brick:No_Such_Class",)) for q in asked]
    doctored += [replace(q, answers=q.answers[1:]) for q in asked]
    async with KGClient.connect(server=brick) as kg:
        result = await ask_all(kg, "brick", doctored)
    half = len(asked)
    assert not any(r.recalled for r in result.rows[:half]) and all(r.missing == ["brick:No_Such_Class"] for r in result.rows[:half])
    assert all(r.recalled and not r.exact and len(r.extra) == 1 for r in result.rows[half:])


async def test_a_definition_longer_than_a_cell_is_read_whole(ontology_store):
    """Brick's longest skos:definition is cut in the table and read whole after it."""
    brick = ontology_store("brick")
    longest = max(graph("brick").objects(None, SKOS_DEFINITION), key=len)
    subject = next(graph("brick").subjects(SKOS_DEFINITION, longest))
    assert len(longest) > Settings().max_cell_chars
    arguments = {"entity": compact_with(brick)(str(subject)), "properties_to_filter_for": ["skos:definition"]}
    asked = [OntologyQuestion("definitions:longest", "definitions", "", "search", arguments, (str(longest),))]
    async with KGClient.connect(server=brick) as kg:
        result = await ask_all(kg, "brick", asked)
    assert [(r.recalled, r.exact) for r in result.rows] == [(True, True)]


def _entailed_claims(g: rdflib.Graph, compact, limit: int) -> list[TripleClaim]:
    """(x, rdfs:subClassOf, a) for a above x at depth two or more, and (i, rdf:type, a) for a above
    one of i's types: what RDFS entails and the file does not state (rdflib's SPARQL)."""
    rows = list(g.query(
        "PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#> SELECT DISTINCT ?x ?p ?a WHERE { "
        "{ ?x rdfs:subClassOf/rdfs:subClassOf+ ?a BIND(rdfs:subClassOf AS ?p) FILTER NOT EXISTS { ?x rdfs:subClassOf ?a } } "
        "UNION { ?x a/rdfs:subClassOf+ ?a BIND(<http://www.w3.org/1999/02/22-rdf-syntax-ns#type> AS ?p) "
        "FILTER NOT EXISTS { ?x a ?a } } FILTER(isIRI(?x) && isIRI(?a) && ?x != ?a) }"))
    random.Random(7).shuffle(rows)
    return [TripleClaim(subject=compact(str(x)), relation=compact(str(p)), object=compact(str(a))) for x, p, a in rows[:limit]]


@pytest.mark.parametrize("name", ["brick", "schema.org"])
def test_verify_supports_what_rdfs_entails(name, ontology_store):
    backend = ontology_store(name)
    claims = _entailed_claims(graph(name), compact_with(backend), 100)
    assert len(claims) == 100 and any(c.relation == "rdf:type" for c in claims)
    verdicts = [v for i in range(0, len(claims), 50) for v in verify(backend, Settings(), claims[i : i + 50]).data.claims]
    assert [v.status for v in verdicts] == ["supported"] * len(claims), [v.hops[0].reason for v in verdicts if v.status != "supported"][:3]
    assert all(v.hops[0].reason.startswith("entailed") and v.hops[0].evidence_total >= 2 for v in verdicts)
