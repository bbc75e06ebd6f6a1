"""One entity's neighbourhood read straight from a local store's indexes, without SPARQL.

A SPARQL query costs a parse and a plan (some 100 µs on Oxigraph) before its first row, more
than the rows of an ordinary entity cost to read. The edges of one node are a prefix scan of one
index, and each neighbour's labels another: `quads_for_pattern` reads the same index the query
would, so rows come in the same order. Every read here is bounded: edges stop at the caller's
limit, and counting gives up past `most` edges (the caller then counts with an aggregate query).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence

import pyoxigraph as ox

from kg_mcp.backends.base import Term

DEFAULT_GRAPH = ox.DefaultGraph()  # what the SPARQL queries read (statistics live in a named graph)


def edges(
    store: ox.Store,
    node: ox.NamedNode,
    outgoing: bool,
    predicates: Sequence[ox.NamedNode] | None,
    hidden: Callable[[str], bool] | None,
    limit: int,
    named_only: bool = False,
) -> list[tuple[ox.NamedNode, Term]]:
    """Up to `limit` (predicate, other end) pairs of `node`, only `predicates` if given (in their
    order), else those `hidden` does not reject; only those whose other end is no blank node if
    `named_only`."""
    found: list[tuple[ox.NamedNode, Term]] = []
    for predicate in dict.fromkeys(predicates) if predicates else [None]:
        if len(found) >= limit:
            break
        if outgoing:
            quads = store.quads_for_pattern(node, predicate, None, DEFAULT_GRAPH)
        else:
            quads = store.quads_for_pattern(None, predicate, node, DEFAULT_GRAPH)
        for quad in quads:
            p = quad.predicate
            if hidden is not None and hidden(p.value):
                continue
            other = quad.object if outgoing else quad.subject
            if named_only and isinstance(other, ox.BlankNode):
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
) -> tuple[dict[tuple[ox.NamedNode, bool], int], list[tuple[ox.NamedNode, Term]]] | None:
    """({(predicate, outgoing): edges} around `node`, outgoing first; the (predicate, object) of its
    outgoing edges along `keep`), or None past `most` edges in all. `keep` names the label
    predicates: their edges are read anyway, so the node's own label costs no second read."""
    counts: dict[tuple[ox.NamedNode, bool], int] = {}
    kept: list[tuple[ox.NamedNode, Term]] = []
    seen = 0
    for outgoing in (True, False):
        quads = store.quads_for_pattern(node, None, None, DEFAULT_GRAPH) if outgoing else store.quads_for_pattern(None, None, node, DEFAULT_GRAPH)
        # Counted per predicate, then tested against `hidden` once per predicate: a node has few.
        per_predicate: dict[ox.NamedNode, int] = {}
        for quad in quads:
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


def labels(
    store: ox.Store, nodes: Iterable[Term], predicates: Sequence[ox.NamedNode], languages: Sequence[str]
) -> Iterator[tuple[Term, ox.NamedNode, ox.Literal]]:
    """(node, label predicate, literal) for the labels of `nodes` in `languages` or untagged, in the
    order of the label query (node, then predicate, then index order)."""
    wanted = {*languages, ""}
    named = (node for node in nodes if not isinstance(node, ox.Literal))
    for node, predicate, literal in literals(store, named, predicates):
        if (literal.language or "") in wanted:
            yield node, predicate, literal


def literals(
    store: ox.Store, nodes: Iterable[Term], predicates: Sequence[ox.NamedNode]
) -> Iterator[tuple[Term, ox.NamedNode, ox.Literal]]:
    """(node, predicate, literal) for every literal of `nodes` along `predicates`, in any language."""
    for node in nodes:
        for predicate in predicates:
            for quad in store.quads_for_pattern(node, predicate, None, DEFAULT_GRAPH):
                if isinstance(quad.object, ox.Literal):
                    yield node, predicate, quad.object


def degree(store: ox.Store, node: ox.NamedNode, hidden: Callable[[str], bool] | None, cap: int) -> int:
    """Edges of `node` whose predicate is not `hidden`, each direction counted up to `cap` (the
    count of `_queries.degree`, read from the indexes)."""
    total = 0
    for quads in (store.quads_for_pattern(node, None, None, DEFAULT_GRAPH), store.quads_for_pattern(None, None, node, DEFAULT_GRAPH)):
        counted = 0
        for quad in quads:
            if counted == cap:
                break
            if hidden is None or not hidden(quad.predicate.value):
                counted += 1
        total += counted
    return total
