"""Any SPARQL endpoint over HTTP, read-only.

Queries travel through kg_mcp.backends.http_transport (kept-alive connections, one deadline a
call, retries with backoff); answers are read as they stream in (kg_mcp.backends.engine_answers),
no further than a byte cap: settings.endpoint_answer_mb for the tools' own queries (past it the
call fails and says so) and settings.sparql_answer_mb for the sparql tool's (past it the rows read
are shown, flagged cut). Wikimedia refuses generic user agents, so every request names kg-mcp and
a contact.
"""

from __future__ import annotations

import logging

import pyoxigraph as ox

from kg_mcp import __version__
from kg_mcp.backends import blank_nodes, graph_access, text_search
from kg_mcp.backends._queries import closure_edges, label_pattern_scan, path_ask
from kg_mcp.backends._rows import counted_rows
from kg_mcp.backends.base import Rows
from kg_mcp.backends.engine_answers import STOPPED_AT_BYTES, Answer, Solutions, read_answer
from kg_mcp.backends.http_transport import SparqlHttp
from kg_mcp.backends.named_graphs import (
    SHOWN_GRAPHS,
    GraphPlan,
    GraphSize,
    bounded_graph_size,
    engine_of_graph,
    list_graphs,
)
from kg_mcp.backends.sparql_backend import SparqlBackend
from kg_mcp.errors import EndpointError, InvalidInput, KGError
from kg_mcp.names.fold import fold, loose_pattern
from kg_mcp.observability import metrics, tracing

log = logging.getLogger(__name__)

_LOOSE_METHOD = "label queries (accents, apostrophes and case ignored)"


