"""Whether a KG is an ontology, and what an ontology's summary shows first.

An ontology-shaped KG (a vocabulary, a SHACL shapes graph, a SKOS thesaurus) is one whose named
subjects are mostly classes, properties, shapes or concepts. Its summary leads with those kinds,
the roots of its hierarchies and its own (domain) relations, and sums the OWL, SHACL and RDFS
machinery (rdf:type, sh:property, owl:equivalentClass, rdf:first ...) up in one line; terms of those
vocabularies are never named as its hubs or as the example of its ids. kg_mcp.schema.census reads
these figures (exactly, on a KG small enough to count) and kg_mcp.schema.summary writes them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyoxigraph as ox

from kg_mcp.backends.base import Backend
from kg_mcp.namespaces import OWL, RDF, RDFS, RDFS_SUBCLASS, RDFS_SUBPROPERTY, SH, SKOS, XSD
from kg_mcp.profiles import Profile

DASH = "http://datashapes.org/dash#"
# Namespaces of the modelling languages themselves: their terms are machinery, not the KG's content.
MACHINERY = (RDF, RDFS, OWL, SH, DASH, XSD)
# Relations that build a hierarchy, read upwards (a subclass to its superclass, a concept to a
# broader one); the summary shows the roots of the first two.
HIERARCHIES = (RDFS_SUBCLASS, SKOS + "broader", RDFS_SUBPROPERTY)
ROOTED = HIERARCHIES[:2]
_DOWNWARDS = (SKOS + "narrower",)
# The kinds of subject that make a KG an ontology.
VOCABULARY_TYPES = tuple(
    [OWL + t for t in ("Class", "ObjectProperty", "DatatypeProperty", "AnnotationProperty", "Ontology", "Restriction")]
    + [RDFS + "Class", RDF + "Property", SH + "NodeShape", SH + "PropertyShape", SKOS + "Concept", SKOS + "ConceptScheme"]
)
ONTOLOGY_SHARE = 0.5  # of the named subjects typed with one of VOCABULARY_TYPES
ROOTS_SHOWN = 4  # over all hierarchies, those with most below first
CHILDREN_SHOWN = 3


@dataclass(frozen=True)
class Root:
    """The top of a hierarchy: a node with others below it and nothing above it."""

    id: str
    label: str | None
    relation: str  # the hierarchy's relation as the tools show it (rdfs:subClassOf)
    below: int  # nodes below it at any depth
    children: tuple[str, ...]  # ids of some nodes directly below it
    direct: int = 0  # named nodes directly below it, all of them


def relation_kind(iri: str, profile: Profile) -> str:
    """"name" (labels, aliases, descriptions), "hierarchy", "machinery" (OWL, SHACL, RDFS terms)
    or "domain" (the KG's own relations)."""
    if iri in profile.label_predicates or iri in profile.alias_predicates or iri in profile.description_predicates:
        return "name"
    if iri in HIERARCHIES or iri in _DOWNWARDS:
        return "hierarchy"
    return "machinery" if is_vocabulary_term(iri) else "domain"


def is_vocabulary_term(iri: str) -> bool:
    return iri.startswith(MACHINERY)


def kinds_of_subjects(kg: Backend, named: int) -> tuple[float, list[tuple[str, int]]]:
    """(share of the `named` subjects typed as classes, properties, shapes or concepts, those types
    with their named subjects, most first)."""
    types = " ".join(f"<{t}>" for t in VOCABULARY_TYPES)
    typed = kg._count(f"SELECT (COUNT(DISTINCT ?s) AS ?n) WHERE {{ VALUES ?t {{ {types} }} ?s a ?t FILTER(isIRI(?s)) }}")
    rows = kg._solutions(
        f"SELECT ?t (COUNT(DISTINCT ?s) AS ?n) WHERE {{ VALUES ?t {{ {types} }} ?s a ?t FILTER(isIRI(?s)) }} "
        "GROUP BY ?t ORDER BY DESC(?n)"
    )
    kinds = [(kg.vocab.compact(r["t"]), int(r["n"].value)) for r in rows if isinstance(r["t"], ox.NamedNode)]
    return (typed / named if named else 0.0), kinds


def hierarchy_roots(kg: Backend, relation: str) -> list[Root]:
    """The roots of the hierarchy `relation` builds (read upwards), those with most below first."""
    up = f"<{relation}>"
    rows = kg._solutions(
        f"SELECT ?r (COUNT(DISTINCT ?c) AS ?n) WHERE {{ ?c {up} ?r FILTER(isIRI(?r) && isIRI(?c) && ?c != ?r) "
        f"FILTER NOT EXISTS {{ ?r {up} ?above FILTER(isIRI(?above) && ?above != ?r) }} }} GROUP BY ?r ORDER BY DESC(?n) ?r LIMIT 40"
    )
    tops = [r["r"] for r in rows if isinstance(r["r"], ox.NamedNode)]
    sized = []
    for top in tops:
        below = kg._count(f"SELECT (COUNT(DISTINCT ?c) AS ?n) WHERE {{ ?c {up}+ {top} FILTER(isIRI(?c) && ?c != {top}) }}")
        sized.append((below, top))
    sized.sort(key=lambda x: (-x[0], x[1].value))
    chosen = sized[:ROOTS_SHOWN]
    labels = kg.labels([top for _, top in chosen])
    roots = []
    for below, top in chosen:
        direct = kg._solutions(
            f"SELECT ?c (COUNT(?d) AS ?n) WHERE {{ ?c {up} {top} FILTER(isIRI(?c) && ?c != {top}) "
            f"OPTIONAL {{ ?d {up} ?c }} }} GROUP BY ?c ORDER BY DESC(?n) ?c LIMIT {CHILDREN_SHOWN}"
        )
        children = tuple(kg.vocab.compact(r["c"]) for r in direct if isinstance(r["c"], ox.NamedNode))
        count = kg._count(f"SELECT (COUNT(DISTINCT ?c) AS ?n) WHERE {{ ?c {up} {top} FILTER(isIRI(?c) && ?c != {top}) }}")
        roots.append(Root(kg.vocab.compact(top), labels.get(top), kg.vocab.compact(ox.NamedNode(relation)), below, children,
                          count))
    return roots
