"""Blank nodes shown as what they say: a bounded, Turtle-like description read inline.

A SHACL property shape reads `[ sh:path brick:lastKnownValue ; sh:class rec:TemperatureObservation ;
sh:maxCount 1 ]`, an OWL restriction `[ a owl:Restriction ; owl:onProperty ex:p ; owl:hasValue ex:v ]`,
an RDF list `( ex:a ex:b ex:c )`. Every bound says where it cut: `… 4 more` after the values
left out of a node, `… 12 more items` in a list (`12+` past LIST_COUNTED), `[ … more inside: _:b1 ]` where nesting gets too
deep (with the handle that reads the rest, where the KG can name its blank nodes), and literals
cut as `"text…" (80 of 294 characters)`.

The content is read level by level over the backend interface, a few reads per call: a list's
cells do not count as nesting, so a list is read to its LIST_ITEMS-th item at any depth.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pyoxigraph as ox

from kg_mcp.backends import Backend, Direction

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
_FIRST, _REST, _NIL, _TYPE = (ox.NamedNode(RDF + n) for n in ("first", "rest", "nil", "type"))
_LIST = ox.NamedNode(RDF + "List")
_XSD = "http://www.w3.org/2001/XMLSchema#"
_BARE = {_XSD + t for t in ("integer", "decimal", "double", "boolean")}

MAX_DEPTH = 3  # blank nodes inside blank nodes, below the one shown
ITEMS = 12  # values shown per blank node
LIST_ITEMS = 25  # items shown per list
LIST_COUNTED = 200  # cells of a list read to count the items not shown
LITERAL_CHARS = 100  # characters of a literal inside a description
READ_AT_MOST = 2000  # blank nodes read for one call's descriptions (the ones shown first, then those inside)
_EDGES_READ = 64  # outgoing edges read per blank node (ITEMS are shown; the rest are counted)


class Nested:
    """Descriptions of the blank nodes one tool call shows, read once."""

    def __init__(self, backend: Backend, compact: Callable[[ox.NamedNode], str], chars: int):
        self.backend = backend
        self.compact = compact
        self.chars = chars
        self.content: dict[ox.BlankNode, list[tuple[ox.NamedNode, object]]] = {}
        self._texts: dict[ox.BlankNode, str] = {}
        self._addressable: bool | None = None

    def addressable(self, example: ox.BlankNode) -> bool:
        """Whether handles of blank nodes can be shown (the backend takes them back)."""
        if self._addressable is None:
            self._addressable = self.backend.addresses_blank_nodes(example)
        return self._addressable

    def add(self, nodes: Iterable[ox.BlankNode]) -> None:
        """Read the content of `nodes` and of the blank nodes inside them, to the bounds."""
        todo = [(n, 0, 0) for n in dict.fromkeys(nodes) if n not in self.content]
        if not todo or not self.addressable(todo[0][0]):
            return
        while todo and len(self.content) < READ_AT_MOST:
            # (node, nesting depth, position in its list): a list's next cell is not deeper
            level, todo = todo[: READ_AT_MOST - len(self.content)], []
            self.backend.read_blank_nodes([node for node, _, _ in level if node not in self.content])
            for node, depth, position in level:
                if node in self.content:
                    continue
                edges = self.backend.neighbours(node, Direction.OUTGOING, None, _EDGES_READ)
                self.content[node] = [(e.predicate, e.value) for e in edges]
                for predicate, value in self.content[node]:
                    if not isinstance(value, ox.BlankNode) or value in self.content:
                        continue
                    if predicate == _REST:
                        if position + 1 < LIST_COUNTED:
                            todo.append((value, depth, position + 1))
                    elif depth < MAX_DEPTH and position < LIST_ITEMS:
                        todo.append((value, depth + 1, 0))

    def text(self, node: ox.BlankNode) -> str:
        """The description of `node` (read by `add`), at most `chars` characters."""
        if node not in self._texts:
            text = self._node(node, 0, frozenset(), [self.chars])
            if len(text) > self.chars:  # the budget is kept item by item: the last one may overrun it
                text = text[: self.chars - 4] + " … ]"
            self._texts[node] = text
        return self._texts[node]

    # --- writing -----------------------------------------------------------------------------
    def _node(self, node: ox.BlankNode, depth: int, inside: frozenset, room: list[int]) -> str:
        content = self.content.get(node)
        if content is None or node in inside or depth > MAX_DEPTH:
            return self._unread(node)
        items = self._list_items(node)
        if items is not None:
            return self._list(items, depth, inside | {node}, room)
        grouped: dict[ox.NamedNode, list] = {}
        for predicate, value in sorted(content, key=lambda edge: edge[0] != _TYPE):
            grouped.setdefault(predicate, []).append(value)
        parts: list[str] = []
        shown = 0
        total = len(content)
        room[0] -= 4  # "[ " and " ]"
        for predicate, values in grouped.items():
            name = "a" if predicate == _TYPE else self.compact(predicate)
            written = []
            for value in values:
                if shown >= ITEMS or room[0] <= 0:
                    break
                text = self._value(value, depth + 1, inside | {node}, room)
                room[0] -= len(text) + 2
                written.append(text)
                shown += 1
            if written:
                part = f"{name} {', '.join(written)}"
                room[0] -= len(name) + 3
                parts.append(part)
            if shown >= ITEMS or room[0] <= 0:
                break
        if shown < total:
            parts.append(f"… {total - shown} more" + ("" if len(content) < _EDGES_READ else "+"))
        return "[ " + " ; ".join(parts) + " ]" if parts else "[]"

    def _list(self, items: list, depth: int, inside: frozenset, room: list[int]) -> str:
        complete = bool(items) and items[-1] is None  # read to rdf:nil
        items = [i for i in items if i is not None]
        written = []
        for value in items[:LIST_ITEMS]:
            if room[0] <= 0:
                break
            text = self._value(value, depth + 1, inside, room)
            room[0] -= len(text) + 1
            written.append(text)
        left = len(items) - len(written)
        tail = f" … {left:,}{'' if complete else '+'} more items" if left else "" if complete else " … more items"
        return "( " + " ".join(written) + tail + " )"

    def _list_items(self, node: ox.BlankNode) -> list | None:
        """The items of the list starting at `node` (None at the end when it ends at rdf:nil), or
        None when `node` is not a well-formed list cell."""
        items: list = []
        cell, seen = node, set()
        while True:
            if cell == _NIL:
                items.append(None)
                return items
            content = self.content.get(cell) if isinstance(cell, ox.BlankNode) else None
            if content is None or cell in seen:  # not read (past the bound), or a cycle
                return items if items else None
            seen.add(cell)
            firsts = [v for p, v in content if p == _FIRST]
            rests = [v for p, v in content if p == _REST]
            others = [(p, v) for p, v in content if p not in (_FIRST, _REST) and not (p == _TYPE and v == _LIST)]
            if len(firsts) != 1 or len(rests) != 1 or others:
                return items if items else None
            items.append(firsts[0])
            cell = rests[0]

    def _value(self, value, depth: int, inside: frozenset, room: list[int]) -> str:
        if isinstance(value, ox.BlankNode):
            return self._node(value, depth, inside, room)
        if isinstance(value, ox.Literal):
            return literal_text(value, self.compact)
        return self.compact(value)

    def _unread(self, node: ox.BlankNode) -> str:
        if self._addressable:
            return f"[ … more inside: _:{node.value} ]"
        return "[ a blank node: this endpoint offers no way to read it ]"


def literal_text(value: ox.Literal, compact: Callable[[ox.NamedNode], str]) -> str:
    """A literal as Turtle writes it, cut at LITERAL_CHARS with the cut said: `"text…" (100 of 294 characters)`.

    >>> literal_text(ox.Literal("chiller", language="en"), str), literal_text(ox.Literal("1", datatype=ox.NamedNode(_XSD + "integer")), str)
    ('"chiller"@en', '1')
    """
    text = value.value
    cut = ""
    if len(text) > LITERAL_CHARS:  # the cut said as a table cell says it (kg_mcp.tools._render.CUT_MARK)
        cut = f"…[{LITERAL_CHARS:,} of {len(text):,} chars]"
        text = text[:LITERAL_CHARS]
    datatype = value.datatype.value
    if datatype in _BARE and not cut:
        return text
    if value.language:
        return f'"{text}"@{value.language}{cut}'
    if datatype in (_XSD + "string", RDF + "langString"):
        return f'"{text}"{cut}'
    return f'"{text}"^^{compact(value.datatype)}{cut}'
