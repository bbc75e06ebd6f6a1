"""Schema profiles and compact ids: detection, output forms, and reading ids back."""

from __future__ import annotations

import pyoxigraph as ox
import pytest

from kg_mcp.errors import InvalidInput
from kg_mcp.ids import Vocabulary
from kg_mcp.profiles import DBPEDIA, FREEBASE_PROFILE, GENERIC, WIKIDATA
from kg_mcp.settings import Settings
from kg_mcp.tools import find_entities, get_relations, search

FREEBASE_TTL = """
@prefix ns: <http://rdf.freebase.com/ns/> .
ns:m.0v1xv ns:type.object.name "Vincent van Gogh"@en ; ns:people.person.place_of_birth ns:m.0ptz3 ;
    ns:common.topic.description "Dutch painter"@en .
ns:m.0ptz3 ns:type.object.name "Zundert"@en .
ns:people.person.place_of_birth ns:type.object.name "Place of birth"@en .
"""

DBPEDIA_TTL = """
@prefix dbr: <http://dbpedia.org/resource/> . @prefix dbo: <http://dbpedia.org/ontology/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
dbr:Vincent_van_Gogh rdfs:label "Vincent van Gogh"@en , "Vincent van Gogh"@nl ; dbo:birthPlace dbr:Zundert ;
    dbo:abstract "Dutch Post-Impressionist painter."@en ; dbo:wikiPageID 3241 .
dbr:Zundert rdfs:label "Zundert"@en .
dbo:birthPlace rdfs:label "birth place"@en .
"""

GENERIC_TTL = """
@prefix ex: <http://example.org/> . @prefix skos: <http://www.w3.org/2004/02/skos/core#> .
@prefix schema: <http://schema.org/> .
ex:a skos:prefLabel "Alpha"@en ; ex:knows ex:b ; ex:age 42 .
ex:b schema:name "Beta" .
"""


def test_freebase_profile_detected_with_bare_ids(memory_backend):
    fb = memory_backend(FREEBASE_TTL)
    assert fb.profile is FREEBASE_PROFILE
    out = search(fb, Settings(), "m.0v1xv", "outgoing")
    (row,) = out.data.rows  # type.object.name and the description are bookkeeping, not rows
    assert (row.property, row.propertyLabel, row.value.id, row.value.label) == (
        "people.person.place_of_birth",
        "Place of birth",
        "m.0ptz3",
        "Zundert",
    )
    assert out.data.entity.id == "m.0v1xv" and out.data.entity.label == "Vincent van Gogh"
    hit = find_entities(fb, Settings(), "Vincent van Gogh").data.entities[0]
    assert (hit.id, hit.description) == ("m.0v1xv", "Dutch painter")
    assert search(fb, Settings(), "ns:m.0v1xv", "outgoing").data == out.data


def test_dbpedia_profile_detected(memory_backend):
    db = memory_backend(DBPEDIA_TTL)
    assert db.profile is DBPEDIA
    rows = search(db, Settings(), "dbr:Vincent_van_Gogh", "outgoing").data.rows
    assert [(r.property, r.value.id) for r in rows] == [("dbo:birthPlace", "dbr:Zundert")]
    assert find_entities(db, Settings(), "Vincent van Gogh").data.entities[0].description.startswith("Dutch")


def test_generic_profile_labels_from_skos_and_schema(memory_backend):
    g = memory_backend(GENERIC_TTL)
    assert g.profile is GENERIC
    out = search(g, Settings(), "<http://example.org/a>", "outgoing")
    rows = {r.property: r for r in out.data.rows}
    assert out.data.entity.label == "Alpha"
    assert rows["<http://example.org/knows>"].value.label == "Beta"
    assert rows["<http://example.org/age>"].value.id == "42" and rows["<http://example.org/age>"].value.label is None
    assert rows["<http://example.org/knows>"].propertyLabel == "knows"  # no label: the local name


def test_profile_can_be_forced(memory_backend):
    forced = memory_backend(GENERIC_TTL, profile="dbpedia")
    assert forced.profile is DBPEDIA


def test_store_prefixes_from_metadata(metaqa):
    relations = get_relations(metaqa, Settings(), "kg:Tom_Hanks").data.relations
    assert all(not r.relation.startswith("<") for r in relations)  # relations shown bare
    assert metaqa.vocab.compact(ox.NamedNode("http://kg-mcp.local/entity/Tom_Hanks")) == "kg:Tom_Hanks"


