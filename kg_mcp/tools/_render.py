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

from kg_mcp.backends import Backend, Direction, Neighbour
from kg_mcp.backends.base import Term
from kg_mcp.quoting import clipped
from kg_mcp.settings import Settings
from kg_mcp.tools._nested import Nested

# A literal's text or a label in the structured content is cut here (the markdown cuts cells at
# max_cell_chars): a KG value of megabytes must not ride along whole.
MAX_VALUE_CHARS = 1_000
_MIDNIGHT = re.compile(r"^(-?\d{1,}-\d\d-\d\d)T00:00:00Z$")
_XSD_DATETIME = "http://www.w3.org/2001/XMLSchema#dateTime"


@dataclass
class ToolOutput:
    text: str
    data: BaseModel
    limit_chars: int | None = None  # the structured content's bound when not max_output_chars (values read whole)


class TermOut(BaseModel):
    """A node or literal as the app sees it: the compact id (or literal text) and its label.

    A blank node's id is its handle (`_:b12`), which every tool takes back, or "" where the KG
    offers no way to name one; its label is its content, inline (`[ sh:path ex:p ; sh:minCount 1 ]`,
    a list as `( ex:a ex:b )`)."""

    id: str
    label: str | None = None
    kind: str = "iri"  # iri, literal or blank
    datatype: str | None = None
    language: str | None = None
    length: int | None = None  # a literal cut in `id`: its whole length in characters


class Described(str):
    """A blank node's inline description: bounded by its own limits (max_nested_chars), so a
    table cell does not cut it again at max_cell_chars."""


class Namer:
    """Labels for many terms fetched in one backend call, then rendered consistently."""

    def __init__(self, backend: Backend, settings: Settings, terms: Iterable[Term] = ()):
        self.backend = backend
        self.settings = settings
        self._labels: dict[Term, str] = {}
        self._nested: Nested | None = None  # made at the first blank node: most calls have none
        self.whole_chars = MAX_VALUE_CHARS  # a literal's text in the structured content is cut here
        self.add(terms)

    @property
    def nested(self) -> Nested:
        if self._nested is None:
            self._nested = Nested(self.backend, self.id, self.settings.max_nested_chars)
        return self._nested

    def add(self, terms: Iterable[Term]) -> None:
        todo, blank = [], []
        for t in dict.fromkeys(terms):  # one pass: every call of every tool names its terms here
            if isinstance(t, ox.NamedNode):
                if t not in self._labels:
                    todo.append(t)
            elif isinstance(t, ox.BlankNode):
                blank.append(t)
        if todo:
            self._labels.update(self.backend.labels(todo))
        if blank:
            self.nested.add(blank)

    def label(self, term: Term) -> str | None:
        """A node's label; a blank node's inline description where its handle is the id shown."""
        label = self._labels.get(term)
        if label is None and isinstance(term, ox.BlankNode):
            return self.description(term) if self.blank_handles(term) else None
        return label

    def description(self, term: ox.BlankNode) -> Described:
        self.nested.add([term])
        return Described(self.nested.text(term))

    def blank_handles(self, example: ox.BlankNode) -> bool:
        """Whether blank nodes are shown by their handle (the KG can name them in a query)."""
        return self.nested.addressable(example)

    def id(self, term: Term) -> str:
        return self.backend.vocab.compact(term)

    def out(self, term: Term) -> TermOut:
        return TermOut.model_validate(self.term(term))

    def term(self, term: Term) -> dict:
        """A TermOut as plain data. Tools build their results as plain data and validate them once,
        in pydantic's compiled core: several times cheaper than building each model in Python."""
        if isinstance(term, ox.Literal):
            datatype = self.id(term.datatype) if not term.language else None
            cut = len(term.value) > self.whole_chars
            return {
                "id": clipped(term.value, self.whole_chars), "label": None, "kind": "literal", "datatype": datatype,
                "language": term.language, "length": len(term.value) if cut else None,
            }
        if isinstance(term, ox.BlankNode):
            handle = self.id(term) if self.blank_handles(term) else ""
            return {"id": handle, "label": str(self.description(term)), "kind": "blank", "datatype": None, "language": None,
                    "length": None}
        label = self.label(term)
        return {"id": self.id(term), "label": clipped(label, MAX_VALUE_CHARS), "kind": "iri", "datatype": None, "language": None,
                "length": None}

    def value_text(self, term: Term) -> str:
        """What the markdown shows for a value: ids as ids, literals as their text (dates shortened),
        a blank node as its handle, or as its description where it has no handle."""
        if isinstance(term, ox.Literal):
            if term.datatype.value == _XSD_DATETIME:
                match = _MIDNIGHT.match(term.value)
                if match:
                    return match.group(1)
            return term.value
        if isinstance(term, ox.BlankNode) and not self.blank_handles(term):
            return self.description(term)
        return self.id(term)

    def predicate_label(self, predicate: ox.NamedNode) -> str:
        """A predicate's label, or its local name when the KG gives none."""
        label = self.label(predicate)
        if label:
            return label
        compact = self.id(predicate)
        return re.split(r"[:/#]", compact.strip("<>"))[-1]

    def heading(self, node: ox.NamedNode) -> str:
        if isinstance(node, ox.BlankNode):
            return f"{self.id(node)} {self.description(node)}"
        label = self.label(node)
        return f"{self.id(node)} ({label})" if label else self.id(node)


