"""Batched `search` and `explore_kg`: several entities, one call, one table with an entity column
(on every row); and the pages of explore_kg's relation lists, for one entity or several.

A batched search is one listing: the entities' rows one after another, in the order given, in
pages of at most the `limit` asked for (else p rows) and what fits the output budget. Without a
filter, an entity whose neighbourhood is larger than k rows gets a one-line property summary
instead of rows, as a single search would give its property-only view. An explore_kg page holds
the same rows (from the same offset) of every (entity, relation) list, at most `limit` (else
explore_limit) of each. Anonymous values are summed up by kind, as in every listing.
"""

from __future__ import annotations

from collections import Counter

import pyoxigraph as ox
from pydantic import BaseModel, TypeAdapter

from kg_mcp.calls import deadline, progress
from kg_mcp.backends import Backend, Direction
from kg_mcp.errors import InvalidInput
from kg_mcp.settings import Settings
from kg_mcp.tools._render import Namer, TermOut, ToolOutput, capped, plural, relation_name, table, value_label
from kg_mcp.tools.anonymous import AnonymousSummary, anonymous_line, anonymous_summary, lists_anonymous
from kg_mcp.tools.pages import MORE_ROOM, Listing, NeighbourPage, Paged, json_chars, neighbour_page, shown_key, with_more

MAX_ENTITIES = 200  # every frontier of a MetaQA 3-hop gold walk fits in one call
SUMMARY_PROPERTIES = 15  # properties named in an entity's one-line summary
SMALL = 50  # rows of an entity read at once even when the page needs none of them (they count them)


class EntityPart(BaseModel):
    entity: TermOut
    total: int  # rows (or triples) the entity has for the call, named and anonymous
    shown: int  # of them, on this page
    view: str = "rows"  # rows, properties (too large without a filter) or unknown (not in the KG)
    anonymous: int = 0  # of its rows, those to blank nodes (summed up, not listed, unless asked for)


class BatchRow(BaseModel):
    entity: str
    property: str
    value: TermOut


class BatchSearchResult(Paged):
    direction: str
    entities: list[EntityPart]
    total: int  # rows of the listing: every entity's, in the order given
    shown: int  # rows on this page (offset: those of the pages before)
    truncated: bool  # more rows on the next pages, or an entity too large for rows
    rows: list[BatchRow] = []
    anonymous: AnonymousSummary | None = None  # the anonymous values, summed up instead of listed


_ROWS = TypeAdapter(list[BatchRow])


def _nodes(backend: Backend, refs: list[str]) -> list[tuple[str, ox.NamedNode]]:
    if len(refs) > MAX_ENTITIES:
        raise InvalidInput(f"At most {MAX_ENTITIES} entities at once; got {len(refs)}.", "Split them over several calls.")
    seen: dict[ox.NamedNode, str] = {}
    for ref in refs:
        deadline.check()
        seen.setdefault(backend.resolve_entity(ref, check=False), ref)
    return [(ref, node) for node, ref in seen.items()]


def _parts(backend: Backend, nodes, way: Direction, predicates: list | None, cap: int, offset: int, listed: bool,
           unfiltered_k: int | None) -> list[tuple[ox.NamedNode, str, NeighbourPage | None]]:
    """Each entity's part of the listing (the entities' rows one after another): its view and, for
    rows, its page of the rows that fall in [offset, offset + cap) of the whole listing. Without a
    filter (`unfiltered_k`), an entity of more than k rows is summed up by its properties instead."""
    parts, before = [], 0  # rows of the listing before this entity
    for done, (_, node) in enumerate(nodes):
        deadline.check()
        progress.step(done, len(nodes), "entities searched")
        # A first read as long as the rows this page may still need (a few at least: most entities
        # have few rows, and one read then counts them too); past it, the entity's rows are counted.
        probe = unfiltered_k or min(cap, max(offset + cap - before, SMALL))
        first = backend.neighbours(node, way, predicates, probe + 1)
        if unfiltered_k is not None and len(first) > unfiltered_k:
            parts.append((node, "properties", None))
            continue
        start = max(0, offset - before)
        room = max(0, offset + cap - max(before, offset))
        page = neighbour_page(backend, node, way, predicates, first, len(first) <= probe, room, start, listed,
                              first_page=offset == 0)
        before += page.total
        parts.append((node, "rows", page))
    return parts


