"""A listing's page: which rows fit the character budget, the cursor to the next page, and the line
that tells the model how to read on. Every listing tool (search, follow, get_relations, explore_kg,
kgr_search, sparql) pages through here, so they all keep one contract:

- a call may pass `cursor` (the `next_cursor` of the call before, with the same arguments);
- a page holds the rows that fit the budget (settings.max_output_chars) in the text and, as JSON,
  in the structured content alike: the structured content never holds fewer rows than the text
  shows, and says where the page starts (`offset`);
- when rows remain, the structured content carries `next_cursor` and the text ends with MORE_LINE,
  which says how many rows were shown of how many and how to read on.

Cursors are kg_mcp.tools.cursors tokens: opaque, bounded, signed, read back only by the same call.
A tool opens a `Listing` for its call (where the page starts), asks it which of its rows fit
(`Listing.fit`) and how the page ends (`Listing.more`), and writes the call a model should make
next with `Listing.call` (e.g. the same call with anonymous="list").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import pydantic_core
import pyoxigraph as ox
from pydantic import BaseModel

from kg_mcp.backends import Backend, Direction, Neighbour, Values, graph_access
from kg_mcp.backends.edge_order import natural_key
from kg_mcp.settings import Settings
from kg_mcp.tools import cursors
from kg_mcp.tools.anonymous import CLASSIFIED
from kg_mcp.tools.cursors import Position


class Paged(BaseModel):
    """Fields every listing's structured content carries."""

    offset: int = 0  # rows of the whole listing before this page's first
    next_cursor: str | None = None  # pass back as `cursor` (same arguments) for the next page; None: the last


def position(tool: str, arguments: dict, cursor: str, backend: Backend, settings: Settings) -> Position:
    """Where this call's page starts: the start without a cursor, else where `cursor` says
    (InvalidInput for a cursor of another call, another server or stale data)."""
    if not cursor:
        return Position(0)
    return cursors.read(tool, arguments, cursor, **_signing(backend, settings))


def next_cursor(tool: str, arguments: dict, offset: int, backend: Backend, settings: Settings,
                resume: str | None = None) -> str:
    """The cursor of the page of this call that starts at `offset` (and the tool's `resume` key)."""
    return cursors.issue(tool, arguments, offset, resume=resume, **_signing(backend, settings))


def rows_that_fit(text_rows: Sequence[str], json_rows: Sequence[object], budget: int, *, text_used: int = 0,
                  json_used: int = 0) -> int:
    """How many of the first rows fit `budget` characters both as text (a row and its line break)
    and as JSON, after `text_used` / `json_used` characters already spent (head, foot, other fields);
    at least one where there is one, so that every page moves on.

    >>> rows_that_fit(["| a |", "| b |", "| c |"], [{"id": "a"}, {"id": "b"}, {"id": "c"}], 35, text_used=20)
    2
    """
    text, data, fits = text_used, json_used, 0
    for line, row in zip(text_rows, json_rows):
        text += len(line) + 1
        data += len(json.dumps(row, ensure_ascii=False, separators=(",", ":"))) + 1
        if fits and (text > budget or data > budget):
            break
        fits += 1
    return fits


def more_line(offset: int, shown: int, total: int | None, cursor: str, *, exact: bool = True,
              of_each: str | None = None, again: str | None = None) -> str:
    """The text's last line when rows remain: where this page is in the listing, and how to read on
    (`of_each`: the page holds these rows of each of several lists, e.g. of each relation; `again`:
    the call to make, where it is not the same call again).

    >>> more_line(200, 150, 1453, "abc")
    'Rows 201-350 of 1,453 shown. Next page: call again with the same arguments and cursor="abc".'
    >>> more_line(100, 100, 1453, "abc", of_each="relation").split(". Next")[0]
    'Rows 101-200 of each relation shown (the longest has 1,453)'
    """
    at_least = "at least " if not exact else ""
    if of_each:
        where = f"Rows {offset + 1}-{offset + shown} of each {of_each} shown (the longest has {at_least}{total:,})"
    else:
        of = f" of {at_least}{total:,}" if total is not None else ""
        where = f"Rows {offset + 1}-{offset + shown}{of} shown"
    if again:
        return f'{where}. Next page: call {again} with cursor="{cursor}".'
    return f'{where}. Next page: call again with the same arguments and cursor="{cursor}".'


