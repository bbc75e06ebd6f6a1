"""`follow`: walk a chain of relations from one or more entities and list the entities at the end.

One bounded backend query per hop (`Backend.step`, all of a frontier's edges along one relation at
once), so a 3-hop question costs three round trips and one tool call instead of one `search`
per entity. Each end entity comes with how many distinct paths reach it. Every hop is held to
an edge budget: a hop that reaches more stops the walk there, and the output says at which hop,
how big the frontier got, which entity made it so, and how to narrow.

Several `paths`, each from its own start entity, are intersected: the answer to "which player of
club X plays Forward?" is what both [club X, ~member_of] and [Forward, ~position] reach. A branch
too big to walk forwards (Forward has thousands of players) is checked backwards instead, from
the entities the other branches reached, so a hub at the far end of one branch costs nothing.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field

import pyoxigraph as ox
from pydantic import BaseModel

from kg_mcp import deadline as call_deadline
from kg_mcp.backends import Backend, Direction
from kg_mcp.backends.base import Term
from kg_mcp.errors import InvalidInput, KGError
from kg_mcp.quoting import quoted
from kg_mcp.settings import Settings
from kg_mcp.tools._render import Namer, TermOut, ToolOutput, capped, plural, table

MAX_HOPS = 6
MAX_BRANCHES = 5
MAX_STARTS = 50
DEFAULT_SHOWN = 200  # end entities listed by default: long answer lists fit, the limit can lower it
EDGES_PER_FRONTIER_ENTITY = 5  # a hop's edge budget is this many times the frontier cap


class ReachedEntity(BaseModel):
    entity: TermOut
    paths: int  # distinct paths (over all branches) that end at the entity


class BranchOut(BaseModel):
    starts: list[TermOut]
    path: list[str]
    sizes: list[int]  # distinct entities reached after each hop walked
    cut_at_hop: int = 0  # the hop (1-based) whose frontier was too big; 0: walked to the end
    cut_edges: int = 0  # edges that hop reached before it was stopped (a lower bound)
    checked_backwards: bool = False  # too big forwards: the end entities of the others were walked back


class FollowResult(BaseModel):
    branches: list[BranchOut]
    complete: bool  # every branch walked (or checked) to its end
    total: int  # end entities
    shown: int
    truncated: bool
    entities: list[ReachedEntity] = []


@dataclass
class _Step:
    predicate: ox.NamedNode
    direction: Direction
    name: str  # as the model wrote it, resolved: rel or ~rel

    def reversed(self) -> _Step:
        back = Direction.INCOMING if self.direction is Direction.OUTGOING else Direction.OUTGOING
        return _Step(self.predicate, back, self.name[1:] if self.name.startswith("~") else f"~{self.name}")


@dataclass
class _Walk:
    """Where a walk got: each reached term with, per origin, the number of distinct paths."""

    reached: dict[Term, Counter] = field(default_factory=dict)
    sizes: list[int] = field(default_factory=list)
    cut_at_hop: int = 0
    cut_edges: int = 0
    heaviest: list[tuple[Term, int]] = field(default_factory=list)  # sources with most edges at the cut
    dead_end: Term | None = None  # an entity at which the walk found no edge, to list its relations
    out_of_time: bool = False  # stopped at cut_at_hop because the call's deadline had passed


@dataclass
class _Branch:
    starts: list[ox.NamedNode]
    steps: list[_Step]
    walk: _Walk
    checked_backwards: bool = False


def follow(
    backend: Backend,
    settings: Settings,
    entity: str = "",
    path: list[str] | None = None,
    entities: list[str] | None = None,
    paths: list[list[str]] | None = None,
    limit: int = 0,
) -> ToolOutput:
    shown_cap = _limit(limit, settings)
    specs = _branch_specs(entity, path or [], entities or [], paths or [])
    branches = []
    for starts_refs, path_refs in specs:
        starts = [backend.resolve_entity(ref, check=False) for ref in starts_refs]
        steps = _resolve_steps(backend, path_refs)
        branches.append(_Branch(list(dict.fromkeys(starts)), steps, _Walk()))
    frontier_cap = settings.search_p
    # One deadline for the whole walk (each query also has its own): no new hop starts past it.
    # The call's own deadline (kg_mcp.deadline) ends it sooner when less of it is left.
    left = call_deadline.left()
    deadline = time.monotonic() + (settings.timeout_s if left is None else min(settings.timeout_s, left))
    for branch in branches:
        branch.walk = _walk(backend, {s: Counter({s: 1}) for s in branch.starts}, branch.steps, frontier_cap, deadline)
    ends = _intersect(backend, branches, frontier_cap, deadline)
    if not ends and all(not b.walk.sizes or b.walk.sizes[0] == 0 for b in branches):
        for branch, (refs, _) in zip(branches, specs):
            for node, ref in zip(branch.starts, refs):
                backend.require(node, ref)
    return _render(backend, settings, branches, ends, shown_cap)


def _limit(limit: int, settings: Settings) -> int:
    if limit == 0:
        return DEFAULT_SHOWN
    if not 1 <= limit <= settings.search_p:
        raise InvalidInput(f"limit must be between 1 and {settings.search_p} (0: the default, {DEFAULT_SHOWN}); got {limit}.")
    return limit


def _branch_specs(entity: str, path: list[str], entities: list[str], paths: list[list[str]]) -> list[tuple[list[str], list[str]]]:
    """[(start refs, relation refs)] from either entity/entities + path or paths."""
    if paths:
        if entity or entities or path:
            raise InvalidInput(
                "Give either paths (each [start entity, relation, ...]) or entity/entities with path, not both."
            )
        if len(paths) > MAX_BRANCHES:
            raise InvalidInput(f"At most {MAX_BRANCHES} paths are intersected at once; got {len(paths)}.")
        specs = []
        for i, branch in enumerate(paths, 1):
            if len(branch) < 2:
                raise InvalidInput(
                    f"paths[{i - 1}] needs a start entity and at least one relation; got {quoted(str(branch))}.",
                    "Write each path as [start entity, relation, relation, ...], e.g. ['kg:Forward', '~position'].",
                )
            specs.append(([branch[0]], list(branch[1:])))
        return specs
    starts = ([entity] if entity else []) + list(entities)
    if not starts:
        raise InvalidInput(
            "No start entity.", "Pass entity (or entities) and path, or paths=[[start, relation, ...], ...]."
        )
    if len(starts) > MAX_STARTS:
        raise InvalidInput(f"At most {MAX_STARTS} start entities at once; got {len(starts)}.")
    if not path:
        raise InvalidInput("path is empty.", "Pass the relations to walk in order, e.g. ['directed_by', '~directed_by'].")
    return [(starts, list(path))]


def _resolve_steps(backend: Backend, refs: list[str]) -> list[_Step]:
    if len(refs) > MAX_HOPS:
        raise InvalidInput(f"At most {MAX_HOPS} relations in a path; got {len(refs)}.", "Split the walk into two calls.")
    steps = []
    for hop, ref in enumerate(refs, 1):
        try:
            predicate, direction = backend.resolve_relation(ref)
        except KGError as error:
            error.message = f"Hop {hop} of the path: {error.message}"
            raise
        name = backend.vocab.compact(predicate)
        steps.append(_Step(predicate, direction, name if direction is Direction.OUTGOING else f"~{name}"))
    return steps


def _walk(
    backend: Backend, reached: dict[Term, Counter], steps: list[_Step], frontier_cap: int, deadline: float
) -> _Walk:
    """Walk `steps` from `reached`, counting paths per origin; stop at the first hop over budget,
    or before a hop once the call's deadline has passed."""
    walk = _Walk(reached)
    edge_cap = frontier_cap * EDGES_PER_FRONTIER_ENTITY
    for hop, step in enumerate(steps, 1):
        if time.monotonic() > deadline:
            walk.cut_at_hop, walk.out_of_time = hop, True
            return walk
        sources = [t for t in walk.reached if not isinstance(t, ox.Literal) or step.direction is Direction.INCOMING]
        sources = [t for t in sources if not isinstance(t, ox.BlankNode)]
        pairs = backend.step(sources, step.predicate, step.direction, edge_cap + 1)
        nxt: dict[Term, Counter] = {}
        for source, target in pairs[:edge_cap]:
            nxt.setdefault(target, Counter()).update(walk.reached[source])
        last = hop == len(steps)
        if len(pairs) > edge_cap or (len(nxt) > frontier_cap and not last):
            walk.cut_at_hop = hop
            walk.cut_edges = min(len(pairs), edge_cap)
            walk.heaviest = Counter(s for s, _ in pairs[:edge_cap]).most_common(3)
            walk.sizes.append(len(nxt))
            return walk
        walk.reached = nxt
        walk.sizes.append(len(nxt))
        if not nxt:
            walk.dead_end = next((t for t in sources if isinstance(t, ox.NamedNode)), None)
            return walk
    return walk


