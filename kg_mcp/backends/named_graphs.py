"""Which named graphs of an endpoint kg-mcp reads: the ones chosen (--graph), or its data graphs.

Engines keep their own graphs beside the data. A stock Virtuoso holds its RDF-view schema
(`virtrdf#`), an OWL and an LDP ontology, the DAV folder's metadata and a service description,
and its default graph is the union of every graph: the first triples an unrestricted query meets
are Virtuoso's own, not the data. `oxigraph serve` (like Fuseki and Stardog) keeps its default
graph apart from the named graphs, so data loaded into a named graph is not seen at all without
a dataset. So, once at start:

- with --graph, each graph must hold triples, and every query reads those graphs only;
- without it, the named graphs are listed (bounded queries); when the engine's own graphs are
  among them, or the default graph is empty, every query reads the data graphs (all but the
  engine's own), as long as they are few enough to name in each request;
- otherwise the endpoint is read as it answers, its default graph.

The graphs travel with each request as the SPARQL protocol's `default-graph-uri` and
`named-graph-uri` parameters (kg_mcp.backends.http_transport), so the queries themselves are the
same on every engine.
"""

from __future__ import annotations

import logging
import re
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import pyoxigraph as ox

from kg_mcp.errors import ConfigError, InvalidInput

log = logging.getLogger(__name__)

LISTED_GRAPHS = 1000  # graph names read at start; past it the endpoint is read as it answers
MAX_IMPLIED_GRAPHS = 100  # data graphs named in every request when none was chosen
SHOWN_GRAPHS = 30  # graphs named in an error or counted by `info`

# Graphs an engine keeps for itself (exact IRIs), from stock instances and the engines' manuals.
SYSTEM_GRAPHS = {
    # Virtuoso 7, a stock Debian instance: its RDF views' schema, ontologies it ships.
    "http://www.openlinksw.com/schemas/virtrdf#": "Virtuoso",
    "http://www.w3.org/2002/07/owl#": "Virtuoso",
    "http://www.w3.org/ns/ldp#": "Virtuoso",
    "http://www.openlinksw.com/schemas/RDF_Mapper_Ontology/1.0/": "Virtuoso",
    "virtrdf-label": "Virtuoso",
    # GraphDB: the pseudo-graphs of its explicit and of its inferred statements. (RDF4J's rdf4j:nil,
    # Blazegraph's nullGraph and Neptune's DefaultNamedGraph name where triples loaded without a
    # graph go: data, so they are not here.)
    "http://www.ontotext.com/explicit": "GraphDB",
    "http://www.ontotext.com/implicit": "GraphDB",
    # kg-mcp's own bookkeeping (kg_mcp.namespaces.META_GRAPH) and load-time statistics
    # (kg_mcp.hubs), in a store served by `oxigraph serve`.
    "urn:kg-mcp:meta": "kg-mcp",
    "urn:kg-mcp:stats": "kg-mcp",
}
# Virtuoso names these after its host (URIQA DefaultHost): the DAV folder's metadata and the
# endpoint's service description. Stardog's special graphs (all, local, named, virtual, default)
# share one prefix.
SYSTEM_PATTERNS = (
    (re.compile(r"https?://[^/]+/DAV/?"), "Virtuoso"),
    (re.compile(r"https?://[^/]+/sparql/?"), "Virtuoso"),
    (re.compile(r"tag:stardog:api:.*"), "Stardog"),
)

LIST_EMPTY_PATTERN = f"SELECT DISTINCT ?g WHERE {{ GRAPH ?g {{ }} }} LIMIT {LISTED_GRAPHS}"
LIST_BY_TRIPLES = f"SELECT DISTINCT ?g WHERE {{ GRAPH ?g {{ ?s ?p ?o }} }} LIMIT {LISTED_GRAPHS}"
ANY_TRIPLE = "ASK { ?s ?p ?o }"
CHOSEN = "the graphs chosen with --graph"


def engine_of_graph(iri: str) -> str | None:
    """The engine that keeps `iri` for itself, or None for a data graph.

    >>> engine_of_graph("http://localhost:8890/DAV/"), engine_of_graph("http://example.org/movies")
    ('Virtuoso', None)
    """
    if iri in SYSTEM_GRAPHS:
        return SYSTEM_GRAPHS[iri]
    return next((engine for pattern, engine in SYSTEM_PATTERNS if pattern.fullmatch(iri)), None)


def url_names_graphs(url: str) -> bool:
    """Whether the endpoint URL already carries a dataset (`?default-graph-uri=...`)."""
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    return "default-graph-uri" in query or "named-graph-uri" in query


def bounded_graph_size(graph: str, cap: int) -> str:
    """Triples of `graph` among its first `cap`: exact below `cap`, a lower bound at it."""
    return (
        f"SELECT (COUNT(*) AS ?n) WHERE {{ SELECT ?s WHERE {{ GRAPH {ox.NamedNode(graph)} {{ ?s ?p ?o }} }} "
        f"LIMIT {int(cap)} }}"
    )


def ask_graph(graph: str) -> str:
    return f"ASK {{ GRAPH {ox.NamedNode(graph)} {{ ?s ?p ?o }} }}"