def search_many(
    backend: Backend, settings: Settings, listing: Listing, refs: list[str], way: Direction, predicates: list,
    row_limit: int, anonymous: str,
) -> ToolOutput:
    nodes = _nodes(backend, refs)
    cap = row_limit or settings.search_p
    listed = lists_anonymous(anonymous, [node for _, node in nodes])
    parts = _parts(backend, nodes, way, predicates or None, cap, listing.offset, listed,
                   None if predicates else settings.search_k)
    for i, (node, view, page) in enumerate(parts):
        if view == "rows" and page.named + page.blank == 0 and not backend.exists(node):
            parts[i] = (node, "unknown", page)

    pages = [(node, page) for node, view, page in parts if view == "rows"]
    positions = {node: i for i, (node, _) in enumerate(pages)}
    namer = Namer(backend, settings, [node for _, node in nodes])
    namer.add(t for _, page in pages for r in page.rows for t in (r.predicate, r.value))
    namer.add(t for _, page in pages for r in page.rows for q in r.qualifiers for t in (q.predicate, q.value))
    namer.add(predicates)
    one_property = len(predicates) == 1
    headers = ("entity", "value", "valueLabel") if one_property else ("entity", "property", "value", "valueLabel")
    # The page is cut in the order the listing is read in (each entity's rows as its engine reads
    # them), then each entity's rows are shown in one order (kg_mcp.tools.pages.shown_order).
    read = [(node, r) for node, page in pages for r in page.rows]
    sizes = table(headers, [_cells(namer, node, r, value_label(namer, r), one_property) for node, r in read],
                  settings).split("\n")[2:]
    out_rows = [{"entity": namer.id(node), "property": namer.id(r.predicate), "value": namer.term(r.value)}
                for node, r in read]
    total_rows = sum(page.total for _, page in pages)
    blank = sum(page.blank for _, page in pages if not page.listed)
    wanted = f", properties {', '.join(_property_name(namer, p) for p in predicates)}" if predicates else ""
    counted_all = all(page.exact for _, page in pages)  # else some were counted up to the cap
    at_least = "" if counted_all else "at least "
    head = f"search {plural(len(nodes), 'entity')}, {way.value}{wanted}: {at_least}{plural(total_rows, 'row')}"
    if blank:
        where = "summed up below" if not listing.offset else "summed up on the first page"
        head += f" listed, and {blank:,} anonymous ({where})"
    head += "."
    used = dict.fromkeys(r.predicate for _, r in read)
    legend = [_property_name(namer, p) for p in used if not predicates and _has_own_label(namer, p)]
    if legend:
        head += " Properties: " + ", ".join(legend) + "."
    anonymous_part = None
    if blank:
        call = listing.call(anonymous="list")
        sample = [v for _, page in pages for v in page.sample]
        anonymous_part = (anonymous_summary(backend, namer.id, sample, blank, call) if not listing.offset
                          else AnonymousSummary(total=blank, call=call))
    notes = _notes(backend, namer, parts, way, settings, anonymous_part if not listing.offset else None)
    foot = "\n" + "\n".join(f"- {n}" for n in notes) if notes else ""
    data = BatchSearchResult(
        direction=way.value, entities=[], total=total_rows, shown=0, truncated=False, offset=listing.offset,
        anonymous=anonymous_part,
    )
    header = table(headers, [], settings)
    fits = listing.fit(sizes, out_rows, text_used=len(head) + len(foot) + len(header) + 2 + len(" Labels are given once."),
                       json_used=len(data.model_dump_json()) + 200 * len(parts))
    token, more = listing.more(fits, total_rows, exact=counted_all)
    order = sorted(range(fits), key=lambda i: (positions[read[i][0]], *shown_key(read[i][1])))
    md_rows, labelled = [], set()
    for i in order:
        node, r = read[i]
        # A value's plain label is said the first time the value appears.
        md_rows.append(_cells(namer, node, r, value_label(namer, r) if r.qualifiers or r.value not in labelled else "",
                              one_property))
        labelled.add(r.value)
    if any(not cells[-1] for cells in md_rows):
        head += " Labels are given once."
    text = head + ("\n" + table(headers, md_rows, settings) if md_rows else "") + foot
    shown_of = Counter(read[i][0] for i in order)
    data.entities = [
        EntityPart(entity=namer.out(node), total=page.named + page.blank if page else 0, shown=shown_of[node], view=view,
                   anonymous=page.blank if page else 0)
        for node, view, page in parts
    ]
    data.rows = _ROWS.validate_python([out_rows[i] for i in order])  # at once, in pydantic's compiled core
    data.shown, data.next_cursor = fits, token
    data.truncated = token is not None or any(view == "properties" for _, view, _ in parts)
    return ToolOutput(with_more(capped(text, settings, "Ask for fewer entities or properties."), more), data)


