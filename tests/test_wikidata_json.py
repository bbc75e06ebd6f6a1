"""Wikidata JSON dump entities → Wikidata's RDF model, checked with SPARQL on real pyoxigraph stores."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pyoxigraph as ox
import pytest

from kg_mcp.loading.wikidata_json import entity_to_quads

SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikidata-sample"
EXTRA = SAMPLE / "wikidata-extra-entities.json"
NT = SAMPLE / "wikidata-sample.nt"

pytestmark = pytest.mark.skipif(not (EXTRA.exists() and NT.exists()), reason="shared Wikidata sample missing")

PREFIXES = """
PREFIX wd: <http://www.wikidata.org/entity/>
PREFIX wds: <http://www.wikidata.org/entity/statement/>
PREFIX wdref: <http://www.wikidata.org/reference/>
PREFIX wdt: <http://www.wikidata.org/prop/direct/>
PREFIX p: <http://www.wikidata.org/prop/>
PREFIX ps: <http://www.wikidata.org/prop/statement/>
PREFIX pq: <http://www.wikidata.org/prop/qualifier/>
PREFIX pr: <http://www.wikidata.org/prop/reference/>
PREFIX wdno: <http://www.wikidata.org/prop/novalue/>
PREFIX wikibase: <http://wikiba.se/ontology#>
PREFIX schema: <http://schema.org/>
PREFIX skos: <http://www.w3.org/2004/02/skos/core#>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
PREFIX prov: <http://www.w3.org/ns/prov#>
PREFIX ontolex: <http://www.w3.org/ns/lemon/ontolex#>
PREFIX dct: <http://purl.org/dc/terms/>
PREFIX owl: <http://www.w3.org/2002/07/owl#>
PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>
PREFIX geo: <http://www.opengis.net/ont/geosparql#>
"""
WD = "http://www.wikidata.org/entity/"


def read_entities() -> list[dict]:
    """The dump's framing: a JSON array with one entity per line, lines ending in ','."""
    entities = []
    for line in EXTRA.read_text(encoding="utf-8").splitlines():
        text = line.strip().removeprefix("[").removesuffix("]").strip().removesuffix(",")
        if text:
            entities.append(json.loads(text))
    return entities


def store_of(*entities: dict) -> ox.Store:
    store = ox.Store()
    for entity in entities:
        store.extend(entity_to_quads(entity))
    return store


def select(store: ox.Store, query: str) -> list[dict[str, ox.NamedNode | ox.BlankNode | ox.Literal]]:
    solutions = store.query(PREFIXES + query)
    return [{v.value: s[v] for v in solutions.variables if s[v] is not None} for s in solutions]


def ask(store: ox.Store, query: str) -> bool:
    return bool(store.query(PREFIXES + query))


@pytest.fixture(scope="module")
def entities() -> dict[str, dict]:
    return {e["id"]: e for e in read_entities()}


@pytest.fixture(scope="module")
def store(entities) -> ox.Store:
    return store_of(*entities.values())


@pytest.fixture(scope="module")
def sample() -> ox.Store:
    sample = ox.Store()
    sample.bulk_load(path=str(NT), format=ox.RdfFormat.N_TRIPLES)
    return sample


# -- hand-written entities ---------------------------------------------------------------------

def snak(pid: str, datatype: str, kind: str, value=None, snaktype: str = "value") -> dict:
    out = {"snaktype": snaktype, "property": pid, "datatype": datatype}
    if snaktype == "value":
        out["datavalue"] = {"type": kind, "value": value}
    return out


def item_snak(pid: str, qid: str) -> dict:
    return snak(pid, "wikibase-item", "wikibase-entityid", {"entity-type": "item", "id": qid})


def statement(guid: str, rank: str, mainsnak: dict, **extra) -> dict:
    return {"id": guid, "type": "statement", "rank": rank, "mainsnak": mainsnak, **extra}


def item(qid: str, claims: dict, **extra) -> dict:
    return {"type": "item", "id": qid, "claims": claims, **extra}


def simple_value(value_snak: dict) -> ox.NamedNode | ox.BlankNode | ox.Literal:
    """The ps: value Wikidata's model gives to one main snak."""
    pid = value_snak["property"]
    store = store_of(item("Q1", {pid: [statement("Q1$a", "normal", value_snak)]}))
    (row,) = select(store, f"SELECT ?v WHERE {{ wds:Q1-a ps:{pid} ?v }}")
    return row["v"]


