"""R2-KG's two helpers: `get_relations` lists the relations around an entity, `explore_kg` walks them.

A relation written `~rel` is `rel` walked backwards: the entities that have `rel` pointing at
the focus entity. Both are listings (kg_mcp.tools.pages): get_relations pages through the
relations, explore_kg through the same rows of each relation at once (kg_mcp.tools.search_batch).
"""

from __future__ import annotations

from pydantic import BaseModel

from kg_mcp.backends import Backend, Direction
from kg_mcp.errors import InvalidInput
from kg_mcp.settings import Settings
from kg_mcp.tools._render import Namer, TermOut, ToolOutput, capped, plural, relation_name, table
from kg_mcp.tools.anonymous import AnonymousSummary, anonymous_line, check_anonymous, lists_anonymous
from kg_mcp.tools.pages import FIELDS_ROOM, Listing, Paged, json_chars, with_more
from kg_mcp.tools.search_batch import ExploredRelation, explore_anonymous, explore_lists, explore_many, fit_lists

MAX_RELATIONS = 30


class RelationRow(BaseModel):
    relation: str
    label: str | None
    triples: int
    exact: bool = True  # False: counted among a hub's first edges only, so "at least"


class RelationsResult(Paged):
    entity: TermOut
    relations: list[RelationRow]  # the relations on this page
    total: int  # relations around the entity
    shown: int  # relations listed on this page (offset: those of the pages before)


def get_relations(backend: Backend, settings: Settings, entity: str, cursor: str = "") -> ToolOutput:
    listing = Listing.open("get_relations", {"entity": entity}, cursor, backend, settings)
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
    page = rows[listing.offset :]
    lines = table(("relation", "label", "triples"),
                  [(r["relation"], r["label"], str(r["triples"]) if r["exact"] else f"{r['triples']}+") for r in page],
                  settings).split("\n")
    fields = {"entity": namer.term(node), "total": len(rows), "offset": listing.offset}
    fits = listing.fit(lines[2:], page, text_used=len(head) + len(foot) + len(lines[0]) + len(lines[1]) + 2,
                       json_used=json_chars(fields) + FIELDS_ROOM)
    token, more = listing.more(fits, len(rows))
    text = head + "\n" + "\n".join(lines[: 2 + fits]) + foot
    # Plain data, validated once with its rows in pydantic's compiled core.
    data = RelationsResult.model_validate({**fields, "relations": page[:fits], "shown": fits, "next_cursor": token})
    return ToolOutput(with_more(capped(text, settings, "Use explore_kg on the relations you need."), more), data)


class ExploreResult(Paged):
    entity: TermOut
    relations: list[ExploredRelation]
    anonymous: AnonymousSummary | None = None  # the anonymous neighbours, summed up instead of listed


def explore_kg(
    backend: Backend, settings: Settings, entity: str = "", relations: list[str] | None = None,
    entities: list[str] | None = None, limit: int = 0, anonymous: str = "summary", cursor: str = "",
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
    check_anonymous(anonymous)
    arguments = {"entity": entity, "relations": relations, "entities": entities,
                 "anonymous": anonymous if anonymous != "summary" else None}
    listing = Listing.open("explore_kg", {k: v for k, v in arguments.items() if v}, cursor, backend, settings)
    chosen = list(dict.fromkeys(backend.resolve_relation(r) for r in relations))
    if len(refs) > 1:
        return explore_many(backend, settings, listing, refs, chosen, limit, anonymous)
    entity = refs[0]
    node = backend.resolve_entity(entity, check=False)
    lists = explore_lists(backend, [node], chosen, limit or settings.explore_limit, listing.offset,
                          lists_anonymous(anonymous, node))
    if not any(item.page.named + item.page.blank for item in lists):
        backend.require(node, entity)
    namer = Namer(backend, settings, [node])
    namer.add(t for item in lists for r in item.page.rows for t in (item.predicate, r.value))
    text_rows, json_rows, notes = [], [], []
    for item in lists:
        name = relation_name(namer, item.predicate, item.direction)
        cells = [(name, namer.value_text(r.value), namer.label(r.value)) for r in item.page.rows]
        text_rows.append(table(("relation", "entity", "label"), cells, settings).split("\n")[2:])
        json_rows.append([namer.term(r.value) for r in item.page.rows])
        count = item.page.named + item.page.blank
        plus = "" if item.page.exact else "+"
        if not count:
            notes.append(f"{name}: no triples")
        elif item.page.blank and not item.page.listed:
            notes.append(f"{name}: {item.page.named:,}{plus} named, {item.page.blank:,}{plus} anonymous")
        else:
            notes.append(f"{name}: {count:,}{plus}")
    anonymous_part = explore_anonymous(backend, namer, listing, lists)
    total = sum(item.page.named + item.page.blank for item in lists)
    head = f"explore_kg {namer.heading(node)}: {plural(total, 'triple')} (" + "; ".join(notes) + ")."
    foot = "\n" + anonymous_line("anonymous neighbours", anonymous_part) if anonymous_part and not listing.offset else ""
    header = "| relation | entity | label |\n|---|---|---|"
    fields = {"entity": namer.term(node), "offset": listing.offset,
              "anonymous": anonymous_part.model_dump() if anonymous_part else None}
    per = fit_lists(listing, lists, text_rows, json_rows, text_used=len(head) + len(foot) + len(header) + 2,
                    json_used=json_chars(fields) + FIELDS_ROOM + 200 * len(lists))
    longest = max((item.page.total for item in lists), default=0)
    token, more = listing.more(per, longest, of_each="relation", left=any(
        listing.offset + item.shown < item.page.total for item in lists))
    shown_rows = [r for item, rows in zip(lists, text_rows) for r in rows[: item.shown]]
    text = head + "\n" + header + "".join("\n" + r for r in shown_rows) + foot
    # Plain data, validated once with its rows in pydantic's compiled core.
    relations_out = [
        {"relation": relation_name(namer, item.predicate, item.direction), "label": namer.predicate_label(item.predicate),
         "total": item.page.named + item.page.blank, "shown": item.shown, "neighbours": values[: item.shown],
         "anonymous": item.page.blank}
        for item, values in zip(lists, json_rows)
    ]
    data = ExploreResult.model_validate({**fields, "relations": relations_out, "next_cursor": token})
    return ToolOutput(with_more(capped(text, settings, "Explore fewer relations at once."), more), data)
