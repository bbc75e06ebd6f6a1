"""The walk behind `follow`: one bounded `Backend.step` per hop, paths counted per origin, the
paths through left-out entities walked beside the answer's, and several branches intersected
(a branch too big forwards is checked backwards from the others' end entities)."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import pyoxigraph as ox

from kg_mcp.calls import progress
from kg_mcp.backends import Backend, Direction
from kg_mcp.backends.base import Term

EDGES_PER_FRONTIER_ENTITY = 5  # a hop's edge budget is this many times the frontier cap
MAX_DEPTH = 25  # levels a transitive step (rel+, rel*) walks at most


@dataclass
class Step:
    predicate: ox.NamedNode
    direction: Direction
    name: str  # as the model wrote it, resolved: rel or ~rel, with its + or *
    repeat: str = ""  # "+": one or more times, "*": zero or more times (SPARQL property paths)

    def reversed(self) -> Step:
        back = Direction.INCOMING if self.direction is Direction.OUTGOING else Direction.OUTGOING
        return Step(self.predicate, back, self.name[1:] if self.name.startswith("~") else f"~{self.name}", self.repeat)


@dataclass
class Hop:
    """What one step reached: distinct (source, target) pairs, and for a transitive step the
    entities first reached at each depth and whether it stopped at MAX_DEPTH with more below."""

    pairs: list[tuple[Term, Term]]
    over: bool = False  # more pairs than the budget: the walk stops here
    depths: list[int] = field(default_factory=list)
    depth_cut: bool = False


@dataclass
class Walk:
    """Where a walk got: each reached term with, per origin, the number of distinct paths.

    `reached` holds the paths that keep clear of the left-out entities (the answer); `aside` the
    paths that passed through one of them (a term can be in both)."""

    reached: dict[Term, Counter] = field(default_factory=dict)
    sizes: list[int] = field(default_factory=list)
    depths: dict[int, list[int]] = field(default_factory=dict)  # hop -> entities first reached at each depth
    depth_cut: list[int] = field(default_factory=list)  # hops that stopped at MAX_DEPTH with more below
    cut_at_hop: int = 0
    cut_edges: int = 0
    heaviest: list[tuple[Term, int]] = field(default_factory=list)  # sources with most edges at the cut
    dead_end: Term | None = None  # an entity at which the walk found no edge, to list its relations
    # Per hop walked: (entities the hop walked from, how many of them had no such edge).
    without: list[tuple[int, int]] = field(default_factory=list)
    out_of_time: bool = False  # stopped at cut_at_hop because the call's deadline had passed
    aside: dict[Term, Counter] = field(default_factory=dict)
    sizes_all: list[int] = field(default_factory=list)  # distinct terms in reached or aside after each hop
    aside_lost_at: int = 0  # the hop where the paths aside grew past the budget (or the time): not counted on

    def every_end(self) -> set[Term] | None:
        """The end terms counting the paths aside too; None when those were not counted."""
        return None if self.aside_lost_at else set(self.reached) | set(self.aside)


@dataclass
class Branch:
    starts: list[ox.NamedNode]
    steps: list[Step]
    walk: Walk
    drop: frozenset[Term] = frozenset()  # entities whose paths this branch leaves out
    checked_backwards: bool = False
    back_aside: Counter = field(default_factory=Counter)  # checked backwards: end term -> paths through `drop`


def walk_steps(
    backend: Backend,
    reached: dict[Term, Counter],
    steps: list[Step],
    frontier_cap: int,
    deadline: float,
    drop: frozenset[Term] = frozenset(),
    *,
    drop_at_end: bool = True,
    aside: dict[Term, Counter] | None = None,
) -> Walk:
    """Walk `steps` from `reached`, counting paths per origin; stop at the first hop over budget,
    or before a hop once the call's deadline has passed.

    A path that reaches an entity of `drop` after a hop (the last hop too, unless not
    `drop_at_end`) moves aside: it no longer counts for the answer, and is walked on beside it
    only to say what leaving it out changed."""
    walk = Walk(reached, aside=dict(aside or {}))
    edge_cap = frontier_cap * EDGES_PER_FRONTIER_ENTITY
    for hop, step in enumerate(steps, 1):
        progress.step(hop - 1, len(steps), f"hop {hop} of {len(steps)}")
        if time.monotonic() > deadline:
            walk.cut_at_hop, walk.out_of_time = hop, True
            return walk
        last = hop == len(steps)
        sources = _sources(backend, walk.reached, step)
        result = one_hop(backend, sources, step, edge_cap, deadline, drop)
        pairs = result.pairs
        if step.repeat:
            walk.depths[hop] = result.depths
            if result.depth_cut:
                walk.depth_cut.append(hop)
        nxt: dict[Term, Counter] = {}
        for source, target in pairs[:edge_cap]:
            nxt.setdefault(target, Counter()).update(walk.reached[source])
        moved = {t: nxt.pop(t) for t in drop & nxt.keys()} if drop and (drop_at_end or not last) else {}
        if result.over or (len(nxt) > frontier_cap and not last):
            walk.cut_at_hop = hop
            walk.cut_edges = min(len(pairs), edge_cap)
            walk.heaviest = Counter(s for s, _ in pairs[:edge_cap]).most_common(3)
            walk.sizes.append(len(nxt))
            return walk
        _step_aside(backend, walk, step, moved, hop, last, frontier_cap, deadline)
        walk.without.append((len(sources), len(sources) - len(_walked_from(pairs, step))))
        walk.reached = nxt
        walk.sizes.append(len(nxt))
        if not walk.aside_lost_at:
            walk.sizes_all.append(len(nxt.keys() | walk.aside.keys()))
        if not nxt and not moved and walk.dead_end is None:
            walk.dead_end = next((t for t in sources if not isinstance(t, ox.Literal)), None)
        if not nxt and not walk.aside:
            return walk
    return walk


def _walked_from(pairs: list[tuple[Term, Term]], step: Step) -> set[Term]:
    """The sources that have an edge of the step (for rel*, reaching itself in zero steps is no
    edge; for rel+ it is a loop, one)."""
    return {s for s, t in pairs if s != t or step.repeat != "*"}


def _step_aside(
    backend: Backend, walk: Walk, step: Step, moved: dict[Term, Counter], hop: int, last: bool, frontier_cap: int, deadline: float
) -> None:
    """One hop of the paths aside (those through a left-out entity), plus the ones that just moved
    there; held to the walk's own budget, past which they are no longer counted."""
    if walk.aside_lost_at:
        return
    edge_cap = frontier_cap * EDGES_PER_FRONTIER_ENTITY
    nxt: dict[Term, Counter] = {}
    sources = _sources(backend, walk.aside, step)
    if sources:
        result = one_hop(backend, sources, step, edge_cap, deadline) if time.monotonic() <= deadline else None
        if result is None or result.over:
            walk.aside_lost_at, walk.aside = hop, {}
            return
        for source, target in result.pairs:
            nxt.setdefault(target, Counter()).update(walk.aside[source])
    for term, paths in moved.items():
        nxt.setdefault(term, Counter()).update(paths)
    if len(nxt) > frontier_cap and not last:
        walk.aside_lost_at, walk.aside = hop, {}
        return
    walk.aside = nxt


