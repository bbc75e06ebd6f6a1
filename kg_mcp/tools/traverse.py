"""`kgr_search`: KG-Reasoner's retrieval, with a traversal tree and backtracking.

A search returns the triples around an entity, both directions, as numbered lines
`(i) subject [id] | relation | object [id]`, ranked by relevance to the question when one is
given and cut to the top k. Large neighbourhoods are read by relation, the most relevant
relations first, up to FETCH_BUDGET edges, so a hub costs no more than a small entity.

Each explored entity joins the session's traversal tree (`kg_mcp.kg_reasoner.traversal`). `backtrack=true`
leaves the current entity for its parent and explores the parent's next-best unexplored
neighbour, climbing further up while an ancestor has none left, until the topic entity.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

import pyoxigraph as ox
from pydantic import BaseModel, TypeAdapter

from kg_mcp.calls import deadline, progress
from kg_mcp.backends import Backend, Direction
from kg_mcp.backends.base import Term
from kg_mcp.errors import InvalidInput
from kg_mcp.quoting import clipped
from kg_mcp.kg_reasoner.ranking import GraphRanker, Link, RankItem, Ranker, top_k
from kg_mcp.settings import Settings
from kg_mcp.tools._render import Namer, TermOut, ToolOutput, capped, cell, plural
from kg_mcp.tools.anonymous import AnonymousSummary, anonymous_line, anonymous_summary, check_anonymous, lists_anonymous
from kg_mcp.tools.pages import Listing, Paged, with_more
from kg_mcp.kg_reasoner.traversal import LABEL_CHARS, MAX_CANDIDATES, Candidate, Node, Tree

FETCH_BUDGET = 1000  # edges read around one entity
DEFAULT_TOP_K = 20
MAX_TOP_K = 100


class TripleOut(BaseModel):
    subject: TermOut
    relation: str
    relationLabel: str | None
    object: TermOut
    score: float | None = None


class TraverseResult(Paged):
    entity: TermOut  # whose triples these are: the current entity after the call
    parent: TermOut | None = None
    via: str | None = None  # relation from the parent to the entity (`~rel` = backwards)
    backtracked_from: TermOut | None = None
    climbed: list[TermOut] = []  # ancestors passed on the way up, nothing left under them
    exhausted: bool = False  # a backtrack found no unexplored neighbour anywhere up to the root
    path: list[TermOut] = []  # from the root (topic entity) down to the entity
    total: int = 0  # triples around the entity
    read: int = 0  # triples read (less than total when the neighbourhood was too large)
    shown: int = 0
    ranked_by: str | None = None  # the ranker's name, when a question ordered the triples
    triples: list[TripleOut] = []
    anonymous: AnonymousSummary | None = None  # the triples to blank nodes, summed up instead of listed


_TRIPLES = TypeAdapter(list[TripleOut])


def traversal_key(session: str | None, headers: Mapping[str, str] | None, caller: str = "local") -> str | None:
    """Where a kgr_search call's traversal tree is kept (see kg_mcp/kg_reasoner/traversal.py); None: nowhere.

    Every key starts with the caller's key (kg_mcp.calls.caller) and, over HTTP, the caller's MCP session
    when it has one: a `session` name is a name within them, so another caller's calls naming the
    same session reach a tree of their own, never this one.

    >>> traversal_key("q7", None), traversal_key(None, None), traversal_key(None, {"mcp-session-id": "ab"}, "addr:10.0.0.1")
    ('local session:q7', 'local', 'addr:10.0.0.1 mcp-session:ab')
    >>> traversal_key("q7", {"mcp-session-id": "ab"}, "addr:10.0.0.1")
    'addr:10.0.0.1 mcp-session:ab session:q7'
    >>> traversal_key(None, {"host": "x"}, "addr:10.0.0.1") is None
    True
    """
    mcp_session = None
    if headers is not None:
        mcp_session = next((v for k, v in headers.items() if k.lower() == "mcp-session-id"), None)
    owner = f"{caller} mcp-session:{mcp_session}" if mcp_session else caller
    if session:
        return f"{owner} session:{session}"
    if headers is None:  # stdio or in-process: one client per server
        return owner
    return owner if mcp_session else None


@dataclass
class Edge:
    """An edge around the explored entity: `value` is the entity at its other end (or a literal)."""

    predicate: ox.NamedNode
    direction: Direction
    value: Term


@dataclass
class _View:
    """One read of an entity's neighbourhood: its edges, how many there are, labels, rank scores."""

    node: ox.NamedNode
    edges: list[Edge]
    total: int
    namer: Namer
    scores: list[float]


