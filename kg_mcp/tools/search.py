"""`search`: Search-on-Graph's one-hop neighbourhood, in one direction, optionally filtered.

Small neighbourhoods come back whole as `property | propertyLabel | value | valueLabel` rows.
Above k rows without a filter, only the distinct properties and their row counts come back, so
the model can ask again with a filter; a filtered answer comes in pages of at most p rows (and
what fits the output budget), read on with the cursor each page gives (kg_mcp.tools.pages).
Anonymous values (blank nodes) are counted by kind rather than listed, unless asked for
(kg_mcp.tools.anonymous).
"""

from __future__ import annotations

from typing import Literal

import pyoxigraph as ox
from pydantic import BaseModel

from kg_mcp.backends import Backend, Direction
from kg_mcp.errors import InvalidInput
from kg_mcp.quoting import quoted
from kg_mcp.settings import Settings
from kg_mcp.tools._render import Namer, TermOut, ToolOutput, capped, cut_text, plural, table, value_label
from kg_mcp.tools.anonymous import (
    AnonymousSummary,
    anonymous_line,
    anonymous_summary,
    check_anonymous,
    lists_anonymous,
)
from kg_mcp.tools.pages import FIELDS_ROOM, JSON_ROOM, Listing, NeighbourPage, Paged, json_chars, neighbour_page, shown_order, with_more
from kg_mcp.tools.search_batch import search_many

MAX_FILTERS = 50
IDENTIFIER_EXAMPLES = 3  # external identifiers the property view's one line names


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


class SearchResult(Paged):
    entity: TermOut
    direction: Literal["outgoing", "incoming"]
    view: Literal["rows", "properties"]
    total: int  # rows of the entity in this direction (with the filter), named and anonymous
    total_exact: bool = True  # False: `total` is a lower bound (a hub counted only in part)
    shown: int  # rows on this page (offset: those of the pages before)
    truncated: bool  # more rows (or properties) on the next pages, or rows behind the property view
    rows: list[SearchRow] = []
    properties: list[PropertyCount] = []  # the property view: as many as this page shows, then the identifiers
    properties_total: int = 0  # distinct properties in the property view
    properties_shown: int = 0  # properties listed on this page
    identifiers: int = 0  # external-identifier properties, summed up in one line (those that fit follow the listed ones)
    identifier_rows: int = 0  # their rows
    anonymous: AnonymousSummary | None = None  # the anonymous values, summed up instead of listed


def search(
    backend: Backend,
    settings: Settings,
    entity: str = "",
    direction: str = "outgoing",
    properties_to_filter_for: list[str] | None = None,
    limit: int = 0,
    entities: list[str] | None = None,
    anonymous: str = "summary",
    cursor: str = "",
) -> ToolOutput:
    """One entity: Search-on-Graph's output. Several (`entities`): one table for all (see search_batch)."""
    refs = ([entity] if entity else []) + list(entities or [])
    if not refs:
        raise InvalidInput("No entity given.", "Pass entity (one id or label) or entities (a list of them).")
    way = parse_direction(direction)
    row_limit = check_limit(limit, settings)
    check_anonymous(anonymous)
    predicates = filter_predicates(backend, properties_to_filter_for or [])
    arguments = {"entity": entity, "direction": direction if way is not Direction.OUTGOING else None,
                 "properties_to_filter_for": properties_to_filter_for, "entities": entities,
                 "anonymous": anonymous if anonymous != "summary" else None}
    listing = Listing.open("search", {k: v for k, v in arguments.items() if v}, cursor, backend, settings)
    if len(refs) > 1:
        return search_many(backend, settings, listing, refs, way, predicates, row_limit, anonymous)
    entity = refs[0]
    node = backend.resolve_entity(entity, check=False)
    listed = lists_anonymous(anonymous, node)
    if not predicates:
        known = backend.known_degree(node, way)
        if known is not None and known > settings.search_k:  # a recorded hub: no need to probe
            return _property_view(backend, settings, listing, node, way)
    cap = row_limit or (settings.search_p if predicates else settings.search_k)
    first = backend.neighbours(node, way, predicates or None, (cap if predicates else settings.search_k) + 1)
    if not predicates and len(first) > settings.search_k:
        return _property_view(backend, settings, listing, node, way)
    if not first:
        if predicates:
            return _no_rows(backend, settings, node, way, predicates, entity)
        backend.require(node, entity)
    page = neighbour_page(backend, node, way, predicates, first, len(first) <= cap, cap, listing.offset, listed,
                          first_page=not listing.offset)
    return _rows_view(backend, settings, listing, node, way, page, filtered=bool(predicates), whole=len(predicates) == 1)


def parse_direction(direction: str) -> Direction:
    try:
        return Direction(direction)
    except ValueError:
        raise InvalidInput(f"direction must be 'outgoing' or 'incoming', not {quoted(direction)}.") from None


def check_limit(limit: int, settings: Settings) -> int:
    """The rows a page may hold at most (0: the defaults, k and p)."""
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


