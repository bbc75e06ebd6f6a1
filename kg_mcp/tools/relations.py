"""R2-KG's two helpers: `get_relations` lists the relations around an entity, `explore_kg` walks them.

A relation written `~rel` is `rel` walked backwards: the entities that have `rel` pointing at
the focus entity.
"""

from __future__ import annotations

from pydantic import BaseModel

from kg_mcp.backends import Backend, Direction
from kg_mcp.errors import InvalidInput
from kg_mcp.settings import Settings
from kg_mcp.tools._render import Namer, TermOut, ToolOutput, capped, capped_table, plural, table

MAX_RELATIONS = 30


def relation_name(namer: Namer, predicate, direction: Direction) -> str:
    name = namer.id(predicate)
    return name if direction is Direction.OUTGOING else f"~{name}"


class RelationRow(BaseModel):
    relation: str
    label: str | None
    triples: int
    exact: bool = True  # False: counted among a hub's first edges only, so "at least"


class RelationsResult(BaseModel):
    entity: TermOut
    relations: list[RelationRow]  # as many as the markdown shows
    total: int  # relations around the entity
    shown: int  # relations listed here: fewer than total when the output was cut


def get_relations(backend: Backend, settings: Settings, entity: str) -> ToolOutput:
    node = backend.resolve_entity(entity, check=False)
    counts = backend.relations_around(node)
    if not counts:
        backend.require(node, entity)
    namer = Namer(backend, settings, [node, *(c.predicate for c in counts)])
    # Rows as plain data, validated once with the result in pydantic's compiled core.
    rows = [
        {
            "relation": relation_name(namer, c.predicate, c.direction),
            "label": namer.predicate_label(c.predicate),
            "triples": c.count,
            "exact": c.exact,
        }
        for c in counts
    ]
    n_out = sum(1 for c in counts if c.direction is Direction.OUTGOING)
    head = f"relations of {namer.heading(node)}: {n_out} outgoing, {len(rows) - n_out} incoming (~ = walked backwards)."
    foot = ""
    if not all(c.exact for c in counts):
        foot = f"\nN+: a hub, counted among its first {backend.count_cap:,} edges in that direction."
    text, shown = capped_table(
        head,
        ("relation", "label", "triples"),
        [(r["relation"], r["label"], str(r["triples"]) if r["exact"] else f"{r['triples']}+") for r in rows],
        settings,
        "Use explore_kg on the relations you need.",
        foot,
    )
    data = RelationsResult.model_validate(
        {"entity": namer.term(node), "relations": rows[:shown], "total": len(rows), "shown": shown}
    )
    return ToolOutput(text, data)


class ExploredRelation(BaseModel):
    relation: str
    label: str | None
    total: int
    shown: int
    neighbours: list[TermOut]


class ExploreResult(BaseModel):
    entity: TermOut
    relations: list[ExploredRelation]


def explore_kg(
    backend: Backend, settings: Settings, entity: str = "", relations: list[str] | None = None,
    entities: list[str] | None = None, limit: int = 0,
) -> ToolOutput:
    """One entity: R2-KG's output. Several (`entities`): one table for all (see search_batch)."""
    refs = ([entity] if entity else []) + list(entities or [])
    if not refs:
        raise InvalidInput("No entity given.", "Pass entity (one id or label) or entities (a list of them).")
    relations = relations or []
    if not relations:
        raise InvalidInput("relations is empty.", "Pass one or more relations from get_relations, e.g. ['directed_by'].")
    if len(relations) > MAX_RELATIONS:
        raise InvalidInput(f"At most {MAX_RELATIONS} relations at once; got {len(relations)}.")
    if not 0 <= limit <= settings.search_p:
        raise InvalidInput(f"limit must be between 1 and {settings.search_p}, or 0 for the default; got {limit}.")
    chosen = list(dict.fromkeys(backend.resolve_relation(r) for r in relations))
    if len(refs) > 1:
        from kg_mcp.tools.search_batch import explore_many

        return explore_many(backend, settings, refs, chosen, limit)
    entity = refs[0]
    node = backend.resolve_entity(entity, check=False)
    limit = limit or settings.explore_limit
    walked = []
    for predicate, direction in chosen:
        found = backend.neighbours(node, direction, [predicate], limit + 1)
        total = len(found) if len(found) <= limit else backend.count_neighbours(node, direction, [predicate])
        walked.append((predicate, direction, [n.value for n in found[:limit]], total))
    if not any(total for *_, total in walked):
        backend.require(node, entity)
    namer = Namer(backend, settings, [node])
    namer.add(t for predicate, _, values, _ in walked for t in (predicate, *values))
    results, md_rows, notes = [], [], []
    for predicate, direction, values, total in walked:
        name = relation_name(namer, predicate, direction)
        results.append(
            ExploredRelation(
                relation=name,
                label=namer.predicate_label(predicate),
                total=total,
                shown=len(values),
                neighbours=[namer.out(v) for v in values],
            )
        )
        md_rows += [(name, namer.value_text(v), namer.label(v)) for v in values]
        if total == 0:
            notes.append(f"{name}: no triples")
        elif total > len(values):
            notes.append(f"{name}: shown {len(values)} of {total}{'+' if total >= backend.count_cap else ''}")
    total_rows = sum(r.total for r in results)
    text = f"explore_kg {namer.heading(node)}: {plural(total_rows, 'triple')}"
    if notes:
        text += " (" + "; ".join(notes) + ")"
    text += ".\n" + table(("relation", "entity", "label"), md_rows, settings)
    if any(r.total > r.shown for r in results):
        text += "\nSome relations were cut; explore fewer relations or narrow the question."
    text = capped(text, settings, "Explore fewer relations at once.")
    return ToolOutput(text, ExploreResult(entity=namer.out(node), relations=results))
