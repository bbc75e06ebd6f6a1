"""Which format a source is in, and opening it (decompressing .gz/.bz2) as a guarded byte stream."""

from __future__ import annotations

import bz2
import gzip
import io
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyoxigraph as ox

from kg_mcp.loading.errors import LoadError


@dataclass(frozen=True)
class Format:
    """A --format value: ``rdf`` is the pyoxigraph format (None for our own readers)."""

    name: str
    rdf: ox.RdfFormat | None
    line_based: bool  # one record per line, so --skip-bad can drop single lines


FORMATS = {
    f.name: f
    for f in (
        Format("nt", ox.RdfFormat.N_TRIPLES, True),
        Format("nq", ox.RdfFormat.N_QUADS, True),
        Format("ttl", ox.RdfFormat.TURTLE, False),
        Format("trig", ox.RdfFormat.TRIG, False),
        Format("rdfxml", ox.RdfFormat.RDF_XML, False),
        Format("n3", ox.RdfFormat.N3, False),
        Format("jsonld", ox.RdfFormat.JSON_LD, False),
        Format("owx", None, False),
        Format("ofn", None, False),
        Format("obo", None, False),
        Format("text", None, True),
        Format("wikidata-json", None, True),
    )
}
_ALIASES = {
    "ntriples": "nt", "n-triples": "nt", "nquads": "nq", "n-quads": "nq", "turtle": "ttl",
    "rdf-xml": "rdfxml", "rdf/xml": "rdfxml", "xml": "rdfxml", "rdf": "rdfxml", "owl": "rdfxml",
    "txt": "text", "tsv": "text", "json": "wikidata-json", "jsonl": "wikidata-json",
    "ndjson": "wikidata-json", "wikidata": "wikidata-json", "json-ld": "jsonld", "notation3": "n3",
    "owl-xml": "owx", "owlxml": "owx", "functional": "ofn", "owl-functional": "ofn", "fss": "ofn",
}  # fmt: skip
_EXTENSIONS = {
    ".nt": "nt", ".nq": "nq", ".ttl": "ttl", ".trig": "trig", ".rdf": "rdfxml", ".owl": "rdfxml",
    ".xml": "rdfxml", ".txt": "text", ".tsv": "text", ".json": "wikidata-json",
    ".jsonl": "wikidata-json", ".ndjson": "wikidata-json", ".n3": "n3", ".jsonld": "jsonld", ".owx": "owx",
    ".ofn": "ofn", ".obo": "obo",
}  # fmt: skip
_OPENERS = {".gz": gzip.open, ".bz2": bz2.open}
FORMAT_NAMES = ", ".join(FORMATS)
EXTENSION_NAMES = ", ".join(f"*{extension}" for extension in _EXTENSIONS)
QUAD_FORMATS = frozenset({"nq", "trig"})  # formats that name each statement's graph themselves


def detect_format(path: str | Path, override: str | None = None) -> Format:
    """The source's format: ``override`` (a --format value or alias), else its extension.

    >>> detect_format("latest-all.json.bz2").name
    'wikidata-json'
    """
    path = Path(path)
    if override is not None:
        key = override.strip().lower()
        name = key if key in FORMATS else _ALIASES.get(key)
        if name is None:
            raise LoadError(None, None, f"unknown --format {override!r}; use one of: {FORMAT_NAMES}")
        return FORMATS[name]
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in _OPENERS:
        suffixes.pop()
    name = _EXTENSIONS.get(suffixes[-1]) if suffixes else None
    if name is None:
        raise LoadError(
            path,
            None,
            f"cannot tell the format from the file name: name it {EXTENSION_NAMES} (.gz or .bz2 may follow), "
            f"or pass --format (one of: {FORMAT_NAMES})",
        )
    return FORMATS[name]


def check_readable(path: Path) -> None:
    """Fail before touching the store when a source is missing or is not a file."""
    if not path.exists():
        raise LoadError(path, None, "no such file")
    if not path.is_file():
        raise LoadError(path, None, "not a regular file")


class _GuardedRaw(io.RawIOBase):
    """Turns read and decompression failures into a LoadError naming the file and the line reached."""

    def __init__(self, path: Path, inner: BinaryIO, on_chunk: Callable[[bytes], None] | None = None):
        self._path, self._inner, self._newlines, self._on_chunk = path, inner, 0, on_chunk

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            data = self._inner.read(len(buffer))
        except EOFError as e:
            raise self._error(f"truncated compressed file ({e})") from e
        except (OSError, zlib.error) as e:
            raise self._error(f"cannot read ({e})") from e
        buffer[: len(data)] = data
        self._newlines += data.count(b"\n")
        if self._on_chunk is not None:
            self._on_chunk(data)
        return len(data)

    @property
    def lines(self) -> int:
        return self._newlines

    def _error(self, reason: str) -> LoadError:
        return LoadError(self._path, self._newlines + 1, reason)

    def close(self) -> None:
        self._inner.close()
        super().close()


@contextmanager
def open_source(path: Path, on_chunk: Callable[[bytes], None] | None = None) -> Iterator[BinaryIO]:
    """The source's bytes, decompressed according to its last suffix (.gz, .bz2).

    `on_chunk` sees every chunk read (progress, hub sampling); `stream.raw.lines` counts newlines.
    """
    opener = _OPENERS.get(path.suffix.lower(), open)
    try:
        inner = opener(path, "rb")
    except OSError as e:
        raise LoadError(path, None, f"cannot open ({e.strerror or e})") from e
    with io.BufferedReader(_GuardedRaw(path, inner, on_chunk), buffer_size=1 << 20) as stream:
        yield stream
