"""Schema profiles: what a KG's vocabulary looks like, as data the backends read.

A profile says where labels and descriptions live, which prefixes to show, which predicates are
bookkeeping rather than facts (hidden from neighbourhoods), how a predicate finds the entity that
carries its label (Wikidata's wdt:P19 is described by wd:P19), and how statements with
qualifiers are modelled. Tools never branch on the profile; backends consult it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from kg_mcp.namespaces import RDF_TYPE, RDFS_LABEL

RDFS = "http://www.w3.org/2000/01/rdf-schema#"
SKOS = "http://www.w3.org/2004/02/skos/core#"
SCHEMA = "http://schema.org/"
OWL = "http://www.w3.org/2002/07/owl#"
DCTERMS = "http://purl.org/dc/terms/"
FOAF = "http://xmlns.com/foaf/0.1/"

COMMON_PREFIXES = {
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "rdfs": RDFS,
    "xsd": "http://www.w3.org/2001/XMLSchema#",
    "owl": OWL,
    "skos": SKOS,
    "schema": SCHEMA,
    "sh": "http://www.w3.org/ns/shacl#",
    "dcterms": DCTERMS,
}

WD = "http://www.wikidata.org/entity/"
WD_PROP = "http://www.wikidata.org/prop/"
WIKIBASE = "http://wikiba.se/ontology#"
FREEBASE = "http://rdf.freebase.com/ns/"


@dataclass(frozen=True)
class StatementModel:
    """Reified statements with qualifiers (Wikidata): p:Pn → statement node → ps:Pn value, pq:Pm qualifiers."""

    direct: str  # namespace of truthy predicates, e.g. wdt:
    claim: str  # entity → statement node, e.g. p:
    value: str  # statement node → main value, e.g. ps:
    qualifier: str  # statement node → qualifier values, e.g. pq:
    value_node: str = ""  # statement node → full value node (psv:), which carries a date's precision
    qualifier_node: str = ""  # statement node → full qualifier value node (pqv:)
    time_precision: str = ""  # value node → precision of a date (9 year, 10 month, 11 day)


@dataclass(frozen=True)
class Profile:
    name: str
    prefixes: dict[str, str]
    # The vocabularies of published RDF, best first: the first in the preferred language wins.
    label_predicates: tuple[str, ...] = (RDFS_LABEL, SKOS + "prefLabel", SCHEMA + "name", DCTERMS + "title", FOAF + "name")
    # Other names of an entity, found by find_entities (and shown as an `alias` match).
    alias_predicates: tuple[str, ...] = (SKOS + "altLabel", SKOS + "hiddenLabel")
    description_predicates: tuple[str, ...] = (
        SKOS + "definition", RDFS + "comment", DCTERMS + "description", SCHEMA + "description"
    )
    # Predicates (and namespaces) that are bookkeeping, not facts: left out of neighbourhoods.
    hidden_predicates: frozenset[str] = frozenset()
    hidden_namespaces: tuple[str, ...] = ()
    # Namespaces whose nodes are shown in full even if hidden above (e.g. Wikidata statement nodes).
    unhide_for_subjects_in: tuple[str, ...] = ()
    # Namespace shown without a prefix (Freebase's m.0v1xv); more are added from store metadata.
    bare_namespace: str | None = None
    # Bare tokens that are ids in this profile (Q42, m.0v1xv) and the namespace they expand into.
    bare_id_pattern: str | None = None
    bare_id_namespace: str | None = None
    # (regex, replacement) turning a property entity into the predicate used in facts (wd:P19 → wdt:P19).
    relation_of_entity: tuple[str, str] | None = None
    # (regex over a predicate IRI, replacement) giving the entity that carries its label.
    property_entity: tuple[str, str] | None = None
    statements: StatementModel | None = None
    # Entity search service of the public endpoint (Wikidata's mwapi), used only on that endpoint.
    entity_search: str | None = None
    # (predicate, object) that marks a property entity as an external identifier (an ISNI, a VIAF
    # id): such properties are summed up in one line of a large neighbourhood instead of listed.
    identifier_mark: tuple[str, str] | None = None
    # Shown as the label of a bare-id node that has no name (Freebase's mediator/CVT nodes), so a
    # model knows to search through it instead of taking the blank as a dead end.
    unnamed_node_label: str | None = None

    def unnamed_label_of(self, iri: str) -> str | None:
        """The label an unnamed node with this IRI gets, or None when the profile has no such nodes."""
        namespace, pattern = self.bare_namespace, self.bare_id_pattern
        if self.unnamed_node_label and namespace and pattern and iri.startswith(namespace):
            return self.unnamed_node_label if re.fullmatch(pattern, iri[len(namespace) :]) else None
        return None

    def is_hidden(self, predicate: str) -> bool:
        return predicate in self.hidden_predicates or predicate.startswith(self.hidden_namespaces)

    def hidden_around(self, subject: str) -> Callable[[str], bool] | None:
        """The test leaving bookkeeping predicates out of `subject`'s edges; None where nothing is
        hidden (a Wikidata statement node shows its qualifiers)."""
        return None if subject.startswith(self.unhide_for_subjects_in) else self.is_hidden

    def property_entity_of(self, predicate: str) -> str:
        """The IRI whose label names `predicate` (itself, unless the profile maps it)."""
        if self.property_entity:
            pattern, replacement = self.property_entity
            mapped, n = re.subn(pattern, replacement, predicate)
            if n:
                return mapped
        return predicate

    def bare_id(self, token: str) -> str | None:
        namespace = self.bare_id_namespace or self.bare_namespace
        if self.bare_id_pattern and namespace and re.fullmatch(self.bare_id_pattern, token):
            return namespace + token
        return None

    def relation_of(self, iri: str) -> str:
        """The predicate a property entity stands for in facts (itself, unless the profile maps it)."""
        if self.relation_of_entity:
            pattern, replacement = self.relation_of_entity
            return re.sub(pattern, replacement, iri)
        return iri


_LABELS = frozenset({RDFS_LABEL, SKOS + "prefLabel", SKOS + "altLabel", SCHEMA + "name", SCHEMA + "description"})
# Only the names shown beside every id are left out of a generic KG's listings: aliases and
# descriptions are shown nowhere else, and a `search` filtered to a label lists every one.
_SHOWN_BESIDE_IDS = frozenset(Profile.__dataclass_fields__["label_predicates"].default)

WIKIDATA = Profile(
    name="wikidata",
    prefixes={
        **COMMON_PREFIXES,
        "wd": WD,
        "wdt": WD_PROP + "direct/",
        "p": WD_PROP,
        "ps": WD_PROP + "statement/",
        "pq": WD_PROP + "qualifier/",
        "pr": WD_PROP + "reference/",
        "wdno": WD_PROP + "novalue/",
        "wds": WD + "statement/",
        "wdref": "http://www.wikidata.org/reference/",
        "wdv": "http://www.wikidata.org/value/",
        "wikibase": WIKIBASE,
        "prov": "http://www.w3.org/ns/prov#",
    },
    # skos:prefLabel and schema:name repeat rdfs:label on entities, and schema:name also names
    # sitelinks (Wikipedia pages), which must not be found as entities.
    label_predicates=(RDFS_LABEL,),
    description_predicates=(SCHEMA + "description",),
    hidden_predicates=_LABELS
    | {
        RDF_TYPE,
        SCHEMA + "about",
        SCHEMA + "version",
        SCHEMA + "dateModified",
        WIKIBASE + "statements",
        WIKIBASE + "sitelinks",
        WIKIBASE + "identifiers",
        WIKIBASE + "timestamp",
        "http://www.w3.org/ns/prov#wasDerivedFrom",
    },
    # Truthy wdt: triples are the facts; statement links and value nodes duplicate them.
    # Qualifiers are attached to the truthy rows instead (see StatementModel).
    hidden_namespaces=(
        WD_PROP + "P",
        WD_PROP + "statement/",
        WD_PROP + "qualifier/",
        WD_PROP + "reference/",
        WD_PROP + "direct-normalized/",
        WD_PROP + "novalue/",
        "http://www.wikidata.org/value/",
    ),
    unhide_for_subjects_in=(WD + "statement/",),
    bare_id_pattern=r"[QPL][1-9][0-9]*",
    bare_id_namespace=WD,
    relation_of_entity=(r"^http://www\.wikidata\.org/entity/(P[0-9]+)$", WD_PROP + r"direct/\1"),
    property_entity=(r"^http://www\.wikidata\.org/prop/(?:[a-z-]+/)*(P[0-9]+)$", WD + r"\1"),
    statements=StatementModel(
        direct=WD_PROP + "direct/",
        claim=WD_PROP,
        value=WD_PROP + "statement/",
        qualifier=WD_PROP + "qualifier/",
        value_node=WD_PROP + "statement/value/",
        qualifier_node=WD_PROP + "qualifier/value/",
        time_precision=WIKIBASE + "timePrecision",
    ),
    entity_search="mwapi",
    identifier_mark=(WIKIBASE + "propertyType", WIKIBASE + "ExternalId"),
)

FREEBASE_PROFILE = Profile(
    name="freebase",
    prefixes={**COMMON_PREFIXES, "ns": FREEBASE, "fb": FREEBASE},
    label_predicates=(FREEBASE + "type.object.name", RDFS_LABEL),
    alias_predicates=(FREEBASE + "common.topic.alias",),
    description_predicates=(FREEBASE + "common.topic.description",),
    hidden_predicates=frozenset({FREEBASE + "type.object.name", RDFS_LABEL, FREEBASE + "common.topic.description"}),
    bare_namespace=FREEBASE,
    bare_id_pattern=r"[mg]\.[0-9a-z_]+",
    unnamed_node_label="(unnamed mediator node: it has no name; its own relations lead to the entities it links)",
)

DBPEDIA = Profile(
    name="dbpedia",
    prefixes={
        **COMMON_PREFIXES,
        "dbr": "http://dbpedia.org/resource/",
        "dbo": "http://dbpedia.org/ontology/",
        "dbp": "http://dbpedia.org/property/",
        "foaf": "http://xmlns.com/foaf/0.1/",
        "prov": "http://www.w3.org/ns/prov#",
    },
    # DBpedia keeps the labels it always had: every label predicate costs a join on a large endpoint.
    label_predicates=(RDFS_LABEL, SKOS + "prefLabel", SCHEMA + "name"),
    description_predicates=("http://dbpedia.org/ontology/abstract", RDFS + "comment"),
    hidden_predicates=_LABELS
    | {
        RDFS + "comment",
        "http://dbpedia.org/ontology/abstract",
        "http://dbpedia.org/ontology/wikiPageID",
        "http://dbpedia.org/ontology/wikiPageRevisionID",
        "http://dbpedia.org/ontology/wikiPageLength",
        "http://dbpedia.org/ontology/wikiPageWikiLink",
        "http://www.w3.org/ns/prov#wasDerivedFrom",
    },
)

GENERIC = Profile(name="generic", prefixes=dict(COMMON_PREFIXES), hidden_predicates=_SHOWN_BESIDE_IDS)

PROFILES = {p.name: p for p in (WIKIDATA, FREEBASE_PROFILE, DBPEDIA, GENERIC)}

# ASK probes for detection, most specific first: (profile, a predicate or namespace it uses).
DETECTION_PROBES = (
    (WIKIDATA, WIKIBASE + "directClaim"),
    (WIKIDATA, WD_PROP + "direct/P31"),
    (FREEBASE_PROFILE, FREEBASE + "type.object.name"),
    (DBPEDIA, "http://dbpedia.org/ontology/abstract"),
    (DBPEDIA, "http://dbpedia.org/ontology/wikiPageID"),
)


def detect_profile(ask: Callable[[str], bool]) -> Profile:
    """The profile whose predicates the KG uses, from ASK queries run by `ask` (GENERIC if none)."""
    for candidate, predicate in DETECTION_PROBES:
        if ask(f"ASK {{ ?s <{predicate}> ?o }}"):
            return candidate
    return GENERIC


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}") from None
