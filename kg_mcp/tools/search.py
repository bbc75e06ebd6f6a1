"""`search`: Search-on-Graph's one-hop neighbourhood, in one direction, optionally filtered.

Small neighbourhoods come back whole as `property | propertyLabel | value | valueLabel` rows.
Above k rows without a filter, only the distinct properties and their row counts come back, so
the model can ask again with a filter; a filtered answer is cut at p rows and says so.
"""

from __future__ import annotations

from typing import Literal

import pyoxigraph as ox
from pydantic import BaseModel

from kg_mcp.backends import Backend, Direction, Neighbour
from kg_mcp.errors import InvalidInput
from kg_mcp.quoting import quoted
from kg_mcp.settings import Settings
from kg_mcp.tools._render import Namer, TermOut, ToolOutput, capped, capped_table, cut_text, plural, table

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
    identifier: bool = False  # an external identifier: summed up in one line of the text


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
    entity: str = "",
    direction: str = "outgoing",
    properties_to_filter_for: list[str] | None = None,
    limit: int = 0,
    entities: list[str] | None = None,
) -> ToolOutput:
    """One entity: Search-on-Graph's output. Several (`entities`): one table for all (see search_batch)."""
    refs = ([entity] if entity else []) + list(entities or [])
    if not refs:
        raise InvalidInput("No entity given.", "Pass entity (one id or label) or entities (a list of them).")
    way = parse_direction(direction)
    row_limit = check_limit(limit, settings)
    predicates = filter_predicates(backend, properties_to_filter_for or [])
    if len(refs) > 1:
        from kg_mcp.tools.search_batch import search_many

        return search_many(backend, settings, refs, way, predicates, row_limit)
    entity = refs[0]
    node = backend.resolve_entity(entity, check=False)
    if predicates:
        return _filtered(backend, settings, node, way, predicates, entity, row_limit)
    known = backend.known_degree(node, way)
    if known is not None and known > settings.search_k:  # a recorded hub: no need to probe
        return _property_view(backend, settings, node, way)
    rows = backend.neighbours(node, way, None, settings.search_k + 1)
    if len(rows) > settings.search_k:
        return _property_view(backend, settings, node, way)
    if not rows:
        backend.require(node, entity)
    total = len(rows)
    rows = sorted(rows, key=lambda r: isinstance(r.value, ox.BlankNode))  # a limit cuts blank nodes first
    return _rows_view(backend, settings, node, way, rows[: row_limit or total], total=total, filtered=False, limited=bool(row_limit))


def parse_direction(direction: str) -> Direction:
    try:
        return Direction(direction)
    except ValueError:
        raise InvalidInput(f"direction must be 'outgoing' or 'incoming', not {quoted(direction)}.") from None


def check_limit(limit: int, settings: Settings) -> int:
    """The row limit asked for (0: the defaults, k and p)."""
    if not 0 <= limit <= settings.search_p:
        raise InvalidInput(f"limit must be between 1 and {settings.search_p}, or 0 for the default; got {limit}.")
    return limit


def filter_predicates(backend: Backend, wanted: list[str]) -> list:
    if len(wanted) > MAX_FILTERS:
        raise InvalidInput(f"At most {MAX_FILTERS} properties can be filtered for at once; got {len(wanted)}.")
    predicates = []
    for ref in wanted:
        if ref.strip().startswith("~"):
            raise InvalidInput(
                f"{quoted(ref)}: search takes plain properties; the direction argument picks incoming edges.",
                f"Pass {quoted(ref.strip()[1:])} with direction='incoming'.",
            )
        predicate, _ = backend.resolve_relation(ref)
        predicates.append(predicate)
    return list(dict.fromkeys(predicates))


def _filtered(
    backend: Backend, settings: Settings, node, way: Direction, predicates: list, ref: str, row_limit: int
) -> ToolOutput:
    cap = row_limit or settings.search_p
    rows = backend.neighbours(node, way, predicates, cap + 1)
    total = len(rows)
    if total > cap:
        total = backend.count_neighbours(node, way, predicates)
        rows = rows[:cap]
    if not rows:
        return _no_rows(backend, settings, node, way, predicates, ref)
    exact = total < backend.count_cap
    return _rows_view(
        backend, settings, node, way, rows, total=total, filtered=True, exact=exact, limited=bool(row_limit),
        whole=len(predicates) == 1,
    )


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
    limited: bool = False,
    whole: bool = False,
) -> ToolOutput:
    """The rows as a table; with `whole` (one property of one entity), the values the table cuts
    follow it whole, up to max_value_chars in all."""
    # Blank nodes after the rest: the output's own cap never cuts a named row before them.
    rows = sorted(rows, key=lambda r: isinstance(r.value, ox.BlankNode))
    namer = Namer(backend, settings, [node])
    if whole:
        namer.whole_chars = settings.max_value_chars
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
    if truncated and limited:
        head += f", showing the first {len(rows)} (limit). Raise limit to see more."
    elif truncated:
        head += f", showing the first {len(rows)} (cut). Filter for fewer properties to see the rest."
    elif not filtered and not rows:
        head += f". The entity has no {way.value} edges; try the other direction."
    md_rows = [(o["property"], o["propertyLabel"], namer.value_text(r.value), value_label(namer, r)) for r, o in zip(rows, out_rows)]
    text = head + "\n" + table(("property", "propertyLabel", "value", "valueLabel"), md_rows, settings)
    tail = whole_values([r.value for r in rows], settings) if whole else ""
    text = capped(text, settings, "Filter for fewer properties to see less at once.", read_whole=not tail) + tail
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
    # The structured content may grow past the output cap by what the whole values add, no more:
    # a long listing of short values stays within the cap like any other.
    return ToolOutput(text, data, settings.max_output_chars + len(tail) if tail else None)