def kgr_search(
    backend: Backend,
    settings: Settings,
    tree: Tree,
    ranker: Ranker,
    entity: str | None = None,
    backtrack: bool = False,
    k: int = DEFAULT_TOP_K,
    anonymous: str = "summary",
    cursor: str = "",
) -> ToolOutput:
    if not 1 <= k <= MAX_TOP_K:
        raise InvalidInput(f"top_k must be between 1 and {MAX_TOP_K}, not {k}.")
    check_anonymous(anonymous)
    with tree.lock:
        if backtrack:
            if cursor:
                raise InvalidInput("A cursor reads on the triples of an entity, not a backtrack.",
                                   "Pass the cursor with the entity the page was of (and no backtrack).")
            return _backtrack(backend, settings, tree, ranker, k, anonymous)
        if not entity or not entity.strip():
            raise InvalidInput("Give the entity to search, or backtrack=true.")
        node = backend.resolve_entity(entity.strip())
        listing = _listing(backend, settings, node, anonymous, cursor)
        if listing.offset and listing.start.resume != _order_key(tree, ranker):
            raise InvalidInput("This cursor was issued under another question, whose order of the triples differs.",
                               "Leave cursor out to read this entity's first page for the question asked now.")
        view = _read(backend, settings, node, tree.question, ranker)
        entity_id = view.namer.id(node)
        if entity_id in tree.nodes:
            tree.revisit(entity_id)
        else:
            parent, via = tree.placement(entity_id)
            _explore(tree, view, parent, via)
        return _render(backend, settings, tree, ranker, view, k, listing, anonymous)


def _order_key(tree: Tree, ranker: Ranker) -> str:
    """What a page's order of the triples depends on besides the entity: the question and the
    ranker. A cursor carries it, so that one issued under another question is refused."""
    return hashlib.sha256(f"{ranker.name}\n{tree.question}".encode()).hexdigest()[:16]


def _listing(backend: Backend, settings: Settings, node: ox.NamedNode, anonymous: str, cursor: str = "") -> Listing:
    """The listing of an entity's triples: its cursor reads on the same entity (by id, as the tools
    show it), whichever call (a search or a backtrack) showed its first page."""
    arguments = {"entity": backend.vocab.compact(node), **({"anonymous": anonymous} if anonymous != "summary" else {})}
    return Listing.open("kgr_search", arguments, cursor, backend, settings)


def _backtrack(backend: Backend, settings: Settings, tree: Tree, ranker: Ranker, k: int, anonymous: str) -> ToolOutput:
    step = tree.backtrack()
    namer = Namer(backend, settings)
    left = _term(backend, namer, step.left)
    climbed = [_term(backend, namer, i) for i in step.climbed]
    if step.offered is None:
        root = climbed[-1]
        text = (
            f"Backtracked from {_name(left)}: no entity on the way up to the topic entity {_name(root)} has an "
            "unexplored neighbour left; there is nothing to go back to. Answer from the triples you have, "
            "or search another entity."
        )
        data = TraverseResult(entity=root, backtracked_from=left, climbed=climbed, exhausted=True, path=[root])
        return ToolOutput(text, data)
    offered = step.offered
    node = _node(backend, offered.id)
    view = _read(backend, settings, node, tree.question, ranker)
    _explore(tree, view, step.parent, offered.relation)
    out = _render(backend, settings, tree, ranker, view, k, _listing(backend, settings, node, anonymous), anonymous)
    parent = _term(backend, namer, step.parent)
    child = _term(backend, namer, offered.id)
    passed = "".join(f" {_name(c)} has no unexplored neighbour left;" for c in climbed)
    head = (
        f"Backtracked from {_name(left)}:{passed} back at {_name(parent)}, whose next-best unexplored "
        f"neighbour is {_name(child)} ({_link_text(parent, offered.relation, child)}).\n"
    )
    out.data.backtracked_from = left
    out.data.climbed = climbed
    return ToolOutput(capped(head + out.text, settings, "Ask for fewer triples (top_k)."), out.data)


def _read(backend: Backend, settings: Settings, node: ox.NamedNode, question: str, ranker: Ranker) -> _View:
    edges, total = _neighbourhood(backend, node, question, ranker)
    namer = Namer(backend, settings, [node, *(e.predicate for e in edges), *(e.value for e in edges)])
    return _View(node, edges, total, namer, _scores(namer, node, edges, question, ranker))


def _ranked(view: _View, question: str) -> list[int]:
    """Edge indexes, most relevant first (the KG's order without a question)."""
    return top_k(view.scores, len(view.edges)) if question else list(range(len(view.edges)))