@pytest.mark.parametrize(
    "profile, iri, compact",
    [
        (WIKIDATA, "http://www.wikidata.org/entity/Q187805", "wd:Q187805"),
        (WIKIDATA, "http://www.wikidata.org/prop/direct/P19", "wdt:P19"),
        (WIKIDATA, "http://www.wikidata.org/prop/qualifier/P580", "pq:P580"),
        (WIKIDATA, "http://www.wikidata.org/prop/P69", "p:P69"),
        (FREEBASE_PROFILE, "http://rdf.freebase.com/ns/m.0v1xv", "m.0v1xv"),
        (DBPEDIA, "http://dbpedia.org/resource/Vincent_van_Gogh", "dbr:Vincent_van_Gogh"),
        (GENERIC, "http://example.org/x y", None),  # not a valid IRI at all
        (GENERIC, "http://example.org/a(b)", "<http://example.org/a(b)>"),
    ],
)
def test_compact_ids_round_trip(profile, iri, compact):
    vocab = Vocabulary(profile)
    if compact is None:
        with pytest.raises(ValueError):
            ox.NamedNode(iri)
        return
    node = ox.NamedNode(iri)
    assert vocab.compact(node) == compact
    parsed = vocab.parse_relation(compact) if "/prop/" in iri else vocab.parse(compact)
    assert parsed == node


def test_wikidata_bare_ids_and_property_entities():
    vocab = Vocabulary(WIKIDATA)
    assert vocab.parse("Q42") == ox.NamedNode("http://www.wikidata.org/entity/Q42")
    assert vocab.parse_relation("P19") == ox.NamedNode("http://www.wikidata.org/prop/direct/P19")
    assert vocab.parse_relation("wd:P19") == ox.NamedNode("http://www.wikidata.org/prop/direct/P19")
    assert vocab.parse("Douglas Adams") is None and vocab.parse("Star Wars: Episode IV") is None


@pytest.mark.parametrize(
    "ref",
    ["", "   ", "wd:Q42>", "wd:Q4\n2", "<http://x", "wd:Q42}", 'wd:"Q42"', "a\x00b", "_:b0", "x" * 3000, "<http://a b>"],
)
def test_malformed_ids_are_clear_errors(ref):
    with pytest.raises(InvalidInput) as caught:
        Vocabulary(WIKIDATA).parse(ref)
    assert caught.value.message


VOCABULARIES_TTL = """
@prefix ex: <http://example.org/> . @prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> . @prefix dcterms: <http://purl.org/dc/terms/> .
@prefix foaf: <http://xmlns.com/foaf/0.1/> .
ex:chiller rdfs:label "Chiller"@en, "Kältemaschine"@de ; skos:altLabel "water chiller"@en ;
    skos:hiddenLabel "chillr" ; skos:definition "Removes heat from a liquid."@en ;
    rdfs:comment "A class of the example."@en ; ex:partOf ex:plant .
ex:manual dcterms:title "Plant Manual" ; dcterms:description "How to run the plant." .
ex:ada foaf:name "Ada Lovelace" .
"""


def test_generic_profile_reads_the_vocabularies_of_published_rdf(memory_backend):
    kg = memory_backend(VOCABULARIES_TTL, settings=Settings(prefixes={"ex": "http://example.org/"}))
    settings = kg.settings
    found = {e.id: e for e in find_entities(kg, settings, "chillr").data.entities}
    assert found["ex:chiller"].match == "alias"
    chiller = found["ex:chiller"]
    assert (chiller.label, chiller.description) == ("Chiller", "Removes heat from a liquid.")  # skos:definition first
    for name, entity in (("Plant Manual", "ex:manual"), ("Ada Lovelace", "ex:ada")):
        hit = find_entities(kg, settings, name).data.entities[0]
        assert (hit.id, hit.match) == (entity, "exact")
    assert find_entities(kg, settings, "Plant Manual").data.entities[0].description == "How to run the plant."
    # the label shown beside the id is left out of listings; aliases and descriptions are listed
    relations = {r.relation for r in get_relations(kg, settings, "ex:chiller").data.relations}
    assert {"skos:altLabel", "skos:hiddenLabel", "skos:definition", "rdfs:comment", "ex:partOf"} <= relations
    assert "rdfs:label" not in relations
    # and a question about names can always be answered: every label, in every language
    labels = search(kg, settings, "ex:chiller", "outgoing", ["rdfs:label"]).data.rows
    assert sorted(r.value.id for r in labels) == ["Chiller", "Kältemaschine"]
