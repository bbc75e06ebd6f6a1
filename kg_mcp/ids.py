"""Compact ids: IRIs shown as `wd:Q42`, `m.0v1xv` or `directed_by`, and read back from what a model types.

Everything a model sends passes through `Vocabulary.parse` before it can reach a query. The
result is a pyoxigraph term, and queries are written with the term's own N-Triples
serialisation, so user text is never pasted into SPARQL.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pyoxigraph as ox

from kg_mcp.errors import InvalidInput
from kg_mcp.profiles import Profile
from kg_mcp.quoting import quoted

MAX_REF_LENGTH = 2048
# A local part we can show after a prefix and read back unambiguously (percent escapes allowed).
_SAFE_LOCAL = re.compile(r"[\w\-.%]*[\w\-%]|[\w%]", re.UNICODE)
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ABSOLUTE_SCHEMES = ("http", "https", "urn", "ftp", "mailto", "file", "tag", "did")


class Vocabulary:
    """Prefixes of one KG: compacts IRIs for output and expands ids from input.

    >>> from kg_mcp.profiles import WIKIDATA
    >>> v = Vocabulary(WIKIDATA)
    >>> v.compact(ox.NamedNode("http://www.wikidata.org/entity/Q42"))
    'wd:Q42'
    >>> v.parse("Q42").value
    'http://www.wikidata.org/entity/Q42'
    >>> v.parse("Douglas Adams") is None  # not an id: the caller looks it up by label
    True
    """

    def __init__(self, profile: Profile, prefixes: dict[str, str] | None = None, bare: list[str] | None = None):
        self.profile = profile
        self.prefixes = {**profile.prefixes, **(prefixes or {})}
        self.bare_namespaces = [ns for ns in [*(bare or []), profile.bare_namespace] if ns]
        # Longest namespace first, so wdt: wins over p: for .../prop/direct/P19.
        self._by_length = sorted(((ns, pfx) for pfx, ns in self.prefixes.items()), key=lambda x: -len(x[0]))
        self._compact_cache: dict[str, str] = {}
        # Where a namespace came from, when not from the profile: "store", "setting", "void", "sample".
        self.sources: dict[str, str] = {}
        # How a blank-node handle (`_:label`) becomes a term, set by the backend that can address
        # its blank nodes (a local store, or an engine that offers a way); None: it cannot.
        self.blank_node: Callable[[str], ox.BlankNode] | None = None

    def compact(self, term: ox.NamedNode | ox.BlankNode | ox.Literal) -> str:
        """The shortest id that `parse` reads back as the same term; literals become their text."""
        if isinstance(term, ox.Literal):
            return term.value
        if isinstance(term, ox.BlankNode):
            return f"_:{term.value}"
        iri = term.value
        cached = self._compact_cache.get(iri)
        if cached is None:
            if len(self._compact_cache) > 100_000:
                self._compact_cache.clear()
            cached = self._compact_cache[iri] = self._compact_iri(iri)
        return cached

    def _compact_iri(self, iri: str) -> str:
        for ns in self.bare_namespaces:
            if iri.startswith(ns) and _SAFE_LOCAL.fullmatch(iri[len(ns) :]) and ":" not in iri[len(ns) :]:
                return iri[len(ns) :]
        for ns, prefix in self._by_length:
            if iri.startswith(ns) and _SAFE_LOCAL.fullmatch(iri[len(ns) :]):
                return f"{prefix}:{iri[len(ns):]}"
        return f"<{iri}>"

    def parse(self, ref: str) -> ox.NamedNode | ox.BlankNode | None:
        """The IRI an id stands for (or the blank node a `_:` handle stands for, where the backend
        can address blank nodes), or None when `ref` is not id-shaped (then it may be a label).

        Raises InvalidInput for text that can never be a valid reference.
        """
        ref = check_text(ref, "id")
        if ref.startswith("<"):
            if not ref.endswith(">"):
                raise InvalidInput(f"{quoted(ref)} opens '<' but does not close it.", "Write a full IRI as <http://...>.")
            return _named_node(ref[1:-1])
        if ref.startswith("_:"):
            return self._blank(ref)
        if " " in ref:
            return None
        scheme = _SCHEME.match(ref)
        if scheme:
            prefix, local = ref.split(":", 1)
            if prefix in self.prefixes:
                if not _SAFE_LOCAL.fullmatch(local):
                    raise InvalidInput(f"{quoted(ref)} is not a valid {prefix}: id.", "Copy ids exactly as the tools show them.")
                return _named_node(self.prefixes[prefix] + local)
            if prefix.lower() in _ABSOLUTE_SCHEMES:
                return _named_node(ref)
            return None  # "Star Wars: Episode IV" — a name with a colon
        bare = self.profile.bare_id(ref)
        if bare:
            return _named_node(bare)
        return None

    def _blank(self, ref: str) -> ox.BlankNode:
        if self.blank_node is None:
            raise InvalidInput(
                f"{quoted(ref)} is a blank node, and this KG offers no way to name a blank node in a query.",
                "Read it through the entity that links to it: its content is shown inline there, and follow walks through it.",
            )
        try:
            node = ox.BlankNode(ref[2:])
        except ValueError:
            raise InvalidInput(f"{quoted(ref)} is not a blank-node handle.", "Copy handles exactly as the tools show them.") from None
        return self.blank_node(node.value)

    def parse_relation(self, ref: str) -> ox.NamedNode | None:
        """Like `parse`, but a bare word may also be a relation of the store's bare namespace."""
        if ref.strip().startswith("_:"):
            raise InvalidInput(f"{quoted(ref)} is a blank node, not a relation.", "Pass a relation id or label.")
        node = self.parse(ref)
        if node is not None:
            return ox.NamedNode(self.profile.relation_of(node.value))
        if " " in ref:
            return None
        if _SAFE_LOCAL.fullmatch(ref):
            for ns in self.bare_namespaces:
                return _named_node(ns + ref)
        return None


def check_text(text: str, what: str) -> str:
    """Strip `text` and refuse what can never be a name or id: empty, too long, control characters."""
    if not isinstance(text, str):
        raise InvalidInput(f"The {what} must be a string.")
    text = text.strip()
    if not text:
        raise InvalidInput(f"The {what} is empty.", f"Pass a non-empty {what}.")
    if len(text) > MAX_REF_LENGTH:
        raise InvalidInput(f"The {what} is {len(text)} characters long; at most {MAX_REF_LENGTH} are allowed.")
    if _CONTROL.search(text):
        raise InvalidInput(
            f"The {what} {text[:60]!r} contains control characters (newline, tab, NUL...).",
            "Send the id or name on one line, exactly as shown by the tools.",
        )
    check_unicode(text, what)
    return text


def check_unicode(text: str, what: str) -> None:
    """Refuse text that is not valid Unicode (lone surrogates): no store or endpoint can take it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"The {what} contains invalid Unicode (a lone surrogate).", "Send valid UTF-8 text.") from None


def _named_node(iri: str) -> ox.NamedNode:
    try:
        return ox.NamedNode(iri)
    except ValueError as e:
        raise InvalidInput(f"{quoted(iri)} is not a valid IRI ({e}).", "Copy ids exactly as the tools show them.") from None
