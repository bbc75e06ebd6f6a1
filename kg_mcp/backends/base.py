"""The one interface every tool uses: a few questions any KG store can answer.

Terms are pyoxigraph's own `NamedNode`, `BlankNode` and `Literal`, whether they come from a
local store or from an endpoint's JSON results, so tools handle a single set of types.
Implementations raise only the errors of `kg_mcp.errors`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum

import pyoxigraph as ox

from kg_mcp.ids import Vocabulary
from kg_mcp.profiles import Profile

Term = ox.NamedNode | ox.BlankNode | ox.Literal


class Direction(str, Enum):
    OUTGOING = "outgoing"  # the entity is the subject
    INCOMING = "incoming"  # the entity is the object


class Values(str, Enum):
    """Which neighbours a listing reads: every one, the named ones (IRIs and literals) or the
    anonymous ones (blank nodes). Listings page through the named ones and sum the anonymous up."""

    ANY = "any"
    NAMED = "named"
    ANONYMOUS = "anonymous"


@dataclass(frozen=True)
class Qualifier:
    predicate: ox.NamedNode
    value: Term


@dataclass(frozen=True)
class Neighbour:
    """One edge seen from a focus entity: the predicate and the node at its other end."""

    predicate: ox.NamedNode
    value: Term
    qualifiers: tuple[Qualifier, ...] = ()


@dataclass(frozen=True)
class RelationCount:
    predicate: ox.NamedNode
    direction: Direction
    count: int
    exact: bool = True  # False: counted among the first `count_cap` edges of a hub only (a lower bound)


@dataclass(frozen=True)
class EntityHit:
    node: ox.NamedNode
    label: str | None
    description: str | None
    degree: int
    # How the name matched: "id", "exact" (a label), "folded" (a label, up to case, accents and
    # punctuation), "alias", "words" (every word, any order), "fuzzy" (words within a typo or two),
    # "semantic"; over label queries "case-insensitive" or "prefix"; "search" for an engine's own search.
    match: str


@dataclass(frozen=True)
class Lookup:
    hits: list[EntityHit]
    method: str  # how names were looked up: "name index", "label queries", "Wikidata entity search", ...


@dataclass
class Rows:
    """Rows of a user's SPARQL query, cut at a cap; `total` counts all of them (None if unknown).

    `cut_at` is the engine's own row limit when the answer reached it (more rows may exist);
    `partial` is the engine's note when it stopped the query early and sent what it had;
    `cut` says why kg-mcp stopped reading the answer before its end (its byte cap).
    """

    variables: list[str]
    rows: list[list[Term | None]]
    total: int | None
    boolean: bool | None = None
    cut_at: int | None = None
    partial: str | None = None
    cut: str | None = None


@dataclass
class StoreStats:
    kind: str
    profile: str
    triples: int | None
    entities: int | None = None
    relations: int | None = None
    top_relations: list[tuple[ox.NamedNode, int]] = field(default_factory=list)
    details: dict[str, str] = field(default_factory=dict)
    bounded: bool = False  # the counts are lower bounds ("at least N"); details["counts"] says how


class Backend(ABC):
    """What the tools need from a KG. `limit` arguments are hard caps on rows returned."""

    profile: Profile
    vocab: Vocabulary
    # A first read of a listing comes in the order its later pages are read in (a local store's
    # index); an endpoint may sort a listing's pages apart from an unordered first read.
    reads_in_page_order: bool = False

    # --- references -------------------------------------------------------------------------
    @abstractmethod
    def resolve_entity(self, ref: str, *, check: bool = True) -> ox.NamedNode:
        """An entity from an id or an exact label; UnknownEntity (with suggestions) otherwise.

        With check=False an id is not looked up: callers that get rows back know it exists and
        call `require` only when they got none (one query fewer on every ordinary call).
        """

    @abstractmethod
    def require(self, node: ox.NamedNode, ref: str) -> None:
        """Raise UnknownEntity (with suggestions) if `node`, written `ref` by the caller, is not in the KG."""

    @abstractmethod
    def resolve_relation(self, ref: str) -> tuple[ox.NamedNode, Direction]:
        """A relation id or label; a leading `~` means the relation walked backwards (incoming)."""

    # --- neighbourhoods ---------------------------------------------------------------------
    @abstractmethod
    def neighbours(
        self,
        node: ox.NamedNode,
        direction: Direction,
        predicates: Sequence[ox.NamedNode] | None,
        limit: int,
        *,
        offset: int = 0,
        values: Values = Values.ANY,
    ) -> list[Neighbour]:
        """Up to `limit` edges of `node` in one direction, only `predicates` if given, only to
        `values` of that kind, from the `offset`-th on. With NAMED or ANONYMOUS the edges come in
        an order that holds from call to call (a listing's pages read on with `offset`); with ANY
        and a cut, the named edges come first."""

    @abstractmethod
    def count_neighbours(
        self, node: ox.NamedNode, direction: Direction, predicates: Sequence[ox.NamedNode] | None, *,
        values: Values = Values.ANY,
    ) -> int:
        """Edges of `node` in one direction (only `predicates` if given, only to `values` of that
        kind); at most `count_cap`, which then means "at least that many"."""

    def counts_recorded(self, node: ox.NamedNode, direction: Direction) -> bool:
        """Whether `count_kinds` of `node` one way comes from counts kept at load time: exact at any
        size, not only below `count_cap`."""
        return False

    def count_kinds(
        self, node: ox.NamedNode, direction: Direction, predicates: Sequence[ox.NamedNode] | None
    ) -> tuple[int, int]:
        """(named, anonymous) edges of `node` in one direction (only `predicates` if given), counted
        among its first `count_cap` edges (their sum equal to `count_cap` means "at least")."""
        return (self.count_neighbours(node, direction, predicates, values=Values.NAMED),
                self.count_neighbours(node, direction, predicates, values=Values.ANONYMOUS))

    @abstractmethod
    def relations_around(self, node: ox.NamedNode) -> list[RelationCount]:
        """`relation_counts` in both directions, outgoing first (one round trip where possible)."""

    @abstractmethod
    def known_degree(self, node: ox.NamedNode, direction: Direction) -> int | None:
        """The number of visible edges when it is recorded (hub statistics), else None; never a scan."""

    @abstractmethod
    def relation_counts(self, node: ox.NamedNode, direction: Direction) -> list[RelationCount]:
        """Every visible predicate around `node` in one direction, with its number of edges.

        Exact for ordinary nodes and for hubs with recorded statistics; for other nodes with
        more than `count_cap` edges, counted among the first `count_cap` (marked not exact)."""

    count_cap: int = 100_000

    @abstractmethod
    def step(
        self, sources: Sequence[ox.NamedNode], predicate: ox.NamedNode, direction: Direction, limit: int
    ) -> list[tuple[ox.NamedNode, Term]]:
        """Distinct (source, neighbour) pairs along one predicate from many sources, up to `limit`,
        in one round trip: one hop of `follow`."""

    def closure_edges(
        self, sources: Sequence[Term], predicate: ox.NamedNode, direction: Direction, limit: int
    ) -> list[tuple[Term, Term]] | None:
        """The edges along `predicate` (as (from, to) in the walk's direction) among every node
        reachable from `sources` that way, up to `limit`, in one round trip (a SPARQL property
        path); None where walking it level by level with `step` costs no more (a local store)."""
        return None

    def identifier_predicates(self, predicates: Sequence[ox.NamedNode]) -> set[ox.NamedNode]:
        """Those of `predicates` whose property the KG marks as an external identifier (none when the
        profile names no such mark)."""
        return set()

    def addresses_blank_nodes(self, example: ox.BlankNode | None = None) -> bool:
        """Whether the tools may show blank nodes by their handle (`_:label`): every method then
        takes them as it takes IRIs. `example`, a blank node this backend returned, lets an endpoint
        be probed for a way to name one in a query."""
        return False

    def read_blank_nodes(self, nodes: Sequence[ox.BlankNode]) -> None:
        """Read the edges of several blank nodes at once, ahead of questions about each (an endpoint
        then asks one query for many)."""

    @abstractmethod
    def has_triple(self, subject: ox.NamedNode, predicate: ox.NamedNode, obj: Term) -> bool: ...

    @abstractmethod
    def exists(self, node: ox.NamedNode) -> bool:
        """Whether `node` occurs in any triple."""

    def uses_predicate(self, predicate: ox.NamedNode) -> bool:
        """Whether any triple has `predicate` (True where the store cannot tell cheaply)."""
        return True

    def uses_as(self, node: ox.NamedNode, position: str) -> bool:
        """Whether any triple has `node` where a query put it: as its predicate ("predicate"), as the
        class of a node, the object of rdf:type ("class"), or as its subject or object ("node");
        one index lookup, True where the store cannot tell."""
        if position == "predicate":
            return self.uses_predicate(node)
        if position == "node":
            return self.exists(node)
        return True

    def indexed_names(self, name: str, limit: int) -> list[tuple[ox.NamedNode, str]]:
        """Up to `limit` entities whose label or alias is `name` or near it (its words, a typo or two)
        in the name index, with the name that matched, best first; none where no index is ready
        (nothing is asked of the KG)."""
        return []

    def reaches(
        self,
        sources: Sequence[ox.NamedNode],
        first: Sequence[tuple[ox.NamedNode, Direction]],
        then: Sequence[tuple[ox.NamedNode, Direction]],
        targets: Sequence[ox.NamedNode],
    ) -> bool | None:
        """Whether a path of one `first` step, then any number of `then` steps, leads from a source
        to a target, asked of the engine as one SPARQL property path; None where the backend leaves
        it to a bounded walk (a local store) or the engine could not answer."""
        return None

    # --- names ------------------------------------------------------------------------------
    @abstractmethod
    def labels(self, terms: Sequence[Term]) -> dict[Term, str]:
        """Best label of each node in the preferred languages (predicates via their property entity)."""

    @abstractmethod
    def descriptions(self, nodes: Sequence[ox.NamedNode]) -> dict[ox.NamedNode, str]: ...

    @abstractmethod
    def lookup(self, name: str, limit: int) -> Lookup:
        """Entities by name, best first: the id, the whole name, then its words, then near spellings."""

    def find_entities(self, name: str, limit: int) -> list[EntityHit]:
        return self.lookup(name, limit).hits

    def labelled(self, name: str, limit: int) -> list[ox.NamedNode]:
        """The entities whose label is exactly `name`, up to `limit`."""
        return [h.node for h in self.find_entities(name, limit) if h.match == "exact"]

    # --- whole store --------------------------------------------------------------------------
    @abstractmethod
    def run_query(self, query: str, row_cap: int, *, graphs: tuple[str, ...] | None = None) -> Rows:
        """A read-only SPARQL SELECT/ASK written by kg_mcp.sparql (or by kg-mcp itself); `graphs`:
        the dataset its text was written for (None: the backend's own, `read_graphs`)."""

    @property
    def read_graphs(self) -> tuple[str, ...]:
        """The named graphs the call's queries read (empty: the store or endpoint as it answers)."""
        return ()

    @property
    def data_stamp(self) -> str:
        """Names the state of the data served (a store's last load), so that a listing's cursor from
        before a reload is refused as stale; "" where it cannot be told cheaply (an endpoint)."""
        return ""

    @property
    def served_graphs(self) -> tuple[str, ...]:
        """The named graphs the server reads for a caller not restricted to some (empty: the store's
        default graph, or the endpoint as it answers)."""
        return ()

    @abstractmethod
    def stats(self) -> StoreStats: ...

    def prepare_lookups(self) -> None:
        """Start, in the background, what name lookups need before the first one comes (an endpoint's
        name index); nothing by default."""

    def close(self) -> None:
        """Release the store or connection."""
