"""Batched `search` and `explore_kg`: several entities, one call, one table with an entity column.

One row budget serves the whole call (the `limit` asked for, else p rows): entities are read in
the order given until it is spent, and every cut is said, per entity and overall. Without a
filter, an entity whose neighbourhood is larger than k rows gets a one-line property summary
instead of rows, as a single search would give its property-only view.
"""

from __future__ import annotations

import pyoxigraph as ox
from pydantic import BaseModel

from kg_mcp.calls import deadline, progress
from kg_mcp.backends import Backend, Direction, Neighbour
from kg_mcp.errors import InvalidInput
from kg_mcp.settings import Settings
from kg_mcp.tools._render import Namer, TermOut, ToolOutput, capped, plural, table
from kg_mcp.tools.relations import ExploredRelation, relation_name

MAX_ENTITIES = 200  # every frontier of a MetaQA 3-hop gold walk fits in one call
SUMMARY_PROPERTIES = 15  # properties named in an entity's one-line summary


class EntityPart(BaseModel):
    entity: TermOut
    total: int  # rows (or triples) the entity has for the call
    shown: int
    view: str = "rows"  # rows, properties (too large without a filter) or unknown (not in the KG)


class BatchRow(BaseModel):
    entity: str
    property: str
    value: TermOut


class BatchSearchResult(BaseModel):
    direction: str
    entities: list[EntityPart]
    total: int
    shown: int
    truncated: bool
    rows: list[BatchRow] = []


def _nodes(backend: Backend, refs: list[str]) -> list[tuple[str, ox.NamedNode]]:
    if len(refs) > MAX_ENTITIES:
        raise InvalidInput(f"At most {MAX_ENTITIES} entities at once; got {len(refs)}.", "Split them over several calls.")
    seen: dict[ox.NamedNode, str] = {}
    for ref in refs:
        deadline.check()
        seen.setdefault(backend.resolve_entity(ref, check=False), ref)
    return [(ref, node) for node, ref in seen.items()]


def _in_order(rows: list[Neighbour]) -> list[Neighbour]:
    # Engines return rows in their own index order; one order makes a batch read (and cut) the
    # same on every engine, and keeps an entity's rows of one property together. Blank nodes come
    # last: a cut never leaves out a named value for them.
    return sorted(rows, key=lambda r: (isinstance(r.value, ox.BlankNode), str(r.predicate), str(r.value)))


def search_many(
    backend: Backend, settings: Settings, refs: list[str], way: Direction, predicates: list, row_limit: int
) -> ToolOutput:
    from kg_mcp.tools.search import value_label

    nodes = _nodes(backend, refs)
    budget = row_limit or settings.search_p
    parts: list[tuple[ox.NamedNode, str, int, list[Neighbour]]] = []  # node, view, total, rows
    for done, (ref, node) in enumerate(nodes):
        deadline.check()
        progress.step(done, len(nodes), "entities searched")
        left = budget - sum(len(p[3]) for p in parts)
        if predicates:
            found = _in_order(backend.neighbours(node, way, predicates, left + 1) if left > 0 else [])
            complete = left > 0 and len(found) <= left
            total = len(found) if complete else backend.count_neighbours(node, way, predicates)
            parts.append((node, "rows", total, found[: max(left, 0)]))
            continue
        found = _in_order(backend.neighbours(node, way, None, settings.search_k + 1))
        if len(found) > settings.search_k:
            parts.append((node, "properties", backend.count_neighbours(node, way, None), []))
        else:
            parts.append((node, "rows", len(found), found[: max(left, 0)]))
    for i, (node, view, total, rows) in enumerate(parts):
        if total == 0 and not backend.exists(node):
            parts[i] = (node, "unknown", 0, [])

    namer = Namer(backend, settings, [node for _, node in nodes])
    namer.add(t for *_, rows in parts for r in rows for t in (r.predicate, r.value))
    namer.add(t for *_, rows in parts for r in rows for q in r.qualifiers for t in (q.predicate, q.value))
    namer.add(predicates)
    one_property = len(predicates) == 1
    headers = ("entity", "value", "valueLabel") if one_property else ("entity", "property", "value", "valueLabel")
    # (an empty entity cell: the entity of the row above)
    md_rows, out_rows, notes, used, labelled, empty = [], [], [], {}, set(), []
    for node, view, total, rows in parts:
        entity_id = namer.id(node)
        for n, r in enumerate(rows):
            used[r.predicate] = None
            # Said once: the entity on the first of its rows (they follow one another), a value's
            # plain label the first time the value appears.
            label = value_label(namer, r) if r.qualifiers or r.value not in labelled else ""
            labelled.add(r.value)
            cells = (entity_id if n == 0 else "", namer.value_text(r.value), label)
            md_rows.append(cells if one_property else (cells[0], namer.id(r.predicate), *cells[1:]))
            out_rows.append(BatchRow(entity=entity_id, property=namer.id(r.predicate), value=namer.out(r.value)))
        if view == "unknown":
            notes.append(f"{entity_id}: not in the KG (look it up with find_entities)")
        elif view == "properties":
            notes.append(_summary(backend, namer, node, way, total, settings))
        elif total > len(rows):
            notes.append(f"{entity_id}: shown {len(rows)} of {total}{'+' if total >= backend.count_cap else ''} rows")
        elif total == 0:
            empty.append(entity_id)
    if empty:
        notes.append(f"0 rows: {', '.join(empty)}")
    total_rows = sum(p[2] for p in parts if p[1] == "rows")
    shown = len(md_rows)
    wanted = f", properties {', '.join(_property_name(namer, p) for p in predicates)}" if predicates else ""
    text = f"search {plural(len(nodes), 'entity')}, {way.value}{wanted}: {plural(total_rows, 'row')}"
    if shown < total_rows:
        why = f"limit {row_limit}" if row_limit else f"at most {budget} rows a call"
        text += f", showing {shown} ({why}; ask for fewer entities or properties to see the rest)"
    text += "."
    legend = [_property_name(namer, p) for p in used if not predicates and _has_own_label(namer, p)]
    if legend:
        text += " Properties: " + ", ".join(legend) + "."
    if md_rows:
        if any(not cells[0] or not cells[-1] for cells in md_rows):
            text += " Blank entity: as above; labels are given once."
        text += "\n" + table(headers, md_rows, settings)
    if notes:
        text += "\n" + "\n".join(f"- {n}" for n in notes)
    text = capped(text, settings, "Ask for fewer entities or properties.")
    data = BatchSearchResult(
        direction=way.value,
        entities=[EntityPart(entity=namer.out(node), total=total, shown=len(rows), view=view) for node, view, total, rows in parts],
        total=total_rows,
        shown=shown,
        truncated=shown < total_rows or any(p[1] == "properties" for p in parts),
        rows=out_rows,
    )
    return ToolOutput(text, data)


