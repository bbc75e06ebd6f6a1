"""Markdown tables as the tools print them, read by their header's names, as a model reads them.

A scripted model must not depend on which columns a table shows (follow shows `paths` only where
some entity is reached by several paths); a cell's `|` is escaped as `\\|`.

    >>> table("follow: 1 entity reached.\\n| entity | label |\\n|---|---|\\n| kg:A | A \\\\| B |")
    [{'entity': 'kg:A', 'label': 'A \\\\| B'}]
"""

from __future__ import annotations

import re

_CELL_BORDER = re.compile(r"(?<!\\)\|")


def table(text: str) -> list[dict[str, str]]:
    """The rows of the first markdown table in `text`, each a dict from the header's names to its cells."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("| ")), len(lines))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    lines = [line for line in lines[start:end] if line.startswith("| ")]  # not the rule under the header
    if not lines:
        return []
    header, *rows = [[cell.strip() for cell in _CELL_BORDER.split(line)[1:-1]] for line in lines]
    return [dict(zip(header, row, strict=True)) for row in rows]
