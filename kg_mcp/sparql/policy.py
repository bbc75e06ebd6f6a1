"""What a user's query may name: the graphs it reads, the services and functions it calls.

The writer (kg_mcp.sparql.writer) asks these questions of every IRI it is about to write, after
resolving it to the absolute IRI it will write; so the answer holds for exactly what the engine
is sent, whatever spelling the query used (a prefix, the empty prefix, BASE and a relative IRI,
escaped local names, codepoint escapes).
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass

from kg_mcp.errors import QueryRefused

# Where an IRI stands in a triple pattern, for the check against the KG: a relation, the class of
# `?x a C` (rdf:type), or a node (subject or object). Here, not in the writer, so that what reads
# them does not import rdflib's parser.
PREDICATE, CLASS, NODE = "predicate", "class", "node"

XSD = "http://www.w3.org/2001/XMLSchema#"
# Services that run inside the endpoint itself and fetch nothing (Wikidata's label service).
INTERNAL_SERVICES = {"wikidata": frozenset({"http://wikiba.se/ontology#label"})}
# Functions called by IRI that may run: casts to an XSD type (`xsd:integer(?x)`; the papers' gold
# queries use xsd:datetime, xsd:integer and xsd:float) and GeoSPARQL's distance, which Wikidata's
# coordinates are queried with. Everything else an engine would run by IRI is its own extension:
# Virtuoso runs any of its SQL procedures that way (`bif:http_get` fetches any URL on a stock
# install, `sql:NAME` calls DB.DBA.NAME, tested), Jena loads Java classes named by `java:` IRIs.
_XSD_CAST = re.compile(re.escape(XSD) + "[A-Za-z]+")
ALLOWED_FUNCTIONS = frozenset({"http://www.opengis.net/def/function/geosparql/distance"})
# IRIs that name an engine's own procedures wherever they stand: Virtuoso's `bif:` and `sql:` (it
# knows both without a PREFIX) and their long form, and Jena's `java:`. Compared lower-cased and
# percent-decoded, so that no spelling of them is missed.
ENGINE_NAMESPACES = ("bif:", "sql:", "http://www.openlinksw.com/schemas/bif#", "java:")
# Virtuoso's text search predicate reads only the endpoint's own full-text index: allowed as a
# predicate (`?o bif:contains "word"`), as kg-mcp's own find_entities queries use it.
ALLOWED_ENGINE_PREDICATES = frozenset({"bif:contains"})


@dataclass(frozen=True)
class QueryPolicy:
    """The limits a query is written under.

    `graphs`: the named graphs the query may read, written into it as its dataset (FROM and FROM
    NAMED); empty: the store or endpoint as it answers. Today the server's --graph (or the data
    graphs it chose, kg_mcp.backends.named_graphs); a caller's granted graphs can narrow it.
    `services`: the SERVICE IRIs that may be called (an endpoint's internal services).
    `prefixes`: (name, namespace) pairs declared for every query, the ones the tools print ids with
    (kg_mcp.sparql.prefixes); a PREFIX of the query's own wins over them. They are resolved by the
    writer, as the query's own are, so the text that runs names every IRI in full."""

    graphs: tuple[str, ...] = ()
    services: frozenset[str] = frozenset()
    prefixes: tuple[tuple[str, str], ...] = ()

    def check_iri(self, iri: str, *, predicate: bool = False) -> None:
        """Refuse an IRI that names an engine's own procedure (bif:contains as a predicate aside)."""
        folded = urllib.parse.unquote(iri).lower()
        if not folded.startswith(ENGINE_NAMESPACES):
            return
        if predicate and folded in ALLOWED_ENGINE_PREDICATES:
            return
        raise QueryRefused(
            f"<{iri[:80]}> names one of the engine's own built-in procedures, which are not allowed: "
            "some of them reach other machines.",
            "Use SPARQL's standard functions (STR, REGEX, CONTAINS, ...) instead.",
        )

    def check_function(self, iri: str) -> None:
        """Refuse a function called by an IRI outside the allow-list."""
        self.check_iri(iri)
        if _XSD_CAST.fullmatch(iri) or iri in ALLOWED_FUNCTIONS:
            return
        raise QueryRefused(
            f"The function <{iri[:80]}> is not one kg-mcp runs: engines run their own extensions by "
            "IRI, and some reach other machines.",
            "Use SPARQL's built-in functions (STR, REGEX, CONTAINS, YEAR, ...) and casts such as "
            "xsd:integer(?x) only.",
        )

    def check_service(self, term: str | None) -> None:
        """Refuse a SERVICE call (`term`: its IRI, None for a variable) other than to one of the
        endpoint's own internal services."""
        if term is not None and term in self.services:
            return
        raise refused_service(f"<{term[:100]}>" if term else "with a variable")

    def check_graph(self, iri: str) -> None:
        """Refuse a GRAPH pattern on a named graph outside the dataset."""
        if not self.graphs or iri in self.graphs:
            return
        shown = ", ".join(f"<{g}>" for g in self.graphs[:10]) + (" ..." if len(self.graphs) > 10 else "")
        raise QueryRefused(
            f"GRAPH <{iri[:100]}> is not one of the graphs this server reads ({shown}).",
            "Query without GRAPH (the default graph holds them all), or name one of those graphs.",
        )


def policy_for(profile_name: str, *, remote: bool, graphs: tuple[str, ...] = (),
               prefixes: tuple[tuple[str, str], ...] = ()) -> QueryPolicy:
    """The policy of a query on a backend of `profile_name`: an endpoint (`remote`) may run its own
    internal services, a local store would make an HTTP request for them instead; `prefixes` are
    declared for the query (QueryPolicy)."""
    services = INTERNAL_SERVICES.get(profile_name, frozenset()) if remote else frozenset()
    return QueryPolicy(graphs=tuple(graphs), services=services, prefixes=tuple(prefixes))


def refused_dataset() -> QueryRefused:
    # The server chooses the graphs every query reads, and Virtuoso would merge a query's own FROM
    # with them.
    return QueryRefused(
        "FROM / FROM NAMED clauses are not allowed.",
        "Query without FROM: every query already reads the KG's graphs.",
    )


def refused_update() -> QueryRefused:
    return QueryRefused(
        "This is an update (INSERT, DELETE, LOAD, CLEAR, DROP, CREATE...); the KG is read-only.",
        "Only SELECT and ASK queries can run.",
    )


def refused_service(target: str) -> QueryRefused:
    return QueryRefused(
        f"SERVICE {target + ' ' if target else ''}is not allowed: queries may not call other services.",
        "Remove the SERVICE clause; query this KG only.",
    )
