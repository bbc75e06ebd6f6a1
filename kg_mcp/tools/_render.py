"""Markdown for the model and JSON rows for the app, from backend terms.

Every tool returns a `ToolOutput`: compact markdown (what the model reads) and the same rows as
a pydantic model (structured content). Cells are escaped and cut; the whole text is capped and
the cut is said, with the total, so the model never mistakes a partial answer for a whole one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import pyoxigraph as ox
from pydantic import BaseModel

from kg_mcp.backends import Backend
from kg_mcp.backends.base import Term
from kg_mcp.quoting import clipped
from kg_mcp.settings import Settings

# A literal's text or a label in the structured content is cut here (the markdown cuts cells at
# max_cell_chars): a KG value of megabytes must not ride along whole.
MAX_VALUE_CHARS = 1_000
_MIDNIGHT = re.compile(r"^(-?\d{1,}-\d\d-\d\d)T00:00:00Z$")
_XSD_DATETIME = "http://www.w3.org/2001/XMLSchema#dateTime"


@dataclass
class ToolOutput:
    text: str
    data: BaseModel


class TermOut(BaseModel):
    """A node or literal as the app sees it: the compact id (or literal text) and its label."""

    id: str
    label: str | None = None
    kind: str = "iri"  # iri, literal or blank
    datatype: str | None = None
    language: str | None = None


class Namer:
    """Labels for many terms fetched in one backend call, then rendered consistently."""

    def __init__(self, backend: Backend, settings: Settings, terms: Iterable[Term] = ()):
        self.backend = backend
        self.settings = settings
        self._labels: dict[Term, str] = {}
        self.add(terms)

    def add(self, terms: Iterable[Term]) -> None:
        todo = [t for t in dict.fromkeys(terms) if isinstance(t, ox.NamedNode) and t not in self._labels]
        if todo:
            self._labels.update(self.backend.labels(todo))

    def label(self, term: Term) -> str | None:
        return self._labels.get(term)

    def id(self, term: Term) -> str:
        return self.backend.vocab.compact(term)

    def out(self, term: Term) -> TermOut:
        return TermOut.model_validate(self.term(term))

    def term(self, term: Term) -> dict:
        """A TermOut as plain data. Tools build their results as plain data and validate them once,
        in pydantic's compiled core: several times cheaper than building each model in Python."""
        if isinstance(term, ox.Literal):
            datatype = self.id(term.datatype) if not term.language else None
            return {"id": clipped(term.value, MAX_VALUE_CHARS), "label": None, "kind": "literal", "datatype": datatype, "language": term.language}
        if isinstance(term, ox.BlankNode):
            return {"id": self.id(term), "label": None, "kind": "blank", "datatype": None, "language": None}
        label = self.label(term)
        return {"id": self.id(term), "label": clipped(label, MAX_VALUE_CHARS), "kind": "iri", "datatype": None, "language": None}

    def value_text(self, term: Term) -> str:
        """What the markdown shows for a value: ids as ids, literals as their text (dates shortened)."""
        if isinstance(term, ox.Literal):
            if term.datatype.value == _XSD_DATETIME:
                match = _MIDNIGHT.match(term.value)
                if match:
                    return match.group(1)
            return term.value
        return self.id(term)

    def predicate_label(self, predicate: ox.NamedNode) -> str:
        """A predicate's label, or its local name when the KG gives none."""
        label = self.label(predicate)
        if label:
            return label
        compact = self.id(predicate)
        return re.split(r"[:/#]", compact.strip("<>"))[-1]

    def heading(self, node: ox.NamedNode) -> str:
        label = self.label(node)
        return f"{self.id(node)} ({label})" if label else self.id(node)


def bounded_data(data: dict, max_output_chars: int) -> dict:
    """Structured content held to max_output_chars characters of JSON, as the
    text is held to max_output_chars: the largest lists are cut (the outermost first, to the share
    that fits) and the cut is said under `structured_cut`: {"limit_chars": N, "lists": {path: [kept, of]}}.

    >>> data = {"rows": [{"id": str(i)} for i in range(1000)], "total": 1000}
    >>> out = bounded_data(data, 500)
    >>> len(json.dumps(out)) <= 500, out["structured_cut"]["lists"]["rows"][1], out["total"]
    (True, 1000, 1000)
    """
    budget = max_output_chars
    size = _json_chars(data)
    if size <= budget:
        return data
    cuts: dict[str, list[int]] = {}
    for _ in range(32):  # each round cuts the largest list to its share: a few rounds at most
        lists = list(_lists(data, ""))
        if not lists:
            break
        where, items, chars = max(lists, key=lambda found: found[2])
        room = budget - 200 - (size - chars)  # 200: the note itself
        keep = max(0, min(len(items) - 1, len(items) * max(room, 0) // max(chars, 1)))
        cuts.setdefault(where, [0, len(items)])[0] = keep
        del items[keep:]
        size = _json_chars(data)
        if size <= budget - 200:
            break
    data["structured_cut"] = {"limit_chars": budget, "lists": cuts}
    return data


def _json_chars(value) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def _lists(value, where: str):
    """(path, list, its JSON characters) for every non-empty list in `value`."""
    if isinstance(value, list):
        if value:
            yield where, value, _json_chars(value)
        for i, item in enumerate(value):
            yield from _lists(item, f"{where}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _lists(item, f"{where}.{key}" if where else key)


def cell(text: str | None, settings: Settings) -> str:
    """One table cell: no pipes or newlines to break the table, at most max_cell_chars."""
    if not text:
        return ""
    # Most cells hold none of these: four scans for them cost less than four replacements.
    if "\\" in text or "|" in text or "\n" in text or "\r" in text:
        text = text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")
    return text if len(text) <= settings.max_cell_chars else clipped(text, settings.max_cell_chars)


def table(headers: Sequence[str], rows: Iterable[Sequence[str | None]], settings: Settings) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(c, settings) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def capped(text: str, settings: Settings, how_to_narrow: str) -> str:
    """The whole output held to max_output_chars, cut at a line, and the cut said."""
    return _cut(text, settings, how_to_narrow)[0]


def capped_table(
    head: str, headers: Sequence[str], rows: Sequence[Sequence[str | None]], settings: Settings, how_to_narrow: str, foot: str = ""
) -> tuple[str, int]:
    """`head`, a table of `rows` and `foot`, held to max_output_chars as `capped` does; also how many
    rows the text shows, so that the structured content can be cut to the same rows."""
    text, kept_lines = _cut(head + "\n" + table(headers, rows, settings) + foot, settings, how_to_narrow)
    above = head.count("\n") + 3  # the head's lines, the header row and the rule
    return text, max(0, min(len(rows), kept_lines - above))


def _cut(text: str, settings: Settings, how_to_narrow: str) -> tuple[str, int]:
    """The text within the cap and the number of its own lines kept."""
    limit = settings.max_output_chars
    total_lines = text.count("\n") + 1
    if len(text) <= limit:
        return text, total_lines
    cut = text.rfind("\n", 0, limit - 300)
    kept = text[: cut if cut > 0 else limit - 300]
    shown_lines = kept.count("\n") + 1
    notice = f"[Output cut at {limit} characters: {shown_lines} of {total_lines} lines shown. {how_to_narrow}]"
    return f"{kept}\n\n{notice}", shown_lines


def plural(n: int, word: str) -> str:
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word[:-1]}ies" if word.endswith("y") else f"{n} {word}s"