def _summary(backend: Backend, namer: Namer, node, way: Direction, total: int, settings: Settings) -> str:
    """A large neighbourhood in one line: its rows and its biggest properties (external ids counted apart)."""
    counts = backend.relation_counts(node, way)
    identifiers = backend.identifier_predicates([c.predicate for c in counts])
    namer.add(c.predicate for c in counts)
    listed = [c for c in counts if c.predicate not in identifiers]
    named = ", ".join(f"{_property_name(namer, c.predicate)} {c.count}" for c in listed[:SUMMARY_PROPERTIES])
    more = f" and {len(listed) - SUMMARY_PROPERTIES} more" if len(listed) > SUMMARY_PROPERTIES else ""
    ids = f"; {plural(len(identifiers), 'external identifier')}" if identifiers else ""
    return (
        f"{namer.heading(node)}: {plural(total, 'row')}{'+' if total >= backend.count_cap else ''}, more than "
        f"{settings.search_k}; properties: {named}{more}{ids}. Search it alone, or with a filter, for rows."
    )


def _property_name(namer: Namer, predicate) -> str:
    return f"{namer.id(predicate)} ({namer.predicate_label(predicate)})" if _has_own_label(namer, predicate) else namer.id(predicate)


def _has_own_label(namer: Namer, predicate) -> bool:
    """Whether the label says more than the id (wdt:P57 "director", not MetaQA's directed_by)."""
    label = namer.predicate_label(predicate)
    return label.replace(" ", "_").lower() not in namer.id(predicate).lower()


class EntityRelation(ExploredRelation):
    entity: TermOut  # whose relation this is


class BatchExploreResult(BaseModel):
    entities: list[TermOut]
    relations: list[EntityRelation]  # one per (entity, relation), in the table's order
    total: int
    shown: int


def explore_many(backend: Backend, settings: Settings, refs: list[str], chosen: list, row_limit: int = 0) -> ToolOutput:
    """explore_kg over several entities: `| entity | relation | neighbour | label |`, one budget for all."""
    nodes = _nodes(backend, refs)
    budget = row_limit or settings.explore_limit * len(nodes)
    walked = []  # (node, predicate, direction, values, total)
    for done, (_, node) in enumerate(nodes):
        progress.step(done, len(nodes), "entities explored")
        for predicate, direction in chosen:
            deadline.check()
            left = budget - sum(len(w[3]) for w in walked)
            found = backend.neighbours(node, direction, [predicate], left + 1) if left > 0 else []
            complete = left > 0 and len(found) <= left
            total = len(found) if complete else backend.count_neighbours(node, direction, [predicate])
            walked.append((node, predicate, direction, [n.value for n in found[: max(left, 0)]], total))
    namer = Namer(backend, settings, [node for _, node in nodes])
    namer.add(t for _, predicate, _, values, _ in walked for t in (predicate, *values))
    md_rows, results, notes = [], [], []
    for node, predicate, direction, values, total in walked:
        name = relation_name(namer, predicate, direction)
        entity_id = namer.id(node)
        md_rows += [(entity_id, name, namer.value_text(v), namer.label(v)) for v in values]
        results.append(
            EntityRelation(entity=namer.out(node), relation=name, label=namer.predicate_label(predicate), total=total,
                           shown=len(values), neighbours=[namer.out(v) for v in values])
        )
        if total > len(values):
            notes.append(f"{entity_id} {name}: shown {len(values)} of {total}")
    for ref, node in nodes:
        if not any(w[4] for w in walked if w[0] == node) and not backend.exists(node):
            notes.append(f"{namer.id(node)}: not in the KG (look it up with find_entities)")
    total = sum(w[4] for w in walked)
    text = f"explore_kg {plural(len(nodes), 'entity')}: {plural(total, 'triple')}"
    if len(md_rows) < total:
        text += f", showing {len(md_rows)} (ask for fewer entities or relations to see the rest)"
    text += ".\n" + table(("entity", "relation", "neighbour", "label"), md_rows, settings)
    if notes:
        text += "\n" + "\n".join(f"- {n}" for n in notes)
    text = capped(text, settings, "Explore fewer entities or relations at once.")
    data = BatchExploreResult(entities=[namer.out(n) for _, n in nodes], relations=results, total=total, shown=len(md_rows))
    return ToolOutput(text, data)
