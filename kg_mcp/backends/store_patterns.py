"""One entity's neighbourhood read straight from a local store's indexes, without SPARQL.

A SPARQL query costs a parse and a plan (some 100 µs on Oxigraph) before its first row, more
than the rows of an ordinary entity cost to read. The edges of one node are a prefix scan of one
index, and each neighbour's labels another: `quads_for_pattern` reads the same index the query
would, so rows come in the same order. Every read here is bounded: edges stop at the caller's
limit, and counting gives up past `most` edges (the caller then counts with an aggregate query).

Each read takes the graphs it reads (`graphs`): the default graph, as the queries read it, or the
named graphs of a graph set (kg_mcp.backends.graph_access), read as one graph: a triple held by
two of them counts once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import pyoxigraph as ox

from kg_mcp.backends.base import Term, Values

DEFAULT_GRAPH = ox.DefaultGraph()  # what the SPARQL queries read (statistics live in a named graph)
DEFAULT = (DEFAULT_GRAPH,)
Graphs = Sequence[ox.NamedNode | ox.DefaultGraph]


def quads(store: ox.Store, subject, predicate, obj, graphs: Graphs = DEFAULT) -> Iterator[ox.Quad]:
    """The quads of the pattern in `graphs`, read as their union (each triple once).

    >>> store = ox.Store()
    >>> a, p, g1, g2 = (ox.NamedNode(f"http://x/{n}") for n in ("a", "p", "g1", "g2"))
    >>> store.extend([ox.Quad(a, p, ox.Literal(n), g) for n in "12" for g in (g1, g2)] + [ox.Quad(a, p, a)])
    >>> sorted(q.object.value for q in quads(store, a, None, None, [g1, g2])), len(list(quads(store, a, None, None)))
    (['1', '2'], 1)
    """
    if len(graphs) == 1:
        return store.quads_for_pattern(subject, predicate, obj, graphs[0])
    return _union(store, subject, predicate, obj, graphs)


def _union(store: ox.Store, subject, predicate, obj, graphs: Graphs) -> Iterator[ox.Quad]:
    seen: set[tuple] = set()
    for graph in graphs:
        for quad in store.quads_for_pattern(subject, predicate, obj, graph):
            triple = (quad.subject, quad.predicate, quad.object)
            if triple not in seen:
                seen.add(triple)
                yield quad


def edges(
    store: ox.Store,
    node: ox.NamedNode,
    outgoing: bool,
    predicates: Sequence[ox.NamedNode] | None,
    hidden: Callable[[str], bool] | None,
    limit: int,
    values: Values = Values.ANY,
    graphs: Graphs = DEFAULT,
    offset: int = 0,
) -> list[tuple[ox.NamedNode, Term]]:
    """Up to `limit` (predicate, other end) pairs of `node`, only `predicates` if given (in their
    order), else those `hidden` does not reject; only those whose other end is of the kind
    `values` says; the first `offset` of them skipped (the index order holds while the store is
    served, so a listing's pages read on where the last one ended)."""
    found: list[tuple[ox.NamedNode, Term]] = []
    skip = offset
    for predicate in dict.fromkeys(predicates) if predicates else [None]:
        if len(found) >= limit:
            break
        read = quads(store, node, predicate, None, graphs) if outgoing else quads(store, None, predicate, node, graphs)
        for quad in read:
            p = quad.predicate
            if hidden is not None and hidden(p.value):
                continue
            other = quad.object if outgoing else quad.subject
            if values is not Values.ANY and isinstance(other, ox.BlankNode) != (values is Values.ANONYMOUS):
                continue
            if skip:
                skip -= 1
                continue
            found.append((p, other))
            if len(found) >= limit:
                break
    return found


def predicate_counts(
    store: ox.Store,
    node: ox.NamedNode,
    hidden: Callable[[str], bool] | None,
    most: int,
    keep: frozenset[ox.NamedNode] = frozenset(),
    graphs: Graphs = DEFAULT,
    directions: tuple[bool, ...] = (True, False),
) -> tuple[dict[tuple[ox.NamedNode, bool], int], list[tuple[ox.NamedNode, Term]]] | None:
    """({(predicate, outgoing): edges} around `node` in `directions` (outgoing: True), outgoing first;
    the (predicate, object) of its outgoing edges along `keep`), or None past `most` edges in all.
    `keep` names the label predicates: their edges are read anyway, so the node's own label costs
    no second read."""
    counts: dict[tuple[ox.NamedNode, bool], int] = {}
    kept: list[tuple[ox.NamedNode, Term]] = []
    seen = 0
    for outgoing in directions:
        read = quads(store, node, None, None, graphs) if outgoing else quads(store, None, None, node, graphs)
        # Counted per predicate, then tested against `hidden` once per predicate: a node has few.
        per_predicate: dict[ox.NamedNode, int] = {}
        for quad in read:
            seen += 1
            if seen > most:
                return None
            p = quad.predicate
            per_predicate[p] = per_predicate.get(p, 0) + 1
            if outgoing and p in keep:
                kept.append((p, quad.object))
        for p, n in per_predicate.items():
            if hidden is None or not hidden(p.value):
                counts[(p, outgoing)] = n
    return counts, kept


def occurs(store: ox.Store, node: ox.NamedNode, graphs: Graphs = DEFAULT) -> bool:
    """Whether `node` is the subject or the object of a triple (the question of `_queries.ask_exists`)."""
    if next(iter(quads(store, node, None, None, graphs)), None) is not None:
        return True
    return next(iter(quads(store, None, None, node, graphs)), None) is not None


def labels(
    store: ox.Store, nodes: Iterable[Term], predicates: Sequence[ox.NamedNode], languages: Sequence[str],
    graphs: Graphs = DEFAULT,
) -> Iterator[tuple[Term, ox.NamedNode, ox.Literal]]:
    """(node, label predicate, literal) for the labels of `nodes` in `languages` or untagged, in the
    order of the label query (node, then predicate, then index order)."""
    wanted = {*languages, ""}
    named = (node for node in nodes if not isinstance(node, ox.Literal))
    for node, predicate, literal in literals(store, named, predicates, graphs):
        if (literal.language or "") in wanted:
            yield node, predicate, literal


def literals(
    store: ox.Store, nodes: Iterable[Term], predicates: Sequence[ox.NamedNode], graphs: Graphs = DEFAULT
) -> Iterator[tuple[Term, ox.NamedNode, ox.Literal]]:
    """(node, predicate, literal) for every literal of `nodes` along `predicates`, in any language."""
    for node in nodes:
        for predicate in predicates:
            for quad in quads(store, node, predicate, None, graphs):
                if isinstance(quad.object, ox.Literal):
                    yield node, predicate, quad.object


def degree(
    store: ox.Store, node: ox.NamedNode, hidden: Callable[[str], bool] | None, cap: int, graphs: Graphs = DEFAULT
) -> int:
    """Edges of `node` whose predicate is not `hidden`, each direction counted up to `cap` (the
    count of `_queries.degree`, read from the indexes)."""
    total = 0
    for read in (quads(store, node, None, None, graphs), quads(store, None, None, node, graphs)):
        counted = 0
        for quad in read:
            if counted == cap:
                break
            if hidden is None or not hidden(quad.predicate.value):
                counted += 1
        total += counted
    return total
