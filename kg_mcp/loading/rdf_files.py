"""RDF sources parsed by pyoxigraph: line-based ones in batches (so --skip-bad can drop single
lines), whole documents (Turtle, TriG, RDF/XML, N3, JSON-LD) in one streaming parse; either way
each file's blank nodes get identities of their own (kg_mcp.loading.blank_labels)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pyoxigraph as ox

from kg_mcp.loading.blank_labels import FileBlankNodes
from kg_mcp.loading.errors import BadLines, LoadError

_BATCH_BYTES = 1 << 20
# pyoxigraph reads an N3 formula as a graph named by a blank node: statements quoted, not asserted.
_N3_FORMULA = (
    "N3 formulas ({ ... }) and rules (=>) state nothing about the data and are not loaded: "
    "remove them, or convert the file to Turtle"
)
_POSITION = re.compile(r"^Parser error (?:at|between) [^:]*: ")


def syntax_reason(error: SyntaxError) -> str:
    message = _POSITION.sub("", str(error.msg or error))
    return f"{message} (column {error.offset})" if error.offset else message


def read_rdf_lines(
    stream: BinaryIO, path: Path, fmt: ox.RdfFormat, base_iri: str | None, bad: BadLines
) -> Iterator[ox.Quad]:
    """Quads of an N-Triples / N-Quads stream; each bad line is raised or skipped via ``bad``.

    A blank-node label names one node throughout the stream, whichever batch it is read in, and
    no node of another file or of an earlier load.
    """
    blanks = FileBlankNodes()
    first = 1
    while lines := stream.readlines(_BATCH_BYTES):
        quads = _parse_batch(lines, first, path, fmt, base_iri, bad)
        # a batch without "_:" has no blank node: its quads need no look at all
        yield from blanks.quads(quads) if b"_:" in b"".join(lines) else quads
        first += len(lines)


# Parsed after a line checked alone: a line missing its final dot fails only when something follows.
_SENTINEL = b"\n<urn:kg-mcp:sentinel> <urn:kg-mcp:sentinel> <urn:kg-mcp:sentinel> .\n"


def _fails_alone(line: bytes, fmt, base_iri) -> SyntaxError | None:
    result = _parse(line.rstrip(b"\r\n") + _SENTINEL, fmt, base_iri)
    return result if isinstance(result, SyntaxError) else None


def _parse(data: bytes, fmt, base_iri) -> list[ox.Quad] | SyntaxError:
    try:
        return list(ox.parse(input=data, format=fmt, base_iri=base_iri))
    except SyntaxError as e:
        return e


def _parse_batch(lines, first, path, fmt, base_iri, bad) -> Iterator[ox.Quad]:
    pending = [(0, len(lines))]  # line ranges still to parse, last = next in file order
    while pending:
        lo, hi = pending.pop()
        if lo >= hi:
            continue
        result = _parse(b"".join(lines[lo:hi]), fmt, base_iri)
        if not isinstance(result, SyntaxError):
            yield from result
            continue
        # Every statement sits on one line, so a line is bad iff it fails alone. The error's line
        # is where the parser noticed; a missing dot is noticed one line late, so look back from it.
        hint = lo + result.lineno - 1 if result.lineno else hi - 1
        hint = min(max(hint, lo), hi - 1)
        culprit = error = None
        for i in [*range(hint, lo - 1, -1), *range(hint + 1, hi)]:
            alone = _fails_alone(lines[i], fmt, base_iri)
            if alone is not None:
                culprit, error = i, alone
                break
        if culprit is None:  # no single line fails: blame the parser's line rather than loop
            culprit, error = hint, result
        bad.handle(LoadError(path, first + culprit, syntax_reason(error)))
        pending.extend([(culprit + 1, hi), (lo, culprit)])


def read_rdf_document(
    stream: BinaryIO | bytes, path: Path, fmt: ox.RdfFormat, base_iri: str | None, skip_bad: bool, prefixes: dict
) -> Iterator[ox.Quad]:
    """Quads of a Turtle / TriG / RDF/XML / N3 / JSON-LD document, its blank nodes renamed for this
    load; its @prefix declarations are added to ``prefixes``."""
    parser = ox.parse(input=stream, format=fmt, base_iri=base_iri, rename_blank_nodes=True)
    try:
        for quad in parser:
            if fmt == ox.RdfFormat.N3 and isinstance(quad.graph_name, ox.BlankNode):
                raise LoadError(path, None, _N3_FORMULA)
            yield quad
    except SyntaxError as e:
        hint = (
            "; --skip-bad applies only to line-based formats (nt, nq, text, wikidata-json)"
            if skip_bad
            else ""
        )
        raise LoadError(path, e.lineno, syntax_reason(e) + hint) from None
    for prefix, iri in parser.prefixes.items():
        if prefix:  # the empty prefix means something different in every file
            prefixes.setdefault(prefix, iri)


def bulk_load_lines(
    store: ox.Store, stream: BinaryIO, path: Path, fmt: ox.RdfFormat, base_iri: str | None, into: ox.NamedNode | None = None
) -> None:
    """Load an N-Triples stream with pyoxigraph's native bulk loader (no Python per triple), into the
    named graph `into` (None: the default graph).

    Used when no line may be skipped: the first syntax error stops the load, and the line to
    blame is found by re-reading the few lines around the parser's position.
    """
    try:
        store.bulk_load(input=stream, format=fmt, base_iri=base_iri, to_graph=into)
    except SyntaxError as error:
        line, culprit = blame_line(path, fmt, base_iri, error)
        raise LoadError(path, line, syntax_reason(culprit)) from None


def blame_line(
    path: Path, fmt: ox.RdfFormat, base_iri: str | None, error: SyntaxError
) -> tuple[int | None, SyntaxError]:
    """The line at fault and its own error: a missing dot is noticed one line late."""
    from kg_mcp.loading.sources import open_source

    if not error.lineno:
        return None, error
    first = max(1, error.lineno - 1)
    with open_source(path) as stream:
        for number, line in enumerate(stream, 1):
            if number < first:
                continue
            if number > error.lineno:
                break
            alone = _fails_alone(line, fmt, base_iri)
            if alone is not None:
                return number, alone
    return error.lineno, error
