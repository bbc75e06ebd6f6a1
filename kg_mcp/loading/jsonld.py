"""JSON-LD documents whose `@context` names a remote context, loaded without the network.

pyoxigraph parses JSON-LD but loads no remote context. A document that names one
(`"@context": "https://schema.org"`) has it replaced, in its text, by the `@context` of a local
copy: one the user gives (`kg-mcp load --context URL=FILE`) or one kg-mcp ships
(kg_mcp/data/jsonld/README.md says which, and their licences). Nothing is ever fetched; a context
with no local copy is a LoadError that names it and says how to give it.

Only the reference's own string is replaced, by one line of JSON, so every other byte and every
line number of the document stay as they were: the parser's errors point at the user's file.
As JSON-LD 1.1 says of remote contexts, a copy's `@base` is not used.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urljoin

import pyoxigraph as ox

from kg_mcp.loading.errors import LoadError
from kg_mcp.loading.rdf_files import read_rdf_document

SHIPPED = Path(__file__).resolve().parent.parent / "data" / "jsonld"
_SCHEMA_ORG = SHIPPED / "schema.org.jsonld"
# The spellings of schema.org's context met in published JSON-LD, all served the same context.
SHIPPED_CONTEXTS: dict[str, Path] = {
    f"{scheme}://schema.org{path}": _SCHEMA_ORG
    for scheme in ("http", "https")
    for path in ("", "/", "/docs/jsonldcontext.jsonld", "/docs/jsonldcontext.json")
}
_MAX_DEPTH = 8  # contexts naming contexts: deeper than this is a cycle or a mistake

# JSON tokens of an already valid document: strings, punctuation, and other scalars.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:,]|[^\s{}\[\]:,"]+')


class Contexts:
    """Where remote contexts come from in one load: the user's copies first, then the shipped ones.

    `given` maps a context reference, exactly as documents write it (usually a URL), to a file.
    """

    def __init__(self, given: Mapping[str, str | Path] | None = None):
        self.given = {reference: Path(file) for reference, file in (given or {}).items()}
        self._read: dict[Path, object] = {}

    def check(self) -> None:
        """Read every given copy now, so that a bad one fails the load before the store is touched."""
        for reference, file in self.given.items():
            if not reference.strip():
                raise LoadError(None, None, f"--context {reference}={file}: give the context's URL before '='")
            self.context_of(file)

    def file_for(self, reference: str) -> Path | None:
        return self.given.get(reference) or SHIPPED_CONTEXTS.get(reference)

    def context_of(self, file: Path):
        """The `@context` of a context document (read once per load)."""
        if file not in self._read:
            try:
                document = json.loads(file.read_bytes())
            except OSError as e:
                raise LoadError(file, None, f"cannot read this JSON-LD context ({e.strerror or e})") from None
            except ValueError as e:
                line = getattr(e, "lineno", None)
                raise LoadError(file, line, f"this JSON-LD context is not valid JSON ({_json_reason(e)})") from None
            if not isinstance(document, dict) or "@context" not in document:
                raise LoadError(file, None, 'a JSON-LD context file is an object with a "@context" member')
            self._read[file] = document["@context"]
        return self._read[file]


def read_jsonld(
    stream: BinaryIO, path: Path, base_iri: str | None, contexts: Contexts, prefixes: dict
) -> Iterator[ox.Quad]:
    """Quads of a JSON-LD document, its remote contexts read from local copies.

    The document is read whole, as pyoxigraph's JSON-LD parser reads it; its JSON is checked by
    that parser, which names the line of an error.
    """
    data = stream.read()
    if b"@context" not in data:
        return read_rdf_document(data, path, ox.RdfFormat.JSON_LD, base_iri, False, prefixes)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise LoadError(path, None, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    references = list(_context_references(text))
    if references:
        pieces, done = [], 0
        for start, end, reference in references:
            line = text.count("\n", 0, start) + 1
            inline = _inlined(reference, None, contexts, path, line, 0)
            pieces += [text[done:start], json.dumps(inline, ensure_ascii=False)]
            done = end
        data = "".join([*pieces, text[done:]]).encode()
    return read_rdf_document(data, path, ox.RdfFormat.JSON_LD, base_iri, False, prefixes)


def _json_reason(error: ValueError) -> str:
    return f"{error.msg}, column {error.colno}" if isinstance(error, json.JSONDecodeError) else str(error)


def _context_references(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, reference) of each string that stands where a context goes: the value of an
    `@context` member, or an item of an array that is one. Malformed JSON is read on as far as it
    goes: the parser then names its line."""
    stack: list[list] = []  # ["{", last key, a value is due] or ["[", holds contexts]
    for match in _TOKEN.finditer(text):
        token, top = match.group(), stack[-1] if stack else None
        in_context = top is not None and (top[1] == "@context" and top[2] if top[0] == "{" else top[1])
        if token in ":," and (top is None or top[0] != "{"):
            continue
        if token == ":":
            top[2] = True
        elif token == ",":
            top[2] = False
        elif token == "{":
            stack.append(["{", None, False])
        elif token == "[":
            stack.append(["[", bool(in_context)])
        elif token in "}]":
            if stack:
                stack.pop()
        elif token.startswith('"'):
            try:
                value = json.loads(token)
            except ValueError:  # a bad escape: the parser will say where
                continue
            if top is not None and top[0] == "{" and not top[2]:
                top[1] = value  # a member's name
            elif in_context:
                yield match.start(), match.end(), value


def _inlined(reference: str, base: str | None, contexts: Contexts, path: Path, line: int, depth: int):
    """The context a reference stands for, with the references inside it inlined too."""
    file = contexts.file_for(reference)
    if file is None and base is not None:
        file = contexts.file_for(urljoin(base, reference))
    if file is None:
        raise LoadError(
            path,
            line,
            f"the document names the remote JSON-LD context {reference!r}, and kg-mcp fetches nothing from "
            f"the network: save a copy and pass --context {reference}=FILE",
        )
    if depth >= _MAX_DEPTH:
        raise LoadError(path, line, f"JSON-LD contexts name each other more than {_MAX_DEPTH} deep (from {reference!r})")
    context = contexts.context_of(file)
    base = reference if base is None else urljoin(base, reference)

    def inline(value, top: bool):
        if isinstance(value, str):
            return _inlined(value, base, contexts, path, line, depth + 1)
        if isinstance(value, list):
            return [inline(item, top) for item in value]
        if isinstance(value, dict):
            return {
                key: {**term, "@context": inline(term["@context"], False)}
                if isinstance(term, dict) and "@context" in term
                else term
                for key, term in value.items()
                if not (top and key == "@base")  # a remote context's @base is not used
            }
        return value

    return inline(context, True)
