"""verify knows RDFS and OWL: entailed claims are supported with their chain, conflicts are only
what the KG states against a claim, ambiguous names are said; the same verdicts on a local store
(bounded walks) and behind real engines (one SPARQL property path, then the walk for the chain)."""

from __future__ import annotations

import pyoxigraph as ox
import pytest
from kg_mcp.backends import open_endpoint
from kg_mcp.settings import Settings
from kg_mcp.tools import verify
from kg_mcp.tools.verify import PathClaim, TripleClaim

ZOO = """
@prefix ex: <http://example.org/> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:Animal a owl:Class ; rdfs:label "Animal" .
ex:Mammal a owl:Class ; rdfs:subClassOf ex:Animal, ex:Warm .
ex:Dog a owl:Class ; rdfs:subClassOf ex:Mammal ; rdfs:label "Dog" .
ex:Canine owl:equivalentClass ex:Dog .
ex:Plant a owl:Class ; owl:disjointWith ex:Animal .
ex:Tree rdfs:subClassOf ex:Plant .
ex:rex a ex:Canine ; rdfs:label "Rex" ; owl:sameAs ex:rex2 ; owl:differentFrom ex:max ; ex:birthYear 2015 .
ex:rex2 ex:ownedBy ex:alice .
ex:owns owl:inverseOf ex:ownedBy .
ex:alice ex:owns ex:tom ; ex:friendOf ex:bob .
ex:tom rdfs:label "Tom" .
ex:tom2 rdfs:label "Tom" .
ex:partOf a owl:TransitiveProperty .
ex:tail ex:partOf ex:rex .
ex:rex ex:partOf ex:pack ; ex:hasParent ex:max .
ex:friendOf a owl:SymmetricProperty .
ex:hasParent rdfs:subPropertyOf ex:hasRelative .
ex:birthYear a owl:FunctionalProperty .
"""

# (claim, status, words the reason holds)
CASES = [
    (("ex:Dog", "rdfs:subClassOf", "ex:Animal"), "supported", "ex:Dog → ex:Mammal → ex:Animal (rdfs:subClassOf)"),
    (("ex:Animal", "~rdfs:subClassOf", "ex:Dog"), "supported", "ex:Dog → ex:Mammal → ex:Animal"),
    (("ex:Canine", "rdfs:subClassOf", "Animal"), "supported", "ex:Canine owl:equivalentClass ex:Dog"),
    (("ex:rex", "rdf:type", "ex:Animal"), "supported", "ex:rex rdf:type ex:Canine"),
    (("ex:rex", "ex:ownedBy", "ex:alice"), "supported", "ex:rex owl:sameAs ex:rex2; ex:rex2 ex:ownedBy ex:alice"),
    (("ex:tom", "ex:ownedBy", "ex:alice"), "supported", "ex:alice ex:owns ex:tom"),
    (("ex:tail", "ex:partOf", "ex:pack"), "supported", "ex:tail → ex:rex → ex:pack (ex:partOf)"),
    (("ex:bob", "ex:friendOf", "ex:alice"), "supported", "ex:alice ex:friendOf ex:bob"),
    (("ex:rex", "ex:hasRelative", "ex:max"), "supported", "ex:rex ex:hasParent ex:max"),
    (("ex:rex", "rdf:type", "ex:Plant"), "conflicting", "ex:Plant owl:disjointWith ex:Animal"),
    (("ex:Dog", "rdfs:subClassOf", "ex:Tree"), "conflicting", "owl:disjointWith"),
    (("ex:rex", "owl:sameAs", "ex:max"), "conflicting", "ex:rex owl:differentFrom ex:max"),
    (("ex:rex", "ex:birthYear", "2016"), "conflicting", "2015"),
    # a class with another superclass, an entity with another type: no conflict
    (("ex:Mammal", "rdfs:subClassOf", "ex:Dog"), "not_found", "ex:Animal"),
    (("ex:rex", "rdf:type", "owl:Thing"), "not_found", "ex:Canine"),
    (("ex:Warm", "rdfs:subClassOf", "ex:Animal"), "not_found", "has no rdfs:subClassOf"),
]