def _cells(namer: Namer, node, row, label: str, one_property: bool) -> tuple:
    cells = (namer.id(node), namer.value_text(row.value), label)
    return cells if one_property else (cells[0], namer.id(row.predicate), *cells[1:])


def _notes(backend: Backend, namer: Namer, parts, way: Direction, settings: Settings,
           anonymous: AnonymousSummary | None) -> list[str]:
    """What the table does not show: entities not in the KG, too large for rows, without rows; the
    anonymous values summed up."""
    notes, empty = [], []
    for node, view, page in parts:
        entity_id = namer.id(node)
        if view == "unknown":
            notes.append(f"{entity_id}: not in the KG (look it up with find_entities)")
        elif view == "properties":
            notes.append(_summary(backend, namer, node, way, backend.count_neighbours(node, way, None), settings))
        elif not page.exact:
            notes.append(f"{entity_id}: at least {page.total:,} rows (counted up to {backend.count_cap:,})")
        elif page.named + page.blank == 0:
            empty.append(entity_id)
    if empty:
        notes.append(f"0 rows: {', '.join(empty)}")
    if anonymous is not None:
        notes.append(anonymous_line("anonymous values", anonymous))
    return notes


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


class ExploredRelation(BaseModel):
    relation: str
    label: str | None
    total: int  # triples along the relation, named and anonymous
    shown: int  # of them, on this page (offset: the rows of each relation on the pages before)
    neighbours: list[TermOut]
    anonymous: int = 0  # of its triples, those to blank nodes (summed up, not listed, unless asked for)


class EntityRelation(ExploredRelation):
    entity: TermOut  # whose relation this is


class BatchExploreResult(Paged):
    entities: list[TermOut]
    relations: list[EntityRelation]  # one per (entity, relation), in the table's order
    total: int
    shown: int
    anonymous: AnonymousSummary | None = None  # the anonymous neighbours, summed up instead of listed


class ExploredList:
    """One relation of one entity on an explore_kg page: its page of rows and what it holds in all."""

    def __init__(self, node, predicate, direction: Direction, page: NeighbourPage):
        self.node, self.predicate, self.direction, self.page = node, predicate, direction, page
        self.shown = 0  # rows of it the page shows (set once the page is fitted)


def explore_lists(backend: Backend, nodes, chosen: list, per_list: int, offset: int, listed: bool) -> list[ExploredList]:
    """Every (entity, relation) list of an explore_kg call, each with its rows from `offset` on, at
    most `per_list`: a page holds the same rows of each list, so that one offset reads on all."""
    lists = []
    for done, node in enumerate(nodes):
        progress.step(done, len(nodes), "entities explored")
        for predicate, direction in chosen:
            deadline.check()
            first = backend.neighbours(node, direction, [predicate], per_list + 1)
            page = neighbour_page(backend, node, direction, [predicate], first, len(first) <= per_list, per_list, offset,
                                  listed, first_page=not offset)
            lists.append(ExploredList(node, predicate, direction, page))
    return lists


def fit_lists(listing: Listing, lists: list[ExploredList], text_rows: list[list[str]], json_rows: list[list], *,
              text_used: int, json_used: int) -> int:
    """The most rows of each list that the page holds (the same number of each: one offset reads on
    all of them); at least one, so that every page moves on."""
    longest = max((len(rows) for rows in text_rows), default=0)
    room = listing.budget - MORE_ROOM
    whole = text_used + sum(len(r) + 1 for rows in text_rows for r in rows)
    if whole <= room and json_used + sum(json_chars(rows) for rows in json_rows) <= room:  # most pages: all of it
        low = high = longest
    else:
        text_sizes = [[len(r) + 1 for r in rows] for rows in text_rows]
        json_sizes = [[json_chars(r) + 1 for r in rows] for rows in json_rows]
        low, high = 1, longest  # the most rows that fit lies in [low, high]

    def fits(n: int) -> bool:
        text = text_used + sum(sum(sizes[:n]) for sizes in text_sizes)
        data = json_used + sum(sum(sizes[:n]) for sizes in json_sizes)
        return max(text, data) <= room

    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    for item, rows in zip(lists, text_rows):
        item.shown = min(low, len(rows))
    return low


