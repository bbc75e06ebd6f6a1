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

Paths back through the start are left out by default. "Who directed the films written by the writer
of Little Nicky" means the writer's *other* films: a path that passes through a start entity again
(at any hop, or ends there) is dropped, so the start is never an end entity and an end entity
reached only back through the start is not listed as an answer. That is what a person asking
means, and MetaQA's gold sets say the same. `exclude_through="none"` keeps those paths (a
benchmark or a question whose answers may come back through the start); `exclude` names more
entities whose paths are dropped the same way. The walk that leaves them out is the one that
answers (its frontier is the one held to the budget); the paths through left-out entities are
walked beside it, within the same budget, so the output can say how much each hop shrank and
which end entities were reached only that way.
"""

from __future__ import annotations

import time
from collections import Counter

import pyoxigraph as ox
from pydantic import BaseModel, TypeAdapter

from kg_mcp.calls import deadline as call_deadline
from kg_mcp.backends import Backend, Direction
from kg_mcp.backends.base import Term
from kg_mcp.errors import InvalidInput, KGError
from kg_mcp.quoting import quoted
from kg_mcp.settings import Settings
from kg_mcp.tools._render import Namer, TermOut, ToolOutput, capped, cell, plural, table
from kg_mcp.tools.anonymous import (
    AnonymousSummary,
    anonymous_line,
    anonymous_summary,
    check_anonymous,
    lists_anonymous,
)
from kg_mcp.tools.pages import Listing, Paged, with_more
from kg_mcp.tools.follow_walk import (
    EDGES_PER_FRONTIER_ENTITY,
    MAX_DEPTH,
    Branch,
    Step,
    Walk,
    intersect,
    left_out_ends,
    walk_steps,
)

MAX_HOPS = 6
MAX_BRANCHES = 5
MAX_STARTS = 50
MAX_EXCLUDE = 50
LEFT_OUT_SHOWN = 20  # end entities left out that the output names; the count is always given
EXCLUDE_THROUGH = ("start", "none")
DEFAULT_SHOWN = 200  # end entities listed by default: long answer lists fit, the limit can lower it


class ReachedEntity(BaseModel):
    entity: TermOut
    paths: int  # distinct paths (over all branches) that end at the entity


class BranchOut(BaseModel):
    starts: list[TermOut]
    path: list[str]
    sizes: list[int]  # distinct entities reached after each hop walked (paths through left-out entities dropped)
    # Per hop, for a transitive step (rel+, rel*): the entities first reached at each depth ([] for other steps).
    depths: list[list[int]] = []
    depth_cut: list[int] = []  # transitive hops (1-based) that stopped at the depth bound with more below
    # The same sizes had the paths through left-out entities been kept; shorter than sizes when
    # those paths grew past the budget (from that hop on they were not counted).
    sizes_before_leave_out: list[int] = []
    without: list[int] = []  # per hop walked: the entities it walked from that had no such edge
    cut_at_hop: int = 0  # the hop (1-based) whose frontier was too big; 0: walked to the end
    cut_edges: int = 0  # edges that hop reached before it was stopped (a lower bound)
    checked_backwards: bool = False  # too big forwards: the end entities of the others were walked back


class FollowResult(Paged):
    branches: list[BranchOut]
    complete: bool  # every branch walked (or checked) to its end
    total: int  # end entities, named and anonymous
    shown: int  # end entities on this page (offset: those of the pages before)
    truncated: bool  # more end entities are listed on the next pages (next_cursor)
    entities: list[ReachedEntity] = []
    exclude_through: str = "start"  # "start": paths back through a path's start entities are left out
    excluded: list[TermOut] = []  # entities named in exclude: paths through them are left out too
    # End entities reached only by paths through left-out entities: their number, the first
    # LEFT_OUT_SHOWN of them (paths: how many such paths), and whether they could be counted.
    left_out_total: int = 0
    left_out: list[ReachedEntity] = []
    left_out_counted: bool = True
    anonymous: AnonymousSummary | None = None  # the anonymous end entities, summed up instead of listed


_ENTITIES = TypeAdapter(list[ReachedEntity])


def follow(
    backend: Backend,
    settings: Settings,
    entity: str = "",
    path: list[str] | None = None,
    entities: list[str] | None = None,
    paths: list[list[str]] | None = None,
    limit: int = 0,
    exclude_through: str = "start",
    exclude: list[str] | None = None,
    anonymous: str = "summary",
    cursor: str = "",
) -> ToolOutput:
    shown_cap = _limit(limit, settings)
    check_anonymous(anonymous)
    specs = _branch_specs(entity, path or [], entities or [], paths or [])
    excluded = _excluded(backend, exclude_through, exclude or [])
    listing = Listing.open("follow", _arguments(entity, path, entities, paths, exclude_through, exclude, anonymous),
                           cursor, backend, settings)
    branches = []
    for starts_refs, path_refs in specs:
        starts = list(dict.fromkeys(backend.resolve_entity(ref, check=False) for ref in starts_refs))
        steps = _resolve_steps(backend, path_refs)
        drop = frozenset(excluded) | (frozenset(starts) if exclude_through == "start" else frozenset())
        branches.append(Branch(starts, steps, Walk(), drop))
    frontier_cap = settings.search_p
    # One deadline for the whole walk (each query also has its own): no new hop starts past it.
    # The call's own deadline (kg_mcp.calls.deadline) ends it sooner when less of it is left.
    left = call_deadline.left()
    deadline = time.monotonic() + (settings.timeout_s if left is None else min(settings.timeout_s, left))
    for branch in branches:
        start = {s: Counter({s: 1}) for s in branch.starts}
        branch.walk = walk_steps(backend, start, branch.steps, frontier_cap, deadline, branch.drop)
    ends, every = intersect(backend, branches, frontier_cap, deadline)
    if not ends and all(not b.walk.sizes or b.walk.sizes[0] == 0 for b in branches) and not every:
        for branch, (refs, _) in zip(branches, specs):
            for node, ref in zip(branch.starts, refs):
                backend.require(node, ref)
    left_out = left_out_ends(branches, ends, every)
    listed = lists_anonymous(anonymous, [s for b in branches for s in b.starts])
    return _render(backend, settings, listing, branches, ends, left_out, excluded, exclude_through, shown_cap, listed)


def _arguments(entity, path, entities, paths, exclude_through, exclude, anonymous) -> dict:
    """The call's arguments as a model writes them (defaults left out): what its cursor is for."""
    given = {"entity": entity, "path": path, "entities": entities, "paths": paths,
             "exclude_through": exclude_through if exclude_through != "start" else None, "exclude": exclude,
             "anonymous": anonymous if anonymous != "summary" else None}
    return {k: v for k, v in given.items() if v}