def _intersect(backend: Backend, branches: list[_Branch], frontier_cap: int, deadline: float) -> dict[Term, int]:
    """End entities of every branch with their path counts; cut branches are checked backwards."""
    whole = [b for b in branches if not b.walk.cut_at_hop]
    if not whole:
        return {}
    ends: dict[Term, int] = {t: sum(c.values()) for t, c in whole[0].walk.reached.items()}
    for branch in whole[1:]:
        ends = {t: n + sum(branch.walk.reached[t].values()) for t, n in ends.items() if t in branch.walk.reached}
    for branch in branches:
        if not branch.walk.cut_at_hop or len(branches) == 1:
            continue
        back = _walk(
            backend, {t: Counter({t: 1}) for t in ends}, [s.reversed() for s in reversed(branch.steps)], frontier_cap, deadline
        )
        if back.cut_at_hop:
            return {}
        branch.checked_backwards = True
        branch.walk.sizes = []
        origins: Counter = Counter()
        for start in branch.starts:
            origins.update(back.reached.get(start, Counter()))
        ends = {t: n + origins[t] for t, n in ends.items() if origins[t]}
    return ends


def _render(
    backend: Backend, settings: Settings, branches: list[_Branch], ends: dict[Term, int], shown_cap: int
) -> ToolOutput:
    namer = Namer(backend, settings, [s for b in branches for s in b.starts])
    namer.add(t for b in branches for t, _ in b.walk.heaviest)
    unchecked = [b for b in branches if b.walk.cut_at_hop and not b.checked_backwards]
    complete = not unchecked
    order = sorted(ends, key=lambda t: (-ends[t], _sort_text(namer, t)))
    namer.add(order[:shown_cap])
    shown = order[:shown_cap] if complete else []

    lines = []
    for b in branches:
        lines.append(_branch_line(namer, b))
    if unchecked:
        lines += [_cut_text(namer, b, settings.search_p) for b in unchecked]
    elif not ends:
        lines.append(_empty_text(backend, namer, branches))
    head = f"follow: {plural(len(ends), 'entity')} reached" if complete else "follow: stopped"
    if len(branches) > 1 and complete:
        head += f" by all {len(branches)} paths"
    if complete and len(order) > len(shown):
        head += f", showing {len(shown)} with the most paths (limit {shown_cap}; raise limit, up to {settings.search_p}, for more)"
    text = head + ".\n" + "\n".join(lines)
    if shown:
        rows = [(namer.value_text(t), namer.label(t), str(ends[t])) for t in shown]
        text += "\n" + table(("entity", "label", "paths"), rows, settings)
    text = capped(text, settings, "Pass a smaller limit.")
    data = FollowResult(
        branches=[
            BranchOut(
                starts=[namer.out(s) for s in b.starts],
                path=[s.name for s in b.steps],
                sizes=b.walk.sizes,
                cut_at_hop=b.walk.cut_at_hop,
                cut_edges=b.walk.cut_edges,
                checked_backwards=b.checked_backwards,
            )
            for b in branches
        ],
        complete=complete,
        total=len(ends) if complete else 0,
        shown=len(shown),
        truncated=complete and len(order) > len(shown),
        entities=[ReachedEntity(entity=namer.out(t), paths=ends[t]) for t in shown],
    )
    return ToolOutput(text, data)


