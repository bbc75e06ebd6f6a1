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
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import BaseModel

from kg_mcp.backends import Backend, graph_access
from kg_mcp.settings import Settings
from kg_mcp.tools import cursors
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


def more_line(offset: int, shown: int, total: int | None, cursor: str, *, exact: bool = True) -> str:
    """The text's last line when rows remain: where this page is in the listing, and how to read on.

    >>> more_line(200, 150, 1453, "abc")
    'Rows 201-350 of 1,453 shown. Next page: call again with the same arguments and cursor="abc".'
    """
    of = f" of {'at least ' if not exact else ''}{total:,}" if total is not None else ""
    return (f"Rows {offset + 1}-{offset + shown}{of} shown. Next page: call again with the same arguments "
            f'and cursor="{cursor}".')


def _signing(backend: Backend, settings: Settings) -> dict:
    return {
        "key": cursors.cursor_key(settings.cursor_key.get_secret_value()),
        "stamp": backend.data_stamp,
        "graphs": graph_access.cache_key(),
    }