def one_hop(
    backend: Backend, sources: list[Term], step: Step, edge_cap: int, deadline: float, drop: frozenset[Term] = frozenset()
) -> Hop:
    """The distinct (source, target) pairs of one step, at most `edge_cap` (`over` past it)."""
    if not sources:
        return Hop([])
    if not step.repeat:
        pairs = backend.step(sources, step.predicate, step.direction, edge_cap + 1)
        return Hop(pairs, over=len(pairs) > edge_cap)
    return closure(backend, sources, step, edge_cap, deadline, drop)


def closure(
    backend: Backend, sources: list[Term], step: Step, edge_cap: int, deadline: float, drop: frozenset[Term] = frozenset()
) -> Hop:
    """A transitive step, breadth first to MAX_DEPTH: each source paired once with every entity
    it reaches (itself too, for `*`). The walk does not go on through a left-out entity (`drop`).

    An endpoint hands over the edges among everything reachable in one property-path query
    (`Backend.closure_edges`); elsewhere each depth is one `Backend.step` of the new frontier."""
    graph: dict[Term, list[Term]] | None = None
    edges = backend.closure_edges(sources, step.predicate, step.direction, edge_cap + 1)
    if edges is not None:
        if len(edges) > edge_cap:
            return Hop(edges, over=True)
        graph = {}
        for a, b in edges:
            graph.setdefault(a, []).append(b)
    reach: dict[Term, set[Term]] = {s: {s} for s in sources} if step.repeat == "*" else {}
    seen: set[Term] = set(reach)
    frontier: dict[Term, set[Term]] = {s: {s} for s in sources}
    hop = Hop([])
    pairs = len(reach)
    for _ in range(MAX_DEPTH):
        walkable = [t for t in frontier if t not in drop or t in sources]
        walkable = _sources(backend, dict.fromkeys(walkable), step)
        if not walkable:
            frontier = {}
            break
        if graph is not None:
            found = [(a, b) for a in walkable for b in graph.get(a, ())]
        elif time.monotonic() > deadline:
            return Hop([], over=True)
        else:
            found = backend.step(walkable, step.predicate, step.direction, edge_cap + 1)
            if len(found) > edge_cap:
                return Hop(found, over=True)
        nxt: dict[Term, set[Term]] = {}
        for a, b in found:
            for origin in frontier[a]:
                if origin not in reach.setdefault(b, set()):
                    reach[b].add(origin)
                    nxt.setdefault(b, set()).add(origin)
                    pairs += 1
        if pairs > edge_cap:
            return Hop([(s, t) for t, origins in reach.items() for s in origins], over=True)
        hop.depths.append(len(nxt.keys() - seen))
        seen |= nxt.keys()
        frontier = nxt
        if not frontier:
            break
    hop.depth_cut = bool(frontier)
    while hop.depths and hop.depths[-1] == 0:
        hop.depths.pop()
    hop.pairs = [(s, t) for t, origins in reach.items() for s in origins]
    return hop


