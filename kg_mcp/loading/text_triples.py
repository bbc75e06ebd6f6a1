"""Plain-text triple files (MetaQA ``head|rel|tail``, PathQuestion ``s<TAB>r<TAB>o``) as RDF.

Names are not IRIs: each distinct name is minted into a namespace under the load's base IRI and
keeps its original text as its rdfs:label.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pyoxigraph as ox

from kg_mcp.loading.errors import BadLines, LoadError
from kg_mcp.namespaces import RDFS_LABEL

_LABEL = ox.NamedNode(RDFS_LABEL)


def _encode(name: str, space: str | None, keep: str) -> str:
    out = []
    for ch in name:
        # Letters/digits stay readable; from U+00C0 on, as Turtle's PN_CHARS_BASE allows, so that
        # the minted local name is also a valid prefixed name (kg:Catch_Me_If_You_Can).
        if ch == " " and space is not None:
            out.append(space)
        elif ch in keep or (ch.isalnum() and (ch.isascii() or ord(ch) >= 0xC0)):
            out.append(ch)
        else:
            out.append("".join(f"%{b:02X}" for b in ch.encode("utf-8")))
    # A prefixed name may not start with '.'/'-' nor end with '.'.
    if out and out[0] in (".", "-"):
        out[0] = f"%{ord(out[0]):02X}"
    if out and out[-1] == ".":
        out[-1] = "%2E"
    return "".join(out)


def mint_local_name(name: str) -> str:
    """The IRI local name minted for a plain-text name: spaces become ``_``, the rest is %-encoded.

    Letters, digits, ``_``, ``-`` and ``.`` are kept (but not a leading ``.``/``-`` or a trailing
    ``.``); any other character becomes its UTF-8 ``%XX`` bytes.

    >>> mint_local_name("Catch Me If You Can")
    'Catch_Me_If_You_Can'
    >>> mint_local_name("Amélie (2001)")
    'Amélie_%282001%29'
    >>> mint_local_name("Jr.")
    'Jr%2E'
    """
    return _encode(name, "_", "_-.")


def _fully_encoded(name: str) -> str:
    # The fallback on a clash: '_' and ' ' both encoded (%5F, %20), which no mint_local_name
    # result contains, so fallbacks never clash with either kind of name.
    return _encode(name, None, "-.")


class TextMinter:
    """One IRI per distinct name in one namespace, injective within a load; labels emitted once."""

    def __init__(self, namespace: str):
        self.namespace = namespace
        self._nodes: dict[str, ox.NamedNode] = {}
        self._names: dict[str, str] = {}  # local name -> the name that got it

    def node(self, name: str, labels: list[ox.Quad]) -> ox.NamedNode:
        """The node for ``name``; a new node's rdfs:label quad is appended to ``labels``."""
        node = self._nodes.get(name)
        if node is None:
            local = mint_local_name(name)
            if self._names.setdefault(local, name) != name:
                local = _fully_encoded(name)
                self._names[local] = name
            node = self._nodes[name] = ox.NamedNode(self.namespace + local)
            labels.append(ox.Quad(node, _LABEL, ox.Literal(name)))
        return node


def read_text_triples(
    stream: BinaryIO, path: Path, entities: TextMinter, relations: TextMinter, bad: BadLines
) -> Iterator[ox.Quad]:
    """Quads for each ``head|rel|tail`` or tab-separated line, plus labels for new names."""
    sep = None
    for lineno, raw in enumerate(stream, 1):
        try:
            line = raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as e:
            bad.handle(LoadError(path, lineno, f"not valid UTF-8 (byte {e.start})"))
            continue
        if lineno == 1:
            line = line.removeprefix("\ufeff")
        if not line.strip():
            continue
        if sep is None:  # decided once per file: a name may contain the other separator
            sep = "|" if line.count("|") == 2 else "\t"
        fields = line.split(sep)
        if len(fields) != 3:
            bad.handle(
                LoadError(path, lineno, f"expected 3 fields separated by '|' or TAB, got {len(fields)}")
            )
            continue
        if not all(f.strip() for f in fields):
            bad.handle(LoadError(path, lineno, "empty field"))
            continue
        labels: list[ox.Quad] = []
        head, rel, tail = (
            entities.node(fields[0], labels),
            relations.node(fields[1], labels),
            entities.node(fields[2], labels),
        )
        yield ox.Quad(head, rel, tail)
        yield from labels