def value_label(namer: Namer, row: Neighbour) -> str:
    """A row's valueLabel cell; qualifiers ride along in it: "St John's College [start time: 1971; end time: 1974]"."""
    label = namer.label(row.value) or ""
    if not row.qualifiers:
        return label
    parts = "; ".join(
        f"{namer.predicate_label(qual.predicate)}: {namer.label(qual.value) or namer.value_text(qual.value)}"
        for qual in row.qualifiers
    )
    return f"{label} [{parts}]".strip()


def relation_name(namer: Namer, predicate: ox.NamedNode, direction: Direction) -> str:
    """A relation as the tools write it: `rel` outgoing, `~rel` walked backwards."""
    name = namer.id(predicate)
    return name if direction is Direction.OUTGOING else f"~{name}"


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


# How a cut value ends: what was shown of how much (`capped` adds how to read the rest).
CUT_MARK = "…[{shown:,} of {total:,} chars]"
_CUT_MARK = re.compile(r"…\[[\d,]+ of [\d,]+ chars\]")
READ_WHOLE = (
    "Values ending in …[N of M chars] are cut: search their entity with properties_to_filter_for=[their "
    "property] (that one only) to read them whole."
)


def cut_text(text: str, limit: int) -> str:
    """`text` within about `limit` characters; a cut one ends in CUT_MARK.

    >>> cut_text("abcdefghij" * 3, 25)
    'abcdefgh…[8 of 30 chars]'
    """
    if len(text) <= limit:
        return text
    keep = max(1, limit - len(CUT_MARK.format(shown=limit, total=len(text))))
    return text[:keep] + CUT_MARK.format(shown=keep, total=len(text))


def cell(text: str | None, settings: Settings) -> str:
    """One table cell, at most max_cell_chars of the value (a blank node's description has its own
    bound), cut as CUT_MARK says. Pipes are escaped, and so are line breaks, as `\\n`: a raw one would
    end the table row, and a model reads `\\n` as the line break it is (a backslash of the value
    itself is doubled, so the two never mix). HTML such as `<br>` would mix with the HTML that
    published RDF puts in its comments."""
    if not text:
        return ""
    limit = settings.max_nested_chars if isinstance(text, Described) else settings.max_cell_chars
    # Most cells are short and hold nothing to escape: four scans cost less than the replacements.
    if len(text) <= limit and not ("\\" in text or "|" in text or "\n" in text or "\r" in text):
        return str(text)
    shown = cut_text(text, limit)
    mark = ""
    if shown is not text:
        shown, mark = shown[: shown.rindex("…[")], shown[shown.rindex("…[") :]
    escaped = shown.replace("\\", "\\\\").replace("|", "\\|").replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")
    return escaped + mark


def table(headers: Sequence[str], rows: Iterable[Sequence[str | None]], settings: Settings) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(c, settings) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def capped(text: str, settings: Settings, how_to_narrow: str, *, limit: int | None = None, read_whole: bool = True) -> str:
    """The whole output held to max_output_chars (or `limit`), cut at a line, and the cut said;
    where values were cut, how to read them whole (unless not `read_whole`: they are given whole)."""
    return _cut(text, settings, how_to_narrow, limit, read_whole)[0]


def capped_table(
    head: str, headers: Sequence[str], rows: Sequence[Sequence[str | None]], settings: Settings, how_to_narrow: str, foot: str = ""
) -> tuple[str, int]:
    """`head`, a table of `rows` and `foot`, held to max_output_chars as `capped` does; also how many
    rows the text shows, so that the structured content can be cut to the same rows."""
    text, kept_lines = _cut(head + "\n" + table(headers, rows, settings) + foot, settings, how_to_narrow)
    above = head.count("\n") + 3  # the head's lines, the header row and the rule
    return text, max(0, min(len(rows), kept_lines - above))


def _cut(text: str, settings: Settings, how_to_narrow: str, limit: int | None = None, read_whole: bool = True) -> tuple[str, int]:
    """The text within the cap and the number of its own lines kept; a note on reading cut values whole."""
    limit = limit or settings.max_output_chars
    note = f"\n{READ_WHOLE}" if read_whole and _CUT_MARK.search(text) else ""
    total_lines = text.count("\n") + 1
    if len(text) + len(note) <= limit:
        return text + note, total_lines
    cut = text.rfind("\n", 0, limit - 300 - len(note))
    kept = text[: cut if cut > 0 else limit - 300 - len(note)]
    shown_lines = kept.count("\n") + 1
    notice = f"[Output cut at {limit} characters: {shown_lines} of {total_lines} lines shown. {how_to_narrow}]"
    return f"{kept}{note}\n\n{notice}", shown_lines


def plural(n: int, word: str) -> str:
    if n == 1:
        return f"{n} {word}"
    return f"{n} {word[:-1]}ies" if word.endswith("y") else f"{n} {word}s"