def _branch_line(namer: Namer, b: _Branch) -> str:
    starts = ", ".join(namer.heading(s) for s in b.starts[:5]) + (f" and {len(b.starts) - 5} more" if len(b.starts) > 5 else "")
    walked = " → ".join(s.name for s in b.steps)
    if b.checked_backwards:
        return f"- {starts} → {walked}: too big to walk forwards; checked backwards from the other paths' entities"
    sizes = " → ".join(f"{n:,}" for n in b.walk.sizes)
    return f"- {starts} → {walked}: entities after each hop {sizes}"


def _cut_text(namer: Namer, b: _Branch, frontier_cap: int) -> str:
    hop = b.walk.cut_at_hop
    step = b.steps[hop - 1]
    if b.walk.out_of_time:
        return (
            f"Stopped before hop {hop} ({step.name}): the call ran out of time. Follow fewer hops at once "
            "(the first ones, then the rest from the entities reached)."
        )
    edges = b.walk.cut_edges
    heavy = ", ".join(f"{namer.heading(t)} ({n:,})" for t, n in b.walk.heaviest if isinstance(t, ox.NamedNode))
    size = f"more than {edges:,} edges" if edges >= frontier_cap * EDGES_PER_FRONTIER_ENTITY else f"{b.walk.sizes[-1]:,} entities"
    return (
        f"Stopped at hop {hop} ({step.name}): it reaches {size}, more than a hop may "
        f"(at most {frontier_cap:,} entities before the last hop){f'; most edges from {heavy}' if heavy else ''}. "
        f"To narrow: follow the first {hop - 1} hop(s) only and search the entities reached, add a path that "
        "pins the answer down (paths are intersected), or start from a more specific entity."
    )


def _empty_text(backend: Backend, namer: Namer, branches: list[_Branch]) -> str:
    """Where a walk ran dry, and the relations one entity there does have (the usual fix)."""
    for b in branches:
        if b.walk.sizes and b.walk.sizes[-1] == 0:
            hop = len(b.walk.sizes)
            text = f"No entity at hop {hop} ({b.steps[hop - 1].name}): the entities reached before it have no such edge."
            sample = b.walk.dead_end
            if isinstance(sample, ox.NamedNode):
                counts = backend.relations_around(sample)
                namer.add([sample])
                names = [(namer.id(c.predicate) if c.direction is Direction.OUTGOING else f"~{namer.id(c.predicate)}") for c in counts]
                have = ", ".join(names[:30]) + (f" and {len(names) - 30} more" if len(names) > 30 else "")
                text += f" {namer.heading(sample)} has: {have or 'no relations'} (~ = walked backwards)."
            return text
    return "No entity is reached by every path."


def _sort_text(namer: Namer, term: Term) -> str:
    return (namer.label(term) or namer.value_text(term)).lower()