class RemoteBackend(SparqlBackend):
    kind = "remote"

    def __init__(self, url: str, *args, graphs: GraphPlan | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.url = url
        self.graph_plan = graphs or GraphPlan()
        self.user_agent = f"kg-mcp/{__version__} ({self.settings.contact}) httpx2"
        # An engine named by --text-search gets its time limit from the first query on.
        engine = self.settings.text_search if self.settings.text_search in ("virtuoso", "qlever") else None
        self.http = SparqlHttp(
            url,
            user_agent=self.user_agent,
            timeout_s=self.settings.timeout_s,
            retries=self.settings.retries,
            engine=engine,
            graphs=self.graph_plan.graphs,
        )
        # A full scan of labels would time out on a large public endpoint; Wikidata has a search API.
        self.label_scan = self.profile.name != "wikidata"
        # The engine's own text search for find_entities: from the settings, the profile (Wikidata's
        # public service has mwapi), or a probe on first use (None until then).
        chosen = self.settings.text_search
        if chosen == "auto" and self.profile.entity_search == "mwapi" and "query.wikidata.org" in url:
            chosen = "mwapi"
        self.text_search: str | None = None if chosen == "auto" else chosen
        self.names = None  # kg_mcp.backends.endpoint_names.EndpointNames, where a name index may be used
        self._names_by_graphs: dict[str, object] = {}  # the same for each graph set of --graph-access
        # How this engine lets a query name a blank node (kg_mcp.backends.blank_nodes): probed with
        # the first blank node it returns that a tool would show; "" once no way was found.
        self.blank_form: str | None = None
        self.vocab.blank_node = self._blank_handle

    def closure_edges(self, sources, predicate, direction, limit):
        # One property-path query instead of a round trip per level (blank nodes cannot go in VALUES).
        if not sources or any(isinstance(s, ox.BlankNode) for s in sources):
            return None
        return [(s["a"], s["b"]) for s in self._solutions(closure_edges(sources, predicate, direction, limit))]

    # --- blank nodes ---------------------------------------------------------------------------------
    def addresses_blank_nodes(self, example: ox.BlankNode | None = None, *, seen: bool = True) -> bool:
        """`seen`: `example` came from the engine (a handle a caller typed may name no node, which
        proves nothing about the engine)."""
        if self.blank_form is None and example is not None:
            found = blank_nodes.engine_form(self._boolean, example)
            if found:
                self.blank_form = found[0]
                self._address_blanks(blank_nodes.endpoint_reader(self._solutions, found[1]))
            elif seen:
                self.blank_form = ""
            log.info("endpoint %s: blank nodes %s", self.url, f"named by {found[0]}" if found else "cannot be named")
        return self.blanks is not None

    def _blank_handle(self, label: str) -> ox.BlankNode:
        node = ox.BlankNode(label)
        if not self.addresses_blank_nodes(node, seen=False):
            raise InvalidInput(
                f"_:{label} is a blank node, and this endpoint offers no way to name a blank node in a query.",
                "Read it through the entity that links to it: its content is shown inline there, and follow walks through it.",
            )
        return node

    @property
    def use_entity_search(self) -> bool:
        return self.text_search == "mwapi"

    @property
    def read_graphs(self) -> tuple[str, ...]:
        # The calling client's graphs under --graph-access (kg_mcp.backends.graph_access), else the server's.
        return graph_access.dataset(self.graph_plan.graphs)

    def close(self) -> None:
        for names in [self.names, *self._names_by_graphs.values()]:
            if names is not None:
                names.close()
        self.http.close()

    # --- answers (kg_mcp.backends.http_transport, kg_mcp.backends.engine_answers) ---------------
    def _solutions(self, query: str) -> Solutions:
        answer = self._answer(query)
        if answer.partial:
            raise EndpointError(
                f"The endpoint {self.url} stopped the query at its own time limit and sent a partial answer "
                f"({answer.partial}).",
                "Narrow the call (fewer relations, a smaller limit) or try again later.",
            )
        if answer.stopped == STOPPED_AT_BYTES:
            raise EndpointError(
                f"The endpoint's answer to this call passed {self.settings.endpoint_answer_mb:g} MB, the most "
                f"kg-mcp reads of one answer, and was cut after {answer.seen:,} rows.",
                "Narrow the call: name the relations, or use a smaller limit.",
            )
        if answer.cut_at is not None:
            log.warning("endpoint %s cut an answer at its limit of %d rows", self.url, answer.cut_at)
        return answer.result

    def _boolean(self, query: str) -> bool:
        return bool(self._solutions(query))

    def reaches(self, sources, first, then, targets) -> bool | None:
        # One property path in the engine, however deep the hierarchy; a timeout leaves it to the walk.
        try:
            return self._boolean(path_ask(sources, first, then, targets))
        except KGError as e:
            log.info("property path not answered (%s): walking instead", e.message)
            return None

    def run_query(self, query: str, row_cap: int, *, graphs: tuple[str, ...] | None = None) -> Rows:
        cap_mb = self.settings.sparql_answer_mb
        answer = self._answer(query, graphs, keep=row_cap, count=counted_rows(row_cap), max_mb=cap_mb)
        if isinstance(answer.result, bool):
            return Rows([], [], None, boolean=answer.result, partial=answer.partial)
        variables = answer.result.variables
        rows = [[solution[v] for v in variables] for solution in answer.result]
        # An answer cut at the engine's row limit, or not read to its end, has no known total.
        total = None if answer.cut_at is not None or answer.stopped else answer.seen
        cut = None
        if answer.stopped == STOPPED_AT_BYTES:
            cut = f"the endpoint's answer passed {cap_mb:g} MB after {answer.seen:,} rows and was read no further"
        return Rows(variables, rows, total, cut_at=answer.cut_at, partial=answer.partial, cut=cut)

    def _answer(
        self,
        query: str,
        graphs: tuple[str, ...] | None = None,
        *,
        keep: int | None = None,
        count: int | None = None,
        max_mb: float | None = None,
    ) -> Answer:
        """The endpoint's answer to `query`, read as it streams in: the first `keep` rows, counting
        up to `count`, no further than `max_mb` (settings.endpoint_answer_mb by default)."""
        max_bytes = int((max_mb or self.settings.endpoint_answer_mb) * 2**20)

        def read(chunks, headers) -> Answer:
            return read_answer(chunks, headers, max_bytes=max_bytes, keep=keep, count=count)

        try:
            with tracing.span("sparql endpoint query", **{"db.system": "sparql", "server.address": self.url}), \
                    metrics.endpoint_query():
                return self.http.answer(query, read, graphs)
        except SyntaxError as e:
            problem = str(e)
        # Raised outside the except block: the parser's frames (and its result iterator, bound to
        # this thread) must not travel with the error to the thread that reports it.
        raise EndpointError(f"The endpoint {self.url} sent results that are not SPARQL JSON ({problem}).")

    # --- what differs on a remote endpoint ------------------------------------------------------
    def _names_here(self):
        """The name index of the graphs the caller reads: the server's, or one per graph set."""
        graphs = graph_access.current()
        if self.names is None or graphs is None:
            return self.names
        key = graph_access.cache_key()
        if key not in self._names_by_graphs:
            from kg_mcp.backends.endpoint_names import EndpointNames

            names = EndpointNames(self, self.settings, graphs=sorted(graphs))
            names.locks = self.names.locks
            self._names_by_graphs[key] = names
        return self._names_by_graphs[key]

    def _lookup_index(self):
        here = self._names_here()
        current = here.current if here is not None else None
        return current.index if current is not None else None

    def prepare_lookups(self) -> None:
        if self.names is not None:
            self.names.begin()

    def _name_matches(self, name: str, limit: int):
        here = self._names_here()
        waited = 0.0
        if here is not None and here.current is None and self._text_engine() == "labels":
            here.begin()  # at server start, or now
            waited = here.wait_for_small()
        names = here.current if here is not None else None
        took = f"; this lookup waited {waited:.1f} s for it" if waited >= 0.05 else ""
        if names is not None:
            method = f"name index ({names.age_text()} from the endpoint's labels{took})"
            return method, self._indexed_matches(names.index, name, limit)
        engine = self._text_engine()
        if engine == "labels" and here is not None:
            note = here.status()  # in the background: label queries answer until it is built
            note += f" (waited {waited:.1f} s)" if took else ""
            method, matches = self._engine_matches(engine, name, limit)
            return (f"{method}; {note}" if note else method), matches
        return self._engine_matches(engine, name, limit)

    def _engine_matches(self, engine: str, name: str, limit: int):
        query = None if engine == "labels" else text_search.search_query(
            engine, name, self.label_predicates, self.settings.languages, limit * 4
        )
        if query is None:
            return super()._name_matches(name, limit)
        found = {n: "exact" for n in self._nodes_labelled(name, limit * 2)}
        for solution in self._solutions(query):
            if (node := text_search.found(solution)) is not None:
                found.setdefault(node, "search")
        method = text_search.METHODS[engine]
        if not found and self.label_scan:
            # The engine's words are spelled as stored: "Francois" does not find "François", nor
            # "oceans" "Ocean's". A bounded label scan that ignores accents and apostrophes does.
            found = dict(self._loose_label_matches(name, limit * 4))
            method += f" found nothing; then {_LOOSE_METHOD}"
        return method, [(n, m, 0, None, None) for n, m in found.items()]

    def _loose_label_matches(self, name: str, limit: int) -> list[tuple[ox.NamedNode, str]]:
        """Labels that begin with `name` once both are folded (kg_mcp.names.fold): the whole name first."""
        pattern = loose_pattern(name)
        if pattern is None:
            return []
        try:
            solutions = self._solutions(label_pattern_scan(pattern, self.label_predicates, limit))
        except EndpointError:  # a scan too heavy for this endpoint
            log.info("loose label scan on %s failed", self.url)
            return []
        typed, matches = fold(name), {}
        for s in solutions:
            if isinstance(s["x"], ox.NamedNode) and isinstance(s["l"], ox.Literal):
                match = "folded" if fold(s["l"].value) == typed else "prefix"
                if matches.get(s["x"]) != "folded":
                    matches[s["x"]] = match
        return sorted(matches.items(), key=lambda item: item[1] != "folded")

    def _text_engine(self) -> str:
        if self.text_search is None:
            try:
                self._solutions(text_search.VIRTUOSO_PROBE)
                self.text_search = "virtuoso"
            except (InvalidInput, EndpointError):
                self.text_search = "labels"
            log.info("endpoint %s: find_entities uses %s", self.url, self.text_search)
        return self.text_search

    def _fuzzy_matches(self, name: str, limit: int):
        try:
            return super()._fuzzy_matches(name, limit)
        except EndpointError:  # a label scan too heavy for this endpoint: keep the exact matches
            log.info("label scan on %s failed; returning exact matches only", self.url)
            return []

    def graph_sizes(self) -> list[GraphSize]:
        """The endpoint's named graphs with their triples (counted up to count_cap each, so a huge
        graph costs one bounded query) and whether this backend reads them. Each count runs on the
        whole endpoint, so that graphs outside the dataset are counted too."""
        plan = self.graph_plan

        def whole(query: str):  # the endpoint without a dataset
            return self._answer(query, ()).result

        listed = plan.listed or tuple(list_graphs(whole, lambda: self.http.engine))
        sizes = []
        for graph in listed[:SHOWN_GRAPHS]:
            try:
                rows = whole(bounded_graph_size(graph, self.count_cap))
                n = int(rows[0]["n"].value) if rows and rows[0]["n"] is not None else 0
            except KGError as e:
                log.info("could not count graph %s (%s)", graph, e.message)
                n = None
            read = graph in plan.graphs if plan.graphs else None  # None: as the engine's default graph has it
            bounded = n is not None and n >= self.count_cap
            sizes.append(GraphSize(graph, n, bounded, read, engine_of_graph(graph)))
        return sizes

    def stats(self):
        # Counting a public endpoint's triples would time out: VoID figures or bounded counts.
        from kg_mcp.backends.endpoint_stats import endpoint_stats

        return endpoint_stats(self, self.count_cap)
