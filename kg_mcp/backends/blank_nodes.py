"""Blank nodes as tools can name them: one bounded read of a blank node's edges answers every
backend question about it.

A blank node has no IRI, and `_:x` in a SPARQL query is a fresh variable, not the node `x`: a
query must never carry one. A backend that can still reach its blank nodes reads all edges of
one (both directions, up to EDGES_READ) in one go and answers neighbours, counts, steps and ASKs
from that read, kept in a small cache (stores are read-only while served). How it reads them:

- a local store by its indexes (`quads_for_pattern` takes the stored blank node; the ids are
  the store's own, stable while it is served);
- Virtuoso by the IRI it gives each blank node, `<nodeID://b10001>`, written where the node
  stands in a pattern (our results show it as `_:b10001`, see `engine_answers`);
- Oxigraph's server by `BNODE("label")`, which Oxigraph evaluates to the stored blank node of
  that label (the standard says a fresh one; other engines do so, which the probe tells);
- any other engine not at all: the tools then print no handle for its blank nodes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import pyoxigraph as ox

from kg_mcp.backends import graph_access, store_patterns
from kg_mcp.backends.base import Direction, Neighbour, RelationCount, Term, Values
from kg_mcp.errors import KGError

EDGES_READ = 10_000  # edges of one blank node read at most (each direction); past it counts are "at least"
_CACHED = 20_000  # blank nodes whose edges are kept
_PER_QUERY = 50  # blank nodes read by one endpoint query


@dataclass(frozen=True)
class BlankRead:
    """The edges of one blank node: (predicate, direction, the other end), and whether that is all."""

    edges: tuple[tuple[ox.NamedNode, Direction, Term], ...]
    complete: bool


# Reads the edges of several blank nodes: {node: [(predicate, outgoing, other end)]}, each
# direction cut at `cap` (a node with `cap` edges in a direction may have more).
Reader = Callable[[Sequence[ox.BlankNode], int], dict[ox.BlankNode, list[tuple[ox.NamedNode, bool, Term]]]]


class BlankNodes:
    """The backend questions about blank nodes, answered from `reader`'s reads (cached)."""

    def __init__(self, reader: Reader, hidden: Callable[[str], bool] | None = None):
        self.reader = reader
        self.hidden = hidden
        # Per graph set (kg_mcp.backends.graph_access): a read through one caller's graphs is never
        # answered to a caller of others.
        self._reads_by_graphs: dict[str, dict[ox.BlankNode, BlankRead]] = {}

    @property
    def _reads(self) -> dict[ox.BlankNode, BlankRead]:
        return self._reads_by_graphs.setdefault(graph_access.cache_key(), {})

    def read(self, nodes: Iterable[ox.BlankNode]) -> dict[ox.BlankNode, BlankRead]:
        nodes = list(dict.fromkeys(nodes))
        todo = [n for n in nodes if n not in self._reads]
        if todo:
            if len(self._reads) + len(todo) > _CACHED:
                self._reads.clear()
            found = self.reader(todo, EDGES_READ + 1)
            for node in todo:
                edges = found.get(node, [])
                ways = Counter(outgoing for _, outgoing, _ in edges)
                complete = all(n <= EDGES_READ for n in ways.values())
                kept = tuple(
                    (p, Direction.OUTGOING if outgoing else Direction.INCOMING, value)
                    for p, outgoing, value in edges
                    if self.hidden is None or not self.hidden(p.value)
                )
                self._reads[node] = BlankRead(kept, complete)
        return {n: self._reads[n] for n in nodes}

    def edges(self, node: ox.BlankNode, direction: Direction, predicates: Sequence[ox.NamedNode] | None = None) -> list[tuple[ox.NamedNode, Term]]:
        wanted = set(predicates) if predicates else None
        return [
            (p, value) for p, way, value in self.read([node])[node].edges
            if way is direction and (wanted is None or p in wanted)
        ]

    def neighbours(self, node: ox.BlankNode, direction: Direction, predicates, limit: int, *, offset: int = 0,
                   values: Values = Values.ANY) -> list[Neighbour]:
        found = [e for e in self.edges(node, direction, predicates) if _of_kind(e[1], values)]
        if predicates:  # in the order the predicates were asked for, as a store reads them
            order = {p: i for i, p in enumerate(dict.fromkeys(predicates))}
            found.sort(key=lambda edge: order[edge[0]])
        return [Neighbour(p, value) for p, value in found[offset : offset + limit]]

    def count(self, node: ox.BlankNode, direction: Direction, predicates, values: Values = Values.ANY) -> int:
        return sum(1 for _, value in self.edges(node, direction, predicates) if _of_kind(value, values))

    def relation_counts(self, node: ox.BlankNode, direction: Direction) -> list[RelationCount]:
        read = self.read([node])[node]
        counts = Counter(p for p, way, _ in read.edges if way is direction)
        return [RelationCount(p, direction, n, read.complete) for p, n in counts.most_common()]

    def step(self, sources: Sequence[ox.BlankNode], predicate: ox.NamedNode, direction: Direction) -> list[tuple[Term, Term]]:
        reads = self.read(sources)
        return list(dict.fromkeys(
            (source, value) for source in sources for p, way, value in reads[source].edges if p == predicate and way is direction
        ))

    def has_triple(self, subject: Term, predicate: ox.NamedNode, obj: Term) -> bool:
        if isinstance(subject, ox.BlankNode):
            return (predicate, obj) in self.edges(subject, Direction.OUTGOING, [predicate])
        return (predicate, subject) in self.edges(obj, Direction.INCOMING, [predicate])

    def exists(self, node: ox.BlankNode) -> bool:
        read = self.read([node])[node]
        return bool(read.edges) or not read.complete