def time_value(time: str, precision: int, calendar: str = "Q1985727") -> ox.Literal:
    value = {"time": time, "timezone": 0, "before": 0, "after": 0, "precision": precision,
             "calendarmodel": WD + calendar}
    return simple_value(snak("P585", "time", "time", value))


# -- the 30 real entities ----------------------------------------------------------------------

def test_every_real_entity_converts(entities, store):
    assert len(entities) == 30
    kinds = {e["type"] for e in entities.values()}
    assert kinds == {"item", "property", "lexeme"}
    for row in select(store, "SELECT ?e ?class WHERE { ?e a ?class FILTER(?class IN "
                             "(wikibase:Item, wikibase:Property, wikibase:Lexeme)) }"):
        assert row["e"].value.removeprefix(WD) in entities
    (row,) = select(store, "SELECT (COUNT(?e) AS ?n) WHERE { ?e a ?class FILTER(?class IN "
                           "(wikibase:Item, wikibase:Property, wikibase:Lexeme)) }")
    assert int(row["n"].value) == 30


def test_capital_of_usa_is_truthy_and_has_a_statement_node(store):
    assert ask(store, "ASK { wd:Q30 wdt:P36 wd:Q61 }")
    rows = select(store, """SELECT ?st ?rank WHERE {
        wd:Q30 p:P36 ?st . ?st ps:P36 wd:Q61 ; wikibase:rank ?rank ;
                               a wikibase:Statement, wikibase:BestRank }""")
    assert rows and rows[0]["rank"] == ox.NamedNode("http://wikiba.se/ontology#PreferredRank")
    # the statement IRI is the GUID with '$' turned into '-'
    assert any(r["st"].value.endswith("statement/q30-E0257E2F-A11D-40D9-8C58-6B5A8D3AF952") for r in rows)


def test_labels_descriptions_aliases(store):
    label = ox.Literal("United States of America", language="en")
    for predicate in ("rdfs:label", "skos:prefLabel", "schema:name"):
        assert ask(store, f'ASK {{ wd:Q30 {predicate} "United States of America"@en }}'), predicate
    assert ask(store, "ASK { wd:Q30 schema:description ?d FILTER(LANG(?d) = 'en') }")
    assert ask(store, 'ASK { wd:P31 skos:altLabel "rdf:type"@mul }')
    assert label in {r["l"] for r in select(store, "SELECT ?l WHERE { wd:Q30 rdfs:label ?l }")}


def test_mul_label_is_written_like_any_other_language():
    store = store_of(item("Q9", {}, labels={"mul": {"language": "mul", "value": "Provenio"}}))
    for predicate in ("rdfs:label", "skos:prefLabel", "schema:name"):
        assert ask(store, f'ASK {{ wd:Q9 {predicate} "Provenio"@mul }}'), predicate


def test_property_entity_declarations(store):
    expected = {"directClaim": "wdt:P31", "claim": "p:P31", "statementProperty": "ps:P31",
                "qualifier": "pq:P31", "reference": "pr:P31", "novalue": "wdno:P31",
                "propertyType": "wikibase:WikibaseItem"}
    for link, target in expected.items():
        assert ask(store, f"ASK {{ wd:P31 a wikibase:Property ; wikibase:{link} {target} }}"), link
    assert ask(store, "ASK { wd:P18 wikibase:propertyType wikibase:CommonsMedia }")
    assert ask(store, "ASK { wdno:P31 a owl:Class ; owl:complementOf [ owl:onProperty wdt:P31 ] }")


def test_property_entities_match_the_real_rdf(store, sample):
    """Each declaration triple (no terms, no claims) of P31, P18, ... is one Wikidata's own RDF has."""
    shared = ["P31", "P18", "P21", "P345", "P1670", "P1971"]
    for pid in shared:
        namespaces = ("", "direct/", "statement/", "qualifier/", "reference/", "novalue/")
        subjects = [WD + pid] + [f"http://www.wikidata.org/prop/{ns}{pid}" for ns in namespaces]
        ours = set()
        for subject in subjects:
            for quad in store.quads_for_pattern(ox.NamedNode(subject), None, None):
                # leave out terms and the property's own claims (wdt:/p: values, "a wdno:Pn")
                is_claim = quad.predicate.value.startswith("http://www.wikidata.org/prop/") or (
                    quad.predicate.value.endswith("#type") and "/prop/novalue/" in quad.object.value)
                if not is_claim and not isinstance(quad.object, (ox.Literal, ox.BlankNode)):
                    ours.add(quad)
        assert len(ours) >= 12, pid
        missing = [q for q in ours if q not in sample]
        assert not missing, f"{pid}: not in wikidata-sample.nt: {missing[:3]}"


