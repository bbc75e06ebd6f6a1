"""The KG's classes and declared properties, read once per backend and graph set where that is cheap.

A class is the object of some rdf:type, or a node declared owl:Class or rdfs:Class; a declared
property is a node typed rdf:Property or one of OWL's property types. An ontology declares many of
both that no triple of it uses (its classes have no instances in it, its properties link nothing):
the sparql tool offers them as the nearest to a misspelled name all the same, saying so. Read only
on a local store the census counted whole (kg_mcp.schema.census.EXACT_UP_TO): a few aggregate
queries over a few hundred thousand triples. On an endpoint or a bigger store the lists are empty,
and the name index finds such terms by name instead.
"""

from __future__ import annotations

import weakref

import pyoxigraph as ox

from kg_mcp.backends import Backend, graph_access
from kg_mcp.namespaces import OWL, RDF, RDF_TYPE, RDFS
from kg_mcp.schema.census import Census

MAX_TERMS = 50_000  # classes (or properties) read at most
CLASS_TYPES = (OWL + "Class", RDFS + "Class")
PROPERTY_TYPES = (RDF + "Property", OWL + "ObjectProperty", OWL + "DatatypeProperty", OWL + "AnnotationProperty")

_lists: weakref.WeakKeyDictionary[Backend, dict[tuple[str, str], dict[str, int]]] = weakref.WeakKeyDictionary()


def class_list(backend: Backend, census: Census | None) -> dict[str, int]:
    """IRI -> instances of every class of the KG the caller reads (the module docstring's); empty
    where the census did not count the KG whole."""
    return _read(backend, census, "classes", lambda: _classes(backend))


def declared_properties(backend: Backend, census: Census | None) -> set[str]:
    """The IRIs the KG declares as properties (the module docstring's); empty as class_list is."""
    return set(_read(backend, census, "properties", lambda: _declared(backend, PROPERTY_TYPES)))


def _read(backend: Backend, census: Census | None, what: str, read) -> dict[str, int]:
    if backend.kind != "oxigraph" or census is None or census.triples_basis != "exact":
        return {}
    lists = _lists.setdefault(backend, {})
    key = (what, graph_access.cache_key())
    if key not in lists:
        lists[key] = read()
    return lists[key]


def _classes(backend: Backend) -> dict[str, int]:
    found: dict[str, int] = {}
    used = f"SELECT ?c (COUNT(*) AS ?n) WHERE {{ ?s <{RDF_TYPE}> ?c }} GROUP BY ?c LIMIT {MAX_TERMS}"
    for row in backend._solutions(used):
        if isinstance(row["c"], ox.NamedNode):
            found[row["c"].value] = int(row["n"].value)
    for iri in _declared(backend, CLASS_TYPES):
        found.setdefault(iri, 0)
    return found


def _declared(backend: Backend, kinds: tuple[str, ...]) -> dict[str, int]:
    union = " UNION ".join(f"{{ ?c <{RDF_TYPE}> <{kind}> }}" for kind in kinds)
    rows = backend._solutions(f"SELECT DISTINCT ?c WHERE {{ {union} }} LIMIT {MAX_TERMS}")
    return {row["c"].value: 0 for row in rows if isinstance(row["c"], ox.NamedNode)}