# What the end of a page may still add: the line that says how to read on, with its cursor (text),
# and the cursor and offset fields (JSON).
MORE_ROOM = 200 + cursors.MAX_CURSOR_CHARS
JSON_ROOM = 40 + cursors.MAX_CURSOR_CHARS
# What a result's fields left to their defaults add to the plain data a tool measures its page by.
FIELDS_ROOM = 300


@dataclass
class Listing:
    """One call of a listing tool: where its page starts and how it says what follows."""

    tool: str
    arguments: dict  # the call's own arguments, as the model passed them (its cursor aside)
    backend: Backend
    settings: Settings
    start: Position

    @classmethod
    def open(cls, tool: str, arguments: dict, cursor: str, backend: Backend, settings: Settings) -> Listing:
        """The listing of this call, from its first page or from where `cursor` says."""
        kept = {k: v for k, v in arguments.items() if k != "cursor"}
        return cls(tool, kept, backend, settings, position(tool, kept, cursor, backend, settings))

    @property
    def offset(self) -> int:
        return self.start.offset

    @property
    def budget(self) -> int:
        return self.settings.max_output_chars

    def fit(self, text_rows: Sequence[str], json_rows: Sequence[object], *, text_used: int = 0, json_used: int = 0) -> int:
        """How many of the first rows this page holds: they fit the budget, as text and as JSON,
        beside what the page spends otherwise and the line that says how to read on."""
        # Most pages hold all their rows: one measure of the whole answers them.
        text = text_used + MORE_ROOM + sum(len(line) + 1 for line in text_rows)
        if text <= self.budget and json_used + JSON_ROOM + json_chars(list(json_rows)) <= self.budget:
            return len(text_rows)
        return rows_that_fit(text_rows, json_rows, self.budget, text_used=text_used + MORE_ROOM,
                             json_used=json_used + JSON_ROOM)

    def more(self, shown: int, total: int | None, *, exact: bool = True, resume: str | None = None,
             left: bool | None = None, of_each: str | None = None, again: str | None = None) -> tuple[str | None, str]:
        """(next_cursor, the text's last line) when rows remain after the `shown` rows of this page
        (`left` when `total` cannot tell), else (None, "")."""
        end = self.offset + shown
        if not (left if left is not None else total is None or end < total) or not shown:
            return None, ""
        token = next_cursor(self.tool, self.arguments, end, self.backend, self.settings, resume)
        return token, more_line(self.offset, shown, total, token, exact=exact, of_each=of_each, again=again)

    def call(self, **changes) -> str:
        """This call as a model writes it, with `changes` to its arguments (None: left out).

        >>> Listing("follow", {"entity": "ex:a", "path": ["p+"], "limit": 0}, None, None, Position(0)).call(anonymous="list")
        'follow(entity="ex:a", path=["p+"], anonymous="list")'
        """
        merged = {**self.arguments, **changes}
        shown = [f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in merged.items() if v not in (None, "", [], {}, 0)]
        return f"{self.tool}({', '.join(shown)})"


@dataclass
class NeighbourPage:
    """A page of one entity's neighbours along some relations: its rows, and what the listing holds."""

    rows: list[Neighbour]
    total: int  # rows of the listing: the named ones, and the anonymous ones when they are listed
    named: int
    blank: int
    exact: bool  # False: the counts stopped at the backend's count cap ("at least")
    listed: bool  # the anonymous rows are listed (after the named ones), not summed up
    sample: list  # anonymous values to sort into kinds, when they are summed up (on the first page)