def _explore(tree: Tree, view: _View, parent: str | None, via: str | None) -> None:
    """Add the entity to the tree with its neighbour entities, best first."""
    namer, node = view.namer, view.node
    best: dict[str, Candidate] = {}
    for i in _ranked(view, tree.question):
        edge = view.edges[i]
        if isinstance(edge.value, ox.Literal) or edge.value == node:
            continue
        if isinstance(edge.value, ox.BlankNode) and not namer.blank_handles(edge.value):
            continue
        value_id = namer.id(edge.value)
        if value_id not in best:
            relation = namer.id(edge.predicate)
            best[value_id] = Candidate.kept(
                value_id,
                namer.label(edge.value),
                relation if edge.direction is Direction.OUTGOING else f"~{relation}",
                round(view.scores[i], 4),
            )
            if len(best) >= MAX_CANDIDATES:
                break
    tree.add(Node(id=namer.id(node), label=clipped(namer.label(node), LABEL_CHARS), parent=parent, via=via, candidates=list(best.values())))


def _render(backend: Backend, settings: Settings, tree: Tree, ranker: Ranker, view: _View, k: int, listing: Listing,
            anonymous: str) -> ToolOutput:
    namer, node, edges = view.namer, view.node, view.edges
    ranked = _ranked(view, tree.question)
    blank = [i for i in ranked if isinstance(edges[i].value, ox.BlankNode)]
    listed = lists_anonymous(anonymous, node) or len(blank) == len(ranked)
    # Named triples in rank order, then (when listed) those to blank nodes: they never push a named
    # triple out of the top k.
    order = [i for i in ranked if not isinstance(edges[i].value, ox.BlankNode)] + (blank if listed else [])
    page = order[listing.offset : listing.offset + k]
    entity_id = namer.id(node)
    path_ids = tree.path(entity_id)
    this = namer.out(node)
    triples, lines = [], []
    for n, i in enumerate(page, listing.offset + 1):
        edge = edges[i]
        subject, obj = (node, edge.value) if edge.direction is Direction.OUTGOING else (edge.value, node)
        triples.append({
            "subject": namer.term(subject), "relation": namer.id(edge.predicate),
            "relationLabel": namer.predicate_label(edge.predicate), "object": namer.term(obj),
            "score": round(view.scores[i], 4) if tree.question else None,
        })
        lines.append(f"({n}) {cell(_shown(namer, subject), settings)} | {namer.id(edge.predicate)} | {cell(_shown(namer, obj), settings)}")
    total = view.total
    head = f"{_name(this)}: {plural(total, 'triple')}"
    if blank and not listed:
        head += f" ({len(order):,} named listed, {len(blank):,} to anonymous nodes summed up)"
    shown_phrase = len(head)  # where the words on what this page shows go, once it is cut to fit
    if len(edges) < total:
        head += f" (a large neighbourhood: only the {len(edges)} triples of its most relevant relations were read)"
    head += "."
    path = [_term(backend, namer, i) for i in path_ids]
    if len(path) > 1:
        steps = " ".join(f"--{tree.nodes[i].via}--> {_name(t)}" for i, t in zip(path_ids[1:], path[1:]))
        head += f"\nPath from the topic entity: {_name(path[0])} {steps}"
    summed = None
    if blank and not listed:
        call = listing.call(anonymous="list")
        # Their kinds on the first page, as the other listings: a later page says how many only.
        summed = (anonymous_summary(backend, namer.id, [edges[i].value for i in blank], len(blank), call)
                  if not listing.offset else AnonymousSummary(total=len(blank), call=call))
    foot = ""
    if summed is not None and not listing.offset:
        foot = "\n" + anonymous_line("triples to anonymous nodes", summed)
    current = tree.nodes[entity_id]
    data = TraverseResult(
        entity=this,
        parent=_term(backend, namer, current.parent) if current.parent else None,
        via=current.via,
        path=path,
        total=total,
        read=len(edges),
        shown=0,
        ranked_by=ranker.name if tree.question else None,
        offset=listing.offset,
        anonymous=summed,
    )
    fits = listing.fit(lines, triples, text_used=len(head) + len(foot) + 1 + 60,
                       json_used=len(data.model_dump_json()) + 500)
    token, more = listing.more(fits, len(order), again=listing.call(), resume=_order_key(tree, ranker))
    if len(order) > fits or listing.offset:
        which = f"the {fits} most relevant to the question" if tree.question else f"the first {fits}"
        if listing.offset:
            which = f"{fits} more, from #{listing.offset + 1},"
        head = f"{head[:shown_phrase]}, {which} shown{head[shown_phrase:]}"
    text = head + ("\n" + "\n".join(lines[:fits]) if lines else "\nIt has no triples.") + foot
    data.triples = _TRIPLES.validate_python(triples[:fits])  # at once, in pydantic's compiled core
    data.shown, data.next_cursor = fits, token
    return ToolOutput(with_more(capped(text, settings, "Ask for fewer triples (top_k)."), more), data)


