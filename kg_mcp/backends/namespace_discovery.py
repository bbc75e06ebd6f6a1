"""Prefixes for an endpoint that did not come through `kg-mcp load`: published in VoID, or sampled.

A local store records its prefixes at load time; an endpoint has no such record. So, once when
the server opens it, a few bounded queries look at what the endpoint holds:

- VoID: `void:uriSpace` (the namespace of a data set's entities) and `void:vocabulary`;
- a sample of its triples: the namespaces most of the sampled subjects and predicates share.
  Where the backend reads several graphs, each is sampled in proportion to its size (counted up
  to SIZE_CAP), so that a small graph is seen and a big one weighs as it should.

A dominant subject namespace gets a prefix; the dominant predicate namespace is shown bare (as
`directed_by`), like the relations of a store loaded from text, unless entities share it. The
result feeds the same `Vocabulary` a local store uses.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import pyoxigraph as ox

from kg_mcp.backends.named_graphs import bounded_graph_size
from kg_mcp.errors import KGError
from kg_mcp.namespaces import ENTITY_PATH, ENTITY_PREFIX, RELATION_PATH

log = logging.getLogger(__name__)

SAMPLE_TRIPLES = 2000  # triples read to find dominant namespaces: one bounded query
SIZE_CAP = 100_000  # a graph's triples are counted up to this to weigh its share of the sample
MIN_SHARE = 50  # triples read from any graph, however small
SAMPLED_GRAPHS = 20  # the largest graphs sampled, when the backend reads more
COUNTED_GRAPHS = 50  # graphs whose size is counted to find those (the first listed)
SUBJECTS_REVISITED = 40  # subjects of the first sample whose own triples are read in a second one
VOID_ROWS = 50
_DOMINANT_SHARE = 0.1  # a namespace holding at least this share of the sample gets a prefix
_BARE_SHARE = 0.5  # the predicate namespace shown bare must hold most non-standard predicates
_PREFIX_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")

VOID = "http://rdfs.org/ns/void#"
SAMPLE_QUERY = f"SELECT ?s ?p ?o WHERE {{ ?s ?p ?o }} LIMIT {SAMPLE_TRIPLES}"
VOID_QUERY = (
    f"SELECT ?space ?vocabulary WHERE {{ {{ ?d <{VOID}uriSpace> ?space }} UNION {{ ?d <{VOID}vocabulary> ?vocabulary }} }} "
    f"LIMIT {VOID_ROWS}"
)


@dataclass
class Discovered:
    """Prefixes and bare namespaces found on an endpoint, and where each came from."""

    prefixes: dict[str, str] = field(default_factory=dict)
    bare: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)  # namespace -> "void" | "sample"


def namespace_of(iri: str) -> str:
    """The IRI up to its last '/' or '#' (`http://x.org/entity/Q1` -> `http://x.org/entity/`)."""
    cut = max(iri.rfind("/"), iri.rfind("#"))
    return iri[: cut + 1] if cut > len("https://") else ""


def discover(
    solutions: Callable[[str], Iterable], known: dict[str, str], graphs: Sequence[str] = ()
) -> Discovered:
    """Namespaces of the endpoint that `known` (prefix -> namespace) does not cover yet.

    `solutions(query)` runs a SELECT; `graphs` are the data graphs to sample (empty: the default
    graph). Failures are logged and leave ids in full: discovery only shortens output, it must
    never stop a server from starting.
    """
    found = Discovered()
    covered = set(known.values())
    select = solutions

    def solutions(query: str) -> list:
        rows = select(query)
        return rows if isinstance(rows, list) else []  # an endpoint that answers a SELECT oddly
    try:
        void_spaces, vocabularies = _void(solutions)
        subjects, predicates = _sample(solutions, _first_queries(solutions, graphs))
    except KGError as e:
        log.warning("could not look at the endpoint's namespaces (%s); ids are shown in full", e.message)
        return found
    entity_spaces = [ns for ns in void_spaces if ns not in covered]
    for ns in entity_spaces:
        found.sources[ns] = "void"
    entity_spaces += [ns for ns in _dominant(subjects) if ns not in covered and ns not in entity_spaces]
    relation_spaces = [ns for ns in vocabularies if ns not in covered]
    for ns in relation_spaces:
        found.sources[ns] = "void"
    # VoID's own terms describe the data set, not the data: they never name its relations.
    bare = _bare_candidate(Counter({ns: n for ns, n in predicates.items() if ns != VOID}), covered, relation_spaces)
    taken = set(known)
    for ns in entity_spaces:
        found.sources.setdefault(ns, "sample")
        name = _prefix_name(ns, taken, entity=True, relation_spaces=[bare, *relation_spaces])
        found.prefixes[name] = ns
        taken.add(name)
    if bare and bare not in entity_spaces:
        found.sources.setdefault(bare, "sample")
        found.bare.append(bare)
    for ns in relation_spaces:
        if ns not in found.bare and ns not in entity_spaces:
            name = _prefix_name(ns, taken, entity=False, relation_spaces=[])
            found.prefixes[name] = ns
            taken.add(name)
    log.info("endpoint namespaces: prefixes %s, bare %s", found.prefixes, found.bare)
    return found


def _void(solutions) -> tuple[list[str], list[str]]:
    spaces, vocabularies = [], []
    for row in solutions(VOID_QUERY):
        for variable, into in (("space", spaces), ("vocabulary", vocabularies)):
            term = row[variable]
            if isinstance(term, (ox.Literal, ox.NamedNode)) and term.value.startswith(("http://", "https://")):
                into.append(term.value)
    return list(dict.fromkeys(spaces)), list(dict.fromkeys(vocabularies))


def _first_queries(solutions, graphs: Sequence[str]) -> list[str]:
    """The first sample: one query over the default graph, or one per graph (`GRAPH <g>`, which
    reads it with or without a dataset), several sharing SAMPLE_TRIPLES by their sizes."""
    if not graphs:
        return [SAMPLE_QUERY]
    sizes = {graphs[0]: SAMPLE_TRIPLES}
    if len(graphs) > 1:
        for graph in graphs[:COUNTED_GRAPHS]:
            rows = solutions(bounded_graph_size(graph, SIZE_CAP))
            n = rows[0]["n"] if rows else None
            sizes[graph] = int(n.value) if isinstance(n, ox.Literal) else 0
        log.info("namespace sample over graphs (triples, up to %d): %s", SIZE_CAP, sizes)
    biggest = sorted((g for g in sizes if sizes[g]), key=lambda g: -sizes[g])[:SAMPLED_GRAPHS]
    total = sum(sizes[g] for g in biggest)
    return [
        f"SELECT ?s ?p ?o WHERE {{ GRAPH {ox.NamedNode(g)} {{ ?s ?p ?o }} }} "
        f"LIMIT {max(MIN_SHARE, SAMPLE_TRIPLES * sizes[g] // total)}"
        for g in biggest
    ]


def _sample(solutions, first: Sequence[str] = (SAMPLE_QUERY,)) -> tuple[Counter, Counter]:
    """Namespace counts of subjects (and IRI objects) and of predicates in two bounded samples.

    The first triples an engine returns come in its index order and may all share one predicate
    (Virtuoso starts with rdfs:label); the second sample reads every triple of a few of those
    subjects, so the predicates that entities actually use are seen too.
    """
    subjects, predicates = Counter(), Counter()
    seen: list[ox.NamedNode] = []
    for query in (*first, None):
        if query is None:
            spread = list(dict.fromkeys(seen))
            spread = spread[:: max(1, len(spread) // SUBJECTS_REVISITED)][:SUBJECTS_REVISITED]
            if not spread:
                break
            query = (
                f"SELECT ?s ?p ?o WHERE {{ VALUES ?s {{ {' '.join(str(n) for n in spread)} }} ?s ?p ?o }} "
                f"LIMIT {SAMPLE_TRIPLES}"
            )
        for row in solutions(query):
            if isinstance(row["s"], ox.NamedNode):
                seen.append(row["s"])
            for variable, counter in (("s", subjects), ("o", subjects), ("p", predicates)):
                term = row[variable]
                # An IRI that is a namespace itself (a VoID vocabulary) says nothing about entities.
                if isinstance(term, ox.NamedNode) and (ns := namespace_of(term.value)) and ns != term.value:
                    counter[ns] += 1
    return subjects, predicates


def _dominant(counts: Counter) -> list[str]:
    total = sum(counts.values())
    return [ns for ns, n in counts.most_common() if total and n / total >= _DOMINANT_SHARE]


def _bare_candidate(predicates: Counter, covered: set[str], vocabularies: list[str]) -> str | None:
    """The predicate namespace holding most of the predicates that no known prefix covers.

    Among the published vocabularies (VoID), the most used one, if any of them is used at all.
    """
    own = Counter({ns: n for ns, n in predicates.items() if ns not in covered})
    published = [ns for ns in vocabularies if own.get(ns)]
    if published:
        return max(published, key=own.__getitem__)
    total = sum(own.values())
    if not total:
        return None
    ns, n = own.most_common(1)[0]
    return ns if n / total >= _BARE_SHARE else None


def _prefix_name(namespace: str, taken: set[str], *, entity: bool, relation_spaces: list[str | None]) -> str:
    """A short prefix for `namespace`: `kg` for kg-mcp's own entity namespace, else its last word."""
    if entity and namespace.endswith("/" + ENTITY_PATH):
        base = namespace[: -len(ENTITY_PATH)]
        if base + RELATION_PATH in relation_spaces and ENTITY_PREFIX not in taken:
            return ENTITY_PREFIX
    words = [w for w in re.split(r"[/#.:]+", namespace.split("://", 1)[-1]) if _PREFIX_NAME.fullmatch(w)]
    candidates = [w.lower()[:12] for w in reversed(words) if w.lower() not in ("www", "http", "https", "com", "org", "net")]
    for name in candidates:
        if name not in taken:
            return name
    n = 1
    while f"ns{n}" in taken:
        n += 1
    return f"ns{n}"