def neighbour_page(backend: Backend, node, way: Direction, predicates: Sequence | None, first: list[Neighbour],
                   complete: bool, cap: int, offset: int, listed: bool, first_page: bool) -> NeighbourPage:
    """The page of at most `cap` rows from `offset` on of `node`'s neighbours: the named ones, then
    the anonymous ones when `listed` (or when there are no named ones). `first` is a first read of
    the neighbours; `complete`: it holds them all, and the page is cut from it in its order.
    Otherwise the page reads named rows, then anonymous ones, by offset, in the order that every
    page of the listing reads them in (Backend.neighbours). The anonymous ones summed up are
    sampled on the listing's `first_page` only (not on the node's own offset 0: an entity of a batch
    that starts past the page's start is read from 0 on a later page too)."""
    predicates = list(predicates) if predicates else None
    if complete:
        named = [r for r in first if not isinstance(r.value, ox.BlankNode)]
        blank = [r for r in first if isinstance(r.value, ox.BlankNode)]
        listed = listed or not named
        rows = named + blank if listed else named
        return NeighbourPage(rows[offset : offset + cap], len(rows), len(named), len(blank), True, listed,
                             [] if listed or offset else [r.value for r in blank])
    n_named, n_blank = backend.count_kinds(node, way, predicates)
    exact = n_named + n_blank < backend.count_cap or backend.counts_recorded(node, way)
    listed = listed or not n_named
    rows: list[Neighbour] = []
    if not offset and exact and not n_blank and backend.reads_in_page_order:
        rows = first[:cap]  # the first page is the first read's start: read once, not twice (a hub)
    elif offset < n_named and cap:
        rows = backend.neighbours(node, way, predicates, cap, offset=offset, values=Values.NAMED)
    if listed and len(rows) < cap:
        rows += backend.neighbours(node, way, predicates, cap - len(rows), offset=max(0, offset - n_named),
                                   values=Values.ANONYMOUS)
    total = n_named + n_blank if listed else n_named
    if not exact:
        # Counted up to the cap: the listing ends where its count does, so that the next entity of a
        # batch starts where the count says.
        rows = rows[: max(0, total - offset)]
    sample = []
    if not listed and n_blank and first_page:
        sample = [r.value for r in backend.neighbours(node, way, predicates, CLASSIFIED, values=Values.ANONYMOUS)]
    return NeighbourPage(rows, total, n_named, n_blank, exact, listed, sample)


def with_more(text: str, more: str) -> str:
    """A page's text, ended by the line that says how to read on (when rows remain)."""
    return f"{text}\n{more}" if more else text


def shown_key(row: Neighbour) -> tuple:
    """Where a row is shown on its page: by property (numbers in it as numbers, so wdt:P19 comes
    before wdt:P106), then value, blank nodes last; the same on every engine whatever order it read
    the rows in (the page is cut first, in the order the listing is read in)."""
    return isinstance(row.value, ox.BlankNode), _property_key(row.predicate.value), str(row.value)


@lru_cache(maxsize=4096)  # a KG has few properties, and every page sorts by them
def _property_key(iri: str) -> tuple:
    return natural_key(iri)


def shown_order(rows: Sequence[Neighbour]) -> list[int]:
    """The positions of a page's rows in the order they are shown (`shown_key`)."""
    return sorted(range(len(rows)), key=lambda i: shown_key(rows[i]))


def json_chars(value: object) -> int:
    """The size of `value` as compact JSON, as the structured content carries it: its UTF-8 bytes,
    which are at least its characters (pydantic's encoder: several times quicker than json's).

    >>> json_chars({"id": "été"}), len(json.dumps({"id": "été"}, ensure_ascii=False, separators=(",", ":")))
    (14, 12)
    """
    return len(pydantic_core.to_json(value))


def _signing(backend: Backend, settings: Settings) -> dict:
    return {
        "key": cursors.cursor_key(settings.cursor_key.get_secret_value()),
        "stamp": backend.data_stamp,
        "graphs": graph_access.cache_key(),
    }
