"""The bundled demo graph (kg_mcp/demo/demo.ttl): it parses and keeps the Wikidata shape the tools rely on."""

from __future__ import annotations

import pytest
from pyoxigraph import Literal, NamedNode, RdfFormat, Store

from kg_mcp.demo import demo_path

PREFIXES = """
PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
PREFIX schema: <http://schema.org/>
PREFIX wikibase: <http://wikiba.se/ontology#>
PREFIX wd: <http://www.wikidata.org/entity/>
PREFIX wdt: <http://www.wikidata.org/prop/direct/>
PREFIX p: <http://www.wikidata.org/prop/>
PREFIX ps: <http://www.wikidata.org/prop/statement/>
PREFIX pq: <http://www.wikidata.org/prop/qualifier/>
"""
WD = "http://www.wikidata.org/entity/"
WDT = "http://www.wikidata.org/prop/direct/"


@pytest.fixture(scope="module")
def store() -> Store:
    s = Store()  # in memory
    s.load(path=str(demo_path()), format=RdfFormat.TURTLE)
    return s


def rows(store: Store, query: str) -> list[tuple]:
    return [tuple(sol) for sol in store.query(PREFIXES + query)]


def ask(store: Store, query: str) -> bool:
    return bool(store.query(PREFIXES + query))


def test_demo_path_points_at_the_turtle_file():
    path = demo_path()
    assert path.name == "demo.ttl"
    assert path.is_file()


def test_file_parses_and_has_a_useful_size(store):
    assert 400 <= len(store) <= 2000


def test_van_gogh_birthplace_chain_to_amsterdam(store):
    assert ask(store, """ASK {
        wd:Q5582 wdt:P19 wd:Q9883 .      # Van Gogh -> place of birth -> Zundert
        wd:Q9883 wdt:P17 wd:Q55 .        # Zundert -> country -> Netherlands
        wd:Q55 wdt:P36 wd:Q727 .         # Netherlands -> capital -> Amsterdam
    }""")
    found = rows(store, "SELECT ?capital WHERE { wd:Q5582 wdt:P19/wdt:P17/wdt:P36 ?capital }")
    assert found == [(NamedNode(WD + "Q727"),)]


def test_van_gogh_deathplace_chain_to_paris(store):
    found = rows(store, "SELECT ?place ?country ?capital WHERE { "
                        "wd:Q5582 wdt:P20 ?place . ?place wdt:P17 ?country . ?country wdt:P36 ?capital }")
    assert found == [(NamedNode(WD + "Q212406"), NamedNode(WD + "Q142"), NamedNode(WD + "Q90"))]


def test_works_creators_and_museums(store):
    found = {r[0].value.removeprefix(WD) for r in rows(store, "SELECT ?work WHERE { ?work wdt:P170 wd:Q5582 }")}
    assert {"Q45585", "Q21948567", "Q154469"} <= found  # Starry Night, Sunflowers, Potato Eaters
    assert ask(store, "ASK { wd:Q154469 wdt:P195 wd:Q224124 . wd:Q224124 wdt:P131 wd:Q727 }")
    assert ask(store, "ASK { wd:Q5582 wdt:P3373 wd:Q317188 . wd:Q317188 wdt:P3373 wd:Q5582 }")


def test_statement_with_qualifiers_and_its_truthy_triple(store):
    found = rows(store, """SELECT ?start ?end WHERE {
        wd:Q5582 p:P937 ?st .
        ?st a wikibase:Statement ; wikibase:rank ?rank ; ps:P937 wd:Q48292 ;   # work location: Arles
            pq:P580 ?start ; pq:P582 ?end .
        wd:Q5582 wdt:P937 wd:Q48292 .
    }""")
    assert len(found) == 1
    start, end = found[0]
    assert start.value.startswith("1888") and end.value.startswith("1889")
    # population with point in time, and a non-best (older) value that has no truthy triple
    pops = rows(store, """SELECT ?pop ?when ?rank WHERE {
        wd:Q727 p:P1082 [ ps:P1082 ?pop ; pq:P585 ?when ; wikibase:rank ?rank ] } ORDER BY ?when""")
    assert [(r[0].value, r[2].value.rsplit("#", 1)[1]) for r in pops] == [
        ("872428", "NormalRank"), ("918117", "PreferredRank")]
    truthy = rows(store, "SELECT ?pop WHERE { wd:Q727 wdt:P1082 ?pop }")
    assert truthy == [(Literal("918117", datatype=NamedNode("http://www.w3.org/2001/XMLSchema#decimal")),)]