def _limit(limit: int, settings: Settings) -> int:
    if limit == 0:
        return DEFAULT_SHOWN
    if not 1 <= limit <= settings.search_p:
        raise InvalidInput(f"limit must be between 1 and {settings.search_p} (0: the default, {DEFAULT_SHOWN}); got {limit}.")
    return limit


def _excluded(backend: Backend, exclude_through: str, refs: list[str]) -> list[ox.NamedNode]:
    """The entities named in exclude, each checked (a misspelt one would silently leave out nothing)."""
    if exclude_through not in EXCLUDE_THROUGH:
        raise InvalidInput(
            f"exclude_through must be \"start\" or \"none\"; got {quoted(str(exclude_through))}.",
            "\"start\" (the default) leaves out paths back through the start entity; \"none\" keeps every path.",
        )
    if len(refs) > MAX_EXCLUDE:
        raise InvalidInput(f"At most {MAX_EXCLUDE} entities in exclude; got {len(refs)}.")
    nodes = []
    for ref in refs:
        try:
            nodes.append(backend.resolve_entity(ref))
        except KGError as error:
            error.message = f"exclude: {error.message}"
            raise
    return list(dict.fromkeys(nodes))


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


def _resolve_steps(backend: Backend, refs: list[str]) -> list[Step]:
    if len(refs) > MAX_HOPS:
        raise InvalidInput(f"At most {MAX_HOPS} relations in a path; got {len(refs)}.", "Split the walk into two calls.")
    steps = []
    for hop, ref in enumerate(refs, 1):
        # rel+ and rel*, as in SPARQL property paths: the step repeated (kg_mcp.tools.follow_walk.closure)
        repeat = ref.strip()[-1] if isinstance(ref, str) and ref.strip().endswith(("+", "*")) else ""
        try:
            predicate, direction = backend.resolve_relation(ref.strip()[:-1] if repeat else ref)
        except KGError as error:
            error.message = f"Hop {hop} of the path: {error.message}"
            raise
        name = backend.vocab.compact(predicate)
        name = name if direction is Direction.OUTGOING else f"~{name}"
        steps.append(Step(predicate, direction, name + repeat, repeat))
    return steps


