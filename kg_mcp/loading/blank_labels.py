"""Blank-node labels scoped to the document that wrote them.

RDF scopes a label such as `_:b0` to its document: two files (or one file loaded twice) that both
write `_:b0` mean two different nodes. Every load therefore gives each source file's blank nodes
identities of their own:

- documents parsed whole (Turtle, TriG, RDF/XML, N3, JSON-LD, the OWL syntaxes) by pyoxigraph's
  parser with `rename_blank_nodes`: one parser, one mapping, per file;
- N-Triples and N-Quads parsed in batches by `FileBlankNodes`: each label is hashed with a key
  drawn for this file in this load, so a label names the same node in every batch of the file
  without a table that grows with the file;
- N-Triples handed to pyoxigraph's bulk loader, which always renames, by a single parser per file
  whenever the file may hold a blank node (`may_hold_blank_nodes`): a parallel parse would give
  each slice of the file a mapping of its own, splitting a node written in two slices.

Wikidata JSON's blank nodes are not labels of a document but names derived from what they stand
for (kg_mcp.loading.wikidata_json), so a second load of an entity adds nothing: they are kept.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyoxigraph as ox


class FileBlankNodes:
    """The blank nodes of one source file in one load: `node(label)` is the same for the same label
    within the file, and shared with no other file or load (a fresh 128-bit key each time).

    >>> one, two = FileBlankNodes(), FileBlankNodes()
    >>> one.node("b0") == one.node("b0"), one.node("b0") == two.node("b0")
    (True, False)
    """

    def __init__(self) -> None:
        self._key = secrets.token_bytes(16)

    def node(self, label: str) -> ox.BlankNode:
        digest = hashlib.blake2b(label.encode(), key=self._key, digest_size=16).digest()
        # Lowercase hex without leading zeros: Oxigraph keeps such ids as 128-bit numbers, as it
        # does the ids its own parser draws.
        return ox.BlankNode(format(int.from_bytes(digest, "big") or 1, "x"))

    def quads(self, quads: Iterable[ox.Quad]) -> Iterator[ox.Quad]:
        """`quads` with every blank node (subject, object, graph name, inside a triple term) renamed."""
        for quad in quads:
            subject, obj, graph = quad.subject, quad.object, quad.graph_name
            if isinstance(subject, ox.BlankNode) or isinstance(obj, (ox.BlankNode, ox.Triple)) or isinstance(
                graph, ox.BlankNode
            ):
                yield ox.Quad(
                    self._term(subject),
                    quad.predicate,
                    self._term(obj),
                    self.node(graph.value) if isinstance(graph, ox.BlankNode) else graph,
                )
            else:
                yield quad

    def _term(self, term):
        if isinstance(term, ox.BlankNode):
            return self.node(term.value)
        if isinstance(term, ox.Triple):
            return ox.Triple(self._term(term.subject), term.predicate, self._term(term.object))
        return term


_SCAN_CHUNK = 8 * 1024 * 1024  # bytes read at a time by may_hold_blank_nodes


def may_hold_blank_nodes(path: Path) -> bool:
    """Whether an uncompressed N-Triples file has `_:` anywhere (a blank node, or those two
    characters inside a literal or an IRI: then it is only parsed a little more slowly).

    One pass over the file in chunks of _SCAN_CHUNK, stopping at the first hit. Not mapped: the
    pages of a mapping count in the process's resident memory (a 12 GB file showed as 12 GB of
    peak RSS), and a chunk read once leaves nothing behind.
    """
    carry = b""
    with open(path, "rb", buffering=0) as file:
        while chunk := file.read(_SCAN_CHUNK):
            if (carry + chunk[:1]).find(b"_:") != -1 or chunk.find(b"_:") != -1:
                return True
            carry = chunk[-1:]
    return False