def _rows_view(
    backend: Backend,
    settings: Settings,
    listing: Listing,
    node,
    way: Direction,
    page: NeighbourPage,
    *,
    filtered: bool,
    whole: bool = False,
) -> ToolOutput:
    """The page's rows as a table; with `whole` (one property of one entity), the values the table
    cuts follow it whole, up to max_value_chars in all."""
    rows = page.rows  # in the order the listing is read in: the page is cut in it
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
    at_least = "" if page.exact else "at least "
    head = f"search {namer.heading(node)}, {way.value}: {at_least}{plural(page.named + page.blank, 'row')}"
    anonymous = None
    if page.blank and not page.listed:
        call = listing.call(anonymous="list")
        if page.sample:
            anonymous = anonymous_summary(backend, namer.id, page.sample, page.blank, call)
        else:
            anonymous = AnonymousSummary(total=page.blank, call=call)
        where = "summed up below" if listing.offset == 0 else "summed up on the first page"
        head += f" ({page.named:,} named, listed; {page.blank:,} anonymous, {where})"
    elif not filtered and not rows and not listing.offset:
        head += f". The entity has no {way.value} edges; try the other direction"
    head += "."
    foot = "\n" + anonymous_line("anonymous values", anonymous) if anonymous is not None and not listing.offset else ""
    md_rows = [(o["property"], o["propertyLabel"], namer.value_text(r.value), value_label(namer, r)) for r, o in zip(rows, out_rows)]
    lines = table(("property", "propertyLabel", "value", "valueLabel"), md_rows, settings).split("\n")
    # Plain data, validated once with its rows in pydantic's compiled core.
    fields = {"entity": namer.term(node), "direction": way.value, "view": "rows", "total": page.total,
              "total_exact": page.exact, "offset": listing.offset,
              "anonymous": anonymous.model_dump() if anonymous else None}
    fits = listing.fit(lines[2:], out_rows, text_used=len(head) + len(foot) + len(lines[0]) + len(lines[1]) + 2,
                       json_used=json_chars(fields) + FIELDS_ROOM)
    token, more = listing.more(fits, page.total, exact=page.exact)
    order = shown_order(rows[:fits])  # shown in one order, whatever order the engine read them in
    text = head + "\n" + "\n".join(lines[:2] + [lines[2 + i] for i in order]) + foot
    tail = whole_values([rows[i].value for i in order], settings) if whole else ""
    text = with_more(capped(text, settings, "Filter for fewer properties to see less at once.", read_whole=not tail) + tail, more)
    data = SearchResult.model_validate({**fields, "rows": [out_rows[i] for i in order], "shown": fits,
                                        "truncated": token is not None, "next_cursor": token})
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


def _property_view(backend: Backend, settings: Settings, listing: Listing, node, way: Direction) -> ToolOutput:
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
    kept = [p for p in props if p.identifier]
    size = plural(total, "row") if exact else f"at least {total:,} rows (counted among the first {backend.count_cap:,})"
    head = (
        f"search {namer.heading(node)}, {way.value}: {size}, more than {settings.search_k}; "
        f"showing its {plural(len(props), 'property')} instead"
        + (f" ({len(kept)} external identifiers in one line at the end)" if kept else "")
        + ". Call search again with properties_to_filter_for set to the ones you need."
    )
    foot = "\n" + identifier_line(kept) if kept else ""
    page = listed[listing.offset :]
    lines = table(("property", "propertyLabel", "rows"), [(p.property, p.propertyLabel, f"{p.rows}" if p.exact else f"{p.rows}+") for p in page],
                  settings).split("\n")
    examples = kept[:IDENTIFIER_EXAMPLES]
    data = SearchResult(
        entity=namer.out(node), direction=way.value, view="properties", total=total, total_exact=exact, shown=0,
        truncated=True, properties=examples, properties_total=len(props), offset=listing.offset,
        identifiers=len(kept), identifier_rows=sum(p.rows for p in kept),
    )
    json_rows = [p.model_dump() for p in page]
    used = json_chars(data.model_dump(mode="json"))
    fits = listing.fit(lines[2:], json_rows, text_used=len(head) + len(foot) + len(lines[0]) + len(lines[1]) + 2,
                       json_used=used)
    token, more = listing.more(fits, len(listed))
    text = head + "\n" + "\n".join(lines[: 2 + fits]) + foot
    # The properties listed in the text, then the identifiers its one line sums up: those it names,
    # and as many more as the page has room for (their number and rows are told whatever fits).
    room = listing.budget - JSON_ROOM - used - sum(json_chars(row) + 1 for row in json_rows[:fits])
    more_ids = []
    for p in kept[len(examples):]:
        room -= json_chars(p.model_dump()) + 1
        if room < 0:
            break
        more_ids.append(p)
    data.properties = page[:fits] + examples + more_ids
    data.properties_shown, data.next_cursor = fits, token
    return ToolOutput(with_more(capped(text, settings, "Filter for the properties you need."), more), data)


def identifier_line(identifiers: list[PropertyCount], examples: int = IDENTIFIER_EXAMPLES) -> str:
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