def test_item_predicates_use_only_namespaces_of_the_real_rdf(entities, sample):
    def namespace(iri: str) -> str:
        return re.sub(r"[^/#]*$", "", iri)

    theirs = {namespace(q.predicate.value) for q in sample}
    ours = {namespace(q.predicate.value)
            for e in entities.values() if e["type"] == "item" for q in entity_to_quads(e)}
    assert {"http://www.wikidata.org/prop/direct/", "http://www.wikidata.org/prop/qualifier/"} <= ours
    assert ours <= theirs, ours - theirs


def test_time_values_are_xsd_datetime(store):
    assert ask(store, 'ASK { wd:Q131261 wdt:P569 "1969-06-15T00:00:00Z"^^xsd:dateTime }')
    # Q2112's P1249 is a Julian date of year precision: kept as it is, month and day become 01.
    assert ask(store, 'ASK { wd:Q2112 wdt:P1249 "1214-01-01T00:00:00Z"^^xsd:dateTime }')
    rows = select(store, "SELECT ?t WHERE { ?s pq:P585 ?t }")
    assert rows and all(r["t"].datatype == ox.NamedNode("http://www.w3.org/2001/XMLSchema#dateTime")
                        for r in rows)


def test_quantities_are_xsd_decimal_without_plus(store):
    assert ask(store, 'ASK { wd:Q30 wdt:P1082 "323952889"^^xsd:decimal }')
    rows = select(store, "SELECT ?v WHERE { ?s ?p ?v FILTER(DATATYPE(?v) = xsd:decimal) }")
    assert len(rows) > 100 and not any(r["v"].value.startswith("+") for r in rows)


def test_qualifiers(store):
    rows = select(store, """SELECT ?date WHERE { wd:Q30 p:P1082 ?st .
        ?st ps:P1082 "323952889"^^xsd:decimal ; pq:P585 ?date ; pq:P459 ?method }""")
    assert rows and rows[0]["date"].datatype.value.endswith("#dateTime")
    assert ask(store, 'ASK { wd:Q30 p:P36 [ ps:P36 wd:Q61 ; pq:P580 "1800-11-17T00:00:00Z"^^xsd:dateTime ] }')


def test_references(store):
    assert ask(store, """ASK { wd:Q30 p:P1082 ?st . ?st ps:P1082 "323952889"^^xsd:decimal ;
        prov:wasDerivedFrom wdref:b99ef6a8acabf7fc7ace0c6bf349fea9b08a1de3 .
        wdref:b99ef6a8acabf7fc7ace0c6bf349fea9b08a1de3 a wikibase:Reference ; pr:P248 wd:Q3398022 }""")


def test_deprecated_statements_are_never_truthy_in_real_data(store):
    rows = select(store, "SELECT ?st WHERE { wd:Q30 p:P150 ?st . ?st wikibase:rank wikibase:DeprecatedRank }")
    assert len(rows) == 11
    assert not ask(store, "ASK { ?st wikibase:rank wikibase:DeprecatedRank ; a wikibase:BestRank }")


def test_truthy_triples_are_exactly_the_best_rank_values(store):
    """For every subject and property, wdt: values == ps: values of its BestRank statements."""
    best: dict[tuple[str, str], set] = {}
    for row in select(store, """SELECT ?s ?claim ?v WHERE { ?s ?claim ?st . ?st a wikibase:BestRank ; ?ps ?v .
            FILTER(STRSTARTS(STR(?ps), "http://www.wikidata.org/prop/statement/")
                   && STRAFTER(STR(?ps), "statement/") = STRAFTER(STR(?claim), "prop/")
                   && !ISBLANK(?v)) }"""):
        best.setdefault((row["s"].value, row["claim"].value.rsplit("/", 1)[1]), set()).add(row["v"])
    truthy: dict[tuple[str, str], set] = {}
    for row in select(store, """SELECT ?s ?p ?v WHERE { ?s ?p ?v
            FILTER(STRSTARTS(STR(?p), "http://www.wikidata.org/prop/direct/") && !ISBLANK(?v)) }"""):
        truthy.setdefault((row["s"].value, row["p"].value.rsplit("/", 1)[1]), set()).add(row["v"])
    assert len(truthy) > 500
    assert truthy == best