def _claims():
    return [TripleClaim(subject=s, relation=r, object=o) for (s, r, o), _, _ in CASES]


def _check(out):
    for verdict, (claim, status, words) in zip(out.data.claims, CASES):
        hop = verdict.hops[0]
        assert (hop.status, words in hop.reason) == (status, True), (claim, hop.reason)


@pytest.fixture(scope="module")
def zoo_nt(tmp_path_factory):
    path = tmp_path_factory.mktemp("zoo") / "zoo.nt"
    store = ox.Store()
    store.load(ZOO.encode(), format=ox.RdfFormat.TURTLE)
    store.dump(str(path), format=ox.RdfFormat.N_TRIPLES, from_graph=ox.DefaultGraph())
    return path


def test_entailed_claims_and_stated_conflicts_on_a_local_store(memory_backend):
    zoo = memory_backend(ZOO, settings=Settings(prefixes={"ex": "http://example.org/"}))
    out = verify(zoo, zoo.settings, _claims())
    _check(out)
    chain = out.data.claims[0].hops[0]
    assert [(e.subject.id, e.relation, e.object.id) for e in chain.evidence] == [
        ("ex:Dog", "rdfs:subClassOf", "ex:Mammal"), ("ex:Mammal", "rdfs:subClassOf", "ex:Animal")]
    assert chain.evidence_total == 2 and "entailed" in out.text


def test_an_ambiguous_name_is_said_and_each_entity_checked(memory_backend):
    zoo = memory_backend(ZOO, settings=Settings(prefixes={"ex": "http://example.org/"}))
    out = verify(zoo, zoo.settings, [TripleClaim(subject="ex:alice", relation="ex:owns", object="Tom"),
                                     PathClaim(path=[TripleClaim(subject="Tom", relation="~ex:owns", object="ex:alice")])])
    for verdict in out.data.claims:
        hop = verdict.hops[0]
        assert hop.status == "supported"
        assert [sorted(a.ids) for a in hop.ambiguous] == [["ex:tom", "ex:tom2"]], hop
        assert "'Tom' names 2 entities" in hop.reason


@pytest.mark.parametrize("engine", ["oxigraph", "virtuoso"])
def test_same_verdicts_behind_an_engine(engine, engine_endpoints, zoo_nt):
    backend = open_endpoint(engine_endpoints(engine, "zoo", zoo_nt), settings=Settings(prefixes={"ex": "http://example.org/"}))
    try:
        _check(verify(backend, backend.settings, _claims()))
    finally:
        backend.close()


def test_a_chain_the_evidence_cell_cuts_follows_the_table_whole(memory_backend):
    settings = Settings(prefixes={"ex": "http://example.org/"}, max_cell_chars=60)
    zoo = memory_backend(ZOO, settings=settings)
    out = verify(zoo, settings, [TripleClaim(subject="ex:rex", relation="rdf:type", object="ex:Animal")])
    reason = out.data.claims[0].hops[0].reason
    assert len(reason) > 60 and "…[" in out.text.split("\n\n")[0]  # cut in the table
    assert out.text.endswith(f"Whole evidence of the rows cut above:\n- 1: {reason}")


def test_values_that_are_all_blank_nodes_are_said_plainly(memory_backend):
    """A claim whose relation holds only anonymous values: the reason says how many, not a list
    that starts with "and"."""
    settings = Settings(prefixes={"ex": "http://example.org/"})
    kg = memory_backend("""@prefix ex: <http://example.org/> .
ex:rex a ex:Dog ; ex:birthYear 2015 ; ex:address [ ex:city "Paris" ], [ ex:city "Lyon" ] .
ex:address a <http://www.w3.org/2002/07/owl#FunctionalProperty> .
""", settings=settings)
    out = verify(kg, settings, [TripleClaim(subject="ex:rex", relation="ex:address", object="ex:dog")])
    reason = out.data.claims[0].hops[0].reason
    assert "ex:address = 2 anonymous values (blank nodes)" in reason and "= and" not in reason
