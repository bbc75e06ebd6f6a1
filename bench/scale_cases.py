"""The scale bench's calls: each tool on random people and on hubs of the Freebase-shaped KG, and
beside each the bare pyoxigraph query that reads what the tool's answer shows.

A bare query is the least a program using pyoxigraph directly would ask for the same answer: the
edges, with the labels of the entity, of the relations and of the values shown (one SPARQL query,
all rows read), a hub's recorded statistics, an `ASK` with the two labels a verdict shows. No
engine query finds a name by a typo or by one of its words, so `find_entities` is timed beside the
reads its answer needs from the name index (the SQLite file beside the store): its lookup of the
same kind of text, then the labels of the hits it shows. Timed beside it, in the same cache state,
a tool's time says how much its own code adds to what the engine must read anyway
(kg_mcp.backends.oxigraph_store reads the same indexes without SPARQL, so a tool can be faster than
its bare query).

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
from kg_mcp.names import NameIndex
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
    bare_finds: bool = True  # whether its answers have rows (checked: a query that finds nothing reads little)

    @property
    def name(self) -> str:
        return f"{self.tool} ({self.kind})"


def _select(store: ox.Store, query: str) -> int:
    """Every row of a SELECT, read (the answer a program gets); returns how many."""
    return sum(1 for _ in store.query(query))


def _out_edges(node: str, predicate: str | None = None) -> str:
    """The node's out-edges (along `predicate` only if given) with the labels of the values, of the
    relations and of the node."""
    if predicate is None:
        edges = f"{node} ?p ?o OPTIONAL {{ ?o {_NAME} ?ol }} OPTIONAL {{ ?p {_NAME} ?pl }}"
        return f"SELECT * {{ {{ {edges} }} UNION {{ {node} {_NAME} ?nl }} }}"
    edges = f"{node} {predicate} ?o OPTIONAL {{ ?o {_NAME} ?ol }}"
    return f"SELECT * {{ {{ {edges} }} UNION {{ {node} {_NAME} ?nl }} UNION {{ {predicate} {_NAME} ?pl }} }}"


def _relations(node: str) -> str:
    """The node's relations both ways, counted, with their labels."""
    edges = f"{{ {node} ?p ?o BIND('out' AS ?d) }} UNION {{ ?s ?p {node} BIND('in' AS ?d) }}"
    return f"SELECT ?d ?p (COUNT(*) AS ?n) (SAMPLE(?pl) AS ?l) {{ {edges} OPTIONAL {{ ?p {_NAME} ?pl }} }} GROUP BY ?d ?p"


def _verdict(subject: str, predicate: str) -> str:
    """What a verdict shows: the subject's values along the relation (the claimed one among them,
    or those the KG has instead) with their labels, and the subject's label."""
    return f"SELECT * {{ {{ {subject} <{NS}{predicate}> ?o OPTIONAL {{ ?o {_NAME} ?ol }} }} UNION {{ {subject} {_NAME} ?sl }} }}"


def _labelled(name: str) -> str:
    """The entities with `name` as their label (the floor an exact name could cost: no ranking, no
    typo, no words)."""
    return f"SELECT ?x {{ ?x {_NAME} {ox.Literal(name, language='en')} }}"


def _index_reads(names: NameIndex, text: str, limit: int = 10) -> int:
    """What `find_entities` reads for `text` from the name index: its tiers' matches (the candidates
    a lookup ranks, as the backend asks for them), then the labels of the hits shown; returns the
    matches."""
    matches = names.lookup(text, max(limit * 2, 10), fill=limit)
    names.label_of([m.shown for m in matches[:limit] if isinstance(m.shown, int)])
    return len(matches)


def _hub(hub: str, *, outgoing: bool = False, values_along: str | None = None, limit: int = 0) -> str:
    """A hub's recorded statistics (in-edges, or both ways if `outgoing`) and its label, or, with
    `values_along`, its first `limit` values along that relation (walked backwards), labelled."""

    def record(way) -> str:
        return f"{{ GRAPH <{STATS_GRAPH.value}> {{ {hub} <{way.value}> ?stats }} }}"

    parts = [record(IN_DEGREE)] + ([record(OUT_DEGREE)] if outgoing else [])
    if values_along:
        values = f"SELECT ?s ?l {{ ?s <{NS}{values_along}> {hub} OPTIONAL {{ ?s {_NAME} ?l }} }} LIMIT {limit}"
        parts.append(f"{{ {values} }}")
    else:
        parts.append(f"{{ {hub} {_NAME} ?l }}")
    return f"SELECT * {{ {' UNION '.join(parts)} }}"