def test_preferred_normal_deprecated_truthiness():
    entity = item("Q7", {
        "P1": [statement("Q7$pref", "preferred", item_snak("P1", "Q101")),
               statement("Q7$norm", "normal", item_snak("P1", "Q102")),
               statement("Q7$depr", "deprecated", item_snak("P1", "Q103"))],
        "P2": [statement("Q7$n1", "normal", item_snak("P2", "Q201")),
               statement("Q7$n2", "normal", item_snak("P2", "Q202")),
               statement("Q7$d2", "deprecated", item_snak("P2", "Q203"))],
        "P3": [statement("Q7$d3", "deprecated", item_snak("P3", "Q301"))],
    })
    store = store_of(entity)
    query = "SELECT ?p ?v WHERE { wd:Q7 ?p ?v FILTER(CONTAINS(STR(?p), '/direct/')) }"
    truthy = {(r["p"].value.rsplit("/", 1)[1], r["v"].value.removeprefix(WD)) for r in select(store, query)}
    assert truthy == {("P1", "Q101"), ("P2", "Q201"), ("P2", "Q202")}
    best = {r["st"].value.rsplit("/", 1)[1]
            for r in select(store, "SELECT ?st WHERE { ?st a wikibase:BestRank }")}
    assert best == {"Q7-pref", "Q7-n1", "Q7-n2"}
    ranks = dict((r["st"].value.rsplit("/", 1)[1], r["r"].value.rsplit("#", 1)[1])
                 for r in select(store, "SELECT ?st ?r WHERE { ?st wikibase:rank ?r }"))
    assert ranks == {"Q7-pref": "PreferredRank", "Q7-norm": "NormalRank", "Q7-depr": "DeprecatedRank",
                     "Q7-n1": "NormalRank", "Q7-n2": "NormalRank", "Q7-d2": "DeprecatedRank",
                     "Q7-d3": "DeprecatedRank"}
    assert all(ask(store, f"ASK {{ wds:{s} a wikibase:Statement }}") for s in ranks)


def test_novalue_and_somevalue():
    entity = item("Q8", {
        "P40": [statement("Q8$none", "normal", snak("P40", "wikibase-item", "", snaktype="novalue"),
                          qualifiers={"P582": [snak("P582", "time", "", snaktype="novalue")]})],
        "P50": [statement("Q8$u1", "normal", snak("P50", "wikibase-item", "", snaktype="somevalue")),
                statement("Q8$u2", "normal", snak("P50", "wikibase-item", "", snaktype="somevalue"))],
    })
    store = store_of(entity)
    assert ask(store, "ASK { wd:Q8 a wdno:P40 . wds:Q8-none a wdno:P40, wdno:P582 ; wikibase:rank ?r }")
    assert not ask(store, "ASK { wd:Q8 wdt:P40 ?x }")
    unknowns = [r["v"] for r in select(store, "SELECT ?v WHERE { wd:Q8 wdt:P50 ?v }")]
    assert len(unknowns) == 2 and all(isinstance(v, ox.BlankNode) for v in unknowns)
    assert isinstance(simple_value(snak("P50", "wikibase-item", "", snaktype="somevalue")), ox.BlankNode)
    # Real data: Q22002395 has two unknown authors, each a blank node of its own.
    real = store_of(*[e for e in read_entities() if e["id"] == "Q22002395"])
    blanks = {r["v"] for r in select(real, "SELECT ?v WHERE { wd:Q22002395 wdt:P50 ?v FILTER(ISBLANK(?v)) }")}
    assert len(blanks) == 2


def test_value_types(store):
    assert ask(store, 'ASK { wd:Q30 wdt:P1451 "In God We Trust"@en }')  # monolingual text
    assert ask(store, 'ASK { wd:Q30 wdt:P227 "4078704-7" }')  # external id: plain string
    assert ask(store, "ASK { wd:Q30 wdt:P1325 <https://www.data.gov/> }")  # url
    flag = "http://commons.wikimedia.org/wiki/Special:FilePath/Flag%20of%20the%20United%20States.svg"
    assert ask(store, f"ASK {{ wd:Q30 wdt:P41 <{flag}> }}")
    assert ask(store, 'ASK { wd:Q30 wdt:P5140 "Point(-103.77155634167 44.967243394444)"^^geo:wktLiteral }')
    assert ask(store, "ASK { wd:L525 p:P5191 [ ps:P5191 wd:L278335 ] }")  # lexeme value
    assert ask(store, "ASK { wd:L525-S1 wdt:P5972 wd:L41768-S2 }")  # sense value


