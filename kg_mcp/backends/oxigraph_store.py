"""A local Oxigraph store on disk (or in memory, for the demo KG and tests).

A store is read through its default graph, as `kg-mcp load` fills it; or through named graphs
(`kg-mcp load --graph IRI`): those chosen with --graph, and under --graph-access the graphs each
caller's scopes grant (kg_mcp.backends.graph_access), read as one graph. Every read takes the
graphs of the call: the store's indexes (kg_mcp.backends.store_patterns, the blank nodes), the
queries (their dataset), the user's `sparql` (the worker runs it over those graphs only), the
name index (one per graph set, kg_mcp.backends.store_names). Hub statistics describe the default
graph, so they are used only when the call reads it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import pyoxigraph as ox

from kg_mcp.backends import blank_nodes, graph_access, store_patterns
from kg_mcp.backends.base import Direction, Neighbour, RelationCount, Rows, Values
from kg_mcp.backends.blank_nodes import is_blank
from kg_mcp.backends.engine_answers import Solutions, solutions_of
from kg_mcp.backends.query_pool import QueryPool, StoreSource
from kg_mcp.backends.sparql_backend import SparqlBackend
from kg_mcp.backends.store_names import GraphSetNames
from kg_mcp.errors import EndpointError
from kg_mcp.hubs import hub_anonymous, hub_stats, recorded_directions
from kg_mcp.names import NameIndex
from kg_mcp.names.store_index import memory_index, store_stamp
from kg_mcp.store_meta import named_data_graphs
from kg_mcp.observability import tracing

# Up to this many edges around a node, get_relations counts them in Python from the index (see
# kg_mcp.backends.store_patterns); past it, an aggregate query counts them in the engine.
_COUNTED_HERE = 1000
# Degrees of a lookup's candidates read side by side on a store on disk: on a store bigger than
# memory each read mostly waits for the disk, and pyoxigraph lets go of the GIL while it reads.
_DEGREE_READERS = 4
# Hub records kept once read (each a hub's counts per predicate in one direction, and those to blank nodes).
_HUB_RECORDS_KEPT = 1024


def default_graph_empty(store: ox.Store) -> bool:
    return next(store.quads_for_pattern(None, None, None, store_patterns.DEFAULT_GRAPH), None) is None


class OxigraphBackend(SparqlBackend):
    """A local store. Names are looked up in its name index (kg_mcp.names): the file built by
    `kg-mcp load` for a store on disk, one built in memory on first use for an in-memory store."""

    kind = "oxigraph"

    def __init__(
        self, store: ox.Store, *args, location: str = "memory", path: str | None = None, graphs: Sequence[str] = (),
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.store = store
        self._served_graphs: tuple[str, ...] = ()
        self._served_terms: tuple = store_patterns.DEFAULT
        self._terms_of: dict[frozenset[str], tuple[ox.NamedNode, ...]] = {}
        self.serve_graphs(graphs)
        # By their stored ids, stable while served; read in the call's graphs.
        self._address_blanks(blank_nodes.store_reader(store, self._graph_terms))
        self.location = location
        self.path = path  # the store's directory; None for an in-memory store
        self._label_nodes = [ox.NamedNode(p) for p in self.label_predicates]
        self._label_set = frozenset(self._label_nodes)
        self._hubs: set[tuple[ox.NamedNode, bool]] | None = None  # (hub, outgoing) with recorded statistics
        # Hub records read, with their counts of anonymous neighbours (read-only while served).
        self._hub_records: dict[tuple[ox.NamedNode, bool], tuple[dict[str, int], dict[str, int] | None]] = {}
        self._pool: QueryPool | None = None
        self._pool_lock = threading.Lock()
        self._degree_readers = ThreadPoolExecutor(_DEGREE_READERS, "kg-mcp-degrees") if path else None
        self._names: NameIndex | None = None
        self._names_tried = False
        self._graph_names = GraphSetNames(
            store, path, self.profile, self.settings.languages, read_ahead=self.settings.warm_name_index)
        self._semantic: dict[int, object] = {}  # kg_mcp.names.semantic.SemanticNames per index, made on first use
        self._names_lock = threading.Lock()
        self._stamp: str | None = None

    @property
    def data_stamp(self) -> str:
        if self._stamp is None:  # read once: a served store does not change under the server
            self._stamp = store_stamp(self.store)
        return self._stamp

    # --- which graphs a call reads -----------------------------------------------------------------
    def serve_graphs(self, graphs: Sequence[str]) -> None:
        """Read the named `graphs` (as one graph) where the call is not restricted (empty: the default graph)."""
        self._served_graphs = tuple(sorted(graphs))
        self._served_terms = tuple(ox.NamedNode(g) for g in self._served_graphs) or store_patterns.DEFAULT

    @property
    def served_graphs(self) -> tuple[str, ...]:
        return self._served_graphs

    @property
    def read_graphs(self) -> tuple[str, ...]:
        return tuple(g.value for g in self._graph_terms() if isinstance(g, ox.NamedNode))

    def _graph_terms(self) -> tuple:
        """The graphs the call reads: the caller's (kg_mcp.backends.graph_access), else the server's."""
        graphs = graph_access.current()
        if graphs is None:
            return self._served_terms
        terms = self._terms_of.get(graphs)
        if terms is None:
            terms = self._terms_of[graphs] = tuple(ox.NamedNode(g) for g in sorted(graphs))
        return terms

    def _reads_default_graph(self) -> bool:
        return self._graph_terms() is store_patterns.DEFAULT

    def _dataset(self) -> dict:
        """The keyword arguments of Store.query that make a query read the call's graphs only."""
        terms = self._graph_terms()
        if terms is store_patterns.DEFAULT:
            return {}
        return {"default_graph": list(terms), "named_graphs": list(terms)}

    # --- names -------------------------------------------------------------------------------------
    def use_names(self, index: NameIndex | None) -> None:
        """Look names up in `index` (None: by label queries, as on an endpoint)."""
        self._names, self._names_tried = index, True

    def _name_index(self, begin: bool = True) -> NameIndex | None:
        """The name index of the graphs the call reads (None: label queries answer)."""
        if not self._reads_default_graph():
            return self._graph_names.index(self.read_graphs, begin=begin) if self.settings.name_index else None
        with self._names_lock:
            if not self._names_tried:  # an in-memory store: index it now, it is small
                self._names_tried = True
                if self.settings.name_index:
                    self._names = memory_index(self.store, self.profile, self.settings.languages)
        return self._names

    def prepare_lookups(self) -> None:
        if not self._reads_default_graph():
            self._name_index()  # a graph set's index is built in the background, if missing

    def name_index_gaps(self) -> list[tuple[str, ...]]:
        """The graph sets prepared or read that have no name index now (being built, or unbuildable)."""
        return self._graph_names.gaps() if self.settings.name_index else []

    def _name_matches(self, name: str, limit: int):
        index = self._name_index()
        if index is None:
            method, matches = super()._name_matches(name, limit)
            note = self._graph_names.note(self.read_graphs) if not self._reads_default_graph() else ""
            return (f"{method}; {note}" if note else method), matches
        matches = self._indexed_matches(index, name, limit)
        if matches or not self.settings.semantic_lookup:
            return "name index", matches
        from kg_mcp.names.semantic import SemanticNames  # numpy and the model load only if asked for

        with self._names_lock:
            semantic = self._semantic.get(id(index))
            if semantic is None:
                semantic = self._semantic[id(index)] = SemanticNames(index)
        nearest = semantic.nearest(name, max(limit * 2, 10))
        return "name index, then nearest names by embedding", [
            (ox.NamedNode(m.entity), m.kind, m.order, m.degree, m.shown) for m in nearest
        ]

    def _lookup_index(self) -> NameIndex | None:
        return self._names if self._reads_default_graph() else self._name_index(begin=False)

    # A hub's predicate counts were recorded at load time (kg_mcp.hubs): one lookup, not a scan.
    def relation_counts(self, node: ox.NamedNode, direction: Direction) -> list[RelationCount]:
        stats = self._hub_stats(node, direction)
        if stats is None:
            return super().relation_counts(node, direction)
        rows = [(p, n) for p, n in stats.items() if not self.profile.is_hidden(p)]
        return [RelationCount(ox.NamedNode(p), direction, n) for p, n in sorted(rows, key=lambda x: -x[1])]

    # The ordinary calls' reads, from the store's indexes: no query to parse and plan.
    _order_matters = False  # the index's order holds while the store is served
    reads_in_page_order = True

    def _edges_with_labels(self, node, direction, predicates, limit, *, values=Values.ANY, offset=0, ordered=False):
        outgoing, hidden = direction is Direction.OUTGOING, self._hidden(node, predicates)
        pairs = self._read(store_patterns.edges, self.store, node, outgoing, predicates, hidden, limit, values,
                           self._graph_terms(), offset)
        found = self._labels_here([node, *dict.fromkeys(value for _, value in pairs)])
        return [Neighbour(p, value) for p, value in pairs], found

    def _relations_with_label(self, node):
        most = min(_COUNTED_HERE, self.count_cap - 1)
        read = self._read(store_patterns.predicate_counts, self.store, node, self._hidden(node, None), most, self._label_set,
                          self._graph_terms())
        if read is None:  # too many edges to count here
            return super()._relations_with_label(node)
        counts, labels = read
        own: dict = {}
        if node not in self._label_cache:  # its labels came with its edges: chosen as _labels_here would
            wanted = {*self.settings.languages, ""}
            for predicate, literal in labels:
                if isinstance(literal, ox.Literal) and (literal.language or "") in wanted:
                    self._consider_label(own, node, predicate, literal)
        way = {True: Direction.OUTGOING, False: Direction.INCOMING}
        return [(p, way[outgoing], n) for (p, outgoing), n in counts.items()], own

    def _hidden(self, node: ox.NamedNode, predicates) -> Callable[[str], bool] | None:
        """The test leaving out bookkeeping predicates, as `_queries.visible` writes it (None: keep all)."""
        return None if predicates else self.profile.hidden_around(node.value)

    def _labels_here(self, nodes) -> dict:
        """Best labels of those of `nodes` whose label is not known yet (a store read each, so the
        label cache saves most of them: neighbours recur, and the store is read-only while served)."""
        cache = self._label_cache
        todo = [n for n in nodes if n not in cache]
        found: dict = {}
        labels = self._read(list, store_patterns.labels(self.store, todo, self._label_nodes, self.settings.languages,
                                                        self._graph_terms()))
        for node, predicate, literal in labels:
            self._consider_label(found, node, predicate, literal)
        return found

    def _best_literals(self, nodes, predicates) -> dict:
        """As over SPARQL (the first predicate in the first preferred language, else untagged, else
        any language), read from the store's indexes: a lookup shows every hit's label and
        description, and two queries cost more than the reads."""
        languages = {lang: i for i, lang in enumerate(self.settings.languages)}
        order = {ox.NamedNode(p): i for i, p in enumerate(predicates)}
        best: dict[ox.NamedNode, tuple[tuple[int, int], str]] = {}
        read = store_patterns.literals(self.store, nodes, list(order), self._graph_terms())
        for node, predicate, literal in self._read(list, read):
            lang = literal.language or ""
            rank = (languages.get(lang, len(languages) + bool(lang)), order[predicate])
            if node not in best or rank < best[node][0]:
                best[node] = (rank, literal.value)
        return {node: text for node, (_, text) in best.items()}

    def _read(self, read: Callable, *args):
        """`read(*args)`, a read of the store; its errors in our words."""
        try:
            return read(*args)
        except OSError as e:
            problem = str(e)
        # Raised outside the except block, so no frame holding a result iterator goes with it.
        raise EndpointError(f"The store at {self.location} could not be read: {problem}")

    def exists(self, node: ox.NamedNode) -> bool:
        if is_blank(node):
            return super().exists(node)
        return self._read(store_patterns.occurs, self.store, node, self._graph_terms())

    def known_degree(self, node: ox.NamedNode, direction: Direction) -> int | None:
        stats = self._hub_stats(node, direction)
        return None if stats is None else sum(n for p, n in stats.items() if not self.profile.is_hidden(p))

    def relations_around(self, node: ox.NamedNode) -> list[RelationCount]:
        if self._hub_stats(node, Direction.OUTGOING) is None and self._hub_stats(node, Direction.INCOMING) is None:
            return super().relations_around(node)
        return self._hub_side(node, Direction.OUTGOING) + self._hub_side(node, Direction.INCOMING)

    def _hub_side(self, node: ox.NamedNode, direction: Direction) -> list[RelationCount]:
        """A hub's relations one way: its record, or, where that way has none (a type node's few
        out-edges), counted from the index as get_relations counts an ordinary node's (no query to
        parse and plan), by a query past _COUNTED_HERE edges."""
        if self._hub_stats(node, direction) is not None:
            return self.relation_counts(node, direction)
        counted = self._read(
            store_patterns.predicate_counts, self.store, node, self._hidden(node, None),
            min(_COUNTED_HERE, self.count_cap - 1), frozenset(), self._graph_terms(), (direction is Direction.OUTGOING,))
        if counted is None:
            return super().relation_counts(node, direction)
        rows = sorted(((p, n) for (p, _), n in counted[0].items()), key=lambda x: (-x[1], x[0].value))
        return [RelationCount(p, direction, n) for p, n in rows]

    def count_neighbours(self, node, direction, predicates, *, values=Values.ANY):
        kinds = self._recorded_kinds(node, direction, predicates, need_anonymous=values is not Values.ANY)
        if kinds is None:
            return super().count_neighbours(node, direction, predicates, values=values)
        named, blank = kinds
        return {Values.ANY: named + blank, Values.NAMED: named, Values.ANONYMOUS: blank}[values]

    def count_kinds(self, node, direction, predicates):
        kinds = self._recorded_kinds(node, direction, predicates, need_anonymous=True)
        return super().count_kinds(node, direction, predicates) if kinds is None else kinds

    def counts_recorded(self, node, direction):
        record = None if is_blank(node) else self._hub_record(node, direction)
        return record is not None and record[0] is not None and record[1] is not None

    def _recorded_kinds(self, node, direction, predicates, *, need_anonymous: bool) -> tuple[int, int] | None:
        """(named, anonymous) edges of a hub one way from its record, without reading them; None
        where it has no record (or no anonymous count, when that is needed)."""
        record = None if is_blank(node) else self._hub_record(node, direction)
        if record is None or record[0] is None:
            return None
        stats, anonymous = record
        if anonymous is None and need_anonymous:
            return None
        keys = [p.value for p in predicates] if predicates else [p for p in stats if not self.profile.is_hidden(p)]
        total = sum(stats.get(p, 0) for p in keys)
        blank = sum((anonymous or {}).get(p, 0) for p in keys)
        return total - blank, blank

    def recorded_hubs(self) -> set[tuple[ox.NamedNode, bool]]:
        """(hub, outgoing) with statistics recorded at load time, for the graphs the call reads: the
        records count the default graph's edges, so a call reading named graphs has none."""
        if not self._reads_default_graph():
            return set()
        if self._hubs is None:  # which records exist, read once: most nodes are not hubs
            self._hubs = self._read(recorded_directions, self.store)
        return self._hubs

    def _hub_stats(self, node: ox.NamedNode, direction: Direction) -> dict[str, int] | None:
        record = self._hub_record(node, direction)
        return None if record is None else record[0]

    def _hub_record(self, node: ox.NamedNode, direction: Direction) -> tuple[dict | None, dict | None] | None:
        """(counts, anonymous counts) of a hub one way, None for a node without a record. The tuple
        read is the one returned: another thread may empty the cache at any time."""
        # Statistics ignore the profile's unhiding of statement nodes; those are never hubs.
        outgoing = direction is Direction.OUTGOING
        if (node, outgoing) not in self.recorded_hubs():
            return None
        # A call asks for a hub's record more than once (search: its degree, then its relations).
        record = self._hub_records.get((node, outgoing))
        if record is None:
            if len(self._hub_records) >= _HUB_RECORDS_KEPT:
                self._hub_records.clear()
            record = self._hub_records[(node, outgoing)] = (
                self._read(hub_stats, self.store, node, outgoing), self._read(hub_anonymous, self.store, node, outgoing))
        return record

    def _degrees(self, nodes):
        if self._degree_readers is None or len(nodes) < 2:
            return super()._degrees(nodes)
        graphs = graph_access.current()  # the readers' threads read the call's graphs too

        def degree(node):
            with graph_access.reading(graphs):
                return self._degree(node)

        return dict(zip(nodes, self._degree_readers.map(degree, nodes), strict=True))

    def _solutions(self, query: str) -> Solutions:
        with tracing.span("store query", **{"db.system": "oxigraph"}):
            return self._read(lambda: solutions_of(self.store.query(query, **self._dataset())))

    def _boolean(self, query: str) -> bool:
        return bool(self._solutions(query))

    def run_query(self, query: str, row_cap: int, *, graphs: tuple[str, ...] | None = None) -> Rows:
        """A user's query runs in a worker process, stopped at settings.timeout_s (kg_mcp.backends.query_pool),
        over the graphs of the call only: the dataset written into its text (FROM, FROM NAMED) is
        also given to the engine, which then reads those graphs whatever the text says."""
        dataset = None if self._reads_default_graph() else list(self.read_graphs)
        return self.query_pool().run(query, row_cap, self.settings.timeout_s, dataset)

    def query_pool(self) -> QueryPool:
        with self._pool_lock:
            if self._pool is None:
                # An in-memory store (the demo KG, tests) is handed to the workers as N-Quads.
                if self.path:
                    source = StoreSource(path=self.path)
                else:
                    source = StoreSource(nquads=self.store.dump(format=ox.RdfFormat.N_QUADS))
                self._pool = QueryPool(
                    source,
                    size=self.settings.query_workers,
                    location=self.location,
                    memory_mb=self.settings.query_memory_mb,
                )
            return self._pool

    def stats(self):
        stats = super().stats()
        stats.details["location"] = self.location
        if self.read_graphs:  # every count above is of these graphs
            stats.details["graphs"] = f"the named graphs read: {', '.join(self.read_graphs)}"
        return stats

    def close(self) -> None:
        if self._names is not None:
            self._names.close()
        self._graph_names.close()
        if self._pool is not None:
            self._pool.close()
        if self._degree_readers is not None:
            self._degree_readers.shutdown()
        self.store = None  # RocksDB closes when the last reference goes