def cases(
    backend: Backend,
    settings: Settings,
    triples: int,
    calls: int,
    store: ox.Store | None,
    names: NameIndex | None = None,
) -> list[Case]:
    """The tool calls on the Freebase-shaped KG of `triples` lines behind `backend`, each beside its
    bare query on `store` (None, as for an endpoint: tool calls only); `find_entities` beside the
    reads of the store's name index `names` (None: the exact label query, a floor)."""
    if backend.profile.name != "freebase":
        raise RuntimeError(f"profile detected as {backend.profile.name}, not freebase")
    start, end = Layout(triples).kind_range(0)  # people: every one has a nationality and a place of birth
    samples = [[rng.randrange(start, end) for _ in range(calls)] for rng in (random.Random(5), random.Random(6))]
    people, others = samples
    ids, other_iris = [mid(i) for i in people], [f"<{NS}{mid(i)}>" for i in others]
    shown = search(backend, settings, ids[0], "outgoing").text
    if "<http" in shown or "m.0" not in shown:
        raise RuntimeError(f"ids are not compacted on the Freebase-shaped store:\n{shown[:500]}")
    # Hubs: a country, a profession and a type node, each with millions of in-edges at 100M. The
    # bare query reads the next one: all three are read by both, in turns.
    usa, actor = mid(country_id(0)), mid(profession_id(0))
    hubs = [usa, actor, f"<{NS}people.person>"]
    hub_iris = [f"<{NS}{usa}>", f"<{NS}{actor}>", f"<{NS}people.person>"]
    hub_names = [COUNTRIES[0], PROFESSIONS[0], "Person"]
    hub_relations = ["people.person.nationality", "people.person.profession", "type.object.type"]
    # Names as people type them: a letter dropped (a typo), or the surname alone (shared by thousands
    # of people at 100M: the words tier ranks them).
    typed = [[n[:3] + n[4:] if i % 2 else n.split()[-1] for i, n in enumerate(map(entity_name, s))] for s in samples]
    limit = settings.explore_limit
    place, nationality, profession = (f"people.person.{r}" for r in ("place_of_birth", "nationality", "profession"))

    def bare(query: Callable[[int], str]) -> Callable[[int], object] | None:
        return None if store is None else (lambda i: _select(store, query(i)))

    def lookup(text: Callable[[int], str]) -> Callable[[int], object] | None:
        """The name index's reads for the i-th text, else the exact label query (a floor)."""
        if names is None:
            return bare(lambda i: _labelled(text(i)))
        return lambda i: _index_reads(names, text(i))

    def name_reads(what: str) -> str:
        if names is not None:
            return f"the name index's lookup of {what} and the labels of the hits shown"
        return f"the entities with {what} as their exact label (a floor: no query finds a typo or a word)"

    def claim(i: int, relation: str, obj: str) -> list[TripleClaim]:
        return [TripleClaim(subject=ids[i], relation=relation, object=obj)]

    def next_hub(i: int) -> str:
        return hub_iris[(i + 1) % 3]

    verdict_read = "the subject's values along the relation with their labels, and the subject's label"
    return [
        Case("search", "random", lambda i: search(backend, settings, ids[i], "outgoing"),
             bare(lambda i: _out_edges(other_iris[i])),
             "the entity's out-edges with the labels of the entity, its relations and values"),
        Case("get_relations", "random", lambda i: get_relations(backend, settings, ids[i]),
             bare(lambda i: _relations(other_iris[i])), "the entity's relations both ways, counted, with their labels"),
        Case("explore_kg", "random", lambda i: explore_kg(backend, settings, ids[i], [place]),
             bare(lambda i: _out_edges(other_iris[i], f"<{NS}{place}>")),
             "the values along the relation with their labels, the entity's and the relation's label"),
        Case("verify", "random", lambda i: verify(backend, settings, claim(i, nationality, usa)),
             bare(lambda i: _verdict(other_iris[i], nationality)), verdict_read),
        Case("find_entities", "random", lambda i: find_entities(backend, settings, entity_name(people[i])),
             lookup(lambda i: entity_name(others[i])), name_reads("the name")),
        Case("search", "hubs", lambda i: search(backend, settings, hubs[i % 3], "incoming"),
             bare(lambda i: _hub(next_hub(i))), "the hub's recorded statistics and its label"),
        Case("get_relations", "hubs", lambda i: get_relations(backend, settings, hubs[i % 3]),
             bare(lambda i: _hub(next_hub(i), outgoing=True)), "the hub's recorded statistics both ways and its label"),
        Case("explore_kg", "hubs", lambda i: explore_kg(backend, settings, hubs[i % 3], [f"~{hub_relations[i % 3]}"]),
             bare(lambda i: _hub(next_hub(i), values_along=hub_relations[(i + 1) % 3], limit=limit + 1)),
             f"the first {limit + 1} values along the relation with their labels, and the hub's statistics"),
        Case("verify", "hubs", lambda i: verify(backend, settings, claim(i, profession, actor)),
             bare(lambda i: _verdict(other_iris[i], profession)), verdict_read),
        Case("find_entities", "hubs", lambda i: find_entities(backend, settings, hub_names[i % 3]),
             lookup(lambda i: hub_names[(i + 1) % 3]), name_reads("the name")),
        Case("find_entities", "typed", lambda i: find_entities(backend, settings, typed[0][i]),
             lookup(lambda i: typed[1][i]), name_reads("the typed text"),
             bare_finds=names is not None),
    ]