def is_blank(term) -> bool:
    return isinstance(term, ox.BlankNode)


def _of_kind(term, values: Values) -> bool:
    return values is Values.ANY or isinstance(term, ox.BlankNode) == (values is Values.ANONYMOUS)


# --- reading a blank node's edges ------------------------------------------------------------------
def store_reader(store: ox.Store, graphs: Callable[[], Sequence] = lambda: store_patterns.DEFAULT) -> Reader:
    """A local store's blank nodes, read from its indexes in the graphs the call reads (`graphs()`:
    the default graph, or a graph set's named graphs), as the queries read them."""

    def read(nodes: Sequence[ox.BlankNode], cap: int):
        found = {}
        read_from = graphs()
        for node in nodes:
            edges = []
            for outgoing in (True, False):
                if outgoing:
                    quads = store_patterns.quads(store, node, None, None, read_from)
                else:
                    quads = store_patterns.quads(store, None, None, node, read_from)
                for n, quad in enumerate(quads):
                    if n == cap:
                        break
                    edges.append((quad.predicate, outgoing, quad.object if outgoing else quad.subject))
            found[node] = edges
        return found

    return read


# How an engine lets a query name blank nodes: the edges of those labelled `labels`, each row
# with ?xl (the label), ?p, ?o and ?d ("out" or "in").
def _virtuoso_edges(labels: Sequence[str]) -> str:
    # A nodeID IRI names the blank node where it stands in a pattern (bound through VALUES it is
    # only an IRI): one block per node.
    blocks = []
    for label in labels:
        node, name = f"<nodeID://{label}>", str(ox.Literal(label))
        blocks.append(f'{{ {node} ?p ?o BIND({name} AS ?xl) BIND("out" AS ?d) }}')
        blocks.append(f'{{ ?o ?p {node} BIND({name} AS ?xl) BIND("in" AS ?d) }}')
    return " UNION ".join(blocks)


def _bnode_function_edges(labels: Sequence[str]) -> str:
    values = " ".join(str(ox.Literal(label)) for label in labels)
    return (
        f"VALUES ?xl {{ {values} }} BIND(BNODE(?xl) AS ?x) "
        '{ ?x ?p ?o BIND("out" AS ?d) } UNION { ?o ?p ?x BIND("in" AS ?d) }'
    )


ENGINE_FORMS: dict[str, Callable[[Sequence[str]], str]] = {
    "Virtuoso's nodeID IRIs": _virtuoso_edges,
    "Oxigraph's BNODE(label)": _bnode_function_edges,
}


def edges_query(body: str, cap: int, nodes: int) -> str:
    return f"SELECT ?xl ?p ?o ?d WHERE {{ {body} }} LIMIT {int(cap) * 2 * nodes}"


def probe_query(body: str) -> str:
    return f"ASK {{ {body} }}"


def endpoint_reader(solutions: Callable[[str], list], form: Callable[[Sequence[str]], str]) -> Reader:
    """An endpoint's blank nodes, read by the engine's own way of naming them (`form`)."""

    def read(nodes: Sequence[ox.BlankNode], cap: int):
        found: dict[ox.BlankNode, list] = {node: [] for node in nodes}
        for i in range(0, len(nodes), _PER_QUERY):
            chunk = nodes[i : i + _PER_QUERY]
            for s in solutions(edges_query(form([n.value for n in chunk]), cap, len(chunk))):
                node = ox.BlankNode(s["xl"].value)
                if node in found and isinstance(s["p"], ox.NamedNode):
                    found[node].append((s["p"], s["d"].value == "out", s["o"]))
        return found

    return read


def engine_form(boolean: Callable[[str], bool], example: ox.BlankNode) -> tuple[str, Callable[[Sequence[str]], str]] | None:
    """The first form the engine answers for `example`, a blank node it returned (None: none works).
    Each probe asks for that very node's edges, so a form that names a fresh node answers no."""
    for name, form in ENGINE_FORMS.items():
        try:
            if boolean(probe_query(form([example.value]))):
                return name, form
        except KGError:  # an engine that refuses the form's syntax does not offer it
            continue
    return None
