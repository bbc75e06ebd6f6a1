"""`search`: Search-on-Graph's one-hop neighbourhood, in one direction, optionally filtered.

Small neighbourhoods come back whole as `property | propertyLabel | value | valueLabel` rows.
Above k rows without a filter, only the distinct properties and their row counts come back, so
the model can ask again with a filter; a filtered answer is cut at p rows and says so.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from kg_mcp.backends import Backend, Direction, Neighbour
from kg_mcp.errors import InvalidInput
from kg_mcp.settings import Settings
from kg_mcp.tools._render import Namer, TermOut, ToolOutput, capped, capped_table, plural, table

MAX_FILTERS = 50


class QualifierRow(BaseModel):
    property: str
    propertyLabel: str | None
    value: TermOut


class SearchRow(BaseModel):
    property: str
    propertyLabel: str | None
    value: TermOut
    qualifiers: list[QualifierRow] = []


class PropertyCount(BaseModel):
    property: str
    propertyLabel: str | None
    rows: int
    exact: bool = True  # False: counted among a hub's first edges only, so "at least"


class SearchResult(BaseModel):
    entity: TermOut
    direction: Literal["outgoing", "incoming"]
    view: Literal["rows", "properties"]
    total: int
    total_exact: bool = True  # False: `total` is a lower bound (a hub counted only in part)
    shown: int
    truncated: bool
    rows: list[SearchRow] = []
    properties: list[PropertyCount] = []  # the property view: as many as the markdown shows
    properties_total: int = 0  # distinct properties in the property view
    properties_shown: int = 0  # properties listed: fewer than properties_total when the output was cut


def search(
    backend: Backend,
    settings: Settings,
    entity: str,
    direction: str = "outgoing",
    properties_to_filter_for: list[str] | None = None,
) -> ToolOutput:
    node = backend.resolve_entity(entity, check=False)
    try:
        way = Direction(direction)
    except ValueError:
        raise InvalidInput(f"direction must be 'outgoing' or 'incoming', not {direction!r}.") from None
    if properties_to_filter_for:
        return _filtered(backend, settings, node, way, properties_to_filter_for, entity)
    known = backend.known_degree(node, way)
    if known is not None and known > settings.search_k:  # a recorded hub: no need to probe
        return _property_view(backend, settings, node, way)
    rows = backend.neighbours(node, way, None, settings.search_k + 1)
    if len(rows) > settings.search_k:
        return _property_view(backend, settings, node, way)
    if not rows:
        backend.require(node, entity)
    return _rows_view(backend, settings, node, way, rows, total=len(rows), filtered=False)


def _filtered(backend: Backend, settings: Settings, node, way: Direction, wanted: list[str], ref: str) -> ToolOutput:
    if len(wanted) > MAX_FILTERS:
        raise InvalidInput(f"At most {MAX_FILTERS} properties can be filtered for at once; got {len(wanted)}.")
    predicates = []
    for ref in wanted:
        if ref.strip().startswith("~"):
            raise InvalidInput(
                f"{ref!r}: search takes plain properties; the direction argument picks incoming edges.",
                f"Pass {ref.strip()[1:]!r} with direction='incoming'.",
            )
        predicate, _ = backend.resolve_relation(ref)
        predicates.append(predicate)
    predicates = list(dict.fromkeys(predicates))
    rows = backend.neighbours(node, way, predicates, settings.search_p + 1)
    total = len(rows)
    if total > settings.search_p:
        total = backend.count_neighbours(node, way, predicates)
        rows = rows[: settings.search_p]
    if not rows:
        return _no_rows(backend, settings, node, way, predicates, ref)
    exact = total < backend.count_cap
    return _rows_view(backend, settings, node, way, rows, total=total, filtered=True, exact=exact)


def _rows_view(
    backend: Backend,
    settings: Settings,
    node,
    way: Direction,
    rows: list[Neighbour],
    *,
    total: int,
    filtered: bool,
    exact: bool = True,
) -> ToolOutput:
    namer = Namer(backend, settings, [node])
    namer.add(t for r in rows for t in (r.predicate, r.value))
    namer.add(t for r in rows for qual in r.qualifiers for t in (qual.predicate, qual.value))
    out_rows = [
        {
            "property": namer.id(r.predicate),
            "propertyLabel": namer.predicate_label(r.predicate),
            "value": namer.term(r.value),
            "qualifiers": [
                {"property": namer.id(q.predicate), "propertyLabel": namer.predicate_label(q.predicate), "value": namer.term(q.value)}
                for q in r.qualifiers
            ],
        }
        for r in rows
    ]
    truncated = total > len(rows)
    head = f"search {namer.heading(node)}, {way.value}: {'' if exact else 'at least '}{plural(total, 'row')}"
    if truncated:
        head += f", showing the first {len(rows)} (cut). Filter for fewer properties to see the rest."
    elif not filtered and not rows:
        head += f". The entity has no {way.value} edges; try the other direction."
    md_rows = []
    for r, o in zip(rows, out_rows):
        value_label = o["value"]["label"] or ""
        if r.qualifiers:
            # Qualifiers ride along in the label column: "St John's College [start time: 1971-01-01]".
            parts = "; ".join(
                f"{namer.predicate_label(qual.predicate)}: {namer.label(qual.value) or namer.value_text(qual.value)}"
                for qual in r.qualifiers
            )
            value_label = f"{value_label} [{parts}]".strip()
        md_rows.append((o["property"], o["propertyLabel"], namer.value_text(r.value), value_label))
    text = head + "\n" + table(("property", "propertyLabel", "value", "valueLabel"), md_rows, settings)
    text = capped(text, settings, "Filter for fewer properties to see less at once.")
    data = SearchResult.model_validate(
        {
            "entity": namer.term(node),
            "direction": way.value,
            "view": "rows",
            "total": total,
            "shown": len(rows),
            "truncated": truncated,
            "rows": out_rows,
            "total_exact": exact,
        }
    )
    return ToolOutput(text, data)


def _property_view(backend: Backend, settings: Settings, node, way: Direction) -> ToolOutput:
    counts = backend.relation_counts(node, way)
    namer = Namer(backend, settings, [node, *(c.predicate for c in counts)])
    total = sum(c.count for c in counts)
    exact = all(c.exact for c in counts)
    props = [
        PropertyCount(property=namer.id(c.predicate), propertyLabel=namer.predicate_label(c.predicate), rows=c.count, exact=c.exact)
        for c in counts
    ]
    size = plural(total, "row") if exact else f"at least {total:,} rows (counted among the first {backend.count_cap:,})"
    head = (
        f"search {namer.heading(node)}, {way.value}: {size}, more than {settings.search_k}; "
        f"showing its {plural(len(props), 'property')} instead. Call search again with "
        "properties_to_filter_for set to the ones you need."
    )
    text, shown = capped_table(
        head,
        ("property", "propertyLabel", "rows"),
        [(p.property, p.propertyLabel, f"{p.rows}" if p.exact else f"{p.rows}+") for p in props],
        settings,
        "Filter for the properties you need.",
    )
    data = SearchResult(
        entity=namer.out(node),
        direction=way.value,
        view="properties",
        total=total,
        total_exact=exact,
        shown=0,
        truncated=True,
        properties=props[:shown],
        properties_total=len(props),
        properties_shown=shown,
    )
    return ToolOutput(text, data)


def _no_rows(backend: Backend, settings: Settings, node, way: Direction, predicates, ref: str) -> ToolOutput:
    """Zero rows for a filter: say which properties the entity does have in that direction."""
    counts = backend.relation_counts(node, way)
    if not counts:
        backend.require(node, ref)
    namer = Namer(backend, settings, [node, *predicates, *(c.predicate for c in counts)])
    asked = ", ".join(namer.id(p) for p in predicates)
    if counts:
        have = ", ".join(f"{namer.id(c.predicate)} ({namer.predicate_label(c.predicate)})" for c in counts[:60])
        more = f" and {len(counts) - 60} more" if len(counts) > 60 else ""
        hint = f"Its {way.value} properties are: {have}{more}."
    else:
        hint = f"It has no {way.value} edges at all; try the other direction."
    text = f"search {namer.heading(node)}, {way.value}: 0 rows for {asked}. {hint}"
    data = SearchResult(entity=namer.out(node), direction=way.value, view="rows", total=0, shown=0, truncated=False)
    return ToolOutput(capped(text, settings, "Filter for fewer properties."), data)