@pytest.mark.parametrize(("datatype", "kind", "value", "expected"), [
    ("string", "string", "E=mc²", ox.Literal("E=mc²")),
    ("math", "string", r"\sqrt{2}", ox.Literal(r"\sqrt{2}")),
    ("url", "string", "not a url", ox.Literal("not a url")),
    ("commonsMedia", "string", "A (b), c.jpg",
     ox.NamedNode("http://commons.wikimedia.org/wiki/Special:FilePath/A%20%28b%29%2C%20c.jpg")),
    ("geo-shape", "string", "Data:Paris area.map",
     ox.NamedNode("http://commons.wikimedia.org/data/main/Data:Paris+area.map")),
    ("quantity", "quantity", {"amount": "+1.96", "unit": "1"},
     ox.Literal("1.96", datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#decimal"))),
    ("quantity", "quantity", {"amount": "-5", "unit": "1"},
     ox.Literal("-5", datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#decimal"))),
    ("globe-coordinate", "globecoordinate",
     {"latitude": 0.6875, "longitude": 23.4333, "precision": 0.01, "globe": WD + "Q405"},
     ox.Literal("<http://www.wikidata.org/entity/Q405> Point(23.4333 0.6875)",
                datatype=ox.NamedNode("http://www.opengis.net/ont/geosparql#wktLiteral"))),
    ("wikibase-property", "wikibase-entityid", {"entity-type": "property", "numeric-id": 31},
     ox.NamedNode(WD + "P31")),
])
def test_simple_values(datatype, kind, value, expected):
    assert simple_value(snak("P9", datatype, kind, value)) == expected


@pytest.mark.parametrize(("time", "precision", "calendar", "expected"), [
    ("+1952-03-11T00:00:00Z", 11, "Q1985727", "1952-03-11T00:00:00Z"),
    ("+2001-05-00T00:00:00Z", 10, "Q1985727", "2001-05-01T00:00:00Z"),
    ("+2001-05-17T00:00:00Z", 9, "Q1985727", "2001-01-01T00:00:00Z"),
    ("+2001-02-31T00:00:00Z", 11, "Q1985727", "2001-02-28T00:00:00Z"),
    ("+0272-02-27T00:00:00Z", 11, "Q1985786", "0272-02-27T00:00:00Z"),  # 3rd century: calendars agree
    ("+0306-07-25T00:00:00Z", 11, "Q1985786", "0306-07-26T00:00:00Z"),  # Julian → Gregorian (sample)
    ("+0337-05-22T00:00:00Z", 11, "Q1985786", "0337-05-23T00:00:00Z"),
    ("+1214-00-00T00:00:00Z", 9, "Q1985786", "1214-01-01T00:00:00Z"),  # too imprecise to convert
    ("-0200-00-00T00:00:00Z", 9, "Q1985727", "-0199-01-01T00:00:00Z"),  # 200 BCE is -199 in XSD 1.1
    ("-0001-00-00T00:00:00Z", 9, "Q1985727", "0000-01-01T00:00:00Z"),
    ("-0100-07-12T00:00:00Z", 11, "Q1985786", "-0099-07-10T00:00:00Z"),
    ("-4713-01-02T00:00:00Z", 11, "Q1985786", "-4713-11-25T00:00:00Z"),
    ("-13798000000-00-00T00:00:00Z", 3, "Q1985727", "-13798000000-01-01T00:00:00Z"),  # as in the sample
    ("+1465072-01-01T00:00:00Z", 11, "Q1985786", "1465102-01-30T00:00:00Z"),
])
def test_time_values_follow_wikidata(time, precision, calendar, expected):
    assert time_value(time, precision, calendar) == ox.Literal(
        expected, datatype=ox.NamedNode("http://www.w3.org/2001/XMLSchema#dateTime"))


def test_time_without_an_xsd_form_stays_a_string():
    assert time_value("+0000-01-01T00:00:00Z", 11) == ox.Literal("+0000-01-01T00:00:00Z")
    assert time_value("+2001-01-01T00:00:00Z", 11, "Q12138") == ox.Literal("+2001-01-01T00:00:00Z")


def test_sitelinks(store):
    assert ask(store, """ASK { <https://de.wikipedia.org/wiki/Karlsruhe> a schema:Article ;
        schema:about wd:Q1040 ; schema:isPartOf <https://de.wikipedia.org/> ; schema:inLanguage "de" ;
        schema:name "Karlsruhe"@de ; wikibase:badge wd:Q17437798 .
        <https://de.wikipedia.org/> wikibase:wikiGroup "wikipedia" }""")
    assert ask(store, """ASK { <https://simple.wikipedia.org/wiki/United_States> schema:about wd:Q30 ;
        schema:inLanguage "en-simple" }""")
    assert ask(store, """ASK { ?page schema:about wd:Q30 ; schema:inLanguage "be-tarask" ;
        schema:isPartOf <https://be-tarask.wikipedia.org/> }""")
    assert ask(store, 'ASK { ?page schema:about wd:Q30 ; schema:isPartOf <https://commons.wikimedia.org/> ; '
                      'schema:inLanguage "en" }')
    (row,) = select(store, "SELECT (COUNT(?p) AS ?n) WHERE { ?p schema:about wd:Q30 ; a schema:Article }")
    assert int(row["n"].value) == 360


def test_entity_document(store):
    assert ask(store, """ASK { ?doc schema:about wd:Q1040 ; a schema:Dataset ;
        schema:version "619336121"^^xsd:integer ; wikibase:sitelinks "106"^^xsd:integer ;
        schema:dateModified "2018-01-12T15:50:54Z"^^xsd:dateTime }""")
    assert ask(store, 'ASK { wd:Q32063953 owl:sameAs wd:Q1040 }')  # Q1040 was fetched through a redirect


def test_lexeme(store):
    assert ask(store, """ASK { wd:L525 a ontolex:LexicalEntry, wikibase:Lexeme ; wikibase:lemma "maison"@fr ;
        wikibase:lexicalCategory wd:Q1084 ; dct:language wd:Q150 ;
        ontolex:lexicalForm wd:L525-F1 ; ontolex:sense wd:L525-S1 .
        wd:L525-F1 a ontolex:Form ; ontolex:representation "maisons"@fr ;
                   wikibase:grammaticalFeature wd:Q146786 .
        wd:L525-S1 a ontolex:LexicalSense ; skos:definition ?gloss }""")
    audio = "http://commons.wikimedia.org/wiki/Special:FilePath/LL-Q150%20%28fra%29-0x010C-maisons.wav"
    assert ask(store, f"ASK {{ wd:L525-F1 wdt:P443 <{audio}> }}")
    # form statements live on the form: L525-F1$079b... → wds:L525-F1-079b...
    assert ask(store, "ASK { wd:L525-F1 p:P443 wds:L525-F1-079bdca7-5130-4f9f-bac9-e8d032c38263 }")


def test_conversion_is_deterministic(entities, store, capsys):
    size = len(store)
    for entity in entities.values():
        store.extend(entity_to_quads(entity))  # same quads again, blank nodes included
    assert len(store) == size
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(("break_it", "message"), [
    (lambda e: e["claims"]["P1"][0]["mainsnak"].update(datatype="hologram", datavalue={"type": "string",
                                                                                         "value": "x"}),
     r"Q5 claim Q5\$a: unknown datatype 'hologram'"),
    (lambda e: e["claims"]["P1"][0].update(rank="best"), r"Q5 claim Q5\$a: unknown rank 'best'"),
    (lambda e: e["claims"]["P1"][0].pop("mainsnak"), r"Q5 claim Q5\$a: missing 'mainsnak'"),
    (lambda e: e["claims"]["P1"][0]["mainsnak"]["datavalue"].update(type="blob"),
     r"Q5 claim Q5\$a: unknown value type 'blob'"),
    (lambda e: e.update(type="mediainfo"), r"Q5: .*unsupported entity type 'mediainfo'"),
    (lambda e: e.update(sitelinks={"x": {"site": "??", "title": "T"}}), r"Q5: .*unknown site '\?\?'"),
])
def test_malformed_entities_raise_value_error(break_it, message):
    entity = item("Q5", {"P1": [statement("Q5$a", "normal", item_snak("P1", "Q2"))]})
    broken = copy.deepcopy(entity)
    break_it(broken)
    with pytest.raises(ValueError, match=message):
        entity_to_quads(broken)
    assert list(entity_to_quads(entity))  # the intact entity converts
