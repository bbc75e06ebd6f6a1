"""Queries written for this KG, from what its census found: the kinds of question one query answers best.

Each example is built from the KG's own terms (a hierarchy's root, a shape that has constraints, a
relation whose objects are RDF lists, its classes or its most linked entities), written with the
ids the tools print (the prefixes are declared for every query, kg_mcp.sparql.prefixes), and only
where the KG has what it needs. Finding those terms costs a few LIMIT 1 queries. kg_mcp.tools.sparql
runs every candidate through the tool before kg://examples offers it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyoxigraph as ox

from kg_mcp.backends import Backend
from kg_mcp.errors import KGError
from kg_mcp.namespaces import RDF, RDF_TYPE, RDFS_SUBCLASS, SH
from kg_mcp.schema.census import Census


@dataclass(frozen=True)
class Example:
    title: str  # the question it answers
    query: str


def example_queries(backend: Backend, census: Census | None) -> list[Example]:
    """Candidate queries for this KG (not yet run), most telling first."""
    if census is None:
        return []
    used = {r.iri for r in census.relations}
    found: list[Example] = []
    for make in (_hierarchy, _shape, _list, _count_per_class, _count_per_value):
        try:
            example = make(backend, census, used)
        except KGError:  # an endpoint that refused or timed out: that example is left out
            example = None
        if example is not None:
            found.append(example)
    return found


def _id(backend: Backend, node: ox.NamedNode | str) -> str:
    """`node` (or an id as the tools print it) as a query writes it: an id printed bare (`directed_by`)
    takes the empty prefix, declared for the namespace of bare ids."""
    if isinstance(node, str):
        parsed = backend.vocab.parse_relation(node)
        if not isinstance(parsed, ox.NamedNode):
            return node
        node = parsed
    shown = backend.vocab.compact(node)
    if shown.startswith("<") or ":" in shown:
        return shown
    bare = backend.vocab.bare_namespaces
    return f":{shown}" if bare and node.value == bare[0] + shown else f"<{node.value}>"


def _first(backend: Backend, query: str, var: str) -> ox.NamedNode | None:
    rows = backend._solutions(query)
    node = next((row[var] for row in rows), None)
    return node if isinstance(node, ox.NamedNode) else None


def _hierarchy(backend: Backend, census: Census, used: set[str]) -> Example | None:
    subclass = _id(backend, ox.NamedNode(RDFS_SUBCLASS))
    if census.roots:
        root = census.roots[0]
        relation, top = _id(backend, root.relation), _id(backend, root.id)
    elif RDFS_SUBCLASS in used:
        node = _first(backend, f"SELECT ?c WHERE {{ ?x <{RDFS_SUBCLASS}> ?c FILTER(isIRI(?c)) }} LIMIT 1", "c")
        if node is None:
            return None
        relation, top = subclass, _id(backend, node)
    else:
        return None
    return Example(
        f"Every node below {top} at any depth, named ones only (a hierarchy walked with {relation}+)",
        f"SELECT ?c WHERE {{ ?c {relation}+ {top} . FILTER(isIRI(?c)) }} ORDER BY ?c LIMIT 100",
    )


def _shape(backend: Backend, census: Census, used: set[str]) -> Example | None:
    if SH + "property" not in used:
        return None
    shape = _first(backend, f"SELECT ?s WHERE {{ ?s <{SH}property> ?p . ?p <{SH}path> ?path FILTER(isIRI(?s)) }} LIMIT 1", "s")
    if shape is None:
        return None
    sh = _id(backend, ox.NamedNode(SH + "property")).rsplit(":", 1)[0] + ":"
    if not sh.startswith(("sh:",)):
        return None  # the shapes vocabulary has no prefix here: the example would be unreadable
    return Example(
        f"The constraints of the shape {_id(backend, shape)}: each property's path, datatype or class, and counts",
        f"SELECT ?path ?datatype ?class ?min ?max WHERE {{ {_id(backend, shape)} sh:property ?p . ?p sh:path ?path . "
        "OPTIONAL { ?p sh:datatype ?datatype } OPTIONAL { ?p sh:class ?class } "
        "OPTIONAL { ?p sh:minCount ?min } OPTIONAL { ?p sh:maxCount ?max } } ORDER BY ?path",
    )


def _list(backend: Backend, census: Census, used: set[str]) -> Example | None:
    if RDF + "first" not in used:
        return None
    holder = _first(
        backend,
        f"SELECT ?p WHERE {{ ?s ?p ?l . ?l <{RDF}first> ?x FILTER(?p != <{RDF}rest>) }} LIMIT 1",
        "p",
    )
    if holder is None:
        return None
    relation = _id(backend, holder)
    rest, first = _id(backend, ox.NamedNode(RDF + "rest")), _id(backend, ox.NamedNode(RDF + "first"))
    return Example(
        f"The members of the RDF lists held by {relation}, in one query (a list is walked with {rest}*/{first})",
        f"SELECT ?owner ?member WHERE {{ ?owner {relation} ?list . ?list {rest}*/{first} ?member }} LIMIT 100",
    )


def _count_per_class(backend: Backend, census: Census, used: set[str]) -> Example | None:
    if census.roots and census.shape == "ontology":
        root = census.roots[0]
        relation, top = _id(backend, root.relation), _id(backend, root.id)
        return Example(
            f"How many nodes are below each class directly under {top} (a count per class)",
            f"SELECT ?class (COUNT(DISTINCT ?below) AS ?n) WHERE {{ ?class {relation} {top} . "
            f"?below {relation}+ ?class . FILTER(isIRI(?class) && isIRI(?below)) }} "
            "GROUP BY ?class ORDER BY DESC(?n) LIMIT 20",
        )
    if RDF_TYPE not in used or census.relations_basis != "exact":
        return None  # a count over every typed node of a big KG is no example to copy
    kind = _id(backend, ox.NamedNode(RDF_TYPE))
    return Example(
        "How many nodes each class has (a count per class)",
        f"SELECT ?class (COUNT(?x) AS ?n) WHERE {{ ?x {kind} ?class }} GROUP BY ?class ORDER BY DESC(?n) LIMIT 20",
    )


def _count_per_value(backend: Backend, census: Census, used: set[str]) -> Example | None:
    """On a KG of facts: the values of its busiest hub's relation, counted (the hub's own relation)."""
    if census.shape == "ontology" or not census.hubs or not census.hubs[0].relations or census.relations_basis != "exact":
        return None
    relation = _id(backend, census.hubs[0].relations[0][0])
    return Example(
        f"The 20 values of {relation} that the most entities share, with how many (a count per value)",
        f"SELECT ?value (COUNT(?x) AS ?n) WHERE {{ ?x {relation} ?value }} GROUP BY ?value ORDER BY DESC(?n) LIMIT 20",
    )