def _render(
    backend: Backend,
    settings: Settings,
    listing: Listing,
    branches: list[Branch],
    ends: dict[Term, int],
    left_out: dict[Term, int] | None,
    excluded: list[ox.NamedNode],
    exclude_through: str,
    shown_cap: int,
    listed: bool,
) -> ToolOutput:
    namer = Namer(backend, settings, [s for b in branches for s in b.starts] + excluded)
    namer.add(t for b in branches for t, _ in b.walk.heaviest)
    unchecked = [b for b in branches if b.walk.cut_at_hop and not b.checked_backwards]
    complete = not unchecked
    blank = [t for t in ends if isinstance(t, ox.BlankNode)]
    listed = listed or len(blank) == len(ends)  # a walk that reaches only anonymous nodes is about them
    # Named ends first, most paths first (then by name: the order holds from page to page); blank
    # nodes after them, when they are listed.
    order = sorted((t for t in ends if listed or not isinstance(t, ox.BlankNode)),
                   key=lambda t: (isinstance(t, ox.BlankNode), -ends[t], _sort_text(namer, t), str(t))) if complete else []
    page = order[listing.offset : listing.offset + shown_cap]
    namer.add(page)
    left_order = sorted(left_out or {}, key=lambda t: (isinstance(t, ox.BlankNode), -left_out[t], _sort_text(namer, t))) if complete else []
    namer.add(left_order[:LEFT_OUT_SHOWN])
    through = _through(branches, excluded)

    lines = [_branch_line(namer, b, through) for b in branches]
    if unchecked:
        lines += [_cut_text(namer, b, settings.search_p) for b in unchecked]
    elif not ends:
        lines.append(_empty_text(backend, namer, branches, through))
    if complete and any(b.drop for b in branches):
        lines += _left_out_lines(namer, settings, left_out, left_order, through, excluded, exclude_through)
    anonymous = None
    if complete and blank and not listed:
        call = listing.call(anonymous="list", cursor=None)
        if listing.offset == 0:
            anonymous = anonymous_summary(backend, namer.id, blank, len(blank), call)
            lines.append(anonymous_line("anonymous end entities", anonymous))
        else:
            anonymous = AnonymousSummary(total=len(blank), call=call)
    head = f"follow: {plural(len(ends), 'entity')} reached" if complete else "follow: stopped"
    if len(branches) > 1 and complete:
        head += f" by all {len(branches)} paths"
    if anonymous is not None:
        head += f" ({len(order):,} named, listed; {len(blank):,} anonymous, " + (
            "summed up below)" if listing.offset == 0 else "summed up on the first page)")
    text = head + ".\n" + "\n".join(lines)
    # The paths column only where it tells something: some entity on the page is reached by several.
    counted = any(ends[t] > 1 for t in page)
    rows = [(namer.value_text(t), namer.label(t), *([str(ends[t])] if counted else [])) for t in page]
    text_rows = table(("entity", "label", "paths") if counted else ("entity", "label"), rows, settings).split("\n")
    data = FollowResult(
        branches=[
            BranchOut(
                starts=[namer.out(s) for s in b.starts],
                path=[s.name for s in b.steps],
                sizes=b.walk.sizes,
                depths=[b.walk.depths.get(hop, []) for hop in range(1, len(b.walk.sizes) + 1)],
                depth_cut=b.walk.depth_cut,
                sizes_before_leave_out=b.walk.sizes_all,
                without=[n for _, n in b.walk.without],
                cut_at_hop=b.walk.cut_at_hop,
                cut_edges=b.walk.cut_edges,
                checked_backwards=b.checked_backwards,
            )
            for b in branches
        ],
        complete=complete,
        total=len(ends) if complete else 0,
        shown=0,
        truncated=False,
        offset=listing.offset,
        exclude_through=exclude_through,
        excluded=[namer.out(e) for e in excluded],
        left_out_total=len(left_order),
        left_out=[ReachedEntity(entity=namer.out(t), paths=left_out[t]) for t in left_order[:LEFT_OUT_SHOWN]],
        left_out_counted=not complete or left_out is not None,
        anonymous=anonymous,
    )
    json_rows = [{"entity": namer.term(t), "paths": ends[t]} for t in page]
    fits = listing.fit(text_rows[2:], json_rows, text_used=len(text) + len(text_rows[0]) + len(text_rows[1]) + 2,
                       json_used=len(data.model_dump_json()))
    shown = page[:fits]
    token, more = listing.more(len(shown), len(order))
    if shown:
        text += "\n" + "\n".join(text_rows[: 2 + len(shown)])
    data.entities = _ENTITIES.validate_python(json_rows[: len(shown)])  # at once, in pydantic's compiled core
    data.shown, data.next_cursor, data.truncated = len(shown), token, token is not None
    return ToolOutput(with_more(capped(text, settings, "Pass a smaller limit."), more), data)


def _through(branches: list[Branch], excluded: list[ox.NamedNode]) -> str:
    """Which paths are left out, in words: "back through the start", "through the excluded entities"..."""
    starts = any(set(b.starts) & b.drop for b in branches)
    own = "a path's own start entity" if len(branches) > 1 else ("a start entity" if len(branches[0].starts) > 1 else "the start")
    if starts and excluded:
        return f"back through {own} or through an excluded entity"
    return f"back through {own}" if starts else "through an excluded entity"


