"""The scale bench's calls: each tool on random people and on hubs of the Freebase-shaped KG, and
beside each the bare pyoxigraph query that reads what the tool's answer shows.

A bare query is the least a program using pyoxigraph directly would ask for the same answer: the
edges, with the labels of the entity, of the relations and of the values shown (one SPARQL query,
all rows read), a hub's recorded statistics, an `ASK` with the two labels a verdict shows, the
entities with a label. Timed beside it, in the same cache state, a tool's time says how much its
own code adds to what the engine must read anyway (kg_mcp.backends.oxigraph_store reads the same
indexes without SPARQL, so a tool can be faster than its bare query).

Each case calls the tool on its i-th argument and the bare query on another sample's i-th: at
every step both read an entity neither read before, so a cold call finds nothing left by the other
in RocksDB's own block cache.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import pyoxigraph as ox

from bench.freebase_shape import COUNTRIES, NAME, NS, PROFESSIONS, Layout, country_id, entity_name, mid, profession_id
from kg_mcp.backends import Backend
from kg_mcp.hubs import IN_DEGREE, OUT_DEGREE, STATS_GRAPH
from kg_mcp.settings import Settings
from kg_mcp.tools import explore_kg, find_entities, get_relations, search, verify
from kg_mcp.tools.verify import TripleClaim

_NAME = f"<{NS}{NAME}>"


@dataclass(frozen=True)
class Case:
    tool: str
    kind: str  # random (people), hubs or typed (names as people type them)
    call: Callable[[int], object]  # the tool on its i-th argument
    bare: Callable[[int], object] | None  # the bare query on the other sample's i-th (None: an endpoint)
    bare_reads: str  # what the bare query reads, for the notes

    @property
    def name(self) -> str:
        return f"{self.tool} ({self.kind})"


def _select(store: ox.Store, query: str) -> int:
    """Every row of a SELECT, read: the answer a program gets."""
    return sum(1 for _ in store.query(query))


def cases(backend: Backend, settings: Settings, triples: int, calls: int, store: ox.Store | None) -> list[Case]:
    """The tool calls on the Freebase-shaped KG of `triples` lines behind `backend`, each beside its
    bare query on `store` (None, as for an endpoint: tool calls only)."""
    if backend.profile.name != "freebase":
        raise RuntimeError(f"profile detected as {backend.profile.name}, not freebase")
    layout = Layout(triples)
    start, end = layout.kind_range(0)  # people: every one has a nationality and a place of birth
    samples = [[rng.randrange(start, end) for _ in range(calls)] for rng in (random.Random(5), random.Random(6))]
    people, others = samples
    ids, other_ids = [mid(i) for i in people], [mid(i) for i in others]
    iri = {m: f"<{NS}{m}>" for m in ids + other_ids}
    usa = mid(country_id(0))
    shown = search(backend, settings, ids[0], "outgoing").text
    if "<http" in shown or "m.0" not in shown:
        raise RuntimeError(f"ids are not compacted on the Freebase-shaped store:\n{shown[:500]}")
    # Hubs: a country, a profession and a type node, each with millions of in-edges at 100M.
    hubs = [usa, mid(profession_id(0)), f"<{NS}people.person>"]
    hub_iris = [f"<{NS}{usa}>", f"<{NS}{mid(profession_id(0))}>", f"<{NS}people.person>"]
    hub_names = [COUNTRIES[0], PROFESSIONS[0], "Person"]
    hub_relations = ["people.person.nationality", "people.person.profession", "type.object.type"]
    # Names as people type them: a letter dropped (a typo), or the surname alone (shared by thousands
    # of people at 100M: the words tier ranks them).
    typed = [[n[:3] + n[4:] if i % 2 else n.split()[-1] for i, n in enumerate(map(entity_name, s))] for s in samples]

    def bare(query: Callable[[int], str]) -> Callable[[int], object] | None:
        return None if store is None else (lambda i: _select(store, query(i)))

    def record(hub: str, outgoing: bool) -> str:
        way = OUT_DEGREE if outgoing else IN_DEGREE
        return f"{{ GRAPH <{STATS_GRAPH.value}> {{ {hub} <{way.value}> ?stats }} }}"

    def edges_query(node: str, predicate: str | None = None) -> str:
        if predicate is None:  # every out-edge, each relation's label with it
            edges = f"{node} ?p ?o OPTIONAL {{ ?o {_NAME} ?ol }} OPTIONAL {{ ?p {_NAME} ?pl }}"
            return f"SELECT * {{ {{ {edges} }} UNION {{ {node} {_NAME} ?nl }} }}"
        edges = f"{node} {predicate} ?o OPTIONAL {{ ?o {_NAME} ?ol }}"
        return f"SELECT * {{ {{ {edges} }} UNION {{ {node} {_NAME} ?nl }} UNION {{ {predicate} {_NAME} ?pl }} }}"

    def relations_query(node: str) -> str:
        return (f"SELECT ?d ?p (COUNT(*) AS ?n) (SAMPLE(?pl) AS ?label) {{ {{ {node} ?p ?o BIND('out' AS ?d) }} UNION "
                f"{{ ?s ?p {node} BIND('in' AS ?d) }} OPTIONAL {{ ?p {_NAME} ?pl }} }} GROUP BY ?d ?p")

    def verdict_query(subject: str, predicate: str, obj: str) -> str:
        return (f"SELECT ?sl ?ol {{ {subject} <{NS}{predicate}> {obj} OPTIONAL {{ {subject} {_NAME} ?sl }} "
                f"OPTIONAL {{ {obj} {_NAME} ?ol }} }}")

    def labelled(name: str) -> str:
        return f"SELECT ?x {{ ?x {_NAME} {ox.Literal(name, language='en')} }}"

    limit = settings.explore_limit
    place = "people.person.place_of_birth"
    return [
        Case("search", "random", lambda i: search(backend, settings, ids[i], "outgoing"),
             bare(lambda i: edges_query(iri[other_ids[i]])),
             "the entity's out-edges with the labels of the entity, its relations and values"),
        Case("get_relations", "random", lambda i: get_relations(backend, settings, ids[i]),
             bare(lambda i: relations_query(iri[other_ids[i]])),
             "the entity's relations both ways, counted, with their labels"),
        Case("explore_kg", "random", lambda i: explore_kg(backend, settings, ids[i], [place]),
             bare(lambda i: edges_query(iri[other_ids[i]], f"<{NS}{place}>")),
             "the values along the relation with their labels, the entity's and the relation's label"),
        Case("verify", "random",
             lambda i: verify(backend, settings, [TripleClaim(subject=ids[i], relation="people.person.nationality", object=usa)]),
             bare(lambda i: verdict_query(iri[other_ids[i]], "people.person.nationality", hub_iris[0])),
             "the triple, with the subject's and the object's label"),
        Case("find_entities", "random", lambda i: find_entities(backend, settings, entity_name(people[i])),
             bare(lambda i: labelled(entity_name(others[i]))), "the entities with that exact label"),
        Case("search", "hubs", lambda i: search(backend, settings, hubs[i % 3], "incoming"),
             bare(lambda i: f"SELECT * {{ {record(hub_iris[(i + 1) % 3], False)} UNION {{ {hub_iris[(i + 1) % 3]} {_NAME} ?l }} }}"),
             "the hub's recorded statistics and its label"),
        Case("get_relations", "hubs", lambda i: get_relations(backend, settings, hubs[i % 3]),
             bare(lambda i: (f"SELECT * {{ {record(hub_iris[(i + 1) % 3], False)} UNION {record(hub_iris[(i + 1) % 3], True)} "
                             f"UNION {{ {hub_iris[(i + 1) % 3]} {_NAME} ?l }} }}")),
             "the hub's recorded statistics both ways and its label"),
        Case("explore_kg", "hubs", lambda i: explore_kg(backend, settings, hubs[i % 3], [f"~{hub_relations[i % 3]}"]),
             bare(lambda i: (f"SELECT * {{ {{ SELECT ?s ?l {{ ?s <{NS}{hub_relations[(i + 1) % 3]}> {hub_iris[(i + 1) % 3]} "
                             f"OPTIONAL {{ ?s {_NAME} ?l }} }} LIMIT {limit + 1} }} UNION {record(hub_iris[(i + 1) % 3], False)} }}")),
             f"the first {limit + 1} values along the relation with their labels, and the hub's statistics"),
        Case("verify", "hubs",
             lambda i: verify(backend, settings, [TripleClaim(subject=ids[i], relation="people.person.profession", object=hubs[1])]),
             bare(lambda i: verdict_query(iri[other_ids[i]], "people.person.profession", hub_iris[1])),
             "the triple, with the subject's and the object's label"),
        Case("find_entities", "hubs", lambda i: find_entities(backend, settings, hub_names[i % 3]),
             bare(lambda i: labelled(hub_names[(i + 1) % 3])), "the entities with that exact label"),
        Case("find_entities", "typed", lambda i: find_entities(backend, settings, typed[0][i]),
             bare(lambda i: labelled(typed[1][i])),
             "the entities with the typed text as their exact label: no query finds a name by a typo or a word"),
    ]
