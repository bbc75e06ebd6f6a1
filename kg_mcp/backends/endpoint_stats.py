"""Sizes of a remote endpoint without a full count: its VoID statistics, or bounded counts.

Counting every triple of a public endpoint would time out, but a count over the first N triples
costs at most N rows of work: fewer than N means the count is exact, N means "at least N". Where
the endpoint publishes VoID (`void:triples`, `void:entities`, `void:properties`), those figures
are used and said to be the publisher's.
"""

from __future__ import annotations

import logging

import pyoxigraph as ox

from kg_mcp.backends import _queries as q
from kg_mcp.backends.base import StoreStats
from kg_mcp.errors import KGError

log = logging.getLogger(__name__)

VOID = "http://rdfs.org/ns/void#"
VOID_STATS = (
    f"SELECT ?triples ?entities ?properties WHERE {{ ?d <{VOID}triples> ?triples "
    f"OPTIONAL {{ ?d <{VOID}entities> ?entities }} OPTIONAL {{ ?d <{VOID}properties> ?properties }} }} "
    "ORDER BY DESC(?triples) LIMIT 1"
)
TOP_RELATIONS = 15


def bounded_triples(cap: int) -> str:
    return f"SELECT (COUNT(*) AS ?n) WHERE {{ SELECT ?s WHERE {{ ?s ?p ?o }} LIMIT {int(cap)} }}"


def bounded_distinct(var: str, cap: int) -> str:
    """Distinct subjects (or predicates) among the first `cap` triples: a lower bound."""
    return f"SELECT (COUNT(DISTINCT ?{var}) AS ?n) WHERE {{ SELECT ?{var} WHERE {{ ?s ?p ?o }} LIMIT {int(cap)} }}"


def endpoint_stats(backend, cap: int) -> StoreStats:
    """StoreStats of a remote backend; `details["counts"]` says how the numbers were obtained."""
    stats = StoreStats(kind=backend.kind, profile=backend.profile.name, triples=None, details={"endpoint": backend.url})
    plan = backend.graph_plan
    if plan.graphs:  # every count below is of these graphs (kg_mcp.backends.named_graphs)
        stats.details["graphs"] = f"{plan.reason}: {', '.join(plan.graphs)}"
    try:
        if _from_void(backend, stats):
            return stats
        stats.triples = backend._count(bounded_triples(cap))
        stats.entities = backend._count(bounded_distinct("s", cap))
        stats.relations = backend._count(bounded_distinct("p", cap))
    except KGError as e:
        stats.details["counts"] = f"not counted: the endpoint did not answer a bounded count ({e.message})"
        return stats
    if stats.triples < cap:
        stats.details["counts"] = "exact (the endpoint holds fewer triples than the count cap)"
        stats.entities = backend._count(q.count_entities())  # as a local store counts them
        stats.top_relations = [(s["p"], int(s["n"].value)) for s in backend._solutions(q.top_relations(TOP_RELATIONS))]
    else:
        stats.bounded = True
        stats.details["counts"] = (
            f"at least: counted over the first {cap:,} triples only (set KG_MCP_COUNT_CAP to count further)"
        )
    return stats


def _from_void(backend, stats: StoreStats) -> bool:
    for row in backend._solutions(VOID_STATS):
        numbers = {k: _integer(row[k]) for k in ("triples", "entities", "properties")}
        if numbers["triples"] is None:
            return False
        stats.triples, stats.entities, stats.relations = numbers["triples"], numbers["entities"], numbers["properties"]
        stats.details["counts"] = "VoID: as published by the endpoint (void:triples, void:entities, void:properties)"
        return True
    return False


def _integer(term) -> int | None:
    if isinstance(term, ox.Literal):
        try:
            return int(term.value)
        except ValueError:
            return None
    return None