@dataclass(frozen=True)
class GraphSize:
    """One named graph as `info` shows it."""

    iri: str
    triples: int | None  # None: not counted (the endpoint did not answer in time)
    bounded: bool  # counted up to the cap: "at least"
    read: bool | None  # in what the backend reads (None: no dataset, so as the engine's default graph has it)
    engine: str | None  # the engine that keeps it for itself, if any


@dataclass(frozen=True)
class GraphPlan:
    """What the backend reads: `graphs` (empty: the endpoint as it answers) and why."""

    graphs: tuple[str, ...] = ()
    listed: tuple[str, ...] = ()  # every named graph found at start (bounded)
    reason: str = "the endpoint's default graph"

    @property
    def system(self) -> list[str]:
        return [g for g in self.listed if engine_of_graph(g)]

    @property
    def sampled(self) -> tuple[str, ...]:
        """The graphs namespace discovery samples: those read, or, where the engine's own graphs sit
        in a default graph read whole, the data graphs beside them (empty: the default graph)."""
        if self.graphs or not self.system:
            return self.graphs
        return tuple(g for g in self.listed if not engine_of_graph(g))


def list_graphs(
    solutions: Callable[[str], Iterable], engine: Callable[[], str | None] = lambda: None
) -> list[str]:
    """The endpoint's named graphs (at most LISTED_GRAPHS). `GRAPH ?g {}` is the cheap way where
    engines answer it (Oxigraph reads its graph list). Virtuoso answers it with nothing, and lists
    them from its graph index for the second form; elsewhere that form may read every triple, so
    it is asked of Virtuoso only (`engine()`: the engine recognised by the first answer)."""
    found: list[str] = []
    for query in (LIST_EMPTY_PATTERN, LIST_BY_TRIPLES):
        if query is LIST_BY_TRIPLES and engine() != "virtuoso":
            break
        try:
            rows = solutions(query)
        except InvalidInput as e:  # an engine without named graphs may refuse GRAPH; one that fails says so
            log.info("the endpoint did not list its graphs (%s)", e.message)
            continue
        if not isinstance(rows, list):  # an endpoint that answers a SELECT oddly
            continue
        found = [row["g"].value for row in rows if isinstance(row["g"], ox.NamedNode)]
        if found:
            break
    return found


def first_plan(url: str, chosen: tuple[str, ...]) -> GraphPlan:
    """The graphs read before anything is asked of the endpoint: those its URL names, the chosen ones,
    or its default graph; a ConfigError when both the URL and --graph name graphs."""
    if url_names_graphs(url):
        if chosen:
            raise ConfigError(
                f"The endpoint URL {url} already names its graphs (default-graph-uri); "
                "give them either in the URL or with --graph, not both."
            )
        return GraphPlan(reason="the graphs named in the endpoint URL")
    return GraphPlan(graphs=chosen, listed=chosen, reason=CHOSEN) if chosen else GraphPlan()


def plan_graphs(url: str, chosen: Iterable[str], solutions, boolean, engine=lambda: None) -> GraphPlan:
    """The graphs to read on the endpoint at `url`; a ConfigError when a chosen one holds nothing.

    `solutions(query)` runs a SELECT and `boolean(query)` an ASK, both without a dataset;
    `engine()` names the engine once an answer has said (kg_mcp.backends.http_transport).
    """
    chosen = tuple(chosen)
    start = first_plan(url, chosen)
    if url_names_graphs(url):
        return start
    if chosen:
        missing = [g for g in chosen if not _holds_triples(boolean, g)]
        if missing:
            listed = list_graphs(solutions, engine)
            data = [g for g in listed if not engine_of_graph(g)]
            more = len(data) - SHOWN_GRAPHS
            there = ", ".join(data[:SHOWN_GRAPHS]) + (f" and {more} more" if more > 0 else "")
            raise ConfigError(
                f"No triples in the graph{'s' if len(missing) > 1 else ''} {', '.join(missing)} at {url}. "
                + (f"Its data graphs: {there}." if data else "It lists no named graphs holding data.")
                + " Run `kg-mcp info --sparql URL` to see them with their sizes."
            )
        return start
    listed = tuple(list_graphs(solutions, engine))
    data = tuple(g for g in listed if not engine_of_graph(g))
    if not data or len(listed) >= LISTED_GRAPHS:
        return GraphPlan(listed=listed)
    own = len(data) < len(listed)
    if not own and _boolean_or(boolean, ANY_TRIPLE, True):
        # No engine graphs and a default graph with data: read it as the engine serves it.
        return GraphPlan(listed=listed)
    if len(data) > MAX_IMPLIED_GRAPHS:
        log.warning(
            "endpoint %s holds %d data graphs, too many to name in every query: reading its default graph; "
            "choose graphs with --graph", url, len(data),
        )
        return GraphPlan(listed=listed)
    why = "every graph but the engine's own" if own else "its named graphs (the default graph is empty)"
    log.info("endpoint %s: reading %s: %s", url, why, ", ".join(data))
    return GraphPlan(graphs=data, listed=listed, reason=why)


def _holds_triples(boolean, graph: str) -> bool:
    return _boolean_or(boolean, ask_graph(graph), False)


def _boolean_or(boolean, query: str, default: bool) -> bool:
    """`boolean(query)`, or `default` where the engine refuses the query (an endpoint that fails raises)."""
    try:
        return boolean(query)
    except InvalidInput as e:
        log.info("endpoint did not answer %s (%s)", query, e.message)
        return default
