"""What a KG holds, gathered once when the server starts: size, relations with counts, hubs, an id.

Every read is bounded. A KG of up to EXACT_UP_TO triples is counted exactly (a few aggregate
queries over it); a bigger one is described from the hub statistics recorded at load time
(kg_mcp.hubs) and from aggregates over a sample of its first SAMPLE_TRIPLES triples. On an
endpoint each query also gets only what is left of a time budget, and the census stops asking
once the budget is spent: what it could not learn is left out and named in `missing`.
kg_mcp.schema.summary turns the census into the text of the server instructions.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pyoxigraph as ox

from kg_mcp.backends import _queries as q
from kg_mcp.backends.base import Backend, Direction
from kg_mcp.backends.endpoint_stats import VOID_STATS, bounded_triples
from kg_mcp.backends.oxigraph_store import OxigraphBackend
from kg_mcp.backends.remote import RemoteBackend
from kg_mcp.errors import KGError
from kg_mcp.hubs import DEFAULT_THRESHOLD
from kg_mcp.schema.shape import (
    MACHINERY,
    ONTOLOGY_SHARE,
    ROOTED,
    ROOTS_SHOWN,
    Root,
    hierarchy_roots,
    is_vocabulary_term,
    kinds_of_subjects,
    relation_kind,
)
from kg_mcp.store_meta import read_meta

log = logging.getLogger(__name__)

EXACT_UP_TO = 500_000  # triples: up to this many, every relation and hub is counted exactly
SAMPLE_TRIPLES = 200_000  # past it, relations and hubs are counted over this many triples
RELATIONS_KEPT = 1000  # relations kept for kg://schema (the instructions show fewer)
LABELLED = 300  # of which the first this many get their labels
HUBS_KEPT = 5


@dataclass(frozen=True)
class RelationUse:
    iri: str
    id: str  # as the tools show and read it (directed_by, wdt:P31)
    label: str | None
    triples: int
    identifier: bool = False  # an external identifier (the profile's mark): listed after the other facts
    kind: str = "domain"  # "name", "hierarchy", "machinery" or "domain" (kg_mcp.schema.shape.relation_kind)
    hidden: bool = False  # left out of unfiltered listings (names shown beside ids); a filtered search reads it


@dataclass(frozen=True)
class Hub:
    id: str
    label: str | None
    direction: str  # "incoming" (the hub is the object of its edges) or "outgoing"
    edges: int
    relations: tuple[tuple[str, int], ...]  # its most used relations (id, edges), most first


@dataclass
class Census:
    profile: str
    triples: int | None = None
    triples_basis: str = "exact"  # "exact", "as loaded" (store metadata), "VoID", "at least"
    entities: int | None = None  # named subjects, as kg://stats and `kg-mcp info` count them
    blank_subjects: int | None = None  # blank-node subjects (restrictions, shapes' constraints, lists)
    relation_total: int | None = None  # distinct predicates, hidden ones included; None when only sampled
    listed_by_kind: dict[str, int] = field(default_factory=dict)  # visible relations of each kind, all of them
    relations: list[RelationUse] = field(default_factory=list)  # most used first (facts before bookkeeping)
    shape: str = "data"  # or "ontology": most named subjects are classes, properties, shapes or concepts
    kinds: list[tuple[str, int]] = field(default_factory=list)  # those types with their named subjects
    roots: list[Root] = field(default_factory=list)  # hierarchy roots, most below first
    relations_basis: str = "exact"  # or "sample": counted over the first `sample` triples
    hubs: list[Hub] = field(default_factory=list)
    hubs_basis: str = "exact"  # or "load-time statistics", "sample"
    hub_threshold: int | None = None  # edges that make a hub in the load-time statistics
    example_id: str | None = None
    example_label: str | None = None
    label_is_id: bool = False  # resolving the example's exact label gives the example back
    missing: list[str] = field(default_factory=list)  # parts not learnt (time budget, endpoint errors)
    sample: int = SAMPLE_TRIPLES  # triples in the sample a big KG's relations and hubs are counted over


def take_census(backend: Backend, budget_s: float, *, exact_up_to: int = EXACT_UP_TO, sample: int = SAMPLE_TRIPLES) -> Census:
    """The census of `backend`, within `budget_s` seconds on an endpoint (local reads are bounded by size):
    exact up to `exact_up_to` triples, over a sample of the first `sample` triples past it."""
    census = Census(profile=backend.profile.name, sample=sample)
    end = time.monotonic() + budget_s

    def step(what: str, read: Callable) -> None:
        left = end - time.monotonic()
        if left <= 0.05:
            census.missing.append(f"{what} (no time left)")
            return
        try:
            with _bounded_view(backend, left) as kg:
                read(kg)
        except KGError as e:
            log.info("KG summary: %s not read: %s", what, e.message)
            census.missing.append(f"{what} ({e.message[:120]})")

    step("size", lambda kg: _size(kg, census, exact_up_to))
    exact = census.triples_basis == "exact" and census.triples is not None
    census.relations_basis = "exact" if exact else "sample"
    step("relations", lambda kg: _relations(kg, census, exact))
    if exact:
        step("shape", lambda kg: _shape(kg, census))
    step("hubs", lambda kg: _hubs(kg, census, exact))
    step("ids", lambda kg: _example(kg, census))
    return census


@contextmanager
def _bounded_view(backend: Backend, seconds: float) -> Iterator[Backend]:
    """`backend`, or for an endpoint a twin whose queries stop after `seconds` and are not retried."""
    if not isinstance(backend, RemoteBackend):
        yield backend
        return
    settings = backend.settings.model_copy(update={"timeout_s": max(0.1, seconds), "retries": 0})
    twin = RemoteBackend(
        backend.url, backend.profile, backend.vocab, settings, label_predicates=backend.label_predicates,
        graphs=backend.graph_plan,  # the same graphs: the summary describes what the tools read
    )
    twin.text_search = backend.text_search
    try:
        yield twin
    finally:
        twin.close()


def _size(kg: Backend, census: Census, exact_up_to: int) -> None:
    counted = kg._count(bounded_triples(exact_up_to + 1))
    if counted <= exact_up_to:
        census.triples = counted
        # Named subjects rather than every node: several times cheaper to count, what the triples are
        # about, and the same count kg://stats and `kg-mcp info` give.
        census.entities = kg._count(q.count_entities())
        census.blank_subjects = kg._count(q.count_blank_subjects())
        return
    if isinstance(kg, OxigraphBackend):  # what the loads recorded (a count would read every triple)
        meta = read_meta(kg.store)
        reading = set(kg.read_graphs) or {None}  # the loads into the graphs the call reads (None: the default graph)
        loaded = sum(entry.get("triples", 0) for entry in meta.get("loads", []) if entry.get("graph") in reading)
        census.hub_threshold = meta.get("hub_threshold", DEFAULT_THRESHOLD)
        census.triples, census.triples_basis = (loaded, "as loaded") if loaded > counted else (counted, "at least")
        return
    for row in kg._solutions(VOID_STATS):  # an endpoint's own figures, where it publishes them
        if isinstance(row["triples"], ox.Literal) and row["triples"].value.isdigit():
            census.triples, census.triples_basis = int(row["triples"].value), "VoID"
            entities = row["entities"]
            census.entities = int(entities.value) if isinstance(entities, ox.Literal) and entities.value.isdigit() else None
            return
    census.triples, census.triples_basis = counted, "at least"


def _facts_namespace(kg: Backend) -> str:
    """Where the profile keeps truthy facts beside bookkeeping (Wikidata's wdt:), else ''."""
    return kg.profile.statements.direct if kg.profile.statements else ""


def _fact_filter(kg: Backend) -> str:
    """A FILTER on ?p keeping facts: the facts namespace, or whatever the profile does not hide."""
    facts = _facts_namespace(kg)
    if facts:
        return f'FILTER(STRSTARTS(STR(?p), "{facts}"))'
    return q.visible(kg.profile, "p", ox.NamedNode("urn:kg-mcp:any"))


def _relations(kg: Backend, census: Census, exact: bool) -> None:
    pattern = "?s ?p ?o" if exact else f"{{ SELECT ?p WHERE {{ ?s ?p ?o }} LIMIT {census.sample} }}"
    rows = kg._solutions(f"SELECT ?p (COUNT(*) AS ?n) WHERE {{ {pattern} }} GROUP BY ?p ORDER BY DESC(?n) ?p")
    counts = [(s["p"], int(s["n"].value)) for s in rows if isinstance(s["p"], ox.NamedNode)]
    if exact:
        census.relation_total = len(counts)  # every predicate, as kg://stats counts them
    profile = kg.profile
    # The names shown beside ids are kept apart (the summary says how to read them); other bookkeeping goes.
    names = [(p, n) for p, n in counts if profile.is_hidden(p.value) and relation_kind(p.value, profile) == "name"]
    counts = [(p, n) for p, n in counts if not profile.is_hidden(p.value)]
    if exact:
        census.listed_by_kind = dict(Counter(relation_kind(p.value, profile) for p, _ in counts))
    facts = _facts_namespace(kg)
    # Facts first (Wikidata's wdt: before its bookkeeping), external identifiers (ISNI, VIAF) after
    # the other facts: the instructions show the head of this list.
    head = counts[:RELATIONS_KEPT]
    identifiers = kg.identifier_predicates([p for p, _ in head])
    head.sort(key=lambda pn: (not pn[0].value.startswith(facts), pn[0] in identifiers, -pn[1]))
    labels = kg.labels([p for p, _ in head[:LABELLED]])
    census.relations = [
        RelationUse(p.value, kg.vocab.compact(p), labels.get(p), n, p in identifiers, relation_kind(p.value, profile))
        for p, n in head
    ] + [RelationUse(p.value, kg.vocab.compact(p), None, n, False, "name", hidden=True) for p, n in names]


def _shape(kg: Backend, census: Census) -> None:
    """Whether the KG is an ontology; if so its kinds of subjects and the roots of its hierarchies."""
    share, census.kinds = kinds_of_subjects(kg, census.entities or 0)
    if share < ONTOLOGY_SHARE:
        return
    census.shape = "ontology"
    used = {r.iri for r in census.relations}
    roots = [root for relation in ROOTED if relation in used for root in hierarchy_roots(kg, relation)]
    census.roots = sorted(roots, key=lambda root: -root.below)[:ROOTS_SHOWN]


def _not_machinery(var: str) -> str:
    return "FILTER(" + " && ".join(f'!STRSTARTS(STR(?{var}), "{ns}")' for ns in MACHINERY) + ")"


def _hubs(kg: Backend, census: Census, exact: bool) -> None:
    if isinstance(kg, OxigraphBackend) and not exact:
        recorded = kg.recorded_hubs()  # none where the call reads named graphs: the records are the default graph's
        if recorded:
            census.hubs_basis = "load-time statistics"
            _recorded_hubs(kg, census, recorded)
            return
    census.hubs_basis = "exact" if exact else "sample"
    # Literal objects are dropped here, not in the query, and ties are not ordered: an isIRI filter or
    # a second sort key makes the query ten times slower.
    pattern = f"?s ?p ?o {_fact_filter(kg)}"
    if census.shape == "ontology":  # hubs of the ontology's own relations, not of rdf:type or sh:path
        pattern += " " + _not_machinery("p")
    if not exact:
        pattern = f"{{ SELECT ?o WHERE {{ {pattern} }} LIMIT {census.sample} }}"
    top = kg._solutions(f"SELECT ?o (COUNT(*) AS ?n) WHERE {{ {pattern} }} GROUP BY ?o ORDER BY DESC(?n) LIMIT 40")
    # A term of OWL, SHACL or RDFS (sh:this, owl:Class) is no hub to avoid: it is the language.
    found = [(s["o"], int(s["n"].value)) for s in top if isinstance(s["o"], ox.NamedNode) and not is_vocabulary_term(s["o"].value)]
    found = found[:HUBS_KEPT]
    labels = kg.labels([node for node, _ in found])
    for node, edges in found:
        relations: tuple[tuple[str, int], ...] = ()
        if exact:  # the relations behind each (cheap on a KG this size)
            counted = kg.relation_counts(node, Direction.INCOMING)
            if census.shape == "ontology":
                counted = [r for r in counted if not is_vocabulary_term(r.predicate.value)]
            relations = tuple((kg.vocab.compact(r.predicate), r.count) for r in counted[:3])
        census.hubs.append(Hub(kg.vocab.compact(node), labels.get(node), "incoming", edges, relations))


def _recorded_hubs(kg: OxigraphBackend, census: Census, recorded: set[tuple[ox.NamedNode, bool]]) -> None:
    way = {True: Direction.OUTGOING, False: Direction.INCOMING}
    sized = [(kg.known_degree(node, way[outgoing]) or 0, node, outgoing) for node, outgoing in recorded]
    sized.sort(key=lambda x: (-x[0], x[1].value))
    chosen = sized[:HUBS_KEPT]
    labels = kg.labels([node for _, node, _ in chosen])
    for edges, node, outgoing in chosen:
        counted = kg.relation_counts(node, way[outgoing])
        relations = tuple((kg.vocab.compact(r.predicate), r.count) for r in counted[:3])
        census.hubs.append(Hub(kg.vocab.compact(node), labels.get(node), way[outgoing].value, edges, relations))


def _example(kg: Backend, census: Census) -> None:
    """A real id (on an ontology a class under its top root; else the top hub's, else a subject of the
    top relation) and whether its label works as an id."""
    node = None
    if census.roots:
        root = census.roots[0]
        node = kg.vocab.parse(root.children[0] if root.children else root.id)
    if node is None and census.hubs:
        node = kg.vocab.parse(census.hubs[0].id)
    if node is None and census.relations:
        rows = kg._solutions(f"SELECT ?s WHERE {{ ?s <{census.relations[0].iri}> ?o FILTER(isIRI(?s)) }} LIMIT 1")
        node = next((s["s"] for s in rows), None)
    if not isinstance(node, ox.NamedNode):
        return
    census.example_id = kg.vocab.compact(node)
    census.example_label = kg.labels([node]).get(node)
    if census.example_label:
        try:
            census.label_is_id = kg.resolve_entity(census.example_label) == node
        except KGError:  # several entities share it, or it does not resolve here
            census.label_is_id = False