def whole_values(values: list, settings: Settings) -> str:
    """The literals a table cell cut, whole and as they are (line breaks kept), after the table:
    at most max_value_chars characters in all, any further cut said where it is."""
    long = [(i, v) for i, v in enumerate(values, 1) if isinstance(v, ox.Literal) and len(v.value) > settings.max_cell_chars]
    if not long:
        return ""
    room = settings.max_value_chars
    parts = [f"\n\nWhole values of the {plural(len(long), 'row')} cut above:"]
    for row, value in long:
        if room <= 0:
            parts.append(f"(rows from {row} on are left out: more than max_value_chars = {settings.max_value_chars:,} characters in all)")
            break
        text = value.value if len(value.value) <= room else cut_text(value.value, room)
        room -= len(text)
        parts.append(f"--- row {row}, {len(value.value):,} characters ---\n{text}")
    return "\n".join(parts)


def value_label(namer: Namer, row: Neighbour) -> str:
    """The valueLabel cell; qualifiers ride along in it: "St John's College [start time: 1971; end time: 1974]"."""
    label = namer.label(row.value) or ""
    if not row.qualifiers:
        return label
    parts = "; ".join(
        f"{namer.predicate_label(qual.predicate)}: {namer.label(qual.value) or namer.value_text(qual.value)}"
        for qual in row.qualifiers
    )
    return f"{label} [{parts}]".strip()


def _property_view(backend: Backend, settings: Settings, node, way: Direction) -> ToolOutput:
    counts = backend.relation_counts(node, way)
    namer = Namer(backend, settings, [node, *(c.predicate for c in counts)])
    identifiers = backend.identifier_predicates([c.predicate for c in counts])
    total = sum(c.count for c in counts)
    exact = all(c.exact for c in counts)
    props = [
        PropertyCount(
            property=namer.id(c.predicate),
            propertyLabel=namer.predicate_label(c.predicate),
            rows=c.count,
            exact=c.exact,
            identifier=c.predicate in identifiers,
        )
        for c in counts
    ]
    listed = [p for p in props if not p.identifier]
    size = plural(total, "row") if exact else f"at least {total:,} rows (counted among the first {backend.count_cap:,})"
    head = (
        f"search {namer.heading(node)}, {way.value}: {size}, more than {settings.search_k}; "
        f"showing its {plural(len(props), 'property')} instead"
        + (f" ({len(props) - len(listed)} external identifiers in one line at the end)" if len(listed) < len(props) else "")
        + ". Call search again with properties_to_filter_for set to the ones you need."
    )
    identifiers_line = "\n" + identifier_line([p for p in props if p.identifier]) if len(listed) < len(props) else ""
    text, shown = capped_table(
        head,
        ("property", "propertyLabel", "rows"),
        [(p.property, p.propertyLabel, f"{p.rows}" if p.exact else f"{p.rows}+") for p in listed],
        settings,
        "Filter for the properties you need.",
        identifiers_line,
    )
    data = SearchResult(
        entity=namer.out(node),
        direction=way.value,
        view="properties",
        total=total,
        total_exact=exact,
        shown=0,
        truncated=True,
        # the properties listed in the text, then the identifiers its one line sums up
        properties=listed[:shown] + [p for p in props if p.identifier],
        properties_total=len(props),
        properties_shown=shown,
    )
    return ToolOutput(text, data)


def identifier_line(identifiers: list[PropertyCount], examples: int = 3) -> str:
    """External identifiers (ISNI, VIAF, ...) summed up in one line instead of a row each."""
    rows = sum(p.rows for p in identifiers)
    some = ", ".join(f"{p.property} ({p.propertyLabel})" for p in identifiers[:examples])
    return (
        f"Also {plural(len(identifiers), 'external-identifier property')} ({plural(rows, 'row')}), e.g. {some}: "
        "filter for one by id or name to see its value."
    )


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