def _sources(backend: Backend, reached: dict[Term, Counter], step: Step) -> list[Term]:
    """The terms a hop can walk from: literals only backwards, blank nodes where the backend can
    name them in a query."""
    return [
        t for t in reached
        if (not isinstance(t, ox.Literal) or step.direction is Direction.INCOMING)
        and (not isinstance(t, ox.BlankNode) or backend.addresses_blank_nodes(t))
    ]


def intersect(
    backend: Backend, branches: list[Branch], frontier_cap: int, deadline: float
) -> tuple[dict[Term, int], set[Term] | None]:
    """End entities of every branch with their path counts, and the end entities counting the
    paths through left-out entities too (None when those could not be counted). Cut branches are
    checked backwards, from the end entities of the others."""
    whole = [b for b in branches if not b.walk.cut_at_hop]
    if not whole:
        return {}, None
    ends: dict[Term, int] = {t: sum(c.values()) for t, c in whole[0].walk.reached.items()}
    every = whole[0].walk.every_end()
    for branch in whole[1:]:
        ends = {t: n + sum(branch.walk.reached[t].values()) for t, n in ends.items() if t in branch.walk.reached}
        more = branch.walk.every_end()
        every = None if every is None or more is None else every & more
    for branch in branches:
        if not branch.walk.cut_at_hop or len(branches) == 1:
            continue
        # An end entity that is one of this branch's left-out entities could only end a path
        # through it: it starts the walk back aside, as do the ends only the others' paths aside reach.
        clean = {t: Counter({t: 1}) for t in ends if t not in branch.drop}
        aside = {t: Counter({t: 1}) for t in (every or set()) if t not in clean}
        back = walk_steps(
            backend, clean, [s.reversed() for s in reversed(branch.steps)], frontier_cap, deadline, branch.drop,
            drop_at_end=False, aside=aside,
        )
        if back.cut_at_hop:
            return {}, None
        branch.checked_backwards = True
        branch.walk.sizes = branch.walk.sizes_all = []
        origins: Counter = Counter()
        origins_aside: Counter = Counter()
        for start in branch.starts:
            origins.update(back.reached.get(start, Counter()))
            origins_aside.update(back.aside.get(start, Counter()))
        branch.back_aside = origins_aside
        ends = {t: n + origins[t] for t, n in ends.items() if origins[t]}
        every = None if every is None or back.aside_lost_at else {t for t in every if origins[t] or origins_aside[t]}
    return ends, every


def left_out_ends(branches: list[Branch], ends: dict[Term, int], every: set[Term] | None) -> dict[Term, int] | None:
    """The end entities reached only through left-out entities, with those paths (over every branch
    that walked forwards); None when they could not be counted."""
    if every is None:
        return None
    paths: Counter = Counter()
    for branch in branches:
        if branch.checked_backwards:
            paths.update(branch.back_aside)
        elif not branch.walk.cut_at_hop:
            paths.update({term: sum(origins.values()) for term, origins in branch.walk.aside.items()})
    return {t: paths[t] for t in every if t not in ends}