def explore_anonymous(backend: Backend, namer: Namer, listing: Listing, lists: list[ExploredList]) -> AnonymousSummary | None:
    """The anonymous neighbours of every list, summed up (kinds on the first page), when not listed."""
    blank = sum(item.page.blank for item in lists if not item.page.listed)
    if not blank:
        return None
    call = listing.call(anonymous="list")
    if listing.offset:
        return AnonymousSummary(total=blank, call=call)
    return anonymous_summary(backend, namer.id, [v for item in lists for v in item.page.sample], blank, call)


def explore_many(backend: Backend, settings: Settings, listing: Listing, refs: list[str], chosen: list, row_limit: int,
                 anonymous: str) -> ToolOutput:
    """explore_kg over several entities: `| entity | relation | neighbour | label |`, the same rows of
    every (entity, relation) on a page."""
    nodes = [node for _, node in _nodes(backend, refs)]
    lists = explore_lists(backend, nodes, chosen, row_limit or settings.explore_limit, listing.offset,
                          lists_anonymous(anonymous, nodes))
    namer = Namer(backend, settings, nodes)
    namer.add(t for item in lists for r in item.page.rows for t in (item.predicate, r.value))
    text_rows, json_rows = [], []
    for item in lists:
        name, entity_id = relation_name(namer, item.predicate, item.direction), namer.id(item.node)
        cells = [(entity_id, name, namer.value_text(r.value), namer.label(r.value)) for r in item.page.rows]
        text_rows.append(table(("entity", "relation", "neighbour", "label"), cells, settings).split("\n")[2:])
        json_rows.append([namer.term(r.value) for r in item.page.rows])
    total = sum(item.page.total for item in lists)
    head = f"explore_kg {plural(len(nodes), 'entity')}: {plural(total, 'triple')}"
    anonymous_part = explore_anonymous(backend, namer, listing, lists)
    if anonymous_part is not None:
        head += f" listed, and {anonymous_part.total:,} anonymous"
    notes = [f"{namer.id(n)}: not in the KG (look it up with find_entities)" for n in nodes
             if not any(i.page.named + i.page.blank for i in lists if i.node == n) and not backend.exists(n)]
    if anonymous_part is not None and not listing.offset:
        notes.append(anonymous_line("anonymous neighbours", anonymous_part))
    foot = "".join(f"\n- {n}" for n in notes)
    header = "| entity | relation | neighbour | label |\n|---|---|---|---|"
    data = BatchExploreResult(entities=[namer.out(n) for n in nodes], relations=[], total=total, shown=0,
                              offset=listing.offset, anonymous=anonymous_part)
    per = fit_lists(listing, lists, text_rows, json_rows, text_used=len(head) + len(foot) + len(header) + 2,
                    json_used=len(data.model_dump_json()) + 250 * len(lists))
    longest = max((item.page.total for item in lists), default=0)
    token, more = listing.more(per, longest, of_each="entity's relation", left=any(
        listing.offset + item.shown < item.page.total for item in lists))
    shown_rows = [r for item, rows in zip(lists, text_rows) for r in rows[: item.shown]]
    text = head + ".\n" + header + "".join("\n" + r for r in shown_rows) + foot
    data.relations = [
        EntityRelation(entity=namer.out(item.node), relation=relation_name(namer, item.predicate, item.direction),
                       label=namer.predicate_label(item.predicate), total=item.page.named + item.page.blank,
                       shown=item.shown, neighbours=[TermOut.model_validate(v) for v in values[: item.shown]],
                       anonymous=item.page.blank)
        for item, values in zip(lists, json_rows)
    ]
    data.shown, data.next_cursor = len(shown_rows), token
    return ToolOutput(with_more(capped(text, settings, "Explore fewer entities or relations at once."), more), data)