def test_every_best_rank_statement_has_its_truthy_triple(store):
    missing = rows(store, """SELECT ?item ?st WHERE {
        ?item ?claim ?st .
        ?st a wikibase:BestRank ; ?ps ?value .
        ?prop wikibase:claim ?claim ; wikibase:statementProperty ?ps ; wikibase:directClaim ?wdt .
        FILTER NOT EXISTS { ?item ?wdt ?value }
    }""")
    assert missing == []
    # every statement node is typed and ranked
    assert not ask(store, "ASK { ?item ?claim ?st . ?prop wikibase:claim ?claim . "
                          "FILTER NOT EXISTS { ?st a wikibase:Statement ; wikibase:rank ?rank } }")


def test_every_direct_property_has_a_property_entity(store):
    used = {q.predicate.value for q in store if q.predicate.value.startswith(WDT)}
    assert len(used) >= 20
    declared = {r[0].value: r[1].value for r in rows(store, """SELECT ?wdt ?label WHERE {
        ?prop a wikibase:Property ; wikibase:directClaim ?wdt ; wikibase:claim ?claim ;
              wikibase:statementProperty ?ps ; wikibase:qualifier ?pq ; wikibase:propertyType ?type ;
              rdfs:label ?label . FILTER(LANG(?label) = "en") }""")}
    assert used - set(declared) == set()
    for wdt in used:  # the property entity's IRI matches its direct-claim IRI
        pid = wdt.removeprefix(WDT)
        assert ask(store, f"ASK {{ wd:{pid} wikibase:directClaim wdt:{pid} }}")


def test_every_entity_in_a_truthy_triple_has_a_label(store):
    unlabelled = rows(store, """SELECT DISTINCT ?e WHERE {
        { ?e ?wdt ?o } UNION { ?s ?wdt ?e }
        ?prop wikibase:directClaim ?wdt .
        FILTER(isIRI(?e))
        FILTER NOT EXISTS { ?e rdfs:label ?label }
    }""")
    assert unlabelled == []


def test_every_item_is_typed_and_described_in_english(store):
    bad = rows(store, """SELECT DISTINCT ?e WHERE {
        ?e rdfs:label ?l . FILTER(STRSTARTS(STR(?e), "http://www.wikidata.org/entity/Q"))
        FILTER NOT EXISTS { ?e a wikibase:Item ; schema:description ?d . FILTER(LANG(?d) = "en") }
    }""")
    assert bad == []


def test_hub_has_many_incoming_edges(store):
    (count,) = rows(store, "SELECT (COUNT(?s) AS ?n) WHERE { ?s ?p wd:Q1028181 }")[0]
    assert int(count.value) > 50
    (painters,) = rows(store, "SELECT (COUNT(DISTINCT ?s) AS ?n) WHERE { ?s wdt:P106 wd:Q1028181 ; wdt:P31 wd:Q5 }")[0]
    assert int(painters.value) >= 80


def test_mul_only_and_other_language_labels(store):
    mul_only = rows(store, """SELECT ?e WHERE {
        ?e rdfs:label ?l . FILTER(LANG(?l) = "mul")
        FILTER NOT EXISTS { ?e rdfs:label ?other . FILTER(LANG(?other) != "mul") }
    }""")
    assert mul_only
    langs = {r[0].value for r in rows(store, "SELECT DISTINCT (LANG(?l) AS ?lang) WHERE { ?e rdfs:label ?l }")}
    assert {"en", "nl", "fr", "de", "mul"} <= langs
    assert ask(store, 'ASK { wd:Q36600 rdfs:label "Den Haag"@nl , "La Haye"@fr }')


def test_literal_kinds(store):
    datatypes = {r[0].value.rsplit("#", 1)[1] for r in rows(store, """SELECT DISTINCT (DATATYPE(?o) AS ?dt) WHERE {
        ?s ?p ?o . ?prop wikibase:directClaim ?p . FILTER(isLiteral(?o)) }""")}
    assert {"dateTime", "decimal", "wktLiteral"} <= datatypes
    assert ask(store, 'ASK { wd:Q5582 wdt:P569 "1853-03-30T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> }')
    assert ask(store, 'ASK { wd:Q727 wdt:P625 ?pt . FILTER(STRSTARTS(STR(?pt), "Point(4.89")) }')