def _neighbourhood(backend: Backend, node: ox.NamedNode, question: str, ranker: Ranker | None) -> tuple[list[Edge], int]:
    """Edges around `node` in both directions (at most FETCH_BUDGET) and how many there are in all.

    Above the budget, relations are read whole in order of their relevance to the question
    (in the KG's order without one) until the budget is spent.
    """
    counts = backend.relation_counts(node, Direction.OUTGOING) + backend.relation_counts(node, Direction.INCOMING)
    total = sum(c.count for c in counts)
    if total <= FETCH_BUDGET:
        edges = [
            Edge(n.predicate, way, n.value)
            for way in (Direction.OUTGOING, Direction.INCOMING)
            for n in backend.neighbours(node, way, None, FETCH_BUDGET)
        ]
        return edges, max(total, len(edges))
    if question and ranker is not None:
        labels = backend.labels([c.predicate for c in counts])
        texts = [labels.get(c.predicate) or backend.vocab.compact(c.predicate) for c in counts]
        if isinstance(ranker, GraphRanker):
            items = [RankItem(Link(t, c.direction is Direction.INCOMING, "")) for t, c in zip(texts, counts)]
            scores = ranker.score_items(question, items)
        else:
            scores = ranker.score(question, texts)
        order = top_k(scores, len(counts))
    else:
        order = list(range(len(counts)))
    edges: list[Edge] = []
    for i in order:
        deadline.check()
        left = FETCH_BUDGET - len(edges)
        if left <= 0:
            break
        c = counts[i]
        edges += [Edge(n.predicate, c.direction, n.value) for n in backend.neighbours(node, c.direction, [c.predicate], left)]
    return edges, total


def edges_around(backend: Backend, node: ox.NamedNode) -> list[Edge]:
    """The edges `kgr_search` reads around `node` without a question (in the KG's order)."""
    return _neighbourhood(backend, node, "", None)[0]


def graph_items(backend: Backend, namer: Namer, node: ox.NamedNode, edges: list[Edge], context_size: int) -> list[RankItem]:
    """Each edge's candidate with up to `context_size` of its own neighbours per direction, for a
    graph-aware ranker (labels through `namer`, which learns the new terms)."""
    others = dict.fromkeys(e.value for e in edges if isinstance(e.value, ox.NamedNode) and e.value != node)
    around = {}
    for done, c in enumerate(others):
        deadline.check()
        progress.step(done, len(others), "neighbours read for ranking")
        around[c] = [(n, way) for way in (Direction.OUTGOING, Direction.INCOMING) for n in backend.neighbours(c, way, None, context_size)]
    namer.add(t for pairs in around.values() for n, _ in pairs for t in (n.predicate, n.value))

    def link(predicate: ox.NamedNode, direction: Direction, value: Term) -> Link:
        return Link(namer.predicate_label(predicate), direction is Direction.INCOMING, _label_text(namer, value))

    return [
        RankItem(link(e.predicate, e.direction, e.value), tuple(link(n.predicate, way, n.value) for n, way in around.get(e.value, ())))
        for e in edges
    ]


def _scores(namer: Namer, node, edges: list[Edge], question: str, ranker: Ranker) -> list[float]:
    if not question or not edges:
        return [0.0] * len(edges)
    if isinstance(ranker, GraphRanker):
        return ranker.score_items(question, graph_items(namer.backend, namer, node, edges, ranker.context_size))
    texts = []
    for e in edges:
        subject, obj = (node, e.value) if e.direction is Direction.OUTGOING else (e.value, node)
        texts.append(f"{_label_text(namer, subject)} {namer.predicate_label(e.predicate)} {_label_text(namer, obj)}")
    return ranker.score(question, texts)


def _label_text(namer: Namer, term: Term) -> str:
    return namer.label(term) or namer.value_text(term)


def _shown(namer: Namer, term: Term) -> str:
    """An entity as `Label [id]` (just the id without a label), a blank node as `[ its content ] [handle]`;
    a literal as its text."""
    if not isinstance(term, ox.Literal):
        label = namer.label(term)
        return f"{label} [{namer.id(term)}]" if label else namer.id(term)
    return namer.value_text(term)


def _node(backend: Backend, entity_id: str) -> ox.NamedNode:
    return backend.resolve_entity(entity_id)


def _term(backend: Backend, namer: Namer, entity_id: str) -> TermOut:
    node = _node(backend, entity_id)
    namer.add([node])
    return namer.out(node)


def _name(term: TermOut) -> str:
    return f"{term.label} [{term.id}]" if term.label else term.id


def _link_text(parent: TermOut, relation: str, child: TermOut) -> str:
    if relation.startswith("~"):
        return f"{_name(child)} | {relation[1:]} | {_name(parent)}"
    return f"{_name(parent)} | {relation} | {_name(child)}"
