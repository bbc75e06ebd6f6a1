"""The backend questions answered in SPARQL, once, for every store that speaks it.

Subclasses only say how a query runs (`_solutions`, `_boolean`): a local Oxigraph store or an
HTTP endpoint. Both hand back pyoxigraph result objects, so everything here is shared.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Sequence

import pyoxigraph as ox

from kg_mcp.backends import _queries as q
from kg_mcp.backends import graph_access
from kg_mcp.backends._rows import capped_rows
from kg_mcp.backends.base import (
    Backend,
    Direction,
    EntityHit,
    Lookup,
    Neighbour,
    Qualifier,
    RelationCount,
    Rows,
    StoreStats,
    Term,
    Values,
)
from kg_mcp.backends.blank_nodes import BlankNodes, is_blank
from kg_mcp.backends.edge_order import edge_order, natural_key, with_precision
from kg_mcp.backends.engine_answers import Solutions
from kg_mcp.errors import InvalidInput, UnknownEntity, UnknownRelation
from kg_mcp.ids import Vocabulary, check_text
from kg_mcp.names import NameIndex
from kg_mcp.profiles import Profile
from kg_mcp.quoting import clipped, quoted
from kg_mcp.settings import Settings

_VALUES_CHUNK = 200  # terms per VALUES block: keeps requests to endpoints small
_MAX_RELATIONS = 2000  # distinct relations listed around one node when its edges are too many to count
SORTED_UP_TO = 10_000  # edges of a listing an endpoint sorts to page through them (past it, its own order)
_LABEL_CACHE_SIZE = 100_000  # labels kept per backend; stores are read-only while served


# A name matcher's answer: (entity, match kind, order within the kind, degree a name index recorded or None).
# (entity, match kind, order within the kind, degree or None, its label as the name index knows it: the
# text, the id of the index row holding it, or None; see kg_mcp.names.index.NameMatch.shown)
Match = tuple[ox.NamedNode, str, int, int | None, str | int | None]


def _chunks(items: Sequence, size: int = _VALUES_CHUNK) -> Iterable[Sequence]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class SparqlBackend(Backend):
    kind = "sparql"
    # Whether a case-insensitive/prefix label scan is affordable (a full pass over labels).
    label_scan = True

    def __init__(
        self, profile: Profile, vocab: Vocabulary, settings: Settings, *, label_predicates: Sequence[str] | None = None
    ):
        self.profile = profile
        self.vocab = vocab
        self.settings = settings
        # The profile's label predicates that this KG uses (fewer predicates, cheaper queries).
        self.label_predicates = tuple(label_predicates or profile.label_predicates)
        self.count_cap = settings.count_cap
        # What was read is remembered per graph set (kg_mcp.backends.graph_access): a label read
        # through one caller's graphs is never shown to a caller of other graphs.
        self._label_caches: dict[str, dict[Term, str | None]] = {}
        self._identifier_caches: dict[str, dict[ox.NamedNode, bool]] = {}  # property entity → marked as an identifier
        # Answers about blank nodes (kg_mcp.backends.blank_nodes), where this KG can name them in a
        # query; None where it cannot (then no query is ever sent with one).
        self.blanks: BlankNodes | None = None

    @property
    def _label_cache(self) -> dict[Term, str | None]:
        return self._label_caches.setdefault(graph_access.cache_key(), {})

    @property
    def _identifier_cache(self) -> dict[ox.NamedNode, bool]:
        return self._identifier_caches.setdefault(graph_access.cache_key(), {})

    # --- blank nodes -----------------------------------------------------------------------------
    def addresses_blank_nodes(self, example: ox.BlankNode | None = None) -> bool:
        """Whether a blank node's handle (`_:label`) can be passed back to the tools; `example`, a
        blank node this backend returned, lets an endpoint be probed for a way to name one."""
        return self.blanks is not None

    def read_blank_nodes(self, nodes: Sequence[ox.BlankNode]) -> None:
        if self.blanks is not None:
            self.blanks.read(nodes)

    def _address_blanks(self, reader) -> None:
        self.blanks = BlankNodes(reader, self.profile.is_hidden)
        if self.vocab.blank_node is None:
            self.vocab.blank_node = ox.BlankNode

    def _blanks(self) -> BlankNodes:
        """The blank-node answers; a blank node reaches a query only through them."""
        if self.blanks is None:
            raise InvalidInput(
                "This KG offers no way to name a blank node in a query.",
                "Read it through the entity that links to it: its content is shown inline there.",
            )
        return self.blanks

    # --- how queries run (subclasses) ------------------------------------------------------------
    @abstractmethod
    def _solutions(self, query: str) -> Solutions:
        """Run a SELECT and read all its rows; errors are already translated to kg_mcp.errors."""

    @abstractmethod
    def _boolean(self, query: str) -> bool: ...

    def _count(self, query: str) -> int:
        for solution in self._solutions(query):
            n = solution["n"]
            return int(n.value) if n is not None else 0
        return 0

    # --- references ------------------------------------------------------------------------------
    def resolve_entity(self, ref: str, *, check: bool = True) -> ox.NamedNode:
        ref = check_text(ref, "entity")
        node = self.vocab.parse(ref)
        if node is not None:
            if not check or self.exists(node):
                return node
            raise self._unknown(ref, f"{clipped(ref)} is not in the KG.")
        nodes = self._nodes_labelled(ref, limit=6)
        if len(nodes) == 1:
            return nodes[0]
        if nodes:
            described = self._describe_nodes(nodes[:5])
            raise InvalidInput(
                f"{quoted(ref)} is the label of {'several' if len(nodes) > 5 else len(nodes)} entities: {described}.",
                "Pass the id of the one you mean.",
            )
        raise self._unknown(ref, f"No entity has the id or label {quoted(ref)}.")

    def require(self, node: ox.NamedNode, ref: str) -> None:
        if not self.exists(node):
            raise self._unknown(ref, f"{clipped(ref)} is not in the KG.")

    def _unknown(self, ref: str, message: str) -> UnknownEntity:
        """An UnknownEntity error that suggests entities with a similar name."""
        if ref.startswith("_:"):
            return UnknownEntity(
                f"{clipped(ref)} is not a blank node of this KG.",
                "Copy blank-node handles exactly as this server's tools show them.",
            )
        local = ref.split(":", 1)[-1].replace("_", " ").strip()
        try:
            hits = self.find_entities(local, 5) if local else []
        except InvalidInput:
            hits = []
        suggestions = [f"{self.vocab.compact(h.node)} ({h.label})" if h.label else self.vocab.compact(h.node) for h in hits]
        if suggestions:
            hint = f"Similar entities: {', '.join(suggestions)}. Use find_entities to look names up."
        else:
            hint = "Use find_entities to look up an entity by name, then pass the id it returns."
        return UnknownEntity(message, hint, suggestions)

    def _describe_nodes(self, nodes: Sequence[ox.NamedNode]) -> str:
        labels = self.labels(nodes)
        descriptions = self.descriptions(nodes)
        parts = []
        for n in nodes:
            text = self.vocab.compact(n)
            extra = "; ".join(x for x in (labels.get(n), descriptions.get(n)) if x)
            parts.append(f"{text} ({extra})" if extra else text)
        return ", ".join(parts)

    def resolve_relation(self, ref: str) -> tuple[ox.NamedNode, Direction]:
        ref = check_text(ref, "relation")
        direction = Direction.OUTGOING
        if ref.startswith("~"):
            direction, ref = Direction.INCOMING, check_text(ref[1:], "relation")
        node = self.vocab.parse_relation(ref)
        if node is not None:
            return node, direction
        # A relation named by its label ("place of birth"): find the property entity so labelled.
        for entity in self._nodes_labelled(ref, limit=5):
            predicate = ox.NamedNode(self.profile.relation_of(entity.value))
            if predicate != entity or self._boolean(q.ask_predicate(predicate.value)):
                return predicate, direction
        raise UnknownRelation(
            f"{quoted(ref)} is not a relation id or label.",
            "Call get_relations (or search without a filter) on the entity to list its relations, "
            "then copy one exactly; prefix ~ to walk it backwards.",
        )

    def _nodes_labelled(self, name: str, limit: int) -> list[ox.NamedNode]:
        query = q.exact_label(name, self.label_predicates, self.settings.languages, limit)
        return [s["x"] for s in self._solutions(query) if isinstance(s["x"], ox.NamedNode)]

    def labelled(self, name: str, limit: int) -> list[ox.NamedNode]:
        return list(dict.fromkeys(self._nodes_labelled(name, limit)))

    # --- neighbourhoods --------------------------------------------------------------------------
    def neighbours(
        self, node: ox.NamedNode, direction: Direction, predicates: Sequence[ox.NamedNode] | None, limit: int, *,
        offset: int = 0, values: Values = Values.ANY,
    ) -> list[Neighbour]:
        if is_blank(node):
            return self._blanks().neighbours(node, direction, predicates, limit, offset=offset, values=values)
        if values is Values.ANY and not offset:
            rows, found = self._edges_with_labels(node, direction, predicates, limit)
            if len(rows) >= limit and any(is_blank(r.value) for r in rows):
                # Blank nodes never push named values out of a cut listing: the named ones are read
                # first, blank ones fill what is left.
                named, more = self._edges_with_labels(node, direction, predicates, limit, values=Values.NAMED)
                found.update(more)
                rows = (named + [r for r in rows if is_blank(r.value)])[:limit]
            elif self._order_matters:  # all of them: in the order every read of them comes in
                rows.sort(key=edge_order)
        elif not self._order_matters:
            rows, found = self._edges_with_labels(node, direction, predicates, limit, values=values, offset=offset)
        elif offset:
            rows, found = self._edges_with_labels(node, direction, predicates, limit, values=values, offset=offset,
                                                  ordered=self._sorts(node, direction, predicates, values))
        else:
            rows, found = self._edges_with_labels(node, direction, predicates, limit, values=values)
            if len(rows) < limit:  # all of them: in the order an ordered read gives
                rows.sort(key=edge_order)
            elif self._sorts(node, direction, predicates, values):
                # More than this page: read it again in the order every later page is read in.
                rows, found = self._edges_with_labels(node, direction, predicates, limit, values=values, ordered=True)
        # Labels came with the edges. Nodes without one in a preferred language are left to
        # labels(), which also looks in other languages.
        self._remember_labels(found)
        if direction is Direction.OUTGOING and self.profile.statements and rows:
            rows = self._with_qualifiers(node, rows)
        return rows

    # An engine's order of unordered rows may change from one query to the next: a listing's pages
    # are read in EDGE_ORDER, the same in Python for a read that holds them all (a local store reads
    # its index, whose order holds). Sorting costs the engine the whole listing: past SORTED_UP_TO
    # edges (a hub) the pages are read in the engine's own order of the same query, which the
    # engines kg-mcp is tested on (Oxigraph, Virtuoso) keep from one call to the next.
    _order_matters = True

    def _sorts(self, node, direction: Direction, predicates, values: Values) -> bool:
        """Whether a listing of several pages is read sorted: when sorting it is cheap (its edges
        counted no further than that)."""
        query = q.count_neighbours(self.profile, node, direction, predicates, SORTED_UP_TO + 1, values)
        return self._count(query) <= SORTED_UP_TO

    def _edges_with_labels(
        self, node: ox.NamedNode, direction: Direction, predicates: Sequence[ox.NamedNode] | None, limit: int,
        *, values: Values = Values.ANY, offset: int = 0, ordered: bool = False,
    ) -> tuple[list[Neighbour], dict]:
        """Up to `limit` edges (only to `values` of that kind, from the `offset`-th on), and the best
        label in a preferred language (see `_consider_label`) of `node` and of each neighbour that
        has one: one query. Past the first page (or `ordered`), in the order of ORDER BY."""
        query = q.neighbours(
            self.profile, node, direction, predicates, limit, self.label_predicates, self.settings.languages,
            kind=values, offset=offset, ordered=ordered,
        )
        rows: dict[tuple[Term, Term], Neighbour] = {}
        found: dict[Term, tuple[tuple[int, int], str]] = {}
        for s in self._solutions(query):
            if s["p"] is not None:  # rows without ?p carry the labels of `node` itself
                rows.setdefault((s["p"], s["o"]), Neighbour(s["p"], s["o"]))
            self._consider_label(found, s["o"], s["lp"], s["ol"])
        edges = list(rows.values())
        if ordered:  # the subquery's order may not survive the join with the labels
            edges.sort(key=edge_order)
        return edges[:limit], found

    def _with_qualifiers(self, node: ox.NamedNode, rows: list[Neighbour]) -> list[Neighbour]:
        """Attach the qualifiers of the statements behind truthy rows (wdt:P69 ← p:P69/ps:P69 + pq:*)."""
        model = self.profile.statements
        assert model is not None
        claims = {
            ox.NamedNode(model.claim + r.predicate.value[len(model.direct) :])
            for r in rows
            if r.predicate.value.startswith(model.direct)
        }
        if not claims:
            return rows
        found: dict[tuple[str, Term], dict[Qualifier, None]] = {}
        precise: dict[tuple[str, Term], Term] = {}
        for chunk in _chunks(sorted(claims, key=str)):
            for s in self._solutions(q.qualifiers(self.profile, node, chunk)):
                key = (s["claim"].value[len(model.claim) :], s["value"])
                quals = found.setdefault(key, {})
                if s["q"] is not None:
                    quals[Qualifier(s["q"], with_precision(s["qv"], s["qprec"]))] = None
                if s["vprec"] is not None:
                    precise[key] = with_precision(s["value"], s["vprec"])
        if not found:
            return rows
        out = []
        for r in rows:
            key = (r.predicate.value[len(model.direct) :], r.value)
            # Qualifiers in their property's natural order: start time (P580) before end time (P582).
            quals = sorted(found.get(key, {}), key=lambda x: (natural_key(x.predicate.value), str(x.value)))
            out.append(Neighbour(r.predicate, precise.get(key, r.value), tuple(quals)))
        return out

    def step(
        self, sources: Sequence[ox.NamedNode], predicate: ox.NamedNode, direction: Direction, limit: int
    ) -> list[tuple[ox.NamedNode, Term]]:
        if not sources:
            return []
        blank = [s for s in sources if is_blank(s)]
        named = [s for s in sources if not is_blank(s)]
        pairs = [(s["s"], s["o"]) for s in self._solutions(q.step(named, predicate, direction, limit))] if named else []
        if blank:
            pairs += self._blanks().step(blank, predicate, direction)[: max(0, limit - len(pairs))]
        return pairs

    def identifier_predicates(self, predicates: Sequence[ox.NamedNode]) -> set[ox.NamedNode]:
        mark = self.profile.identifier_mark
        if not mark or not predicates:
            return set()
        carrier = {p: ox.NamedNode(self.profile.property_entity_of(p.value)) for p in predicates}
        todo = sorted({c for c in carrier.values() if c not in self._identifier_cache}, key=str)
        for chunk in _chunks(todo):
            marked = {s["x"] for s in self._solutions(q.marked_properties(chunk, mark))}
            self._identifier_cache.update({c: c in marked for c in chunk})
        return {p for p, c in carrier.items() if self._identifier_cache.get(c)}

    def relations_around(self, node: ox.NamedNode) -> list[RelationCount]:
        if is_blank(node):
            return self.relation_counts(node, Direction.OUTGOING) + self.relation_counts(node, Direction.INCOMING)
        rows, own = self._relations_with_label(node)
        self._remember_labels(own)
        exact = sum(n for *_, n in rows) < self.count_cap
        if not exact:
            # The first `count_cap` edges come in the engine's index order and may all share one
            # predicate (Virtuoso): list every predicate, those not seen among them as "1+".
            seen = {(p, way) for p, way, _ in rows}
            for s in self._solutions(q.distinct_relations(self.profile, node, _MAX_RELATIONS)):
                way = Direction.OUTGOING if s["d"].value == "out" else Direction.INCOMING
                if (s["p"], way) not in seen:
                    rows.append((s["p"], way, 1))
        rows.sort(key=lambda r: (r[1] is Direction.INCOMING, -r[2]))
        return [RelationCount(p, way, n, exact) for p, way, n in rows]

    def _relations_with_label(self, node: ox.NamedNode) -> tuple[list[tuple[ox.NamedNode, Direction, int]], dict]:
        """(predicate, direction, edges among the first `count_cap`) around `node`, and its own best
        label (see `_consider_label`): one query."""
        query = q.relations_around(self.profile, node, self.count_cap, self.label_predicates, self.settings.languages)
        rows: list[tuple[ox.NamedNode, Direction, int]] = []
        own: dict[Term, tuple[tuple[int, int], str]] = {}
        for s in self._solutions(query):
            if s["p"] is None:  # a label of `node` itself
                self._consider_label(own, node, s["lp"], s["ol"])
                continue
            way = Direction.OUTGOING if s["d"].value == "out" else Direction.INCOMING
            rows.append((s["p"], way, int(s["n"].value)))
        return rows, own

    def known_degree(self, node: ox.NamedNode, direction: Direction) -> int | None:
        return None  # an endpoint records nothing; counting would mean a query

    def count_neighbours(
        self, node: ox.NamedNode, direction: Direction, predicates: Sequence[ox.NamedNode] | None, *,
        values: Values = Values.ANY,
    ) -> int:
        if is_blank(node):
            return self._blanks().count(node, direction, predicates, values)
        return self._count(q.count_neighbours(self.profile, node, direction, predicates, self.count_cap, values))

    def count_kinds(self, node, direction: Direction, predicates) -> tuple[int, int]:
        if is_blank(node):
            blanks = self._blanks()
            return (blanks.count(node, direction, predicates, Values.NAMED),
                    blanks.count(node, direction, predicates, Values.ANONYMOUS))
        for s in self._solutions(q.count_kinds(self.profile, node, direction, predicates, self.count_cap)):
            n, b = (int(s[v].value) if s[v] is not None else 0 for v in ("n", "b"))
            return n - b, b
        return 0, 0

    def relation_counts(self, node: ox.NamedNode, direction: Direction) -> list[RelationCount]:
        if is_blank(node):
            return self._blanks().relation_counts(node, direction)
        rows = [(s["p"], int(s["n"].value)) for s in self._solutions(q.relation_counts(self.profile, node, direction, self.count_cap))]
        exact = sum(n for _, n in rows) < self.count_cap
        return [RelationCount(p, direction, n, exact) for p, n in rows]

    def has_triple(self, subject: ox.NamedNode, predicate: ox.NamedNode, obj: Term) -> bool:
        if is_blank(subject) or is_blank(obj):
            return self._blanks().has_triple(subject, predicate, obj)
        return self._boolean(q.ask_triple(subject, predicate, obj))

    def exists(self, node: ox.NamedNode) -> bool:
        if is_blank(node):
            return self._blanks().exists(node)
        return self._boolean(q.ask_exists(node))

    def uses_predicate(self, predicate: ox.NamedNode) -> bool:
        return self._boolean(q.ask_predicate(predicate.value))

    def uses_as(self, node: ox.NamedNode, position: str) -> bool:
        if position == "class":
            return self._boolean(q.ask_class(node))
        return super().uses_as(node, position)

    def indexed_names(self, name: str, limit: int) -> list[tuple[ox.NamedNode, str]]:
        index = self._lookup_index()
        if index is None:
            return []
        return [(ox.NamedNode(m.entity), m.name) for m in index.lookup(name, limit)[:limit]]

    # --- names -----------------------------------------------------------------------------------
    def labels(self, terms: Sequence[Term]) -> dict[Term, str]:
        # Predicates are named by their property entity (wdt:P19 by wd:P19); in most profiles, themselves.
        if self.profile.property_entity is None:
            carrier = {t: t for t in terms if isinstance(t, ox.NamedNode)}
        else:
            carrier = {t: ox.NamedNode(self.profile.property_entity_of(t.value)) for t in terms if isinstance(t, ox.NamedNode)}
        cache = self._label_cache  # the call's graph set's: looked up once, not per term
        missing = sorted({c for c in carrier.values() if c not in cache}, key=str)
        if missing:
            best = self._best_literals(missing, self.label_predicates)
            self._remember_labels({node: best.get(node) for node in missing})
        found = {t: label for t, c in carrier.items() if (label := cache.get(c)) is not None}
        for t in carrier:
            if t not in found and (unnamed := self.profile.unnamed_label_of(t.value)):
                found[t] = unnamed
        return found

    def _remember_labels(self, labels: dict) -> None:
        if len(self._label_cache) + len(labels) > _LABEL_CACHE_SIZE:
            self._label_cache.clear()
        for node, found in labels.items():
            self._label_cache[node] = found[1] if isinstance(found, tuple) else found

    def descriptions(self, nodes: Sequence[ox.NamedNode]) -> dict[ox.NamedNode, str]:
        named = [n for n in dict.fromkeys(nodes) if isinstance(n, ox.NamedNode)]
        return self._best_literals(named, self.profile.description_predicates)

    def _consider_label(
        self, best: dict, node: Term, predicate: Term | None, literal: Term | None, preds: Sequence[str] | None = None
    ) -> None:
        """Keep `literal` as `node`'s label (or the literal of `preds`, in their order) if it ranks
        better: preferred language, then predicate."""
        if not isinstance(literal, ox.Literal) or predicate is None:
            return
        languages = self.settings.languages
        lang = literal.language or ""
        lang_rank = languages.index(lang) if lang in languages else len(languages)
        preds = self.label_predicates if preds is None else preds
        rank = (lang_rank, preds.index(predicate.value) if predicate.value in preds else 99)
        if node not in best or rank < best[node][0]:
            best[node] = (rank, literal.value)

    def _best_literals(self, nodes: Sequence[ox.NamedNode], predicates: Sequence[str]) -> dict:
        """For each node, the literal of the first predicate in the first preferred language."""
        best: dict[ox.NamedNode, tuple[tuple[int, int], str]] = {}
        for chunk in _chunks(nodes):
            for s in self._solutions(q.labels(chunk, predicates, self.settings.languages)):
                self._consider_label(best, s["x"], s["lp"], s["l"], predicates)
        missing = [n for n in nodes if n not in best]
        for chunk in _chunks(missing):  # no label in a preferred language: take any language
            for s in self._solutions(q.any_label(chunk, predicates)):
                if isinstance(s["label"], ox.Literal):
                    best[s["x"]] = ((99, 99), s["label"].value)
        return {node: text for node, (_, text) in best.items()}

    # Match kinds in rank order; hits of one rank are ordered by the matcher's own order within
    # it (fewer typos first, for instance), then by degree.
    _MATCH_RANK = {
        "id": 0, "exact": 1, "folded": 2, "case-insensitive": 2, "alias": 3, "words": 4, "prefix": 4,
        "search": 5, "fuzzy": 6, "semantic": 7,
    }

    def lookup(self, name: str, limit: int) -> Lookup:
        name = check_text(name, "name")
        found: dict[ox.NamedNode, tuple[str, int]] = {}
        try:
            node = self.vocab.parse(name)
        except InvalidInput:
            node = None
        if isinstance(node, ox.NamedNode) and self.exists(node):
            found[node] = ("id", 0)
        method, matches = self._name_matches(name, limit)
        recorded: dict[ox.NamedNode, int] = {}  # degrees a name index holds: no need to count them
        shown: dict[ox.NamedNode, str | int] = {}  # labels it holds
        for n, match, edits, degree, label in matches:
            found.setdefault(n, (match, edits))
            if degree is not None:  # counted to the cap the index was built with: this server's may be lower
                recorded.setdefault(n, min(degree, self.settings.degree_cap))
            if label is not None:
                shown.setdefault(n, label)
        order = self._MATCH_RANK
        # Degrees rank hits within a match class; count them only for the classes that fill `limit`.
        candidates: list[ox.NamedNode] = []
        for rank in sorted({order[m] for m, _ in found.values()}):
            if len(candidates) >= limit:
                break
            candidates += [n for n, (m, _) in found.items() if order[m] == rank and not self.profile.is_hidden(n.value)]
        degrees = {**self._degrees([n for n in candidates if n not in recorded]), **recorded}
        # Ties keep the matcher's order (for label queries: the order the store gave).
        ranked = sorted(candidates, key=lambda n: (order[found[n][0]], found[n][1], -degrees[n]))[:limit]
        labels, descriptions = self._hit_texts(ranked, shown)  # only for the hits shown
        return Lookup([EntityHit(n, labels.get(n), descriptions.get(n), degrees[n], found[n][0]) for n in ranked], method)

    def _hit_texts(self, nodes: list[ox.NamedNode], shown: dict) -> tuple[dict, dict]:
        """Labels and descriptions of a lookup's hits: from the name index where it keeps them (no read
        of the KG), else read (a query or two each)."""
        index = self._lookup_index()
        rows = {n: label for n, label in shown.items() if isinstance(label, int) and n in nodes}
        held = index.label_of(list(dict.fromkeys(rows.values()))) if index is not None and rows else {}
        labels = {n: label for n in nodes if isinstance(label := shown.get(n), str) or (label := held.get(rows.get(n)))}
        labels.update(self.labels([n for n in nodes if n not in labels]))
        if index is not None and index.details.get("descriptions") == "none":
            return labels, {}  # the file the store was loaded from had no description line: known without asking
        return labels, self.descriptions(nodes)

    def _lookup_index(self) -> NameIndex | None:
        """The name index lookups are answered from (None: none)."""
        return None

    def _indexed_matches(self, index: NameIndex, name: str, limit: int) -> list[Match]:
        """(entity, match kind, order within the kind, degree recorded or None) from a name index."""
        pool = max(limit * 2, 10)  # candidates per tier whose degrees are compared
        return [(ox.NamedNode(m.entity), m.kind, m.order, m.degree, m.shown) for m in index.lookup(name, pool, fill=limit)]

    def _name_matches(self, name: str, limit: int) -> tuple[str, list[Match]]:
        """(method, [(entity, match kind, order within the kind, degree recorded or None)]): the exact
        label query, then a label scan where affordable. Every matcher answers in this shape."""
        found: dict[ox.NamedNode, str] = {n: "exact" for n in self._nodes_labelled(name, limit * 2)}
        if len(found) < limit:
            for n, match in self._fuzzy_matches(name, limit * 4):
                found.setdefault(n, match)
        return self._label_method(), [(n, m, 0, None, None) for n, m in found.items()]

    def _label_method(self) -> str:
        return "label queries (exact, case-insensitive, prefix)" if self.label_scan else "exact label query"

    def _fuzzy_matches(self, name: str, limit: int) -> Iterable[tuple[ox.NamedNode, str]]:
        """Case-insensitive and prefix label matches (a label scan, where the store allows one)."""
        if not self.label_scan:
            return []
        lowered = name.lower()
        matches: dict[ox.NamedNode, str] = {}
        query = q.label_prefix_scan(name, self.label_predicates, limit)
        for s in self._solutions(query):
            if isinstance(s["x"], ox.NamedNode):
                match = "case-insensitive" if s["l"].value.lower() == lowered else "prefix"
                if matches.get(s["x"]) != "case-insensitive":
                    matches[s["x"]] = match
        return matches.items()

    def _degree(self, node: ox.NamedNode) -> int:
        return self._count(q.degree(self.profile, node, self.settings.degree_cap))

    def _degrees(self, nodes: list[ox.NamedNode]) -> dict[ox.NamedNode, int]:
        return {n: self._degree(n) for n in nodes}

    # --- whole store ---------------------------------------------------------------------------
    def run_query(self, query: str, row_cap: int, *, graphs: tuple[str, ...] | None = None) -> Rows:
        return capped_rows(self._run_any(query), row_cap)

    def _run_any(self, query: str) -> ox.QuerySolutions | ox.QueryTriples | bool:
        """Run a user query of any form (SELECT, ASK, CONSTRUCT, DESCRIBE), or override run_query."""
        raise NotImplementedError

    def stats(self) -> StoreStats:
        top = [(s["p"], int(s["n"].value)) for s in self._solutions(q.top_relations(15))]
        return StoreStats(
            kind=self.kind,
            profile=self.profile.name,
            triples=self._count(q.count_triples()),
            entities=self._count(q.count_entities()),
            relations=self._count(q.count_distinct("p")),
            top_relations=top,
        )