def _branch_line(namer: Namer, b: Branch, through: str) -> str:
    starts = ", ".join(namer.heading(s) for s in b.starts[:5]) + (f" and {len(b.starts) - 5} more" if len(b.starts) > 5 else "")
    walked = " → ".join(s.name for s in b.steps)
    if b.checked_backwards:
        return f"- {starts} → {walked}: too big to walk forwards; checked backwards from the other paths' entities"
    line = f"- {starts} → {walked}: entities after each hop " + " → ".join(f"{n:,}" for n in b.walk.sizes)
    line += _depths_text(b)
    if b.walk.cut_at_hop:
        return line + _without_text(b)
    if b.walk.aside_lost_at:
        line += f" (paths {through} not counted from hop {b.walk.aside_lost_at}: too many)"
    elif b.walk.sizes_all != b.walk.sizes:
        before = " → ".join(f"{n:,}" for n in b.walk.sizes_all)
        line += f" (before leaving out the paths {through}: {before})"
    return line + _without_text(b)


def _without_text(b: Branch) -> str:
    """Per hop, the entities walked from that had no such edge, so that a gap in the KG does not
    read as a whole answer: "; at hop 3, 8 of the 9 entities had no has_genre edge"."""
    parts = []
    for hop, ((walked, without), size) in enumerate(zip(b.walk.without, b.walk.sizes), 1):
        if without and size:  # none reached at all: the empty walk's own line says where and why
            step = b.steps[hop - 1]
            parts.append(f"at hop {hop}, {without:,} of the {walked:,} entities had no {step.name.rstrip('+*')} edge")
    return "; " + "; ".join(parts) if parts else ""


def _depths_text(b: Branch) -> str:
    """The entities each transitive step first reached at each depth: " (rdfs:subClassOf+ by depth: 3, 7, 6)"."""
    parts = []
    for hop, depths in sorted(b.walk.depths.items()):
        if hop > len(b.walk.sizes):
            continue
        cut = f"; stopped at depth {MAX_DEPTH}, there may be more below" if hop in b.walk.depth_cut else ""
        if len(depths) == 1 and len(b.steps) == 1 and not cut:
            continue  # all at depth 1: the hop's size says it
        counts = ", ".join(f"{n:,}" for n in depths) or "no"
        where = f" at depths 1 to {len(depths)}" if len(depths) > 1 else " at depth 1" if depths else ""
        parts.append(f"{b.steps[hop - 1].name}: {counts} new entities{where}{cut}")
    return f" ({'; '.join(parts)})" if parts else ""


def _left_out_lines(
    namer: Namer,
    settings: Settings,
    left_out: dict[Term, int] | None,
    order: list[Term],
    through: str,
    excluded: list[ox.NamedNode],
    exclude_through: str,
) -> list[str]:
    """The end entities reached only by left-out paths, named (up to LEFT_OUT_SHOWN) and counted."""
    if left_out is None:
        return [f"End entities reached only by paths {through} were not counted (too many)."]
    if not order:
        return []
    starts = exclude_through == "start"
    keep = (
        'Pass exclude_through="none" and no exclude to keep them.' if starts and excluded
        else 'Pass exclude_through="none" to keep them.' if starts else "Call without exclude to keep them."
    )
    shown = order[:LEFT_OUT_SHOWN]
    names = ", ".join(cell(namer.heading(t) if not isinstance(t, ox.Literal) else namer.value_text(t), settings) for t in shown)
    more = f" and {len(order) - len(shown):,} more" if len(order) > len(shown) else ""
    return [f"Left out: {plural(len(order), 'end entity')} reached only by paths {through}: {names}{more}. {keep}"]


def _cut_text(namer: Namer, b: Branch, frontier_cap: int) -> str:
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


def _empty_text(backend: Backend, namer: Namer, branches: list[Branch], through: str) -> str:
    """Where a walk ran dry, and the relations one entity there does have (the usual fix)."""
    for b in branches:
        if 0 in b.walk.sizes:
            hop = b.walk.sizes.index(0) + 1
            if len(b.walk.sizes_all) >= hop and b.walk.sizes_all[hop - 1]:
                return f"No entity at hop {hop} ({b.steps[hop - 1].name}) other than by paths {through}."
            text = f"No entity at hop {hop} ({b.steps[hop - 1].name}): the entities reached before it have no such edge."
            sample = b.walk.dead_end
            if sample is not None:
                counts = backend.relations_around(sample)
                namer.add([sample])
                names = [(namer.id(c.predicate) if c.direction is Direction.OUTGOING else f"~{namer.id(c.predicate)}") for c in counts]
                have = ", ".join(names[:30]) + (f" and {len(names) - 30} more" if len(names) > 30 else "")
                text += f" {namer.heading(sample)} has: {have or 'no relations'} (~ = walked backwards)."
            return text
    return "No entity is reached by every path."


def _sort_text(namer: Namer, term: Term) -> str:
    return (namer.label(term) or namer.value_text(term)).lower()

